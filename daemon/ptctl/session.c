/* SPDX-License-Identifier: MIT */
/*
 * ptctl's verbs on sessions: stream, replay (ptd decodes a saved trace as
 * a session), and the one-request verbs detach, list, status, snapshot.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"
#include "ptctl.h"

static const struct option stream_long[] = {
	PTCTL_STREAM_OPTIONS,
	{ "rule", required_argument, NULL, 'r' },
	{ "running", no_argument, NULL, 'N' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

int verb_stream(int argc, char **argv)
{
	struct ptd_filter_spec spec;
	FILE *f = NULL;
	uint64_t session = 0, rule = 0;
	bool running = false;
	int c, r;

	stream_filter_init(&spec);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", stream_long, NULL)) != -1) {
		r = stream_option(&spec, c, optarg);
		if (r < 0)
			return EXIT_USAGE;
		if (r == 1)
			continue;
		if (c == 'r') {
			if (ptd_parse_u64(optarg, 10, &rule) < 0 || !rule ||
			    rule > (1ull << 53)) {
				errx_msg("--rule: expected a rule number, got "
					 "'%s'", optarg);
				return EXIT_USAGE;
			}
			continue;
		}
		if (c == 'N') {
			running = true;
			continue;
		}
		if (c == 'h') {
			printf("Usage: ptctl stream SESSION [--kinds "
			       "insn,event,error,call,first_exec,counters]\n"
			       "       [--top K] [--every MS] [--tid N]...\n"
			       "       [--range START-END]... [--iclass C]... "
			       "[--module M]\n"
			       "       [--fields ip,tid,...] [--symbols] "
			       "[--format json|binary|packed] [--output FILE]\n"
			       "       ptctl stream --rule RULE [--running] "
			       "[the same options]\n\n"
			       "Write the session's records as JSON lines to "
			       "stdout until its bye record.\n"
			       "--fields: what insn records carry (as ptctl "
			       "decode --fields; default all\nbut sym).  "
			       "--symbols: sym too, \"sym\":\"NAME+0xOFFSET\" "
			       "(the session must\nhave been attached with "
			       "--symbols, or replayed with it).\n"
			       "--format binary: binary frames "
			       "(doc/protocol.md, \"Binary framing\"), each "
			       "checked,\nto --output FILE or stdout (packed: "
			       "runs of ip[,tid,pid] as address frames); "
			       "ptctl decode --from-binary FILE gives their "
			       "JSON lines.\n"
			       "--rule: every session the watch rule starts "
			       "from now on (--running: and\nthose it runs "
			       "already) in one stream, each record with its "
			       "\"session\" and\n\"pid\", each session "
			       "between session_start and session_end; the "
			       "bye comes\nonce the rule has ended and its "
			       "sessions in the stream with it.\n"
			       "--top K, --every MS: counters records (the "
			       "session must count: attach\n--counters): "
			       "the total and the K (default 20) most executed "
			       "instructions,\nblocks and functions every MS "
			       "ms and at the end (default: at the end).\n");
			return 0;
		}
		return EXIT_USAGE;
	}
	if (rule ? optind != argc : optind + 1 != argc) {
		errx_msg("expected one SESSION or --rule RULE (ptctl stream "
			 "SESSION|--rule RULE [OPTIONS])");
		return EXIT_USAGE;
	}
	if (running && !rule) {
		errx_msg("--running: only with --rule");
		return EXIT_USAGE;
	}
	r = stream_args_check(&spec, rule != 0);
	if (!r)
		r = rule ? 0 : parse_session_arg(argv[optind], &session);
	if (!r)
		r = client_connect(&f);
	if (!r)
		r = rule ? subscribe_rule_and_follow(f, rule, running, &spec)
			 : subscribe_and_follow(f, session, &spec);
	if (f)
		fclose(f);
	return r;
}

static const struct option replay_long[] = {
	{ "lossless", no_argument, NULL, 'L' },
	{ "lossy", no_argument, NULL, 'y' },
	{ "jobs", required_argument, NULL, 'j' },
	PTCTL_STREAM_OPTIONS,
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* ptctl replay: ptd decodes a saved trace (read with the user's own
 * permissions) as a session; stream it like ptctl stream. */
int verb_replay(int argc, char **argv)
{
	struct ptd_filter_spec spec;
	struct ptd_response resp;
	struct ptd_request req;
	_cleanup_free_ char *path = NULL;
	bool lossy = false;
	uint64_t session;
	unsigned jobs = 0;
	FILE *f = NULL;
	int c, r = 0;

	stream_filter_init(&spec);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", replay_long, NULL)) != -1) {
		r = stream_option(&spec, c, optarg);
		if (r < 0)
			return EXIT_USAGE;
		if (r == 1)
			continue;
		if (c == 'L' || c == 'y') {
			/* --lossless: the default, still accepted */
			lossy = c == 'y';
			continue;
		}
		if (c == 'j') {
			if (parse_jobs(optarg, &jobs) < 0)
				return EXIT_USAGE;
			continue;
		}
		if (c == 'h')
			printf("Usage: ptctl replay [--lossy] [--symbols] "
			       "[--jobs N] [stream options] TRACE\n\n"
			       "ptd decodes the saved TRACE (a capture, "
			       "bundle, perf.data or LLDB bundle,\nread with "
			       "your permissions) as a session; its records "
			       "are written like\nptctl stream's.  ptd waits "
			       "for this client rather than drop records;\n"
			       "--lossy: drop them (counted in lost records) "
			       "when it reads too slowly.\n--symbols: records "
			       "name their function (\"sym\"), from the "
			       "files the trace\nnames, read with your "
			       "rights.  --kinds with first_exec or counters: "
			       "ptd counts\nthe replay (--top K, --every MS as "
			       "ptctl stream's).\n--jobs N: ptd decodes on "
			       "the instruction path, each thread's trace on "
			       "N\nthreads (at most ptd.conf's "
			       "max_decode_jobs); the records are the same "
			       "for any N.\n");
		return c == 'h' ? 0 : r ? r : EXIT_USAGE;
	}
	if (optind + 1 != argc) {
		errx_msg("expected one TRACE (ptctl replay [OPTIONS] TRACE)");
		return EXIT_USAGE;
	}
	if (stream_args_check(&spec, false))
		return EXIT_USAGE;
	path = realpath(argv[optind], NULL);
	if (!path) {
		errx_msg("'%s': %s", argv[optind], strerror(errno));
		return EXIT_NOT_FOUND;
	}
	client_request(&req, PTD_CMD_REPLAY);
	if (ptd_strlcpy(req.path, path, sizeof(req.path)) < 0) {
		errx_msg("'%s': the path is longer than %zu bytes", path,
			 sizeof(req.path) - 1);
		return EXIT_USAGE;
	}
	req.lossless = !lossy;
	req.jobs = jobs;
	req.symbols = spec.symbols;
	/* first_exec, counters or traces asked for: ptd counts the replay */
	req.counters = (spec.kinds & PTD_COUNTERS_KINDS) != 0;
	r = client_connect(&f);
	if (r)
		return r;
	r = client_call(f, &req, false, &resp);
	if (!r) {
		session = (uint64_t)num_of(resp.result, "session");
		ptd_response_fini(&resp);
		r = subscribe_and_follow(f, session, &spec);
	}
	fclose(f);
	return r;
}

/* ptctl detach|list|status|snapshot: one request, text or --json output. */
static int simple_verb(int argc, char **argv, enum ptd_cmd cmd,
		       bool need_session, bool may_session,
		       void (*print)(const cJSON *result), const char *help)
{
	const char *name = ptd_cmd_name(cmd);
	struct ptd_response resp;
	struct ptd_request req;
	bool json = false;
	const char *sess = NULL;
	FILE *f = NULL;
	int i, r;

	client_request(&req, cmd);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("Usage: ptctl %s%s [--json]\n", name,
			       need_session	? " SESSION"
			       : may_session ? " [SESSION]"
					     : "");
			if (help)
				fputs(help, stdout);
			return 0;
		} else if (argv[i][0] != '-' && !sess &&
			   (need_session || may_session))
			sess = argv[i];
		else {
			errx_msg("%s: unexpected argument '%s'", name,
				 argv[i]);
			return EXIT_USAGE;
		}
	}
	if (need_session && !sess) {
		errx_msg("%s: expected a SESSION", name);
		return EXIT_USAGE;
	}
	if (sess && (r = parse_session_arg(sess, &req.session)))
		return r;
	req.has_session = sess != NULL;
	r = client_connect(&f);
	if (r)
		return r;
	r = client_call(f, &req, json, &resp);
	if (!r && !json)
		print(resp.result);
	ptd_response_fini(&resp);
	fclose(f);
	return r;
}

static void print_detach(const cJSON *res)
{
	printf("session %.0f detached\n", num_of(res, "session"));
}

static void print_list(const cJSON *res)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(res, "sessions");
	const cJSON *s;

	printf("%-8s %-8s %-6s %-9s %-9s %-11s %s\n", "SESSION", "PID",
	       "OWNER", "SOURCE", "STATE", "SUBSCRIBERS", "PARENT");
	cJSON_ArrayForEach(s, a) {
		char parent[32] = "-";	/* (options.children) */

		if (cJSON_GetObjectItemCaseSensitive(s, "parent"))
			(void)snprintf(parent, sizeof(parent), "%.0f",
				       num_of(s, "parent"));
		printf("%-8.0f %-8.0f %-6.0f %-9s %-9s %-11.0f %s\n",
		       num_of(s, "session"), num_of(s, "pid"),
		       num_of(s, "owner"), str_of(s, "source"),
		       str_of(s, "state"), num_of(s, "subscribers"), parent);
	}
	print_rules(cJSON_GetObjectItemCaseSensitive(res, "rules"));
}

/* status's "memory": the user's use against user_memory_limit. */
static void print_memory(const cJSON *m)
{
	if (!m)
		return;
	printf("memory of uid %.0f: %.1f MiB of %.1f MiB in use "
	       "(user_memory_limit)\n", num_of(m, "uid"),
	       num_of(m, "used") / 1048576, num_of(m, "limit") / 1048576);
}

static void print_status(const cJSON *res)
{
	const cJSON *subs, *s, *k;

	if (!cJSON_GetObjectItemCaseSensitive(res, "session")) {
		printf("ptd %s (protocol %.0f), up %.0f s, %.0f session(s), "
		       "%.0f connection(s)\n",
		       str_of(res, "ptd"), num_of(res, "protocol"),
		       num_of(res, "uptime_ms") / 1000, num_of(res, "sessions"),
		       num_of(res, "connections"));
		print_memory(cJSON_GetObjectItemCaseSensitive(res, "memory"));
		return;
	}
	printf("session %.0f: pid %.0f, owner %.0f, %s source, %s mode, %s\n",
	       num_of(res, "session"), num_of(res, "pid"), num_of(res, "owner"),
	       str_of(res, "source"), str_of(res, "mode"),
	       str_of(res, "state"));
	if (*str_of(res, "buffers"))	/* live sessions */
		printf("  buffers: %s\n", str_of(res, "buffers"));
	if (num_of(res, "jobs") > 0)	/* replay --jobs */
		printf("  decode: %s path, %.0f job(s), traces cut into %.0f "
		       "part(s)\n", str_of(res, "decoder"), num_of(res, "jobs"),
		       num_of(res, "parts"));
	if (num_of(res, "serial_parts") > 0)
		printf("  note: %.0f of those parts decoded serially: %s\n",
		       num_of(res, "serial_parts"), str_of(res, "serial_why"));
	if (*str_of(res, "record_state"))	/* attached with --record */
		printf("  record: %s%s%s\n", str_of(res, "record_state"),
		       *str_of(res, "record_error") ? ": " : "",
		       str_of(res, "record_error"));
	if (!strcmp(str_of(res, "mode"), "snapshot"))
		printf("  snapshots %.0f (%.0f bytes per thread), %.0f bytes "
		       "overwritten before a snapshot\n",
		       num_of(res, "snapshots"), num_of(res, "snapshot_size"),
		       num_of(res, "overwritten_bytes"));
	if (num_of(res, "kept_threads") > 0)
		printf("  ended threads: %.0f last traces kept for the next "
		       "snapshot (%.0f bytes)\n", num_of(res, "kept_threads"),
		       num_of(res, "kept_bytes"));
	if (num_of(res, "dropped_threads") > 0)
		printf("  ended threads: %.0f last traces dropped (%.0f bytes: "
		       "user_memory_limit had no room)\n",
		       num_of(res, "dropped_threads"),
		       num_of(res, "dropped_bytes"));
	printf("  threads %.0f (%.0f live), %.0f trace bytes, %.0f "
	       "instructions, %.0f records, %.0f bytes lost by the source\n",
	       num_of(res, "threads"), num_of(res, "threads_live"),
	       num_of(res, "trace_bytes"), num_of(res, "insns"),
	       num_of(res, "records"), num_of(res, "lost_bytes"));
	if (cJSON_GetObjectItemCaseSensitive(res, "parent"))
		printf("  parent session %.0f\n", num_of(res, "parent"));
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "children")))
		printf("  children: %.0f traced as sessions, %.0f refused%s%s"
		       "\n", num_of(res, "children_started"),
		       num_of(res, "children_refused"),
		       *str_of(res, "last_child_refusal") ? "; last: " : "",
		       str_of(res, "last_child_refusal"));
	if (num_of(res, "children_missed") > 0)
		printf("  children: %.0f not stopped by the fork stopper (its "
		       "tables or ring buffer full): ran untraced\n",
		       num_of(res, "children_missed"));
	if (num_of(res, "identity_mismatches") > 0)
		printf("  %.0f mapped file(s) replaced at their path: not "
		       "decoded from that path (the stream's error records "
		       "of context image name them)\n",
		       num_of(res, "identity_mismatches"));
	cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(res, "triggers")) {
		if (*str_of(s, "tracepoint"))
			printf("  trigger %.0f %s (tracepoint %s)",
			       num_of(s, "trigger"), str_of(s, "spec"),
			       str_of(s, "tracepoint"));
		else
			printf("  trigger %.0f %s (%s offset %s)",
			       num_of(s, "trigger"), str_of(s, "spec"),
			       str_of(s, "file"), str_of(s, "offset"));
		printf(": %.0f hits, %.0f snapshots, %.0f dropped\n",
		       num_of(s, "hits"), num_of(s, "snapshots"),
		       num_of(s, "dropped"));
	}
	subs = cJSON_GetObjectItemCaseSensitive(res, "subscriber_list");
	cJSON_ArrayForEach(s, subs) {
		printf("  subscriber %.0f [", num_of(s, "id"));
		cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(s, "kinds"))
			printf("%s%s", k == cJSON_GetObjectItemCaseSensitive(
						    s, "kinds")->child
					       ? ""
					       : ",",
			       cJSON_IsString(k) ? k->valuestring : "?");
		printf("]: %.0f sent, %.0f lost\n", num_of(s, "sent"),
		       num_of(s, "lost"));
	}
}

static void print_snapshot(const cJSON *res)
{
	const cJSON *t;

	printf("session %.0f snapshot %.0f: %.0f thread(s), %.0f bytes "
	       "read, %.0f overwritten, %.0f records (%.0f instructions)\n",
	       num_of(res, "session"), num_of(res, "seq"),
	       num_of(res, "threads_total"), num_of(res, "bytes"),
	       num_of(res, "overwritten"), num_of(res, "records"),
	       num_of(res, "insns"));
	cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(res, "threads"))
		printf("  tid %.0f: %.0f bytes, %.0f overwritten, %.0f "
		       "records\n", num_of(t, "tid"), num_of(t, "bytes"),
		       num_of(t, "overwritten"), num_of(t, "records"));
	cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(res,
							       "subscribers"))
		printf("  subscriber %.0f: %.0f sent, %.0f lost%s\n",
		       num_of(t, "subscriber"), num_of(t, "sent"),
		       num_of(t, "lost"),
		       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
			       t, "cut_off"))
			       ? " (cut off: it read nothing for "
				 "subscriber_stall_ms)"
			       : "");
}

static const char snapshot_help[] =
	"Decode the newest trace of a snapshot-mode session (attach "
	"--snapshot) and\n"
	"send its records to the session's subscribers, between snapshot "
	"markers.\n"
	"The answer comes once every record is queued for every subscriber;"
	" it says\n"
	"what each subscriber was sent and lost of this snapshot.\n"
	"\n"
	"A snapshot's stream is paced: its trace is already copied out of the"
	" ring\n"
	"and the target runs on, so ptd waits for a subscriber whose queue is"
	" full\n"
	"rather than drop records: a subscriber that keeps reading gets all "
	"of them.\n"
	"One that reads nothing for subscriber_stall_ms (ptd.conf) is cut "
	"off: a\n"
	"\"lost\" record with what it missed, then a bye \"stalled\"; "
	"the others go on.\n"
	"Replays are paced too.  A live full-mode session's stream is not: "
	"there a\n"
	"full queue loses records (counted in \"lost\" records), so that "
	"no reader\n"
	"ever holds the traced program back.\n";

int verb_snapshot(int argc, char **argv)
{
	return simple_verb(argc, argv, PTD_CMD_SNAPSHOT, true, false,
			   print_snapshot, snapshot_help);
}

int verb_detach(int argc, char **argv)
{
	return simple_verb(argc, argv, PTD_CMD_DETACH, true, false,
			   print_detach, NULL);
}

int verb_list(int argc, char **argv)
{
	return simple_verb(argc, argv, PTD_CMD_LIST, false, false,
			   print_list, NULL);
}

int verb_status(int argc, char **argv)
{
	return simple_verb(argc, argv, PTD_CMD_STATUS, false, true,
			   print_status, NULL);
}

