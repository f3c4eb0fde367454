/* SPDX-License-Identifier: MIT */
/*
 * ptctl watch and unwatch: a rule that makes every process starting a
 * program a session (daemon/server/watch.c), held for as long as ptctl
 * watch runs (the rule ends with its connection), and ended by another
 * ptctl with unwatch.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/strutil.h"
#include "ptctl.h"

static const struct option watch_long[] = {
	{ "exe", required_argument, NULL, 'e' },
	{ "comm", required_argument, NULL, 'c' },
	{ "cgroup", required_argument, NULL, 'g' },
	{ "uid", required_argument, NULL, 'u' },
	{ "source", required_argument, NULL, 's' },
	{ "tsc", no_argument, NULL, 'T' },
	{ "max-insns", required_argument, NULL, 'm' },
	{ "capture", required_argument, NULL, 'C' },
	{ "snapshot", no_argument, NULL, 'S' },
	{ "filter", required_argument, NULL, 'F' },
	{ "wait-ms", required_argument, NULL, 'W' },
	{ "json", no_argument, NULL, 'j' },
	{ "follow", no_argument, NULL, 'f' },
	{ "trigger", required_argument, NULL, PTCTL_TRIGGER_OPT },
	{ "children", no_argument, NULL, PTCTL_CHILDREN_OPT },
	PTCTL_STREAM_OPTIONS,
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static const char watch_usage[] =
	"Usage: ptctl watch --exe PATH | --comm NAME | --cgroup DIR [--uid UID]\n"
	"       [--source auto|software|intel_pt] [--tsc] [--max-insns N]\n"
	"       [--capture DIR] [--snapshot] [--filter TEXT] [--wait-ms MS]\n"
	"       [--symbols] [--children] [--trigger ACTION:FILE:WHERE]... "
	"[--json]\n"
	"       [--follow [--kinds K] [--tid N]...\n"
	"       [--range A-B]... [--iclass C]... [--module M] [--fields F,...]]"
	"\n\n"
	"While this runs, every process that execs PATH (the file itself, "
	"by device and\ninode, however it is named), a program whose "
	"command name is NAME, or any\nprogram in the cgroup (v2) DIR or "
	"one below it becomes a session, traced from\nits first "
	"instruction (the dynamic loader's entry), with attach's options\n"
	"(--capture: DIR/PID for each).  --uid: only processes of that\n"
	"real uid.  A user's rule matches only that user's own processes, "
	"never a\nset-user-ID or set-group-ID program.  --wait-ms: each "
	"session waits so long for\nits first subscriber.  Prints the rule "
	"id, then waits; the rule ends when ptctl\nis stopped (SIGINT, "
	"SIGTERM) or by `ptctl unwatch RULE`.  `ptctl list` shows the\n"
	"rule and the sessions it started.  The process is stopped "
	"(SIGSTOP) at its exec\nuntil ptd has seized it: its parent can "
	"see that stop with waitpid(WUNTRACED).\n"
	"--symbols: the sessions decode with symbols, read with your rights "
	"(as attach\n--symbols).  --trigger: each session's (as attach "
	"--trigger), resolved against\nthe process at its exec: in the "
	"program or the loader, the files mapped then.\n"
	"--children: every process a session's process creates (fork, "
	"vfork, clone),\nand theirs, becomes a session of the rule too, "
	"traced from its first\ninstruction; it is stopped (SIGSTOP) until "
	"ptd has seized it.\n"
	"--follow: write every session the rule starts to stdout as one "
	"stream (as\n`ptctl stream --rule RULE`; the rule id goes to "
	"stderr), until the rule ends.\n";

static volatile sig_atomic_t stop_asked;

static void on_stop_signal(int sig)
{
	stop_asked = 1;
}

static int watch_option(struct ptd_request *req, int c, const char *arg)
{
	uint64_t v;

	switch (c) {
	case 'e':
		if (arg[0] != '/' ||
		    ptd_strlcpy(req->watch_exe, arg, sizeof(req->watch_exe)) <
			    0) {
			errx_msg("--exe: expected an absolute path, got '%s'",
				 arg);
			return EXIT_USAGE;
		}
		return 0;
	case 'c':
		if (!arg[0] || strchr(arg, '/') ||
		    ptd_strlcpy(req->watch_comm, arg, sizeof(req->watch_comm)) <
			    0) {
			errx_msg("--comm: expected a command name of 1 to %zu "
				 "bytes without '/', got '%s'",
				 sizeof(req->watch_comm) - 1, arg);
			return EXIT_USAGE;
		}
		return 0;
	case 'g':
		if (arg[0] != '/' ||
		    ptd_strlcpy(req->watch_cgroup, arg,
				sizeof(req->watch_cgroup)) < 0) {
			errx_msg("--cgroup: expected the absolute path of a "
				 "cgroup's directory, got '%s'", arg);
			return EXIT_USAGE;
		}
		return 0;
	case 'u':
		if (ptd_parse_u64(arg, 10, &v) < 0 || v >= UINT32_MAX) {
			errx_msg("--uid: expected a uid, got '%s'", arg);
			return EXIT_USAGE;
		}
		req->has_watch_uid = true;
		req->watch_uid = (uid_t)v;
		return 0;
	case 's':
		if (ptd_source_parse(arg) < 0) {
			errx_msg("--source: expected auto, software or "
				 "intel_pt, got '%s'", arg);
			return EXIT_USAGE;
		}
		req->source = (enum ptd_source_kind)ptd_source_parse(arg);
		return 0;
	case 'T':
		req->tsc = true;
		return 0;
	case 'm':
		if (ptd_parse_u64(arg, 10, &req->max_insns) < 0 ||
		    !req->max_insns || req->max_insns > (1ull << 53)) {
			errx_msg("--max-insns: expected a positive number, "
				 "got '%s'", arg);
			return EXIT_USAGE;
		}
		return 0;
	case 'C':
		if (arg[0] != '/' ||
		    ptd_strlcpy(req->capture, arg, sizeof(req->capture)) < 0) {
			errx_msg("--capture: expected an absolute path shorter "
				 "than %zu bytes, got '%s'",
				 sizeof(req->capture), arg);
			return EXIT_USAGE;
		}
		return 0;
	case 'S':
		req->mode = PTD_MODE_SNAPSHOT;
		return 0;
	case PTCTL_CHILDREN_OPT:
		req->children = true;
		return 0;
	case 'F':
		req->addr_filter = (char *)arg;	/* checked by ptd */
		return 0;
	case PTCTL_TRIGGER_OPT:
		if (req->ntriggers == PTD_PROTO_TRIGGERS_MAX) {
			errx_msg("--trigger: at most %d",
				 PTD_PROTO_TRIGGERS_MAX);
			return EXIT_USAGE;
		}
		req->triggers[req->ntriggers++] = (char *)arg;	/* by ptd */
		return 0;
	case 'W':
		if (ptd_parse_u64(arg, 10, &v) < 0 ||
		    v > PTD_PROTO_WAIT_MS_MAX) {
			errx_msg("--wait-ms: expected 0 to %d, got '%s'",
				 PTD_PROTO_WAIT_MS_MAX, arg);
			return EXIT_USAGE;
		}
		req->has_wait_ms = true;
		req->wait_ms = v;
		return 0;
	default:
		return EXIT_USAGE;
	}
}

int verb_watch(int argc, char **argv)
{
	struct ptd_response resp;
	struct ptd_request req;
	struct sigaction sa;
	struct ptd_filter_spec spec;
	struct pollfd pfd;
	bool json = false, follow = false, stream_opts = false;
	FILE *f = NULL;
	uint64_t rule;
	int c, r;

	client_request(&req, PTD_CMD_WATCH);
	stream_filter_init(&spec);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", watch_long, NULL)) != -1) {
		if (c == 'h') {
			fputs(watch_usage, stdout);
			return 0;
		}
		if (c == 'j') {
			json = true;
			continue;
		}
		if (c == 'f') {
			follow = true;
			continue;
		}
		r = stream_option(&spec, c, optarg);
		if (r < 0)
			return EXIT_USAGE;
		if (r == 1) {
			/* --symbols: the sessions decode with them (and
			 * --follow's stream carries them) */
			stream_opts = stream_opts || c != PTCTL_SYMBOLS_OPT;
			continue;
		}
		r = watch_option(&req, c, optarg);
		if (r)
			return r;
	}
	if (optind != argc || !!req.watch_exe[0] + !!req.watch_comm[0] +
				      !!req.watch_cgroup[0] != 1) {
		errx_msg("watch: expected --exe PATH, --comm NAME or "
			 "--cgroup DIR (one of them) and no other argument");
		return EXIT_USAGE;
	}
	req.symbols = spec.symbols;
	if (stream_opts && !follow) {
		errx_msg("watch: the stream options (--kinds, --tid, "
			 "--fields...) go with --follow");
		return EXIT_USAGE;
	}
	if (follow && json) {
		errx_msg("watch: --follow writes the stream to stdout: not "
			 "with --json");
		return EXIT_USAGE;
	}
	r = client_connect(&f);
	if (r)
		return r;
	r = client_call(f, &req, json, &resp);
	if (r) {
		fclose(f);
		return r;
	}
	if (follow) {
		/* the rule lives with this connection, which becomes its
		 * stream: ptctl stopped, the rule ends */
		rule = (uint64_t)num_of(resp.result, "rule");
		fprintf(stderr, "ptctl: rule %" PRIu64 ": %s\n", rule,
			str_of(resp.result, "stop"));
		if (*str_of(resp.result, "children_stop"))
			fprintf(stderr, "ptctl: rule %" PRIu64 ": %s\n", rule,
				str_of(resp.result, "children_stop"));
		ptd_response_fini(&resp);
		r = subscribe_rule_and_follow(f, rule, false, &spec);
		fclose(f);
		return r;
	}
	if (!json) {
		printf("%.0f\n", num_of(resp.result, "rule"));
		fprintf(stderr, "ptctl: rule %.0f: %s\n",
			num_of(resp.result, "rule"),
			str_of(resp.result, "stop"));
		if (*str_of(resp.result, "children_stop"))
			fprintf(stderr, "ptctl: rule %.0f: %s\n",
				num_of(resp.result, "rule"),
				str_of(resp.result, "children_stop"));
	}
	fflush(stdout);
	ptd_response_fini(&resp);
	/* The rule lives as long as this connection. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;	/* no SA_RESTART: poll returns */
	(void)sigaction(SIGINT, &sa, NULL);
	(void)sigaction(SIGTERM, &sa, NULL);
	pfd.fd = fileno(f);
	pfd.events = POLLIN;
	r = 0;
	while (!stop_asked) {
		int n = poll(&pfd, 1, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
			errx_msg("ptd closed the connection: the rule has "
				 "ended");
			r = EXIT_STREAM;
			break;
		}
	}
	fclose(f);
	return r;
}

int verb_unwatch(int argc, char **argv)
{
	struct ptd_response resp;
	struct ptd_request req;
	bool json = false;
	const char *arg = NULL;
	FILE *f = NULL;
	int i, r;

	client_request(&req, PTD_CMD_UNWATCH);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("Usage: ptctl unwatch RULE [--json]\n\nEnd a "
			       "watch rule; the sessions it started run "
			       "on.\n");
			return 0;
		} else if (!arg && argv[i][0] != '-') {
			arg = argv[i];
		} else {
			errx_msg("unwatch: unexpected argument '%s'", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!arg || ptd_parse_u64(arg, 10, &req.rule) < 0 || !req.rule) {
		errx_msg("unwatch: expected a RULE number");
		return EXIT_USAGE;
	}
	r = client_connect(&f);
	if (r)
		return r;
	r = client_call(f, &req, json, &resp);
	if (r == 0) {
		if (!json)
			printf("rule %.0f ended; it started %.0f session(s)\n",
			       num_of(resp.result, "rule"),
			       num_of(resp.result, "sessions_started"));
		ptd_response_fini(&resp);
	}
	fclose(f);
	return r;
}

void print_rules(const cJSON *rules)
{
	const cJSON *o, *ss, *e;

	if (!cJSON_GetArraySize(rules))
		return;
	printf("\n%-6s %-6s %-8s %-8s %-8s %s\n", "RULE", "OWNER", "MATCHED",
	       "STARTED", "REFUSED", "WATCHES");
	cJSON_ArrayForEach(o, rules) {
		const char *exe = str_of(o, "exe");

		printf("%-6.0f %-6.0f %-8.0f %-8.0f %-8.0f %s %s", num_of(o, "rule"),
		       num_of(o, "owner"), num_of(o, "matched"),
		       num_of(o, "sessions_started"), num_of(o, "refused"),
		       exe[0] ? "exe" : "comm", exe[0] ? exe : str_of(o, "comm"));
		ss = cJSON_GetObjectItemCaseSensitive(o, "sessions");
		if (cJSON_GetArraySize(ss)) {
			printf(" (sessions:");
			cJSON_ArrayForEach(e, ss)
				printf(" %.0f/pid %.0f", num_of(e, "session"),
				       num_of(e, "pid"));
			printf(")");
		}
		printf("\n");
	}
}

/* ptctl trigger SESSION SPEC | ptctl trigger SESSION --remove ID */
int verb_trigger(int argc, char **argv)
{
	struct ptd_response resp;
	struct ptd_request req;
	const char *args[2] = { NULL, NULL }, *rm = NULL;
	bool json = false;
	unsigned nargs = 0;
	FILE *f = NULL;
	int i, r;

	client_request(&req, PTD_CMD_TRIGGER);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("Usage: ptctl trigger SESSION ACTION:FILE:SYMBOL"
			       "|ACTION:FILE:0xOFFSET [--json]\n"
			       "       ptctl trigger SESSION snapshot:tracepoint:"
			       "CATEGORY:NAME [--json]\n"
			       "       ptctl trigger SESSION --remove TRIGGER "
			       "[--json]\n\n"
			       "Add a trigger to a live session: a uprobe (a "
			       "BPF program; ptd needs BPF)\non the "
			       "instruction at SYMBOL, or at file offset "
			       "0xOFFSET, of FILE, a file\nthe process maps "
			       "(its path, or its name without '/').  ACTION "
			       "snapshot\n(snapshot-mode sessions): every "
			       "thread of the process that runs it takes\na "
			       "snapshot, preceded in the stream by a trigger "
			       "record (trigger, tid, time).  ACTION start, "
			       "stop (full-mode\nsessions): each thread's "
			       "records only from a start to a stop.\n"
			       "snapshot:tracepoint:CATEGORY:NAME: a snapshot "
			       "whenever a thread of the process\nruns into "
			       "that kernel tracepoint (e.g. syscalls:"
			       "sys_enter_openat).\nPrints the "
			       "trigger's number; `ptctl status SESSION` "
			       "lists them with their\nhits.  --remove ends "
			       "one.  At most max_triggers_per_user "
			       "(ptd.conf).\n");
			return 0;
		} else if (!strcmp(argv[i], "--remove") && i + 1 < argc) {
			rm = argv[++i];
		} else if (nargs < 2 && (argv[i][0] != '-' || nargs == 1)) {
			args[nargs++] = argv[i];
		} else {
			errx_msg("trigger: unexpected argument '%s'", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!args[0] || ptd_parse_u64(args[0], 10, &req.session) < 0 ||
	    !req.session || (!args[1] == !rm)) {
		errx_msg("trigger: expected SESSION and a trigger, or SESSION "
			 "--remove TRIGGER (ptctl trigger --help)");
		return EXIT_USAGE;
	}
	req.has_session = true;
	if (rm) {
		if (ptd_parse_u64(rm, 10, &req.trigger_id) < 0 ||
		    !req.trigger_id || req.trigger_id > UINT32_MAX) {
			errx_msg("trigger: --remove: expected a trigger "
				 "number, got '%s'", rm);
			return EXIT_USAGE;
		}
		req.trigger_remove = true;
	} else {
		req.triggers[0] = (char *)args[1];	/* checked by ptd */
		req.ntriggers = 1;
	}
	r = client_connect(&f);
	if (r)
		return r;
	r = client_call(f, &req, json, &resp);
	if (r == 0) {
		if (!json && rm)
			printf("trigger %.0f removed after %.0f hit(s)\n",
			       num_of(resp.result, "trigger"),
			       num_of(resp.result, "hits"));
		else if (!json)
			printf("%.0f\n", num_of(resp.result, "trigger"));
		ptd_response_fini(&resp);
	}
	fclose(f);
	return r;
}
