/* SPDX-License-Identifier: MIT */
/* The fan-out: a producer thread pushes synthetic records; a fast consumer,
 * a deliberately slow one with a small queue and a filtered one drain their
 * queues concurrently.  The slow one's lost counts plus what it received
 * equal what it matched; the fast one loses nothing; every stream is in
 * order, starts with hello and ends with bye; memory stays bounded. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/strutil.h"
#include "daemon/fanout.h"
#include "record/binframe.h"
#include "record/jsonw.h"
#include "unit/fieldcmp.h"

#define NRECORDS 60000

static atomic_uint wakes;

static void wake(void *ctx)
{
	(void)ctx;
	atomic_fetch_add(&wakes, 1);
}

static struct ptd_record mkinsn(uint64_t seq)
{
	struct ptd_record r;

	memset(&r, 0, sizeof(r));
	r.type = PTD_REC_INSN;
	r.pid = 100;
	r.tid = 1 + (pid_t)(seq % 2);	/* tids 1 and 2 alternate */
	r.u.insn.ip = 0x400000 + seq;	/* the sequence number */
	r.u.insn.iclass = ptic_other;
	r.u.insn.module = "/bin/prog";
	r.u.insn.size = 1;
	r.u.insn.raw[0] = 0x90;
	return r;
}

static struct ptd_filter filter_of(unsigned kinds, pid_t tid)
{
	struct ptd_filter_spec s;
	struct ptd_filter f;

	memset(&s, 0, sizeof(s));
	s.kinds = kinds;
	if (tid) {
		s.ntids = 1;
		s.tids[0] = tid;
	}
	if (ptd_filter_compile(&s, &f) < 0)
		abort();
	return f;
}

/* What one consumer saw. */
struct consumer {
	struct ptd_subscriber *sub;
	unsigned slow_us;		/* sleep per chunk */
	char *pending;			/* partial line */
	size_t plen, pcap;
	uint64_t records, lost, lost_insn, lines;
	uint64_t last_ip;
	bool order_ok, hello_first, bye_last, saw_bye, any_lost_line;
	bool tid_ok;
	pid_t want_tid;
	char bye_reason[32];
	int exit_code;
	uint64_t bye_sent, bye_lost;
	size_t max_mem;
	char first_error[256];
};

static void fail_once(struct consumer *c, const char *what)
{
	if (!c->first_error[0])
		(void)snprintf(c->first_error, sizeof(c->first_error), "%s",
			       what);
}

static void consume_line(struct consumer *c, const char *line, size_t n)
{
	cJSON *o = cJSON_ParseWithLength(line, n);
	const cJSON *t = o ? cJSON_GetObjectItem(o, "type") : NULL;
	const char *type = cJSON_IsString(t) ? t->valuestring : "";

	if (!o) {
		fail_once(c, "a line is not JSON");
		return;
	}
	if (c->saw_bye)
		c->bye_last = false;
	if (c->lines == 0)
		c->hello_first = !strcmp(type, "hello");
	c->lines++;
	if (!strcmp(type, "insn")) {
		const cJSON *ip = cJSON_GetObjectItem(o, "ip");
		const cJSON *tid = cJSON_GetObjectItem(o, "tid");
		uint64_t v = 0;

		if (!cJSON_IsString(ip) ||
		    ptd_parse_u64(ip->valuestring, 0, &v) < 0)
			fail_once(c, "bad ip");
		if (c->records && v <= c->last_ip)
			c->order_ok = false;
		c->last_ip = v;
		if (c->want_tid && (!cJSON_IsNumber(tid) ||
				    tid->valueint != c->want_tid))
			c->tid_ok = false;
		c->records++;
	} else if (!strcmp(type, "lost")) {
		const cJSON *n2 = cJSON_GetObjectItem(o, "records");
		const cJSON *ni = cJSON_GetObjectItem(o, "insn");

		c->any_lost_line = true;
		c->lost += cJSON_IsNumber(n2) ? (uint64_t)n2->valuedouble : 0;
		c->lost_insn += cJSON_IsNumber(ni) ? (uint64_t)ni->valuedouble
						   : 0;
	} else if (!strcmp(type, "bye")) {
		const cJSON *r = cJSON_GetObjectItem(o, "reason");
		const cJSON *e = cJSON_GetObjectItem(o, "exit_code");

		c->saw_bye = c->bye_last = true;
		(void)snprintf(c->bye_reason, sizeof(c->bye_reason), "%s",
			       cJSON_IsString(r) ? r->valuestring : "?");
		c->exit_code = cJSON_IsNumber(e) ? e->valueint : -1000;
		c->bye_sent = (uint64_t)cJSON_GetObjectItem(o, "sent")
				      ->valuedouble;
		c->bye_lost = (uint64_t)cJSON_GetObjectItem(o, "lost")
				      ->valuedouble;
	} else if (strcmp(type, "hello")) {
		fail_once(c, "unexpected record type");
	}
	cJSON_Delete(o);
}

/* Feed bytes; split lines. */
static void consume_bytes(struct consumer *c, const char *d, size_t n)
{
	size_t i, start = 0;

	for (i = 0; i < n; i++) {
		if (d[i] != '\n')
			continue;
		if (c->plen) {
			if (c->plen + (i - start) > c->pcap)
				abort();
			memcpy(c->pending + c->plen, d + start, i - start);
			consume_line(c, c->pending, c->plen + (i - start));
			c->plen = 0;
		} else {
			consume_line(c, d + start, i - start);
		}
		start = i + 1;
	}
	if (start < n) {
		if (c->plen + (n - start) > c->pcap)
			abort();
		memcpy(c->pending + c->plen, d + start, n - start);
		c->plen += n - start;
	}
}

static void *consumer_main(void *arg)
{
	struct consumer *c = arg;
	unsigned spins = 0;

	for (;;) {
		struct ptd_subscriber_stats st;
		const char *d;
		size_t n;
		enum ptd_sub_state s = ptd_subscriber_peek(c->sub, &d, &n);

		ptd_subscriber_get_stats(c->sub, &st);
		if (st.mem > c->max_mem)
			c->max_mem = st.mem;
		if (st.sent + st.lost != st.matched)
			fail_once(c, "sent + lost != matched mid-stream");
		if (s == PTD_SUB_DONE)
			break;
		if (s == PTD_SUB_IDLE) {
			if (++spins > 20000000)
				break;	/* the test would hang otherwise */
			sched_yield();
			continue;
		}
		/* Take at most 4 KiB at a time, like a socket would. */
		if (n > 4096)
			n = 4096;
		consume_bytes(c, d, n);
		ptd_subscriber_consume(c->sub, n);
		if (c->slow_us)
			usleep(c->slow_us);
	}
	return NULL;
}

static void consumer_init(struct consumer *c, struct ptd_subscriber *sub,
			  unsigned slow_us)
{
	memset(c, 0, sizeof(*c));
	c->sub = sub;
	c->slow_us = slow_us;
	c->order_ok = c->tid_ok = true;
	c->pcap = 2 * PTD_JSON_MAX_RECORD + 8192;
	c->pending = malloc(c->pcap);
}

static void test_fast_slow_filtered(void)
{
	struct ptd_fanout *f;
	(void)ptd_fanout_new(7, 100, wake, NULL, &f);
	struct ptd_subscriber *fast, *slow, *filt;
	struct ptd_filter all = filter_of(PTD_REC_ALL, 0);
	struct ptd_filter tid2 = filter_of(PTD_REC_ALL, 2);
	struct consumer cf, cs, ct;
	struct ptd_subscriber_stats st;
	struct ptd_session_end end;
	pthread_t tf, ts, tt;
	uint64_t i;

	REQUIRE(f);
	REQUIRE(ptd_fanout_subscribe(f, &all, 64u << 20, 16, &fast) == 0);
	REQUIRE(ptd_fanout_subscribe(f, &all, PTD_JSON_MAX_RECORD, 16,
				     &slow) == 0);
	REQUIRE(ptd_fanout_subscribe(f, &tid2, 64u << 20, 16, &filt) == 0);
	CHECK_EQ_INT(ptd_fanout_count(f), 3);
	consumer_init(&cf, fast, 0);
	consumer_init(&cs, slow, 200);
	consumer_init(&ct, filt, 0);
	ct.want_tid = 2;
	pthread_create(&tf, NULL, consumer_main, &cf);
	pthread_create(&ts, NULL, consumer_main, &cs);
	pthread_create(&tt, NULL, consumer_main, &ct);
	/* The producer: this thread. */
	for (i = 0; i < NRECORDS; i++) {
		struct ptd_record r = mkinsn(i);

		ptd_fanout_record(f, &r);
	}
	memset(&end, 0, sizeof(end));
	end.reason = PTD_END_EXITED;
	end.exit_code = 3;
	ptd_fanout_end(f, &end);
	pthread_join(tf, NULL);
	pthread_join(ts, NULL);
	pthread_join(tt, NULL);

	/* Fast: everything, in order, nothing lost. */
	CHECK_EQ_STR(cf.first_error, "");
	CHECK(cf.hello_first);
	CHECK(cf.bye_last);
	CHECK_EQ_U64(cf.records, NRECORDS);
	CHECK_EQ_U64(cf.lost, 0);
	CHECK(!cf.any_lost_line);
	CHECK(cf.order_ok);
	CHECK_EQ_STR(cf.bye_reason, "exited");
	CHECK_EQ_INT(cf.exit_code, 3);
	CHECK_EQ_U64(cf.bye_sent, NRECORDS);
	ptd_subscriber_get_stats(fast, &st);
	CHECK_EQ_U64(st.matched, NRECORDS);
	CHECK_EQ_U64(st.sent, NRECORDS);
	CHECK_EQ_U64(st.lost, 0);

	/* Slow: lost + received == matched == produced; order kept. */
	CHECK_EQ_STR(cs.first_error, "");
	CHECK(cs.hello_first);
	CHECK(cs.bye_last);
	CHECK(cs.order_ok);
	CHECK(cs.lost > 0);
	CHECK(cs.any_lost_line);
	CHECK_EQ_U64(cs.lost + cs.records, NRECORDS);
	CHECK_EQ_U64(cs.lost_insn, cs.lost);
	ptd_subscriber_get_stats(slow, &st);
	CHECK_EQ_U64(st.matched, NRECORDS);
	CHECK_EQ_U64(st.sent, cs.records);
	CHECK_EQ_U64(st.lost, cs.lost);
	CHECK_EQ_U64(st.lost_kind[PTD_REC_INSN], cs.lost);
	CHECK_EQ_U64(cs.bye_sent, cs.records);
	CHECK_EQ_U64(cs.bye_lost, cs.lost);
	/* Bounded: two buffers, each at most twice the limit plus one
	 * lost line and the bye. */
	if (cs.max_mem > 4 * (PTD_JSON_MAX_RECORD + 4096))
		CHECK_FAIL_("slow subscriber memory %zu exceeds the bound",
			    cs.max_mem);

	/* Filtered: exactly the tid 2 records. */
	CHECK_EQ_STR(ct.first_error, "");
	CHECK(ct.tid_ok);
	CHECK(ct.order_ok);
	CHECK_EQ_U64(ct.records, NRECORDS / 2);
	CHECK_EQ_U64(ct.lost, 0);
	CHECK(atomic_load(&wakes) > 0);

	free(cf.pending);
	free(cs.pending);
	free(ct.pending);
	ptd_fanout_unsubscribe(f, fast);
	CHECK_EQ_INT(ptd_fanout_count(f), 2);
	ptd_fanout_free(f);	/* frees slow and filt */
}

/* Drain everything queued now into @buf (NUL-terminated). */
/* What the loop writes of @s after the producer of @f has flushed (the
 * end of its round: ptd_fanout_flush queues what it staged); NULL @f: a
 * producer of another thread, not flushed here. */
static enum ptd_sub_state drain(struct ptd_fanout *f, struct ptd_subscriber *s,
				char *buf, size_t cap)
{
	size_t len = strlen(buf);
	enum ptd_sub_state st;
	const char *d;
	size_t n;

	if (f)
		ptd_fanout_flush(f);
	while ((st = ptd_subscriber_peek(s, &d, &n)) == PTD_SUB_DATA) {
		if (len + n >= cap)
			abort();
		memcpy(buf + len, d, n);
		len += n;
		buf[len] = 0;
		ptd_subscriber_consume(s, n);
	}
	return st;
}

/* The loop is woken once for many records: a record's wake-up waits for
 * the producer's flush (the end of its round) or for a queue holding
 * 256 KiB (half of a smaller queue), which records reach a stage (32 KiB
 * at most) at a time; a line pays what is owed at once; a paced producer
 * pays it before it waits. */
static void test_wake_batched(void)
{
	struct ptd_fanout *f;
	struct ptd_filter all = filter_of(PTD_REC_ALL, 0);
	struct ptd_subscriber *s;
	struct ptd_record r;
	static char buf[1 << 20];
	uint64_t i;
	unsigned w0;

	(void)ptd_fanout_new(3, 100, wake, NULL, &f);
	REQUIRE(f);
	REQUIRE(ptd_fanout_subscribe(f, &all, 64u << 20, 1, &s) == 0);
	buf[0] = 0;
	(void)drain(f, s, buf, sizeof(buf));	/* its hello */
	ptd_fanout_clear_wake(f);		/* as the loop does */
	w0 = atomic_load(&wakes);
	r = mkinsn(0);
	ptd_fanout_record(f, &r);
	CHECK_EQ_INT(atomic_load(&wakes), w0);	/* owed */
	ptd_fanout_flush(f);
	CHECK_EQ_INT(atomic_load(&wakes), w0 + 1);
	ptd_fanout_flush(f);			/* nothing more owed */
	CHECK_EQ_INT(atomic_load(&wakes), w0 + 1);
	buf[0] = 0;
	(void)drain(f, s, buf, sizeof(buf));
	ptd_fanout_clear_wake(f);
	/* a queue filling: one wake-up, when it holds 256 KiB */
	for (i = 1; atomic_load(&wakes) == w0 + 1 && i < 100000; i++) {
		r = mkinsn(i);
		ptd_fanout_record(f, &r);
	}
	CHECK_EQ_INT(atomic_load(&wakes), w0 + 2);
	{
		const char *d;
		size_t n = 0, total = 0;

		while (ptd_subscriber_peek(s, &d, &n) == PTD_SUB_DATA) {
			total += n;
			ptd_subscriber_consume(s, n);
		}
		CHECK(total >= 256u << 10 &&
		      total < (256u << 10) + (32u << 10));
		fprintf(stderr, "  woken at %zu bytes queued (%" PRIu64
			" records)\n", total, i - 1);
	}
	ptd_fanout_clear_wake(f);
	/* a line goes at once, with the records owed before it */
	r = mkinsn(i);
	ptd_fanout_record(f, &r);
	CHECK_EQ_INT(atomic_load(&wakes), w0 + 2);
	ptd_fanout_line(f, "{\"type\":\"snapshot\"}\n", 20);
	CHECK_EQ_INT(atomic_load(&wakes), w0 + 3);
	ptd_fanout_free(f);	/* frees s */
}

/* Records are staged by the decode thread and queued a batch at a time
 * (one lock a batch): none is in the queue, nor counted, before the
 * producer flushes, a line or the end goes, or a stage fills (32 KiB);
 * then all, in their order, before what went after them. */
static void test_stage_batches(void)
{
	struct ptd_fanout *f;
	struct ptd_filter all = filter_of(PTD_REC_ALL, 0);
	struct ptd_subscriber *s;
	struct ptd_subscriber_stats st;
	struct ptd_record r;
	static char buf[1 << 22];
	const char *d, *p, *snap;
	size_t n = 0;
	uint64_t i, k;

	(void)ptd_fanout_new(4, 100, NULL, NULL, &f);
	REQUIRE(f);
	REQUIRE(ptd_fanout_subscribe(f, &all, 64u << 20, 1, &s) == 0);
	buf[0] = 0;
	(void)drain(f, s, buf, sizeof(buf));	/* its hello */
	r = mkinsn(0);
	ptd_fanout_record(f, &r);
	CHECK_EQ_INT(ptd_subscriber_peek(s, &d, &n), PTD_SUB_IDLE);
	ptd_subscriber_get_stats(s, &st);
	CHECK_EQ_U64(st.matched, 0);
	/* a line goes after the record staged before it */
	ptd_fanout_line(f, "{\"type\":\"snapshot\"}\n", 20);
	buf[0] = 0;
	(void)drain(NULL, s, buf, sizeof(buf));
	p = strstr(buf, "\"ip\":\"0x400000\"");
	snap = strstr(buf, "snapshot");
	CHECK(p && snap && p < snap);
	ptd_subscriber_get_stats(s, &st);
	CHECK_EQ_U64(st.matched, 1);
	CHECK_EQ_U64(st.sent, 1);
	/* a full stage is queued without a flush: a batch, not a record */
	for (i = 1; i < 10000; i++) {
		r = mkinsn(i);
		ptd_fanout_record(f, &r);
		if (ptd_subscriber_peek(s, &d, &n) == PTD_SUB_DATA)
			break;
	}
	CHECK(i > 20 && i < 10000);
	CHECK(n <= 32u << 10);
	ptd_subscriber_get_stats(s, &st);
	CHECK(st.sent > 20 && st.sent <= i + 1);
	CHECK_EQ_U64(st.sent, st.matched);
	/* the rest at the flush: every record once, in order */
	buf[0] = 0;
	(void)drain(f, s, buf, sizeof(buf));
	ptd_subscriber_get_stats(s, &st);
	CHECK_EQ_U64(st.sent, i + 1);
	CHECK_EQ_U64(st.lost, 0);
	for (k = 1, p = buf; k <= i; k++) {
		char ip[48];

		(void)snprintf(ip, sizeof(ip), "\"ip\":\"%#" PRIx64 "\"",
			       (uint64_t)0x400000 + k);
		p = strstr(p, ip);
		if (!p) {
			CHECK_FAIL_("record %" PRIu64 " missing or out of "
				    "order", k);
			break;
		}
	}
	ptd_fanout_free(f);	/* frees s */
}

/* A flush whose staged records fill a queue past the wake-up mark wakes
 * the loop (the stage's own wake-up is paid, not dropped: the loop would
 * sleep on, the queue full, the wake-up thought on its way). */
static void test_stage_flush_wakes(void)
{
	struct ptd_fanout *f;
	struct ptd_filter all = filter_of(PTD_REC_ALL, 0);
	struct ptd_subscriber *s;
	struct ptd_subscriber_stats st;
	struct ptd_record r;
	static char buf[1 << 20];
	const char *d;
	size_t n;
	unsigned w0;

	(void)ptd_fanout_new(3, 100, wake, NULL, &f);
	REQUIRE(f);
	/* woken at half of 32 KiB, below what a stage holds */
	REQUIRE(ptd_fanout_subscribe(f, &all, 4 * PTD_JSON_MAX_RECORD, 1,
				     &s) == 0);
	buf[0] = 0;
	(void)drain(f, s, buf, sizeof(buf));	/* its hello */
	ptd_fanout_clear_wake(f);
	w0 = atomic_load(&wakes);
	for (uint64_t i = 0; ; i++) {
		r = mkinsn(i);
		ptd_fanout_record(f, &r);
		ptd_subscriber_get_stats(s, &st);
		REQUIRE(st.matched == 0);	/* all staged */
		if (i * 180 > 20u << 10)	/* about 180 bytes a line */
			break;
	}
	CHECK_EQ_INT(ptd_subscriber_peek(s, &d, &n), PTD_SUB_IDLE);
	CHECK_EQ_INT(atomic_load(&wakes), w0);
	ptd_fanout_flush(f);
	CHECK_EQ_INT(atomic_load(&wakes), w0 + 1);
	CHECK_EQ_INT(ptd_subscriber_peek(s, &d, &n), PTD_SUB_DATA);
	CHECK(n >= 2 * PTD_JSON_MAX_RECORD);
	ptd_fanout_free(f);	/* frees s */
}

static void test_lost_before_next_and_bye(void)
{
	struct ptd_fanout *f;
	(void)ptd_fanout_new(1, 5, NULL, NULL, &f);
	struct ptd_filter all = filter_of(PTD_REC_ALL, 0);
	struct ptd_subscriber *s;
	struct ptd_session_end end;
	static char buf[1 << 20];
	uint64_t i, n = 0;
	char *p, *lost;

	REQUIRE(f);
	REQUIRE(ptd_fanout_subscribe(f, &all, PTD_JSON_MAX_RECORD, 1, &s) ==
		0);
	/* Nothing drains: the queue fills, the rest is dropped. */
	for (i = 0; i < 200; i++) {
		struct ptd_record r = mkinsn(i);

		ptd_fanout_record(f, &r);
	}
	buf[0] = 0;
	CHECK_EQ_INT(drain(f, s, buf, sizeof(buf)), PTD_SUB_IDLE);
	CHECK(strstr(buf, "\"type\":\"lost\"") == NULL);
	for (p = buf; (p = strstr(p, "\"type\":\"insn\"")); p++)
		n++;
	CHECK(n > 0 && n < 200);
	/* The next record that fits comes after a lost line. */
	struct ptd_record r = mkinsn(1000);

	ptd_fanout_record(f, &r);
	buf[0] = 0;
	drain(f, s, buf, sizeof(buf));
	lost = strstr(buf, "{\"type\":\"lost\"");
	REQUIRE(lost == buf);
	char want[128];

	(void)snprintf(want, sizeof(want),
		       "{\"type\":\"lost\",\"records\":%" PRIu64
		       ",\"insn\":%" PRIu64 "}\n",
		       200 - n, 200 - n);
	CHECK(!strncmp(buf, want, strlen(want)));
	CHECK_CONTAINS(buf, "\"ip\":\"0x4003e8\"");
	/* Drop more, then end: lost comes before bye. */
	for (i = 0; i < 200; i++) {
		struct ptd_record r2 = mkinsn(2000 + i);

		ptd_fanout_record(f, &r2);
	}
	memset(&end, 0, sizeof(end));
	end.reason = PTD_END_ERROR;
	strcpy(end.message, "the source \"failed\"\n");
	ptd_fanout_end(f, &end);
	/* After the end records are ignored. */
	r = mkinsn(9999);
	ptd_fanout_record(f, &r);
	buf[0] = 0;
	CHECK_EQ_INT(drain(f, s, buf, sizeof(buf)), PTD_SUB_DONE);
	char *l = strstr(buf, "{\"type\":\"lost\"");
	char *b = strstr(buf, "{\"type\":\"bye\"");

	REQUIRE(l && b);
	CHECK(l < b);
	CHECK(strstr(b, "\n") == b + strlen(b) - 1);
	CHECK(strstr(buf, "0x40270f") == NULL);
	CHECK_CONTAINS(b, "\"reason\":\"error\"");
	CHECK_CONTAINS(b, "\"message\":\"the source \\\"failed\\\"\\u000a\"");
	cJSON *o = cJSON_Parse(b);

	CHECK(o != NULL);
	cJSON_Delete(o);
	ptd_fanout_free(f);
}

static void test_subscribe_rules(void)
{
	struct ptd_fanout *f;
	(void)ptd_fanout_new(3, 42, NULL, NULL, &f);
	struct ptd_filter ev = filter_of(PTD_REC_BIT(PTD_REC_EVENT) |
					 PTD_REC_BIT(PTD_REC_INSN), 0);
	struct ptd_subscriber *a = NULL, *b = NULL, *c = (void *)0xcd;
	struct ptd_session_end end;
	char buf[4096];

	REQUIRE(f);
	CHECK_EQ_INT(ptd_fanout_subscribe(f, &ev, PTD_JSON_MAX_RECORD - 1, 4,
					  &c),
		     -EINVAL);
	CHECK(c == (void *)0xcd);
	REQUIRE(ptd_fanout_subscribe(f, &ev, 1 << 16, 2, &a) == 0);
	REQUIRE(ptd_fanout_subscribe(f, &ev, 1 << 16, 2, &b) == 0);
	CHECK_EQ_INT(ptd_fanout_subscribe(f, &ev, 1 << 16, 2, &c), -PTD_ELIMIT);
	CHECK(c == (void *)0xcd);
	buf[0] = 0;
	CHECK_EQ_INT(drain(f, a, buf, sizeof(buf)), PTD_SUB_IDLE);
	CHECK_EQ_STR(buf, "{\"type\":\"hello\",\"version\":1,\"session\":3,"
			  "\"pid\":42,\"subscriber\":1,\"kinds\":[\"insn\","
			  "\"event\"]}\n");
	ptd_fanout_unsubscribe(f, b);
	ptd_fanout_unsubscribe(f, NULL);
	CHECK_EQ_INT(ptd_fanout_count(f), 1);
	memset(&end, 0, sizeof(end));
	end.reason = PTD_END_EXITED;
	end.exit_code = -1;
	end.exit_signal = 9;
	CHECK(!ptd_fanout_ended(f));
	ptd_fanout_end(f, &end);
	CHECK(ptd_fanout_ended(f));
	/* A subscriber joining an ended session gets hello and bye. */
	REQUIRE(ptd_fanout_subscribe(f, &ev, 1 << 16, 2, &c) == 0);
	buf[0] = 0;
	CHECK_EQ_INT(drain(f, c, buf, sizeof(buf)), PTD_SUB_DONE);
	CHECK_CONTAINS(buf, "\"subscriber\":3");
	CHECK_CONTAINS(buf, "{\"type\":\"bye\",\"reason\":\"exited\","
			    "\"session\":3,\"pid\":42,\"sent\":0,\"lost\":0,"
			    "\"signal\":9}\n");
	buf[0] = 0;
	CHECK_EQ_INT(drain(f, a, buf, sizeof(buf)), PTD_SUB_DONE);
	CHECK_CONTAINS(buf, "\"signal\":9");
	ptd_fanout_free(f);
	ptd_fanout_free(NULL);
}

static struct ptd_filter filter_fields(pid_t tid, uint32_t fields)
{
	struct ptd_filter f = filter_of(PTD_REC_ALL, tid);

	f.spec.fields = fields;
	return f;
}

/* The lines of @buf after its first (hello), and the first. */
static const char *after_hello(const char *buf)
{
	const char *nl = strchr(buf, '\n');

	return nl ? nl + 1 : buf;
}

/*
 * Two subscribers with the same field set get the same bytes, rendered
 * once: the fan-out renders a record once per distinct field set among
 * the subscribers that want it.  A projected stream is the full stream
 * restricted to its fields; a subscriber leaving or joining with another
 * set changes the renders from then on.
 */
static void test_render_once(void)
{
	enum { N = 400 };
	const uint32_t iptid = PTD_FIELD_BIT(PTD_FIELD_IP) |
			       PTD_FIELD_BIT(PTD_FIELD_TID);
	struct ptd_fanout *f;
	struct ptd_filter fa = filter_fields(0, iptid),
			  fc = filter_fields(1, 0),
			  fd = filter_fields(1, iptid);
	struct ptd_subscriber *a, *b, *c, *d, *e;
	static char ba[1 << 20], bb[1 << 20], bc[1 << 20], bd[1 << 20],
		be[1 << 20];
	uint64_t want_renders = 0;
	struct ptd_filter fe = filter_fields(0, PTD_FIELD_BIT(PTD_FIELD_IP));

	(void)ptd_fanout_new(9, 5, NULL, NULL, &f);
	REQUIRE(f);
	REQUIRE(ptd_fanout_subscribe(f, &fa, 1 << 22, 8, &a) == 0);
	REQUIRE(ptd_fanout_subscribe(f, &fa, 1 << 22, 8, &b) == 0);
	REQUIRE(ptd_fanout_subscribe(f, &fc, 1 << 22, 8, &c) == 0);
	REQUIRE(ptd_fanout_subscribe(f, &fd, 1 << 22, 8, &d) == 0);
	ba[0] = bb[0] = bc[0] = bd[0] = be[0] = 0;
	for (uint64_t i = 0; i < N; i++) {
		struct ptd_record r = mkinsn(i);

		if (i % 3 == 0) {	/* some with every time field */
			r.has_tsc = r.has_time = r.has_wall = true;
			r.tsc = i;
			r.time = 2 * i;
			r.wall = 1795000000000000000ull + i * 400000000ull;
		}
		ptd_fanout_record(f, &r);
		/* {ip,tid} for a and b, all fields for c (tid 1), {ip,tid}
		 * again for d (tid 1: already rendered for a and b) */
		want_renders += 1 + (r.tid == 1);
	}
	CHECK_EQ_U64(ptd_fanout_renders(f), want_renders);
	drain(f, a, ba, sizeof(ba));
	drain(f, b, bb, sizeof(bb));
	drain(f, c, bc, sizeof(bc));
	drain(f, d, bd, sizeof(bd));
	/* every kind (PTD_REC_ALL, whatever kinds there are), then the
	 * fields asked for */
	CHECK_CONTAINS(ba, "\"kinds\":[\"insn\",\"block\",\"event\","
			   "\"error\",\"call\",");
	CHECK_CONTAINS(ba, "\"],\"fields\":[\"type\",\"tid\",\"ip\"]}\n");
	CHECK(strstr(bc, "\"fields\"") == NULL);	/* every field */
	CHECK(strlen(ba) > N * 30);
	CHECK_EQ_STR(after_hello(ba), after_hello(bb));
	CHECK_CONTAINS(ba, "{\"type\":\"insn\",\"tid\":2,\"ip\":\"0x400001\"}\n");
	/* d's stream (tid 1, ip and tid) is c's (tid 1, all) restricted */
	{
		const char *pc = after_hello(bc), *pd = after_hello(bd);
		size_t lines = 0;

		CHECK(fieldcmp_stream(pc, strlen(pc), pd, strlen(pd),
				      iptid | PTD_FIELD_BIT(PTD_FIELD_TYPE),
				      &lines));
		CHECK_EQ_U64(lines, N / 2);
	}
	/* b leaves, e joins with {ip}: a's set is rendered once still, e's
	 * once more */
	ptd_fanout_unsubscribe(f, b);
	REQUIRE(ptd_fanout_subscribe(f, &fe, 1 << 22, 8, &e) == 0);
	want_renders = ptd_fanout_renders(f);
	for (uint64_t i = N; i < 2 * N; i++) {
		struct ptd_record r = mkinsn(i);

		ptd_fanout_record(f, &r);
		want_renders += 2 + (r.tid == 1);
	}
	CHECK_EQ_U64(ptd_fanout_renders(f), want_renders);
	drain(f, e, be, sizeof(be));
	CHECK_CONTAINS(be, "{\"type\":\"insn\",\"ip\":\"0x400191\"}\n");
	/* a record nobody wants is not rendered */
	ptd_fanout_unsubscribe(f, a);
	ptd_fanout_unsubscribe(f, e);
	{
		struct ptd_record r = mkinsn(2 * N);	/* tid 1 */

		want_renders = ptd_fanout_renders(f);
		r.tid = 2;
		ptd_fanout_record(f, &r);
		CHECK_EQ_U64(ptd_fanout_renders(f), want_renders);
		/* nor one after the end */
		struct ptd_session_end end;

		memset(&end, 0, sizeof(end));
		end.reason = PTD_END_EXITED;
		r.tid = 1;
		ptd_fanout_end(f, &end);
		ptd_fanout_record(f, &r);
		CHECK_EQ_U64(ptd_fanout_renders(f), want_renders);
	}
	ptd_fanout_free(f);
}

/* Subscribers come and go while a producer thread fans records out, one
 * by one and in runs (rendered straight into the stages where every
 * subscriber takes its records by kind: every other round): the
 * producer's roster never touches one that has left (ASan checks the
 * memory), and every stream's counts add up. */
struct churn {
	struct ptd_fanout *f;
	atomic_bool stop;
};

static void *churn_producer(void *arg)
{
	struct churn *ch = arg;
	uint64_t i = 0;

	while (!atomic_load(&ch->stop)) {
		struct ptd_record r = mkinsn(i++), run[64];

		ptd_fanout_record(ch->f, &r);
		for (size_t k = 0; k < 64; k++)
			run[k] = mkinsn(i++);
		(void)ptd_fanout_records(ch->f, run, 64, NULL);
	}
	return NULL;
}

static void test_churn(void)
{
	struct churn ch;
	pthread_t t;
	/* the second set all by kind: runs of lines */
	struct ptd_filter fl[2][3] = {
		{ filter_fields(0, 0),
		  filter_fields(1, PTD_FIELD_BIT(PTD_FIELD_IP)),
		  filter_fields(0, PTD_FIELD_BIT(PTD_FIELD_IP) |
					   PTD_FIELD_BIT(PTD_FIELD_FLAGS)) },
		{ filter_fields(0, 0),
		  filter_fields(0, PTD_FIELD_BIT(PTD_FIELD_IP)),
		  filter_fields(0, 0) },
	};

	memset(&ch, 0, sizeof(ch));
	(void)ptd_fanout_new(2, 5, NULL, NULL, &ch.f);
	REQUIRE(ch.f);
	REQUIRE(pthread_create(&t, NULL, churn_producer, &ch) == 0);
	for (unsigned k = 0; k < 300; k++) {
		struct ptd_subscriber *s[3] = { NULL, NULL, NULL };
		struct ptd_subscriber_stats st;

		for (unsigned j = 0; j < 3; j++)
			REQUIRE(ptd_fanout_subscribe(ch.f,
						     &fl[k % 2][(j + k) % 3],
						     1 << 16, 8, &s[j]) == 0);
		/* in the first rounds of the second set, until the producer
		 * made a run for them (at most 10 s) */
		if (k % 2 && k < 20) {
			uint64_t before = ptd_fanout_run_records(ch.f);
			struct timespec t0, now;

			clock_gettime(CLOCK_MONOTONIC, &t0);
			do {
				sched_yield();
				clock_gettime(CLOCK_MONOTONIC, &now);
			} while (ptd_fanout_run_records(ch.f) == before &&
				 now.tv_sec - t0.tv_sec < 10);
			CHECK(ptd_fanout_run_records(ch.f) > before);
		}
		/* a few reads while the producer runs on: reading until the
		 * queue is empty may never end (or fill any buffer) when the
		 * producer refills it as fast as it is read */
		for (unsigned j = 0; j < 4; j++) {
			const char *d;
			size_t n;

			if (ptd_subscriber_peek(s[k % 3], &d, &n) !=
			    PTD_SUB_DATA)
				break;
			ptd_subscriber_consume(s[k % 3], n);
		}
		ptd_subscriber_get_stats(s[k % 3], &st);
		CHECK_EQ_U64(st.sent + st.lost, st.matched);
		for (unsigned j = 0; j < 3; j++)
			ptd_fanout_unsubscribe(ch.f, s[j]);
	}
	atomic_store(&ch.stop, true);
	pthread_join(t, NULL);
	ptd_fanout_free(ch.f);
}

/* A paced producer (PTD_STALL_CUT) cuts off a subscriber that reads
 * nothing for the stall limit: its stream is the records that fit, then
 * -- at ptd_fanout_cut_end, not before -- one lost record with every
 * record it missed and a bye "stalled"; nothing after, not even the
 * session's bye.  The reading subscriber loses nothing and goes on. */
static void test_cut_stalled(void)
{
	struct ptd_fanout *f;
	(void)ptd_fanout_new(7, 5, NULL, NULL, &f);
	struct ptd_filter all = filter_of(PTD_REC_ALL, 0);
	struct ptd_subscriber *a, *b;
	struct ptd_subscriber_stats st;
	struct ptd_session_end end;
	static char abuf[1 << 20], bbuf[1 << 20];
	uint64_t i, got = 0, missed = 0;
	struct timespec t0, t1;
	char want[160], *p;
	long ms;

	REQUIRE(f);
	REQUIRE(ptd_fanout_subscribe(f, &all, 2 * PTD_JSON_MAX_RECORD, 4,
				     &a) == 0);
	REQUIRE(ptd_fanout_subscribe(f, &all, 2 * PTD_JSON_MAX_RECORD, 4,
				     &b) == 0);
	abuf[0] = bbuf[0] = 0;
	/* paced: a reads everything, b nothing; the wait that finds b full
	 * gives up on it after 50 ms, and b is cut */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < 300; i++) {
		struct ptd_record r = mkinsn(i);

		CHECK_EQ_INT(ptd_fanout_wait_room(f, PTD_JSON_MAX_RECORD, 50,
						  PTD_STALL_CUT),
			     PTD_ROOM_OK);
		ptd_fanout_record(f, &r);
		CHECK_EQ_INT(drain(f, a, abuf, sizeof(abuf)), PTD_SUB_IDLE);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	     (t1.tv_nsec - t0.tv_nsec) / 1000000;
	/* (the fan-out's stall clock counts whole milliseconds) */
	CHECK(ms >= 45);
	ptd_subscriber_get_stats(b, &st);
	CHECK(st.cut);
	CHECK(st.sent > 0 && st.sent < 300);
	CHECK_EQ_U64(st.sent + st.lost, 300);
	missed = st.lost;
	/* nothing of the cut shows before cut_end, b's records stay in
	 * order; a marker line is not for b */
	ptd_fanout_line(f, "{\"type\":\"mark\"}\n", 16);
	CHECK_EQ_INT(drain(f, b, bbuf, sizeof(bbuf)), PTD_SUB_IDLE);
	CHECK(strstr(bbuf, "{\"type\":\"lost\"") == NULL &&
	      strstr(bbuf, "mark") == NULL);
	for (p = bbuf; (p = strstr(p, "\"type\":\"insn\"")); p++)
		got++;
	CHECK_EQ_U64(got, st.sent);
	CHECK_EQ_INT(ptd_fanout_cut_end(f, "read nothing"), 1);
	CHECK_EQ_INT(ptd_fanout_cut_end(f, "again"), 0);
	bbuf[0] = 0;
	CHECK_EQ_INT(drain(f, b, bbuf, sizeof(bbuf)), PTD_SUB_DONE);
	(void)snprintf(want, sizeof(want),
		       "{\"type\":\"lost\",\"records\":%" PRIu64
		       ",\"insn\":%" PRIu64 "}\n{\"type\":\"bye\",\"reason\":"
		       "\"stalled\",\"session\":7,\"pid\":5,\"sent\":%" PRIu64
		       ",\"lost\":%" PRIu64 ",\"message\":\"read nothing\"}\n",
		       missed, missed, st.sent, missed);
	CHECK_EQ_STR(bbuf, want);
	/* a goes on: every record, the marker, more records; b gets none */
	for (i = 300; i < 310; i++) {
		struct ptd_record r = mkinsn(i);

		CHECK_EQ_INT(ptd_fanout_wait_room(f, PTD_JSON_MAX_RECORD, 50,
						  PTD_STALL_CUT),
			     PTD_ROOM_OK);
		ptd_fanout_record(f, &r);
	}
	memset(&end, 0, sizeof(end));
	end.reason = PTD_END_DETACHED;
	ptd_fanout_end(f, &end);
	CHECK_EQ_INT(drain(f, a, abuf, sizeof(abuf)), PTD_SUB_DONE);
	CHECK(strstr(abuf, "{\"type\":\"lost\"") == NULL);
	CHECK_CONTAINS(abuf, "{\"type\":\"mark\"}\n");
	CHECK_CONTAINS(abuf, "\"reason\":\"detached\",\"session\":7,"
			     "\"pid\":5,\"sent\":310,\"lost\":0}\n");
	got = 0;
	for (p = abuf; (p = strstr(p, "\"type\":\"insn\"")); p++)
		got++;
	CHECK_EQ_U64(got, 310);
	ptd_subscriber_get_stats(b, &st);
	CHECK_EQ_U64(st.matched, 300);
	bbuf[0] = 0;
	CHECK_EQ_INT(drain(f, b, bbuf, sizeof(bbuf)), PTD_SUB_DONE);
	CHECK_EQ_STR(bbuf, "");
	ptd_fanout_free(f);
}

/* A rule stream's subscriber (ptd_fanout_subscribe_tagged): its hello is
 * the session's session_start, its bye the session's session_end, and
 * every record and lost record says its session right after its type;
 * insn records carry their pid whatever fields were chosen; a session's
 * own subscriber beside it gets the bytes it always got, and the two
 * field sets are rendered apart. */
static void test_tagged(void)
{
	struct ptd_fanout *f;
	struct ptd_filter ip = filter_fields(0, PTD_FIELD_BIT(PTD_FIELD_IP)),
			  all = filter_of(PTD_REC_ALL, 0);
	struct ptd_subscriber *t, *u, *small;
	struct ptd_session_end end;
	static char bt[1 << 20], bu[1 << 20], bs[1 << 20];
	struct ptd_record ev;
	char *p;
	size_t n = 0;

	(void)ptd_fanout_new(77, 4242, NULL, NULL, &f);
	REQUIRE(f);
	REQUIRE(ptd_fanout_subscribe_tagged(f, &ip, 1 << 22, 8, 5, &t) == 0);
	REQUIRE(ptd_fanout_subscribe(f, &ip, 1 << 22, 8, &u) == 0);
	REQUIRE(ptd_fanout_subscribe_tagged(f, &all, PTD_JSON_MAX_RECORD, 8, 5,
					    &small) == 0);
	bt[0] = bu[0] = bs[0] = 0;
	for (uint64_t i = 0; i < 100; i++) {
		struct ptd_record r = mkinsn(i);

		ptd_fanout_record(f, &r);
	}
	memset(&ev, 0, sizeof(ev));
	ev.type = PTD_REC_EVENT;
	ev.pid = 100;
	ev.tid = 1;
	ev.u.event.ev.type = ptev_enabled;
	ptd_fanout_record(f, &ev);
	/* the tagged set and the plain one: two renders a record */
	CHECK_EQ_U64(ptd_fanout_renders(f), 2 * 101 + 101);
	memset(&end, 0, sizeof(end));
	end.reason = PTD_END_EXITED;
	end.exit_code = 3;
	ptd_fanout_end(f, &end);
	CHECK_EQ_INT(drain(f, t, bt, sizeof(bt)), PTD_SUB_DONE);
	CHECK_EQ_INT(drain(f, u, bu, sizeof(bu)), PTD_SUB_DONE);
	CHECK_EQ_INT(drain(f, small, bs, sizeof(bs)), PTD_SUB_DONE);
	CHECK(!strncmp(bt, "{\"type\":\"session_start\",\"session\":77,"
		       "\"pid\":4242,\"rule\":5}\n", 56));
	CHECK_CONTAINS(bt, "\n{\"type\":\"insn\",\"session\":77,\"pid\":100,"
			   "\"ip\":\"0x400001\"}\n");
	CHECK_CONTAINS(bt, "\n{\"type\":\"event\",\"session\":77,\"pid\":100,"
			   "\"tid\":1,\"event\":\"enabled\"");
	CHECK_CONTAINS(bt, "\n{\"type\":\"session_end\",\"reason\":\"exited\","
			   "\"session\":77,\"pid\":4242,\"sent\":101,"
			   "\"lost\":0,\"exit_code\":3}\n");
	CHECK(strstr(bt, "\"type\":\"hello\"") == NULL);
	CHECK(strstr(bt, "\"type\":\"bye\"") == NULL);
	/* every line parses, and every record line has its session */
	for (p = bt; *p; n++) {
		char *nl = strchr(p, '\n');
		cJSON *o;

		REQUIRE(nl);
		o = cJSON_ParseWithLength(p, (size_t)(nl - p));
		CHECK(o && cJSON_IsNumber(cJSON_GetObjectItem(o, "session")) &&
		      cJSON_GetObjectItem(o, "session")->valuedouble == 77);
		cJSON_Delete(o);
		p = nl + 1;
	}
	CHECK_EQ_U64(n, 103);
	/* the plain subscriber: as ever */
	CHECK(!strncmp(bu, "{\"type\":\"hello\"", 15));
	CHECK_CONTAINS(bu, "\n{\"type\":\"insn\",\"ip\":\"0x400001\"}\n");
	CHECK(strstr(bu, "\"session_") == NULL);
	CHECK(strstr(bu, "\"session\":77,\"pid\":100") == NULL);
	/* the small queue lost records: its lost line says whose */
	CHECK_CONTAINS(bs, "{\"type\":\"lost\",\"session\":77,\"records\":");
	ptd_fanout_free(f);
}

/* The longest insn line there can be (every field at its widest, a
 * module name and symbol far too long, of bytes that expand sixfold)
 * stays within PTD_JSON_MAX_RECORD with the longest session tag. */
static void test_tagged_longest(void)
{
	enum { N = 3 * PTD_JSON_MAX_RECORD };
	struct ptd_filter all = filter_fields(0, PTD_FIELDS_ALL);
	struct ptd_fanout *f;
	struct ptd_subscriber *t;
	struct ptd_record r;
	static char buf[1 << 16];
	char *mod = malloc(N + 1), *line;
	size_t len;

	REQUIRE(mod);
	memset(mod, 1, N);
	mod[N] = 0;
	(void)ptd_fanout_new(UINT64_MAX, INT32_MAX, NULL, NULL, &f);
	REQUIRE(f);
	REQUIRE(ptd_fanout_subscribe_tagged(f, &all, 1 << 20, 8, 1, &t) == 0);
	r = mkinsn(0);
	r.pid = INT32_MIN;
	r.tid = INT32_MIN;
	r.u.insn.ip = UINT64_MAX;
	r.u.insn.modoff = UINT64_MAX;
	r.u.insn.module = mod;
	r.u.insn.sym = mod;
	r.u.insn.symoff = UINT64_MAX;
	r.u.insn.isid = INT32_MIN;
	r.u.insn.mode = ptem_unknown;
	r.u.insn.iclass = ptic_far_return;
	r.u.insn.flags = UINT32_MAX;
	r.u.insn.size = pt_max_insn_size;
	memset(r.u.insn.raw, 0xff, sizeof(r.u.insn.raw));
	r.has_tsc = r.has_time = r.has_wall = true;
	r.tsc = r.time = r.wall = UINT64_MAX;
	ptd_fanout_record(f, &r);
	buf[0] = 0;
	drain(f, t, buf, sizeof(buf));
	line = strchr(buf, '\n');
	REQUIRE(line);
	line++;
	len = (size_t)(strchr(line, '\n') - line) + 1;
	CHECK(!strncmp(line, "{\"type\":\"insn\",\"session\":"
		       "18446744073709551615,\"pid\":-2147483648,", 62));
	CHECK(len > PTD_JSON_MAX_RECORD - 200);
	CHECK(len <= PTD_JSON_MAX_RECORD);
	fprintf(stderr, "  longest tagged insn line: %zu bytes\n", len);
	{
		cJSON *o = cJSON_ParseWithLength(line, len);

		CHECK(o && cJSON_GetObjectItem(o, "sym"));
		cJSON_Delete(o);
	}
	ptd_fanout_free(f);
	free(mod);
}

/* Drain everything queued now onto @b (binary frames or JSON lines). */
static enum ptd_sub_state drain_buf(struct ptd_subscriber *s,
				    struct ptd_buf *b)
{
	enum ptd_sub_state st;
	const char *d;
	size_t n;

	while ((st = ptd_subscriber_peek(s, &d, &n)) == PTD_SUB_DATA) {
		if (ptd_buf_append(b, d, n) < 0)
			abort();
		ptd_subscriber_consume(s, n);
	}
	return st;
}

/* @b's frames converted to JSON lines, into @out (NUL-terminated); false
 * if the reader refused them. */
static bool frames_to_json(const struct ptd_buf *b, struct ptd_buf *out)
{
	int in = memfd_create("bin", 0), o = memfd_create("json", 0);
	struct ptd_jsonw w;
	struct ptd_diag d = { "" };
	off_t end;
	bool ok;

	if (in < 0 || o < 0 || ptd_write_all(in, b->data, b->len) < 0 ||
	    lseek(in, 0, SEEK_SET) != 0 || ptd_jsonw_init(&w, o, 0) < 0)
		abort();
	ok = ptd_bin_to_json(in, &w, &d) == 0;
	if (!ok)
		fprintf(stderr, "frames_to_json: %s\n", d.msg);
	(void)ptd_jsonw_fini(&w);
	end = lseek(o, 0, SEEK_END);
	out->len = 0;
	if (ptd_buf_reserve(out, (size_t)end + 1) < 0 ||
	    pread(o, out->data, (size_t)end, 0) != end)
		abort();
	out->len = (size_t)end;
	out->data[end] = 0;
	close(in);
	close(o);
	return ok;
}

/* The stream after its hello line (NUL-terminated @b). */
static const char *past_hello(const struct ptd_buf *b)
{
	const char *nl = b->data ? strchr((const char *)b->data, '\n') : NULL;

	return nl ? nl + 1 : "";
}

static struct ptd_filter filter_fmt(pid_t tid, uint32_t fields, bool binary)
{
	struct ptd_filter f = filter_fields(tid, fields);

	f.spec.binary = binary;
	return f;
}

/* The insn and event records of JSON lines @s, and the records its lost
 * lines count. */
static void count_json(const char *s, uint64_t *records, uint64_t *lost)
{
	*records = *lost = 0;
	for (const char *p = s; *p;) {
		const char *nl = strchr(p, '\n');
		size_t k = nl ? (size_t)(nl - p) + 1 : strlen(p);

		static const char insn[] = "{\"type\":\"insn\"",
				  event[] = "{\"type\":\"event\"",
				  lostr[] = "{\"type\":\"lost\",\"records\":";

		if (!strncmp(p, insn, sizeof(insn) - 1) ||
		    !strncmp(p, event, sizeof(event) - 1))
			(*records)++;
		else if (!strncmp(p, lostr, sizeof(lostr) - 1))
			*lost += strtoull(p + sizeof(lostr) - 1, NULL, 10);
		p += k;
	}
}

/* Binary subscribers get, converted back, the lines JSON subscribers of
 * the same filter and fields get -- records staged and queued in batches,
 * events and control lines between them in order, a lost record where a
 * small queue dropped some -- and a binary subscriber's counts hold:
 * what it received plus what its lost records count is what it matched,
 * as its bye says. */
static void test_binary(void)
{
	uint32_t iptid = PTD_FIELD_BIT(PTD_FIELD_IP) |
			 PTD_FIELD_BIT(PTD_FIELD_TID);
	struct ptd_fanout *fj, *f;	/* JSON subscribers, binary ones */
	struct ptd_subscriber *sub[5];
	struct ptd_filter flt[5] = {
		filter_fmt(0, iptid, false), filter_fmt(0, iptid, true),
		filter_fmt(1, iptid, false), filter_fmt(1, iptid, true),
		filter_fmt(0, iptid, true),	/* small queue, not drained */
	};
	struct ptd_buf out[5] = { { 0 } }, conv = { 0 }, conv2 = { 0 };
	struct ptd_subscriber_stats st;
	struct ptd_session_end end;
	uint64_t matched = 0, got = 0, lost = 0;

	/* two fan-outs fed alike, the JSON subscribers in one, the binary
	 * ones in the other */
	(void)ptd_fanout_new(1, 100, NULL, NULL, &fj);
	(void)ptd_fanout_new(1, 100, NULL, NULL, &f);
	REQUIRE(f && fj);
	for (unsigned i = 0; i < 5; i++)
		REQUIRE(ptd_fanout_subscribe(flt[i].spec.binary ? f : fj,
					     &flt[i],
					     i == 4 ? 4 * PTD_JSON_MAX_RECORD
						    : 64u << 20,
					     5, &sub[i]) == 0);
	for (uint64_t k = 0; k < 30000; k++) {
		struct ptd_record r = mkinsn(k);

		if (k % 97 == 5) {
			r.type = PTD_REC_EVENT;
			memset(&r.u, 0, sizeof(r.u));
			r.u.event.ev.type = ptev_enabled;
			r.u.event.ev.variant.enabled.ip = k;
		}
		ptd_fanout_record(fj, &r);
		ptd_fanout_record(f, &r);
		matched++;
		if (k % 1501 == 7) {
			ptd_fanout_line(fj, "{\"type\":\"snapshot\"}\n", 20);
			ptd_fanout_line(f, "{\"type\":\"snapshot\"}\n", 20);
		}
		if (k % 2000 == 1999) {
			ptd_fanout_flush(fj);
			ptd_fanout_flush(f);
			for (unsigned i = 0; i < 4; i++)
				(void)drain_buf(sub[i], &out[i]);
		}
	}
	memset(&end, 0, sizeof(end));
	end.reason = PTD_END_EXITED;
	ptd_fanout_end(fj, &end);
	ptd_fanout_end(f, &end);
	for (unsigned i = 0; i < 5; i++) {
		CHECK_EQ_INT(drain_buf(sub[i], &out[i]), PTD_SUB_DONE);
		REQUIRE(ptd_buf_append(&out[i], "", 1) == 0);
		out[i].len--;
	}
	for (unsigned i = 0; i < 4; i += 2) {
		const char *j = past_hello(&out[i]), *p;

		REQUIRE(frames_to_json(&out[i + 1], &conv));
		p = past_hello(&conv);
		if (strcmp(j, p))
			CHECK_FAIL_("subscriber %u: the binary stream "
				    "converted differs from the JSON one "
				    "(%zu vs %zu bytes)", i + 1, strlen(p),
				    strlen(j));
		CHECK(strstr(j, "snapshot") != NULL);
		CHECK(strstr(j, "\"event\"") != NULL);
		/* fixed-width records: 12 bytes, not 40 */
		CHECK(out[i + 1].len * 2 < out[i].len);
	}
	/* the small queue lost records and says how many */
	REQUIRE(frames_to_json(&out[4], &conv2));
	count_json((const char *)conv2.data, &got, &lost);
	ptd_subscriber_get_stats(sub[4], &st);
	CHECK(lost > 0);
	CHECK_EQ_U64(got + lost, matched);
	CHECK_EQ_U64(st.matched, matched);
	CHECK_EQ_U64(st.sent, got);
	CHECK_EQ_U64(st.lost, lost);
	CHECK(st.binary);
	for (unsigned i = 0; i < 5; i++)
		ptd_buf_fini(&out[i]);
	ptd_buf_fini(&conv);
	ptd_buf_fini(&conv2);
	ptd_fanout_free(fj);
	ptd_fanout_free(f);
}

/* @recs (@n) to @f as a replay's decode hands them over with runs of
 * addresses (decode/decoder.h, opts.ips): each stretch of insn records
 * of one thread as its addresses where ptd_fanout_ips_ready says so
 * (counted in *@ips_calls), else with ptd_fanout_records.  Returns how
 * many were taken. */
static size_t fan_with_ips(struct ptd_fanout *f, const struct ptd_record *recs,
			   size_t n, const struct ptd_fanout_pace *pace,
			   size_t *ips_calls)
{
	static uint64_t ips[1024];
	size_t done = 0;

	for (size_t i = 0; i < n;) {
		size_t m = 0, k;

		while (i + m < n && m < 1024 &&
		       recs[i + m].type == PTD_REC_INSN &&
		       recs[i + m].tid == recs[i].tid)
			m++;
		if (m && ptd_fanout_ips_ready(f)) {
			for (size_t j = 0; j < m; j++)
				ips[j] = recs[i + j].u.insn.ip;
			k = ptd_fanout_ips(f, recs[i].pid, recs[i].tid, ips,
					   m, pace);
			(*ips_calls)++;
		} else {
			m = m ? m : 1;
			k = ptd_fanout_records(f, recs + i, m, pace);
		}
		done += k;
		if (k < m)
			break;
		i += m;
	}
	return done;
}

/* ptd_fanout_records hands @recs (@n) over in runs to subscribers of
 * filters @flt with queues of @qsize bytes (@nsub of each) as
 * ptd_fanout_record would one by one, each queued at once (flushed: no
 * stage holds two records, so no run of fixed-width records or JSON
 * lines is made): the same bytes and counts; subscriber @lossy loses
 * records (its queue is small and never drained before the end).  With
 * @ips, runs of addresses stand for insn records where the fan-out
 * takes them (fan_with_ips): the same again; *@ret_ips_calls counts
 * them.  With @rules, subscriber i whose rules[i] is not 0 is that rule
 * stream's (its lines tagged).  *@ret_runs (if not NULL): how many
 * records went in runs (ptd_fanout_run_records; one by one, none). */
static void runs_as_one_by_one(const struct ptd_filter *flt,
			       const size_t *qsize, unsigned nsub,
			       const struct ptd_record *recs, size_t n,
			       unsigned lossy, bool ips, size_t *ret_ips_calls,
			       const uint64_t *rules, uint64_t *ret_runs)
{
	enum { NSUB = 8 };
	struct ptd_fanout *f[2];	/* one by one, in runs */
	struct ptd_subscriber *sub[2][NSUB];
	struct ptd_buf out[2][NSUB] = { { { 0 } } };
	struct ptd_session_end end;

	REQUIRE(nsub <= NSUB);
	for (int w = 0; w < 2; w++) {
		(void)ptd_fanout_new(1, 100, NULL, NULL, &f[w]);
		REQUIRE(f[w]);
		for (unsigned i = 0; i < nsub; i++)
			REQUIRE(ptd_fanout_subscribe_tagged(
					f[w], &flt[i], qsize[i], NSUB,
					rules ? rules[i] : 0, &sub[w][i]) == 0);
	}
	for (size_t at = 0, run = 1; at < n; at += run, run = run * 3 % 997) {
		size_t k = n - at < run ? n - at : run;

		for (size_t i = 0; i < k; i++) {
			ptd_fanout_record(f[0], &recs[at + i]);
			ptd_fanout_flush(f[0]);
		}
		if (ips)
			CHECK_EQ_U64(fan_with_ips(f[1], recs + at, k, NULL,
						  ret_ips_calls),
				     k);
		else
			CHECK_EQ_U64(ptd_fanout_records(f[1], recs + at, k,
							NULL),
				     k);
		if ((at / 1000) % 2) {
			for (int w = 0; w < 2; w++) {
				ptd_fanout_flush(f[w]);
				for (unsigned i = 0; i < nsub; i++)
					if (i != lossy)
						(void)drain_buf(sub[w][i],
								&out[w][i]);
			}
		}
	}
	memset(&end, 0, sizeof(end));
	end.reason = PTD_END_EXITED;
	for (int w = 0; w < 2; w++) {
		ptd_fanout_end(f[w], &end);
		for (unsigned i = 0; i < nsub; i++)
			CHECK_EQ_INT(drain_buf(sub[w][i], &out[w][i]),
				     PTD_SUB_DONE);
	}
	for (unsigned i = 0; i < nsub; i++) {
		struct ptd_subscriber_stats a, b;

		CHECK(out[0][i].len > 0);
		if (out[0][i].len != out[1][i].len ||
		    memcmp(out[0][i].data, out[1][i].data, out[0][i].len))
			CHECK_FAIL_("subscriber %u: a run's bytes differ from "
				    "one by one (%zu vs %zu bytes)", i,
				    out[1][i].len, out[0][i].len);
		ptd_subscriber_get_stats(sub[0][i], &a);
		ptd_subscriber_get_stats(sub[1][i], &b);
		CHECK_EQ_U64(b.matched, a.matched);
		CHECK_EQ_U64(b.sent, a.sent);
		CHECK_EQ_U64(b.lost, a.lost);
		if (i == lossy)
			CHECK(b.lost > 0);
		ptd_buf_fini(&out[0][i]);
		ptd_buf_fini(&out[1][i]);
	}
	CHECK_EQ_U64(ptd_fanout_run_records(f[0]), 0);
	if (ret_runs)
		*ret_runs = ptd_fanout_run_records(f[1]);
	ptd_fanout_free(f[0]);
	ptd_fanout_free(f[1]);
}

/* A paced producer handing @recs (@n) over @step at a time to one
 * subscriber of @flt whose small queue is drained after each: every
 * record sent, none lost.  *@ret_f is the fan-out, *@ret_sub its
 * subscriber, @out what it read. */
static void paced_drained(const struct ptd_filter *flt,
			  const struct ptd_record *recs, size_t n, size_t step,
			  struct ptd_fanout **ret_f,
			  struct ptd_subscriber **ret_sub, struct ptd_buf *out)
{
	struct ptd_fanout_pace pace = { PTD_JSON_MAX_RECORD, 50,
					PTD_STALL_DROP };
	struct ptd_subscriber_stats st;
	struct ptd_fanout *f;

	(void)ptd_fanout_new(2, 100, NULL, NULL, &f);
	REQUIRE(f);
	*ret_f = f;
	REQUIRE(ptd_fanout_subscribe(f, flt, 8 * PTD_JSON_MAX_RECORD, 1,
				     ret_sub) == 0);
	for (size_t at = 0; at < n; at += step) {
		CHECK_EQ_U64(ptd_fanout_records(f, recs + at, step, &pace),
			     step);
		ptd_fanout_flush(f);
		(void)drain_buf(*ret_sub, out);
	}
	ptd_subscriber_get_stats(*ret_sub, &st);
	CHECK_EQ_U64(st.sent, n);
	CHECK_EQ_U64(st.lost, 0);
}

/* ptd_fanout_records hands runs over as ptd_fanout_record one by one
 * would (runs_as_one_by_one): to JSON, projected, filtered and binary
 * subscribers (records of some bytes, and of none: fields "type"); to
 * subscribers that all take their records by kind, insn records in fixed
 * width (each view encodes a run once), one of them events only; to
 * subscribers that all take their records by kind, insn records as JSON
 * lines (each view renders a run once, into a stage), tagged or not --
 * runs taken for most records where they can be, none one by one; with a
 * pace, a cancelled or abandoned wait hands over nothing more and says
 * so, a reader that keeps up gets every record, fixed-width ones too. */
static void test_records_run(void)
{
	uint32_t iptid = PTD_FIELD_BIT(PTD_FIELD_IP) |
			 PTD_FIELD_BIT(PTD_FIELD_TID);
	unsigned all = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT);
	size_t big = 64u << 20, small = 4 * PTD_JSON_MAX_RECORD;
	/* the last: binary records of no bytes (fields "type" alone) */
	struct ptd_filter flt[6] = {
		filter_of(all, 0), filter_fmt(0, iptid, false),
		filter_fmt(0, iptid, true), filter_of(all, 2),
		filter_of(all, 0),
		filter_fmt(0, PTD_FIELD_BIT(PTD_FIELD_TYPE), true),
	};
	size_t qsize[6] = { big, big, big, big, small, big };
	/* by kind, fixed width where insn: ip,tid twice (one small), ip,
	 * events as JSON */
	struct ptd_filter fixed[4] = {
		filter_fmt(0, iptid, true), filter_fmt(0, iptid, true),
		filter_fmt(0, PTD_FIELD_BIT(PTD_FIELD_IP), true),
		filter_of(PTD_REC_BIT(PTD_REC_EVENT), 0),
	};
	size_t fqsize[4] = { big, small, big, big };
	/* by kind, JSON lines where insn: all fields twice (one small),
	 * ip,tid, events only, "type" alone */
	struct ptd_filter json[5] = {
		filter_of(all, 0), filter_of(all, 0),
		filter_fmt(0, iptid, false),
		filter_of(PTD_REC_BIT(PTD_REC_EVENT), 0),
		filter_fields(0, PTD_FIELD_BIT(PTD_FIELD_TYPE)),
	};
	size_t jqsize[5] = { big, small, big, big, big };
	uint64_t rules[5] = { 3, 3, 0, 3, 3 }, in_runs = 0;
	enum { N = 20000 };
	struct ptd_fanout *f[2];
	struct ptd_subscriber *sub[2][1];
	struct ptd_buf out[2][1] = { { { 0 } } };
	static struct ptd_record recs[N];
	struct ptd_fanout_pace pace = { PTD_JSON_MAX_RECORD, 50,
					PTD_STALL_DROP };

	for (size_t k = 0; k < N; k++) {
		recs[k] = mkinsn(k);
		if (k % 89 == 3) {
			recs[k].type = PTD_REC_EVENT;
			memset(&recs[k].u, 0, sizeof(recs[k].u));
			recs[k].u.event.ev.type = ptev_enabled;
			recs[k].u.event.ev.variant.enabled.ip = k;
		}
	}
	runs_as_one_by_one(flt, qsize, 6, recs, N, 4, false, NULL, NULL, NULL);
	runs_as_one_by_one(fixed, fqsize, 4, recs, N, 1, false, NULL, NULL,
			   &in_runs);
	CHECK(in_runs > N / 2);
	/* JSON lines only: rendered into the stages a run at a time, a
	 * field set shared, tagged (a rule's stream) or not */
	runs_as_one_by_one(json, jqsize, 5, recs, N, 1, false, NULL, NULL,
			   &in_runs);
	CHECK(in_runs > N / 2);
	runs_as_one_by_one(json, jqsize, 5, recs, N, 1, false, NULL, rules,
			   &in_runs);
	CHECK(in_runs > N / 2);

	/* paced, fixed width: a small queue drained as it goes */
	paced_drained(&fixed[0], recs, N, 1000, &f[0], &sub[0][0], &out[0][0]);
	ptd_fanout_unsubscribe(f[0], sub[0][0]);
	ptd_fanout_free(f[0]);
	ptd_buf_fini(&out[0][0]);

	/* paced: a reader that keeps up; a cancelled wait; no one left */
	paced_drained(&flt[0], recs, N, 100, &f[0], &sub[0][0], &out[0][0]);
	/* not drained: the queue fills, the wait is cancelled */
	ptd_fanout_cancel_waits(f[0]);
	CHECK(ptd_fanout_records(f[0], recs, N, &pace) < N);
	ptd_fanout_unsubscribe(f[0], sub[0][0]);
	ptd_fanout_free(f[0]);
	ptd_buf_fini(&out[0][0]);

	(void)ptd_fanout_new(3, 100, NULL, NULL, &f[0]);
	REQUIRE(f[0]);
	REQUIRE(ptd_fanout_subscribe(f[0], &flt[0], 64u << 20, 1,
				     &sub[0][0]) == 0);
	ptd_fanout_unsubscribe(f[0], sub[0][0]);
	CHECK_EQ_U64(ptd_fanout_records(f[0], recs, 10, &pace), 0);
	ptd_fanout_free(f[0]);
}

/* A paced producer's runs of JSON lines (rendered straight into the
 * stage) stop where the credit does, so that its waits come between
 * them: a subscriber whose small queue a slow reader drains gets every
 * record, in order, none lost, though the producer hands over far more
 * than the queue holds at a time. */
static void test_lines_paced(void)
{
	struct ptd_filter flt = filter_of(PTD_REC_BIT(PTD_REC_INSN), 0);
	/* (room for one line of these records: the waits find a little
	 * more, which the runs must not go past) */
	struct ptd_fanout_pace pace = { 512, 20000, PTD_STALL_DROP };
	enum { N = 20000, STEP = 1000 };
	static struct ptd_record recs[N];
	struct ptd_subscriber_stats st;
	struct ptd_session_end end;
	struct ptd_subscriber *sub;
	struct ptd_fanout *f;
	struct consumer c;
	pthread_t th;

	for (size_t k = 0; k < N; k++)
		recs[k] = mkinsn(k);
	(void)ptd_fanout_new(4, 100, NULL, NULL, &f);
	REQUIRE(f);
	REQUIRE(ptd_fanout_subscribe(f, &flt, 8 * PTD_JSON_MAX_RECORD, 1,
				     &sub) == 0);
	consumer_init(&c, sub, 50);
	REQUIRE(pthread_create(&th, NULL, consumer_main, &c) == 0);
	for (size_t at = 0; at < N; at += STEP) {
		CHECK_EQ_U64(ptd_fanout_records(f, recs + at, STEP, &pace),
			     STEP);
		ptd_fanout_flush(f);
	}
	memset(&end, 0, sizeof(end));
	end.reason = PTD_END_EXITED;
	ptd_fanout_end(f, &end);
	pthread_join(th, NULL);
	ptd_subscriber_get_stats(sub, &st);
	CHECK_EQ_U64(st.sent, N);
	CHECK_EQ_U64(st.lost, 0);
	CHECK_EQ_U64(c.records, N);
	CHECK_EQ_U64(c.lost, 0);
	CHECK(c.order_ok);
	CHECK(c.saw_bye && c.bye_last);
	CHECK_EQ_STR(c.first_error, "");
	/* (the reader sets the pace: runs as long as a queue it emptied) */
	CHECK(ptd_fanout_run_records(f) > 0);
	free(c.pending);
	ptd_fanout_unsubscribe(f, sub);
	ptd_fanout_free(f);
}

/* How many lines of @type (e.g. "insn") @b holds as JSON (NUL-terminated
 * or not: up to its length). */
static size_t count_lines(const struct ptd_buf *b, const char *type)
{
	char key[64];
	size_t n = 0, kl;

	kl = (size_t)snprintf(key, sizeof(key), "{\"type\":\"%s\"", type);
	for (size_t i = 0; i + kl <= b->len; i++)
		if (!memcmp(b->data + i, key, kl))
			n++;
	return n;
}

/* @n records: insn records of threads 1 and 2 in stretches of 50, an
 * event now and then (every 89th); with @code, the insn records'
 * addresses steps of 3 bytes with a far jump every 17th, else the
 * sequence numbers (mkinsn). */
static void make_stretches(struct ptd_record *recs, size_t n, bool code)
{
	for (size_t k = 0; k < n; k++) {
		recs[k] = mkinsn(k);
		recs[k].tid = 1 + (pid_t)((k / 50) % 2);
		if (code)
			recs[k].u.insn.ip = 0x7f0000001000ull + 3 * k +
					    (k % 17 == 0 ? 0x100000 : 0);
		if (k % 89 == 3) {
			recs[k].type = PTD_REC_EVENT;
			memset(&recs[k].u, 0, sizeof(recs[k].u));
			recs[k].u.event.ev.type = ptev_enabled;
			recs[k].u.event.ev.variant.enabled.ip = k;
		}
	}
}

/* @recs (@n, a multiple of 1000) to @f with @pace a thousand at a time
 * (fan_with_ips, counting its runs of addresses in *@calls), @sub's
 * queue drained into @out after each: every one taken. */
static void ips_paced_drained(struct ptd_fanout *f, struct ptd_subscriber *sub,
			      const struct ptd_record *recs, size_t n,
			      const struct ptd_fanout_pace *pace,
			      size_t *calls, struct ptd_buf *out)
{
	for (size_t at = 0; at < n; at += 1000) {
		CHECK_EQ_U64(fan_with_ips(f, recs + at, 1000, pace, calls),
			     1000);
		ptd_fanout_flush(f);
		(void)drain_buf(sub, out);
	}
}

/* Runs of addresses (ptd_fanout_ips) stand for insn records where every
 * subscriber takes its records by kind, insn records as binary records
 * of fields among PTD_BIN_IP_FIELDS: the same bytes and counts as one by
 * one, a small queue losing some; ptd_fanout_ips_ready says no where a
 * subscriber reads more of an insn record (JSON lines, another field, a
 * filter by thread), and then nothing changes; a subscriber that came
 * after the roster said yes starts after the addresses decided against
 * it, and the roster says no from then on; paced, a reader that keeps up
 * gets every one, a cancelled wait hands over fewer. */
static void test_ips_run(void)
{
	const uint32_t iptid = PTD_FIELD_BIT(PTD_FIELD_IP) |
			       PTD_FIELD_BIT(PTD_FIELD_TID);
	const uint32_t pidip = PTD_FIELD_BIT(PTD_FIELD_PID) |
			       PTD_FIELD_BIT(PTD_FIELD_IP);
	const unsigned all =
		PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT);
	size_t big = 64u << 20, small = 4 * PTD_JSON_MAX_RECORD;
	struct ptd_filter ok[4] = {
		filter_fmt(0, iptid, true), filter_fmt(0, iptid, true),
		filter_fmt(0, pidip, true),
		filter_of(PTD_REC_BIT(PTD_REC_EVENT), 0),
	};
	size_t okq[4] = { big, small, big, big };
	struct ptd_filter no[4] = {
		filter_of(all, 0),
		filter_fmt(0, iptid | PTD_FIELD_BIT(PTD_FIELD_SIZE), true),
		filter_fmt(0, iptid, false),
		filter_fmt(1, iptid, true),
	};
	struct ptd_fanout_pace pace = { PTD_JSON_MAX_RECORD, 50,
					PTD_STALL_DROP };
	enum { N = 20000 };
	static struct ptd_record recs[N];
	static uint64_t ips[10];
	struct ptd_subscriber_stats st;
	struct ptd_session_end end;
	size_t calls = 0;

	make_stretches(recs, N, false);
	runs_as_one_by_one(ok, okq, 4, recs, N, 1, true, &calls, NULL, NULL);
	CHECK(calls > N / 100);
	for (unsigned i = 0; i < 4; i++) {
		struct ptd_fanout *f;
		struct ptd_subscriber *sub;
		size_t none = 0;

		(void)ptd_fanout_new(1, 100, NULL, NULL, &f);
		REQUIRE(f);
		REQUIRE(ptd_fanout_subscribe(f, &ok[0], big, 2, &sub) == 0);
		CHECK(ptd_fanout_ips_ready(f));
		REQUIRE(ptd_fanout_subscribe(f, &no[i], big, 2, &sub) == 0);
		CHECK(!ptd_fanout_ips_ready(f));
		ptd_fanout_free(f);
		runs_as_one_by_one(&no[i], &big, 1, recs, N, 99, true, &none,
				   NULL, NULL);
		CHECK_EQ_U64(none, 0);
	}

	/* a subscriber comes between the answer and the addresses */
	{
		struct ptd_fanout *f;
		struct ptd_subscriber *a, *b;
		struct ptd_buf out[2] = { { 0 } }, conv = { 0 };

		(void)ptd_fanout_new(1, 100, NULL, NULL, &f);
		REQUIRE(f);
		REQUIRE(ptd_fanout_subscribe(f, &ok[0], big, 2, &a) == 0);
		CHECK(ptd_fanout_ips_ready(f));
		REQUIRE(ptd_fanout_subscribe(f, &no[0], big, 2, &b) == 0);
		for (size_t j = 0; j < 10; j++)
			ips[j] = 0x400000 + j;
		CHECK_EQ_U64(ptd_fanout_ips(f, 100, 1, ips, 10, NULL), 10);
		CHECK(!ptd_fanout_ips_ready(f));
		CHECK_EQ_U64(ptd_fanout_records(f, recs, 5, NULL), 5);
		memset(&end, 0, sizeof(end));
		end.reason = PTD_END_EXITED;
		ptd_fanout_end(f, &end);
		CHECK_EQ_INT(drain_buf(a, &out[0]), PTD_SUB_DONE);
		CHECK_EQ_INT(drain_buf(b, &out[1]), PTD_SUB_DONE);
		REQUIRE(frames_to_json(&out[0], &conv));
		/* (recs[3] is an event) */
		CHECK_EQ_U64(count_lines(&conv, "insn"), 14);
		CHECK_EQ_U64(count_lines(&out[1], "insn"), 4);
		CHECK_EQ_U64(count_lines(&out[1], "event"), 1);
		ptd_subscriber_get_stats(b, &st);
		CHECK_EQ_U64(st.matched, 5);
		ptd_buf_fini(&out[0]);
		ptd_buf_fini(&out[1]);
		ptd_buf_fini(&conv);
		ptd_fanout_free(f);
	}

	/* paced: a small queue drained as it goes; then a cancelled wait */
	{
		struct ptd_fanout *f;
		struct ptd_subscriber *sub;
		struct ptd_buf out = { 0 };
		size_t c = 0;

		(void)ptd_fanout_new(2, 100, NULL, NULL, &f);
		REQUIRE(f);
		REQUIRE(ptd_fanout_subscribe(f, &ok[0], 8 * PTD_JSON_MAX_RECORD,
					     1, &sub) == 0);
		ips_paced_drained(f, sub, recs, N, &pace, &c, &out);
		ptd_subscriber_get_stats(sub, &st);
		CHECK(c > N / 100);
		CHECK_EQ_U64(st.sent, N);
		CHECK_EQ_U64(st.lost, 0);
		ptd_fanout_cancel_waits(f);
		CHECK(fan_with_ips(f, recs, N, &pace, &c) < N);
		ptd_fanout_unsubscribe(f, sub);
		ptd_fanout_free(f);
		ptd_buf_fini(&out);
	}
}

/* Packed subscribers ("format":"packed"): runs of addresses go as
 * address frames -- joined into the open one while the queue is not
 * taken, so a stream of small runs is as small as one of large ones --
 * and converted back they are what binary subscribers of the same fields
 * get, in under a third of the bytes (these addresses jump far every 17
 * instructions, and threads and events cut the runs short: real code
 * packs tighter); a small queue, read only at the end, drops whole frames
 * and its counts hold (received + lost records == matched, as the
 * stream's lost records say); paced, one that keeps up loses nothing. */
static void test_packed_run(void)
{
	const uint32_t iptid = PTD_FIELD_BIT(PTD_FIELD_IP) |
			       PTD_FIELD_BIT(PTD_FIELD_TID);
	const uint32_t pidip = PTD_FIELD_BIT(PTD_FIELD_PID) |
			       PTD_FIELD_BIT(PTD_FIELD_IP);
	enum { N = 20000, NS = 5 };
	/* binary and packed of two field sets; a packed one that loses */
	struct ptd_filter flt[NS] = {
		filter_fmt(0, iptid, true), filter_fmt(0, iptid, true),
		filter_fmt(0, pidip, true), filter_fmt(0, pidip, true),
		filter_fmt(0, iptid, true),
	};
	size_t qs[NS] = { 64u << 20, 64u << 20, 64u << 20, 64u << 20,
			  4 * PTD_JSON_MAX_RECORD };
	struct ptd_fanout_pace pace = { PTD_JSON_MAX_RECORD, 50,
					PTD_STALL_DROP };
	static struct ptd_record recs[N];
	struct ptd_subscriber *sub[NS];
	struct ptd_buf out[NS] = { { 0 } }, conv[NS] = { { 0 } };
	struct ptd_subscriber_stats st;
	struct ptd_session_end end;
	struct ptd_fanout *f;
	size_t calls = 0;
	uint64_t insns, lost;

	flt[1].spec.packed = flt[3].spec.packed = flt[4].spec.packed = true;
	/* runs of 1 to 50 addresses as the steps below cut the stretches,
	 * the addresses of code */
	make_stretches(recs, N, true);
	(void)ptd_fanout_new(1, 100, NULL, NULL, &f);
	REQUIRE(f);
	for (unsigned i = 0; i < NS; i++)
		REQUIRE(ptd_fanout_subscribe(f, &flt[i], qs[i], NS,
					     &sub[i]) == 0);
	for (size_t at = 0, step = 1; at < N; at += step,
		    step = step * 5 % 97 + 1) {
		size_t k = N - at < step ? N - at : step;

		CHECK_EQ_U64(fan_with_ips(f, recs + at, k, NULL, &calls), k);
		ptd_fanout_flush(f);
	}
	CHECK(calls > N / 100);
	memset(&end, 0, sizeof(end));
	end.reason = PTD_END_EXITED;
	ptd_fanout_end(f, &end);
	for (unsigned i = 0; i < NS; i++) {
		CHECK_EQ_INT(drain_buf(sub[i], &out[i]), PTD_SUB_DONE);
		REQUIRE(frames_to_json(&out[i], &conv[i]));
	}
	for (unsigned i = 1; i < 4; i += 2) {
		const char *a = past_hello(&conv[i - 1]),
			   *b = past_hello(&conv[i]);

		/* (the hellos say the format) */
		if (strcmp(a, b))
			CHECK_FAIL_("packed subscriber %u: converted frames "
				    "differ from binary ones", i);
		if (out[i].len * 3 > out[i - 1].len)
			CHECK_FAIL_("packed subscriber %u: %zu bytes, binary "
				    "%zu", i, out[i].len, out[i - 1].len);
		CHECK(strstr((const char *)conv[i].data,
			     "\"format\":\"packed\"") != NULL);
	}
	ptd_subscriber_get_stats(sub[4], &st);
	count_json((const char *)conv[4].data, &insns, &lost);
	CHECK(st.packed);
	CHECK(st.lost > 0);
	CHECK_EQ_U64(st.sent + st.lost, st.matched);
	CHECK_EQ_U64(insns, st.sent);
	CHECK_EQ_U64(lost, st.lost);
	ptd_subscriber_get_stats(sub[1], &st);
	CHECK_EQ_U64(st.lost, 0);
	CHECK_EQ_U64(st.sent, st.matched);
	for (unsigned i = 0; i < NS; i++) {
		ptd_buf_fini(&out[i]);
		ptd_buf_fini(&conv[i]);
	}
	ptd_fanout_free(f);

	/* paced, a small queue drained as it goes: every record */
	{
		struct ptd_subscriber *s;
		struct ptd_buf o = { 0 }, c = { 0 };

		(void)ptd_fanout_new(2, 100, NULL, NULL, &f);
		REQUIRE(f);
		REQUIRE(ptd_fanout_subscribe(f, &flt[1],
					     8 * PTD_JSON_MAX_RECORD, 1,
					     &s) == 0);
		ips_paced_drained(f, s, recs, N, &pace, &calls, &o);
		ptd_fanout_end(f, &end);
		CHECK_EQ_INT(drain_buf(s, &o), PTD_SUB_DONE);
		ptd_subscriber_get_stats(s, &st);
		CHECK_EQ_U64(st.lost, 0);
		REQUIRE(frames_to_json(&o, &c));
		count_json((const char *)c.data, &insns, &lost);
		CHECK_EQ_U64(insns, st.sent);
		CHECK_EQ_U64(lost, 0);
		ptd_buf_fini(&o);
		ptd_buf_fini(&c);
		ptd_fanout_free(f);
	}
}

int main(void)
{
	RUN(test_subscribe_rules);
	RUN(test_packed_run);
	RUN(test_lost_before_next_and_bye);
	RUN(test_fast_slow_filtered);
	RUN(test_cut_stalled);
	RUN(test_render_once);
	RUN(test_tagged);
	RUN(test_tagged_longest);
	RUN(test_churn);
	RUN(test_wake_batched);
	RUN(test_stage_batches);
	RUN(test_stage_flush_wakes);
	RUN(test_binary);
	RUN(test_records_run);
	RUN(test_lines_paced);
	RUN(test_ips_run);
	return check_done();
}
