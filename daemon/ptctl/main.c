/* SPDX-License-Identifier: MIT */
/*
 * ptctl: ptd's command-line client (ptctl.1).  The verbs live by group in
 * this directory (ptctl.h says which file holds which).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "common/strutil.h"
#include "ptctl.h"

const char *arg_program = "ptctl";
const char *arg_socket;

void errx_msg(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", arg_program);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static const struct verb {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
} verbs[] = {
	{ "trace", verb_trace,
	  "run a program under the software PT source and stream it" },
	{ "decode", verb_decode,
	  "decode a saved trace (capture, bundle, perf.data, LLDB) or raw PT" },
	{ "export", verb_export,
	  "a capture as a bundle, perf.data or LLDB bundle; calls as Perfetto "
	  "JSON" },
	{ "flamegraph", verb_flamegraph,
	  "an SVG flame graph of a trace's instructions by stack" },
	{ "coverage", verb_coverage,
	  "what a saved trace ran, per function, as text or lcov" },
	{ "verify", verb_verify,
	  "check a capture's decode against its ground truth" },
	{ "attach", verb_attach, "ask ptd to trace a running process" },
	{ "detach", verb_detach, "stop a session; the process runs on" },
	{ "snapshot", verb_snapshot,
	  "decode a snapshot-mode session's newest trace" },
	{ "list", verb_list, "list your sessions and watch rules" },
	{ "status", verb_status, "ptd's status, or one session's" },
	{ "stream", verb_stream, "a session's records as JSON lines" },
	{ "top", verb_top,
	  "a session's hottest functions, exact counts, live" },
	{ "replay", verb_replay,
	  "ptd decodes a saved trace as a session; stream it" },
	{ "record", verb_record,
	  "write a recorded session's bundle into a directory" },
	{ "watch", verb_watch,
	  "trace every process that starts a program, while ptctl runs" },
	{ "unwatch", verb_unwatch, "end a watch rule" },
	{ "trigger", verb_trigger,
	  "add a trigger (a uprobe: snapshot when hit) to a session" },
};

static void help(FILE *f)
{
	size_t i;

	fprintf(f, "Usage: ptctl [--socket PATH] VERB [OPTIONS...]\n\n");
	for (i = 0; i < PTD_ARRAY_SIZE(verbs); i++)
		fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].help);
	fprintf(f, "\nptctl VERB --help for a verb's options.\n"
		   "The daemon verbs talk to ptd at --socket PATH, $PTD_SOCKET "
		   "or " PTCTL_DEFAULT_SOCKET ".\n"
		   "Exit status: 0 ok, 1 usage, 2 bad input, 3 decoded with "
		   "errors, 4 ground truth mismatch,\n5 cannot connect to ptd, "
		   "6 request refused, 7 no such process/session,\n8 "
		   "permission denied, 9 no Intel PT, 10 a ptd limit, 11 stream "
		   "ended on error/shutdown.\n");
}

int main(int argc, char **argv)
{
	size_t i;

	(void)ptd_nofile_raise();	/* copies of decoded code hold fds */
	/* The global option comes before the verb. */
	if (argc >= 2 && !strncmp(argv[1], "--socket=", 9)) {
		arg_socket = argv[1] + 9;
		argc--;
		argv++;
	} else if (argc >= 3 && !strcmp(argv[1], "--socket")) {
		arg_socket = argv[2];
		argc -= 2;
		argv += 2;
	}
	if (arg_socket && !*arg_socket) {
		errx_msg("--socket: empty path");
		return EXIT_USAGE;
	}
	if (argc < 2) {
		help(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		help(stdout);
		return 0;
	}
	for (i = 0; i < PTD_ARRAY_SIZE(verbs); i++)
		if (!strcmp(argv[1], verbs[i].name))
			return verbs[i].run(argc - 1, argv + 1);
	errx_msg("unknown verb '%s'", argv[1]);
	help(stderr);
	return EXIT_USAGE;
}
