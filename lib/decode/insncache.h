/* SPDX-License-Identifier: MIT */
/*
 * The instruction cache of the fast path: everything an insn record needs
 * about the instruction at (isid, ip) -- size, raw bytes, libipt class,
 * successor -- decoded once (x86/insn.h) and looked up after, as Simics
 * decodes an instruction the first time it executes.
 *
 * Entries are keyed by (isid, ip): an isid names one immutable section of
 * one file or snapshot, so an entry can never go stale.  Memory that no
 * section covers (isid 0, read through the live callback) is never cached.
 * The cache is bounded: when full it is cleared and refilled.
 */
#ifndef PTD_DECODE_INSNCACHE_H
#define PTD_DECODE_INSNCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>

#include <intel-pt.h>

#include "aspace/image.h"
#include "x86/insn.h"

struct ptd_insncache;

struct ptd_icache_entry {
	uint64_t ip;
	int isid;
	uint8_t size;
	uint8_t raw[pt_max_insn_size];
	uint8_t mode;			/* enum pt_exec_mode */
	enum pt_insn_class iclass;
	enum ptd_x86_kind kind;
	bool rep;			/* REP/REPE/REPNE string instruction */
	bool cpuid;			/* (x86/insn.h) */
	uint64_t target;		/* COND, JMP_DIRECT, CALL_DIRECT: the
					 * branch target */
	uint64_t next;			/* ip of the next instruction when
					 * control falls through or follows
					 * a direct jmp/call (for expanding
					 * blocks) */
	/* module of ip, resolved once */
	const char *module;
	uint64_t modoff;
	/* function holding ip and ip's offset in it, resolved once when the
	 * cache has symbols (ptd_insncache_set_symbols); NULL: none */
	const char *sym;
	uint64_t symoff;
	/* The successor's entry (index + 1; 0: not linked yet), so that a
	 * block is expanded with one hash lookup, not one per instruction.
	 * Checked before use: entries are only ever cleared all at once. */
	uint32_t succ;
	/* The same for the instruction control reached last from this one
	 * other than e->next (a conditional branch taken, an indirect
	 * branch's target): ptd_insncache_get_from. */
	uint32_t bsucc;
	/* The static part of its JSON line (ptd_json_insn_body, with its
	 * symbol), rendered on first request; NULL until then. */
	const char *json;
	uint32_t json_len;
	uint32_t json_nosym_len;	/* of its part before "sym" */
	/* Its slot in the counter table (ptd_insncache_set_counters),
	 * resolved when it is decoded, for the mapping @cgen of its section
	 * (ptd_image_gen); 0: no table (or the table is full). */
	uint32_t cslot;
	uint32_t cgen;
};

struct ptd_insncache_stats {
	uint64_t hits, misses, uncached, clears;
};

/* Allocate into *@ret; @max_entries 0: 1 << 20.  Returns 0, or -ENOMEM
 * (*@ret NULL). */
int ptd_insncache_new(size_t max_entries, struct ptd_insncache **ret);
void ptd_insncache_free(struct ptd_insncache *c);

/* The instruction at @ip in section @isid of @img, in @mode.
 * Returns a pointer valid until the next call, or NULL with *ret_err set:
 * -PTD_ENOIMAGE (no memory at @ip), -PTD_EFORMAT (not an instruction). */
const struct ptd_icache_entry *ptd_insncache_get(struct ptd_insncache *c,
						 struct ptd_image *img,
						 int isid, uint64_t ip,
						 enum pt_exec_mode mode,
						 int *ret_err);

/* Where an entry is, to find it again after lookups that may move or
 * clear the table (ptd_insncache_get_from). */
struct ptd_icache_ref {
	uint32_t idx;		/* entry index + 1; 0: none */
	int isid;
	uint64_t ip;
};

/* A reference to @e (a cached entry, or none for the scratch one). */
void ptd_insncache_ref(const struct ptd_insncache *c,
		       const struct ptd_icache_entry *e,
		       struct ptd_icache_ref *ret);

/* ptd_insncache_get for the instruction at @ip that control reached from
 * the one @from refers to (may be NULL or stale): the block after a block.
 * Its successor is linked (e->succ, e->bsucc) as ptd_insncache_next links
 * the next one, so a run of blocks that follow each other as before is
 * expanded without a hash lookup. */
const struct ptd_icache_entry *
ptd_insncache_get_from(struct ptd_insncache *c, struct ptd_image *img,
		       const struct ptd_icache_ref *from, int isid,
		       uint64_t ip, enum pt_exec_mode mode, int *ret_err);

/* Reads up to @len bytes of code at @ip into @buf: returns how many (short
 * where readable memory ends), or <= 0 if none. */
typedef int (*ptd_insncache_read_fn)(void *ctx, uint64_t ip, uint8_t *buf,
				     size_t len);

/* As ptd_insncache_get, with the bytes read by @read instead of from an
 * image: for the software source, which reads the live process it steps.
 * @key > 0 names the bytes as an isid does: its entries are trusted until
 * ptd_insncache_clear (the caller clears when the code may have changed);
 * 0 caches nothing.  The entries name no module ("[unknown]"). */
const struct ptd_icache_entry *
ptd_insncache_get_read(struct ptd_insncache *c, int key, uint64_t ip,
		       enum pt_exec_mode mode, ptd_insncache_read_fn read,
		       void *ctx, int *ret_err);

/* Resolve the symbol of every instruction the cache decodes from an
 * image (ptd_icache_entry.sym) through @syms, which must outlive the
 * entries, code that is no file through process @pid's perf map; NULL:
 * no symbols.  Entries made before with other symbols (or none) are
 * forgotten.  ptd_insncache_get_read's entries name no symbol. */
struct ptd_symbols;
void ptd_insncache_set_symbols(struct ptd_insncache *c,
			       struct ptd_symbols *syms, pid_t pid);

/* Resolve every instruction the cache decodes to its slot in @t
 * (ptd_icache_entry.cslot; decode/counters.h), once per cached
 * instruction; @t must outlive the entries.  NULL: none.  Entries made
 * with another table (or none) are forgotten. */
struct ptd_counters;
void ptd_insncache_set_counters(struct ptd_insncache *c,
				struct ptd_counters *t);

/* The counter slot of @e's instruction run from mapping @gen of its
 * section (ptd_image_gen): @e->cslot when it was resolved for @gen, else
 * resolved again for it, once (a library mapped again where it was: the
 * same entry, new code to the counter table). */
uint32_t ptd_insncache_reslot(struct ptd_insncache *c,
			      const struct ptd_icache_entry *e, uint32_t gen);
static inline uint32_t ptd_insncache_cslot(struct ptd_insncache *c,
					   const struct ptd_icache_entry *e,
					   uint32_t gen)
{
	return e->cgen == gen ? e->cslot : ptd_insncache_reslot(c, e, gen);
}

/* Hold @lock (NULL: none) while decoding an instruction the cache does not
 * have: reading its bytes and module from the image's section cache,
 * which the parts of a parallel decode share (decode/parallel.h).  Hits
 * take no lock. */
void ptd_insncache_set_lock(struct ptd_insncache *c, pthread_mutex_t *lock);

/* Forget every entry (counted in stats.clears). */
void ptd_insncache_clear(struct ptd_insncache *c);

/* The cache's first member (insncache.c): what ptd_insncache_next reads
 * inline -- it runs once per instruction of every block expanded. */
struct ptd_insncache_head {
	struct ptd_icache_entry *ent;
	size_t nent;		/* entries in use */
	uint64_t hits;		/* stats.hits */
};

/* ptd_insncache_next where @e's successor link does not lead to it. */
const struct ptd_icache_entry *
ptd_insncache_next_slow(struct ptd_insncache *c, struct ptd_image *img,
			const struct ptd_icache_entry *e, int *ret_err);

/* The instruction after @e when control falls through or follows a direct
 * jmp/call (@e->next), in the same section and mode: through @e's
 * successor link when it is set, else looked up and linked.  @e must come
 * from @c (a pointer returned by ptd_insncache_get/next).  Returns like
 * ptd_insncache_get. */
static inline const struct ptd_icache_entry *
ptd_insncache_next(struct ptd_insncache *c, struct ptd_image *img,
		   const struct ptd_icache_entry *e, int *ret_err)
{
	struct ptd_insncache_head *h = (struct ptd_insncache_head *)c;

	if (c && e && e->succ && e->succ <= h->nent) {
		const struct ptd_icache_entry *n = &h->ent[e->succ - 1];

		if (n->ip == e->next && n->isid == e->isid &&
		    n->mode == e->mode) {
			h->hits++;
			return n;
		}
	}
	return ptd_insncache_next_slow(c, img, e, ret_err);
}

/* The rendered JSON body of @e (see record/jsonw.h), made on first use and
 * kept with the entry (and the length of its part before "sym",
 * e->json_nosym_len, once this has returned it).  Returns NULL (the writer
 * then renders the fields itself) if memory runs out.  A body stays valid
 * until the second clear of the cache after it was made: a caller may hold
 * one across the next few lookups, as the decoder does with its pending
 * instruction.  A body made already is returned inline, without a call:
 * the decoder asks for one for every instruction it expands. */
const char *ptd_insncache_json_render(struct ptd_insncache *c,
				      const struct ptd_icache_entry *e,
				      uint32_t *ret_len);
static inline const char *ptd_insncache_json(struct ptd_insncache *c,
					     const struct ptd_icache_entry *e,
					     uint32_t *ret_len)
{
	if (e && e->json && ret_len) {
		*ret_len = e->json_len;
		return e->json;
	}
	return ptd_insncache_json_render(c, e, ret_len);
}

void ptd_insncache_get_stats(const struct ptd_insncache *c,
			     struct ptd_insncache_stats *ret);

#endif
