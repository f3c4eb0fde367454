/* SPDX-License-Identifier: MIT */
/*
 * options.children (srv.h): every process a traced process creates (fork,
 * vfork, clone without CLONE_THREAD), recursively, becomes a session of
 * its own -- the same owner, options and rule, its parent session named.
 *
 * A ptrace tracer is one thread, so a child cannot stay with its parent's
 * tracer: the software source (swpt/tracer.h, opt->child) detaches it at
 * its first stop with a SIGSTOP queued, which holds it before its first
 * instruction, and reports its pid here, on its own thread.  The intel_pt
 * source's per-thread events do not follow a fork (and cannot: the kernel
 * refuses to map an inherited per-task event), so for it the BPF fork
 * stopper (daemon/forkstop.h, loaded by the first such session) stops
 * the child with a SIGSTOP before its first user-space instruction and
 * reports it through its ring buffer: the session's process is followed
 * there from before its trace starts until the session ends, and the
 * loop hands each report to the same queue.  Per-CPU buffers cannot be
 * had with children on intel_pt: a child's session needs intel_pt
 * events of its own, and per-CPU events hold each CPU's intel_pt and
 * inherit into the parent's buffers; refused, saying so.  The loop
 * then starts a session on it exactly as a watch rule's match is started
 * (watch.c): srv_attach_begin with the owner's rights and limits, its
 * start thread waits for the stop (srv_watch_wait_stopped), seizes it,
 * checks the permission again and only then sends the SIGCONT
 * (srv_watch_continue): the child is traced from its first instruction
 * after the fork.  A child refused (a limit, permission, the parent
 * session ending) is sent the SIGCONT at once and runs on untraced; the
 * refusal is logged, counted in the parent's status and, while the
 * parent session decodes, is an error record in its stream.
 *
 * The stop is one the child's parent can see (waitpid(WUNTRACED)), as a
 * watch rule's is: the attach and watch responses say so.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/pidfd.h"
#include "daemon/bpfload.h"
#include "common/strutil.h"
#include "daemon/log.h"
#include "daemon/server/srv.h"

static void __attribute__((format(printf, 4, 5)))
child_note(struct srv_session *ss, pid_t pid, int code, const char *fmt, ...);

const char srv_children_stop_note[] =
	"with children: each child process is stopped (SIGSTOP) before its "
	"first instruction until ptd has seized it, then continued "
	"(SIGCONT): its parent, waiting with WUNTRACED or WCONTINUED, sees "
	"the stop and the continue";

int srv_request_copy(struct ptd_request *dst, const struct ptd_request *req)
{
	*dst = *req;
	dst->id = NULL;
	dst->addr_filter = NULL;
	dst->ntriggers = 0;
	if (req->addr_filter && !(dst->addr_filter = strdup(req->addr_filter)))
		return -ENOMEM;
	for (unsigned i = 0; i < req->ntriggers; i++) {
		dst->triggers[i] = strdup(req->triggers[i]);
		if (!dst->triggers[i])
			return -ENOMEM;
		dst->ntriggers++;
	}
	return 0;
}

void srv_request_free(struct ptd_request *req)
{
	if (!req)
		return;
	free(req->addr_filter);
	req->addr_filter = NULL;
	for (unsigned i = 0; i < req->ntriggers; i++)
		free(req->triggers[i]);
	req->ntriggers = 0;
}

int srv_groups_copy(const gid_t *groups, size_t n, gid_t **ret)
{
	gid_t *v = malloc((n ? n : 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	if (n)
		memcpy(v, groups, n * sizeof(*v));
	*ret = v;
	return (int)n;
}

int srv_children_inherit_groups(struct ptd_server *s, struct srv_session *ss,
				uint64_t parent, struct ptd_diag *diag)
{
	const struct srv_session *p;
	int r;

	for (p = s->sessions; p && p->id != parent; p = p->next)
		;
	if (!p || !p->groups)
		return ptd_diagf(diag, -ENOENT, "symbols: session %" PRIu64
				 " kept no groups to read its child's with",
				 parent);
	r = srv_groups_copy(p->groups, p->ngroups, &ss->groups);
	if (r < 0)
		return ptd_diagf(diag, r, "out of memory");
	ss->ngroups = (size_t)r;
	return 0;
}

int srv_children_init(struct srv_session *ss, const struct ptd_request *req)
{
	int r;

	ss->creq = calloc(1, sizeof(*ss->creq));
	if (!ss->creq)
		return -ENOMEM;
	r = srv_request_copy(ss->creq, req);
	if (r < 0)
		return r;
	r = -pthread_mutex_init(&ss->kid_lock, NULL);
	if (r < 0)
		return r;
	ss->kid_init = true;
	return 0;
}

/* The source's thread: child @pid is stopped, the loop takes it from
 * here.  Without memory to queue it, it is continued at once (its pid is
 * its own while it is stopped: nothing reaps it). */
static void child_reported(void *ctx, pid_t pid)
{
	struct srv_session *ss = ctx;
	pid_t *v;

	(void)pthread_mutex_lock(&ss->kid_lock);
	v = realloc(ss->kids, (ss->nkids + 1) * sizeof(*v));
	if (v) {
		ss->kids = v;
		ss->kids[ss->nkids++] = pid;
	} else {
		ss->kids_lost++;
	}
	(void)pthread_mutex_unlock(&ss->kid_lock);
	if (!v)
		(void)kill(pid, SIGCONT);
	srv_wake(ss->srv);
}

void srv_children_opts(struct srv_session *ss, struct ptd_session_opts *o)
{
	/* (intel_pt: the fork stopper reports them, srv_children_follow) */
	if (!ss->creq || o->source == PTD_SOURCE_INTEL_PT)
		return;
	o->child = child_reported;
	o->child_ctx = ss;
}

static const char intelpt_what[] = "children with the intel_pt source";

bool srv_children_intelpt_ready(struct ptd_server *s, struct conn *c,
				const struct ptd_request *req)
{
	struct ptd_diag diag = { "" };
	int r;

	if (req->per_cpu) {
		srv_reply_error(c, req->id, PTD_ERR_UNSUPPORTED,
				"children with the intel_pt source cannot have "
				"per_cpu buffers: a child's session needs "
				"intel_pt events of its own, and per-CPU "
				"events hold each CPU's intel_pt and inherit "
				"into the parent's buffers; leave per_cpu out");
		return false;
	}
	if (s->forkstop)
		return true;
	r = ptd_forkstop_new(intelpt_what, 0, &s->forkstop, &diag);
	if (r < 0) {
		ptd_log_info("uid %u: %s refused: %s",
			     c ? (unsigned)c->peer.uid : 0u, intelpt_what,
			     diag.msg);
		srv_reply_error(c, req->id, r == -EPERM ? PTD_ERR_PERMISSION
						       : PTD_ERR_UNSUPPORTED,
				"%s", diag.msg);
		return false;
	}
	s->forkstop_ep.kind = EP_FORKSTOP;
	s->forkstop_ep.fd = ptd_forkstop_fd(s->forkstop);
	r = srv_ep_add(s, &s->forkstop_ep, EPOLLIN);
	if (r < 0) {
		ptd_forkstop_free(s->forkstop, NULL, NULL);
		s->forkstop = NULL;
		srv_reply_error(c, req->id, PTD_ERR_INTERNAL, "epoll: %s",
				strerror(-r));
		return false;
	}
	ptd_log_info("fork stopper loaded (BPF, sched_process_fork and "
		     "sys_exit): %s", intelpt_what);
	return true;
}

int srv_children_follow(struct ptd_server *s, struct srv_session *ss,
			struct ptd_diag *diag)
{
	int r = ptd_forkstop_follow(s->forkstop, ss->pid, ss->id);

	if (r == -EEXIST)
		return ptd_diagf(diag, -PTD_ELIMIT, "children: the children of pid %d "
				 "are followed by another session already "
				 "(one intel_pt session with children per "
				 "process)", (int)ss->pid);
	if (r == -E2BIG)
		return ptd_diagf(diag, -PTD_ELIMIT, "children: ptd follows "
				 "the children of %u processes already: no "
				 "more fit", PTD_FORKSTOP_FOLLOWED);
	if (r < 0)
		return ptd_diagf(diag, r, "children: cannot follow pid %d: %s",
				 (int)ss->pid, strerror(-r));
	ss->forkstop_followed = true;
	return 0;
}

/* The fork stopper let @missed children of @ss's process go untraced so
 * far: said (log, status, stream) where that grew. */
static void missed_seen(struct srv_session *ss, uint64_t missed)
{
	uint64_t n;

	if (missed <= ss->children_missed)
		return;
	n = missed - ss->children_missed;
	ss->children_missed = missed;
	ptd_log_warning("session %" PRIu64 ": %" PRIu64 " child process(es) "
			"of pid %d not traced: the fork stopper could not "
			"stop them (its tables or ring buffer full, or a "
			"signal refused); they ran untraced", ss->id, n,
			(int)ss->pid);
	child_note(ss, ss->pid, -PTD_ELIMIT, "%" PRIu64 " child process(es) "
		   "not traced: the fork stopper could not stop them (its "
		   "tables or ring buffer full, or a signal refused); they "
		   "ran untraced", n);
}

void srv_children_unfollow(struct srv_session *ss)
{
	uint64_t missed = 0;

	if (!ss->forkstop_followed)
		return;
	if (ptd_forkstop_unfollow(ss->srv->forkstop, ss->pid, ss->id,
				  &missed) == 0)
		missed_seen(ss, missed);
	ss->forkstop_followed = false;
}

/* Child @ev->pid of session @ev->cookie, stopped: queued as the software
 * source's reports are; a session gone (or ended) has it continued. */
static void on_forkstop(void *ctx, const struct ptd_forkstop_event *ev)
{
	struct ptd_server *s = ctx;
	struct srv_session *ss;

	for (ss = s ? s->sessions : NULL; ss; ss = ss->next)
		if (ss->id == ev->cookie)
			break;
	if (ss && ss->creq && ss->forkstop_followed) {
		uint64_t missed;

		child_reported(ss, (pid_t)ev->pid);
		/* (misses come with no report of their own: looked at with
		 * each report, at status and at the end) */
		if (ptd_forkstop_missed(s->forkstop, ss->pid, ss->id,
					&missed) == 0)
			missed_seen(ss, missed);
		return;
	}
	ptd_log_info("session %" PRIu64 ": child process %u of pid %u not "
		     "traced: the session has ended; it runs on untraced",
		     (uint64_t)ev->cookie, ev->pid, ev->parent);
	(void)kill((pid_t)ev->pid, SIGCONT);
}

void srv_forkstop_readable(struct ptd_server *s)
{
	if (s->forkstop)
		(void)ptd_forkstop_drain(s->forkstop, on_forkstop, s);
}

void srv_forkstop_unload(struct ptd_server *s)
{
	/* (every session is gone: each report is continued) */
	ptd_forkstop_free(s->forkstop, on_forkstop, NULL);
	s->forkstop = NULL;
}

/* The error a refusal's message names ("limit: ...", srv_reply_error's
 * code first), as a record's code. */
static int refusal_code(const char *why)
{
	static const struct {
		const char *code;
		int err;
	} map[] = {
		{ PTD_ERR_LIMIT, -PTD_ELIMIT },
		{ PTD_ERR_MEMORY_LIMIT, -PTD_ELIMIT },
		{ PTD_ERR_PERMISSION, -EPERM },
		{ PTD_ERR_NO_SUCH_PROCESS, -ESRCH },
		{ PTD_ERR_UNSUPPORTED, -PTD_EUNSUPPORTED },
		{ PTD_ERR_SHUTTING_DOWN, -ECANCELED },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		size_t n = strlen(map[i].code);

		if (!strncmp(why, map[i].code, n) && why[n] == ':')
			return map[i].err;
	}
	return -ECANCELED;
}

/* A note for @ss's stream, while it decodes (sink_flush reports them). */
static void __attribute__((format(printf, 4, 5)))
child_note(struct srv_session *ss, pid_t pid, int code, const char *fmt, ...)
{
	struct srv_child_note *n;
	va_list ap;

	(void)pthread_mutex_lock(&ss->kid_lock);
	if (ss->nnotes < SRV_CHILD_NOTES) {
		n = &ss->notes[ss->nnotes++];
		n->pid = pid;
		n->code = code;
		va_start(ap, fmt);
		(void)vsnprintf(n->detail, sizeof(n->detail), fmt, ap);
		va_end(ap);
	} else {
		ss->notes_dropped++;
	}
	(void)pthread_mutex_unlock(&ss->kid_lock);
}

void srv_child_refused(struct ptd_server *s, uint64_t parent, pid_t pid,
		       int err, const char *why)
{
	struct srv_session *ss;

	for (ss = s->sessions; ss; ss = ss->next)
		if (ss->id == parent)
			break;
	ptd_log_info("session %" PRIu64 ": child process %d not traced: %s; "
		     "it runs on untraced", parent, (int)pid, why);
	if (!ss || !ss->creq)
		return;
	ss->children_refused++;
	(void)snprintf(ss->last_child_refusal, sizeof(ss->last_child_refusal),
		       "pid %d: %s", (int)pid, why);
	child_note(ss, pid, err ? err : refusal_code(why), "child process "
		   "%d not traced: %s; it runs on untraced", (int)pid, why);
}

static void send_cont(int pidfd)
{
	(void)syscall(SYS_pidfd_send_signal, pidfd, SIGCONT, NULL, 0);
}

/* Child @pid of @ss, stopped: its session, as a rule's match is one. */
static void child_begin(struct ptd_server *s, struct srv_session *ss,
			pid_t pid)
{
	struct ptd_request req;
	int pidfd = 0;

	if (pid <= 0 || ptd_pidfd_open(pid, &pidfd) < 0)
		return;		/* gone already: nothing to continue */
	req = *ss->creq;
	req.cmd = PTD_CMD_ATTACH;
	req.id = NULL;
	req.pid = pid;
	if (ss->stopping || s->shutting_down) {
		srv_child_refused(s, ss->id, pid, -ECANCELED,
				  s->shutting_down ? "ptd is shutting down"
						   : "its parent's session is "
						     "being detached");
		goto cont;
	}
	if (ss->creq->capture[0]) {
		int k = snprintf(req.capture, sizeof(req.capture), "%s.%d",
				 ss->creq->capture, (int)pid);

		if (k < 0 || (size_t)k >= sizeof(req.capture)) {
			srv_child_refused(s, ss->id, pid, -ENAMETOOLONG,
					  "options.capture.PID is too long");
			goto cont;
		}
	}
	if (srv_attach_begin(s, NULL, &ss->peer, &req, ss->rule, pidfd,
			     ss->id)) {
		ss->children_started++;
		return;		/* its session thread sends the SIGCONT */
	}
	srv_child_refused(s, ss->id, pid, 0, srv_reply_quiet_error());
cont:
	send_cont(pidfd);
	close(pidfd);
}

void srv_children_start(struct ptd_server *s)
{
	struct srv_session *ss;

	for (ss = s->sessions; ss; ss = ss->next) {
		pid_t *kids;
		size_t n;

		if (!ss->creq)
			continue;
		(void)pthread_mutex_lock(&ss->kid_lock);
		kids = ss->kids;
		n = ss->nkids;
		ss->kids = NULL;
		ss->nkids = 0;
		(void)pthread_mutex_unlock(&ss->kid_lock);
		/* (sessions begun here go to the list's head: not met) */
		for (size_t i = 0; i < n; i++)
			child_begin(s, ss, kids[i]);
		free(kids);
	}
}

bool srv_children_pending(struct srv_session *ss)
{
	size_t n;

	if (!ss->creq)
		return false;
	(void)pthread_mutex_lock(&ss->kid_lock);
	n = ss->nkids;
	(void)pthread_mutex_unlock(&ss->kid_lock);
	return n > 0;
}

void srv_children_report(struct srv_session *ss)
{
	struct srv_child_note notes[SRV_CHILD_NOTES];
	size_t n;

	if (!ss->creq)
		return;
	(void)pthread_mutex_lock(&ss->kid_lock);
	n = ss->nnotes;
	memcpy(notes, ss->notes, n * sizeof(notes[0]));
	ss->nnotes = 0;
	(void)pthread_mutex_unlock(&ss->kid_lock);
	for (size_t i = 0; i < n; i++) {
		struct ptd_record rec;

		memset(&rec, 0, sizeof(rec));
		rec.type = PTD_REC_ERROR;
		rec.pid = ss->pid;
		rec.tid = ss->pid;
		rec.u.error.code = notes[i].code;
		rec.u.error.ptd_code = true;
		rec.u.error.context = "children";
		rec.u.error.detail = notes[i].detail;
		ptd_fanout_record(ss->fan, &rec);
	}
}

void srv_children_status(const struct srv_session *ss, cJSON *o)
{
	if (ss->parent)
		cJSON_AddNumberToObject(o, "parent", (double)ss->parent);
	if (!ss->creq)
		return;
	cJSON_AddBoolToObject(o, "children", true);
}

void srv_children_counts(const struct srv_session *ss, cJSON *o)
{
	if (!ss->creq)
		return;
	cJSON_AddNumberToObject(o, "children_started",
				(double)ss->children_started);
	cJSON_AddNumberToObject(o, "children_refused",
				(double)ss->children_refused);
	if (ss->forkstop_followed || ss->children_missed) {
		uint64_t missed = ss->children_missed, now;

		if (ss->forkstop_followed &&
		    ptd_forkstop_missed(ss->srv->forkstop, ss->pid, ss->id,
					&now) == 0 && now > missed)
			missed = now;
		cJSON_AddNumberToObject(o, "children_missed", (double)missed);
	}
	if (ss->last_child_refusal[0])
		cJSON_AddStringToObject(o, "last_child_refusal",
					ss->last_child_refusal);
}

void srv_children_free(struct srv_session *ss)
{
	/* (before kid_lock goes: a miss seen last is noted under it) */
	srv_children_unfollow(ss);
	if (ss->kid_init) {
		/* reported and never taken (the loop takes them before it
		 * frees a session, but at shutdown; a start that failed
		 * leaves none) */
		for (size_t i = 0; i < ss->nkids; i++) {
			ptd_log_info("session %" PRIu64 ": child process %d "
				     "not traced: the session was freed first; "
				     "it runs on untraced", ss->id,
				     (int)ss->kids[i]);
			(void)kill(ss->kids[i], SIGCONT);
		}
		(void)pthread_mutex_destroy(&ss->kid_lock);
		ss->kid_init = false;
	}
	free(ss->kids);
	ss->kids = NULL;
	ss->nkids = 0;
	srv_request_free(ss->creq);
	free(ss->creq);
	ss->creq = NULL;
	free(ss->groups);
	ss->groups = NULL;
	ss->ngroups = 0;
}
