/* SPDX-License-Identifier: MIT */
/*
 * The instruction cache (decode/insncache.h).
 *
 * Layout: a dense array of entries, filled in order, and an open-addressing
 * index (linear probing) of uint32_t slots holding entry number + 1 (0:
 * free).  The index stays at most half full and doubles with the entries,
 * so an empty cache costs little however large max_entries is.  When
 * max_entries are in use the whole cache is cleared: entries never go stale
 * (an isid names immutable bytes), so clearing only costs re-decoding.
 */
#include "decode/insncache.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/diag.h"
#include "common/lockopt.h"
#include "decode/counters.h"
#include "record/jsonw.h"
#include "sym/symbols.h"

#define INITIAL_SLOTS 1024u
#define DEFAULT_MAX_ENTRIES (1u << 20)
/* The index is a power of two with uint32_t entry numbers. */
#define MAX_MAX_ENTRIES (1u << 30)

/* Bytes read from an image ahead of the instruction being decoded: the
 * instructions after it in its block are decoded from them, not each
 * read again through the image (its region lookup, libipt's section
 * cache and its locks).  Keyed by the section: an isid names immutable
 * bytes at one address. */
#define WINDOW_BYTES 256u

struct code_window {
	const struct ptd_image *img;	/* NULL: empty */
	int isid;
	uint64_t start;
	uint32_t len;
	bool at_end;		/* the region ends at start + len */
	uint8_t bytes[WINDOW_BYTES];
};

struct ptd_insncache {
	/* ent, nent (entries in use) and the hits of stats, which
	 * ptd_insncache_next reads inline (insncache.h): first */
	struct ptd_insncache_head h;
	size_t ent_cap;		/* entries allocated */
	size_t max_entries;
	uint32_t *slot;		/* entry index + 1, 0: free */
	size_t nslots;		/* power of two, >= 2 * nent */
	struct ptd_icache_entry scratch;	/* uncached results */
	struct ptd_insncache_stats stats;
	/* Rendered JSON bodies live in chunks that never move.  At a clear
	 * the chunks in use retire and are freed at the next clear, so a
	 * body outlives one clear (see ptd_insncache_json). */
	struct chunk *chunks, *retired;
	/* ptd_insncache_set_symbols */
	/* Held around each fill (insncache.h, ptd_insncache_set_lock). */
	pthread_mutex_t *lock;
	struct ptd_symbols *syms;
	pid_t sym_pid;
	struct ptd_counters *counters;	/* ptd_insncache_set_counters */
	struct code_window win;
};

#define CHUNK_SIZE (1u << 20)

struct chunk {
	struct chunk *next;
	size_t used;
	char data[];
};

static void chunks_free(struct chunk *k)
{
	while (k) {
		struct chunk *n = k->next;

		free(k);
		k = n;
	}
}

static inline size_t hash_key(int isid, uint64_t ip, size_t mask)
{
	uint64_t h = ip ^ ((uint64_t)(uint32_t)isid << 47);

	h *= 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 32) & mask;
}

static struct ptd_insncache *insncache_alloc(size_t max_entries)
{
	struct ptd_insncache *c;

	if (!max_entries)
		max_entries = DEFAULT_MAX_ENTRIES;
	if (max_entries > MAX_MAX_ENTRIES)
		max_entries = MAX_MAX_ENTRIES;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->max_entries = max_entries;
	c->nslots = INITIAL_SLOTS;
	c->slot = calloc(c->nslots, sizeof(*c->slot));
	if (!c->slot) {
		ptd_insncache_free(c);
		return NULL;
	}
	return c;
}

int ptd_insncache_new(size_t max_entries, struct ptd_insncache **ret)
{
	if (!ret)
		return -EINVAL;
	*ret = insncache_alloc(max_entries);
	return *ret ? 0 : -ENOMEM;
}

void ptd_insncache_free(struct ptd_insncache *c)
{
	if (!c)
		return;
	free(c->slot);
	free(c->h.ent);
	chunks_free(c->chunks);
	chunks_free(c->retired);
	free(c);
}

void ptd_insncache_get_stats(const struct ptd_insncache *c,
			     struct ptd_insncache_stats *ret)
{
	if (!c || !ret)
		return;
	*ret = c->stats;
	ret->hits = c->h.hits;
}

/* Index of the slot holding (isid, ip), or of the free slot where it
 * belongs. */
static size_t find_slot(const struct ptd_insncache *c, int isid, uint64_t ip)
{
	size_t mask = c->nslots - 1;
	size_t i = hash_key(isid, ip, mask);

	for (;;) {
		uint32_t s = c->slot[i];
		const struct ptd_icache_entry *e;

		if (!s)
			return i;
		e = &c->h.ent[s - 1];
		if (e->ip == ip && e->isid == isid)
			return i;
		i = (i + 1) & mask;
	}
}

static void clear(struct ptd_insncache *c)
{
	memset(c->slot, 0, c->nslots * sizeof(*c->slot));
	c->h.nent = 0;
	c->stats.clears++;
	chunks_free(c->retired);
	c->retired = c->chunks;
	c->chunks = NULL;
}

/* Double the index and rehash.  Returns 0 or -ENOMEM. */
static int grow_index(struct ptd_insncache *c)
{
	size_t n = c->nslots * 2;
	uint32_t *old = c->slot;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	c->slot = s;
	c->nslots = n;
	for (size_t i = 0; i < c->h.nent; i++) {
		const struct ptd_icache_entry *e = &c->h.ent[i];

		c->slot[find_slot(c, e->isid, e->ip)] = (uint32_t)i + 1;
	}
	free(old);
	return 0;
}

/*
 * A free entry for (isid, ip), whose slot is *@pslot.  Makes room first
 * (grow, or clear when full).  Returns NULL if memory runs out; the caller
 * then uses the scratch entry.
 */
static struct ptd_icache_entry *new_entry(struct ptd_insncache *c, int isid,
					  uint64_t ip, size_t *pslot)
{
	if (c->h.nent >= c->max_entries)
		clear(c);
	if (c->h.nent == c->ent_cap) {
		size_t cap = c->ent_cap ? c->ent_cap * 2 : INITIAL_SLOTS / 2;
		struct ptd_icache_entry *ent;

		if (cap > c->max_entries)
			cap = c->max_entries;
		ent = realloc(c->h.ent, cap * sizeof(*ent));
		if (!ent)
			return NULL;
		c->h.ent = ent;
		c->ent_cap = cap;
	}
	/* Keep the index at most half full. */
	if ((c->h.nent + 1) * 2 > c->nslots && grow_index(c) < 0)
		return NULL;
	*pslot = find_slot(c, isid, ip);
	return &c->h.ent[c->h.nent];
}

/* Where the bytes of an entry come from: an image (its sections, and the
 * module names), or a reader of a live process's memory. */
struct code_src {
	struct ptd_image *img;
	ptd_insncache_read_fn read;
	void *ctx;
};

static void lock(const struct ptd_insncache *c)
{
	ptd_lock_opt(c->lock);
}

static void unlock(const struct ptd_insncache *c)
{
	ptd_unlock_opt(c->lock);
}

/* The image's bytes come from the section cache, which may be shared
 * (ptd_insncache_set_lock): read with the lock held. */
static int src_read(const struct ptd_insncache *c,
		    const struct code_src *src, uint64_t ip, uint8_t *buf,
		    size_t len)
{
	int n;

	if (!src->img)
		return src->read(src->ctx, ip, buf, len);
	lock(c);
	n = ptd_image_read(src->img, ip, buf, len);
	unlock(c);
	return n;
}

/* The insn record fields @e fixes (all but flags, time, json_body,
 * cslot, gen). */
static void entry_rec(const struct ptd_icache_entry *e,
		      struct ptd_rec_insn *in)
{
	memset(in, 0, sizeof(*in));
	in->ip = e->ip;
	in->modoff = e->modoff;
	in->module = e->module;
	in->sym = e->sym;
	in->symoff = e->symoff;
	in->isid = e->isid;
	in->mode = (enum pt_exec_mode)e->mode;
	in->iclass = e->iclass;
	in->size = e->size;
	memcpy(in->raw, e->raw, e->size);
}

/* @e's slot in counter table @t, run from mapping @gen of its section. */
static uint32_t entry_slot(struct ptd_counters *t,
			   const struct ptd_icache_entry *e, uint32_t gen)
{
	struct ptd_rec_insn in;

	entry_rec(e, &in);
	in.gen = gen;
	return ptd_counters_slot(t, &in);
}

/* src_read of the pt_max_insn_size bytes at @ip of section @isid (> 0)
 * of an image, through the window: from it where it holds them (or all
 * there is before the region's end), else read into it first. */
static int win_read(struct ptd_insncache *c, const struct code_src *src,
		    int isid, uint64_t ip, uint8_t *buf)
{
	struct code_window *w = &c->win;
	uint64_t avail;
	int n;

	if (!(w->img == src->img && w->isid == isid && ip >= w->start &&
	      ip - w->start < w->len &&
	      (w->start + w->len - ip >= pt_max_insn_size || w->at_end))) {
		w->img = NULL;
		n = src_read(c, src, ip, w->bytes, WINDOW_BYTES);
		if (n <= 0)
			return n;
		if (n > (int)WINDOW_BYTES)
			n = (int)WINDOW_BYTES;
		w->img = src->img;
		w->isid = isid;
		w->start = ip;
		w->len = (uint32_t)n;
		/* (the image reads short only where the region ends) */
		w->at_end = n < (int)WINDOW_BYTES;
	}
	avail = w->start + w->len - ip;
	n = avail < pt_max_insn_size ? (int)avail : (int)pt_max_insn_size;
	memcpy(buf, w->bytes + (ip - w->start), (size_t)n);
	return n;
}

static int fill(struct ptd_insncache *c, const struct code_src *src,
		struct ptd_icache_entry *e,
		int isid, uint64_t ip, enum pt_exec_mode mode,
		bool *ret_cacheable)
{
	uint8_t buf[pt_max_insn_size];
	struct ptd_x86_insn x;
	bool straddles = false;
	int n, err;

	/* Short at the end of a region, -PTD_ENOIMAGE if nothing is mapped. */
	n = src->img && isid > 0 ? win_read(c, src, isid, ip, buf)
				 : src_read(c, src, ip, buf, pt_max_insn_size);
	if (n <= 0)
		return -PTD_ENOIMAGE;
	if (n > (int)pt_max_insn_size)
		n = (int)pt_max_insn_size;
	err = ptd_x86_decode(buf, (size_t)n, ip, mode, &x);
	if (err == -PTD_ETRUNC && n < (int)pt_max_insn_size) {
		/* Short read at a region end: the instruction continues in
		 * whatever is mapped next. */
		int m = src_read(c, src, ip + (uint64_t)n, buf + n,
				 pt_max_insn_size - (size_t)n);

		if (m > 0 && m <= (int)pt_max_insn_size - n) {
			n += m;
			straddles = true;
			err = ptd_x86_decode(buf, (size_t)n, ip, mode, &x);
		}
	}
	/* Distrust the classifier's size as much as the bytes. */
	if (err < 0 || !x.size || x.size > n)
		return -PTD_EFORMAT;

	memset(e, 0, sizeof(*e));
	e->ip = ip;
	e->isid = isid;
	e->size = x.size;
	memcpy(e->raw, buf, x.size);
	e->mode = (uint8_t)mode;
	e->iclass = x.iclass;
	e->kind = x.kind;
	e->rep = x.rep;
	e->cpuid = x.cpuid;
	e->target = x.target;
	e->next = (x.kind == PTD_X86_JMP_DIRECT || x.kind == PTD_X86_CALL_DIRECT)
			  ? x.target
			  : ip + x.size;
	lock(c);
	if (!src->img ||
	    ptd_image_module_of(src->img, isid, ip, &e->module, &e->modoff) <
		    0) {
		e->module = "[unknown]";
		e->modoff = ip;
	}
	/* Once per cached instruction: the per-execution cost of a symbol
	 * is reading this pointer. */
	if (c->syms && src->img)
		e->sym = ptd_symbols_resolve(
			c->syms,
			ptd_iscache_module(ptd_image_iscache(src->img), isid),
			c->sym_pid, ip, &e->symoff);
	unlock(c);
	/* Once per cached instruction too: the per-execution cost of a
	 * count is an increment of this slot's. */
	if (c->counters) {
		e->cgen = ptd_image_gen(src->img, isid);
		e->cslot = entry_slot(c->counters, e, e->cgen);
	}
	/* Bytes from a second region are not part of section @isid: such an
	 * entry could go stale, so it is not kept. */
	*ret_cacheable = !straddles;
	return 0;
}

static const struct ptd_icache_entry *get(struct ptd_insncache *c,
					   const struct code_src *src,
					   int isid, uint64_t ip,
					   enum pt_exec_mode mode,
					   int *ret_err)
{
	struct ptd_icache_entry *e;
	bool cacheable = false;
	size_t slot = 0;
	int err;

	if (isid > 0) {
		uint32_t s = c->slot[find_slot(c, isid, ip)];

		if (s && c->h.ent[s - 1].mode == (uint8_t)mode) {
			c->h.hits++;
			return &c->h.ent[s - 1];
		}
		if (s) {
			/* Same bytes seen in another mode (rare): decode
			 * again and replace the entry. */
			c->stats.misses++;
			err = fill(c, src, &c->scratch, isid, ip, mode,
				   &cacheable);
			if (err) {
				if (ret_err)
					*ret_err = err;
				return NULL;
			}
			if (!cacheable)
				return &c->scratch;
			c->h.ent[s - 1] = c->scratch;
			return &c->h.ent[s - 1];
		}
	}

	e = isid > 0 ? new_entry(c, isid, ip, &slot) : NULL;
	if (!e)
		e = &c->scratch;
	err = fill(c, src, e, isid, ip, mode, &cacheable);
	if (err) {
		if (ret_err)
			*ret_err = err;
		return NULL;
	}
	if (e == &c->scratch || !cacheable) {
		if (e != &c->scratch) {
			c->scratch = *e;
			e = &c->scratch;
		}
		c->stats.uncached++;
		return e;
	}
	c->slot[slot] = (uint32_t)c->h.nent + 1;
	c->h.nent++;
	c->stats.misses++;
	return e;
}

const struct ptd_icache_entry *ptd_insncache_get(struct ptd_insncache *c,
						 struct ptd_image *img,
						 int isid, uint64_t ip,
						 enum pt_exec_mode mode,
						 int *ret_err)
{
	struct code_src src = { .img = img };

	if (!c || !img) {
		if (ret_err)
			*ret_err = -EINVAL;
		return NULL;
	}
	return get(c, &src, isid, ip, mode, ret_err);
}

const struct ptd_icache_entry *
ptd_insncache_get_read(struct ptd_insncache *c, int key, uint64_t ip,
		       enum pt_exec_mode mode, ptd_insncache_read_fn read,
		       void *ctx, int *ret_err)
{
	struct code_src src = { .read = read, .ctx = ctx };

	if (!c || !read) {
		if (ret_err)
			*ret_err = -EINVAL;
		return NULL;
	}
	return get(c, &src, key, ip, mode, ret_err);
}

void ptd_insncache_set_symbols(struct ptd_insncache *c,
			       struct ptd_symbols *syms, pid_t pid)
{
	if (!c)
		return;
	if (c->syms != syms && c->h.nent)
		clear(c);
	c->syms = syms;
	c->sym_pid = pid;
}

void ptd_insncache_set_counters(struct ptd_insncache *c,
				struct ptd_counters *t)
{
	if (!c)
		return;
	if (c->counters != t && c->h.nent)
		clear(c);
	c->counters = t;
}

void ptd_insncache_set_lock(struct ptd_insncache *c, pthread_mutex_t *lock)
{
	if (c)
		c->lock = lock;
}

void ptd_insncache_clear(struct ptd_insncache *c)
{
	if (c)
		clear(c);
}

/* Index of @e in the table, or -1 if it is not a live entry there. */
static ptrdiff_t entry_index(const struct ptd_insncache *c,
			     const struct ptd_icache_entry *e)
{
	if (e < c->h.ent || e >= c->h.ent + c->h.nent)
		return -1;
	return e - c->h.ent;
}

uint32_t ptd_insncache_reslot(struct ptd_insncache *c,
			      const struct ptd_icache_entry *e, uint32_t gen)
{
	ptrdiff_t i;
	uint32_t slot;

	if (!c->counters)
		return 0;
	slot = entry_slot(c->counters, e, gen);
	/* A cached entry keeps it; the scratch entry is used once. */
	i = entry_index(c, e);
	if (i >= 0) {
		c->h.ent[i].cslot = slot;
		c->h.ent[i].cgen = gen;
	}
	return slot;
}

void ptd_insncache_ref(const struct ptd_insncache *c,
		       const struct ptd_icache_entry *e,
		       struct ptd_icache_ref *ret)
{
	ptrdiff_t i = c && e ? entry_index(c, e) : -1;

	ret->idx = i >= 0 ? (uint32_t)i + 1 : 0;
	ret->isid = i >= 0 ? e->isid : 0;
	ret->ip = i >= 0 ? e->ip : 0;
}

/* The entry @ref refers to, if it is still there. */
static struct ptd_icache_entry *deref(struct ptd_insncache *c,
				      const struct ptd_icache_ref *ref)
{
	struct ptd_icache_entry *e;

	if (!ref || !ref->idx || ref->idx > c->h.nent)
		return NULL;
	e = &c->h.ent[ref->idx - 1];
	return e->ip == ref->ip && e->isid == ref->isid ? e : NULL;
}

/* follow's miss: look the instruction up, and link the entry @from
 * refers to (if the lookup left it there) to it. */
static const struct ptd_icache_entry *
look_link(struct ptd_insncache *c, struct ptd_image *img,
	  const struct ptd_icache_ref *from, bool fall, int isid, uint64_t ip,
	  enum pt_exec_mode mode, int *ret_err)
{
	const struct ptd_icache_entry *n;
	struct ptd_icache_entry *g;
	ptrdiff_t to;

	/* the lookup may move or clear the table: @from says where the
	 * entry to link from was */
	n = ptd_insncache_get(c, img, isid, ip, mode, ret_err);
	if (!n)
		return NULL;
	g = deref(c, from);
	to = entry_index(c, n);
	if (g && to >= 0) {
		if (fall)
			g->succ = (uint32_t)to + 1;
		else
			g->bsucc = (uint32_t)to + 1;
	}
	return n;
}

/* The entry a link (index + 1) leads to, if it is still the one for
 * (@isid, @ip, @mode). */
static inline const struct ptd_icache_entry *
linked(struct ptd_insncache *c, uint32_t link, int isid, uint64_t ip,
       uint8_t mode)
{
	const struct ptd_icache_entry *n;

	if (!link || link > c->h.nent)
		return NULL;
	n = &c->h.ent[link - 1];
	if (n->ip != ip || n->isid != isid || n->mode != mode)
		return NULL;
	c->h.hits++;
	return n;
}

const struct ptd_icache_entry *
ptd_insncache_next_slow(struct ptd_insncache *c, struct ptd_image *img,
			const struct ptd_icache_entry *e, int *ret_err)
{
	struct ptd_icache_ref from;

	if (!c || !e) {
		if (ret_err)
			*ret_err = -EINVAL;
		return NULL;
	}
	/* (the link was tried inline: ptd_insncache_next) */
	ptd_insncache_ref(c, e, &from);
	if (!from.idx)	/* the scratch entry: links to nothing */
		return ptd_insncache_get(c, img, e->isid, e->next,
					 (enum pt_exec_mode)e->mode, ret_err);
	return look_link(c, img, &from, true, e->isid, e->next,
			 (enum pt_exec_mode)e->mode, ret_err);
}

const struct ptd_icache_entry *
ptd_insncache_get_from(struct ptd_insncache *c, struct ptd_image *img,
		       const struct ptd_icache_ref *from, int isid,
		       uint64_t ip, enum pt_exec_mode mode, int *ret_err)
{
	const struct ptd_icache_entry *f, *n;
	bool fall;

	if (!c || !img) {
		if (ret_err)
			*ret_err = -EINVAL;
		return NULL;
	}
	f = deref(c, from);
	if (!f || isid <= 0)
		return ptd_insncache_get(c, img, isid, ip, mode, ret_err);
	fall = ip == f->next;
	n = linked(c, fall ? f->succ : f->bsucc, isid, ip, (uint8_t)mode);
	return n ? n : look_link(c, img, from, fall, isid, ip, mode, ret_err);
}

const char *ptd_insncache_json_render(struct ptd_insncache *c,
				      const struct ptd_icache_entry *e,
				      uint32_t *ret_len)
{
	struct ptd_icache_entry *w;
	struct ptd_rec_insn in;
	struct chunk *k;
	ptrdiff_t i;
	size_t n, nosym;

	if (!c || !e || !ret_len)
		return NULL;
	if (e->json) {
		*ret_len = e->json_len;
		return e->json;
	}
	k = c->chunks;
	if (!k || CHUNK_SIZE - k->used < PTD_JSON_MAX_INSN_BODY) {
		k = malloc(sizeof(*k) + CHUNK_SIZE);
		if (!k)
			return NULL;
		k->used = 0;
		k->next = c->chunks;
		c->chunks = k;
	}
	entry_rec(e, &in);
	/* without the symbol first: its length is where sym begins */
	in.sym = NULL;
	nosym = ptd_json_insn_body(k->data + k->used, CHUNK_SIZE - k->used,
				   &in);
	in.sym = e->sym;
	n = e->sym ? ptd_json_insn_body(k->data + k->used,
					CHUNK_SIZE - k->used, &in)
		   : nosym;
	if (!n || !nosym)
		return NULL;
	/* Only a cached entry keeps its body; the scratch entry's is used
	 * once. */
	i = entry_index(c, e);
	w = i >= 0 ? &c->h.ent[i] : &c->scratch;
	w->json = k->data + k->used;
	w->json_len = (uint32_t)n;
	w->json_nosym_len = (uint32_t)nosym;
	k->used += n;
	*ret_len = (uint32_t)n;
	return w->json;
}
