/* SPDX-License-Identifier: MIT */
/* The control protocol: every malformed request is refused with a message
 * naming the field; good requests fill every field; responses parse back. */
#include <cjson/cJSON.h>
#include <errno.h>

#include "check.h"
#include "daemon/proto.h"
#include "decode/decoder.h"

static int parse(const char *s, struct ptd_request *req, struct ptd_diag *d)
{
	d->msg[0] = 0;
	return ptd_request_parse(s, strlen(s), req, d);
}

/* @line must be refused with @err and a message containing @what. */
static void bad(const char *line, int err, const char *what)
{
	struct ptd_request req;
	struct ptd_diag d;
	int r = parse(line, &req, &d);

	if (r != err)
		CHECK_FAIL_("'%s': expected %d, got %d (%s)", line, err, r,
			    d.msg);
	else if (!strstr(d.msg, what))
		CHECK_FAIL_("'%s': message \"%s\" does not name \"%s\"", line,
			    d.msg, what);
	ptd_request_fini(&req);
}

static void test_not_requests(void)
{
	bad("", -PTD_EFORMAT, "not valid JSON");
	bad("{", -PTD_EFORMAT, "not valid JSON");
	bad("hello", -PTD_EFORMAT, "not valid JSON");
	bad("{\"id\":1,\"cmd\":\"ping\"} x", -PTD_EFORMAT, "data after the JSON value");
	bad("{\"id\":1,\"cmd\":\"ping\"}{}", -PTD_EFORMAT, "data after the JSON value");
	bad("[1,2]", -PTD_EFORMAT, "must be a JSON object, got an array");
	bad("42", -PTD_EFORMAT, "must be a JSON object, got a number");
	bad("\"ping\"", -PTD_EFORMAT, "got a string");
	bad("null", -PTD_EFORMAT, "got null");

	struct ptd_request req;
	struct ptd_diag d;
	static const char nul[] = "{\"id\":1,\"cmd\":\"ping\"}\0";

	CHECK_EQ_INT(ptd_request_parse(nul, sizeof(nul) - 1, &req, &d),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "NUL");
	ptd_request_fini(&req);
}

static void test_id_and_cmd(void)
{
	struct ptd_request req;
	struct ptd_diag d;

	bad("{\"cmd\":\"ping\"}", -PTD_EFORMAT, "id: missing");
	bad("{\"id\":[1],\"cmd\":\"ping\"}", -PTD_EFORMAT, "id: expected a string, number");
	bad("{\"id\":{},\"cmd\":\"ping\"}", -PTD_EFORMAT, "id: expected a string, number");
	bad("{\"id\":1}", -PTD_EFORMAT, "cmd: missing");
	bad("{\"id\":1,\"cmd\":7}", -PTD_EFORMAT,
	    "cmd: expected a string, not a number");
	bad("{\"id\":1,\"cmd\":\"fly\"}", -PTD_EUNSUPPORTED,
	    "unknown cmd \"fly\"");
	bad("{\"id\":1,\"cmd\":\"ping\",\"x\":1}", -PTD_EFORMAT,
	    "ping: unknown field \"x\"");
	bad("{\"id\":1,\"cmd\":\"ping\",\"id\":2}", -PTD_EFORMAT,
	    "ping: id: given twice");
	bad("{\"id\":1,\"cmd\":\"list\",\"pid\":1}", -PTD_EFORMAT,
	    "list: unknown field \"pid\"");

	/* The id is kept even when a later field is wrong. */
	CHECK_EQ_INT(parse("{\"id\":\"abc\",\"cmd\":\"fly\"}", &req, &d),
		     -PTD_EUNSUPPORTED);
	REQUIRE(req.id);
	CHECK_EQ_STR(req.id->valuestring, "abc");
	ptd_request_fini(&req);

	/* Every scalar id, and every command without arguments. */
	static const char *ok[] = {
		"{\"id\":1,\"cmd\":\"ping\"}",
		"{\"id\":\"x\",\"cmd\":\"version\"}",
		"{\"id\":null,\"cmd\":\"list\"}",
		"{\"id\":true,\"cmd\":\"status\"}",
		" {\"cmd\":\"ping\",\"id\":2.5} \t",
	};
	static const enum ptd_cmd cmds[] = { PTD_CMD_PING, PTD_CMD_VERSION,
					     PTD_CMD_LIST, PTD_CMD_STATUS,
					     PTD_CMD_PING };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		int r = parse(ok[i], &req, &d);

		if (r != 0)
			CHECK_FAIL_("'%s': %d %s", ok[i], r, d.msg);
		CHECK_EQ_INT(req.cmd, cmds[i]);
		CHECK(req.id != NULL);
		CHECK(!req.has_session);
		ptd_request_fini(&req);
	}
	char longid[PTD_PROTO_MAX_ID + 40];

	strcpy(longid, "{\"cmd\":\"ping\",\"id\":\"");
	memset(longid + strlen(longid), 'a', PTD_PROTO_MAX_ID + 1);
	longid[20 + PTD_PROTO_MAX_ID + 1] = 0;
	strcat(longid, "\"}");
	bad(longid, -PTD_EFORMAT, "id: longer than");
}

static void test_attach(void)
{
	struct ptd_request req;
	struct ptd_diag d;

	bad("{\"id\":1,\"cmd\":\"attach\"}", -PTD_EFORMAT, "attach: pid: missing");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":\"12\"}", -PTD_EFORMAT,
	    "attach: pid: expected an integer, not a string");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":0}", -PTD_EFORMAT,
	    "attach: pid: 0 out of range");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":-5}", -PTD_EFORMAT,
	    "attach: pid: expected a non-negative integer");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":4194305}", -PTD_EFORMAT,
	    "attach: pid: 4194305 out of range");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1e300}", -PTD_EFORMAT,
	    "attach: pid: an integer over 64 bits out of range");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1.5}", -PTD_EFORMAT,
	    "attach: pid: expected an integer, not a fraction");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":[]}",
	    -PTD_EFORMAT, "attach: options: expected an object");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":{\"speed\":1}}",
	    -PTD_EFORMAT, "attach: options: unknown field \"speed\"");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"source\":\"magic\"}}",
	    -PTD_EFORMAT, "unknown source \"magic\"");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"source\":1}}",
	    -PTD_EFORMAT, "attach: options.source: expected a string");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":{\"tsc\":1}}",
	    -PTD_EFORMAT, "attach: options.tsc: expected a boolean");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"symbols\":\"yes\"}}",
	    -PTD_EFORMAT, "attach: options.symbols: expected a boolean");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"children\":1}}",
	    -PTD_EFORMAT, "attach: options.children: expected a boolean");
	bad("{\"id\":1,\"cmd\":\"replay\",\"path\":\"/x\",\"symbols\":1}",
	    -PTD_EFORMAT, "replay: symbols: expected a boolean");
	bad("{\"id\":1,\"cmd\":\"subscribe\",\"session\":1,\"symbols\":0}",
	    -PTD_EFORMAT, "subscribe: symbols: expected a boolean");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"max_insns\":-1}}",
	    -PTD_EFORMAT, "attach: options.max_insns: expected a non-negative integer");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"step\":\"fast\"}}",
	    -PTD_EFORMAT, "attach: options.step: expected \"branch\" or "
	    "\"single\", got \"fast\"");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"step\":1}}",
	    -PTD_EFORMAT, "attach: options.step: expected a string");
	/* options.jobs: a session's decodes, 1 to 64 threads; a full
	 * session's threads at once, not per-CPU buffers' merged trace nor
	 * one table of counts */
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"per_cpu\":true,\"jobs\":2}}",
	    -PTD_EFORMAT, "attach: options.jobs: is not for per-CPU buffers "
	    "(one merged trace, decoded in its order)");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"counters\":true,\"jobs\":2}}",
	    -PTD_EFORMAT, "attach: options.jobs: is not for a full session "
	    "with \"counters\"");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"jobs\":0}}",
	    -PTD_EFORMAT, "attach: options.jobs:");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"mode\":\"snapshot\",\"jobs\":0}}",
	    -PTD_EFORMAT, "attach: options.jobs:");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"mode\":\"snapshot\",\"jobs\":65}}",
	    -PTD_EFORMAT, "attach: options.jobs:");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"mode\":\"snapshot\",\"jobs\":\"2\"}}",
	    -PTD_EFORMAT, "attach: options.jobs:");

	memset(&req, 0xcd, sizeof(req));
	REQUIRE(parse("{\"id\":9,\"cmd\":\"attach\",\"pid\":1234,\"options\":"
		      "{\"source\":\"software\",\"tsc\":true,"
		      "\"max_insns\":1000000,\"step\":\"single\"}}",
		      &req, &d) == 0);
	CHECK(req.single_step);
	CHECK_EQ_INT(req.cmd, PTD_CMD_ATTACH);
	CHECK_EQ_INT(req.pid, 1234);
	CHECK_EQ_INT(req.source, PTD_SOURCE_SOFTWARE);
	CHECK(req.tsc);
	CHECK_EQ_U64(req.max_insns, 1000000);
	ptd_request_fini(&req);
	REQUIRE(parse("{\"id\":9,\"cmd\":\"attach\",\"pid\":1}", &req, &d) ==
		0);
	CHECK_EQ_INT(req.source, PTD_SOURCE_AUTO);
	CHECK(!req.tsc);
	CHECK(!req.single_step);
	CHECK_EQ_U64(req.max_insns, 0);
	ptd_request_fini(&req);
	REQUIRE(parse("{\"id\":9,\"cmd\":\"attach\",\"pid\":1,\"options\":"
		      "{\"step\":\"branch\"}}", &req, &d) == 0);
	CHECK(!req.single_step);
	ptd_request_fini(&req);
}

static void test_session_cmds(void)
{
	struct ptd_request req;
	struct ptd_diag d;

	bad("{\"id\":1,\"cmd\":\"detach\"}", -PTD_EFORMAT,
	    "detach: session: missing");
	bad("{\"id\":1,\"cmd\":\"detach\",\"session\":\"1\"}", -PTD_EFORMAT,
	    "detach: session: expected an integer");
	bad("{\"id\":1,\"cmd\":\"detach\",\"session\":0}", -PTD_EFORMAT,
	    "detach: session: 0 out of range");
	bad("{\"id\":1,\"cmd\":\"subscribe\"}", -PTD_EFORMAT,
	    "subscribe: session: missing");
	bad("{\"id\":1,\"cmd\":\"status\",\"session\":true}", -PTD_EFORMAT,
	    "status: session: expected an integer");
	REQUIRE(parse("{\"id\":1,\"cmd\":\"detach\",\"session\":3}", &req,
		      &d) == 0);
	CHECK(req.has_session);
	CHECK_EQ_U64(req.session, 3);
	ptd_request_fini(&req);
	REQUIRE(parse("{\"id\":1,\"cmd\":\"status\",\"session\":4}", &req,
		      &d) == 0);
	CHECK(req.has_session);
	CHECK_EQ_U64(req.session, 4);
	ptd_request_fini(&req);
}

/* A replay is lossless unless asked otherwise: "lossy":true or
 * "lossless":false; both given must agree. */
static void replay_mode(const char *rest, bool lossless)
{
	char line[256];
	struct ptd_request req;
	struct ptd_diag d;

	(void)snprintf(line, sizeof(line),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"/t\"%s}",
		       rest);
	REQUIRE(parse(line, &req, &d) == 0);
	if (req.lossless != lossless)
		CHECK_FAIL_("'%s': lossless %d, expected %d", line,
			    req.lossless, lossless);
	ptd_request_fini(&req);
}

static void test_replay(void)
{
	replay_mode("", true);
	replay_mode(",\"lossless\":true", true);
	replay_mode(",\"lossless\":false", false);
	replay_mode(",\"lossy\":true", false);
	replay_mode(",\"lossy\":false", true);
	replay_mode(",\"lossy\":true,\"lossless\":false", false);
	bad("{\"id\":1,\"cmd\":\"replay\",\"path\":\"/t\",\"lossy\":1}",
	    -PTD_EFORMAT, "replay: lossy: expected a boolean");
	bad("{\"id\":1,\"cmd\":\"replay\",\"path\":\"/t\",\"lossy\":false,"
	    "\"lossless\":false}", -PTD_EFORMAT,
	    "replay: lossy: contradicts \"lossless\"");
}

/* replay's "jobs": an integer from 1 to PTD_DECODE_MAX_JOBS (the server
 * holds it to max_decode_jobs: test-replay); absent: 0. */
static void test_replay_jobs(void)
{
	static const struct {
		const char *v, *msg;
	} badv[] = {
		{ "0", "replay: jobs: 0 out of range" },
		{ "-1", "replay: jobs: expected a non-negative integer" },
		{ "65", "replay: jobs: 65 out of range" },
		{ "1.5", "replay: jobs: expected an integer, not a fraction" },
		{ "\"2\"", "replay: jobs: expected an integer, not a string" },
		{ "true", "replay: jobs: expected an integer" },
		{ "null", "replay: jobs: expected an integer" },
	};
	static const unsigned good[] = { 1, 2, PTD_DECODE_MAX_JOBS };
	struct ptd_request req;
	struct ptd_diag d;
	char line[160];

	REQUIRE(parse("{\"id\":1,\"cmd\":\"replay\",\"path\":\"/t\"}", &req,
		      &d) == 0);
	CHECK_EQ_INT(req.jobs, 0);
	ptd_request_fini(&req);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		(void)snprintf(line, sizeof(line),
			       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"/t\","
			       "\"jobs\":%u}", good[i]);
		REQUIRE(parse(line, &req, &d) == 0);
		CHECK_EQ_INT(req.jobs, good[i]);
		ptd_request_fini(&req);
	}
	for (size_t i = 0; i < sizeof(badv) / sizeof(badv[0]); i++) {
		(void)snprintf(line, sizeof(line),
			       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"/t\","
			       "\"jobs\":%s}", badv[i].v);
		bad(line, -PTD_EFORMAT, badv[i].msg);
	}
	/* not a field of other commands */
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"jobs\":2}",
	    -PTD_EFORMAT, "unknown field \"jobs\"");
}

#define SUB(rest) "{\"id\":1,\"cmd\":\"subscribe\",\"session\":1," rest "}"

static void test_subscribe(void)
{
	struct ptd_request req;
	struct ptd_diag d;

	bad(SUB("\"kinds\":\"insn\""), -PTD_EFORMAT,
	    "subscribe: kinds: expected an array");
	bad(SUB("\"kinds\":[]"), -PTD_EFORMAT, "at least one kind");
	bad(SUB("\"kinds\":[\"insn\",\"calls\"]"), -PTD_EFORMAT, "kinds[1]");
	bad(SUB("\"kinds\":[1]"), -PTD_EFORMAT, "kinds[0]");
	/* trace kinds: from a session that counts (ptd checks that) */
	REQUIRE(parse(SUB("\"kinds\":[\"insn\",\"trace\","
			  "\"trace_withdrawn\"]"), &req, &d) == 0);
	CHECK_EQ_INT(req.filter.kinds, PTD_REC_BIT(PTD_REC_INSN) |
				       PTD_REC_BIT(PTD_REC_TRACE) |
				       PTD_REC_BIT(PTD_REC_TRACE_WITHDRAWN));
	ptd_request_fini(&req);
	bad(SUB("\"kinds\":[\"traces\"]"), -PTD_EFORMAT,
	    "kinds[0]: expected one of");
	/* counters snapshots: bounded, each refusal naming its field */
	bad(SUB("\"counters\":5"), -PTD_EFORMAT,
	    "subscribe: counters: expected an object");
	bad(SUB("\"counters\":{\"every\":100}"), -PTD_EFORMAT,
	    "subscribe: counters: unknown field \"every\"");
	bad(SUB("\"counters\":{\"every_ms\":99}"), -PTD_EFORMAT,
	    "subscribe: counters.every_ms: 99 is below the least period, "
	    "100 ms");
	bad(SUB("\"counters\":{\"every_ms\":3600001}"), -PTD_EFORMAT,
	    "subscribe: counters.every_ms");
	bad(SUB("\"counters\":{\"top\":0}"), -PTD_EFORMAT,
	    "subscribe: counters.top: 0 out of range");
	bad(SUB("\"counters\":{\"top\":1001}"), -PTD_EFORMAT,
	    "subscribe: counters.top: 1001 out of range");
	bad(SUB("\"counters\":{\"top\":1.5}"), -PTD_EFORMAT,
	    "subscribe: counters.top");
	bad("{\"id\":1,\"cmd\":\"counters\",\"session\":1,\"top\":0}",
	    -PTD_EFORMAT, "counters: top: 0 out of range");
	bad("{\"id\":1,\"cmd\":\"counters\",\"top\":3}", -PTD_EFORMAT,
	    "counters: session");
	bad("{\"id\":1,\"cmd\":\"counters\",\"session\":1,\"every_ms\":1}",
	    -PTD_EFORMAT, "counters: unknown field \"every_ms\"");
	REQUIRE(parse(SUB("\"kinds\":[\"first_exec\"],\"counters\":"
			  "{\"every_ms\":250}"), &req, &d) == 0);
	CHECK_EQ_INT(req.filter.kinds, PTD_REC_BIT(PTD_REC_FIRST_EXEC) |
				       PTD_REC_BIT(PTD_REC_COUNTERS));
	CHECK_EQ_INT(req.filter.counters_every_ms, 250);
	CHECK_EQ_INT(req.filter.counters_top, PTD_PROTO_COUNTERS_TOP_DEFAULT);
	ptd_request_fini(&req);
	bad(SUB("\"filter\":3"), -PTD_EFORMAT, "subscribe: filter: expected an object");
	bad(SUB("\"filter\":{\"cpu\":1}"), -PTD_EFORMAT,
	    "subscribe: filter: unknown field \"cpu\"");
	bad(SUB("\"filter\":{\"tid\":5}"), -PTD_EFORMAT,
	    "subscribe: filter.tid: expected an array");
	bad(SUB("\"filter\":{\"tid\":[1,0]}"), -PTD_EFORMAT,
	    "subscribe: filter.tid[1]: 0 out of range");
	bad(SUB("\"filter\":{\"tid\":[\"1\"]}"), -PTD_EFORMAT,
	    "subscribe: filter.tid[0]: expected an integer");
	bad(SUB("\"filter\":{\"ranges\":[\"0x1\"]}"), -PTD_EFORMAT,
	    "subscribe: filter.ranges[0]: must be");
	bad(SUB("\"filter\":{\"ranges\":[[\"0x1\"]]}"), -PTD_EFORMAT,
	    "subscribe: filter.ranges[0]: must be");
	bad(SUB("\"filter\":{\"ranges\":[[\"0x1000\",\"0x10zz\"]]}"),
	    -PTD_EFORMAT, "subscribe: filter.ranges[0][1]: expected a hex string "
	    "\"0x...\" (64 bits at most), not \"0x10zz\"");
	bad(SUB("\"filter\":{\"ranges\":[[\"4096\",\"0x2000\"]]}"),
	    -PTD_EFORMAT, "subscribe: filter.ranges[0][0]: expected a hex string "
	    "\"0x...\" (64 bits at most), not \"4096\"");
	bad(SUB("\"filter\":{\"ranges\":[[\"0x\",\"0x2000\"]]}"),
	    -PTD_EFORMAT, "subscribe: filter.ranges[0][0]: ");
	bad(SUB("\"filter\":{\"ranges\":[[\"0x10000000000000000\","
		"\"0x2000\"]]}"),
	    -PTD_EFORMAT, "(64 bits at most), not \"0x10000000000000000\"");
	bad(SUB("\"filter\":{\"ranges\":[[4096,\"0x2000\"]]}"), -PTD_EFORMAT,
	    "subscribe: filter.ranges[0][0]: expected a hex string "
	    "\"0x...\" (64 bits at most), not a number");
	bad(SUB("\"filter\":{\"ranges\":[[\"0x2000\",\"0x2000\"]]}"),
	    -PTD_EFORMAT, "start must be below the end");
	bad(SUB("\"filter\":{\"iclass\":[\"call\",\"leap\"]}"), -PTD_EFORMAT,
	    "subscribe: filter.iclass[1]: ");
	bad(SUB("\"filter\":{\"module\":3}"), -PTD_EFORMAT,
	    "subscribe: filter.module: expected a string");
	bad(SUB("\"filter\":{\"module\":\"\"}"), -PTD_EFORMAT,
	    "subscribe: filter.module: empty string");

	/* Fields: names, each once, at least one, at most every one. */
	bad(SUB("\"fields\":\"ip\""), -PTD_EFORMAT,
	    "subscribe: fields: expected an array");
	bad(SUB("\"fields\":[]"), -PTD_EFORMAT,
	    "subscribe: fields: must name at least one field");
	bad(SUB("\"fields\":[\"ip\",\"address\"]"), -PTD_EFORMAT,
	    "subscribe: fields[1]: unknown field \"address\" (fields: type, "
	    "pid, tid, ip,");
	bad(SUB("\"fields\":[\"ip\",7]"), -PTD_EFORMAT,
	    "subscribe: fields[1]: expected a field name");
	bad(SUB("\"fields\":[\"tid\",\"ip\",\"tid\"]"), -PTD_EFORMAT,
	    "subscribe: fields[2]: \"tid\" given twice");
	bad(SUB("\"fields\":[\"type\",\"pid\",\"tid\",\"ip\",\"end_ip\","
		"\"ninsn\",\"size\",\"raw\",\"iclass\",\"mode\",\"isid\","
		"\"module\",\"offset\",\"sym\",\"flags\",\"tsc\",\"time\","
		"\"wall\",\"ip\"]"),
	    -PTD_ELIMIT, "subscribe: fields: 19 elements, more than the 18");
	REQUIRE(parse(SUB("\"fields\":[\"tid\",\"ip\"]"), &req, &d) == 0);
	CHECK_EQ_U64(req.filter.fields, PTD_FIELD_BIT(PTD_FIELD_TYPE) |
						PTD_FIELD_BIT(PTD_FIELD_TID) |
						PTD_FIELD_BIT(PTD_FIELD_IP));
	ptd_request_fini(&req);
	REQUIRE(parse(SUB("\"fields\":[\"type\"]"), &req, &d) == 0);
	CHECK_EQ_U64(req.filter.fields, PTD_FIELD_BIT(PTD_FIELD_TYPE));
	ptd_request_fini(&req);

	/* The stream's format. */
	REQUIRE(parse(SUB("\"format\":\"binary\""), &req, &d) == 0);
	CHECK(req.filter.binary);
	CHECK(!req.filter.packed);
	ptd_request_fini(&req);
	REQUIRE(parse(SUB("\"format\":\"packed\""), &req, &d) == 0);
	CHECK(req.filter.binary);
	CHECK(req.filter.packed);
	ptd_request_fini(&req);
	REQUIRE(parse(SUB("\"format\":\"json\""), &req, &d) == 0);
	CHECK(!req.filter.binary);
	CHECK(!req.filter.packed);
	ptd_request_fini(&req);
	bad(SUB("\"format\":\"xml\""), -PTD_EFORMAT,
	    "subscribe: format: unknown format \"xml\" (json, binary, "
	    "packed)");
	bad(SUB("\"format\":1"), -PTD_EFORMAT,
	    "subscribe: format: expected a string");
	bad("{\"id\":1,\"cmd\":\"subscribe\",\"rule\":4,"
	    "\"format\":\"binary\"}", -PTD_EFORMAT,
	    "subscribe: format: \"binary\" is for a session's stream");
	bad("{\"id\":1,\"cmd\":\"subscribe\",\"rule\":4,"
	    "\"format\":\"packed\"}", -PTD_EFORMAT,
	    "subscribe: format: \"packed\" is for a session's stream");

	/* Too many tids. */
	char big[4096] = SUB("\"filter\":{\"tid\":[");
	big[strlen(big) - 1] = 0;	/* drop the closing brace */
	for (int i = 1; i <= PTD_FILTER_MAX_TIDS + 1; i++)
		(void)snprintf(big + strlen(big), sizeof(big) - strlen(big),
			       "%s%d", i > 1 ? "," : "", i);
	strcat(big, "]}}");
	bad(big, -PTD_EFORMAT, "more than 64 entries");

	/* A watch rule's stream instead of a session's. */
	REQUIRE(parse("{\"id\":1,\"cmd\":\"subscribe\",\"rule\":4,"
		      "\"running\":true,\"fields\":[\"ip\"]}", &req, &d) == 0);
	CHECK(req.has_rule && !req.has_session && req.rule_running);
	CHECK_EQ_U64(req.rule, 4);
	ptd_request_fini(&req);
	bad("{\"id\":1,\"cmd\":\"subscribe\",\"rule\":4,\"session\":1}",
	    -PTD_EFORMAT, "subscribe: rule: give \"session\" or \"rule\", "
	    "not both");
	bad(SUB("\"running\":true"), -PTD_EFORMAT,
	    "subscribe: running: only with \"rule\"");
	bad("{\"id\":1,\"cmd\":\"subscribe\",\"rule\":0}", -PTD_EFORMAT,
	    "subscribe: rule: 0 out of range");
	bad("{\"id\":1,\"cmd\":\"subscribe\",\"rule\":2,\"running\":1}",
	    -PTD_EFORMAT, "subscribe: running: expected a boolean");

	REQUIRE(parse("{\"id\":1,\"cmd\":\"subscribe\",\"session\":1}",
		      &req, &d) == 0);
	CHECK_EQ_INT(req.filter.kinds, PTD_FILTER_DEFAULT_KINDS);
	CHECK_EQ_U64(req.filter.fields, 0);	/* every field */
	ptd_request_fini(&req);
	REQUIRE(parse(SUB("\"kinds\":[\"block\"],\"filter\":{\"tid\":[5,6],"
			  "\"ranges\":[[\"0x401000\",\"0x402000\"],"
			  "[\"0xffffffff81000000\",\"0xFFFFFFFFFFFFFFFF\"]],"
			  "\"iclass\":[\"call\",\"return\"],"
			  "\"module\":\"libc\"}"),
		      &req, &d) == 0);
	CHECK_EQ_INT(req.filter.kinds, PTD_REC_BIT(PTD_REC_BLOCK));
	CHECK_EQ_INT(req.filter.ntids, 2);
	CHECK_EQ_INT(req.filter.tids[1], 6);
	CHECK_EQ_INT(req.filter.nranges, 2);
	CHECK_EQ_U64(req.filter.ranges[0].start, 0x401000);
	CHECK_EQ_U64(req.filter.ranges[0].end, 0x402000);
	CHECK_EQ_U64(req.filter.ranges[1].start, 0xffffffff81000000ull);
	CHECK_EQ_U64(req.filter.ranges[1].end, UINT64_MAX);
	CHECK_EQ_INT(req.filter.iclasses,
		     (1u << ptic_call) | (1u << ptic_return));
	CHECK_EQ_STR(req.filter.module, "libc");
	ptd_request_fini(&req);
}

/* Triggers' text and the trigger request: what is wrong is named. */
static void test_triggers(void)
{
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":{"
	    "\"triggers\":[\"snapshot:x\"]}}", -PTD_EFORMAT,
	    "options.triggers[0]: trigger 'snapshot:x': expected "
	    "ACTION:FILE:SYMBOL or ACTION:FILE:0xOFFSET");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":{"
	    "\"triggers\":[\"snapshot:x:f\",7]}}", -PTD_EFORMAT,
	    "options.triggers[1]: expected a trigger");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":{"
	    "\"triggers\":[\"go:x:f\"]}}", -PTD_EFORMAT,
	    "unknown action 'go' (snapshot, start, stop)");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":{"
	    "\"triggers\":[\"snapshot::f\"]}}", -PTD_EFORMAT, "no file");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":{"
	    "\"triggers\":[\"snapshot:a/b:f\"]}}", -PTD_EFORMAT,
	    "must be an absolute path or a file name without '/'");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":{"
	    "\"triggers\":[\"snapshot:x:0x\"]}}", -PTD_EFORMAT,
	    "offset '0x' must be 0x and 1 to 16 hex digits");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":{"
	    "\"triggers\":[\"snapshot:x:0x1g\"]}}", -PTD_EFORMAT,
	    "'g' is no hex digit");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":{"
	    "\"triggers\":[\"snapshot:x:f-g\"]}}", -PTD_EFORMAT,
	    "character 2 ('-') may not be in a symbol");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":{"
	    "\"triggers\":[\"snapshot:x:9f\"]}}", -PTD_EFORMAT,
	    "character 1 ('9') may not be in a symbol");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":{"
	    "\"triggers\":[\"a:b:c\",\"a:b:c\",\"a:b:c\",\"a:b:c\","
	    "\"a:b:c\",\"a:b:c\",\"a:b:c\",\"a:b:c\",\"a:b:c\"]}}",
	    -PTD_ELIMIT, "options.triggers");
	bad("{\"id\":1,\"cmd\":\"trigger\",\"session\":1}", -PTD_EFORMAT,
	    "add: missing (or \"remove\")");
	bad("{\"id\":1,\"cmd\":\"trigger\",\"session\":1,\"add\":"
	    "\"snapshot:x:f\",\"remove\":2}", -PTD_EFORMAT,
	    "give \"add\" or \"remove\", not both");
	bad("{\"id\":1,\"cmd\":\"trigger\",\"add\":\"snapshot:x:f\"}",
	    -PTD_EFORMAT, "session");
	/* a watch rule's triggers: each of its sessions' */
	{
		struct ptd_request req;
		struct ptd_diag d = { "" };

		REQUIRE(parse("{\"id\":1,\"cmd\":\"watch\",\"comm\":\"x\","
			      "\"options\":{\"triggers\":[\"start:x:f\","
			      "\"stop:x:0x10\"]}}", &req, &d) == 0);
		CHECK_EQ_INT((int)req.ntriggers, 2);
		CHECK_EQ_STR(req.triggers[1], "stop:x:0x10");
		ptd_request_fini(&req);
	}
	bad("{\"id\":1,\"cmd\":\"watch\",\"comm\":\"x\",\"options\":{"
	    "\"triggers\":[\"snapshot:x\"]}}", -PTD_EFORMAT,
	    "options.triggers[0]");
}

static void test_responses(void)
{
	cJSON *id = cJSON_CreateString("req-1");
	cJSON *res = cJSON_CreateObject();
	size_t len = 0;
	char *s;
	cJSON *o;

	cJSON_AddNumberToObject(res, "session", 4);
	s = ptd_response_ok(id, res, &len);
	REQUIRE(s);
	CHECK_EQ_INT(len, strlen(s));
	CHECK(s[len - 1] == '\n');
	CHECK(!strncmp(s, "{\"type\":\"response\"", 18));
	o = cJSON_Parse(s);
	REQUIRE(o);
	CHECK_EQ_STR(cJSON_GetObjectItem(o, "id")->valuestring, "req-1");
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(o, "ok")));
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "result"),
					 "session")
			     ->valueint,
		     4);
	cJSON_Delete(o);
	free(s);

	s = ptd_response_error(NULL, PTD_ERR_NO_SUCH_PROCESS,
			       "pid 7 \"gone\"\n", &len);
	REQUIRE(s);
	CHECK(memchr(s, '\n', len - 1) == NULL);	/* one line */
	o = cJSON_Parse(s);
	REQUIRE(o);
	CHECK(cJSON_IsNull(cJSON_GetObjectItem(o, "id")));
	CHECK(cJSON_IsFalse(cJSON_GetObjectItem(o, "ok")));
	cJSON *e = cJSON_GetObjectItem(o, "error");
	CHECK_EQ_STR(cJSON_GetObjectItem(e, "code")->valuestring,
		     "no_such_process");
	CHECK_EQ_STR(cJSON_GetObjectItem(e, "message")->valuestring,
		     "pid 7 \"gone\"\n");
	cJSON_Delete(o);
	free(s);

	s = ptd_response_ok(id, NULL, &len);
	CHECK_CONTAINS(s, "\"result\":{}");
	free(s);
	cJSON_Delete(id);
}

/* What ptctl sends: each line parses and is built back byte for byte, so
 * the builder and the parser spell every field alike. */
static void test_request_lines(void)
{
	static const char *const lines[] = {
		"{\"id\":1,\"cmd\":\"ping\"}",
		"{\"id\":\"x\",\"cmd\":\"version\"}",
		"{\"id\":null,\"cmd\":\"list\"}",
		"{\"id\":1,\"cmd\":\"status\"}",
		"{\"id\":1,\"cmd\":\"status\",\"session\":3}",
		"{\"id\":1,\"cmd\":\"detach\",\"session\":3}",
		"{\"id\":1,\"cmd\":\"snapshot\",\"session\":12345}",
		"{\"id\":1,\"cmd\":\"attach\",\"pid\":42,\"options\":{}}",
		"{\"id\":1,\"cmd\":\"attach\",\"pid\":42,\"wait_ms\":5000,"
		"\"options\":{}}",
		"{\"id\":1,\"cmd\":\"attach\",\"pid\":42,\"options\":{"
		"\"source\":\"software\",\"tsc\":true,\"max_insns\":1000,"
		"\"step\":\"single\",\"capture\":\"/tmp/c\",\"mode\":\"snapshot\","
		"\"snapshot_size\":65536,\"per_cpu\":true,"
		"\"filter\":\"filter 0x10/0x20@/bin/true\",\"symbols\":true,"
		"\"children\":true,\"counters\":true,\"record\":true}}",
		"{\"id\":1,\"cmd\":\"subscribe\",\"session\":2}",
		"{\"id\":1,\"cmd\":\"subscribe\",\"rule\":2}",
		"{\"id\":1,\"cmd\":\"subscribe\",\"rule\":2,\"running\":true}",
		"{\"id\":1,\"cmd\":\"subscribe\",\"session\":2,\"kinds\":"
		"[\"block\",\"error\"],\"filter\":{\"tid\":[5,6],\"ranges\":"
		"[[\"0x401000\",\"0x402000\"],[\"0xffffffff81000000\","
		"\"0xffffffffffffffff\"]],\"iclass\":[\"call\",\"return\"],"
		"\"module\":\"libc\"}}",
		"{\"id\":1,\"cmd\":\"subscribe\",\"session\":2,\"kinds\":"
		"[\"insn\"],\"fields\":[\"type\",\"tid\",\"ip\",\"wall\"]}",
		"{\"id\":1,\"cmd\":\"subscribe\",\"session\":2,\"symbols\":true}",
		"{\"id\":1,\"cmd\":\"subscribe\",\"session\":2,\"fields\":"
		"[\"type\",\"tid\",\"ip\"],\"format\":\"binary\"}",
		"{\"id\":1,\"cmd\":\"subscribe\",\"session\":2,\"fields\":"
		"[\"type\",\"tid\",\"ip\"],\"format\":\"packed\"}",
		"{\"id\":1,\"cmd\":\"subscribe\",\"session\":2,\"fields\":"
		"[\"type\",\"ip\"],\"symbols\":true}",
		"{\"id\":1,\"cmd\":\"replay\",\"path\":\"/x/y\",\"symbols\":true}",
		"{\"id\":1,\"cmd\":\"replay\",\"path\":\"/x/y\",\"counters\":true}",
		"{\"id\":1,\"cmd\":\"replay\",\"path\":\"/x/y\",\"jobs\":3}",
		"{\"id\":1,\"cmd\":\"subscribe\",\"session\":2,\"kinds\":"
		"[\"insn\",\"first_exec\",\"counters\"],\"counters\":"
		"{\"every_ms\":500,\"top\":7}}",
		"{\"id\":1,\"cmd\":\"counters\",\"session\":2,\"top\":20}",
		"{\"id\":1,\"cmd\":\"replay\",\"path\":\"/x/y\"}",
		"{\"id\":1,\"cmd\":\"replay\",\"path\":\"/x\",\"lossy\":true,"
		"\"tid\":7,\"wait_ms\":0}",
		"{\"id\":1,\"cmd\":\"record\",\"session\":4}",
		"{\"id\":1,\"cmd\":\"record\",\"session\":4,\"wait\":false}",
		"{\"id\":1,\"cmd\":\"attach\",\"pid\":42,\"options\":{"
		"\"mode\":\"snapshot\",\"triggers\":[\"snapshot:libc.so.6:"
		"malloc\",\"snapshot:/a:b/c:0x1f9\"]}}",
		"{\"id\":1,\"cmd\":\"attach\",\"pid\":42,\"options\":{"
		"\"mode\":\"snapshot\",\"jobs\":4}}",
		"{\"id\":1,\"cmd\":\"attach\",\"pid\":42,\"options\":{"
		"\"jobs\":2}}",
		"{\"id\":1,\"cmd\":\"trigger\",\"session\":3,\"add\":"
		"\"stop:prog:0xABC\"}",
		"{\"id\":1,\"cmd\":\"trigger\",\"session\":3,\"remove\":7}",
	};
	struct ptd_request req;
	struct ptd_diag d;

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		size_t len = 0;
		char *s;

		if (parse(lines[i], &req, &d) != 0) {
			CHECK_FAIL_("'%s': %s", lines[i], d.msg);
			ptd_request_fini(&req);
			continue;
		}
		s = ptd_request_line(&req, &len);
		REQUIRE(s);
		CHECK_EQ_INT(len, strlen(s));
		CHECK(len && s[len - 1] == '\n');
		if (len)
			s[len - 1] = 0;
		CHECK_EQ_STR(s, lines[i]);
		free(s);
		ptd_request_fini(&req);
	}

	/* A request built in code (as ptctl does) parses to what was set. */
	struct ptd_request b, got;
	size_t len = 0;
	char *s;

	ptd_request_init(&b, PTD_CMD_SUBSCRIBE);
	b.has_session = true;
	b.session = 77;
	b.filter.kinds = PTD_REC_BIT(PTD_REC_INSN);
	b.filter.tids[b.filter.ntids++] = 9;
	b.filter.iclasses = 1u << ptic_ptwrite;
	s = ptd_request_line(&b, &len);
	REQUIRE(s);
	REQUIRE(ptd_request_parse(s, len - 1, &got, &d) == 0);
	CHECK_EQ_INT(got.cmd, PTD_CMD_SUBSCRIBE);
	CHECK_EQ_U64(got.session, 77);
	CHECK_EQ_INT(got.filter.kinds, PTD_REC_BIT(PTD_REC_INSN));
	CHECK_EQ_INT(got.filter.ntids, 1);
	CHECK_EQ_INT(got.filter.tids[0], 9);
	CHECK_EQ_INT(got.filter.iclasses, 1u << ptic_ptwrite);
	CHECK(cJSON_IsNull(got.id));
	ptd_request_fini(&got);
	free(s);

	/* The defaults a parse starts from are the ones the builder leaves
	 * out. */
	ptd_request_init(&b, PTD_CMD_RECORD);
	CHECK(b.record_wait);
	CHECK_EQ_INT(b.source, PTD_SOURCE_AUTO);
	CHECK_EQ_INT(b.filter.kinds, PTD_FILTER_DEFAULT_KINDS);
}

/* What ptctl reads: ptd's responses parse back; anything else is refused
 * with what is wrong. */
static void test_response_parse(void)
{
	static const struct {
		const char *line;
		const char *what;
	} bad_lines[] = {
		{ "nope", "not valid JSON" },
		{ "[1]", "not a JSON object" },
		{ "{\"id\":1,\"ok\":true,\"result\":{}}", "type: missing" },
		{ "{\"type\":\"hello\",\"id\":1,\"ok\":true,\"result\":{}}",
		  "type: expected \"response\"" },
		{ "{\"type\":\"response\",\"ok\":true,\"result\":{}}",
		  "id: missing" },
		{ "{\"type\":\"response\",\"id\":1,\"ok\":1,\"result\":{}}",
		  "ok: expected a boolean" },
		{ "{\"type\":\"response\",\"id\":1,\"ok\":true}",
		  "result: missing" },
		{ "{\"type\":\"response\",\"id\":1,\"ok\":true,\"result\":3}",
		  "result: expected an object" },
		{ "{\"type\":\"response\",\"id\":1,\"ok\":false}",
		  "error: missing" },
		{ "{\"type\":\"response\",\"id\":1,\"ok\":false,\"error\":"
		  "{\"code\":\"x\"}}", "error.message: missing" },
	};
	struct ptd_response resp;
	struct ptd_diag d;
	cJSON *id = cJSON_CreateNumber(5), *res = cJSON_CreateObject();
	size_t len = 0;
	char *s;

	for (size_t i = 0; i < sizeof(bad_lines) / sizeof(bad_lines[0]); i++) {
		const char *l = bad_lines[i].line;

		d.msg[0] = 0;
		if (ptd_response_parse(l, strlen(l), &resp, &d) != -PTD_EFORMAT)
			CHECK_FAIL_("'%s' was not refused", l);
		else if (!strstr(d.msg, bad_lines[i].what))
			CHECK_FAIL_("'%s': \"%s\" does not name \"%s\"", l,
				    d.msg, bad_lines[i].what);
		ptd_response_fini(&resp);
	}

	cJSON_AddNumberToObject(res, "session", 4);
	s = ptd_response_ok(id, res, &len);
	REQUIRE(s);
	REQUIRE(ptd_response_parse(s, len - 1, &resp, &d) == 0);
	CHECK(resp.ok);
	CHECK_EQ_INT(cJSON_GetObjectItem(resp.result, "session")->valueint, 4);
	CHECK_EQ_INT(resp.id->valueint, 5);
	ptd_response_fini(&resp);
	CHECK(resp.doc == NULL);
	free(s);

	s = ptd_response_error(id, PTD_ERR_LIMIT, "too many", &len);
	REQUIRE(s);
	REQUIRE(ptd_response_parse(s, len - 1, &resp, &d) == 0);
	CHECK(!resp.ok);
	CHECK_EQ_STR(resp.code, "limit");
	CHECK_EQ_STR(resp.message, "too many");
	ptd_response_fini(&resp);
	free(s);
	cJSON_Delete(id);
}

static void test_names(void)
{
	CHECK_EQ_STR(ptd_proto_error_code(-ESRCH), "no_such_process");
	CHECK_EQ_STR(ptd_proto_error_code(-EPERM), "permission_denied");
	CHECK_EQ_STR(ptd_proto_error_code(-PTD_ENOPT), "no_intel_pt");
	CHECK_EQ_STR(ptd_proto_error_code(-PTD_ELIMIT), "limit");
	CHECK_EQ_STR(ptd_proto_error_code(-PTD_EFORMAT), "bad_request");
	CHECK_EQ_STR(ptd_proto_error_code(-ENOMEM), "internal");
	CHECK_EQ_STR(ptd_source_name(PTD_SOURCE_INTEL_PT), "intel_pt");
	CHECK_EQ_INT(ptd_source_parse("software"), PTD_SOURCE_SOFTWARE);
	CHECK(ptd_source_parse("Software") < 0);
	for (int c = 0; c < PTD_CMD_COUNT; c++)
		CHECK(ptd_cmd_name((enum ptd_cmd)c) != NULL);
	CHECK(ptd_cmd_name(PTD_CMD_COUNT) == NULL);
}

int main(void)
{
	RUN(test_not_requests);
	RUN(test_id_and_cmd);
	RUN(test_attach);
	RUN(test_session_cmds);
	RUN(test_subscribe);
	RUN(test_replay);
	RUN(test_replay_jobs);
	RUN(test_responses);
	RUN(test_request_lines);
	RUN(test_triggers);
	RUN(test_response_parse);
	RUN(test_names);
	return check_done();
}
