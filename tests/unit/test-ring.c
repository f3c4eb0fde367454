/* SPDX-License-Identifier: MIT */
/*
 * The perf ring reader against the kernel-faithful producer and against a
 * real kernel buffer (a software dummy event on this machine).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>

#include "check.h"
#include "perf/producer.h"
#include "perf/ring.h"

#define PAGE 4096u
#define TEST_TYPE 0x7000u	/* a record type of our own */

/* ---- deterministic content ---- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* AUX byte at absolute offset @o. */
static uint8_t aux_byte(uint64_t o)
{
	return (uint8_t)(mix64((o >> 3) ^ 0x5a5a1234ull) >> (8 * (o & 7)));
}

static void aux_fill(uint8_t *dst, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		dst[i] = aux_byte(off + i);
}

static bool aux_verify(const uint8_t *src, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (src[i] != aux_byte(off + i))
			return false;
	return true;
}

/* A test record: header, u64 seq, payload words mix64(seq, i). */
static size_t rec_make(uint64_t *buf, uint64_t seq, size_t size)
{
	struct perf_event_header h = { .type = TEST_TYPE,
				       .size = (uint16_t)size };

	memcpy(buf, &h, sizeof(h));
	buf[1] = seq;
	for (size_t i = 2; i < size / 8; i++)
		buf[i] = mix64(seq * 1000003 + i);
	return size;
}

static bool rec_verify(const struct perf_event_header *h, uint64_t *ret_seq)
{
	const uint64_t *w = (const void *)h;

	if (h->type != TEST_TYPE || h->size < 16)
		return false;
	for (size_t i = 2; i < h->size / 8u; i++)
		if (w[i] != mix64(w[1] * 1000003 + i))
			return false;
	*ret_seq = w[1];
	return true;
}

/* ---- an event log: every callback, as text, for comparisons ---- */

struct log {
	char text[1 << 16];
	size_t len;
	unsigned calls;		/* callbacks so far */
	unsigned fail_at;	/* fail the call with this number (1-based) */
	const void *last_rec;	/* pointer passed to the last record() */
};

static int log_add(struct log *lg, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int log_add(struct log *lg, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (++lg->calls == lg->fail_at)
		return -EIO;
	va_start(ap, fmt);
	n = vsnprintf(lg->text + lg->len, sizeof(lg->text) - lg->len, fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < sizeof(lg->text) - lg->len)
		lg->len += (size_t)n;
	return 0;
}

static int log_record(void *ctx, const struct perf_event_header *h)
{
	struct log *lg = ctx;
	uint64_t sum = 0;

	lg->last_rec = h;
	if (h->type == PERF_RECORD_AUX && h->size >= 32) {
		uint64_t f[3];

		memcpy(f, h + 1, sizeof(f));
		return log_add(lg, "X%" PRIu64 "+%" PRIu64 "/%" PRIx64 " ",
			       f[0], f[1], f[2]);
	}
	for (size_t i = 0; i < h->size; i++)
		sum = sum * 31 + ((const uint8_t *)h)[i];
	return log_add(lg, "R%u/%u/%" PRIx64 " ", h->type, h->size, sum);
}

static int log_aux(void *ctx, uint64_t off, const void *bytes, size_t len)
{
	struct log *lg = ctx;

	return log_add(lg, "A%" PRIu64 "+%zu%s ", off, len,
		       aux_verify(bytes, off, len) ? "" : "!BAD");
}

static int log_loss(void *ctx, const struct ptd_perf_loss *l)
{
	struct log *lg = ctx;

	return log_add(lg, "L%s/r%" PRIu64 "/b%" PRIu64 "%s/@%" PRIu64
		       "/d%" PRIu64 " ", ptd_perf_loss_name(l->kind),
		       l->records, l->bytes, l->bytes_known ? "" : "?",
		       l->aux_offset, l->data_pos);
}

static const struct ptd_perf_reader_ops log_ops = {
	.record = log_record,
	.aux = log_aux,
	.loss = log_loss,
};

static int put_test_rec(struct ptd_perf_producer *p, uint64_t seq,
			size_t size)
{
	uint64_t buf[PTD_PERF_RECORD_MAX / 8 + 1];

	return ptd_perf_producer_record(p, buf, rec_make(buf, seq, size));
}

static int64_t put_aux(struct ptd_perf_producer *p, size_t len,
		       uint64_t flags)
{
	static uint8_t buf[1 << 16];

	aux_fill(buf, p->aux_head, len);
	return ptd_perf_producer_aux(p, buf, len, flags);
}

/* ---- sizes, layout, free ---- */

static void test_sizes(void)
{
	struct ptd_perf_buf b, zero = { 0 };
	struct ptd_diag diag = { "" };
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	memset(&b, 0xcd, sizeof(b));
	CHECK_EQ_INT(ptd_perf_buf_alloc(0, 0, false, &b), -EINVAL);
	CHECK_EQ_INT(ptd_perf_buf_alloc(3 * PAGE, 0, false, &b), -EINVAL);
	CHECK_EQ_INT(ptd_perf_buf_alloc(PAGE / 2, 0, false, &b), -EINVAL);
	CHECK_EQ_INT(ptd_perf_buf_alloc(PAGE, 5 * PAGE, false, &b), -EINVAL);
	CHECK_EQ_INT(ptd_perf_buf_alloc(PAGE, 100, false, &b), -EINVAL);
	CHECK_EQ_U64(b.page_size, 0xcdcdcdcdcdcdcdcdull); /* not written */

	REQUIRE(fd >= 0);
	CHECK_EQ_INT(ptd_perf_buf_map(fd, 3 * PAGE, 0, false, &b, &diag),
		     -EINVAL);
	CHECK_CONTAINS(diag.msg, "data ring size 12288");
	CHECK_EQ_INT(ptd_perf_buf_map(fd, PAGE, 6 * PAGE, true, &b, &diag),
		     -EINVAL);
	CHECK_CONTAINS(diag.msg, "AUX area size 24576");
	CHECK_EQ_INT(ptd_perf_buf_map(fd, 2ull << 30, 0, false, &b, &diag),
		     -EINVAL);
	CHECK_CONTAINS(diag.msg, "above the limit");
	CHECK_EQ_INT(ptd_perf_buf_map(-1, PAGE, 0, false, &b, &diag),
		     -EINVAL);
	CHECK_CONTAINS(diag.msg, "no perf event fd");
	/* /dev/null cannot be mapped shared: the errno comes back */
	CHECK(ptd_perf_buf_map(fd, PAGE, 0, false, &b, &diag) < 0);
	CHECK_CONTAINS(diag.msg, "data ring");
	CHECK_EQ_U64(b.page_size, 0xcdcdcdcdcdcdcdcdull);
	close(fd);

	ptd_perf_buf_fini(NULL);
	ptd_perf_buf_fini(&zero);
	ptd_perf_buf_fini(&zero);
}

static void test_alloc_layout(void)
{
	struct ptd_perf_buf b;
	struct perf_event_mmap_page *m;

	REQUIRE(ptd_perf_buf_alloc(2 * PAGE, 4 * PAGE, false, &b) == 0);
	m = b.meta;
	CHECK_EQ_INT(b.kind, PTD_PERF_BUF_ALLOC);
	CHECK_EQ_U64(m->data_offset, PAGE);
	CHECK_EQ_U64(m->data_size, 2 * PAGE);
	CHECK_EQ_U64(m->aux_offset, 3 * PAGE);
	CHECK_EQ_U64(m->aux_size, 4 * PAGE);
	CHECK_EQ_U64(m->size, offsetof(struct perf_event_mmap_page, __reserved));
	CHECK_EQ_U64(m->cap_bit0_is_deprecated, 1);
	CHECK_EQ_U64(m->data_head, 0);
	CHECK_EQ_U64(m->aux_head, 0);
	CHECK((uint8_t *)b.data == (uint8_t *)m + PAGE);
	CHECK((uint8_t *)b.aux == (uint8_t *)m + 3 * PAGE);
	b.aux[4 * PAGE - 1] = 1;	/* all of it mapped and writable */
	ptd_perf_buf_fini(&b);
	CHECK(b.meta == NULL && b.kind == PTD_PERF_BUF_NONE);
	ptd_perf_buf_fini(&b);

	REQUIRE(ptd_perf_buf_alloc(PAGE, 0, false, &b) == 0);
	CHECK(b.aux == NULL);
	CHECK_EQ_U64(b.meta->aux_offset, 0);
	ptd_perf_buf_fini(&b);
}

static void test_producer_einval(void)
{
	struct ptd_perf_buf b;
	struct ptd_perf_producer p;
	uint64_t rec[4] = { 0 };
	struct perf_event_header h = { .type = TEST_TYPE, .size = 24 };

	REQUIRE(ptd_perf_buf_alloc(PAGE, 0, false, &b) == 0);
	ptd_perf_producer_init(&p, &b);
	memcpy(rec, &h, sizeof(h));
	CHECK_EQ_INT(ptd_perf_producer_record(&p, rec, 32), -EINVAL);
	CHECK_EQ_INT(ptd_perf_producer_record(&p, rec, 20), -EINVAL);
	CHECK_EQ_INT(ptd_perf_producer_record(&p, NULL, 24), -EINVAL);
	CHECK_EQ_INT(ptd_perf_producer_record(&p, rec, 4), -EINVAL);
	CHECK_EQ_INT(ptd_perf_producer_aux(&p, rec, 8, 0), -EINVAL);
	CHECK_EQ_INT(ptd_perf_producer_inject_aux_gap(&p, 8), -EINVAL);
	CHECK_EQ_INT(ptd_perf_producer_record(&p, rec, 24), 0);
	CHECK_EQ_U64(b.meta->data_head, 24);
	ptd_perf_buf_fini(&b);
}

/* ---- deterministic reader tests ---- */

static void test_straddle(void)
{
	struct ptd_perf_buf b;
	struct ptd_perf_producer p;
	struct ptd_perf_reader *r = malloc(sizeof(*r));
	struct log *lg = calloc(1, sizeof(*lg));
	uint64_t seq;

	REQUIRE(r && lg);
	REQUIRE(ptd_perf_buf_alloc(PAGE, 0, false, &b) == 0);
	ptd_perf_producer_init(&p, &b);
	ptd_perf_reader_init(r, &b);
	/* move the ring position to 16 bytes before the end */
	CHECK_EQ_INT(put_test_rec(&p, 1, PAGE - 16 - 1024), 0);
	CHECK_EQ_INT(put_test_rec(&p, 2, 1024), 0);
	CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 2);
	CHECK_EQ_U64(r->data_tail, PAGE - 16);
	CHECK_EQ_U64(b.meta->data_tail, PAGE - 16);
	/* 16 bytes at the end, 1008 wrapped to the start */
	CHECK_EQ_INT(put_test_rec(&p, 3, 1024), 0);
	/* a header split exactly at the wrap cannot happen (8-aligned),
	 * but a header right at the end with the body wrapped can */
	CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 1);
	CHECK(lg->last_rec == (const void *)r->copy);
	CHECK(rec_verify(lg->last_rec, &seq));
	CHECK_EQ_U64(seq, 3);
	/* ring position 1008: fill up to 8 bytes before the end */
	CHECK_EQ_INT(put_test_rec(&p, 4, PAGE - 8 - 1008), 0);
	CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 1);
	CHECK(lg->last_rec != (const void *)r->copy);	/* in place */
	CHECK_EQ_INT(put_test_rec(&p, 5, 1024), 0); /* 8 bytes + 1016 */
	CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 1);
	CHECK(lg->last_rec == (const void *)r->copy);
	CHECK(rec_verify(lg->last_rec, &seq));
	CHECK_EQ_U64(seq, 5);
	CHECK_EQ_U64(r->records, 5);
	CHECK_EQ_U64(r->corrupt_bytes, 0);
	free(r);
	free(lg);
	ptd_perf_buf_fini(&b);
}

static void test_lost_records(void)
{
	struct ptd_perf_buf b;
	struct ptd_perf_producer p;
	struct ptd_perf_reader *r = malloc(sizeof(*r));
	struct log *lg = calloc(1, sizeof(*lg));
	size_t dfree;

	REQUIRE(r && lg);
	REQUIRE(ptd_perf_buf_alloc(PAGE, 0, false, &b) == 0);
	ptd_perf_producer_init(&p, &b);
	p.id = 77;
	ptd_perf_reader_init(r, &b);
	/* CIRC_SPACE: at most PAGE - 1 bytes in use, so not 4 x 1024 */
	for (int i = 0; i < 3; i++)
		CHECK_EQ_INT(put_test_rec(&p, (uint64_t)i, 1024), 0);
	CHECK_EQ_INT(put_test_rec(&p, 3, 1024), -ENOSPC);
	/* the next record goes in only if the LOST (24) fits with it */
	CHECK_EQ_INT(put_test_rec(&p, 4, 1000), -ENOSPC);
	CHECK_EQ_INT(put_test_rec(&p, 5, 992), 0);
	CHECK_EQ_U64(p.lost_written, 1);
	CHECK_EQ_INT(put_test_rec(&p, 6, 8 * 3), -ENOSPC);
	CHECK_EQ_INT(put_test_rec(&p, 7, 16), -ENOSPC);
	CHECK_EQ_U64(p.lost_records, 4);
	ptd_perf_producer_space(&p, &dfree, NULL);
	CHECK_EQ_U64(dfree, 0);
	CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 5);
	lg->text[lg->len] = 0;
	CHECK_CONTAINS(lg->text, "Llost-records/r2/b0/@0/d3072 R2/24/");
	CHECK_EQ_U64(r->lost_records, 2);
	/* room now, but the LOST record goes first */
	ptd_perf_producer_space(&p, &dfree, NULL);
	CHECK_EQ_U64(dfree, PAGE - 8 - 24);
	CHECK_EQ_INT(put_test_rec(&p, 7, 32), 0);
	CHECK_EQ_U64(p.pending_lost, 0);
	lg->len = 0;
	CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 2);
	lg->text[lg->len] = 0;
	CHECK_CONTAINS(lg->text, "Llost-records/r2/b0/@0/d4088 R2/24/");
	CHECK_EQ_U64(r->lost_records, 4);
	/* flush writes a pending LOST with no record behind it */
	/* 255 x 16 bytes fit, 15 bytes stay free: too few for a LOST */
	for (uint64_t i = 0; i < 300; i++)
		(void)put_test_rec(&p, 8 + i, 16);
	CHECK(p.pending_lost > 0);
	CHECK_EQ_INT(ptd_perf_producer_flush(&p), -ENOSPC);
	{
		uint64_t pend = p.pending_lost, before = r->lost_records;

		CHECK(ptd_perf_reader_drain(r, &log_ops, lg) > 0);
		CHECK_EQ_INT(ptd_perf_producer_flush(&p), 0);
		CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 1);
		CHECK_EQ_U64(r->lost_records - before, pend);
		CHECK_EQ_U64(r->lost_records, p.lost_records);
	}
	free(r);
	free(lg);
	ptd_perf_buf_fini(&b);
}

/* A LOST_SAMPLES record from the kernel. */
static void test_lost_samples(void)
{
	struct ptd_perf_buf b;
	struct ptd_perf_producer p;
	struct ptd_perf_reader *r = malloc(sizeof(*r));
	struct log *lg = calloc(1, sizeof(*lg));
	uint64_t rec[2] = { 0, 9 };
	struct perf_event_header h = { .type = PERF_RECORD_LOST_SAMPLES,
				       .size = 16 };

	REQUIRE(r && lg);
	REQUIRE(ptd_perf_buf_alloc(PAGE, 0, false, &b) == 0);
	ptd_perf_producer_init(&p, &b);
	ptd_perf_reader_init(r, &b);
	memcpy(rec, &h, sizeof(h));
	CHECK_EQ_INT(ptd_perf_producer_record(&p, rec, 16), 0);
	CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 1);
	lg->text[lg->len] = 0;
	CHECK_CONTAINS(lg->text, "Llost-samples/r9/");
	CHECK_EQ_U64(r->lost_samples, 9);
	CHECK_EQ_U64(r->lost_records, 0);
	free(r);
	free(lg);
	ptd_perf_buf_fini(&b);
}

static void test_corrupt(void)
{
	static const uint16_t bad[] = { 0, 4, 12, 60000 };
	struct ptd_perf_buf b;
	struct ptd_perf_producer p;
	struct ptd_perf_reader *r = malloc(sizeof(*r));
	struct log *lg = calloc(1, sizeof(*lg));

	REQUIRE(r && lg);
	REQUIRE(ptd_perf_buf_alloc(PAGE, PAGE, false, &b) == 0);
	ptd_perf_producer_init(&p, &b);
	ptd_perf_reader_init(r, &b);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t before = r->corrupt_bytes;

		lg->len = 0;
		CHECK_EQ_INT(put_test_rec(&p, 1, 64), 0);
		ptd_perf_producer_inject_bad_size(&p, bad[i]);
		CHECK_EQ_INT(put_test_rec(&p, 2, 64), 0);
		CHECK_EQ_INT(put_test_rec(&p, 3, 128), 0);
		/* the good record, then the rest (64 + 128) skipped */
		CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 1);
		CHECK_EQ_U64(r->corrupt_bytes - before, 192);
		CHECK_EQ_U64(r->data_tail, b.meta->data_head);
		lg->text[lg->len] = 0;
		CHECK_CONTAINS(lg->text, "Lcorrupt/r0/b192/");
		/* and reading goes on after the resync */
		CHECK_EQ_INT(put_test_rec(&p, 4, 32), 0);
		CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 1);
	}
	/* a PERF_RECORD_AUX too short for its fields: that record only */
	{
		uint64_t rec[3] = { 0 };
		struct perf_event_header h = { .type = PERF_RECORD_AUX,
					       .size = 24 };
		uint64_t before = r->corrupt_bytes;

		memcpy(rec, &h, sizeof(h));
		CHECK_EQ_INT(ptd_perf_producer_record(&p, rec, 24), 0);
		CHECK_EQ_INT(put_test_rec(&p, 5, 32), 0);
		CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 1);
		CHECK_EQ_U64(r->corrupt_bytes - before, 24);
	}
	/* a head more than a ring ahead of the tail: resync at it */
	{
		uint64_t before = r->corrupt_bytes;

		b.meta->data_head = r->data_tail + 2 * PAGE;
		CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 0);
		CHECK_EQ_U64(r->corrupt_bytes - before, 2 * PAGE);
		CHECK_EQ_U64(b.meta->data_tail, b.meta->data_head);
	}
	/* an AUX record reaching back into consumed bytes */
	{
		uint64_t rec[4] = { 0, 0, 16, 0 };
		struct perf_event_header h = { .type = PERF_RECORD_AUX,
					       .size = 32 };
		uint64_t before = r->corrupt_bytes;

		ptd_perf_producer_init(&p, &b);
		CHECK(put_aux(&p, 64, 0) == 64);
		memcpy(rec, &h, sizeof(h));
		rec[1] = 48;	/* [48, 64) again, and [64, 80) new */
		rec[2] = 32;
		aux_fill(b.aux + 64, 64, 16);
		b.meta->aux_head = 80;
		CHECK_EQ_INT(ptd_perf_producer_record(&p, rec, 32), 0);
		lg->len = 0;
		CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 2);
		lg->text[lg->len] = 0;
		CHECK_CONTAINS(lg->text, "A0+64 X0+64/0 Lcorrupt/r0/b16/@48/");
		CHECK_CONTAINS(lg->text, " A64+16 X48+32/0 ");
		CHECK_EQ_U64(r->corrupt_bytes, before + 0);
		CHECK_EQ_U64(r->aux_bytes, 80);
		CHECK_EQ_U64(b.meta->aux_tail, 80);
	}
	free(r);
	free(lg);
	ptd_perf_buf_fini(&b);
}

static void test_aux_flags_and_gaps(void)
{
	struct ptd_perf_buf b;
	struct ptd_perf_producer p;
	struct ptd_perf_reader *r = malloc(sizeof(*r));
	struct log *lg = calloc(1, sizeof(*lg));
	size_t afree;

	REQUIRE(r && lg);
	REQUIRE(ptd_perf_buf_alloc(4 * PAGE, 2 * PAGE, false, &b) == 0);
	ptd_perf_producer_init(&p, &b);
	ptd_perf_reader_init(r, &b);

	CHECK(put_aux(&p, 100, PERF_AUX_FLAG_PARTIAL) == 100);
	CHECK(put_aux(&p, 50, PERF_AUX_FLAG_COLLISION) == 50);
	CHECK_EQ_INT(ptd_perf_producer_inject_aux_gap(&p, 1000), 0);
	CHECK(put_aux(&p, 30, 0) == 30);
	CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 3);
	lg->text[lg->len] = 0;
	CHECK_EQ_STR(lg->text,
		     "Laux-partial/r0/b100/@0/d0 A0+100 X0+100/4 "
		     "Laux-collision/r0/b50/@100/d32 A100+50 X100+50/8 "
		     "Laux-gap/r0/b1000/@150/d64 A1150+30 X1150+30/0 ");
	CHECK_EQ_U64(r->partial, 1);
	CHECK_EQ_U64(r->collision, 1);
	CHECK_EQ_U64(r->lost_aux_bytes, 1000);
	CHECK_EQ_U64(r->aux_bytes, 180);
	CHECK_EQ_U64(b.meta->aux_tail, 1180);	/* the gap is given back */

	/* full ring: what fits goes in, the rest is TRUNCATED */
	ptd_perf_producer_space(&p, NULL, &afree);
	CHECK_EQ_U64(afree, 2 * PAGE - 1);
	CHECK(put_aux(&p, 2 * PAGE, 0) == 2 * PAGE - 1);
	CHECK_EQ_U64(p.aux_lost_bytes, 1);
	CHECK(put_aux(&p, 10, 0) == -ENOSPC);	/* zero-size TRUNCATED */
	CHECK_EQ_U64(p.aux_lost_bytes, 11);
	CHECK_EQ_U64(p.truncated, 2);
	lg->len = 0;
	CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 2);
	lg->text[lg->len] = 0;
	/* the 8191-byte chunk wraps the AUX ring: two pieces */
	CHECK_EQ_STR(lg->text, "A1180+7012 A8192+1179 Laux-truncated/r0/b0?"
			       "/@9371/d96 X1180+8191/1 "
			       "Laux-truncated/r0/b0?/@9371/d128 X9371+0/1 ");
	CHECK_EQ_U64(r->truncated, 2);
	CHECK(strstr(lg->text, "!BAD") == NULL);
	free(r);
	free(lg);
	ptd_perf_buf_fini(&b);
}

/* The same scenario, for the resume test: every kind of step. */
/* Data ring 4 KiB, AUX 16 KiB. */
static void scenario(struct ptd_perf_producer *p)
{
	CHECK_EQ_INT(put_test_rec(p, 1, 3000), 0);
	CHECK(put_aux(p, 3000, PERF_AUX_FLAG_PARTIAL |
				       PERF_AUX_FLAG_COLLISION) == 3000);
	CHECK_EQ_INT(ptd_perf_producer_inject_aux_gap(p, 500), 0);
	CHECK(put_aux(p, 3000, 0) == 3000);
	CHECK_EQ_INT(put_test_rec(p, 2, 2000), -ENOSPC); /* LOST */
}

/* After a drain (data tail 3064, AUX tail 6500). */
static void scenario2(struct ptd_perf_producer *p)
{
	CHECK_EQ_INT(put_test_rec(p, 3, 1000), 0);	/* LOST first */
	CHECK_EQ_INT(put_test_rec(p, 4, 16), 0);	/* straddles */
	CHECK(put_aux(p, 12000, 0) == 12000);		/* wraps */
	CHECK(put_aux(p, 9000, 0) == 4383);		/* TRUNCATED */
}

/* Run the scenario, draining with a callback that fails at call @fail_at
 * (0: never), then draining again until done; return the log. */
static void run_resume(unsigned fail_at, struct log *lg,
		       struct ptd_perf_reader *r, bool *ret_failed)
{
	struct ptd_perf_buf b;
	struct ptd_perf_producer p;
	int ret;

	*ret_failed = false;
	if (ptd_perf_buf_alloc(PAGE, 4 * PAGE, false, &b) < 0)
		return;
	ptd_perf_producer_init(&p, &b);
	ptd_perf_reader_init(r, &b);
	memset(lg, 0, sizeof(*lg));
	lg->fail_at = fail_at;
	scenario(&p);
	for (int tries = 0; tries < 3; tries++) {
		ret = ptd_perf_reader_drain(r, &log_ops, lg);
		if (ret == -EIO)
			*ret_failed = true;
		else
			break;
	}
	scenario2(&p);
	for (int tries = 0; tries < 3; tries++) {
		ret = ptd_perf_reader_drain(r, &log_ops, lg);
		if (ret == -EIO)
			*ret_failed = true;
		else
			break;
	}
	CHECK(ret >= 0);
	ptd_perf_buf_fini(&b);
}

static void test_resume_after_error(void)
{
	struct log *ref = calloc(1, sizeof(*ref)), *lg = calloc(1, sizeof(*lg));
	struct ptd_perf_reader *r0 = malloc(sizeof(*r0));
	struct ptd_perf_reader *r = malloc(sizeof(*r));
	bool failed;
	unsigned k;

	REQUIRE(ref && lg && r0 && r);
	run_resume(0, ref, r0, &failed);
	ref->text[ref->len] = 0;
	CHECK(!failed);
	/* sanity: the scenario has every kind of step */
	CHECK_CONTAINS(ref->text, "Laux-partial");
	CHECK_CONTAINS(ref->text, "Laux-collision");
	CHECK_CONTAINS(ref->text, "Laux-gap/r0/b500/");
	CHECK_CONTAINS(ref->text, "Laux-truncated");
	CHECK_CONTAINS(ref->text, "Llost-records/r1/");
	CHECK_CONTAINS(ref->text, " A6500+9884 A16384+2116 X6500+12000/0 ");
	CHECK(strstr(ref->text, "!BAD") == NULL);
	for (k = 1; k < 100; k++) {
		run_resume(k, lg, r, &failed);
		if (!failed)
			break;
		lg->text[lg->len] = 0;
		if (strcmp(lg->text, ref->text) != 0) {
			CHECK_FAIL_("failing call %u: expected \"%s\", got "
				    "\"%s\"", k, ref->text, lg->text);
			break;
		}
		CHECK_EQ_U64(r->records, r0->records);
		CHECK_EQ_U64(r->aux_bytes, r0->aux_bytes);
		CHECK_EQ_U64(r->lost_records, r0->lost_records);
		CHECK_EQ_U64(r->lost_aux_bytes, r0->lost_aux_bytes);
		CHECK_EQ_U64(r->truncated, r0->truncated);
		CHECK_EQ_U64(r->partial, r0->partial);
	}
	CHECK(k > 10);	/* every callback was made to fail once */
	free(ref);
	free(lg);
	free(r0);
	free(r);
}

static void test_snapshot(void)
{
	struct ptd_perf_buf b;
	struct ptd_perf_producer p;
	struct ptd_perf_reader *r = malloc(sizeof(*r));
	struct log *lg = calloc(1, sizeof(*lg));
	size_t afree;

	REQUIRE(r && lg);
	REQUIRE(ptd_perf_buf_alloc(PAGE, 2 * PAGE, true, &b) == 0);
	ptd_perf_producer_init(&p, &b);
	ptd_perf_reader_init(r, &b);

	/* before anything: an empty snapshot */
	CHECK_EQ_INT(ptd_perf_reader_snapshot(r, &log_ops, lg), 0);
	CHECK(put_aux(&p, 3000, 0) == 3000);
	CHECK_EQ_INT(ptd_perf_reader_snapshot(r, &log_ops, lg), 3000);
	lg->text[lg->len] = 0;
	CHECK_EQ_STR(lg->text, "A0+3000 ");
	/* overwrite mode writes no AUX records and ignores aux_tail */
	CHECK_EQ_U64(b.meta->data_head, 0);
	ptd_perf_producer_space(&p, NULL, &afree);
	CHECK_EQ_U64(afree, 2 * PAGE);
	for (int i = 0; i < 10; i++)
		CHECK(put_aux(&p, 3000, 0) == 3000);
	CHECK(put_aux(&p, 20000, 0) == 20000);	/* longer than the ring */
	lg->len = 0;
	CHECK_EQ_INT(ptd_perf_reader_snapshot(r, &log_ops, lg), 2 * PAGE);
	lg->text[lg->len] = 0;
	/* head 53000: the newest 8192 bytes from 44808, oldest first;
	 * 50000 written since the last snapshot, 8192 kept: 41808 lost */
	CHECK_EQ_STR(lg->text, "Laux-overwritten/r0/b41808/@3000/d0 "
			       "A44808+4344 A49152+3848 ");
	CHECK_EQ_U64(r->lost_aux_bytes, 41808);
	/* a little more: nothing lost, the whole window again */
	CHECK(put_aux(&p, 100, 0) == 100);
	lg->len = 0;
	CHECK_EQ_INT(ptd_perf_reader_snapshot(r, &log_ops, lg), 2 * PAGE);
	lg->text[lg->len] = 0;
	CHECK_EQ_STR(lg->text, "A44908+4244 A49152+3948 ");
	/* flags other than OVERWRITE still make a record */
	CHECK(put_aux(&p, 10, PERF_AUX_FLAG_PARTIAL) == 10);
	lg->len = 0;
	CHECK_EQ_INT(ptd_perf_reader_drain(r, &log_ops, lg), 1);
	lg->text[lg->len] = 0;
	/* no bytes from drain in overwrite mode */
	CHECK_EQ_STR(lg->text, "Laux-partial/r0/b10/@53100/d0 X53100+10/6 ");
	CHECK_EQ_U64(b.meta->aux_tail, 0);

	/* a callback error: nothing advances */
	CHECK(put_aux(&p, 3 * PAGE, 0) == 3 * PAGE);
	memset(lg, 0, sizeof(*lg));
	lg->fail_at = 2;
	CHECK_EQ_INT(ptd_perf_reader_snapshot(r, &log_ops, lg), -EIO);
	CHECK_EQ_U64(r->snap_head, 53100);
	lg->fail_at = 0;
	lg->len = 0;
	CHECK_EQ_INT(ptd_perf_reader_snapshot(r, &log_ops, lg), 2 * PAGE);
	lg->text[lg->len] = 0;
	CHECK_CONTAINS(lg->text, "Laux-overwritten/r0/b4106/@53100/");
	CHECK(strstr(lg->text, "!BAD") == NULL);

	/* not in overwrite mode: refused */
	{
		struct ptd_perf_buf fb;
		struct ptd_perf_reader *fr = malloc(sizeof(*fr));

		REQUIRE(fr);
		REQUIRE(ptd_perf_buf_alloc(PAGE, PAGE, false, &fb) == 0);
		ptd_perf_reader_init(fr, &fb);
		CHECK_EQ_INT(ptd_perf_reader_snapshot(fr, &log_ops, lg),
			     -EINVAL);
		ptd_perf_buf_fini(&fb);
		free(fr);
	}
	free(r);
	free(lg);
	ptd_perf_buf_fini(&b);
}

static void test_wake(void)
{
	struct ptd_perf_buf b;
	struct ptd_perf_producer p;
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint64_t v = 0;

	REQUIRE(efd >= 0);
	REQUIRE(ptd_perf_buf_alloc(2 * PAGE, 2 * PAGE, false, &b) == 0);
	ptd_perf_producer_init(&p, &b);
	ptd_perf_producer_set_wake(&p, efd, 1000);
	CHECK_EQ_INT(put_test_rec(&p, 1, 512), 0);
	CHECK_EQ_INT(read(efd, &v, sizeof(v)), -1);	/* 512 < 1000 */
	CHECK_EQ_INT(errno, EAGAIN);
	CHECK_EQ_INT(put_test_rec(&p, 2, 512), 0);
	CHECK_EQ_INT(read(efd, &v, sizeof(v)), 8);
	CHECK_EQ_U64(v, 1);
	CHECK(put_aux(&p, 968, 0) == 968);		/* 968 + 32 */
	CHECK_EQ_INT(read(efd, &v, sizeof(v)), 8);
	CHECK_EQ_U64(p.wakes, 2);
	CHECK_EQ_INT(put_test_rec(&p, 3, 16), 0);
	CHECK_EQ_INT(read(efd, &v, sizeof(v)), -1);
	CHECK_EQ_INT(ptd_perf_producer_flush(&p), 0);	/* flush wakes */
	CHECK_EQ_INT(read(efd, &v, sizeof(v)), 8);
	CHECK_EQ_U64(p.since_wake, 0);
	close(efd);
	ptd_perf_buf_fini(&b);
}

/* ---- a producer thread against the reader ---- */

struct stress {
	struct ptd_perf_buf b;
	struct ptd_perf_producer p;
	bool lossless;
	unsigned ops;
	uint64_t seed;
	atomic_bool done;
	atomic_bool go;		/* lossy: the reader starts late */
	/* producer side */
	uint64_t attempts;	/* records attempted (AUX records too) */
	uint64_t aux_offered;	/* AUX bytes offered */
	uint64_t spins;
	/* consumer side */
	uint64_t next_attempt;
	uint64_t aux_pos;
	uint64_t got_test, got_aux_recs, got_aux, lost, gap, truncs;
	bool bad;
	char why[256];
};

static uint64_t rng_next(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	return mix64(*s);
}

static void stress_wait(struct stress *s, size_t data_need, size_t aux_need)
{
	size_t df, af;

	for (;;) {
		ptd_perf_producer_space(&s->p, &df, aux_need ? &af : NULL);
		if (df >= data_need && (!aux_need || af >= aux_need))
			return;
		s->spins++;
		sched_yield();
	}
}

static void *stress_producer(void *arg)
{
	struct stress *s = arg;
	uint64_t rng = s->seed;
	static uint8_t chunk[8192];

	for (unsigned i = 0; i < s->ops; i++) {
		uint64_t x = rng_next(&rng);

		if (x % 8 == 0) {
			/* AUX: chunks of 1 .. 4 KiB, some up to 8 KiB */
			size_t len = 1 + (size_t)((x >> 8) % ((x >> 40) % 4 ?
							       4096 : 8192));

			if (s->lossless) {
				if (len > s->b.aux_size - 1)
					len = s->b.aux_size - 1;
				stress_wait(s, 32, len);
			}
			aux_fill(chunk, s->p.aux_head, len);
			(void)ptd_perf_producer_aux(&s->p, chunk, len, 0);
			s->aux_offered += len;
			s->attempts++;
		} else {
			size_t size = 16 + 8 * (size_t)((x >> 8) % 8);

			if ((x >> 20) % 16 == 0)
				size = 16 + 8 * (size_t)((x >> 24) % 254);
			if (s->lossless)
				stress_wait(s, size, 0);
			(void)put_test_rec(&s->p, s->attempts, size);
			s->attempts++;
		}
		/* Lossy: let the reader start only once the first 1000 ops
		 * overflowed both rings, so both kinds of loss happen. */
		if (i == 1000 || i + 1 == s->ops)
			atomic_store(&s->go, true);
		if (!s->lossless && i % 64 == 0)
			sched_yield();
	}
	/* End of stream: the pending LOST, then one last AUX chunk written
	 * without loss, so dropped AUX records show as a final gap. */
	while (ptd_perf_producer_flush(&s->p) == -ENOSPC)
		sched_yield();
	stress_wait(s, 32, 8);
	aux_fill(chunk, s->p.aux_head, 8);
	(void)ptd_perf_producer_aux(&s->p, chunk, 8, 0);
	s->aux_offered += 8;
	s->attempts++;
	atomic_store(&s->done, true);
	return NULL;
}

static void stress_fail(struct stress *s, const char *why, uint64_t a,
			uint64_t b)
{
	if (!s->bad)
		snprintf(s->why, sizeof(s->why), "%s (%" PRIu64 " vs %" PRIu64
			 ")", why, a, b);
	s->bad = true;
}

static int stress_record(void *ctx, const struct perf_event_header *h)
{
	struct stress *s = ctx;
	uint64_t seq;

	if (h->type == PERF_RECORD_AUX) {
		uint64_t f[3];

		memcpy(f, h + 1, sizeof(f));
		if (f[0] + f[1] != s->aux_pos)
			stress_fail(s, "AUX record end != bytes received",
				    f[0] + f[1], s->aux_pos);
		s->got_aux_recs++;
		s->next_attempt++;
	} else if (h->type == PERF_RECORD_LOST) {
		/* counted by the loss */
	} else if (!rec_verify(h, &seq)) {
		stress_fail(s, "bad record", h->type, h->size);
	} else {
		if (seq != s->next_attempt)
			stress_fail(s, "record out of sequence", seq,
				    s->next_attempt);
		s->next_attempt = seq + 1;
		s->got_test++;
	}
	return 0;
}

static int stress_aux(void *ctx, uint64_t off, const void *bytes, size_t len)
{
	struct stress *s = ctx;

	if (off != s->aux_pos)
		stress_fail(s, "AUX bytes out of order", off, s->aux_pos);
	if (!aux_verify(bytes, off, len))
		stress_fail(s, "AUX bytes corrupt at", off, len);
	s->aux_pos = off + len;
	s->got_aux += len;
	return 0;
}

static int stress_loss(void *ctx, const struct ptd_perf_loss *l)
{
	struct stress *s = ctx;

	switch (l->kind) {
	case PTD_PERF_LOSS_RECORDS:
		s->lost += l->records;
		s->next_attempt += l->records;
		break;
	case PTD_PERF_LOSS_AUX_GAP:
		if (l->aux_offset != s->aux_pos)
			stress_fail(s, "gap not where expected", l->aux_offset,
				    s->aux_pos);
		s->gap += l->bytes;
		s->aux_pos += l->bytes;
		break;
	case PTD_PERF_LOSS_TRUNCATED:
		s->truncs++;
		break;
	case PTD_PERF_LOSS_SAMPLES:
	case PTD_PERF_LOSS_PARTIAL:
	case PTD_PERF_LOSS_COLLISION:
	case PTD_PERF_LOSS_OVERWRITTEN:
	case PTD_PERF_LOSS_CORRUPT:
		stress_fail(s, "unexpected loss kind", l->kind, l->bytes);
		break;
	}
	return 0;
}

static void run_stress(bool lossless, unsigned ops)
{
	static const struct ptd_perf_reader_ops ops_ = {
		.record = stress_record,
		.aux = stress_aux,
		.loss = stress_loss,
	};
	struct stress *s = calloc(1, sizeof(*s));
	struct ptd_perf_reader *r = malloc(sizeof(*r));
	pthread_t th;
	uint64_t drained = 0;

	REQUIRE(s && r);
	REQUIRE(ptd_perf_buf_alloc(2 * PAGE, 4 * PAGE, false, &s->b) == 0);
	ptd_perf_producer_init(&s->p, &s->b);
	ptd_perf_reader_init(r, &s->b);
	s->lossless = lossless;
	s->ops = ops;
	s->seed = lossless ? 1 : 2;
	atomic_store(&s->go, lossless);
	REQUIRE(pthread_create(&th, NULL, stress_producer, s) == 0);
	while (!atomic_load(&s->go))
		sched_yield();
	for (;;) {
		bool done = atomic_load(&s->done);
		int n = ptd_perf_reader_drain(r, &ops_, s);

		if (n < 0) {
			stress_fail(s, "drain failed", (uint64_t)-n, 0);
			break;
		}
		drained += (uint64_t)n;
		if (done && n == 0)
			break;
		if (n == 0)
			sched_yield();
	}
	pthread_join(th, NULL);

	if (s->bad)
		CHECK_FAIL_("%s", s->why);
	fprintf(stderr, "  %s: %" PRIu64 " attempts, %" PRIu64 " test + %"
		PRIu64 " AUX records, %" PRIu64 " lost, %" PRIu64
		" AUX bytes, %" PRIu64 " gap, %" PRIu64 " truncated (%" PRIu64
		" bytes), %" PRIu64 " producer waits\n",
		lossless ? "lossless" : "lossy", s->attempts, s->got_test,
		s->got_aux_recs, s->lost, s->got_aux, s->gap, s->truncs,
		s->p.aux_lost_bytes, s->spins);
	/* records: every attempt received or counted lost */
	CHECK_EQ_U64(s->next_attempt, s->attempts);
	CHECK_EQ_U64(s->got_test + s->got_aux_recs + s->lost, s->attempts);
	CHECK_EQ_U64(s->lost, s->p.lost_records);
	CHECK_EQ_U64(r->lost_records, s->p.lost_records);
	CHECK_EQ_U64(drained, s->got_test + s->got_aux_recs +
				      s->p.lost_written);
	/* AUX bytes: received + gaps == written; written + truncated ==
	 * offered */
	CHECK_EQ_U64(s->got_aux + s->gap, s->p.aux_head);
	CHECK_EQ_U64(s->gap, s->p.aux_unannounced);
	CHECK_EQ_U64(s->p.aux_bytes + s->p.aux_lost_bytes, s->aux_offered);
	CHECK_EQ_U64(s->truncs, s->p.truncated - s->p.truncated_lost);
	CHECK_EQ_U64(r->aux_bytes, s->got_aux);
	CHECK_EQ_U64(r->corrupt_bytes, 0);
	CHECK_EQ_U64(s->b.meta->aux_tail, s->p.aux_head);
	if (lossless) {
		CHECK_EQ_U64(s->lost + s->gap + s->truncs, 0);
		CHECK_EQ_U64(s->p.aux_lost_bytes, 0);
	} else {
		/* the lossy run must actually have lost both kinds */
		CHECK(s->lost > 0);
		CHECK(s->p.truncated > 0);
	}
	ptd_perf_buf_fini(&s->b);
	free(s);
	free(r);
}

static unsigned stress_ops(void)
{
	const char *e = getenv("PTD_RING_STRESS_OPS");

	return e ? (unsigned)strtoul(e, NULL, 10) : 800000;
}

static void test_stress_lossless(void)
{
	run_stress(true, stress_ops());
}

static void test_stress_lossy(void)
{
	run_stress(false, stress_ops());
}

/* ---- a real kernel buffer ---- */

struct kseen {
	unsigned mmap2, comm, exit, other, lost;
	bool exe_seen, comm_seen;
	char exe[4096];
};

static int kernel_record(void *ctx, const struct perf_event_header *h)
{
	struct kseen *k = ctx;

	switch (h->type) {
	case PERF_RECORD_MMAP2:
		k->mmap2++;
		if (memmem(h, h->size, k->exe, strlen(k->exe)))
			k->exe_seen = true;
		break;
	case PERF_RECORD_COMM:
		k->comm++;
		if (memmem(h, h->size, "ptdringkid", 10))
			k->comm_seen = true;
		break;
	case PERF_RECORD_EXIT:
		k->exit++;
		break;
	default:
		k->other++;
		break;
	}
	return 0;
}

static int kernel_loss(void *ctx, const struct ptd_perf_loss *l)
{
	struct kseen *k = ctx;

	k->lost++;
	return 0;
}

static void kid(int rfd)
{
	char c;
	int fd;

	if (read(rfd, &c, 1) != 1)
		_exit(2);
	(void)prctl(PR_SET_NAME, "ptdringkid", 0, 0, 0);
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || mmap(NULL, PAGE, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd,
			   0) == MAP_FAILED)
		_exit(3);
	_exit(0);
}

static void test_kernel_buffer(void)
{
	static const struct ptd_perf_reader_ops ops = {
		.record = kernel_record,
		.loss = kernel_loss,
	};
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_DUMMY,
		.mmap = 1,
		.mmap2 = 1,
		.comm = 1,
		.task = 1,
		.exclude_kernel = 1,
	};
	struct ptd_perf_buf b, aux_b;
	struct ptd_diag diag = { "" };
	struct ptd_perf_reader *r = malloc(sizeof(*r));
	struct kseen *k = calloc(1, sizeof(*k));
	int pfd[2], fd, status, err;
	ssize_t n;
	pid_t pid;

	REQUIRE(r && k);
	n = readlink("/proc/self/exe", k->exe, sizeof(k->exe) - 1);
	REQUIRE(n > 0);
	REQUIRE(pipe2(pfd, O_CLOEXEC) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(pfd[1]);
		kid(pfd[0]);
	}
	close(pfd[0]);
	fd = (int)syscall(SYS_perf_event_open, &attr, pid, -1, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		char paranoid[32] = "?";
		FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");

		err = errno;
		if (f) {
			if (!fgets(paranoid, sizeof(paranoid), f))
				paranoid[0] = 0;
			fclose(f);
		}
		fprintf(stderr, "  skipped: perf_event_open refused (%s), "
			"perf_event_paranoid %s\n", strerror(err), paranoid);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		close(pfd[1]);
		free(r);
		free(k);
		return;
	}
	/* a software event has no AUX: refused, with the area named */
	err = ptd_perf_buf_map(fd, 2 * PAGE, 4 * PAGE, false, &aux_b, &diag);
	CHECK(err < 0);
	CHECK_CONTAINS(diag.msg, "AUX area");
	err = ptd_perf_buf_map(fd, 2 * PAGE, 0, false, &b, &diag);
	CHECK_EQ_INT(err, 0);
	if (err < 0) {
		fprintf(stderr, "  %s\n", diag.msg);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		close(pfd[1]);
		close(fd);
		free(r);
		free(k);
		return;
	}
	CHECK_EQ_INT(b.kind, PTD_PERF_BUF_MAPPED);
	CHECK_EQ_U64(b.meta->data_offset, PAGE);
	CHECK_EQ_U64(b.meta->data_size, 2 * PAGE);
	ptd_perf_reader_init(r, &b);
	CHECK_EQ_INT(write(pfd[1], "x", 1), 1);
	close(pfd[1]);
	CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(ptd_perf_reader_drain(r, &ops, k) >= 3);
	CHECK(k->mmap2 >= 1);
	CHECK(k->exe_seen);
	CHECK(k->comm >= 1);
	CHECK(k->comm_seen);
	CHECK_EQ_INT(k->exit, 1);
	CHECK_EQ_INT(k->lost, 0);
	CHECK_EQ_U64(b.meta->data_tail, b.meta->data_head);
	CHECK_EQ_U64(r->corrupt_bytes, 0);
	ptd_perf_buf_fini(&b);
	ptd_perf_buf_fini(&b);
	close(fd);
	free(r);
	free(k);
}

/* In a child without CAP_IPC_LOCK and with RLIMIT_MEMLOCK 0, a data ring
 * above perf_event_mlock_kb is refused: the message must say why.
 * Exit 0 ok, 77 perf unavailable, else the failed step. */
static int memlock_child(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2];
	struct rlimit rl = { 0, 0 };
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_DUMMY,
		.exclude_kernel = 1,
	};
	struct ptd_diag diag = { "" };
	struct ptd_perf_buf b;
	int fd, err;

	if (syscall(SYS_capget, &hdr, data) != 0)
		return 10;
	data[0].effective &= ~(1u << CAP_IPC_LOCK);
	if (syscall(SYS_capset, &hdr, data) != 0)
		return 11;
	if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0)
		return 12;
	fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return 77;
	err = ptd_perf_buf_map(fd, 16u << 20, 0, false, &b, &diag);
	if (err == 0)
		return 13;
	fprintf(stderr, "  child: %s\n", diag.msg);
	if (err != -EPERM)
		return 14;
	if (!strstr(diag.msg, "16384 KiB") ||
	    !strstr(diag.msg, "RLIMIT_MEMLOCK / perf_event_mlock_kb"))
		return 15;
	return 0;
}

static void test_map_memlock_refused(void)
{
	int status;
	pid_t pid = fork();

	REQUIRE(pid >= 0);
	if (pid == 0)
		_exit(memlock_child());
	REQUIRE(waitpid(pid, &status, 0) == pid);
	REQUIRE(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77) {
		fprintf(stderr, "  skipped: perf_event_open refused\n");
		return;
	}
	CHECK_EQ_INT(WEXITSTATUS(status), 0);
}

int main(void)
{
	RUN(test_sizes);
	RUN(test_alloc_layout);
	RUN(test_producer_einval);
	RUN(test_straddle);
	RUN(test_lost_records);
	RUN(test_lost_samples);
	RUN(test_corrupt);
	RUN(test_aux_flags_and_gaps);
	RUN(test_resume_after_error);
	RUN(test_snapshot);
	RUN(test_wake);
	RUN(test_stress_lossless);
	RUN(test_stress_lossy);
	RUN(test_kernel_buffer);
	RUN(test_map_memlock_refused);
	return check_done();
}
