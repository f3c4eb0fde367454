/* SPDX-License-Identifier: MIT */
/*
 * first_exec and counters records from ptd (attach's options.counters,
 * replay's "counters"; doc/protocol.md, "first_exec and counters"):
 *  - a replay of a capture of a threaded program: the last counters
 *    snapshot (before bye) is byte for byte the counters lines `ptctl
 *    decode --records counters` gives for the same capture and top, and
 *    the first_exec lines are the offline decode's;
 *  - a live session of prog-attach (threads, the vDSO, an exec): the
 *    final counts per instruction equal the ground truth's counts (the
 *    session's capture), the first_exec IPs the truth's distinct IPs;
 *    the periodic snapshots (every 100 ms) never count less than the one
 *    before; `ptctl top` ends with the final snapshot's functions and
 *    `ptctl top --once` prints one view whose counts are at most those;
 *  - bad counters options are refused, naming the field, and a session
 *    that does not count refuses first_exec and counters.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "e2e/daemon-harness.h"
#include "e2e/daemon-client.h"
#include "e2e/run-cmd.h"
#include "e2e/subscribed.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "swpt/capture.h"

static char ptctl[1100];

static uint64_t hexkey(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	uint64_t n = 0;

	if (cJSON_IsString(v))
		n = strtoull(v->valuestring, NULL, 16);
	return n;
}

static const char *strkey(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* The lines of @text of record type @type, joined (malloc'd). */
static char *lines_of(const char *text, const char *type)
{
	char *out = malloc(strlen(text) + 1), *p = out;

	if (!out)
		abort();
	while (*text) {
		const char *nl = strchr(text, '\n');
		size_t n = nl ? (size_t)(nl - text) + 1 : strlen(text);

		if (is_type(text, type)) {
			memcpy(p, text, n);
			p += n;
		}
		text += n;
	}
	*p = '\0';
	return out;
}

/* The last counters snapshot of @text: from its last total line on
 * (malloc'd; "" if none). */
static char *last_snapshot(const char *text)
{
	char *all = lines_of(text, "counters");
	const char *at = all, *p = all;

	while ((p = strstr(p, "{\"type\":\"counters\"")) != NULL) {
		if (strstr(p, "\"of\":\"total\"") &&
		    strstr(p, "\"of\":\"total\"") < strchr(p, '\n'))
			at = p;
		p++;
	}
	memmove(all, at, strlen(at) + 1);
	return all;
}

static char *run_out(const char *const *args)
{
	struct run r = run_cmd(ptctl, args, tmpdir);
	char *out = r.out;

	if (r.status != 0)
		CHECK_FAIL_("ptctl %s: %d: %s", args[0], r.status,
			    r.err ? r.err : "");
	r.out = NULL;
	run_free(&r);
	return out;
}

/* ptd's last snapshot and first executions of a replay equal the offline
 * decode's. */
static void test_replay(void)
{
	char prog[1100], dir[1100], out[1100];
	const char *trace[] = { "trace", "--out", dir, "--start", "entry",
				"--no-decode", "--quiet-target", "--", prog,
				NULL };
	const char *decode[] = { "decode", "--records",
				 "first_exec,counters", "--top", "7",
				 "--symbols", dir, NULL };
	const char *replay[] = { "replay", "--kinds", "first_exec,counters",
				 "--top", "7", "--symbols", dir, NULL };
	struct daemon dm;
	char *off, *text = NULL, *a, *b;
	size_t len;

	(void)snprintf(prog, sizeof(prog), "%s/prog-threads", progs);
	(void)snprintf(dir, sizeof(dir), "%s/threads", tmpdir);
	(void)snprintf(out, sizeof(out), "%s/replay.out", tmpdir);
	free(run_out(trace));
	off = run_out(decode);
	REQUIRE(off);
	REQUIRE(daemon_start(&dm, "replay", ""));
	CHECK_EQ_INT(wait_exit(ptctl_spawn(&dm, out, NULL, replay)), 0);
	REQUIRE(ptd_file_read_all(out, 1u << 30, &text, &len) == 0);
	a = last_snapshot(off);
	b = last_snapshot(text);
	CHECK(strlen(a) > 0);
	CHECK(strstr(a, "\"of\":\"function\"") != NULL);
	if (strcmp(a, b))
		CHECK_FAIL_("replay's last snapshot:\n%s\noffline:\n%s", b, a);
	free(a);
	free(b);
	a = lines_of(off, "first_exec");
	b = lines_of(text, "first_exec");
	CHECK(strlen(a) > 0);
	CHECK(!strcmp(a, b));
	/* one snapshot only (no every_ms): the last, right before bye */
	{
		const char *t = strstr(text, "\"of\":\"total\"");

		CHECK(t && !strstr(t + 1, "\"of\":\"total\""));
	}
	free(a);
	free(b);
	free(off);
	free(text);
	CHECK_EQ_INT(daemon_stop(&dm), 0);
}

/* Hot traces through ptd: a replay that counts builds them as the offline
 * decode does -- prog-jitloop's loops form traces, and the JIT loop's
 * trace is withdrawn when its code is rewritten, then forms again. */
static void test_replay_traces(void)
{
	char prog[1100], dir[1100], out[1100];
	const char *trace[] = { "trace", "--out", dir, "--start", "entry",
				"--no-decode", "--quiet-target", "--", prog,
				NULL };
	const char *decode[] = { "decode", "--records", "insn,trace", dir,
				 NULL };
	const char *replay[] = { "replay", "--kinds", "insn,trace,"
				 "trace_withdrawn", dir, NULL };
	struct daemon dm;
	char *off, *text = NULL, *a, *b;
	size_t len;

	(void)snprintf(prog, sizeof(prog), "%s/prog-jitloop", progs);
	(void)snprintf(dir, sizeof(dir), "%s/jitloop", tmpdir);
	(void)snprintf(out, sizeof(out), "%s/traces.out", tmpdir);
	free(run_out(trace));
	off = run_out(decode);
	REQUIRE(off);
	REQUIRE(daemon_start(&dm, "traces", ""));
	CHECK_EQ_INT(wait_exit(ptctl_spawn(&dm, out, NULL, replay)), 0);
	REQUIRE(ptd_file_read_all(out, 1u << 30, &text, &len) == 0);
	a = lines_of(off, "trace");
	b = lines_of(text, "trace");
	CHECK(strstr(a, "\"type\":\"trace\"") != NULL);
	if (strcmp(a, b))
		CHECK_FAIL_("replay's traces:\n%s\noffline:\n%s", b, a);
	fprintf(stderr, "  %zu bytes of trace lines, the same through ptd\n",
		strlen(a));
	free(a);
	free(b);
	a = lines_of(off, "trace_withdrawn");
	b = lines_of(text, "trace_withdrawn");
	CHECK(strlen(a) > 0);
	CHECK(!strcmp(a, b));
	free(a);
	free(b);
	free(off);
	free(text);
	CHECK_EQ_INT(daemon_stop(&dm), 0);
}

/* The table's growth is charged to the user's memory limit: a replay
 * left 128 KiB under it counts what fits and says how much it did not
 * ("uncounted"), all executions accounted for. */
static void test_limit(void)
{
	char dir[1100], out[1100];
	const char *decode[] = { "decode", "--records", "counters", "--top",
				 "1", dir, NULL };
	const char *replay[] = { "replay", "--kinds", "counters", "--top", "1",
				 dir, NULL };
	struct daemon dm;
	char *off, *text = NULL, *a, *b;
	cJSON *ta, *tb;
	size_t len;

	(void)snprintf(dir, sizeof(dir), "%s/threads", tmpdir);
	(void)snprintf(out, sizeof(out), "%s/limit.out", tmpdir);
	off = run_out(decode);
	REQUIRE(off);
	/* the replay's decoder (64 MiB) and one subscriber's two queues
	 * (2 x 1 MiB), and 128 KiB */
	REQUIRE(daemon_start(&dm, "limit", "subscriber_queue_size = 1048576\n"
			     "user_memory_limit = 69337088\n"));
	CHECK_EQ_INT(wait_exit(ptctl_spawn(&dm, out, NULL, replay)), 0);
	REQUIRE(ptd_file_read_all(out, 1u << 30, &text, &len) == 0);
	a = last_snapshot(off);
	b = last_snapshot(text);
	ta = cJSON_Parse(a);	/* (the total line: the first) */
	tb = cJSON_ParseWithLength(b, strcspn(b, "\n"));
	REQUIRE(ta && tb);
	CHECK_EQ_U64(hexkey(ta, "uncounted"), 0);
	CHECK(hexkey(tb, "uncounted") > 0);
	CHECK(cJSON_GetObjectItem(tb, "ninsn")->valuedouble <
	      cJSON_GetObjectItem(ta, "ninsn")->valuedouble);
	CHECK_EQ_U64(hexkey(tb, "count") + hexkey(tb, "uncounted"),
		     hexkey(ta, "count"));
	cJSON_Delete(ta);
	cJSON_Delete(tb);
	free(a);
	free(b);
	free(off);
	free(text);
	CHECK_EQ_INT(daemon_stop(&dm), 0);
}

/* --- a small map of counts by ip --- */

struct ent {
	uint64_t ip, n;
	bool used;
};

struct map {
	struct ent *v;
	size_t cap, n;
};

static struct ent *map_at(struct map *m, uint64_t ip, bool add)
{
	size_t i;

	if (add && (m->n + 1) * 2 > m->cap) {
		struct map g = { calloc(m->cap ? 2 * m->cap : 1024,
					sizeof(struct ent)),
				 m->cap ? 2 * m->cap : 1024, 0 };

		if (!g.v)
			abort();
		for (size_t k = 0; k < m->cap; k++)
			if (m->v[k].used)
				*map_at(&g, m->v[k].ip, true) = m->v[k];
		free(m->v);
		*m = g;
	}
	if (!m->cap)
		return NULL;
	for (i = (ip * 0x9e3779b97f4a7c15ull) >> 40 & (m->cap - 1);;
	     i = (i + 1) & (m->cap - 1)) {
		if (!m->v[i].used) {
			if (!add)
				return NULL;
			m->v[i].used = true;
			m->v[i].ip = ip;
			m->n++;
			return &m->v[i];
		}
		if (m->v[i].ip == ip)
			return &m->v[i];
	}
}

/* The live session's stream: snapshots in order, checked against the one
 * before; the last one's insn counts and the first_exec IPs. */
struct live {
	unsigned nsnap, bad_monotonic;
	uint64_t total, prev_total;
	struct map cur, prev;	/* a snapshot's insn counts by ip */
	struct map fe;		/* first_exec IPs */
	uint64_t nfe;
	char funcs[8192], prev_funcs[8192];	/* "count name\n"... */
};

static void snap_end(struct live *l)
{
	/* every instruction of the snapshot before counted at least as
	 * often now, where it is still among the top ones */
	for (size_t i = 0; i < l->prev.cap; i++) {
		const struct ent *e = &l->prev.v[i], *c;

		if (!e->used)
			continue;
		c = map_at(&l->cur, e->ip, false);
		if (c && c->n < e->n)
			l->bad_monotonic++;
	}
	free(l->prev.v);
	l->prev = l->cur;
	memset(&l->cur, 0, sizeof(l->cur));
	memcpy(l->prev_funcs, l->funcs, sizeof(l->funcs));
	l->funcs[0] = '\0';
}

static void parse_live(struct live *l, char *text)
{
	for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
		cJSON *o;
		const char *of;

		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (!is_type(line, "counters") && !is_type(line, "first_exec"))
			continue;
		o = cJSON_Parse(line);
		if (!o) {
			CHECK_FAIL_("not JSON: %.200s", line);
			continue;
		}
		if (is_type(line, "first_exec")) {
			map_at(&l->fe, hexkey(o, "ip"), true)->n++;
			l->nfe++;
			cJSON_Delete(o);
			continue;
		}
		of = strkey(o, "of");
		if (!strcmp(of, "total")) {
			if (l->nsnap)
				snap_end(l);
			l->nsnap++;
			l->prev_total = l->total;
			l->total = hexkey(o, "count");
			if (l->total < l->prev_total)
				l->bad_monotonic++;
			CHECK_EQ_U64(hexkey(o, "uncounted"), 0);
		} else if (!strcmp(of, "insn")) {
			map_at(&l->cur, hexkey(o, "ip"), true)->n +=
				hexkey(o, "count");
		} else if (!strcmp(of, "function")) {
			size_t k = strlen(l->funcs);

			(void)snprintf(l->funcs + k, sizeof(l->funcs) - k,
				       "%" PRIu64 " %s\n", hexkey(o, "count"),
				       strkey(o, "function"));
		}
		cJSON_Delete(o);
	}
	/* the last snapshot stays in cur (funcs) */
}

/* `ptctl top` output: its last block's "count name" lines. */
static void top_last(const char *text, char *out, size_t cap,
		     unsigned *ret_blocks)
{
	const char *p = text;
	unsigned blocks = 0;

	out[0] = '\0';
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		uint64_t count;
		double share;
		unsigned ninsn;
		char name[512];

		if (!strncmp(p, "session ", 8)) {
			blocks++;
			out[0] = '\0';
		} else if (sscanf(p, "%" SCNu64 " %lf%% %u %511s", &count,
				  &share, &ninsn, name) == 4) {
			size_t k = strlen(out);

			(void)snprintf(out + k, cap - k, "%" PRIu64 " %s\n",
				       count, name);
		}
		p += n + (nl ? 1 : 0);
	}
	*ret_blocks = blocks;
}

static void test_live(void)
{
	struct daemon dm;
	struct live l = { 0 };
	struct map truth = { 0 };
	struct ptd_capture cap;
	struct ptd_diag diag = { "" };
	char pidarg[32], capdir[700], attach_out[700], stream_out[700];
	char top_out[700], once_out[700], sidarg[32], *text = NULL;
	const char *attach_args[] = { "attach", pidarg, "--capture", capdir,
				      "--symbols", "--counters", NULL };
	const char *stream_args[] = { "stream", sidarg, "--kinds",
				      "first_exec,counters", "--top", "1000",
				      "--every", "100", "--symbols", NULL };
	const char *top_args[] = { "top", sidarg, "--interval", "100",
				   "--top", "5", NULL };
	const char *once_args[] = { "top", sidarg, "--interval", "100",
				    "--top", "5", "--once", NULL };
	uint64_t ntruth = 0;
	size_t len = 0;
	pid_t t, streamer, topper;
	char req[256];
	cJSON *mid, *end;
	unsigned blocks = 0;
	char last[8192], final5[8192];
	int go;

	REQUIRE(daemon_start(&dm, "live", "subscriber_queue_size = 1G\n"));
	t = spawn_target(0.3, &go);
	REQUIRE(t > 0);
	(void)snprintf(pidarg, sizeof(pidarg), "%ld", (long)t);
	(void)snprintf(capdir, sizeof(capdir), "%s/capture", dm.dir);
	(void)snprintf(attach_out, sizeof(attach_out), "%s/attach.out",
		       dm.dir);
	(void)snprintf(stream_out, sizeof(stream_out), "%s/stream.out",
		       dm.dir);
	(void)snprintf(top_out, sizeof(top_out), "%s/top.out", dm.dir);
	(void)snprintf(once_out, sizeof(once_out), "%s/once.out", dm.dir);
	CHECK_EQ_INT(wait_exit(ptctl_spawn(&dm, attach_out, NULL,
					   attach_args)), 0);
	REQUIRE(ptd_file_read_all(attach_out, 4096, &text, &len) == 0);
	(void)snprintf(sidarg, sizeof(sidarg), "%.*s",
		       (int)strcspn(text, "\n"), text);
	free(text);
	text = NULL;
	streamer = ptctl_spawn(&dm, stream_out, NULL, stream_args);
	REQUIRE(wait_subscribed(dm.sock, sidarg));
	topper = ptctl_spawn(&dm, top_out, NULL, top_args);
	/* both subscribed before the program runs */
	for (int i = 0; i < 500 && session_subscribers(dm.sock, sidarg) < 2;
	     i++)
		msleep(10);
	CHECK_EQ_INT((int)session_subscribers(dm.sock, sidarg), 2);
	release(&go);
	/* the counters request while it runs: the counts so far */
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"counters\","
		       "\"session\":%s,\"top\":3}\n", sidarg);
	mid = dc_call1(&dm, req);
	CHECK(mid && dc_ok(mid));
	CHECK_EQ_INT(wait_exit(streamer), 0);
	CHECK_EQ_INT(wait_exit(topper), 0);
	CHECK_EQ_INT(wait_target(t, 120000), 0);
	/* ended: ptctl top --once shows the final counts; the counters
	 * request answers them, its top 3 */
	CHECK_EQ_INT(wait_exit(ptctl_spawn(&dm, once_out, NULL, once_args)),
		     0);
	end = dc_call1(&dm, req);
	CHECK(end && dc_ok(end));
	REQUIRE(ptd_file_read_all(stream_out, 1u << 30, &text, &len) == 0);
	parse_live(&l, text);
	free(text);
	text = NULL;

	/* the truth of every thread */
	REQUIRE(ptd_capture_load(capdir, &cap, &diag) == 0);
	for (size_t i = 0; i < cap.nthreads; i++) {
		uint64_t *ips = NULL;
		size_t n = 0;

		if (ptd_capture_read_truth(&cap, i, &ips, &n, &diag) < 0) {
			CHECK_FAIL_("truth: %s", diag.msg);
			continue;
		}
		for (size_t k = 0; k < n; k++)
			map_at(&truth, ips[k], true)->n++;
		ntruth += n;
		free(ips);
	}
	ptd_capture_fini(&cap);
	fprintf(stderr, "live: %u snapshots, %" PRIu64 " executions, %zu "
		"distinct IPs, %" PRIu64 " first_exec\n", l.nsnap, ntruth,
		truth.n, l.nfe);
	CHECK(l.nsnap >= 2);	/* periodic ones, and the last */
	CHECK_EQ_U64(l.bad_monotonic, 0);
	CHECK_EQ_U64(l.total, ntruth);
	/* the final insn counts (its top 1000) are the truth's */
	CHECK(l.cur.n > 0);
	for (size_t i = 0; i < l.cur.cap; i++) {
		const struct ent *e = &l.cur.v[i], *tr;

		if (!e->used)
			continue;
		tr = map_at(&truth, e->ip, false);
		if (!tr || tr->n != e->n) {
			CHECK_FAIL_("ip 0x%" PRIx64 ": counted %" PRIu64
				    ", truth %" PRIu64, e->ip, e->n,
				    tr ? tr->n : 0);
			break;
		}
	}
	/* one first_exec per distinct IP of the truth (no code changes
	 * at an address here but the exec's, where ASLR moves it) */
	CHECK_EQ_U64(l.fe.n, truth.n);
	for (size_t i = 0; i < truth.cap; i++)
		if (truth.v[i].used && !map_at(&l.fe, truth.v[i].ip, false)) {
			CHECK_FAIL_("ip 0x%" PRIx64 " ran, no first_exec",
				    truth.v[i].ip);
			break;
		}
	/* ptctl top's last view: the final snapshot's 5 first functions */
	{
		const char *p = l.funcs;

		final5[0] = '\0';
		for (int i = 0; i < 5 && *p; i++) {
			const char *nl = strchr(p, '\n');
			size_t k = strlen(final5);

			(void)snprintf(final5 + k, sizeof(final5) - k, "%.*s\n",
				       (int)(nl - p), p);
			p = nl + 1;
		}
	}
	REQUIRE(ptd_file_read_all(top_out, 1u << 24, &text, &len) == 0);
	top_last(text, last, sizeof(last), &blocks);
	CHECK(blocks >= 2);
	if (strcmp(last, final5))
		CHECK_FAIL_("ptctl top's last view:\n%s\nthe counters':\n%s",
			    last, final5);
	free(text);
	REQUIRE(ptd_file_read_all(once_out, 1u << 24, &text, &len) == 0);
	top_last(text, last, sizeof(last), &blocks);
	CHECK_EQ_INT((int)blocks, 1);
	CHECK(strlen(last) > 0);
	if (strcmp(last, final5))
		CHECK_FAIL_("ptctl top --once:\n%s\nthe counters':\n%s", last,
			    final5);
	free(text);
	{
		const cJSON *ra = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(end, "result"),
			"records");
		const cJSON *rm = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(mid, "result"),
			"records");
		const cJSON *v;
		unsigned ninsn = 0;

		CHECK(ra && cJSON_GetArraySize(ra) > 0);
		CHECK(rm && cJSON_GetArraySize(rm) > 0);
		CHECK_EQ_U64(hexkey(cJSON_GetArrayItem(ra, 0), "count"),
			     ntruth);
		CHECK(hexkey(cJSON_GetArrayItem(rm, 0), "count") <= ntruth);
		cJSON_ArrayForEach(v, ra) {
			if (strcmp(strkey(v, "of"), "insn"))
				continue;
			ninsn++;
			CHECK_EQ_U64(hexkey(v, "count"),
				     map_at(&truth, hexkey(v, "ip"), false)
					     ->n);
		}
		CHECK_EQ_INT((int)ninsn, 3);
	}
	cJSON_Delete(mid);
	cJSON_Delete(end);
	free(l.cur.v);
	free(l.prev.v);
	free(l.fe.v);
	free(truth.v);
	CHECK_EQ_INT(daemon_stop(&dm), 0);
}

/* Refusals, each naming its field. */
static void test_refused(void)
{
	static const struct {
		const char *req, *needle;
	} bad[] = {
		{ "\"counters\":{\"every_ms\":5}", "counters.every_ms" },
		{ "\"counters\":{\"every_ms\":99999999}", "counters.every_ms" },
		{ "\"counters\":{\"top\":0}", "counters.top" },
		{ "\"counters\":{\"top\":1001}", "counters.top" },
		{ "\"counters\":{\"top\":\"5\"}", "counters.top" },
		{ "\"counters\":{\"every\":100}", "counters" },
		{ "\"counters\":5", "counters" },
	};
	struct daemon dm;
	char req[512];
	long sid;
	pid_t t;
	int go;

	REQUIRE(daemon_start(&dm, "refused", ""));
	t = spawn_target(0.1, &go);
	REQUIRE(t > 0);
	sid = dc_attach(&dm, t, NULL);
	REQUIRE(sid > 0);
	for (size_t i = 0; i < PTD_ARRAY_SIZE(bad); i++) {
		cJSON *r;

		(void)snprintf(req, sizeof(req),
			       "{\"id\":1,\"cmd\":\"subscribe\",\"session\":"
			       "%ld,%s}\n", sid, bad[i].req);
		r = dc_call1(&dm, req);
		CHECK(r && !dc_ok(r));
		if (r && (!dc_err_msg(r) ||
			  !strstr(dc_err_msg(r), bad[i].needle)))
			CHECK_FAIL_("%s: %s", bad[i].req,
				    r ? dc_err_msg(r) : "no answer");
		cJSON_Delete(r);
	}
	/* attached without options.counters: nothing counted to give */
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"subscribe\",\"session\":%ld,"
		       "\"kinds\":[\"first_exec\"]}\n", sid);
	{
		cJSON *r = dc_call1(&dm, req);

		CHECK(r && !dc_ok(r));
		CHECK(r && dc_err_msg(r) &&
		      strstr(dc_err_msg(r), "kinds: first_exec") &&
		      strstr(dc_err_msg(r), "options.counters"));
		cJSON_Delete(r);
		(void)snprintf(req, sizeof(req),
			       "{\"id\":1,\"cmd\":\"counters\",\"session\":"
			       "%ld}\n", sid);
		r = dc_call1(&dm, req);
		CHECK(r && !dc_ok(r) && !strcmp(dc_err_code(r), "bad_request"));
		CHECK(r && dc_err_msg(r) &&
		      strstr(dc_err_msg(r), "does not count"));
		cJSON_Delete(r);
	}
	/* nor traces, which the counter table builds */
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"subscribe\",\"session\":%ld,"
		       "\"kinds\":[\"insn\",\"trace_withdrawn\"]}\n", sid);
	{
		cJSON *r = dc_call1(&dm, req);

		CHECK(r && !dc_ok(r));
		CHECK(r && dc_err_msg(r) &&
		      strstr(dc_err_msg(r), "kinds: trace_withdrawn") &&
		      strstr(dc_err_msg(r), "does not count"));
		cJSON_Delete(r);
	}
	/* ptctl top says so too, as a refusal (exit 6) */
	{
		char sidarg[32], out[700];
		const char *args[] = { "top", sidarg, "--once", NULL };
		const char *bad_args[] = { "top", sidarg, "--interval", "50",
					   NULL };

		(void)snprintf(sidarg, sizeof(sidarg), "%ld", sid);
		(void)snprintf(out, sizeof(out), "%s/top.out", dm.dir);
		CHECK_EQ_INT(wait_exit(ptctl_spawn(&dm, out, out, args)), 6);
		CHECK_EQ_INT(wait_exit(ptctl_spawn(&dm, out, out, bad_args)),
			     1);
	}
	CHECK(dc_detach(&dm, sid));
	release(&go);
	(void)wait_target(t, 60000);
	CHECK_EQ_INT(daemon_stop(&dm), 0);
}

int main(void)
{
	harness_setup("/tmp/ptd-lc-XXXXXX");
	(void)snprintf(ptctl, sizeof(ptctl), "%s/daemon/ptctl", build_root);
	RUN(test_refused);
	RUN(test_replay);
	RUN(test_replay_traces);
	RUN(test_limit);
	RUN(test_live);
	return harness_done();
}
