/* SPDX-License-Identifier: MIT */
/*
 * ptctl attach and record: ask ptd to trace a running process (and follow
 * its stream), and have a recorded session's trace written as a ptd
 * bundle -- or, by ptctl from that bundle, as an LLDB trace bundle.
 */
#include <dirent.h>
#include <errno.h>
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
#include "ptctl.h"

static const struct option attach_long[] = {
	{ "source", required_argument, NULL, 's' },
	{ "tsc", no_argument, NULL, 'T' },
	{ "step", required_argument, NULL, 'X' },
	{ "max-insns", required_argument, NULL, 'm' },
	{ "capture", required_argument, NULL, 'C' },
	{ "follow", no_argument, NULL, 'f' },
	{ "json", no_argument, NULL, 'j' },
	{ "snapshot", no_argument, NULL, 'S' },
	{ "snapshot-size", required_argument, NULL, 'Z' },
	PTCTL_STREAM_OPTIONS,
	{ "record", required_argument, NULL, 'D' },
	{ "record-format", required_argument, NULL, 'G' },
	{ "per-cpu", no_argument, NULL, 'P' },
	{ "filter", required_argument, NULL, 'F' },
	{ "trigger", required_argument, NULL, PTCTL_TRIGGER_OPT },
	{ "children", no_argument, NULL, PTCTL_CHILDREN_OPT },
	{ "counters", no_argument, NULL, PTCTL_COUNTERS_OPT },
	{ "jobs", required_argument, NULL, PTCTL_JOBS_OPT },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int record_lldb(FILE *f, uint64_t session, const char *dir,
		       bool json, struct ptd_response *ret);

/* Ask for @session's bundle in @dir (@wait: answered once it is written). */
int send_record(FILE *f, uint64_t session, const char *dir, bool wait,
		bool json, struct ptd_response *ret)
{
	struct ptd_request req;

	client_request(&req, PTD_CMD_RECORD);
	req.has_session = true;
	req.session = session;
	req.record_wait = wait;
	return client_send_record(f, &req, dir, json, ret);
}

/* Whether an LLDB bundle may be written at @dir: nothing there, or an
 * empty directory. */
static bool lldb_dir_free(const char *dir)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	bool empty = true;

	if (lstat(dir, &st) < 0)
		return errno == ENOENT;
	if (!S_ISDIR(st.st_mode) || !(d = opendir(dir)))
		return false;
	while (empty && (de = readdir(d)) != NULL)
		empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
	(void)closedir(d);
	return empty;
}

int verb_attach(int argc, char **argv)
{
	struct ptd_filter_spec spec;
	struct ptd_response resp;
	struct ptd_request req;
	const char *record = NULL;
	bool follow = false, json = false, snapshot = false;
	bool record_lldb_fmt = false;
	uint64_t pid, session;
	FILE *f = NULL;
	int c, r;

	client_request(&req, PTD_CMD_ATTACH);
	stream_filter_init(&spec);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", attach_long, NULL)) != -1) {
		r = stream_option(&spec, c, optarg);
		if (r < 0)
			return EXIT_USAGE;
		if (r == 1)
			continue;
		switch (c) {
		case 's':
			if (strcmp(optarg, "auto") &&
			    strcmp(optarg, "software") &&
			    strcmp(optarg, "intel_pt")) {
				errx_msg("--source: expected auto, software or "
					 "intel_pt, got '%s'",
					 optarg);
				r = EXIT_USAGE;
			}
			req.source = (enum ptd_source_kind)ptd_source_parse(
				optarg);
			break;
		case 'T':
			req.tsc = true;
			break;
		case 'X':
			if (strcmp(optarg, "branch") &&
			    strcmp(optarg, "single")) {
				errx_msg("--step: expected branch or single, "
					 "got '%s'", optarg);
				r = EXIT_USAGE;
			}
			req.single_step = strcmp(optarg, "single") == 0;
			break;
		case 'm':
			if (ptd_parse_u64(optarg, 10, &req.max_insns) < 0 ||
			    !req.max_insns || req.max_insns > (1ull << 53)) {
				errx_msg("--max-insns: expected a positive "
					 "number, got '%s'",
					 optarg);
				r = EXIT_USAGE;
			}
			break;
		case 'C':
			if (optarg[0] != '/') {
				errx_msg("--capture: expected an absolute "
					 "path, got '%s'", optarg);
				r = EXIT_USAGE;
			} else if (ptd_strlcpy(req.capture, optarg,
					       sizeof(req.capture)) < 0) {
				errx_msg("--capture: the path is longer than "
					 "%zu bytes", sizeof(req.capture) - 1);
				r = EXIT_USAGE;
			}
			break;
		case 'f':
			follow = true;
			break;
		case 'j':
			json = true;
			break;
		case 'D':
			record = optarg;
			break;
		case 'G':
			if (!strcmp(optarg, "lldb")) {
				record_lldb_fmt = true;
			} else if (strcmp(optarg, "bundle")) {
				errx_msg("--record-format: expected bundle or "
					 "lldb, got '%s'", optarg);
				r = EXIT_USAGE;
			}
			break;
		case 'S':
			snapshot = true;
			break;
		case 'P':
			req.per_cpu = true;
			break;
		case PTCTL_CHILDREN_OPT:
			req.children = true;
			break;
		case PTCTL_COUNTERS_OPT:
			req.counters = true;
			break;
		case PTCTL_JOBS_OPT:
			if (parse_jobs(optarg, &req.jobs) < 0)
				r = EXIT_USAGE;
			break;
		case 'F':
			req.addr_filter = optarg;	/* checked by ptd */
			break;
		case PTCTL_TRIGGER_OPT:
			if (req.ntriggers == PTD_PROTO_TRIGGERS_MAX) {
				errx_msg("--trigger: at most %d",
					 PTD_PROTO_TRIGGERS_MAX);
				r = EXIT_USAGE;
			} else {
				/* checked by ptd */
				req.triggers[req.ntriggers++] = optarg;
			}
			break;
		case 'Z':
			if (ptd_parse_u64(optarg, 10, &req.snapshot_size) <
				    0 ||
			    req.snapshot_size < 4096 ||
			    req.snapshot_size > PTD_SESSION_SNAPSHOT_MAX ||
			    (req.snapshot_size & (req.snapshot_size - 1))) {
				errx_msg("--snapshot-size: expected a power "
					 "of two from 4096 to %u bytes, got "
					 "'%s'", PTD_SESSION_SNAPSHOT_MAX,
					 optarg);
				r = EXIT_USAGE;
			}
			break;
		case 'h':
			printf("Usage: ptctl attach PID [--source "
			       "auto|software|intel_pt] [--tsc] "
			       "[--step branch|single]\n"
			       "       [--max-insns N] [--capture DIR] "
			       "[--snapshot [--snapshot-size BYTES]] "
			       "[--jobs N]\n"
			       "       [--record DIR [--record-format "
			       "bundle|lldb]] [--per-cpu] [--filter TEXT]\n"
			       "       [--trigger ACTION:FILE:SYMBOL|ACTION:"
			       "FILE:0xOFFSET|snapshot:tracepoint:CAT:NAME]...\n"
			       "       [--symbols] [--children] [--counters] "
			       "[--follow [stream options]] [--json]\n\n"
			       "Start tracing process PID; print the session "
			       "id (with --follow, stream it\nlike ptctl "
			       "stream).  --snapshot: keep only the newest "
			       "trace, decoded at each\n`ptctl snapshot "
			       "SESSION`.\n--jobs N: decode on N threads (the "
			       "threads at once; with --snapshot each\nthread's "
			       "snapshot cut at its PSBs).  --record: when the "
			       "session ends,\n"
			       "ptd writes a bundle of its trace into DIR (an "
			       "empty directory of yours);\nwith "
			       "--record-format lldb, an LLDB trace bundle for "
			       "`trace load`,\nand ptctl waits for the end to "
			       "write it (DIR must not exist, or be empty).\n"
			       "--per-cpu: one trace buffer per CPU "
			       "(perf's layout; intel_pt follows new\n"
			       "threads and children by inheritance) "
			       "instead of one per thread.\n"
			       "--symbols: the session names the function of "
			       "each\ninstruction (read with your rights from "
			       ".symtab, .dynsym, debug files, perf\nmaps); "
			       "records carry \"sym\" for subscribers that ask "
			       "(ptctl stream\n--symbols, or --follow "
			       "--symbols).  --children: every process it "
			       "creates (fork, vfork,\nclone), and theirs, "
			       "becomes a session too, traced from its first "
			       "instruction\n(each is stopped (SIGSTOP) until "
			       "ptd has seized it; intel_pt: by a BPF program, "
			       "not\nwith --per-cpu).  "
			       "--counters: the\nsession keeps exact execution "
			       "counts (ptctl top, ptctl stream --kinds\n"
			       "first_exec,counters [--top K] [--every MS]; "
			       "implied by --follow asking for them).  "
			       "--filter: trace only inside address ranges,\n"
			       "perf record's --filter syntax: 'filter "
			       "OFFSET/SIZE@FILE' (also 'tracestop'),\n"
			       "up to 4, separated by ','.  A range in a file "
			       "the process has not mapped\nyet (a library it "
			       "will dlopen) waits until it does, as perf's "
			       "does.\n--step (software source): branch, the "
			       "default, leaves INT3s at the branches\nit "
			       "stops at (removed on detach); should ptd be "
			       "killed while tracing, the\nprocess dies of "
			       "SIGTRAP at its next such branch.  single "
			       "single-steps every\ninstruction (~40 k/s) "
			       "and leaves nothing in the process.\n"
			       "--trigger (up to 8; needs BPF): a uprobe on "
			       "the instruction at SYMBOL (or file\noffset "
			       "0xOFFSET) of FILE, a file the process maps "
			       "(its path, or its name\nwithout '/').  ACTION "
			       "snapshot (with --snapshot): every thread that "
			       "runs it\ntakes a snapshot, after a trigger "
			       "record naming the trigger and the thread.\n"
			       "ACTION start / stop (full mode): each "
			       "thread's records only from a start to a stop."
			       "\n"
			       "`ptctl trigger` adds and removes them later.\n");
			return 0;
		default:
			r = EXIT_USAGE;
			break;
		}
		if (r) {
			return r;
		}
	}
	if (optind + 1 != argc || ptd_parse_u64(argv[optind], 10, &pid) < 0 ||
	    pid == 0 || pid > INT32_MAX) {
		errx_msg("expected one PID (ptctl attach PID [OPTIONS])");
		return EXIT_USAGE;
	}
	for (unsigned i = 0; i < req.ntriggers; i++)
		if (!strncmp(req.triggers[i], "snapshot:", 9) && !snapshot) {
			errx_msg("--trigger snapshot:... needs --snapshot");
			return EXIT_USAGE;
		}
	if (req.snapshot_size && !snapshot) {
		errx_msg("--snapshot-size needs --snapshot");
		return EXIT_USAGE;
	}
	if (record_lldb_fmt && !record) {
		errx_msg("--record-format needs --record DIR");
		return EXIT_USAGE;
	}
	if (record_lldb_fmt && !lldb_dir_free(record)) {
		/* found out now, not after the whole session */
		errx_msg("'%s' exists and is not an empty directory", record);
		return EXIT_INPUT;
	}
	r = client_connect(&f);
	if (r) {
		return r;
	}
	req.pid = (pid_t)pid;
	/* --symbols: the session decodes with them (read with your rights),
	 * and --follow's subscription asks for them */
	req.symbols = spec.symbols;
	/* --follow asking for first_exec, counters or traces: the session
	 * counts */
	if (follow && (spec.kinds & PTD_COUNTERS_KINDS))
		req.counters = true;
	if (snapshot)
		req.mode = PTD_MODE_SNAPSHOT;
	req.record = record != NULL;
	if (follow) {
		/* the stream from its start: the session waits for the
		 * subscription that follows this answer */
		req.has_wait_ms = true;
		req.wait_ms = 5000;
	}
	r = client_call(f, &req, json, &resp);
	if (!r) {
		const cJSON *res = resp.result;

		session = (uint64_t)num_of(res, "session");
		if (*str_of(res, "warning"))
			errx_msg("warning: %s", str_of(res, "warning"));
		if (*str_of(res, "stop"))	/* --children */
			errx_msg("note: %s", str_of(res, "stop"));
		if (!json && !follow)
			printf("%" PRIu64 "\n", session);
		else if (!json)
			errx_msg("session %" PRIu64 " (%s source, pid %.0f)",
				 session, str_of(res, "source"),
				 num_of(res, "pid"));
		ptd_response_fini(&resp);
		if (record && record_lldb_fmt) {
			/* written by ptctl from the session's bundle once
			 * the session has ended: after the stream with
			 * --follow, on a connection of its own */
			FILE *rf = NULL;

			if (follow)
				r = subscribe_and_follow(f, session, &spec);
			if (!r)
				r = client_connect(&rf);
			if (!r)
				r = record_lldb(rf, session, record, json,
						&resp);
			if (rf)
				fclose(rf);
			ptd_response_fini(&resp);
			if (!r && !json)
				errx_msg("the LLDB trace bundle of session "
					 "%" PRIu64 " is written into '%s'",
					 session, record);
			fclose(f);
			return r;
		}
		if (record) {
			r = send_record(f, session, record, false, json,
					&resp);
			ptd_response_fini(&resp);
			if (r)
				errx_msg("session %" PRIu64 " is traced but "
					 "will not be recorded (ptctl record "
					 "%" PRIu64 " DIR, or ptctl detach "
					 "%" PRIu64 ")", session, session,
					 session);
			else if (!json)
				errx_msg("the bundle of session %" PRIu64
					 " will be written into '%s' when it "
					 "ends", session, record);
		}
		if (follow && !r)
			r = subscribe_and_follow(f, session, &spec);
	}
	fclose(f);
	return r;
}

/* ptctl record --format lldb: the session's bundle into a temporary
 * directory beside @dir (received as for a bundle), verified and written
 * as an LLDB bundle at @dir (which must not exist, or be empty), then
 * removed. */
static int record_lldb(FILE *f, uint64_t session, const char *dir,
		       bool json, struct ptd_response *ret)
{
	struct ptd_diag diag = { "" };
	_cleanup_free_ char *tmp = NULL;
	struct stat st;
	int r;

	if (!lldb_dir_free(dir) || (lstat(dir, &st) == 0 && rmdir(dir) < 0)) {
		errx_msg("'%s' exists and is not an empty directory", dir);
		return EXIT_INPUT;
	}
	if (asprintf(&tmp, "%s.ptd-bundle-XXXXXX", dir) < 0) {
		tmp = NULL;
		errx_msg("out of memory");
		return EXIT_INPUT;
	}
	if (!mkdtemp(tmp)) {
		errx_msg("cannot create '%s': %s", tmp, strerror(errno));
		return EXIT_INPUT;
	}
	r = send_record(f, session, tmp, true, json, ret);
	if (r == 0 &&
	    export_other(tmp, PTD_INPUT_BUNDLE, "lldb", dir, &diag) < 0) {
		errx_msg("%s", diag.msg);
		r = EXIT_INPUT;
	}
	(void)ptd_rm_rf(tmp);
	return r;
}

int verb_record(int argc, char **argv)
{
	bool json = false, lldb = false;
	const char *args[2];
	unsigned nargs = 0;
	uint64_t session;
	struct ptd_response resp = { 0 };
	FILE *f = NULL;
	int i, r;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "lldb")) {
				lldb = true;
			} else if (strcmp(argv[i], "bundle")) {
				errx_msg("--format: expected bundle or lldb, "
					 "got '%s'", argv[i]);
				return EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--help") ||
			   !strcmp(argv[i], "-h")) {
			printf("Usage: ptctl record SESSION DIR [--format "
			       "bundle|lldb] [--json]\n\n"
			       "Write SESSION's trace into DIR once the "
			       "session has ended; the session\nmust have "
			       "been attached with --record.  Waits until it "
			       "is written.\n"
			       "  --format bundle  a ptd bundle (default); DIR "
			       "is an empty directory of yours\n"
			       "  --format lldb    an LLDB trace bundle for "
			       "`trace load` (lldb 22 and later);\n"
			       "                   DIR must not exist (or be "
			       "empty)\n");
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			errx_msg("unknown option '%s' (see ptctl record "
				 "--help)", argv[i]);
			return EXIT_USAGE;
		} else if (nargs < 2) {
			args[nargs++] = argv[i];
		} else {
			nargs = 3;
		}
	}
	if (nargs != 2) {
		errx_msg("expected SESSION and DIR (ptctl record SESSION DIR)");
		return EXIT_USAGE;
	}
	r = parse_session_arg(args[0], &session);
	if (!r)
		r = client_connect(&f);
	if (!r)
		r = lldb ? record_lldb(f, session, args[1], json, &resp)
			 : send_record(f, session, args[1], true, json, &resp);
	if (!r && !json)
		printf("%s of session %" PRIu64 " written to %s\n",
		       lldb ? "LLDB trace bundle" : "bundle", session,
		       args[1]);
	ptd_response_fini(&resp);
	if (f)
		fclose(f);
	return r;
}

