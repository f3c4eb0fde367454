/* SPDX-License-Identifier: MIT */
/*
 * Hot traces (decode/traces.h).
 *
 * Heads live in one open-addressing hash keyed by (thread, first address,
 * slot of the first instruction): new code at an address is a new head
 * with a count of its own.  Formed traces are kept in an array by id; an
 * index of 4 KiB pages to the live traces whose blocks touch them finds
 * the traces a first execution may overlap without looking at the rest.
 */
#include "decode/traces.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_SHIFT 12

_Static_assert(PTD_TRACES_MAX_BBS <= PTD_TRACES_JSON_MAX_BLOCKS,
	       "a trace record writes every block of a trace");

struct blk {
	uint64_t ip, end;	/* [ip, end): the bytes of its instructions */
	uint32_t slot;		/* of its first instruction */
	uint32_t ninsn;
};

struct trace {
	pid_t pid, tid;
	bool live;
	uint32_t nblocks, ninsn;
	struct blk *b;
	uint64_t *starts;	/* b[i].ip, for the record */
	char *module, *sym;
	uint64_t modoff, symoff;
	int isid;
	enum pt_exec_mode mode;
};

struct head {
	uint64_t ip;
	uint32_t thr;		/* thread index + 1; 0: empty entry */
	uint32_t slot;
	uint32_t count;
	uint32_t trace;		/* live trace id; 0: none */
	bool is_head;
};

struct thr {
	pid_t pid, tid;
	/* the block being executed */
	bool in_blk;
	uint64_t blk_ip, next_ip;
	uint32_t blk_slot, blk_ninsn;
	/* the block before it: its first address, whether it ended with a
	 * jump or call (a backward one makes a head) */
	bool have_prev, prev_branch;
	uint64_t prev_start;
	/* recording a trace: its blocks so far (NULL: not recording) */
	struct blk *rec;
	uint32_t nrec;
	struct ptd_rec_insn rec_head;	/* module, sym: copies */
	/* its room for a recording was charged (ptd_traces_set_grow): one
	 * recording a thread at a time */
	bool rec_charged;
	/* executing trace @in_trace (0: none), at block @pos */
	uint32_t in_trace, pos;
};

struct page {
	uint64_t page;		/* + 1; 0: empty entry */
	uint32_t n, cap;
	uint32_t *ids;		/* live traces touching it */
};

struct ptd_traces {
	uint32_t threshold;
	struct thr *thr;
	uint32_t nthr, thr_cap, last_thr;
	uint32_t nrecording;
	struct head *heads;
	size_t nheads, heads_cap;	/* cap: a power of 2 */
	struct trace *tr;
	uint32_t ntr, tr_cap;
	struct page *pages;
	size_t npages, pages_cap;
	uint64_t formed, withdrawn, dropped;
	ptd_traces_grow_fn grow;	/* NULL: none */
	void *grow_ctx;
	bool refused;			/* grow said no: no more growth */
};

void ptd_traces_set_grow(struct ptd_traces *t, ptd_traces_grow_fn fn,
			 void *ctx)
{
	if (!t)
		return;
	t->grow = fn;
	t->grow_ctx = ctx;
}

/* May the builder take @bytes more?  After a refusal it stays the size it
 * is: what would need more is dropped (counted). */
static bool may_grow(struct ptd_traces *t, uint64_t bytes)
{
	if (t->refused)
		return false;
	if (!t->grow || t->grow(t->grow_ctx, bytes) == 0)
		return true;
	t->refused = true;
	return false;
}

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

int ptd_traces_new(uint32_t threshold, struct ptd_traces **ret)
{
	struct ptd_traces *t;

	if (!ret)
		return -EINVAL;
	*ret = NULL;
	if (threshold > PTD_TRACES_MAX_THRESHOLD)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->threshold = threshold ? threshold : PTD_TRACES_DEFAULT_THRESHOLD;
	*ret = t;
	return 0;
}

static void rec_drop(struct ptd_traces *t, struct thr *th)
{
	if (!th->rec)
		return;
	free(th->rec);
	th->rec = NULL;
	th->nrec = 0;
	free((char *)th->rec_head.module);
	free((char *)th->rec_head.sym);
	memset(&th->rec_head, 0, sizeof(th->rec_head));
	t->nrecording--;
}

void ptd_traces_free(struct ptd_traces *t)
{
	if (!t)
		return;
	for (uint32_t i = 0; i < t->nthr; i++)
		rec_drop(t, &t->thr[i]);
	for (uint32_t i = 0; i < t->ntr; i++) {
		free(t->tr[i].b);
		free(t->tr[i].starts);
		free(t->tr[i].module);
		free(t->tr[i].sym);
	}
	for (size_t i = 0; i < t->pages_cap; i++)
		free(t->pages[i].ids);
	free(t->pages);
	free(t->tr);
	free(t->heads);
	free(t->thr);
	free(t);
}

void ptd_traces_totals(const struct ptd_traces *t, uint64_t *ret_formed,
		       uint64_t *ret_withdrawn, uint64_t *ret_dropped)
{
	if (ret_formed)
		*ret_formed = t ? t->formed : 0;
	if (ret_withdrawn)
		*ret_withdrawn = t ? t->withdrawn : 0;
	if (ret_dropped)
		*ret_dropped = t ? t->dropped : 0;
}

/* --- Threads, heads, pages. --- */

static struct thr *thr_get(struct ptd_traces *t, pid_t pid, pid_t tid)
{
	struct thr *th;

	if (t->last_thr < t->nthr && t->thr[t->last_thr].tid == tid &&
	    t->thr[t->last_thr].pid == pid)
		return &t->thr[t->last_thr];
	for (uint32_t i = 0; i < t->nthr; i++) {
		if (t->thr[i].tid == tid && t->thr[i].pid == pid) {
			t->last_thr = i;
			return &t->thr[i];
		}
	}
	if (t->nthr >= PTD_TRACES_MAX_THREADS)
		return NULL;
	if (t->nthr == t->thr_cap) {
		uint32_t cap = t->thr_cap ? 2 * t->thr_cap : 8;
		struct thr *v;

		if (!may_grow(t, (uint64_t)(cap - t->thr_cap) * sizeof(*v)))
			return NULL;
		v = reallocarray(t->thr, cap, sizeof(*v));
		if (!v)
			return NULL;
		t->thr = v;
		t->thr_cap = cap;
	}
	th = &t->thr[t->nthr];
	memset(th, 0, sizeof(*th));
	th->pid = pid;
	th->tid = tid;
	t->last_thr = t->nthr++;
	return th;
}

static size_t head_hash(uint32_t thr, uint64_t ip, uint32_t slot)
{
	return (size_t)mix(ip ^ ((uint64_t)thr << 40) ^
			   ((uint64_t)slot * 0x9e3779b97f4a7c15ull));
}

static struct head *head_find(const struct ptd_traces *t, uint32_t thr,
			      uint64_t ip, uint32_t slot)
{
	size_t mask = t->heads_cap - 1;

	if (!t->heads_cap)
		return NULL;
	for (size_t i = head_hash(thr, ip, slot) & mask;;
	     i = (i + 1) & mask) {
		struct head *h = &t->heads[i];

		if (!h->thr)
			return NULL;
		if (h->thr == thr && h->ip == ip && h->slot == slot)
			return h;
	}
}

static int heads_grow(struct ptd_traces *t)
{
	size_t cap = t->heads_cap ? 2 * t->heads_cap : 1024;
	struct head *v;

	if (!may_grow(t, (uint64_t)(cap - t->heads_cap) * sizeof(*v)))
		return -ENOMEM;
	v = calloc(cap, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t k = 0; k < t->heads_cap; k++) {
		const struct head *h = &t->heads[k];
		size_t i;

		if (!h->thr)
			continue;
		for (i = head_hash(h->thr, h->ip, h->slot) & (cap - 1);
		     v[i].thr; i = (i + 1) & (cap - 1))
			;
		v[i] = *h;
	}
	free(t->heads);
	t->heads = v;
	t->heads_cap = cap;
	return 0;
}

/* The head entry, added if new; NULL at the bound or out of memory. */
static struct head *head_add(struct ptd_traces *t, uint32_t thr, uint64_t ip,
			     uint32_t slot)
{
	struct head *h = head_find(t, thr, ip, slot);
	size_t i;

	if (h)
		return h;
	if (t->nheads >= PTD_TRACES_MAX_HEADS) {
		t->dropped++;
		return NULL;
	}
	if ((t->nheads + 1) * 2 > t->heads_cap && heads_grow(t) < 0) {
		t->dropped++;
		return NULL;
	}
	for (i = head_hash(thr, ip, slot) & (t->heads_cap - 1);
	     t->heads[i].thr; i = (i + 1) & (t->heads_cap - 1))
		;
	h = &t->heads[i];
	h->thr = thr;
	h->ip = ip;
	h->slot = slot;
	t->nheads++;
	return h;
}

static size_t page_slot(const struct ptd_traces *t, uint64_t page)
{
	size_t mask = t->pages_cap - 1;
	size_t i = (size_t)mix(page) & mask;

	while (t->pages[i].page && t->pages[i].page != page + 1)
		i = (i + 1) & mask;
	return i;
}

static struct page *page_find(const struct ptd_traces *t, uint64_t page)
{
	struct page *p;

	if (!t->pages_cap)
		return NULL;
	p = &t->pages[page_slot(t, page)];
	return p->page ? p : NULL;
}

static int pages_grow(struct ptd_traces *t)
{
	size_t cap = t->pages_cap ? 2 * t->pages_cap : 256;
	struct page *v, *old = t->pages;
	size_t ocap = t->pages_cap;

	if (!may_grow(t, (uint64_t)(cap - ocap) * sizeof(*v)))
		return -ENOMEM;
	v = calloc(cap, sizeof(*v));
	if (!v)
		return -ENOMEM;
	t->pages = v;
	t->pages_cap = cap;
	for (size_t k = 0; k < ocap; k++) {
		if (old[k].page)
			v[page_slot(t, old[k].page - 1)] = old[k];
	}
	free(old);
	return 0;
}

static int page_add(struct ptd_traces *t, uint64_t page, uint32_t id)
{
	struct page *p = page_find(t, page);

	if (!p) {
		if ((t->npages + 1) * 2 > t->pages_cap && pages_grow(t) < 0)
			return -ENOMEM;
		p = &t->pages[page_slot(t, page)];
		p->page = page + 1;
		t->npages++;
	}
	if (p->n && p->ids[p->n - 1] == id)
		return 0;
	if (p->n == p->cap) {
		uint32_t cap = p->cap ? 2 * p->cap : 4;
		uint32_t *v;

		if (!may_grow(t, (uint64_t)(cap - p->cap) * sizeof(*v)))
			return -ENOMEM;
		v = reallocarray(p->ids, cap, sizeof(*v));
		if (!v)
			return -ENOMEM;
		p->ids = v;
		p->cap = cap;
	}
	p->ids[p->n++] = id;
	return 0;
}

static void page_remove(struct ptd_traces *t, uint64_t page, uint32_t id)
{
	struct page *p = page_find(t, page);

	if (!p)
		return;
	for (uint32_t i = 0; i < p->n; i++) {
		if (p->ids[i] == id) {
			p->ids[i] = p->ids[--p->n];
			return;
		}
	}
}

/* --- Records. --- */

static void fill_rec(struct ptd_record *out, const struct trace *tr,
		     uint32_t id, const struct ptd_record *now,
		     enum ptd_rec_type type)
{
	memset(out, 0, sizeof(*out));
	out->type = type;
	out->pid = tr->pid;
	out->tid = tr->tid;
	out->has_tsc = now->has_tsc;
	out->tsc = now->tsc;
	out->has_time = now->has_time;
	out->time = now->time;
	out->has_wall = now->has_wall;
	out->wall = now->wall;
	out->u.trace.id = id;
	out->u.trace.head = tr->b[0].ip;
	out->u.trace.nblocks = tr->nblocks;
	out->u.trace.ninsn = tr->ninsn;
	out->u.trace.blocks = tr->starts;
	out->u.trace.module = tr->module;
	out->u.trace.modoff = tr->modoff;
	out->u.trace.isid = tr->isid;
	out->u.trace.mode = tr->mode;
	out->u.trace.sym = tr->sym;
	out->u.trace.symoff = tr->symoff;
}

/* The recording of @th ends (why: @end): the trace forms, its record to
 * @fn.  Out of memory or past the bound, it does not (counted). */
static int finish(struct ptd_traces *t, struct thr *th, const char *end,
		  const struct ptd_record *now, ptd_traces_fn fn, void *ctx)
{
	struct ptd_record out;
	struct trace *tr;
	struct head *h;
	uint32_t id;

	if (t->ntr >= PTD_TRACES_MAX_TRACES)
		goto dropped;
	if (t->ntr == t->tr_cap) {
		uint32_t cap = t->tr_cap ? 2 * t->tr_cap : 64;
		struct trace *v;

		if (!may_grow(t, (uint64_t)(cap - t->tr_cap) * sizeof(*v)))
			goto dropped;
		v = reallocarray(t->tr, cap, sizeof(*v));
		if (!v)
			goto dropped;
		t->tr = v;
		t->tr_cap = cap;
	}
	tr = &t->tr[t->ntr];
	memset(tr, 0, sizeof(*tr));
	/* its blocks (taken over from the recording, whose room the thread
	 * was charged for, and cut to size) and their starts */
	if (!may_grow(t, (uint64_t)th->nrec *
				 (sizeof(*tr->b) + sizeof(*tr->starts))))
		goto dropped;
	tr->starts = calloc(th->nrec, sizeof(*tr->starts));
	if (!tr->starts)
		goto dropped;
	id = t->ntr + 1;
	for (uint32_t i = 0; i < th->nrec; i++) {
		tr->starts[i] = th->rec[i].ip;
		tr->ninsn += th->rec[i].ninsn;
		for (uint64_t pg = th->rec[i].ip >> PAGE_SHIFT;
		     pg <= (th->rec[i].end - 1) >> PAGE_SHIFT; pg++) {
			if (page_add(t, pg, id) < 0) {
				/* what was indexed stays: a stale id is
				 * skipped (its trace is not live) */
				free(tr->starts);
				goto dropped;
			}
		}
	}
	t->ntr++;
	tr->pid = th->pid;
	tr->tid = th->tid;
	tr->live = true;
	tr->nblocks = th->nrec;
	/* the recording's room for PTD_TRACES_MAX_BBS blocks, cut to the
	 * trace's (kept as it is if it cannot be) */
	tr->b = reallocarray(th->rec, th->nrec, sizeof(*tr->b));
	if (!tr->b)
		tr->b = th->rec;
	tr->module = (char *)th->rec_head.module;
	tr->sym = (char *)th->rec_head.sym;
	tr->modoff = th->rec_head.modoff;
	tr->symoff = th->rec_head.symoff;
	tr->isid = th->rec_head.isid;
	tr->mode = th->rec_head.mode;
	th->rec = NULL;
	th->nrec = 0;
	memset(&th->rec_head, 0, sizeof(th->rec_head));
	t->nrecording--;
	t->formed++;
	h = head_find(t, (uint32_t)(th - t->thr) + 1, tr->b[0].ip,
		      tr->b[0].slot);
	if (h)
		h->trace = id;
	fill_rec(&out, tr, id, now, PTD_REC_TRACE);
	out.u.trace.end = end;
	return fn(ctx, &out);
dropped:
	t->dropped++;
	rec_drop(t, th);
	return 0;
}

static bool overlaps(const struct blk *b, uint32_t n, uint64_t lo,
		     uint64_t hi)
{
	for (uint32_t i = 0; i < n; i++) {
		if (b[i].ip < hi && lo < b[i].end)
			return true;
	}
	return false;
}

/* Trace @id goes (@reason, @at): its pages, the threads in it and its
 * head forget it; its trace_withdrawn record to @fn. */
static int withdraw(struct ptd_traces *t, uint32_t id, const char *reason,
		    uint64_t at, const struct ptd_record *now,
		    ptd_traces_fn fn, void *ctx)
{
	struct trace *tr = &t->tr[id - 1];
	struct ptd_record out;
	struct head *h;

	tr->live = false;
	t->withdrawn++;
	for (uint32_t b = 0; b < tr->nblocks; b++) {
		for (uint64_t q = tr->b[b].ip >> PAGE_SHIFT;
		     q <= (tr->b[b].end - 1) >> PAGE_SHIFT; q++)
			page_remove(t, q, id);
	}
	for (uint32_t k = 0; k < t->nthr; k++) {
		if (t->thr[k].in_trace == id)
			t->thr[k].in_trace = 0;
	}
	for (uint32_t k = 0; k < t->nthr; k++) {
		if (t->thr[k].tid != tr->tid || t->thr[k].pid != tr->pid)
			continue;
		h = head_find(t, k + 1, tr->b[0].ip, tr->b[0].slot);
		if (h && h->trace == id)
			h->trace = 0;
	}
	fill_rec(&out, tr, id, now, PTD_REC_TRACE_WITHDRAWN);
	out.u.trace.reason = reason;
	out.u.trace.at = at;
	return fn(ctx, &out);
}

/* New code ran at [lo, hi) in process @pid: the traces and recordings
 * over it go. */
static int code_changed(struct ptd_traces *t, pid_t pid, uint64_t lo,
			uint64_t hi, const struct ptd_record *now,
			ptd_traces_fn fn, void *ctx)
{
	int rc = 0;

	for (uint32_t k = 0; t->nrecording && k < t->nthr; k++) {
		struct thr *th = &t->thr[k];

		if (th->rec && th->pid == pid &&
		    overlaps(th->rec, th->nrec, lo, hi))
			rec_drop(t, th);
	}
	for (uint64_t pg = lo >> PAGE_SHIFT; pg <= (hi - 1) >> PAGE_SHIFT;
	     pg++) {
		struct page *p = page_find(t, pg);

		for (uint32_t i = 0; p && i < p->n && rc == 0;) {
			uint32_t id = p->ids[i];
			const struct trace *tr;

			if (id > t->ntr) {	/* a trace that did not form */
				i++;
				continue;
			}
			tr = &t->tr[id - 1];
			if (!tr->live || tr->pid != pid ||
			    !overlaps(tr->b, tr->nblocks, lo, hi)) {
				i++;
				continue;
			}
			rc = withdraw(t, id, "code_changed", lo, now, fn, ctx);
			/* page_remove moved another id into i: look again */
		}
	}
	return rc;
}

/* Image change @r (PTD_REC_IMAGE) in its thread's decode: the thread's
 * traces and recording over the code that went go.  Only the thread's:
 * each thread's decode passes the change, and another thread's traces
 * may, in the order the threads are decoded, be of code mapped there
 * after it. */
static int code_gone(struct ptd_traces *t, const struct ptd_record *r,
		     ptd_traces_fn fn, void *ctx)
{
	const struct ptd_rec_image *im = &r->u.image;
	const char *reason = im->exec ? "exec" : "unmapped";
	int rc = 0;

	for (uint32_t k = 0; t->nrecording && k < t->nthr; k++) {
		struct thr *th = &t->thr[k];

		/* its last block's end is not known yet: its start */
		if (th->rec && th->pid == r->pid && th->tid == r->tid &&
		    (im->exec ||
		     overlaps(th->rec, th->nrec, im->start, im->end) ||
		     (th->rec[th->nrec - 1].ip >= im->start &&
		      th->rec[th->nrec - 1].ip < im->end)))
			rec_drop(t, th);
	}
	for (uint32_t id = 1; id <= t->ntr && rc == 0; id++) {
		const struct trace *tr = &t->tr[id - 1];

		if (tr->live && tr->pid == r->pid && tr->tid == r->tid &&
		    overlaps(tr->b, tr->nblocks, im->start, im->end))
			rc = withdraw(t, id, reason, im->start, r, fn,
				      ctx);
	}
	return rc;
}

static void end_block(struct ptd_traces *t, struct thr *th, bool branch)
{
	th->in_blk = false;
	th->have_prev = true;
	th->prev_branch = branch;
	th->prev_start = th->blk_ip;
	if (th->rec) {
		th->rec[th->nrec - 1].ninsn = th->blk_ninsn;
		th->rec[th->nrec - 1].end = th->next_ip;
	}
	(void)t;
}

static int start_recording(struct ptd_traces *t, struct thr *th,
			   const struct ptd_rec_insn *in, uint32_t slot)
{
	if (!th->rec_charged) {
		if (!may_grow(t, PTD_TRACES_MAX_BBS * sizeof(*th->rec)))
			goto nomem;
		th->rec_charged = true;
	}
	th->rec = calloc(PTD_TRACES_MAX_BBS, sizeof(*th->rec));
	if (!th->rec)
		goto nomem;
	th->rec_head = *in;
	th->rec_head.module = in->module ? strdup(in->module) : NULL;
	th->rec_head.sym = in->sym ? strdup(in->sym) : NULL;
	t->nrecording++;
	if ((in->module && !th->rec_head.module) ||
	    (in->sym && !th->rec_head.sym)) {
		rec_drop(t, th);
		goto nomem;
	}
	th->rec[0].ip = in->ip;
	th->rec[0].slot = slot;
	th->nrec = 1;
	return 0;
nomem:
	t->dropped++;
	return 0;
}

/* Block @r starts (code @slot): recording, following a trace, counting
 * heads. */
static int start_block(struct ptd_traces *t, struct thr *th,
		       const struct ptd_record *r, uint32_t slot,
		       ptd_traces_fn fn, void *ctx)
{
	uint32_t thr = (uint32_t)(th - t->thr) + 1;
	uint64_t ip = r->u.insn.ip;
	bool backward = th->have_prev && th->prev_branch &&
			ip <= th->prev_start;
	bool head = backward;
	struct head *h;
	int rc;

	th->in_blk = true;
	th->blk_ip = ip;
	th->blk_slot = slot;
	th->blk_ninsn = 0;
	h = head_find(t, thr, ip, slot);
	if (th->rec) {
		const char *end = NULL;

		if (th->nrec == PTD_TRACES_MAX_BBS)
			end = "max_bbs";	/* its last block ended in a gap */
		else if (backward)
			end = "backward_branch";
		else if (h && (h->is_head || h->trace))
			end = "trace_head";
		if (!end) {
			th->rec[th->nrec].ip = ip;
			th->rec[th->nrec].slot = slot;
			th->nrec++;
			return 0;
		}
		rc = finish(t, th, end, r, fn, ctx);
		if (rc)
			return rc;
		h = head_find(t, thr, ip, slot);	/* may have moved */
	}
	if (th->in_trace) {
		const struct trace *tr = &t->tr[th->in_trace - 1];

		if (th->pos + 1 < tr->nblocks && tr->b[th->pos + 1].ip == ip &&
		    tr->b[th->pos + 1].slot == slot) {
			th->pos++;
			return 0;
		}
		/* left the trace: where it went is a head */
		th->in_trace = 0;
		head = true;
	}
	if (head && !(h && h->is_head)) {
		h = head_add(t, thr, ip, slot);
		if (!h)
			return 0;
		h->is_head = true;
	}
	if (!h || !h->is_head)
		return 0;
	if (h->trace) {
		th->in_trace = h->trace;
		th->pos = 0;
		return 0;
	}
	if (++h->count < t->threshold)
		return 0;
	h->count = 0;
	return start_recording(t, th, &r->u.insn, slot);
}

int ptd_traces_feed(struct ptd_traces *t, const struct ptd_record *r,
		    uint32_t slot, bool first, ptd_traces_fn fn, void *ctx)
{
	const struct ptd_rec_insn *in;
	struct thr *th;
	int rc;

	if (t && r && r->type == PTD_REC_IMAGE)
		return t->ntr + t->nrecording ? code_gone(t, r, fn, ctx) : 0;
	if (!t || !r || r->type != PTD_REC_INSN)
		return 0;
	in = &r->u.insn;
	if (first && t->ntr + t->nrecording) {
		rc = code_changed(t, r->pid, in->ip,
				  in->ip + (in->size ? in->size : 1), r, fn,
				  ctx);
		if (rc)
			return rc;
	}
	th = thr_get(t, r->pid, r->tid);
	if (!th) {
		t->dropped++;
		return 0;
	}
	if (th->in_blk && in->ip != th->next_ip)
		end_block(t, th, false);
	if (!th->in_blk) {
		rc = start_block(t, th, r, slot, fn, ctx);
		if (rc)
			return rc;
	}
	th->blk_ninsn++;
	th->next_ip = in->ip + in->size;
	if (in->iclass != ptic_other) {
		end_block(t, th,
			  in->iclass == ptic_jump ||
				  in->iclass == ptic_cond_jump ||
				  in->iclass == ptic_call);
		if (th->rec && th->nrec == PTD_TRACES_MAX_BBS)
			return finish(t, th, "max_bbs", r, fn, ctx);
	}
	return 0;
}
