/* SPDX-License-Identifier: MIT */
/* The control protocol: every malformed request is refused with a message
 * naming the field; good requests fill every field; responses parse back. */
#include <cjson/cJSON.h>
#include <errno.h>

#include "check.h"
#include "daemon/proto.h"

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
	ptd_request_free(&req);
}

static void test_not_requests(void)
{
	bad("", -PTD_EFORMAT, "not valid JSON");
	bad("{", -PTD_EFORMAT, "not valid JSON");
	bad("hello", -PTD_EFORMAT, "not valid JSON");
	bad("{\"id\":1,\"cmd\":\"ping\"} x", -PTD_EFORMAT, "after its JSON");
	bad("{\"id\":1,\"cmd\":\"ping\"}{}", -PTD_EFORMAT, "after its JSON");
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
	ptd_request_free(&req);
}

static void test_id_and_cmd(void)
{
	struct ptd_request req;
	struct ptd_diag d;

	bad("{\"cmd\":\"ping\"}", -PTD_EFORMAT, "missing \"id\"");
	bad("{\"id\":[1],\"cmd\":\"ping\"}", -PTD_EFORMAT, "\"id\" must be");
	bad("{\"id\":{},\"cmd\":\"ping\"}", -PTD_EFORMAT, "\"id\" must be");
	bad("{\"id\":1}", -PTD_EFORMAT, "missing \"cmd\"");
	bad("{\"id\":1,\"cmd\":7}", -PTD_EFORMAT,
	    "\"cmd\" must be a string, got a number");
	bad("{\"id\":1,\"cmd\":\"fly\"}", -PTD_EUNSUPPORTED,
	    "unknown cmd \"fly\"");
	bad("{\"id\":1,\"cmd\":\"ping\",\"x\":1}", -PTD_EFORMAT,
	    "ping: unknown key \"x\"");
	bad("{\"id\":1,\"cmd\":\"ping\",\"id\":2}", -PTD_EFORMAT,
	    "key \"id\" given twice");
	bad("{\"id\":1,\"cmd\":\"list\",\"pid\":1}", -PTD_EFORMAT,
	    "list: unknown key \"pid\"");

	/* The id is kept even when a later field is wrong. */
	CHECK_EQ_INT(parse("{\"id\":\"abc\",\"cmd\":\"fly\"}", &req, &d),
		     -PTD_EUNSUPPORTED);
	REQUIRE(req.id);
	CHECK_EQ_STR(req.id->valuestring, "abc");
	ptd_request_free(&req);

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
		ptd_request_free(&req);
	}
	char longid[PTD_PROTO_MAX_ID + 40];

	strcpy(longid, "{\"cmd\":\"ping\",\"id\":\"");
	memset(longid + strlen(longid), 'a', PTD_PROTO_MAX_ID + 1);
	longid[20 + PTD_PROTO_MAX_ID + 1] = 0;
	strcat(longid, "\"}");
	bad(longid, -PTD_EFORMAT, "\"id\" is longer than");
}

static void test_attach(void)
{
	struct ptd_request req;
	struct ptd_diag d;

	bad("{\"id\":1,\"cmd\":\"attach\"}", -PTD_EFORMAT, "missing \"pid\"");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":\"12\"}", -PTD_EFORMAT,
	    "\"pid\" must be a number, got a string");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":0}", -PTD_EFORMAT,
	    "\"pid\" is out of range");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":-5}", -PTD_EFORMAT,
	    "\"pid\" is out of range");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":4194305}", -PTD_EFORMAT,
	    "\"pid\" is out of range");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1e300}", -PTD_EFORMAT,
	    "\"pid\" is out of range");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":1.5}", -PTD_EFORMAT,
	    "\"pid\" must be an integer");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":[]}",
	    -PTD_EFORMAT, "\"options\" must be an object");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":{\"speed\":1}}",
	    -PTD_EFORMAT, "options: unknown key \"speed\"");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"source\":\"magic\"}}",
	    -PTD_EFORMAT, "unknown source \"magic\"");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"source\":1}}",
	    -PTD_EFORMAT, "\"options.source\" must be a string");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":{\"tsc\":1}}",
	    -PTD_EFORMAT, "\"options.tsc\" must be a boolean");
	bad("{\"id\":1,\"cmd\":\"attach\",\"pid\":5,\"options\":"
	    "{\"max_insns\":-1}}",
	    -PTD_EFORMAT, "\"options.max_insns\" is out of range");

	memset(&req, 0xcd, sizeof(req));
	REQUIRE(parse("{\"id\":9,\"cmd\":\"attach\",\"pid\":1234,\"options\":"
		      "{\"source\":\"software\",\"tsc\":true,"
		      "\"max_insns\":1000000}}",
		      &req, &d) == 0);
	CHECK_EQ_INT(req.cmd, PTD_CMD_ATTACH);
	CHECK_EQ_INT(req.pid, 1234);
	CHECK_EQ_INT(req.source, PTD_SOURCE_SOFTWARE);
	CHECK(req.tsc);
	CHECK_EQ_U64(req.max_insns, 1000000);
	ptd_request_free(&req);
	REQUIRE(parse("{\"id\":9,\"cmd\":\"attach\",\"pid\":1}", &req, &d) ==
		0);
	CHECK_EQ_INT(req.source, PTD_SOURCE_AUTO);
	CHECK(!req.tsc);
	CHECK_EQ_U64(req.max_insns, 0);
	ptd_request_free(&req);
}

static void test_session_cmds(void)
{
	struct ptd_request req;
	struct ptd_diag d;

	bad("{\"id\":1,\"cmd\":\"detach\"}", -PTD_EFORMAT,
	    "missing \"session\"");
	bad("{\"id\":1,\"cmd\":\"detach\",\"session\":\"1\"}", -PTD_EFORMAT,
	    "\"session\" must be a number");
	bad("{\"id\":1,\"cmd\":\"detach\",\"session\":0}", -PTD_EFORMAT,
	    "\"session\" is out of range");
	bad("{\"id\":1,\"cmd\":\"subscribe\"}", -PTD_EFORMAT,
	    "missing \"session\"");
	bad("{\"id\":1,\"cmd\":\"status\",\"session\":true}", -PTD_EFORMAT,
	    "\"session\" must be a number");
	REQUIRE(parse("{\"id\":1,\"cmd\":\"detach\",\"session\":3}", &req,
		      &d) == 0);
	CHECK(req.has_session);
	CHECK_EQ_U64(req.session, 3);
	ptd_request_free(&req);
	REQUIRE(parse("{\"id\":1,\"cmd\":\"status\",\"session\":4}", &req,
		      &d) == 0);
	CHECK(req.has_session);
	CHECK_EQ_U64(req.session, 4);
	ptd_request_free(&req);
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
	ptd_request_free(&req);
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
	    -PTD_EFORMAT, "\"lossy\" must be a boolean");
	bad("{\"id\":1,\"cmd\":\"replay\",\"path\":\"/t\",\"lossy\":false,"
	    "\"lossless\":false}", -PTD_EFORMAT,
	    "\"lossy\" and \"lossless\" contradict each other");
}

#define SUB(rest) "{\"id\":1,\"cmd\":\"subscribe\",\"session\":1," rest "}"

static void test_subscribe(void)
{
	struct ptd_request req;
	struct ptd_diag d;

	bad(SUB("\"kinds\":\"insn\""), -PTD_EFORMAT,
	    "\"kinds\" must be an array");
	bad(SUB("\"kinds\":[]"), -PTD_EFORMAT, "at least one kind");
	bad(SUB("\"kinds\":[\"insn\",\"calls\"]"), -PTD_EFORMAT, "kinds[1]");
	bad(SUB("\"kinds\":[1]"), -PTD_EFORMAT, "kinds[0]");
	bad(SUB("\"filter\":3"), -PTD_EFORMAT, "\"filter\" must be an object");
	bad(SUB("\"filter\":{\"cpu\":1}"), -PTD_EFORMAT,
	    "filter: unknown key \"cpu\"");
	bad(SUB("\"filter\":{\"tid\":5}"), -PTD_EFORMAT,
	    "\"filter.tid\" must be an array");
	bad(SUB("\"filter\":{\"tid\":[1,0]}"), -PTD_EFORMAT,
	    "\"filter.tid[1]\" is out of range");
	bad(SUB("\"filter\":{\"tid\":[\"1\"]}"), -PTD_EFORMAT,
	    "\"filter.tid[0]\" must be a number");
	bad(SUB("\"filter\":{\"ranges\":[\"0x1\"]}"), -PTD_EFORMAT,
	    "\"filter.ranges[0]\" must be");
	bad(SUB("\"filter\":{\"ranges\":[[\"0x1\"]]}"), -PTD_EFORMAT,
	    "\"filter.ranges[0]\" must be");
	bad(SUB("\"filter\":{\"ranges\":[[\"0x1000\",\"0x10zz\"]]}"),
	    -PTD_EFORMAT, "\"filter.ranges[0][1]\": \"0x10zz\" is not");
	bad(SUB("\"filter\":{\"ranges\":[[\"4096\",\"0x2000\"]]}"),
	    -PTD_EFORMAT, "\"filter.ranges[0][0]\": \"4096\" is not");
	bad(SUB("\"filter\":{\"ranges\":[[\"0x\",\"0x2000\"]]}"),
	    -PTD_EFORMAT, "\"filter.ranges[0][0]\"");
	bad(SUB("\"filter\":{\"ranges\":[[\"0x10000000000000000\","
		"\"0x2000\"]]}"),
	    -PTD_EFORMAT, "is not a 64-bit hex number");
	bad(SUB("\"filter\":{\"ranges\":[[4096,\"0x2000\"]]}"), -PTD_EFORMAT,
	    "\"filter.ranges[0][0]\" must be a hex string");
	bad(SUB("\"filter\":{\"ranges\":[[\"0x2000\",\"0x2000\"]]}"),
	    -PTD_EFORMAT, "start must be below the end");
	bad(SUB("\"filter\":{\"iclass\":[\"call\",\"leap\"]}"), -PTD_EFORMAT,
	    "\"filter.iclass[1]\"");
	bad(SUB("\"filter\":{\"module\":3}"), -PTD_EFORMAT,
	    "\"filter.module\" must be a string");
	bad(SUB("\"filter\":{\"module\":\"\"}"), -PTD_EFORMAT,
	    "\"filter.module\" is empty");

	/* Too many tids. */
	char big[4096] = SUB("\"filter\":{\"tid\":[");
	big[strlen(big) - 1] = 0;	/* drop the closing brace */
	for (int i = 1; i <= PTD_FILTER_MAX_TIDS + 1; i++)
		(void)snprintf(big + strlen(big), sizeof(big) - strlen(big),
			       "%s%d", i > 1 ? "," : "", i);
	strcat(big, "]}}");
	bad(big, -PTD_EFORMAT, "more than 64 entries");

	REQUIRE(parse("{\"id\":1,\"cmd\":\"subscribe\",\"session\":1}",
		      &req, &d) == 0);
	CHECK_EQ_INT(req.filter.kinds, PTD_FILTER_DEFAULT_KINDS);
	ptd_request_free(&req);
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
	ptd_request_free(&req);
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
	RUN(test_responses);
	RUN(test_names);
	return check_done();
}
