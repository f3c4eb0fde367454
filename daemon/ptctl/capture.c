/* SPDX-License-Identifier: MIT */
/*
 * ptctl trace, verify and export: the software PT source's captures --
 * run a program under it, check a capture's decode against the ground
 * truth it recorded, write a capture as a bundle, perf.data or LLDB
 * bundle.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bundle/bundle.h"
#include "common/diag.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "lldb/export.h"
#include "perfdata/write.h"
#include "swpt/capture.h"
#include "swpt/capdecode.h"
#include "swpt/tracer.h"
#include "ptctl.h"

static int print_verify(const char *dir)
{
	struct ptd_capture c;
	struct ptd_verify_report rep;
	struct ptd_diag diag = { "" };
	size_t i;
	int r;

	r = ptd_capture_load(dir, &c, &diag);
	if (r < 0) {
		errx_msg("%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
		return EXIT_INPUT;
	}
	r = ptd_capture_verify(&c, &rep, &diag);
	if (r < 0) {
		errx_msg("verify '%s': %s", dir,
			 diag.msg[0] ? diag.msg : ptd_strerror(r));
		ptd_capture_fini(&c);
		return EXIT_INPUT;
	}
	for (i = 0; i < rep.nthreads; i++) {
		const struct ptd_verify_thread *t = &rep.threads[i];

		printf("tid %ld: %s: %" PRIu64 " executed, %" PRIu64
		       " decoded (insn path), %" PRIu64 " (block path)%s%s\n",
		       (long)t->tid, t->ok ? "ok" : "MISMATCH", t->truth,
		       t->insn_path, t->block_path, t->ok ? "" : ": ",
		       t->ok ? "" : t->why);
	}
	printf("%s\n", rep.ok ? "verified: every thread decodes to exactly "
				"what it executed, on both paths"
			      : "verification FAILED");
	r = rep.ok ? 0 : EXIT_MISMATCH;
	ptd_verify_report_fini(&rep);
	ptd_capture_fini(&c);
	return r;
}

/* ---- export: a capture as a bundle, a perf.data or an LLDB bundle ---- */

static void help_export(FILE *f)
{
	fprintf(f,
		"Usage: ptctl export --format bundle|perf-data|lldb [--reference] "
		"CAPTURE OUT\n"
		"       ptctl export --format perfetto [--out FILE] TRACE   "
		"(see --format perfetto --help)\n\n"
		"Write a software-source capture in another form.  CAPTURE is a "
		"capture\ndirectory or, for perf-data and lldb, a ptd bundle "
		"(verified first; its\nimages are read from its copies):\n"
		"  bundle     a ptd bundle: the capture, a copy of every image it "
		"maps and a\n"
		"             manifest with the size and sha256 of every file, "
		"checked before\n"
		"             use (--reference: images referenced by path, "
		"size and sha256,\n"
		"             not copied)\n"
		"  perf-data  a per-thread intel_pt perf.data that `perf script "
		"--itrace=i1i`\n"
		"             (and ptctl decode) decode\n"
		"  lldb       an LLDB trace bundle for `trace load` (lldb 22 and "
		"later)\n"
		"OUT must not exist (bundle, lldb: or be an empty directory). "
		"Nothing is left\nbehind on failure.\n");
}

/* Write the capture in @in (a capture directory, or a ptd bundle: verified
 * first, its images read from its copies) as @format "lldb" or
 * "perf-data" at @out. */
int export_other(const char *in, enum ptd_input_kind kind,
			const char *format, const char *out,
			struct ptd_diag *diag)
{
	struct ptd_bundle b;
	struct ptd_capture c;
	const struct ptd_capture *cap = &c;
	int r;

	memset(&b, 0, sizeof(b));
	if (kind == PTD_INPUT_BUNDLE) {
		r = ptd_bundle_load(in, &b, diag);
		cap = &b.capture;
	} else {
		r = ptd_capture_load(in, &c, diag);
	}
	if (r < 0) {
		ptd_bundle_fini(&b);
		return r;
	}
	if (!strcmp(format, "lldb"))
		r = ptd_lldb_export_capture_resolved(
			cap, kind == PTD_INPUT_BUNDLE ? ptd_bundle_resolve : NULL,
			&b, out, diag);
	else
		r = ptd_perfdata_write_capture(cap, out, diag);
	if (kind == PTD_INPUT_BUNDLE)
		ptd_bundle_fini(&b);
	else
		ptd_capture_fini(&c);
	return r;
}

int verb_export(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "reference", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ptd_bundle_save_opts bo = PTD_BUNDLE_SAVE_OPTS_INIT;
	struct ptd_diag diag = { "" };
	const char *format = NULL, *in, *out;
	enum ptd_input_kind kind;
	int opt, r;

	/* perfetto takes any saved trace, decoded: views.c */
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--format=perfetto") ||
		    (!strcmp(argv[i], "--format") && i + 1 < argc &&
		     !strcmp(argv[i + 1], "perfetto")))
			return verb_export_perfetto(argc, argv);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'f':
			format = optarg;
			break;
		case 'r':
			bo.reference_images = true;
			break;
		case 'h':
			help_export(stdout);
			return 0;
		default:
			help_export(stderr);
			return EXIT_USAGE;
		}
	}
	if (!format || optind + 2 != argc) {
		errx_msg("expected --format FORMAT CAPTURE OUT (see ptctl "
			 "export --help)");
		return EXIT_USAGE;
	}
	in = argv[optind];
	out = argv[optind + 1];
	if (strcmp(format, "bundle") && strcmp(format, "perf-data") &&
	    strcmp(format, "lldb")) {
		errx_msg("--format: expected bundle, perf-data, lldb or perfetto, got "
			 "'%s'",
			 format);
		return EXIT_USAGE;
	}
	if (bo.reference_images && strcmp(format, "bundle")) {
		errx_msg("--reference is for --format bundle");
		return EXIT_USAGE;
	}
	if (!strcmp(format, "perf-data") && access(out, F_OK) == 0) {
		/* bundles and LLDB bundles refuse a non-empty OUT themselves;
		 * a file is never replaced either */
		errx_msg("'%s' exists: not replaced", out);
		return EXIT_INPUT;
	}
	r = ptd_input_detect(in, &kind, &diag);
	if (r == 0 && kind != PTD_INPUT_CAPTURE && kind != PTD_INPUT_BUNDLE)
		r = ptd_diagf(&diag, -PTD_EUNSUPPORTED, "'%s' is a %s: export "
			      "takes a capture or a ptd bundle", in,
			      ptd_input_kind_name(kind));
	if (r == 0 && kind == PTD_INPUT_BUNDLE && !strcmp(format, "bundle"))
		r = ptd_diagf(&diag, -PTD_EUNSUPPORTED, "'%s' is a ptd bundle "
			      "already", in);
	if (r < 0) {
		errx_msg("%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
		return EXIT_INPUT;
	}
	if (!strcmp(format, "bundle"))
		r = ptd_bundle_save(in, out, &bo, &diag);
	else
		r = export_other(in, kind, format, out, &diag);
	if (r < 0) {
		errx_msg("%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
		return EXIT_INPUT;
	}
	printf("%s\n", out);
	return 0;
}

int verb_verify(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-') {
		printf("Usage: ptctl verify CAPTURE_DIR\n\n"
		       "Decode every thread of a software-source capture on "
		       "both decoder paths and\ncompare with the ground truth "
		       "it recorded.\n");
		return argc == 2 && !strcmp(argv[1], "--help") ? 0
							        : EXIT_USAGE;
	}
	return print_verify(argv[1]);
}

static const struct option trace_long[] = {
	{ "records", required_argument, NULL, 'r' },
	{ "fields", required_argument, NULL, PTCTL_FIELDS_OPT },
	{ "path", required_argument, NULL, 'P' },
	{ "tid", required_argument, NULL, 't' },
	{ "out", required_argument, NULL, 'o' },
	{ "psb-period", required_argument, NULL, 'b' },
	{ "noretcomp", no_argument, NULL, 'n' },
	{ "tsc", no_argument, NULL, 'T' },
	{ "max-insns", required_argument, NULL, 'm' },
	{ "step", required_argument, NULL, 's' },
	{ "start", required_argument, NULL, 'S' },
	{ "quiet-target", no_argument, NULL, 'q' },
	{ "no-decode", no_argument, NULL, 'N' },
	{ "verify", no_argument, NULL, 'V' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void help_trace(void)
{
	printf("Usage: ptctl trace [OPTIONS] -- PROGRAM [ARGS...]\n\n"
	       "Run PROGRAM under the software PT source (ptrace single-step "
	       "+ libipt's encoder;\nit runs orders of magnitude slower "
	       "than normal), then stream its decoded\ninstructions as "
	       "JSON lines.\n\n"
	       "  --out DIR         keep the capture in DIR (default: a "
	       "temporary one, removed)\n"
	       "  --psb-period N    bytes between PSB packets (power of "
	       "two, 256..1M; default 4096)\n"
	       "  --noretcomp       no return compression\n"
	       "  --tsc             TSC packets in PSB+\n"
	       "  --max-insns N     detach after N instructions\n"
	       "  --step branch|single   run to each branch the trace "
	       "observes (default),\n"
	       "                    or single-step every instruction (the "
	       "reference); same trace\n"
	       "  --start exec|entry   trace from the first instruction "
	       "after the exec (the\n"
	       "                    dynamic loader's; default), or from the "
	       "program's entry\n"
	       "                    point, the loader and the libraries' "
	       "constructors run\n"
	       "                    untraced at full speed before it\n"
	       "  --quiet-target    send PROGRAM's stdout/stderr to "
	       "/dev/null\n"
	       "  --no-decode       only write the capture (needs --out)\n"
	       "  --verify          instead of streaming, check the decode "
	       "against the ground truth\n"
	       "  --records, --fields, --path, --tid   as for ptctl decode\n");
}

int verb_trace(int argc, char **argv)
{
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag diag = { "" };
	struct decode_args d;
	char tmpl[4096];
	const char *outdir = NULL;
	bool tmp = false, no_decode = false, verify = false;
	int c, r, ret;

	decode_args_init(&d);
	memset(&so, 0, sizeof(so));
	optind = 1;
	while ((c = getopt_long(argc, argv, "+h", trace_long, NULL)) != -1) {
		uint64_t v;

		r = decode_option(&d, c, optarg);
		if (r < 0)
			return EXIT_USAGE;
		if (r > 0)
			continue;
		switch (c) {
		case 'o':
			outdir = optarg;
			break;
		case 'b':
			if (ptd_parse_size(optarg, &v) < 0 || v < 256 ||
			    v > (1u << 20) || (v & (v - 1))) {
				errx_msg("--psb-period: expected a power of "
					 "two from 256 to 1M, got '%s'",
					 optarg);
				return EXIT_USAGE;
			}
			so.gen.psb_period = v;
			break;
		case 'n':
			so.gen.noretcomp = true;
			break;
		case 'T':
			so.gen.tsc = true;
			break;
		case 'm':
			if (ptd_parse_u64(optarg, 10, &v) < 0 || v == 0) {
				errx_msg("--max-insns: expected a positive "
					 "number, got '%s'",
					 optarg);
				return EXIT_USAGE;
			}
			so.max_insns = v;
			break;
		case 's':
			if (ptd_swpt_step_parse(optarg, &so.step) < 0) {
				errx_msg("--step: expected 'branch' or "
					 "'single', got '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'S':
			if (ptd_swpt_start_parse(optarg, &so.start) < 0) {
				errx_msg("--start: expected 'exec' or "
					 "'entry', got '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'q':
			so.quiet_target = true;
			break;
		case 'N':
			no_decode = true;
			break;
		case 'V':
			verify = true;
			break;
		case 'h':
			help_trace();
			return 0;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		errx_msg("no program to trace (ptctl trace [OPTIONS] -- "
			 "PROGRAM [ARGS...])");
		return EXIT_USAGE;
	}
	if (check_decode_args(&d) < 0)
		return EXIT_USAGE;
	if (no_decode && !outdir) {
		errx_msg("--no-decode needs --out DIR");
		return EXIT_USAGE;
	}
	if (!outdir) {
		const char *t = getenv("TMPDIR");

		(void)snprintf(tmpl, sizeof(tmpl), "%s/ptctl-trace-XXXXXX",
			       t && *t ? t : "/tmp");
		if (!mkdtemp(tmpl)) {
			errx_msg("cannot create a temporary directory in "
				 "'%s': %s",
				 t && *t ? t : "/tmp", strerror(errno));
			return EXIT_INPUT;
		}
		outdir = tmpl;
		tmp = true;
	}
	so.outdir = outdir;
	fprintf(stderr,
		"%s: tracing '%s' with the software PT source (%s: "
		"orders of magnitude slower than native)\n",
		arg_program, argv[optind],
		so.step == PTD_SWPT_STEP_SINGLE ? "single-step"
						: "stopping at each branch");
	r = ptd_swpt_run(argv + optind, &so, &res, &diag);
	if (r < 0) {
		errx_msg("%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
		ret = EXIT_INPUT;
		goto out;
	}
	fprintf(stderr,
		"%s: %" PRIu64 " instructions in %u thread(s), %" PRIu64
		" PT bytes; ",
		arg_program, res.insns, res.threads, res.pt_bytes);
	fprintf(stderr, "%" PRIu64 " ptrace stops; ", res.steps);
	if (res.detached)
		fprintf(stderr, "detached at --max-insns, target %ld runs on "
				"untraced\n", (long)res.pid);
	else if (res.exit_signal)
		fprintf(stderr, "target killed by signal %d\n",
			res.exit_signal);
	else
		fprintf(stderr, "target exited with %d\n", res.exit_code);
	if (verify)
		ret = print_verify(outdir);
	else if (no_decode)
		ret = 0;
	else
		ret = decode_input(outdir, &d);
out:
	if (tmp)
		(void)ptd_rm_rf(outdir);
	return ret;
}


/* ---- daemon verbs: talk to ptd over its socket ---- */

#define PTCTL_DEFAULT_SOCKET "/run/ptd/ptd.sock"
