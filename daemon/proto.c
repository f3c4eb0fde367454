/* SPDX-License-Identifier: MIT */
/*
 * The control protocol: strict request parsing and response rendering.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"
#include "daemon/proto.h"
#include "perf/addrfilter.h"

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

static const char *json_type_name(const cJSON *v)
{
	if (cJSON_IsString(v))
		return "a string";
	if (cJSON_IsNumber(v))
		return "a number";
	if (cJSON_IsBool(v))
		return "a boolean";
	if (cJSON_IsNull(v))
		return "null";
	if (cJSON_IsArray(v))
		return "an array";
	if (cJSON_IsObject(v))
		return "an object";
	return "invalid";
}

/* Refuse keys of object @o (named @where) not in @allowed (NULL-terminated)
 * and keys given twice. */
static int check_keys(const cJSON *o, const char *where,
		      const char *const *allowed, struct ptd_diag *diag)
{
	const cJSON *k, *k2;
	size_t i;

	cJSON_ArrayForEach(k, o) {
		bool ok = false;

		for (i = 0; allowed[i]; i++)
			if (!strcmp(k->string, allowed[i]))
				ok = true;
		if (!ok)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s: unknown key \"%.64s\"", where,
					 k->string);
		for (k2 = k->next; k2; k2 = k2->next)
			if (!strcmp(k->string, k2->string))
				return ptd_diagf(diag, -PTD_EFORMAT,
						 "%s: key \"%.64s\" given twice",
						 where, k->string);
	}
	return 0;
}

/* An integer JSON number in [min, max]. */
static int get_int(const cJSON *v, const char *field, double min, double max,
		   uint64_t *ret, struct ptd_diag *diag)
{
	double d;

	if (!cJSON_IsNumber(v))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"%s\" must be a number, got %s", field,
				 json_type_name(v));
	d = v->valuedouble;
	if (!isfinite(d) || d != floor(d))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"%s\" must be an integer, got %g", field, d);
	if (d < min || d > max)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"%s\" is out of range (%.0f..%.0f): %.0f",
				 field, min, max, d);
	*ret = (uint64_t)d;
	return 0;
}

static int get_string(const cJSON *v, const char *field, size_t max,
		      const char **ret, struct ptd_diag *diag)
{
	if (!cJSON_IsString(v) || !v->valuestring)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"%s\" must be a string, got %s", field,
				 json_type_name(v));
	if (strlen(v->valuestring) > max)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"%s\" is longer than %zu bytes", field, max);
	*ret = v->valuestring;
	return 0;
}

static int parse_session(const cJSON *o, bool required, struct ptd_request *req,
			 struct ptd_diag *diag);

static int get_bool(const cJSON *v, const char *field, bool *ret,
		    struct ptd_diag *diag)
{
	if (!cJSON_IsBool(v))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"%s\" must be a boolean, got %s", field,
				 json_type_name(v));
	*ret = cJSON_IsTrue(v);
	return 0;
}

/* replay: path (absolute), lossless or lossy (lossless unless asked),
 * tid, wait_ms. */
static int parse_replay(const cJSON *o, struct ptd_request *req,
			struct ptd_diag *diag)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "path"), *lossy_v;
	const char *s;
	uint64_t n;
	int r;

	if (!v)
		return ptd_diagf(diag, -PTD_EFORMAT, "missing \"path\"");
	r = get_string(v, "path", PTD_PROTO_PATH_MAX, &s, diag);
	if (r < 0)
		return r;
	if (s[0] != '/')
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"path\" must be an absolute path, got "
				 "\"%.200s\"", s);
	(void)ptd_strlcpy(req->path, s, sizeof(req->path));
	/* A replay has no live producer to protect: lossless by default. */
	req->lossless = true;
	v = cJSON_GetObjectItemCaseSensitive(o, "lossless");
	if (v && (r = get_bool(v, "lossless", &req->lossless, diag)) < 0)
		return r;
	lossy_v = cJSON_GetObjectItemCaseSensitive(o, "lossy");
	if (lossy_v) {
		bool lossy = false;

		r = get_bool(lossy_v, "lossy", &lossy, diag);
		if (r < 0)
			return r;
		if (v && req->lossless == lossy)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "\"lossy\" and \"lossless\" "
					 "contradict each other");
		req->lossless = !lossy;
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "tid");
	if (v) {
		r = get_int(v, "tid", 1, PTD_PROTO_PID_MAX, &n, diag);
		if (r < 0)
			return r;
		req->has_tid = true;
		req->tid = (pid_t)n;
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "wait_ms");
	if (v) {
		r = get_int(v, "wait_ms", 0, PTD_PROTO_WAIT_MS_MAX,
			    &req->wait_ms, diag);
		if (r < 0)
			return r;
		req->has_wait_ms = true;
	}
	return 0;
}

/* record: session, wait. */
static int parse_record(const cJSON *o, struct ptd_request *req,
			struct ptd_diag *diag)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "wait");
	int r;

	req->record_wait = true;
	if (v && (r = get_bool(v, "wait", &req->record_wait, diag)) < 0)
		return r;
	return parse_session(o, true, req, diag);
}

static int parse_session(const cJSON *o, bool required, struct ptd_request *req,
			 struct ptd_diag *diag)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "session");
	int r;

	if (!v) {
		if (required)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "missing \"session\"");
		return 0;
	}
	r = get_int(v, "session", 1, PTD_PROTO_INT_MAX, &req->session, diag);
	if (r == 0)
		req->has_session = true;
	return r;
}

/* options.mode and options.snapshot_size. */
static int parse_mode(const cJSON *o, struct ptd_request *req,
		      struct ptd_diag *diag)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "mode");
	const char *s;
	uint64_t n;
	int r;

	if (v) {
		r = get_string(v, "options.mode", 64, &s, diag);
		if (r < 0)
			return r;
		r = ptd_session_mode_parse(s);
		if (r < 0)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "\"options.mode\": unknown mode "
					 "\"%s\" (full, snapshot)", s);
		req->mode = (enum ptd_session_mode)r;
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "snapshot_size");
	if (!v)
		return 0;
	if (req->mode != PTD_MODE_SNAPSHOT)
		return ptd_diagf(diag, -PTD_EFORMAT, "\"options.snapshot_size"
				 "\" needs \"mode\": \"snapshot\"");
	r = get_int(v, "options.snapshot_size", 4096,
		    PTD_SESSION_SNAPSHOT_MAX, &n, diag);
	if (r < 0)
		return r;
	if (n & (n - 1))
		return ptd_diagf(diag, -PTD_EFORMAT, "\"options.snapshot_size"
				 "\" must be a power of two, got %" PRIu64,
				 n);
	req->snapshot_size = n;
	return 0;
}

/* options.filter: checked with the grammar (at most PTD_ADDRFILTER_MAX
 * ranges; the session checks the PMU's own limit), kept as text. */
static int parse_addr_filter(const cJSON *v, struct ptd_request *req,
			     struct ptd_diag *diag)
{
	struct ptd_addrfilter f;
	struct ptd_diag pd = { "" };
	const char *s = NULL;
	int r;

	r = get_string(v, "options.filter", PTD_ADDRFILTER_TEXT_MAX, &s, diag);
	if (r < 0)
		return r;
	r = ptd_addrfilter_parse(s, PTD_ADDRFILTER_MAX, &f, &pd);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return ptd_diagf(diag, -PTD_EFORMAT, "\"options.filter\": %s",
				 pd.msg);
	ptd_addrfilter_free(&f);
	req->addr_filter = strdup(s);
	return req->addr_filter ? 0 : -ENOMEM;
}

static int parse_options(const cJSON *o, struct ptd_request *req,
			 struct ptd_diag *diag)
{
	static const char *const keys[] = { "source", "tsc", "max_insns",
					    "capture", "mode",
					    "snapshot_size", "record",
					    "per_cpu", "filter", NULL };
	const cJSON *v;
	const char *s;
	int r;

	if (!cJSON_IsObject(o))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"options\" must be an object, got %s",
				 json_type_name(o));
	r = check_keys(o, "options", keys, diag);
	if (r < 0)
		return r;
	v = cJSON_GetObjectItemCaseSensitive(o, "source");
	if (v) {
		r = get_string(v, "options.source", 64, &s, diag);
		if (r < 0)
			return r;
		r = ptd_source_parse(s);
		if (r < 0)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "\"options.source\": unknown source "
					 "\"%s\" (auto, intel_pt, software)",
					 s);
		req->source = (enum ptd_source_kind)r;
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "tsc");
	if (v) {
		if (!cJSON_IsBool(v))
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "\"options.tsc\" must be a boolean, "
					 "got %s",
					 json_type_name(v));
		req->tsc = cJSON_IsTrue(v);
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "max_insns");
	if (v) {
		r = get_int(v, "options.max_insns", 0, PTD_PROTO_INT_MAX,
			    &req->max_insns, diag);
		if (r < 0)
			return r;
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "capture");
	if (v) {
		r = get_string(v, "options.capture", sizeof(req->capture) - 1,
			       &s, diag);
		if (r < 0)
			return r;
		if (s[0] != '/')
			return ptd_diagf(diag, -PTD_EFORMAT, "\"options.capture"
					 "\" must be an absolute path, got "
					 "\"%s\"", s);
		snprintf(req->capture, sizeof(req->capture), "%s", s);
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "record");
	if (v) {
		r = get_bool(v, "options.record", &req->record, diag);
		if (r < 0)
			return r;
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "per_cpu");
	if (v && (r = get_bool(v, "options.per_cpu", &req->per_cpu, diag)) < 0)
		return r;
	v = cJSON_GetObjectItemCaseSensitive(o, "filter");
	if (v && (r = parse_addr_filter(v, req, diag)) < 0)
		return r;
	return parse_mode(o, req, diag);
}

static int parse_attach(const cJSON *o, struct ptd_request *req,
			struct ptd_diag *diag)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "pid");
	uint64_t pid;
	int r;

	if (!v)
		return ptd_diagf(diag, -PTD_EFORMAT, "missing \"pid\"");
	r = get_int(v, "pid", 1, PTD_PROTO_PID_MAX, &pid, diag);
	if (r < 0)
		return r;
	req->pid = (pid_t)pid;
	v = cJSON_GetObjectItemCaseSensitive(o, "options");
	return v ? parse_options(v, req, diag) : 0;
}

static int parse_kinds(const cJSON *a, struct ptd_request *req,
		       struct ptd_diag *diag)
{
	const cJSON *v;
	unsigned kinds = 0, i = 0;

	if (!cJSON_IsArray(a))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"kinds\" must be an array, got %s",
				 json_type_name(a));
	cJSON_ArrayForEach(v, a) {
		int t = -1;

		if (cJSON_IsString(v))
			t = ptd_rec_type_parse(v->valuestring);
		if (t < 0)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "\"kinds[%u]\": expected one of "
					 "\"insn\", \"block\", \"event\", "
					 "\"error\"",
					 i);
		kinds |= PTD_REC_BIT(t);
		i++;
	}
	if (!kinds)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"kinds\" must name at least one kind");
	req->filter.kinds = kinds;
	return 0;
}

static int parse_tids(const cJSON *a, struct ptd_filter_spec *f,
		      struct ptd_diag *diag)
{
	const cJSON *v;
	char field[32];
	uint64_t tid;
	int r;

	if (!cJSON_IsArray(a))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"filter.tid\" must be an array, got %s",
				 json_type_name(a));
	cJSON_ArrayForEach(v, a) {
		if (f->ntids >= PTD_FILTER_MAX_TIDS)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "\"filter.tid\" has more than %d "
					 "entries",
					 PTD_FILTER_MAX_TIDS);
		(void)snprintf(field, sizeof(field), "filter.tid[%u]",
			       f->ntids);
		r = get_int(v, field, 1, PTD_PROTO_PID_MAX, &tid, diag);
		if (r < 0)
			return r;
		f->tids[f->ntids++] = (pid_t)tid;
	}
	return 0;
}

/* A hex address "0x..." (the protocol's form for 64-bit values). */
static int parse_hex(const cJSON *v, const char *field, uint64_t *ret,
		     struct ptd_diag *diag)
{
	const char *s;

	if (!cJSON_IsString(v))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"%s\" must be a hex string \"0x...\", got "
				 "%s",
				 field, json_type_name(v));
	s = v->valuestring;
	if ((s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) ||
	    ptd_parse_u64(s + 2, 16, ret) < 0)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"%s\": \"%.40s\" is not a 64-bit hex number "
				 "\"0x...\"",
				 field, s);
	return 0;
}

static int parse_ranges(const cJSON *a, struct ptd_filter_spec *f,
			struct ptd_diag *diag)
{
	const cJSON *v;
	char field[48];
	int r;

	if (!cJSON_IsArray(a))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"filter.ranges\" must be an array, got %s",
				 json_type_name(a));
	cJSON_ArrayForEach(v, a) {
		struct ptd_addr_range *rg = &f->ranges[f->nranges];
		unsigned i = f->nranges;

		if (f->nranges >= PTD_FILTER_MAX_RANGES)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "\"filter.ranges\" has more than %d "
					 "entries",
					 PTD_FILTER_MAX_RANGES);
		if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "\"filter.ranges[%u]\" must be "
					 "[\"0xSTART\", \"0xEND\"]",
					 i);
		(void)snprintf(field, sizeof(field), "filter.ranges[%u][0]", i);
		r = parse_hex(cJSON_GetArrayItem(v, 0), field, &rg->start,
			      diag);
		if (r < 0)
			return r;
		(void)snprintf(field, sizeof(field), "filter.ranges[%u][1]", i);
		r = parse_hex(cJSON_GetArrayItem(v, 1), field, &rg->end, diag);
		if (r < 0)
			return r;
		if (rg->start >= rg->end)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "\"filter.ranges[%u]\": the start "
					 "must be below the end (the end is "
					 "exclusive)",
					 i);
		f->nranges++;
	}
	return 0;
}

static int parse_iclass(const cJSON *a, struct ptd_filter_spec *f,
			struct ptd_diag *diag)
{
	const cJSON *v;
	unsigned i = 0;

	if (!cJSON_IsArray(a))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"filter.iclass\" must be an array, got %s",
				 json_type_name(a));
	cJSON_ArrayForEach(v, a) {
		int c = cJSON_IsString(v) ? ptd_iclass_parse(v->valuestring)
					  : -1;

		if (c < 0)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "\"filter.iclass[%u]\": expected an "
					 "instruction class (call, return, "
					 "jump, cond_jump, far_call, "
					 "far_return, far_jump, ptwrite, "
					 "other, error)",
					 i);
		f->iclasses |= 1u << c;
		i++;
	}
	return 0;
}

static int parse_filter(const cJSON *o, struct ptd_request *req,
			struct ptd_diag *diag)
{
	static const char *const keys[] = { "tid", "ranges", "iclass",
					    "module", NULL };
	struct ptd_filter_spec *f = &req->filter;
	const cJSON *v;
	const char *s;
	int r;

	if (!cJSON_IsObject(o))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"filter\" must be an object, got %s",
				 json_type_name(o));
	r = check_keys(o, "filter", keys, diag);
	if (r < 0)
		return r;
	if ((v = cJSON_GetObjectItemCaseSensitive(o, "tid")) &&
	    (r = parse_tids(v, f, diag)) < 0)
		return r;
	if ((v = cJSON_GetObjectItemCaseSensitive(o, "ranges")) &&
	    (r = parse_ranges(v, f, diag)) < 0)
		return r;
	if ((v = cJSON_GetObjectItemCaseSensitive(o, "iclass")) &&
	    (r = parse_iclass(v, f, diag)) < 0)
		return r;
	v = cJSON_GetObjectItemCaseSensitive(o, "module");
	if (v) {
		r = get_string(v, "filter.module", PTD_FILTER_MAX_MODULE - 1,
			       &s, diag);
		if (r < 0)
			return r;
		if (!*s)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "\"filter.module\" is empty");
		(void)ptd_strlcpy(f->module, s, sizeof(f->module));
	}
	return 0;
}

static int parse_subscribe(const cJSON *o, struct ptd_request *req,
			   struct ptd_diag *diag)
{
	const cJSON *v;
	int r;

	r = parse_session(o, true, req, diag);
	if (r < 0)
		return r;
	if ((v = cJSON_GetObjectItemCaseSensitive(o, "kinds")) &&
	    (r = parse_kinds(v, req, diag)) < 0)
		return r;
	v = cJSON_GetObjectItemCaseSensitive(o, "filter");
	return v ? parse_filter(v, req, diag) : 0;
}

/* The keys each command takes besides id and cmd. */
static const char *const *cmd_keys(enum ptd_cmd c)
{
	static const char *const none[] = { "id", "cmd", NULL };
	static const char *const attach[] = { "id", "cmd", "pid", "options",
					      NULL };
	static const char *const session[] = { "id", "cmd", "session", NULL };
	static const char *const subscribe[] = { "id", "cmd", "session",
						 "kinds", "filter", NULL };
	static const char *const replay[] = { "id", "cmd", "path", "lossless",
					      "lossy", "tid", "wait_ms", NULL };
	static const char *const record[] = { "id", "cmd", "session", "wait",
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
	case PTD_CMD_PING:
	case PTD_CMD_VERSION:
	case PTD_CMD_LIST:
	case PTD_CMD_COUNT:
		break;
	}
	return none;
}

static int parse_id(const cJSON *o, struct ptd_request *req,
		    struct ptd_diag *diag)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "id");

	if (!v)
		return ptd_diagf(diag, -PTD_EFORMAT, "missing \"id\"");
	if (cJSON_IsArray(v) || cJSON_IsObject(v))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"id\" must be a string, number, boolean or "
				 "null, got %s",
				 json_type_name(v));
	if (cJSON_IsString(v) && strlen(v->valuestring) > PTD_PROTO_MAX_ID)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"id\" is longer than %d bytes",
				 PTD_PROTO_MAX_ID);
	req->id = cJSON_Duplicate(v, false);
	return req->id ? 0 : -ENOMEM;
}

static int parse_cmd(const cJSON *o, struct ptd_request *req,
		     struct ptd_diag *diag)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "cmd");
	int c;

	if (!v)
		return ptd_diagf(diag, -PTD_EFORMAT, "missing \"cmd\"");
	if (!cJSON_IsString(v))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "\"cmd\" must be a string, got %s",
				 json_type_name(v));
	for (c = 0; c < PTD_CMD_COUNT; c++)
		if (!strcmp(v->valuestring, ptd_cmd_name((enum ptd_cmd)c)))
			break;
	if (c == PTD_CMD_COUNT)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED,
				 "unknown cmd \"%.64s\" (ping, version, "
				 "attach, detach, list, status, subscribe, "
				 "snapshot, replay, record)",
				 v->valuestring);
	req->cmd = (enum ptd_cmd)c;
	return 0;
}

static int parse_object(const cJSON *o, struct ptd_request *req,
			struct ptd_diag *diag)
{
	int r;

	if (!cJSON_IsObject(o))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "a request must be a JSON object, got %s",
				 json_type_name(o));
	/* The id first, so that every later error can echo it. */
	r = parse_id(o, req, diag);
	if (r < 0)
		return r;
	r = parse_cmd(o, req, diag);
	if (r < 0)
		return r;
	r = check_keys(o, ptd_cmd_name(req->cmd), cmd_keys(req->cmd), diag);
	if (r < 0)
		return r;
	switch (req->cmd) {
	case PTD_CMD_ATTACH:
		return parse_attach(o, req, diag);
	case PTD_CMD_DETACH:
	case PTD_CMD_SNAPSHOT:
		return parse_session(o, true, req, diag);
	case PTD_CMD_STATUS:
		return parse_session(o, false, req, diag);
	case PTD_CMD_SUBSCRIBE:
		return parse_subscribe(o, req, diag);
	case PTD_CMD_REPLAY:
		return parse_replay(o, req, diag);
	case PTD_CMD_RECORD:
		return parse_record(o, req, diag);
	case PTD_CMD_PING:
	case PTD_CMD_VERSION:
	case PTD_CMD_LIST:
	case PTD_CMD_COUNT:
		break;
	}
	return 0;
}

int ptd_request_parse(const char *line, size_t len, struct ptd_request *req,
		      struct ptd_diag *diag)
{
	const char *end = NULL;
	cJSON *o;
	int r;

	memset(req, 0, sizeof(*req));
	req->source = PTD_SOURCE_AUTO;
	req->filter.kinds = PTD_FILTER_DEFAULT_KINDS;
	if (memchr(line, 0, len))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "the request contains a NUL byte");
	o = cJSON_ParseWithLengthOpts(line, len, &end, false);
	if (!o) {
		size_t at = end && end >= line ? (size_t)(end - line) : 0;

		return ptd_diagf(diag, -PTD_EFORMAT,
				 "the request is not valid JSON (at byte %zu)",
				 at);
	}
	/* Only whitespace may follow the value. */
	for (; end && (size_t)(end - line) < len; end++)
		if (!strchr(" \t\r", *end)) {
			cJSON_Delete(o);
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "the request has data after its JSON "
					 "value (at byte %zu)",
					 (size_t)(end - line));
		}
	r = parse_object(o, req, diag);
	cJSON_Delete(o);
	return r;
}

void ptd_request_free(struct ptd_request *req)
{
	if (!req)
		return;
	cJSON_Delete(req->id);
	req->id = NULL;
	free(req->addr_filter);
	req->addr_filter = NULL;
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
