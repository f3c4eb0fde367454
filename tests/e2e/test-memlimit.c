/* SPDX-License-Identifier: MIT */
/*
 * user_memory_limit end to end (daemon/memlimit.h): ptd with small trace
 * buffers and a limit a few threads' worth, real targets through the
 * software source.
 *  - an attach past the limit is refused (memory_limit, the message
 *    saying what is in use, what was asked, the limit and the key), and
 *    status shows the user's use against the limit;
 *  - a session's memory comes back when it ends: the next attach fits;
 *  - a subscriber is charged and given back;
 *  - a target that creates threads past the limit: each thread refused is
 *    not traced, gets an error record naming it, and is counted in
 *    status (threads_refused); the target itself runs on unharmed;
 *  - a thread's memory comes back when it ends: threads that come and go
 *    one at a time all fit where two at once would not;
 *  - a replay with "jobs" is charged each part its decode holds, and so
 *    is a snapshot session with options.jobs.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "e2e/daemon-harness.h"
#include "e2e/daemon-client.h"

/* One thread's charge with these buffers: a page + data + aux + the
 * decoder's buffer bound (1 MiB at least): see conf/ptd.conf. */
#define BUFS "aux_buffer_size = 64k\ndata_buffer_size = 64k\n" \
	     "subscriber_queue_size = 64k\n"
#define THREAD_BYTES (4096.0 + 65536 + 65536 + (1 << 20))
/* two queue buffers and the batch its records wait in (fanout.h) */
#define SUB_BYTES (2.0 * 65536 + 32768)

/* status (daemon): memory.used and memory.limit */
static void mem_status(const struct daemon *d, double *used, double *limit)
{
	cJSON *r = dc_call1(d, "{\"id\":1,\"cmd\":\"status\"}\n");
	const cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"),
					     "memory");
	const cJSON *u = cJSON_GetObjectItem(m, "used");
	const cJSON *l = cJSON_GetObjectItem(m, "limit");

	*used = cJSON_IsNumber(u) ? u->valuedouble : -1;
	*limit = cJSON_IsNumber(l) ? l->valuedouble : -1;
	cJSON_Delete(r);
}

/* Wait (at most 20 s) until the user's use is @want. */
static bool wait_used(const struct daemon *d, double want)
{
	double u = -1, l;

	for (int i = 0; i < 2000; i++) {
		mem_status(d, &u, &l);
		if (u == want)
			return true;
		msleep(10);
	}
	CHECK_FAIL_("memory in use is %.0f, expected %.0f", u, want);
	return false;
}

/* A new connection subscribed to session @s's records of @kinds (a JSON
 * array), or NULL. */
static struct dconn *subscribe_to(const struct daemon *d, long s,
				  const char *kinds)
{
	struct dconn *sub = dc_connect(d);
	char req[200];
	cJSON *r;
	bool ok;

	if (!sub)
		return NULL;
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"subscribe\","
		       "\"session\":%ld,\"kinds\":%s}\n", s, kinds);
	r = dc_call(sub, req);
	ok = dc_ok(r);
	cJSON_Delete(r);
	if (!ok) {
		CHECK_FAIL_("subscribing to session %ld", s);
		dc_close(sub);
		return NULL;
	}
	return sub;
}

static void test_refused_and_returned(void)
{
	struct daemon d;
	int go1 = -1, go2 = -1;
	pid_t t1, t2;
	long s1, s2;
	double used, limit;
	cJSON *r = NULL;
	struct dconn *sub;

	/* room for one single-threaded target and a subscriber, not two
	 * targets */
	REQUIRE(daemon_start(&d, "refuse", BUFS "user_memory_limit = 2M\n"));
	t1 = spawn_target(0.5, &go1);
	t2 = spawn_target(0.5, &go2);
	REQUIRE(t1 > 0 && t2 > 0);
	mem_status(&d, &used, &limit);
	CHECK_EQ_U64((uint64_t)used, 0);
	CHECK_EQ_U64((uint64_t)limit, 2u << 20);

	s1 = dc_attach(&d, t1, NULL);
	CHECK(s1 > 0);
	mem_status(&d, &used, &limit);
	CHECK_EQ_U64((uint64_t)used, (uint64_t)THREAD_BYTES);

	s2 = dc_attach(&d, t2, &r);
	CHECK(s2 < 0);
	CHECK_EQ_STR(dc_err_code(r), "memory_limit");
	CHECK_CONTAINS(dc_err_msg(r), "has 1.1 MiB in use");
	CHECK_CONTAINS(dc_err_msg(r), "1 thread");
	CHECK_CONTAINS(dc_err_msg(r), "needs 1.1 MiB more");
	CHECK_CONTAINS(dc_err_msg(r), "the limit is 2 MiB a user "
				      "(user_memory_limit)");
	cJSON_Delete(r);
	/* nothing of the refused attach stays charged */
	mem_status(&d, &used, &limit);
	CHECK_EQ_U64((uint64_t)used, (uint64_t)THREAD_BYTES);

	/* a subscriber is charged while it is subscribed */
	sub = subscribe_to(&d, s1, "[\"error\"]");
	REQUIRE(sub);
	mem_status(&d, &used, &limit);
	CHECK_EQ_U64((uint64_t)used, (uint64_t)(THREAD_BYTES + SUB_BYTES));
	dc_close(sub);
	wait_used(&d, THREAD_BYTES);

	/* the session's end gives its memory back: now the other fits */
	CHECK(dc_detach(&d, s1));
	wait_used(&d, 0);
	s2 = dc_attach(&d, t2, NULL);
	CHECK(s2 > 0);
	CHECK(dc_detach(&d, s2));
	wait_used(&d, 0);

	release(&go1);
	release(&go2);
	CHECK_EQ_INT(wait_target(t1, 60000), 0);
	CHECK_EQ_INT(wait_target(t2, 60000), 0);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

static void test_threads_past_the_limit(void)
{
	struct daemon d;
	struct dconn *sub;
	int go = -1;
	pid_t t;
	long s;
	char req[200], *line;
	unsigned refused_records = 0, other_errors = 0;
	bool bye = false;
	cJSON *r;
	double used, limit, refused, threads;

	/* prog-attach: main, a computing and a sleeping thread, then a
	 * short thread every ~50 ms (at least one, however slowly it runs);
	 * room for 3 threads and the subscriber: every short one is
	 * refused */
	REQUIRE(daemon_start(&d, "threads",
			     BUFS "user_memory_limit = 4000k\n"));
	t = spawn_target(3, &go);
	REQUIRE(t > 0);
	s = dc_attach(&d, t, NULL);
	REQUIRE(s > 0);
	sub = subscribe_to(&d, s, "[\"error\",\"event\"]");
	REQUIRE(sub);
	release(&go);
	while ((line = dc_read_line(sub, 120000))) {
		if (is_type(line, "error") &&
		    strstr(line, "user_memory_limit: thread not traced")) {
			refused_records++;
			/* it names its thread, not the process's leader */
			CHECK(strstr(line, "\"tid\":") != NULL);
		} else if (is_type(line, "error")) {
			other_errors++;
			fprintf(stderr, "error record: %s\n", line);
		}
		bye |= is_type(line, "bye");
		free(line);
		if (bye)
			break;
	}
	CHECK(bye);
	dc_close(sub);
	/* the target ran unharmed, its untraced threads too */
	CHECK_EQ_INT(wait_target(t, 120000), 0);
	CHECK(refused_records > 0);
	CHECK_EQ_INT(other_errors, 0);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"status\",\"session\":%ld}\n", s);
	r = dc_call1(&d, req);
	refused = dc_num(r, "threads_refused");
	threads = dc_num(r, "threads");
	cJSON_Delete(r);
	fprintf(stderr, "threads traced %.0f, refused %.0f (records %u)\n",
		threads, refused, refused_records);
	CHECK_EQ_U64((uint64_t)refused, refused_records);
	/* 3 threads fit in 4000k: the first (the shell, exec'd), the
	 * computing and the sleeping thread */
	CHECK_EQ_U64((uint64_t)threads, 3);
	/* ended: everything given back */
	wait_used(&d, 0);
	mem_status(&d, &used, &limit);
	CHECK_EQ_U64((uint64_t)limit, 4000u << 10);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* A traced thread's memory comes back when it ends: a target that starts
 * threads one at a time, each ended before the next, with room for its
 * main thread, a subscriber and one thread more, has every thread traced
 * (none refused), and the user's use back where it was after each. */
static void test_threads_come_and_go(void)
{
	enum { THREADS = 6 };
	struct daemon d;
	struct dconn *sub;
	int in = -1, out = -1;
	pid_t t;
	long s;
	char req[200], c, *line;
	unsigned errors = 0;
	bool bye = false;
	double used, limit;
	cJSON *r;

	REQUIRE(daemon_start(&d, "comego", BUFS "user_memory_limit = 2500k\n"));
	t = spawn_piped(progs, "prog-onebyone", &in, &out);
	REQUIRE(t > 0);
	s = dc_attach(&d, t, NULL);
	REQUIRE(s > 0);
	sub = subscribe_to(&d, s, "[\"error\"]");
	REQUIRE(sub);
	mem_status(&d, &used, &limit);
	CHECK_EQ_U64((uint64_t)used, (uint64_t)(THREAD_BYTES + SUB_BYTES));
	for (int i = 0; i < THREADS; i++) {
		struct pollfd p = { out, POLLIN, 0 };

		REQUIRE(write(in, "+", 1) == 1);
		REQUIRE(poll(&p, 1, 60000) == 1 && read(out, &c, 1) == 1);
		/* joined: once its trace is decoded, its charge is back */
		if (!wait_used(&d, THREAD_BYTES + SUB_BYTES)) {
			fprintf(stderr, "after thread %d of %d\n", i + 1,
				THREADS);
			break;
		}
	}
	close(in);
	CHECK_EQ_INT(wait_target(t, 60000), 0);
	close(out);
	while (!bye && (line = dc_read_line(sub, 60000))) {
		if (is_type(line, "error")) {
			errors++;
			fprintf(stderr, "error record: %s\n", line);
		}
		bye = is_type(line, "bye");
		free(line);
	}
	CHECK(bye);
	CHECK_EQ_INT(errors, 0);
	dc_close(sub);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"status\",\"session\":%ld}\n", s);
	r = dc_call1(&d, req);
	CHECK_EQ_U64((uint64_t)dc_num(r, "threads"), 1 + THREADS);
	CHECK_EQ_U64((uint64_t)dc_num(r, "threads_refused"), 0);
	CHECK_EQ_U64((uint64_t)dc_num(r, "threads_live"), 0);
	cJSON_Delete(r);
	wait_used(&d, 0);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* status of session @s: its number @key */
static double sess_num(const struct daemon *d, long s, const char *key)
{
	char req[100];
	cJSON *r;
	double v;

	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"status\",\"session\":%ld}\n", s);
	r = dc_call1(d, req);
	v = dc_num(r, key);
	cJSON_Delete(r);
	return v;
}

/* `ptctl status S` of session @s prints @want. */
static void ptctl_status_says(const struct daemon *d, long s,
			      const char *want)
{
	char out[PATH_MAX], sid[32], *text = NULL;
	const char *args[] = { "status", sid, NULL };
	size_t len = 0;

	(void)snprintf(sid, sizeof(sid), "%ld", s);
	(void)snprintf(out, sizeof(out), "%s/status.out", d->dir);
	CHECK_EQ_INT(wait_exit(ptctl_spawn(d, out, NULL, args)), 0);
	if (ptd_file_read_all(out, 1u << 20, &text, &len) < 0) {
		CHECK_FAIL_("cannot read %s", out);
		return;
	}
	CHECK_CONTAINS(text, want);
	free(text);
}

/* A snapshot of session @s: how many of its threads are not @leader, each
 * with bytes and instructions (-1 if the request failed). */
static int snapshot_others(const struct daemon *d, long s, pid_t leader)
{
	const cJSON *th;
	char req[100];
	int n = 0;
	cJSON *r;

	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"snapshot\",\"session\":%ld}\n",
		       s);
	r = dc_call1(d, req);
	if (!dc_ok(r)) {
		cJSON_Delete(r);
		return -1;
	}
	th = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "threads");
	for (const cJSON *t = th ? th->child : NULL; t; t = t->next) {
		const cJSON *tid = cJSON_GetObjectItem(t, "tid");

		if (!cJSON_IsNumber(tid) || (pid_t)tid->valueint == leader)
			continue;
		CHECK(cJSON_GetObjectItem(t, "bytes")->valuedouble > 0);
		CHECK(cJSON_GetObjectItem(t, "insns")->valuedouble > 0);
		n++;
	}
	cJSON_Delete(r);
	return n;
}

/* The same in a snapshot session: an ended thread's buffers and charge
 * come back, its last trace (its window) is kept, charged at its size,
 * for the next snapshot -- which has every ended thread -- and goes at
 * the snapshot after that.  The limit has room for the main thread, a
 * subscriber, one thread more and the windows (at most snapshot_size
 * each); before, every ended thread kept its whole charge and the second
 * was refused. */
static void test_snapshot_threads_come_and_go(void)
{
	enum { THREADS = 6 };
	const double thread = THREAD_BYTES + 65536;	/* + the copy */
	const double base = thread + SUB_BYTES;
	struct daemon d;
	struct dconn *sub;
	int in = -1, out = -1;
	pid_t t;
	long s;
	char c, limit[120];
	double kept = 0;

	(void)snprintf(limit, sizeof(limit), BUFS "user_memory_limit = %.0f\n",
		       2 * thread + SUB_BYTES + THREADS * 65536.0 + 4096);
	REQUIRE(daemon_start(&d, "snapcome", limit));
	t = spawn_piped(progs, "prog-onebyone", &in, &out);
	REQUIRE(t > 0);
	s = dc_attach_opts(&d, t, "{\"mode\":\"snapshot\","
			   "\"snapshot_size\":65536}", NULL);
	REQUIRE(s > 0);
	sub = subscribe_to(&d, s, "[\"error\"]");
	REQUIRE(sub);
	CHECK(wait_used(&d, base));
	for (int i = 0; i < THREADS; i++) {
		struct pollfd p = { out, POLLIN, 0 };
		double used = -1, lim, k = -1;
		int tries;

		REQUIRE(write(in, "+", 1) == 1);
		REQUIRE(poll(&p, 1, 60000) == 1 && read(out, &c, 1) == 1);
		/* joined: once its end is read, its window is kept and its
		 * charge is back */
		for (tries = 0; tries < 2000; tries++) {
			if (sess_num(&d, s, "kept_threads") == i + 1) {
				k = sess_num(&d, s, "kept_bytes");
				mem_status(&d, &used, &lim);
				if (used == base + k)
					break;
			}
			msleep(10);
		}
		if (tries == 2000) {
			CHECK_FAIL_("after thread %d of %d: %.0f windows kept, "
				    "%.0f bytes; memory in use %.0f",
				    i + 1, THREADS,
				    sess_num(&d, s, "kept_threads"), k, used);
			break;
		}
		CHECK(k > kept && k - kept <= 65536);
		kept = k;
	}
	CHECK_EQ_U64((uint64_t)sess_num(&d, s, "threads_refused"), 0);
	CHECK_EQ_U64((uint64_t)sess_num(&d, s, "dropped_threads"), 0);
	ptctl_status_says(&d, s, "ended threads: 6 last traces kept for the "
			  "next snapshot (");
	/* every ended thread's last trace in the next snapshot ... */
	CHECK_EQ_INT(snapshot_others(&d, s, t), THREADS);
	CHECK_EQ_U64((uint64_t)sess_num(&d, s, "kept_threads"), THREADS);
	/* ... not in the one after, when their windows go */
	CHECK_EQ_INT(snapshot_others(&d, s, t), 0);
	CHECK_EQ_U64((uint64_t)sess_num(&d, s, "kept_threads"), 0);
	CHECK(wait_used(&d, base));
	close(in);
	CHECK_EQ_INT(wait_target(t, 60000), 0);
	close(out);
	dc_close(sub);
	wait_used(&d, 0);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* A replay request for a capture that does not exist, @jobs ("" or
 * ,"jobs":N) after its path: the answer. */
static cJSON *replay_nowhere(const struct daemon *d, const char *jobs)
{
	char req[160];

	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\","
		       "\"path\":\"/nonexistent/ptd-capture\"%s}\n", jobs);
	return dc_call1(d, req);
}

/* A replay is charged its decoder, and with "jobs" above 1 each part its
 * parallel decode holds at once (jobs + 2 of them, each 14 MiB: 4 KiB of
 * trace's records at 192 bytes, its image and instruction cache): the
 * charge is checked before the path is even opened, so a path that does
 * not exist shows it. */
/* A session's options.jobs is charged as a replay's: 14 MiB for each of
 * jobs + 2 parts (a snapshot's) or threads decoded ahead (a full
 * session's), on top of its threads. */
static void jobs_charged(struct daemon *d, const char *opts,
			 const char *jobs_opts)
{
	double used, limit, alone;
	int go;
	pid_t t = spawn_target(0.5, &go);
	long s;

	REQUIRE(t > 0);
	s = dc_attach_opts(d, t, opts, NULL);
	CHECK(s > 0);
	mem_status(d, &used, &limit);
	alone = used;
	CHECK(dc_detach(d, s));
	wait_used(d, 0);
	s = dc_attach_opts(d, t, jobs_opts, NULL);
	CHECK(s > 0);
	mem_status(d, &used, &limit);
	CHECK_EQ_U64((uint64_t)(used - alone), 4 * (14ull << 20));
	CHECK(dc_detach(d, s));
	wait_used(d, 0);
	release(&go);
	CHECK_EQ_INT(wait_target(t, 60000), 0);
}

static void test_replay_jobs_charged(void)
{
	static const char *const fit[] = { "", ",\"jobs\":1" };
	struct daemon d;
	cJSON *r;

	REQUIRE(daemon_start(&d, "replay",
			     BUFS "user_memory_limit = 100M\n"
				  "max_decode_jobs = 4\n"));
	/* 64 MiB, and jobs 1 is serial: the same; both fit (the path then
	 * fails) */
	for (size_t i = 0; i < sizeof(fit) / sizeof(fit[0]); i++) {
		r = replay_nowhere(&d, fit[i]);
		CHECK(!dc_ok(r));
		CHECK(strcmp(dc_err_code(r), "memory_limit") != 0);
		cJSON_Delete(r);
	}
	/* jobs 2: 64 + 4 x 14 MiB */
	r = replay_nowhere(&d, ",\"jobs\":2");
	CHECK_EQ_STR(dc_err_code(r), "memory_limit");
	CHECK_CONTAINS(dc_err_msg(r), "needs 120 MiB more");
	cJSON_Delete(r);
	wait_used(&d, 0);
	/* a session's jobs too: a snapshot's parts, a full session's
	 * threads at once */
	jobs_charged(&d, "{\"mode\":\"snapshot\"}",
		     "{\"mode\":\"snapshot\",\"jobs\":2}");
	jobs_charged(&d, "{}", "{\"jobs\":2}");
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

int main(void)
{
	harness_setup("/tmp/ptdmem-XXXXXX");
	RUN(test_refused_and_returned);
	RUN(test_threads_past_the_limit);
	RUN(test_threads_come_and_go);
	RUN(test_snapshot_threads_come_and_go);
	RUN(test_replay_jobs_charged);
	return harness_done();
}
