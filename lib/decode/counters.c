/* SPDX-License-Identifier: MIT */
/*
 * Exact execution counts and first executions (decode/counters.h).
 *
 * Layout as the instruction cache's: a dense array of entries, filled in
 * order and never cleared, and an open-addressing index (linear probing)
 * of uint32_t slots holding entry number + 1, at most half full.
 */
#include "decode/counters.h"
#include "decode/traces.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define INITIAL_SLOTS 1024u

struct cent {
	struct ptd_rec_insn in;	/* as first seen; json_body, flags,
				 * cslot cleared */
};

/* Module and symbol names, copied: the counts outlive the decode whose
 * section cache and symbol tables named them. */
struct strpool {
	char **s;		/* open hash of copies */
	size_t n, cap;
	/* the last name asked for, as given, and its copy */
	const char *last, *last_copy;
};

struct ptd_counters {
	struct cent *ent;
	/* the counts, apart from the entries: an execution touches 8 bytes
	 * in a dense array, not a line of an entry */
	uint64_t *cnt;
	size_t nent, cap, max;
	uint32_t *slot;
	size_t nslots;
	uint64_t execs, uncounted;
	struct strpool names;
	struct ptd_traces *traces;	/* NULL: no traces built */
	ptd_counters_grow_fn grow;	/* NULL: none */
	void *grow_ctx;
};

void ptd_counters_set_grow(struct ptd_counters *t, ptd_counters_grow_fn fn,
			   void *ctx)
{
	if (!t)
		return;
	t->grow = fn;
	t->grow_ctx = ctx;
	/* its trace builder's memory is the table's too */
	ptd_traces_set_grow(t->traces, fn, ctx);
}

/* May the table take @bytes more?  A refusal holds it at its size. */
static bool may_grow(struct ptd_counters *t, uint64_t bytes)
{
	if (!t->grow || t->grow(t->grow_ctx, bytes) == 0)
		return true;
	t->max = t->nent;
	return false;
}

static uint64_t str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

static void strpool_fini(struct strpool *p)
{
	for (size_t i = 0; i < p->cap; i++)
		free(p->s[i]);
	free(p->s);
	memset(p, 0, sizeof(*p));
}

/* The pool's copy of @s (NULL: NULL); NULL with *@ret_nomem set if
 * memory runs out. */
static const char *strpool_get(struct strpool *p, const char *s,
			       bool *ret_nomem)
{
	size_t i;

	if (!s)
		return NULL;
	if (s == p->last && !strcmp(s, p->last_copy))
		return p->last_copy;
	if ((p->n + 1) * 2 > p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		char **v = calloc(cap, sizeof(*v));

		if (!v) {
			*ret_nomem = true;
			return NULL;
		}
		for (size_t k = 0; k < p->cap; k++) {
			if (!p->s[k])
				continue;
			for (i = str_hash(p->s[k]) & (cap - 1); v[i];
			     i = (i + 1) & (cap - 1))
				;
			v[i] = p->s[k];
		}
		free(p->s);
		p->s = v;
		p->cap = cap;
	}
	for (i = str_hash(s) & (p->cap - 1); p->s[i];
	     i = (i + 1) & (p->cap - 1)) {
		if (!strcmp(p->s[i], s))
			goto found;
	}
	p->s[i] = strdup(s);
	if (!p->s[i]) {
		*ret_nomem = true;
		return NULL;
	}
	p->n++;
found:
	p->last = s;
	p->last_copy = p->s[i];
	return p->s[i];
}

static size_t hash_of(const struct ptd_rec_insn *in, size_t mask)
{
	uint64_t h = in->ip ^ ((uint64_t)(uint32_t)in->isid << 47) ^
		     ((uint64_t)in->mode << 40) ^ ((uint64_t)in->size << 32) ^
		     ((uint64_t)in->gen << 20);

	/* the bytes matter where no section names them (isid 0) */
	for (uint8_t i = 0; i < in->size && i < pt_max_insn_size; i++)
		h = (h ^ in->raw[i]) * 0x100000001b3ull;
	h *= 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 32) & mask;
}

static bool same(const struct ptd_rec_insn *a, const struct ptd_rec_insn *b)
{
	return a->ip == b->ip && a->isid == b->isid && a->gen == b->gen &&
	       a->mode == b->mode && a->size == b->size &&
	       !memcmp(a->raw, b->raw, a->size);
}

int ptd_counters_new(size_t max_entries, struct ptd_counters **ret)
{
	struct ptd_counters *t;

	if (!ret)
		return -EINVAL;
	*ret = NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->max = max_entries ? max_entries : PTD_COUNTERS_DEFAULT_MAX;
	if (t->max > PTD_COUNTERS_MAX_MAX)
		t->max = PTD_COUNTERS_MAX_MAX;
	t->nslots = INITIAL_SLOTS;
	t->slot = calloc(t->nslots, sizeof(*t->slot));
	if (!t->slot) {
		ptd_counters_free(t);
		return -ENOMEM;
	}
	*ret = t;
	return 0;
}

void ptd_counters_free(struct ptd_counters *t)
{
	if (!t)
		return;
	free(t->ent);
	free(t->cnt);
	free(t->slot);
	strpool_fini(&t->names);
	ptd_traces_free(t->traces);
	free(t);
}

static size_t find(const struct ptd_counters *t, const struct ptd_rec_insn *in)
{
	size_t mask = t->nslots - 1, i = hash_of(in, mask);

	for (;; i = (i + 1) & mask) {
		uint32_t s = t->slot[i];

		if (!s || same(&t->ent[s - 1].in, in))
			return i;
	}
}

static int grow_index(struct ptd_counters *t)
{
	size_t n = t->nslots * 2;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	free(t->slot);
	t->slot = s;
	t->nslots = n;
	for (size_t i = 0; i < t->nent; i++)
		t->slot[find(t, &t->ent[i].in)] = (uint32_t)i + 1;
	return 0;
}

uint32_t ptd_counters_slot(struct ptd_counters *t,
			   const struct ptd_rec_insn *in)
{
	const char *module, *sym;
	bool nomem = false;
	struct cent *e;
	size_t i;

	if (!t || !in || in->size > pt_max_insn_size)
		return 0;
	i = find(t, in);
	if (t->slot[i])
		return t->slot[i];
	if (t->nent >= t->max)
		return 0;
	module = strpool_get(&t->names, in->module, &nomem);
	sym = strpool_get(&t->names, in->sym, &nomem);
	if (nomem)
		return 0;
	if (t->nent == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : INITIAL_SLOTS / 2;
		struct cent *v;
		uint64_t *c;

		if (cap > t->max)
			cap = t->max;
		if (!may_grow(t, (uint64_t)(cap - t->cap) *
					 (sizeof(*c) + sizeof(*v))))
			return 0;
		c = reallocarray(t->cnt, cap, sizeof(*c));
		if (!c)
			return 0;
		t->cnt = c;
		v = reallocarray(t->ent, cap, sizeof(*v));
		if (!v)
			return 0;
		t->ent = v;
		t->cap = cap;
	}
	if ((t->nent + 1) * 2 > t->nslots) {
		if (!may_grow(t, (uint64_t)t->nslots * sizeof(*t->slot)) ||
		    grow_index(t) < 0)
			return 0;
		i = find(t, in);
	}
	e = &t->ent[t->nent];
	memset(e, 0, sizeof(*e));
	t->cnt[t->nent] = 0;
	e->in = *in;
	e->in.flags = 0;
	e->in.json_body = NULL;
	e->in.json_body_len = e->in.json_body_nosym_len = 0;
	e->in.cslot = 0;
	e->in.module = module;
	e->in.sym = sym;
	memset(e->in.raw + in->size, 0, pt_max_insn_size - in->size);
	t->slot[i] = (uint32_t)++t->nent;
	return t->slot[i];
}

bool ptd_counters_hit(struct ptd_counters *t, uint32_t slot)
{
	if (!slot || slot > t->nent) {
		t->uncounted++;
		return false;
	}
	t->execs++;
	return t->cnt[slot - 1]++ == 0;
}

int ptd_counters_enable_traces(struct ptd_counters *t, uint32_t threshold)
{
	int r;

	if (!t)
		return -EINVAL;
	if (t->traces)
		return 0;
	r = ptd_traces_new(threshold, &t->traces);
	if (r == 0)
		ptd_traces_set_grow(t->traces, t->grow, t->grow_ctx);
	return r;
}

struct ptd_traces *ptd_counters_traces(const struct ptd_counters *t)
{
	return t ? t->traces : NULL;
}

int ptd_counters_feed(struct ptd_counters *t, const struct ptd_record *r,
		      unsigned want, ptd_counters_fn fn, void *ctx)
{
	struct ptd_record fe;
	uint32_t slot;
	bool first;
	int rc = 0;

	/* code gone (an unmap, an exec): the traces over it go */
	if (t && r && r->type == PTD_REC_IMAGE)
		return t->traces && (want & PTD_REC_BIT(PTD_REC_TRACE))
			       ? ptd_traces_feed(t->traces, r, 0, false, fn,
						 ctx)
			       : 0;
	if (!t || !r || r->type != PTD_REC_INSN)
		return 0;
	slot = r->u.insn.cslot;
	if (!slot)
		slot = ptd_counters_slot(t, &r->u.insn);
	first = ptd_counters_hit(t, slot);
	if (first && (want & PTD_REC_BIT(PTD_REC_FIRST_EXEC))) {
		fe = *r;
		fe.type = PTD_REC_FIRST_EXEC;
		fe.u.insn.flags = 0;
		rc = fn(ctx, &fe);
	}
	if (rc == 0 && t->traces && (want & PTD_REC_BIT(PTD_REC_TRACE)))
		rc = ptd_traces_feed(t->traces, r, slot, first, fn, ctx);
	return rc;
}

uint64_t ptd_counters_get(const struct ptd_counters *t,
			  const struct ptd_rec_insn *in)
{
	uint32_t s;

	if (!t || !in || in->size > pt_max_insn_size)
		return 0;
	s = t->slot[find(t, in)];
	return s ? t->cnt[s - 1] : 0;
}

void ptd_counters_totals(const struct ptd_counters *t, uint64_t *ret_execs,
			 uint64_t *ret_distinct, uint64_t *ret_uncounted)
{
	if (ret_execs)
		*ret_execs = t ? t->execs : 0;
	if (ret_distinct)
		*ret_distinct = t ? t->nent : 0;
	if (ret_uncounted)
		*ret_uncounted = t ? t->uncounted : 0;
}

size_t ptd_counters_nentries(const struct ptd_counters *t)
{
	return t ? t->nent : 0;
}

const struct ptd_rec_insn *ptd_counters_entry(const struct ptd_counters *t,
					      size_t i, uint64_t *ret_count)
{
	if (!t || i >= t->nent)
		return NULL;
	if (ret_count)
		*ret_count = t->cnt[i];
	return &t->ent[i].in;
}

/* --- Taking the counts. --- */

/* A ranked item: an instruction, a block or a function. */
struct item {
	uint64_t count;
	uint32_t ninsn;
	const struct cent *first;	/* instruction, first of the block,
					 * one of the function's */
	uint64_t end_ip;
};

static int str_cmp(const char *a, const char *b)
{
	if (a == b)
		return 0;
	if (!a || !b)
		return a ? 1 : -1;
	return strcmp(a, b);
}

/* Most executed first; ties by where. */
static int item_cmp(const void *x, const void *y)
{
	const struct item *a = x, *b = y;
	int c;

	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	c = str_cmp(a->first->in.module, b->first->in.module);
	if (c)
		return c;
	c = str_cmp(a->first->in.sym, b->first->in.sym);
	if (c)
		return c;
	if (a->first->in.ip != b->first->in.ip)
		return a->first->in.ip < b->first->in.ip ? -1 : 1;
	if (a->first->in.mode != b->first->in.mode)
		return (int)a->first->in.mode - (int)b->first->in.mode;
	if (a->first->in.gen != b->first->in.gen)
		return a->first->in.gen < b->first->in.gen ? -1 : 1;
	return 0;
}

/* By section, its mapping, mode, address: blocks are runs of this
 * order. */
static int addr_cmp(const void *x, const void *y)
{
	const struct cent *a = *(const struct cent *const *)x;
	const struct cent *b = *(const struct cent *const *)y;

	if (a->in.isid != b->in.isid)
		return a->in.isid < b->in.isid ? -1 : 1;
	if (a->in.gen != b->in.gen)
		return a->in.gen < b->in.gen ? -1 : 1;
	if (a->in.mode != b->in.mode)
		return a->in.mode < b->in.mode ? -1 : 1;
	if (a->in.ip != b->in.ip)
		return a->in.ip < b->in.ip ? -1 : 1;
	/* isid 0: other bytes at one address, in order of first use */
	return a < b ? -1 : a > b;
}

/* By function: module, then symbol name. */
static int func_cmp(const void *x, const void *y)
{
	const struct cent *a = *(const struct cent *const *)x;
	const struct cent *b = *(const struct cent *const *)y;
	int c = str_cmp(a->in.module, b->in.module);

	return c ? c : str_cmp(a->in.sym, b->in.sym);
}

/* The same instruction of a section, from two of its mappings. */
static bool same_but_gen(const struct cent *a, const struct cent *b)
{
	return a->in.isid == b->in.isid && a->in.ip == b->in.ip &&
	       a->in.mode == b->in.mode && a->in.size == b->in.size &&
	       !memcmp(a->in.raw, b->in.raw, a->in.size);
}

/* By function, then section, address, mode and mapping: an
 * instruction's mappings side by side. */
static int func_addr_cmp(const void *x, const void *y)
{
	const struct cent *a = *(const struct cent *const *)x;
	const struct cent *b = *(const struct cent *const *)y;
	int c = func_cmp(x, y);

	if (c)
		return c;
	if (a->in.isid != b->in.isid)
		return a->in.isid < b->in.isid ? -1 : 1;
	if (a->in.ip != b->in.ip)
		return a->in.ip < b->in.ip ? -1 : 1;
	if (a->in.mode != b->in.mode)
		return a->in.mode < b->in.mode ? -1 : 1;
	if (a->in.gen != b->in.gen)
		return a->in.gen < b->in.gen ? -1 : 1;
	/* isid 0: other bytes at one address, in order of first use */
	return a < b ? -1 : a > b;
}

static void rec_base(struct ptd_record *r, enum ptd_counters_of of,
		     pid_t pid, pid_t tid)
{
	memset(r, 0, sizeof(*r));
	r->type = PTD_REC_COUNTERS;
	r->pid = pid;
	r->tid = tid;
	r->u.counters.of = of;
}

static int emit_items(struct item *it, size_t n, uint32_t top,
		      enum ptd_counters_of of, pid_t pid, pid_t tid,
		      ptd_counters_fn fn, void *ctx)
{
	struct ptd_record r;

	qsort(it, n, sizeof(*it), item_cmp);
	if (top && n > top)
		n = top;
	for (size_t i = 0; i < n; i++) {
		int rc;

		rec_base(&r, of, pid, tid);
		r.u.counters.rank = (uint32_t)i + 1;
		r.u.counters.count = it[i].count;
		r.u.counters.ninsn = it[i].ninsn;
		r.u.counters.insn = it[i].first->in;
		r.u.counters.end_ip = it[i].end_ip;
		if (of == PTD_COUNTERS_FUNC) {
			/* a function: no instruction of its own */
			r.u.counters.insn.ip = 0;
			r.u.counters.insn.symoff = 0;
		}
		rc = fn(ctx, &r);
		if (rc)
			return rc;
	}
	return 0;
}

/* The count of entry @e of table t. */
#define CNT(e) (t->cnt[(e) - t->ent])

int ptd_counters_emit(const struct ptd_counters *t, uint32_t top, pid_t pid,
		      pid_t tid, ptd_counters_fn fn, void *ctx)
{
	const struct cent **ord = NULL;
	struct item *it = NULL;
	struct ptd_record r;
	size_t n, k;
	int rc;

	if (!t || !fn)
		return -EINVAL;
	n = t->nent;
	rec_base(&r, PTD_COUNTERS_TOTAL, pid, tid);
	r.u.counters.count = t->execs;
	r.u.counters.ninsn = (uint32_t)n;
	r.u.counters.uncounted = t->uncounted;
	rc = fn(ctx, &r);
	if (rc || !n)
		return rc;
	it = calloc(n, sizeof(*it));
	ord = calloc(n, sizeof(*ord));
	if (!it || !ord) {
		rc = -ENOMEM;
		goto out;
	}

	/* instructions */
	for (size_t i = 0; i < n; i++) {
		it[i].count = t->cnt[i];
		it[i].ninsn = 1;
		it[i].first = &t->ent[i];
		it[i].end_ip = t->ent[i].in.ip;
	}
	rc = emit_items(it, n, top, PTD_COUNTERS_INSN, pid, tid, fn, ctx);
	if (rc)
		goto out;

	/* blocks: runs of adjacent instructions executed equally often */
	for (size_t i = 0; i < n; i++)
		ord[i] = &t->ent[i];
	qsort(ord, n, sizeof(*ord), addr_cmp);
	k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct cent *e = ord[i], *p = i ? ord[i - 1] : NULL;

		if (k && p && p->in.isid == e->in.isid &&
		    p->in.gen == e->in.gen && p->in.mode == e->in.mode &&
		    CNT(p) == CNT(e) &&
		    p->in.iclass == ptic_other &&
		    p->in.ip + p->in.size == e->in.ip) {
			it[k - 1].ninsn++;
			it[k - 1].end_ip = e->in.ip;
			continue;
		}
		it[k].count = CNT(e);
		it[k].ninsn = 1;
		it[k].first = e;
		it[k].end_ip = e->in.ip;
		k++;
	}
	rc = emit_items(it, k, top, PTD_COUNTERS_BLOCK, pid, tid, fn, ctx);
	if (rc)
		goto out;

	/* functions: module and symbol name (without one: the module);
	 * ninsn counts an instruction once however many mappings ran it */
	qsort(ord, n, sizeof(*ord), func_addr_cmp);
	k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct cent *e = ord[i];

		if (k && !func_cmp(&ord[i - 1], &ord[i])) {
			it[k - 1].count += CNT(e);
			if (!same_but_gen(ord[i - 1], e))
				it[k - 1].ninsn++;
			continue;
		}
		it[k].count = CNT(e);
		it[k].ninsn = 1;
		it[k].first = e;
		it[k].end_ip = 0;
		k++;
	}
	rc = emit_items(it, k, top, PTD_COUNTERS_FUNC, pid, tid, fn, ctx);
out:
	free(it);
	free(ord);
	return rc;
}
#undef CNT
