/* SPDX-License-Identifier: MIT */
/*
 * attach and detach (srv.h): both answered once a session thread has
 * decided (the target seized, or every thread of it let go).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/strutil.h"
#include "daemon/log.h"
#include "daemon/server/srv.h"
#include "decode/counters.h"

/* options.capture: ptd creates the directory itself (lib/swpt/tracer.c),
 * in its own view of the file system, which ptd.service makes read-only
 * but for its RuntimeDirectory= and StateDirectory= (ProtectSystem=strict).
 * Refuse a directory on a read-only file system now, saying where
 * captures may go, rather than fail when the tracer creates it. */
static bool capture_dir_refused(struct conn *c, const struct ptd_request *req)
{
	const char *run = getenv("RUNTIME_DIRECTORY");
	const char *state = getenv("STATE_DIRECTORY");
	char dir[sizeof(req->capture)];
	struct statvfs vfs;
	char *slash;

	/* the directory if it is there, else its parent */
	(void)ptd_strlcpy(dir, req->capture, sizeof(dir));
	if (statvfs(dir, &vfs) < 0) {
		slash = strrchr(dir, '/');
		if (slash)
			*(slash == dir ? slash + 1 : slash) = '\0';
		if (!slash || statvfs(dir, &vfs) < 0)
			return false;	/* the tracer says what is missing */
	}
	if (!(vfs.f_flag & ST_RDONLY))
		return false;
	if (run || state)
		srv_reply_error(c, req->id, PTD_ERR_BAD_DIRECTORY,
				"'%s' is on a file system ptd may not write; "
				"captures may go under %s%s%s (ptd.service's "
				"RuntimeDirectory=/StateDirectory=; "
				"ReadWritePaths= adds others)", req->capture,
				state ? state : "", run && state ? " or " : "",
				run ? run : "");
	else
		srv_reply_error(c, req->id, PTD_ERR_BAD_DIRECTORY,
				"'%s' is on a file system ptd may not write "
				"(read-only)", req->capture);
	return true;
}

/* The permission rule again, for the process as it is once the session
 * holds it (a session thread; opts.recheck). */
static int attach_recheck(void *ctx, pid_t pid, struct ptd_diag *diag)
{
	struct srv_session *ss = ctx;
	struct ptd_diag d = { "" };
	int r = ptd_auth_may_trace(&ss->peer, pid, ss->srv->procroot, &d);

	if (r < 0)
		return ptd_diagf(diag, r, "process %d changed while ptd "
				 "attached to it, and may no longer be traced "
				 "by uid %u: %s; let go untouched", (int)pid,
				 (unsigned)ss->peer.uid,
				 d.msg[0] ? d.msg : ptd_strerror(r));
	/* a rule's process stopped at its exec, a child after its fork:
	 * every thread is held by the tracer now, so it may be continued
	 * (it runs when traced) */
	srv_watch_continue(ss);
	return 0;
}

/* A rule's process, a child: in its stop (at the exec, after the fork)
 * before the source takes it (a session thread; opts.prepare). */
static int attach_prepare(void *ctx, pid_t pid, struct ptd_diag *diag)
{
	struct srv_session *ss = ctx;

	return srv_watch_wait_stopped(ss->srv, pid, ss->parent
				      ? "after its fork" : "at the exec", diag);
}

/* Threads of @pid now (at least 1). */
static unsigned process_threads(const struct ptd_server *s, pid_t pid)
{
	char path[PATH_MAX];
	struct dirent *e;
	unsigned n = 0;
	DIR *d;
	int k = snprintf(path, sizeof(path), "%s/%d/task", s->procroot,
			 (int)pid);

	if (k < 0 || (size_t)k >= sizeof(path))
		return 1;
	d = opendir(path);
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n ? n : 1;
}

/* A session refused before it began: freed, its stop_pidfd left to the
 * caller (srv_attach_begin's contract). */
static void attach_drop(struct srv_session *ss)
{
	ss->stop_pidfd = 0;
	srv_session_free(ss);
}

/* An attach with options @o (o->pid's threads now, a recorded session's
 * spool): charge what it reserves to @ss's account and hand the account
 * to the session; refused (answered): true. */
static bool attach_memory_refused(struct ptd_server *s, struct conn *c,
				  const struct ptd_peer *peer,
				  const struct ptd_request *req,
				  struct srv_session *ss,
				  struct ptd_session_opts *o)
{
	unsigned n = process_threads(s, o->pid);
	uint64_t bytes = ptd_session_attach_bytes(o, n, NULL);
	char what[96];

	if (req->record)
		bytes += PTD_MEMLIMIT_SPOOL_PER_INSN * o->max_insns;
	(void)snprintf(what, sizeof(what), "attaching to pid %ld (%u "
		       "thread%s%s)", (long)o->pid, n, n == 1 ? "" : "s",
		       req->record ? ", recorded" : "");
	if (srv_memory_refused(s, c, peer, req, &ss->acct, bytes, what))
		return true;
	o->acct = &ss->acct;
	o->prepaid_threads = n;
	return false;
}

/* Attach to a process.  The client's rights are checked here, with the
 * process pinned by a pidfd (ptd_auth_pin); the attach itself runs on
 * the session's thread (every thread seized and stopped: as long as the
 * target makes it take), so the session is listed as "attaching" and
 * counts against max_sessions_per_user meanwhile.  srv_attaches_answer
 * answers once it is decided; the connection's later requests wait,
 * other clients do not.  A detach, the client going away or shutdown
 * cancels it. */
struct srv_session *srv_attach_begin(struct ptd_server *s, struct conn *c,
				     const struct ptd_peer *peer,
				     const struct ptd_request *req,
				     uint64_t rule, int stop_pidfd,
				     uint64_t parent)
{
	struct ptd_diag diag = { "" }, pmu_diag = { "" };
	enum ptd_source_kind source = req->source;
	struct ptd_session_opts o;
	struct ptd_session_sink sink;
	struct ptd_session_stats st;
	struct ptd_pt_pmu pmu;
	struct srv_session *ss;
	int r, pidfd = -1;

	/* children: which source decides how they are stopped (intel_pt:
	 * the fork stopper); "auto" is decided here, as the session would */
	if (req->children && source == PTD_SOURCE_AUTO &&
	    ptd_pt_pmu_probe(s->cfg.intel_pt_sysfs, &pmu, &pmu_diag) == 0)
		source = PTD_SOURCE_INTEL_PT;
	if (srv_refuse_over_session_limit(s, c, peer, req))
		return NULL;
	/* (after the limit: a client over it loads nothing) */
	if (req->children && source == PTD_SOURCE_INTEL_PT &&
	    !srv_children_intelpt_ready(s, c, req))
		return NULL;
	if (req->pid == getpid()) {
		srv_reply_error(c, req->id, PTD_ERR_PERMISSION,
				"pid %ld is ptd itself", (long)req->pid);
		return NULL;
	}
	/* a capture is written by ptd with its privileges, where asked */
	if (req->capture[0] && peer->uid != 0) {
		srv_reply_error(c, req->id, PTD_ERR_PERMISSION,
				"only root may ask for options.capture");
		return NULL;
	}
	if (req->capture[0] && capture_dir_refused(c, req))
		return NULL;
	if (req->record && (req->capture[0] ||
			    req->source == PTD_SOURCE_INTEL_PT ||
			    req->mode != PTD_MODE_FULL)) {
		srv_reply_error(c, req->id, PTD_ERR_UNSUPPORTED,
				"options.record needs the software source in "
				"full mode, without options.capture");
		return NULL;
	}
	r = ptd_auth_pin(peer, req->pid, s->procroot, &pidfd, &diag);
	if (r < 0) {
		srv_reply_error(c, req->id,
				r == -ESRCH ? PTD_ERR_NO_SUCH_PROCESS
				: r == -EPERM ? PTD_ERR_PERMISSION
				: r == -EINVAL ? PTD_ERR_BAD_REQUEST
					  : PTD_ERR_INTERNAL,
				"%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
		return NULL;
	}
	ss = calloc(1, sizeof(*ss));
	if (!ss || ptd_fanout_new(s->next_session_id, req->pid, srv_wake, s,
				  &ss->fan) < 0) {
		free(ss);
		close(pidfd);
		srv_reply_error(c, req->id, PTD_ERR_INTERNAL, "out of memory");
		return NULL;
	}
	ss->pidfd = pidfd;
	ss->rule = rule;
	ss->parent = parent;
	ss->stop_pidfd = stop_pidfd;	/* the session thread sends its
					 * SIGCONT (attach_recheck) */
	ss->srv = s;
	ss->id = s->next_session_id;
	ss->owner = peer->uid;
	ss->peer = *peer;
	ss->pid = req->pid;
	memset(&o, 0, sizeof(o));
	o.pid = req->pid;
	o.source = source;
	o.tsc = req->tsc;
	o.max_insns = req->max_insns;
	o.single_step = req->single_step;
	o.wait_ms = (unsigned)req->wait_ms;
	o.config = &s->cfg;
	o.uid = peer->uid;
	o.capture_dir = req->capture[0] ? req->capture : NULL;
	o.mode = req->mode;
	o.snapshot_size = (size_t)req->snapshot_size;
	o.jobs = req->jobs;
	o.per_cpu = req->per_cpu;
	o.pidfd = ss->pidfd;
	o.recheck = attach_recheck;
	o.recheck_ctx = ss;
	if (stop_pidfd > 0) {	/* a rule's match, a child: stopped */
		o.prepare = attach_prepare;
		o.prepare_ctx = ss;
	}
	o.decided = srv_wake;
	o.decided_ctx = s;
	ss->per_cpu = req->per_cpu;
	ss->jobs = req->jobs;
	if (srv_jobs_refused(s, c, req, "options.jobs")) {
		attach_drop(ss);
		return NULL;
	}
	if ((req->addr_filter && !(ss->filter = strdup(req->addr_filter))) ||
	    srv_pending_keep_id(&ss->attach, req->id) < 0) {
		srv_reply_error(c, req->id, PTD_ERR_INTERNAL, "out of memory");
		attach_drop(ss);
		return NULL;
	}
	o.filter = ss->filter;
	ss->mode = req->mode;
	if (req->children && srv_children_init(ss, req) < 0) {
		srv_reply_error(c, req->id, PTD_ERR_INTERNAL, "out of memory");
		attach_drop(ss);
		return NULL;
	}
	srv_children_opts(ss, &o);
	/* triggers resolved against the process as it is now: a bad one
	 * refuses the attach before anything is done to the process */
	if (req->ntriggers && !srv_triggers_attach_check(s, c, req, ss)) {
		attach_drop(ss);
		return NULL;
	}
	if (req->record) {
		r = srv_record_spool(s, ss, &o, &diag);
		if (r < 0) {
			srv_reply_error(c, req->id, PTD_ERR_INTERNAL, "%s",
					diag.msg);
			attach_drop(ss);
			return NULL;
		}
	}
	if (attach_memory_refused(s, c, peer, req, ss, &o)) {
		attach_drop(ss);
		return NULL;
	}
	/* read with the client's rights and groups: a rule's session with
	 * its owner's, from the owner's connection (the rule ends with it);
	 * a child's with those its parent session kept */
	if (req->symbols) {
		int gfd = c ? c->tag.fd : parent ? -1
					   : srv_rule_owner_fd(s, rule);

		r = parent ? srv_children_inherit_groups(s, ss, parent, &diag)
			   : 0;
		if (r == 0)
			r = gfd < 0 && !parent
				    ? ptd_diagf(&diag, -ENOENT, "symbols: rule "
						"%" PRIu64 " has ended", rule)
				    : srv_symbols_new(s, ss, gfd, peer,
						      req->pid, &diag);
		if (r < 0) {
			srv_reply_error(c, req->id, PTD_ERR_INTERNAL, "%s",
					diag.msg);
			attach_drop(ss);
			return NULL;
		}
		o.symbols = srv_symbols_of(ss);
	}
	if (req->counters) {
		r = srv_counters_new(ss);
		if (r < 0) {
			srv_reply_error(c, req->id, PTD_ERR_INTERNAL,
					"counters: %s", ptd_strerror(r));
			attach_drop(ss);
			return NULL;
		}
		o.counters = ss->xt;
	}
	/* its children are stopped from before its trace starts */
	if (ss->creq && source == PTD_SOURCE_INTEL_PT &&
	    (r = srv_children_follow(s, ss, &diag)) < 0) {
		srv_reply_error(c, req->id, ptd_proto_error_code(r), "%s",
				diag.msg);
		attach_drop(ss);
		return NULL;
	}
	srv_session_sink(ss, true, &sink);
	/* the rule's subscribers follow it from its first record: they
	 * subscribe before its decode thread starts */
	if (rule)
		srv_rulesubs_join(s, ss);
	r = ptd_session_begin(&o, &sink, &ss->s, &diag);
	if (r < 0) {
		ptd_log_info("uid %u: attach to pid %ld refused: %s",
			     (unsigned)peer->uid, (long)req->pid,
			     diag.msg[0] ? diag.msg : ptd_strerror(r));
		srv_reply_error(c, req->id, ptd_proto_error_code(r), "%s",
				diag.msg[0] ? diag.msg : ptd_strerror(r));
		attach_drop(ss);
		return NULL;
	}
	s->next_session_id++;
	ptd_session_get_stats(ss->s, &st);
	ss->source = st.source;
	ss->attaching = true;
	if (c)
		srv_pending_hold(&ss->attach, c);
	ss->next = s->sessions;
	s->sessions = ss;
	ptd_log_info("session %" PRIu64 ": uid %u attaching to pid %ld (%s)",
		     ss->id, (unsigned)ss->owner, (long)ss->pid,
		     ptd_source_name(ss->source));
	return ss;
}

void srv_cmd_attach(struct ptd_server *s, struct conn *c,
		    const struct ptd_request *req)
{
	(void)srv_attach_begin(s, c, &c->peer, req, 0, 0, 0);
}

static cJSON *attach_result(const struct srv_session *ss)
{
	cJSON *res = cJSON_CreateObject();

	cJSON_AddNumberToObject(res, "session", (double)ss->id);
	cJSON_AddStringToObject(res, "source",
				ptd_source_name(ss->source));
	cJSON_AddNumberToObject(res, "pid", ss->pid);
	cJSON_AddStringToObject(res, "mode", ptd_session_mode_name(ss->mode));
	if (ss->filter)
		cJSON_AddStringToObject(res, "filter", ss->filter);
	if (ss->creq) {
		cJSON_AddBoolToObject(res, "children", true);
		cJSON_AddStringToObject(res, "stop", srv_children_stop_note);
	}
	if (ss->source == PTD_SOURCE_SOFTWARE)
		cJSON_AddStringToObject(res, "warning",
					"the software PT source stops the "
					"target at every branch: it runs "
					"orders of magnitude slower");
	return res;
}

static cJSON *detach_result(const struct srv_session *ss)
{
	cJSON *res = cJSON_CreateObject();

	cJSON_AddNumberToObject(res, "session", (double)ss->id);
	return res;
}

/* @ss's attach failed or was cancelled (its session thread let every
 * thread of the target go): answer whoever waits for it, and forget it. */
static void attach_refused(struct ptd_server *s, struct srv_session *ss,
			   int err, const struct ptd_diag *diag)
{
	const char *msg = diag->msg[0] ? diag->msg : ptd_strerror(err);
	struct srv_pending w;
	uint64_t id;

	ptd_log_info("session %" PRIu64 ": uid %u: attach to pid %ld %s: %s",
		     ss->id, (unsigned)ss->owner, (long)ss->pid,
		     err == -ECANCELED ? "cancelled" : "refused", msg);
	if (ss->parent)		/* a child: its parent's to report */
		srv_child_refused(s, ss->parent, ss->pid, err, msg);
	else if (ss->rule)
		srv_watch_refused(s, ss->rule, ss->pid, msg);
	if (ss->rule)
		srv_rulesubs_forget_session(s, ss, msg);
	/* a detach that waits for it: every thread is released */
	if (ss->detach.conn)
		srv_pending_ok(s, &ss->detach, detach_result(ss));
	/* the attach's requests that waited come after the session is gone */
	w = srv_pending_move(&ss->attach);
	id = ss->id;
	srv_session_unlink(&s->sessions, ss);
	srv_session_free(ss);
	if (err == -ECANCELED && s->shutting_down)
		srv_pending_error(s, &w, PTD_ERR_SHUTTING_DOWN,
				  "ptd is shutting down: %s", msg);
	else if (err == -ECANCELED)
		srv_pending_error(s, &w, PTD_ERR_CANCELLED,
				  "session %" PRIu64 " was detached while it "
				  "was attaching: %s", id, msg);
	else
		srv_pending_error(s, &w, ptd_proto_error_code(err), "%s", msg);
}

/* Answer the attaches that are decided: tracing (the session runs on), or
 * refused or cancelled (the session is forgotten). */
void srv_attaches_answer(struct ptd_server *s)
{
	struct srv_session *ss, *next;

	for (ss = s->sessions; ss; ss = next) {
		struct ptd_diag diag = { "" };
		int r;

		next = ss->next;
		if (!ss->attaching ||
		    (r = ptd_session_started(ss->s, &diag)) == 0)
			continue;
		ss->attaching = false;
		close(ss->pidfd);
		ss->pidfd = 0;
		if (r > 0 && (r = srv_triggers_install(s, ss, &diag)) < 0) {
			/* tracing, but its triggers could not be: it ends */
			ptd_log_info("session %" PRIu64 ": triggers refused: "
				     "%s", ss->id, diag.msg);
			srv_session_stop(ss, PTD_END_DETACHED);
			srv_pending_error(s, &ss->attach,
					  r == -PTD_EUNSUPPORTED
						  ? PTD_ERR_UNSUPPORTED
						  : r == -EPERM
							    ? PTD_ERR_PERMISSION
							    : PTD_ERR_BAD_REQUEST,
					  "%s (session %" PRIu64 " was detached)",
					  diag.msg, ss->id);
		} else if (r < 0) {
			attach_refused(s, ss, r, &diag);	/* frees ss */
		} else if (ss->rule || ss->parent) {
			ptd_log_info("session %" PRIu64 ": rule %" PRIu64
				     ", parent session %" PRIu64 ": uid %u "
				     "attached to pid %ld (%s)", ss->id,
				     ss->rule, ss->parent, (unsigned)ss->owner,
				     (long)ss->pid,
				     ptd_source_name(ss->source));
			srv_pending_clear(&ss->attach);
		} else if (!ss->attach.conn) {
			/* asked to stop when its client went away */
			ptd_log_info("session %" PRIu64 ": attached to pid %ld "
				     "after its client had gone: it ends",
				     ss->id, (long)ss->pid);
			srv_pending_clear(&ss->attach);
		} else if (s->shutting_down) {
			/* it ends with the others (stopped by shutdown) */
			srv_pending_error(s, &ss->attach,
					  PTD_ERR_SHUTTING_DOWN,
					  "ptd is shutting down");
		} else {
			ptd_log_info("session %" PRIu64 ": uid %u attached to "
				     "pid %ld (%s)", ss->id,
				     (unsigned)ss->owner, (long)ss->pid,
				     ptd_source_name(ss->source));
			srv_pending_ok(s, &ss->attach, attach_result(ss));
		}
	}
}

/* Stop a session.  The response comes once it has ended: its source has
 * let every thread of the target go (software source: no thread is
 * ptrace-stopped or traced any more), so a debugger may attach right
 * after it.  The connection's later requests wait; other clients do not. */
void srv_cmd_detach(struct ptd_server *s, struct conn *c,
		    const struct ptd_request *req)
{
	struct srv_session *ss = srv_session_find_or_refuse(s, c, req);

	if (!ss)
		return;
	if (!ss->reaped && !ss->stopping && (ss->s || ss->rp)) {
		srv_session_stop(ss, PTD_END_DETACHED);
		ptd_log_info("session %" PRIu64 ": detach asked by uid %u",
			     ss->id, (unsigned)c->peer.uid);
	}
	ss->stopping = true;
	/* An ended session the owner detaches need not linger. */
	if (ss->reaped)
		ss->ended_at_ms = 0;
	/* (a second detach while one waits is answered at once) */
	if (ss->reaped || ss->detach.conn || !(ss->s || ss->rp)) {
		srv_reply_ok(c, req->id, detach_result(ss));
		return;
	}
	srv_pending_wait(&ss->detach, c, req->id);
}

/* Answer the detaches whose session has ended (its decode thread says
 * so once the source has returned, every thread released). */
void srv_detaches_answer(struct ptd_server *s)
{
	struct srv_session *ss;

	for (ss = s->sessions; ss; ss = ss->next)
		if (ss->detach.conn &&
		    atomic_load_explicit(&ss->ended, memory_order_acquire))
			srv_pending_ok(s, &ss->detach, detach_result(ss));
}
