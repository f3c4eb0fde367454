/* SPDX-License-Identifier: MIT */
/*
 * Triggers (daemon/server/trigger.c), for real: a uprobe handled by ptd's
 * BPF program on hit() of prog-trigger, which three threads call once
 * each, one after the other (the main thread never does).
 *  - Every hit takes a snapshot, preceded in the stream by a trigger
 *    record naming the thread that hit it: three trigger records, with
 *    the three workers' tids, each one's snapshot holding that thread's
 *    instruction at the probe; status counts three hits and snapshots.
 *    In both of the software source's modes, with its ground truth (a
 *    capture): the truth holds the probed instruction exactly three
 *    times (the hits), and the whole capture decodes to it on both
 *    decoder paths -- the kernel's INT3 changed nothing the tracer saw;
 *    the program's output and exit status are unchanged.
 *  - A trigger added to a running session (the trigger request) and
 *    removed again; a symbol or a file the process does not have, a bad
 *    text, a session not in snapshot mode, and a branch the software
 *    source's branch mode stops at are refused, saying what was wrong.
 *  - start/stop triggers: each thread's instructions from hit's first to
 *    the one after the call to it, exactly: equal to those stretches of
 *    the ground truth, thread by thread; a trigger record at each edge.
 *    The same with the triggers given to a watch rule on the program
 *    (resolved at its exec), streamed by the rule's subscriber.
 *  - max_triggers_per_user is enforced, across a user's sessions.
 *  - Without BPF permission (ptd run as nobody): a clear refusal, and the
 *    rest of ptd answers.
 */
#include <errno.h>
#include <linux/capability.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "pidns.h"
#include "daemon-harness.h"
#include "daemon-client.h"
#include "common/fileio.h"
#include "swpt/capdecode.h"
#include "swpt/capture.h"

static char prog[1100];

/* prog-trigger, its stdin and stdout piped to us. */
struct target {
	pid_t pid;
	int in, out;
	char buf[4096];
	size_t len;
};

/* The next line of the target's output into @line, waiting at most
 * @ms; false on EOF or timeout. */
static bool target_line(struct target *t, char *line, size_t cap, int ms)
{
	for (;;) {
		char *nl = memchr(t->buf, '\n', t->len);
		struct pollfd p = { .fd = t->out, .events = POLLIN };
		ssize_t n;

		if (nl) {
			size_t k = (size_t)(nl - t->buf);

			(void)snprintf(line, cap, "%.*s", (int)k, t->buf);
			memmove(t->buf, nl + 1, t->len - k - 1);
			t->len -= k + 1;
			return true;
		}
		if (poll(&p, 1, ms) <= 0)
			return false;
		n = read(t->out, t->buf + t->len, sizeof(t->buf) - t->len - 1);
		if (n <= 0)
			return false;
		t->len += (size_t)n;
	}
}

static bool target_start(struct target *t)
{
	int in[2], out[2];
	char line[128];

	memset(t, 0, sizeof(*t));
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		return false;
	t->pid = fork();
	if (t->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl(prog, prog, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	t->in = in[1];
	t->out = out[0];
	return t->pid > 0 && target_line(t, line, sizeof(line), 10000) &&
	       !strncmp(line, "ready ", 6);
}

static int target_end(struct target *t)
{
	int rc;

	if (t->pid <= 0)
		return -1;
	(void)ptd_write_all(t->in, "end\n", 4);
	close(t->in);
	rc = wait_exit(t->pid);
	close(t->out);
	t->pid = 0;
	return rc;
}

static void target_kill(struct target *t)
{
	if (t->pid > 0) {
		kill(t->pid, SIGKILL);
		(void)wait_exit(t->pid);
		close(t->in);
		close(t->out);
		t->pid = 0;
	}
}

/* An attach of @pid with @options (a JSON object's members); the session,
 * or -1 with the response in *@ret (may be NULL). */
static long attach(const struct daemon *d, pid_t pid, const char *options,
		   cJSON **ret)
{
	char req[2048];
	cJSON *r;
	long id;

	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"attach\",\"pid\":"
		       "%ld,\"options\":{%s}}\n", (long)pid, options);
	r = dc_call1(d, req);
	if (ret)
		*ret = NULL;
	if (!r || !dc_ok(r)) {
		if (ret)
			*ret = r;
		else
			cJSON_Delete(r);
		return -1;
	}
	id = (long)dc_num(r, "session");
	cJSON_Delete(r);
	return id;
}

/* The trigger request: add @text to session @sid; the response. */
static cJSON *trigger_add(const struct daemon *d, long sid, const char *text)
{
	char req[1024];

	(void)snprintf(req, sizeof(req), "{\"id\":2,\"cmd\":\"trigger\","
		       "\"session\":%ld,\"add\":\"%s\"}\n", sid, text);
	return dc_call1(d, req);
}

static cJSON *session_status(const struct daemon *d, long sid)
{
	char req[128];

	(void)snprintf(req, sizeof(req), "{\"id\":3,\"cmd\":\"status\","
		       "\"session\":%ld}\n", sid);
	return dc_call1(d, req);
}

/* A refusal with @code whose message holds @what. */
static void check_refused(cJSON *r, const char *code, const char *what)
{
	CHECK(r && !dc_ok(r));
	if (r && !dc_ok(r)) {
		CHECK_EQ_STR(dc_err_code(r), code);
		if (!strstr(dc_err_msg(r), what))
			CHECK_FAIL_("refusal '%s' does not say '%s'",
				    dc_err_msg(r), what);
		fprintf(stderr, "  refused: %s: %s\n", dc_err_code(r),
			dc_err_msg(r));
	}
	cJSON_Delete(r);
}

static uint64_t hex_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? strtoull(v->valuestring, NULL, 16) : 0;
}

static double num_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *str_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* How often @ip is in the ground truth of capture @dir, all threads; the
 * capture verified (both decoder paths equal the truth). */
static long truth_count(const char *dir, uint64_t ip)
{
	struct ptd_diag diag = { "" };
	struct ptd_verify_report rep;
	struct ptd_capture cap;
	long n = 0;

	if (ptd_capture_load(dir, &cap, &diag) < 0) {
		CHECK_FAIL_("capture %s: %s", dir, diag.msg);
		return -1;
	}
	for (size_t i = 0; i < cap.nthreads; i++) {
		uint64_t *ips = NULL;
		size_t nips = 0;

		if (ptd_capture_read_truth(&cap, i, &ips, &nips, &diag) < 0) {
			CHECK_FAIL_("capture %s: truth: %s", dir, diag.msg);
			continue;
		}
		for (size_t k = 0; k < nips; k++)
			n += ips[k] == ip;
		free(ips);
	}
	if (ptd_capture_verify(&cap, &rep, &diag) < 0) {
		CHECK_FAIL_("capture %s: verify: %s", dir, diag.msg);
	} else {
		CHECK(rep.ok);
		for (size_t i = 0; !rep.ok && i < rep.nthreads; i++)
			if (!rep.threads[i].ok)
				fprintf(stderr, "  tid %d: %s\n",
					(int)rep.threads[i].tid,
					rep.threads[i].why);
		ptd_verify_report_fini(&rep);
	}
	ptd_capture_fini(&cap);
	return n;
}

/* The three threads' hits, each a snapshot naming its thread, in the
 * software source's mode @step, of trigger @spec: the uprobe on hit(), or
 * (@tp) the tracepoint of the gettid syscall each worker makes once, whose
 * hit's ip is the instruction after the syscall. */
static void run_hits(const struct daemon *d, const char *step,
		     const char *spec, const char *tp)
{
	char opts[1024], capdir[700], line[256], req[128];
	struct dconn *sc;
	struct target t;
	pid_t tids[3] = { 0 };
	long sid, seq_of_trigger[3] = { -1, -1, -1 };
	unsigned ntrig = 0, nend = 0, found[3] = { 0 };
	pid_t trig_tid[3] = { 0 };
	uint64_t trig_ip = 0;
	cJSON *r, *a;
	long cur = -1, n;
	int i;

	REQUIRE(target_start(&t));
	(void)snprintf(capdir, sizeof(capdir), "%s/cap-%s%s", d->dir, step,
		       tp ? "-tp" : "");
	(void)snprintf(opts, sizeof(opts), "\"mode\":\"snapshot\",\"step\":"
		       "\"%s\",\"capture\":\"%s\",\"triggers\":[\"%s\"]",
		       step, capdir, spec);
	sid = attach(d, t.pid, opts, &r);
	if (sid < 0) {
		CHECK_FAIL_("attach with a trigger: %s", r ? dc_err_msg(r)
							   : "no answer");
		cJSON_Delete(r);
		target_kill(&t);
		return;
	}
	sc = dc_connect(d);
	REQUIRE(sc);
	(void)snprintf(req, sizeof(req), "{\"id\":9,\"cmd\":\"subscribe\","
		       "\"session\":%ld}\n", sid);
	r = dc_call(sc, req);
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	REQUIRE(ptd_write_all(t.in, "go\n", 3) == 0);
	for (i = 0; i < 3; i++) {
		long v = 0;

		CHECK(target_line(&t, line, sizeof(line), 60000) &&
		      sscanf(line, "tid %ld", &v) == 1);
		tids[i] = (pid_t)v;
	}
	/* the stream: a trigger record, then its snapshot, three times */
	while (nend < 3) {
		char *l = dc_read_line(sc, 60000);
		cJSON *o;

		if (!l)
			break;
		o = cJSON_Parse(l);
		free(l);
		if (!o)
			continue;
		if (!strcmp(str_of(o, "type"), "trigger")) {
			CHECK(ntrig < 3);
			if (ntrig < 3) {
				trig_tid[ntrig] = (pid_t)num_of(o, "tid");
				seq_of_trigger[ntrig] = (long)num_of(o, "seq");
				CHECK_EQ_INT((int)num_of(o, "pid"), t.pid);
				CHECK_EQ_STR(str_of(o, "action"), "snapshot");
				CHECK(num_of(o, "ktime") > 0);
				CHECK(str_of(o, "wall")[0] != 0);
				if (!trig_ip)
					trig_ip = hex_of(o, "ip");
				CHECK(hex_of(o, "ip") == trig_ip);
			}
			ntrig++;
		} else if (!strcmp(str_of(o, "type"), "snapshot") &&
			   !strcmp(str_of(o, "phase"), "begin")) {
			cur = (long)num_of(o, "seq");
			CHECK(ntrig > 0 && cur == seq_of_trigger[ntrig - 1]);
			CHECK(ntrig > 0 &&
			      (pid_t)num_of(o, "tid") == trig_tid[ntrig - 1]);
		} else if (!strcmp(str_of(o, "type"), "snapshot")) {
			nend++;
			cur = -1;
		} else if (!strcmp(str_of(o, "type"), "insn") && cur > 0 &&
			   ntrig > 0 && ntrig <= 3 &&
			   (pid_t)num_of(o, "tid") == trig_tid[ntrig - 1] &&
			   hex_of(o, "ip") +
					   (tp ? (uint64_t)num_of(o, "size")
					       : 0) == trig_ip) {
			found[ntrig - 1]++;
		}
		cJSON_Delete(o);
	}
	CHECK_EQ_INT((int)ntrig, 3);
	CHECK_EQ_INT((int)nend, 3);
	for (i = 0; i < 3; i++) {
		/* the workers in the order they ran; never the main thread */
		CHECK_EQ_INT(trig_tid[i], tids[i]);
		CHECK(trig_tid[i] != t.pid);
		/* each snapshot holds its thread's hit */
		if (!found[i])
			CHECK_FAIL_("%s: snapshot %ld: no instruction of tid %d "
				    "at the probe %#" PRIx64, step,
				    seq_of_trigger[i], (int)trig_tid[i], trig_ip);
	}
	r = session_status(d, sid);
	a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItem(r, "result"),
					     "triggers");
	CHECK(cJSON_GetArraySize(a) == 1);
	if (cJSON_GetArraySize(a) == 1) {
		const cJSON *tr = cJSON_GetArrayItem(a, 0);

		CHECK_EQ_INT((int)num_of(tr, "hits"), 3);
		CHECK_EQ_INT((int)num_of(tr, "snapshots"), 3);
		CHECK_EQ_INT((int)num_of(tr, "dropped"), 0);
		if (tp)
			CHECK_EQ_STR(str_of(tr, "tracepoint"), tp);
		else
			CHECK_EQ_STR(str_of(tr, "symbol"), "hit");
	}
	cJSON_Delete(r);
	/* the program runs on as it would have */
	CHECK_EQ_INT(target_end(&t), 0);
	dc_close(sc);
	/* its ground truth: the probed instruction ran three times, and the
	 * trace decodes to exactly that truth */
	for (i = 0; i < 100; i++) {
		r = session_status(d, sid);
		if (!strcmp(str_of(cJSON_GetObjectItem(r, "result"), "state"),
			    "ended")) {
			cJSON_Delete(r);
			break;
		}
		cJSON_Delete(r);
		msleep(50);
	}
	/* (a tracepoint's instruction: libc's syscall(), which others may
	 * run too; the truth is still checked) */
	n = truth_count(capdir, trig_ip);
	if (tp)
		CHECK(n >= 0);
	else
		CHECK_EQ_INT((int)n, 3);
}

/* The file offset of the instruction after the call to hit() in worker
 * (the executable is linked at 0: address = offset), or 0. */
static unsigned long after_call_offset(void)
{
	char cmd[1300], line[256];
	unsigned long off = 0;
	bool next = false;
	FILE *p;

	(void)snprintf(cmd, sizeof(cmd), "objdump -d --no-show-raw-insn %s",
		       prog);
	p = popen(cmd, "r");
	while (p && fgets(line, sizeof(line), p)) {
		if (next && sscanf(line, " %lx:", &off) == 1)
			break;
		next = strstr(line, "call") && strstr(line, "<hit>");
	}
	if (p)
		pclose(p);
	return next ? off : 0;
}

struct ipvec {
	uint64_t *v;
	size_t n, cap;
};

static void ipvec_add(struct ipvec *a, uint64_t ip)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 256;
		a->v = realloc(a->v, a->cap * sizeof(*a->v));
		REQUIRE(a->v);
	}
	a->v[a->n++] = ip;
}

/* start/stop, in the software source's mode @step: each thread's stream
 * is exactly its ground truth's stretches from a start to a stop.  @rule:
 * given to a watch rule on the program instead of an attach, resolved
 * against the process at its exec, and streamed by the rule's
 * subscriber. */
static void run_gates(const struct daemon *d, const char *step,
		      unsigned long stop_off, bool rule)
{
	char req[2048], capdir[700], line[256];
	struct ipvec got[8] = { 0 };
	pid_t got_tid[8] = { 0 };
	unsigned nstart = 0, nstop = 0, ngot = 0;
	struct ptd_diag diag = { "" };
	struct ptd_capture cap;
	uint64_t start_ip = 0, stop_ip = 0;
	struct dconn *sc, *wc = NULL;
	struct target t;
	cJSON *r;
	long sid = -1;
	pid_t tpid;
	int i;

	(void)snprintf(capdir, sizeof(capdir), "%s/gcap-%s%s", tmpdir, step,
		       rule ? "-rule" : "");
	if (rule) {
		REQUIRE(mkdir(capdir, 0700) == 0);
		wc = dc_connect(d);
		REQUIRE(wc);
		(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"watch\","
			       "\"exe\":\"%s\",\"options\":{\"step\":\"%s\","
			       "\"capture\":\"%s\",\"triggers\":[\"start:"
			       "prog-trigger:hit\",\"stop:prog-trigger:%#lx\"]}}"
			       "\n", prog, step, capdir, stop_off);
		r = dc_call(wc, req);
		if (!dc_ok(r)) {
			CHECK_FAIL_("watch with start/stop: %s",
				    r ? dc_err_msg(r) : "no answer");
			cJSON_Delete(r);
			dc_close(wc);
			return;
		}
		sc = dc_connect(d);
		REQUIRE(sc);
		(void)snprintf(req, sizeof(req), "{\"id\":9,\"cmd\":"
			       "\"subscribe\",\"rule\":%ld,\"kinds\":"
			       "[\"insn\"]}\n", (long)dc_num(r, "rule"));
		cJSON_Delete(r);
		r = dc_call(sc, req);
		CHECK(dc_ok(r));
		cJSON_Delete(r);
		REQUIRE(target_start(&t));
		/* each session's capture: CAPTURE/PID */
		(void)snprintf(capdir + strlen(capdir),
			       sizeof(capdir) - strlen(capdir), "/%ld",
			       (long)t.pid);
		goto started;
	}
	REQUIRE(target_start(&t));
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"attach\","
		       "\"pid\":%ld,\"wait_ms\":10000,\"options\":{\"step\":"
		       "\"%s\",\"capture\":\"%s\",\"triggers\":[\"start:"
		       "prog-trigger:hit\",\"stop:prog-trigger:%#lx\"]}}\n",
		       (long)t.pid, step, capdir, stop_off);
	r = dc_call1(d, req);
	if (!dc_ok(r)) {
		CHECK_FAIL_("attach with start/stop: %s",
			    r ? dc_err_msg(r) : "no answer");
		cJSON_Delete(r);
		target_kill(&t);
		return;
	}
	sid = (long)dc_num(r, "session");
	cJSON_Delete(r);
	sc = dc_connect(d);
	REQUIRE(sc);
	(void)snprintf(req, sizeof(req), "{\"id\":9,\"cmd\":\"subscribe\","
		       "\"session\":%ld,\"kinds\":[\"insn\"]}\n", sid);
	r = dc_call(sc, req);
	CHECK(dc_ok(r));
	cJSON_Delete(r);
started:
	tpid = t.pid;		/* (target_end forgets it) */
	REQUIRE(ptd_write_all(t.in, "go\n", 3) == 0);
	for (i = 0; i < 3; i++)
		CHECK(target_line(&t, line, sizeof(line), 60000));
	CHECK_EQ_INT(target_end(&t), 0);
	for (;;) {
		char *l = dc_read_line(sc, 60000);
		const char *type;
		cJSON *o;

		if (!l)
			break;
		o = cJSON_Parse(l);
		free(l);
		type = str_of(o, "type");
		/* a rule's stream: the session's end (the rule runs on) */
		if (!strcmp(type, "bye") || !strcmp(type, "session_end")) {
			cJSON_Delete(o);
			break;
		}
		if (!strcmp(type, "session_start")) {
			sid = (long)num_of(o, "session");
			CHECK_EQ_INT((int)num_of(o, "pid"), (int)tpid);
		}
		CHECK(strcmp(type, "lost") != 0);
		if (!strcmp(type, "trigger")) {
			if (!strcmp(str_of(o, "action"), "start")) {
				nstart++;
				start_ip = hex_of(o, "ip");
			} else {
				nstop++;
				stop_ip = hex_of(o, "ip");
			}
		} else if (!strcmp(type, "insn")) {
			pid_t tid = (pid_t)num_of(o, "tid");
			unsigned k;

			for (k = 0; k < ngot && got_tid[k] != tid; k++)
				;
			if (k == ngot && ngot < 8)
				got_tid[ngot++] = tid;
			if (k < 8)
				ipvec_add(&got[k], hex_of(o, "ip"));
		}
		cJSON_Delete(o);
	}
	dc_close(sc);
	dc_close(wc);		/* the rule ends */
	CHECK(sid > 0);
	CHECK_EQ_INT((int)nstart, 3);
	CHECK_EQ_INT((int)nstop, 3);
	CHECK_EQ_INT((int)ngot, 3);	/* the workers only */
	for (i = 0; i < 100; i++) {
		r = session_status(d, sid);
		if (!strcmp(str_of(cJSON_GetObjectItem(r, "result"), "state"),
			    "ended")) {
			cJSON_Delete(r);
			break;
		}
		cJSON_Delete(r);
		msleep(50);
	}
	/* the truth's stretches, thread by thread */
	if (ptd_capture_load(capdir, &cap, &diag) < 0) {
		CHECK_FAIL_("capture %s: %s", capdir, diag.msg);
		goto out;
	}
	for (size_t c = 0; c < cap.nthreads; c++) {
		struct ipvec want = { 0 };
		uint64_t *ips = NULL;
		size_t nips = 0;
		bool on = false;
		unsigned k;

		if (ptd_capture_read_truth(&cap, c, &ips, &nips, &diag) < 0) {
			CHECK_FAIL_("truth: %s", diag.msg);
			continue;
		}
		for (size_t j = 0; j < nips; j++) {
			if (ips[j] == start_ip)
				on = true;
			if (on)
				ipvec_add(&want, ips[j]);
			if (ips[j] == stop_ip)
				on = false;
		}
		for (k = 0; k < ngot && got_tid[k] != cap.threads[c].tid; k++)
			;
		if (k == ngot) {
			CHECK_EQ_INT((int)want.n, 0);
		} else {
			CHECK(want.n > 0);
			CHECK_EQ_U64(got[k].n, want.n);
			fprintf(stderr, "  %s: tid %d: %zu instructions "
				"streamed, %zu in the truth's stretches (of "
				"%zu)\n", step, (int)got_tid[k], got[k].n,
				want.n, nips);
			if (got[k].n == want.n &&
			    memcmp(got[k].v, want.v, want.n * sizeof(*want.v)))
				CHECK_FAIL_("%s: tid %d: streamed instructions "
					    "differ from the truth's", step,
					    (int)got_tid[k]);
		}
		free(want.v);
		free(ips);
	}
	ptd_capture_fini(&cap);
out:
	for (i = 0; i < 8; i++)
		free(got[i].v);
}

static void test_gates(void)
{
	unsigned long off = after_call_offset();
	struct daemon d;

	if (!off) {
		fprintf(stderr, "  no objdump, or no call to hit in worker: "
			"start/stop not checked\n");
		return;
	}
	REQUIRE(daemon_start(&d, "gates", ""));
	run_gates(&d, "branch", off, false);
	run_gates(&d, "single", off, false);
	/* a watch rule's: from the exec, its triggers resolved there */
	run_gates(&d, "branch", off, true);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

static void test_hits(void)
{
	struct daemon d;

	REQUIRE(daemon_start(&d, "hits", ""));
	run_hits(&d, "branch", "snapshot:prog-trigger:hit", NULL);
	run_hits(&d, "single", "snapshot:prog-trigger:hit", NULL);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

static int hits_in_ns(void *arg)
{
	unsigned before = check_failures;
	struct daemon d;

	(void)arg;
	if (!daemon_start(&d, "hitsns", ""))
		return 1;
	run_hits(&d, "branch", "snapshot:prog-trigger:hit", NULL);
	CHECK_EQ_INT(daemon_stop(&d), 0);
	return (int)(check_failures - before);
}

/* ptd in a PID namespace of its own (a container's), its target there
 * too: the uprobe's hits name the process and threads by this
 * namespace's ids (the kernel's global ones name nothing here), and
 * every thread's hit takes its snapshot, as in the initial one. */
static void test_hits_pidns(void)
{
	char why[256];
	int r = pidns_run(hits_in_ns, NULL, why, sizeof(why));

	if (r < 0) {
		fprintf(stderr, "  skipped: %s\n", why);
		return;
	}
	CHECK_EQ_INT(r, 0);
}

/* A tracepoint trigger: each worker's gettid syscall takes a snapshot
 * naming it, holding its syscall instruction. */
static void test_tracepoint(void)
{
	struct daemon d;

	if (access("/sys/kernel/tracing/events/syscalls/sys_enter_gettid/id",
		   R_OK) != 0 &&
	    access("/sys/kernel/debug/tracing/events/syscalls/"
		   "sys_enter_gettid/id", R_OK) != 0) {
		fprintf(stderr, "  no tracefs with syscalls:sys_enter_gettid "
			"here: tracepoint triggers not checked\n");
		return;
	}
	REQUIRE(daemon_start(&d, "tp", ""));
	run_hits(&d, "branch",
		 "snapshot:tracepoint:syscalls:sys_enter_gettid",
		 "syscalls:sys_enter_gettid");
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* Bad triggers are refused, saying what was wrong; one added to a running
 * session and removed. */
static void test_refusals(void)
{
	struct daemon d;
	struct target t;
	char opts[1200];
	cJSON *r;
	long sid;

	REQUIRE(daemon_start(&d, "refuse", ""));
	REQUIRE(target_start(&t));
	(void)attach(&d, t.pid, "\"mode\":\"snapshot\",\"triggers\":"
		     "[\"snapshot:prog-trigger:no_such_fn\"]", &r);
	check_refused(r, "no_such_file", "no function 'no_such_fn'");
	(void)attach(&d, t.pid, "\"mode\":\"snapshot\",\"triggers\":"
		     "[\"snapshot:libnothere.so:hit\"]", &r);
	check_refused(r, "no_such_file", "maps no file named 'libnothere.so'");
	(void)attach(&d, t.pid, "\"mode\":\"snapshot\",\"triggers\":"
		     "[\"snapshot:prog-trigger\"]", &r);
	check_refused(r, "bad_request", "options.triggers[0]");
	(void)attach(&d, t.pid, "\"mode\":\"snapshot\",\"triggers\":"
		     "[\"pause:prog-trigger:hit\"]", &r);
	check_refused(r, "bad_request", "unknown action 'pause'");
	(void)attach(&d, t.pid, "\"mode\":\"snapshot\",\"triggers\":"
		     "[\"start:prog-trigger:hit\"]", &r);
	check_refused(r, "bad_request", "full mode");
	(void)attach(&d, t.pid, "\"mode\":\"snapshot\",\"triggers\":"
		     "[\"snapshot:prog-trigger:0x7fffffff\"]", &r);
	check_refused(r, "bad_request", "past the end");
	(void)attach(&d, t.pid, "\"triggers\":[\"snapshot:prog-trigger:hit\"]",
		     &r);
	check_refused(r, "bad_request", "snapshot mode");
	/* tracepoints: named right, snapshot only, the kernel's */
	(void)attach(&d, t.pid, "\"mode\":\"snapshot\",\"triggers\":"
		     "[\"snapshot:tracepoint:syscalls\"]", &r);
	check_refused(r, "bad_request", "CATEGORY:NAME");
	(void)attach(&d, t.pid, "\"mode\":\"snapshot\",\"triggers\":"
		     "[\"snapshot:tracepoint:sys/../calls:x\"]", &r);
	check_refused(r, "bad_request", "character 4 ('/')");
	(void)attach(&d, t.pid, "\"triggers\":[\"start:tracepoint:syscalls:"
		     "sys_enter_gettid\"]", &r);
	check_refused(r, "bad_request", "a tracepoint has none");
	if (access("/sys/kernel/tracing/events", X_OK) == 0) {
		(void)attach(&d, t.pid, "\"mode\":\"snapshot\",\"triggers\":"
			     "[\"snapshot:tracepoint:syscalls:no_such_tp\"]",
			     &r);
		check_refused(r, "no_such_file",
			      "no tracepoint syscalls:no_such_tp");
	}
	/* a watch rule's: what can be decided at once is refused at once;
	 * what depends on the process refuses its match, saying why */
	{
		struct dconn *wc = dc_connect(&d);
		char req[1600];

		REQUIRE(wc);
		(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"watch\","
			       "\"exe\":\"%s\",\"options\":{\"triggers\":"
			       "[\"start:prog-trigger:hit\",\"snapshot:"
			       "prog-trigger:hit\"]}}\n", prog);
		r = dc_call(wc, req);
		check_refused(r, "bad_request", "options.triggers[1]: a "
			      "snapshot trigger needs \"mode\": \"snapshot\"");
		(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"watch\","
			       "\"exe\":\"%s\",\"options\":{\"mode\":"
			       "\"snapshot\",\"triggers\":[\"stop:prog-trigger:"
			       "hit\"]}}\n", prog);
		r = dc_call(wc, req);
		check_refused(r, "bad_request", "options.triggers[0]: start "
			      "and stop triggers need");
		(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"watch\","
			       "\"exe\":\"%s\",\"options\":{\"mode\":"
			       "\"snapshot\",\"triggers\":[\"snapshot:"
			       "prog-trigger:no_such_fn\"]}}\n", prog);
		r = dc_call(wc, req);
		CHECK(dc_ok(r));
		cJSON_Delete(r);
		{
			struct target t2;
			cJSON *l;
			const cJSON *o;

			REQUIRE(target_start(&t2));
			CHECK_EQ_INT(target_end(&t2), 0);
			l = dc_call(wc, "{\"id\":2,\"cmd\":\"list\"}\n");
			o = cJSON_GetArrayItem(cJSON_GetObjectItem(
				cJSON_GetObjectItem(l, "result"), "rules"), 0);
			CHECK_EQ_INT((int)num_of(o, "refused"), 1);
			CHECK_EQ_INT((int)num_of(o, "sessions_started"), 0);
			CHECK(strstr(str_of(o, "last_refusal"),
				     "no function 'no_such_fn'") != NULL);
			cJSON_Delete(l);
		}
		dc_close(wc);
	}
	/* nothing was attached by those: the process is not traced */
	sid = attach(&d, t.pid, "\"mode\":\"snapshot\"", &r);
	CHECK(sid > 0);
	cJSON_Delete(r);
	/* on the running session */
	r = trigger_add(&d, sid, "snapshot:prog-trigger:nope");
	check_refused(r, "no_such_file", "no function 'nope'");
	(void)snprintf(opts, sizeof(opts), "snapshot:%s:main", prog);
	r = trigger_add(&d, sid, opts);
	CHECK(dc_ok(r));
	if (dc_ok(r)) {
		char req[128];
		long id = (long)dc_num(r, "trigger");

		CHECK_EQ_STR(str_of(cJSON_GetObjectItem(r, "result"), "file"),
			     prog);
		(void)snprintf(req, sizeof(req), "{\"id\":4,\"cmd\":\"trigger\","
			       "\"session\":%ld,\"remove\":%ld}\n", sid, id);
		cJSON_Delete(r);
		r = dc_call1(&d, req);
		CHECK(dc_ok(r));
		cJSON_Delete(r);
		r = dc_call1(&d, req);
		check_refused(r, "bad_request", "has no trigger");
		r = NULL;
	}
	cJSON_Delete(r);
	/* hit's "jne" back to its loop: a branch branch mode stops at */
	{
		FILE *p;
		char cmd[1300], line[256];
		unsigned long off = 0;

		(void)snprintf(cmd, sizeof(cmd), "objdump -d --no-show-raw-insn "
			       "%s", prog);
		p = popen(cmd, "r");
		while (p && fgets(line, sizeof(line), p))
			if (strstr(line, "jne") && strstr(line, "<hit+") &&
			    sscanf(line, " %lx:", &off) == 1)
				break;
		if (p)
			pclose(p);
		if (off) {
			/* the executable is linked at 0: address = offset */
			(void)snprintf(opts, sizeof(opts),
				       "snapshot:prog-trigger:%#lx", off);
			r = trigger_add(&d, sid, opts);
			check_refused(r, "unsupported", "branch mode");
		} else {
			fprintf(stderr, "  (no objdump, or no jne in hit: the "
				"branch refusal is not checked)\n");
		}
	}
	CHECK(dc_detach(&d, sid));
	CHECK_EQ_INT(target_end(&t), 0);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* max_triggers_per_user: across the user's sessions; a removed one makes
 * room again. */
static void test_limit(void)
{
	struct daemon d;
	struct target t1, t2;
	long s1, s2;
	cJSON *r;

	REQUIRE(daemon_start(&d, "limit", "max_triggers_per_user = 2\n"));
	REQUIRE(target_start(&t1));
	REQUIRE(target_start(&t2));
	(void)attach(&d, t1.pid, "\"mode\":\"snapshot\",\"triggers\":["
		     "\"snapshot:prog-trigger:hit\",\"snapshot:prog-trigger:"
		     "main\",\"snapshot:prog-trigger:worker\"]", &r);
	check_refused(r, "limit", "max_triggers_per_user");
	s1 = attach(&d, t1.pid, "\"mode\":\"snapshot\",\"triggers\":["
		    "\"snapshot:prog-trigger:hit\"]", NULL);
	CHECK(s1 > 0);
	s2 = attach(&d, t2.pid, "\"mode\":\"snapshot\",\"triggers\":["
		    "\"snapshot:prog-trigger:hit\"]", NULL);
	CHECK(s2 > 0);
	r = trigger_add(&d, s2, "snapshot:prog-trigger:worker");
	check_refused(r, "limit", "max_triggers_per_user");
	/* s1's trigger goes with its session */
	CHECK(dc_detach(&d, s1));
	r = trigger_add(&d, s2, "snapshot:prog-trigger:worker");
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	CHECK(dc_detach(&d, s2));
	CHECK_EQ_INT(target_end(&t1), 0);
	CHECK_EQ_INT(target_end(&t2), 0);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}


/* ptd run as nobody may not load BPF: a trigger is refused, saying why,
 * before anything is done to the process; the rest answers. */
static void test_unprivileged(void)
{
	struct daemon d;
	struct target t;
	cJSON *r;

	REQUIRE(daemon_start_restricted(&d, "unpriv", true));
	REQUIRE(target_start(&t));
	(void)attach(&d, t.pid, "\"mode\":\"snapshot\",\"triggers\":["
		     "\"snapshot:prog-trigger:hit\"]", &r);
	check_refused(r, "permission_denied", "BPF");
	r = dc_call1(&d, "{\"id\":2,\"cmd\":\"list\"}\n");
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	CHECK_EQ_INT(target_end(&t), 0);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* ptd as ptd.service runs it: root with CAP_BPF and CAP_PERFMON but not
 * CAP_SYS_ADMIN.  Kernels since "perf: Require CAP_SYS_ADMIN for
 * uprobes" refuse it the uprobe (the program loads): the refusal says
 * which capability and how to grant it; an older kernel places it. */
static void test_without_sys_admin(void)
{
	struct daemon d;
	struct target t;
	cJSON *r;
	long sid;

	REQUIRE(daemon_start_restricted(&d, "nosysadmin", false));
	REQUIRE(target_start(&t));
	sid = attach(&d, t.pid, "\"mode\":\"snapshot\",\"triggers\":["
		     "\"snapshot:prog-trigger:hit\"]", &r);
	if (sid > 0) {
		fprintf(stderr, "  this kernel places uprobes for CAP_PERFMON "
			"(no 'Require CAP_SYS_ADMIN for uprobes')\n");
		cJSON_Delete(r);
		r = NULL;
		CHECK(dc_detach(&d, sid));
	} else {
		check_refused(r, "permission_denied", "needs CAP_SYS_ADMIN");
	}
	CHECK_EQ_INT(target_end(&t), 0);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

int main(void)
{
	harness_setup("/tmp/ptd-trig-XXXXXX");
	if (geteuid() != 0)
		SKIP_ALL("triggers load BPF programs: the test runs ptd as "
			 "root");
	if (access("/sys/kernel/btf/vmlinux", R_OK) < 0)
		SKIP_ALL("the kernel has no BTF (/sys/kernel/btf/vmlinux)");
	(void)snprintf(prog, sizeof(prog), "%s/prog-trigger", progs);
	RUN(test_unprivileged);
	RUN(test_without_sys_admin);
	RUN(test_refusals);
	RUN(test_limit);
	RUN(test_hits);
	RUN(test_hits_pidns);
	RUN(test_tracepoint);
	RUN(test_gates);
	return harness_done();
}
