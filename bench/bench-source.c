/* SPDX-License-Identifier: MIT */
/*
 * The software PT source's speed, side by side in one run on one workload:
 * the program traced single-stepped (the reference) and in branch mode
 * (swpt/tracer.h, step), with address space randomisation off so both
 * runs execute the same instructions.  Prints instructions/s, ptrace stops
 * and the ratio; the two truths and PT streams must be identical (any
 * difference is reported and fails the run).
 *
 *   bench-source [--max-insns N] [--dir DIR] [-- PROGRAM ARGS...]
 *
 * The default workload is bench-decode's: ls -lR /usr/include/linux
 * (~7.7 M instructions: the single-stepped run takes minutes).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/strutil.h"
#include "swpt/capture.h"
#include "swpt/tracer.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run(char **prog, const char *dir, enum ptd_swpt_step step,
	       uint64_t max, struct ptd_swpt_result *res, double *secs)
{
	struct ptd_swpt_options so;
	struct ptd_diag diag = { "" };
	double t0 = now();
	int r;

	(void)ptd_rm_rf(dir);
	memset(&so, 0, sizeof(so));
	so.outdir = dir;
	so.quiet_target = true;
	so.step = step;
	so.max_insns = max;
	r = ptd_swpt_run(prog, &so, res, &diag);
	*secs = now() - t0;
	if (r < 0)
		fprintf(stderr, "bench: trace failed: %s\n", diag.msg);
	return r;
}

/* 0 if every thread's truth and PT are the same in @a and @b. */
static int same(const char *a, const char *b)
{
	struct ptd_capture ca, cb;
	struct ptd_diag diag = { "" };
	int bad = 0;

	if (ptd_capture_load(a, &ca, &diag) < 0 ||
	    ptd_capture_load(b, &cb, &diag) < 0) {
		fprintf(stderr, "bench: %s\n", diag.msg);
		return -1;
	}
	if (ca.nthreads != cb.nthreads)
		bad = 1;
	for (size_t i = 0; !bad && i < ca.nthreads; i++) {
		uint64_t *ta = NULL, *tb = NULL;
		uint8_t *pa = NULL, *pb = NULL;
		size_t na = 0, nb = 0, la = 0, lb = 0;

		if (ptd_capture_read_truth(&ca, i, &ta, &na, &diag) < 0 ||
		    ptd_capture_read_truth(&cb, i, &tb, &nb, &diag) < 0 ||
		    ptd_capture_read_pt(&ca, i, &pa, &la, &diag) < 0 ||
		    ptd_capture_read_pt(&cb, i, &pb, &lb, &diag) < 0 ||
		    na != nb || la != lb || memcmp(ta, tb, na * 8) ||
		    memcmp(pa, pb, la))
			bad = 1;
		free(ta);
		free(tb);
		free(pa);
		free(pb);
	}
	ptd_capture_fini(&ca);
	ptd_capture_fini(&cb);
	return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "max-insns", required_argument, NULL, 'm' },
		{ "dir", required_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	char *default_argv[] = { "/bin/ls", "-lR", "/usr/include/linux", NULL };
	char **prog = default_argv;
	const char *dir = "bench-cache/source";
	char single[4096], branch[4096];
	struct ptd_swpt_result rs, rb;
	double ts, tb, ks, kb;
	uint64_t max = 0;
	int opt;

	while ((opt = getopt_long(argc, argv, "+", lo, NULL)) != -1) {
		switch (opt) {
		case 'm':
			if (ptd_parse_u64(optarg, 10, &max) < 0) {
				fprintf(stderr, "bench: --max-insns N\n");
				return 1;
			}
			break;
		case 'd':
			dir = optarg;
			break;
		default:
			return 1;
		}
	}
	if (optind < argc)
		prog = argv + optind;
	if (personality(PER_LINUX | ADDR_NO_RANDOMIZE) < 0)
		fprintf(stderr, "bench: personality: %s (truths may differ)\n",
			strerror(errno));
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		/* bench-cache/ itself may be missing in a new build dir */
		char *parent = strdup(dir), *slash = parent ? strrchr(parent, '/') : NULL;

		if (slash && slash != parent) {
			*slash = 0;
			(void)mkdir(parent, 0755);
		}
		free(parent);
		(void)mkdir(dir, 0755);
	}
	(void)snprintf(single, sizeof(single), "%s/single", dir);
	(void)snprintf(branch, sizeof(branch), "%s/branch", dir);
	fprintf(stderr, "bench: tracing '%s' in branch mode, then "
			"single-stepped (minutes)\n", prog[0]);
	if (run(prog, branch, PTD_SWPT_STEP_BRANCH, max, &rb, &tb) < 0 ||
	    run(prog, single, PTD_SWPT_STEP_SINGLE, max, &rs, &ts) < 0)
		return 2;
	ks = (double)rs.insns / ts / 1e3;
	kb = (double)rb.insns / tb / 1e3;
	printf("software source on '%s': %" PRIu64 " instructions\n", prog[0],
	       rs.insns);
	printf("  single-step  %8.1f s %9.1f k insn/s  %9" PRIu64 " stops\n",
	       ts, ks, rs.steps);
	printf("  branch       %8.1f s %9.1f k insn/s  %9" PRIu64 " stops "
	       "(%" PRIu64 " runs, %" PRIu64 " branches computed)\n",
	       tb, kb, rb.steps, rb.runs, rb.emulated);
	printf("  branch / single-step: %.2fx instructions/s, %.2fx fewer "
	       "stops\n", kb / ks, (double)rs.steps / (double)rb.steps);
	if (rs.insns != rb.insns || same(single, branch) < 0) {
		printf("  DIFFERENT: the two truths or PT streams differ "
		       "(%" PRIu64 " and %" PRIu64 " instructions)\n",
		       rs.insns, rb.insns);
		return 3;
	}
	printf("  truth and PT identical in both modes\n");
	return 0;
}
