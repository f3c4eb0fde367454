/* SPDX-License-Identifier: MIT */
/*
 * The control loop (see server.h).  Everything here runs on one thread
 * except the two sink callbacks, which run on a session's decode thread and
 * touch only the session's fan-out, its end record and the eventfd.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/strutil.h"
#include "bundle/bundle.h"
#include "daemon/auth.h"
#include "daemon/fanout.h"
#include "daemon/log.h"
#include "daemon/memlimit.h"
#include "daemon/proto.h"
#include "daemon/replay.h"
#include "daemon/sdnotify.h"
#include "daemon/server.h"
#include "daemon/session.h"
#include "record/jsonw.h"

#define MAX_LISTEN 4
/* Responses a client has not read yet, beyond which its requests wait. */
#define OUT_HIGH_WATER (256 * 1024)
/* Work per connection per wake-up, so one client cannot starve others. */
#define READ_CHUNK 65536
#define FLUSH_ROUNDS 8
#define ACCEPT_BURST 32
/* A recorded session's instructions at most, unless max_insns says: the
 * spool holds about 3 bytes of capture per instruction. */
#define PTD_RECORD_MAX_INSNS 50000000u
/* File descriptors taken from one recvmsg (the last one is kept). */
#define MAX_PASS_FDS 4

enum ep_kind { EP_LISTEN, EP_SIGNAL, EP_EVENT, EP_CONN };

struct ep_tag {
	enum ep_kind kind;
	int fd;
};

/* One traced process. */
struct srv_session {
	struct srv_session *next;
	struct ptd_server *srv;
	uint64_t id;
	uid_t owner;
	pid_t pid;
	enum ptd_source_kind source;	/* in use */
	struct ptd_session *s;		/* NULL once ended and freed */
	struct ptd_fanout *fan;
	bool stopping;			/* detach/shutdown asked */
	/* A detach waiting for the session's end, i.e. for every thread to
	 * be released (loop only): its connection (NULL once gone) and its
	 * request's id. */
	struct conn *detach_conn;
	cJSON *detach_id;
	/* Set by the decode thread (release) after `end` is written. */
	atomic_bool ended;
	struct ptd_session_end end;
	bool reaped;			/* the loop saw the end, freed s */
	struct ptd_session_stats last;	/* stats at the end */
	uint64_t ended_at_ms;
	enum ptd_session_mode mode;
	bool per_cpu;			/* attach's options.per_cpu */
	char *filter;			/* attach's options.filter, or NULL */
	/* A snapshot asked for and not answered yet (loop only): snap_conn
	 * waits for the response (NULL once it is gone), snap_id is its
	 * request's id. */
	bool snap_busy;
	struct conn *snap_conn;
	cJSON *snap_id;
	/* Written by the decode thread before snap_ready (release). */
	struct ptd_snapshot_info snap_info;
	atomic_bool snap_ready;
	char marker[PTD_DIAG_MAX * 6 + 512];	/* decode thread only */
	/* A replay (kind "replay"): rp instead of s; the trace's path and
	 * kind. */
	struct ptd_replay *rp;
	char *path;
	/* While its input is not yet accepted (on ptd_server.starting, not
	 * yet a session): the connection waiting for the response (NULL once
	 * it is gone) and its request's id. */
	struct conn *start_conn;
	cJSON *start_id;
	enum ptd_input_kind input_kind;
	bool lossless;
	/* options.record: where the session's capture is spooled (ptd's own
	 * directory, removed with the session), and the record request
	 * (record.c-like state, loop only; see rec_* below). */
	char *spool;
	struct srv_record *rec;
	/* A live session whose attach is under way (loop only; see
	 * cmd_attach): listed as "attaching" until ptd_session_started
	 * decides, then answered to attach_conn (NULL once it is gone) with
	 * attach_id.  pidfd pins the process meanwhile (0 once decided),
	 * peer is who asked (the permission rule is checked again with it
	 * once the target is seized). */
	bool attaching;
	struct conn *attach_conn;
	cJSON *attach_id;
	int pidfd;
	struct ptd_peer peer;
	/* What the session charged to its owner (memlimit.h): given back
	 * when its threads are freed. */
	struct ptd_memacct acct;
};

struct conn {
	struct ep_tag tag;		/* first: epoll data points here */
	struct conn *next;
	struct ptd_peer peer;
	char *in;			/* partial request line */
	size_t in_len;
	struct ptd_buf out;		/* responses not yet written */
	size_t out_off;
	bool close_after_flush;		/* framing lost or stream over */
	bool dead;			/* to be freed by the loop */
	uint32_t events;		/* registered epoll events */
	struct srv_session *ss;		/* streaming subscriber of ss */
	struct ptd_subscriber *sub;
	bool waiting;			/* for a snapshot or a record: no
					 * request is read until it is
					 * answered */
	int pass_fd;			/* the last fd the client passed
					 * (SCM_RIGHTS), for a record
					 * request; -1 none */
	struct ptd_memacct sub_acct;	/* its subscriber's queues */
};

struct ptd_server {
	struct ptd_config cfg;
	char procroot[PATH_MAX];
	int epfd;
	struct ep_tag listen[MAX_LISTEN];
	unsigned nlisten;
	bool created_socket;		/* remove it at exit */
	struct ep_tag sig;
	struct ep_tag ev;
	struct conn *conns;
	unsigned nconns;
	struct srv_session *sessions;
	struct srv_session *starting;	/* replays not yet accepted */
	uint64_t next_session_id;
	bool shutting_down;
	uint64_t shutdown_deadline_ms;
	uint64_t start_ms;
	sigset_t oldmask;
	bool mask_set;
	struct ptd_memlimit *mem;	/* user_memory_limit, per uid */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- sockets ---- */

static int ep_add(struct ptd_server *s, struct ep_tag *t, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.ptr = t };

	return epoll_ctl(s->epfd, EPOLL_CTL_ADD, t->fd, &e) < 0 ? -errno : 0;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* Is something listening on @path?  Returns 1 yes, 0 no (stale: connect
 * refused), -errno when unsure. */
static int socket_alive(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, r;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memcpy(a.sun_path, path, strlen(path) + 1);
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	r = r == 0 ? 1 : errno == ECONNREFUSED ? 0 : -errno;
	close(fd);
	return r;
}

static int make_parent(const char *path, struct ptd_diag *diag)
{
	char dir[PTD_CONF_PATH_MAX];
	char *slash;

	(void)ptd_strlcpy(dir, path, sizeof(dir));
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = 0;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return ptd_diagf(diag, -errno,
				 "failed to create directory '%s': %s", dir,
				 strerror(errno));
	return 0;
}

/* Bind @fd to @path, removing a stale socket first if nothing listens on
 * it.  A path that exists and is not a socket is never removed. */
static int bind_path(int fd, const char *path, struct ptd_diag *diag)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int r, alive;

	memcpy(a.sun_path, path, strlen(path) + 1);
	/* Created 0600; chmod sets socket_mode once it is ours. */
	old = umask(0177);
	r = bind(fd, (struct sockaddr *)&a, sizeof(a));
	if (r < 0 && errno == EADDRINUSE) {
		if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
			umask(old);
			return ptd_diagf(diag, -EEXIST,
					 "'%s' exists and is not a socket; "
					 "not removing it",
					 path);
		}
		alive = socket_alive(path);
		if (alive != 0) {
			umask(old);
			if (alive > 0)
				return ptd_diagf(diag, -EADDRINUSE,
						 "another ptd is listening on "
						 "'%s'",
						 path);
			return ptd_diagf(diag, alive,
					 "cannot tell whether '%s' is in use: "
					 "%s",
					 path, strerror(-alive));
		}
		(void)unlink(path);
		r = bind(fd, (struct sockaddr *)&a, sizeof(a));
	}
	r = r < 0 ? -errno : 0;
	umask(old);
	if (r < 0)
		return ptd_diagf(diag, r, "failed to bind '%s': %s", path,
				 strerror(-r));
	return 0;
}

static int socket_create(struct ptd_server *s, struct ptd_diag *diag)
{
	const char *path = s->cfg.socket_path;
	struct group *g;
	_cleanup_close_ int fd = -1;
	int r;

	if (!path[0] || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return ptd_diagf(diag, -ENAMETOOLONG,
				 "socket path '%s' is empty or too long",
				 path);
	r = make_parent(path, diag);
	if (r < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return ptd_diagf(diag, -errno, "failed to create a socket: %s",
				 strerror(errno));
	r = bind_path(fd, path, diag);
	if (r < 0)
		return r;
	s->created_socket = true;
	/* Listen at once: a client that sees the socket appear (a script
	 * waiting for it) must not be refused while we set its mode and
	 * group; until then it is 0600, ours alone. */
	if (listen(fd, 128) < 0)
		return ptd_diagf(diag, -errno, "failed to listen on '%s': %s",
				 path, strerror(errno));
	if (chmod(path, s->cfg.socket_mode) < 0)
		return ptd_diagf(diag, -errno, "failed to chmod '%s' to %04o: %s",
				 path, s->cfg.socket_mode, strerror(errno));
	g = s->cfg.socket_group[0] ? getgrnam(s->cfg.socket_group) : NULL;
	if (!g && s->cfg.socket_group[0])
		ptd_log_warning("socket group '%s' does not exist, socket '%s' "
				"keeps group %u",
				s->cfg.socket_group, path, (unsigned)getegid());
	else if (g && chown(path, (uid_t)-1, g->gr_gid) < 0)
		ptd_log_err(PTD_LOG_WARNING, -errno,
			    "failed to give socket '%s' to group '%s', "
			    "ignoring",
			    path, s->cfg.socket_group);
	s->listen[0].kind = EP_LISTEN;
	s->listen[0].fd = PTD_TAKE_FD(fd);
	s->nlisten = 1;
	return 0;
}

static int sockets_open(struct ptd_server *s, struct ptd_diag *diag)
{
	int fds[MAX_LISTEN];
	int n, i, r;

	n = ptd_sd_listen_fds(fds, MAX_LISTEN, diag);
	if (n < 0)
		return n;
	if (n == 0)
		return socket_create(s, diag);
	for (i = 0; i < n; i++) {
		s->listen[i].kind = EP_LISTEN;
		s->listen[i].fd = fds[i];
		s->nlisten++;
		r = set_nonblock(fds[i]);
		if (r < 0)
			return ptd_diagf(diag, r,
					 "socket-activated fd %d: %s", fds[i],
					 strerror(-r));
	}
	ptd_log_info("using %d socket-activated socket(s)", n);
	return 0;
}

/* ---- the sessions' side (decode threads) ---- */

static void server_wake(void *ctx)
{
	struct ptd_server *s = ctx;
	uint64_t one = 1;

	/* EAGAIN means the counter is saturated: the loop wakes anyway. */
	if (write(s->ev.fd, &one, sizeof(one)) < 0) {
		/* nothing more to do */
	}
}

static void sink_record(void *ctx, const struct ptd_record *rec)
{
	struct srv_session *ss = ctx;

	ptd_fanout_record(ss->fan, rec);
}

/* Snapshot markers bracket a snapshot's records in every subscriber's
 * stream (doc/protocol.md, "snapshot records"). */
static void sink_snapshot(void *ctx, const struct ptd_snapshot_info *in,
			  bool done)
{
	struct srv_session *ss = ctx;
	size_t cap = sizeof(ss->marker), n;
	int k;

	if (!done)
		k = snprintf(ss->marker, cap,
			     "{\"type\":\"snapshot\",\"phase\":\"begin\","
			     "\"session\":%" PRIu64 ",\"seq\":%" PRIu64
			     ",\"threads\":%u,\"bytes\":%" PRIu64
			     ",\"overwritten\":%" PRIu64,
			     ss->id, in->seq, in->nthreads, in->bytes,
			     in->overwritten);
	else
		k = snprintf(ss->marker, cap,
			     "{\"type\":\"snapshot\",\"phase\":\"end\","
			     "\"session\":%" PRIu64 ",\"seq\":%" PRIu64
			     ",\"records\":%" PRIu64 ",\"insns\":%" PRIu64,
			     ss->id, in->seq, in->records, in->insns);
	n = k > 0 ? (size_t)k : 0;
	if (done && in->err && n + 16 < cap) {
		memcpy(ss->marker + n, ",\"error\":", 9);
		n += 9;
		n += ptd_json_string(ss->marker + n, cap - n - 4, in->message,
				     strnlen(in->message,
					     sizeof(in->message)));
	}
	memcpy(ss->marker + n, "}\n", 2);
	ptd_fanout_line(ss->fan, ss->marker, n + 2);
	if (!done)
		return;
	ss->snap_info = *in;
	atomic_store_explicit(&ss->snap_ready, true, memory_order_release);
	server_wake(ss->srv);
}

static void sink_ended(void *ctx, const struct ptd_session_end *end)
{
	struct srv_session *ss = ctx;

	ss->end = *end;
	atomic_store_explicit(&ss->ended, true, memory_order_release);
	/* Queues the bye for every subscriber and wakes the loop. */
	ptd_fanout_end(ss->fan, end);
}

/* ---- connections ---- */

static void conn_update_events(struct ptd_server *s, struct conn *c,
			       bool want_out)
{
	uint32_t ev = 0;
	struct epoll_event e;

	/* (a connection waiting for a snapshot reads nothing meanwhile;
	 * a hang-up is still reported) */
	if (!c->close_after_flush && !c->waiting &&
	    c->out.len - c->out_off < OUT_HIGH_WATER)
		ev |= EPOLLIN;
	if (want_out)
		ev |= EPOLLOUT;
	if (ev == c->events)
		return;
	e.events = ev;
	e.data.ptr = &c->tag;
	if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->tag.fd, &e) == 0)
		c->events = ev;
	else
		c->dead = true;
}

/* Send what we can of @data.  Returns bytes sent (0 if the socket is
 * full), or -errno if the peer is gone. */
static ssize_t send_some(int fd, const char *data, size_t len)
{
	ssize_t n;

	do
		n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	return n;
}

/* Write responses, then the subscriber's stream.  Marks @c dead when the
 * peer is gone or its stream is over. */
static void conn_flush(struct ptd_server *s, struct conn *c)
{
	bool more = false;
	ssize_t n;
	int round;

	if (c->dead)
		return;
	if (c->out_off < c->out.len) {
		n = send_some(c->tag.fd, (char *)c->out.data + c->out_off,
			      c->out.len - c->out_off);
		if (n < 0) {
			c->dead = true;
			return;
		}
		c->out_off += (size_t)n;
		if (c->out_off < c->out.len) {
			conn_update_events(s, c, true);
			return;
		}
		c->out.len = c->out_off = 0;
	}
	if (c->close_after_flush && !c->sub) {
		c->dead = true;
		return;
	}
	for (round = 0; c->sub && round < FLUSH_ROUNDS; round++) {
		const char *data;
		size_t len;
		enum ptd_sub_state st = ptd_subscriber_peek(c->sub, &data, &len);

		if (st == PTD_SUB_DONE) {
			c->dead = true;
			return;
		}
		if (st == PTD_SUB_IDLE)
			break;
		n = send_some(c->tag.fd, data, len);
		if (n < 0) {
			c->dead = true;
			return;
		}
		ptd_subscriber_consume(c->sub, (size_t)n);
		if ((size_t)n < len) {
			more = true;
			break;
		}
	}
	/* Rounds used up with data left: the socket is writable, so EPOLLOUT
	 * brings us back at once, after the other clients. */
	if (c->sub && round == FLUSH_ROUNDS)
		more = true;
	conn_update_events(s, c, more);
}

static void conn_queue(struct conn *c, char *line, size_t len)
{
	if (!line) {
		c->close_after_flush = true;	/* out of memory */
		return;
	}
	if (ptd_buf_append(&c->out, line, len) < 0)
		c->close_after_flush = true;
	free(line);
}

static void reply_error(struct conn *c, const cJSON *id, const char *code,
			const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void reply_error(struct conn *c, const cJSON *id, const char *code,
			const char *fmt, ...)
{
	char msg[PTD_DIAG_MAX + 128];
	size_t len = 0;
	char *line;
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Two statements: the length is known only after the call. */
	line = ptd_response_error(id, code, msg, &len);
	conn_queue(c, line, len);
}

static void reply_ok(struct conn *c, const cJSON *id, cJSON *result)
{
	size_t len = 0;
	char *line = ptd_response_ok(id, result, &len);

	conn_queue(c, line, len);
}

/* ---- requests ---- */

static struct srv_session *session_find(struct ptd_server *s,
					const struct conn *c, uint64_t id)
{
	struct srv_session *ss;

	for (ss = s->sessions; ss; ss = ss->next)
		if (ss->id == id && ptd_auth_may_see(&c->peer, ss->owner))
			return ss;
	return NULL;
}

static const char *session_state(const struct srv_session *ss)
{
	if (ss->attaching)
		return "attaching";
	if (ss->reaped)
		return "ended";
	return ss->stopping ? "stopping" : "running";
}

static void session_stats(struct srv_session *ss, struct ptd_session_stats *st)
{
	if (ss->s)
		ptd_session_get_stats(ss->s, st);
	else if (ss->rp && !ss->reaped)
		ptd_replay_get_stats(ss->rp, st);
	else
		*st = ss->last;
}

static unsigned live_sessions_of(const struct ptd_server *s, uid_t uid)
{
	const struct srv_session *ss;
	unsigned n = 0;

	for (ss = s->sessions; ss; ss = ss->next)
		if (ss->owner == uid && !ss->reaped)
			n++;
	for (ss = s->starting; ss; ss = ss->next)
		n += ss->owner == uid;
	return n;
}

/* A new session (attach, replay) for @c would pass max_sessions_per_user:
 * refuse it (answered) and return true. */
static bool refuse_over_session_limit(struct ptd_server *s, struct conn *c,
				      const struct ptd_request *req)
{
	if (live_sessions_of(s, c->peer.uid) < s->cfg.max_sessions_per_user)
		return false;
	reply_error(c, req->id, PTD_ERR_LIMIT,
		    "uid %u already has %u sessions (max_sessions_per_user)",
		    (unsigned)c->peer.uid, s->cfg.max_sessions_per_user);
	return true;
}

/* ---- record: a recorded session's bundle into the client's directory ---- */

/* A record request (loop only, except what the save thread writes before
 * `done`).  The save runs on its own thread once the session has ended:
 * it hashes and copies files, which the loop must not wait for. */
struct srv_record {
	struct ptd_server *srv;
	const char *spool;		/* the session's */
	int fd;				/* the client's directory */
	uid_t uid;
	gid_t gid;
	gid_t *groups;			/* the client's supplementary groups */
	size_t ngroups;
	struct conn *conn;		/* waits for the answer, or NULL */
	cJSON *id;			/* its request's id */
	bool started, answered;
	pthread_t th;
	atomic_bool done;		/* err and diag written (release) */
	int err;
	struct ptd_diag diag;
};

static void *record_main(void *arg)
{
	struct srv_record *rc = arg;
	struct ptd_bundle_save_opts o = PTD_BUNDLE_SAVE_OPTS_INIT;
	struct ptd_cred cr = { rc->uid, rc->gid, rc->groups,
				       rc->ngroups };

	/* Every file written is the client's, written where the client may
	 * write (this thread takes the client's fsuid): ptd.service has no
	 * CAP_DAC_OVERRIDE, and must not lend it to a client. */
	o.set_owner = true;
	o.uid = rc->uid;
	o.gid = rc->gid;
	rc->err = ptd_cred_become_writer(&cr, &rc->diag);
	if (rc->err == 0)
		rc->err = ptd_bundle_save_at(rc->spool, rc->fd, &o, &rc->diag);
	atomic_store_explicit(&rc->done, true, memory_order_release);
	server_wake(rc->srv);
	return NULL;
}

/* The session has ended: start writing the bundle. */
static void record_start(struct srv_session *ss)
{
	struct srv_record *rc = ss->rec;
	int r;

	if (!rc || rc->started)
		return;
	rc->started = true;
	r = pthread_create(&rc->th, NULL, record_main, rc);
	if (r) {
		rc->started = false;
		rc->err = ptd_diagf(&rc->diag, -r,
				    "cannot start writing the bundle: %s",
				    strerror(r));
		atomic_store(&rc->done, true);
	}
}

/* Forget @ss's record request and spool (the session is being freed). */
static void record_forget(struct srv_session *ss)
{
	struct srv_record *rc = ss->rec;
	int r;

	if (rc) {
		if (rc->started)
			(void)pthread_join(rc->th, NULL);
		if (rc->fd >= 0)
			close(rc->fd);
		cJSON_Delete(rc->id);
		free(rc->groups);
		free(rc);
		ss->rec = NULL;
	}
	if (ss->spool) {
		r = ptd_rm_rf(ss->spool);
		if (r < 0)
			ptd_log_err(PTD_LOG_WARNING, r,
				    "failed to remove spool '%s', ignoring",
				    ss->spool);
		free(ss->spool);
		ss->spool = NULL;
	}
}

/* options.record: the session's capture goes into ptd's spool,
 * SPOOL/session-ID beside the control socket (the directory made 0700),
 * removed when the session is forgotten.  Its size is bounded by the
 * session's max_insns, PTD_RECORD_MAX_INSNS when the client gave none. */
static int record_spool(struct ptd_server *s, struct srv_session *ss,
			struct ptd_session_opts *o, struct ptd_diag *diag)
{
	char dir[PATH_MAX];
	char *slash;
	int n;

	(void)ptd_strlcpy(dir, s->cfg.socket_path, sizeof(dir));
	slash = strrchr(dir, '/');
	if (!slash)
		return ptd_diagf(diag, -EINVAL, "no spool directory for "
				 "socket '%s'", s->cfg.socket_path);
	(void)ptd_strlcpy(slash + 1, "spool", sizeof(dir) - (size_t)(slash + 1 - dir));
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return ptd_diagf(diag, -errno, "failed to create spool "
				 "directory '%s': %s", dir, strerror(errno));
	n = snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir),
		     "/session-%" PRIu64, ss->id);
	if (n < 0 || !(ss->spool = strdup(dir)))
		return ptd_diagf(diag, -ENOMEM, "out of memory");
	/* a stale one of an earlier ptd */
	(void)ptd_rm_rf(ss->spool);
	o->capture_dir = ss->spool;
	o->source = PTD_SOURCE_SOFTWARE;
	if (!o->max_insns)
		o->max_insns = PTD_RECORD_MAX_INSNS;
	return 0;
}

/* A live session or a replay: stop it (any reason; repeatable). */
static void ss_stop(struct srv_session *ss, enum ptd_session_end_reason why)
{
	if (ss->s)
		ptd_session_stop(ss->s, why);
	if (ss->rp)
		ptd_replay_stop(ss->rp, why);
}

/* The end was reported: keep the last stats, free the threads. */
static void ss_release(struct srv_session *ss)
{
	if (ss->s)
		ptd_session_get_stats(ss->s, &ss->last);
	else if (ss->rp)
		ptd_replay_get_stats(ss->rp, &ss->last);
	ptd_session_free(ss->s);
	ss->s = NULL;
	ptd_replay_free(ss->rp);
	ss->rp = NULL;
	ptd_memacct_release(&ss->acct);
}

static void session_free(struct srv_session *ss)
{
	if (!ss)
		return;
	ptd_session_free(ss->s);
	ptd_replay_free(ss->rp);
	ptd_memacct_release(&ss->acct);
	record_forget(ss);
	ptd_fanout_free(ss->fan);
	if (ss->pidfd > 0)
		close(ss->pidfd);
	cJSON_Delete(ss->attach_id);
	cJSON_Delete(ss->detach_id);
	cJSON_Delete(ss->snap_id);
	cJSON_Delete(ss->start_id);
	free(ss->path);
	free(ss->filter);
	free(ss);
}

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
		reply_error(c, req->id, PTD_ERR_BAD_DIRECTORY,
			    "'%s' is on a file system ptd may not write; "
			    "captures may go under %s%s%s (ptd.service's "
			    "RuntimeDirectory=/StateDirectory=; "
			    "ReadWritePaths= adds others)", req->capture,
			    state ? state : "", run && state ? " or " : "",
			    run ? run : "");
	else
		reply_error(c, req->id, PTD_ERR_BAD_DIRECTORY,
			    "'%s' is on a file system ptd may not write "
			    "(read-only)", req->capture);
	return true;
}

static void handle_lines(struct ptd_server *s, struct conn *c);
static cJSON *detach_result(const struct srv_session *ss);

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
	return 0;
}

/* Attach to a process.  The client's rights are checked here, with the
 * process pinned by a pidfd (ptd_auth_pin); the attach itself runs on
 * the session's thread (every thread seized and stopped: as long as the
 * target makes it take), so the session is listed as "attaching" and
 * counts against max_sessions_per_user meanwhile.  attaches_answer
 * answers once it is decided; the connection's later requests wait,
 * other clients do not.  A detach, the client going away or shutdown
 * cancels it. */
/* ---- memory limit (user_memory_limit, memlimit.h) ---- */

/* Charge @bytes (@what: what they are for) to @c's user through @a; if the
 * limit refuses it, answer the request (code memory_limit: in use, asked,
 * the limit, the key) and return true. */
static bool memory_refused(struct ptd_server *s, struct conn *c,
			   const struct ptd_request *req,
			   struct ptd_memacct *a, uint64_t bytes,
			   const char *what)
{
	char u[32], b[32], l[32];
	uint64_t used = 0;
	int r;

	a->m = s->mem;
	a->uid = c->peer.uid;
	r = ptd_memacct_charge(a, bytes, &used);
	if (r == 0)
		return false;
	ptd_log_info("uid %u: %s refused: memory limit (%" PRIu64 " in use, "
		     "%" PRIu64 " asked)", (unsigned)c->peer.uid, what, used,
		     bytes);
	reply_error(c, req->id, PTD_ERR_MEMORY_LIMIT,
		    "uid %u has %s in use, %s needs %s more; the limit is "
		    "%s a user (user_memory_limit)", (unsigned)c->peer.uid,
		    ptd_memlimit_fmt(used, u, sizeof(u)), what,
		    ptd_memlimit_fmt(bytes, b, sizeof(b)),
		    ptd_memlimit_fmt(ptd_memlimit_limit(s->mem), l,
				     sizeof(l)));
	return true;
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

/* An attach with options @o (o->pid's threads now, a recorded session's
 * spool): charge what it reserves to @ss's account and hand the account
 * to the session; refused (answered): true. */
static bool attach_memory_refused(struct ptd_server *s, struct conn *c,
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
	if (memory_refused(s, c, req, &ss->acct, bytes, what))
		return true;
	o->acct = &ss->acct;
	o->prepaid_threads = n;
	return false;
}

static void cmd_attach(struct ptd_server *s, struct conn *c,
		       const struct ptd_request *req)
{
	struct ptd_diag diag = { "" };
	struct ptd_session_opts o;
	struct ptd_session_sink sink;
	struct ptd_session_stats st;
	struct srv_session *ss;
	int r, pidfd = -1;

	if (refuse_over_session_limit(s, c, req))
		return;
	if (req->pid == getpid()) {
		reply_error(c, req->id, PTD_ERR_PERMISSION,
			    "pid %ld is ptd itself", (long)req->pid);
		return;
	}
	/* a capture is written by ptd with its privileges, where asked */
	if (req->capture[0] && c->peer.uid != 0) {
		reply_error(c, req->id, PTD_ERR_PERMISSION,
			    "only root may ask for options.capture");
		return;
	}
	if (req->capture[0] && capture_dir_refused(c, req))
		return;
	if (req->record && (req->capture[0] ||
			    req->source == PTD_SOURCE_INTEL_PT ||
			    req->mode != PTD_MODE_FULL)) {
		reply_error(c, req->id, PTD_ERR_UNSUPPORTED,
			    "options.record needs the software source in "
			    "full mode, without options.capture");
		return;
	}
	r = ptd_auth_pin(&c->peer, req->pid, s->procroot, &pidfd, &diag);
	if (r < 0) {
		reply_error(c, req->id,
			    r == -ESRCH ? PTD_ERR_NO_SUCH_PROCESS
			    : r == -EPERM ? PTD_ERR_PERMISSION
			    : r == -EINVAL ? PTD_ERR_BAD_REQUEST
					  : PTD_ERR_INTERNAL,
			    "%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
		return;
	}
	ss = calloc(1, sizeof(*ss));
	if (!ss || !(ss->fan = ptd_fanout_new(s->next_session_id, req->pid,
					       server_wake, s))) {
		free(ss);
		close(pidfd);
		reply_error(c, req->id, PTD_ERR_INTERNAL, "out of memory");
		return;
	}
	ss->pidfd = pidfd;
	ss->srv = s;
	ss->id = s->next_session_id;
	ss->owner = c->peer.uid;
	ss->peer = c->peer;
	ss->pid = req->pid;
	memset(&o, 0, sizeof(o));
	o.pid = req->pid;
	o.source = req->source;
	o.tsc = req->tsc;
	o.max_insns = req->max_insns;
	o.config = &s->cfg;
	o.uid = c->peer.uid;
	o.capture_dir = req->capture[0] ? req->capture : NULL;
	o.mode = req->mode;
	o.snapshot_size = (size_t)req->snapshot_size;
	o.per_cpu = req->per_cpu;
	o.pidfd = ss->pidfd;
	o.recheck = attach_recheck;
	o.recheck_ctx = ss;
	o.decided = server_wake;
	o.decided_ctx = s;
	ss->per_cpu = req->per_cpu;
	if ((req->addr_filter && !(ss->filter = strdup(req->addr_filter))) ||
	    (req->id && !(ss->attach_id = cJSON_Duplicate(req->id, true)))) {
		reply_error(c, req->id, PTD_ERR_INTERNAL, "out of memory");
		session_free(ss);
		return;
	}
	o.filter = ss->filter;
	ss->mode = req->mode;
	if (req->record) {
		r = record_spool(s, ss, &o, &diag);
		if (r < 0) {
			reply_error(c, req->id, PTD_ERR_INTERNAL, "%s",
				    diag.msg);
			session_free(ss);
			return;
		}
	}
	if (attach_memory_refused(s, c, req, ss, &o)) {
		session_free(ss);
		return;
	}
	memset(&sink, 0, sizeof(sink));
	sink.record = sink_record;
	sink.ended = sink_ended;
	sink.snapshot = sink_snapshot;
	sink.ctx = ss;
	r = ptd_session_begin(&o, &sink, &ss->s, &diag);
	if (r < 0) {
		ptd_log_info("uid %u: attach to pid %ld refused: %s",
			     (unsigned)c->peer.uid, (long)req->pid,
			     diag.msg[0] ? diag.msg : ptd_strerror(r));
		reply_error(c, req->id, ptd_proto_error_code(r), "%s",
			    diag.msg[0] ? diag.msg : ptd_strerror(r));
		session_free(ss);
		return;
	}
	s->next_session_id++;
	ptd_session_get_stats(ss->s, &st);
	ss->source = st.source;
	ss->attaching = true;
	ss->attach_conn = c;
	c->waiting = true;
	ss->next = s->sessions;
	s->sessions = ss;
	ptd_log_info("session %" PRIu64 ": uid %u attaching to pid %ld (%s)",
		     ss->id, (unsigned)ss->owner, (long)ss->pid,
		     ptd_source_name(ss->source));
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
	if (ss->source == PTD_SOURCE_SOFTWARE)
		cJSON_AddStringToObject(res, "warning",
					"the software PT source single-steps "
					"the target: it runs orders of "
					"magnitude slower");
	return res;
}

/* @ss's attach failed or was cancelled (its session thread let every
 * thread of the target go): answer whoever waits for it, and forget it. */
static void attach_refused(struct ptd_server *s, struct srv_session *ss,
			   struct conn *c, int err,
			   const struct ptd_diag *diag)
{
	const char *msg = diag->msg[0] ? diag->msg : ptd_strerror(err);
	struct conn *d = ss->detach_conn;
	struct srv_session **p;

	ptd_log_info("session %" PRIu64 ": uid %u: attach to pid %ld %s: %s",
		     ss->id, (unsigned)ss->owner, (long)ss->pid,
		     err == -ECANCELED ? "cancelled" : "refused", msg);
	if (c && err == -ECANCELED && s->shutting_down)
		reply_error(c, ss->attach_id, PTD_ERR_SHUTTING_DOWN,
			    "ptd is shutting down: %s", msg);
	else if (c && err == -ECANCELED)
		reply_error(c, ss->attach_id, PTD_ERR_CANCELLED,
			    "session %" PRIu64 " was detached while it was "
			    "attaching: %s", ss->id, msg);
	else if (c)
		reply_error(c, ss->attach_id, ptd_proto_error_code(err),
			    "%s", msg);
	/* a detach that waits for it: every thread is released */
	if (d) {
		ss->detach_conn = NULL;
		d->waiting = false;
		reply_ok(d, ss->detach_id, detach_result(ss));
		handle_lines(s, d);
		conn_flush(s, d);
	}
	for (p = &s->sessions; *p; p = &(*p)->next)
		if (*p == ss) {
			*p = ss->next;
			break;
		}
	session_free(ss);
}

/* Answer the attaches that are decided: tracing (the session runs on), or
 * refused or cancelled (the session is forgotten). */
static void attaches_answer(struct ptd_server *s)
{
	struct srv_session *ss, *next;

	for (ss = s->sessions; ss; ss = next) {
		struct ptd_diag diag = { "" };
		struct conn *c = ss->attach_conn;
		int r;

		next = ss->next;
		if (!ss->attaching ||
		    (r = ptd_session_started(ss->s, &diag)) == 0)
			continue;
		ss->attaching = false;
		ss->attach_conn = NULL;
		close(ss->pidfd);
		ss->pidfd = 0;
		if (r < 0) {
			attach_refused(s, ss, c, r, &diag);	/* frees ss */
			ss = NULL;
		} else if (!c) {
			/* asked to stop when its client went away */
			ptd_log_info("session %" PRIu64 ": attached to pid %ld "
				     "after its client had gone: it ends",
				     ss->id, (long)ss->pid);
		} else if (s->shutting_down) {
			/* it ends with the others (stopped by shutdown) */
			reply_error(c, ss->attach_id, PTD_ERR_SHUTTING_DOWN,
				    "ptd is shutting down");
		} else {
			ptd_log_info("session %" PRIu64 ": uid %u attached to "
				     "pid %ld (%s)", ss->id,
				     (unsigned)ss->owner, (long)ss->pid,
				     ptd_source_name(ss->source));
			reply_ok(c, ss->attach_id, attach_result(ss));
		}
		if (ss) {
			cJSON_Delete(ss->attach_id);
			ss->attach_id = NULL;
		}
		if (c) {
			/* the requests that waited */
			c->waiting = false;
			handle_lines(s, c);
			conn_flush(s, c);
		}
	}
}

/* subscribe, snapshot, record: a session still attaching has nothing to
 * give yet (answered, true). */
static bool refuse_attaching(struct conn *c, const struct ptd_request *req,
			     const struct srv_session *ss)
{
	if (!ss->attaching)
		return false;
	reply_error(c, req->id, PTD_ERR_ATTACHING,
		    "session %" PRIu64 " is still attaching to pid %ld (ask "
		    "again once its attach is answered)", ss->id,
		    (long)ss->pid);
	return true;
}

static cJSON *kinds_array(unsigned kinds)
{
	cJSON *a = cJSON_CreateArray();
	unsigned t;

	for (t = 0; a && t < PTD_REC_NTYPES; t++)
		if (kinds & PTD_REC_BIT(t))
			cJSON_AddItemToArray(a, cJSON_CreateString(
				ptd_rec_type_name((enum ptd_rec_type)t)));
	return a;
}

static cJSON *session_summary(struct srv_session *ss)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "session", (double)ss->id);
	cJSON_AddNumberToObject(o, "pid", ss->pid);
	cJSON_AddNumberToObject(o, "owner", ss->owner);
	cJSON_AddStringToObject(o, "kind", ss->path ? "replay" : "live");
	if (ss->path) {
		cJSON_AddStringToObject(o, "source",
					ptd_input_kind_name(ss->input_kind));
		cJSON_AddStringToObject(o, "path", ss->path);
		cJSON_AddBoolToObject(o, "lossless", ss->lossless);
	} else {
		cJSON_AddStringToObject(o, "source",
					ptd_source_name(ss->source));
	}
	if (ss->spool)
		cJSON_AddBoolToObject(o, "record", true);
	cJSON_AddStringToObject(o, "state", session_state(ss));
	cJSON_AddStringToObject(o, "mode", ptd_session_mode_name(ss->mode));
	if (!ss->path)	/* live sessions: their buffer layout */
		cJSON_AddStringToObject(o, "buffers", ss->per_cpu ? "per-cpu"
								  : "per-thread");
	if (ss->filter)
		cJSON_AddStringToObject(o, "filter", ss->filter);
	cJSON_AddNumberToObject(o, "subscribers", ptd_fanout_count(ss->fan));
	if (ss->reaped)
		cJSON_AddStringToObject(o, "end",
					ptd_session_end_name(ss->end.reason));
	return o;
}

static void cmd_list(struct ptd_server *s, struct conn *c,
		     const struct ptd_request *req)
{
	cJSON *res = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(res, "sessions");
	struct srv_session *ss;

	for (ss = s->sessions; a && ss; ss = ss->next)
		if (ptd_auth_may_see(&c->peer, ss->owner))
			cJSON_AddItemToArray(a, session_summary(ss));
	reply_ok(c, req->id, res);
}

/* The asking user's memory use against user_memory_limit. */
static void status_memory(struct ptd_server *s, const struct conn *c,
			  cJSON *res)
{
	cJSON *m = cJSON_AddObjectToObject(res, "memory");

	cJSON_AddNumberToObject(m, "uid", c->peer.uid);
	cJSON_AddNumberToObject(m, "used",
				(double)ptd_memlimit_used(s->mem, c->peer.uid));
	cJSON_AddNumberToObject(m, "limit",
				(double)ptd_memlimit_limit(s->mem));
}

static void cmd_status_daemon(struct ptd_server *s, struct conn *c,
			      const struct ptd_request *req)
{
	cJSON *res = cJSON_CreateObject();
	struct srv_session *ss;
	unsigned n = 0;

	for (ss = s->sessions; ss; ss = ss->next)
		if (ptd_auth_may_see(&c->peer, ss->owner))
			n++;
	cJSON_AddStringToObject(res, "ptd", PTD_VERSION_STRING);
	cJSON_AddNumberToObject(res, "protocol", PTD_PROTO_VERSION);
	cJSON_AddNumberToObject(res, "sessions", n);
	cJSON_AddNumberToObject(res, "connections", s->nconns);
	cJSON_AddNumberToObject(res, "uptime_ms",
				(double)(now_ms() - s->start_ms));
	status_memory(s, c, res);
	reply_ok(c, req->id, res);
}

/* A recorded session's record request, for its owner to see in status:
 * a failure found once the session ended (the record request may have
 * been answered long before) is told here, not only logged. */
static void status_record(const struct srv_session *ss, cJSON *res)
{
	const struct srv_record *rc = ss->rec;
	const char *state = "not_asked";

	if (rc && atomic_load_explicit(&rc->done, memory_order_acquire))
		state = rc->err < 0 ? "failed" : "written";
	else if (rc)
		state = rc->started ? "writing" : "pending";
	cJSON_AddStringToObject(res, "record_state", state);
	if (rc && !strcmp(state, "failed"))
		cJSON_AddStringToObject(res, "record_error", rc->diag.msg[0]
					? rc->diag.msg : ptd_strerror(rc->err));
}

static void cmd_status(struct ptd_server *s, struct conn *c,
		       const struct ptd_request *req)
{
	struct ptd_subscriber_stats subs[64];
	struct ptd_session_stats st;
	struct srv_session *ss;
	cJSON *res, *a;
	unsigned i, n;

	if (!req->has_session) {
		cmd_status_daemon(s, c, req);
		return;
	}
	ss = session_find(s, c, req->session);
	if (!ss) {
		reply_error(c, req->id, PTD_ERR_NO_SUCH_SESSION,
			    "no session %" PRIu64, req->session);
		return;
	}
	session_stats(ss, &st);
	res = session_summary(ss);
	cJSON_AddNumberToObject(res, "threads", st.threads);
	cJSON_AddNumberToObject(res, "threads_live", st.threads_live);
	cJSON_AddNumberToObject(res, "trace_bytes", (double)st.trace_bytes);
	cJSON_AddNumberToObject(res, "insns", (double)st.insns);
	cJSON_AddNumberToObject(res, "records", (double)st.records);
	cJSON_AddNumberToObject(res, "lost_bytes", (double)st.lost_bytes);
	cJSON_AddNumberToObject(res, "threads_refused", st.threads_refused);
	cJSON_AddNumberToObject(res, "identity_mismatches",
				(double)st.identity_mismatches);
	cJSON_AddNumberToObject(res, "memory",
				(double)atomic_load(&ss->acct.charged));
	if (ss->spool)
		status_record(ss, res);
	if (ss->mode == PTD_MODE_SNAPSHOT) {
		cJSON_AddNumberToObject(res, "snapshot_size",
					(double)st.snapshot_size);
		cJSON_AddNumberToObject(res, "snapshots",
					(double)st.snapshots);
		cJSON_AddNumberToObject(res, "overwritten_bytes",
					(double)st.overwritten_bytes);
	}
	a = cJSON_AddArrayToObject(res, "subscriber_list");
	n = ptd_fanout_get_stats(ss->fan, subs, PTD_ARRAY_SIZE(subs));
	for (i = 0; a && i < n; i++) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddNumberToObject(o, "id", subs[i].id);
		cJSON_AddItemToObject(o, "kinds", kinds_array(subs[i].kinds));
		cJSON_AddNumberToObject(o, "matched", (double)subs[i].matched);
		cJSON_AddNumberToObject(o, "sent", (double)subs[i].sent);
		cJSON_AddNumberToObject(o, "lost", (double)subs[i].lost);
		cJSON_AddNumberToObject(o, "queued", (double)subs[i].queued);
		cJSON_AddItemToArray(a, o);
	}
	reply_ok(c, req->id, res);
}

static void handle_lines(struct ptd_server *s, struct conn *c);

static cJSON *detach_result(const struct srv_session *ss)
{
	cJSON *res = cJSON_CreateObject();

	cJSON_AddNumberToObject(res, "session", (double)ss->id);
	return res;
}

/* Stop a session.  The response comes once it has ended: its source has
 * let every thread of the target go (software source: no thread is
 * ptrace-stopped or traced any more), so a debugger may attach right
 * after it.  The connection's later requests wait; other clients do not. */
static void cmd_detach(struct ptd_server *s, struct conn *c,
		       const struct ptd_request *req)
{
	struct srv_session *ss = session_find(s, c, req->session);

	if (!ss) {
		reply_error(c, req->id, PTD_ERR_NO_SUCH_SESSION,
			    "no session %" PRIu64, req->session);
		return;
	}
	if (!ss->reaped && !ss->stopping && (ss->s || ss->rp)) {
		ss_stop(ss, PTD_END_DETACHED);
		ptd_log_info("session %" PRIu64 ": detach asked by uid %u",
			     ss->id, (unsigned)c->peer.uid);
	}
	ss->stopping = true;
	/* An ended session the owner detaches need not linger. */
	if (ss->reaped)
		ss->ended_at_ms = 0;
	/* (a second detach while one waits is answered at once) */
	if (ss->reaped || ss->detach_conn || !(ss->s || ss->rp)) {
		reply_ok(c, req->id, detach_result(ss));
		return;
	}
	ss->detach_id = req->id ? cJSON_Duplicate(req->id, true) : NULL;
	ss->detach_conn = c;
	c->waiting = true;
}

/* Answer the detaches whose session has ended (its decode thread says
 * so once the source has returned, every thread released). */
static void detaches_answer(struct ptd_server *s)
{
	struct srv_session *ss;

	for (ss = s->sessions; ss; ss = ss->next) {
		struct conn *c = ss->detach_conn;

		if (!c || !atomic_load_explicit(&ss->ended,
						memory_order_acquire))
			continue;
		ss->detach_conn = NULL;
		c->waiting = false;
		reply_ok(c, ss->detach_id, detach_result(ss));
		cJSON_Delete(ss->detach_id);
		ss->detach_id = NULL;
		handle_lines(s, c);
		conn_flush(s, c);
	}
}

static void cmd_subscribe(struct ptd_server *s, struct conn *c,
			  const struct ptd_request *req)
{
	struct srv_session *ss = session_find(s, c, req->session);
	struct ptd_filter f;
	cJSON *res;
	int r;

	if (!ss) {
		reply_error(c, req->id, PTD_ERR_NO_SUCH_SESSION,
			    "no session %" PRIu64, req->session);
		return;
	}
	if (refuse_attaching(c, req, ss))
		return;
	/* Live decoding gives insn records; blocks come from offline decodes
	 * only (libipt's block cache decides where blocks end, which a
	 * stream decoder cannot reproduce exactly). */
	if (req->filter.kinds & PTD_REC_BIT(PTD_REC_BLOCK)) {
		reply_error(c, req->id, PTD_ERR_UNSUPPORTED,
			    "block records are not available from live "
			    "sessions (ask for insn; ptctl decode --records "
			    "block gives them offline)");
		return;
	}
	if (ptd_filter_compile(&req->filter, &f) < 0) {
		reply_error(c, req->id, PTD_ERR_BAD_REQUEST, "bad filter");
		return;
	}
	/* its queue and the buffer being written: fanout.h */
	if (memory_refused(s, c, req, &c->sub_acct,
			   2 * (uint64_t)s->cfg.subscriber_queue_size,
			   "subscribing"))
		return;
	r = ptd_fanout_subscribe(ss->fan, &f, s->cfg.subscriber_queue_size,
				 s->cfg.max_subscribers_per_session, &c->sub);
	if (r < 0) {
		ptd_memacct_release(&c->sub_acct);
		reply_error(c, req->id, ptd_proto_error_code(r),
			    r == -PTD_ELIMIT
				    ? "session %" PRIu64 " already has %u "
				      "subscribers (max_subscribers_per_session)"
				    : "cannot subscribe to session %" PRIu64
				      " (%u)",
			    ss->id, s->cfg.max_subscribers_per_session);
		return;
	}
	c->ss = ss;
	res = cJSON_CreateObject();
	cJSON_AddNumberToObject(res, "session", (double)ss->id);
	cJSON_AddItemToObject(res, "kinds", kinds_array(f.spec.kinds));
	reply_ok(c, req->id, res);
}

/* Ask for a snapshot; the response comes when the decode thread has
 * taken it (snapshots_answer), and the connection's later requests wait
 * for it. */
static void cmd_snapshot(struct ptd_server *s, struct conn *c,
			 const struct ptd_request *req)
{
	struct srv_session *ss = session_find(s, c, req->session);
	uint64_t seq;
	int r;

	if (!ss) {
		reply_error(c, req->id, PTD_ERR_NO_SUCH_SESSION,
			    "no session %" PRIu64, req->session);
		return;
	}
	if (refuse_attaching(c, req, ss))
		return;
	if (ss->mode != PTD_MODE_SNAPSHOT) {
		reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
			    "session %" PRIu64 " is not in snapshot mode "
			    "(attach with \"mode\": \"snapshot\")", ss->id);
		return;
	}
	if (ss->snap_busy) {
		reply_error(c, req->id, PTD_ERR_LIMIT,
			    "a snapshot of session %" PRIu64 " is being "
			    "taken", ss->id);
		return;
	}
	r = ss->s && !ss->reaped ? ptd_session_snapshot(ss->s, &seq) : -ESRCH;
	if (r < 0) {
		reply_error(c, req->id,
			    r == -ESRCH ? PTD_ERR_NO_SUCH_SESSION
			    : r == -EBUSY ? PTD_ERR_LIMIT
					  : PTD_ERR_INTERNAL,
			    "session %" PRIu64 ": %s", ss->id,
			    r == -ESRCH ? "it has ended" : ptd_strerror(r));
		return;
	}
	ss->snap_id = req->id ? cJSON_Duplicate(req->id, true) : NULL;
	ss->snap_busy = true;
	ss->snap_conn = c;
	c->waiting = true;
}

static cJSON *snapshot_result(const struct srv_session *ss)
{
	const struct ptd_snapshot_info *in = &ss->snap_info;
	cJSON *res = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(res, "threads");

	cJSON_AddNumberToObject(res, "session", (double)ss->id);
	cJSON_AddNumberToObject(res, "seq", (double)in->seq);
	for (unsigned i = 0; a && i < in->nlisted; i++) {
		const struct ptd_snapshot_thread *t = &in->th[i];
		cJSON *o = cJSON_CreateObject();

		cJSON_AddNumberToObject(o, "tid", t->tid);
		cJSON_AddNumberToObject(o, "bytes", (double)t->bytes);
		cJSON_AddNumberToObject(o, "end", (double)t->end);
		cJSON_AddNumberToObject(o, "overwritten",
					(double)t->overwritten);
		cJSON_AddNumberToObject(o, "records", (double)t->records);
		cJSON_AddNumberToObject(o, "insns", (double)t->insns);
		cJSON_AddItemToArray(a, o);
	}
	cJSON_AddNumberToObject(res, "threads_total", in->nthreads);
	cJSON_AddNumberToObject(res, "bytes", (double)in->bytes);
	cJSON_AddNumberToObject(res, "overwritten", (double)in->overwritten);
	cJSON_AddNumberToObject(res, "records", (double)in->records);
	cJSON_AddNumberToObject(res, "insns", (double)in->insns);
	return res;
}

/* Answer the snapshots the decode threads have taken. */
static void snapshots_answer(struct ptd_server *s)
{
	struct srv_session *ss;

	for (ss = s->sessions; ss; ss = ss->next) {
		struct conn *c = ss->snap_conn;
		cJSON *id = ss->snap_id;

		if (!atomic_load_explicit(&ss->snap_ready,
					  memory_order_acquire))
			continue;
		/* idle before the waiting requests may ask again */
		atomic_store(&ss->snap_ready, false);
		ss->snap_busy = false;
		ss->snap_conn = NULL;
		ss->snap_id = NULL;
		if (c) {
			c->waiting = false;
			if (ss->snap_info.err)
				reply_error(c, id, PTD_ERR_INTERNAL,
					    "session %" PRIu64 ": snapshot "
					    "failed: %s", ss->id,
					    ss->snap_info.message);
			else
				reply_ok(c, id, snapshot_result(ss));
			/* the requests that waited */
			handle_lines(s, c);
			conn_flush(s, c);
		}
		cJSON_Delete(id);
	}
}

/* ---- replay ---- */

/* The client's supplementary groups (SO_PEERGROUPS), malloc'd.  Returns
 * the count (0 with *ret NULL if it has none) or -errno. */
static int peer_groups(int fd, gid_t **ret)
{
	socklen_t len = 64 * sizeof(gid_t);
	gid_t *g = NULL;

	*ret = NULL;
	for (;;) {
		gid_t *n = realloc(g, len ? len : sizeof(gid_t));

		if (!n) {
			free(g);
			return -ENOMEM;
		}
		g = n;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) == 0)
			break;
		if (errno != ERANGE ||
		    len > PTD_CRED_MAX_GROUPS * sizeof(gid_t)) {
			free(g);
			return -errno;
		}
	}
	if (len == 0) {
		free(g);
		return 0;
	}
	*ret = g;
	return (int)(len / sizeof(gid_t));
}

/* The response code of a refused replay. */
static const char *replay_error_code(int err)
{
	switch (err) {
	case -ENOENT:
	case -ENOTDIR:
		return PTD_ERR_NO_SUCH_FILE;
	case -EACCES:
	case -EPERM:
		return PTD_ERR_PERMISSION;
	case -EINVAL:
		return PTD_ERR_BAD_REQUEST;
	case -PTD_EFORMAT:
	case -PTD_EVERSION:
	case -PTD_ECHECKSUM:
	case -PTD_ETRUNC:
	case -PTD_EUNSUPPORTED:
	case -PTD_ELIMIT:
	case -PTD_ENOTREG:	/* a FIFO, a device: named in the message */
	case -EISDIR:
		return PTD_ERR_BAD_TRACE;
	default:
		return PTD_ERR_INTERNAL;
	}
}

static void replay_opts(const struct ptd_server *s, const struct conn *c,
			const struct ptd_request *req,
			struct ptd_replay_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->path = req->path;
	o->input.decode.path = PTD_PATH_INSN;
	o->input.decode.want = PTD_FILTER_DEFAULT_KINDS;
	o->input.have_tid = req->has_tid;
	o->input.tid = req->tid;
	o->lossless = req->lossless;
	o->creds.uid = c->peer.uid;
	o->creds.gid = c->peer.gid;
	o->wait_ms = req->has_wait_ms ? (unsigned)req->wait_ms
				      : PTD_REPLAY_WAIT_MS;
	o->queue_size = s->cfg.subscriber_queue_size;
}

static cJSON *replay_result(const struct srv_session *ss,
			    const struct ptd_replay_info *info)
{
	cJSON *res = cJSON_CreateObject();

	cJSON_AddNumberToObject(res, "session", (double)ss->id);
	cJSON_AddStringToObject(res, "kind", "replay");
	cJSON_AddStringToObject(res, "source",
				ptd_input_kind_name(info->kind));
	cJSON_AddNumberToObject(res, "pid", (double)info->pid);
	cJSON_AddNumberToObject(res, "threads", (double)info->nthreads);
	cJSON_AddBoolToObject(res, "lossless", ss->lossless);
	return res;
}

/* Refuse @ss's replay (logged; answered to @c if it is still there). */
static void replay_refused(struct conn *c, const struct srv_session *ss,
			   int err, const struct ptd_diag *diag)
{
	const char *msg = diag->msg[0] ? diag->msg : ptd_strerror(err);

	ptd_log_info("uid %u: replay of '%s' refused: %s",
		     (unsigned)ss->owner, ss->path, msg);
	if (c)
		reply_error(c, ss->start_id, replay_error_code(err), "%s",
			    msg);
}

/* Decode a saved trace as a session of kind "replay" (replay.h): the
 * client reads files with its own permissions, subscribes as to any
 * session, and the replay waits for that first subscriber.  The input is
 * checked on the replay's thread (a bundle is verified whole, which takes
 * a while for large images): the request is answered by replays_answer
 * once it is accepted or refused; the connection's later requests wait,
 * other clients do not. */
static void cmd_replay(struct ptd_server *s, struct conn *c,
		       const struct ptd_request *req)
{
	struct ptd_diag diag = { "" };
	struct ptd_replay_opts o;
	struct ptd_session_sink sink;
	struct srv_session *ss;
	gid_t *groups = NULL;
	int r;

	if (refuse_over_session_limit(s, c, req))
		return;
	r = peer_groups(c->tag.fd, &groups);
	ss = calloc(1, sizeof(*ss));
	if (r < 0 || !ss || !(ss->path = strdup(req->path)) ||
	    (req->id && !(ss->start_id = cJSON_Duplicate(req->id, true)))) {
		free(groups);
		session_free(ss);
		reply_error(c, req->id, PTD_ERR_INTERNAL,
			    "cannot start a replay: %s",
			    ptd_strerror(r < 0 ? r : -ENOMEM));
		return;
	}
	if (memory_refused(s, c, req, &ss->acct, PTD_MEMLIMIT_REPLAY_BYTES,
			   "a replay")) {
		free(groups);
		session_free(ss);
		return;
	}
	replay_opts(s, c, req, &o);
	o.creds.groups = groups;
	o.creds.ngroups = (size_t)r;
	o.decided = server_wake;
	o.decided_ctx = s;
	ss->srv = s;
	ss->owner = c->peer.uid;
	ss->lossless = req->lossless;
	memset(&sink, 0, sizeof(sink));
	sink.record = sink_record;
	sink.ended = sink_ended;
	sink.ctx = ss;
	r = ptd_replay_begin(&o, &sink, &ss->rp, &diag);
	free(groups);
	if (r < 0) {
		replay_refused(c, ss, r, &diag);
		session_free(ss);
		return;
	}
	ss->start_conn = c;
	c->waiting = true;
	ss->next = s->starting;
	s->starting = ss;
}

/* @ss's input was accepted: make it a session and answer @c (if any). */
static void replay_accepted(struct ptd_server *s, struct srv_session *ss,
			    struct conn *c, const struct ptd_replay_info *info)
{
	ss->id = s->next_session_id;
	if (!(ss->fan = ptd_fanout_new(ss->id, (pid_t)info->pid,
				       server_wake, s))) {
		struct ptd_diag diag;

		replay_refused(c, ss,
			       ptd_diagf(&diag, -ENOMEM, "out of memory"),
			       &diag);
		session_free(ss);
		return;
	}
	s->next_session_id++;
	ss->pid = (pid_t)info->pid;
	ss->input_kind = info->kind;
	ptd_replay_go(ss->rp, ss->fan);
	ss->next = s->sessions;
	s->sessions = ss;
	ptd_log_info("session %" PRIu64 ": uid %u replays '%s' (%s%s)", ss->id,
		     (unsigned)ss->owner, ss->path,
		     ptd_input_kind_name(info->kind),
		     ss->lossless ? ", lossless" : "");
	if (c)
		reply_ok(c, ss->start_id, replay_result(ss, info));
	else
		/* Nobody has the session's id: it ends when its wait for a
		 * first subscriber does, like any replay nobody follows. */
		ptd_log_info("session %" PRIu64 ": the client that asked for "
			     "it has gone", ss->id);
}

/* Answer the replays whose input has been accepted or refused (or has
 * been undecided for PTD_REPLAY_START_MS: accepted). */
static void replays_answer(struct ptd_server *s)
{
	struct srv_session **p = &s->starting, *ss;

	while ((ss = *p)) {
		struct ptd_diag diag = { "" };
		struct ptd_replay_info info;
		struct conn *c = ss->start_conn;
		int r = ptd_replay_started(ss->rp, &info, &diag);

		if (r == 0) {
			p = &ss->next;
			continue;
		}
		*p = ss->next;
		ss->next = NULL;
		ss->start_conn = NULL;
		if (r < 0) {
			replay_refused(c, ss, r, &diag);
			session_free(ss);
		} else if (s->shutting_down) {
			if (c)
				reply_error(c, ss->start_id,
					    PTD_ERR_SHUTTING_DOWN,
					    "ptd is shutting down");
			session_free(ss);
		} else {
			replay_accepted(s, ss, c, &info);
		}
		if (c) {
			/* the requests that waited */
			c->waiting = false;
			handle_lines(s, c);
			conn_flush(s, c);
		}
	}
}

/* Until when the loop may sleep for the replays being started: the
 * milliseconds until the first counts as accepted, or -1. */
static int replays_timeout(const struct ptd_server *s)
{
	const struct srv_session *ss;
	int t = -1;

	for (ss = s->starting; ss; ss = ss->next) {
		int left = (int)ptd_replay_start_left_ms(ss->rp) + 1;

		if (t < 0 || left < t)
			t = left;
	}
	return t;
}

/* ---- record ---- */

/* Is the directory open at @fd one ptd may write @c's bundle into?
 * A directory, the client's own (unless the client is root), empty. */
static int record_check_dir(const struct conn *c, int fd, char *msg,
			    size_t cap)
{
	struct dirent *e;
	struct statvfs vfs;
	struct stat st;
	DIR *d;
	int dfd, n = 0;

	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		(void)snprintf(msg, cap, "the file descriptor passed is not "
			       "a directory (open it with O_DIRECTORY)");
		return -ENOTDIR;
	}
	if (c->peer.uid != 0 && st.st_uid != c->peer.uid) {
		(void)snprintf(msg, cap, "the directory belongs to uid %u, "
			       "you are uid %u", (unsigned)st.st_uid,
			       (unsigned)c->peer.uid);
		return -EPERM;
	}
	/* Refused now, while the client waits for the answer, rather than
	 * when the session ends and nobody may be asking: the bundle is
	 * written with the client's rights (record_main). */
	if (c->peer.uid != 0 && (st.st_mode & (S_IWUSR | S_IXUSR)) !=
					(S_IWUSR | S_IXUSR)) {
		(void)snprintf(msg, cap, "the directory is not writable by "
			       "you (mode %04o)", (unsigned)(st.st_mode & 07777));
		return -EACCES;
	}
	if (fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY)) {
		(void)snprintf(msg, cap, "the directory is on a read-only "
			       "file system");
		return -EROFS;
	}
	/* A second descriptor to list it: readdir consumes the position. */
	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		n = -errno;
		if (dfd >= 0)
			close(dfd);
		(void)snprintf(msg, cap, "cannot list the directory: %s",
			       strerror(-n));
		return n;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	if (n) {
		(void)snprintf(msg, cap, "the directory is not empty (%d "
			       "entries)", n);
		return -EEXIST;
	}
	return 0;
}

static cJSON *record_result(const struct srv_session *ss, const char *state)
{
	cJSON *res = cJSON_CreateObject();

	cJSON_AddNumberToObject(res, "session", (double)ss->id);
	cJSON_AddStringToObject(res, "state", state);
	return res;
}

/* Save a recorded session's bundle into the directory the client passed
 * with the request (SCM_RIGHTS) once the session has ended.  With "wait"
 * (the default) the response comes when the bundle is written and the
 * connection's later requests wait for it; without, at once ("pending"). */
static void cmd_record(struct ptd_server *s, struct conn *c,
		       const struct ptd_request *req)
{
	struct srv_session *ss = session_find(s, c, req->session);
	struct srv_record *rc;
	char msg[256];
	int r;

	if (!ss) {
		reply_error(c, req->id, PTD_ERR_NO_SUCH_SESSION,
			    "no session %" PRIu64, req->session);
		return;
	}
	if (refuse_attaching(c, req, ss))
		return;
	if (!ss->spool) {
		reply_error(c, req->id, PTD_ERR_NOT_RECORDING,
			    "session %" PRIu64 " was not attached with "
			    "record (attach with \"options\": {\"record\": "
			    "true})", ss->id);
		return;
	}
	if (c->pass_fd < 0) {
		reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
			    "no directory file descriptor was passed with "
			    "the request (SCM_RIGHTS)");
		return;
	}
	if (ss->rec) {
		reply_error(c, req->id, PTD_ERR_LIMIT,
			    "session %" PRIu64 " is already being recorded",
			    ss->id);
		return;
	}
	r = record_check_dir(c, c->pass_fd, msg, sizeof(msg));
	if (r < 0) {
		reply_error(c, req->id, r == -EEXIST || r == -ENOTDIR ||
					r == -EPERM || r == -EACCES ||
					r == -EROFS ? PTD_ERR_BAD_DIRECTORY
						    : PTD_ERR_INTERNAL,
			    "%s", msg);
		return;
	}
	rc = calloc(1, sizeof(*rc));
	r = rc ? peer_groups(c->tag.fd, &rc->groups) : -ENOMEM;
	if (r < 0) {
		free(rc);
		reply_error(c, req->id, PTD_ERR_INTERNAL,
			    "cannot take your groups: %s", ptd_strerror(r));
		return;
	}
	rc->ngroups = (size_t)r;
	rc->srv = s;
	rc->spool = ss->spool;
	rc->fd = c->pass_fd;
	c->pass_fd = -1;
	rc->uid = c->peer.uid;
	rc->gid = c->peer.gid;
	ss->rec = rc;
	if (req->record_wait) {
		rc->id = req->id ? cJSON_Duplicate(req->id, true) : NULL;
		rc->conn = c;
		c->waiting = true;
	} else {
		reply_ok(c, req->id, record_result(ss, "pending"));
	}
	if (ss->reaped)
		record_start(ss);
}

/* Answer the record requests whose bundle has been written. */
static void records_answer(struct ptd_server *s)
{
	struct srv_session *ss;

	for (ss = s->sessions; ss; ss = ss->next) {
		struct srv_record *rc = ss->rec;
		struct conn *c;

		if (!rc || rc->answered ||
		    !atomic_load_explicit(&rc->done, memory_order_acquire))
			continue;
		rc->answered = true;
		if (rc->err < 0)
			ptd_log_info("session %" PRIu64 ": record failed: %s",
				     ss->id, rc->diag.msg);
		else
			ptd_log_info("session %" PRIu64 ": bundle written for "
				     "uid %u", ss->id, (unsigned)rc->uid);
		c = rc->conn;
		rc->conn = NULL;
		if (!c)
			continue;
		c->waiting = false;
		if (rc->err < 0)
			reply_error(c, rc->id,
				    rc->err == -EEXIST ? PTD_ERR_BAD_DIRECTORY
						       : PTD_ERR_INTERNAL,
				    "session %" PRIu64 ": %s", ss->id,
				    rc->diag.msg[0] ? rc->diag.msg
						    : ptd_strerror(rc->err));
		else
			reply_ok(c, rc->id, record_result(ss, "written"));
		handle_lines(s, c);
		conn_flush(s, c);
	}
}

static void cmd_version(struct conn *c, const struct ptd_request *req)
{
	cJSON *res = cJSON_CreateObject();

	cJSON_AddNumberToObject(res, "protocol", PTD_PROTO_VERSION);
	cJSON_AddStringToObject(res, "ptd", PTD_VERSION_STRING);
	cJSON_AddNumberToObject(res, "stream", PTD_STREAM_VERSION);
	reply_ok(c, req->id, res);
}

static void dispatch(struct ptd_server *s, struct conn *c,
		     const struct ptd_request *req)
{
	if (s->shutting_down && req->cmd != PTD_CMD_PING &&
	    req->cmd != PTD_CMD_VERSION) {
		reply_error(c, req->id, PTD_ERR_SHUTTING_DOWN,
			    "ptd is shutting down");
		return;
	}
	switch (req->cmd) {
	case PTD_CMD_PING:
		reply_ok(c, req->id, NULL);
		return;
	case PTD_CMD_VERSION:
		cmd_version(c, req);
		return;
	case PTD_CMD_ATTACH:
		cmd_attach(s, c, req);
		return;
	case PTD_CMD_DETACH:
		cmd_detach(s, c, req);
		return;
	case PTD_CMD_LIST:
		cmd_list(s, c, req);
		return;
	case PTD_CMD_STATUS:
		cmd_status(s, c, req);
		return;
	case PTD_CMD_SUBSCRIBE:
		cmd_subscribe(s, c, req);
		return;
	case PTD_CMD_SNAPSHOT:
		cmd_snapshot(s, c, req);
		return;
	case PTD_CMD_REPLAY:
		cmd_replay(s, c, req);
		return;
	case PTD_CMD_RECORD:
		cmd_record(s, c, req);
		return;
	case PTD_CMD_COUNT:
		break;
	}
	reply_error(c, req->id, PTD_ERR_INTERNAL, "unhandled command");
}

static void handle_line(struct ptd_server *s, struct conn *c, const char *line,
			size_t len)
{
	struct ptd_diag diag = { "" };
	struct ptd_request req;
	int r;

	if (len && line[len - 1] == '\r')
		len--;
	r = ptd_request_parse(line, len, &req, &diag);
	if (r < 0)
		reply_error(c, req.id,
			    r == -PTD_EUNSUPPORTED ? PTD_ERR_UNKNOWN_COMMAND
			    : r == -ENOMEM	   ? PTD_ERR_INTERNAL
						   : PTD_ERR_BAD_REQUEST,
			    "%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
	else
		dispatch(s, c, &req);
	ptd_request_free(&req);
}

static void too_long(struct ptd_server *s, struct conn *c)
{
	reply_error(c, NULL, PTD_ERR_TOO_LONG,
		    "request longer than %zu bytes (max_request_size); "
		    "closing",
		    s->cfg.max_request_size);
	c->close_after_flush = true;
}

/* Handle the complete lines in c->in, up to the point where the client has
 * too many responses unread; keep the rest. */
static void handle_lines(struct ptd_server *s, struct conn *c)
{
	size_t start = 0;
	char *nl;

	while (!c->sub && !c->close_after_flush && !c->waiting &&
	       c->out.len - c->out_off < OUT_HIGH_WATER) {
		size_t len;

		nl = memchr(c->in + start, '\n', c->in_len - start);
		if (!nl)
			break;
		len = (size_t)(nl - (c->in + start));
		if (len > s->cfg.max_request_size) {
			too_long(s, c);
			break;
		}
		handle_line(s, c, c->in + start, len);
		start += len + 1;
	}
	/* No end of line within the limit: framing is lost. */
	if (!c->sub && !c->close_after_flush && !c->waiting &&
	    c->in_len - start > s->cfg.max_request_size &&
	    !memchr(c->in + start, '\n', c->in_len - start))
		too_long(s, c);
	memmove(c->in, c->in + start, c->in_len - start);
	c->in_len -= start;
}

/* recv that also takes file descriptors passed with SCM_RIGHTS (for a
 * record request): the last one is kept in c->pass_fd (replacing an
 * earlier one), the others closed; the kernel closes what does not fit. */
static ssize_t recv_with_fds(struct conn *c, char *buf, size_t len)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(MAX_PASS_FDS * sizeof(int))];
	} ctl;
	struct iovec iov = { buf, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = ctl.b,
			    .msg_controllen = sizeof(ctl.b) };
	struct cmsghdr *h;
	ssize_t n;

	n = recvmsg(c->tag.fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return n;
	for (h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
		size_t i, nfd;
		int fd;

		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < nfd; i++) {
			memcpy(&fd, CMSG_DATA(h) + i * sizeof(int),
			       sizeof(fd));
			if (c->pass_fd >= 0)
				close(c->pass_fd);
			c->pass_fd = fd;
		}
	}
	return n;
}

static void conn_readable(struct ptd_server *s, struct conn *c)
{
	char discard[4096];
	size_t cap = s->cfg.max_request_size + 2;
	ssize_t n;

	if (c->sub || c->close_after_flush) {
		/* A stream or a closing connection: input is ignored, EOF
		 * ends it. */
		n = recv(c->tag.fd, discard, sizeof(discard), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			c->dead = true;
		return;
	}
	if (c->in_len >= cap) {
		handle_lines(s, c);
		return;
	}
	n = recv_with_fds(c, c->in + c->in_len,
			  cap - c->in_len < READ_CHUNK ? cap - c->in_len
						       : READ_CHUNK);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		c->dead = true;
		return;
	}
	if (n < 0)
		return;
	c->in_len += (size_t)n;
	handle_lines(s, c);
	conn_flush(s, c);
}

static void conn_free(struct ptd_server *s, struct conn *c)
{
	struct srv_session *ss;

	/* a snapshot it waits for is answered to nobody */
	for (ss = s->sessions; ss; ss = ss->next) {
		/* an attach nobody waits for any more is cancelled */
		if (ss->attach_conn == c) {
			ss->attach_conn = NULL;
			ss_stop(ss, PTD_END_DETACHED);
			ss->stopping = true;
			ptd_log_info("session %" PRIu64 ": its client went away "
				     "while it was attaching: cancelled",
				     ss->id);
		}
		if (ss->snap_conn == c)
			ss->snap_conn = NULL;
		if (ss->detach_conn == c)
			ss->detach_conn = NULL;
		if (ss->rec && ss->rec->conn == c)
			ss->rec->conn = NULL;
	}
	for (ss = s->starting; ss; ss = ss->next)
		if (ss->start_conn == c)
			ss->start_conn = NULL;
	if (c->pass_fd >= 0)
		close(c->pass_fd);
	if (c->sub)
		ptd_fanout_unsubscribe(c->ss->fan, c->sub);
	ptd_memacct_release(&c->sub_acct);
	if (c->tag.fd >= 0) {
		(void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->tag.fd, NULL);
		close(c->tag.fd);
	}
	ptd_buf_free(&c->out);
	free(c->in);
	free(c);
}

static void conns_reap(struct ptd_server *s)
{
	struct conn **p = &s->conns, *c;

	while ((c = *p)) {
		if (c->dead) {
			*p = c->next;
			s->nconns--;
			conn_free(s, c);
		} else {
			p = &c->next;
		}
	}
}

static void refuse_conn(struct ptd_server *s, int fd)
{
	size_t len = 0;
	char msg[128];
	char *line;

	(void)snprintf(msg, sizeof(msg),
		       "too many connections (max_connections %u)",
		       s->cfg.max_connections);
	line = ptd_response_error(NULL, PTD_ERR_LIMIT, msg, &len);
	if (line)
		(void)send_some(fd, line, len);
	free(line);
	close(fd);
}

static void accept_conns(struct ptd_server *s, int lfd)
{
	int i;

	for (i = 0; i < ACCEPT_BURST; i++) {
		struct conn *c;
		int fd = accept4(lfd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR &&
			    errno != ECONNABORTED)
				ptd_log_err(PTD_LOG_WARNING, -errno,
					    "accept failed");
			return;
		}
		if (s->shutting_down || s->nconns >= s->cfg.max_connections) {
			refuse_conn(s, fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (c)
			c->in = malloc(s->cfg.max_request_size + 2);
		if (!c || !c->in || ptd_peer_get(fd, &c->peer) < 0) {
			if (c)
				free(c->in);
			free(c);
			close(fd);
			continue;
		}
		c->tag.kind = EP_CONN;
		c->tag.fd = fd;
		c->pass_fd = -1;
		c->events = EPOLLIN;
		if (ep_add(s, &c->tag, EPOLLIN) < 0) {
			free(c->in);
			free(c);
			close(fd);
			continue;
		}
		c->next = s->conns;
		s->conns = c;
		s->nconns++;
	}
}

/* ---- sessions from the loop ---- */

/* A session's buffers were freed: give the heap's free pages back to the
 * system.  Its decode thread filled subscriber queues of up to
 * subscriber_queue_size in its own malloc arena; glibc keeps freed chunks
 * there (and raises its mmap threshold after freeing a large mapped
 * chunk, so the next large queues come from the heap too): without this,
 * ptd's RSS after many sessions says what the busiest moment needed, not
 * what it holds. */
static void trim_heap(void)
{
	(void)malloc_trim(0);
}

/* Sessions whose end the decode thread reported: free their threads; drop
 * ended sessions nobody follows once their linger time is over. */
static void sessions_reap(struct ptd_server *s)
{
	struct srv_session **p = &s->sessions, *ss;
	uint64_t now = now_ms();
	bool freed = false;

	snapshots_answer(s);	/* answered before their session goes */
	records_answer(s);
	replays_answer(s);
	attaches_answer(s);
	detaches_answer(s);
	while ((ss = *p)) {
		if (!ss->reaped &&
		    atomic_load_explicit(&ss->ended, memory_order_acquire)) {
			ss_release(ss);
			ss->reaped = true;
			/* a recorded session lingers for its record request */
			ss->ended_at_ms = ss->stopping && !s->shutting_down &&
						  !(ss->spool && !ss->rec)
						  ? 0
						  : now;
			record_start(ss);
			ptd_log_info("session %" PRIu64 ": ended: %s%s%s",
				     ss->id, ptd_session_end_name(ss->end.reason),
				     ss->end.message[0] ? ": " : "",
				     ss->end.message);
		}
		if (ss->reaped && ptd_fanout_count(ss->fan) == 0 &&
		    (!ss->rec || ss->rec->answered) &&
		    (s->shutting_down ||
		     now >= ss->ended_at_ms + PTD_SERVER_LINGER_MS ||
		     ss->ended_at_ms == 0)) {
			*p = ss->next;
			session_free(ss);
			freed = true;
		} else {
			p = &ss->next;
		}
	}
	if (freed)
		trim_heap();
}

static void drain_wakeups(struct ptd_server *s)
{
	struct srv_session *ss;
	struct conn *c;
	uint64_t v;

	if (read(s->ev.fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: a spurious wake-up */
	}
	for (ss = s->sessions; ss; ss = ss->next)
		ptd_fanout_clear_wake(ss->fan);
	snapshots_answer(s);
	records_answer(s);
	replays_answer(s);
	attaches_answer(s);
	detaches_answer(s);
	for (c = s->conns; c; c = c->next)
		if (c->sub)
			conn_flush(s, c);
}

static void shutdown_begin(struct ptd_server *s)
{
	struct srv_session *ss;
	unsigned i;

	if (s->shutting_down)
		return;
	s->shutting_down = true;
	s->shutdown_deadline_ms = now_ms() + PTD_SERVER_SHUTDOWN_MS;
	(void)ptd_sd_notify("STOPPING=1\nSTATUS=stopping: ending sessions");
	ptd_log_info("shutting down");
	for (i = 0; i < s->nlisten; i++) {
		(void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->listen[i].fd, NULL);
		close(s->listen[i].fd);
		s->listen[i].fd = -1;
	}
	s->nlisten = 0;
	if (s->created_socket) {
		(void)unlink(s->cfg.socket_path);
		s->created_socket = false;
	}
	for (ss = s->sessions; ss; ss = ss->next) {
		if (!ss->reaped)
			ss_stop(ss, PTD_END_SHUTDOWN);
		ss->stopping = true;
	}
	for (ss = s->starting; ss; ss = ss->next)
		ptd_replay_stop(ss->rp, PTD_END_SHUTDOWN);
}

static void handle_signal(struct ptd_server *s)
{
	struct signalfd_siginfo si;

	while (read(s->sig.fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
			shutdown_begin(s);
	}
}

/* Is shutdown complete: no session running, every stream written out? */
static bool shutdown_done(struct ptd_server *s)
{
	struct srv_session *ss;
	struct conn *c;

	if (now_ms() >= s->shutdown_deadline_ms)
		return true;
	if (s->starting)
		return false;
	for (ss = s->sessions; ss; ss = ss->next)
		if (!ss->reaped)
			return false;
	for (c = s->conns; c; c = c->next)
		if (c->sub)
			return false;
	return true;
}

static void set_status(struct ptd_server *s)
{
	char buf[128];
	struct srv_session *ss;
	unsigned n = 0;

	for (ss = s->sessions; ss; ss = ss->next)
		n += !ss->reaped;
	(void)snprintf(buf, sizeof(buf), "STATUS=%u session(s), %u client(s)",
		       n, s->nconns);
	(void)ptd_sd_notify(buf);
}

int ptd_server_run(struct ptd_server *s)
{
	struct epoll_event evs[64];
	unsigned last_status = UINT_MAX;

	(void)ptd_sd_notify("READY=1\nSTATUS=listening");
	ptd_log_info("ready, listening on '%s'", s->cfg.socket_path);
	for (;;) {
		int timeout = s->shutting_down ? 200 : -1;
		int i, n;

		if (!s->shutting_down && s->sessions)
			timeout = 1000;	/* linger expiry */
		if (s->starting) {
			int t = replays_timeout(s);

			if (timeout < 0 || t < timeout)
				timeout = t;
		}
		n = epoll_wait(s->epfd, evs, (int)PTD_ARRAY_SIZE(evs), timeout);
		if (n < 0 && errno != EINTR)
			return -errno;
		for (i = 0; i < n; i++) {
			struct ep_tag *t = evs[i].data.ptr;
			struct conn *c;

			switch (t->kind) {
			case EP_LISTEN:
				accept_conns(s, t->fd);
				break;
			case EP_SIGNAL:
				handle_signal(s);
				break;
			case EP_EVENT:
				drain_wakeups(s);
				break;
			case EP_CONN:
				c = (struct conn *)t;
				if (evs[i].events & (EPOLLERR | EPOLLHUP) &&
				    !(evs[i].events & EPOLLIN))
					c->dead = true;
				if (evs[i].events & EPOLLIN)
					conn_readable(s, c);
				if (evs[i].events & EPOLLOUT) {
					conn_flush(s, c);
					/* Requests that waited for the
					 * responses to drain. */
					if (!c->dead && c->in_len &&
					    c->out.len == c->out_off) {
						handle_lines(s, c);
						conn_flush(s, c);
					}
				}
				break;
			}
		}
		conns_reap(s);
		sessions_reap(s);
		if (s->nconns + 1000u * (s->sessions != NULL) != last_status) {
			last_status = s->nconns + 1000u * (s->sessions != NULL);
			set_status(s);
		}
		if (s->shutting_down && shutdown_done(s))
			break;
	}
	return 0;
}

int ptd_server_new(const struct ptd_config *config, const char *procroot,
		   struct ptd_server **ret_server, struct ptd_diag *diag)
{
	struct ptd_server *s;
	sigset_t mask;
	unsigned i;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return ptd_diagf(diag, -ENOMEM, "out of memory");
	s->cfg = *config;
	(void)ptd_strlcpy(s->procroot, procroot ? procroot : "/proc",
			  sizeof(s->procroot));
	s->epfd = s->sig.fd = s->ev.fd = -1;
	s->next_session_id = 1;
	s->start_ms = now_ms();
	s->sig.kind = EP_SIGNAL;
	s->ev.kind = EP_EVENT;
	s->mem = ptd_memlimit_new(s->cfg.user_memory_limit);
	if (!s->mem) {
		r = ptd_diagf(diag, -ENOMEM, "out of memory");
		goto err;
	}
	if (s->cfg.max_request_size < 64 || s->cfg.max_connections == 0) {
		r = ptd_diagf(diag, -EINVAL,
			      "max_request_size and max_connections are too "
			      "small");
		goto err;
	}
	signal(SIGPIPE, SIG_IGN);
	/* Large buffers (subscriber queues, decoder buffers) always mapped on
	 * their own, so that freeing them gives them back: glibc would
	 * otherwise raise its threshold to the largest buffer freed and
	 * carve the next ones out of its arenas, where they stay. */
	(void)mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	if (pthread_sigmask(SIG_BLOCK, &mask, &s->oldmask) == 0)
		s->mask_set = true;
	s->sig.fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	s->ev.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->sig.fd < 0 || s->ev.fd < 0 || s->epfd < 0) {
		r = ptd_diagf(diag, -errno, "failed to set up the loop: %s",
			      strerror(errno));
		goto err;
	}
	r = sockets_open(s, diag);
	if (r < 0)
		goto err;
	if ((r = ep_add(s, &s->sig, EPOLLIN)) < 0 ||
	    (r = ep_add(s, &s->ev, EPOLLIN)) < 0) {
		ptd_diagf(diag, r, "epoll: %s", strerror(-r));
		goto err;
	}
	for (i = 0; i < s->nlisten; i++) {
		r = ep_add(s, &s->listen[i], EPOLLIN);
		if (r < 0) {
			ptd_diagf(diag, r, "epoll: %s", strerror(-r));
			goto err;
		}
	}
	*ret_server = s;
	return 0;
err:
	ptd_server_free(s);
	return r;
}

void ptd_server_free(struct ptd_server *s)
{
	struct srv_session *ss;
	struct conn *c;
	unsigned i;

	if (!s)
		return;
	/* Stop every session first, so that freeing them in turn does not
	 * wait for each one's shutdown one after the other. */
	for (ss = s->sessions; ss; ss = ss->next)
		if (!ss->reaped)
			ss_stop(ss, PTD_END_SHUTDOWN);
	while ((c = s->conns)) {
		s->conns = c->next;
		conn_free(s, c);
	}
	while ((ss = s->sessions)) {
		s->sessions = ss->next;
		session_free(ss);
	}
	while ((ss = s->starting)) {
		s->starting = ss->next;
		session_free(ss);
	}
	for (i = 0; i < s->nlisten; i++)
		if (s->listen[i].fd >= 0)
			close(s->listen[i].fd);
	if (s->created_socket)
		(void)unlink(s->cfg.socket_path);
	if (s->sig.fd >= 0)
		close(s->sig.fd);
	if (s->ev.fd >= 0)
		close(s->ev.fd);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->mask_set)
		pthread_sigmask(SIG_SETMASK, &s->oldmask, NULL);
	ptd_memlimit_free(s->mem);
	free(s);
}
