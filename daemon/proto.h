/* SPDX-License-Identifier: MIT */
/*
 * The control protocol (doc/protocol.md, "Control protocol"): one JSON
 * request per line from the client, one JSON response per line back.
 *
 *   {"id":1,"cmd":"attach","pid":1234,"options":{"source":"auto"}}
 *   {"type":"response","id":1,"ok":true,"result":{"session":1,...}}
 *   {"type":"response","id":1,"ok":false,
 *    "error":{"code":"no_such_process","message":"..."}}
 *
 * Parsing is strict: unknown keys, repeated keys, wrong types, numbers that
 * are not integers or out of range are refused with a message naming the
 * field.  cJSON serves here (the control plane is not hot).
 */
#ifndef PTD_DAEMON_PROTO_H
#define PTD_DAEMON_PROTO_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/diag.h"
#include "daemon/filter.h"
#include "daemon/session.h"

#define PTD_PROTO_VERSION 1
#define PTD_VERSION_STRING "0.1.0"

/* Longest id string echoed back (bytes). */
#define PTD_PROTO_MAX_ID 256
/* Largest pid Linux hands out (PID_MAX_LIMIT). */
#define PTD_PROTO_PID_MAX 4194304
/* Largest integer a JSON number carries exactly (2^53). */
#define PTD_PROTO_INT_MAX 9007199254740992.0

enum ptd_cmd {
	PTD_CMD_PING,
	PTD_CMD_VERSION,
	PTD_CMD_ATTACH,
	PTD_CMD_DETACH,
	PTD_CMD_LIST,
	PTD_CMD_STATUS,
	PTD_CMD_SUBSCRIBE,
	PTD_CMD_SNAPSHOT,
	PTD_CMD_REPLAY,
	PTD_CMD_RECORD,
	PTD_CMD_WATCH,
	PTD_CMD_UNWATCH,
	PTD_CMD_TRIGGER,
	PTD_CMD_COUNTERS,
	PTD_CMD_COUNT,
};

/* "ping", "version", ...; NULL for an unknown value. */
const char *ptd_cmd_name(enum ptd_cmd c);

/* Error codes of responses. */
#define PTD_ERR_BAD_REQUEST "bad_request"
#define PTD_ERR_UNKNOWN_COMMAND "unknown_command"
#define PTD_ERR_TOO_LONG "too_long"
#define PTD_ERR_NO_SUCH_PROCESS "no_such_process"
#define PTD_ERR_NO_SUCH_SESSION "no_such_session"
#define PTD_ERR_PERMISSION "permission_denied"
#define PTD_ERR_NO_INTEL_PT "no_intel_pt"
#define PTD_ERR_UNSUPPORTED "unsupported"
#define PTD_ERR_LIMIT "limit"
#define PTD_ERR_MEMORY_LIMIT "memory_limit"
#define PTD_ERR_SHUTTING_DOWN "shutting_down"
#define PTD_ERR_INTERNAL "internal"
/* replay: the trace (or a file it needs) does not exist / is not a trace
 * ptd reads or is damaged */
#define PTD_ERR_NO_SUCH_FILE "no_such_file"
#define PTD_ERR_BAD_TRACE "bad_trace"
/* record: the session was not attached with options.record; the
 * directory passed is not empty or not the client's */
#define PTD_ERR_NOT_RECORDING "not_recording"
#define PTD_ERR_BAD_DIRECTORY "bad_directory"
/* attach: the session was detached (or its client went away) before the
 * attach was done; subscribe, snapshot, record: the session is still
 * attaching */
#define PTD_ERR_CANCELLED "cancelled"
#define PTD_ERR_ATTACHING "attaching"

/* Longest replay path (bytes, without the NUL). */
#define PTD_PROTO_PATH_MAX 4095
/* Longest replay wait_ms. */
#define PTD_PROTO_WAIT_MS_MAX 60000
#define PTD_PROTO_TRIGGERS_MAX 8	/* in one attach's options */
/* subscribe's "counters": {"every_ms": N, "top": K} bounds and
 * defaults (doc/protocol.md, "first_exec and counters") */
#define PTD_PROTO_COUNTERS_TOP_DEFAULT 20
#define PTD_PROTO_COUNTERS_TOP_MAX 1000
#define PTD_PROTO_COUNTERS_EVERY_MIN 100
#define PTD_PROTO_COUNTERS_EVERY_MAX 3600000

struct ptd_request {
	cJSON *id;		/* the request's id (a copy), or NULL */
	enum ptd_cmd cmd;
	/* attach */
	pid_t pid;
	enum ptd_source_kind source;	/* default AUTO */
	bool tsc;
	uint64_t max_insns;		/* 0: none */
	bool single_step;		/* options.step "single": the software
					 * source's reference mode */
	/* options.capture: software source only, root only: also write a
	 * capture (with the ground truth) into this absolute path; "" none */
	char capture[256];
	/* options.mode (default FULL) and options.snapshot_size (0: the
	 * config's aux_buffer_size; only with mode "snapshot"; a power of
	 * two from 4096 to PTD_SESSION_SNAPSHOT_MAX) */
	enum ptd_session_mode mode;
	uint64_t snapshot_size;
	/* options.per_cpu (attach, default false): per-CPU buffers
	 * (ptd_session_opts.per_cpu) */
	bool per_cpu;
	/* options.filter (attach): address filter text, perf's --filter
	 * grammar (perf/addrfilter.h), syntax-checked here (a bad one is
	 * "bad_request" naming the column); malloc'd, NULL: none */
	char *addr_filter;
	/* status (optional), detach, subscribe, snapshot */
	bool has_session;
	uint64_t session;
	/* subscribe; kinds default PTD_FILTER_DEFAULT_KINDS */
	struct ptd_filter_spec filter;
	/* options.record (attach): keep the raw trace for a record request */
	bool record;
	/* options.symbols (attach), "symbols" (replay): the session decodes
	 * with symbols, so that its insn records can carry "sym" (subscribe's
	 * "symbols" is filter.symbols) */
	bool symbols;
	/* options.counters (attach), "counters" (replay): the session keeps
	 * exact execution counts over all its threads, so that subscribers
	 * may ask for first_exec and counters records */
	bool counters;
	/* options.children (attach, watch): every process the traced one
	 * creates (fork, vfork, clone without CLONE_THREAD), recursively,
	 * becomes a session of its own with the same options */
	bool children;
	/* replay: {"path":ABS,"lossless":B,"lossy":B,"tid":N,"wait_ms":N};
	 * lossless unless "lossy":true or "lossless":false (both given, they
	 * must agree); wait_ms (first subscriber) defaults to
	 * PTD_REPLAY_WAIT_MS (has_wait_ms false).  attach's "wait_ms" too
	 * (beside "pid"): how long the session waits for its first
	 * subscriber before it decodes; default 0, decode at once */
	char path[PTD_PROTO_PATH_MAX + 1];
	bool lossless;
	bool has_tid;
	pid_t tid;
	bool has_wait_ms;
	uint64_t wait_ms;
	/* replay: "jobs":N (1 to PTD_DECODE_MAX_JOBS here; the server
	 * holds it to max_decode_jobs): decode on the instruction path,
	 * each thread on N threads (decode/parallel.h); 0: absent, the
	 * block path, serially */
	unsigned jobs;
	/* record: {"session":N,"wait":B}; wait defaults to true */
	bool record_wait;
	/* watch: {"exe":ABS}, {"comm":NAME} or {"cgroup":ABS} (one of
	 * them), "uid":N (optional), "wait_ms" and "options" as attach's;
	 * unwatch: {"rule":N} */
	char watch_exe[PTD_PROTO_PATH_MAX + 1];
	char watch_comm[16];
	char watch_cgroup[PTD_PROTO_PATH_MAX + 1];
	bool has_watch_uid;
	uid_t watch_uid;
	uint64_t rule;
	/* subscribe {"rule":N} instead of "session" (has_rule): every
	 * session the rule starts, in one stream; "running":true also the
	 * rule's sessions that run already */
	bool has_rule;
	bool rule_running;
	/* attach's options.triggers: trigger texts (daemon/trigger.h,
	 * ACTION:FILE:WHERE), each checked with ptd_trigger_spec_parse,
	 * malloc'd; trigger: {"session":N, "add":TEXT} (in triggers[0]) or
	 * {"session":N, "remove":ID} */
	char *triggers[PTD_PROTO_TRIGGERS_MAX];
	unsigned ntriggers;
	bool trigger_remove;
	uint64_t trigger_id;
};

/* @req at the defaults ptd_request_parse starts from, for @cmd (no id). */
void ptd_request_init(struct ptd_request *req, enum ptd_cmd cmd);

/* Parse the request in @line (@len bytes, no newline).  @req is always
 * initialised (free it with ptd_request_fini); on failure req->id holds
 * the id if one could be read, so the error response can echo it.
 * Returns 0, or with a message naming the field in @diag:
 *  -PTD_EFORMAT       not JSON, not an object, a missing, repeated,
 *                     unknown or wrong-typed field, a value out of range
 *                     (code "bad_request")
 *  -PTD_EUNSUPPORTED  an unknown cmd (code "unknown_command")
 *  -ENOMEM */
int ptd_request_parse(const char *line, size_t len, struct ptd_request *req,
		      struct ptd_diag *diag);
void ptd_request_fini(struct ptd_request *req);

/* The response code for an error returned by a request handler:
 * -ESRCH no_such_process, -EPERM/-EACCES permission_denied, -PTD_ENOPT
 * no_intel_pt, -PTD_ELIMIT limit, -PTD_EFORMAT/-EINVAL bad_request,
 * -PTD_EUNSUPPORTED unsupported, anything else internal. */
const char *ptd_proto_error_code(int err);

/* Render a response line (with its '\n') into a malloc'd string;
 * *ret_len gets its length.  @id may be NULL (then "id":null).
 * ptd_response_ok takes @result (NULL: an empty object).  Returns NULL on
 * -ENOMEM. */
char *ptd_response_ok(const cJSON *id, cJSON *result, size_t *ret_len);
char *ptd_response_error(const cJSON *id, const char *code,
			 const char *message, size_t *ret_len);

/* Build the request line for @req (with its '\n') into a malloc'd string:
 * the inverse of ptd_request_parse, which gives @req back from it.  Fields
 * at their ptd_request_init defaults are left out; req->id NULL sends
 * "id":null.  ptctl writes every request through this, so that a field is
 * spelled in one place.  Returns NULL on -ENOMEM. */
char *ptd_request_line(const struct ptd_request *req, size_t *ret_len);

/* A response as a client reads it.  @doc owns the tree; @id, @result (ok)
 * and @code/@message (not ok) point into it. */
struct ptd_json;
struct ptd_response {
	struct ptd_json *doc;
	bool ok;
	const cJSON *id;
	const cJSON *result;	/* an object; ok only */
	const char *code;	/* not ok only */
	const char *message;	/* not ok only */
};

/* Parse a response line (@len bytes, no newline) with lib/common/json: an
 * object with "type": "response", "id", "ok", and "result" (an object) or
 * "error" ({"code", "message"} strings).  @ret is always initialised
 * (ptd_response_fini).  Returns 0, -PTD_EFORMAT ("the response: PATH:
 * WHAT" in @diag) or -ENOMEM. */
int ptd_response_parse(const char *line, size_t len,
		       struct ptd_response *ret, struct ptd_diag *diag);
void ptd_response_fini(struct ptd_response *resp);

/* Source names as the protocol spells them ("auto", "intel_pt",
 * "software"), and the inverse (-1 for an unknown name). */

#endif
