/* SPDX-License-Identifier: MIT */
/*
 * The control loop (daemon/server.h; srv.h says which file has what).
 * Everything runs on one thread except the sinks (sessions.c) and the
 * record thread (record.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "common/strutil.h"
#include "daemon/log.h"
#include "daemon/sdnotify.h"
#include "daemon/server/srv.h"

uint64_t srv_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

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

/* Answer the requests whose slow step is decided (srv_pending; answered
 * before their session goes). */
static void answer_pending(struct ptd_server *s)
{
	srv_children_start(s);	/* (a child's session is answered later) */
	srv_snapshots_answer(s);
	srv_counters_answer(s);
	srv_records_answer(s);
	srv_replays_answer(s);
	srv_attaches_answer(s);
	srv_detaches_answer(s);
}

/* Sessions whose end the decode thread reported: free their threads; drop
 * ended sessions nobody follows once their linger time is over.  The
 * requests waiting on a session are answered between the two passes: a
 * session whose end the first pass saw has its detach answered before
 * the second frees it (answered before the first pass, a detach whose
 * session ended in between went unanswered with its session). */
static void sessions_reap(struct ptd_server *s)
{
	struct srv_session **p, *ss;
	uint64_t now = srv_now_ms();
	bool freed = false, kids = false;

	for (ss = s->sessions; ss; ss = ss->next) {
		/* One still attaching is left to answer_pending (below) and
		 * reaped next time round: its attach can be decided and the
		 * session end at once -- a rule's short program does. */
		if (!ss->reaped && !ss->attaching &&
		    atomic_load_explicit(&ss->ended, memory_order_acquire)) {
			srv_session_release(ss);
			ss->reaped = true;
			/* a recorded session lingers for its record request */
			ss->ended_at_ms = ss->stopping && !s->shutting_down &&
						  !(ss->spool && !ss->rec)
						  ? 0
						  : now;
			srv_record_start(ss);
			ptd_log_info("session %" PRIu64 ": ended: %s%s%s",
				     ss->id, ptd_session_end_name(ss->end.reason),
				     ss->end.message[0] ? ": " : "",
				     ss->end.message);
		}
	}
	answer_pending(s);
	for (p = &s->sessions; (ss = *p);) {
		/* children its source reported since answer_pending took
		 * them: started after this pass (which adds sessions at the
		 * list's head), the session kept until they are */
		if (ss->reaped && srv_children_pending(ss)) {
			kids = true;
			p = &ss->next;
		} else if (ss->reaped && ptd_fanout_count(ss->fan) == 0 &&
			   srv_record_settled(ss) &&
			   (s->shutting_down ||
			    now >= ss->ended_at_ms + PTD_SERVER_LINGER_MS ||
			    ss->ended_at_ms == 0)) {
			*p = ss->next;
			srv_session_free(ss);
			freed = true;
		} else {
			p = &ss->next;
		}
	}
	if (kids)
		srv_children_start(s);
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
	answer_pending(s);
	for (c = s->conns; c; c = c->next)
		if (c->sub || c->rsub)
			srv_conn_flush(s, c);
}

static void shutdown_begin(struct ptd_server *s)
{
	struct srv_session *ss;

	if (s->shutting_down)
		return;
	s->shutting_down = true;
	s->shutdown_deadline_ms = srv_now_ms() + PTD_SERVER_SHUTDOWN_MS;
	(void)ptd_sd_notify("STOPPING=1\nSTATUS=stopping: ending sessions");
	ptd_log_info("shutting down");
	srv_listen_close(s);
	for (ss = s->sessions; ss; ss = ss->next) {
		if (!ss->reaped)
			srv_session_stop(ss, PTD_END_SHUTDOWN);
		ss->stopping = true;
	}
	for (ss = s->starting; ss; ss = ss->next)
		ptd_replay_stop(ss->rp, PTD_END_SHUTDOWN);
	srv_rulesubs_shutdown(s);
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

	if (srv_now_ms() >= s->shutdown_deadline_ms)
		return true;
	if (s->starting)
		return false;
	for (ss = s->sessions; ss; ss = ss->next)
		if (!ss->reaped)
			return false;
	for (c = s->conns; c; c = c->next)
		if (c->sub || c->rsub)
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
			int t = srv_replays_timeout(s);

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
				srv_conns_accept(s, t->fd);
				break;
			case EP_SIGNAL:
				handle_signal(s);
				break;
			case EP_EVENT:
				drain_wakeups(s);
				break;
			case EP_WATCH:
				srv_watch_readable(s);
				break;
			case EP_TRIGGER:
				srv_trigger_readable(s);
				break;
			case EP_FORKSTOP:
				srv_forkstop_readable(s);
				break;
			case EP_CONN:
				c = (struct conn *)t;
				if (evs[i].events & (EPOLLERR | EPOLLHUP) &&
				    !(evs[i].events & EPOLLIN))
					c->dead = true;
				if (evs[i].events & EPOLLIN)
					srv_conn_readable(s, c);
				if (evs[i].events & EPOLLOUT) {
					srv_conn_flush(s, c);
					/* Requests that waited for the
					 * responses to drain. */
					if (!c->dead && c->in_len &&
					    c->out.len == c->out_off) {
						srv_conn_handle_lines(s, c);
						srv_conn_flush(s, c);
					}
				}
				break;
			}
		}
		srv_conns_reap(s);
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
	s->start_ms = srv_now_ms();
	s->sig.kind = EP_SIGNAL;
	s->ev.kind = EP_EVENT;
	(void)ptd_memlimit_new(s->cfg.user_memory_limit, &s->mem);
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
	r = srv_listen_open(s, diag);
	if (r < 0)
		goto err;
	if ((r = srv_ep_add(s, &s->sig, EPOLLIN)) < 0 ||
	    (r = srv_ep_add(s, &s->ev, EPOLLIN)) < 0) {
		ptd_diagf(diag, r, "epoll: %s", strerror(-r));
		goto err;
	}
	for (i = 0; i < s->nlisten; i++) {
		r = srv_ep_add(s, &s->listen[i], EPOLLIN);
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
			srv_session_stop(ss, PTD_END_SHUTDOWN);
	srv_rules_free(s);
	while ((c = s->conns)) {
		s->conns = c->next;
		srv_conn_free(s, c);
	}
	while ((ss = s->sessions)) {
		s->sessions = ss->next;
		srv_session_free(ss);
	}
	while ((ss = s->starting)) {
		s->starting = ss->next;
		srv_session_free(ss);
	}
	srv_triggers_unload(s);
	srv_forkstop_unload(s);
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
