/* SPDX-License-Identifier: MIT */
/*
 * watch and unwatch (srv.h): rules whose matching execs become sessions.
 *
 * The exec watcher (daemon/watch.h, its BPF program daemon/bpf/
 * watch.bpf.c) stops every process that matches a rule with a SIGSTOP at
 * its exec, before its first user-space instruction, and writes an event
 * into its ring buffer.  For each event the loop waits (bounded) until the
 * process is in that stop, then attaches to it as an attach request of
 * the rule's owner would (srv_attach_begin: the same permission rules,
 * limits and options); the session thread seizes it, the permission rule
 * is checked again on the seized process, and only then is the process
 * sent the SIGCONT that lets it run on, traced from where it stopped: the
 * dynamic loader's entry.  A match that becomes no session (refused, or
 * the rule gone) is sent the SIGCONT at once, untraced.
 *
 * The stop is one a parent can see: waitpid(WUNTRACED) reports the child
 * stopped by SIGSTOP, and waitpid(WCONTINUED) continued; SIGCHLD comes for
 * both unless the parent set SA_NOCLDSTOP.  The watch response says so.
 */
#include <errno.h>
#include <linux/magic.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "common/pidfd.h"
#include "common/strutil.h"
#include "daemon/log.h"
#include "daemon/server/srv.h"

/* How long a matched process may take to reach its stop. */
#define WATCH_STOP_WAIT_MS 2000

static const char stop_note[] =
	"a matching process is stopped (SIGSTOP) at its exec until ptd has "
	"seized it, then continued (SIGCONT): a parent that waits with "
	"WUNTRACED or WCONTINUED sees the stop and the continue";

void srv_watch_continue(struct srv_session *ss)
{
	if (ss->stop_pidfd > 0 &&
	    !atomic_exchange(&ss->continued, true))
		(void)syscall(SYS_pidfd_send_signal, ss->stop_pidfd, SIGCONT,
			      NULL, 0);
}

static void send_cont(int pidfd)
{
	if (pidfd > 0)
		(void)syscall(SYS_pidfd_send_signal, pidfd, SIGCONT, NULL, 0);
}

/* The state letter of process @pid (/proc/PID/stat), or 0. */
static char proc_state(const struct ptd_server *s, pid_t pid)
{
	char path[PATH_MAX + 32], buf[512];
	ssize_t n;
	char *p;
	int k, fd;

	k = snprintf(path, sizeof(path), "%s/%d/stat", s->procroot, (int)pid);
	if (k < 0 || (size_t)k >= sizeof(path))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/* Wait until @pid is in the stop the watcher sent it: seized before, the
 * SIGSTOP would come to the tracer as a signal to deliver.  On the
 * session's start thread (opts.prepare), never on the loop: an exec storm
 * or a process that never stops holds no other client back. */
int srv_watch_wait_stopped(const struct ptd_server *s, pid_t pid,
			   const char *where, struct ptd_diag *diag)
{
	const struct timespec tick = { 0, 100000 };
	uint64_t end = srv_now_ms() + WATCH_STOP_WAIT_MS;

	for (;;) {
		char st = proc_state(s, pid);

		if (st == 'T')
			return 0;
		if (st == 0 || st == 'Z' || st == 'X')
			return ptd_diagf(diag, -ESRCH, "it did not reach its "
					 "stop %s (it exited, or was killed)",
					 where);
		if (srv_now_ms() >= end)
			return ptd_diagf(diag, -ETIMEDOUT, "it did not reach "
					 "its stop %s within %d ms (state "
					 "'%c': traced by another tracer?)",
					 where, WATCH_STOP_WAIT_MS, st);
		(void)nanosleep(&tick, NULL);
	}
}

static struct srv_rule *rule_by_slot(struct ptd_server *s, unsigned slot,
				     uint64_t id)
{
	struct srv_rule *r;

	for (r = s->rules; r; r = r->next)
		if (r->slot == slot && r->id == id)
			return r;
	return NULL;
}

static void rule_refused(struct srv_rule *r, pid_t pid, const char *why)
{
	r->refused++;
	(void)snprintf(r->last_refusal, sizeof(r->last_refusal),
		       "pid %d: %s", (int)pid, why);
	ptd_log_info("rule %" PRIu64 ": pid %d not traced: %s", r->id,
		     (int)pid, why);
}

/* One match: the process is (or is about to be) stopped at its exec. */
static void on_match(void *ctx, const struct ptd_watch_event *ev)
{
	struct ptd_server *s = ctx;
	struct srv_rule *r = rule_by_slot(s, ev->slot, ev->id);
	pid_t pid = (pid_t)ev->pid;
	struct ptd_request req;
	struct srv_session *ss;
	int pidfd = 0;

	if (pid <= 0 || ptd_pidfd_open(pid, &pidfd) < 0)
		return;		/* gone already: nothing to continue */
	if (!r) {		/* unwatched since: let it run on */
		send_cont(pidfd);
		close(pidfd);
		return;
	}
	req = r->req;
	req.cmd = PTD_CMD_ATTACH;
	req.id = NULL;
	req.pid = pid;
	if (r->req.capture[0]) {
		int n = snprintf(req.capture, sizeof(req.capture), "%s/%d",
				 r->req.capture, (int)pid);

		if (n < 0 || (size_t)n >= sizeof(req.capture)) {
			rule_refused(r, pid, "options.capture/PID is too long");
			send_cont(pidfd);
			close(pidfd);
			return;
		}
	}
	ss = srv_attach_begin(s, NULL, &r->peer, &req, r->id, pidfd, 0);
	if (!ss) {
		rule_refused(r, pid, srv_reply_quiet_error());
		send_cont(pidfd);
		close(pidfd);
		return;
	}
	r->started++;
}

int srv_rule_owner_fd(const struct ptd_server *s, uint64_t rule)
{
	const struct srv_rule *r;

	for (r = s->rules; r; r = r->next)
		if (r->id == rule)
			return r->conn ? r->conn->tag.fd : -1;
	return -1;
}

void srv_watch_refused(struct ptd_server *s, uint64_t rule, pid_t pid,
		       const char *why)
{
	struct srv_rule *r;

	for (r = s->rules; r; r = r->next)
		if (r->id == rule) {
			/* begun, then refused: a match that became no
			 * session */
			if (r->started)
				r->started--;
			rule_refused(r, pid, why);
			return;
		}
}

void srv_watch_readable(struct ptd_server *s)
{
	if (s->watcher)
		(void)ptd_watcher_drain(s->watcher, on_match, s);
}

static unsigned rules_of(const struct ptd_server *s, uid_t uid,
		       uint64_t *used_slots)
{
	const struct srv_rule *r;
	unsigned n = 0;

	*used_slots = 0;
	for (r = s->rules; r; r = r->next) {
		n += r->peer.uid == uid;
		*used_slots |= 1ull << r->slot;
	}
	return n;
}

/* The watcher, loaded with the first rule; refused (answered): false. */
static bool watcher_ready(struct ptd_server *s, struct conn *c,
			  const struct ptd_request *req)
{
	struct ptd_diag diag = { "" };
	int r;

	if (s->watcher)
		return true;
	r = ptd_watcher_new(&s->watcher, &diag);
	if (r < 0) {
		ptd_log_info("uid %u: watch refused: %s",
			     (unsigned)c->peer.uid, diag.msg);
		srv_reply_error(c, req->id, r == -EPERM ? PTD_ERR_PERMISSION
						       : PTD_ERR_UNSUPPORTED,
				"%s", diag.msg);
		return false;
	}
	s->watch.kind = EP_WATCH;
	s->watch.fd = ptd_watcher_fd(s->watcher);
	r = srv_ep_add(s, &s->watch, EPOLLIN);
	if (r < 0) {
		ptd_watcher_free(s->watcher, NULL, NULL);
		s->watcher = NULL;
		srv_reply_error(c, req->id, PTD_ERR_INTERNAL, "epoll: %s",
				strerror(-r));
		return false;
	}
	ptd_log_info("exec watcher loaded (BPF, sched_process_exec)");
	return true;
}

/* No rule left: unload the watcher (every exec on the machine runs its
 * program while it is loaded).  Closing its fd takes it out of epoll. */
static void watcher_maybe_unload(struct ptd_server *s)
{
	if (s->rules || !s->watcher)
		return;
	/* events still queued are for rules gone: continue them, the
	 * program detached first (a match in flight on another CPU would
	 * otherwise be queued after the last read, its process stopped for
	 * good) */
	ptd_watcher_free(s->watcher, on_match, s);
	s->watcher = NULL;
	ptd_log_info("exec watcher unloaded (no rule left)");
}

/* A cgroup rule: the directory must be a cgroup of the v2 hierarchy (the
 * one bpf_get_current_ancestor_cgroup_id sees); its id is its inode
 * number.  Refused (answered): false. */
static bool cgroup_slot(struct conn *c, const struct ptd_request *req,
			struct ptd_watch_slot *sl)
{
	struct statfs sfs;
	struct stat st;
	int fd = open(req->watch_cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		srv_reply_error(c, req->id, errno == ENOENT ?
				PTD_ERR_NO_SUCH_FILE : PTD_ERR_BAD_REQUEST,
				"cgroup: '%s': %s", req->watch_cgroup,
				strerror(errno));
		return false;
	}
	if (fstatfs(fd, &sfs) < 0 || fstat(fd, &st) < 0 ||
	    sfs.f_type != CGROUP2_SUPER_MAGIC) {
		(void)close(fd);
		srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
				"cgroup: '%s' is not a directory of the "
				"cgroup v2 hierarchy (cgroup2 filesystem)",
				req->watch_cgroup);
		return false;
	}
	(void)close(fd);
	sl->kind = PTD_WATCH_CGROUP;
	sl->cgid = st.st_ino;
	return true;
}

/* What @req matches, as the watcher's slot; refused (answered): false. */
static bool slot_of(struct conn *c, const struct ptd_request *req,
		    struct ptd_watch_slot *sl)
{
	struct stat st;

	memset(sl, 0, sizeof(*sl));
	if (req->watch_exe[0]) {
		if (stat(req->watch_exe, &st) < 0) {
			srv_reply_error(c, req->id, PTD_ERR_NO_SUCH_FILE,
					"exe: '%s': %s", req->watch_exe,
					strerror(errno));
			return false;
		}
		if (!S_ISREG(st.st_mode)) {
			srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
					"exe: '%s' is not a regular file",
					req->watch_exe);
			return false;
		}
		sl->kind = PTD_WATCH_EXE;
		sl->ino = st.st_ino;
		/* the kernel's own encoding (MKDEV): 20 bits of minor */
		sl->dev = (major(st.st_dev) << 20) | minor(st.st_dev);
	} else if (req->watch_cgroup[0]) {
		if (!cgroup_slot(c, req, sl))
			return false;
	} else {
		sl->kind = PTD_WATCH_COMM;
		(void)ptd_strlcpy(sl->comm, req->watch_comm,
				  sizeof(sl->comm));
	}
	sl->owner_root = c->peer.uid == 0;
	sl->owner = c->peer.uid;
	sl->has_uid = req->has_watch_uid;
	sl->uid = req->watch_uid;
	return true;
}

static cJSON *rule_json(struct ptd_server *s, const struct srv_rule *r)
{
	cJSON *o = cJSON_CreateObject();
	struct ptd_watch_count cnt;
	const struct srv_session *ss;
	cJSON *a;

	cJSON_AddNumberToObject(o, "rule", (double)r->id);
	cJSON_AddNumberToObject(o, "owner", r->peer.uid);
	if (r->req.watch_exe[0])
		cJSON_AddStringToObject(o, "exe", r->req.watch_exe);
	else if (r->req.watch_cgroup[0])
		cJSON_AddStringToObject(o, "cgroup", r->req.watch_cgroup);
	else
		cJSON_AddStringToObject(o, "comm", r->req.watch_comm);
	if (r->req.has_watch_uid)
		cJSON_AddNumberToObject(o, "uid", r->req.watch_uid);
	if (s->watcher && ptd_watcher_counts(s->watcher, r->slot, &cnt) == 0) {
		cJSON_AddNumberToObject(o, "matched", (double)cnt.matched);
		cJSON_AddNumberToObject(o, "missed", (double)cnt.missed);
	}
	cJSON_AddNumberToObject(o, "sessions_started", (double)r->started);
	cJSON_AddNumberToObject(o, "refused", (double)r->refused);
	cJSON_AddNumberToObject(o, "subscribers",
				(double)srv_rulesubs_count(s, r->id));
	if (r->last_refusal[0])
		cJSON_AddStringToObject(o, "last_refusal", r->last_refusal);
	a = cJSON_AddArrayToObject(o, "sessions");
	for (ss = s->sessions; a && ss; ss = ss->next)
		if (ss->rule == r->id) {
			cJSON *e = cJSON_CreateObject();

			cJSON_AddNumberToObject(e, "session", (double)ss->id);
			cJSON_AddNumberToObject(e, "pid", ss->pid);
			cJSON_AddItemToArray(a, e);
		}
	cJSON_AddStringToObject(o, "stop", stop_note);
	if (r->req.children) {
		cJSON_AddBoolToObject(o, "children", true);
		cJSON_AddStringToObject(o, "children_stop",
					srv_children_stop_note);
	}
	return o;
}

void srv_cmd_watch(struct ptd_server *s, struct conn *c,
		   const struct ptd_request *req)
{
	struct ptd_watch_slot sl;
	struct srv_rule *r;
	uint64_t used;
	unsigned slot;
	int e;

	if (req->has_watch_uid && c->peer.uid != 0 &&
	    req->watch_uid != c->peer.uid) {
		srv_reply_error(c, req->id, PTD_ERR_PERMISSION,
				"uid %u may watch only its own processes, not "
				"uid %u's", (unsigned)c->peer.uid,
				(unsigned)req->watch_uid);
		return;
	}
	if (req->capture[0] && c->peer.uid != 0) {
		srv_reply_error(c, req->id, PTD_ERR_PERMISSION,
				"only root may ask for options.capture");
		return;
	}
	/* (its fork stopper loaded now: each match needs it) */
	if (req->children && req->source == PTD_SOURCE_INTEL_PT &&
	    !srv_children_intelpt_ready(s, c, req))
		return;
	/* each session's triggers are resolved at its exec; what can be
	 * decided now is refused now, not once per match */
	for (unsigned i = 0; i < req->ntriggers; i++) {
		struct ptd_trigger_spec *sp = malloc(sizeof(*sp));
		struct ptd_diag diag = { "" };
		bool snap;

		if (!sp || ptd_trigger_spec_parse(req->triggers[i], sp,
						  &diag) < 0) {
			srv_reply_error(c, req->id, sp ? PTD_ERR_BAD_REQUEST
						       : PTD_ERR_INTERNAL,
					"options.triggers[%u]: %s", i,
					sp ? diag.msg : "out of memory");
			free(sp);
			return;
		}
		snap = sp->action == PTD_TRIGGER_SNAPSHOT;
		free(sp);
		if (snap != (req->mode == PTD_MODE_SNAPSHOT)) {
			srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
					"options.triggers[%u]: %s", i, snap
					? "a snapshot trigger needs "
					  "\"mode\": \"snapshot\""
					: "start and stop triggers need "
					  "\"mode\": \"full\"");
			return;
		}
	}
	if (rules_of(s, c->peer.uid, &used) >=
	    s->cfg.max_watch_rules_per_user) {
		srv_reply_error(c, req->id, PTD_ERR_LIMIT,
				"uid %u already has %u watch rules "
				"(max_watch_rules_per_user)",
				(unsigned)c->peer.uid,
				s->cfg.max_watch_rules_per_user);
		return;
	}
	for (slot = 0; slot < PTD_WATCH_SLOTS && (used >> slot & 1); slot++)
		;
	if (slot == PTD_WATCH_SLOTS) {
		srv_reply_error(c, req->id, PTD_ERR_LIMIT,
				"ptd has %u watch rules, all users together: "
				"no more fit", PTD_WATCH_SLOTS);
		return;
	}
	if (!slot_of(c, req, &sl) || !watcher_ready(s, c, req))
		return;
	r = calloc(1, sizeof(*r));
	if (!r || srv_request_copy(&r->req, req) < 0) {
		if (r)
			srv_request_free(&r->req);
		free(r);
		srv_reply_error(c, req->id, PTD_ERR_INTERNAL, "out of memory");
		watcher_maybe_unload(s);
		return;
	}
	r->id = ++s->next_rule_id;
	r->slot = slot;
	r->conn = c;
	r->peer = c->peer;
	sl.id = (__u32)r->id;
	e = ptd_watcher_set(s->watcher, slot, &sl);
	if (e < 0) {
		srv_request_free(&r->req);
		free(r);
		srv_reply_error(c, req->id, PTD_ERR_INTERNAL,
				"cannot set the BPF rule: %s", strerror(-e));
		watcher_maybe_unload(s);
		return;
	}
	r->next = s->rules;
	s->rules = r;
	ptd_log_info("rule %" PRIu64 ": uid %u watches %s '%s'", r->id,
		     (unsigned)r->peer.uid,
		     req->watch_exe[0] ? "exe" :
		     req->watch_cgroup[0] ? "cgroup" : "comm",
		     req->watch_exe[0] ? req->watch_exe :
		     req->watch_cgroup[0] ? req->watch_cgroup :
		     req->watch_comm);
	srv_reply_ok(c, req->id, rule_json(s, r));
}

/* Take @r out (its slot freed); the sessions it started run on; its
 * streams end (@why: their bye's reason) once those in them have. */
static void rule_free(struct ptd_server *s, struct srv_rule *r,
		      const char *why)
{
	struct srv_rule **p;

	for (p = &s->rules; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	if (s->watcher)
		(void)ptd_watcher_set(s->watcher, r->slot, NULL);
	srv_rulesubs_rule_ended(s, r->id, why);
	ptd_log_info("rule %" PRIu64 ": ended (%" PRIu64 " sessions "
		     "started)", r->id, r->started);
	srv_request_free(&r->req);
	free(r);
}

void srv_cmd_unwatch(struct ptd_server *s, struct conn *c,
		     const struct ptd_request *req)
{
	struct srv_rule *r;
	cJSON *res;

	for (r = s->rules; r; r = r->next)
		if (r->id == req->rule && ptd_auth_may_see(&c->peer,
							    r->peer.uid))
			break;
	if (!r) {
		srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
				"no watch rule %" PRIu64 " of yours", req->rule);
		return;
	}
	res = rule_json(s, r);
	rule_free(s, r, "unwatched");
	watcher_maybe_unload(s);
	srv_reply_ok(c, req->id, res);
}

void srv_rules_forget_conn(struct ptd_server *s, const struct conn *c)
{
	struct srv_rule *r, *next;

	for (r = s->rules; r; r = next) {
		next = r->next;
		if (r->conn == c)
			rule_free(s, r, "owner_closed");
	}
	watcher_maybe_unload(s);
}

void srv_rules_list(struct ptd_server *s, const struct conn *c, cJSON *res)
{
	cJSON *a = cJSON_AddArrayToObject(res, "rules");
	const struct srv_rule *r;

	for (r = s->rules; a && r; r = r->next)
		if (ptd_auth_may_see(&c->peer, r->peer.uid))
			cJSON_AddItemToArray(a, rule_json(s, r));
}

void srv_rules_free(struct ptd_server *s)
{
	while (s->rules)
		rule_free(s, s->rules, "shutdown");
	watcher_maybe_unload(s);
}
