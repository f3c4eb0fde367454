/* SPDX-License-Identifier: MIT */
/*
 * What the control loop's files share (daemon/server.h is the outside's
 * view).  The loop is one thread; only the sinks (sessions.c) and the
 * record thread (record.c) run elsewhere, and they touch only what their
 * comments say.
 *
 *   loop.c      ptd_server_new/run/free, wake-ups, shutdown, reaping
 *   listen.c    listening sockets: systemd activation or our own socket
 *   conn.c      connections: reading requests, writing responses and
 *               subscriber streams, accepting
 *   pending.c   requests answered later (struct srv_pending)
 *   sessions.c  srv_session: the decode threads' sinks, lookup, limits
 *   commands.c  dispatch and the quick commands (list, status,
 *               subscribe, snapshot, version, ping)
 *   attach.c    attach and detach
 *   replay.c    replay (saved traces as sessions)
 *   record.c    record: a recorded session's bundle, its save thread
 *   watch.c     watch and unwatch: rules whose matching execs (the BPF
 *               exec watcher, daemon/watch.h) become sessions
 *   rulesub.c   a rule's subscribers: every session it starts in one
 *               stream, through a tagged subscriber of each session
 *   trigger.c   triggers: uprobes on a session's process (daemon/
 *               trigger.h), the trigger command, what a hit does
 *   symbols.c   a session's symbols: read with its client's rights,
 *               charged to its memory, failures as error records
 *   children.c  options.children: a traced process's children become
 *               sessions of their own, started as a rule's match is;
 *               for intel_pt, stopped by the BPF fork stopper
 *               (daemon/forkstop.h)
 */
#ifndef PTD_DAEMON_SERVER_SRV_H
#define PTD_DAEMON_SERVER_SRV_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/diag.h"
#include "common/fileio.h"
#include "daemon/auth.h"
#include "daemon/config.h"
#include "daemon/fanout.h"
#include "daemon/forkstop.h"
#include "daemon/memlimit.h"
#include "daemon/proto.h"
#include "daemon/replay.h"
#include "daemon/server.h"
#include "daemon/session.h"
#include "daemon/trigger.h"
#include "daemon/watch.h"
#include "swpt/tracer.h"
#include "x86/insn.h"

#define MAX_LISTEN 4

enum ep_kind { EP_LISTEN, EP_SIGNAL, EP_EVENT, EP_CONN, EP_WATCH,
	       EP_TRIGGER, EP_FORKSTOP };

struct ep_tag {
	enum ep_kind kind;
	int fd;
};

struct conn;
struct srv_record;
struct srv_symbols;
struct ptd_symbols;
struct ptd_symbols_stats;

/* A request answered later, once a slow step is decided (attach, detach,
 * snapshot, replay, record): the connection waiting for the response
 * (NULL once it is gone) and its request's id.  While a connection is
 * held, it reads no further request (conn.waiting); the answer queues the
 * response and handles the requests that waited (pending.c). */
struct srv_pending {
	struct conn *conn;
	cJSON *id;
};

/* One subscriber's share of a snapshot (the snapshot response). */
struct srv_snap_sub {
	unsigned id;
	uint64_t sent, lost;
	bool cut;		/* cut off: it stalled (bye "stalled") */
};

/* A trigger's hit waiting for its snapshot (trigger.c). */
struct srv_hit {
	uint32_t trigger;
	pid_t tid;
	uint64_t ip;
	uint64_t ktime_ns;		/* CLOCK_MONOTONIC */
	uint64_t wall_ns;		/* CLOCK_REALTIME, 0: unknown */
	uint64_t seq;			/* the snapshot it takes */
};

#define SRV_HITQ 64			/* hits queued per session */

/* A start/stop trigger's instruction in the process (trigger.c). */
struct srv_gate {
	uint64_t ip;
	uint32_t trigger;
	bool start;
};

#define SRV_GATES 16			/* start/stop triggers per session */

struct srv_gate_thread {
	pid_t tid;
	bool on;
};

/* A child process refused a session (children.c), for the parent
 * session's stream. */
struct srv_child_note {
	pid_t pid;
	int code;
	char detail[PTD_DIAG_MAX + 512];
};

#define SRV_CHILD_NOTES 8		/* waiting for the decode thread */

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
	/* options.counters (attach), "counters" (replay): the exact counts
	 * its decode thread keeps over all its threads (NULL: none); that
	 * thread alone touches it, and gives the counters snapshots its
	 * subscribers ask for (sessions.c), xt_tick counting instructions
	 * between two looks at the clock */
	struct ptd_counters *xt;
	unsigned xt_tick;
	/* A counters request waiting for the decode thread (loop: xt_busy,
	 * xt_wait; xt_top set before xt_asked is, release): the thread
	 * renders the lines into xt_text (xt_len bytes, xt_err) and sets
	 * xt_ready (release); srv_counters_answer answers. */
	bool xt_busy;
	struct srv_pending xt_wait;
	uint32_t xt_top;
	atomic_bool xt_asked, xt_ready;
	char *xt_text;
	size_t xt_len, xt_cap;
	int xt_err;
	bool stopping;			/* detach/shutdown asked */
	/* A detach waiting for the session's end, i.e. for every thread to
	 * be released (loop only). */
	struct srv_pending detach;
	/* Set by the decode thread (release) after `end` is written. */
	atomic_bool ended;
	struct ptd_session_end end;
	bool reaped;			/* the loop saw the end, freed s */
	struct ptd_session_stats last;	/* stats at the end */
	uint64_t ended_at_ms;
	enum ptd_session_mode mode;
	bool per_cpu;			/* attach's options.per_cpu */
	char *filter;			/* attach's options.filter, or NULL */
	/* A snapshot asked for and not answered yet (loop only; snap_busy
	 * stays set when its connection has gone). */
	bool snap_busy;
	struct srv_pending snap;
	/* Written by the decode thread before snap_ready (release). */
	struct ptd_snapshot_info snap_info;
	atomic_bool snap_ready;
	char marker[PTD_DIAG_MAX * 6 + 512];	/* decode thread only */
	/* A snapshot's records are paced (sessions.c): the decode thread
	 * waits for room in every subscriber's queue, cutting off one that
	 * reads nothing for stall_ms.  Decode thread only, but stall_ms and
	 * max_subs, set before it starts. */
	bool pacing;
	unsigned stall_ms;
	unsigned max_subs;
	struct ptd_subscriber_stats *snap_base;	/* at the snapshot's begin */
	unsigned snap_nbase;
	struct ptd_subscriber_stats *snap_now;	/* at its end */
	/* What each subscriber there at the snapshot's end was sent and lost
	 * of it (snap_now less snap_base); written with snap_info. */
	struct srv_snap_sub *snap_subs;
	unsigned snap_nsubs;
	/* A replay (kind "replay"): rp instead of s; the trace's path and
	 * kind. */
	struct ptd_replay *rp;
	char *path;
	/* While its input is not yet accepted (on ptd_server.starting, not
	 * yet a session): the request waiting for the answer. */
	struct srv_pending start;
	enum ptd_input_kind input_kind;
	bool lossless;
	unsigned jobs;			/* replay: the request's "jobs"; a
					 * snapshot session: options.jobs; 0
					 * none */
	/* options.record: where the session's capture is spooled (ptd's own
	 * directory, removed with the session), and the record request
	 * (loop only; record.c). */
	char *spool;
	struct srv_record *rec;
	/* A live session whose attach is under way (loop only; see
	 * srv_cmd_attach): listed as "attaching" until ptd_session_started
	 * decides, then answered to the attach request.  pidfd pins the
	 * process meanwhile (0 once decided), peer is who asked (the
	 * permission rule is checked again with it once the target is
	 * seized). */
	bool attaching;
	struct srv_pending attach;
	int pidfd;
	struct ptd_peer peer;
	/* What the session charged to its owner (memlimit.h): given back
	 * when its threads are freed. */
	struct ptd_memacct acct;
	/* Started by watch rule @rule (0: by an attach): the process was
	 * stopped by the exec watcher (a SIGSTOP), and stop_pidfd pins it
	 * until it is sent the SIGCONT that lets it run on -- once every
	 * thread is seized, or when the session is refused (0: none;
	 * continued: sent). */
	uint64_t rule;
	int stop_pidfd;
	atomic_bool continued;
	/* attach's options.step "single" (trigger.c: what a software
	 * source may have a uprobe on) */
	bool single_step;
	/* Triggers' hits waiting for a snapshot each, in order (loop only),
	 * and the hit whose snapshot is being taken: snap_hit_set is set
	 * by the loop before it asks for the snapshot, read by the decode
	 * thread at the snapshot's begin (the trigger record), cleared by
	 * the loop once the snapshot is answered. */
	struct srv_hit hitq[SRV_HITQ];
	unsigned hitq_head, hitq_n;
	struct srv_hit snap_hit;
	bool snap_hit_set;
	/* start/stop triggers (trigger.c): the instructions where each
	 * thread's records begin and end, set by the loop, read by the
	 * decode thread (sink_record), under gate_lock (gate_init: made);
	 * each thread's state (decode thread only). */
	pthread_mutex_t gate_lock;
	atomic_bool gate_init;
	atomic_uint ngates;
	struct srv_gate gates[SRV_GATES];
	struct srv_gate_thread *gate_th;
	size_t ngate_th, capgate_th;
	char gate_line[256];
	/* Symbols (attach's options.symbols, replay's "symbols"; symbols.c),
	 * NULL: none.  Freed with the session's threads; sym_stats keeps
	 * their counts then. */
	struct srv_symbols *sym;
	bool had_symbols;
	uint64_t sym_files, sym_bytes, sym_failures;
	/* options.children (children.c): the session whose process created
	 * this one's (0: none); the request its children's attaches copy
	 * (NULL: children are not followed); under kid_lock (kid_init:
	 * made): the children the source (intel_pt: the fork stopper)
	 * reported, not yet taken by the loop, and the refusals waiting for
	 * the decode thread (notes); the loop's counts. */
	uint64_t parent;
	struct ptd_request *creq;
	pthread_mutex_t kid_lock;
	bool kid_init;
	pid_t *kids;
	size_t nkids;
	uint64_t kids_lost;
	struct srv_child_note notes[SRV_CHILD_NOTES];
	size_t nnotes;
	uint64_t notes_dropped;
	uint64_t children_started, children_refused;
	/* intel_pt: its pid is followed by the fork stopper (the loop's
	 * forkstop, cookie: the session's id) from before its trace starts
	 * until it ends */
	bool forkstop_followed;
	/* ... and the children it let go untraced, as last seen */
	uint64_t children_missed;
	char last_child_refusal[PTD_DIAG_MAX + 512];
	/* With symbols: its owner's groups, which its children's symbols
	 * are read with (symbols.c; the connection they came from may be
	 * gone when a child comes). */
	gid_t *groups;
	size_t ngroups;
};

/* A trigger (trigger.c): a uprobe on @ss's process. */
struct srv_trigger {
	struct srv_trigger *next;
	uint32_t id;
	struct srv_session *ss;
	uid_t owner;
	enum ptd_trigger_action action;
	char *text;			/* as given */
	bool tracepoint;		/* a kernel tracepoint: */
	char tp_category[PTD_TRIGGER_TP_NAME_MAX + 1];
	char tp_name[PTD_TRIGGER_TP_NAME_MAX + 1];
	char *file;			/* else the mapped file's path */
	char symbol[PTD_TRIGGER_SYMBOL_MAX + 1];	/* "" for an offset */
	uint64_t offset;		/* file offset */
	struct ptd_swpt_uprobe site;	/* the file, the instruction */
	enum ptd_x86_kind kind;		/* the instruction's */
	bool nop5;			/* a 5-byte NOP */
	int fd;				/* the file, until installed */
	struct ptd_uprobe *probe;	/* NULL until installed */
	uint64_t vaddr;			/* start/stop: the instruction's
					 * address when resolved */
	bool told_source;		/* ptd_session_uprobe added it */
	bool gated;			/* start/stop: its gate is in its
					 * session (trigger.c gate_set) */
	uint64_t hits, snapshots, dropped;
};

/* A watch rule (watch.c): what it matches, the attach it makes of every
 * process that matches, whose it is. */
struct srv_rule {
	struct srv_rule *next;
	uint64_t id;
	unsigned slot;			/* in the exec watcher */
	struct conn *conn;		/* its owner's connection: the rule
					 * ends with it */
	struct ptd_peer peer;
	struct ptd_request req;		/* exe/comm/uid, wait_ms, options */
	uint64_t started;		/* sessions started */
	uint64_t refused;		/* matches that became no session */
	char last_refusal[PTD_DIAG_MAX + 512];
};

/* A rule subscriber's share of one session (rulesub.c): a tagged
 * subscriber of the session's fan-out and what it charged. */
struct srv_rule_member {
	struct srv_rule_member *next;
	struct srv_session *ss;
	struct ptd_subscriber *sub;
	struct ptd_memacct acct;
	bool taken;			/* some of its bytes were written */
};

/* A subscriber of a watch rule (rulesub.c): the connection it streams
 * to, its filter (each member's), the sessions it follows, its own lines
 * (hello, sessions not followed, bye). */
struct srv_rulesub {
	struct srv_rulesub *next;	/* ptd_server.rulesubs */
	struct conn *c;
	uint64_t rule;
	struct ptd_filter filter;
	struct srv_rule_member *members;
	struct srv_rule_member *cur;	/* a line of it written in part */
	struct ptd_buf lines;
	size_t lines_off;
	const char *end;		/* why the rule ended; NULL: it runs */
	bool bye_queued;
	uint64_t sessions, sent, lost;	/* for the bye */
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
	struct srv_rulesub *rsub;	/* or a watch rule's subscriber */
	bool waiting;			/* held by a srv_pending: no
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
	/* The exec watcher, loaded by the first watch request (NULL until
	 * then, or where it cannot be loaded), its ring buffer in epoll, and
	 * the rules. */
	struct ptd_watcher *watcher;
	struct ep_tag watch;
	struct srv_rule *rules;
	uint64_t next_rule_id;
	struct srv_rulesub *rulesubs;
	/* Triggers: their BPF program, loaded with the first one (NULL
	 * until then, or where it cannot be loaded), its ring buffer in
	 * epoll, and every session's triggers. */
	struct ptd_triggers *trig;
	struct ep_tag trig_ep;
	/* The fork stopper (children with the intel_pt source), loaded by
	 * the first session that needs it (NULL until then, or where it
	 * cannot be loaded), its ring buffer in epoll; kept until exit. */
	struct ptd_forkstop *forkstop;
	struct ep_tag forkstop_ep;
	struct srv_trigger *triggers;
	uint32_t next_trigger_id;
};

typedef void srv_cmd_fn(struct ptd_server *s, struct conn *c,
			const struct ptd_request *req);

/* loop.c */
uint64_t srv_now_ms(void);

/* listen.c: open the listening sockets (ptd_server_new says how), close
 * them (shutdown: no new client; our socket removed). */
int srv_ep_add(struct ptd_server *s, struct ep_tag *t, uint32_t events);
int srv_listen_open(struct ptd_server *s, struct ptd_diag *diag);
void srv_listen_close(struct ptd_server *s);

/* conn.c */
void srv_conn_flush(struct ptd_server *s, struct conn *c);
void srv_conn_handle_lines(struct ptd_server *s, struct conn *c);
void srv_conn_readable(struct ptd_server *s, struct conn *c);
void srv_conn_free(struct ptd_server *s, struct conn *c);
/* send() without blocking: bytes sent (0: the socket is full) or -errno
 * (the peer is gone). */
ssize_t srv_send_some(int fd, const char *data, size_t len);
void srv_conns_reap(struct ptd_server *s);
void srv_conns_accept(struct ptd_server *s, int lfd);
/* The replies: @c NULL (a session a rule starts) answers nobody; the
 * last error so answered is srv_reply_quiet_error()'s (loop only). */
void srv_reply_ok(struct conn *c, const cJSON *id, cJSON *result);
const char *srv_reply_quiet_error(void);
void srv_reply_error(struct conn *c, const cJSON *id, const char *code,
		     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void srv_reply_verror(struct conn *c, const cJSON *id, const char *code,
		      const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));
int srv_peer_groups(int fd, gid_t **ret);

/* pending.c: keep the request's id (-ENOMEM), hold the connection (its
 * later requests wait); both at once (an id that cannot be kept is
 * answered as null, as a request without one).  The answers reply to the
 * connection if it is still there, then handle the requests that waited;
 * they take @result and forget the id either way.  drop: @c is going
 * away.  clear: forget all (nothing answered).  move: the request taken
 * out of @p (to be answered once what held it is freed, as its memory is
 * given back before the requests that waited are handled). */
int srv_pending_keep_id(struct srv_pending *p, const cJSON *id);
void srv_pending_hold(struct srv_pending *p, struct conn *c);
void srv_pending_wait(struct srv_pending *p, struct conn *c,
		      const cJSON *id);
void srv_pending_ok(struct ptd_server *s, struct srv_pending *p,
		    cJSON *result);
void srv_pending_error(struct ptd_server *s, struct srv_pending *p,
		       const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void srv_pending_drop(struct srv_pending *p, const struct conn *c);
void srv_pending_clear(struct srv_pending *p);
struct srv_pending srv_pending_move(struct srv_pending *p);

/* sessions.c */
void srv_wake(void *ctx);
void srv_session_sink(struct srv_session *ss, bool snapshots,
		      struct ptd_session_sink *ret_sink);
struct srv_session *srv_session_find_or_refuse(struct ptd_server *s,
					       struct conn *c,
					       const struct ptd_request *req);
const char *srv_session_state(const struct srv_session *ss);
void srv_session_stats(struct srv_session *ss, struct ptd_session_stats *st);
bool srv_refuse_over_session_limit(struct ptd_server *s, struct conn *c,
				   const struct ptd_peer *peer,
				   const struct ptd_request *req);
struct srv_session *srv_session_find_ready(struct ptd_server *s,
					   struct conn *c,
					   const struct ptd_request *req);
bool srv_memory_refused(struct ptd_server *s, struct conn *c,
			const struct ptd_peer *peer,
			const struct ptd_request *req, struct ptd_memacct *a,
			uint64_t bytes, const char *what);
void srv_session_stop(struct srv_session *ss, enum ptd_session_end_reason why);
void srv_session_release(struct srv_session *ss);
void srv_session_unlink(struct srv_session **list, struct srv_session *ss);
void srv_session_free(struct srv_session *ss);
void srv_sessions_forget_conn(struct ptd_server *s, const struct conn *c);

/* commands.c */
void srv_dispatch(struct ptd_server *s, struct conn *c,
		  const struct ptd_request *req);
void srv_snapshots_answer(struct ptd_server *s);
/* sessions.c: a session's counts as counters lines into ss->xt_text, on
 * its decode thread (or the loop's, once it has ended) */
int srv_counters_render(struct srv_session *ss, uint32_t top);
/* ss->xt for options.counters, its growth charged to ss->acct (a growth
 * refused: the instructions past it are uncounted, as in a full table).
 * 0 or -ENOMEM. */
int srv_counters_new(struct srv_session *ss);
void srv_counters_answer(struct ptd_server *s);

/* attach.c; srv_attach_begin: the attach of @req->pid for @peer (@c:
 * the connection waiting for its answer, NULL for a rule's or a child's;
 * @rule, @stop_pidfd (a process held by a SIGSTOP, continued once
 * seized) and @parent: srv_session's), the session attaching, or NULL
 * when it was refused (answered to @c; @stop_pidfd is then the
 * caller's). */
srv_cmd_fn srv_cmd_attach, srv_cmd_detach;
struct srv_session *srv_attach_begin(struct ptd_server *s, struct conn *c,
				     const struct ptd_peer *peer,
				     const struct ptd_request *req,
				     uint64_t rule, int stop_pidfd,
				     uint64_t parent);
void srv_attaches_answer(struct ptd_server *s);
void srv_detaches_answer(struct ptd_server *s);

/* replay.c */
srv_cmd_fn srv_cmd_replay;
void srv_replays_answer(struct ptd_server *s);
int srv_replays_timeout(const struct ptd_server *s);
/* @req's jobs (a replay's, an attach's options.jobs, named @field) past
 * max_decode_jobs: answered bad_request; true. */
bool srv_jobs_refused(struct ptd_server *s, struct conn *c,
		      const struct ptd_request *req, const char *field);
/* A replay's "decoder" and "jobs" into @o (replay response, list, status). */
void srv_replay_decode_summary(const struct srv_session *ss, cJSON *o);

/* record.c: options.record's spool (attach), the record command; start:
 * @ss has ended, write its bundle if asked; settled: no record request
 * waits for its bundle; forget: the session is being freed. */
srv_cmd_fn srv_cmd_record;
int srv_record_spool(struct ptd_server *s, struct srv_session *ss,
		     struct ptd_session_opts *o, struct ptd_diag *diag);
void srv_record_start(struct srv_session *ss);
bool srv_record_settled(const struct srv_session *ss);
void srv_record_status(const struct srv_session *ss, cJSON *res);
void srv_record_drop_conn(struct srv_session *ss, const struct conn *c);
void srv_records_answer(struct ptd_server *s);
void srv_record_forget(struct srv_session *ss);

/* watch.c: the commands; readable: matches wait in the ring buffer;
 * forget_conn: @c's rules end; list: the rules @c may see, into @res;
 * free: every rule and the watcher (shutdown); continue: let a stopped
 * process of @ss run on (at most once). */
srv_cmd_fn srv_cmd_watch, srv_cmd_unwatch;
void srv_watch_readable(struct ptd_server *s);
/* A rule's session, a child's, on its start thread (opts.prepare): 0
 * once process @pid is in its stop (@where: "at the exec", "after its
 * fork"), or -ESRCH / -ETIMEDOUT with why. */
int srv_watch_wait_stopped(const struct ptd_server *s, pid_t pid,
			   const char *where, struct ptd_diag *diag);
/* A rule's session whose start was refused: counted in the rule's
 * refused (if the rule is still there), @why its last_refusal. */
void srv_watch_refused(struct ptd_server *s, uint64_t rule, pid_t pid,
		       const char *why);
/* The connection of rule @rule's owner (its groups: SO_PEERGROUPS, as an
 * attach takes them from its own), or -1 (no such rule). */
int srv_rule_owner_fd(const struct ptd_server *s, uint64_t rule);
void srv_rules_forget_conn(struct ptd_server *s, const struct conn *c);
void srv_rules_list(struct ptd_server *s, const struct conn *c, cJSON *res);
void srv_rules_free(struct ptd_server *s);
void srv_watch_continue(struct srv_session *ss);

/* children.c: copy/free: a request kept beyond its answer (a rule's, a
 * session's for its children), with copies of what it points to (free
 * what a failed copy made); init: @ss follows children with @req's
 * options (-ENOMEM); opts: the session's child callback; start (loop):
 * the children reported, each a session or refused; refused: child @pid
 * of session @parent not traced (@err, 0: from @why's code) -- logged,
 * counted, reported in the parent's stream; report (decode thread):
 * those refusals as error records; status/counts: into list and status;
 * free: @ss goes (children not taken are continued). */
extern const char srv_children_stop_note[];
int srv_request_copy(struct ptd_request *dst, const struct ptd_request *req);
void srv_request_free(struct ptd_request *req);
int srv_children_init(struct srv_session *ss, const struct ptd_request *req);
/* A child's session @ss (of session @parent) takes the groups its parent
 * kept, for its symbols: 0, or -ENOENT/-ENOMEM with @diag. */
int srv_children_inherit_groups(struct ptd_server *s, struct srv_session *ss,
				uint64_t parent, struct ptd_diag *diag);
/* A copy of @n groups into *ret (malloc'd, even for none): n or -ENOMEM. */
int srv_groups_copy(const gid_t *groups, size_t n, gid_t **ret);
void srv_children_opts(struct srv_session *ss, struct ptd_session_opts *o);
void srv_children_start(struct ptd_server *s);
/* Children of @ss reported and not yet started (loop). */
bool srv_children_pending(struct srv_session *ss);
void srv_child_refused(struct ptd_server *s, uint64_t parent, pid_t pid,
		       int err, const char *why);
void srv_children_report(struct srv_session *ss);
void srv_children_status(const struct srv_session *ss, cJSON *o);
void srv_children_counts(const struct srv_session *ss, cJSON *o);
void srv_children_free(struct srv_session *ss);
/* intel_pt with children (attach and watch): refused (answered, false)
 * with per_cpu, or where the fork stopper cannot be loaded; else it is
 * loaded. */
bool srv_children_intelpt_ready(struct ptd_server *s, struct conn *c,
				const struct ptd_request *req);
/* @ss (intel_pt, with children) follows its pid's children from now:
 * 0, or refused with a message in @diag (-PTD_ELIMIT: another session
 * does, or too many are followed). */
int srv_children_follow(struct ptd_server *s, struct srv_session *ss,
			struct ptd_diag *diag);
/* @ss's process is no longer followed (its end; idempotent). */
void srv_children_unfollow(struct srv_session *ss);
/* The fork stopper's reports, each a child for its session (loop). */
void srv_forkstop_readable(struct ptd_server *s);
/* At exit: the fork stopper goes, the children it stopped continued. */
void srv_forkstop_unload(struct ptd_server *s);

/* rulesub.c: subscribe {"rule":N} (@f compiled from the request); join:
 * a new session of a rule, before its decode thread starts; forget: @ss
 * goes without its session_end (refused, freed), @why; rule_ended: no
 * new session joins, the bye (@reason) follows the last session's end;
 * shutdown: every rule stream ends so; write: the loop writes @c's
 * stream (true: more to write once the socket has room; marks @c dead
 * when the bye is written or the peer is gone); free: @c goes; count:
 * the rule's subscribers. */
void srv_rulesub_subscribe(struct ptd_server *s, struct conn *c,
			   const struct ptd_request *req,
			   const struct ptd_filter *f);
void srv_rulesubs_join(struct ptd_server *s, struct srv_session *ss);
void srv_rulesubs_forget_session(struct ptd_server *s, struct srv_session *ss,
				 const char *why);
void srv_rulesubs_rule_ended(struct ptd_server *s, uint64_t rule,
			     const char *reason);
void srv_rulesubs_shutdown(struct ptd_server *s);
bool srv_rulesub_write(struct ptd_server *s, struct conn *c);
void srv_rulesub_free(struct ptd_server *s, struct conn *c);
unsigned srv_rulesubs_count(const struct ptd_server *s, uint64_t rule);

/* trigger.c: the trigger command; attach_check: attach's
 * options.triggers resolved against the process before it is attached
 * (refused: answered, false); install: the session is tracing, its
 * triggers' uprobes go in (refused: answered, false); readable: hits
 * wait in the ring buffer; pump: the next queued hit's snapshot, if none
 * is being taken; drop: @ss's triggers go (its end); status: @ss's
 * triggers into @res; unload: the program goes (shutdown). */
srv_cmd_fn srv_cmd_trigger;
bool srv_triggers_attach_check(struct ptd_server *s, struct conn *c,
			       const struct ptd_request *req,
			       struct srv_session *ss);
int srv_triggers_install(struct ptd_server *s, struct srv_session *ss,
			 struct ptd_diag *diag);
void srv_trigger_readable(struct ptd_server *s);
void srv_trigger_pump(struct srv_session *ss);
void srv_triggers_drop(struct ptd_server *s, struct srv_session *ss);
void srv_triggers_status(struct ptd_server *s, const struct srv_session *ss,
			 cJSON *res);
void srv_triggers_unload(struct ptd_server *s);
/* sessions.c's sink_record: whether @rec of @ss passes its start/stop
 * triggers (decode thread; writes their trigger records). */
bool srv_gate_pass(struct srv_session *ss, const struct ptd_record *rec);
/* symbols.c.  Make @ss's symbols (ss->sym): a live session's (@live_pid
 * > 0: its files opened with @peer's rights and groups, taken from the
 * connection @fd; perf maps believed when @live_pid's owner or root owns
 * them) or a replay's (0: its thread reads as the client already; perf
 * maps of @peer's uid or root).  Returns 0, -ENOMEM, -errno with @diag. */
int srv_symbols_new(struct ptd_server *s, struct srv_session *ss, int fd,
		    const struct ptd_peer *peer, pid_t live_pid,
		    struct ptd_diag *diag);
struct ptd_symbols *srv_symbols_of(const struct srv_session *ss);
/* Decode thread, before @rec goes to the fan-out: an error record for
 * each file whose symbols failed since the last call. */
void srv_symbols_report(struct srv_session *ss, const struct ptd_record *rec);
/* "symbols": {"files","bytes","failures"} into @o when @ss has them. */
void srv_symbols_summary(const struct srv_session *ss, cJSON *o);
/* Keep the counts in ss->sym_* and free ss->sym (NULL is fine). */
void srv_symbols_free(struct srv_session *ss);

#endif
