/* SPDX-License-Identifier: MIT */
/*
 * Decode throughput, side by side in one process on one trace:
 *
 *   bare pt_insn_next loop         the baseline for instruction output
 *   bare pt_blk_next loop          the baseline for block output
 *   ptd insn records -> JSON pipe  what a subscriber of insn records costs
 *   ptd block records -> JSON pipe
 *   ptd insn path, records counted what the decoder itself adds to
 *   ptd block path, records counted  pt_insn_next / pt_blk_next, no output
 *   ptd insn records with symbols  what --symbols costs beside plain insn
 *                                  records (loading the symbols included)
 *   parallel decoder, 1 / 2 threads the block path's insn records counted,
 *                                  serially and with opts.jobs 2
 *                                  (decode/parallel.h), the ratio of the
 *                                  two; and the insn path with 2 threads
 *                                  beside the insn path alone
 *
 * The JSON goes through a pipe to a child process that reads and discards
 * it, as a subscriber would.  Each measurement is the best of --repeat runs;
 * figures are M instructions/s and ratios to the bare loops (the machines
 * are shared and noisy: compare ratios, not absolute numbers).
 *
 * The trace comes from the software PT source and is cached in --cache DIR
 * (branch mode, the default, runs at ~260 k instructions/s: the first run
 * takes about half a minute).
 *
 *   bench-decode [--cache DIR] [--repeat N] [--only ROW] [-- PROGRAM ARGS...]
 *
 * --only ROW measures one row (0-based, in the order printed) beside its
 * baseline: for a profiler.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "aspace/iscache.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "decode/decoder.h"
#include "record/jsonw.h"
#include "swpt/capture.h"
#include "swpt/capdecode.h"
#include "swpt/tracer.h"
#include "sym/symbols.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct pt_config base_config(const struct ptd_capture_stream *rs,
				    const struct ptd_capture *c)
{
	struct pt_config cfg;

	pt_config_init(&cfg);
	cfg.begin = rs->pt;
	cfg.end = rs->pt + rs->len;
	cfg.cpu = c->cpu;
	if (cfg.cpu.vendor != pcv_unknown)
		(void)pt_cpu_errata(&cfg.errata, &cfg.cpu);
	return cfg;
}

/* The bare pt_insn_next loop: count instructions, drain events, resync on
 * errors.  Applies the timeline like ptd does, so both pay for it. */
static uint64_t bare_insn(const struct ptd_capture *c,
			  struct ptd_capture_stream *rs)
{
	struct pt_config cfg = base_config(rs, c);
	struct pt_insn_decoder *d = pt_insn_alloc_decoder(&cfg);
	uint64_t n = 0;
	int st;

	if (!d)
		return 0;
	(void)pt_insn_set_image(d, ptd_image_pt(rs->img));
	for (st = pt_insn_sync_forward(d); st != -pte_eos;) {
		struct pt_insn insn;
		uint64_t off;

		if (st < 0) {
			st = pt_insn_sync_forward(d);
			if (st == -pte_eos)
				break;
			continue;
		}
		while (st & pts_event_pending) {
			struct pt_event ev;

			st = pt_insn_event(d, &ev, sizeof(ev));
			if (st < 0)
				break;
		}
		if (st < 0)
			continue;
		if (!pt_insn_get_offset(d, &off) &&
		    ptd_tl_cursor_due(&rs->cursor, off))
			(void)ptd_tl_cursor_advance(&rs->cursor, off, rs->img,
						    NULL);
		st = pt_insn_next(d, &insn, sizeof(insn));
		if (st >= 0)
			n++;
	}
	pt_insn_free_decoder(d);
	return n;
}

static uint64_t bare_blk(const struct ptd_capture *c,
			 struct ptd_capture_stream *rs)
{
	struct pt_config cfg = base_config(rs, c);
	struct pt_block_decoder *d = pt_blk_alloc_decoder(&cfg);
	uint64_t n = 0;
	int st;

	if (!d)
		return 0;
	(void)pt_blk_set_image(d, ptd_image_pt(rs->img));
	for (st = pt_blk_sync_forward(d); st != -pte_eos;) {
		struct pt_block b;
		uint64_t off;

		if (st < 0) {
			st = pt_blk_sync_forward(d);
			if (st == -pte_eos)
				break;
			continue;
		}
		while (st & pts_event_pending) {
			struct pt_event ev;

			st = pt_blk_event(d, &ev, sizeof(ev));
			if (st < 0)
				break;
		}
		if (st < 0)
			continue;
		if (!pt_blk_get_offset(d, &off) &&
		    ptd_tl_cursor_due(&rs->cursor, off))
			(void)ptd_tl_cursor_advance(&rs->cursor, off, rs->img,
						    NULL);
		st = pt_blk_next(d, &b, sizeof(b));
		if (st >= 0)
			n += b.ninsn;
	}
	pt_blk_free_decoder(d);
	return n;
}

struct sink {
	struct ptd_jsonw w;
};

static int sink_record(void *ctx, const struct ptd_record *rec)
{
	return ptd_jsonw_put(&((struct sink *)ctx)->w, rec);
}

/* A subscriber: a child process reading the pipe to its end. */
static pid_t start_reader(int *ret_wfd)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	(void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	pid = fork();
	if (pid == 0) {
		static char buf[1 << 16];
		unsigned long long total = 0;
		ssize_t n;

		close(p[1]);
		while ((n = read(p[0], buf, sizeof(buf))) > 0)
			total += (unsigned long long)n;
		_exit(total ? 0 : 1);
	}
	close(p[0]);
	*ret_wfd = p[1];
	return pid;
}

/* ptd decoding with records written as JSON to a pipe. */
static uint64_t ptd_json(const struct ptd_capture *c,
			 struct ptd_capture_stream *rs, enum ptd_rec_type what,
			 enum ptd_decode_path path,
			 struct ptd_insncache *icache,
			 struct ptd_symbols *symbols, uint64_t *ret_bytes)
{
	struct ptd_decode_opts o;
	struct ptd_decode_stats st;
	struct sink s;
	int wfd, status;
	pid_t child = start_reader(&wfd);

	if (child < 0)
		return 0;
	memset(&o, 0, sizeof(o));
	o.path = path;
	o.want = PTD_REC_BIT(what);
	o.json_bodies = true;
	o.symbols = symbols;
	o.cpu = c->cpu;
	memset(&st, 0, sizeof(st));
	(void)ptd_jsonw_init(&s.w, wfd, 1 << 20);
	rs->args.icache = icache;
	(void)ptd_decode_thread(&o, &rs->args, sink_record, &s, &st);
	(void)ptd_jsonw_fini(&s.w);
	close(wfd);
	(void)waitpid(child, &status, 0);
	*ret_bytes = s.w.bytes;
	return st.insns;
}

static int count_record(void *ctx, const struct ptd_record *rec)
{
	(void)rec;
	++*(uint64_t *)ctx;
	return 0;
}

/* The decoder alone on @path: insn records counted, nothing rendered. */
static uint64_t ptd_count(const struct ptd_capture *c,
			  struct ptd_capture_stream *rs,
			  enum ptd_decode_path path,
			  struct ptd_insncache *icache, unsigned jobs)
{
	struct ptd_decode_opts o;
	struct ptd_decode_stats st;
	uint64_t n = 0;

	memset(&o, 0, sizeof(o));
	o.path = path;
	o.want = PTD_REC_BIT(PTD_REC_INSN);
	o.cpu = c->cpu;
	o.jobs = jobs;
	memset(&st, 0, sizeof(st));
	rs->args.icache = icache;
	(void)ptd_decode_thread(&o, &rs->args, count_record, &n, &st);
	if (st.serial_parts)
		fprintf(stderr, "bench: %" PRIu64 " part(s) decoded serially: "
				"%s\n",
			st.serial_parts, st.serial_why);
	/* What was delivered: a parallel decode's statistics count the
	 * parts' instructions, the records are what the serial decode
	 * gives. */
	return n;
}

enum which { BARE_INSN, BARE_BLK, PTD_INSN, PTD_BLOCK, PTD_INSN_PATH,
	     PTD_BLK_PATH, PTD_INSN_JSON, PTD_INSN_SYMS, PTD_PAR1, PTD_PAR2,
	     PTD_PAR2_INSN, NWHICH };
static const char *const names[NWHICH] = {
	"bare pt_insn_next loop", "bare pt_blk_next loop",
	"ptd insn records, JSON to a pipe", "ptd block records, JSON to a pipe",
	"ptd insn path, insn records counted",
	"ptd block path, insn records counted",
	"ptd insn path, insn JSON to a pipe",
	"ptd insn records + symbols, JSON",
	"parallel decoder, 1 thread (serial)",
	"parallel decoder, 2 threads",
	"parallel decoder, 2 threads, insn path",
};
/* What each row is compared with, and that row's short name. */
static const enum which baseline[NWHICH] = {
	BARE_INSN, BARE_BLK, BARE_INSN, BARE_BLK, BARE_INSN, BARE_BLK,
	BARE_INSN, PTD_INSN, BARE_BLK, PTD_PAR1, PTD_INSN_PATH,
};
static const char *const short_names[NWHICH] = {
	"bare pt_insn_next", "bare pt_blk_next ", "insn records",
	"block records", "insn path", "", "", "", "1 thread", "", "",
};

static void *spin(void *arg)
{
	volatile uint64_t x = 0;

	/* about a second: long enough to meet the machine's other load */
	for (uint64_t i = 0; i < (1u << 30); i++)
		x += i;
	(void)arg;
	return NULL;
}

/* The cores 2 threads get here now: 2 threads of plain arithmetic against
 * 1 doing half the work, each the best of 2 (2.00: two free cores; the
 * parallel rows cannot beat this). */
static double two_thread_cores(void)
{
	double t1 = 1e30, t2 = 1e30;

	for (int k = 0; k < 2; k++) {
		pthread_t t[2];
		double t0 = now();

		spin(NULL);
		if (now() - t0 < t1)
			t1 = now() - t0;
		t0 = now();
		for (int i = 0; i < 2; i++)
			if (pthread_create(&t[i], NULL, spin, NULL) != 0)
				return 0;
		for (int i = 0; i < 2; i++)
			(void)pthread_join(t[i], NULL);
		if (now() - t0 < t2)
			t2 = now() - t0;
	}
	return 2 * t1 / t2;
}

/* Run one measurement over every thread; returns seconds. */
static double measure(const struct ptd_capture *c, enum which w,
		      uint64_t *ret_insns, uint64_t *ret_bytes)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_insncache *icache;
	(void)ptd_insncache_new(0, &icache);
	struct ptd_diag diag = { "" };
	struct ptd_symbols *syms = NULL;
	double t0, t = 0;
	uint64_t insns = 0, bytes = 0, b;

	/* a fresh one each run: loading the files' symbols is part of
	 * the cost */
	if (w == PTD_INSN_SYMS && ptd_symbols_new(NULL, &syms) < 0)
		exit(2);

	for (size_t i = 0; i < c->nthreads; i++) {
		struct ptd_capture_stream rs;

		if (ptd_capture_stream_open(c, i, ic, &rs, &diag) < 0) {
			fprintf(stderr, "bench: %s\n", diag.msg);
			exit(2);
		}
		t0 = now();
		switch (w) {
		case BARE_INSN:
			insns += bare_insn(c, &rs);
			break;
		case BARE_BLK:
			insns += bare_blk(c, &rs);
			break;
		case PTD_INSN:
			insns += ptd_json(c, &rs, PTD_REC_INSN, PTD_PATH_BLOCK,
					  icache, NULL, &b);
			bytes += b;
			break;
		case PTD_INSN_SYMS:
			insns += ptd_json(c, &rs, PTD_REC_INSN, PTD_PATH_BLOCK,
					  icache, syms, &b);
			bytes += b;
			break;
		case PTD_INSN_JSON:
			insns += ptd_json(c, &rs, PTD_REC_INSN, PTD_PATH_INSN,
					  icache, NULL, &b);
			bytes += b;
			break;
		case PTD_BLOCK:
			insns += ptd_json(c, &rs, PTD_REC_BLOCK, PTD_PATH_BLOCK,
					  icache, NULL, &b);
			bytes += b;
			break;
		case PTD_INSN_PATH:
			insns += ptd_count(c, &rs, PTD_PATH_INSN, icache, 1);
			break;
		case PTD_BLK_PATH:
		case PTD_PAR1:
			insns += ptd_count(c, &rs, PTD_PATH_BLOCK, icache, 1);
			break;
		case PTD_PAR2:
			insns += ptd_count(c, &rs, PTD_PATH_BLOCK, icache, 2);
			break;
		case PTD_PAR2_INSN:
			insns += ptd_count(c, &rs, PTD_PATH_INSN, icache, 2);
			break;
		case NWHICH:
			break;
		}
		t += now() - t0;
		ptd_capture_stream_close(&rs);
	}
	ptd_insncache_free(icache);
	ptd_symbols_free(syms);
	ptd_iscache_free(ic);
	*ret_insns = insns;
	*ret_bytes = bytes;
	return t;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "cache", required_argument, NULL, 'c' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "only", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cache = "bench-cache/ls-lR-linux";
	char *default_argv[] = { "/bin/ls", "-lR", "/usr/include/linux", NULL };
	char **prog = default_argv;
	uint64_t repeat = 3, only = NWHICH;
	struct ptd_capture c;
	struct ptd_diag diag = { "" };
	double best[NWHICH];
	uint64_t insns[NWHICH], bytes[NWHICH];
	int opt, r;

	while ((opt = getopt_long(argc, argv, "+", lo, NULL)) != -1) {
		switch (opt) {
		case 'c':
			cache = optarg;
			break;
		case 'r':
			if (ptd_parse_u64(optarg, 10, &repeat) < 0 ||
			    repeat == 0 || repeat > 100) {
				fprintf(stderr, "bench: --repeat 1..100\n");
				return 1;
			}
			break;
		case 'o':
			if (ptd_parse_u64(optarg, 10, &only) < 0 ||
			    only >= NWHICH) {
				fprintf(stderr, "bench: --only 0..%d\n",
					NWHICH - 1);
				return 1;
			}
			break;
		default:
			return 1;
		}
	}
	if (optind < argc)
		prog = argv + optind;

	if (access(cache, F_OK) != 0) {
		struct ptd_swpt_options so;
		struct ptd_swpt_result res;
		double t0 = now();

		/* The cache's parent may not exist yet (e.g. in a new build
		 * directory). */
		char *parent = strdup(cache), *slash = parent ? strrchr(parent, '/') : NULL;

		if (slash && slash != parent) {
			*slash = 0;
			(void)mkdir(parent, 0755);
		}
		free(parent);
		/* Trace beside the cache and rename when complete, so an
		 * interrupted first run leaves no half capture to trust. */
		char partial[4096];

		(void)snprintf(partial, sizeof(partial), "%s.partial", cache);
		(void)ptd_rm_rf(partial);
		memset(&so, 0, sizeof(so));
		so.outdir = partial;
		so.quiet_target = true;
		fprintf(stderr, "bench: tracing '%s' into %s (once; this takes "
				"a while)\n", prog[0], cache);
		r = ptd_swpt_run(prog, &so, &res, &diag);
		if (r < 0) {
			fprintf(stderr, "bench: trace failed: %s\n", diag.msg);
			return 2;
		}
		if (rename(partial, cache) < 0) {
			fprintf(stderr, "bench: cannot rename '%s' to '%s': %s\n",
				partial, cache, strerror(errno));
			return 2;
		}
		fprintf(stderr, "bench: %" PRIu64 " instructions traced in "
				"%.0f s (%.0f k/s)\n", res.insns,
			now() - t0, (double)res.insns / (now() - t0) / 1e3);
	}
	r = ptd_capture_load(cache, &c, &diag);
	if (r < 0) {
		fprintf(stderr, "bench: %s\n", diag.msg);
		return 2;
	}

	for (int w = 0; w < NWHICH; w++) {
		best[w] = 1e30;
		insns[w] = bytes[w] = 0;
	}
	/* Interleave the measurements so drift hits them alike. */
	for (uint64_t k = 0; k < repeat; k++)
		for (int w = 0; w < NWHICH; w++) {
			double t;

			if (only < NWHICH && (uint64_t)w != only &&
			    w != (int)BARE_INSN && w != (int)baseline[only] &&
			    w != (int)baseline[baseline[only]])
				continue;
			t = measure(&c, (enum which)w, &insns[w], &bytes[w]);
			if (t < best[w])
				best[w] = t;
		}

	printf("trace: %s (%zu thread(s), %" PRIu64
	       " instructions); best of %" PRIu64 "\n",
	       cache, c.nthreads, insns[BARE_INSN], repeat);
	for (int w = 0; w < NWHICH; w++) {
		enum which b = baseline[w];

		if (best[w] == 1e30)
			continue;
		double mips = (double)insns[w] / best[w] / 1e6;
		double base = (double)insns[b] / best[b] / 1e6;

		printf("  %-38s %8.2f M insn/s", names[w], mips);
		if (b != (enum which)w)
			printf("  %5.2fx %s  %5.2fx bare pt_insn_next",
			       mips / base, short_names[b],
			       mips / ((double)insns[BARE_INSN] /
				       best[BARE_INSN] / 1e6));
		if (bytes[w])
			printf("  (%.0f MB/s JSON)",
			       (double)bytes[w] / best[w] / 1e6);
		printf("\n");
		if (insns[w] != insns[BARE_INSN])
			printf("  WARNING: %s counted %" PRIu64
			       " instructions, the insn loop %" PRIu64 "\n",
			       names[w], insns[w], insns[BARE_INSN]);
	}
	if (best[PTD_PAR2] != 1e30 || best[PTD_PAR2_INSN] != 1e30) {
		printf("  2 threads of plain arithmetic vs 1: %.2fx (the cores "
		       "2 threads got in this run)\n",
		       two_thread_cores());
	}
	ptd_capture_fini(&c);
	return 0;
}
