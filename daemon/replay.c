/* SPDX-License-Identifier: MIT */
/*
 * Replays of saved traces (see replay.h).
 *
 * Threads: the caller (the control loop) calls start, go, stop, stats and
 * free; the replay thread does everything else.  r->lock guards state,
 * go, fan and stop_reason; the counters are atomics.  The thread never
 * holds r->lock while it calls the sink or the fan-out.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/counter.h"
#include "common/strutil.h"
#include "daemon/replay.h"
#include "record/jsonw.h"

enum rp_state { RP_STARTING, RP_ACCEPTED, RP_REFUSED };

struct ptd_replay {
	pthread_t th;
	bool th_started;
	/* options (copies) */
	char *path, *sysroot, *buildid_dir, *kernel;
	struct ptd_input_opts in;
	bool lossless;
	unsigned wait_ms, stall_ms;
	size_t queue_size;
	uid_t uid;
	gid_t gid;
	gid_t *groups;
	size_t ngroups;
	struct ptd_session_sink sink;
	void (*decided)(void *ctx);	/* told when start is decided */
	void *decided_ctx;
	uint64_t started_ms;		/* when the thread was made */
	/* guarded by lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum rp_state state;
	int err;			/* REFUSED: why */
	struct ptd_diag diag;		/* REFUSED: the message */
	struct ptd_replay_info info;
	bool go;
	struct ptd_fanout *fan;
	int stop_reason;		/* 0, or a ptd_session_end_reason + 1 */
	atomic_bool stopping;		/* stop_reason is set: read without
					 * the lock for every record */
	/* The decode's calls_gate (decoder.h): opened for good once a
	 * subscriber has asked for call records, from the first that
	 * does; until then the call stack is not kept.  calls_open: this
	 * thread's copy, so that a record costs no look at the fan-out
	 * once it is open. */
	atomic_bool calls_gate;
	bool calls_open;
	/* The decode's ips_gate (decoder.h, runs of addresses): what the
	 * sink's ips_ready said after its last call. */
	atomic_bool ips_gate;
	const atomic_uint *kinds_seen;	/* ptd_fanout_kinds_seen(fan) */
	/* replay thread only: what the input said of itself as a whole
	 * (input.h notice), told again in the end message */
	struct ptd_diag notice;
	/* counters */
	atomic_uint threads;
	atomic_bool decoding;
	atomic_bool abandoned;		/* its subscribers all left */
	atomic_bool unwatched;		/* none came within wait_ms */
	_Atomic uint64_t bytes, insns, records;
	/* in.decode.jobs > 1: ptd_decode_stats.parts and serial_parts
	 * summed, and the first serial_why (a static string) */
	atomic_uint_fast64_t parts, serial_parts, at_once;
	_Atomic(const char *) serial_why;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- the thread's side ---- */

static int stop_reason(struct ptd_replay *r)
{
	int s;

	pthread_mutex_lock(&r->lock);
	s = r->stop_reason;
	pthread_mutex_unlock(&r->lock);
	return s;
}

/* The reader's cancel: a stop ends the input's verification too. */
static bool cancelled(void *ctx)
{
	return stop_reason(ctx) != 0;
}

/* The input is accepted (or refused, @err < 0): tell start.  False if
 * start had decided already (an undecided input counts as accepted after
 * PTD_REPLAY_START_MS): then a refusal must end the replay instead. */
static bool set_state(struct ptd_replay *r, int err,
		      const struct ptd_diag *diag)
{
	bool told = false;

	pthread_mutex_lock(&r->lock);
	if (r->state == RP_STARTING) {
		r->state = err < 0 ? RP_REFUSED : RP_ACCEPTED;
		r->err = err;
		if (diag)
			r->diag = *diag;
		pthread_cond_broadcast(&r->cond);
		told = true;
	}
	pthread_mutex_unlock(&r->lock);
	if (told && r->decided)
		r->decided(r->decided_ctx);
	return told;
}

/* Wait for go (true) or a stop before it (false). */
static bool wait_go(struct ptd_replay *r)
{
	bool go;

	pthread_mutex_lock(&r->lock);
	while (!r->go && !r->stop_reason)
		pthread_cond_wait(&r->cond, &r->lock);
	go = r->go;
	pthread_mutex_unlock(&r->lock);
	return go;
}

/* Wait (bounded) for the first subscriber, so that it sees the start.
 * False if none came: the replay then ends, as when every subscriber
 * has left, rather than decode for nobody. */
static bool wait_subscriber(struct ptd_replay *r)
{
	if (!r->wait_ms || ptd_fanout_wait_subscriber(r->fan, r->wait_ms))
		return true;
	/* cancelled: stop_reason is set; else nobody came */
	atomic_store(&r->unwatched, !stop_reason(r));
	return false;
}

/* Open the decode's call stack once a subscriber wants call records
 * (replay thread). */
static void calls_check(struct ptd_replay *r)
{
	if (!r->kinds_seen)
		r->kinds_seen = ptd_fanout_kinds_seen(r->fan);
	if (r->calls_open ||
	    !(atomic_load_explicit(r->kinds_seen, memory_order_relaxed) &
	      PTD_REC_BIT(PTD_REC_CALL)))
		return;
	r->calls_open = true;
	atomic_store_explicit(&r->calls_gate, true, memory_order_relaxed);
}

static int on_info(void *ctx, const struct ptd_input_info *info)
{
	struct ptd_replay *r = ctx;

	pthread_mutex_lock(&r->lock);
	r->info.kind = info->kind;
	r->info.pid = info->pid;
	r->info.nthreads = info->nthreads;
	pthread_mutex_unlock(&r->lock);
	(void)set_state(r, 0, NULL);
	if (!wait_go(r) || !wait_subscriber(r))
		return 1;
	/* the first subscriber's call records start with the trace */
	calls_check(r);
	return stop_reason(r) ? 1 : 0;
}

/* What goes before records are handed on (on_record, each slice of
 * on_records): a stop asked for; nobody left to deliver to (a replay has
 * no live producer to keep up with, so it ends rather than decode into
 * the void); a subscriber come for call records.  Returns 1 to stop. */
static int replay_gate(struct ptd_replay *r)
{
	if (atomic_load_explicit(&r->stopping, memory_order_relaxed) &&
	    stop_reason(r))
		return 1;
	if (ptd_fanout_abandoned(r->fan)) {
		atomic_store(&r->abandoned, !stop_reason(r));
		return 1;
	}
	if (!r->calls_open &&
	    (!r->kinds_seen ||
	     (atomic_load_explicit(r->kinds_seen, memory_order_relaxed) &
	      PTD_REC_BIT(PTD_REC_CALL))))
		calls_check(r);
	return 0;
}

static int on_record(void *ctx, const struct ptd_record *rec)
{
	struct ptd_replay *r = ctx;

	if (replay_gate(r))
		return 1;
	if (r->lossless &&
	    ptd_fanout_wait_room(r->fan, PTD_JSON_MAX_RECORD, r->stall_ms,
				 PTD_STALL_DROP) != PTD_ROOM_OK) {
		/* cancelled: stop_reason is set; else abandoned */
		atomic_store(&r->abandoned, !stop_reason(r));
		return 1;
	}
	if (rec->type == PTD_REC_INSN)
		ptd_counter_add(&r->insns, 1);
	ptd_counter_add(&r->records, 1);
	r->sink.record(r->sink.ctx, rec);
	return 0;
}

/* After a call of the sink: may addresses stand for insn records now?
 * (the decoder reads the gate after each of its calls) */
static void ips_refresh(struct ptd_replay *r)
{
	atomic_store_explicit(&r->ips_gate,
			      r->sink.ips_ready &&
				      r->sink.ips_ready(r->sink.ctx),
			      memory_order_relaxed);
}

/* The sink took @done of @n records, @insns of them insn records:
 * counted.  Fewer than @n: a wait for room ended without it -- cancelled
 * (stop_reason is set), else abandoned -- and the replay stops (1). */
static int took(struct ptd_replay *r, uint64_t insns, size_t done, size_t n)
{
	ptd_counter_add(&r->insns, insns);
	ptd_counter_add(&r->records, done);
	if (done == n)
		return 0;
	atomic_store(&r->abandoned, !stop_reason(r));
	return 1;
}

/* A run of addresses (decoder.h, opts.ips): what on_records does with
 * the insn records they stand for. */
static int on_ips(void *ctx, pid_t pid, pid_t tid, const uint64_t *ips,
		  size_t n)
{
	struct ptd_replay *r = ctx;
	size_t done;

	if (replay_gate(r))
		return 1;
	done = r->sink.ips(r->sink.ctx, pid, tid, ips, n,
			   r->lossless ? r->stall_ms : 0);
	if (took(r, done, done, n))
		return 1;
	ips_refresh(r);
	return 0;
}

/* A run of records (decoder.h, opts.batch): what on_record does once a
 * slice of them, the fan-out's wait for room (lossless) in the sink, per
 * record. */
static int on_records(void *ctx, const struct ptd_record *recs, size_t n)
{
	struct ptd_replay *r = ctx;

	if (!r->sink.records) {
		for (size_t i = 0; i < n; i++)
			if (on_record(ctx, &recs[i]))
				return 1;
		return 0;
	}
	/* a stop is seen within a slice, however many a part holds */
	for (size_t at = 0; at < n; at += PTD_DECODE_BATCH) {
		size_t k = n - at < PTD_DECODE_BATCH ? n - at
						     : PTD_DECODE_BATCH;
		size_t done, insns = 0;

		if (replay_gate(r))
			return 1;
		done = r->sink.records(r->sink.ctx, recs + at, k,
				       r->lossless ? r->stall_ms : 0);
		for (size_t i = 0; i < done; i++)
			insns += recs[at + i].type == PTD_REC_INSN;
		if (took(r, insns, done, k))
			return 1;
	}
	ips_refresh(r);
	return 0;
}

static void on_thread_done(void *ctx, pid_t tid,
			   const struct ptd_decode_stats *st, int err,
			   const struct ptd_diag *diag)
{
	struct ptd_replay *r = ctx;

	(void)tid;
	(void)err;
	(void)diag;
	atomic_fetch_add(&r->threads, 1);
	atomic_fetch_add(&r->bytes, st->bytes);
	atomic_fetch_add(&r->parts, st->parts);
	if (st->at_once)
		atomic_fetch_add(&r->at_once, 1);
	if (st->serial_parts) {
		const char *none = NULL;

		atomic_fetch_add(&r->serial_parts, st->serial_parts);
		(void)atomic_compare_exchange_strong(&r->serial_why, &none,
						     st->serial_why ? st->serial_why
								    : "?");
	}
}

static void on_notice(void *ctx, const struct ptd_diag *diag)
{
	struct ptd_replay *r = ctx;

	if (diag && diag->msg[0])
		r->notice = *diag;
}

/* How the replay ended, from the decode's result. */
static void end_of(struct ptd_replay *r, int res, size_t thread_errors,
		   const struct ptd_diag *diag, struct ptd_session_end *end)
{
	int stop = stop_reason(r);

	memset(end, 0, sizeof(*end));
	if (stop) {
		end->reason = (enum ptd_session_end_reason)(stop - 1);
		return;
	}
	if (atomic_load(&r->abandoned)) {
		end->reason = PTD_END_DETACHED;
		(void)snprintf(end->message, sizeof(end->message),
			       "every subscriber left");
		return;
	}
	if (atomic_load(&r->unwatched)) {
		end->reason = PTD_END_DETACHED;
		(void)snprintf(end->message, sizeof(end->message),
			       "nobody subscribed within wait_ms (%u ms): "
			       "nothing decoded", r->wait_ms);
		return;
	}
	if (res < 0) {
		end->reason = PTD_END_ERROR;
		(void)snprintf(end->message, sizeof(end->message), "%s",
			       diag->msg[0] ? diag->msg : ptd_strerror(res));
		return;
	}
	end->reason = PTD_END_EXITED;
	if (thread_errors)
		(void)snprintf(end->message, sizeof(end->message),
			       "end of the trace; %zu thread(s) ended early "
			       "(see the error records)", thread_errors);
	else
		(void)snprintf(end->message, sizeof(end->message),
			       "end of the trace");
	if (r->notice.msg[0]) {
		size_t len = strlen(end->message);

		/* cut to what is left: truncation is fine here */
		if (len + 2 < sizeof(end->message)) {
			memcpy(end->message + len, "; ", 2);
			ptd_strlcpy(end->message + len + 2, r->notice.msg,
				    sizeof(end->message) - len - 2);
		}
	}
}

static void *replay_main(void *arg)
{
	struct ptd_replay *r = arg;
	struct ptd_cred c = { r->uid, r->gid, r->groups, r->ngroups };
	struct ptd_input_sink isink = { on_info, on_record, on_thread_done,
					r, on_notice };
	struct ptd_diag diag = { "" };
	struct ptd_session_end end;
	size_t thread_errors = 0;
	int res;

	(void)pthread_setname_np(pthread_self(), "ptd-replay");
	/* Every file the decode opens is opened on this thread, as the
	 * client, and by ptd_file_open_regular (common/fileio.h): a FIFO or
	 * device put anywhere, at any time, is refused by name rather than
	 * block this thread (r->in.streams is false). */
	res = ptd_cred_become_reader(&c, &diag);
	if (res == 0) {
		atomic_store(&r->decoding, true);
		res = ptd_input_decode(r->path, &r->in, &isink, &thread_errors,
				       &diag);
		atomic_store(&r->decoding, false);
	}
	/* Refused before the reader described it: start says so -- unless
	 * start has counted it accepted meanwhile; then the end says so. */
	if (res < 0 && set_state(r, res, &diag))
		return NULL;
	(void)set_state(r, 0, NULL);
	if (!wait_go(r))
		return NULL;
	end_of(r, res, thread_errors, &diag, &end);
	r->sink.ended(r->sink.ctx, &end);
	return NULL;
}

/* ---- the caller's side ---- */

static void replay_free_mem(struct ptd_replay *r)
{
	free(r->path);
	free(r->sysroot);
	free(r->buildid_dir);
	free(r->kernel);
	free(r->groups);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r);
}

static int copy_opts(struct ptd_replay *r, const struct ptd_replay_opts *o)
{
	const struct ptd_cred *c = &o->creds;

	r->path = strdup(o->path);
	r->in = o->input;
	r->sysroot = o->input.sysroot ? strdup(o->input.sysroot) : NULL;
	r->buildid_dir = o->input.buildid_dir ? strdup(o->input.buildid_dir)
					      : NULL;
	r->kernel = o->input.kernel ? strdup(o->input.kernel) : NULL;
	r->in.sysroot = r->sysroot;
	r->in.buildid_dir = r->buildid_dir;
	r->in.kernel = r->kernel;
	r->in.cancel.fn = cancelled;
	r->in.cancel.ctx = r;
	r->in.streams = false;	/* a client's files: regular files only */
	r->in.decode.calls_gate = &r->calls_gate;
	r->in.decode.batch = on_records;
	r->in.decode.batch_of = on_record;
	r->in.decode.ips = on_ips;
	r->in.decode.ips_gate = &r->ips_gate;
	r->lossless = o->lossless;
	r->wait_ms = o->wait_ms;
	r->stall_ms = o->stall_ms ? o->stall_ms : PTD_REPLAY_STALL_MS;
	r->queue_size = o->queue_size;
	r->uid = c->uid;
	r->gid = c->gid;
	r->ngroups = c->ngroups;
	if (c->ngroups) {
		r->groups = calloc(c->ngroups, sizeof(gid_t));
		if (r->groups)
			memcpy(r->groups, c->groups,
			       c->ngroups * sizeof(gid_t));
	}
	if (!r->path || (o->input.sysroot && !r->sysroot) ||
	    (o->input.buildid_dir && !r->buildid_dir) ||
	    (o->input.kernel && !r->kernel) ||
	    (c->ngroups && !r->groups))
		return -ENOMEM;
	return 0;
}

static int check_opts(const struct ptd_replay_opts *o,
		      const struct ptd_session_sink *sink,
		      struct ptd_diag *diag)
{
	if (!o || !sink || !sink->record || !sink->ended)
		return -EINVAL;
	if (!o->path || o->path[0] != '/')
		return ptd_diagf(diag, -EINVAL,
				 "the trace path must be absolute, got '%s'",
				 o->path ? o->path : "");
	if (o->creds.ngroups > PTD_CRED_MAX_GROUPS ||
	    (o->creds.ngroups && !o->creds.groups))
		return ptd_diagf(diag, -EINVAL, "bad supplementary groups");
	if (o->lossless && o->queue_size < PTD_JSON_MAX_RECORD)
		return ptd_diagf(diag, -EINVAL,
				 "lossless needs the queue size (at least "
				 "%u bytes)", PTD_JSON_MAX_RECORD);
	return 0;
}

int ptd_replay_begin(const struct ptd_replay_opts *o,
		     const struct ptd_session_sink *sink,
		     struct ptd_replay **ret_replay, struct ptd_diag *diag)
{
	struct ptd_replay *r;
	int err;

	err = check_opts(o, sink, diag);
	if (err < 0)
		return err;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->sink = *sink;
	r->decided = o->decided;
	r->decided_ctx = o->decided_ctx;
	r->started_ms = now_ms();
	err = copy_opts(r, o);
	if (err == 0)
		err = -pthread_create(&r->th, NULL, replay_main, r);
	if (err < 0) {
		replay_free_mem(r);
		return ptd_diagf(diag, err, "cannot start a replay: %s",
				 strerror(-err));
	}
	r->th_started = true;
	*ret_replay = r;
	return 0;
}

int ptd_replay_started(struct ptd_replay *r, struct ptd_replay_info *ret_info,
		       struct ptd_diag *diag)
{
	int res;

	pthread_mutex_lock(&r->lock);
	/* Undecided for too long (a slow file system, a huge bundle to
	 * verify): accepted; a later refusal ends the replay with it. */
	if (r->state == RP_STARTING &&
	    now_ms() - r->started_ms >= PTD_REPLAY_START_MS)
		r->state = RP_ACCEPTED;
	switch (r->state) {
	case RP_STARTING:
		res = 0;
		break;
	case RP_REFUSED:
		res = r->err < 0 ? r->err : -EIO;
		*diag = r->diag;
		break;
	case RP_ACCEPTED:
	default:
		res = 1;
		*ret_info = r->info;
		break;
	}
	pthread_mutex_unlock(&r->lock);
	return res;
}

unsigned ptd_replay_start_left_ms(struct ptd_replay *r)
{
	uint64_t t = now_ms() - r->started_ms;

	return t >= PTD_REPLAY_START_MS ? 0
					: (unsigned)(PTD_REPLAY_START_MS - t);
}

int ptd_replay_start(const struct ptd_replay_opts *o,
		     const struct ptd_session_sink *sink,
		     struct ptd_replay **ret_replay,
		     struct ptd_replay_info *ret_info, struct ptd_diag *diag)
{
	struct ptd_replay *r;
	int res;

	res = ptd_replay_begin(o, sink, &r, diag);
	if (res < 0)
		return res;
	pthread_mutex_lock(&r->lock);
	while (r->state == RP_STARTING) {
		struct timespec ts;
		unsigned left = ptd_replay_start_left_ms(r);

		if (!left)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)(left / 1000u);
		ts.tv_nsec += (long)(left % 1000u) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		(void)pthread_cond_timedwait(&r->cond, &r->lock, &ts);
	}
	pthread_mutex_unlock(&r->lock);
	res = ptd_replay_started(r, ret_info, diag);
	if (res < 0) {
		ptd_replay_free(r);
		return res;
	}
	*ret_replay = r;
	return 0;
}

void ptd_replay_go(struct ptd_replay *r, struct ptd_fanout *fan)
{
	pthread_mutex_lock(&r->lock);
	r->fan = fan;
	r->go = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

void ptd_replay_stop(struct ptd_replay *r, enum ptd_session_end_reason reason)
{
	struct ptd_fanout *fan;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	if (!r->stop_reason)
		r->stop_reason = (int)reason + 1;
	atomic_store(&r->stopping, true);
	pthread_cond_broadcast(&r->cond);
	fan = r->fan;
	pthread_mutex_unlock(&r->lock);
	/* Wakes the thread waiting for a subscriber or for room (sticky: a
	 * wait that begins later ends at once).  The fan-out outlives the
	 * replay. */
	if (fan)
		ptd_fanout_cancel_waits(fan);
}

void ptd_replay_get_stats(struct ptd_replay *r, struct ptd_session_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->source = PTD_SOURCE_AUTO;
	ret->threads = atomic_load(&r->threads);
	ret->threads_live = atomic_load(&r->decoding) ? 1 : 0;
	ret->trace_bytes = atomic_load(&r->bytes);
	ret->insns = atomic_load(&r->insns);
	ret->records = atomic_load(&r->records);
	ret->parts = atomic_load(&r->parts);
	ret->serial_parts = atomic_load(&r->serial_parts);
	ret->serial_why = atomic_load(&r->serial_why);
	ret->threads_at_once = atomic_load(&r->at_once);
}

void ptd_replay_free(struct ptd_replay *r)
{
	if (!r)
		return;
	ptd_replay_stop(r, PTD_END_SHUTDOWN);
	if (r->th_started)
		(void)pthread_join(r->th, NULL);
	replay_free_mem(r);
}
