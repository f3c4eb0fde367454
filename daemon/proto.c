/* SPDX-License-Identifier: MIT */
/*
 * The control protocol: strict request parsing and response rendering.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/strutil.h"
#include "daemon/proto.h"
#include "daemon/trigger.h"
#include "decode/decoder.h"
#include "perf/addrfilter.h"
#include "x86/insn.h"

const char *ptd_cmd_name(enum ptd_cmd c)
{
	switch (c) {
	case PTD_CMD_PING:
		return "ping";
	case PTD_CMD_VERSION:
		return "version";
	case PTD_CMD_ATTACH:
		return "attach";
	case PTD_CMD_DETACH:
		return "detach";
	case PTD_CMD_LIST:
		return "list";
	case PTD_CMD_STATUS:
		return "status";
	case PTD_CMD_SUBSCRIBE:
		return "subscribe";
	case PTD_CMD_SNAPSHOT:
		return "snapshot";
	case PTD_CMD_REPLAY:
		return "replay";
	case PTD_CMD_RECORD:
		return "record";
	case PTD_CMD_WATCH:
		return "watch";
	case PTD_CMD_UNWATCH:
		return "unwatch";
	case PTD_CMD_TRIGGER:
		return "trigger";
	case PTD_CMD_COUNTERS:
		return "counters";
	case PTD_CMD_COUNT:
		break;
	}
	return NULL;
}

const char *ptd_proto_error_code(int err)
{
	switch (err) {
	case -ESRCH:
		return PTD_ERR_NO_SUCH_PROCESS;
	case -EPERM:
	case -EACCES:
		return PTD_ERR_PERMISSION;
	case -PTD_ENOPT:
		return PTD_ERR_NO_INTEL_PT;
	case -PTD_ELIMIT:
		return PTD_ERR_LIMIT;
	case -PTD_EFORMAT:
	case -EINVAL:
		return PTD_ERR_BAD_REQUEST;
	case -PTD_EUNSUPPORTED:
		return PTD_ERR_UNSUPPORTED;
	default:
		return PTD_ERR_INTERNAL;
	}
}

/* Fields are named by their JSON path after the command, as
 * "attach: options.max_insns: expected an integer, not a string"
 * (common/json.h); until the command is known, by the path alone.
 * Clients write integers as JSON numbers, perhaps as doubles (1e+15). */
#define INT PTD_JSON_INT_WHOLE
#define REQ PTD_JSON_REQUIRED
#define INT_MAX_JSON ((uint64_t)PTD_PROTO_INT_MAX)

static int parse_session(const struct ptd_json_reader *r, const cJSON *o,
			 bool required, struct ptd_request *req);

/* An optional member: absent is fine. */
static int optional(int e)
{
	return e == -ENOENT ? 0 : e;
}

/* wait_ms (replay, attach): the first subscriber's wait. */
static int parse_wait_ms(const struct ptd_json_reader *r, const cJSON *o,
			 struct ptd_request *req)
{
	int e = ptd_json_get_u64(r, o, "", "wait_ms", INT, 0,
				 PTD_PROTO_WAIT_MS_MAX, &req->wait_ms);

	if (e == 0)
		req->has_wait_ms = true;
	return optional(e);
}

/* replay: path (absolute), lossless or lossy (lossless unless asked),
 * tid, symbols, counters, jobs, wait_ms. */
static int parse_replay(const struct ptd_json_reader *r, const cJSON *o,
			struct ptd_request *req)
{
	const char *s;
	bool lossy = false;
	uint64_t n;
	int e;

	e = ptd_json_get_strn(r, o, "", "path", REQ, PTD_PROTO_PATH_MAX, &s);
	if (e < 0)
		return e;
	if (s[0] != '/')
		return ptd_json_badf(r, -PTD_EFORMAT, "path",
				     "must be an absolute path, got "
				     "\"%.200s\"", s);
	(void)ptd_strlcpy(req->path, s, sizeof(req->path));
	/* A replay has no live producer to protect: lossless by default. */
	req->lossless = true;
	e = optional(ptd_json_get_bool(r, o, "", "lossless", 0,
				       &req->lossless));
	if (e < 0)
		return e;
	e = ptd_json_get_bool(r, o, "", "lossy", 0, &lossy);
	if (e == 0) {
		if (cJSON_GetObjectItemCaseSensitive(o, "lossless") &&
		    req->lossless == lossy)
			return ptd_json_bad(r, "lossy", "contradicts "
					    "\"lossless\"");
		req->lossless = !lossy;
	} else if (e != -ENOENT) {
		return e;
	}
	e = ptd_json_get_u64(r, o, "", "tid", INT, 1, PTD_PROTO_PID_MAX, &n);
	if (e == 0) {
		req->has_tid = true;
		req->tid = (pid_t)n;
	}
	if (optional(e) < 0)
		return e;
	e = optional(ptd_json_get_bool(r, o, "", "symbols", 0, &req->symbols));
	if (e < 0)
		return e;
	e = optional(ptd_json_get_bool(r, o, "", "counters", 0,
				       &req->counters));
	if (e < 0)
		return e;
	e = ptd_json_get_u64(r, o, "", "jobs", INT, 1, PTD_DECODE_MAX_JOBS,
			     &n);
	if (e == 0)
		req->jobs = (unsigned)n;
	if (optional(e) < 0)
		return e;
	return parse_wait_ms(r, o, req);
}

/* record: session, wait. */
static int parse_record(const struct ptd_json_reader *r, const cJSON *o,
			struct ptd_request *req)
{
	int e;

	req->record_wait = true;
	e = optional(ptd_json_get_bool(r, o, "", "wait", 0,
				       &req->record_wait));
	if (e < 0)
		return e;
	return parse_session(r, o, true, req);
}

static int parse_session(const struct ptd_json_reader *r, const cJSON *o,
			 bool required, struct ptd_request *req)
{
	int e = ptd_json_get_u64(r, o, "", "session",
				 INT | (required ? REQ : 0), 1, INT_MAX_JSON,
				 &req->session);

	if (e == 0)
		req->has_session = true;
	return optional(e);
}

/* options.mode and options.snapshot_size. */
static int parse_mode(const struct ptd_json_reader *r, const cJSON *o,
		      struct ptd_request *req)
{
	const char *s;
	uint64_t n;
	int e;

	e = ptd_json_get_strn(r, o, "options", "mode", 0, 64, &s);
	if (e == 0) {
		e = ptd_session_mode_parse(s);
		if (e < 0)
			return ptd_json_badf(r, -PTD_EFORMAT, "options.mode",
					     "unknown mode \"%s\" (full, "
					     "snapshot)", s);
		req->mode = (enum ptd_session_mode)e;
	} else if (e != -ENOENT) {
		return e;
	}
	if (!cJSON_GetObjectItemCaseSensitive(o, "snapshot_size"))
		return 0;
	if (req->mode != PTD_MODE_SNAPSHOT)
		return ptd_json_bad(r, "options.snapshot_size",
				    "needs \"mode\": \"snapshot\"");
	e = ptd_json_get_u64(r, o, "options", "snapshot_size", INT, 4096,
			     PTD_SESSION_SNAPSHOT_MAX, &n);
	if (e < 0)
		return e;
	if (n & (n - 1))
		return ptd_json_badf(r, -PTD_EFORMAT, "options.snapshot_size",
				     "must be a power of two, got %" PRIu64,
				     n);
	req->snapshot_size = n;
	return 0;
}

/* options.jobs: a session's decodes on that many threads (a snapshot
 * session's snapshots cut at their PSBs; a full session's threads at
 * once). */
static int parse_jobs(const struct ptd_json_reader *r, const cJSON *o,
		      struct ptd_request *req)
{
	uint64_t n;
	int e;

	if (!cJSON_GetObjectItemCaseSensitive(o, "jobs"))
		return 0;
	if (req->mode != PTD_MODE_SNAPSHOT && req->per_cpu)
		return ptd_json_bad(r, "options.jobs",
				    "is not for per-CPU buffers (one merged "
				    "trace, decoded in its order)");
	if (req->mode != PTD_MODE_SNAPSHOT && req->counters)
		return ptd_json_bad(r, "options.jobs",
				    "is not for a full session with "
				    "\"counters\" (one table, counted in one "
				    "order)");
	e = ptd_json_get_u64(r, o, "options", "jobs", INT, 1,
			     PTD_DECODE_MAX_JOBS, &n);
	if (e < 0)
		return e;
	req->jobs = (unsigned)n;
	return 0;
}

/* options.filter: checked with the grammar (at most PTD_ADDRFILTER_MAX
 * ranges; the session checks the PMU's own limit), kept as text. */
static int parse_addr_filter(const struct ptd_json_reader *r,
			     const cJSON *o, struct ptd_request *req)
{
	struct ptd_addrfilter f;
	struct ptd_diag pd = { "" };
	const char *s = NULL;
	int e;

	e = ptd_json_get_strn(r, o, "options", "filter", 0,
			      PTD_ADDRFILTER_TEXT_MAX, &s);
	if (e < 0)
		return optional(e);
	e = ptd_addrfilter_parse(s, PTD_ADDRFILTER_MAX, &f, &pd);
	if (e == -ENOMEM)
		return e;
	if (e < 0)
		return ptd_json_bad(r, "options.filter", pd.msg);
	ptd_addrfilter_fini(&f);
	req->addr_filter = strdup(s);
	return req->addr_filter ? 0 : -ENOMEM;
}

/* One trigger text, checked, into req->triggers. */
static int add_trigger(const struct ptd_json_reader *r, const char *field,
		       const char *text, struct ptd_request *req)
{
	struct ptd_trigger_spec *sp = malloc(sizeof(*sp));
	struct ptd_diag pd = { "" };
	int e;

	if (!sp)
		return -ENOMEM;
	e = ptd_trigger_spec_parse(text, sp, &pd);
	free(sp);
	if (e < 0)
		return ptd_json_bad(r, field, pd.msg);
	req->triggers[req->ntriggers] = strdup(text);
	if (!req->triggers[req->ntriggers])
		return -ENOMEM;
	req->ntriggers++;
	return 0;
}

/* options.triggers: an array of trigger texts (daemon/trigger.h). */
static int parse_triggers(const struct ptd_json_reader *r, const cJSON *o,
			  struct ptd_request *req)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *a, *v;
	size_t n, i = 0;
	int e = ptd_json_get_array(r, o, "options", "triggers", 0,
				   PTD_PROTO_TRIGGERS_MAX, &a, &n);

	if (e < 0)
		return optional(e);
	cJSON_ArrayForEach(v, a) {
		ptd_json_path_index(path, "options", "triggers", i);
		if (!cJSON_IsString(v) || !v->valuestring[0] ||
		    strlen(v->valuestring) > PTD_TRIGGER_TEXT_MAX)
			return ptd_json_bad(r, path, "expected a trigger, "
					    "\"ACTION:FILE:SYMBOL\" or "
					    "\"ACTION:FILE:0xOFFSET\"");
		e = add_trigger(r, path, v->valuestring, req);
		if (e < 0)
			return e;
		i++;
	}
	return 0;
}

/* trigger: {"session":N} with "add":TEXT or "remove":ID. */
static int parse_trigger(const struct ptd_json_reader *r, const cJSON *o,
			 struct ptd_request *req)
{
	const char *text = NULL;
	int e = parse_session(r, o, true, req), e2;

	if (e < 0)
		return e;
	e = ptd_json_get_strn(r, o, "", "add", PTD_JSON_NONEMPTY,
			      PTD_TRIGGER_TEXT_MAX, &text);
	if (e < 0 && e != -ENOENT)
		return e;
	e2 = ptd_json_get_u64(r, o, "", "remove", INT, 1, UINT32_MAX,
			      &req->trigger_id);
	if (e2 < 0 && e2 != -ENOENT)
		return e2;
	if ((e == 0) == (e2 == 0))
		return ptd_json_bad(r, "add", e == 0 ? "give \"add\" or "
				    "\"remove\", not both"
				    : "missing (or \"remove\")");
	if (e2 == 0) {
		req->trigger_remove = true;
		return 0;
	}
	return add_trigger(r, "add", text, req);
}

static int parse_options(const struct ptd_json_reader *r, const cJSON *o,
			 struct ptd_request *req)
{
	static const char *const keys[] = { "source", "tsc", "max_insns",
					    "step", "capture", "mode",
					    "snapshot_size", "record",
					    "per_cpu", "filter", "triggers",
					    "symbols", "children", "counters",
					    "jobs", NULL };
	const char *s;
	int e;

	if ((e = ptd_json_check_keys(r, o, "options", keys)) < 0)
		return e;
	e = ptd_json_get_strn(r, o, "options", "source", 0, 64, &s);
	if (e == 0) {
		e = ptd_source_parse(s);
		if (e < 0)
			return ptd_json_badf(r, -PTD_EFORMAT, "options.source",
					     "unknown source \"%s\" (auto, "
					     "intel_pt, software)", s);
		req->source = (enum ptd_source_kind)e;
	} else if (e != -ENOENT) {
		return e;
	}
	if ((e = optional(ptd_json_get_bool(r, o, "options", "tsc", 0,
					    &req->tsc))) < 0 ||
	    (e = optional(ptd_json_get_u64(r, o, "options", "max_insns", INT,
					   0, INT_MAX_JSON,
					   &req->max_insns))) < 0)
		return e;
	e = ptd_json_get_strn(r, o, "options", "step", 0, 64, &s);
	if (e == 0) {
		if (strcmp(s, "single") && strcmp(s, "branch"))
			return ptd_json_badf(r, -PTD_EFORMAT, "options.step",
					     "expected \"branch\" or \"single\", "
					     "got \"%s\"", s);
		req->single_step = strcmp(s, "single") == 0;
	} else if (e != -ENOENT) {
		return e;
	}
	e = ptd_json_get_strn(r, o, "options", "capture", 0,
			      sizeof(req->capture) - 1, &s);
	if (e == 0) {
		if (s[0] != '/')
			return ptd_json_badf(r, -PTD_EFORMAT,
					     "options.capture",
					     "must be an absolute path, got "
					     "\"%s\"", s);
		snprintf(req->capture, sizeof(req->capture), "%s", s);
	} else if (e != -ENOENT) {
		return e;
	}
	if ((e = optional(ptd_json_get_bool(r, o, "options", "record", 0,
					    &req->record))) < 0 ||
	    (e = optional(ptd_json_get_bool(r, o, "options", "per_cpu", 0,
					    &req->per_cpu))) < 0 ||
	    (e = optional(ptd_json_get_bool(r, o, "options", "symbols", 0,
					    &req->symbols))) < 0 ||
	    (e = optional(ptd_json_get_bool(r, o, "options", "children", 0,
					    &req->children))) < 0 ||
	    (e = optional(ptd_json_get_bool(r, o, "options", "counters", 0,
					    &req->counters))) < 0 ||
	    (e = parse_addr_filter(r, o, req)) < 0 ||
	    (e = parse_triggers(r, o, req)) < 0 ||
	    (e = parse_mode(r, o, req)) < 0)
		return e;
	return parse_jobs(r, o, req);
}

static int parse_attach(const struct ptd_json_reader *r, const cJSON *o,
			struct ptd_request *req)
{
	const cJSON *opts;
	uint64_t pid;
	int e;

	e = ptd_json_get_u64(r, o, "", "pid", REQ | INT, 1, PTD_PROTO_PID_MAX,
			     &pid);
	if (e < 0)
		return e;
	req->pid = (pid_t)pid;
	e = parse_wait_ms(r, o, req);
	if (e < 0)
		return e;
	e = ptd_json_get_object(r, o, "", "options", 0, &opts);
	if (e < 0)
		return optional(e);
	return parse_options(r, opts, req);
}

static int parse_kinds(const struct ptd_json_reader *r, const cJSON *o,
		       struct ptd_request *req)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *a, *v;
	unsigned kinds = 0;
	size_t n, i = 0;
	int e = ptd_json_get_array(r, o, "", "kinds", 0, SIZE_MAX, &a, &n);

	if (e < 0)
		return optional(e);
	cJSON_ArrayForEach(v, a) {
		int t = -1;

		if (cJSON_IsString(v))
			t = ptd_rec_type_parse(v->valuestring);
		if (t < 0)
			return ptd_json_bad(r, ptd_json_path_index(path, "",
								   "kinds", i),
					    "expected one of \"insn\", "
					    "\"block\", \"event\", \"error\", "
					    "\"call\", \"first_exec\", "
					    "\"counters\", \"trace\", "
					    "\"trace_withdrawn\"");
		kinds |= PTD_REC_BIT(t);
		i++;
	}
	if (!kinds)
		return ptd_json_bad(r, "kinds",
				    "must name at least one kind");
	req->filter.kinds = kinds;
	return 0;
}

static int parse_format(const struct ptd_json_reader *r, const cJSON *o,
			struct ptd_request *req);

/* counters: session, top (default PTD_PROTO_COUNTERS_TOP_DEFAULT, into
 * filter.counters_top). */
static int parse_counters_cmd(const struct ptd_json_reader *r,
			      const cJSON *o, struct ptd_request *req)
{
	uint64_t v;
	int e = parse_session(r, o, true, req);

	if (e < 0)
		return e;
	e = ptd_json_get_u64(r, o, "", "top", INT, 1,
			     PTD_PROTO_COUNTERS_TOP_MAX, &v);
	if (e == 0)
		req->filter.counters_top = (uint32_t)v;
	return optional(e);
}

/* subscribe's "counters": {"every_ms": N, "top": K}, both optional;
 * given, the kinds include counters.  every_ms 0 or absent: the session's
 * last snapshot only. */
static int parse_counters(const struct ptd_json_reader *r, const cJSON *o,
			  struct ptd_request *req)
{
	static const char *const keys[] = { "every_ms", "top", NULL };
	const cJSON *c;
	uint64_t v;
	int e = ptd_json_get_object(r, o, "", "counters", 0, &c);

	if (e < 0)
		return optional(e);
	if ((e = ptd_json_check_keys(r, c, "counters", keys)) < 0)
		return e;
	req->filter.kinds |= PTD_REC_BIT(PTD_REC_COUNTERS);
	e = ptd_json_get_u64(r, c, "counters", "every_ms", INT, 0,
			     PTD_PROTO_COUNTERS_EVERY_MAX, &v);
	if (e == 0) {
		if (v && v < PTD_PROTO_COUNTERS_EVERY_MIN)
			return ptd_json_badf(r, -PTD_EFORMAT,
					     "counters.every_ms",
					     "%" PRIu64 " is below the least "
					     "period, %u ms (0: the last "
					     "snapshot only)",
					     v, PTD_PROTO_COUNTERS_EVERY_MIN);
		req->filter.counters_every_ms = (uint32_t)v;
	} else if (e != -ENOENT) {
		return e;
	}
	e = ptd_json_get_u64(r, c, "counters", "top", INT, 1,
			     PTD_PROTO_COUNTERS_TOP_MAX, &v);
	if (e == 0)
		req->filter.counters_top = (uint32_t)v;
	return optional(e);
}

/* "fields": names of record fields (record.h, enum ptd_field), each at
 * most once; absent: every field but sym ("symbols": true adds it). */
static int parse_fields(const struct ptd_json_reader *r, const cJSON *o,
			struct ptd_request *req)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *a, *v;
	uint32_t fields = 0;
	size_t n, i = 0;
	int e = ptd_json_get_array(r, o, "", "fields", 0, PTD_FIELD_N, &a,
				   &n);

	if (e < 0)
		return optional(e);
	cJSON_ArrayForEach(v, a) {
		int f;

		ptd_json_path_index(path, "", "fields", i++);
		if (!cJSON_IsString(v))
			return ptd_json_bad(r, path, "expected a field name");
		f = ptd_field_parse(v->valuestring);
		if (f < 0)
			return ptd_json_badf(r, -PTD_EFORMAT, path,
					     "unknown field \"%.64s\" "
					     "(fields: %s)",
					     v->valuestring,
					     ptd_field_list());
		if (fields & PTD_FIELD_BIT(f))
			return ptd_json_badf(r, -PTD_EFORMAT, path,
					     "\"%s\" given twice",
					     ptd_field_name((enum ptd_field)f));
		fields |= PTD_FIELD_BIT(f);
	}
	if (!fields)
		return ptd_json_bad(r, "fields",
				    "must name at least one field (leave it "
				    "out for every field)");
	req->filter.fields = fields | PTD_FIELD_BIT(PTD_FIELD_TYPE);
	return 0;
}

static int parse_tids(const struct ptd_json_reader *r, const cJSON *o,
		      struct ptd_filter_spec *f)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *a, *v;
	uint64_t tid;
	size_t n;
	int e = ptd_json_get_array(r, o, "filter", "tid", 0,
				   PTD_FILTER_MAX_TIDS, &a, &n);

	if (e == -PTD_ELIMIT)	/* a bad request, not a limit reached */
		return ptd_json_badf(r, -PTD_EFORMAT, "filter.tid",
				     "has more than %d entries",
				     PTD_FILTER_MAX_TIDS);
	if (e < 0)
		return optional(e);
	cJSON_ArrayForEach(v, a) {
		e = ptd_json_read_u64(r, v,
				      ptd_json_path_index(path, "filter", "tid",
							  f->ntids),
				      REQ | INT, 1, PTD_PROTO_PID_MAX, &tid);
		if (e < 0)
			return e;
		f->tids[f->ntids++] = (pid_t)tid;
	}
	return 0;
}

static int parse_ranges(const struct ptd_json_reader *r, const cJSON *o,
			struct ptd_filter_spec *f)
{
	char path[PTD_JSON_PATH_MAX], end[PTD_JSON_PATH_MAX + 8];
	const cJSON *a, *v;
	size_t n;
	int e = ptd_json_get_array(r, o, "filter", "ranges", 0,
				   PTD_FILTER_MAX_RANGES, &a, &n);

	if (e == -PTD_ELIMIT)
		return ptd_json_badf(r, -PTD_EFORMAT, "filter.ranges",
				     "has more than %d entries",
				     PTD_FILTER_MAX_RANGES);
	if (e < 0)
		return optional(e);
	cJSON_ArrayForEach(v, a) {
		struct ptd_addr_range *rg = &f->ranges[f->nranges];

		ptd_json_path_index(path, "filter", "ranges", f->nranges);
		if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
			return ptd_json_bad(r, path,
					    "must be [\"0xSTART\", \"0xEND\"]");
		(void)snprintf(end, sizeof(end), "%s[0]", path);
		e = ptd_json_read_u64(r, cJSON_GetArrayItem(v, 0), end,
				      REQ | PTD_JSON_HEX, 0, UINT64_MAX,
				      &rg->start);
		if (e < 0)
			return e;
		(void)snprintf(end, sizeof(end), "%s[1]", path);
		e = ptd_json_read_u64(r, cJSON_GetArrayItem(v, 1), end,
				      REQ | PTD_JSON_HEX, 0, UINT64_MAX,
				      &rg->end);
		if (e < 0)
			return e;
		if (rg->start >= rg->end)
			return ptd_json_bad(r, path,
					    "the start must be below the end "
					    "(the end is exclusive)");
		f->nranges++;
	}
	return 0;
}

static int parse_iclass(const struct ptd_json_reader *r, const cJSON *o,
			struct ptd_filter_spec *f)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *a, *v;
	size_t n, i = 0;
	int e = ptd_json_get_array(r, o, "filter", "iclass", 0, SIZE_MAX, &a,
				   &n);

	if (e < 0)
		return optional(e);
	cJSON_ArrayForEach(v, a) {
		int c = cJSON_IsString(v) ? ptd_iclass_parse(v->valuestring)
					  : -1;

		if (c < 0)
			return ptd_json_bad(r, ptd_json_path_index(path,
								   "filter",
								   "iclass", i),
					    "expected an instruction class "
					    "(call, return, jump, cond_jump, "
					    "far_call, far_return, far_jump, "
					    "ptwrite, other, error)");
		f->iclasses |= 1u << c;
		i++;
	}
	return 0;
}

static int parse_filter(const struct ptd_json_reader *r, const cJSON *o,
			struct ptd_request *req)
{
	static const char *const keys[] = { "tid", "ranges", "iclass",
					    "module", NULL };
	struct ptd_filter_spec *f = &req->filter;
	const cJSON *fo;
	const char *s;
	int e = ptd_json_get_object(r, o, "", "filter", 0, &fo);

	if (e < 0)
		return optional(e);
	if ((e = ptd_json_check_keys(r, fo, "filter", keys)) < 0 ||
	    (e = parse_tids(r, fo, f)) < 0 ||
	    (e = parse_ranges(r, fo, f)) < 0 ||
	    (e = parse_iclass(r, fo, f)) < 0)
		return e;
	e = ptd_json_get_strn(r, fo, "filter", "module", PTD_JSON_NONEMPTY,
			      PTD_FILTER_MAX_MODULE - 1, &s);
	if (e == 0)
		(void)ptd_strlcpy(f->module, s, sizeof(f->module));
	return optional(e);
}

/* watch: what to match (exe, comm or cgroup), whose (uid), and attach's
 * wait_ms and options for the sessions it starts. */
static int parse_watch(const struct ptd_json_reader *r, const cJSON *o,
		       struct ptd_request *req)
{
	const cJSON *opts;
	const char *exe = NULL, *comm = NULL, *cg = NULL;
	uint64_t uid;
	int e;

	e = ptd_json_get_strn(r, o, "", "exe", PTD_JSON_NONEMPTY,
			      PTD_PROTO_PATH_MAX, &exe);
	if (e < 0 && e != -ENOENT)
		return e;
	e = ptd_json_get_strn(r, o, "", "comm", PTD_JSON_NONEMPTY,
			      sizeof(req->watch_comm) - 1, &comm);
	if (e < 0 && e != -ENOENT)
		return e;
	e = ptd_json_get_strn(r, o, "", "cgroup", PTD_JSON_NONEMPTY,
			      PTD_PROTO_PATH_MAX, &cg);
	if (e < 0 && e != -ENOENT)
		return e;
	if (!exe && !comm && !cg)
		return ptd_json_bad(r, "exe", "missing (or \"comm\" or "
				    "\"cgroup\")");
	if (!!exe + !!comm + !!cg > 1)
		return ptd_json_bad(r, exe ? "exe" : "comm", "give one of "
				    "\"exe\", \"comm\" and \"cgroup\", "
				    "not more");
	if (exe && exe[0] != '/')
		return ptd_json_badf(r, -PTD_EFORMAT, "exe", "must be an "
				     "absolute path, got \"%s\"", exe);
	if (cg && cg[0] != '/')
		return ptd_json_badf(r, -PTD_EFORMAT, "cgroup", "must be an "
				     "absolute path (the cgroup's directory), "
				     "got \"%s\"", cg);
	if (comm && strchr(comm, '/'))
		return ptd_json_bad(r, "comm", "a command name has no '/' "
				    "(use \"exe\" for a path)");
	(void)ptd_strlcpy(req->watch_exe, exe ? exe : "",
			  sizeof(req->watch_exe));
	(void)ptd_strlcpy(req->watch_comm, comm ? comm : "",
			  sizeof(req->watch_comm));
	(void)ptd_strlcpy(req->watch_cgroup, cg ? cg : "",
			  sizeof(req->watch_cgroup));
	e = ptd_json_get_u64(r, o, "", "uid", INT, 0, UINT32_MAX - 1, &uid);
	if (e == 0) {
		req->has_watch_uid = true;
		req->watch_uid = (uid_t)uid;
	} else if (e != -ENOENT) {
		return e;
	}
	e = parse_wait_ms(r, o, req);
	if (e < 0)
		return e;
	e = ptd_json_get_object(r, o, "", "options", 0, &opts);
	if (e < 0)
		return optional(e);
	/* (options.triggers: each session's, resolved at its exec) */
	return parse_options(r, opts, req);
}

static int parse_subscribe(const struct ptd_json_reader *r, const cJSON *o,
			   struct ptd_request *req)
{
	int e;

	/* a session, or a watch rule: every session it starts */
	e = ptd_json_get_u64(r, o, "", "rule", INT, 1, INT_MAX_JSON,
			     &req->rule);
	if (e == 0)
		req->has_rule = true;
	else if (e != -ENOENT)
		return e;
	if ((e = parse_session(r, o, !req->has_rule, req)) < 0)
		return e;
	if (req->has_rule && req->has_session)
		return ptd_json_bad(r, "rule", "give \"session\" or "
				    "\"rule\", not both");
	e = optional(ptd_json_get_bool(r, o, "", "running", 0,
				       &req->rule_running));
	if (e < 0)
		return e;
	if (req->rule_running && !req->has_rule)
		return ptd_json_bad(r, "running", "only with \"rule\"");
	if ((e = parse_kinds(r, o, req)) < 0 ||
	    (e = parse_fields(r, o, req)) < 0 ||
	    (e = optional(ptd_json_get_bool(r, o, "", "symbols", 0,
					    &req->filter.symbols))) < 0 ||
	    (e = parse_format(r, o, req)) < 0 ||
	    (e = parse_counters(r, o, req)) < 0)
		return e;
	return parse_filter(r, o, req);
}

/* subscribe's "format": "json" (the default), "binary" or "packed" (a
 * session's stream only: a rule's stream merges sessions in JSON lines). */
static int parse_format(const struct ptd_json_reader *r, const cJSON *o,
			struct ptd_request *req)
{
	const char *s;
	int e = ptd_json_get_strn(r, o, "", "format", 0, 16, &s);

	if (e == -ENOENT)
		return 0;
	if (e < 0)
		return e;
	if (!strcmp(s, "binary") || !strcmp(s, "packed")) {
		req->filter.binary = true;
		req->filter.packed = !strcmp(s, "packed");
	} else if (strcmp(s, "json")) {
		return ptd_json_badf(r, -PTD_EFORMAT, "format",
				     "unknown format \"%s\" (json, binary, "
				     "packed)",
				     s);
	}
	if (req->filter.binary && req->has_rule)
		return ptd_json_badf(r, -PTD_EFORMAT, "format",
				     "\"%s\" is for a session's stream, not "
				     "a rule's",
				     s);
	return 0;
}

/* The keys each command takes besides id and cmd. */
static const char *const *cmd_keys(enum ptd_cmd c)
{
	static const char *const none[] = { "id", "cmd", NULL };
	static const char *const attach[] = { "id", "cmd", "pid", "options",
					      "wait_ms", NULL };
	static const char *const session[] = { "id", "cmd", "session", NULL };
	static const char *const subscribe[] = { "id", "cmd", "session",
						 "rule", "running", "kinds",
						 "filter", "fields", "symbols",
						 "format", "counters", NULL };
	static const char *const replay[] = { "id", "cmd", "path", "lossless",
					      "lossy", "tid", "wait_ms",
					      "symbols", "counters", "jobs",
					      NULL };
	static const char *const record[] = { "id", "cmd", "session", "wait",
					      NULL };
	static const char *const watch[] = { "id", "cmd", "exe", "comm",
					     "cgroup", "uid", "wait_ms",
					     "options", NULL };
	static const char *const unwatch[] = { "id", "cmd", "rule", NULL };
	static const char *const trigger[] = { "id", "cmd", "session", "add",
					       "remove", NULL };
	static const char *const counters[] = { "id", "cmd", "session", "top",
						NULL };

	switch (c) {
	case PTD_CMD_ATTACH:
		return attach;
	case PTD_CMD_DETACH:
	case PTD_CMD_STATUS:
	case PTD_CMD_SNAPSHOT:
		return session;
	case PTD_CMD_SUBSCRIBE:
		return subscribe;
	case PTD_CMD_REPLAY:
		return replay;
	case PTD_CMD_RECORD:
		return record;
	case PTD_CMD_WATCH:
		return watch;
	case PTD_CMD_UNWATCH:
		return unwatch;
	case PTD_CMD_TRIGGER:
		return trigger;
	case PTD_CMD_COUNTERS:
		return counters;
	case PTD_CMD_PING:
	case PTD_CMD_VERSION:
	case PTD_CMD_LIST:
	case PTD_CMD_COUNT:
		break;
	}
	return none;
}

static int parse_id(const struct ptd_json_reader *r, const cJSON *o,
		    struct ptd_request *req)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "id");

	if (!v)
		return ptd_json_bad(r, "id", "missing");
	if (cJSON_IsArray(v) || cJSON_IsObject(v))
		return ptd_json_badf(r, -PTD_EFORMAT, "id",
				     "expected a string, number, boolean or "
				     "null, not %s", ptd_json_type_name(v));
	if (cJSON_IsString(v) && strlen(v->valuestring) > PTD_PROTO_MAX_ID)
		return ptd_json_badf(r, -PTD_EFORMAT, "id",
				     "longer than %d bytes", PTD_PROTO_MAX_ID);
	req->id = cJSON_Duplicate(v, false);
	return req->id ? 0 : -ENOMEM;
}

static int parse_cmd(const struct ptd_json_reader *r, const cJSON *o,
		     struct ptd_request *req)
{
	const char *s;
	int c = ptd_json_get_str(r, o, "", "cmd", REQ, &s);

	if (c < 0)
		return c;
	for (c = 0; c < PTD_CMD_COUNT; c++)
		if (!strcmp(s, ptd_cmd_name((enum ptd_cmd)c)))
			break;
	if (c == PTD_CMD_COUNT)
		return ptd_diagf(r->diag, -PTD_EUNSUPPORTED,
				 "unknown cmd \"%.64s\" (ping, version, "
				 "attach, detach, list, status, subscribe, "
				 "snapshot, replay, record, watch, unwatch, "
				 "trigger)",
				 s);
	req->cmd = (enum ptd_cmd)c;
	return 0;
}

static int parse_object(const struct ptd_json *doc, struct ptd_request *req,
			struct ptd_diag *diag)
{
	const cJSON *o = ptd_json_root(doc);
	struct ptd_json_reader r = { doc, "", diag };
	int e;

	if (!cJSON_IsObject(o))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "a request must be a JSON object, got %s",
				 ptd_json_type_name(o));
	/* The id first, so that every later error can echo it. */
	if ((e = parse_id(&r, o, req)) < 0 || (e = parse_cmd(&r, o, req)) < 0)
		return e;
	r.origin = ptd_cmd_name(req->cmd);
	e = ptd_json_check_keys(&r, o, "", cmd_keys(req->cmd));
	if (e < 0)
		return e;
	switch (req->cmd) {
	case PTD_CMD_ATTACH:
		return parse_attach(&r, o, req);
	case PTD_CMD_DETACH:
	case PTD_CMD_SNAPSHOT:
		return parse_session(&r, o, true, req);
	case PTD_CMD_STATUS:
		return parse_session(&r, o, false, req);
	case PTD_CMD_SUBSCRIBE:
		return parse_subscribe(&r, o, req);
	case PTD_CMD_REPLAY:
		return parse_replay(&r, o, req);
	case PTD_CMD_RECORD:
		return parse_record(&r, o, req);
	case PTD_CMD_WATCH:
		return parse_watch(&r, o, req);
	case PTD_CMD_UNWATCH:
		return optional(ptd_json_get_u64(&r, o, "", "rule", REQ | INT, 1,
						 INT_MAX_JSON, &req->rule));
	case PTD_CMD_TRIGGER:
		return parse_trigger(&r, o, req);
	case PTD_CMD_COUNTERS:
		return parse_counters_cmd(&r, o, req);
	case PTD_CMD_PING:
	case PTD_CMD_VERSION:
	case PTD_CMD_LIST:
	case PTD_CMD_COUNT:
		break;
	}
	return 0;
}

void ptd_request_init(struct ptd_request *req, enum ptd_cmd cmd)
{
	memset(req, 0, sizeof(*req));
	req->cmd = cmd;
	req->source = PTD_SOURCE_AUTO;
	req->mode = PTD_MODE_FULL;
	req->filter.kinds = PTD_FILTER_DEFAULT_KINDS;
	req->filter.counters_top = PTD_PROTO_COUNTERS_TOP_DEFAULT;
	req->record_wait = true;
	req->lossless = true;	/* replay: no live producer to protect */
}

int ptd_request_parse(const char *line, size_t len, struct ptd_request *req,
		      struct ptd_diag *diag)
{
	struct ptd_json *doc = NULL;
	int r;

	ptd_request_init(req, PTD_CMD_PING);
	if (memchr(line, 0, len))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "the request contains a NUL byte");
	r = ptd_json_parse_all(line, len, "the request", &doc, diag);
	if (r < 0)
		return r;
	r = parse_object(doc, req, diag);
	ptd_json_free(doc);
	return r;
}

void ptd_request_fini(struct ptd_request *req)
{
	if (!req)
		return;
	cJSON_Delete(req->id);
	req->id = NULL;
	free(req->addr_filter);
	req->addr_filter = NULL;
	for (unsigned i = 0; i < req->ntriggers; i++)
		free(req->triggers[i]);
	req->ntriggers = 0;
}

/* Print @o as one line with '\n'; takes @o. */
static char *print_line(cJSON *o, size_t *ret_len)
{
	char *s = o ? cJSON_PrintUnformatted(o) : NULL;
	char *line;
	size_t n;

	cJSON_Delete(o);
	if (!s)
		return NULL;
	n = strlen(s);
	line = realloc(s, n + 2);
	if (!line) {
		free(s);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = 0;
	*ret_len = n + 1;
	return line;
}

static cJSON *response_head(const cJSON *id, bool ok)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *idc = id ? cJSON_Duplicate(id, false) : cJSON_CreateNull();

	if (!o || !idc || !cJSON_AddStringToObject(o, "type", "response")) {
		cJSON_Delete(o);
		cJSON_Delete(idc);
		return NULL;
	}
	cJSON_AddItemToObject(o, "id", idc);
	if (!cJSON_AddBoolToObject(o, "ok", ok)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

char *ptd_response_ok(const cJSON *id, cJSON *result, size_t *ret_len)
{
	cJSON *o = response_head(id, true);

	if (!result)
		result = cJSON_CreateObject();
	if (!o || !result) {
		cJSON_Delete(o);
		cJSON_Delete(result);
		return NULL;
	}
	cJSON_AddItemToObject(o, "result", result);
	return print_line(o, ret_len);
}

char *ptd_response_error(const cJSON *id, const char *code,
			 const char *message, size_t *ret_len)
{
	cJSON *o = response_head(id, false);
	cJSON *e = cJSON_CreateObject();

	if (!o || !e || !cJSON_AddStringToObject(e, "code", code) ||
	    !cJSON_AddStringToObject(e, "message", message ? message : "")) {
		cJSON_Delete(o);
		cJSON_Delete(e);
		return NULL;
	}
	cJSON_AddItemToObject(o, "error", e);
	return print_line(o, ret_len);
}

/* ---- the client's side: requests built, responses read ---- */

static bool add_hex(cJSON *a, uint64_t v)
{
	char buf[24];

	(void)snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	return cJSON_AddItemToArray(a, cJSON_CreateString(buf));
}

/* subscribe's "kinds", "fields" and "filter", where they differ from the
 * defaults */
/* subscribe's "counters", when counters records are asked for */
static bool build_counters(cJSON *o, const struct ptd_filter_spec *f)
{
	cJSON *c;

	if (!(f->kinds & PTD_REC_BIT(PTD_REC_COUNTERS)))
		return true;
	if (!(c = cJSON_AddObjectToObject(o, "counters")))
		return false;
	return (!f->counters_every_ms ||
		cJSON_AddNumberToObject(c, "every_ms",
					(double)f->counters_every_ms)) &&
	       cJSON_AddNumberToObject(c, "top", (double)f->counters_top);
}

static bool build_filter(cJSON *o, const struct ptd_filter_spec *f)
{
	cJSON *fo, *a, *pair;


	if (f->kinds != PTD_FILTER_DEFAULT_KINDS) {
		if (!(a = cJSON_AddArrayToObject(o, "kinds")))
			return false;
		for (unsigned t = 0; t < PTD_REC_NTYPES; t++)
			if ((f->kinds & PTD_REC_BIT(t)) &&
			    !cJSON_AddItemToArray(a, cJSON_CreateString(
				    ptd_rec_type_name((enum ptd_rec_type)t))))
				return false;
	}
	/* (every field, sym too, differs from the default: every one but
	 * sym) */
	if (f->fields) {
		if (!(a = cJSON_AddArrayToObject(o, "fields")))
			return false;
		for (unsigned i = 0; i < PTD_FIELD_N; i++)
			if ((f->fields & PTD_FIELD_BIT(i)) &&
			    !cJSON_AddItemToArray(a, cJSON_CreateString(
				    ptd_field_name((enum ptd_field)i))))
				return false;
	}
	if (!f->ntids && !f->nranges && !f->iclasses && !f->module[0])
		return true;
	if (!(fo = cJSON_AddObjectToObject(o, "filter")))
		return false;
	if (f->ntids) {
		if (!(a = cJSON_AddArrayToObject(fo, "tid")))
			return false;
		for (unsigned i = 0; i < f->ntids; i++)
			if (!cJSON_AddItemToArray(
				    a, cJSON_CreateNumber((double)f->tids[i])))
				return false;
	}
	if (f->nranges) {
		if (!(a = cJSON_AddArrayToObject(fo, "ranges")))
			return false;
		for (unsigned i = 0; i < f->nranges; i++) {
			pair = cJSON_CreateArray();
			if (!cJSON_AddItemToArray(a, pair) ||
			    !add_hex(pair, f->ranges[i].start) ||
			    !add_hex(pair, f->ranges[i].end))
				return false;
		}
	}
	if (f->iclasses) {
		if (!(a = cJSON_AddArrayToObject(fo, "iclass")))
			return false;
		for (int c = ptic_error; c <= ptic_ptwrite; c++)
			if ((f->iclasses & (1u << c)) &&
			    !cJSON_AddItemToArray(
				    a, cJSON_CreateString(ptd_iclass_name(
					       (enum pt_insn_class)c))))
				return false;
	}
	return !f->module[0] ||
	       cJSON_AddStringToObject(fo, "module", f->module);
}

/* attach's "options", where they differ from the defaults */
static bool build_options(cJSON *o, const struct ptd_request *req,
			  const struct ptd_request *def)
{
	cJSON *op = cJSON_AddObjectToObject(o, "options");

	if (!op)
		return false;
	if (req->source != def->source &&
	    !cJSON_AddStringToObject(op, "source",
				     ptd_source_name(req->source)))
		return false;
	if (req->tsc && !cJSON_AddBoolToObject(op, "tsc", true))
		return false;
	if (req->max_insns &&
	    !cJSON_AddNumberToObject(op, "max_insns", (double)req->max_insns))
		return false;
	if (req->single_step && !cJSON_AddStringToObject(op, "step", "single"))
		return false;
	if (req->capture[0] &&
	    !cJSON_AddStringToObject(op, "capture", req->capture))
		return false;
	if (req->mode != def->mode &&
	    !cJSON_AddStringToObject(op, "mode",
				     ptd_session_mode_name(req->mode)))
		return false;
	if (req->snapshot_size &&
	    !cJSON_AddNumberToObject(op, "snapshot_size",
				     (double)req->snapshot_size))
		return false;
	if (req->jobs && !cJSON_AddNumberToObject(op, "jobs", req->jobs))
		return false;
	if (req->per_cpu && !cJSON_AddBoolToObject(op, "per_cpu", true))
		return false;
	if (req->addr_filter &&
	    !cJSON_AddStringToObject(op, "filter", req->addr_filter))
		return false;
	if (req->ntriggers) {
		cJSON *a = cJSON_AddArrayToObject(op, "triggers");

		for (unsigned i = 0; a && i < req->ntriggers; i++)
			cJSON_AddItemToArray(a, cJSON_CreateString(
							req->triggers[i]));
		if (!a)
			return false;
	}
	if (req->symbols && !cJSON_AddBoolToObject(op, "symbols", true))
		return false;
	if (req->children && !cJSON_AddBoolToObject(op, "children", true))
		return false;
	if (req->counters && !cJSON_AddBoolToObject(op, "counters", true))
		return false;
	return !req->record || cJSON_AddBoolToObject(op, "record", true);
}

static bool build_body(cJSON *o, const struct ptd_request *req)
{
	struct ptd_request def;

	ptd_request_init(&def, req->cmd);
	switch (req->cmd) {
	case PTD_CMD_ATTACH:
		return cJSON_AddNumberToObject(o, "pid", (double)req->pid) &&
		       (!req->has_wait_ms ||
			cJSON_AddNumberToObject(o, "wait_ms",
						(double)req->wait_ms)) &&
		       build_options(o, req, &def);
	case PTD_CMD_DETACH:
	case PTD_CMD_SNAPSHOT:
	case PTD_CMD_STATUS:
		return !req->has_session ||
		       cJSON_AddNumberToObject(o, "session",
					       (double)req->session);
	case PTD_CMD_SUBSCRIBE:
		return (req->has_rule
				? cJSON_AddNumberToObject(o, "rule",
							  (double)req->rule) &&
					  (!req->rule_running ||
					   cJSON_AddBoolToObject(o, "running",
								 true))
				: cJSON_AddNumberToObject(o, "session",
							  (double)req->session) !=
					  NULL) &&
		       build_filter(o, &req->filter) &&
		       (!req->filter.symbols ||
			cJSON_AddBoolToObject(o, "symbols", true)) &&
		       (!req->filter.binary ||
			cJSON_AddStringToObject(o, "format",
						req->filter.packed
							? "packed"
							: "binary")) &&
		       build_counters(o, &req->filter);
	case PTD_CMD_REPLAY:
		return cJSON_AddStringToObject(o, "path", req->path) &&
		       (req->lossless == def.lossless ||
			cJSON_AddBoolToObject(o, "lossy", !req->lossless)) &&
		       (!req->has_tid ||
			cJSON_AddNumberToObject(o, "tid", (double)req->tid)) &&
		       (!req->has_wait_ms ||
			cJSON_AddNumberToObject(o, "wait_ms",
						(double)req->wait_ms)) &&
		       (!req->symbols ||
			cJSON_AddBoolToObject(o, "symbols", true)) &&
		       (!req->counters ||
			cJSON_AddBoolToObject(o, "counters", true)) &&
		       (!req->jobs ||
			cJSON_AddNumberToObject(o, "jobs", req->jobs));
	case PTD_CMD_RECORD:
		return cJSON_AddNumberToObject(o, "session",
					       (double)req->session) &&
		       (req->record_wait == def.record_wait ||
			cJSON_AddBoolToObject(o, "wait", req->record_wait));
	case PTD_CMD_WATCH:
		return (req->watch_exe[0]
				? cJSON_AddStringToObject(o, "exe",
							  req->watch_exe)
			: req->watch_cgroup[0]
				? cJSON_AddStringToObject(o, "cgroup",
							  req->watch_cgroup)
				: cJSON_AddStringToObject(o, "comm",
							  req->watch_comm)) &&
		       (!req->has_watch_uid ||
			cJSON_AddNumberToObject(o, "uid",
						(double)req->watch_uid)) &&
		       (!req->has_wait_ms ||
			cJSON_AddNumberToObject(o, "wait_ms",
						(double)req->wait_ms)) &&
		       build_options(o, req, &def);
	case PTD_CMD_UNWATCH:
		return cJSON_AddNumberToObject(o, "rule", (double)req->rule);
	case PTD_CMD_TRIGGER:
		return cJSON_AddNumberToObject(o, "session",
					       (double)req->session) &&
		       (req->trigger_remove
				? cJSON_AddNumberToObject(o, "remove",
							  (double)req->trigger_id)
				: cJSON_AddStringToObject(o, "add",
							  req->ntriggers
								  ? req->triggers[0]
								  : ""));
	case PTD_CMD_COUNTERS:
		return cJSON_AddNumberToObject(o, "session",
					       (double)req->session) &&
		       cJSON_AddNumberToObject(o, "top",
					       (double)req->filter.counters_top);
	case PTD_CMD_PING:
	case PTD_CMD_VERSION:
	case PTD_CMD_LIST:
	case PTD_CMD_COUNT:
		break;
	}
	return true;
}

char *ptd_request_line(const struct ptd_request *req, size_t *ret_len)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *id = req->id ? cJSON_Duplicate(req->id, false)
			    : cJSON_CreateNull();
	const char *cmd = ptd_cmd_name(req->cmd);

	if (!o || !id || !cmd) {
		cJSON_Delete(o);
		cJSON_Delete(id);
		return NULL;
	}
	cJSON_AddItemToObject(o, "id", id);
	if (!cJSON_AddStringToObject(o, "cmd", cmd) || !build_body(o, req)) {
		cJSON_Delete(o);
		return NULL;
	}
	return print_line(o, ret_len);
}

int ptd_response_parse(const char *line, size_t len,
		       struct ptd_response *ret, struct ptd_diag *diag)
{
	struct ptd_json_reader r = { NULL, "the response", diag };
	const cJSON *root, *err;
	const char *type;
	int e;

	memset(ret, 0, sizeof(*ret));
	e = ptd_json_parse_all(line, len, "the response", &ret->doc, diag);
	if (e < 0)
		return e;
	r.doc = ret->doc;
	root = ptd_json_root(ret->doc);
	if (!cJSON_IsObject(root))
		return ptd_json_bad(&r, "", "not a JSON object");
	if ((e = ptd_json_get_str(&r, root, "", "type", PTD_JSON_REQUIRED,
				  &type)) < 0)
		return e;
	if (strcmp(type, "response"))
		return ptd_json_badf(&r, -PTD_EFORMAT, "type",
				     "expected \"response\", got \"%.40s\"",
				     type);
	ret->id = cJSON_GetObjectItemCaseSensitive(root, "id");
	if (!ret->id)
		return ptd_json_bad(&r, "id", "missing");
	if ((e = ptd_json_get_bool(&r, root, "", "ok", PTD_JSON_REQUIRED,
				   &ret->ok)) < 0)
		return e;
	if (ret->ok)
		return ptd_json_get_object(&r, root, "", "result",
					   PTD_JSON_REQUIRED, &ret->result);
	if ((e = ptd_json_get_object(&r, root, "", "error", PTD_JSON_REQUIRED,
				     &err)) < 0 ||
	    (e = ptd_json_get_str(&r, err, "error", "code",
				  PTD_JSON_REQUIRED | PTD_JSON_NONEMPTY,
				  &ret->code)) < 0)
		return e;
	return ptd_json_get_str(&r, err, "error", "message", PTD_JSON_REQUIRED,
				&ret->message);
}

void ptd_response_fini(struct ptd_response *resp)
{
	if (!resp)
		return;
	ptd_json_free(resp->doc);
	memset(resp, 0, sizeof(*resp));
}
