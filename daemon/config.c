/* SPDX-License-Identifier: MIT */
#include "daemon/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/strutil.h"
#include "daemon/bpf/trigger-abi.h"
#include "daemon/bpf/watch-abi.h"
#include "daemon/memlimit.h"
#include "decode/decoder.h"

#define CONF_LINE_MAX 4096
#define CONF_FILE_MAX (1024 * 1024)

void ptd_config_defaults(struct ptd_config *c)
{
	memset(c, 0, sizeof(*c));
	(void)ptd_strlcpy(c->socket_path, "/run/ptd/ptd.sock",
			  sizeof(c->socket_path));
	(void)ptd_strlcpy(c->socket_group, "ptd", sizeof(c->socket_group));
	c->socket_mode = 0660;
	c->aux_buffer_size = 4u << 20;
	c->data_buffer_size = 512u << 10;
	c->software_source = true;
	(void)ptd_strlcpy(c->debug_dir, "/usr/lib/debug", sizeof(c->debug_dir));
	(void)ptd_strlcpy(c->perf_map_dir, "/tmp", sizeof(c->perf_map_dir));
	(void)ptd_strlcpy(c->intel_pt_sysfs,
			  "/sys/bus/event_source/devices/intel_pt",
			  sizeof(c->intel_pt_sysfs));
	c->max_sessions_per_user = 8;
	c->max_watch_rules_per_user = 4;
	c->max_triggers_per_user = 8;
	c->max_decode_jobs = 4;
	c->max_subscribers_per_session = 16;
	c->max_connections = 128;
	c->subscriber_queue_size = 4u << 20;
	c->subscriber_stall_ms = 30000;
	c->max_request_size = 64u << 10;
	c->user_memory_limit = 1ull << 30;
	c->log_level = PTD_LOG_INFO;
}

const char *ptd_log_level_name(enum ptd_log_level l)
{
	switch (l) {
	case PTD_LOG_ERROR:
		return "error";
	case PTD_LOG_WARNING:
		return "warning";
	case PTD_LOG_INFO:
		return "info";
	case PTD_LOG_DEBUG:
		return "debug";
	}
	return "?";
}

/* Where the line being parsed came from, for messages. */
struct conf_ctx {
	const char *origin;
	unsigned line;
	struct ptd_diag *diag;
};

static int conf_err(const struct conf_ctx *x, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int conf_err(const struct conf_ctx *x, int err, const char *fmt, ...)
{
	char what[PTD_DIAG_MAX];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return ptd_diagf(x->diag, err, "%s:%u: %s", x->origin, x->line, what);
}

/* ---- value parsers: each gets the key (for messages), the value and its
 * field; a failure leaves the field alone. ---- */

static int parse_path(const struct conf_ctx *x, const char *key,
		      const char *v, char *dst, size_t cap)
{
	if (v[0] != '/')
		return conf_err(x, -PTD_EFORMAT,
				"%s: '%s' is not an absolute path", key, v);
	if (strlen(v) >= cap)
		return conf_err(x, -PTD_EFORMAT,
				"%s: path is %zu bytes, at most %zu fit%s",
				key, strlen(v), cap - 1,
				cap == PTD_CONF_PATH_MAX ?
					" in a Unix socket address" : "");
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

/* A group name as useradd accepts it, or a numeric gid. */
static int parse_group(const struct conf_ctx *x, const char *key,
		       const char *v, char *dst, size_t cap)
{
	if (strlen(v) >= cap)
		return conf_err(x, -PTD_EFORMAT, "%s: '%s' is too long", key,
				v);
	for (const char *p = v; *p; p++) {
		if (isalnum((unsigned char)*p) || *p == '_' || *p == '.' ||
		    (*p == '-' && p != v))
			continue;
		return conf_err(x, -PTD_EFORMAT,
				"%s: '%s' is not a valid group name", key, v);
	}
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

static int parse_mode(const struct conf_ctx *x, const char *key,
		      const char *v, unsigned *dst)
{
	unsigned m = 0;

	if (!*v || strlen(v) > 4)
		goto bad;
	for (const char *p = v; *p; p++) {
		if (*p < '0' || *p > '7')
			goto bad;
		m = m * 8 + (unsigned)(*p - '0');
	}
	if (m > 0777)
		goto bad;
	*dst = m;
	return 0;
bad:
	return conf_err(x, -PTD_EFORMAT,
			"%s: '%s' is not an octal mode between 0 and 0777",
			key, v);
}

static int parse_bool(const struct conf_ctx *x, const char *key,
		      const char *v, bool *dst)
{
	static const char *const yes[] = { "yes", "true", "1" };
	static const char *const no[] = { "no", "false", "0" };

	for (size_t i = 0; i < PTD_ARRAY_SIZE(yes); i++) {
		if (strcmp(v, yes[i]) == 0) {
			*dst = true;
			return 0;
		}
		if (strcmp(v, no[i]) == 0) {
			*dst = false;
			return 0;
		}
	}
	return conf_err(x, -PTD_EFORMAT,
			"%s: '%s' is not a boolean (yes/no/true/false/1/0)",
			key, v);
}

static int parse_uint(const struct conf_ctx *x, const char *key,
		      const char *v, unsigned lo, unsigned hi, unsigned *dst)
{
	uint64_t n;
	int r = ptd_parse_u64(v, 10, &n);

	if (r == -EINVAL)
		return conf_err(x, -PTD_EFORMAT, "%s: '%s' is not a number",
				key, v);
	if (r < 0 || n < lo || n > hi)
		return conf_err(x, -PTD_EFORMAT,
				"%s: %s is out of range (%u..%u)", key, v, lo,
				hi);
	*dst = (unsigned)n;
	return 0;
}

/* A size with an optional k/M/G unit in [@lo, @hi]; with @pow2_pages it
 * must also be a power-of-two number of pages (what perf mmap wants for
 * the data ring and the AUX area). */
static int parse_size(const struct conf_ctx *x, const char *key,
		      const char *v, uint64_t lo, uint64_t hi,
		      bool pow2_pages, size_t *dst)
{
	uint64_t n, page = (uint64_t)sysconf(_SC_PAGESIZE);
	size_t len = strlen(v);
	int r;

	/* ptd_parse_size takes any trailing k/m/g; refuse units it does not
	 * know with a clear message rather than "not a number". */
	if (len > 0 && isalpha((unsigned char)v[len - 1]) &&
	    !strchr("kKmMgG", v[len - 1]))
		return conf_err(x, -PTD_EFORMAT,
				"%s: '%s' has an unknown size unit '%c' "
				"(use k, M or G)", key, v, v[len - 1]);
	r = ptd_parse_size(v, &n);
	if (r == -EINVAL)
		return conf_err(x, -PTD_EFORMAT,
				"%s: '%s' is not a size (a number with an "
				"optional k, M or G unit)", key, v);
	if (r < 0 || n < lo || n > hi)
		return conf_err(x, -PTD_EFORMAT,
				"%s: %s is out of range (%llu..%llu bytes)",
				key, v, (unsigned long long)lo,
				(unsigned long long)hi);
	if (pow2_pages && (n % page != 0 || ((n / page) & (n / page - 1))))
		return conf_err(x, -PTD_EFORMAT,
				"%s: %s is not a power-of-two number of %llu-"
				"byte pages", key, v,
				(unsigned long long)page);
	*dst = (size_t)n;
	return 0;
}

static int parse_level(const struct conf_ctx *x, const char *key,
		       const char *v, enum ptd_log_level *dst)
{
	static const enum ptd_log_level all[] = {
		PTD_LOG_ERROR, PTD_LOG_WARNING, PTD_LOG_INFO, PTD_LOG_DEBUG,
	};

	for (size_t i = 0; i < PTD_ARRAY_SIZE(all); i++) {
		if (strcmp(v, ptd_log_level_name(all[i])) == 0) {
			*dst = all[i];
			return 0;
		}
	}
	return conf_err(x, -PTD_EFORMAT,
			"%s: '%s' is not a log level (error, warning, info, "
			"debug)", key, v);
}

/* ---- keys ---- */

enum conf_key {
	K_SOCKET_PATH,
	K_SOCKET_GROUP,
	K_SOCKET_MODE,
	K_AUX_BUFFER_SIZE,
	K_DATA_BUFFER_SIZE,
	K_SOFTWARE_SOURCE,
	K_INTEL_PT_SYSFS,
	K_MAX_SESSIONS_PER_USER,
	K_MAX_SUBSCRIBERS_PER_SESSION,
	K_MAX_CONNECTIONS,
	K_SUBSCRIBER_QUEUE_SIZE,
	K_SUBSCRIBER_STALL_MS,
	K_MAX_REQUEST_SIZE,
	K_LOG_LEVEL,
	K_USER_MEMORY_LIMIT,
	K_MAX_WATCH_RULES_PER_USER,
	K_MAX_TRIGGERS_PER_USER,
	K_MAX_DECODE_JOBS,
	K_DEBUG_DIR,
	K_PERF_MAP_DIR,
	K_COUNT,
};

static const char *const key_names[K_COUNT] = {
	[K_SOCKET_PATH] = "socket_path",
	[K_SOCKET_GROUP] = "socket_group",
	[K_SOCKET_MODE] = "socket_mode",
	[K_AUX_BUFFER_SIZE] = "aux_buffer_size",
	[K_DATA_BUFFER_SIZE] = "data_buffer_size",
	[K_SOFTWARE_SOURCE] = "software_source",
	[K_INTEL_PT_SYSFS] = "intel_pt_sysfs",
	[K_MAX_SESSIONS_PER_USER] = "max_sessions_per_user",
	[K_MAX_SUBSCRIBERS_PER_SESSION] = "max_subscribers_per_session",
	[K_MAX_CONNECTIONS] = "max_connections",
	[K_SUBSCRIBER_QUEUE_SIZE] = "subscriber_queue_size",
	[K_SUBSCRIBER_STALL_MS] = "subscriber_stall_ms",
	[K_MAX_REQUEST_SIZE] = "max_request_size",
	[K_LOG_LEVEL] = "log_level",
	[K_USER_MEMORY_LIMIT] = "user_memory_limit",
	[K_MAX_WATCH_RULES_PER_USER] = "max_watch_rules_per_user",
	[K_MAX_TRIGGERS_PER_USER] = "max_triggers_per_user",
	[K_MAX_DECODE_JOBS] = "max_decode_jobs",
	[K_DEBUG_DIR] = "debug_dir",
	[K_PERF_MAP_DIR] = "perf_map_dir",
};

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

static int set_key(const struct conf_ctx *x, enum conf_key k, const char *v,
		   struct ptd_config *c)
{
	const char *n = key_names[k];

	/* No default: -Wswitch-enum flags a key without a parser. */
	switch (k) {
	case K_SOCKET_PATH:
		return parse_path(x, n, v, c->socket_path,
				  sizeof(c->socket_path));
	case K_SOCKET_GROUP:
		return parse_group(x, n, v, c->socket_group,
				   sizeof(c->socket_group));
	case K_SOCKET_MODE:
		return parse_mode(x, n, v, &c->socket_mode);
	case K_AUX_BUFFER_SIZE:
		return parse_size(x, n, v, 4 * KiB, 1 * GiB, true,
				  &c->aux_buffer_size);
	case K_DATA_BUFFER_SIZE:
		return parse_size(x, n, v, 4 * KiB, 256 * MiB, true,
				  &c->data_buffer_size);
	case K_SOFTWARE_SOURCE:
		return parse_bool(x, n, v, &c->software_source);
	case K_DEBUG_DIR:
		return parse_path(x, n, v, c->debug_dir, sizeof(c->debug_dir));
	case K_PERF_MAP_DIR:
		return parse_path(x, n, v, c->perf_map_dir,
				  sizeof(c->perf_map_dir));
	case K_INTEL_PT_SYSFS:
		return parse_path(x, n, v, c->intel_pt_sysfs,
				  sizeof(c->intel_pt_sysfs));
	case K_MAX_SESSIONS_PER_USER:
		return parse_uint(x, n, v, 1, 1024,
				  &c->max_sessions_per_user);
	case K_MAX_SUBSCRIBERS_PER_SESSION:
		return parse_uint(x, n, v, 1, 1024,
				  &c->max_subscribers_per_session);
	case K_MAX_CONNECTIONS:
		return parse_uint(x, n, v, 1, 65536, &c->max_connections);
	case K_SUBSCRIBER_QUEUE_SIZE:
		return parse_size(x, n, v, 4 * KiB, 1 * GiB, false,
				  &c->subscriber_queue_size);
	case K_SUBSCRIBER_STALL_MS:
		return parse_uint(x, n, v, 10, 3600000,
				  &c->subscriber_stall_ms);
	case K_MAX_REQUEST_SIZE:
		return parse_size(x, n, v, 1 * KiB, 16 * MiB, false,
				  &c->max_request_size);
	case K_LOG_LEVEL:
		return parse_level(x, n, v, &c->log_level);
	case K_USER_MEMORY_LIMIT: {
		size_t lim;
		int r = parse_size(x, n, v, 1 * MiB, 1024 * GiB, false, &lim);

		if (r == 0)
			c->user_memory_limit = lim;
		return r;
	}
	case K_MAX_WATCH_RULES_PER_USER:
		return parse_uint(x, n, v, 1, PTD_WATCH_SLOTS,
				  &c->max_watch_rules_per_user);
	case K_MAX_TRIGGERS_PER_USER:
		return parse_uint(x, n, v, 1, PTD_TRIGGERS_MAX,
				  &c->max_triggers_per_user);
	case K_MAX_DECODE_JOBS:
		return parse_uint(x, n, v, 1, PTD_DECODE_MAX_JOBS,
				  &c->max_decode_jobs);
	case K_COUNT:
		break;
	}
	return conf_err(x, -PTD_EFORMAT, "internal: key %d", (int)k);
}

static void trim(const char **b, const char **e)
{
	while (*b < *e && isspace((unsigned char)**b))
		(*b)++;
	while (*e > *b && isspace((unsigned char)(*e)[-1]))
		(*e)--;
}

/* One line, [@b, @e) without its newline. @seen tracks repeated keys. */
static int parse_line(const struct conf_ctx *x, const char *b, const char *e,
		      bool seen[K_COUNT], struct ptd_config *c)
{
	char key[64], val[CONF_LINE_MAX + 1];
	const char *eq, *kb, *ke, *vb, *ve;

	if ((size_t)(e - b) > CONF_LINE_MAX)
		return conf_err(x, -PTD_ELIMIT,
				"line is longer than %d bytes", CONF_LINE_MAX);
	if (memchr(b, '\0', (size_t)(e - b)))
		return conf_err(x, -PTD_EFORMAT, "NUL byte in line");
	trim(&b, &e);
	if (b == e || *b == '#')
		return 0;
	eq = memchr(b, '=', (size_t)(e - b));
	if (!eq)
		return conf_err(x, -PTD_EFORMAT,
				"missing '=' (expected 'key = value')");
	kb = b, ke = eq, vb = eq + 1, ve = e;
	trim(&kb, &ke);
	trim(&vb, &ve);
	if (kb == ke)
		return conf_err(x, -PTD_EFORMAT, "missing key before '='");
	if ((size_t)(ke - kb) >= sizeof(key))
		return conf_err(x, -PTD_EFORMAT, "unknown key '%.*s...'",
				(int)sizeof(key) - 1, kb);
	memcpy(key, kb, (size_t)(ke - kb));
	key[ke - kb] = '\0';
	for (int k = 0; k < K_COUNT; k++) {
		if (strcmp(key, key_names[k]) != 0)
			continue;
		if (seen[k])
			return conf_err(x, -PTD_EFORMAT,
					"%s is set more than once", key);
		seen[k] = true;
		if (vb == ve)
			return conf_err(x, -PTD_EFORMAT, "%s: empty value",
					key);
		memcpy(val, vb, (size_t)(ve - vb));
		val[ve - vb] = '\0';
		return set_key(x, (enum conf_key)k, val, c);
	}
	return conf_err(x, -PTD_EFORMAT, "unknown key '%s'", key);
}

/* Settings that must agree with each other, once every line is read:
 * the memory limit holds one traced thread and one subscriber. */
static int check_limits(const struct conf_ctx *x, const struct ptd_config *c)
{
	uint64_t one = ptd_memlimit_thread_bytes(c->data_buffer_size,
						 c->aux_buffer_size, false);
	uint64_t sub = 2 * (uint64_t)c->subscriber_queue_size;
	char a[32], b[32], q[32];

	if (c->user_memory_limit >= one + sub)
		return 0;
	return ptd_diagf(x->diag, -PTD_EFORMAT,
			 "%s: user_memory_limit (%s) is less than one traced "
			 "thread and one subscriber hold (%s: aux_buffer_size "
			 "+ data_buffer_size + its decoder's buffer, and %s: "
			 "2 x subscriber_queue_size)", x->origin,
			 ptd_memlimit_fmt(c->user_memory_limit, a, sizeof(a)),
			 ptd_memlimit_fmt(one, b, sizeof(b)),
			 ptd_memlimit_fmt(sub, q, sizeof(q)));
}

int ptd_config_parse(const char *text, size_t len, const char *origin,
		     struct ptd_config *c, struct ptd_diag *diag)
{
	struct conf_ctx x = { .origin = origin ? origin : "(config)",
			      .line = 0, .diag = diag };
	struct ptd_config tmp = *c;
	bool seen[K_COUNT] = { false };
	const char *p = text, *end = text + len;
	unsigned errors = 0;
	int first = 0, r;

	if (len > CONF_FILE_MAX)
		return ptd_diagf(diag, -PTD_ELIMIT,
				 "%s: %zu bytes, larger than the %d-byte limit",
				 x.origin, len, CONF_FILE_MAX);
	/* Every line is checked so the message can say how many errors
	 * there are; the first one is described. */
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;

		x.line++;
		x.diag = errors ? NULL : diag;
		r = parse_line(&x, p, le, seen, &tmp);
		if (r < 0 && errors++ == 0)
			first = r;
		p = nl ? nl + 1 : end;
	}
	if (errors > 1 && diag) {
		size_t n = strlen(diag->msg);

		(void)snprintf(diag->msg + n, sizeof(diag->msg) - n,
			       " (and %u more error%s)", errors - 1,
			       errors == 2 ? "" : "s");
	}
	if (errors)
		return first;
	x.diag = diag;
	r = check_limits(&x, &tmp);
	if (r < 0)
		return r;
	*c = tmp;
	return 0;
}

int ptd_config_load(const char *path, struct ptd_config *c,
		    struct ptd_diag *diag)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r;

	r = ptd_file_read_all(path, CONF_FILE_MAX, &text, &len);
	if (r == -PTD_ELIMIT)
		return ptd_diagf(diag, r,
				 "%s: larger than the %d-byte limit", path,
				 CONF_FILE_MAX);
	if (r < 0)
		return ptd_diagf(diag, r, "%s: cannot read: %s", path,
				 ptd_strerror(r));
	return ptd_config_parse(text, len, path, c, diag);
}
