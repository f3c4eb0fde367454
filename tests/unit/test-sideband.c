/* SPDX-License-Identifier: MIT */
/*
 * Tests for perf/sideband: the record parser against hand-written kernel
 * byte layouts and the encoders, every refusal of malformed records, the
 * mapping of records to image changes, the dummy event's attributes, the
 * cpu list parser, and a live run: real dummy sideband events on real test
 * programs, drained through perf/ring, parsed and fed into an image.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "aspace/image.h"
#include "aspace/iscache.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "perf/ring.h"
#include "perf/sideband.h"
#include "check.h"

#define ST_MIN (PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_IDENTIFIER)
#define ST_ALL PTD_PERF_SID_SAMPLE_TYPES

/* Every sample_type combination a test walks through. */
static const uint64_t sample_types[] = {
	0,
	ST_MIN,
	PTD_SIDEBAND_SAMPLE_TYPE,
	ST_ALL,
	PERF_SAMPLE_TIME,
	PERF_SAMPLE_CPU | PERF_SAMPLE_STREAM_ID,
	PERF_SAMPLE_ID | PERF_SAMPLE_TID,
	/* bits that do not shape the trailer are ignored */
	ST_MIN | PERF_SAMPLE_IP | PERF_SAMPLE_PERIOD,
};

static uint64_t buf_u64[PTD_PERF_RECORD_MAX_SIZE / 8 + 8];
#define BUF ((uint8_t *)buf_u64)
#define HDR ((struct perf_event_header *)buf_u64)

static const struct ptd_perf_sample_id test_sid = {
	.pid = 100, .tid = 101, .time = 0x1122334455667788ull,
	.id = 0xa1, .stream_id = 0xb2, .cpu = 3, .identifier = 0x42,
};

/* The trailer fields and mask a parse must give for @st. */
static void check_sid(const struct ptd_perf_sample_id *s, uint64_t st)
{
	uint32_t mask = 0;

	if (st & PERF_SAMPLE_TID) {
		mask |= PTD_PERF_SID_TID;
		CHECK_EQ_INT(s->pid, 100);
		CHECK_EQ_INT(s->tid, 101);
	}
	if (st & PERF_SAMPLE_TIME) {
		mask |= PTD_PERF_SID_TIME;
		CHECK_EQ_U64(s->time, 0x1122334455667788ull);
	}
	if (st & PERF_SAMPLE_ID) {
		mask |= PTD_PERF_SID_ID;
		CHECK_EQ_U64(s->id, 0xa1);
	}
	if (st & PERF_SAMPLE_STREAM_ID) {
		mask |= PTD_PERF_SID_STREAM_ID;
		CHECK_EQ_U64(s->stream_id, 0xb2);
	}
	if (st & PERF_SAMPLE_CPU) {
		mask |= PTD_PERF_SID_CPU;
		CHECK_EQ_INT(s->cpu, 3);
	}
	if (st & PERF_SAMPLE_IDENTIFIER) {
		mask |= PTD_PERF_SID_IDENTIFIER;
		CHECK_EQ_U64(s->identifier, 0x42);
	}
	CHECK_EQ_U64(s->mask, mask);
}

/* Parse what is in BUF with @st (sample_id_all when @st != 0). */
static int parse_buf(uint64_t st, struct ptd_perf_event *ev,
		     struct ptd_diag *d)
{
	return ptd_perf_event_parse(HDR, st, st != 0, ev, d);
}

static void test_sample_id_size(void)
{
	CHECK_EQ_U64(ptd_perf_sample_id_size(0), 0);
	CHECK_EQ_U64(ptd_perf_sample_id_size(ST_MIN), 24);
	CHECK_EQ_U64(ptd_perf_sample_id_size(PTD_SIDEBAND_SAMPLE_TYPE), 32);
	CHECK_EQ_U64(ptd_perf_sample_id_size(ST_ALL), 48);
	CHECK_EQ_U64(ptd_perf_sample_id_size(PERF_SAMPLE_IP |
					     PERF_SAMPLE_CALLCHAIN), 0);
}

/* The kernel's MMAP2 (inode form) of "/lib/a.so", TID|TIME|IDENTIFIER,
 * written out byte by byte (little endian) from struct perf_event_mmap2's
 * documented layout. */
static const uint8_t kernel_mmap2[] = {
	/* type 10, misc USER, size 112 */
	0x0a, 0x00, 0x00, 0x00, 0x02, 0x00, 0x70, 0x00,
	0x64, 0x00, 0x00, 0x00, 0x65, 0x00, 0x00, 0x00,	/* pid 100 tid 101 */
	0x00, 0x10, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00,	/* addr 0x7f0000001000 */
	0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* len 0x2000 */
	0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* pgoff 0x1000 */
	0x08, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,	/* maj 8 min 1 */
	0x34, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* ino 0x1234 */
	0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* ino_generation 7 */
	0x05, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,	/* prot R|X flags PRIVATE */
	'/', 'l', 'i', 'b', '/', 'a', '.', 's',
	'o', 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* filename, padded to 16 */
	0x64, 0x00, 0x00, 0x00, 0x65, 0x00, 0x00, 0x00,	/* sample_id pid, tid */
	0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,	/* time */
	0x42, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* identifier */
};

/* The kernel's COMM with COMM_EXEC of "prog", TID|TIME|IDENTIFIER. */
static const uint8_t kernel_comm[] = {
	0x03, 0x00, 0x00, 0x00, 0x00, 0x20, 0x30, 0x00,	/* type 3 misc EXEC size 48 */
	0x64, 0x00, 0x00, 0x00, 0x64, 0x00, 0x00, 0x00,	/* pid 100 tid 100 */
	'p', 'r', 'o', 'g', 0x00, 0x00, 0x00, 0x00,	/* comm, padded to 8 */
	0x64, 0x00, 0x00, 0x00, 0x65, 0x00, 0x00, 0x00,
	0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
	0x42, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static const struct ptd_perf_mmap test_mmap = {
	.pid = 100, .tid = 101, .addr = 0x7f0000001000ull, .len = 0x2000,
	.pgoff = 0x1000, .maj = 8, .min = 1, .ino = 0x1234,
	.ino_generation = 7, .prot = PROT_READ | PROT_EXEC,
	.flags = MAP_PRIVATE, .filename = "/lib/a.so",
};

static void test_mmap2_kernel_bytes(void)
{
	struct ptd_perf_event ev;
	struct ptd_diag d = { "" };
	size_t n;

	/* The encoder writes exactly the kernel's bytes... */
	memset(BUF, 0xcd, 256);
	n = ptd_perf_encode_mmap2(BUF, sizeof(buf_u64), &test_mmap, ST_MIN,
				  &test_sid);
	CHECK_EQ_U64(n, sizeof(kernel_mmap2));
	CHECK(memcmp(BUF, kernel_mmap2, sizeof(kernel_mmap2)) == 0);
	/* ...and the parser reads the kernel's bytes. */
	memcpy(BUF, kernel_mmap2, sizeof(kernel_mmap2));
	CHECK_EQ_INT(parse_buf(ST_MIN, &ev, &d), 0);
	CHECK_EQ_INT(ev.type, PERF_RECORD_MMAP2);
	CHECK_EQ_INT(ev.misc, PERF_RECORD_MISC_USER);
	CHECK_EQ_INT(ev.size, 112);
	CHECK(!ev.other);
	CHECK_EQ_INT(ev.u.mmap.pid, 100);
	CHECK_EQ_INT(ev.u.mmap.tid, 101);
	CHECK_EQ_U64(ev.u.mmap.addr, 0x7f0000001000ull);
	CHECK_EQ_U64(ev.u.mmap.len, 0x2000);
	CHECK_EQ_U64(ev.u.mmap.pgoff, 0x1000);
	CHECK_EQ_INT(ev.u.mmap.maj, 8);
	CHECK_EQ_INT(ev.u.mmap.min, 1);
	CHECK_EQ_U64(ev.u.mmap.ino, 0x1234);
	CHECK_EQ_U64(ev.u.mmap.ino_generation, 7);
	CHECK_EQ_INT(ev.u.mmap.prot, PROT_READ | PROT_EXEC);
	CHECK_EQ_INT(ev.u.mmap.flags, MAP_PRIVATE);
	CHECK(ev.u.mmap.exec);
	CHECK(!ev.u.mmap.has_build_id);
	CHECK_EQ_STR(ev.u.mmap.filename, "/lib/a.so");
	/* The filename points into the record buffer. */
	CHECK(ev.u.mmap.filename == (const char *)BUF + 72);
	check_sid(&ev.sid, ST_MIN);
}

static void test_comm_kernel_bytes(void)
{
	struct ptd_perf_comm c = { .pid = 100, .tid = 100, .exec = true,
				   .comm = "prog" };
	struct ptd_perf_event ev;
	size_t n;

	memset(BUF, 0xcd, 256);
	n = ptd_perf_encode_comm(BUF, sizeof(buf_u64), &c, ST_MIN, &test_sid);
	CHECK_EQ_U64(n, sizeof(kernel_comm));
	CHECK(memcmp(BUF, kernel_comm, sizeof(kernel_comm)) == 0);
	memcpy(BUF, kernel_comm, sizeof(kernel_comm));
	CHECK_EQ_INT(parse_buf(ST_MIN, &ev, NULL), 0);
	CHECK_EQ_INT(ev.type, PERF_RECORD_COMM);
	CHECK(ev.u.comm.exec);
	CHECK_EQ_INT(ev.u.comm.pid, 100);
	CHECK_EQ_INT(ev.u.comm.tid, 100);
	CHECK_EQ_STR(ev.u.comm.comm, "prog");
	check_sid(&ev.sid, ST_MIN);
	/* A comm without COMM_EXEC (prctl PR_SET_NAME) is no exec. */
	HDR->misc = 0;
	CHECK_EQ_INT(parse_buf(ST_MIN, &ev, NULL), 0);
	CHECK(!ev.u.comm.exec);
}

static void test_roundtrip_mmap2(void)
{
	for (size_t i = 0; i < PTD_ARRAY_SIZE(sample_types); i++) {
		uint64_t st = sample_types[i];
		struct ptd_perf_mmap m = test_mmap;
		struct ptd_perf_event ev;
		size_t n;

		/* inode form, non-executable: MMAP_DATA in misc */
		m.prot = PROT_READ | PROT_WRITE;
		m.filename = "/a/file name with spaces (x)";
		n = ptd_perf_encode_mmap2(BUF, sizeof(buf_u64), &m, st,
					  &test_sid);
		REQUIRE(n > 0);
		CHECK_EQ_U64(n % 8, 0);
		CHECK_EQ_U64(HDR->size, n);
		CHECK_EQ_INT(HDR->misc, PERF_RECORD_MISC_USER |
			     PERF_RECORD_MISC_MMAP_DATA);
		REQUIRE(parse_buf(st, &ev, NULL) == 0);
		CHECK(!ev.u.mmap.exec);
		CHECK_EQ_STR(ev.u.mmap.filename, m.filename);
		CHECK_EQ_U64(ev.u.mmap.ino, 0x1234);
		check_sid(&ev.sid, st);

		/* build-id form */
		m = test_mmap;
		m.has_build_id = true;
		m.build_id_size = 20;
		for (unsigned b = 0; b < 20; b++)
			m.build_id[b] = (uint8_t)(0xb0 + b);
		m.filename = "[vdso]";
		n = ptd_perf_encode_mmap2(BUF, sizeof(buf_u64), &m, st,
					  &test_sid);
		REQUIRE(n > 0);
		CHECK_EQ_INT(HDR->misc, PERF_RECORD_MISC_USER |
			     PERF_RECORD_MISC_MMAP_BUILD_ID);
		REQUIRE(parse_buf(st, &ev, NULL) == 0);
		CHECK(ev.u.mmap.has_build_id);
		CHECK(ev.u.mmap.exec);
		CHECK_EQ_INT(ev.u.mmap.build_id_size, 20);
		CHECK(memcmp(ev.u.mmap.build_id, m.build_id, 20) == 0);
		CHECK_EQ_U64(ev.u.mmap.ino, 0);
		CHECK_EQ_INT(ev.u.mmap.prot, PROT_READ | PROT_EXEC);
		CHECK_EQ_U64(ev.u.mmap.addr, m.addr);
		CHECK_EQ_U64(ev.u.mmap.pgoff, m.pgoff);
		CHECK_EQ_STR(ev.u.mmap.filename, "[vdso]");
		check_sid(&ev.sid, st);
	}
}

static void test_roundtrip_comm_task_itrace(void)
{
	for (size_t i = 0; i < PTD_ARRAY_SIZE(sample_types); i++) {
		uint64_t st = sample_types[i];
		struct ptd_perf_comm c = { .pid = 7, .tid = 8, .exec = false,
					   .comm = "a-much-too-long-command" };
		struct ptd_perf_task t = { .pid = 1, .ppid = 2, .tid = 3,
					   .ptid = 4, .time = 0x55 };
		struct ptd_perf_itrace_start it = { .pid = 9, .tid = 10 };
		struct ptd_perf_event ev;

		/* The kernel's comm holds 15 bytes: so does the record. */
		REQUIRE(ptd_perf_encode_comm(BUF, sizeof(buf_u64), &c, st,
					     &test_sid) ==
			8 + 8 + 16 + ptd_perf_sample_id_size(st));
		REQUIRE(parse_buf(st, &ev, NULL) == 0);
		CHECK_EQ_STR(ev.u.comm.comm, "a-much-too-long");
		CHECK(!ev.u.comm.exec);
		CHECK_EQ_INT(ev.u.comm.tid, 8);
		check_sid(&ev.sid, st);

		for (int ex = 0; ex < 2; ex++) {
			REQUIRE(ptd_perf_encode_task(BUF, sizeof(buf_u64), ex,
						     &t, st, &test_sid) ==
				32 + ptd_perf_sample_id_size(st));
			REQUIRE(parse_buf(st, &ev, NULL) == 0);
			CHECK_EQ_INT(ev.type, ex ? PERF_RECORD_EXIT :
				     PERF_RECORD_FORK);
			CHECK_EQ_INT(ev.misc, 0);
			CHECK_EQ_INT(ev.u.task.pid, 1);
			CHECK_EQ_INT(ev.u.task.ppid, 2);
			CHECK_EQ_INT(ev.u.task.tid, 3);
			CHECK_EQ_INT(ev.u.task.ptid, 4);
			CHECK_EQ_U64(ev.u.task.time, 0x55);
			check_sid(&ev.sid, st);
		}

		REQUIRE(ptd_perf_encode_itrace_start(BUF, sizeof(buf_u64), &it,
						     st, &test_sid) ==
			16 + ptd_perf_sample_id_size(st));
		REQUIRE(parse_buf(st, &ev, NULL) == 0);
		CHECK_EQ_INT(ev.type, PERF_RECORD_ITRACE_START);
		CHECK_EQ_INT(ev.u.itrace.pid, 9);
		CHECK_EQ_INT(ev.u.itrace.tid, 10);
		check_sid(&ev.sid, st);
	}
}

static void test_roundtrip_code_unmap(void)
{
	static uint8_t code[3 * 0x10000];
	uint64_t st = ST_MIN;
	uint32_t chunk = ptd_perf_code_chunk_max("[anon]", st);
	uint8_t *back = calloc(1, sizeof(code));
	struct ptd_perf_event ev;
	uint64_t covered = 0;

	REQUIRE(back);
	for (size_t i = 0; i < sizeof(code); i++)
		code[i] = (uint8_t)(i * 13 + 1);
	/* The largest chunk fits exactly, one more 8 bytes does not. */
	CHECK(chunk > 0xff00);
	CHECK_EQ_U64(chunk % 8, 0);
	{
		struct ptd_perf_code c = { .vaddr = 0x1000, .len = sizeof(code),
					   .size = chunk, .name = "[anon]",
					   .bytes = code };
		CHECK(ptd_perf_encode_code(BUF, sizeof(buf_u64), &c, st,
					   &test_sid) > 0);
		c.size = chunk + 8;
		CHECK_EQ_U64(ptd_perf_encode_code(BUF, sizeof(buf_u64), &c, st,
						  &test_sid), 0);
	}
	/* A snapshot bigger than a record goes in chunks; reassemble it. */
	for (uint64_t off = 0; off < sizeof(code); off += chunk) {
		uint32_t n = (uint32_t)(sizeof(code) - off < chunk ?
					sizeof(code) - off : chunk);
		struct ptd_perf_code c = {
			.pid = 5, .tid = 6, .vaddr = 0x7f0000000000ull,
			.len = sizeof(code), .offset = off, .size = n,
			.name = "[anon]", .bytes = code + off,
		};
		REQUIRE(ptd_perf_encode_code(BUF, sizeof(buf_u64), &c, st,
					     &test_sid) > 0);
		REQUIRE(parse_buf(st, &ev, NULL) == 0);
		CHECK_EQ_INT(ev.type, PTD_PERF_RECORD_CODE);
		CHECK_EQ_INT(ev.u.code.pid, 5);
		CHECK_EQ_INT(ev.u.code.tid, 6);
		CHECK_EQ_U64(ev.u.code.vaddr, 0x7f0000000000ull);
		CHECK_EQ_U64(ev.u.code.len, sizeof(code));
		CHECK_EQ_U64(ev.u.code.offset, off);
		CHECK_EQ_STR(ev.u.code.name, "[anon]");
		check_sid(&ev.sid, st);
		REQUIRE(ev.u.code.size == n);
		memcpy(back + off, ev.u.code.bytes, n);
		covered += n;
	}
	CHECK_EQ_U64(covered, sizeof(code));
	CHECK(memcmp(back, code, sizeof(code)) == 0);
	free(back);

	for (size_t i = 0; i < PTD_ARRAY_SIZE(sample_types); i++) {
		struct ptd_perf_unmap u = { .pid = 3, .tid = 4,
					    .start = 0x1000, .end = 0x3000 };
		st = sample_types[i];
		REQUIRE(ptd_perf_encode_unmap(BUF, sizeof(buf_u64), &u, st,
					      &test_sid) ==
			32 + ptd_perf_sample_id_size(st));
		REQUIRE(parse_buf(st, &ev, NULL) == 0);
		CHECK_EQ_INT(ev.type, PTD_PERF_RECORD_UNMAP);
		CHECK_EQ_U64(ev.u.unmap.start, 0x1000);
		CHECK_EQ_U64(ev.u.unmap.end, 0x3000);
		CHECK_EQ_INT(ev.u.unmap.pid, 3);
		check_sid(&ev.sid, st);
	}
}

static void test_roundtrip_switch(void)
{
	for (size_t i = 0; i < PTD_ARRAY_SIZE(sample_types); i++) {
		uint64_t st = sample_types[i];

		for (int k = 0; k < 8; k++) {
			struct ptd_perf_switch sw = {
				.out = k & 1, .preempt = (k & 2) != 0,
				.cpu_wide = (k & 4) != 0,
				.next_prev_pid = 41, .next_prev_tid = 42 };
			struct ptd_perf_event ev;
			uint16_t misc = 0;

			if (sw.out)
				misc = PERF_RECORD_MISC_SWITCH_OUT |
				       (sw.preempt ?
					PERF_RECORD_MISC_SWITCH_OUT_PREEMPT :
					0);
			REQUIRE(ptd_perf_encode_switch(BUF, sizeof(buf_u64),
						       &sw, st, &test_sid) ==
				8 + (sw.cpu_wide ? 8u : 0u) +
					ptd_perf_sample_id_size(st));
			REQUIRE(parse_buf(st, &ev, NULL) == 0);
			CHECK_EQ_INT(ev.type, sw.cpu_wide ?
				     PERF_RECORD_SWITCH_CPU_WIDE :
				     PERF_RECORD_SWITCH);
			CHECK_EQ_INT(ev.misc, misc);
			CHECK_EQ_INT(ev.u.sw.out, sw.out);
			CHECK_EQ_INT(ev.u.sw.preempt, sw.out && sw.preempt);
			CHECK_EQ_INT(ev.u.sw.cpu_wide, sw.cpu_wide);
			if (sw.cpu_wide) {
				CHECK_EQ_INT(ev.u.sw.next_prev_pid, 41);
				CHECK_EQ_INT(ev.u.sw.next_prev_tid, 42);
			}
			check_sid(&ev.sid, st);
		}
	}
	/* LLDB's context switch records: TID|TIME, 32 bytes */
	struct ptd_perf_switch wide = { .cpu_wide = true };

	CHECK_EQ_INT(ptd_perf_encode_switch(BUF, sizeof(buf_u64), &wide,
					    PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
					    &test_sid), 32);
	CHECK_EQ_INT(ptd_perf_encode_switch(BUF, 31, &wide,
					    PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
					    &test_sid), 0);
	CHECK_EQ_INT(ptd_perf_encode_switch(BUF, sizeof(buf_u64), NULL, 0,
					    NULL), 0);
}

static void test_encode_refusals(void)
{
	struct ptd_perf_mmap m = test_mmap;
	struct ptd_perf_unmap u = { .start = 0x2000, .end = 0x2000 };
	struct ptd_perf_code c = { .len = 16, .offset = 8, .size = 16,
				   .name = "[x]", .bytes = (const uint8_t *)"x" };
	static char longname[PTD_PERF_RECORD_MAX_SIZE];

	/* does not fit the buffer: 0, nothing past cap written */
	memset(BUF, 0xcd, 256);
	CHECK_EQ_U64(ptd_perf_encode_mmap2(BUF, sizeof(kernel_mmap2) - 8, &m,
					   ST_MIN, &test_sid), 0);
	CHECK_EQ_INT(BUF[0], 0xcd);
	CHECK_EQ_U64(ptd_perf_encode_mmap2(BUF, sizeof(kernel_mmap2), &m,
					   ST_MIN, NULL), sizeof(kernel_mmap2));
	/* NULL sid: a zero trailer */
	CHECK_EQ_U64(buf_u64[sizeof(kernel_mmap2) / 8 - 1], 0);
	/* does not fit a u16 size */
	memset(longname, 'a', sizeof(longname) - 1);
	m.filename = longname;
	CHECK_EQ_U64(ptd_perf_encode_mmap2(BUF, sizeof(buf_u64), &m, 0, NULL),
		     0);
	m = test_mmap;
	m.has_build_id = true;
	m.build_id_size = 21;
	CHECK_EQ_U64(ptd_perf_encode_mmap2(BUF, sizeof(buf_u64), &m, 0, NULL),
		     0);
	CHECK_EQ_U64(ptd_perf_encode_unmap(BUF, sizeof(buf_u64), &u, 0, NULL),
		     0);
	CHECK_EQ_U64(ptd_perf_encode_code(BUF, sizeof(buf_u64), &c, 0, NULL),
		     0);
	c.offset = 0;
	c.size = 0;
	CHECK_EQ_U64(ptd_perf_encode_code(BUF, sizeof(buf_u64), &c, 0, NULL),
		     0);
	CHECK_EQ_U64(ptd_perf_encode_comm(BUF, sizeof(buf_u64), NULL, 0, NULL),
		     0);
	CHECK_EQ_U64(ptd_perf_encode_task(NULL, 100, false, NULL, 0, NULL), 0);
}

/* Kernel-only records (no encoder) written out by hand. */
static size_t put_u64s(const uint64_t *v, size_t n, uint32_t type,
		       uint16_t misc, uint64_t st)
{
	struct perf_event_header h = { .type = type, .misc = misc };
	size_t size = 8 + n * 8;

	memcpy(BUF + 8, v, n * 8);
	/* trailer from the encoder of another record: same bytes */
	{
		static uint64_t tmp[16];
		struct ptd_perf_itrace_start it = { 0 };
		size_t t = ptd_perf_encode_itrace_start(tmp, sizeof(tmp), &it,
							st, &test_sid);

		memcpy(BUF + size, (uint8_t *)tmp + 16, t - 16);
		size += t - 16;
	}
	h.size = (uint16_t)size;
	memcpy(BUF, &h, sizeof(h));
	return size;
}

static void test_kernel_only_records(void)
{
	for (size_t i = 0; i < PTD_ARRAY_SIZE(sample_types); i++) {
		uint64_t st = sample_types[i];
		struct ptd_perf_event ev;
		uint64_t aux[3] = { 0x1000, 0x800, PERF_AUX_FLAG_TRUNCATED };
		uint64_t lost[2] = { 77, 5 };
		uint64_t np = 0x0000002b0000002aull;	/* pid 42, tid 43 */
		/* pid 1 tid 2, addr, len, pgoff, "" padded to 8 */
		uint64_t mmap1[5] = { 0x0000000200000001ull, 0x400000, 0x1000,
				      0, 0 };

		put_u64s(aux, 3, PERF_RECORD_AUX, 0, st);
		REQUIRE(parse_buf(st, &ev, NULL) == 0);
		CHECK_EQ_U64(ev.u.aux.aux_offset, 0x1000);
		CHECK_EQ_U64(ev.u.aux.aux_size, 0x800);
		CHECK_EQ_U64(ev.u.aux.flags, PERF_AUX_FLAG_TRUNCATED);
		check_sid(&ev.sid, st);

		put_u64s(lost, 2, PERF_RECORD_LOST, 0, st);
		REQUIRE(parse_buf(st, &ev, NULL) == 0);
		CHECK_EQ_U64(ev.u.lost.id, 77);
		CHECK_EQ_U64(ev.u.lost.lost, 5);

		put_u64s(lost + 1, 1, PERF_RECORD_LOST_SAMPLES, 0, st);
		REQUIRE(parse_buf(st, &ev, NULL) == 0);
		CHECK_EQ_U64(ev.u.lost.id, 0);
		CHECK_EQ_U64(ev.u.lost.lost, 5);

		put_u64s(&np, 0, PERF_RECORD_SWITCH,
			 PERF_RECORD_MISC_SWITCH_OUT |
			 PERF_RECORD_MISC_SWITCH_OUT_PREEMPT, st);
		REQUIRE(parse_buf(st, &ev, NULL) == 0);
		CHECK(ev.u.sw.out && ev.u.sw.preempt && !ev.u.sw.cpu_wide);
		check_sid(&ev.sid, st);

		put_u64s(&np, 1, PERF_RECORD_SWITCH_CPU_WIDE, 0, st);
		REQUIRE(parse_buf(st, &ev, NULL) == 0);
		CHECK(!ev.u.sw.out && !ev.u.sw.preempt && ev.u.sw.cpu_wide);
		CHECK_EQ_INT(ev.u.sw.next_prev_pid, 42);
		CHECK_EQ_INT(ev.u.sw.next_prev_tid, 43);

		/* MMAP (v1): data mappings say so in misc */
		put_u64s(mmap1, 5, PERF_RECORD_MMAP, PERF_RECORD_MISC_USER, st);
		REQUIRE(parse_buf(st, &ev, NULL) == 0);
		CHECK(ev.u.mmap.exec);
		CHECK_EQ_INT(ev.u.mmap.tid, 2);
		CHECK_EQ_U64(ev.u.mmap.addr, 0x400000);
		CHECK_EQ_STR(ev.u.mmap.filename, "");
		HDR->misc |= PERF_RECORD_MISC_MMAP_DATA;
		REQUIRE(parse_buf(st, &ev, NULL) == 0);
		CHECK(!ev.u.mmap.exec);
	}
}

static void test_unknown_type(void)
{
	struct perf_event_header h[2] = { { .type = 0x55, .misc = 3,
					    .size = 16 } };
	struct ptd_perf_event ev;

	memset(&ev, 0xcd, sizeof(ev));
	CHECK_EQ_INT(ptd_perf_event_parse(h, ST_MIN, true, &ev, NULL), 0);
	CHECK(ev.other);
	CHECK_EQ_INT(ev.type, 0x55);
	CHECK_EQ_INT(ev.misc, 3);
	CHECK_EQ_INT(ev.size, 16);
	CHECK_EQ_U64(ev.sid.mask, 0);
	/* PERF_RECORD_SAMPLE is not parsed here either: other */
	h[0].type = PERF_RECORD_SAMPLE;
	CHECK_EQ_INT(ptd_perf_event_parse(h, ST_MIN, true, &ev, NULL), 0);
	CHECK(ev.other);
	CHECK_EQ_STR(ptd_perf_record_name(0x55), "unknown");
	CHECK_EQ_STR(ptd_perf_record_name(PTD_PERF_RECORD_CODE), "ptd CODE");
	CHECK_EQ_INT(ptd_perf_event_parse(NULL, 0, false, &ev, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_perf_event_parse(h, 0, false, NULL, NULL), -EINVAL);
}

/* Parse must fail with EFORMAT and a message naming the record type. */
#define CHECK_BAD(st, name, what)                                              \
	do {                                                                   \
		struct ptd_perf_event ev_;                                     \
		struct ptd_diag d_ = { "" };                                   \
		memset(&ev_, 0xcd, sizeof(ev_));                               \
		struct ptd_perf_event keep_ = ev_;                             \
		CHECK_EQ_INT(parse_buf(st, &ev_, &d_), -PTD_EFORMAT);          \
		CHECK_CONTAINS(d_.msg, name);                                  \
		CHECK_CONTAINS(d_.msg, what);                                  \
		CHECK(memcmp(&ev_, &keep_, sizeof(ev_)) == 0);                 \
	} while (0)

static void test_truncated(void)
{
	struct ptd_perf_task t = { 0 };
	struct ptd_perf_itrace_start it = { 0 };
	struct ptd_perf_unmap u = { .start = 1, .end = 2 };
	uint64_t zero[3] = { 0 };
	size_t n;

	/* Fixed-size records cut short by 8, 16... bytes: refused. */
	n = ptd_perf_encode_task(BUF, sizeof(buf_u64), false, &t, 0, NULL);
	for (size_t s = n - 8; s >= 8; s -= 8) {
		HDR->size = (uint16_t)s;
		CHECK_BAD(0, "FORK", "too short for pid, ppid");
	}
	n = ptd_perf_encode_itrace_start(BUF, sizeof(buf_u64), &it, 0, NULL);
	HDR->size = (uint16_t)(n - 8);
	CHECK_BAD(0, "ITRACE_START", "too short");
	n = ptd_perf_encode_unmap(BUF, sizeof(buf_u64), &u, 0, NULL);
	HDR->size = (uint16_t)(n - 8);
	CHECK_BAD(0, "ptd UNMAP", "too short");
	put_u64s(zero, 3, PERF_RECORD_AUX, 0, 0);
	HDR->size = 24;
	CHECK_BAD(0, "AUX", "too short for aux_offset");
	put_u64s(zero, 2, PERF_RECORD_LOST, 0, 0);
	HDR->size = 16;
	CHECK_BAD(0, "LOST", "too short");
	put_u64s(zero, 0, PERF_RECORD_LOST_SAMPLES, 0, 0);
	CHECK_BAD(0, "LOST_SAMPLES", "too short");
	put_u64s(zero, 0, PERF_RECORD_SWITCH_CPU_WIDE, 0, 0);
	CHECK_BAD(0, "SWITCH_CPU_WIDE", "next_prev_pid");

	/* MMAP2 cut before its fields end */
	memcpy(BUF, kernel_mmap2, sizeof(kernel_mmap2));
	HDR->size = 8 + 8 + 24 + 24 + 24;	/* trailer eats into prot */
	CHECK_BAD(ST_MIN, "MMAP2", "too short for prot, flags");
	HDR->size = 32;
	CHECK_BAD(0, "MMAP2", "too short for pid, tid, addr");
	HDR->size = 48;
	HDR->misc |= PERF_RECORD_MISC_MMAP_BUILD_ID;
	CHECK_BAD(0, "MMAP2", "build id");
	HDR->misc &= (uint16_t)~PERF_RECORD_MISC_MMAP_BUILD_ID;
	CHECK_BAD(0, "MMAP2", "too short for maj, min");
	/* MMAP2 with all fields but no room for a filename */
	HDR->size = 72;
	CHECK_BAD(0, "MMAP2", "filename is not NUL-terminated");

	/* A header below 8 bytes, a record too short for its trailer. */
	HDR->size = 4;
	CHECK_BAD(0, "MMAP2", "below the 8-byte header");
	HDR->type = 0x55;	/* even for an unknown type */
	CHECK_BAD(0, "unknown", "below the 8-byte header");
	n = ptd_perf_encode_itrace_start(BUF, sizeof(buf_u64), &it, 0, NULL);
	CHECK_BAD(ST_ALL, "ITRACE_START", "sample_id trailer");
	/* right size with a trailer, but the body then is too short */
	n = ptd_perf_encode_itrace_start(BUF, sizeof(buf_u64), &it, ST_MIN,
					 NULL);
	CHECK_BAD(PTD_SIDEBAND_SAMPLE_TYPE, "ITRACE_START",
		  "too short for pid, tid");
}

static void test_bad_strings(void)
{
	struct ptd_perf_comm c = { .comm = "abc" };
	size_t n;

	/* filename padding overwritten: no NUL inside the record */
	memcpy(BUF, kernel_mmap2, sizeof(kernel_mmap2));
	memset(BUF + 72, 'A', 16);
	CHECK_BAD(ST_MIN, "MMAP2", "filename is not NUL-terminated");
	/* the same bytes read without a trailer: the zero bytes of what was
	 * the trailer (pid 100) end the string inside the record then */
	{
		struct ptd_perf_event ev;

		CHECK_EQ_INT(parse_buf(0, &ev, NULL), 0);
	}
	n = ptd_perf_encode_comm(BUF, sizeof(buf_u64), &c, 0, NULL);
	memset(BUF + 16, 'x', n - 16);
	CHECK_BAD(0, "COMM", "comm is not NUL-terminated");
	HDR->size = 16;		/* no room for a comm at all */
	CHECK_BAD(0, "COMM", "comm is not NUL-terminated");
	/* build_id_size above 20 */
	{
		struct ptd_perf_mmap m = test_mmap;

		m.has_build_id = true;
		m.build_id_size = 20;
		REQUIRE(ptd_perf_encode_mmap2(BUF, sizeof(buf_u64), &m, 0,
					      NULL) > 0);
		BUF[40] = 21;	/* build_id_size follows pgoff */
		CHECK_BAD(0, "MMAP2", "build_id_size");
	}
}

static void test_bad_code(void)
{
	static const uint8_t bytes[64] = { 0x90 };
	struct ptd_perf_code c = { .vaddr = 0x1000, .len = 64, .size = 24,
				   .offset = 40, .name = "[vdso]",
				   .bytes = bytes };
	uint32_t v;
	size_t n;

	/* layout: hdr 8, pid/tid 8, vaddr 8, len 8, offset 8, size 4 (@40),
	 * name_size 4 (@44), name (@48) */
	n = ptd_perf_encode_code(BUF, sizeof(buf_u64), &c, 0, NULL);
	REQUIRE(n == 48 + 8 + 24);
	memcpy(BUF + 32, &(uint64_t){ 41 }, 8);	/* offset + size > len */
	CHECK_BAD(0, "ptd CODE", "past the mapping length");
	memcpy(BUF + 32, &(uint64_t){ 65 }, 8);	/* offset > len */
	CHECK_BAD(0, "ptd CODE", "past the mapping length");
	v = 0;
	memcpy(BUF + 40, &v, 4);
	CHECK_BAD(0, "ptd CODE", "chunk size is 0");
	v = 32;			/* bytes past the record end */
	memcpy(BUF + 40, &v, 4);
	memcpy(BUF + 32, &(uint64_t){ 0 }, 8);
	CHECK_BAD(0, "ptd CODE", "run past the record end");
	n = ptd_perf_encode_code(BUF, sizeof(buf_u64), &c, 0, NULL);
	v = 12;
	memcpy(BUF + 44, &v, 4);
	CHECK_BAD(0, "ptd CODE", "multiple of 8");
	v = 0;
	memcpy(BUF + 44, &v, 4);
	CHECK_BAD(0, "ptd CODE", "multiple of 8");
	v = 64;			/* name space past the end */
	memcpy(BUF + 44, &v, 4);
	CHECK_BAD(0, "ptd CODE", "name is not NUL-terminated");
	n = ptd_perf_encode_code(BUF, sizeof(buf_u64), &c, 0, NULL);
	memset(BUF + 48, 'n', 8);
	CHECK_BAD(0, "ptd CODE", "name is not NUL-terminated");
	n = ptd_perf_encode_code(BUF, sizeof(buf_u64), &c, 0, NULL);
	memcpy(BUF + 16, &(uint64_t){ UINT64_MAX - 8 }, 8);
	CHECK_BAD(0, "ptd CODE", "overflows");
	HDR->size = 40;
	CHECK_BAD(0, "ptd CODE", "too short for its fixed fields");

	{
		struct ptd_perf_unmap u = { .start = 0x1000, .end = 0x2000 };

		REQUIRE(ptd_perf_encode_unmap(BUF, sizeof(buf_u64), &u, 0,
					      NULL) > 0);
		memcpy(BUF + 24, &(uint64_t){ 0x1000 }, 8);
		CHECK_BAD(0, "ptd UNMAP", "start is not below end");
	}
}

static int to_tl(const struct ptd_perf_mmap *m, struct ptd_tl_event *t,
		 struct ptd_diag *d)
{
	struct ptd_perf_event ev;

	if (!ptd_perf_encode_mmap2(BUF, sizeof(buf_u64), m, 0, NULL) ||
	    ptd_perf_event_parse(HDR, 0, false, &ev, NULL) < 0)
		return -1000;
	return ptd_perf_event_to_tl(&ev, t, d);
}

static void test_to_tl(void)
{
	static const char *const nonfile[] = {
		"[vdso]", "//anon", "[heap]", "[stack]", "[anon:jit]",
		"/tmp/x.so (deleted)", "/memfd:jit (deleted)", "/memfd:jit",
		"//toolong", "", "relative/name",
	};
	struct ptd_perf_mmap m = test_mmap;
	struct ptd_tl_event t;
	struct ptd_diag d = { "" };
	struct ptd_perf_event ev;

	memset(&t, 0xcd, sizeof(t));
	CHECK_EQ_INT(to_tl(&m, &t, &d), 1);
	CHECK_EQ_INT(t.op, PTD_TL_MAP);
	CHECK_EQ_U64(t.start, 0x7f0000001000ull);
	CHECK_EQ_U64(t.end, 0x7f0000003000ull);
	CHECK_EQ_U64(t.pgoff, 0x1000);
	CHECK_EQ_STR(t.path, "/lib/a.so");
	CHECK(t.path == (char *)BUF + 72);	/* points into the record */
	CHECK(!t.name && !t.file && !t.pos && t.npos == 0 && t.seq == 0);

	for (size_t i = 0; i < PTD_ARRAY_SIZE(nonfile); i++) {
		m.filename = nonfile[i];
		memset(&t, 0xcd, sizeof(t));
		CHECK_EQ_INT(to_tl(&m, &t, &d), PTD_PERF_TL_NONFILE);
		CHECK_EQ_INT(t.op, PTD_TL_SNAPSHOT);
		CHECK_EQ_STR(t.name, nonfile[i]);
		CHECK(!t.file && !t.path);
		CHECK_EQ_U64(t.end - t.start, 0x2000);
	}
	/* non-executable: no image change, *ret untouched */
	m = test_mmap;
	m.prot = PROT_READ;
	memset(&t, 0xcd, sizeof(t));
	CHECK_EQ_INT(to_tl(&m, &t, &d), 0);
	CHECK_EQ_INT(((uint8_t *)&t)[0], 0xcd);
	/* bad ranges */
	m = test_mmap;
	m.len = 0;
	CHECK_EQ_INT(to_tl(&m, &t, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "bad range");
	m.addr = UINT64_MAX - 0xfff;
	m.len = 0x2000;
	d.msg[0] = 0;
	CHECK_EQ_INT(to_tl(&m, &t, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "MMAP2 of '/lib/a.so'");

	/* COMM: exec or not */
	memcpy(BUF, kernel_comm, sizeof(kernel_comm));
	REQUIRE(ptd_perf_event_parse(HDR, ST_MIN, true, &ev, NULL) == 0);
	CHECK_EQ_INT(ptd_perf_event_to_tl(&ev, &t, NULL), 1);
	CHECK_EQ_INT(t.op, PTD_TL_EXEC);
	CHECK_EQ_STR(t.path, "prog");
	ev.u.comm.exec = false;
	CHECK_EQ_INT(ptd_perf_event_to_tl(&ev, &t, NULL), 0);

	/* UNMAP */
	{
		struct ptd_perf_unmap u = { .start = 0x5000, .end = 0x9000 };

		REQUIRE(ptd_perf_encode_unmap(BUF, sizeof(buf_u64), &u, 0,
					      NULL) > 0);
		REQUIRE(ptd_perf_event_parse(HDR, 0, false, &ev, NULL) == 0);
		CHECK_EQ_INT(ptd_perf_event_to_tl(&ev, &t, NULL), 1);
		CHECK_EQ_INT(t.op, PTD_TL_UNMAP);
		CHECK_EQ_U64(t.start, 0x5000);
		CHECK_EQ_U64(t.end, 0x9000);
	}
	/* FORK, CODE, unknown: no image change */
	{
		struct ptd_perf_task tk = { .pid = 1 };

		REQUIRE(ptd_perf_encode_task(BUF, sizeof(buf_u64), false, &tk,
					     0, NULL) > 0);
		REQUIRE(ptd_perf_event_parse(HDR, 0, false, &ev, NULL) == 0);
		CHECK_EQ_INT(ptd_perf_event_to_tl(&ev, &t, NULL), 0);
		HDR->type = 0x99;
		REQUIRE(ptd_perf_event_parse(HDR, 0, false, &ev, NULL) == 0);
		CHECK_EQ_INT(ptd_perf_event_to_tl(&ev, &t, NULL), 0);
	}
	CHECK_EQ_INT(ptd_perf_event_to_tl(NULL, &t, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_perf_event_to_tl(&ev, NULL, NULL), -EINVAL);
}

/* An exec then an MMAP2 feed an image through the timeline's apply. */
static void test_to_tl_apply(void)
{
	char path[] = "/tmp/ptd-test-sideband-XXXXXX";
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "t", &img);
	struct ptd_perf_mmap m = test_mmap;
	struct ptd_perf_event ev;
	struct ptd_tl_event t;
	struct ptd_diag d = { "" };
	uint8_t file[0x3000], got[16];
	int fd = mkstemp(path);

	REQUIRE(ic && img && fd >= 0);
	for (size_t i = 0; i < sizeof(file); i++)
		file[i] = (uint8_t)(i ^ (i >> 8));
	REQUIRE(ptd_write_all(fd, file, sizeof(file)) == 0);
	(void)close(fd);
	m.filename = path;
	REQUIRE(to_tl(&m, &t, &d) == 1);
	CHECK_EQ_INT(ptd_tl_event_apply(&t, img, NULL, &d), 0);
	CHECK_EQ_INT(ptd_image_read(img, m.addr + 0x10, got, sizeof(got)),
		     sizeof(got));
	CHECK(memcmp(got, file + 0x1010, sizeof(got)) == 0);
	/* the exec clears it */
	memcpy(BUF, kernel_comm, sizeof(kernel_comm));
	REQUIRE(ptd_perf_event_parse(HDR, ST_MIN, true, &ev, NULL) == 0);
	REQUIRE(ptd_perf_event_to_tl(&ev, &t, NULL) == 1);
	CHECK_EQ_INT(ptd_tl_event_apply(&t, img, NULL, &d), 0);
	CHECK_EQ_INT(ptd_image_read(img, m.addr + 0x10, got, sizeof(got)),
		     -PTD_ENOIMAGE);
	(void)unlink(path);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

static void test_attr(void)
{
	struct perf_event_attr a;

	memset(&a, 0xcd, sizeof(a));
	CHECK_EQ_INT(ptd_sideband_attr(&a, true), 0);
	CHECK_EQ_INT(a.size, sizeof(a));
	CHECK_EQ_INT(a.type, PERF_TYPE_SOFTWARE);
	CHECK_EQ_U64(a.config, PERF_COUNT_SW_DUMMY);
	CHECK_EQ_U64(a.sample_type, PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
		     PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER);
	CHECK(a.mmap && a.mmap2 && a.comm && a.comm_exec && a.task &&
	      a.context_switch && a.sample_id_all);
	CHECK(a.exclude_kernel && a.exclude_hv && a.disabled);
	CHECK(!a.mmap_data && !a.exclude_user);
	CHECK(a.inherit);
	CHECK(a.watermark);
	CHECK_EQ_INT(a.wakeup_watermark, PTD_SIDEBAND_WAKEUP_BYTES);
	CHECK(!a.enable_on_exec && !a.freq && !a.pinned);
	CHECK_EQ_U64(a.read_format, 0);
	CHECK_EQ_U64(a.bp_type, 0);
	CHECK_EQ_INT(ptd_sideband_attr(&a, false), 0);
	CHECK(!a.inherit);
	CHECK_EQ_INT(ptd_sideband_attr(NULL, false), -EINVAL);
}

static void test_cpulist(void)
{
	static const struct {
		const char *text;
		size_t n;
		int first, last;
	} good[] = {
		{ "0\n", 1, 0, 0 },
		{ "0-1\n", 2, 0, 1 },
		{ "0-3,8,10-11", 7, 0, 11 },
		{ "5", 1, 5, 5 },
		{ "8191", 1, 8191, 8191 },
	};
	static const struct {
		const char *text;
		int err;
		const char *what;
	} bad[] = {
		{ "", -PTD_EFORMAT, "empty" },
		{ "\n", -PTD_EFORMAT, "empty" },
		{ "0-", -PTD_EFORMAT, "column 3" },
		{ "0,,1", -PTD_EFORMAT, "column 3" },
		{ "3-1", -PTD_EFORMAT, "backwards" },
		{ "0-2,2", -PTD_EFORMAT, "not above" },
		{ "4,1", -PTD_EFORMAT, "not above" },
		{ "01", -PTD_EFORMAT, "leading zero" },
		{ " 1", -PTD_EFORMAT, "column 1" },
		{ "1\n\n", -PTD_EFORMAT, "column 2" },
		{ "1x", -PTD_EFORMAT, "unexpected character at column 2" },
		{ "-1", -PTD_EFORMAT, "column 1" },
		{ "8192", -PTD_ELIMIT, "not below 8192" },
		{ "0-99999999999999999999", -PTD_ELIMIT, "column 3" },
	};

	for (size_t i = 0; i < PTD_ARRAY_SIZE(good); i++) {
		int *cpus = NULL;
		size_t n = 0;

		CHECK_EQ_INT(ptd_cpulist_parse(good[i].text,
					       strlen(good[i].text), "t", &cpus,
					       &n, NULL), 0);
		CHECK_EQ_U64(n, good[i].n);
		if (cpus && n) {
			CHECK_EQ_INT(cpus[0], good[i].first);
			CHECK_EQ_INT(cpus[n - 1], good[i].last);
		}
		free(cpus);
	}
	for (size_t i = 0; i < PTD_ARRAY_SIZE(bad); i++) {
		int *cpus = (int *)0x1;
		size_t n = 99;
		struct ptd_diag d = { "" };

		CHECK_EQ_INT(ptd_cpulist_parse(bad[i].text,
					       strlen(bad[i].text), "cpus.txt",
					       &cpus, &n, &d), bad[i].err);
		CHECK_CONTAINS(d.msg, "cpus.txt: ");
		CHECK_CONTAINS(d.msg, bad[i].what);
		CHECK(cpus == (int *)0x1 && n == 99);
	}
	{
		int *cpus = NULL;
		size_t n = 0;

		CHECK_EQ_INT(ptd_cpulist_parse("0-2,5", 5, "t", &cpus, &n,
					       NULL), 0);
		REQUIRE(n == 4 && cpus);
		CHECK(cpus[0] == 0 && cpus[1] == 1 && cpus[2] == 2 &&
		      cpus[3] == 5);
		free(cpus);
	}
}

static void test_online_cpus(void)
{
	char path[] = "/tmp/ptd-test-online-XXXXXX";
	struct ptd_diag d = { "" };
	int *cpus = NULL;
	size_t n = 0;
	int fd = mkstemp(path);

	REQUIRE(fd >= 0);
	REQUIRE(ptd_write_all(fd, "0-1,4\n", 6) == 0);
	CHECK_EQ_INT(ptd_sideband_online_cpus(path, &cpus, &n, &d), 0);
	CHECK_EQ_U64(n, 3);
	free(cpus);
	cpus = NULL;
	/* a NUL byte inside */
	REQUIRE(ftruncate(fd, 0) == 0 && lseek(fd, 0, SEEK_SET) == 0);
	REQUIRE(ptd_write_all(fd, "0\0-1\n", 5) == 0);
	CHECK_EQ_INT(ptd_sideband_online_cpus(path, &cpus, &n, &d),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, path);
	(void)close(fd);
	(void)unlink(path);
	CHECK_EQ_INT(ptd_sideband_online_cpus("/nonexistent/online", &cpus, &n,
					      &d), -ENOENT);
	CHECK_CONTAINS(d.msg, "'/nonexistent/online'");
	/* this machine's own list agrees with sysconf */
	CHECK_EQ_INT(ptd_sideband_online_cpus(NULL, &cpus, &n, &d), 0);
	CHECK_EQ_U64(n, (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
	free(cpus);
}

/* ---- live: real dummy events on real programs -------------------------- */

static bool live_ok;
static char live_skip[PTD_DIAG_MAX];

/* A pid that no process has: a reaped child's. */
static pid_t dead_pid(void)
{
	pid_t p = fork();

	if (p == 0)
		_exit(0);
	if (p > 0)
		(void)waitpid(p, NULL, 0);
	return p;
}

static void test_open_errors(void)
{
	struct ptd_diag d = { "" };
	int fd = -7;

	CHECK_EQ_INT(ptd_sideband_open(getpid(), -1, true, &fd, &d), -EINVAL);
	CHECK_CONTAINS(d.msg, "refuses to mmap the ring of an inherited "
		       "per-thread event");
	CHECK_CONTAINS(d.msg, "per CPU");
	CHECK_EQ_INT(fd, -7);
	CHECK_EQ_INT(ptd_sideband_open(-1, -1, false, &fd, &d), -EINVAL);
	CHECK_CONTAINS(d.msg, "needs a CPU");
	CHECK_EQ_INT(ptd_sideband_open(1, 0, false, NULL, &d), -EINVAL);
	CHECK_EQ_INT(fd, -7);
	if (!live_ok)
		return;
	{
		pid_t p = dead_pid();

		REQUIRE(p > 0);
		d.msg[0] = 0;
		CHECK_EQ_INT(ptd_sideband_open(p, 0, true, &fd, &d), -ESRCH);
		CHECK_CONTAINS(d.msg, "no such process");
		CHECK_EQ_INT(fd, -7);
	}
	/* A per-thread event without inherit works (and is CLOEXEC). */
	CHECK_EQ_INT(ptd_sideband_open(getpid(), -1, false, &fd, &d), 0);
	if (fd >= 0) {
		CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
		(void)close(fd);
	}
}

/* Not allowed: an unprivileged user opening an event on pid 1.  Runs in
 * a child that drops to nobody; the message names both remedies. */
static void test_open_eacces(void)
{
	struct {
		int r;
		struct ptd_diag d;
	} res = { 0, { "" } };
	int p[2];
	pid_t c;

	if (!live_ok || geteuid() != 0)
		return;		/* needs root to drop privileges */
	REQUIRE(pipe2(p, O_CLOEXEC) == 0);
	c = fork();
	if (c == 0) {
		int fd = -1;

		if (setresgid(65534, 65534, 65534) < 0 ||
		    setresuid(65534, 65534, 65534) < 0)
			res.r = 1;
		else
			res.r = ptd_sideband_open(1, 0, false, &fd, &res.d);
		if (write(p[1], &res, sizeof(res)) != (ssize_t)sizeof(res))
			_exit(2);
		_exit(0);
	}
	(void)close(p[1]);
	CHECK_EQ_INT(read(p[0], &res, sizeof(res)), sizeof(res));
	(void)close(p[0]);
	if (c > 0)
		(void)waitpid(c, NULL, 0);
	res.d.msg[sizeof(res.d.msg) - 1] = 0;
	CHECK(res.r == -EACCES || res.r == -EPERM);
	CHECK_CONTAINS(res.d.msg, "pid 1 on cpu #0");
	CHECK_CONTAINS(res.d.msg, "/proc/sys/kernel/perf_event_paranoid");
	CHECK_CONTAINS(res.d.msg, "CAP_PERFMON");
}

/* Whether this machine lets us open the event at all (decided once). */
static void probe_live(void)
{
	struct ptd_diag d = { "" };
	int fd = -1;
	int r = ptd_sideband_open(getpid(), 0, true, &fd, &d);

	if (r == 0) {
		live_ok = true;
		(void)close(fd);
		return;
	}
	(void)snprintf(live_skip, sizeof(live_skip), "%s", d.msg);
}

struct rec {
	uint8_t *raw;
	int cpu;
	struct ptd_perf_event ev;
};

struct live {
	pid_t pid;
	int ncpu;
	int *cpus;
	struct rec *v;
	size_t n, cap;
	int cur_cpu;
	int parse_errors;
	char parse_msg[PTD_DIAG_MAX];
	uint64_t lost;
};

static int live_record(void *ctx, const struct perf_event_header *hdr)
{
	struct live *L = ctx;
	struct ptd_diag d = { "" };
	struct rec *r;

	if (L->n == L->cap) {
		size_t cap = L->cap ? 2 * L->cap : 256;
		struct rec *v = realloc(L->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		L->v = v;
		L->cap = cap;
	}
	r = &L->v[L->n];
	r->raw = malloc(hdr->size);
	if (!r->raw)
		return -ENOMEM;
	memcpy(r->raw, hdr, hdr->size);
	r->cpu = L->cur_cpu;
	/* Parse the copy: the event's strings point into it. */
	if (ptd_perf_event_parse((const struct perf_event_header *)r->raw,
				 PTD_SIDEBAND_SAMPLE_TYPE, true, &r->ev,
				 &d) < 0) {
		if (L->parse_errors++ == 0)
			(void)snprintf(L->parse_msg, sizeof(L->parse_msg),
				       "%s", d.msg);
		free(r->raw);
		return 0;
	}
	L->n++;
	return 0;
}

static void live_free(struct live *L)
{
	for (size_t i = 0; i < L->n; i++)
		free(L->v[i].raw);
	free(L->v);
	free(L->cpus);
	memset(L, 0, sizeof(*L));
}

/* The path of test program @name; false (a failed check) if it is not
 * there: meson sets PTD_TEST_PROGS and builds them. */
static bool prog_path(char *buf, size_t cap, const char *name)
{
	const char *dir = getenv("PTD_TEST_PROGS");

	(void)snprintf(buf, cap, "%s/%s", dir ? dir : "tests/progs", name);
	if (access(buf, R_OK) == 0)
		return true;
	CHECK_FAIL_("test program '%s' is missing (PTD_TEST_PROGS=%s): %s",
		    buf, dir ? dir : "(unset)", strerror(errno));
	return false;
}

/* Drain every ring once. */
static int drain_all(struct live *L, struct ptd_perf_reader **rd)
{
	static const struct ptd_perf_reader_ops ops = {
		.record = live_record,
	};

	for (int i = 0; i < L->ncpu; i++) {
		int r;

		L->cur_cpu = L->cpus[i];
		r = ptd_perf_reader_drain(rd[i], &ops, L);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * Fork @prog stopped on a pipe before its exec, open a dummy event on it
 * per online CPU (inherited if @inherit), map and enable them, let it run
 * to its exit, drain everything into @L.  Returns the exit status or -1
 * (with a failed check).
 */
static int live_run(const char *prog, const char *arg, bool inherit,
		    struct live *L)
{
	struct ptd_perf_reader **rd = NULL;
	struct ptd_perf_buf *bufs = NULL;
	int *fds = NULL, p[2] = { -1, -1 }, status = -1, ret = -1;
	struct ptd_diag d = { "" };
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t ncpu = 0;
	pid_t w;

	memset(L, 0, sizeof(*L));
	if (ptd_sideband_online_cpus(NULL, &L->cpus, &ncpu, &d) < 0) {
		CHECK_FAIL_("online cpus: %s", d.msg);
		return -1;
	}
	L->ncpu = (int)ncpu;
	fds = calloc(ncpu, sizeof(*fds));
	bufs = calloc(ncpu, sizeof(*bufs));
	rd = calloc(ncpu, sizeof(*rd));
	if (!fds || !bufs || !rd || pipe2(p, O_CLOEXEC) < 0)
		goto out;
	for (size_t i = 0; i < ncpu; i++)
		fds[i] = -1;
	L->pid = fork();
	if (L->pid < 0)
		goto out;
	if (L->pid == 0) {
		char c;
		char *argv[] = { (char *)prog, (char *)arg, NULL };

		(void)close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(126);
		execv(prog, argv);
		_exit(127);
	}
	(void)close(p[0]);
	p[0] = -1;
	for (size_t i = 0; i < ncpu; i++) {
		int r = ptd_sideband_open(L->pid, L->cpus[i], inherit,
					  &fds[i], &d);

		if (r == 0)
			r = ptd_perf_buf_map(fds[i], 64 * page, 0, false,
					     &bufs[i], &d);
		if (r == 0) {
			rd[i] = calloc(1, sizeof(*rd[i]));
			if (!rd[i])
				r = -ENOMEM;
			else
				ptd_perf_reader_init(rd[i], &bufs[i]);
		}
		if (r == 0 && ioctl(fds[i], PERF_EVENT_IOC_ENABLE, 0) < 0)
			r = -errno;
		if (r < 0) {
			CHECK_FAIL_("cpu %d: %d %s", L->cpus[i], r, d.msg);
			(void)kill(L->pid, SIGKILL);
			(void)waitpid(L->pid, NULL, 0);
			goto out;
		}
	}
	/* Let it go; drain while it runs so the rings never fill. */
	if (write(p[1], "x", 1) != 1)
		goto out;
	for (;;) {
		w = waitpid(L->pid, &status, WNOHANG);
		if (w != 0)
			break;
		if (drain_all(L, rd) < 0)
			break;
		(void)nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	if (w != L->pid || drain_all(L, rd) < 0) {
		CHECK_FAIL_("waitpid %d or drain failed", (int)L->pid);
		goto out;
	}
	for (size_t i = 0; i < ncpu; i++)
		L->lost += rd[i]->lost_records + rd[i]->corrupt_bytes;
	ret = status;
out:
	for (size_t i = 0; i < ncpu; i++) {
		if (rd)
			free(rd[i]);
		if (bufs)
			ptd_perf_buf_fini(&bufs[i]);
		if (fds && fds[i] >= 0)
			(void)close(fds[i]);
	}
	free(rd);
	free(bufs);
	free(fds);
	if (p[0] >= 0)
		(void)close(p[0]);
	if (p[1] >= 0)
		(void)close(p[1]);
	return ret;
}

/* Checks every run must pass: parsed, no loss, per-CPU time order, the
 * trailer's cpu is the ring's, switches present. */
static void check_common(const struct live *L)
{
	uint64_t last[PTD_SIDEBAND_MAX_CPUS] = { 0 };
	size_t switches = 0;

	CHECK_EQ_INT(L->parse_errors, 0);
	if (L->parse_errors)
		fprintf(stderr, "  first parse error: %s\n", L->parse_msg);
	CHECK_EQ_U64(L->lost, 0);
	CHECK(L->n > 0);
	for (size_t i = 0; i < L->n; i++) {
		const struct rec *r = &L->v[i];

		CHECK_EQ_U64(r->ev.sid.mask, PTD_PERF_SID_TID |
			     PTD_PERF_SID_TIME | PTD_PERF_SID_CPU |
			     PTD_PERF_SID_IDENTIFIER);
		CHECK_EQ_INT(r->ev.sid.cpu, r->cpu);
		if (r->ev.sid.time < last[r->cpu])
			CHECK_FAIL_("cpu %d: record %zu (%s) time %" PRIu64
				    " before %" PRIu64, r->cpu, i,
				    ptd_perf_record_name(r->ev.type),
				    r->ev.sid.time, last[r->cpu]);
		last[r->cpu] = r->ev.sid.time;
		if (r->ev.type == PERF_RECORD_SWITCH)
			switches++;
		/* no kernel mapping or kernel record slipped in */
		if (r->ev.type == PERF_RECORD_MMAP2)
			CHECK_EQ_INT(r->ev.misc & PERF_RECORD_MISC_CPUMODE_MASK,
				     PERF_RECORD_MISC_USER);
	}
	CHECK(switches > 0);
}

/* Records sorted by time (stable: per-CPU order is kept for ties). */
static int cmp_time(const void *a, const void *b)
{
	const struct rec *x = *(const struct rec *const *)a;
	const struct rec *y = *(const struct rec *const *)b;

	if (x->ev.sid.time != y->ev.sid.time)
		return x->ev.sid.time < y->ev.sid.time ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* @L's records in time order (an array of pointers to free, NULL if out
 * of memory): the per-CPU rings are drained one after the other, so the
 * order they were collected in is not the order they happened in. */
static const struct rec **live_time_order(const struct live *L)
{
	const struct rec **order = calloc(L->n ? L->n : 1, sizeof(*order));

	if (!order)
		return NULL;
	for (size_t i = 0; i < L->n; i++)
		order[i] = &L->v[i];
	qsort(order, L->n, sizeof(*order), cmp_time);
	return order;
}

/* Feed @L's image changes in time order into a fresh image: it must then
 * hold the library's code where its MMAP2 @libmap says, as the file has
 * it, named after the file. */
static void check_live_image(const struct live *L,
			     const struct ptd_perf_mmap *libmap,
			     const char *real)
{
	const struct rec **order = live_time_order(L);
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "live", &img);
	const struct ptd_image_region *reg;
	uint8_t got[256], want[256];
	size_t maps = 0, execs = 0;
	const char *name = NULL;
	uint64_t off = 0;
	int fd = -1;

	if (!order || !img) {
		CHECK_FAIL_("%s", "out of memory");
		goto out;
	}
	for (size_t i = 0; i < L->n; i++) {
		struct ptd_tl_event t;
		struct ptd_diag d = { "" };
		int r = ptd_perf_event_to_tl(&order[i]->ev, &t, &d);

		CHECK(r >= 0);
		if (r != 1)
			continue;
		CHECK_EQ_INT(ptd_tl_event_apply(&t, img, NULL, &d), 0);
		maps += t.op == PTD_TL_MAP;
		execs += t.op == PTD_TL_EXEC;
	}
	CHECK_EQ_U64(execs, 1);
	/* prog, ld.so, libc and the library twice at least */
	CHECK(maps >= 5);
	reg = ptd_image_find(img, libmap->addr);
	fd = open(real, O_RDONLY | O_CLOEXEC);
	if (!reg || fd < 0) {
		CHECK_FAIL_("region at 0x%" PRIx64 ": %p, open '%s': %d",
			    libmap->addr, (const void *)reg, real, fd);
		goto out;
	}
	CHECK_EQ_U64(reg->start, libmap->addr);
	CHECK_EQ_U64(reg->end, libmap->addr + libmap->len);
	CHECK_EQ_INT(ptd_image_module_of(img, reg->isid, libmap->addr, &name,
					 &off), 0);
	CHECK_EQ_STR(name, real);
	CHECK_EQ_U64(off, libmap->pgoff);
	CHECK_EQ_INT(pread(fd, want, sizeof(want), (off_t)libmap->pgoff),
		     sizeof(want));
	CHECK_EQ_INT(ptd_image_read(img, libmap->addr, got, sizeof(got)),
		     sizeof(got));
	CHECK(memcmp(got, want, sizeof(got)) == 0);
out:
	if (fd >= 0)
		(void)close(fd);
	ptd_image_free(img);
	ptd_iscache_free(ic);
	free(order);
}

static void test_live_dlopen(void)
{
	char prog[PATH_MAX], lib[PATH_MAX], real[PATH_MAX];
	const struct ptd_perf_mmap *libmap = NULL;
	struct live L;
	size_t nlib = 0;
	int st;

	if (!live_ok)
		return;
	if (!prog_path(prog, sizeof(prog), "prog-dlopen") ||
	    !prog_path(lib, sizeof(lib), "libptdtarget.so"))
		return;
	REQUIRE(realpath(lib, real));
	st = live_run(prog, real, true, &L);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	check_common(&L);
	for (size_t i = 0; i < L.n; i++) {
		const struct ptd_perf_event *e = &L.v[i].ev;

		if (e->type == PERF_RECORD_MMAP2 && e->u.mmap.exec &&
		    strcmp(e->u.mmap.filename, real) == 0) {
			CHECK_EQ_INT(e->u.mmap.pid, L.pid);
			CHECK_EQ_INT(e->sid.pid, L.pid);
			CHECK(e->u.mmap.prot & PROT_EXEC);
			CHECK(e->u.mmap.ino != 0);
			libmap = &e->u.mmap;
			nlib++;
		}
	}
	/* dlopen'ed twice: two executable mappings of the library */
	CHECK_EQ_U64(nlib, 2);
	if (libmap)
		check_live_image(&L, libmap, real);
	live_free(&L);
}

static void test_live_exec(void)
{
	char prog[PATH_MAX];
	const struct rec **order;
	struct live L;
	size_t execs = 0, prog_maps = 0;
	int st;

	if (!live_ok)
		return;
	if (!prog_path(prog, sizeof(prog), "prog-exec"))
		return;
	st = live_run(prog, NULL, true, &L);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	check_common(&L);
	/* in time order: the kernel may move a task to another CPU at exec
	 * (sched_exec), so the two execs can sit in different rings */
	order = live_time_order(&L);
	REQUIRE(order);
	for (size_t i = 0; i < L.n; i++) {
		const struct ptd_perf_event *e = &order[i]->ev;

		if (e->type == PERF_RECORD_COMM && e->u.comm.exec) {
			CHECK_EQ_INT(e->u.comm.pid, L.pid);
			CHECK_EQ_INT(e->u.comm.tid, L.pid);
			/* the kernel names the task after the file it
			 * executes: then "exe" for /proc/self/exe */
			CHECK_EQ_STR(e->u.comm.comm, execs ? "exe" :
				     "prog-exec");
			execs++;
		}
		if (e->type == PERF_RECORD_MMAP2 && e->u.mmap.exec &&
		    strstr(e->u.mmap.filename, "/prog-exec"))
			prog_maps++;
	}
	/* our execv, then its own execv of /proc/self/exe */
	CHECK_EQ_U64(execs, 2);
	CHECK_EQ_U64(prog_maps, 2);
	free(order);
	live_free(&L);
}

static void test_live_fork(void)
{
	char prog[PATH_MAX];
	struct live L;
	pid_t child = 0;
	size_t exits_child = 0, exits_main = 0;
	int st;

	if (!live_ok)
		return;
	if (!prog_path(prog, sizeof(prog), "prog-fork"))
		return;
	st = live_run(prog, NULL, true, &L);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	check_common(&L);
	for (size_t i = 0; i < L.n; i++) {
		const struct ptd_perf_event *e = &L.v[i].ev;

		if (e->type == PERF_RECORD_FORK) {
			/* a new process: pid == tid, parent is ours */
			CHECK(child == 0);
			child = (pid_t)e->u.task.pid;
			CHECK_EQ_INT(e->u.task.tid, e->u.task.pid);
			CHECK_EQ_INT(e->u.task.ppid, L.pid);
			CHECK_EQ_INT(e->u.task.ptid, L.pid);
			CHECK(child != L.pid);
		}
	}
	CHECK(child > 0);
	for (size_t i = 0; child > 0 && i < L.n; i++) {
		const struct ptd_perf_event *e = &L.v[i].ev;

		if (e->type != PERF_RECORD_EXIT)
			continue;
		if ((pid_t)e->u.task.pid == child) {
			CHECK_EQ_INT(e->u.task.tid, child);
			CHECK_EQ_INT(e->u.task.ppid, L.pid);
			exits_child++;
		} else if ((pid_t)e->u.task.pid == L.pid) {
			exits_main++;
		}
	}
	CHECK_EQ_U64(exits_child, 1);
	CHECK_EQ_U64(exits_main, 1);
	live_free(&L);
}

static void test_live_threads(void)
{
	char prog[PATH_MAX];
	struct live L;
	pid_t tids[2] = { 0, 0 };
	size_t nthreads = 0, texits = 0;
	int st;

	if (!live_ok)
		return;
	if (!prog_path(prog, sizeof(prog), "prog-threads"))
		return;
	st = live_run(prog, NULL, true, &L);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	check_common(&L);
	for (size_t i = 0; i < L.n; i++) {
		const struct ptd_perf_event *e = &L.v[i].ev;

		if (e->type != PERF_RECORD_FORK)
			continue;
		/* a thread: same pid, new tid, created by the main thread */
		CHECK_EQ_INT(e->u.task.pid, L.pid);
		CHECK_EQ_INT(e->u.task.ppid, L.pid);
		CHECK_EQ_INT(e->u.task.ptid, L.pid);
		CHECK(e->u.task.tid != (uint32_t)L.pid);
		if (nthreads < 2)
			tids[nthreads] = (pid_t)e->u.task.tid;
		nthreads++;
	}
	CHECK_EQ_U64(nthreads, 2);
	for (size_t i = 0; i < L.n; i++) {
		const struct ptd_perf_event *e = &L.v[i].ev;

		if (e->type == PERF_RECORD_EXIT && e->u.task.pid == (uint32_t)L.pid &&
		    ((pid_t)e->u.task.tid == tids[0] ||
		     (pid_t)e->u.task.tid == tids[1])) {
			CHECK(tids[0] != tids[1]);
			texits++;
		}
		/* the threads' own records carry their tids */
		if (e->sid.pid == (uint32_t)L.pid && e->sid.tid != (uint32_t)L.pid)
			CHECK((pid_t)e->sid.tid == tids[0] ||
			      (pid_t)e->sid.tid == tids[1]);
	}
	CHECK_EQ_U64(texits, 2);
	live_free(&L);
}

/* Without inherit the threads' own events do not exist: their creation
 * is seen (FORK comes from the main thread) but nothing they do. */
static void test_live_no_inherit(void)
{
	char prog[PATH_MAX];
	struct live L;
	size_t forks = 0;
	int st;

	if (!live_ok || !prog_path(prog, sizeof(prog), "prog-threads"))
		return;
	st = live_run(prog, NULL, false, &L);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	check_common(&L);
	for (size_t i = 0; i < L.n; i++) {
		const struct ptd_perf_event *e = &L.v[i].ev;

		forks += e->type == PERF_RECORD_FORK;
		if (e->sid.tid != (uint32_t)L.pid)
			CHECK_FAIL_("record %s from tid %u",
				    ptd_perf_record_name(e->type),
				    (unsigned)e->sid.tid);
	}
	CHECK_EQ_U64(forks, 2);
	live_free(&L);
}

int main(void)
{
	RUN(test_sample_id_size);
	RUN(test_mmap2_kernel_bytes);
	RUN(test_comm_kernel_bytes);
	RUN(test_roundtrip_mmap2);
	RUN(test_roundtrip_comm_task_itrace);
	RUN(test_roundtrip_code_unmap);
	RUN(test_roundtrip_switch);
	RUN(test_encode_refusals);
	RUN(test_kernel_only_records);
	RUN(test_unknown_type);
	RUN(test_truncated);
	RUN(test_bad_strings);
	RUN(test_bad_code);
	RUN(test_to_tl);
	RUN(test_to_tl_apply);
	RUN(test_attr);
	RUN(test_cpulist);
	RUN(test_online_cpus);

	probe_live();
	RUN(test_open_errors);
	RUN(test_open_eacces);
	RUN(test_live_dlopen);
	RUN(test_live_exec);
	RUN(test_live_fork);
	RUN(test_live_threads);
	RUN(test_live_no_inherit);
	if (!live_ok) {
		if (check_failures)
			return check_done();
		SKIP_ALL("live sideband tests: %s (every other test passed)",
			 live_skip);
	}
	return check_done();
}
