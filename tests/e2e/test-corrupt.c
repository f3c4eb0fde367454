/* SPDX-License-Identifier: MIT */
/*
 * Bad input never crashes the decoder and never ends a stream early:
 * corrupted bytes, truncated traces and missing images give error records,
 * and decoding resumes at the next PSB.  Run under ASan+UBSan in CI.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "aspace/image.h"
#include "aspace/iscache.h"
#include "common/fileio.h"
#include "decode/decoder.h"
#include "swpt/capture.h"
#include "swpt/capdecode.h"
#include "swpt/tracer.h"

static char workdir[256];
static struct ptd_capture cap;
static uint8_t *orig_pt;
static size_t orig_len;
static uint64_t *truth;
static size_t ntruth;

struct tally {
	uint64_t insns;
	uint64_t errors;
	uint64_t insns_after_first_error;
	uint64_t last_error_offset;
	bool error_fields_ok;
};

static int tally_fn(void *ctx, const struct ptd_record *r)
{
	struct tally *t = ctx;

	if (r->type == PTD_REC_ERROR) {
		t->errors++;
		/* Every error names a libipt reason and a context. */
		if (r->u.error.code >= 0 || !r->u.error.context ||
		    !*r->u.error.context)
			t->error_fields_ok = false;
		t->last_error_offset = r->u.error.offset;
	} else if (r->type == PTD_REC_INSN) {
		t->insns++;
		if (t->errors)
			t->insns_after_first_error++;
	}
	return 0;
}

/* Decode @pt (@len bytes) as thread 0 of the capture, on @path. */
static int decode_bytes(const uint8_t *pt, size_t len, enum ptd_decode_path path,
			struct tally *t, struct ptd_decode_stats *st)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_capture_stream rs;
	struct ptd_decode_opts o;
	struct ptd_diag diag = { "" };
	int r;

	memset(t, 0, sizeof(*t));
	t->error_fields_ok = true;
	memset(st, 0, sizeof(*st));
	r = ptd_capture_stream_open(&cap, 0, ic, &rs, &diag);
	if (r == 0) {
		memset(&o, 0, sizeof(o));
		o.path = path;
		o.want = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT);
		rs.args.pt = pt;
		rs.args.len = len;
		r = ptd_decode_thread(&o, &rs.args, tally_fn, t, st);
	} else {
		fprintf(stderr, "replay_open: %s\n", diag.msg);
	}
	ptd_capture_stream_close(&rs);
	ptd_iscache_free(ic);
	return r;
}

static void test_clean_baseline(void)
{
	struct tally t;
	struct ptd_decode_stats st;

	CHECK_EQ_INT(decode_bytes(orig_pt, orig_len, PTD_PATH_INSN, &t, &st),
		     0);
	CHECK_EQ_INT(t.errors, 0);
	CHECK_EQ_U64(t.insns, ntruth);
}

/* Flip bytes at many places: every run decodes to the end, reports errors
 * as records, and resumes (instructions keep coming after the first error
 * when the damage is early). */
static void test_flipped_bytes(void)
{
	uint8_t *pt = malloc(orig_len);
	unsigned resumed = 0, with_errors = 0;

	REQUIRE(pt);
	srand(12345);
	for (unsigned round = 0; round < 40; round++) {
		for (int p = 0; p < 2; p++) {
			struct tally t;
			struct ptd_decode_stats st;
			size_t at = (size_t)rand() % (orig_len / 2);
			int r;

			memcpy(pt, orig_pt, orig_len);
			for (unsigned k = 0; k < 1 + round % 4; k++)
				pt[(at + k * 7) % orig_len] ^=
					(uint8_t)(1 + rand() % 255);
			r = decode_bytes(pt, orig_len, (enum ptd_decode_path)p,
					 &t, &st);
			CHECK_EQ_INT(r, 0);
			CHECK(t.error_fields_ok);
			CHECK_EQ_U64(st.errors, t.errors);
			if (t.errors)
				with_errors++;
			if (t.errors && t.insns_after_first_error)
				resumed++;
		}
	}
	fprintf(stderr, "  %u of 80 damaged decodes reported errors, %u "
			"resumed after them\n", with_errors, resumed);
	CHECK(with_errors > 10);
	CHECK(resumed > 5);
	free(pt);
}

/* Random garbage (no PSB at all, or a PSB amid garbage). */
static void test_garbage(void)
{
	static const uint8_t psb[16] = { 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
					 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
					 0x02, 0x82, 0x02, 0x82 };
	uint8_t buf[4096];
	struct tally t;
	struct ptd_decode_stats st;

	for (unsigned round = 0; round < 20; round++) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (uint8_t)rand();
		if (round & 1)
			memcpy(buf + 100 + round, psb, sizeof(psb));
		CHECK_EQ_INT(decode_bytes(buf, sizeof(buf), PTD_PATH_BLOCK, &t,
					  &st), 0);
		CHECK_EQ_INT(decode_bytes(buf, sizeof(buf), PTD_PATH_INSN, &t,
					  &st), 0);
	}
	/* Empty and tiny inputs. */
	CHECK_EQ_INT(decode_bytes(buf, 0, PTD_PATH_INSN, &t, &st), 0);
	CHECK_EQ_INT(decode_bytes(psb, 1, PTD_PATH_BLOCK, &t, &st), 0);
}

/* Every truncation length in a window: decodes a prefix of the truth. */
static void test_truncated(void)
{
	size_t step = orig_len / 97 + 1;

	for (size_t len = 0; len < orig_len; len += step) {
		for (int p = 0; p < 2; p++) {
			struct tally t;
			struct ptd_decode_stats st;

			CHECK_EQ_INT(decode_bytes(orig_pt, len,
						  (enum ptd_decode_path)p, &t,
						  &st), 0);
			CHECK(t.insns <= ntruth);
		}
	}
}

/* The image lacks the program's own code: error records name the missing
 * memory (nomap) and decoding goes on in the code that is there. */
static void test_missing_image(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "empty", &img);
	struct ptd_decode_thread_args a;
	struct ptd_decode_opts o;
	struct ptd_decode_stats st;
	struct tally t;

	REQUIRE(img);
	memset(&a, 0, sizeof(a));
	a.pt = orig_pt;
	a.len = orig_len;
	a.pid = a.tid = 1;
	a.img = img;
	memset(&o, 0, sizeof(o));
	memset(&t, 0, sizeof(t));
	t.error_fields_ok = true;
	memset(&st, 0, sizeof(st));
	o.want = PTD_REC_BIT(PTD_REC_INSN);
	for (int p = 0; p < 2; p++) {
		o.path = (enum ptd_decode_path)p;
		CHECK_EQ_INT(ptd_decode_thread(&o, &a, tally_fn, &t, &st), 0);
		CHECK(t.errors > 0);
		CHECK(t.error_fields_ok);
	}
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

int main(void)
{
	const char *progs = getenv("PTD_TEST_PROGS");
	const char *tmp = getenv("TMPDIR");
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag diag = { "" };
	char dir[512], path[512];
	char *argv[] = { path, "9", NULL };

	if (!progs)
		SKIP_ALL("PTD_TEST_PROGS is not set (run through meson test)");
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-corrupt-XXXXXX",
		       tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir))
		return 1;
	(void)snprintf(path, sizeof(path), "%s/prog-recursion", progs);
	(void)snprintf(dir, sizeof(dir), "%s/cap", workdir);
	memset(&so, 0, sizeof(so));
	so.outdir = dir;
	so.gen.psb_period = 512; /* many resync points */
	so.quiet_target = true;
	if (ptd_swpt_run(argv, &so, &res, &diag) < 0 ||
	    ptd_capture_load(dir, &cap, &diag) < 0 ||
	    ptd_capture_read_pt(&cap, 0, &orig_pt, &orig_len, &diag) < 0 ||
	    ptd_capture_read_truth(&cap, 0, &truth, &ntruth, &diag) < 0) {
		fprintf(stderr, "setup: %s\n", diag.msg);
		return 1;
	}
	RUN(test_clean_baseline);
	RUN(test_flipped_bytes);
	RUN(test_garbage);
	RUN(test_truncated);
	RUN(test_missing_image);
	free(orig_pt);
	free(truth);
	ptd_capture_fini(&cap);
	(void)ptd_rm_rf(workdir);
	return check_done();
}
