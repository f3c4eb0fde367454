/* SPDX-License-Identifier: MIT */
/*
 * A tracing session: the source thread fills per-thread perf buffers, the
 * decode thread drains them through the shared reader into one stream
 * decoder per thread and hands the records to the sink.
 */
#include "daemon/session.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aspace/iscache.h"
#include "common/fileio.h"
#include "common/pidfd.h"
#include "common/strutil.h"
#include "decode/cpufeed.h"
#include "decode/feed.h"
#include "decode/insncache.h"
#include "decode/stream.h"
#include "aspace/maps.h"
#include "perf/addrfilter.h"
#include "perf/attr.h"
#include "perf/pmu.h"
#include "perf/sideband.h"
#include "swpt/livesink.h"
#include "swpt/tracer.h"

#define POLL_MS 100		/* decode thread: wake at least this often */
#define ICACHE_ENTRIES (1u << 20)

/* One traced thread on the decode side. */
struct dthread {
	pid_t tid;
	struct ptd_livesink_thread *lt;	/* software source */
	int fd;				/* intel_pt: its event, or -1 */
	struct ptd_perf_buf hwbuf;	/* intel_pt: its buffer */
	struct ptd_stream *stream;
	struct ptd_feed *feed;
	bool done;		/* final decode delivered */
	bool ended;		/* per-CPU: its EXIT was read */
	/* snapshot mode */
	struct ptd_timeline *tl;	/* software: its image changes */
	uint64_t snap_head;	/* aux_head at its previous snapshot */
	uint8_t *snap;		/* the bytes of the snapshot being taken */
	size_t nsnap;
	uint64_t snap_over;	/* overwritten before this snapshot */
	bool in_snap;		/* part of the snapshot being taken */
};

struct ptd_session {
	struct ptd_session_opts o;
	struct ptd_config cfg;
	struct ptd_session_sink sink;
	enum ptd_source_kind source;
	char *capture_dir;
	char dir[256];			/* snapshot files */
	/* opts.filter: the text (copied), parsed, resolved for the decoder
	 * (all zero: none) and as the kernel takes it (intel_pt) */
	char *filter_text;
	struct ptd_addrfilter filter;
	struct pt_conf_addr_filter fcfg;
	char *filter_kstr;

	pthread_t src, dec;
	bool src_started, dec_started;
	int wake_fd;
	atomic_int stop;		/* tracer: detach */
	atomic_int cancel;		/* livesink: give up waiting */
	atomic_int reason;		/* why stop was asked */

	/* start handshake.  state: the source's (0 attaching, 1 tracing,
	 * -1 failed); decided: the session's, set by the start thread once
	 * the source is tracing and nothing else can fail (1), or once the
	 * start failed (-1, start_err and start_diag say why). */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int state;
	int decided;
	int start_err;
	struct ptd_diag start_diag;
	pid_t src_tid;			/* the source thread (written before
					 * src_done) */

	/* source results (written by the source thread before src_done) */
	atomic_bool src_done;
	int src_err;
	struct ptd_swpt_result res;
	struct ptd_diag src_diag;

	struct ptd_livesink *ls;
	struct ptd_swpt_out out;	/* the livesink's, checked at exec */
	bool exec_refused;		/* ended at a privileged exec */
	struct ptd_iscache *iscache;
	struct ptd_insncache *icache;
	atomic_uint snapseq;
	/* wall clock <-> perf time, sampled once (records' "wall") */
	bool has_wallref;
	struct ptd_perf_wallref wallref;
	/* software source: the one clock its buffers publish, and its
	 * capture keeps with the wall-clock reference */
	bool has_clock;
	struct ptd_perf_clock clock;
	struct dthread *dt;
	size_t ndt;

	/* intel_pt (per-thread events: each sees only its own thread's
	 * sideband, so image changes are shared here, and new threads are
	 * followed from FORK records) */
	struct ptd_pt_pmu pmu;
	struct perf_event_attr attr;
	struct pt_cpu cpu;
	struct ptd_timeline hist;	/* image changes so far */
	pid_t *newtids;			/* FORKs seen during a drain */
	atomic_uint hw_threads, hw_live;
	size_t nnew;
	bool leader_exited;

	/* per-CPU mode (opts.per_cpu): one buffer per CPU, decoded by cf.
	 * intel_pt: pc_fd[i] the intel_pt event of CPU pc_cpus[i] (the
	 * sideband dummy pc_sbfd[i] writes into its ring), pc_buf[i]. */
	struct ptd_cpufeed *cf;
	unsigned ncpus;
	int *pc_cpus, *pc_fd, *pc_sbfd;
	struct ptd_perf_buf *pc_buf;
	struct ptd_cpufeed_stats cf_last;	/* counters already added */

	/* snapshot mode.  Guarded by lock: snap_pending (a request taken,
	 * not yet answered), snap_closed (no more requests: the decode
	 * thread is finishing), snap_seq (the last seq handed out). */
	size_t snap_size;
	bool snap_pending, snap_closed;
	uint64_t snap_seq;
	struct ptd_perf_reader *snap_reader;	/* decode thread only */
	struct ptd_snapshot_info *snap_info;	/* decode thread only */
	atomic_uint_fast64_t snapshots, overwritten;

	/* memory limit (opts.acct): what a later thread costs, the threads
	 * charged at attach not yet begun, the threads refused.  untraced:
	 * software threads not traced (source thread only); refused: tids
	 * whose error record is not yet delivered (under lock). */
	uint64_t thread_cost;
	atomic_uint prepaid, threads_refused;
	pid_t *untraced;
	size_t nuntraced;
	pid_t *refused;
	size_t nrefused;

	/* counters */
	atomic_uint_fast64_t trace_bytes, insns, records, lost_bytes;
	atomic_bool ended;
	atomic_bool end_called;
};

const char *ptd_source_name(enum ptd_source_kind k)
{
	switch (k) {
	case PTD_SOURCE_AUTO:
		return "auto";
	case PTD_SOURCE_INTEL_PT:
		return "intel_pt";
	case PTD_SOURCE_SOFTWARE:
		return "software";
	}
	return "?";
}

int ptd_source_parse(const char *name)
{
	if (!name)
		return -PTD_EFORMAT;
	if (!strcmp(name, "auto"))
		return PTD_SOURCE_AUTO;
	if (!strcmp(name, "intel_pt"))
		return PTD_SOURCE_INTEL_PT;
	if (!strcmp(name, "software"))
		return PTD_SOURCE_SOFTWARE;
	return -PTD_EFORMAT;
}

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
	}
	return "?";
}

/* ---- source thread --------------------------------------------------- */

/* Whether @pid is still @uid's to trace: /proc/PID/mem belongs to the
 * effective uid of a dumpable process and to root otherwise (the kernel's
 * task_dump_owner), so a set-user-ID or set-group-ID exec shows there. */
static bool still_owned(pid_t pid, uid_t uid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	return stat(path, &st) == 0 && st.st_uid == uid;
}

/* ---- memory limit (opts.acct) ---- */

/* May thread @tid be traced: one charged at attach, or its charge taken
 * now?  Returns 1 yes, 0 refused (queued for its error record), -ENOMEM. */
static int thread_charge(struct ptd_session *s, pid_t tid)
{
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

/* Software source: is @tid one of the threads not traced? */
static size_t untraced_find(const struct ptd_session *s, pid_t tid)
{
	for (size_t i = 0; i < s->nuntraced; i++)
		if (s->untraced[i] == tid)
			return i;
	return SIZE_MAX;
}

static int out_thread_begin(void *ctx, pid_t tid)
{
	struct ptd_session *s = ctx;
	const struct ptd_swpt_out *o = ptd_livesink_out(s->ls);
	int r = thread_charge(s, tid);
	pid_t *v;

	if (r > 0)
		return o->thread_begin(o->ctx, tid);
	if (r < 0)
		return r;
	/* not traced: its PT bytes go nowhere, the buffers are not made */
	v = realloc(s->untraced, (s->nuntraced + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->untraced = v;
	s->untraced[s->nuntraced++] = tid;
	wake(s);
	return 0;
}

static int out_pt(void *ctx, pid_t tid, const uint8_t *data, size_t len)
{
	struct ptd_session *s = ctx;
	const struct ptd_swpt_out *o = ptd_livesink_out(s->ls);

	if (s->nuntraced && untraced_find(s, tid) != SIZE_MAX)
		return 0;
	return o->pt(o->ctx, tid, data, len);
}

static int out_image(void *ctx, const struct ptd_tl_event *ev,
		     const uint8_t *code, size_t ncode)
{
	struct ptd_session *s = ctx;
	const struct ptd_swpt_out *o = ptd_livesink_out(s->ls);

	if (ev->op == PTD_TL_EXEC && s->o.uid != 0 &&
	    !still_owned(s->o.pid, s->o.uid)) {
		s->exec_refused = true;
		return -EPERM;
	}
	return o->image(o->ctx, ev, code, ncode);
}

static int out_thread_end(void *ctx, pid_t tid)
{
	struct ptd_session *s = ctx;
	const struct ptd_swpt_out *o = ptd_livesink_out(s->ls);
	size_t i = s->nuntraced ? untraced_find(s, tid) : SIZE_MAX;

	if (i != SIZE_MAX) {	/* (a later thread may reuse the tid) */
		s->untraced[i] = s->untraced[--s->nuntraced];
		return 0;
	}
	return o->thread_end(o->ctx, tid);
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

static void set_state(struct ptd_session *s, int state)
{
	(void)pthread_mutex_lock(&s->lock);
	if (s->state == 0)
		s->state = state;
	(void)pthread_cond_broadcast(&s->cond);
	(void)pthread_mutex_unlock(&s->lock);
}

static void on_started(void *ctx)
{
	set_state(ctx, 1);
}

/* Every thread of the process is seized and stopped: may it still be
 * traced (opts.recheck)? */
static int on_seized(void *ctx, struct ptd_diag *diag)
{
	struct ptd_session *s = ctx;

	if (!s->o.recheck)
		return 0;
	return s->o.recheck(s->o.recheck_ctx, s->o.pid, diag);
}

static void wake(struct ptd_session *s)
{
	uint64_t one = 1;
	ssize_t n = write(s->wake_fd, &one, sizeof(one));

	(void)n;
}

static void *source_main(void *arg)
{
	struct ptd_session *s = arg;
	struct ptd_swpt_options so;
	sigset_t set;

	(void)sigemptyset(&set);
	(void)sigaddset(&set, PTD_SESSION_SIGNAL);
	(void)pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	memset(&so, 0, sizeof(so));
	so.gen.tsc = s->o.tsc;
	so.gen.psb_period = 4096;	/* the stream decoder's anchors */
	so.outdir = s->capture_dir;
	s->out.thread_begin = out_thread_begin;
	s->out.pt = out_pt;
	s->out.image = out_image;
	s->out.thread_end = out_thread_end;
	s->out.ctx = s;
	so.out = &s->out;
	so.max_insns = s->o.max_insns;
	so.stop = &s->stop;
	so.started = on_started;
	so.started_ctx = s;
	so.pidfd = s->o.pidfd;
	so.seized = on_seized;
	so.seized_ctx = s;
	s->src_tid = gettid();
	so.quiet_target = false;
	so.filter = s->filter_text ? &s->filter : NULL;
	so.filter_text = s->filter_text;
	so.clock = s->has_clock ? &s->clock : NULL;
	so.wallref = s->has_wallref ? &s->wallref : NULL;
	s->src_err = ptd_swpt_attach(s->o.pid, &so, &s->res, &s->src_diag);
	set_state(s, s->src_err < 0 ? -1 : 1);
	atomic_store(&s->src_done, true);
	wake(s);
	return NULL;
}

/* ---- decode thread --------------------------------------------------- */

static int deliver(void *ctx, const struct ptd_record *rec)
{
	struct ptd_session *s = ctx;

	if (rec->type == PTD_REC_INSN)
		atomic_fetch_add(&s->insns, 1);
	atomic_fetch_add(&s->records, 1);
	s->sink.record(s->sink.ctx, rec);
	return 0;
}

/* The stream options of thread @tid's decoders. */
/* ---- address filter (opts.filter) ------------------------------------ */

/* Parse opts.filter (against the PMU's number of ranges for intel_pt) and
 * resolve its file ranges with the process's maps now, for the decoders;
 * intel_pt also gets the kernel's string. */
static int filter_setup(struct ptd_session *s, struct ptd_diag *diag)
{
	uint32_t cap = PTD_ADDRFILTER_MAX;
	struct ptd_maps maps;
	unsigned pending;
	char root[64];
	size_t klen;
	int r;

	if (!s->o.filter)
		return 0;
	if (!(s->filter_text = strdup(s->o.filter)))
		return -ENOMEM;
	s->o.filter = s->filter_text;
	if (s->source == PTD_SOURCE_INTEL_PT) {
		cap = s->pmu.nr_addr_filters;
		if (!cap)
			return ptd_diagf(diag, -PTD_EUNSUPPORTED, "filter: "
					 "this CPU's intel_pt cannot filter by "
					 "address (nr_addr_filters is 0)");
	}
	r = ptd_addrfilter_parse(s->filter_text, cap, &s->filter, diag);
	if (r < 0)
		return r;
	r = ptd_maps_read_pid("/proc", s->o.pid, &maps, diag);
	if (r < 0)
		return r;
	/* A range in a file the process does not map yet is pending until
	 * it does (the source resolves it again then, as the kernel does
	 * for intel_pt); the decoders' copy keeps it pending, which only
	 * libipt's erratum workarounds would read. */
	(void)snprintf(root, sizeof(root), "/proc/%d/root", (int)s->o.pid);
	r = ptd_addrfilter_resolve(&s->filter, &maps, root, &s->fcfg,
				   &pending, diag);
	ptd_maps_free(&maps);
	/* A range in a file that does not exist, or that the process's
	 * mapping does not hold: the request is at fault (bad_request),
	 * not the daemon. */
	if (r == -PTD_ENOIMAGE)
		r = -PTD_EFORMAT;
	if (r < 0 || s->source != PTD_SOURCE_INTEL_PT)
		return r;
	/* Every range adds at most its file name and two numbers. */
	klen = strlen(s->filter_text) + PTD_ADDRFILTER_MAX * 64 + 1;
	if (!(s->filter_kstr = malloc(klen)))
		return -ENOMEM;
	r = ptd_addrfilter_kernel_string(&s->filter, s->filter_kstr, klen);
	if (r < 0)
		return ptd_diagf(diag, r, "filter: the kernel's filter string "
				 "does not fit in %zu bytes", klen);
	return 0;
}

/* Hand the filter to the intel_pt event @fd (before it is enabled) of
 * thread @tid (-1: a per-CPU event). */
static int filter_apply(struct ptd_session *s, int fd, pid_t tid,
			struct ptd_diag *diag)
{
	struct ptd_diag d = { "" };
	int r = ptd_addrfilter_apply(fd, s->filter_kstr, &d);

	if (r < 0 && tid >= 0)
		return ptd_diagf(diag, r, "thread %d: setting the address "
				 "filter '%s': %s", (int)tid, s->filter_kstr,
				 d.msg);
	if (r < 0)
		return ptd_diagf(diag, r, "process %d: setting the address "
				 "filter '%s': %s", (int)s->o.pid,
				 s->filter_kstr, d.msg);
	return 0;
}

static void stream_opts(const struct ptd_session *s, pid_t tid,
			struct ptd_stream_opts *so)
{
	memset(so, 0, sizeof(*so));
	so->decode.path = PTD_PATH_BLOCK;
	so->decode.want = PTD_REC_ALL & ~PTD_REC_BIT(PTD_REC_BLOCK);
	so->decode.json_bodies = true;
	if (s->source == PTD_SOURCE_INTEL_PT) {
		struct pt_config cfg;

		so->decode.cpu = s->cpu;
		/* MTC/CYC timing as the event was configured */
		if (ptd_pt_config_from_pmu(&s->pmu, &s->cpu, s->attr.config,
					   &cfg) == 0) {
			so->decode.mtc_freq = cfg.mtc_freq;
			so->decode.nom_freq = cfg.nom_freq;
			so->decode.cpuid_0x15_eax = cfg.cpuid_0x15_eax;
			so->decode.cpuid_0x15_ebx = cfg.cpuid_0x15_ebx;
		}
	} else	/* the packets come from libipt's encoder, not a CPU with
		 * errata */
		so->decode.cpu.vendor = pcv_unknown;
	so->pid = s->o.pid;
	so->tid = tid;
	/* what the memory limit charges for it (memlimit.h) */
	so->max_buffered = ptd_memlimit_stream_bytes(s->snap_size);
	so->iscache = s->iscache;
	so->icache = s->icache;
	so->dir = s->dir;
	/* (the perf clock comes from each buffer's header page: the feed) */
	so->decode.has_wallref = s->has_wallref;
	so->decode.wallref = s->wallref;
	so->decode.addr_filter = s->fcfg;
}

/* Snapshot mode, software source: a thread's image changes are kept (in
 * stream order) for the snapshots' decoders. */
static int sw_snap_image(void *ctx, pid_t tid, const struct ptd_tl_event *ev)
{
	int64_t r = ptd_timeline_add(ctx, ev);

	(void)tid;
	return r < 0 ? (int)r : 0;
}

static int dthread_add(struct ptd_session *s, struct ptd_livesink_thread *lt)
{
	struct ptd_stream_opts so;
	struct dthread *v, *d;
	int r;

	v = realloc(s->dt, (s->ndt + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->dt = v;
	d = &s->dt[s->ndt];
	memset(d, 0, sizeof(*d));
	d->lt = lt;
	d->tid = lt->tid;
	d->fd = -1;
	stream_opts(s, lt->tid, &so);
	if (s->o.mode == PTD_MODE_SNAPSHOT) {
		d->tl = malloc(sizeof(*d->tl));
		if (!d->tl)
			return -ENOMEM;
		ptd_timeline_init(d->tl);
	}
	/* (snapshot mode: the feed's stream only takes what the feed
	 * gives it; the image goes to d->tl) */
	r = ptd_stream_new(&so, &d->stream);
	if (r == 0)
		r = ptd_feed_new(&lt->buf, lt->tid, d->stream, s->dir,
				 &s->snapseq, PTD_SIDEBAND_SAMPLE_TYPE, true,
				 &d->feed);
	if (r < 0) {
		ptd_stream_free(d->stream);
		free(d->tl);
		return r;
	}
	if (d->tl) {
		struct ptd_feed_hooks h = { sw_snap_image, NULL, d->tl };

		ptd_feed_set_hooks(d->feed, &h);
	}
	s->ndt++;
	return 0;
}

/* Drain one thread's buffer and decode what arrived; at its end (or
 * @final) decode the rest. */
static int dthread_step(struct ptd_session *s, struct dthread *d, bool final,
			struct ptd_diag *diag)
{
	struct ptd_feed_stats before, after;
	bool last;
	int r;

	if (d->done)
		return 0;
	ptd_feed_get_stats(d->feed, &before);
	r = ptd_feed_drain(d->feed, diag);
	if (r < 0)
		return r;
	ptd_feed_get_stats(d->feed, &after);
	atomic_fetch_add(&s->trace_bytes, after.aux_bytes - before.aux_bytes);
	atomic_fetch_add(&s->lost_bytes, after.lost_bytes - before.lost_bytes);
	last = final || ptd_feed_ended(d->feed);
	if (s->o.mode == PTD_MODE_SNAPSHOT) {
		/* sideband only: the trace is decoded at snapshots */
		d->done = last;
		return 0;
	}
	r = ptd_stream_decode(d->stream, last, deliver, s);
	if (r < 0)
		return ptd_diagf(diag, r, "thread %d: decoding: %s",
				 (int)d->tid, ptd_strerror(r));
	if (last)
		d->done = true;
	return 0;
}

/* ---- per-CPU mode: per-CPU buffers through decode/cpufeed.h ---------- */

/* A thread of the process appeared in the merged trace: its stream. */
static int pc_thread_new(void *ctx, pid_t pid, pid_t tid,
			 struct ptd_stream **ret_stream)
{
	struct ptd_session *s = ctx;
	struct ptd_stream_opts so;
	struct dthread *v, *d;
	int r;

	(void)pid;
	/* intel_pt: the hardware traces it (inherit); without the memory
	 * for its decoder it is not decoded (the software source refused it
	 * before it wrote a byte) */
	if (!s->ls && (r = thread_charge(s, tid)) <= 0) {
		*ret_stream = NULL;
		return r;
	}
	v = realloc(s->dt, (s->ndt + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->dt = v;
	d = &s->dt[s->ndt];
	memset(d, 0, sizeof(*d));
	d->tid = tid;
	d->fd = -1;
	stream_opts(s, tid, &so);
	r = ptd_stream_new(&so, &d->stream);
	if (r < 0)
		return r;
	s->ndt++;
	if (!s->ls) {
		atomic_fetch_add(&s->hw_threads, 1);
		atomic_fetch_add(&s->hw_live, 1);
	}
	*ret_stream = d->stream;
	return 0;
}

static int pc_thread_end(void *ctx, pid_t tid)
{
	struct ptd_session *s = ctx;

	for (size_t i = s->ndt; i-- > 0;)
		if (s->dt[i].tid == tid && !s->dt[i].ended) {
			s->dt[i].ended = true;
			break;
		}
	if (tid == s->o.pid)
		s->leader_exited = true;
	return 0;
}

static int pc_feed_new(struct ptd_session *s, struct ptd_perf_buf **bufs,
		       unsigned n, uint64_t sample_type,
		       struct ptd_diag *diag)
{
	struct ptd_cpufeed_opts fo = { 0 };
	struct ptd_cpufeed_ops ops = { pc_thread_new, pc_thread_end, NULL, NULL,
				       s };
	int r;

	fo.ncpus = n;
	fo.bufs = bufs;
	fo.pid = s->o.pid;
	fo.sample_type = sample_type;
	fo.sample_id_all = true;
	fo.snapdir = s->dir;
	fo.snapseq = &s->snapseq;
	r = ptd_cpufeed_new(&fo, &ops, &s->cf);
	if (r < 0)
		return ptd_diagf(diag, r, "cannot set up the per-CPU decoder "
				 "(%u buffers): %s", n, ptd_strerror(r));
	s->ncpus = n;
	return 0;
}

/* Read every CPU's buffer, then decode what each thread got; a thread
 * whose EXIT was read (or every thread, @final) is decoded to its end. */
static int pc_round(struct ptd_session *s, bool final, struct ptd_diag *diag)
{
	struct ptd_cpufeed_stats st;
	int r = ptd_cpufeed_round(s->cf, final, diag);

	if (r < 0)
		return r;
	ptd_cpufeed_get_stats(s->cf, &st);
	atomic_fetch_add(&s->trace_bytes, st.aux_bytes - s->cf_last.aux_bytes);
	atomic_fetch_add(&s->lost_bytes, st.lost_bytes - s->cf_last.lost_bytes);
	s->cf_last = st;
	for (size_t i = 0; i < s->ndt; i++) {
		struct dthread *d = &s->dt[i];
		bool last = final || d->ended;

		if (d->done)
			continue;
		r = ptd_stream_decode(d->stream, last, deliver, s);
		if (r < 0)
			return ptd_diagf(diag, r, "thread %d: decoding: %s",
					 (int)d->tid, ptd_strerror(r));
		if (last) {
			d->done = true;
			if (!s->ls)
				atomic_fetch_sub(&s->hw_live, 1);
		}
	}
	return 0;
}

static int decode_round(struct ptd_session *s, bool final,
			struct ptd_diag *diag)
{
	struct ptd_livesink_thread *lt[64];
	size_t n;
	int r;

	refusals_report(s);
	if (s->cf)
		return pc_round(s, final, diag);
	while ((n = ptd_livesink_threads(s->ls, s->ndt, lt, 64)) > 0)
		for (size_t i = 0; i < n; i++)
			if ((r = dthread_add(s, lt[i])) < 0)
				return r;
	for (size_t i = 0; i < s->ndt; i++)
		if ((r = dthread_step(s, &s->dt[i], final, diag)) < 0)
			return r;
	return 0;
}

/* ---- snapshots (SNAPSHOT mode) --------------------------------------- */

static const uint8_t psb[16] = { 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
				 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
				 0x02, 0x82, 0x02, 0x82 };

/* Offset of the first PSB in @p (@n bytes), or @n if there is none. */
static size_t first_psb(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + sizeof(psb) <= n; i++)
		if (p[i] == psb[0] && !memcmp(p + i, psb, sizeof(psb)))
			return i;
	return n;
}

static int snap_aux(void *ctx, uint64_t off, const void *bytes, size_t len)
{
	struct dthread *d = ctx;

	(void)off;
	memcpy(d->snap + d->nsnap, bytes, len);
	d->nsnap += len;
	return 0;
}

static int snap_loss(void *ctx, const struct ptd_perf_loss *l)
{
	struct dthread *d = ctx;

	if (l->kind == PTD_PERF_LOSS_OVERWRITTEN)
		d->snap_over += l->bytes;
	return 0;
}

static struct ptd_perf_buf *dthread_buf(struct dthread *d)
{
	return d->lt ? &d->lt->buf : &d->hwbuf;
}

/* Read the sideband so far and the newest AUX bytes of every thread that
 * wrote some since its previous snapshot.  The producers are paused:
 * nothing moves in the buffers meanwhile. */
static int snapshot_read_all(struct ptd_session *s,
			     struct ptd_snapshot_info *in,
			     struct ptd_diag *diag)
{
	static const struct ptd_perf_reader_ops ops = { NULL, snap_aux,
							snap_loss };
	int r = 0;

	for (size_t i = 0; r == 0 && i < s->ndt; i++) {
		struct dthread *d = &s->dt[i];
		struct ptd_perf_buf *b = dthread_buf(d);
		int64_t n;

		if (!d->feed || !b->meta || !b->aux_size)
			continue;
		if (!d->done && (r = ptd_feed_drain(d->feed, diag)) < 0)
			break;
		r = 0;
		if (__atomic_load_n(&b->meta->aux_head, __ATOMIC_ACQUIRE) ==
		    d->snap_head)
			continue;	/* nothing new */
		d->snap = malloc(b->aux_size);
		if (!d->snap)
			return -ENOMEM;
		d->nsnap = 0;
		d->snap_over = 0;
		ptd_perf_reader_init(s->snap_reader, b);
		s->snap_reader->snap_head = d->snap_head;
		n = ptd_perf_reader_snapshot(s->snap_reader, &ops, d);
		if (n < 0)
			return ptd_diagf(diag, (int)n, "thread %d: reading its "
					 "AUX area: %s", (int)d->tid,
					 ptd_strerror((int)n));
		d->snap_head = s->snap_reader->snap_head;
		d->in_snap = true;
		if (in->nlisted < PTD_SNAPSHOT_MAX_THREADS) {
			struct ptd_snapshot_thread *t = &in->th[in->nlisted++];

			t->tid = d->tid;
			t->end = d->snap_head;
			t->bytes = d->nsnap;
			t->overwritten = d->snap_over;
		}
		in->nthreads++;
		in->bytes += d->nsnap;
		in->overwritten += d->snap_over;
	}
	return r;
}

/* Pause the producers, read, resume. */
static int snapshot_read(struct ptd_session *s, struct ptd_snapshot_info *in,
			 struct ptd_diag *diag)
{
	struct ptd_livesink_thread *lt[64];
	size_t n;
	int r = 0;

	if (s->ls) {
		ptd_livesink_pause(s->ls);
		/* no thread can begin while paused: the list is complete */
		while (r == 0 &&
		       (n = ptd_livesink_threads(s->ls, s->ndt, lt, 64)) > 0)
			for (size_t i = 0; r == 0 && i < n; i++)
				r = dthread_add(s, lt[i]);
	} else {
		/* the hardware's pause, which also flushes its internal
		 * buffers into the AUX area */
		for (size_t i = 0; i < s->ndt; i++)
			if (s->dt[i].fd >= 0)
				(void)ioctl(s->dt[i].fd, PERF_EVENT_IOC_DISABLE,
					    0);
	}
	if (r == 0)
		r = snapshot_read_all(s, in, diag);
	if (s->ls)
		ptd_livesink_resume(s->ls);
	else
		for (size_t i = 0; i < s->ndt; i++)
			if (s->dt[i].fd >= 0)
				(void)ioctl(s->dt[i].fd, PERF_EVENT_IOC_ENABLE,
					    0);
	return r;
}

struct snap_ctx {
	struct ptd_session *s;
	struct ptd_snapshot_thread *t;
};

static int snap_deliver(void *ctx, const struct ptd_record *rec)
{
	struct snap_ctx *c = ctx;

	c->t->records++;
	if (rec->type == PTD_REC_INSN)
		c->t->insns++;
	return deliver(c->s, rec);
}

/* Decode one thread's snapshot bytes from their first PSB with a fresh
 * decoder, its image being every change seen so far. */
static int snapshot_decode(struct ptd_session *s, struct dthread *d,
			   struct ptd_snapshot_thread *t,
			   struct ptd_diag *diag)
{
	const struct ptd_timeline *tl = d->tl ? d->tl : &s->hist;
	struct snap_ctx c = { s, t };
	struct ptd_stream_opts so;
	struct ptd_stream *st = NULL;
	size_t at = first_psb(d->snap, d->nsnap);
	int r;

	t->tid = d->tid;
	t->end = d->snap_head;
	t->bytes = d->nsnap;
	t->overwritten = d->snap_over;
	if (d->snap_over) {
		struct ptd_record rec;

		memset(&rec, 0, sizeof(rec));
		rec.type = PTD_REC_ERROR;
		rec.pid = s->o.pid;
		rec.tid = d->tid;
		rec.u.error.code = -PTD_ETRUNC;
		rec.u.error.ptd_code = true;
		rec.u.error.context = "overwritten";
		rec.u.error.skipped = d->snap_over;
		(void)snap_deliver(&c, &rec);
	}
	stream_opts(s, d->tid, &so);
	so.decode.has_clock = ptd_perf_clock_from_page(
		d->lt ? d->lt->buf.meta : d->hwbuf.meta, &so.decode.clock,
		NULL) == 0;
	so.max_buffered = d->nsnap + 4096;
	r = ptd_stream_new(&so, &st);
	for (size_t i = 0; r == 0 && i < tl->n; i++)
		r = ptd_stream_add_event(st, &tl->ev[i]);
	if (r == 0 && at < d->nsnap)
		r = ptd_stream_append(st, d->snap + at, d->nsnap - at);
	if (r == 0) {
		r = ptd_stream_decode(st, true, snap_deliver, &c);
		r = r < 0 ? r : 0;
	}
	ptd_stream_free(st);
	if (r < 0)
		return ptd_diagf(diag, r, "thread %d: decoding its snapshot: "
				 "%s", (int)d->tid, ptd_strerror(r));
	return 0;
}

static void snapshot_take(struct ptd_session *s, uint64_t seq)
{
	struct ptd_snapshot_info *in = s->snap_info;
	struct ptd_diag diag = { "" };
	unsigned k = 0;
	int r;

	memset(in, 0, sizeof(*in));
	in->seq = seq;
	r = snapshot_read(s, in, &diag);
	if (r < 0) {
		in->err = r;
		snprintf(in->message, sizeof(in->message), "%s",
			 diag.msg[0] ? diag.msg : ptd_strerror(r));
	}
	if (s->sink.snapshot)
		s->sink.snapshot(s->sink.ctx, in, false);
	for (size_t i = 0; i < s->ndt; i++) {
		struct dthread *d = &s->dt[i];
		struct ptd_snapshot_thread spare, *t;

		if (!d->in_snap)
			continue;
		t = k < PTD_SNAPSHOT_MAX_THREADS ? &in->th[k] : &spare;
		memset(t, 0, sizeof(*t));
		k++;
		if (r == 0 && (r = snapshot_decode(s, d, t, &diag)) < 0) {
			in->err = r;
			snprintf(in->message, sizeof(in->message), "%s",
				 diag.msg);
		}
		in->records += t->records;
		in->insns += t->insns;
		atomic_fetch_add(&s->trace_bytes, d->nsnap);
		atomic_fetch_add(&s->overwritten, d->snap_over);
		free(d->snap);
		d->snap = NULL;
		d->nsnap = 0;
		d->in_snap = false;
	}
	atomic_fetch_add(&s->snapshots, 1);
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
	struct ptd_session_end end;

	memset(&end, 0, sizeof(end));
	if (err < 0 || s->src_err < 0) {
		end.reason = PTD_END_ERROR;
		snprintf(end.message, sizeof(end.message), "%s",
			 err < 0 ? d->msg : s->src_diag.msg);
		if (s->exec_refused)
			snprintf(end.message, sizeof(end.message),
				 "process %d executed a program uid %u may "
				 "not trace (set-user-ID or set-group-ID): "
				 "detached before it ran", (int)s->o.pid,
				 (unsigned)s->o.uid);
		if (!end.message[0])
			snprintf(end.message, sizeof(end.message), "%s",
				 ptd_strerror(err < 0 ? err : s->src_err));
	} else if (s->res.exited) {
		end.reason = PTD_END_EXITED;
		end.exit_code = s->res.exit_signal ? -1 : s->res.exit_code;
		end.exit_signal = s->res.exit_signal;
	} else if (atomic_load(&s->stop)) {
		end.reason = (enum ptd_session_end_reason)atomic_load(&s->reason);
	} else {
		end.reason = PTD_END_LIMIT;
	}
	atomic_store(&s->ended, true);
	atomic_store(&s->end_called, true);
	s->sink.ended(s->sink.ctx, &end);
}

static void *decode_main(void *arg)
{
	struct ptd_session *s = arg;
	struct ptd_diag diag = { "" };
	struct pollfd p = { s->wake_fd, POLLIN, 0 };
	int r = 0;

	for (;;) {
		bool done = atomic_load(&s->src_done);
		uint64_t v;

		r = decode_round(s, done, &diag);
		if (r < 0 || done)
			break;
		snapshot_poll(s, false);
		if (atomic_load(&s->stop))	/* get the tracer out of waitpid */
			(void)pthread_kill(s->src, PTD_SESSION_SIGNAL);
		if (poll(&p, 1, POLL_MS) > 0 &&
		    read(s->wake_fd, &v, sizeof(v)) < 0) {
			/* nothing to read: fine */
		}
	}
	if (r < 0) {
		/* decoding failed: stop the source, keep draining so it
		 * never waits on a full ring, then end */
		atomic_store(&s->stop, 1);
		atomic_store(&s->cancel, 1);
		while (!atomic_load(&s->src_done)) {
			(void)pthread_kill(s->src, PTD_SESSION_SIGNAL);
			(void)poll(&p, 1, 10);
		}
	}
	snapshot_poll(s, true);
	finish(s, r, &diag);
	return NULL;
}

/* ---- intel_pt: per-thread events ------------------------------------- */

static int hw_image(void *ctx, pid_t tid, const struct ptd_tl_event *ev);
static int hw_task(void *ctx, const struct ptd_perf_event *e);

/* The image as it is: file code from /proc/PID/maps, non-file code
 * (vDSO, JIT) copied now into snapshot files. */
static int hw_initial_image(struct ptd_session *s, struct ptd_diag *diag)
{
	struct ptd_maps maps;
	int r = ptd_maps_read_pid("/proc", s->o.pid, &maps, diag);

	if (r < 0)
		return r;
	for (size_t i = 0; r >= 0 && i < maps.n; i++) {
		const struct ptd_map *m = &maps.v[i];
		struct ptd_tl_event ev = { 0 };
		char file[64], path[512];

		if (!(m->prot & PTD_MAP_PROT_X) || m->kind == PTD_MAP_VSYSCALL)
			continue;
		ev.start = m->start;
		ev.end = m->end;
		if (m->kind == PTD_MAP_FILE) {
			ev.op = PTD_TL_MAP;
			ev.pgoff = m->offset;
			ev.path = m->path;
			ptd_file_id_from_map(m, &ev.id);
		} else {
			size_t len = (size_t)(m->end - m->start);
			uint8_t *buf = len <= (64u << 20) ? malloc(len) : NULL;
			struct iovec l = { buf, len };
			struct iovec rm = { (void *)(uintptr_t)m->start, len };

			if (!buf || process_vm_readv(s->o.pid, &l, 1, &rm, 1,
						     0) != (ssize_t)len) {
				free(buf);
				continue;	/* unreadable: decoded as gaps */
			}
			snprintf(file, sizeof(file), "snap-%u.bin",
				 atomic_fetch_add(&s->snapseq, 1u));
			snprintf(path, sizeof(path), "%s/%s", s->dir, file);
			r = ptd_file_write_atomic(path, buf, len);
			free(buf);
			if (r < 0)
				break;
			ev.op = PTD_TL_SNAPSHOT;
			ev.name = m->path[0] ? m->path : (char *)"[anon]";
			ev.file = file;
		}
		r = (int)ptd_timeline_add(&s->hist, &ev);
	}
	ptd_maps_free(&maps);
	return r < 0 ? ptd_diagf(diag, r, "process %d: reading its image: "
				 "%s", (int)s->o.pid, ptd_strerror(r)) : 0;
}

/* Open, map and enable @tid's intel_pt event; its stream starts with the
 * image as it is.  A thread already gone is not an error. */
static int hw_open_thread(struct ptd_session *s, pid_t tid,
			  struct ptd_diag *diag)
{
	struct ptd_stream_opts so;
	struct ptd_feed_hooks hooks = { hw_image, hw_task, s };
	struct dthread *v, *d;
	int fd, r;

	for (size_t i = 0; i < s->ndt; i++)
		if (s->dt[i].tid == tid && !s->dt[i].done)
			return 0;
	r = thread_charge(s, tid);
	if (r <= 0)	/* refused: said by its error record */
		return r;
	fd = (int)syscall(SYS_perf_event_open, &s->attr, tid, -1, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		if (r == -ESRCH)
			return 0;
		if (r == -EACCES || r == -EPERM)
			return ptd_diagf(diag, r, "intel_pt event for thread "
					 "%d refused: ptd needs CAP_PERFMON "
					 "(or a lower "
					 "/proc/sys/kernel/perf_event_paranoid)",
					 (int)tid);
		return ptd_diagf(diag, r, "the kernel refused the intel_pt "
				 "event (PMU type %u) for thread %d: %s",
				 s->pmu.type, (int)tid, ptd_strerror(r));
	}
	v = realloc(s->dt, (s->ndt + 1) * sizeof(*v));
	if (!v) {
		(void)close(fd);
		return -ENOMEM;
	}
	s->dt = v;
	d = &s->dt[s->ndt];
	memset(d, 0, sizeof(*d));
	d->tid = tid;
	d->fd = fd;
	r = ptd_perf_buf_map(fd, s->cfg.data_buffer_size, s->snap_size,
			     s->o.mode == PTD_MODE_SNAPSHOT, &d->hwbuf, diag);
	if (r == 0 && !s->has_wallref) {
		struct ptd_perf_clock c;	/* the kernel's perf clock */

		s->has_wallref = ptd_perf_clock_from_page(d->hwbuf.meta, &c,
							  NULL) == 0 &&
				 ptd_perf_wallref_sample(&c, 0, &s->wallref) == 0;
	}
	stream_opts(s, tid, &so);
	if (r == 0)
		r = ptd_stream_new(&so, &d->stream);
	for (size_t i = 0; r == 0 && i < s->hist.n; i++)
		r = ptd_stream_add_event(d->stream, &s->hist.ev[i]);
	if (r == 0)
		r = ptd_feed_new(&d->hwbuf, tid, d->stream, s->dir,
				 &s->snapseq, s->attr.sample_type,
				 s->attr.sample_id_all, &d->feed);
	if (r == 0)
		ptd_feed_set_hooks(d->feed, &hooks);
	if (r == 0 && s->filter_kstr)
		r = filter_apply(s, fd, tid, diag);
	if (r == 0 && ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) < 0)
		r = ptd_diagf(diag, -errno, "thread %d: enabling its intel_pt "
			      "event: %s", (int)tid, strerror(errno));
	s->ndt++;	/* freed with the session, even half made */
	if (r < 0) {
		d->done = true;
		return r;
	}
	atomic_fetch_add(&s->hw_threads, 1);
	atomic_fetch_add(&s->hw_live, 1);
	return 0;
}

/* An image change in one thread's sideband applies to every thread. */
static int hw_image(void *ctx, pid_t tid, const struct ptd_tl_event *ev)
{
	struct ptd_session *s = ctx;
	int64_t seq;
	int r;

	(void)tid;
	seq = ptd_timeline_add(&s->hist, ev);
	if (seq < 0)
		return (int)seq;
	for (size_t i = 0; i < s->ndt; i++)
		if (!s->dt[i].done && s->dt[i].stream &&
		    (r = ptd_stream_add_event(s->dt[i].stream, ev)) < 0)
			return r;
	return 0;
}

/* FORK of a new thread of the process: open its event after the drain.
 * EXIT of the leader: the process is gone. */
static int hw_task(void *ctx, const struct ptd_perf_event *e)
{
	struct ptd_session *s = ctx;
	pid_t *v;

	if ((pid_t)e->u.task.pid != s->o.pid)
		return 0;
	if (e->type == PERF_RECORD_EXIT) {
		if ((pid_t)e->u.task.tid == s->o.pid)
			s->leader_exited = true;
		return 0;
	}
	v = realloc(s->newtids, (s->nnew + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->newtids = v;
	s->newtids[s->nnew++] = (pid_t)e->u.task.tid;
	return 0;
}

static int hw_start(struct ptd_session *s, struct ptd_diag *diag)
{
	struct ptd_pt_options po = ptd_pt_options_default();
	char path[64];
	DIR *d;
	struct dirent *de;
	unsigned n = 0;
	int r;

	ptd_timeline_init(&s->hist);
	po.tsc = true;
	r = ptd_pt_attr_build(&s->pmu, &po, s->snap_size,
			      s->o.mode == PTD_MODE_SNAPSHOT, &s->attr, diag);
	if (r < 0)
		return r;
	/* per-thread mode: the event carries its thread's sideband */
	s->attr.mmap = 1;
	s->attr.mmap2 = 1;
	s->attr.comm = 1;
	s->attr.comm_exec = 1;
	s->attr.task = 1;
	if (ptd_pt_cpu_read("/proc/cpuinfo", &s->cpu, NULL) < 0)
		s->cpu.vendor = pcv_unknown;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)s->o.pid);
	d = opendir(path);
	if (!d)
		return ptd_diagf(diag, -ESRCH, "no such process: %d",
				 (int)s->o.pid);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	rewinddir(d);
	r = ptd_perf_mlock_check(s->snap_size +
				 s->cfg.data_buffer_size + 4096, n, "/proc",
				 diag);
	if (r == 0)
		r = hw_initial_image(s, diag);
	while (r == 0 && (de = readdir(d))) {
		uint64_t tid;

		if (ptd_parse_u64(de->d_name, 10, &tid) == 0 &&
		    tid <= INT32_MAX)
			r = hw_open_thread(s, (pid_t)tid, diag);
	}
	(void)closedir(d);
	return r;
}

/* One round: drain every thread's buffer, decode, follow new threads. */
static int hw_round(struct ptd_session *s, bool final, struct ptd_diag *diag)
{
	int r;

	refusals_report(s);
	for (size_t i = 0; i < s->ndt; i++) {
		struct dthread *d = &s->dt[i];

		if (d->done || !d->feed)
			continue;
		if (final)
			(void)ioctl(d->fd, PERF_EVENT_IOC_DISABLE, 0);
		if ((r = dthread_step(s, d, final, diag)) < 0)
			return r;
		if (d->done) {
			(void)close(d->fd);
			d->fd = -1;
			atomic_fetch_sub(&s->hw_live, 1);
		}
	}
	for (size_t i = 0; !final && i < s->nnew; i++)
		if ((r = hw_open_thread(s, s->newtids[i], diag)) < 0)
			return r;
	s->nnew = 0;
	return 0;
}

static void *hw_decode_main(void *arg)
{
	struct ptd_session *s = arg;
	struct ptd_diag diag = { "" };
	struct pollfd p = { s->wake_fd, POLLIN, 0 };
	int r = 0;

	for (;;) {
		bool last = atomic_load(&s->stop) || s->leader_exited ||
			    kill(s->o.pid, 0) < 0;
		uint64_t v;

		r = hw_round(s, last, &diag);
		if (r < 0 || last)
			break;
		snapshot_poll(s, false);
		if (poll(&p, 1, POLL_MS / 2) > 0 &&
		    read(s->wake_fd, &v, sizeof(v)) < 0) {
			/* nothing to read: fine */
		}
	}
	if (r < 0)	/* stop tracing whatever happened */
		(void)hw_round(s, true, &diag);
	s->src_err = r;
	if (r < 0)
		s->src_diag = diag;
	if (!atomic_load(&s->stop)) {
		s->res.exited = true;
		s->res.exit_code = -1;	/* not our child: unknown */
	}
	snapshot_poll(s, true);
	finish(s, r, &diag);
	return NULL;
}

/* ---- intel_pt: per-CPU events (opts.per_cpu) ------------------------- */

/* CPU @i's events: intel_pt for the process (inherit: its threads and
 * children created later too), and the sideband dummy, whose records the
 * kernel writes into the intel_pt event's ring (SET_OUTPUT, as perf
 * does): one ring per CPU, in the order the kernel wrote it. */
static int hw_pc_open_cpu(struct ptd_session *s, unsigned i,
			  struct ptd_diag *diag)
{
	int cpu = s->pc_cpus[i];
	int fd, r;

	fd = (int)syscall(SYS_perf_event_open, &s->attr, s->o.pid, cpu, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		if (r == -EACCES || r == -EPERM)
			return ptd_diagf(diag, r, "intel_pt event on cpu #%d "
					 "refused: ptd needs CAP_PERFMON (or a "
					 "lower /proc/sys/kernel/"
					 "perf_event_paranoid)", cpu);
		return ptd_diagf(diag, r, "the kernel refused the intel_pt "
				 "event (PMU type %u, inherit) for process %d "
				 "on cpu #%d: %s", s->pmu.type, (int)s->o.pid,
				 cpu, ptd_strerror(r));
	}
	s->pc_fd[i] = fd;
	r = s->filter_kstr ? filter_apply(s, fd, -1, diag) : 0;
	if (r == 0)
		r = ptd_perf_buf_map(fd, s->cfg.data_buffer_size,
				     s->snap_size, false, &s->pc_buf[i], diag);
	if (r == 0)
		r = ptd_sideband_open(s->o.pid, cpu, true, &s->pc_sbfd[i],
				      diag);
	if (r == 0 && ioctl(s->pc_sbfd[i], PERF_EVENT_IOC_SET_OUTPUT, fd) < 0)
		r = ptd_diagf(diag, -errno, "cpu #%d: redirecting the sideband "
			      "event into the intel_pt ring: %s", cpu,
			      strerror(errno));
	return r;
}

static int hw_pc_start(struct ptd_session *s, struct ptd_diag *diag)
{
	struct ptd_pt_options po = ptd_pt_options_default();
	struct ptd_perf_buf **bufs;
	size_t n = 0;
	int r;

	ptd_timeline_init(&s->hist);
	po.tsc = true;
	po.inherit = true;
	r = ptd_pt_attr_build(&s->pmu, &po, s->snap_size, false, &s->attr,
			      diag);
	if (r < 0)
		return r;
	if (ptd_pt_cpu_read("/proc/cpuinfo", &s->cpu, NULL) < 0)
		s->cpu.vendor = pcv_unknown;
	r = ptd_sideband_online_cpus(NULL, &s->pc_cpus, &n, diag);
	if (r < 0)
		return r;
	if (n > PTD_PERCPU_MAX_CPUS)
		return ptd_diagf(diag, -PTD_ELIMIT, "%zu CPUs: ptd traces at "
				 "most %u per session", n,
				 PTD_PERCPU_MAX_CPUS);
	s->pc_fd = malloc(n * sizeof(*s->pc_fd));
	s->pc_sbfd = malloc(n * sizeof(*s->pc_sbfd));
	s->pc_buf = calloc(n, sizeof(*s->pc_buf));
	bufs = malloc(n * sizeof(*bufs));
	if (!s->pc_fd || !s->pc_sbfd || !s->pc_buf || !bufs) {
		free(bufs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		s->pc_fd[i] = s->pc_sbfd[i] = -1;
		bufs[i] = &s->pc_buf[i];
	}
	s->ncpus = (unsigned)n;	/* session_destroy frees what is open */
	r = ptd_perf_mlock_check(s->snap_size + s->cfg.data_buffer_size +
				 4096, (unsigned)n, "/proc", diag);
	for (unsigned i = 0; r == 0 && i < n; i++)
		r = hw_pc_open_cpu(s, i, diag);
	if (r == 0)
		r = hw_initial_image(s, diag);
	if (r == 0)
		r = pc_feed_new(s, bufs, (unsigned)n, s->attr.sample_type, diag);
	free(bufs);
	for (size_t i = 0; r == 0 && i < s->hist.n; i++)
		r = ptd_cpufeed_image(s->cf, &s->hist.ev[i]);
	for (unsigned i = 0; r == 0 && i < n; i++)
		if (ioctl(s->pc_sbfd[i], PERF_EVENT_IOC_ENABLE, 0) < 0 ||
		    ioctl(s->pc_fd[i], PERF_EVENT_IOC_ENABLE, 0) < 0)
			r = ptd_diagf(diag, -errno, "cpu #%d: enabling the "
				      "events: %s", s->pc_cpus[i],
				      strerror(errno));
	return r;
}

static void *hw_pc_decode_main(void *arg)
{
	struct ptd_session *s = arg;
	struct ptd_diag diag = { "" };
	struct pollfd p = { s->wake_fd, POLLIN, 0 };
	int r = 0;

	for (;;) {
		bool last = atomic_load(&s->stop) || s->leader_exited ||
			    kill(s->o.pid, 0) < 0;
		uint64_t v;

		if (last)	/* the hardware flushes into the AUX area */
			for (unsigned i = 0; i < s->ncpus; i++) {
				(void)ioctl(s->pc_fd[i], PERF_EVENT_IOC_DISABLE,
					    0);
				(void)ioctl(s->pc_sbfd[i],
					    PERF_EVENT_IOC_DISABLE, 0);
			}
		refusals_report(s);
		r = pc_round(s, last, &diag);
		if (r < 0 || last)
			break;
		if (poll(&p, 1, POLL_MS / 2) > 0 &&
		    read(s->wake_fd, &v, sizeof(v)) < 0) {
			/* nothing to read: fine */
		}
	}
	for (unsigned i = 0; i < s->ncpus; i++)
		(void)ioctl(s->pc_fd[i], PERF_EVENT_IOC_DISABLE, 0);
	s->src_err = r;
	if (r < 0)
		s->src_diag = diag;
	if (!atomic_load(&s->stop)) {
		s->res.exited = true;
		s->res.exit_code = -1;	/* not our child: unknown */
	}
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

/* The mode and the AUX size per thread it implies. */
static int check_mode(struct ptd_session *s, struct ptd_diag *diag)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t n = s->o.snapshot_size;

	s->snap_size = s->cfg.aux_buffer_size;
	if (s->o.per_cpu && s->o.mode != PTD_MODE_FULL)
		return ptd_diagf(diag, -EINVAL, "per-CPU buffers are for full "
				 "mode only");
	if (s->o.mode == PTD_MODE_FULL) {
		if (n != 0)
			return ptd_diagf(diag, -EINVAL, "snapshot_size is for "
					 "snapshot mode only");
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
	for (size_t i = 0; i < s->ndt; i++) {
		ptd_feed_free(s->dt[i].feed);
		ptd_stream_free(s->dt[i].stream);
		if (s->dt[i].fd >= 0)
			(void)close(s->dt[i].fd);
		ptd_perf_buf_free(&s->dt[i].hwbuf);
		if (s->dt[i].tl)
			ptd_timeline_free(s->dt[i].tl);
		free(s->dt[i].tl);
		free(s->dt[i].snap);
	}
	ptd_cpufeed_free(s->cf);
	for (unsigned i = 0; s->pc_fd && i < s->ncpus; i++) {
		if (s->pc_sbfd[i] >= 0)
			(void)close(s->pc_sbfd[i]);
		if (s->pc_fd[i] >= 0)
			(void)close(s->pc_fd[i]);
		ptd_perf_buf_free(&s->pc_buf[i]);
	}
	free(s->pc_cpus);
	free(s->pc_fd);
	free(s->pc_sbfd);
	free(s->pc_buf);
	free(s->snap_reader);
	free(s->snap_info);
	ptd_timeline_free(&s->hist);
	free(s->newtids);
	free(s->untraced);
	free(s->refused);
	free(s->dt);
	ptd_livesink_free(s->ls);
	ptd_insncache_free(s->icache);
	ptd_iscache_free(s->iscache);
	if (s->dir[0])
		(void)ptd_rm_rf(s->dir);
	if (s->wake_fd >= 0)
		(void)close(s->wake_fd);
	(void)pthread_mutex_destroy(&s->lock);
	(void)pthread_cond_destroy(&s->cond);
	free(s->capture_dir);
	free(s->filter_text);
	free(s->filter_kstr);
	ptd_addrfilter_free(&s->filter);
	free(s);
}

/* intel_pt: the events are open on every thread; is the process still
 * the one the caller meant, and may it still be traced?  (The software
 * source asks the same once its threads are stopped: on_seized and the
 * tracer's pidfd check.) */
static int hw_verify(struct ptd_session *s, struct ptd_diag *diag)
{
	int r;

	if (s->o.pidfd > 0 && (r = ptd_pidfd_alive(s->o.pidfd)) < 0)
		return ptd_diagf(diag, r, "process %d is not the one ptd was "
				 "asked to trace: that one exited and its pid "
				 "now names another process (%s)",
				 (int)s->o.pid, r == -ESRCH ? "reused"
							   : ptd_strerror(r));
	return on_seized(s, diag);
}

/* The software source attached (state 1) or failed (-1).  Waiting, a
 * stop asked for gets the tracer out of its waitpid (it may wait for a
 * thread that cannot stop yet: one in vfork()), again every POLL_MS in
 * case the signal came before it waited. */
static int sw_wait_attached(struct ptd_session *s)
{
	struct timespec until;
	int state;

	(void)pthread_mutex_lock(&s->lock);
	while (s->state == 0) {
		if (!atomic_load(&s->stop)) {
			(void)pthread_cond_wait(&s->cond, &s->lock);
			continue;
		}
		(void)pthread_kill(s->src, PTD_SESSION_SIGNAL);
		(void)clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += POLL_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		(void)pthread_cond_timedwait(&s->cond, &s->lock, &until);
	}
	state = s->state;
	(void)pthread_mutex_unlock(&s->lock);
	return state;
}

/* Everything that reads the target or files, on the start thread: the
 * filter resolved against its maps, the buffers, and the source started
 * (software: every thread seized and stopped; intel_pt: the events
 * open). */
static int session_setup(struct ptd_session *s, struct ptd_diag *diag)
{
	int r = filter_setup(s, diag);

	if (r == 0)
		r = make_dir(s, diag);
	if (r < 0)
		return r;
	s->iscache = ptd_iscache_new();
	s->icache = ptd_insncache_new(ICACHE_ENTRIES);
	if (!s->iscache || !s->icache)
		return -ENOMEM;
	/* a file renamed over a mapped one is refused, the code read from
	 * the process instead (aspace/iscache.h) */
	ptd_iscache_check_identity(s->iscache, true, s->o.pid);
	if (s->o.mode == PTD_MODE_SNAPSHOT) {
		s->snap_reader = malloc(sizeof(*s->snap_reader));
		s->snap_info = malloc(sizeof(*s->snap_info));
		if (!s->snap_reader || !s->snap_info)
			return -ENOMEM;
	}
	if (s->source == PTD_SOURCE_INTEL_PT) {
		r = s->o.per_cpu ? hw_pc_start(s, diag) : hw_start(s, diag);
		return r < 0 ? r : hw_verify(s, diag);
	}
	/* the software source's perf time is CLOCK_MONOTONIC (livesink.h);
	 * one clock for every buffer and the capture */
	s->has_clock = ptd_perf_clock_calibrate(&s->clock, NULL) == 0;
	s->has_wallref = ptd_perf_wallref_sample(NULL, CLOCK_MONOTONIC,
						 &s->wallref) == 0;
	r = ptd_livesink_new(s->o.pid, s->cfg.data_buffer_size, s->snap_size,
			     s->wake_fd, &s->cancel, &s->ls);
	if (r == 0 && s->has_clock)
		r = ptd_livesink_set_clock(s->ls, &s->clock);
	if (r == 0 && s->o.mode == PTD_MODE_SNAPSHOT)
		r = ptd_livesink_set_overwrite(s->ls, true);
	if (r == 0 && s->o.per_cpu)
		r = ptd_livesink_set_cpus(s->ls, PTD_SESSION_SW_CPUS,
					  PTD_SESSION_SW_MIGRATE);
	if (r < 0)
		return ptd_diagf(diag, r, "cannot set up the trace buffers "
				 "(data %zu, aux %zu bytes): %s",
				 s->cfg.data_buffer_size, s->snap_size,
				 ptd_strerror(r));
	if (s->o.per_cpu) {
		struct ptd_perf_buf *bufs[PTD_SESSION_SW_CPUS];
		size_t n = ptd_livesink_cpus(s->ls, bufs,
					     PTD_SESSION_SW_CPUS);

		r = pc_feed_new(s, bufs, (unsigned)n,
				PTD_SIDEBAND_SAMPLE_TYPE, diag);
		if (r < 0)
			return r;
	}
	r = -pthread_create(&s->src, NULL, source_main, s);
	if (r < 0)
		return ptd_diagf(diag, r, "cannot start the source thread: %s",
				 strerror(-r));
	s->src_started = true;
	if (sw_wait_attached(s) > 0)
		return 0;
	/* Refused or cancelled: the tracer let go of the threads it could;
	 * one that never stopped is let go as the source thread exits. */
	(void)pthread_join(s->src, NULL);
	s->src_started = false;
	(void)ptd_swpt_wait_released(s->o.pid, s->src_tid);
	r = s->src_err;
	return ptd_diagf(diag, r, "%s", s->src_diag.msg[0] ? s->src_diag.msg
							  : ptd_strerror(r));
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
	int r = session_setup(s, &diag);

	decide(s, r, &diag);
	if (r < 0)
		return NULL;
	if (s->source == PTD_SOURCE_INTEL_PT)
		return s->o.per_cpu ? hw_pc_decode_main(s) : hw_decode_main(s);
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
	(void)pthread_mutex_lock(&s->lock);
	(void)pthread_cond_broadcast(&s->cond);
	(void)pthread_mutex_unlock(&s->lock);
}

void ptd_session_get_stats(struct ptd_session *s,
			   struct ptd_session_stats *ret)
{
	struct ptd_livesink_thread *lt[1];
	size_t n = 0;

	memset(ret, 0, sizeof(*ret));
	ret->source = s->source;
	ret->mode = s->o.mode;
	ret->per_cpu = s->o.per_cpu;
	/* attaching: the start thread is building what is counted below */
	if (ptd_session_started(s, NULL) != 1)
		return;
	if (!s->ls) {
		ret->threads = atomic_load(&s->hw_threads);
		ret->threads_live = atomic_load(&s->hw_live);
	}
	while (s->ls && ptd_livesink_threads(s->ls, n, lt, 1) == 1) {
		n++;
		if (!atomic_load(&lt[0]->ended))
			ret->threads_live++;
		else if (lt[0]->migrations)	/* written before ended */
			ret->migrated++;
		if (lt[0]->buf.meta)	/* none in per-CPU mode */
			ret->aux_written += __atomic_load_n(
				&lt[0]->buf.meta->aux_head, __ATOMIC_ACQUIRE);
	}
	if (s->ls && s->o.per_cpu) {
		struct ptd_perf_buf *b[PTD_SESSION_SW_CPUS];
		size_t nb = ptd_livesink_cpus(s->ls, b, PTD_SESSION_SW_CPUS);

		for (size_t i = 0; i < nb; i++)
			ret->aux_written += __atomic_load_n(
				&b[i]->meta->aux_head, __ATOMIC_ACQUIRE);
	}
	ret->per_cpu = s->o.per_cpu;
	ret->ncpus = s->ncpus;
	if (s->ls)
		ret->threads = (unsigned)n;
	ret->mode = s->o.mode;
	ret->snapshot_size = s->o.mode == PTD_MODE_SNAPSHOT ? s->snap_size : 0;
	ret->snapshots = atomic_load(&s->snapshots);
	ret->overwritten_bytes = atomic_load(&s->overwritten);
	ret->trace_bytes = atomic_load(&s->trace_bytes);
	ret->insns = atomic_load(&s->insns);
	ret->records = atomic_load(&s->records);
	ret->lost_bytes = atomic_load(&s->lost_bytes);
	ret->ended = atomic_load(&s->ended);
	ret->threads_refused = atomic_load(&s->threads_refused);
	ret->identity_mismatches = ptd_iscache_identity_mismatches(s->iscache);
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

	if (!o->per_cpu) {
		if (ret_thread)
			*ret_thread = ring;
		return ring * nthreads;
	}
	if (cpus < (long)PTD_SESSION_SW_CPUS)
		cpus = PTD_SESSION_SW_CPUS;
	if (ret_thread)
		*ret_thread = stream;
	/* (ring counts a stream per CPU too: a bound, not exact) */
	return ring * (uint64_t)cpus + stream * nthreads;
}

const char *ptd_session_filter(const struct ptd_session *s)
{
	return s ? s->filter_text : NULL;
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
	if (s->src_started)
		(void)pthread_join(s->src, NULL);
	session_destroy(s);
}
