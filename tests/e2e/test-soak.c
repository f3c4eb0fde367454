/* SPDX-License-Identifier: MIT */
/*
 * Soak: many attach/detach cycles and many subscribers joining and leaving
 * live sessions at random; afterwards ptd must hold what it held before.
 *
 * PTD_SOAK_CYCLES (default 1000) attach/detach cycles on a target blocked
 * in read(2) and PTD_SOAK_SUBSCRIBERS (default 100) subscribers, spread
 * over ROUNDS rounds.  In each round NLIVE live sessions (prog-attach
 * targets running LIVE_SECS) each get a reference subscriber, joined
 * before the target runs, that takes every record; the round's
 * subscribers join a random one at a random time, with one of a few
 * filters; half read as fast as they can, half slowly for their first
 * 1.5 s (a 4 KiB socket buffer, 20 ms pauses); half leave at a random
 * time, the others stay until bye; the cycles run meanwhile.  Once a
 * round's sessions have ended and been detached, ptd is idle: its open
 * fds (/proc/PID/fd) and RSS are printed; those after the first round are
 * the baseline.
 *
 * Checks: every attach and detach succeeds; the fds at the end are exactly
 * the baseline's; RSS at the end is at most RSS_SLACK_KB (4 MiB) above
 * it: ptd maps large buffers on their own and trims its heap when a
 * session is freed, so what it frees goes back, but glibc keeps the
 * stacks of joined threads for reuse and makes per-thread arenas lazily
 * (how many session threads ran at once differs between rounds): some
 * hundreds of KiB move without a leak (measured here: +0.7 MiB after 100
 * cycles), while a leak of 4 KiB a cycle, or one subscriber queue or
 * session buffer in all, shows; under ASan, whose quarantine keeps freed
 * memory, RSS is printed, not compared.  The
 * user's memory charge is back to 0 after each round.  Every subscriber
 * that stayed got bye with sent == the records it read and lost == the
 * sum of its lost records; read + lost is at most what its filter matches
 * in the reference's stream, and the records after its last loss are
 * exactly the tail of those.  None lost anything: each live session
 * traces at most LIVE_INSNS instructions (attach's max_insns; it ends
 * with bye "limit" if the target runs longer), so that a subscriber's
 * queue (SUB_QUEUE) holds the session's whole stream however little CPU
 * its reader gets (a bound in time would not: the records a target makes
 * in LIVE_SECS depend on how fast ptd steps it, 300k-800k here, and a
 * reader starved beside them fell behind).
 * The defaults are the numbers; both are parameters for slower
 * machines.  Measured here: see the commit that added this test.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "e2e/daemon-harness.h"
#include "e2e/daemon-client.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define RSS_SLACK_KB (4u * 1024)
#define LIVE_SECS 3.0		/* each live target's run */
#define ROUNDS 4		/* the first one warms ptd up */
#define NLIVE 2
/* Instructions a live session traces: at ~300 bytes an insn record at
 * the most (every field, no time fields) and its events, its whole
 * stream fits in SUB_QUEUE. */
#define LIVE_INSNS 300000
#define SUB_QUEUE "128M"

static struct daemon d;

/* A subscriber's filter: which records it asks for. */
enum sfilter { F_ALL, F_EVENTS, F_LEADER_INSN, F_NFILTERS };

struct live {
	pid_t pid;
	long session;
	int go;
	struct subr *ref;
};

/* What is kept of a record: enough to filter it and compare it (a hash of
 * its line: 100 subscribers' whole streams would not fit in memory). */
enum rkind { R_INSN, R_EVENT, R_ERROR, R_OTHER };
struct rec {
	uint64_t hash;		/* FNV-1a of the line */
	int32_t tid;
	uint8_t kind;
};

static struct rec rec_of(const char *l)
{
	struct rec r = { 14695981039346656037ull, -1, R_OTHER };
	const char *t = strstr(l, "\"tid\":");

	for (const char *p = l; *p; p++)
		r.hash = (r.hash ^ (uint8_t)*p) * 1099511628211ull;
	if (t)
		r.tid = (int32_t)strtol(t + 6, NULL, 10);
	r.kind = is_type(l, "insn") ? R_INSN : is_type(l, "event") ? R_EVENT
		 : is_type(l, "error") ? R_ERROR : R_OTHER;
	return r;
}

struct subr {
	pthread_t th;
	struct live *lv;
	enum sfilter f;
	bool slow, leave, ref;
	unsigned join_ms, leave_ms;
	/* results */
	struct rec *rec;	/* records read (not hello/lost/bye) */
	size_t n, cap;
	size_t after_loss;	/* index of the first record after the last
				 * lost record */
	uint64_t lost, bye_sent, bye_lost;
	bool hello, bye, failed;
	char why[256];
};

static unsigned count_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	unsigned n = 0;
	DIR *dir;

	(void)snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	while (dir && (e = readdir(dir)))
		n += e->d_name[0] != '.';
	if (dir)
		closedir(dir);
	return n;
}

static unsigned long rss_kb(pid_t pid)
{
	char path[64], line[256];
	unsigned long kb = 0;
	FILE *f;

	(void)snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static unsigned env_num(const char *name, unsigned def)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (!v || !*v)
		return def;
	n = strtoul(v, &end, 10);
	return *end || n > 1000000 ? def : (unsigned)n;
}

static const char *filter_req(enum sfilter f, pid_t leader, char *buf,
			      size_t cap)
{
	switch (f) {
	case F_ALL:
		return ",\"kinds\":[\"insn\",\"event\",\"error\"]";
	case F_EVENTS:
		return ",\"kinds\":[\"event\",\"error\"]";
	case F_LEADER_INSN:
		(void)snprintf(buf, cap, ",\"kinds\":[\"insn\"],\"filter\":"
			       "{\"tid\":[%d]}", (int)leader);
		return buf;
	case F_NFILTERS:
		break;
	}
	return "";
}

/* Does record @r pass filter @f (leader @leader)? */
static bool filter_match(enum sfilter f, pid_t leader, const struct rec *r)
{
	switch (f) {
	case F_ALL:
		return true;
	case F_EVENTS:
		return r->kind == R_EVENT || r->kind == R_ERROR;
	case F_LEADER_INSN:
		return r->kind == R_INSN && r->tid == (int32_t)leader;
	case F_NFILTERS:
		break;
	}
	return false;
}

static uint64_t json_u64(const char *l, const char *key)
{
	char k[64];
	const char *p;

	(void)snprintf(k, sizeof(k), "\"%s\":", key);
	p = strstr(l, k);
	return p ? strtoull(p + strlen(k), NULL, 10) : 0;
}

static void sub_fail(struct subr *s, const char *why)
{
	s->failed = true;
	(void)snprintf(s->why, sizeof(s->why), "%s", why);
}

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 +
	       (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static void *sub_main(void *arg)
{
	struct subr *s = arg;
	struct dconn *c;
	char req[512], fb[128], *line;
	struct timespec t0;
	cJSON *r;
	int small = 4096;

	msleep(s->join_ms);
	c = dc_connect(&d);
	if (!c) {
		sub_fail(s, "cannot connect");
		return NULL;
	}
	if (s->slow)
		(void)setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small,
				 sizeof(small));
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"subscribe\",\"session\":%ld%s}\n",
		       s->lv->session,
		       filter_req(s->f, s->lv->pid, fb, sizeof(fb)));
	r = dc_call(c, req);
	if (!dc_ok(r)) {
		/* a session that has ended (and been detached) is gone */
		if (!r || strcmp(dc_err_code(r), "no_such_session"))
			sub_fail(s, r ? dc_err_msg(r) : "no response");
		cJSON_Delete(r);
		dc_close(c);
		return NULL;
	}
	cJSON_Delete(r);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((line = dc_read_line(c, 120000))) {
		if (is_type(line, "hello")) {
			s->hello = true;
		} else if (is_type(line, "lost")) {
			s->lost += json_u64(line, "records");
			s->after_loss = s->n;
		} else if (is_type(line, "bye")) {
			s->bye = true;
			s->bye_sent = json_u64(line, "sent");
			s->bye_lost = json_u64(line, "lost");
		} else {
			if (s->n == s->cap) {
				s->cap = s->cap ? 2 * s->cap : 4096;
				s->rec = realloc(s->rec,
						 s->cap * sizeof(*s->rec));
			}
			s->rec[s->n++] = rec_of(line);
		}
		free(line);
		if (s->bye)
			break;
		if (s->slow && s->n % 64 == 0 && elapsed_ms(&t0) < 1500)
			msleep(20);
		if (s->leave && elapsed_ms(&t0) >= (long)s->leave_ms)
			break;
	}
	if (!s->leave && !s->bye)
		sub_fail(s, "no bye");
	dc_close(c);
	return NULL;
}

static void sub_free(struct subr *s)
{
	free(s->rec);
}

/* The checks of one subscriber that stayed until bye. */
static void sub_check(struct subr *s, unsigned i)
{
	struct subr *ref = s->lv->ref;
	size_t want = 0, k;

	if (s->failed) {
		CHECK_FAIL_("subscriber %u: %s", i, s->why);
		return;
	}
	if (s->leave || !s->hello)
		return;		/* left early, or the session was gone */
	CHECK(s->bye);
	if (s->ref)
		fprintf(stderr, "soak: session %ld's reference read %zu "
			"records, lost %" PRIu64 "\n", s->lv->session, s->n,
			s->lost);
	if (s->bye_sent != s->n || s->bye_lost != s->lost)
		CHECK_FAIL_("subscriber %u (filter %d, %s%s): read %zu records "
			    "and %" PRIu64 " lost, bye says sent %" PRIu64
			    " lost %" PRIu64, i, (int)s->f,
			    s->slow ? "slow" : "fast", s->ref ? ", ref" : "",
			    s->n, s->lost, s->bye_sent, s->bye_lost);
	if (s->lost)
		CHECK_FAIL_("%s subscriber %u (filter %d%s) lost %" PRIu64
			    " records, though its queue holds the whole stream",
			    s->slow ? "slow" : "fast", i, (int)s->f,
			    s->ref ? ", ref" : "", s->lost);
	if (s->ref || !ref || ref->lost)
		return;
	/* what its filter matched in the reference, from its first record
	 * on: the records after its last loss are exactly its tail */
	for (k = 0; k < ref->n; k++)
		want += filter_match(s->f, s->lv->pid, &ref->rec[k]);
	if (s->n + s->lost > want)
		CHECK_FAIL_("subscriber %u (filter %d): %zu records + %" PRIu64
			    " lost, more than the %zu its filter matches in "
			    "the whole stream", i, (int)s->f, s->n, s->lost,
			    want);
	k = ref->n;
	for (size_t j = s->n; j-- > s->after_loss;) {
		while (k > 0 &&
		       !filter_match(s->f, s->lv->pid, &ref->rec[k - 1]))
			k--;
		if (k == 0 || ref->rec[k - 1].hash != s->rec[j].hash) {
			CHECK_FAIL_("subscriber %u (filter %d): record %zu of "
				    "%zu differs from the reference's record "
				    "%zu that its filter matches", i, (int)s->f,
				    j, s->n, k ? k - 1 : 0);
			return;
		}
		k--;
	}
}

static void wait_uncharged(void)
{
	double used = -1;

	for (int i = 0; i < 3000; i++) {
		cJSON *r = dc_call1(&d, "{\"id\":1,\"cmd\":\"status\"}\n");
		const cJSON *m = cJSON_GetObjectItem(
			cJSON_GetObjectItem(r, "result"), "memory");
		const cJSON *u = cJSON_GetObjectItem(m, "used");

		used = cJSON_IsNumber(u) ? u->valuedouble : -1;
		cJSON_Delete(r);
		if (used == 0)
			return;
		msleep(10);
	}
	CHECK_FAIL_("the user's memory charge is %.0f at the end, not 0",
		    used);
}

/* Attach/detach @n times to @pid. */
static void cycles(pid_t pid, unsigned n, unsigned *done)
{
	for (unsigned i = 0; i < n; i++) {
		cJSON *r = NULL;
		long s = dc_attach(&d, pid, &r);

		if (s < 0) {
			CHECK_FAIL_("cycle %u: attach: %s: %s", *done + i,
				    r ? dc_err_code(r) : "no response",
				    r ? dc_err_msg(r) : "");
			cJSON_Delete(r);
			return;
		}
		r = dc_detach_call(&d, s);
		if (!dc_ok(r)) {
			CHECK_FAIL_("cycle %u: detach of session %ld: %s: %s",
				    *done + i, s,
				    r ? dc_err_code(r) : "no response",
				    r ? dc_err_msg(r) : strerror(errno));
			cJSON_Delete(r);
			return;
		}
		cJSON_Delete(r);
	}
	*done += n;
}

/* Wait until ptd lists no session and serves no connection but @c (so
 * that a connection of ours closing does not race the count), then take
 * its open fds and RSS. */
static void wait_idle(unsigned *ret_fds, unsigned long *ret_rss)
{
	struct dconn *c = dc_connect(&d);
	double n = -1, k = -1;

	REQUIRE(c);
	for (int i = 0; i < 2000; i++) {
		cJSON *r = dc_call(c, "{\"id\":1,\"cmd\":\"status\"}\n");

		n = dc_num(r, "sessions");
		k = dc_num(r, "connections");
		cJSON_Delete(r);
		if (n == 0 && k == 1)
			break;
		msleep(10);
	}
	if (n != 0 || k != 1)
		CHECK_FAIL_("ptd still has %.0f sessions and %.0f connections",
			    n, k);
	*ret_fds = count_fds(d.pid);
	*ret_rss = rss_kb(d.pid);
	dc_close(c);
}

/* One round: @nc attach/detach cycles on @ctarget while @ns subscribers
 * (subs[0..ns), filled here) come and go on NLIVE live sessions; then
 * every subscriber's checks, and ptd idle again. */
static void round_run(unsigned r, pid_t ctarget, unsigned nc, unsigned ns,
		      unsigned *done, unsigned *ret_fds, unsigned long *ret_rss)
{
	struct subr *subs = calloc(ns + NLIVE, sizeof(*subs));
	struct live lv[NLIVE];

	REQUIRE(subs);
	/* live sessions, each with its reference subscriber, counted by ptd
	 * before its target runs */
	for (unsigned i = 0; i < NLIVE; i++) {
		char req[128];
		double n = 0;

		lv[i].pid = spawn_target(LIVE_SECS, &lv[i].go);
		REQUIRE(lv[i].pid > 0);
		(void)snprintf(req, sizeof(req), "{\"max_insns\":%u}",
			       LIVE_INSNS);
		lv[i].session = dc_attach_opts(&d, lv[i].pid, req, NULL);
		REQUIRE(lv[i].session > 0);
		lv[i].ref = &subs[ns + i];
		lv[i].ref->lv = &lv[i];
		lv[i].ref->ref = true;
		lv[i].ref->f = F_ALL;
		REQUIRE(pthread_create(&lv[i].ref->th, NULL, sub_main,
				       lv[i].ref) == 0);
		(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"status\","
			       "\"session\":%ld}\n", lv[i].session);
		for (int k = 0; k < 2000 && n < 1; k++) {
			cJSON *rr = dc_call1(&d, req);

			n = dc_num(rr, "subscribers");
			cJSON_Delete(rr);
			if (n < 1)
				msleep(10);
		}
		CHECK(n >= 1);
	}
	for (unsigned i = 0; i < NLIVE; i++)
		release(&lv[i].go);
	for (unsigned i = 0; i < ns; i++) {
		struct subr *s = &subs[i];

		s->lv = &lv[(unsigned)rand() % NLIVE];
		s->slow = rand() % 2;
		/* slow ones take the lighter filters: what they hold in
		 * their queue is bounded by the stream they asked for */
		s->f = (enum sfilter)((unsigned)rand() % F_NFILTERS);
		if (s->slow && s->f == F_ALL)
			s->f = F_LEADER_INSN;
		s->leave = rand() % 2;
		s->join_ms = (unsigned)rand() % (unsigned)(LIVE_SECS * 900);
		s->leave_ms = (unsigned)rand() % 1500;
		REQUIRE(pthread_create(&s->th, NULL, sub_main, s) == 0);
	}
	cycles(ctarget, nc, done);
	for (unsigned i = 0; i < ns + NLIVE; i++)
		(void)pthread_join(subs[i].th, NULL);
	for (unsigned i = 0; i < NLIVE; i++) {
		char req[128];
		cJSON *rr;

		CHECK_EQ_INT(wait_target(lv[i].pid, 120000), 0);
		/* ended sessions need not linger (one nobody follows may
		 * be gone already) */
		(void)snprintf(req, sizeof(req), "{\"id\":\"d\",\"cmd\":"
			       "\"detach\",\"session\":%ld}\n", lv[i].session);
		rr = dc_call1(&d, req);
		if (!dc_ok(rr) && strcmp(dc_err_code(rr), "no_such_session"))
			CHECK_FAIL_("round %u: detach of ended session %ld: "
				    "%s", r, lv[i].session, dc_err_code(rr));
		cJSON_Delete(rr);
	}
	for (unsigned i = 0; i < ns + NLIVE; i++) {
		sub_check(&subs[i], i);
		sub_free(&subs[i]);
	}
	free(subs);
	wait_uncharged();
	wait_idle(ret_fds, ret_rss);
}

static void test_soak(void)
{
	unsigned ncycles = env_num("PTD_SOAK_CYCLES", 1000);
	unsigned nsubs = env_num("PTD_SOAK_SUBSCRIBERS", 100);
	unsigned done = 0, base_fds = 0, end_fds = 0;
	unsigned long base_rss = 0, end_rss = 0;
	struct timespec t0, t1;
	int cgo = -1;
	pid_t ctarget;
	unsigned seed = (unsigned)time(NULL);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	fprintf(stderr, "soak: %u cycles, %u subscribers in %u rounds, "
		"seed %u\n", ncycles, nsubs, ROUNDS, seed);
	srand(seed);
	REQUIRE(daemon_start(&d, "soak", "max_subscribers_per_session = 1024\n"
					 "max_connections = 1024\n"
					 "aux_buffer_size = 256k\n"
					 "subscriber_queue_size = " SUB_QUEUE
					 "\n"
					 "user_memory_limit = 1024G\n"));
	ctarget = spawn_target(1, &cgo);
	REQUIRE(ctarget > 0);
	for (unsigned r = 0; r < ROUNDS; r++) {
		unsigned nc = ncycles / ROUNDS + (r < ncycles % ROUNDS);
		unsigned ns = nsubs / ROUNDS + (r < nsubs % ROUNDS);

		round_run(r, ctarget, nc, ns, &done, &end_fds, &end_rss);
		fprintf(stderr, "soak: round %u: after %u cycles: %u fds, RSS "
			"%lu kB\n", r + 1, done, end_fds, end_rss);
		if (r > 0)
			continue;
		/* after the first round: the baseline */
		base_fds = end_fds;
		base_rss = end_rss;
	}
	CHECK_EQ_INT(done, ncycles);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "soak: after %u cycles: %u fds, RSS %lu kB (%+ld kB); "
		"%.1f s\n", done, end_fds, end_rss,
		(long)end_rss - (long)base_rss,
		(double)(t1.tv_sec - t0.tv_sec) +
			(double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	CHECK_EQ_INT(end_fds, base_fds);
	if (UNDER_ASAN)
		fprintf(stderr, "soak: RSS not compared under ASan (its "
			"quarantine keeps freed memory)\n");
	else if (end_rss > base_rss + RSS_SLACK_KB)
		CHECK_FAIL_("RSS grew from %lu to %lu kB (more than %u kB)",
			    base_rss, end_rss, RSS_SLACK_KB);
	release(&cgo);
	(void)wait_target(ctarget, 60000);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

int main(void)
{
	harness_setup("/tmp/ptdsoak-XXXXXX");
	RUN(test_soak);
	return harness_done();
}
