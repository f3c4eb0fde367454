/* SPDX-License-Identifier: MIT */
/*
 * options.children (daemon/server/children.c, the software source's
 * opt->child): a traced process's children become sessions of their own.
 *
 *  - prog-forktree attached with children: its 3 children, the first's
 *    grandchild and a vfork child that execs prog-tiny are each a
 *    session naming its parent session; each one's capture begins at
 *    the instruction after the fork's SYSCALL in its parent's ground
 *    truth (its first instruction after the fork), its trace decodes to
 *    exactly its ground truth, and the session decoded as many
 *    instructions as that truth holds, with symbols as its parent (read
 *    with the groups the root session kept: the attach's connection is
 *    gone); the program's output and exit statuses are those of an
 *    untraced run.
 *  - a parent that forks and exits at once: its child is a session all
 *    the same, traced from its first instruction, its status unchanged.
 *  - without children: one session, nothing else changes.
 *  - a watch rule with children: the tree run from here is 6 sessions of
 *    the rule, and the rule's stream has each one's session_start,
 *    session_end and insn records naming its session and pid, each
 *    session's instructions exactly its ground truth.
 *  - intel_pt with children: the BPF fork stopper loads and the attach
 *    fails only for want of the PMU (named); a watch rule so is taken;
 *    per_cpu with children on intel_pt is refused, saying why; a ptd
 *    that may not load BPF refuses it, naming BPF; on a machine with
 *    Intel PT, the tree traced with intel_pt is 6 sessions (skipped,
 *    saying so, elsewhere).
 *  - max_sessions_per_user 1: every child is refused, continued (the
 *    program's output unchanged) and reported: an error record with
 *    context "children" in the parent's stream, children_refused and
 *    last_child_refusal in its status.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "daemon-harness.h"
#include "daemon-client.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "swpt/capdecode.h"
#include "swpt/capture.h"

#define TREE_KIDS 3
static const char want_out[] = "tiny 1\nchild 0: 10\nchild 1: 11\nchild 2: 12\n"
			       "vfork child: 41\nok\n";

struct tree {
	pid_t pid;
	int go;			/* its stdin */
	int out;		/* its stdout */
};

static bool tree_start_mode(struct tree *t, const char *mode)
{
	char exe[1100], tiny[1100], n[8];
	int in[2], out[2];

	(void)snprintf(exe, sizeof(exe), "%s/prog-forktree", progs);
	(void)snprintf(tiny, sizeof(tiny), "%s/prog-tiny", progs);
	(void)snprintf(n, sizeof(n), "%d", TREE_KIDS);
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		return false;
	t->pid = fork();
	if (t->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl(exe, exe, n, tiny, mode, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	t->go = in[1];
	t->out = out[0];
	return t->pid > 0;
}

static bool tree_start(struct tree *t)
{
	return tree_start_mode(t, NULL);
}

/* Let it run; its exit status (-1: not within 120 s) and its output. */
static int tree_finish(struct tree *t, char *out, size_t size)
{
	size_t len = 0;
	ssize_t n;
	int st;

	if (write(t->go, "g", 1) != 1)
		return -1;
	close(t->go);
	while (len + 1 < size && (n = read(t->out, out + len,
					   size - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = 0;
	close(t->out);
	st = wait_target(t->pid, 120000);
	return st;
}

/* The sessions of `list` (the caller deletes *ret). */
static const cJSON *sessions(const struct daemon *d, cJSON **ret)
{
	*ret = dc_call1(d, "{\"id\":1,\"cmd\":\"list\"}\n");
	return cJSON_GetObjectItem(cJSON_GetObjectItem(*ret, "result"),
				   "sessions");
}

/* The number after @key in @line, or -1. */
static long key_num(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static long num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);

	return cJSON_IsNumber(v) ? (long)v->valuedouble : -1;
}

/* Wait until @want sessions are listed, every one ended (60 s). */
static cJSON *wait_ended(const struct daemon *d, int want)
{
	for (int i = 0; i < 600; i++) {
		cJSON *l;
		const cJSON *a = sessions(d, &l), *e;
		int n = 0, ended = 0;

		cJSON_ArrayForEach(e, a) {
			const cJSON *st = cJSON_GetObjectItem(e, "state");

			n++;
			ended += cJSON_IsString(st) &&
				 !strcmp(st->valuestring, "ended");
		}
		if (n == want && ended == n)
			return l;
		cJSON_Delete(l);
		msleep(100);
	}
	return NULL;
}

struct sess {
	long id, pid, parent;
	char cap[700];
};

/* Child session @c (its parent @p): its capture's first instruction is
 * the one after a SYSCALL in its parent's ground truth, its trace is its
 * ground truth, and it decoded as many instructions (with @symbols, its
 * status counts its symbols). */
static void check_child(const struct daemon *d, const struct sess *c,
			const struct sess *p, bool symbols)
{
	struct ptd_diag diag = { "" };
	struct ptd_capture cap, pcap;
	uint64_t *ips = NULL, *pips = NULL;
	size_t nips = 0, npips = 0;
	struct ptd_verify_report rep;
	char req[128];
	bool after_syscall = false;
	cJSON *st;

	if (ptd_capture_load(c->cap, &cap, &diag) < 0) {
		CHECK_FAIL_("session %ld (pid %ld): capture %s: %s", c->id,
			    c->pid, c->cap, diag.msg);
		return;
	}
	REQUIRE(ptd_capture_load(p->cap, &pcap, &diag) == 0);
	CHECK_EQ_INT((int)cap.nthreads, 1);
	REQUIRE(ptd_capture_read_truth(&cap, 0, &ips, &nips, &diag) == 0);
	/* the parent's thread that forked: its main thread, the first */
	REQUIRE(ptd_capture_read_truth(&pcap, 0, &pips, &npips, &diag) == 0);
	CHECK(nips > 0);
	for (size_t i = 0; nips && i + 1 < npips && !after_syscall; i++)
		after_syscall = pips[i + 1] == ips[0] && pips[i] + 2 == ips[0];
	if (!after_syscall)
		CHECK_FAIL_("pid %ld: first instruction %#" PRIx64 " follows "
			    "no 2-byte SYSCALL in its parent's truth (pid "
			    "%ld)", c->pid, nips ? ips[0] : 0, p->pid);
	if (ptd_capture_verify(&cap, &rep, &diag) < 0) {
		CHECK_FAIL_("pid %ld: verify: %s", c->pid, diag.msg);
	} else {
		CHECK(rep.ok);
		ptd_verify_report_fini(&rep);
	}
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"status\","
		       "\"session\":%ld}\n", c->id);
	st = dc_call1(d, req);
	CHECK_EQ_U64((uint64_t)dc_num(st, "insns"), nips);
	/* symbols, as its parent's: read with the groups the root session
	 * kept (the attach's connection closed long before) */
	CHECK(!symbols ||
	      cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(
		      st, "result"), "symbols"), "files") != NULL);
	fprintf(stderr, "  session %ld pid %ld (parent session %ld): %zu "
		"instructions from %#" PRIx64 "\n", c->id, c->pid, c->parent,
		nips, nips ? ips[0] : 0);
	cJSON_Delete(st);
	free(ips);
	free(pips);
	ptd_capture_fini(&cap);
	ptd_capture_fini(&pcap);
}

static void test_children(void)
{
	struct daemon d;
	struct tree t;
	struct sess ss[16];
	char req[1024], out[512], capbase[600];
	cJSON *r, *l;
	const cJSON *e;
	size_t n = 0;
	long root;

	REQUIRE(daemon_start(&d, "children", ""));
	REQUIRE(tree_start(&t));
	(void)snprintf(capbase, sizeof(capbase), "%s/cap", tmpdir);
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"attach\","
		       "\"pid\":%d,\"options\":{\"source\":\"software\","
		       "\"children\":true,\"symbols\":true,\"capture\":"
		       "\"%s\"}}\n", (int)t.pid, capbase);
	r = dc_call1(&d, req);
	REQUIRE(dc_ok(r));
	root = (long)dc_num(r, "session");
	{
		const cJSON *res = cJSON_GetObjectItem(r, "result");
		const cJSON *stop = cJSON_GetObjectItem(res, "stop");

		CHECK(cJSON_IsTrue(cJSON_GetObjectItem(res, "children")));
		CHECK(cJSON_IsString(stop) &&
		      strstr(stop->valuestring, "WUNTRACED"));
	}
	cJSON_Delete(r);
	CHECK_EQ_INT(tree_finish(&t, out, sizeof(out)), 0);
	CHECK_EQ_STR(out, want_out);
	/* the root, 3 children, a grandchild, the vfork child */
	l = wait_ended(&d, TREE_KIDS + 3);
	REQUIRE(l);
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(cJSON_GetObjectItem(l,
			   "result"), "sessions")) {
		REQUIRE(n < 16);
		ss[n].id = num(e, "session");
		ss[n].pid = num(e, "pid");
		ss[n].parent = num(e, "parent");
		CHECK(cJSON_IsTrue(cJSON_GetObjectItem(e, "children")));
		n++;
	}
	cJSON_Delete(l);
	/* captures: the root's CAP, a child's its parent's .PID */
	for (size_t k = 0; k < n; k++)
		ss[k].cap[0] = 0;
	for (int round = 0; round < 4; round++)
		for (size_t k = 0; k < n; k++) {
			if (ss[k].cap[0])
				continue;
			if (ss[k].id == root) {
				(void)snprintf(ss[k].cap, sizeof(ss[k].cap),
					       "%s", capbase);
				CHECK_EQ_INT(ss[k].parent, -1);
				continue;
			}
			for (size_t j = 0; j < n; j++)
				if (ss[j].id == ss[k].parent && ss[j].cap[0])
					(void)snprintf(ss[k].cap,
						       sizeof(ss[k].cap),
						       "%.600s.%ld", ss[j].cap,
						       ss[k].pid);
		}
	{
		int of_root = 0, grand = 0;

		for (size_t k = 0; k < n; k++) {
			size_t j;

			if (ss[k].id == root)
				continue;
			for (j = 0; j < n && ss[j].id != ss[k].parent; j++)
				;
			if (j == n) {
				CHECK_FAIL_("session %ld: parent %ld not "
					    "listed", ss[k].id, ss[k].parent);
				continue;
			}
			of_root += ss[j].id == root;
			grand += ss[j].id != root;
			check_child(&d, &ss[k], &ss[j], true);
		}
		CHECK_EQ_INT(of_root, TREE_KIDS + 1);
		CHECK_EQ_INT(grand, 1);
	}
	{
		cJSON *st;

		(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"status\","
			       "\"session\":%ld}\n", root);
		st = dc_call1(&d, req);
		CHECK_EQ_INT((int)dc_num(st, "children_started"),
			     TREE_KIDS + 1);
		CHECK_EQ_INT((int)dc_num(st, "children_refused"), 0);
		cJSON_Delete(st);
	}
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* A parent that forks and exits at once (a daemon's way): its child,
 * reported as the parent's session ends, is a session all the same,
 * traced from its first instruction; its exit status (reaped here: the
 * test is the child subreaper) unchanged. */
static void test_orphan(void)
{
	struct daemon d;
	struct tree t;
	struct sess root = { 0 }, kid = { 0 };
	char req[1024], out[64];
	cJSON *r, *l;
	const cJSON *e;
	int st = -1;
	pid_t w;

	REQUIRE(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
	REQUIRE(daemon_start(&d, "orphan", ""));
	REQUIRE(tree_start_mode(&t, "orphan"));
	(void)snprintf(root.cap, sizeof(root.cap), "%s/ocap", tmpdir);
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"attach\","
		       "\"pid\":%d,\"options\":{\"source\":\"software\","
		       "\"children\":true,\"capture\":\"%s\"}}\n",
		       (int)t.pid, root.cap);
	r = dc_call1(&d, req);
	REQUIRE(dc_ok(r));
	root.id = (long)dc_num(r, "session");
	root.pid = t.pid;
	cJSON_Delete(r);
	CHECK_EQ_INT(tree_finish(&t, out, sizeof(out)), 0);
	/* the orphan, reparented to us */
	for (int i = 0; i < 6000; i++) {
		w = waitpid(-1, &st, WNOHANG);
		if (w > 0 && w != d.pid)
			break;
		msleep(10);
	}
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
	l = wait_ended(&d, 2);
	REQUIRE(l);
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(cJSON_GetObjectItem(l,
			   "result"), "sessions"))
		if (num(e, "session") != root.id) {
			kid.id = num(e, "session");
			kid.pid = num(e, "pid");
			kid.parent = num(e, "parent");
		}
	cJSON_Delete(l);
	CHECK_EQ_INT(kid.parent, root.id);
	(void)snprintf(kid.cap, sizeof(kid.cap), "%.600s.%ld", root.cap,
		       kid.pid);
	check_child(&d, &kid, &root, false);
	CHECK_EQ_INT(daemon_stop(&d), 0);
	(void)prctl(PR_SET_CHILD_SUBREAPER, 0);
}

static void test_without(void)
{
	struct daemon d;
	struct tree t;
	char req[256], out[512];
	cJSON *r, *l;
	const cJSON *a;

	REQUIRE(daemon_start(&d, "without", ""));
	REQUIRE(tree_start(&t));
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"attach\","
		       "\"pid\":%d,\"options\":{\"source\":\"software\"}}\n",
		       (int)t.pid);
	r = dc_call1(&d, req);
	REQUIRE(dc_ok(r));
	CHECK(!cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"),
				   "children"));
	cJSON_Delete(r);
	CHECK_EQ_INT(tree_finish(&t, out, sizeof(out)), 0);
	CHECK_EQ_STR(out, want_out);
	l = wait_ended(&d, 1);
	CHECK(l != NULL);
	a = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(l,
			       "result"), "sessions"), 0);
	CHECK(a && !cJSON_GetObjectItem(a, "children") &&
	      !cJSON_GetObjectItem(a, "parent"));
	cJSON_Delete(l);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

static void test_refused(void)
{
	struct daemon d;
	struct tree t;
	struct dconn *c;
	char req[256], out[512], *line;
	bool reported = false;
	cJSON *st;
	long id;

	REQUIRE(daemon_start(&d, "refused", "max_sessions_per_user = 1\n"));
	REQUIRE(tree_start(&t));
	/* through ptctl: its --children, the note on the stop */
	{
		char pid[16], outf[600], errf[600], *text = NULL;
		const char *args[] = { "attach", "--children", "--source",
				       "software", pid, NULL };
		size_t len = 0;

		(void)snprintf(pid, sizeof(pid), "%d", (int)t.pid);
		(void)snprintf(outf, sizeof(outf), "%s/attach.out", tmpdir);
		(void)snprintf(errf, sizeof(errf), "%s/attach.err", tmpdir);
		REQUIRE(wait_exit(ptctl_spawn(&d, outf, errf, args)) == 0);
		REQUIRE(ptd_file_read_all(outf, 4096, &text, &len) == 0);
		id = strtol(text, NULL, 10);
		free(text);
		REQUIRE(id > 0);
		REQUIRE(ptd_file_read_all(errf, 4096, &text, &len) == 0);
		CHECK_CONTAINS(text, "note: with children: each child process "
			       "is stopped (SIGSTOP)");
		free(text);
	}
	c = dc_connect(&d);
	REQUIRE(c);
	(void)snprintf(req, sizeof(req), "{\"id\":2,\"cmd\":\"subscribe\","
		       "\"session\":%ld,\"kinds\":[\"error\"]}\n", id);
	REQUIRE(dc_send(c, req) == 0);
	line = dc_read_line(c, 20000);
	CHECK(line && strstr(line, "\"ok\":true"));
	free(line);
	CHECK_EQ_INT(tree_finish(&t, out, sizeof(out)), 0);
	CHECK_EQ_STR(out, want_out);
	while ((line = dc_read_line(c, 60000))) {
		bool bye = is_type(line, "bye");

		if (is_type(line, "error") &&
		    strstr(line, "\"context\":\"children\"") &&
		    strstr(line, "not traced: limit: "))
			reported = true;
		free(line);
		if (bye)
			break;
	}
	dc_close(c);
	CHECK(reported);
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"status\","
		       "\"session\":%ld}\n", id);
	st = dc_call1(&d, req);
	CHECK_EQ_INT((int)dc_num(st, "children_started"), 0);
	/* the 3 children and the vfork child; the grandchild was never
	 * traced, so never reported */
	CHECK_EQ_INT((int)dc_num(st, "children_refused"), TREE_KIDS + 1);
	{
		const cJSON *w = cJSON_GetObjectItem(
			cJSON_GetObjectItem(st, "result"),
			"last_child_refusal");

		CHECK(cJSON_IsString(w) && strstr(w->valuestring,
						   "max_sessions_per_user"));
	}
	cJSON_Delete(st);
	{
		char sid[24], outf[600], *text = NULL;
		const char *args[] = { "status", sid, NULL };
		size_t len = 0;

		(void)snprintf(sid, sizeof(sid), "%ld", id);
		(void)snprintf(outf, sizeof(outf), "%s/status.out", tmpdir);
		CHECK_EQ_INT(wait_exit(ptctl_spawn(&d, outf, NULL, args)), 0);
		REQUIRE(ptd_file_read_all(outf, 1 << 16, &text, &len) == 0);
		CHECK_CONTAINS(text, "children: 0 traced as sessions, 4 "
			       "refused; last: pid ");
		free(text);
	}
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* The ground truth of the only thread of the capture in @dir: its IPs
 * (the caller frees *ret), or false. */
static bool truth_of(const char *dir, uint64_t **ret, size_t *n)
{
	struct ptd_diag diag = { "" };
	struct ptd_capture cap;
	bool ok;

	if (ptd_capture_load(dir, &cap, &diag) < 0) {
		CHECK_FAIL_("capture %s: %s", dir, diag.msg);
		return false;
	}
	CHECK_EQ_INT((int)cap.nthreads, 1);
	ok = cap.nthreads == 1 &&
	     ptd_capture_read_truth(&cap, 0, ret, n, &diag) == 0;
	if (!ok)
		CHECK_FAIL_("capture %s: truth: %s", dir, diag.msg);
	ptd_capture_fini(&cap);
	return ok;
}

/* A watch rule with children: every process of the tree is a session of
 * the rule, the rule's stream has each one's session_start, session_end
 * and insn records naming its session and pid, and each session's
 * instructions in it are exactly its ground truth (the rule's capture:
 * CAPTURE/PID for the program, a child's its parent's .PID). */
static void test_rule(void)
{
	struct daemon d;
	struct tree t;
	struct dconn *rc, *sc;
	char req[2048], out[512], capbase[600], *line;
	long rule, starts = 0, ends = 0, sids[16], pids[16], parents[16];
	uint64_t *ips[16] = { NULL };
	size_t nips[16] = { 0 }, caps[16] = { 0 };
	char cap[16][700];
	cJSON *r, *l;
	const cJSON *e;

	/* the stream is read once the tree has run: its queues hold it all
	 * (the program's own session, from its exec, is ~125 k insns) */
	REQUIRE(daemon_start(&d, "rule", "subscriber_queue_size = 64M\n"));
	rc = dc_connect(&d);
	REQUIRE(rc);
	(void)snprintf(capbase, sizeof(capbase), "%s/rcap", tmpdir);
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"watch\","
		       "\"exe\":\"%s/prog-forktree\",\"options\":{\"source\":"
		       "\"software\",\"children\":true,\"capture\":\"%s\"}}\n",
		       progs, capbase);
	r = dc_call(rc, req);
	if (r && !dc_ok(r) && (!strcmp(dc_err_code(r), "permission_denied") ||
			       !strcmp(dc_err_code(r), "unsupported"))) {
		fprintf(stderr, "  skipped: watch refused: %s\n",
			dc_err_msg(r));
		cJSON_Delete(r);
		dc_close(rc);
		(void)daemon_stop(&d);
		return;
	}
	REQUIRE(dc_ok(r));
	rule = (long)dc_num(r, "rule");
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(r,
			   "result"), "children")));
	cJSON_Delete(r);
	REQUIRE(mkdir(capbase, 0700) == 0);
	sc = dc_connect(&d);
	REQUIRE(sc);
	(void)snprintf(req, sizeof(req), "{\"id\":2,\"cmd\":\"subscribe\","
		       "\"rule\":%ld,\"kinds\":[\"insn\"],\"fields\":"
		       "[\"ip\"]}\n", rule);
	REQUIRE(dc_send(sc, req) == 0);
	line = dc_read_line(sc, 20000);
	CHECK(line && strstr(line, "\"ok\":true"));
	free(line);
	REQUIRE(tree_start(&t));
	CHECK_EQ_INT(tree_finish(&t, out, sizeof(out)), 0);
	CHECK_EQ_STR(out, want_out);
	while (ends < TREE_KIDS + 3 && (line = dc_read_line(sc, 60000))) {
		long sid = key_num(line, "\"session\":"), k;

		for (k = 0; k < starts && sids[k] != sid; k++)
			;
		if (is_type(line, "session_start") && starts < 16) {
			sids[starts] = sid;
			pids[starts++] = key_num(line, "\"pid\":");
		} else if (is_type(line, "session_end")) {
			ends++;
		} else if (is_type(line, "insn") && k < starts) {
			char key[96];
			const char *ip = strstr(line, "\"ip\":\"0x");
			uint64_t v;

			/* its session and pid, first */
			(void)snprintf(key, sizeof(key), "{\"type\":\"insn\","
				       "\"session\":%ld,\"pid\":%ld,", sid,
				       pids[k]);
			CHECK(!strncmp(line, key, strlen(key)));
			if (ip && ptd_parse_u64n(ip + 8, strcspn(ip + 8, "\""),
						 16, &v) == 0 &&
			    nips[k] % 1024 == 0) {
				uint64_t *n = realloc(ips[k], (nips[k] + 1024) *
						      sizeof(*n));

				REQUIRE(n);
				ips[k] = n;
			}
			if (ip && ptd_parse_u64n(ip + 8, strcspn(ip + 8, "\""),
						 16, &v) == 0)
				ips[k][nips[k]++] = v;
		} else if (is_type(line, "lost")) {
			CHECK_FAIL_("rule stream lost records: %s", line);
		}
		free(line);
	}
	/* the program, 3 children, a grandchild, the vfork child */
	CHECK_EQ_INT(starts, TREE_KIDS + 3);
	CHECK_EQ_INT(ends, TREE_KIDS + 3);
	/* their parents, from list: the captures */
	for (long k = 0; k < starts; k++)
		parents[k] = -1;
	l = dc_call1(&d, "{\"id\":1,\"cmd\":\"list\"}\n");
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(cJSON_GetObjectItem(l,
			   "result"), "sessions"))
		for (long k = 0; k < starts; k++)
			if (num(e, "session") == sids[k]) {
				parents[k] = num(e, "parent");
				CHECK_EQ_INT(num(e, "rule"), rule);
			}
	cJSON_Delete(l);
	for (int round = 0; round < 4; round++)
		for (long k = 0; k < starts; k++) {
			if (caps[k])
				continue;
			if (pids[k] == t.pid) {
				(void)snprintf(cap[k], sizeof(cap[k]),
					       "%.600s/%ld", capbase, pids[k]);
				caps[k] = 1;
			}
			for (long j = 0; j < starts; j++)
				if (sids[j] == parents[k] && caps[j]) {
					(void)snprintf(cap[k], sizeof(cap[k]),
						       "%.600s.%ld", cap[j],
						       pids[k]);
					caps[k] = 1;
				}
		}
	for (long k = 0; k < starts; k++) {
		uint64_t *truth = NULL;
		size_t n = 0, i;

		if (!caps[k]) {
			CHECK_FAIL_("session %ld (pid %ld): no parent listed",
				    sids[k], pids[k]);
			continue;
		}
		if (!truth_of(cap[k], &truth, &n))
			continue;
		for (i = 0; i < n && i < nips[k] && truth[i] == ips[k][i]; i++)
			;
		if (i != n || n != nips[k])
			CHECK_FAIL_("session %ld (pid %ld): streamed %zu "
				    "instructions, truth %zu, first difference "
				    "at %zu", sids[k], pids[k], nips[k], n, i);
		CHECK(n > 0);
		fprintf(stderr, "  rule session %ld pid %ld (parent %ld): %zu "
			"instructions, as its truth\n", sids[k], pids[k],
			parents[k], nips[k]);
		free(truth);
		free(ips[k]);
	}
	dc_close(sc);
	dc_close(rc);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* intel_pt with children: the children check passes (the BPF fork
 * stopper loads), and the attach fails only because the PMU is missing
 * (intel_pt_sysfs points nowhere, whatever this machine has): the
 * message names the PMU.  A watch rule so is taken.  per_cpu with
 * children on intel_pt is refused, saying why.  Without BPF (below, a
 * nobody ptd) the fork stopper cannot load: refused, naming BPF. */
static void test_intelpt(void)
{
	struct daemon d;
	char req[1400];
	const cJSON *stop;
	cJSON *r;

	REQUIRE(daemon_start(&d, "intelpt", "intel_pt_sysfs = "
			     "/nonexistent/intel_pt\n"));
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"attach\","
		       "\"pid\":%d,\"options\":{\"source\":\"intel_pt\","
		       "\"children\":true}}\n", (int)getppid());
	r = dc_call1(&d, req);
	REQUIRE(r && !dc_ok(r));
	if (!strcmp(dc_err_code(r), "permission_denied") ||
	    strstr(dc_err_msg(r), "BPF")) {
		fprintf(stderr, "  skipped: ptd cannot load BPF here: %s\n",
			dc_err_msg(r));
		cJSON_Delete(r);
		CHECK_EQ_INT(daemon_stop(&d), 0);
		return;
	}
	fprintf(stderr, "  intel_pt with children: %s\n", dc_err_msg(r));
	CHECK(strncmp(dc_err_msg(r), "children", 8) != 0);
	CHECK_CONTAINS(dc_err_msg(r), "/nonexistent/intel_pt");
	cJSON_Delete(r);
	/* per_cpu: refused by name, attach and watch */
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"attach\","
		       "\"pid\":%d,\"options\":{\"source\":\"intel_pt\","
		       "\"children\":true,\"per_cpu\":true}}\n",
		       (int)getppid());
	r = dc_call1(&d, req);
	CHECK(r && !dc_ok(r));
	CHECK_EQ_STR(dc_err_code(r), "unsupported");
	CHECK_CONTAINS(dc_err_msg(r), "children with the intel_pt source "
		       "cannot have per_cpu buffers");
	cJSON_Delete(r);
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"watch\","
		       "\"exe\":\"%s/prog-forktree\",\"options\":{\"source\":"
		       "\"intel_pt\",\"children\":true,\"per_cpu\":true}}\n",
		       progs);
	r = dc_call1(&d, req);
	CHECK(r && !dc_ok(r));
	CHECK_CONTAINS(dc_err_msg(r), "per_cpu");
	cJSON_Delete(r);
	/* a rule: taken, its response saying children are stopped */
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"watch\","
		       "\"exe\":\"%s/prog-forktree\",\"options\":{\"source\":"
		       "\"intel_pt\",\"children\":true}}\n", progs);
	r = dc_call1(&d, req);
	CHECK(dc_ok(r));
	stop = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"),
				   "children_stop");
	CHECK(cJSON_IsString(stop) && strstr(stop->valuestring, "WUNTRACED"));
	cJSON_Delete(r);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* ptd run as nobody may not load BPF: intel_pt with children is refused,
 * saying it needs BPF; the rest answers. */
static void test_intelpt_no_bpf(void)
{
	struct daemon d;
	char req[256];
	cJSON *r;

	REQUIRE(daemon_start_restricted(&d, "unpriv", true));
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"attach\","
		       "\"pid\":%d,\"options\":{\"source\":\"intel_pt\","
		       "\"children\":true}}\n", (int)getppid());
	r = dc_call1(&d, req);
	REQUIRE(r);
	CHECK(!dc_ok(r));
	CHECK_EQ_STR(dc_err_code(r), "permission_denied");
	fprintf(stderr, "  unprivileged ptd: %s\n", dc_err_msg(r));
	CHECK_CONTAINS(dc_err_msg(r), "BPF");
	CHECK_CONTAINS(dc_err_msg(r), "children with the intel_pt source");
	cJSON_Delete(r);
	r = dc_call1(&d, "{\"id\":2,\"cmd\":\"list\"}\n");
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* The whole flow on Intel PT: prog-forktree attached with intel_pt and
 * children: its 3 children, the grandchild and the vfork child are each
 * a session (intel_pt) naming its parent session, stopped by the fork
 * stopper and continued; the output and exit status are an untraced
 * run's; the root's status counts the children it started; a second
 * such session on the same process is refused. */
static void test_intelpt_tree(void)
{
	struct daemon d;
	struct tree t;
	char req[1024], out[512];
	cJSON *r, *l;
	const cJSON *e;
	long root, n = 0, with_parent = 0;

	if (access("/sys/bus/event_source/devices/intel_pt", F_OK) < 0) {
		fprintf(stderr, "  skipped: no Intel PT here (/sys/bus/"
			"event_source/devices/intel_pt: %s)\n",
			strerror(errno));
		return;
	}
	REQUIRE(daemon_start(&d, "intelpt-tree", ""));
	REQUIRE(tree_start(&t));
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"attach\","
		       "\"pid\":%d,\"options\":{\"source\":\"intel_pt\","
		       "\"children\":true}}\n", (int)t.pid);
	r = dc_call1(&d, req);
	if (r && !dc_ok(r) && !strcmp(dc_err_code(r), "permission_denied")) {
		fprintf(stderr, "  skipped: %s\n", dc_err_msg(r));
		cJSON_Delete(r);
		(void)tree_finish(&t, out, sizeof(out));
		CHECK_EQ_INT(daemon_stop(&d), 0);
		return;
	}
	REQUIRE(dc_ok(r));
	root = (long)dc_num(r, "session");
	CHECK(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(r,
			"result"), "stop")));
	cJSON_Delete(r);
	/* one intel_pt session with children per process */
	r = dc_call1(&d, req);
	CHECK(r && !dc_ok(r));
	CHECK_EQ_STR(dc_err_code(r), "limit");
	CHECK_CONTAINS(dc_err_msg(r), "followed by another session");
	cJSON_Delete(r);
	CHECK_EQ_INT(tree_finish(&t, out, sizeof(out)), 0);
	CHECK_EQ_STR(out, want_out);
	l = wait_ended(&d, TREE_KIDS + 3);
	REQUIRE(l);
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(cJSON_GetObjectItem(l,
			   "result"), "sessions")) {
		const cJSON *src = cJSON_GetObjectItem(e, "source");

		n++;
		with_parent += num(e, "parent") > 0;
		CHECK(cJSON_IsString(src) &&
		      !strcmp(src->valuestring, "intel_pt"));
	}
	cJSON_Delete(l);
	CHECK_EQ_INT(n, TREE_KIDS + 3);
	CHECK_EQ_INT(with_parent, TREE_KIDS + 2);
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"status\","
		       "\"session\":%ld}\n", root);
	r = dc_call1(&d, req);
	CHECK_EQ_INT((int)dc_num(r, "children_started"), TREE_KIDS + 1);
	CHECK_EQ_INT((int)dc_num(r, "children_refused"), 0);
	cJSON_Delete(r);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

int main(void)
{
	harness_setup("/tmp/ptd-ch-XXXXXX");
	if (geteuid() != 0)
		SKIP_ALL("options.capture is root's only: run as root");
	RUN(test_intelpt);
	RUN(test_intelpt_no_bpf);
	RUN(test_intelpt_tree);
	RUN(test_without);
	RUN(test_refused);
	RUN(test_children);
	RUN(test_orphan);
	RUN(test_rule);
	return harness_done();
}
