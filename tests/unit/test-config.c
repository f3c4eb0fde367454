/* SPDX-License-Identifier: MIT */
/* daemon/config: strict ptd.conf parsing, and conf/ptd.conf == defaults. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "daemon/config.h"

/* Name the first field where @a and @b differ, or NULL. */
static const char *config_diff(const struct ptd_config *a,
			       const struct ptd_config *b)
{
#define F(f) if (a->f != b->f) return #f
#define S(f) if (strcmp(a->f, b->f) != 0) return #f
	S(socket_path);
	S(socket_group);
	F(socket_mode);
	F(aux_buffer_size);
	F(data_buffer_size);
	F(software_source);
	S(intel_pt_sysfs);
	S(debug_dir);
	S(perf_map_dir);
	F(max_sessions_per_user);
	F(max_subscribers_per_session);
	F(max_connections);
	F(subscriber_queue_size);
	F(subscriber_stall_ms);
	F(max_request_size);
	F(log_level);
	F(user_memory_limit);
	F(max_watch_rules_per_user);
	F(max_triggers_per_user);
	F(max_decode_jobs);
#undef F
#undef S
	return NULL;
}

/* A config where every field differs from the default. */
static void config_poison(struct ptd_config *c)
{
	ptd_config_defaults(c);
	strcpy(c->socket_path, "/poison");
	strcpy(c->socket_group, "poison");
	c->socket_mode = 0600;
	c->aux_buffer_size = 8192;
	c->data_buffer_size = 8192;
	c->software_source = false;
	strcpy(c->intel_pt_sysfs, "/poison");
	strcpy(c->debug_dir, "/poison");
	strcpy(c->perf_map_dir, "/poison");
	c->max_sessions_per_user = 99;
	c->max_subscribers_per_session = 99;
	c->max_connections = 99;
	c->subscriber_queue_size = 99999;
	c->subscriber_stall_ms = 99;
	c->max_request_size = 99999;
	c->log_level = PTD_LOG_DEBUG;
	c->user_memory_limit = 99999999;
	c->max_watch_rules_per_user = 63;
	c->max_triggers_per_user = 255;
	c->max_decode_jobs = 63;
}

static int parse_str(const char *text, struct ptd_config *c,
		     struct ptd_diag *d)
{
	memset(d, 0, sizeof(*d));
	return ptd_config_parse(text, strlen(text), "t.conf", c, d);
}

static void test_defaults(void)
{
	struct ptd_config c, p;

	memset(&c, 0xcd, sizeof(c));
	ptd_config_defaults(&c);
	CHECK_EQ_STR(c.socket_path, "/run/ptd/ptd.sock");
	CHECK_EQ_STR(c.socket_group, "ptd");
	CHECK_EQ_INT(c.socket_mode, 0660);
	CHECK_EQ_U64(c.aux_buffer_size, 4 << 20);
	CHECK_EQ_U64(c.data_buffer_size, 512 << 10);
	CHECK(c.software_source);
	CHECK_EQ_STR(c.intel_pt_sysfs,
		     "/sys/bus/event_source/devices/intel_pt");
	CHECK_EQ_INT(c.max_sessions_per_user, 8);
	CHECK_EQ_INT(c.max_subscribers_per_session, 16);
	CHECK_EQ_INT(c.max_connections, 128);
	CHECK_EQ_U64(c.subscriber_queue_size, 4 << 20);
	CHECK_EQ_INT(c.subscriber_stall_ms, 30000);
	CHECK_EQ_U64(c.max_request_size, 64 << 10);
	CHECK_EQ_INT(c.log_level, PTD_LOG_INFO);
	CHECK_EQ_U64(c.user_memory_limit, 1ull << 30);
	CHECK_EQ_INT(c.max_watch_rules_per_user, 4);
	CHECK_EQ_INT(c.max_triggers_per_user, 8);
	CHECK_EQ_INT(c.max_decode_jobs, 4);
	/* The poison really differs everywhere (else the shipped-file test
	 * below would prove nothing for that field). */
	config_poison(&p);
#define D(f) CHECK(memcmp(&p.f, &c.f, sizeof(c.f)) != 0)
	D(socket_mode); D(aux_buffer_size); D(data_buffer_size);
	D(software_source); D(max_sessions_per_user);
	D(max_subscribers_per_session); D(max_connections);
	D(subscriber_queue_size); D(subscriber_stall_ms);
	D(max_request_size); D(log_level);
	D(user_memory_limit); D(max_watch_rules_per_user);
	D(max_triggers_per_user); D(max_decode_jobs);
#undef D
	CHECK(strcmp(p.socket_path, c.socket_path) != 0);
	CHECK(strcmp(p.socket_group, c.socket_group) != 0);
	CHECK(strcmp(p.intel_pt_sysfs, c.intel_pt_sysfs) != 0);
}

static void test_level_names(void)
{
	CHECK_EQ_STR(ptd_log_level_name(PTD_LOG_ERROR), "error");
	CHECK_EQ_STR(ptd_log_level_name(PTD_LOG_WARNING), "warning");
	CHECK_EQ_STR(ptd_log_level_name(PTD_LOG_INFO), "info");
	CHECK_EQ_STR(ptd_log_level_name(PTD_LOG_DEBUG), "debug");
}

static char *shipped_conf(size_t *len)
{
	const char *data = getenv("PTD_TEST_DATA");
	char path[4096];
	char *text = NULL;

	if (!data)
		return NULL;
	snprintf(path, sizeof(path), "%s/../../conf/ptd.conf", data);
	if (ptd_file_read_all(path, 1 << 20, &text, len) < 0)
		return NULL;
	return text;
}

/* conf/ptd.conf documents every setting with its default: as shipped
 * (all commented) it changes nothing, and uncommented it sets every field
 * of a poisoned config back to exactly the defaults. */
static void test_shipped_conf_is_defaults(void)
{
	struct ptd_config def, c, p;
	struct ptd_diag d = { "" };
	size_t len = 0, settings = 0;
	_cleanup_free_ char *text = shipped_conf(&len);
	_cleanup_free_ char *out = NULL;
	const char *why;
	char *o;

	REQUIRE(text);
	ptd_config_defaults(&def);
	/* As shipped no setting is active: a poisoned config stays so. */
	config_poison(&c);
	p = c;
	CHECK_EQ_INT(ptd_config_parse(text, len, "ptd.conf", &c, &d), 0);
	CHECK(config_diff(&c, &p) == NULL);

	/* Uncomment "# key = value" lines (key: [a-z_]+). */
	out = malloc(len + 1);
	REQUIRE(out);
	o = out;
	for (char *t = text; *t;) {
		char *nl = strchr(t, '\n');
		size_t l = nl ? (size_t)(nl - t + 1) : strlen(t);
		size_t k = strncmp(t, "# ", 2) == 0 ?
			strspn(t + 2, "abcdefghijklmnopqrstuvwxyz_") : 0;

		if (k > 0 && strncmp(t + 2 + k, " = ", 3) == 0) {
			memcpy(o, t + 2, l - 2);
			o += l - 2;
			settings++;
		} else {
			memcpy(o, t, l);
			o += l;
		}
		t += l;
	}
	*o = '\0';
	config_poison(&c);
	CHECK_EQ_INT(parse_str(out, &c, &d), 0);
	CHECK_EQ_STR(d.msg, "");
	why = config_diff(&c, &def);
	if (why)
		CHECK_FAIL_("conf/ptd.conf disagrees with the defaults on %s",
			    why);
	CHECK_EQ_INT(settings, 20);
}

static void test_all_keys(void)
{
	struct ptd_config c;
	struct ptd_diag d;
	const char *text =
		"# comment\n"
		"\n"
		"   \t\n"
		"socket_path=/tmp/x.sock\n"
		"  socket_group   =   tracing  \n"
		"socket_mode = 600\n"
		"aux_buffer_size = 64M\r\n"
		"data_buffer_size = 8192\n"
		"software_source = false\n"
		"intel_pt_sysfs = /tmp/fake sysfs/intel_pt\n"
		"debug_dir = /opt/debug\n"
		"perf_map_dir = /run/maps\n"
		"max_sessions_per_user = 1\n"
		"max_subscribers_per_session = 1024\n"
		"max_connections = 65536\n"
		"subscriber_queue_size = 1G\n"
		"subscriber_stall_ms = 250\n"
		"max_request_size = 1k\n"
		"user_memory_limit = 3G\n"
		"max_watch_rules_per_user = 64\n"
		"max_triggers_per_user = 256\n"
		"max_decode_jobs = 64\n"
		"log_level = debug";	/* no final newline */

	ptd_config_defaults(&c);
	CHECK_EQ_INT(parse_str(text, &c, &d), 0);
	CHECK_EQ_STR(c.socket_path, "/tmp/x.sock");
	CHECK_EQ_STR(c.socket_group, "tracing");
	CHECK_EQ_INT(c.socket_mode, 0600);
	CHECK_EQ_U64(c.aux_buffer_size, 64 << 20);
	CHECK_EQ_U64(c.data_buffer_size, 8192);
	CHECK(!c.software_source);
	CHECK_EQ_STR(c.intel_pt_sysfs, "/tmp/fake sysfs/intel_pt");
	CHECK_EQ_STR(c.debug_dir, "/opt/debug");
	CHECK_EQ_STR(c.perf_map_dir, "/run/maps");
	CHECK_EQ_INT(c.max_sessions_per_user, 1);
	CHECK_EQ_INT(c.max_subscribers_per_session, 1024);
	CHECK_EQ_INT(c.max_connections, 65536);
	CHECK_EQ_U64(c.subscriber_queue_size, 1 << 30);
	CHECK_EQ_INT(c.subscriber_stall_ms, 250);
	CHECK_EQ_U64(c.max_request_size, 1024);
	CHECK_EQ_INT(c.log_level, PTD_LOG_DEBUG);
	CHECK_EQ_U64(c.user_memory_limit, 3ull << 30);
	CHECK_EQ_INT(c.max_watch_rules_per_user, 64);
	CHECK_EQ_INT(c.max_triggers_per_user, 256);
	CHECK_EQ_INT(c.max_decode_jobs, 64);
}

static void test_booleans_and_levels(void)
{
	static const struct { const char *v; bool b; } bools[] = {
		{ "yes", true }, { "true", true }, { "1", true },
		{ "no", false }, { "false", false }, { "0", false },
	};
	static const char *const levels[] = { "error", "warning", "info",
					      "debug" };
	struct ptd_config c;
	struct ptd_diag d;
	char line[128];

	for (size_t i = 0; i < PTD_ARRAY_SIZE(bools); i++) {
		ptd_config_defaults(&c);
		c.software_source = !bools[i].b;
		snprintf(line, sizeof(line), "software_source = %s\n",
			 bools[i].v);
		CHECK_EQ_INT(parse_str(line, &c, &d), 0);
		CHECK_EQ_INT(c.software_source, bools[i].b);
	}
	for (size_t i = 0; i < PTD_ARRAY_SIZE(levels); i++) {
		ptd_config_defaults(&c);
		snprintf(line, sizeof(line), "log_level=%s", levels[i]);
		CHECK_EQ_INT(parse_str(line, &c, &d), 0);
		CHECK_EQ_INT(c.log_level, (int)i);
	}
}

/* Each bad input: the error code and the message's expected text. */
static const struct {
	const char *text;
	int err;
	const char *msg;
} bad[] = {
	{ "# x\nfoo = 1\n", -PTD_EFORMAT, "t.conf:2: unknown key 'foo'" },
	{ "log_level = info\nlog_level = info\n", -PTD_EFORMAT,
	  "t.conf:2: log_level is set more than once" },
	{ "socket_mode 0660\n", -PTD_EFORMAT, "t.conf:1: missing '='" },
	{ "\n\nsocket_mode =   \n", -PTD_EFORMAT,
	  "t.conf:3: socket_mode: empty value" },
	{ " = 3\n", -PTD_EFORMAT, "t.conf:1: missing key before '='" },
	{ "software_source = maybe\n", -PTD_EFORMAT,
	  "software_source: 'maybe' is not a boolean" },
	{ "software_source = YES\n", -PTD_EFORMAT, "is not a boolean" },
	{ "aux_buffer_size = 4X\n", -PTD_EFORMAT,
	  "t.conf:1: aux_buffer_size: '4X' has an unknown size unit 'X'" },
	{ "aux_buffer_size = 4MB\n", -PTD_EFORMAT, "unknown size unit 'B'" },
	{ "aux_buffer_size = M\n", -PTD_EFORMAT, "'M' is not a size" },
	{ "aux_buffer_size = -4M\n", -PTD_EFORMAT, "'-4M' is not a size" },
	{ "aux_buffer_size = 12k\n", -PTD_EFORMAT,
	  "aux_buffer_size: 12k is not a power-of-two number of" },
	{ "data_buffer_size = 6000\n", -PTD_EFORMAT,
	  "data_buffer_size: 6000 is not a power-of-two number of" },
	{ "aux_buffer_size = 2G\n", -PTD_EFORMAT,
	  "aux_buffer_size: 2G is out of range (4096..1073741824 bytes)" },
	{ "aux_buffer_size = 99999999999999999999\n", -PTD_EFORMAT,
	  "is out of range" },
	{ "aux_buffer_size = 17179869184G\n", -PTD_EFORMAT,
	  "is out of range" },
	{ "subscriber_queue_size = 1k\n", -PTD_EFORMAT, "out of range" },
	{ "subscriber_stall_ms = 9\n", -PTD_EFORMAT,
	  "subscriber_stall_ms: 9 is out of range (10..3600000)" },
	{ "subscriber_stall_ms = 3600001\n", -PTD_EFORMAT, "out of range" },
	{ "subscriber_stall_ms = 1s\n", -PTD_EFORMAT,
	  "subscriber_stall_ms: '1s' is not a number" },
	{ "max_request_size = 32M\n", -PTD_EFORMAT, "out of range" },
	{ "max_sessions_per_user = 0\n", -PTD_EFORMAT,
	  "max_sessions_per_user: 0 is out of range (1..1024)" },
	{ "max_watch_rules_per_user = 65\n", -PTD_EFORMAT,
	  "max_watch_rules_per_user: 65 is out of range (1..64)" },
	{ "max_triggers_per_user = 0\n", -PTD_EFORMAT,
	  "max_triggers_per_user: 0 is out of range (1..256)" },
	{ "max_decode_jobs = 0\n", -PTD_EFORMAT,
	  "max_decode_jobs: 0 is out of range (1..64)" },
	{ "max_decode_jobs = 65\n", -PTD_EFORMAT,
	  "max_decode_jobs: 65 is out of range (1..64)" },
	{ "max_decode_jobs = -1\n", -PTD_EFORMAT, "max_decode_jobs: " },
	{ "max_decode_jobs = two\n", -PTD_EFORMAT,
	  "max_decode_jobs: 'two' is not a number" },
	{ "max_connections = 65537\n", -PTD_EFORMAT,
	  "max_connections: 65537 is out of range (1..65536)" },
	{ "max_connections = 4294967297\n", -PTD_EFORMAT, "out of range" },
	{ "max_connections = 8a\n", -PTD_EFORMAT,
	  "max_connections: '8a' is not a number" },
	{ "max_connections = +8\n", -PTD_EFORMAT, "is not a number" },
	{ "max_connections = 0x10\n", -PTD_EFORMAT, "is not a number" },
	{ "socket_path = run/ptd.sock\n", -PTD_EFORMAT,
	  "socket_path: 'run/ptd.sock' is not an absolute path" },
	{ "intel_pt_sysfs = sys/intel_pt\n", -PTD_EFORMAT,
	  "intel_pt_sysfs: 'sys/intel_pt' is not an absolute path" },
	{ "socket_mode = 0888\n", -PTD_EFORMAT,
	  "socket_mode: '0888' is not an octal mode" },
	{ "socket_mode = 1777\n", -PTD_EFORMAT, "is not an octal mode" },
	{ "socket_mode = 00660\n", -PTD_EFORMAT, "is not an octal mode" },
	{ "socket_mode = rw\n", -PTD_EFORMAT, "is not an octal mode" },
	{ "socket_group = -ptd\n", -PTD_EFORMAT, "not a valid group name" },
	{ "socket_group = a b\n", -PTD_EFORMAT, "not a valid group name" },
	{ "log_level = verbose\n", -PTD_EFORMAT,
	  "log_level: 'verbose' is not a log level" },
	{ "user_memory_limit = 512k\n", -PTD_EFORMAT,
	  "t.conf:1: user_memory_limit: 512k is out of range "
	  "(1048576..1099511627776 bytes)" },
	{ "user_memory_limit = 2048G\n", -PTD_EFORMAT, "out of range" },
	{ "user_memory_limit = 1.5G\n", -PTD_EFORMAT, "is not a size" },
	/* less than one traced thread's buffers, however they are set */
	{ "aux_buffer_size = 4M\ndata_buffer_size = 512k\n"
	  "subscriber_queue_size = 4M\nuser_memory_limit = 16M\n",
	  -PTD_EFORMAT,
	  "t.conf: user_memory_limit (16 MiB) is less than one traced "
	  "thread and one subscriber hold (8.5 MiB: aux_buffer_size + "
	  "data_buffer_size + its decoder's buffer, and 8 MiB: 2 x "
	  "subscriber_queue_size)" },
	{ "aux_buffer_size = 1G\nuser_memory_limit = 1G\n", -PTD_EFORMAT,
	  "user_memory_limit (1 GiB) is less than one traced thread and "
	  "one subscriber hold (2.0 GiB" },
	{ "subscriber_queue_size = 1G\nuser_memory_limit = 1G\n",
	  -PTD_EFORMAT, "and 2 GiB: 2 x subscriber_queue_size)" },
	{ "foo = 1\nbar = 2\nlog_level = x\n", -PTD_EFORMAT,
	  "t.conf:1: unknown key 'foo' (and 2 more errors)" },
	{ "foo = 1\nlog_level = info\nbar = 2\n", -PTD_EFORMAT,
	  "t.conf:1: unknown key 'foo' (and 1 more error)" },
};

static void test_errors(void)
{
	struct ptd_config c, p;
	struct ptd_diag d;

	for (size_t i = 0; i < PTD_ARRAY_SIZE(bad); i++) {
		config_poison(&c);
		p = c;
		CHECK_EQ_INT(parse_str(bad[i].text, &c, &d), bad[i].err);
		CHECK_CONTAINS(d.msg, bad[i].msg);
		/* @c is unchanged on failure, even by the good lines. */
		CHECK(config_diff(&c, &p) == NULL);
	}
}

static void test_socket_path_length(void)
{
	struct ptd_config c;
	struct ptd_diag d;
	char text[300], path[200];

	/* 107 bytes + NUL fit in sun_path; 108 do not. */
	memset(path, 'a', sizeof(path));
	path[0] = '/';
	path[107] = '\0';
	snprintf(text, sizeof(text), "socket_path = %s\n", path);
	ptd_config_defaults(&c);
	CHECK_EQ_INT(parse_str(text, &c, &d), 0);
	CHECK_EQ_INT(strlen(c.socket_path), 107);
	path[107] = 'a';
	path[108] = '\0';
	snprintf(text, sizeof(text), "socket_path = %s\n", path);
	CHECK_EQ_INT(parse_str(text, &c, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.conf:1: socket_path: path is 108 bytes, "
			      "at most 107 fit in a Unix socket address");
}

static void test_limits(void)
{
	struct ptd_config c, p;
	struct ptd_diag d;
	size_t n = 5000;
	_cleanup_free_ char *big = malloc((1 << 20) + 2);

	REQUIRE(big);
	/* A 4097-byte comment line is refused, a 4096-byte one fine. */
	memset(big, '#', n);
	big[4096] = '\n';
	big[4097] = '\0';
	ptd_config_defaults(&c);
	CHECK_EQ_INT(parse_str(big, &c, &d), 0);
	memset(big, '#', n);
	big[4097] = '\n';
	big[4098] = '\0';
	config_poison(&c);
	p = c;
	CHECK_EQ_INT(parse_str(big, &c, &d), -PTD_ELIMIT);
	CHECK_CONTAINS(d.msg, "t.conf:1: line is longer than 4096 bytes");
	CHECK(config_diff(&c, &p) == NULL);

	/* 1 MiB of blank lines is fine, one byte more is not. */
	memset(big, '\n', (1 << 20) + 1);
	CHECK_EQ_INT(ptd_config_parse(big, 1 << 20, "t.conf", &c, &d), 0);
	CHECK_EQ_INT(ptd_config_parse(big, (1 << 20) + 1, "t.conf", &c, &d),
		     -PTD_ELIMIT);
	CHECK_CONTAINS(d.msg, "t.conf: 1048577 bytes, larger than");

	/* NUL inside the text (len says it is part of the input). */
	CHECK_EQ_INT(ptd_config_parse("log_level = info\0x\n", 19, "t.conf",
				      &c, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.conf:1: NUL byte");
	/* Not NUL-terminated: only @len bytes are read. */
	ptd_config_defaults(&c);
	CHECK_EQ_INT(ptd_config_parse("log_level = errorXXXX", 17, "t.conf",
				      &c, &d), 0);
	CHECK_EQ_INT(c.log_level, PTD_LOG_ERROR);
	/* The memory limit's bounds; one thread's buffers exactly fit. */
	ptd_config_defaults(&c);
	CHECK_EQ_INT(parse_str("user_memory_limit = 1024G\n", &c, &d), 0);
	CHECK_EQ_U64(c.user_memory_limit, 1ull << 40);
	CHECK_EQ_INT(parse_str("aux_buffer_size = 4k\ndata_buffer_size = 4k\n"
			       "subscriber_queue_size = 4k\n"
			       "user_memory_limit = 1043k\n", &c, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "is less than one traced thread and one "
			      "subscriber hold");
	ptd_config_defaults(&c);
	CHECK_EQ_INT(parse_str("aux_buffer_size = 4k\ndata_buffer_size = 4k\n"
			       "subscriber_queue_size = 4k\n"
			       "user_memory_limit = 1044k\n", &c, &d), 0);
	CHECK_EQ_U64(c.user_memory_limit, 1044 << 10);
	/* Empty input: nothing changes. */
	CHECK_EQ_INT(ptd_config_parse("", 0, "t.conf", &c, &d), 0);
}

static void test_load(void)
{
	char dir[] = "/tmp/ptd-test-config-XXXXXX";
	char path[256];
	struct ptd_config c;
	struct ptd_diag d = { "" };
	_cleanup_free_ char *big = calloc(1, (1 << 20) + 1);

	REQUIRE(big);
	REQUIRE(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/ptd.conf", dir);

	ptd_config_defaults(&c);
	CHECK_EQ_INT(ptd_config_load(path, &c, &d), -ENOENT);
	CHECK_CONTAINS(d.msg, path);
	CHECK_CONTAINS(d.msg, "No such file");

	CHECK_EQ_INT(ptd_file_write_atomic(path, "max_connections = 3\n",
					   20), 0);
	CHECK_EQ_INT(ptd_config_load(path, &c, &d), 0);
	CHECK_EQ_INT(c.max_connections, 3);

	CHECK_EQ_INT(ptd_file_write_atomic(path, "\nmax_connections = x\n",
					   21), 0);
	CHECK_EQ_INT(ptd_config_load(path, &c, &d), -PTD_EFORMAT);
	snprintf(big, 512, "%s:2: max_connections: 'x' is not a number",
		 path);
	CHECK_CONTAINS(d.msg, big);

	memset(big, '\n', (1 << 20) + 1);
	CHECK_EQ_INT(ptd_file_write_atomic(path, big, (1 << 20) + 1), 0);
	CHECK_EQ_INT(ptd_config_load(path, &c, &d), -PTD_ELIMIT);
	CHECK_CONTAINS(d.msg, "larger than the 1048576-byte limit");

	(void)ptd_rm_rf(dir);
}

int main(void)
{
	RUN(test_defaults);
	RUN(test_level_names);
	RUN(test_shipped_conf_is_defaults);
	RUN(test_all_keys);
	RUN(test_booleans_and_levels);
	RUN(test_errors);
	RUN(test_socket_path_length);
	RUN(test_limits);
	RUN(test_load);
	return check_done();
}
