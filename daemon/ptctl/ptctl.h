/* SPDX-License-Identifier: MIT */
/*
 * ptctl, ptd's command-line client: what its verb files share.
 *
 *   main.c     the verb table, --socket, help, the exit statuses
 *   decode.c   decode: a saved trace or raw PT bytes to JSON lines, and
 *              the options and output every decoding verb shares
 *   capture.c  trace, verify, export: the software source's captures
 *   views.c    export --format perfetto, flamegraph, coverage: a trace's
 *              calls as a timeline, its instructions by stack, what it
 *              ran per function (lib/views/)
 *   client.c   talking to ptd: connect, requests out and responses in
 *              through the protocol module ptd uses (daemon/proto.h), a
 *              stream followed to its bye
 *   attach.c   attach and record
 *   session.c  stream, replay, detach, list, status, snapshot
 *
 * Exit status: 0 done; 1 bad usage; 2 an input could not be used (the
 * message says which and why); 3 the trace decoded with errors (error
 * records are in the stream); 4 verify found a difference from the ground
 * truth; 5-11 the daemon verbs' (below).
 */
#ifndef PTD_PTCTL_H
#define PTD_PTCTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/proto.h"
#include "decode/decoder.h"
#include "input/input.h"

enum {
	EXIT_USAGE = 1,
	EXIT_INPUT = 2,
	EXIT_DECODE_ERRORS = 3,
	EXIT_MISMATCH = 4,
	/* daemon verbs */
	EXIT_CONNECT = 5,	/* ptd not running, or the socket refused us */
	EXIT_REFUSED = 6,	/* ptd refused the request (bad request...) */
	EXIT_NOT_FOUND = 7,	/* no such process / session */
	EXIT_PERMISSION = 8,	/* not allowed to trace that process */
	EXIT_NO_PT = 9,		/* no Intel PT, software source disabled */
	EXIT_LIMIT = 10,	/* a ptd limit (sessions, subscribers) */
	EXIT_STREAM = 11,	/* the stream ended on error or shutdown */
};

/* main.c: the program's name in messages; "ptctl: MESSAGE\n" on stderr */
extern const char *arg_program;
__attribute__((format(printf, 1, 2))) void errx_msg(const char *fmt, ...);

/* ---- decode.c ---- */

/* Options every decoding verb shares. */
struct decode_args {
	struct ptd_decode_opts opts;
	bool cpu_given;		/* --cpu, also 'none' */
	bool have_tid;
	long tid;
	const char *sysroot;
	const char *buildid_dir;
	const char *kernel;
	/* --symbols: d->opts.symbols is made from these */
	bool symbols;
	const char *debug_dir;		/* --debug-dir */
	const char *perfmap_dir;	/* --perf-map-dir */
	uint32_t fields;	/* --fields: PTD_FIELD_BIT()s; 0 every field */
	bool binary;		/* --format binary: frames, not JSON lines */
	bool packed;		/* --format packed: binary, address frames */
};

void decode_args_init(struct decode_args *d);
/* --records/--kinds KINDS into PTD_REC_BIT()s (error records always);
 * 0, or -EINVAL with the message printed */
int parse_records(const char *s, unsigned *ret);
/* --fields NAMES (comma-separated, record/record.h enum ptd_field) into
 * PTD_FIELD_BIT()s; 0, or -EINVAL with the message printed (naming the
 * field) */
int parse_fields(const char *s, uint32_t *ret);
/* The getopt value of --fields (decoding verbs and stream options). */
#define PTCTL_FIELDS_OPT 'O'
/* --format json|binary (decode, stream) */
#define PTCTL_FORMAT_OPT 0x200
/* --output FILE (stream, replay: where a binary stream's frames go) */
#define PTCTL_OUTPUT_OPT 0x202
/* --top K, --every MS (stream options: subscribe's "counters") */
#define PTCTL_TOP_OPT 0x203
#define PTCTL_EVERY_OPT 0x204
/* --counters (attach): options.counters */
#define PTCTL_COUNTERS_OPT 0x205
/* --jobs N (attach --snapshot): options.jobs */
#define PTCTL_JOBS_OPT 0x206
/* "json", "binary" or "packed" into *@binary and *@packed; 0, or
 * -EINVAL with the message printed */
int parse_format(const char *s, bool *binary, bool *packed);
/* --jobs N (decode, replay, attach --snapshot): 1 to PTD_DECODE_MAX_JOBS
 * into *@ret; 0, or -EINVAL with the message printed (ptd holds a
 * request to its own max_decode_jobs) */
int parse_jobs(const char *s, unsigned *ret);
#define PTCTL_SYMBOLS_OPT 'Y'
/* --trigger (attach, watch): not 'Y', which the stream options' --symbols
 * takes first */
#define PTCTL_TRIGGER_OPT 'Q'
/* --children (attach, watch): options.children */
#define PTCTL_CHILDREN_OPT 'K'
/* One option shared by the decoding verbs (getopt value @c): 1 if it was
 * one, 0 if not, -EINVAL on a bad value (message printed). */
int decode_option(struct decode_args *d, int c, const char *arg);
int check_decode_args(const struct decode_args *d);
/* The input options of @d (ptd_input_decode's). */
void decode_input_opts(const struct decode_args *d, struct ptd_input_opts *o);
/* d->opts.symbols from --symbols, --debug-dir, --perf-map-dir: 0 or an
 * exit status (message printed); decode_symbols_close says which files
 * gave no symbols and frees them. */
int decode_symbols_open(struct decode_args *d);
void decode_symbols_close(struct decode_args *d);
/* What a saved trace's decode says on stderr: a thread that ended early,
 * a notice (struct ptd_input_sink's). */
void decode_thread_failed(pid_t tid, int err, const struct ptd_diag *diag);
void decode_notice(void *ctx, const struct ptd_diag *diag);
/* Decode a saved trace of any kind (input/input.h) to stdout; an exit
 * status. */
int decode_input(const char *path, const struct decode_args *d);
int verb_decode(int argc, char **argv);

/* ---- capture.c ---- */

/* Write the capture in @in (a capture directory, or a ptd bundle: verified
 * first, its images read from its copies) as @format "lldb" or
 * "perf-data" at @out. */
int export_other(const char *in, enum ptd_input_kind kind,
		 const char *format, const char *out, struct ptd_diag *diag);
int verb_trace(int argc, char **argv);
int verb_export(int argc, char **argv);
int verb_verify(int argc, char **argv);

/* ---- views.c: export --format perfetto, flamegraph ---- */

/* `export --format perfetto ...` (argv as verb_export's). */
int verb_export_perfetto(int argc, char **argv);
int verb_flamegraph(int argc, char **argv);
/* coverage [--format text|lcov]: lib/views/coverage.h */
int verb_coverage(int argc, char **argv);

/* ---- client.c ---- */

#define PTCTL_DEFAULT_SOCKET "/run/ptd/ptd.sock"

/* --socket PATH (main.c sets it), else $PTD_SOCKET, else the default */
extern const char *arg_socket;

/* Connect to ptd; on failure say why and what to do (an exit status). */
int client_connect(FILE **ret);
/* A request for @cmd with ptctl's id, at the protocol's defaults. */
void client_request(struct ptd_request *req, enum ptd_cmd cmd);
/* Send @req and read its response into @ret (ptd_response_fini it).
 * Returns 0 if ok:true; an exit status otherwise, with the message
 * printed.  @json: the response line is copied to stdout. */
int client_call(FILE *f, const struct ptd_request *req, bool json,
		struct ptd_response *ret);
/* Send a record request with @dir's descriptor (opened here, as the
 * user: ptd writes into what the user could open). */
int client_send_record(FILE *f, const struct ptd_request *req,
		       const char *dir, bool json, struct ptd_response *ret);
/* A number or string field of a result (0 / "" when absent). */
double num_of(const cJSON *o, const char *key);
const char *str_of(const cJSON *o, const char *key);
/* Follow a subscribed stream: each line (without its newline) to @fn,
 * until the bye line (given to @fn too; its reason gives the status, as
 * ptctl stream's).  @fn returns 0 to go on, a negative value to stop
 * (status 0), or an exit status to stop with. */
int subscribe_and_follow_lines(FILE *f, uint64_t session,
			       const struct ptd_filter_spec *spec,
			       int (*fn)(void *ctx, const char *line,
					 size_t n),
			       void *ctx);
int follow_lines(FILE *f, int (*fn)(void *ctx, const char *line, size_t n),
		 void *ctx);
/* A SESSION argument; 0 or EXIT_USAGE with the message printed. */
int parse_session_arg(const char *s, uint64_t *ret);
/* The stream options (--kinds, --tid, --range, --iclass, --module) as
 * getopt_long entries, for the tables of the verbs that subscribe. */
#define PTCTL_STREAM_OPTIONS                              \
	{ "kinds", required_argument, NULL, 'k' },        \
	{ "tid", required_argument, NULL, 't' },          \
	{ "range", required_argument, NULL, 'R' },        \
	{ "iclass", required_argument, NULL, 'I' },       \
	{ "module", required_argument, NULL, 'M' },       \
	{ "fields", required_argument, NULL, PTCTL_FIELDS_OPT }, \
	{ "symbols", no_argument, NULL, PTCTL_SYMBOLS_OPT },  \
	{ "format", required_argument, NULL, PTCTL_FORMAT_OPT }, \
	{ "output", required_argument, NULL, PTCTL_OUTPUT_OPT }, \
	{ "top", required_argument, NULL, PTCTL_TOP_OPT }, \
	{ "every", required_argument, NULL, PTCTL_EVERY_OPT }
/* A subscription filter at the protocol's defaults. */
void stream_filter_init(struct ptd_filter_spec *f);
/* One of the stream options (getopt value @c) into @f: 1 if it was one,
 * 0 if not, -EINVAL on a bad value (message printed; exit EXIT_USAGE). */
int stream_option(struct ptd_filter_spec *f, int c, const char *arg);
/* The stream options given together make sense (--output only with
 * --format binary, binary not for a @rule's stream): 0, or EXIT_USAGE
 * with the message printed. */
int stream_args_check(const struct ptd_filter_spec *spec, bool rule);
/* Subscribe to @session with @f and copy its lines to stdout until bye. */
int subscribe_and_follow(FILE *f, uint64_t session,
			 const struct ptd_filter_spec *spec);
/* The same for watch rule @rule: every session it starts (@running: and
 * those it runs already), each record with its session and pid. */
int subscribe_rule_and_follow(FILE *f, uint64_t rule, bool running,
			      const struct ptd_filter_spec *spec);

/* ---- attach.c, session.c: the daemon verbs ---- */

int verb_attach(int argc, char **argv);
int verb_record(int argc, char **argv);
/* Ask ptd for @session's bundle in the directory @dir (@wait: answered
 * once written); 0 or an exit status, the message printed. */
int send_record(FILE *f, uint64_t session, const char *dir, bool wait,
		bool json, struct ptd_response *ret);
int verb_stream(int argc, char **argv);
int verb_top(int argc, char **argv);
int verb_replay(int argc, char **argv);
int verb_snapshot(int argc, char **argv);
int verb_detach(int argc, char **argv);
int verb_list(int argc, char **argv);
int verb_status(int argc, char **argv);

/* ---- watch.c: watch, unwatch, trigger ---- */

int verb_watch(int argc, char **argv);
int verb_unwatch(int argc, char **argv);
int verb_trigger(int argc, char **argv);
/* list's "rules" (nothing when there are none). */
void print_rules(const cJSON *rules);

#endif
