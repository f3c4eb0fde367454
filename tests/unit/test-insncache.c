/* SPDX-License-Identifier: MIT */
/*
 * The instruction cache: what an entry holds, hits and misses, isid 0 never
 * cached, region ends, the bound, the bytes read ahead of a block.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "mapcode.h"
#include "aspace/image.h"
#include "aspace/iscache.h"
#include "common/diag.h"
#include "decode/insncache.h"

/* Machine code at 0x400000 (64-bit). */
static const uint8_t code[] = {
	0x48, 0x89, 0xe5,		/* 400000: mov %rsp,%rbp */
	0xe8, 0x10, 0x00, 0x00, 0x00,	/* 400003: call 400018 */
	0xeb, 0x02,			/* 400008: jmp 40000c */
	0x74, 0x05,			/* 40000a: je 400011 */
	0xff, 0xd0,			/* 40000c: call *%rax */
	0xc3,				/* 40000e: ret */
	0x06,				/* 40000f: invalid in 64-bit */
	0x48, 0x89,			/* 400010: cut by the region end */
};
#define BASE 0x400000ull

static char dir[] = "/tmp/ptd-test-icache-XXXXXX";
static struct ptd_iscache *ic;
static struct ptd_image *img;
static int isid;

static int map_bytes(const char *name, const void *data, size_t n,
		     uint64_t vaddr)
{
	return mapcode(img, dir, name, data, n, vaddr);
}

static void setup(void)
{
	if (!mkdtemp(dir))
		SKIP_ALL("cannot create a temporary directory: %s",
			 strerror(errno));
	(void)ptd_iscache_new(&ic);
	(void)ptd_image_new(ic, "test", &img);
	if (!img)
		SKIP_ALL("cannot allocate an image");
	isid = map_bytes("code.bin", code, sizeof(code), BASE);
	if (isid <= 0)
		SKIP_ALL("cannot map test code: %d", isid);
}

static const struct ptd_icache_entry *get(struct ptd_insncache *c, int id,
					  uint64_t ip, int *err)
{
	*err = 0;
	return ptd_insncache_get(c, img, id, ip, ptem_64bit, err);
}

static void test_entries(void)
{
	struct ptd_insncache *c;
	(void)ptd_insncache_new(0, &c);
	const struct ptd_icache_entry *e;
	int err;

	REQUIRE(c);
	e = get(c, isid, BASE, &err);
	REQUIRE(e);
	CHECK_EQ_U64(e->ip, BASE);
	CHECK_EQ_INT(e->isid, isid);
	CHECK_EQ_INT(e->size, 3);
	CHECK(memcmp(e->raw, code, 3) == 0);
	CHECK_EQ_INT(e->mode, ptem_64bit);
	CHECK_EQ_INT(e->iclass, ptic_other);
	CHECK_EQ_INT(e->kind, PTD_X86_OTHER);
	CHECK_EQ_U64(e->next, BASE + 3);
	CHECK(e->module && strstr(e->module, "code.bin"));
	CHECK_EQ_U64(e->modoff, 0);

	/* A direct call: next is its target. */
	e = get(c, isid, BASE + 3, &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->size, 5);
	CHECK_EQ_INT(e->iclass, ptic_call);
	CHECK_EQ_INT(e->kind, PTD_X86_CALL_DIRECT);
	CHECK_EQ_U64(e->next, BASE + 0x18);
	CHECK_EQ_U64(e->modoff, 3);

	/* A direct jump: next is its target. */
	e = get(c, isid, BASE + 8, &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->iclass, ptic_jump);
	CHECK_EQ_U64(e->next, BASE + 0xc);

	/* A conditional branch, an indirect call and a return fall
	 * through (their successor needs trace). */
	e = get(c, isid, BASE + 0xa, &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->iclass, ptic_cond_jump);
	CHECK_EQ_U64(e->next, BASE + 0xc);
	e = get(c, isid, BASE + 0xc, &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->kind, PTD_X86_CALL_INDIRECT);
	CHECK_EQ_U64(e->next, BASE + 0xe);
	e = get(c, isid, BASE + 0xe, &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->iclass, ptic_return);
	CHECK_EQ_U64(e->next, BASE + 0xf);
	ptd_insncache_free(c);
}

static void test_hits(void)
{
	struct ptd_insncache *c;
	(void)ptd_insncache_new(0, &c);
	struct ptd_insncache_stats st;
	const struct ptd_icache_entry *e;
	int err;

	REQUIRE(c);
	REQUIRE(get(c, isid, BASE, &err));
	REQUIRE(get(c, isid, BASE + 3, &err));
	e = get(c, isid, BASE, &err);
	REQUIRE(e);
	CHECK_EQ_U64(e->ip, BASE);
	CHECK_EQ_INT(e->size, 3);
	ptd_insncache_get_stats(c, &st);
	CHECK_EQ_U64(st.misses, 2);
	CHECK_EQ_U64(st.hits, 1);
	CHECK_EQ_U64(st.uncached, 0);
	CHECK_EQ_U64(st.clears, 0);

	/* The same ip in another mode is decoded again: in 32-bit mode
	 * 0x48 is one instruction (dec %eax). */
	e = ptd_insncache_get(c, img, isid, BASE, ptem_32bit, &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->size, 1);
	CHECK_EQ_INT(e->mode, ptem_32bit);
	e = get(c, isid, BASE, &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->size, 3);
	ptd_insncache_free(c);
}

/* Code read by a caller's reader (the software source's live memory):
 * bytes @mem at BASE, and how often they were read. */
struct live_mem {
	uint8_t bytes[sizeof(code)];
	unsigned reads;
	size_t cut;		/* readable bytes from BASE */
};

static int live_read(void *ctx, uint64_t ip, uint8_t *buf, size_t len)
{
	struct live_mem *m = ctx;
	size_t off = (size_t)(ip - BASE);

	m->reads++;
	if (ip < BASE || off >= m->cut)
		return 0;
	if (len > m->cut - off)
		len = m->cut - off;
	memcpy(buf, m->bytes + off, len);
	return (int)len;
}

/* ptd_insncache_get_read: the same entries from a reader instead of an
 * image, kept until a clear (the caller's word that the code changed),
 * with the branch target and the REP flag the tracer needs. */
static void test_reader(void)
{
	struct ptd_insncache *c;
	(void)ptd_insncache_new(0, &c);
	struct live_mem m = { .cut = sizeof(code) };
	struct ptd_insncache_stats st;
	const struct ptd_icache_entry *e;
	int err = 0;

	REQUIRE(c);
	memcpy(m.bytes, code, sizeof(code));
	e = ptd_insncache_get_read(c, 1, BASE + 3, ptem_64bit, live_read, &m,
				   &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->kind, PTD_X86_CALL_DIRECT);
	CHECK_EQ_U64(e->target, BASE + 0x18);
	CHECK_EQ_STR(e->module, "[unknown]");
	CHECK(!e->rep);
	CHECK_EQ_INT(m.reads, 1);
	/* a hit: not read again, even though the bytes changed ... */
	m.bytes[3] = 0xc3;
	e = ptd_insncache_get_read(c, 1, BASE + 3, ptem_64bit, live_read, &m,
				   &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->kind, PTD_X86_CALL_DIRECT);
	CHECK_EQ_INT(m.reads, 1);
	/* ... until the caller says the code changed */
	ptd_insncache_clear(c);
	e = ptd_insncache_get_read(c, 1, BASE + 3, ptem_64bit, live_read, &m,
				   &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->kind, PTD_X86_RET);
	CHECK_EQ_INT(m.reads, 2);
	ptd_insncache_get_stats(c, &st);
	CHECK_EQ_U64(st.hits, 1);
	CHECK_EQ_U64(st.misses, 2);
	CHECK_EQ_U64(st.clears, 1);
	/* key 0 caches nothing */
	(void)ptd_insncache_get_read(c, 0, BASE, ptem_64bit, live_read, &m,
				     &err);
	(void)ptd_insncache_get_read(c, 0, BASE, ptem_64bit, live_read, &m,
				     &err);
	CHECK_EQ_INT(m.reads, 4);
	/* nothing readable, not an instruction, cut short */
	CHECK(!ptd_insncache_get_read(c, 1, BASE + 0x40, ptem_64bit,
				      live_read, &m, &err));
	CHECK_EQ_INT(err, -PTD_ENOIMAGE);
	CHECK(!ptd_insncache_get_read(c, 1, BASE + 0xf, ptem_64bit, live_read,
				      &m, &err));
	CHECK_EQ_INT(err, -PTD_EFORMAT);
	m.cut = 0x11;
	CHECK(!ptd_insncache_get_read(c, 1, BASE + 0x10, ptem_64bit,
				      live_read, &m, &err));
	CHECK_EQ_INT(err, -PTD_EFORMAT);
	CHECK(!ptd_insncache_get_read(c, 1, BASE, ptem_64bit, NULL, &m,
				      &err));
	CHECK_EQ_INT(err, -EINVAL);
	ptd_insncache_free(c);
}

/* Successor links: next() gives what get() of e->next gives, the second
 * time through the link (a hit with no new entry), and survives a clear. */
static void test_next_links(void)
{
	struct ptd_insncache *c;
	(void)ptd_insncache_new(4, &c);
	struct ptd_insncache_stats st;
	const struct ptd_icache_entry *e, *n;
	int err;

	REQUIRE(c);
	e = get(c, isid, BASE, &err);
	REQUIRE(e);
	n = ptd_insncache_next(c, img, e, &err);
	REQUIRE(n);
	CHECK_EQ_U64(n->ip, BASE + 3);
	e = get(c, isid, BASE, &err);
	REQUIRE(e);
	CHECK(e->succ != 0);
	ptd_insncache_get_stats(c, &st);
	uint64_t misses = st.misses;
	n = ptd_insncache_next(c, img, e, &err);
	REQUIRE(n);
	CHECK_EQ_U64(n->ip, BASE + 3);
	ptd_insncache_get_stats(c, &st);
	CHECK_EQ_U64(st.misses, misses);
	/* Fill past the bound of 4: the table is cleared; links into the
	 * old table are not followed. */
	for (uint64_t off = 0x8; off <= 0xe; off += 2)
		(void)get(c, isid, BASE + off, &err);
	ptd_insncache_get_stats(c, &st);
	CHECK(st.clears >= 1);
	e = get(c, isid, BASE, &err);
	REQUIRE(e);
	n = ptd_insncache_next(c, img, e, &err);
	REQUIRE(n);
	CHECK_EQ_U64(n->ip, BASE + 3);
	ptd_insncache_free(c);
}

/* ptd_insncache_get_from @ref of the 64-bit instruction at @ip: it, or a
 * failed check (NULL). */
static const struct ptd_icache_entry *from(struct ptd_insncache *c,
					   const struct ptd_icache_ref *ref,
					   uint64_t ip)
{
	int err = 0;
	const struct ptd_icache_entry *n =
		ptd_insncache_get_from(c, img, ref, isid, ip, ptem_64bit, &err);

	CHECK(n != NULL);
	if (n)
		CHECK_EQ_U64(n->ip, ip);
	return n;
}

/* ptd_insncache_get_from: the block after a branch, linked by where
 * control went (fall-through: succ; else bsucc), checked before use:
 * another target, or a reference into a table cleared since, gives the
 * instruction asked for, never the linked one. */
static void test_block_links(void)
{
	struct ptd_insncache *c;
	(void)ptd_insncache_new(4, &c);
	struct ptd_insncache_stats st;
	struct ptd_icache_ref ref;
	const struct ptd_icache_entry *e, *n;
	uint64_t misses;
	int err = 0;

	REQUIRE(c);
	/* je at 0x40000a: not taken 0x40000c, taken 0x400011 */
	e = get(c, isid, BASE + 0xa, &err);
	REQUIRE(e);
	ptd_insncache_ref(c, e, &ref);
	CHECK(ref.idx != 0);
	(void)from(c, &ref, BASE + 0xc);
	(void)from(c, &ref, BASE + 0xe);
	e = get(c, isid, BASE + 0xa, &err);
	REQUIRE(e);
	CHECK(e->succ != 0 && e->bsucc != 0);
	/* both again: linked, no miss */
	ptd_insncache_get_stats(c, &st);
	misses = st.misses;
	(void)from(c, &ref, BASE + 0xc);
	(void)from(c, &ref, BASE + 0xe);
	ptd_insncache_get_stats(c, &st);
	CHECK_EQ_U64(st.misses, misses);
	/* another target than the linked one (an indirect branch's) */
	n = ptd_insncache_get_from(c, img, &ref, isid, BASE, ptem_64bit, &err);
	REQUIRE(n);
	CHECK_EQ_U64(n->ip, BASE);
	CHECK_EQ_U64(n->size, 3);
	/* in another mode: not the 64-bit entry */
	n = ptd_insncache_get_from(c, img, &ref, isid, BASE + 0xe, ptem_32bit,
				   &err);
	REQUIRE(n);
	CHECK_EQ_INT(n->mode, ptem_32bit);
	/* Fill past the bound of 4: the table is cleared and refilled; the
	 * stale reference is not followed. */
	for (uint64_t off = 0; off <= 0xe; off += 2)
		(void)get(c, isid, BASE + off, &err);
	ptd_insncache_get_stats(c, &st);
	CHECK(st.clears >= 1);
	n = from(c, &ref, BASE + 0x3);
	REQUIRE(n);
	CHECK_EQ_U64(n->size, 5);
	/* no reference: a plain lookup */
	n = ptd_insncache_get_from(c, img, NULL, isid, BASE + 0x8, ptem_64bit,
				   &err);
	REQUIRE(n);
	CHECK_EQ_U64(n->ip, BASE + 0x8);
	ptd_insncache_free(c);
}

/* The rendered JSON body: made once, then the same bytes back. */
static void test_json_body(void)
{
	struct ptd_insncache *c;
	(void)ptd_insncache_new(0, &c);
	const struct ptd_icache_entry *e;
	const char *j1, *j2;
	uint32_t l1 = 0, l2 = 0;
	int err;

	REQUIRE(c);
	e = get(c, isid, BASE + 3, &err);
	REQUIRE(e);
	j1 = ptd_insncache_json(c, e, &l1);
	REQUIRE(j1);
	j2 = ptd_insncache_json(c, e, &l2);
	CHECK(j1 == j2);
	CHECK_EQ_INT(l1, l2);
	CHECK(strncmp(j1, ",\"ip\":\"0x", 9) == 0);
	CHECK(memmem(j1, l1, "\"iclass\":\"call\"", 15) != NULL);
	CHECK(memmem(j1, l1, "\"offset\":\"0x3\"", 14) != NULL);
	ptd_insncache_free(c);
}

/* isid 0 (memory no section covers) is never cached. */
static void test_isid0(void)
{
	struct ptd_insncache *c;
	(void)ptd_insncache_new(0, &c);
	struct ptd_insncache_stats st;
	const struct ptd_icache_entry *e;
	int err;

	REQUIRE(c);
	for (int i = 0; i < 3; i++) {
		e = get(c, 0, BASE, &err);
		REQUIRE(e);
		CHECK_EQ_INT(e->size, 3);
		CHECK_EQ_INT(e->isid, 0);
		CHECK_EQ_STR(e->module, "[live]");
		CHECK_EQ_U64(e->modoff, BASE);
	}
	ptd_insncache_get_stats(c, &st);
	CHECK_EQ_U64(st.uncached, 3);
	CHECK_EQ_U64(st.hits, 0);
	CHECK_EQ_U64(st.misses, 0);
	ptd_insncache_free(c);
}

static void test_errors(void)
{
	struct ptd_insncache *c;
	(void)ptd_insncache_new(0, &c);
	int err;

	REQUIRE(c);
	/* Nothing mapped. */
	CHECK(get(c, isid, 0x900000, &err) == NULL);
	CHECK_EQ_INT(err, -PTD_ENOIMAGE);
	/* Not an instruction. */
	CHECK(get(c, isid, BASE + 0xf, &err) == NULL);
	CHECK_EQ_INT(err, -PTD_EFORMAT);
	/* Cut by the end of the region, nothing after it. */
	CHECK(get(c, isid, BASE + 0x10, &err) == NULL);
	CHECK_EQ_INT(err, -PTD_EFORMAT);
	/* Arguments. */
	err = 0;
	CHECK(ptd_insncache_get(NULL, img, isid, BASE, ptem_64bit, &err) ==
	      NULL);
	CHECK_EQ_INT(err, -EINVAL);
	CHECK(ptd_insncache_get(c, NULL, isid, BASE, ptem_64bit, &err) ==
	      NULL);
	CHECK_EQ_INT(err, -EINVAL);
	ptd_insncache_free(c);
	ptd_insncache_free(NULL);
}

/* A short read at a region end is fine when the instruction fits; one that
 * straddles two regions is decoded from both but not cached. */
static void test_region_end(void)
{
	static const uint8_t a[] = {0x90, 0xc3, 0x48, 0x89};
	static const uint8_t b[] = {0xe5, 0xc3};
	struct ptd_insncache *c;
	(void)ptd_insncache_new(0, &c);
	struct ptd_insncache_stats st;
	const struct ptd_icache_entry *e;
	int ia, ib, err;

	REQUIRE(c);
	ia = map_bytes("a.bin", a, sizeof(a), 0x500000);
	ib = map_bytes("b.bin", b, sizeof(b), 0x500004);
	REQUIRE(ia > 0 && ib > 0);
	e = get(c, ia, 0x500001, &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->size, 1);
	CHECK_EQ_INT(e->iclass, ptic_return);
	e = get(c, ib, 0x500005, &err);	/* last byte of a region */
	REQUIRE(e);
	CHECK_EQ_INT(e->size, 1);

	e = get(c, ia, 0x500002, &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->size, 3);
	CHECK_EQ_INT(e->raw[2], 0xe5);
	CHECK_EQ_U64(e->next, 0x500005);
	ptd_insncache_get_stats(c, &st);
	CHECK_EQ_U64(st.misses, 2);
	CHECK_EQ_U64(st.uncached, 1);
	e = get(c, ia, 0x500002, &err);
	REQUIRE(e);
	ptd_insncache_get_stats(c, &st);
	CHECK_EQ_U64(st.uncached, 2);
	CHECK_EQ_U64(st.hits, 0);
	ptd_insncache_free(c);
}

/* The bytes read ahead of an instruction (a window of a few hundred) give
 * the next ones of its block as reading each would: instructions that
 * cross the window's end, one read back from before it, and a region
 * that ends inside a window; new code mapped where other code was (a new
 * isid) is decoded from the new bytes. */
static void test_read_ahead(void)
{
	/* 5-byte movs (b8 imm32) from 0x600000: 600 bytes, so instructions
	 * cross any window edge, then ret at the region's last byte */
	static uint8_t big[601];
	static const uint8_t other[] = { 0x48, 0x89, 0xe5, 0xc3 };
	struct ptd_insncache *c;
	struct ptd_insncache_stats st;
	const struct ptd_icache_entry *e;
	int ib, io, err;

	for (size_t i = 0; i + 5 <= 600; i += 5) {
		big[i] = 0xb8;
		big[i + 1] = (uint8_t)i;
		big[i + 2] = (uint8_t)(i >> 8);
		big[i + 3] = 0x11;
		big[i + 4] = 0x22;
	}
	big[600] = 0xc3;
	(void)ptd_insncache_new(0, &c);
	REQUIRE(c);
	ib = map_bytes("big.bin", big, sizeof(big), 0x600000);
	REQUIRE(ib > 0);
	/* from the third instruction on, in order: every one whole */
	for (uint64_t ip = 0x60000a; ip < 0x600258; ip += 5) {
		e = get(c, ib, ip, &err);
		REQUIRE(e);
		CHECK_EQ_INT(e->size, 5);
		CHECK_EQ_INT(e->raw[0], 0xb8);
		CHECK_EQ_INT(e->raw[1] | e->raw[2] << 8,
			     (int)(ip - 0x600000) & 0xffff);
		CHECK_EQ_INT(e->raw[4], 0x22);
		CHECK_EQ_U64(e->next, ip + 5);
	}
	/* each decoded whole and cached (none read short, across two
	 * regions) */
	ptd_insncache_get_stats(c, &st);
	CHECK_EQ_U64(st.misses, 118);
	CHECK_EQ_U64(st.uncached, 0);
	/* one at the region's end, one before where the reads began, whose
	 * window covers the region's start */
	e = get(c, ib, 0x600258, &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->size, 1);
	CHECK_EQ_INT(e->iclass, ptic_return);
	e = get(c, ib, 0x600000, &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->raw[1], 0);
	CHECK_EQ_INT(e->raw[3], 0x11);
	/* new code where the old was: the old unmapped, another file */
	REQUIRE(ptd_image_unmap(img, 0x600000, 0x600259) == 0);
	io = map_bytes("other.bin", other, sizeof(other), 0x600000);
	REQUIRE(io > 0 && io != ib);
	e = get(c, io, 0x600000, &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->size, 3);
	CHECK_EQ_INT(e->raw[2], 0xe5);
	e = get(c, io, 0x600003, &err);
	REQUIRE(e);
	CHECK_EQ_INT(e->iclass, ptic_return);
	ptd_insncache_free(c);
}

/* Full: cleared and refilled. */
static void test_bound(void)
{
	struct ptd_insncache *c;
	(void)ptd_insncache_new(4, &c);
	struct ptd_insncache_stats st;
	static const uint64_t ips[] = {0, 3, 8, 0xa, 0xc};
	int err;

	REQUIRE(c);
	for (size_t i = 0; i < 5; i++)
		REQUIRE(get(c, isid, BASE + ips[i], &err));
	ptd_insncache_get_stats(c, &st);
	CHECK_EQ_U64(st.clears, 1);
	CHECK_EQ_U64(st.misses, 5);
	/* The newest is still there, the oldest is gone. */
	REQUIRE(get(c, isid, BASE + 0xc, &err));
	REQUIRE(get(c, isid, BASE, &err));
	ptd_insncache_get_stats(c, &st);
	CHECK_EQ_U64(st.hits, 1);
	CHECK_EQ_U64(st.misses, 6);
	ptd_insncache_free(c);
}

/* Many entries: the index grows and every entry stays findable. */
static void test_many(void)
{
	enum { N = 20000 };
	static uint8_t nops[N];
	struct ptd_insncache *c;
	(void)ptd_insncache_new(0, &c);
	struct ptd_insncache_stats st;
	int id, err;

	REQUIRE(c);
	memset(nops, 0x90, sizeof(nops));
	id = map_bytes("nops.bin", nops, sizeof(nops), 0x600000);
	REQUIRE(id > 0);
	for (int pass = 0; pass < 2; pass++) {
		for (uint64_t i = 0; i < N; i++) {
			const struct ptd_icache_entry *e =
				get(c, id, 0x600000 + i, &err);

			REQUIRE(e);
			if (e->ip != 0x600000 + i || e->next != e->ip + 1) {
				CHECK_EQ_U64(e->ip, 0x600000 + i);
				return;
			}
		}
	}
	ptd_insncache_get_stats(c, &st);
	CHECK_EQ_U64(st.misses, N);
	CHECK_EQ_U64(st.hits, N);
	ptd_insncache_free(c);
}

static void cleanup(void)
{
	static const char *files[] = {"code.bin", "a.bin", "b.bin",
				      "nops.bin"};
	char path[256];

	ptd_image_free(img);
	ptd_iscache_free(ic);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		(void)unlink(path);
	}
	(void)rmdir(dir);
}

int main(void)
{
	setup();
	RUN(test_entries);
	RUN(test_hits);
	RUN(test_reader);
	RUN(test_next_links);
	RUN(test_block_links);
	RUN(test_json_body);
	RUN(test_isid0);
	RUN(test_errors);
	RUN(test_region_end);
	RUN(test_read_ahead);
	RUN(test_bound);
	RUN(test_many);
	cleanup();
	return check_done();
}
