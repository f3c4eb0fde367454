/* SPDX-License-Identifier: MIT */
/*
 * perf.data reader: files and pipe streams built here from format.h and the
 * sideband encoders (per-thread and per-CPU, every feature ptd reads),
 * every kind of damage refused with a message naming what and where, a
 * fuzz of random mutations, and real `perf record -e dummy:u` files whose
 * image model matches the traced program's own /proc/self/maps.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include <gelf.h>
#include <libelf.h>

#include "aspace/elf.h"
#include "aspace/image.h"
#include "aspace/iscache.h"
#include "aspace/maps.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "perfdata/decode.h"
#include "perfdata/read.h"
#include "unit/pdbuild.h"
#include "unit/ptenc.h"

static char tmpdir[] = "/tmp/ptd-pdr-XXXXXX";

static const uint8_t trace_a[64] = { 0x02, 0x82, 0x02, 0x82 };
static const uint8_t trace_b[32] = { 0x02, 0x82 };

/* A per-thread recording of process 100 (threads 100, 101). */
static void fb_per_thread(struct fb *f)
{
	fb_init(f);
	fb_ptinfo(f, false, "filter main @ /bin/x");
	fb_comm(f, 100, 100, true, "prog");
	fb_mmap2(f, 100, 0x400000, 0x1000, 0, "/bin/true", NULL);
	fb_itrace(f, 100, 100, UINT32_MAX);
	fb_itrace(f, 100, 101, UINT32_MAX);
	fb_auxtrace(f, 100, UINT32_MAX, 0, trace_a, sizeof(trace_a));
	fb_aux(f, 100, 100, 0, 0, sizeof(trace_a), 0);
	fb_auxtrace(f, 101, UINT32_MAX, 0, trace_b, sizeof(trace_b));
	fb_aux(f, 100, 101, 0, 0, sizeof(trace_b), 0);
	fb_features(f);
}

static void check_per_thread(const struct ptd_perfdata *pd, bool pipe)
{
	CHECK_EQ_INT(pd->pipe, pipe);
	CHECK_EQ_U64(pd->nattrs, 2);
	CHECK_EQ_U64(pd->attrs[0].nids, 1);
	CHECK_EQ_U64(pd->attrs[1].ids[0], 2);
	CHECK_EQ_U64(pd->attrs[1].attr.sample_type, ST);
	CHECK(pd->have_cpu);
	CHECK_EQ_INT(pd->cpu.family, 6);
	CHECK_EQ_INT(pd->cpu.model, 85);
	CHECK_EQ_INT(pd->cpu.stepping, 4);
	CHECK(pd->have_nrcpus);
	CHECK_EQ_U64(pd->nrcpus.nr_cpus_online, 4);
	CHECK(pd->have_clock_data);
	CHECK_EQ_U64(pd->clock_data.wall_clock_ns, 1000);
	CHECK(pd->pt.present);
	CHECK_EQ_U64(pd->pt.pmu_type, 8);
	CHECK_EQ_U64(pd->pt.tsc_bit, 1u << 10);
	CHECK_EQ_U64(pd->pt.noretcomp_bit, 1u << 11);
	CHECK_EQ_U64(pd->pt.mtc_bit, 1u << 9);
	CHECK_EQ_U64(pd->pt.mtc_freq_bits, 0xfu << 14);
	CHECK_EQ_U64(pd->pt.cyc_bit, 1u << 1);
	CHECK(!pd->pt.per_cpu_mmaps);
	CHECK_EQ_STR(pd->pt.filter, "filter main @ /bin/x");
	REQUIRE(pd->nauxtrace == 2);
	CHECK_EQ_U64(pd->auxtrace[0].tid, 100);
	CHECK_EQ_U64(pd->auxtrace[1].size, sizeof(trace_b));
	CHECK(!memcmp(pd->auxtrace[0].data, trace_a, sizeof(trace_a)));
	CHECK_EQ_U64(pd->nindex, pipe ? 0 : 2);
	CHECK(ptd_perfdata_feat_test(pd->features, PTD_PERFDATA_HEADER_CPUID));
	REQUIRE(pd->nbuildids == 1);
	CHECK_EQ_STR(pd->buildids[0].filename, "/no/such/lib");
	CHECK_EQ_U64(pd->buildids[0].id[0], 0xab);
	CHECK(ptd_perfdata_find_buildid(pd, "/no/such/lib") != NULL);
	CHECK_EQ_U64(pd->nrecs, pipe ? 15 : 9);
}

static void test_file_per_thread(void)
{
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag diag = { "" };
	struct ptd_perf_event e;
	struct ptd_buf out;
	struct fb f;
	int r;

	fb_per_thread(&f);
	fb_file(&f, &out);
	r = ptd_perfdata_parse(out.data, out.len, "t.data", &pd, &diag);
	CHECK_EQ_INT(r, 0);
	if (r == 0) {
		check_per_thread(pd, false);
		CHECK_EQ_INT(ptd_perfdata_event(pd, 2, &e, &diag), 0);
		CHECK_EQ_INT(e.type, PERF_RECORD_MMAP2);
		CHECK_EQ_STR(e.u.mmap.filename, "/bin/true");
		CHECK_EQ_U64(e.sid.identifier, 2);
		CHECK_EQ_INT(ptd_perfdata_event(pd, 0, &e, NULL), -EINVAL);
	}
	ptd_perfdata_free(pd);
	ptd_buf_fini(&out);
	fb_free(&f);
}

/* The same content as a pipe stream: from memory, from a pipe fd, and
 * through ptd_perfdata_open of a FIFO path. */
static void test_pipe_per_thread(void)
{
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag diag = { "" };
	struct ptd_buf out;
	struct fb f;
	int fds[2], r;
	pid_t child;

	fb_per_thread(&f);
	fb_pipe(&f, &out);
	r = ptd_perfdata_parse(out.data, out.len, "pipe", &pd, &diag);
	CHECK_EQ_INT(r, 0);
	if (r == 0)
		check_per_thread(pd, true);
	ptd_perfdata_free(pd);
	pd = NULL;

	REQUIRE(pipe(fds) == 0);
	child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		close(fds[0]);
		_exit(ptd_write_all(fds[1], out.data, out.len) ? 1 : 0);
	}
	close(fds[1]);
	r = ptd_perfdata_read_fd(fds[0], "-", &pd, &diag);
	close(fds[0]);
	CHECK_EQ_INT(r, 0);
	if (r == 0)
		check_per_thread(pd, true);
	ptd_perfdata_free(pd);
	pd = NULL;
	(void)waitpid(child, NULL, 0);

	/* A FIFO given by path is read as a stream. */
	{
		char fifo[512];

		(void)snprintf(fifo, sizeof(fifo), "%s/fifo", tmpdir);
		REQUIRE(mkfifo(fifo, 0600) == 0);
		child = fork();
		REQUIRE(child >= 0);
		if (child == 0) {
			int fd = open(fifo, O_WRONLY | O_CLOEXEC);

			_exit(fd < 0 || ptd_write_all(fd, out.data, out.len));
		}
		r = ptd_perfdata_open(fifo, &pd, &diag);
		CHECK_EQ_INT(r, 0);
		if (r == 0)
			check_per_thread(pd, true);
		ptd_perfdata_free(pd);
		(void)waitpid(child, NULL, 0);
	}
	ptd_buf_fini(&out);
	fb_free(&f);
}

static void test_per_cpu(void)
{
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag diag = { "" };
	struct ptd_buf out;
	struct fb f;
	int r;

	fb_init(&f);
	fb_ptinfo(&f, true, NULL);
	fb_comm(&f, 100, 100, true, "prog");
	fb_itrace(&f, 100, 100, 1);
	fb_aux(&f, 100, 100, 1, 0, sizeof(trace_a), 0);
	fb_auxtrace(&f, UINT32_MAX, 1, 0, trace_a, sizeof(trace_a));
	fb_file(&f, &out);
	r = ptd_perfdata_parse(out.data, out.len, "cpu.data", &pd, &diag);
	CHECK_EQ_INT(r, 0);
	if (r == 0) {
		CHECK(pd->pt.per_cpu_mmaps);
		CHECK(pd->pt.filter == NULL);
		CHECK_EQ_U64(pd->auxtrace[0].cpu, 1);
		CHECK_EQ_U64(pd->auxtrace[0].tid, UINT32_MAX);
	}
	ptd_perfdata_free(pd);
	ptd_buf_fini(&out);
	fb_free(&f);
}

/* ---- damage ----------------------------------------------------------- */

static void expect_refused(const char *what, const struct ptd_buf *b,
			   int err, const char *msg)
{
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag diag = { "" };
	int r = ptd_perfdata_parse(b->data, b->len, "bad.data", &pd, &diag);

	if (err == 0) {
		if (r != 0)
			CHECK_FAIL_("%s: refused: %s", what, diag.msg);
		ptd_perfdata_free(pd);
		return;
	}
	if (r != err)
		CHECK_FAIL_("%s: expected %s, got %d (%s) '%s'", what,
			    ptd_strerror(err), r, ptd_strerror(r), diag.msg);
	CHECK(pd == NULL);
	if (!strstr(diag.msg, msg) || !strstr(diag.msg, "bad.data"))
		CHECK_FAIL_("%s: message '%s' lacks '%s' or the file name",
			    what, diag.msg, msg);
	ptd_perfdata_free(pd);
}

static void set_u64(struct ptd_buf *b, size_t off, uint64_t v)
{
	memcpy(b->data + off, &v, 8);
}

static void set_u16(struct ptd_buf *b, size_t off, uint16_t v)
{
	memcpy(b->data + off, &v, 2);
}

static void test_damage(void)
{
	struct ptd_buf good, b;
	struct fb f;
	uint64_t data_off, rec0, aux0;
	fb_per_thread(&f);
	fb_file(&f, &good);
	memcpy(&data_off, good.data + 40, 8);
	rec0 = data_off;		/* AUXTRACE_INFO */
	aux0 = data_off + f.aux_offsets[0];

#define MUT(what, err, msg, ...)                                              \
	do {                                                                  \
		memset(&b, 0, sizeof(b));                                     \
		put(&b, good.data, good.len);                                 \
		__VA_ARGS__;                                                  \
		expect_refused(what, &b, err, msg);                           \
		ptd_buf_fini(&b);                                             \
	} while (0)

	MUT("empty", -PTD_ETRUNC, "too short", b.len = 0);
	MUT("truncated header", -PTD_ETRUNC, "file header cut short",
	    b.len = 60);
	MUT("wrong magic", -PTD_EFORMAT, "bad magic", b.data[0] = 'X');
	MUT("big-endian", -PTD_EUNSUPPORTED, "big-endian",
	    set_u64(&b, 0, PTD_PERFDATA_MAGIC_SWAPPED));
	MUT("header size", -PTD_EFORMAT, "header size 96",
	    set_u64(&b, 8, 96));
	MUT("attr_size", -PTD_EFORMAT, "attr_size 100", set_u64(&b, 16, 100));
	MUT("attr_size stride", -PTD_EFORMAT, "not a multiple of attr_size",
	    set_u64(&b, 16, 136));
	MUT("attrs outside", -PTD_ETRUNC, "attrs section",
	    set_u64(&b, 24, good.len));
	MUT("absurd attr count", -PTD_ELIMIT, "event attrs",
	    set_u64(&b, 32, 144ull * 100000));
	MUT("ids outside", -PTD_EFORMAT, "ids section",
	    set_u64(&b, 104 + 128, good.len + 8));
	MUT("attr.size", -PTD_EFORMAT, "attr.size",
	    b.data[104 + 4] = 200);
	MUT("data outside", -PTD_ETRUNC, "data section",
	    set_u64(&b, 48, good.len));
	MUT("data misaligned", -PTD_EFORMAT, "8-aligned",
	    set_u64(&b, 40, data_off + 4));
	MUT("record size 0", -PTD_EFORMAT, "below its 8-byte header",
	    set_u16(&b, rec0 + 6, 0));
	MUT("record size 4", -PTD_EFORMAT, "below its 8-byte header",
	    set_u16(&b, rec0 + 6, 4));
	MUT("record past data", -PTD_ETRUNC, "runs past the end",
	    set_u64(&b, 48, 100));
	MUT("AUXTRACE beyond file", -PTD_ETRUNC, "AUXTRACE payload",
	    set_u64(&b, aux0 + 8, 1ull << 40));
	MUT("AUXTRACE size odd", -PTD_EFORMAT, "multiple of 8",
	    set_u64(&b, aux0 + 8, 63));
	MUT("AUXTRACE header", -PTD_EFORMAT, "AUXTRACE record of 40",
	    set_u16(&b, aux0 + 6, 40));
	MUT("compressed", -PTD_EUNSUPPORTED, "compressed",
	    set_u16(&b, rec0, PTD_PERFDATA_RECORD_COMPRESSED));
	{
		struct ptd_perfdata *pd = NULL;
		uint64_t mm, idx, bodies, pd_comm;

		REQUIRE(ptd_perfdata_parse(good.data, good.len, "g", &pd,
					   NULL) == 0);
		mm = pd->recs[2].offset;	/* the MMAP2 */
		pd_comm = pd->recs[1].offset;
		ptd_perfdata_free(pd);
		MUT("record size odd", -PTD_EFORMAT, "not a multiple of 8",
		    set_u16(&b, pd_comm + 6, 20));
		MUT("unterminated MMAP2 name", -PTD_EFORMAT, "MMAP2",
		    memset(b.data + mm + 72, 'x', 16));
		/* bodies: BUILD_ID, NRCPUS, CPUID, AUXTRACE index, CLOCK_DATA */
		bodies = data_off + f.recs.len + 5 * 16;
		idx = good.len - 24 - 40;
		MUT("index to nowhere", -PTD_EFORMAT, "not an AUXTRACE record",
		    set_u64(&b, idx + 8, data_off));
		MUT("absurd index count", -PTD_EFORMAT, "auxtrace index group",
		    set_u64(&b, idx, 1ull << 40));
		MUT("build-id entry size", -PTD_EFORMAT, "build-id entry size",
		    set_u16(&b, bodies + 6, 60000));
	}
	MUT("truncated file", -PTD_ETRUNC, "feature", b.len = good.len - 70);
	/* A feature ptd does not know is skipped, as perf does; its
	 * section entry is still checked (here it is the bytes past the
	 * table). */
	MUT("unknown feature", -PTD_ETRUNC, "feature 40",
	    b.data[72 + 5] |= 1);
	MUT("feature outside", -PTD_ETRUNC, "lies outside",
	    set_u64(&b, data_off + f.recs.len + 8, 1ull << 50));
	ptd_buf_fini(&good);
	fb_free(&f);

	/* Events of different sample_id layouts: told apart by
	 * IDENTIFIER; an id no event owns is refused. */
	fb_init(&f);
	f.attr[0].sample_type |= PERF_SAMPLE_ID;
	fb_comm(&f, 100, 100, true, "prog");
	fb_file(&f, &good);
	memcpy(&data_off, good.data + 40, 8);
	MUT("different layouts", 0, "", (void)0);
	MUT("unknown sample id", -PTD_EFORMAT, "belongs to no event",
	    set_u64(&b, data_off + f.recs.len - 8, 7));
	f.attr[0].sample_type &= ~(uint64_t)PERF_SAMPLE_IDENTIFIER;
	ptd_buf_fini(&good);
	fb_file(&f, &good);
	MUT("layouts without common id", -PTD_EUNSUPPORTED, "sample_id "
	    "layouts", (void)0);
	ptd_buf_fini(&good);
	fb_free(&f);

	/* Pipe streams: an attr record whose size lies, a truncated record,
	 * trailing bytes. */
	fb_per_thread(&f);
	fb_pipe(&f, &good);
	MUT("pipe attr size", -PTD_EFORMAT, "HEADER_ATTR attr.size",
	    b.data[16 + 12] = 248);
	MUT("pipe truncated", -PTD_ETRUNC, "runs past the end",
	    b.len = good.len - 8);
	MUT("pipe trailing bytes", -PTD_ETRUNC, "record header cut short",
	    put_u32(&b, 0));
	/* perf ends a pipe's features with a HEADER_LAST_FEATURE record
	 * (32 in perf 6.1, more in later perfs): skipped and counted. */
	MUT("pipe unknown feature", 0, "", set_u64(&b, 16 + 2 * 144 + 8, 77));
	{
		struct ptd_perfdata *pd = NULL;
		struct ptd_diag diag = { "" };

		memset(&b, 0, sizeof(b));
		put(&b, good.data, good.len);
		set_u64(&b, 16 + 2 * 144 + 8, 32);
		CHECK_EQ_INT(ptd_perfdata_parse(b.data, b.len, "last.data",
						&pd, &diag), 0);
		if (pd)
			CHECK_EQ_U64(pd->unknown_features, 1);
		ptd_perfdata_free(pd);
		ptd_buf_fini(&b);
	}
	ptd_buf_fini(&good);
	fb_free(&f);
#undef MUT
}

/* ---- decoding errors without real PT ---------------------------------- */

struct sinkrec {
	unsigned errors, info;
	char first[512];
	long pid;
};

static int sr_info(void *ctx, const struct ptd_input_info *in)
{
	struct sinkrec *s = ctx;

	s->info++;
	s->pid = in->pid;
	return 0;
}

static int sr_record(void *ctx, const struct ptd_record *r)
{
	struct sinkrec *s = ctx;

	if (r->type == PTD_REC_ERROR && r->u.error.ptd_code &&
	    r->u.error.code == -PTD_ENOIMAGE && !s->first[0])
		(void)snprintf(s->first, sizeof(s->first), "%s",
			       r->u.error.context);
	if (r->type == PTD_REC_ERROR)
		s->errors++;
	return 0;
}

static void decode_buf(const struct ptd_buf *b,
		       const struct ptd_input_opts *o, struct sinkrec *s,
		       int want)
{
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag diag = { "" };
	struct ptd_input_sink sink = { sr_info, sr_record, NULL, s };
	int r = ptd_perfdata_parse(b->data, b->len, "d.data", &pd, &diag);

	memset(s, 0, sizeof(*s));
	CHECK_EQ_INT(r, 0);
	if (r == 0) {
		r = ptd_perfdata_decode_parsed(pd, o, &sink, NULL, &diag);
		if (r != want)
			CHECK_FAIL_("decode: expected %d, got %d: %s", want, r,
				    diag.msg);
	}
	ptd_perfdata_free(pd);
}

/* A mapping whose file is missing gives an error record naming it and
 * its build-id; a build-id cache or a sysroot makes it found. */
static void test_missing_image(void)
{
	static const uint8_t id[20] = { 0x12, 0x34, 0x56 };
	char path[512], dir[512];
	struct ptd_input_opts o;
	struct sinkrec s;
	struct ptd_buf out;
	struct fb f;

	fb_init(&f);
	fb_ptinfo(&f, false, NULL);
	fb_comm(&f, 100, 100, true, "prog");
	fb_mmap2(&f, 100, 0x400000, 0x1000, 0, "/no/such/prog", id);
	fb_itrace(&f, 100, 100, UINT32_MAX);
	fb_auxtrace(&f, 100, UINT32_MAX, 0, trace_a, sizeof(trace_a));
	fb_file(&f, &out);
	memset(&o, 0, sizeof(o));
	decode_buf(&out, &o, &s, 0);
	CHECK_EQ_INT(s.info, 1);
	CHECK_EQ_INT(s.pid, 100);
	CHECK_CONTAINS(s.first, "/no/such/prog");
	CHECK_CONTAINS(s.first, "1234560000");

	/* build-id cache: DIR/.build-id/12/3456.../elf */
	(void)snprintf(dir, sizeof(dir), "%s/bid/.build-id/12/"
		       "34560000000000000000000000000000000000", tmpdir);
	REQUIRE(ptd_strlcpy(path, dir, sizeof(path)) == 0);
	REQUIRE(system(NULL) != 0);
	{
		char cmd[1200];

		(void)snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp /bin/true "
			       "%s/elf && mkdir -p %s/root/no/such && cp "
			       "/bin/true %s/root/no/such/prog", dir, dir,
			       tmpdir, tmpdir);
		REQUIRE(system(cmd) == 0);
	}
	(void)snprintf(path, sizeof(path), "%s/bid", tmpdir);
	o.buildid_dir = path;
	decode_buf(&out, &o, &s, 0);
	CHECK_EQ_STR(s.first, "");
	o.buildid_dir = tmpdir;	/* no cache there */
	decode_buf(&out, &o, &s, 0);
	CHECK_CONTAINS(s.first, "/no/such/prog");
	(void)snprintf(dir, sizeof(dir), "%s/root", tmpdir);
	o.sysroot = dir;
	decode_buf(&out, &o, &s, 0);
	CHECK_EQ_STR(s.first, "");

	/* have_tid of a thread without trace. */
	memset(&o, 0, sizeof(o));
	o.have_tid = true;
	o.tid = 4242;
	decode_buf(&out, &o, &s, -ENOENT);
	ptd_buf_fini(&out);
	fb_free(&f);
}

/* Records with a TSC and the time they were given. */
struct timed {
	struct ptd_perf_clock clock;
	unsigned tsc, timed, wrong;
};

static int timed_record(void *ctx, const struct ptd_record *r)
{
	struct timed *t = ctx;

	if (!r->has_tsc)
		return 0;
	t->tsc++;
	if (!r->has_time)
		return 0;
	t->timed++;
	if (r->time != ptd_perf_tsc_to_time(&t->clock, r->tsc))
		t->wrong++;
	return 0;
}

/* Records get perf time from AUXTRACE_INFO's TSC conversion when the
 * kernel gave one (cap_user_time_zero), and none without it. */
static void test_time(void)
{
	struct timed t = { .clock = { .time_zero = 77777, .time_mult = 3,
				      .time_shift = 1 } };
	struct ptd_input_sink sink = { NULL, timed_record, NULL, &t };
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag d = { "" };
	struct ptd_input_opts o;
	struct ptd_buf out;
	struct trace pt;
	struct fb f;
	size_t priv = sizeof(struct ptd_perfdata_auxtrace_info);

	/* PSB+ with a TSC, tracing on at the start of /bin/true */
	tr_begin(&pt);
	psb_tsc(&pt, 0x123456789ull, 0x400000);
	pad8(&pt);
	tr_end(&pt);
	memset(&o, 0, sizeof(o));
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT);
	for (int with = 0; with < 2; with++) {
		fb_init(&f);
		fb_ptinfo(&f, false, NULL);
		if (with) {
			set_u64(&f.recs, priv + 8 *
				PTD_PERFDATA_INTEL_PT_CAP_USER_TIME_ZERO, 1);
			set_u64(&f.recs, priv + 8 *
				PTD_PERFDATA_INTEL_PT_TIME_MULT, 3);
			set_u64(&f.recs, priv + 8 *
				PTD_PERFDATA_INTEL_PT_TIME_SHIFT, 1);
			set_u64(&f.recs, priv + 8 *
				PTD_PERFDATA_INTEL_PT_TIME_ZERO, 77777);
		}
		fb_comm(&f, 100, 100, true, "prog");
		fb_mmap2(&f, 100, 0x400000, 0x1000, 0, "/bin/true", NULL);
		fb_itrace(&f, 100, 100, UINT32_MAX);
		fb_auxtrace(&f, 100, UINT32_MAX, 0, pt.buf, pt.len);
		fb_file(&f, &out);
		memset(&t.tsc, 0, sizeof(t) - sizeof(t.clock));
		if (ptd_perfdata_parse(out.data, out.len, "t.data", &pd,
				       &d) < 0)
			fprintf(stderr, "  %s\n", d.msg);
		REQUIRE(pd);
		CHECK_EQ_INT(ptd_perfdata_decode_parsed(pd, &o, &sink, NULL,
							&d), 0);
		CHECK(t.tsc > 0);
		CHECK_EQ_INT(t.timed, with ? t.tsc : 0);
		CHECK_EQ_INT(t.wrong, 0);
		ptd_perfdata_free(pd);
		ptd_buf_fini(&out);
		fb_free(&f);
	}
}

/* The first insn record's ip and module, and the first missing image. */
struct first_insn {
	bool have;
	uint64_t ip;
	char module[64];
	char noimage[512];
};

static int fi_record(void *ctx, const struct ptd_record *r)
{
	struct first_insn *f = ctx;

	if (r->type == PTD_REC_INSN && !f->have) {
		f->have = true;
		f->ip = r->u.insn.ip;
		(void)snprintf(f->module, sizeof(f->module), "%s",
			       r->u.insn.module);
	}
	if (r->type == PTD_REC_ERROR && r->u.error.ptd_code &&
	    r->u.error.code == -PTD_ENOIMAGE && !f->noimage[0])
		(void)snprintf(f->noimage, sizeof(f->noimage), "%s",
			       r->u.error.context);
	return 0;
}

/* The .text address of the ELF open at @fd (0: none). */
static uint64_t text_addr(int fd)
{
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	size_t shstr;
	uint64_t at = 0;

	if (!e || elf_getshdrstrndx(e, &shstr) != 0) {
		elf_end(e);
		return 0;
	}
	while (!at && (scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		const char *n;

		if (gelf_getshdr(scn, &sh) &&
		    (n = elf_strptr(e, shstr, sh.sh_name)) &&
		    !strcmp(n, ".text"))
			at = sh.sh_addr;
	}
	elf_end(e);
	return at;
}

/* A [vdso] mapping is found in perf's build-id cache under the name perf
 * gives it there (.build-id/xx/REST/vdso), or is this machine's own vDSO
 * when the build-ids agree (a recording made here), and is missing with a
 * message saying both otherwise. */
static void test_vdso(void)
{
	struct first_insn fi;
	struct ptd_input_sink sink = { NULL, fi_record, NULL, &fi };
	char hex[2 * PTD_ELF_BUILD_ID_MAX + 1], dir[512], cmd[1200];
	uint8_t bid[20] = { 0 }, other[20] = { 0x77 };
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag d = { "" };
	struct ptd_input_opts o;
	struct ptd_buf out;
	struct trace pt;
	uint64_t text, base = 0x7f0000000000ull;
	struct fb f;
	int fd;

	REQUIRE(elf_version(EV_CURRENT) != EV_NONE);
	fd = ptd_elf_own_vdso(hex, sizeof(hex));
	if (fd == -ENOENT) {
		fprintf(stderr, "  skipped: this process has no vDSO\n");
		return;
	}
	REQUIRE(fd >= 0);
	REQUIRE(strlen(hex) == 40);
	for (size_t i = 0; i < 20; i++) {
		unsigned v;

		REQUIRE(sscanf(hex + 2 * i, "%2x", &v) == 1);
		bid[i] = (uint8_t)v;
	}
	text = text_addr(fd);
	REQUIRE(text);
	/* tracing on at the vDSO's .text (vaddr = file offset in a vDSO),
	 * off again at its first branch that needs trace */
	tr_begin(&pt);
	psb_tsc(&pt, 1, base + text);
	ippkt(&pt, ppt_tip_pgd, 0);
	pad8(&pt);
	tr_end(&pt);
	memset(&o, 0, sizeof(o));
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN);
	o.buildid_dir = tmpdir;		/* no cache there */
	for (int k = 0; k < 3; k++) {
		fb_init(&f);
		fb_ptinfo(&f, false, NULL);
		fb_comm(&f, 100, 100, true, "prog");
		fb_mmap2(&f, 100, base, 0x2000, 0, "[vdso]",
			 k == 1 ? other : bid);
		fb_itrace(&f, 100, 100, UINT32_MAX);
		fb_auxtrace(&f, 100, UINT32_MAX, 0, pt.buf, pt.len);
		fb_file(&f, &out);
		REQUIRE(ptd_perfdata_parse(out.data, out.len, "v.data", &pd,
					   &d) == 0);
		memset(&fi, 0, sizeof(fi));
		CHECK_EQ_INT(ptd_perfdata_decode_parsed(pd, &o, &sink, NULL,
							&d), 0);
		if (k == 1) {
			/* another machine's vDSO, not in the cache */
			CHECK(!fi.have);
			CHECK_CONTAINS(fi.noimage, "[vdso]");
			CHECK_CONTAINS(fi.noimage, "77000000");
			CHECK_CONTAINS(fi.noimage, "this machine's vDSO");
		} else {
			CHECK_EQ_STR(fi.noimage, "");
			CHECK(fi.have);
			CHECK_EQ_U64(fi.ip, base + text);
			CHECK_EQ_STR(fi.module, "[vdso]");
		}
		ptd_perfdata_free(pd);
		ptd_buf_fini(&out);
		fb_free(&f);
		if (k == 1) {
			/* perf's cache: .build-id/77/0000.../vdso, a copy of
			 * this vDSO standing in for the other machine's */
			(void)snprintf(dir, sizeof(dir), "%s/vcache/.build-id/"
				       "77/00000000000000000000000000000000"
				       "000000", tmpdir);
			(void)snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp "
				       "/proc/%d/fd/%d %s/vdso", dir, (int)getpid(), fd,
				       dir);
			REQUIRE(system(cmd) == 0);
			(void)snprintf(dir, sizeof(dir), "%s/vcache", tmpdir);
			o.buildid_dir = dir;
			memcpy(bid, other, sizeof(bid));
		}
	}
	(void)close(fd);
}

struct tsc_span {
	unsigned n;
	uint64_t first, last;
};

static int span_record(void *ctx, const struct ptd_record *r)
{
	struct tsc_span *t = ctx;

	if (r->type != PTD_REC_INSN || !r->has_tsc)
		return 0;
	if (!t->n++)
		t->first = r->tsc;
	t->last = r->tsc;
	return 0;
}

/* MTC packets advance time between TSCs as perf's decoder has them: the
 * MTC period from the intel_pt event's mtc_period field (AUXTRACE_INFO
 * gives its mask), the TSC:CTC ratio from AUXTRACE_INFO.  Without the
 * ratio, the TSC alone gives time. */
static void test_mtc(void)
{
	static const uint8_t code[] = { 0x90, 0x74, 0x00, 0x90, 0x74, 0x00,
					0x90, 0x0f, 0x05 };
	const uint64_t t0 = 0x1000000, base = 0x400000;
	struct tsc_span t;
	struct ptd_input_sink sink = { NULL, span_record, NULL, &t };
	size_t priv = sizeof(struct ptd_perfdata_auxtrace_info);
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag d = { "" };
	struct ptd_input_opts o;
	char path[512];
	struct ptd_buf out;
	struct pt_packet p;
	struct trace pt;
	struct fb f;
	FILE *fp;

	(void)snprintf(path, sizeof(path), "%s/mtc-code", tmpdir);
	fp = fopen(path, "w");
	REQUIRE(fp && fwrite(code, 1, sizeof(code), fp) == sizeof(code));
	REQUIRE(fclose(fp) == 0);
	/* PSB+ with TSC and TMA (CTC 0x10), tracing on at @base; the first
	 * je taken, an MTC (CTC 3 << 3 = 0x18: 8 CTC ticks later), the
	 * second je taken, the syscall ends tracing. */
	tr_begin(&pt);
	simple(&pt, ppt_psb);
	memset(&p, 0, sizeof(p));
	p.type = ppt_mode;
	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
	pkt(&pt, &p);
	memset(&p, 0, sizeof(p));
	p.type = ppt_tsc;
	p.payload.tsc.tsc = t0;
	pkt(&pt, &p);
	memset(&p, 0, sizeof(p));
	p.type = ppt_tma;
	p.payload.tma.ctc = 0x10;
	pkt(&pt, &p);
	ippkt(&pt, ppt_fup, base);
	simple(&pt, ppt_psbend);
	tnt(&pt, "1");
	memset(&p, 0, sizeof(p));
	p.type = ppt_mtc;
	p.payload.mtc.ctc = 3;
	pkt(&pt, &p);
	tnt(&pt, "1");
	ippkt(&pt, ppt_tip_pgd, 0);
	pad8(&pt);
	tr_end(&pt);
	memset(&o, 0, sizeof(o));
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN);
	for (int mtc = 0; mtc < 2; mtc++) {
		fb_init(&f);
		/* tsc, mtc, mtc_period 3 */
		f.attr[0].config = (1u << 10) | (1u << 9) | (3u << 14);
		fb_ptinfo(&f, false, NULL);
		/* without the TSC:CTC ratio (mtc 0), MTCs cannot be
		 * converted */
		set_u64(&f.recs, priv + 8 * PTD_PERFDATA_INTEL_PT_TSC_CTC_N,
			mtc ? 100 : 0);
		set_u64(&f.recs, priv + 8 * PTD_PERFDATA_INTEL_PT_TSC_CTC_D,
			mtc ? 1 : 0);
		fb_comm(&f, 100, 100, true, "prog");
		fb_mmap2(&f, 100, base, 0x1000, 0, path, NULL);
		fb_itrace(&f, 100, 100, UINT32_MAX);
		fb_auxtrace(&f, 100, UINT32_MAX, 0, pt.buf, pt.len);
		fb_file(&f, &out);
		REQUIRE(ptd_perfdata_parse(out.data, out.len, "m.data", &pd,
					   &d) == 0);
		for (int path_blk = 0; path_blk < 2; path_blk++) {
			o.decode.path = path_blk ? PTD_PATH_BLOCK
						 : PTD_PATH_INSN;
			memset(&t, 0, sizeof(t));
			CHECK_EQ_INT(ptd_perfdata_decode_parsed(pd, &o, &sink,
								NULL, &d),
				     0);
			CHECK_EQ_INT(t.n, 6);
			CHECK_EQ_U64(t.first, t0);
			/* 8 CTC ticks * 100 TSC ticks each */
			CHECK_EQ_U64(t.last, mtc ? t0 + 800 : t0);
		}
		ptd_perfdata_free(pd);
		ptd_buf_fini(&out);
		fb_free(&f);
	}
}

struct filt_got {
	unsigned insns;
	char notice[512];
};

static int filt_record(void *ctx, const struct ptd_record *r)
{
	((struct filt_got *)ctx)->insns += r->type == PTD_REC_INSN;
	return 0;
}

static void filt_notice(void *ctx, const struct ptd_diag *d)
{
	struct filt_got *g = ctx;

	(void)snprintf(g->notice, sizeof(g->notice), "%s", d->msg);
}

/* The address filter perf recorded with reaches libipt resolved in the
 * process: on a CPU with erratum SKL014 a TIP.PGD without IP after a
 * direct jump out of the filtered range ends tracing at that jump.
 * Without the filter config libipt would decode on past it; a filter that
 * cannot be resolved is said in a notice and left out. */
static void test_filter(void)
{
	/* nop; jmp 0x400010 | ...; nop; nop; syscall */
	uint8_t code[32] = { 0x90, 0xeb, 0x0d };
	static const struct {
		const char *filter;	/* the code file's path appended */
		const char *notice;
		unsigned insns;
	} cases[] = {
		{ NULL, NULL, 5 },
		{ "filter 0x0/0x3@", NULL, 2 },
		{ "filter 0x0/0x3@/not/mapped", "no executable mapping", 5 },
		{ "filter main @ ", "decoded without it", 5 },
	};
	struct filt_got g;
	struct ptd_input_sink sink = { NULL, filt_record, NULL, &g,
				       filt_notice };
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag d = { "" };
	struct ptd_input_opts o;
	char path[512], text[700];
	struct ptd_buf out;
	struct trace pt;
	struct fb f;
	FILE *fp;

	code[0x10] = 0x90;
	code[0x11] = 0x90;
	code[0x12] = 0x0f;
	code[0x13] = 0x05;
	(void)snprintf(path, sizeof(path), "%s/filter-code", tmpdir);
	fp = fopen(path, "w");
	REQUIRE(fp && fwrite(code, 1, sizeof(code), fp) == sizeof(code));
	REQUIRE(fclose(fp) == 0);
	tr_begin(&pt);
	psb_tsc(&pt, 1, 0x400000);
	ippkt(&pt, ppt_tip_pgd, 0);
	pad8(&pt);
	tr_end(&pt);
	memset(&o, 0, sizeof(o));
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN);
	for (size_t i = 0; i < PTD_ARRAY_SIZE(cases); i++) {
		if (cases[i].filter)
			(void)snprintf(text, sizeof(text), "%s%s",
				       cases[i].filter,
				       strstr(cases[i].filter, "not") ? ""
								      : path);
		fb_init(&f);
		fb_ptinfo(&f, false, cases[i].filter ? text : NULL);
		/* a Skylake: erratum SKL014 */
		put_string(fb_feat(&f, PTD_PERFDATA_HEADER_CPUID),
			   "GenuineIntel,6,94,3");
		fb_comm(&f, 100, 100, true, "prog");
		fb_mmap2(&f, 100, 0x400000, 0x1000, 0, path, NULL);
		fb_itrace(&f, 100, 100, UINT32_MAX);
		fb_auxtrace(&f, 100, UINT32_MAX, 0, pt.buf, pt.len);
		fb_file(&f, &out);
		REQUIRE(ptd_perfdata_parse(out.data, out.len, "f.data", &pd,
					   &d) == 0);
		for (int blk = 0; blk < 2; blk++) {
			o.decode.path = blk ? PTD_PATH_BLOCK : PTD_PATH_INSN;
			memset(&g, 0, sizeof(g));
			CHECK_EQ_INT(ptd_perfdata_decode_parsed(pd, &o, &sink,
								NULL, &d),
				     0);
			CHECK_EQ_INT(g.insns, cases[i].insns);
			if (cases[i].notice)
				CHECK_CONTAINS(g.notice, cases[i].notice);
			else
				CHECK_EQ_STR(g.notice, "");
		}
		ptd_perfdata_free(pd);
		ptd_buf_fini(&out);
		fb_free(&f);
	}
}

/* A file without AUXTRACE_INFO is refused by the decoder. */
static void test_no_pt(void)
{
	struct ptd_input_opts o;
	struct sinkrec s;
	struct ptd_buf out;
	struct fb f;

	fb_init(&f);
	fb_comm(&f, 100, 100, true, "prog");
	fb_file(&f, &out);
	memset(&o, 0, sizeof(o));
	decode_buf(&out, &o, &s, -PTD_EUNSUPPORTED);
	ptd_buf_fini(&out);
	fb_free(&f);
}

/* ---- streams and losses ---------------------------------------------- */

struct tstat {
	pid_t tid[4];
	uint64_t bytes[4];
	uint64_t insns[4];
	size_t n;
	unsigned trunc;
	char trunc_msg[4][256];
};

static int ts_record(void *ctx, const struct ptd_record *r)
{
	struct tstat *t = ctx;

	if (r->type == PTD_REC_ERROR && r->u.error.ptd_code &&
	    r->u.error.code == -PTD_ETRUNC && t->trunc < 4)
		(void)snprintf(t->trunc_msg[t->trunc++], 256, "%d:%s:%" PRIu64,
			       r->tid, r->u.error.context,
			       r->u.error.skipped);
	return 0;
}

static void ts_done(void *ctx, pid_t tid, const struct ptd_decode_stats *st,
		    int err, const struct ptd_diag *diag)
{
	struct tstat *t = ctx;

	(void)err;
	(void)diag;
	if (t->n < 4) {
		t->tid[t->n] = tid;
		t->insns[t->n] = st->insns;
		t->bytes[t->n++] = st->bytes;
	}
}

static int decode_stats(const struct ptd_buf *b, struct tstat *t)
{
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag diag = { "" };
	struct ptd_input_sink sink = { NULL, ts_record, ts_done, t };
	struct ptd_input_opts o;
	int r = ptd_perfdata_parse(b->data, b->len, "s.data", &pd, &diag);

	memset(t, 0, sizeof(*t));
	memset(&o, 0, sizeof(o));
	if (r == 0)
		r = ptd_perfdata_decode_parsed(pd, &o, &sink, NULL, &diag);
	if (r)
		fprintf(stderr, "decode: %s\n", diag.msg);
	ptd_perfdata_free(pd);
	return r;
}

/* Snapshot mode: consecutive snapshots of one thread that overlap with the
 * same bytes are one stream (the overlap decoded once, nothing lost);
 * overlapping bytes that differ, or a gap, are a separate snapshot with the
 * loss said. */
static void test_snapshots(void)
{
	enum { NJE = 400 };
	static uint8_t code[2 * NJE + 2];
	size_t priv = sizeof(struct ptd_perfdata_auxtrace_info);
	static const struct {
		uint64_t off2;		/* where the second snapshot starts */
		bool differ;		/* its overlap differs */
		unsigned insns, errors;
	} cases[] = {
		{ 64, false, NJE + 1, 0 },	/* back to back */
		{ 32, false, NJE + 1, 0 },	/* 32 bytes again */
		{ 32, true, 0, 1 },		/* overwritten meanwhile */
		{ 72, false, 0, 1 },		/* 8 bytes never recorded */
	};
	char path[512];
	struct ptd_buf out;
	struct trace pt;
	struct tstat t;
	struct fb f;
	uint8_t second[4096];
	FILE *fp;

	for (size_t i = 0; i < NJE; i++) {
		code[2 * i] = 0x74;	/* je +0 */
		code[2 * i + 1] = 0x00;
	}
	code[2 * NJE] = 0x0f;		/* syscall */
	code[2 * NJE + 1] = 0x05;
	(void)snprintf(path, sizeof(path), "%s/snap-code", tmpdir);
	fp = fopen(path, "w");
	REQUIRE(fp && fwrite(code, 1, sizeof(code), fp) == sizeof(code));
	REQUIRE(fclose(fp) == 0);
	tr_begin(&pt);
	psb_tsc(&pt, 1, 0x400000);
	for (size_t i = 0; i < NJE; i += 4)
		tnt(&pt, "1111");
	ippkt(&pt, ppt_tip_pgd, 0);
	pad8(&pt);
	tr_end(&pt);
	REQUIRE(pt.len > 96);
	for (size_t c = 0; c < PTD_ARRAY_SIZE(cases); c++) {
		uint64_t o2 = cases[c].off2;

		memcpy(second, pt.buf + o2, pt.len - o2);
		if (cases[c].differ)
			second[8] ^= 0x40;	/* inside the overlap */
		fb_init(&f);
		fb_ptinfo(&f, false, NULL);
		set_u64(&f.recs, priv + 8 * PTD_PERFDATA_INTEL_PT_SNAPSHOT_MODE,
			1);
		fb_comm(&f, 100, 100, true, "prog");
		fb_mmap2(&f, 100, 0x400000, 0x1000, 0, path, NULL);
		fb_itrace(&f, 100, 100, UINT32_MAX);
		fb_auxtrace(&f, 100, UINT32_MAX, 0, pt.buf, 64);
		fb_auxtrace(&f, 100, UINT32_MAX, o2, second, pt.len - o2);
		fb_file(&f, &out);
		CHECK_EQ_INT(decode_stats(&out, &t), 0);
		REQUIRE(t.n == 1);
		if (cases[c].insns)
			CHECK_EQ_U64(t.insns[0], cases[c].insns);
		else
			CHECK(t.insns[0] < NJE + 1);
		CHECK_EQ_INT(t.trunc, cases[c].errors);
		if (cases[c].errors)
			CHECK_CONTAINS(t.trunc_msg[0], "snapshot");
		ptd_buf_fini(&out);
		fb_free(&f);
	}
}

/* SWITCH (no encoder in sideband.h): header and the sample_id trailer. */
static void fb_switch(struct fb *f, uint32_t pid, uint32_t tid, uint32_t cpu,
		      bool out)
{
	struct perf_event_header h = {
		PERF_RECORD_SWITCH,
		(uint16_t)(out ? PERF_RECORD_MISC_SWITCH_OUT : 0), 8 + 32
	};

	put(&f->recs, &h, sizeof(h));
	put_u32(&f->recs, pid);
	put_u32(&f->recs, tid);
	put_u64(&f->recs, ++f->time);
	put_u32(&f->recs, cpu);
	put_u32(&f->recs, 0);
	put_u64(&f->recs, 2);
}

/* PERF_RECORD_FORK or EXIT of @tid in process @pid, seen on CPU @cpu. */
static void fb_task(struct fb *f, bool fork, uint32_t pid, uint32_t tid,
		    uint32_t cpu)
{
	struct perf_event_header h = {
		fork ? PERF_RECORD_FORK : PERF_RECORD_EXIT, 0, 8 + 24 + 32
	};

	put(&f->recs, &h, sizeof(h));
	put_u32(&f->recs, pid);
	put_u32(&f->recs, pid);
	put_u32(&f->recs, tid);
	put_u32(&f->recs, fork ? pid : tid);
	put_u64(&f->recs, ++f->time);
	put_u32(&f->recs, pid);
	put_u32(&f->recs, tid);
	put_u64(&f->recs, f->time);
	put_u32(&f->recs, cpu);
	put_u32(&f->recs, 0);
	put_u64(&f->recs, 2);
}

/* Per-CPU: a tid the kernel gives again after its thread exited is
 * another thread, with a stream of its own (one stream of both would
 * decode the second thread's trace as the first's continuation). */
static void test_per_cpu_reused_tid(void)
{
	uint8_t bytes[56];
	struct ptd_buf out;
	struct tstat t;
	struct fb f;

	memset(bytes, 0, sizeof(bytes));
	fb_init(&f);
	fb_ptinfo(&f, true, NULL);
	fb_comm(&f, 100, 100, true, "prog");
	fb_task(&f, true, 100, 101, 1);
	fb_itrace(&f, 100, 100, 1);
	fb_switch(&f, 100, 101, 1, false);
	fb_aux(&f, 100, 101, 1, 0, 24, 0);
	fb_task(&f, false, 100, 101, 1);
	fb_switch(&f, 100, 100, 1, false);
	fb_task(&f, true, 100, 101, 1);
	fb_switch(&f, 100, 101, 1, false);
	fb_aux(&f, 100, 101, 1, 24, 32, 0);
	fb_auxtrace(&f, UINT32_MAX, 1, 0, bytes, sizeof(bytes));
	fb_file(&f, &out);
	CHECK_EQ_INT(decode_stats(&out, &t), 0);
	REQUIRE(t.n == 2);
	CHECK_EQ_INT(t.tid[0], 101);
	CHECK_EQ_U64(t.bytes[0], 24);
	CHECK_EQ_INT(t.tid[1], 101);
	CHECK_EQ_U64(t.bytes[1], 32);
	ptd_buf_fini(&out);
	fb_free(&f);

	/* a FORK of a tid never seen to exit (perf synthesizes FORKs for
	 * the threads it finds) is the same thread */
	fb_init(&f);
	fb_ptinfo(&f, true, NULL);
	fb_comm(&f, 100, 100, true, "prog");
	fb_task(&f, true, 100, 101, 1);
	fb_itrace(&f, 100, 100, 1);
	fb_switch(&f, 100, 101, 1, false);
	fb_aux(&f, 100, 101, 1, 0, 24, 0);
	fb_task(&f, true, 100, 101, 1);
	fb_aux(&f, 100, 101, 1, 24, 32, 0);
	fb_auxtrace(&f, UINT32_MAX, 1, 0, bytes, sizeof(bytes));
	fb_file(&f, &out);
	CHECK_EQ_INT(decode_stats(&out, &t), 0);
	REQUIRE(t.n == 1);
	CHECK_EQ_U64(t.bytes[0], 56);
	ptd_buf_fini(&out);
	fb_free(&f);
}

/* Per-CPU: CPU 1's AUX goes to the thread that owned the CPU when each
 * PERF_RECORD_AUX was read. */
static void test_per_cpu_split(void)
{
	uint8_t bytes[96];
	struct ptd_buf out;
	struct tstat t;
	struct fb f;

	memset(bytes, 0, sizeof(bytes));
	fb_init(&f);
	fb_ptinfo(&f, true, NULL);
	fb_comm(&f, 100, 100, true, "prog");
	fb_itrace(&f, 100, 100, 1);
	fb_aux(&f, 100, 100, 1, 0, 40, 0);
	fb_switch(&f, 100, 100, 1, true);
	fb_switch(&f, 100, 101, 1, false);
	fb_aux(&f, 100, 101, 1, 40, 56, 0);
	/* perf record writes a CPU's AUXTRACE payload after the data ring's
	 * records that announce it: found anywhere in the file. */
	fb_auxtrace(&f, UINT32_MAX, 1, 0, bytes, sizeof(bytes));
	fb_file(&f, &out);
	CHECK_EQ_INT(decode_stats(&out, &t), 0);
	REQUIRE(t.n == 2);
	CHECK_EQ_U64(t.bytes[0], 40);
	CHECK_EQ_U64(t.bytes[1], 56);
	ptd_buf_fini(&out);
	fb_free(&f);

	fb_init(&f);
	fb_ptinfo(&f, true, NULL);
	fb_comm(&f, 100, 100, true, "prog");
	fb_auxtrace(&f, UINT32_MAX, 1, 0, bytes, sizeof(bytes));
	fb_itrace(&f, 100, 100, 1);
	fb_aux(&f, 100, 100, 1, 0, 40, 0);
	fb_switch(&f, 100, 100, 1, true);
	fb_switch(&f, 100, 101, 1, false);
	fb_aux(&f, 100, 101, 1, 40, 56, 0);
	fb_file(&f, &out);
	CHECK_EQ_INT(decode_stats(&out, &t), 0);
	REQUIRE(t.n == 2);
	CHECK_EQ_INT(t.tid[0], 100);
	CHECK_EQ_U64(t.bytes[0], 40);
	CHECK_EQ_INT(t.tid[1], 101);
	CHECK_EQ_U64(t.bytes[1], 56);
	ptd_buf_fini(&out);
	fb_free(&f);
}

/* Per-thread: a jump in AUX offsets and a TRUNCATED AUX record are error
 * records with their byte counts; payload padding is dropped. */
static void test_losses(void)
{
	uint8_t bytes[64];
	struct ptd_buf out;
	struct tstat t;
	struct fb f;

	memset(bytes, 0, sizeof(bytes));
	fb_init(&f);
	fb_ptinfo(&f, false, NULL);
	fb_comm(&f, 100, 100, true, "prog");
	fb_itrace(&f, 100, 100, UINT32_MAX);
	/* 21 bytes padded to 24; the next payload starts at 21 */
	fb_auxtrace(&f, 100, UINT32_MAX, 0, bytes, 24);
	fb_aux(&f, 100, 100, 0, 0, 21, 0);
	fb_auxtrace(&f, 100, UINT32_MAX, 21, bytes, 16);
	fb_aux(&f, 100, 100, 0, 21, 16, 0);
	/* 1000 bytes never recorded */
	fb_auxtrace(&f, 100, UINT32_MAX, 1037, bytes, 8);
	fb_aux(&f, 100, 100, 0, 1037, 8, PERF_AUX_FLAG_TRUNCATED);
	fb_file(&f, &out);
	CHECK_EQ_INT(decode_stats(&out, &t), 0);
	REQUIRE(t.n == 1);
	CHECK_EQ_U64(t.bytes[0], 21 + 16 + 8);
	CHECK_EQ_INT(t.trunc, 2);
	CHECK_CONTAINS(t.trunc_msg[0], "lost 1000 trace bytes");
	CHECK_CONTAINS(t.trunc_msg[0], ":1000");
	CHECK_CONTAINS(t.trunc_msg[1], "truncated");
	ptd_buf_fini(&out);
	fb_free(&f);
}

/* A file truncated by its writer after it was opened: a mapping would
 * fault (SIGBUS) on the bytes that are gone; the reader holds a copy. */
static void test_truncated_after_open(void)
{
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag diag = { "" };
	struct ptd_buf out;
	char path[512];
	uint64_t sum = 0;
	struct fb f;
	size_t i;

	fb_per_thread(&f);
	fb_file(&f, &out);
	(void)snprintf(path, sizeof(path), "%s/shrinks.data", tmpdir);
	REQUIRE(ptd_file_write_atomic(path, out.data, out.len) == 0);
	REQUIRE(ptd_perfdata_open(path, &pd, &diag) == 0);
	REQUIRE(truncate(path, 0) == 0);
	for (i = 0; i < pd->size; i++)
		sum += pd->data[i];
	CHECK(sum != 0);
	{
		struct tstat t;
		struct ptd_input_sink sink = { NULL, ts_record, ts_done, &t };
		struct ptd_input_opts o;

		memset(&t, 0, sizeof(t));
		memset(&o, 0, sizeof(o));
		CHECK_EQ_INT(ptd_perfdata_decode_parsed(pd, &o, &sink, NULL,
							&diag), 0);
		CHECK(t.n >= 1 && t.bytes[0] > 0);
	}
	ptd_perfdata_free(pd);
	ptd_buf_fini(&out);
	fb_free(&f);
}

/* ---- fuzz ------------------------------------------------------------- */

static void fuzz_one(const struct ptd_buf *good, uint32_t *seed,
		     unsigned *parsed)
{
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag diag = { "" };
	struct ptd_buf b = { 0 };
	int r;

	put(&b, good->data, good->len);
	pd_mutate(&b, seed);
	r = ptd_perfdata_parse(b.data, b.len, "fuzz", &pd, &diag);
	if (r == 0) {
		struct ptd_input_opts o;
		struct sinkrec s;
		struct ptd_input_sink sink = { sr_info, sr_record, NULL, &s };

		(*parsed)++;
		memset(&o, 0, sizeof(o));
		o.sysroot = "/nonexistent";
		memset(&s, 0, sizeof(s));
		(void)ptd_perfdata_decode_parsed(pd, &o, &sink, NULL, &diag);
	} else if (!diag.msg[0] && r != -ENOMEM) {
		CHECK_FAIL_("refused (%d) without a message", r);
	}
	ptd_perfdata_free(pd);
	ptd_buf_fini(&b);
}

static void test_fuzz(void)
{
	struct ptd_buf good[2];
	uint32_t seed = 12345;
	unsigned parsed = 0, i;
	struct fb f;

	fb_per_thread(&f);
	fb_file(&f, &good[0]);
	fb_pipe(&f, &good[1]);
	for (i = 0; i < 3000; i++)
		fuzz_one(&good[i % 2], &seed, &parsed);
	fprintf(stderr, "fuzz: %u of %u mutations parsed\n", parsed, i);
	CHECK(parsed > 0);
	ptd_buf_fini(&good[0]);
	ptd_buf_fini(&good[1]);
	fb_free(&f);
}

/* ---- real perf record ------------------------------------------------- */

/* Run `perf record -e dummy:u -o FILE -- ARGV...` with stdout to @out. */
static int perf_record(const char *file, const char *out,
		       const char *const argv[])
{
	const char *args[16] = { "perf", "record", "-q", "-e", "dummy:u",
				 "-o", file, "--" };
	size_t n = 8, i;
	pid_t pid;
	int st;

	for (i = 0; argv[i] && n < 15; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			      0600);
		int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (fd < 0 || nul < 0 || dup2(fd, 1) < 0 || dup2(nul, 2) < 0)
			_exit(126);
		execvp("perf", (char *const *)args);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Build the image of process @pid from the file's records, in order. */
static struct ptd_image *image_of(const struct ptd_perfdata *pd,
				  struct ptd_iscache *ic, uint32_t pid,
				  unsigned *nmaps)
{
	struct ptd_image *img;
	(void)ptd_image_new(ic, "perf", &img);
	size_t i;

	*nmaps = 0;
	for (i = 0; img && i < pd->nrecs; i++) {
		struct ptd_perf_event e;
		struct ptd_tl_event ev;
		struct ptd_diag diag = { "" };

		if (pd->recs[i].attr < 0 ||
		    ptd_perfdata_event(pd, i, &e, &diag) < 0)
			continue;
		if ((e.type == PERF_RECORD_MMAP2 && e.u.mmap.pid != pid) ||
		    ptd_perf_event_to_tl(&e, &ev, &diag) != 1)
			continue;
		if (ptd_tl_event_apply(&ev, img, NULL, &diag) == 0 &&
		    ev.op == PTD_TL_MAP)
			(*nmaps)++;
	}
	return img;
}

/* cat prints its own maps: every executable file mapping in it must be in
 * the image built from the recording, from the same file and offset. */
static void test_real_cat_maps(void)
{
	char data[512], out[512], *text = NULL;
	const char *argv[] = { "cat", "/proc/self/maps", NULL };
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag diag = { "" };
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img = NULL;
	struct ptd_maps maps = { 0 };
	unsigned nmaps = 0, checked = 0;
	uint32_t pid = 0;
	size_t len, i;
	int r;

	(void)snprintf(data, sizeof(data), "%s/cat.data", tmpdir);
	(void)snprintf(out, sizeof(out), "%s/cat.maps", tmpdir);
	r = perf_record(data, out, argv);
	if (r != 0) {
		fprintf(stderr, "SKIP part: perf record failed (exit %d): "
			"perf missing or perf_event_paranoid too high\n", r);
		ptd_iscache_free(ic);
		return;
	}
	REQUIRE(ptd_file_read_all(out, 1 << 20, &text, &len) == 0);
	REQUIRE(ptd_maps_parse(text, len, out, &maps, &diag) == 0);
	r = ptd_perfdata_open(data, &pd, &diag);
	if (r)
		CHECK_FAIL_("%s", diag.msg);
	REQUIRE(r == 0);
	CHECK(!pd->pt.present);
	for (i = 0; i < pd->nrecs; i++) {
		struct ptd_perf_event e;

		if (pd->recs[i].attr >= 0 &&
		    ptd_perfdata_event(pd, i, &e, NULL) == 0 &&
		    e.type == PERF_RECORD_COMM && e.u.comm.exec)
			pid = e.u.comm.pid;
	}
	CHECK(pid != 0);
	img = image_of(pd, ic, pid, &nmaps);
	REQUIRE(img);
	for (i = 0; i < maps.n; i++) {
		const struct ptd_map *m = &maps.v[i];
		const struct ptd_image_region *reg;
		const struct ptd_module *mod;

		if (m->kind != PTD_MAP_FILE || !(m->prot & PTD_MAP_PROT_X))
			continue;
		reg = ptd_image_find(img, m->start);
		if (!reg) {
			CHECK_FAIL_("%s at 0x%" PRIx64 " is not in the image",
				    m->path, m->start);
			continue;
		}
		mod = ptd_iscache_module(ic, reg->isid);
		REQUIRE(mod);
		CHECK_EQ_STR(mod->path, m->path);
		CHECK_EQ_U64(mod->offset + (m->start - mod->vaddr), m->offset);
		CHECK(reg->end >= m->end);
		checked++;
	}
	CHECK(checked >= 2);	/* cat and libc at least */
	CHECK(nmaps >= checked);
	ptd_image_free(img);
	ptd_perfdata_free(pd);
	ptd_maps_fini(&maps);
	ptd_iscache_free(ic);
	free(text);
}

/* dlopen: the library appears at its MMAP2 address; exec / fork files
 * parse and name both programs / processes. */
static void test_real_progs(void)
{
	const char *progs = getenv("PTD_TEST_PROGS");
	char data[512], out[512], prog[512], lib[512];
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag diag = { "" };
	static const char *const names[] = { "prog-dlopen", "prog-exec",
					     "prog-fork" };
	size_t k, i;

	if (!progs) {
		fprintf(stderr, "SKIP part: PTD_TEST_PROGS not set\n");
		return;
	}
	(void)snprintf(lib, sizeof(lib), "%s/libptdtarget.so", progs);
	for (k = 0; k < 3; k++) {
		const char *argv[] = { prog, k == 0 ? lib : NULL, NULL };
		unsigned libmaps = 0, execs = 0, forks = 0;
		int r;

		(void)snprintf(prog, sizeof(prog), "%s/%s", progs, names[k]);
		(void)snprintf(data, sizeof(data), "%s/%s.data", tmpdir,
			       names[k]);
		(void)snprintf(out, sizeof(out), "%s/%s.out", tmpdir,
			       names[k]);
		r = perf_record(data, out, argv);
		if (r == 126 || r == 127 || r == 128) {
			fprintf(stderr, "SKIP part: perf record %s: %d\n",
				names[k], r);
			continue;
		}
		r = ptd_perfdata_open(data, &pd, &diag);
		if (r)
			CHECK_FAIL_("%s: %s", names[k], diag.msg);
		if (r)
			continue;
		for (i = 0; i < pd->nrecs; i++) {
			struct ptd_perf_event e;

			if (pd->recs[i].attr < 0 ||
			    ptd_perfdata_event(pd, i, &e, NULL) < 0)
				continue;
			if (e.type == PERF_RECORD_MMAP2 &&
			    !strcmp(e.u.mmap.filename, lib) && e.u.mmap.exec) {
				struct ptd_iscache *ic;
				(void)ptd_iscache_new(&ic);
				unsigned n;
				struct ptd_image *img =
					image_of(pd, ic, e.u.mmap.pid, &n);
				const struct ptd_image_region *reg =
					img ? ptd_image_find(img,
							     e.u.mmap.addr)
					    : NULL;

				CHECK(reg && ptd_iscache_module(ic, reg->isid) &&
				      !strcmp(ptd_iscache_module(ic, reg->isid)
						      ->path, lib));
				ptd_image_free(img);
				ptd_iscache_free(ic);
				libmaps++;
			}
			if (e.type == PERF_RECORD_COMM && e.u.comm.exec)
				execs++;
			if (e.type == PERF_RECORD_FORK)
				forks++;
		}
		if (k == 0)
			CHECK(libmaps >= 2);	/* dlopen twice */
		if (k == 1)
			CHECK(execs >= 2);
		if (k == 2)
			CHECK(forks >= 1);
		ptd_perfdata_free(pd);
		pd = NULL;
	}
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		SKIP_ALL("cannot create a temporary directory");
	RUN(test_file_per_thread);
	RUN(test_pipe_per_thread);
	RUN(test_per_cpu);
	RUN(test_damage);
	RUN(test_missing_image);
	RUN(test_vdso);
	RUN(test_mtc);
	RUN(test_filter);
	RUN(test_snapshots);
	RUN(test_time);
	RUN(test_no_pt);
	RUN(test_per_cpu_split);
	RUN(test_per_cpu_reused_tid);
	RUN(test_truncated_after_open);
	RUN(test_losses);
	RUN(test_fuzz);
	RUN(test_real_cat_maps);
	RUN(test_real_progs);
	(void)ptd_rm_rf(tmpdir);
	return check_done();
}
