/* SPDX-License-Identifier: MIT */
/*
 * ptctl export --format perfetto and ptctl flamegraph: a saved trace's
 * calls as a Chrome JSON trace (one track per thread, nested call slices)
 * and its instructions by stack as an SVG flame graph.  Both decode with
 * symbols and call records, feed them to lib/views/stacks.h and write
 * what it makes (doc/views.md).  ptctl coverage: the trace's exact
 * execution counts (decode/counters.h) per module and function, as text
 * or lcov (lib/views/coverage.h).  Each takes a session of ptd's too,
 * recorded by ptd once it ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/diag.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "decode/counters.h"
#include "views/coverage.h"
#include "views/flamegraph.h"
#include "views/perfetto.h"
#include "views/stacks.h"
#include "ptctl.h"

enum view_kind { VIEW_PERFETTO, VIEW_FLAMEGRAPH, VIEW_COVERAGE };

struct view_args {
	struct decode_args d;
	const char *out;	/* --out; NULL: stdout */
	const char *title;
	double min_width;
	bool insns_axis;	/* --time insns */
	bool lcov;		/* coverage --format lcov */
	const char *test_name;	/* coverage --test-name */
};

/* The sink of the decode: records into the stacks. */
struct view_run {
	struct ptd_stacks *stacks;
	const char *source;	/* the input's kind, from its info */
	bool failed;		/* a thread ended early */
	uint64_t errors;	/* error records */
	int err;		/* the stacks' failure */
};

static int view_info(void *ctx, const struct ptd_input_info *info)
{
	struct view_run *v = ctx;

	v->source = ptd_input_kind_name(info->kind);
	return 0;
}

static int view_record(void *ctx, const struct ptd_record *rec)
{
	struct view_run *v = ctx;
	int r = v->stacks ? ptd_stacks_feed(v->stacks, rec) : 0;

	if (r)
		v->err = r;
	return r;
}

static void view_thread_done(void *ctx, pid_t tid,
			     const struct ptd_decode_stats *st, int err,
			     const struct ptd_diag *diag)
{
	struct view_run *v = ctx;
	int r;

	v->errors += st ? st->errors : 0;
	if (err < 0) {
		decode_thread_failed(tid, err, diag);
		v->failed = true;
	}
	r = v->stacks ? ptd_stacks_thread_end(v->stacks, tid) : 0;
	if (r && !v->err)
		v->err = r;
}

/* Open @path for writing, never replacing a file; stdout for NULL. */
static FILE *open_out(const char *path)
{
	FILE *f;
	int fd;

	if (!path)
		return stdout;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		errx_msg("--out '%s': %s%s", path, strerror(errno),
			 errno == EEXIST ? ": not replaced" : "");
		return NULL;
	}
	f = fdopen(fd, "w");
	if (!f) {
		errx_msg("--out '%s': %s", path, strerror(errno));
		(void)close(fd);
		(void)unlink(path);
	}
	return f;
}

/* Decode @in (options from @va) into @v.  Returns what
 * ptd_input_decode returns, its failure described in @diag. */
static int view_decode(const char *in, struct view_args *va,
		       struct view_run *v, size_t *ret_thread_errors,
		       struct ptd_diag *diag)
{
	struct ptd_input_sink sink;
	struct ptd_input_opts o;

	decode_input_opts(&va->d, &o);
	memset(&sink, 0, sizeof(sink));
	sink.info = view_info;
	sink.record = view_record;
	sink.thread_done = view_thread_done;
	sink.ctx = v;
	sink.notice = decode_notice;
	return ptd_input_decode(in, &o, &sink, ret_thread_errors, diag);
}

/* The exit status of a view written from @v's decode: a thread that could
 * not be decoded is a failure of the input; decode errors are said, with
 * what each cost the view (@cost). */
static int view_status(const struct view_run *v, size_t thread_errors,
		       const char *cost)
{
	if (thread_errors || v->failed)
		return EXIT_INPUT;
	if (v->errors) {
		errx_msg("%" PRIu64 " decode errors (%s)", v->errors, cost);
		return EXIT_DECODE_ERRORS;
	}
	return 0;
}

/* Close the view's output @f; a file left half-written (@ret a failure
 * of the input or the usage) is no view.  Returns @ret, or EXIT_INPUT if
 * closing failed. */
static int view_close(FILE *f, const struct view_args *va, int ret)
{
	if (f != stdout && fclose(f) != 0 && !ret) {
		errx_msg("writing %s: %s", va->out, strerror(errno));
		ret = EXIT_INPUT;
	}
	if (va->out && (ret == EXIT_INPUT || ret == EXIT_USAGE))
		(void)unlink(va->out);
	return ret;
}

/* ptctl coverage: decode counting every execution, then write; @label
 * names the input in the text's header. */
static int coverage_write(const char *in, const char *label,
			  struct view_args *va)
{
	struct ptd_counters *counters = NULL;
	struct ptd_coverage *cov = NULL;
	struct ptd_diag diag = { "" };
	struct view_run v;
	size_t thread_errors = 0;
	const char *msg;
	FILE *f;
	int r, ret = 0;

	memset(&v, 0, sizeof(v));
	f = open_out(va->out);
	if (!f)
		return EXIT_INPUT;
	r = ptd_counters_new(0, &counters);
	if (r < 0) {
		errx_msg("%s", ptd_strerror(r));
		ret = EXIT_INPUT;
		goto out;
	}
	va->d.opts.counters = counters;
	r = view_decode(in, va, &v, &thread_errors, &diag);
	if (r < 0) {
		errx_msg("%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
		ret = EXIT_INPUT;
		goto out;
	}
	r = ptd_coverage_new(counters, va->d.opts.symbols, &cov);
	if (r == 0)
		r = va->lcov ? ptd_coverage_write_lcov(f, cov, va->test_name)
			     : ptd_coverage_write_text(f, cov, label);
	if (r < 0) {
		errx_msg("writing %s: %s", va->out ? va->out : "stdout",
			 ptd_strerror(r));
		ret = EXIT_INPUT;
		goto out;
	}
	for (size_t i = 0; (msg = ptd_coverage_note(cov, i)); i++)
		errx_msg("note: %s", msg);
	{
		uint64_t execs, distinct, uncounted;

		ptd_counters_totals(counters, &execs, &distinct, &uncounted);
		if (uncounted)
			errx_msg("%" PRIu64 " executions not counted: more "
				 "than %u distinct instructions",
				 uncounted, PTD_COUNTERS_DEFAULT_MAX);
	}
	ret = view_status(&v, thread_errors,
			  "what ran after each, up to where decoding "
			  "resumed, is not counted");
out:
	ptd_coverage_free(cov);
	ret = view_close(f, va, ret);
	/* after the symbols' last use (coverage_new's lookups) */
	ptd_counters_free(counters);
	va->d.opts.counters = NULL;
	return ret;
}

/* A SESSION argument: digits, and no file of that name here. */
static bool is_session_arg(const char *s)
{
	struct stat st;

	if (!*s || strspn(s, "0123456789") != strlen(s))
		return false;
	return lstat(s, &st) < 0 && errno == ENOENT;
}

static int view_write(enum view_kind kind, const char *in,
		      const char *label, struct view_args *va);

/* A view of @in, named @label where the view names its input. */
static int view_of(enum view_kind kind, const char *in, const char *label,
		   struct view_args *va)
{
	return kind == VIEW_COVERAGE ? coverage_write(in, label, va)
				     : view_write(kind, in, label, va);
}

/* A view of SESSION: the session's trace, recorded by ptd into a
 * directory of ours (it must have been attached with --record; ptd
 * answers once the session has ended and the bundle is written), then
 * read as any bundle. */
static int view_session(enum view_kind kind, const char *arg,
			struct view_args *va)
{
	char dir[] = "/tmp/ptctl-view-XXXXXX", label[64];
	struct ptd_response resp;
	uint64_t session;
	FILE *f = NULL;
	int r;

	memset(&resp, 0, sizeof(resp));
	r = parse_session_arg(arg, &session);
	if (r)
		return r;
	if (!mkdtemp(dir)) {
		errx_msg("a directory for the session's bundle: %s",
			 strerror(errno));
		return EXIT_INPUT;
	}
	r = client_connect(&f);
	if (!r)
		r = send_record(f, session, dir, true, false, &resp);
	ptd_response_fini(&resp);
	if (f)
		fclose(f);
	(void)snprintf(label, sizeof(label), "session %" PRIu64, session);
	if (!r)
		r = view_of(kind, dir, label, va);
	(void)ptd_rm_rf(dir);
	return r;
}

static int view_write(enum view_kind kind, const char *in,
		      const char *label, struct view_args *va)
{
	struct ptd_stacks_ops ops, *opsp = NULL;
	struct ptd_perfetto *pf = NULL;
	struct ptd_diag diag = { "" };
	struct view_run v;
	size_t thread_errors = 0;
	FILE *f;
	int r, ret = 0;

	memset(&v, 0, sizeof(v));
	f = open_out(va->out);
	if (!f)
		return EXIT_INPUT;
	if (kind == VIEW_PERFETTO) {
		r = ptd_perfetto_new(f, &ops, &pf);
		opsp = &ops;
	} else {
		r = 0;
	}
	if (r == 0)
		r = ptd_stacks_new(opsp, &v.stacks);
	if (r < 0) {
		errx_msg("%s", ptd_strerror(r));
		ret = EXIT_INPUT;
		goto out;
	}
	if (pf)
		ptd_perfetto_set_stacks(pf, v.stacks);
	if (va->insns_axis)
		ptd_stacks_set_clock(v.stacks, PTD_STACKS_CLOCK_INSNS);
	r = view_decode(in, va, &v, &thread_errors, &diag);
	if (r < 0 || v.err) {
		errx_msg("%s", v.err ? ptd_strerror(v.err)
			 : diag.msg[0] ? diag.msg : ptd_strerror(r));
		ret = EXIT_INPUT;
		goto out;
	}
	r = ptd_stacks_finish(v.stacks);
	if (r == 0 && pf) {
		r = ptd_perfetto_finish(pf, label, v.source);
	} else if (r == 0) {
		struct ptd_flamegraph_opts fo = { va->title, NULL, 0,
						  va->min_width };
		char sub[160];

		(void)snprintf(sub, sizeof(sub), "%" PRIu64 " stack resets",
			       ptd_stacks_resets(v.stacks));
		fo.subtitle = sub;
		r = ptd_flamegraph_write(f, v.stacks, &fo);
	}
	if (r == 0 && fflush(f) != 0)
		r = -errno;
	if (r < 0) {
		errx_msg("writing %s: %s", va->out ? va->out : "stdout",
			 ptd_strerror(r));
		ret = EXIT_INPUT;
		goto out;
	}
	ret = view_status(&v, thread_errors,
			  "the thread's stack starts again after each");
out:
	ptd_stacks_free(v.stacks);
	ptd_perfetto_free(pf);
	return view_close(f, va, ret);
}

static void help_view(enum view_kind kind, FILE *f)
{
	if (kind == VIEW_COVERAGE)
		fprintf(f, "Usage: ptctl coverage [OPTIONS] TRACE|SESSION\n\n"
			   "Write what a saved trace ran, per module and "
			   "function: distinct instructions\nexecuted, their "
			   "executions, and where the symbol has a size the "
			   "function's\ninstructions by disassembly of its "
			   "bytes (doc/views.md says what is counted).\n"
			   "  --format text|lcov text (the default), or an "
			   "lcov tracefile with source\n"
			   "                    lines from DWARF (genhtml "
			   "reads it)\n"
			   "  --output FILE     as --out\n"
			   "  --test-name NAME  lcov's TN: (default empty)\n");
	else if (kind == VIEW_PERFETTO)
		fprintf(f, "Usage: ptctl export --format perfetto [OPTIONS] "
			   "TRACE|SESSION\n\n"
			   "Write the calls of a saved trace as a Chrome JSON "
			   "trace (Perfetto's UI,\nchrome://tracing): one "
			   "track per thread, a slice per function call, "
			   "named\nby its function; time from perf time or "
			   "the TSC where the trace has it,\nelse instruction "
			   "counts (\"otherData\".\"time_axis\" says which).\n"
			   "  --time auto|insns the time axis: auto (as "
			   "above; the default) or always\n"
			   "                    instruction counts (timing "
			   "packets may be too sparse to\n"
			   "                    tell calls apart: a PSB's TSC "
			   "alone)\n");
	else
		fprintf(f, "Usage: ptctl flamegraph [OPTIONS] TRACE|SESSION\n\n"
			   "Write an SVG flame graph of a saved trace's "
			   "exact instruction counts by\nstack (every "
			   "thread's, merged).\n"
			   "  --title TEXT      the graph's title\n"
			   "  --min-width PX    leave out frames narrower "
			   "than PX (default 0.1; 0: none)\n");
	fprintf(f,
		"TRACE: what ptctl decode reads (capture, bundle, perf.data, "
		"LLDB bundle).\n"
		"SESSION: a ptd session attached with --record: ptd records "
		"it once it has\nended (waiting for that), and its bundle is "
		"read.\n"
		"  --out FILE        write to FILE (not replaced if it "
		"exists; default stdout)\n"
		"  --tid TID         one thread only\n"
		"  --sysroot DIR, --buildid-dir DIR, --kernel FILE, "
		"--debug-dir DIR,\n"
		"  --perf-map-dir DIR  as for ptctl decode (symbols are "
		"always on)\n");
}

static int view_main(enum view_kind kind, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "out", required_argument, NULL, 'o' },
		{ "title", required_argument, NULL, 'T' },
		{ "min-width", required_argument, NULL, 'w' },
		{ "time", required_argument, NULL, 'X' },
		{ "output", required_argument, NULL, 'o' },
		{ "test-name", required_argument, NULL, 'N' },
		{ "tid", required_argument, NULL, 't' },
		{ "sysroot", required_argument, NULL, 'S' },
		{ "buildid-dir", required_argument, NULL, 'B' },
		{ "kernel", required_argument, NULL, 'K' },
		{ "debug-dir", required_argument, NULL, 'D' },
		{ "perf-map-dir", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct view_args va;
	char *end;
	int c, r, li = 0;

	memset(&va, 0, sizeof(va));
	decode_args_init(&va.d);
	if (kind == VIEW_COVERAGE)
		/* counted into a table of ours; no record is rendered */
		va.d.opts.want = PTD_REC_BIT(PTD_REC_COUNTERS) |
				 PTD_REC_BIT(PTD_REC_ERROR);
	else
		va.d.opts.want = PTD_REC_BIT(PTD_REC_INSN) |
				 PTD_REC_BIT(PTD_REC_CALL);
	va.d.opts.json_bodies = false;
	va.d.symbols = true;
	va.min_width = 0.1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, &li)) != -1) {
		if ((kind == VIEW_FLAMEGRAPH && c == 'f') ||
		    (kind != VIEW_PERFETTO && c == 'X') ||
		    (kind != VIEW_FLAMEGRAPH && (c == 'T' || c == 'w')) ||
		    (kind != VIEW_COVERAGE && c == 'N')) {
			errx_msg("--%s is for %s", longopts[li].name,
				 c == 'f' || c == 'X' ? "ptctl export"
				 : c == 'N'	     ? "ptctl coverage"
						     : "ptctl flamegraph");
			return EXIT_USAGE;
		}
		r = c == 't' ? decode_option(&va.d, c, optarg) : 0;
		if (r < 0)
			return EXIT_USAGE;
		if (r > 0)
			continue;
		switch (c) {
		case 'f':
			if (kind == VIEW_COVERAGE) {
				if (strcmp(optarg, "text") &&
				    strcmp(optarg, "lcov")) {
					errx_msg("--format: expected 'text' or "
						 "'lcov', got '%s'",
						 optarg);
					return EXIT_USAGE;
				}
				va.lcov = !strcmp(optarg, "lcov");
				break;
			}
			/* verb_export sent us here for "perfetto" */
			if (strcmp(optarg, "perfetto")) {
				errx_msg("--format perfetto is not combined "
					 "with other formats");
				return EXIT_USAGE;
			}
			break;
		case 'o':
			va.out = optarg;
			break;
		case 'X':
			if (strcmp(optarg, "insns") && strcmp(optarg, "auto")) {
				errx_msg("--time: expected 'auto' or 'insns', "
					 "got '%s'",
					 optarg);
				return EXIT_USAGE;
			}
			va.insns_axis = !strcmp(optarg, "insns");
			break;
		case 'T':
			va.title = optarg;
			break;
		case 'N':
			va.test_name = optarg;
			break;
		case 'w':
			errno = 0;
			va.min_width = strtod(optarg, &end);
			if (errno || end == optarg || *end ||
			    !(va.min_width >= 0 && va.min_width <= 1e6)) {
				errx_msg("--min-width: expected a number of "
					 "pixels (0 or more), got '%s'",
					 optarg);
				return EXIT_USAGE;
			}
			break;
		case 'S':
			va.d.sysroot = optarg;
			break;
		case 'B':
			va.d.buildid_dir = optarg;
			break;
		case 'K':
			va.d.kernel = optarg;
			break;
		case 'D':
			va.d.debug_dir = optarg;
			break;
		case 'M':
			va.d.perfmap_dir = optarg;
			break;
		case 'h':
			help_view(kind, stdout);
			return 0;
		default:
			help_view(kind, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		errx_msg("expected one TRACE or SESSION (see ptctl %s --help)",
			 kind == VIEW_PERFETTO	   ? "export --format perfetto"
			 : kind == VIEW_COVERAGE ? "coverage"
						 : "flamegraph");
		return EXIT_USAGE;
	}
	if (va.lcov && !ptd_coverage_have_lcov()) {
		errx_msg("--format lcov needs DWARF line tables, and this "
			 "ptctl was built without libdw (Debian's libdw-dev); "
			 "--format text works without it");
		return EXIT_USAGE;
	}
	r = decode_symbols_open(&va.d);
	if (r == 0)
		r = is_session_arg(argv[optind])
			    ? view_session(kind, argv[optind], &va)
			    : view_of(kind, argv[optind], argv[optind], &va);
	decode_symbols_close(&va.d);
	return r;
}

int verb_export_perfetto(int argc, char **argv)
{
	return view_main(VIEW_PERFETTO, argc, argv);
}

int verb_flamegraph(int argc, char **argv)
{
	return view_main(VIEW_FLAMEGRAPH, argc, argv);
}

int verb_coverage(int argc, char **argv)
{
	return view_main(VIEW_COVERAGE, argc, argv);
}
