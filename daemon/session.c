/* SPDX-License-Identifier: MIT */
/*
 * A tracing session: the start thread sets the session up and starts its
 * trace source (source/source.h: intel_pt or software), then goes on as the
 * decode thread, which drains the source round by round into its decoders,
 * hands the records to the sink (the daemon's fanout), takes the snapshots
 * asked for, and ends the session.
 */
#include "daemon/session.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/counter.h"
#include "common/fileio.h"
#include "perf/pmu.h"
#include "source/source.h"

struct ptd_session {
	struct ptd_session_opts o;
	struct ptd_config cfg;
	struct ptd_session_sink sink;
	enum ptd_source_kind source;
	struct ptd_pt_pmu pmu;		/* intel_pt: the one probed */
	struct ptd_source *src;
	char *capture_dir;
	char dir[256];			/* code copies, snapshot files */

	pthread_t dec;
	bool dec_started;
	int wake_fd;
	atomic_int stop;		/* detach */
	atomic_int reason;		/* why stop was asked */

	/* start handshake.  decided: set by the start thread once the
	 * source is tracing and nothing else can fail (1), or once the
	 * start failed (-1, start_err and start_diag say why). */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int decided;
	int start_err;
	struct ptd_diag start_diag;

	/* snapshot mode.  Guarded by lock: snap_pending (a request taken,
	 * not yet answered), snap_closed (no more requests: the decode
	 * thread is finishing), snap_seq (the last seq handed out). */
	size_t snap_size;
	bool snap_pending, snap_closed;
	uint64_t snap_seq;
	pid_t snap_upto_tid;		/* ptd_session_snapshot_upto's */
	int64_t snap_upto_ns;
	struct ptd_snapshot_info *snap_info;	/* decode thread only */
	/* Decode thread only: a snapshot is being decoded; a stop came
	 * during it (its decode was cut short). */
	bool snapping, snap_stopped;
	atomic_uint_fast64_t snapshots;
	/* opts.jobs > 1: the snapshots' parts (ptd_session_stats) */
	atomic_uint_fast64_t parts, serial_parts;
	_Atomic(const char *) serial_why;	/* the first (static) */

	/* memory limit (opts.acct): what a later thread costs, the threads
	 * charged at attach not yet begun, the threads refused.  refused:
	 * tids whose error record is not yet delivered (under lock). */
	uint64_t thread_cost;
	atomic_uint prepaid, threads_refused;
	pid_t *refused;
	size_t nrefused;

	/* counters */
	_Atomic uint64_t insns, records;
	atomic_bool ended;
	atomic_bool end_called;
};

const char *ptd_session_mode_name(enum ptd_session_mode m)
{
	switch (m) {
	case PTD_MODE_FULL:
		return "full";
	case PTD_MODE_SNAPSHOT:
		return "snapshot";
	}
	return "?";
}

int ptd_session_mode_parse(const char *name)
{
	if (!name)
		return -PTD_EFORMAT;
	if (!strcmp(name, "full"))
		return PTD_MODE_FULL;
	if (!strcmp(name, "snapshot"))
		return PTD_MODE_SNAPSHOT;
	return -PTD_EFORMAT;
}

const char *ptd_session_end_name(enum ptd_session_end_reason r)
{
	switch (r) {
	case PTD_END_EXITED:
		return "exited";
	case PTD_END_DETACHED:
		return "detached";
	case PTD_END_LIMIT:
		return "limit";
	case PTD_END_SHUTDOWN:
		return "shutdown";
	case PTD_END_ERROR:
		return "error";
	case PTD_END_STALLED:
		return "stalled";
	}
	return "?";
}

/* ---- memory limit (opts.acct) ---- */

/* May thread @tid be traced: one charged at attach, or its charge taken
 * now?  Returns 1 yes, 0 refused (queued for its error record), -ENOMEM. */
static int thread_charge(void *ctx, pid_t tid)
{
	struct ptd_session *s = ctx;
	unsigned n = atomic_load(&s->prepaid);
	pid_t *v;

	if (!s->o.acct)
		return 1;
	while (n > 0)
		if (atomic_compare_exchange_weak(&s->prepaid, &n, n - 1))
			return 1;
	if (ptd_memacct_charge(s->o.acct, s->thread_cost, NULL) == 0)
		return 1;
	atomic_fetch_add(&s->threads_refused, 1);
	(void)pthread_mutex_lock(&s->lock);
	v = realloc(s->refused, (s->nrefused + 1) * sizeof(*v));
	if (v) {
		s->refused = v;
		s->refused[s->nrefused++] = tid;
	}
	(void)pthread_mutex_unlock(&s->lock);
	return v ? 0 : -ENOMEM;
}

/* Thread @tid was charged and is gone, decoded and freed: its charge
 * comes back (whether it was prepaid at attach or taken when it began,
 * it cost the same). */
static void thread_uncharge(void *ctx, pid_t tid)
{
	struct ptd_session *s = ctx;

	(void)tid;
	ptd_memacct_give_back(s->o.acct, s->thread_cost);
}

/* Snapshot mode: an ended thread's last trace, @bytes, kept for the
 * snapshots (source.h, host.keep): charged as what it is. */
static int window_charge(void *ctx, uint64_t bytes)
{
	struct ptd_session *s = ctx;

	return ptd_memacct_charge(s->o.acct, bytes, NULL);
}

static void window_give_back(void *ctx, uint64_t bytes)
{
	struct ptd_session *s = ctx;

	ptd_memacct_give_back(s->o.acct, bytes);
}

static int deliver(void *ctx, const struct ptd_record *rec);
static void wake(struct ptd_session *s);

/* Decode thread: an error record for every thread refused since the last
 * call, in its own stream (its tid). */
static void refusals_report(struct ptd_session *s)
{
	pid_t tids[16];
	size_t n;

	do {
		(void)pthread_mutex_lock(&s->lock);
		n = s->nrefused < 16 ? s->nrefused : 16;
		if (n) {	/* (s->refused is NULL until a refusal) */
			memcpy(tids, s->refused, n * sizeof(*tids));
			memmove(s->refused, s->refused + n,
				(s->nrefused - n) * sizeof(*tids));
			s->nrefused -= n;
		}
		(void)pthread_mutex_unlock(&s->lock);
		for (size_t i = 0; i < n; i++) {
			struct ptd_record rec;

			memset(&rec, 0, sizeof(rec));
			rec.type = PTD_REC_ERROR;
			rec.pid = s->o.pid;
			rec.tid = tids[i];
			rec.u.error.code = -PTD_ELIMIT;
			rec.u.error.ptd_code = true;
			rec.u.error.context = "user_memory_limit: thread not "
					      "traced";
			(void)deliver(s, &rec);
		}
	} while (n == 16);
}

static void on_signal(int sig)
{
	(void)sig;
}

static void install_signal(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;	/* no SA_RESTART: waitpid returns */
	(void)sigemptyset(&sa.sa_mask);
	(void)sigaction(PTD_SESSION_SIGNAL, &sa, NULL);
}

/* Every thread of the process is held by the source: may it still be
 * traced (opts.recheck)? */
static int on_seized(void *ctx, pid_t pid, struct ptd_diag *diag)
{
	struct ptd_session *s = ctx;

	if (!s->o.recheck)
		return 0;
	return s->o.recheck(s->o.recheck_ctx, pid, diag);
}

static void wake(struct ptd_session *s)
{
	uint64_t one = 1;
	ssize_t n = write(s->wake_fd, &one, sizeof(one));

	(void)n;
}

/* ---- decode thread --------------------------------------------------- */

static int deliver(void *ctx, const struct ptd_record *rec)
{
	struct ptd_session *s = ctx;

	/* A snapshot's records may wait for slow subscribers (the sink
	 * paces them): a stop ends its decode here rather than after every
	 * record of it. */
	if (s->snapping && atomic_load(&s->stop)) {
		s->snap_stopped = true;
		return 1;
	}
	/* (one thread at a time writes them: this one, or with jobs the
	 * worker whose turn it is, decode/threadpar.h) */
	if (rec->type == PTD_REC_INSN)
		ptd_counter_add(&s->insns, 1);
	ptd_counter_add(&s->records, 1);
	s->sink.record(s->sink.ctx, rec);
	return 0;
}

/* ---- snapshots (SNAPSHOT mode) --------------------------------------- */

static void snapshot_take(struct ptd_session *s, uint64_t seq)
{
	struct ptd_snapshot_info *in = s->snap_info;
	struct ptd_diag diag = { "" };
	int r;

	memset(in, 0, sizeof(*in));
	in->seq = seq;
	(void)pthread_mutex_lock(&s->lock);
	in->upto_tid = s->snap_upto_tid;
	in->upto_ns = s->snap_upto_ns;
	(void)pthread_mutex_unlock(&s->lock);
	r = ptd_source_snapshot_read(s->src, in, &diag);
	if (r < 0) {
		in->err = r;
		snprintf(in->message, sizeof(in->message), "%s",
			 diag.msg[0] ? diag.msg : ptd_strerror(r));
	}
	if (s->sink.snapshot)
		s->sink.snapshot(s->sink.ctx, in, false);
	s->snapping = true;
	s->snap_stopped = false;
	ptd_source_snapshot_decode(s->src, in, r);
	s->snapping = false;
	if (s->snap_stopped) {	/* (the decoder's error, if any, is ours) */
		in->err = -ECANCELED;
		snprintf(in->message, sizeof(in->message),
			 "the session is stopping: the snapshot's decode was "
			 "cut short");
	}
	atomic_fetch_add(&s->snapshots, 1);
	atomic_fetch_add(&s->parts, in->parts);
	atomic_fetch_add(&s->serial_parts, in->serial_parts);
	if (in->serial_why) {
		const char *none = NULL;

		(void)atomic_compare_exchange_strong(&s->serial_why, &none,
						     in->serial_why);
	}
	(void)pthread_mutex_lock(&s->lock);
	s->snap_pending = false;
	(void)pthread_mutex_unlock(&s->lock);
	if (s->sink.snapshot)
		s->sink.snapshot(s->sink.ctx, in, true);
}

/* Take the snapshot asked for, if any.  @close: no request is taken after
 * this one (the session is ending). */
static void snapshot_poll(struct ptd_session *s, bool close)
{
	uint64_t seq;
	bool pending;

	if (s->o.mode != PTD_MODE_SNAPSHOT)
		return;
	(void)pthread_mutex_lock(&s->lock);
	if (close)
		s->snap_closed = true;
	pending = s->snap_pending;
	seq = s->snap_seq;
	(void)pthread_mutex_unlock(&s->lock);
	if (pending)
		snapshot_take(s, seq);
}

int ptd_session_snapshot(struct ptd_session *s, uint64_t *ret_seq)
{
	return ptd_session_snapshot_upto(s, 0, 0, ret_seq);
}

int ptd_session_snapshot_upto(struct ptd_session *s, pid_t tid,
			      int64_t after_ns, uint64_t *ret_seq)
{
	uint64_t seq = 0;
	int r = 0;

	if (!s || s->o.mode != PTD_MODE_SNAPSHOT)
		return -EINVAL;
	(void)pthread_mutex_lock(&s->lock);
	if (s->snap_closed || atomic_load(&s->ended))
		r = -ESRCH;
	else if (s->snap_pending)
		r = -EBUSY;
	else {
		s->snap_pending = true;
		s->snap_upto_tid = tid;
		s->snap_upto_ns = after_ns;
		seq = ++s->snap_seq;
	}
	(void)pthread_mutex_unlock(&s->lock);
	if (r < 0)
		return r;
	wake(s);
	if (ret_seq)
		*ret_seq = seq;
	return 0;
}

static void finish(struct ptd_session *s, int err, const struct ptd_diag *d)
{
	struct ptd_source_result res;
	struct ptd_session_end end;

	ptd_source_result(s->src, &res);
	memset(&end, 0, sizeof(end));
	if (err < 0 || res.err < 0) {
		end.reason = PTD_END_ERROR;
		snprintf(end.message, sizeof(end.message), "%s",
			 err < 0 ? d->msg : res.diag.msg);
		if (res.exec_refused)
			snprintf(end.message, sizeof(end.message),
				 "process %d executed a program uid %u may "
				 "not trace (set-user-ID or set-group-ID): "
				 "detached before it ran", (int)s->o.pid,
				 (unsigned)s->o.uid);
		if (!end.message[0])
			snprintf(end.message, sizeof(end.message), "%s",
				 ptd_strerror(err < 0 ? err : res.err));
	} else if (res.exited) {
		end.reason = PTD_END_EXITED;
		end.exit_code = res.exit_signal ? -1 : res.exit_code;
		end.exit_signal = res.exit_signal;
	} else if (atomic_load(&s->stop)) {
		end.reason = (enum ptd_session_end_reason)atomic_load(&s->reason);
	} else {
		end.reason = PTD_END_LIMIT;
	}
	atomic_store(&s->ended, true);
	atomic_store(&s->end_called, true);
	s->sink.ended(s->sink.ctx, &end);
}

/* Round after round until the source ends (the last round decodes
 * everything), woken by the source, a stop or a snapshot request. */
static void *decode_main(void *arg)
{
	struct ptd_session *s = arg;
	struct ptd_diag diag = { "" };
	struct pollfd p = { s->wake_fd, POLLIN, 0 };
	int ms = (int)ptd_source_poll_ms(s->src);
	int r = 0;

	/* a first subscriber, in slices so that a stop ends the wait */
	for (unsigned waited = 0; s->o.wait_ms && s->sink.wait_subscriber &&
				  waited < s->o.wait_ms &&
				  !atomic_load(&s->stop);
	     waited += 50)
		if (s->sink.wait_subscriber(s->sink.ctx, 50))
			break;
	for (;;) {
		bool last = ptd_source_ending(s->src);
		uint64_t v;

		refusals_report(s);
		r = ptd_source_drain(s->src, last, &diag);
		if (r < 0 || last)
			break;
		snapshot_poll(s, false);
		if (s->sink.flush)
			s->sink.flush(s->sink.ctx);
		if (atomic_load(&s->stop))
			ptd_source_kick(s->src);
		if (poll(&p, 1, ms) > 0 &&
		    read(s->wake_fd, &v, sizeof(v)) < 0) {
			/* nothing to read: fine */
		}
	}
	if (r < 0) {	/* decoding failed: stop the source, let it end */
		if (s->source == PTD_SOURCE_INTEL_PT)	/* its last round */
			refusals_report(s);
		ptd_source_cancel(s->src, &diag);
	}
	snapshot_poll(s, true);
	finish(s, r, &diag);
	return NULL;
}

/* ---- start / stop ---------------------------------------------------- */

/* Which source: intel_pt where the PMU is, else the software source if
 * the config allows it. */
static int choose_source(struct ptd_session *s, struct ptd_diag *diag)
{
	struct ptd_pt_pmu pmu;
	struct ptd_diag d = { "" };
	int r = ptd_pt_pmu_probe(s->cfg.intel_pt_sysfs, &pmu, &d);

	if (r == 0 && s->o.source != PTD_SOURCE_SOFTWARE) {
		s->pmu = pmu;
		s->source = PTD_SOURCE_INTEL_PT;
		return 0;
	}
	if (s->o.source == PTD_SOURCE_INTEL_PT)
		return ptd_diagf(diag, r < 0 ? r : -PTD_ENOPT, "%s", d.msg);
	if (s->o.source == PTD_SOURCE_AUTO && !s->cfg.software_source)
		return ptd_diagf(diag, -PTD_ENOPT, "%s; and the software "
				 "source is disabled (software_source = no "
				 "in the configuration)", d.msg);
	s->source = PTD_SOURCE_SOFTWARE;
	return 0;
}

static void on_child(void *ctx, pid_t pid)
{
	struct ptd_session *s = ctx;

	s->o.child(s->o.child_ctx, pid);
}

/* The source chosen, for this session. */
static int source_new(struct ptd_session *s, struct ptd_diag *diag)
{
	struct ptd_source_params p;

	memset(&p, 0, sizeof(p));
	p.pid = s->o.pid;
	p.uid = s->o.uid;
	p.pidfd = s->o.pidfd;
	p.tsc = s->o.tsc;
	p.max_insns = s->o.max_insns;
	p.single_step = s->o.single_step;
	p.capture_dir = s->capture_dir;
	p.snapshot = s->o.mode == PTD_MODE_SNAPSHOT;
	p.jobs = s->o.jobs;
	p.per_cpu = s->o.per_cpu;
	p.data_size = s->cfg.data_buffer_size;
	p.aux_size = s->snap_size;
	/* what the memory limit charges for a decoder (memlimit.h) */
	p.max_buffered = ptd_memlimit_stream_bytes(s->snap_size);
	p.dir = s->dir;
	p.wake_fd = s->wake_fd;
	p.stop = &s->stop;
	p.symbols = s->o.symbols;
	p.counters = s->o.counters;
	p.signo = PTD_SESSION_SIGNAL;
	p.host.ctx = s;
	p.host.record = deliver;
	p.host.charge = s->o.acct ? thread_charge : NULL;
	p.host.uncharge = s->o.acct ? thread_uncharge : NULL;
	p.host.keep = s->o.acct ? window_charge : NULL;
	p.host.unkeep = s->o.acct ? window_give_back : NULL;
	p.host.recheck = on_seized;
	p.host.child = s->o.child ? on_child : NULL;
	if (s->source == PTD_SOURCE_INTEL_PT)
		return ptd_source_intelpt_new(&p, &s->pmu, &s->src, diag);
	return ptd_source_software_new(&p, &s->src, diag);
}

/* The mode and the AUX size per thread it implies. */
static int check_mode(struct ptd_session *s, struct ptd_diag *diag)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t n = s->o.snapshot_size;

	s->snap_size = s->cfg.aux_buffer_size;
	if (s->o.per_cpu && s->o.mode != PTD_MODE_FULL)
		return ptd_diagf(diag, -EINVAL, "per-CPU buffers are for full "
				 "mode only");
	if (s->o.jobs > PTD_DECODE_MAX_JOBS)
		return ptd_diagf(diag, -EINVAL, "jobs %u is more than %u",
				 s->o.jobs, PTD_DECODE_MAX_JOBS);
	if (s->o.mode == PTD_MODE_FULL) {
		if (n != 0)
			return ptd_diagf(diag, -EINVAL, "snapshot_size is for "
					 "snapshot mode only");
		/* threads decoded at once: each its own buffer, and records
		 * that do not depend on the order they go in */
		if (s->o.jobs > 1 && s->o.per_cpu)
			return ptd_diagf(diag, -EINVAL, "jobs is not for "
					 "per-CPU buffers (one merged trace, "
					 "decoded in its order)");
		if (s->o.jobs > 1 && s->o.counters)
			return ptd_diagf(diag, -EINVAL, "jobs is not for a "
					 "session that counts (one table, "
					 "counted in one order)");
		return 0;
	}
	if (s->o.mode != PTD_MODE_SNAPSHOT)
		return ptd_diagf(diag, -EINVAL, "unknown session mode %d",
				 (int)s->o.mode);
	if (n == 0)
		n = s->cfg.aux_buffer_size;
	if (page <= 0 || n < (size_t)page || (n & (n - 1)) ||
	    n > PTD_SESSION_SNAPSHOT_MAX)
		return ptd_diagf(diag, -EINVAL, "snapshot_size %zu is not a "
				 "power of two from %ld to %u bytes", n, page,
				 PTD_SESSION_SNAPSHOT_MAX);
	s->snap_size = n;
	return 0;
}

static int make_dir(struct ptd_session *s, struct ptd_diag *diag)
{
	const char *base = getenv("RUNTIME_DIRECTORY");

	if (!base || !*base || strchr(base, ':'))
		base = "/tmp";
	snprintf(s->dir, sizeof(s->dir), "%s/ptd-session-XXXXXX", base);
	if (!mkdtemp(s->dir)) {
		int r = -errno;

		s->dir[0] = 0;
		return ptd_diagf(diag, r, "cannot create a session directory "
				 "under %s: %s", base, ptd_strerror(r));
	}
	return 0;
}

static void session_destroy(struct ptd_session *s)
{
	ptd_source_free(s->src);
	free(s->snap_info);
	free(s->refused);
	if (s->dir[0])
		(void)ptd_rm_rf(s->dir);
	if (s->wake_fd >= 0)
		(void)close(s->wake_fd);
	(void)pthread_mutex_destroy(&s->lock);
	(void)pthread_cond_destroy(&s->cond);
	free(s->capture_dir);
	free(s);
}

/* Everything that reads the target or files, on the start thread: the
 * filter resolved against its maps, the buffers, and the source started
 * (software: every thread seized and stopped; intel_pt: the events
 * open). */
static int session_setup(struct ptd_session *s, struct ptd_diag *diag)
{
	int r = ptd_source_set_filter(s->src, s->o.filter, diag);

	if (r == 0)
		r = make_dir(s, diag);
	if (r < 0)
		return r;
	if (s->o.mode == PTD_MODE_SNAPSHOT &&
	    !(s->snap_info = malloc(sizeof(*s->snap_info))))
		return -ENOMEM;
	return ptd_source_start(s->src, diag);
}

/* The start is decided: tell ptd_session_started and the caller. */
static void decide(struct ptd_session *s, int err,
		   const struct ptd_diag *diag)
{
	(void)pthread_mutex_lock(&s->lock);
	s->decided = err < 0 ? -1 : 1;
	s->start_err = err;
	if (err < 0)
		(void)snprintf(s->start_diag.msg, sizeof(s->start_diag.msg),
			       "%s", diag->msg[0] ? diag->msg
						  : ptd_strerror(err));
	(void)pthread_cond_broadcast(&s->cond);
	(void)pthread_mutex_unlock(&s->lock);
	if (s->o.decided)
		s->o.decided(s->o.decided_ctx);
}

/* The start thread: sets the session up and attaches, then (started)
 * goes on as the decode thread. */
static void *start_main(void *arg)
{
	struct ptd_session *s = arg;
	struct ptd_diag diag = { "" };
	int r;

	(void)pthread_setname_np(pthread_self(), "ptd-session");
	r = s->o.prepare ? s->o.prepare(s->o.prepare_ctx, s->o.pid, &diag) : 0;
	if (r == 0)
		r = session_setup(s, &diag);

	decide(s, r, &diag);
	if (r < 0)
		return NULL;
	return decode_main(s);
}

int ptd_session_begin(const struct ptd_session_opts *o,
		      const struct ptd_session_sink *sink,
		      struct ptd_session **ret_session, struct ptd_diag *diag)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct ptd_session *s;
	int r;

	if (!o || !sink || !sink->record || !sink->ended || !ret_session ||
	    !o->config || o->pid <= 0)
		return -EINVAL;
	if (kill(o->pid, 0) < 0 && errno == ESRCH)
		return ptd_diagf(diag, -ESRCH, "no such process: %d",
				 (int)o->pid);
	(void)pthread_once(&once, install_signal);
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = *o;
	s->cfg = *o->config;
	s->o.config = &s->cfg;
	s->sink = *sink;
	s->wake_fd = -1;
	(void)pthread_mutex_init(&s->lock, NULL);
	(void)pthread_cond_init(&s->cond, NULL);
	r = check_mode(s, diag);
	if (r == 0 && s->o.acct) {
		(void)ptd_session_attach_bytes(&s->o, 0, &s->thread_cost);
		atomic_store(&s->prepaid, s->o.prepaid_threads);
	}
	if (r == 0)
		r = choose_source(s, diag);
	if (r < 0)
		goto fail;
	if (o->capture_dir && !(s->capture_dir = strdup(o->capture_dir))) {
		r = -ENOMEM;
		goto fail;
	}
	s->o.capture_dir = s->capture_dir;
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->wake_fd < 0) {
		r = -errno;
		goto fail;
	}
	r = source_new(s, diag);
	if (r < 0)
		goto fail;
	r = -pthread_create(&s->dec, NULL, start_main, s);
	if (r < 0) {
		ptd_diagf(diag, r, "cannot start the session's thread: %s",
			  strerror(-r));
		goto fail;
	}
	s->dec_started = true;
	*ret_session = s;
	return 0;
fail:
	session_destroy(s);
	return r;
}

int ptd_session_started(struct ptd_session *s, struct ptd_diag *diag)
{
	int d;

	(void)pthread_mutex_lock(&s->lock);
	d = s->decided;
	if (d < 0) {
		d = s->start_err;
		if (diag)
			*diag = s->start_diag;
	}
	(void)pthread_mutex_unlock(&s->lock);
	return d;
}

int ptd_session_start(const struct ptd_session_opts *o,
		      const struct ptd_session_sink *sink,
		      struct ptd_session **ret_session, struct ptd_diag *diag)
{
	struct ptd_session *s;
	int r = ptd_session_begin(o, sink, &s, diag);

	if (r < 0)
		return r;
	(void)pthread_mutex_lock(&s->lock);
	while (s->decided == 0)
		(void)pthread_cond_wait(&s->cond, &s->lock);
	(void)pthread_mutex_unlock(&s->lock);
	r = ptd_session_started(s, diag);
	if (r < 0) {
		ptd_session_free(s);
		return r;
	}
	*ret_session = s;
	return 0;
}

void ptd_session_stop(struct ptd_session *s,
		      enum ptd_session_end_reason reason)
{
	int zero = 0;

	if (!s)
		return;
	if (atomic_compare_exchange_strong(&s->stop, &zero, 1))
		atomic_store(&s->reason, (int)reason);
	wake(s);
	/* the start thread, if it waits for the source to attach */
	ptd_source_stop(s->src);
}

void ptd_session_get_stats(struct ptd_session *s,
			   struct ptd_session_stats *ret)
{
	struct ptd_source_stats st;

	memset(ret, 0, sizeof(*ret));
	ret->source = s->source;
	ret->mode = s->o.mode;
	ret->per_cpu = s->o.per_cpu;
	/* attaching: the start thread is building what is counted below */
	if (ptd_session_started(s, NULL) != 1)
		return;
	ptd_source_get_stats(s->src, &st);
	ret->threads = st.threads;
	ret->threads_live = st.threads_live;
	ret->migrated = st.migrated;
	ret->aux_written = st.aux_written;
	ret->ncpus = st.ncpus;
	ret->snapshot_size = s->o.mode == PTD_MODE_SNAPSHOT ? s->snap_size : 0;
	ret->snapshots = atomic_load(&s->snapshots);
	ret->parts = atomic_load(&s->parts);
	ret->serial_parts = atomic_load(&s->serial_parts);
	ret->serial_why = atomic_load(&s->serial_why);
	ret->overwritten_bytes = st.overwritten_bytes;
	ret->kept_threads = st.kept_threads;
	ret->kept_bytes = st.kept_bytes;
	ret->dropped_threads = st.dropped_threads;
	ret->dropped_bytes = st.dropped_bytes;
	ret->trace_bytes = st.trace_bytes;
	ret->insns = atomic_load(&s->insns);
	ret->records = atomic_load(&s->records);
	ret->lost_bytes = st.lost_bytes;
	ret->ended = atomic_load(&s->ended);
	ret->threads_refused = atomic_load(&s->threads_refused);
	ret->identity_mismatches = st.identity_mismatches;
	ret->threads_at_once = st.threads_at_once;
}

uint64_t ptd_session_attach_bytes(const struct ptd_session_opts *o,
				  unsigned nthreads, uint64_t *ret_thread)
{
	const struct ptd_config *c = o->config;
	size_t aux = o->mode == PTD_MODE_SNAPSHOT && o->snapshot_size
			     ? o->snapshot_size
			     : c->aux_buffer_size;
	uint64_t ring = ptd_memlimit_thread_bytes(c->data_buffer_size, aux,
						  o->mode == PTD_MODE_SNAPSHOT);
	uint64_t stream = ptd_memlimit_stream_bytes(aux);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	/* a snapshot's parallel decode, one thread's at a time; a full
	 * session's threads decoded at once, their records held under the
	 * same bound (decode/threadpar.h) */
	uint64_t jobs = o->jobs > 1 ? (o->jobs + 2ull) *
					      PTD_MEMLIMIT_REPLAY_PART_BYTES
				    : 0;

	if (!o->per_cpu) {
		if (ret_thread)
			*ret_thread = ring;
		return ring * nthreads + jobs;
	}
	if (cpus < (long)PTD_SESSION_SW_CPUS)
		cpus = PTD_SESSION_SW_CPUS;
	if (ret_thread)
		*ret_thread = stream;
	/* (ring counts a stream per CPU too: a bound, not exact) */
	return ring * (uint64_t)cpus + stream * nthreads;
}

int ptd_session_uprobe(struct ptd_session *s, bool add,
		       const struct ptd_swpt_uprobe *u)
{
	return s ? ptd_source_uprobe(s->src, add, u) : -ESRCH;
}

const char *ptd_session_filter(const struct ptd_session *s)
{
	return s ? ptd_source_filter(s->src) : NULL;
}

pid_t ptd_session_pid(const struct ptd_session *s)
{
	return s->o.pid;
}

void ptd_session_free(struct ptd_session *s)
{
	if (!s)
		return;
	if (!atomic_load(&s->end_called))
		ptd_session_stop(s, PTD_END_SHUTDOWN);
	if (s->dec_started)
		(void)pthread_join(s->dec, NULL);
	session_destroy(s);
}
