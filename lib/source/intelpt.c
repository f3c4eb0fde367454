/* SPDX-License-Identifier: MIT */
/*
 * The intel_pt source: perf intel_pt events on the process.
 *
 * Per thread (the default): one event per thread, each with its own
 * buffer and its thread's sideband, so image changes seen by one are
 * shared with every thread's decoder here, and new threads are followed
 * from FORK records.  Per CPU (params.per_cpu): one event per online CPU
 * with inherit for the process, plus a sideband dummy event per CPU
 * writing into the same ring, decoded by decode/cpufeed.h.
 */
#include "source/source-int.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "aspace/maps.h"
#include "common/fileio.h"
#include "common/pidfd.h"
#include "common/strutil.h"
#include "perf/attr.h"
#include "perf/percpu.h"
#include "perf/sideband.h"

struct intelpt {
	struct ptd_source base;
	struct ptd_pt_pmu pmu;
	struct perf_event_attr attr;
	struct pt_cpu cpu;
	char *filter_kstr;		/* the filter as the kernel takes it */
	pid_t *newtids;			/* FORKs seen during a drain */
	size_t nnew;
	/* per CPU: pc_fd[i] the intel_pt event of CPU pc_cpus[i] (the
	 * sideband dummy pc_sbfd[i] writes into its ring), pc_buf[i] */
	unsigned npc;
	int *pc_cpus, *pc_fd, *pc_sbfd;
	struct ptd_perf_buf *pc_buf;
};

static struct intelpt *hw_of(struct ptd_source *s)
{
	return (struct intelpt *)s;
}

/* ---- the address filter ---- */

static int hw_filter_cap(struct ptd_source *s, uint32_t *cap,
			 struct ptd_diag *diag)
{
	*cap = hw_of(s)->pmu.nr_addr_filters;
	if (!*cap)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED, "filter: "
				 "this CPU's intel_pt cannot filter by "
				 "address (nr_addr_filters is 0)");
	return 0;
}

static int hw_filter_ready(struct ptd_source *s, struct ptd_diag *diag)
{
	struct intelpt *h = hw_of(s);
	/* Every range adds at most its file name and two numbers. */
	size_t klen = strlen(s->filter_text) + PTD_ADDRFILTER_MAX * 64 + 1;
	int r;

	if (!(h->filter_kstr = malloc(klen)))
		return -ENOMEM;
	r = ptd_addrfilter_kernel_string(&s->filter, h->filter_kstr, klen);
	if (r < 0)
		return ptd_diagf(diag, r, "filter: the kernel's filter string "
				 "does not fit in %zu bytes", klen);
	return 0;
}

/* Hand the filter to the intel_pt event @fd (before it is enabled) of
 * thread @tid (-1: a per-CPU event). */
static int filter_apply(struct intelpt *h, int fd, pid_t tid,
			struct ptd_diag *diag)
{
	struct ptd_diag d = { "" };
	int r = ptd_addrfilter_apply(fd, h->filter_kstr, &d);

	if (r < 0 && tid >= 0)
		return ptd_diagf(diag, r, "thread %d: setting the address "
				 "filter '%s': %s", (int)tid, h->filter_kstr,
				 d.msg);
	if (r < 0)
		return ptd_diagf(diag, r, "process %d: setting the address "
				 "filter '%s': %s", (int)h->base.p.pid,
				 h->filter_kstr, d.msg);
	return 0;
}

/* The decoder's CPU, and MTC/CYC timing as the event was configured. */
static void hw_decode_opts(const struct ptd_source *s,
			   struct ptd_decode_opts *o)
{
	const struct intelpt *h = (const struct intelpt *)s;
	struct pt_config cfg;

	o->cpu = h->cpu;
	if (ptd_pt_config_from_pmu(&h->pmu, &h->cpu, h->attr.config,
				   &cfg) == 0) {
		o->mtc_freq = cfg.mtc_freq;
		o->nom_freq = cfg.nom_freq;
		o->cpuid_0x15_eax = cfg.cpuid_0x15_eax;
		o->cpuid_0x15_ebx = cfg.cpuid_0x15_ebx;
	}
}

/* ---- per-thread events ---- */

static int hw_image(void *ctx, pid_t tid, const struct ptd_tl_event *ev);
static int hw_task(void *ctx, const struct ptd_perf_event *e);

/* The image as it is: file code from /proc/PID/maps, non-file code
 * (vDSO, JIT) copied now into snapshot files. */
static int hw_initial_image(struct ptd_source *s, struct ptd_diag *diag)
{
	struct ptd_maps maps;
	int r = ptd_maps_read_pid("/proc", s->p.pid, &maps, diag);

	if (r < 0)
		return r;
	for (size_t i = 0; r >= 0 && i < maps.n; i++) {
		const struct ptd_map *m = &maps.v[i];
		struct ptd_tl_event ev = { 0 };
		char file[64];

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

			if (!buf || process_vm_readv(s->p.pid, &l, 1, &rm, 1,
						     0) != (ssize_t)len) {
				free(buf);
				continue;	/* unreadable: decoded as gaps */
			}
			r = ptd_codesnap_files_put(&s->snapfiles, buf, len,
						   file, diag);
			free(buf);
			if (r < 0)
				break;
			ev.op = PTD_TL_SNAPSHOT;
			ev.name = m->path[0] ? m->path : (char *)"[anon]";
			ev.file = file;
		}
		r = (int)ptd_timeline_add(&s->hist, &ev);
	}
	ptd_maps_fini(&maps);
	return r < 0 ? ptd_diagf(diag, r, "process %d: reading its image: "
				 "%s", (int)s->p.pid, ptd_strerror(r)) : 0;
}

/* Open, map and enable @tid's intel_pt event; its stream starts with the
 * image as it is.  A thread already gone is not an error. */
static int hw_open_thread(struct intelpt *h, pid_t tid, struct ptd_diag *diag)
{
	struct ptd_source *s = &h->base;
	struct ptd_stream_opts so;
	struct ptd_feed_hooks hooks = { hw_image, hw_task, h };
	struct ptd_source_thread *d;
	int fd, r;

	for (size_t i = 0; i < s->ndt; i++)
		if (s->dt[i].tid == tid && !s->dt[i].done)
			return 0;
	r = ptd_source_charge(s, tid);
	if (r <= 0)	/* refused: said by its error record */
		return r;
	fd = (int)syscall(SYS_perf_event_open, &h->attr, tid, -1, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		if (r == -ESRCH) {	/* gone already: not traced */
			ptd_source_uncharge(s, tid);
			return 0;
		}
		if (r == -EACCES || r == -EPERM)
			return ptd_diagf(diag, r, "intel_pt event for thread "
					 "%d refused: ptd needs CAP_PERFMON "
					 "(or a lower "
					 "/proc/sys/kernel/perf_event_paranoid)",
					 (int)tid);
		return ptd_diagf(diag, r, "the kernel refused the intel_pt "
				 "event (PMU type %u) for thread %d: %s",
				 h->pmu.type, (int)tid, ptd_strerror(r));
	}
	if (!(d = ptd_source_thread_slot(s))) {
		(void)close(fd);
		return -ENOMEM;
	}
	d->tid = tid;
	d->fd = fd;
	r = ptd_perf_buf_map(fd, s->p.data_size, s->p.aux_size, s->p.snapshot,
			     &d->hwbuf, diag);
	if (r == 0 && !s->has_wallref) {
		struct ptd_perf_clock c;	/* the kernel's perf clock */

		s->has_wallref = ptd_perf_clock_from_page(d->hwbuf.meta, &c,
							  NULL) == 0 &&
				 ptd_perf_wallref_sample(&c, 0, &s->wallref) == 0;
	}
	ptd_source_stream_opts(s, tid, &so);
	if (r == 0)
		r = ptd_stream_new(&so, &d->stream);
	for (size_t i = 0; r == 0 && i < s->hist.n; i++)
		r = ptd_stream_add_event(d->stream, &s->hist.ev[i]);
	if (r == 0)
		r = ptd_feed_new(&d->hwbuf, tid, d->stream, &s->snapfiles,
				 h->attr.sample_type,
				 h->attr.sample_id_all, &d->feed);
	if (r == 0)
		ptd_feed_set_hooks(d->feed, &hooks);
	if (r == 0 && h->filter_kstr)
		r = filter_apply(h, fd, tid, diag);
	if (r == 0 && ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) < 0)
		r = ptd_diagf(diag, -errno, "thread %d: enabling its intel_pt "
			      "event: %s", (int)tid, strerror(errno));
	s->ndt++;	/* freed with the source, even half made */
	if (r < 0) {
		d->done = true;
		return r;
	}
	atomic_fetch_add(&s->threads, 1);
	atomic_fetch_add(&s->live, 1);
	return 0;
}

/* An image change in one thread's sideband applies to every thread. */
static int hw_image(void *ctx, pid_t tid, const struct ptd_tl_event *ev)
{
	struct ptd_source *s = ctx;
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
	struct intelpt *h = ctx;
	pid_t *v;

	if ((pid_t)e->u.task.pid != h->base.p.pid)
		return 0;
	if (e->type == PERF_RECORD_EXIT) {
		if ((pid_t)e->u.task.tid == h->base.p.pid)
			h->base.leader_exited = true;
		return 0;
	}
	v = realloc(h->newtids, (h->nnew + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	h->newtids = v;
	h->newtids[h->nnew++] = (pid_t)e->u.task.tid;
	return 0;
}

static int hw_thread_start(struct intelpt *h, struct ptd_diag *diag)
{
	struct ptd_source *s = &h->base;
	struct ptd_pt_options po = ptd_pt_options_default();
	char path[64];
	DIR *d;
	struct dirent *de;
	unsigned n = 0;
	int r;

	po.tsc = true;
	r = ptd_pt_attr_build(&h->pmu, &po, s->p.aux_size, s->p.snapshot,
			      &h->attr, diag);
	if (r < 0)
		return r;
	/* per-thread mode: the event carries its thread's sideband */
	h->attr.mmap = 1;
	h->attr.mmap2 = 1;
	h->attr.comm = 1;
	h->attr.comm_exec = 1;
	h->attr.task = 1;
	if (ptd_pt_cpu_read("/proc/cpuinfo", &h->cpu, NULL) < 0)
		h->cpu.vendor = pcv_unknown;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)s->p.pid);
	d = opendir(path);
	if (!d)
		return ptd_diagf(diag, -ESRCH, "no such process: %d",
				 (int)s->p.pid);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	rewinddir(d);
	r = ptd_perf_mlock_check(s->p.aux_size + s->p.data_size + 4096, n,
				 "/proc", diag);
	if (r == 0)
		r = hw_initial_image(s, diag);
	while (r == 0 && (de = readdir(d))) {
		uint64_t tid;

		if (ptd_parse_u64(de->d_name, 10, &tid) == 0 &&
		    tid <= INT32_MAX)
			r = hw_open_thread(h, (pid_t)tid, diag);
	}
	(void)closedir(d);
	return r;
}

/* @d's event is done with (its buffer stays mapped). */
static void hw_thread_close(struct ptd_source *s, struct ptd_source_thread *d)
{
	if (d->fd >= 0) {	/* (per-CPU mode: none, counted already) */
		(void)close(d->fd);
		d->fd = -1;
		atomic_fetch_sub(&s->live, 1);
	}
}

/* Full mode, @d decoded to its end: its event and buffer go. */
static int hw_thread_release(struct ptd_source *s,
			     struct ptd_source_thread *d)
{
	hw_thread_close(s, d);
	ptd_perf_buf_fini(&d->hwbuf);
	return 0;
}

/* One round: drain every thread's buffer, decode, follow new threads. */
static int hw_thread_round(struct intelpt *h, bool final,
			   struct ptd_diag *diag)
{
	struct ptd_source *s = &h->base;
	int r;

	for (size_t i = 0; final && i < s->ndt; i++)
		if (!s->dt[i].done && s->dt[i].feed)
			(void)ioctl(s->dt[i].fd, PERF_EVENT_IOC_DISABLE, 0);
	/* (ended threads go in the step: hw_thread_release, a snapshot
	 * session's once their last trace is copied) */
	r = ptd_source_threads_step(s, final, diag);
	if (r < 0)
		return r;
	for (size_t i = 0; !final && i < h->nnew; i++)
		if ((r = hw_open_thread(h, h->newtids[i], diag)) < 0)
			return r;
	h->nnew = 0;
	return 0;
}

/* ---- per-CPU events (params.per_cpu) ---- */

/* CPU @i's events: intel_pt for the process (inherit: its threads and
 * children created later too), and the sideband dummy, whose records the
 * kernel writes into the intel_pt event's ring (SET_OUTPUT, as perf
 * does): one ring per CPU, in the order the kernel wrote it. */
static int hw_pc_open_cpu(struct intelpt *h, unsigned i,
			  struct ptd_diag *diag)
{
	struct ptd_source *s = &h->base;
	int cpu = h->pc_cpus[i];
	int fd, r;

	fd = (int)syscall(SYS_perf_event_open, &h->attr, s->p.pid, cpu, -1,
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
				 "on cpu #%d: %s", h->pmu.type, (int)s->p.pid,
				 cpu, ptd_strerror(r));
	}
	h->pc_fd[i] = fd;
	r = h->filter_kstr ? filter_apply(h, fd, -1, diag) : 0;
	if (r == 0)
		r = ptd_perf_buf_map(fd, s->p.data_size, s->p.aux_size, false,
				     &h->pc_buf[i], diag);
	if (r == 0)
		r = ptd_sideband_open(s->p.pid, cpu, true, &h->pc_sbfd[i],
				      diag);
	if (r == 0 && ioctl(h->pc_sbfd[i], PERF_EVENT_IOC_SET_OUTPUT, fd) < 0)
		r = ptd_diagf(diag, -errno, "cpu #%d: redirecting the sideband "
			      "event into the intel_pt ring: %s", cpu,
			      strerror(errno));
	return r;
}

static int hw_pc_start(struct intelpt *h, struct ptd_diag *diag)
{
	struct ptd_source *s = &h->base;
	struct ptd_pt_options po = ptd_pt_options_default();
	struct ptd_perf_buf **bufs;
	size_t n = 0;
	int r;

	po.tsc = true;
	po.inherit = true;
	r = ptd_pt_attr_build(&h->pmu, &po, s->p.aux_size, false, &h->attr,
			      diag);
	if (r < 0)
		return r;
	if (ptd_pt_cpu_read("/proc/cpuinfo", &h->cpu, NULL) < 0)
		h->cpu.vendor = pcv_unknown;
	r = ptd_sideband_online_cpus(NULL, &h->pc_cpus, &n, diag);
	if (r < 0)
		return r;
	if (n > PTD_PERCPU_MAX_CPUS)
		return ptd_diagf(diag, -PTD_ELIMIT, "%zu CPUs: ptd traces at "
				 "most %u per session", n,
				 PTD_PERCPU_MAX_CPUS);
	h->pc_fd = malloc(n * sizeof(*h->pc_fd));
	h->pc_sbfd = malloc(n * sizeof(*h->pc_sbfd));
	h->pc_buf = calloc(n, sizeof(*h->pc_buf));
	bufs = malloc(n * sizeof(*bufs));
	if (!h->pc_fd || !h->pc_sbfd || !h->pc_buf || !bufs) {
		free(bufs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		h->pc_fd[i] = h->pc_sbfd[i] = -1;
		bufs[i] = &h->pc_buf[i];
	}
	h->npc = (unsigned)n;	/* hw_destroy frees what is open */
	s->ncpus = (unsigned)n;
	r = ptd_perf_mlock_check(s->p.aux_size + s->p.data_size + 4096,
				 (unsigned)n, "/proc", diag);
	for (unsigned i = 0; r == 0 && i < n; i++)
		r = hw_pc_open_cpu(h, i, diag);
	if (r == 0)
		r = hw_initial_image(s, diag);
	if (r == 0)
		r = ptd_source_cpufeed_new(s, bufs, (unsigned)n,
					   h->attr.sample_type, diag);
	free(bufs);
	for (size_t i = 0; r == 0 && i < s->hist.n; i++)
		r = ptd_cpufeed_image(s->cf, &s->hist.ev[i]);
	for (unsigned i = 0; r == 0 && i < n; i++)
		if (ioctl(h->pc_sbfd[i], PERF_EVENT_IOC_ENABLE, 0) < 0 ||
		    ioctl(h->pc_fd[i], PERF_EVENT_IOC_ENABLE, 0) < 0)
			r = ptd_diagf(diag, -errno, "cpu #%d: enabling the "
				      "events: %s", h->pc_cpus[i],
				      strerror(errno));
	return r;
}

/* The hardware flushes into the AUX area. */
static void hw_pc_disable(struct intelpt *h, bool sideband)
{
	for (unsigned i = 0; i < h->npc; i++) {
		(void)ioctl(h->pc_fd[i], PERF_EVENT_IOC_DISABLE, 0);
		if (sideband)
			(void)ioctl(h->pc_sbfd[i], PERF_EVENT_IOC_DISABLE, 0);
	}
}

/* ---- the operations ---- */

/* The events are open on every thread (or CPU); is the process still the
 * one the caller meant, and may it still be traced?  (The software source
 * asks the same once its threads are stopped.) */
static int hw_start(struct ptd_source *s, struct ptd_diag *diag)
{
	struct intelpt *h = hw_of(s);
	int r = s->p.per_cpu ? hw_pc_start(h, diag) : hw_thread_start(h, diag);

	if (r < 0)
		return r;
	if (s->p.pidfd > 0 && (r = ptd_pidfd_alive(s->p.pidfd)) < 0)
		return ptd_diagf(diag, r, "process %d is not the one ptd was "
				 "asked to trace: that one exited and its pid "
				 "now names another process (%s)",
				 (int)s->p.pid, r == -ESRCH ? "reused"
							    : ptd_strerror(r));
	return ptd_source_recheck(s, diag);
}

static bool hw_ending(struct ptd_source *s)
{
	return atomic_load(s->p.stop) || s->leader_exited ||
	       kill(s->p.pid, 0) < 0;
}

static int hw_drain(struct ptd_source *s, bool final, struct ptd_diag *diag)
{
	struct intelpt *h = hw_of(s);

	if (!s->p.per_cpu)
		return hw_thread_round(h, final, diag);
	if (final)
		hw_pc_disable(h, true);
	return ptd_source_cpufeed_round(s, final, diag);
}

/* Stop tracing whatever happened. */
static void hw_cancel(struct ptd_source *s, struct ptd_diag *diag)
{
	struct intelpt *h = hw_of(s);

	if (s->p.per_cpu)
		hw_pc_disable(h, false);
	else
		(void)hw_thread_round(h, true, diag);
}

static void hw_result(struct ptd_source *s, struct ptd_source_result *ret)
{
	/* (a decode failure is the host's own error) */
	if (!atomic_load(s->p.stop)) {
		ret->exited = true;
		ret->exit_code = -1;	/* not our child: unknown */
	}
}

static void hw_stats(struct ptd_source *s, struct ptd_source_stats *ret)
{
	ret->threads = atomic_load(&s->threads);
	ret->threads_live = atomic_load(&s->live);
}

/* The hardware's pause, which also flushes its internal buffers into the
 * AUX area. */
static int hw_pause(struct ptd_source *s)
{
	for (size_t i = 0; i < s->ndt; i++)
		if (s->dt[i].fd >= 0)
			(void)ioctl(s->dt[i].fd, PERF_EVENT_IOC_DISABLE, 0);
	return 0;
}

static void hw_resume(struct ptd_source *s)
{
	for (size_t i = 0; i < s->ndt; i++)
		if (s->dt[i].fd >= 0)
			(void)ioctl(s->dt[i].fd, PERF_EVENT_IOC_ENABLE, 0);
}

static void hw_destroy(struct ptd_source *s)
{
	struct intelpt *h = hw_of(s);

	for (unsigned i = 0; h->pc_fd && i < h->npc; i++) {
		if (h->pc_sbfd[i] >= 0)
			(void)close(h->pc_sbfd[i]);
		if (h->pc_fd[i] >= 0)
			(void)close(h->pc_fd[i]);
		ptd_perf_buf_fini(&h->pc_buf[i]);
	}
	free(h->pc_cpus);
	free(h->pc_fd);
	free(h->pc_sbfd);
	free(h->pc_buf);
	free(h->newtids);
	free(h->filter_kstr);
}

static const struct ptd_source_ops intelpt_ops = {
	.kind = PTD_SOURCE_INTEL_PT,
	.poll_ms = 50,
	.filter_cap = hw_filter_cap,
	.filter_ready = hw_filter_ready,
	.decode_opts = hw_decode_opts,
	.start = hw_start,
	.ending = hw_ending,
	.drain = hw_drain,
	.cancel = hw_cancel,
	.result = hw_result,
	.stats = hw_stats,
	.pause = hw_pause,
	.resume = hw_resume,
	.thread_release = hw_thread_release,
	.destroy = hw_destroy,
};

const char ptd_source_intelpt_no_children[] =
	"children: the intel_pt source does not follow a child process itself "
	"(its per-thread intel_pt events do not follow a fork): its host must "
	"stop each child before its first instruction and trace it as a "
	"process of its own (ptd does, with its BPF fork stopper)";

int ptd_source_intelpt_new(const struct ptd_source_params *p,
			   const struct ptd_pt_pmu *pmu,
			   struct ptd_source **ret, struct ptd_diag *diag)
{
	struct intelpt *h;

	if (!p || !pmu || !ret || !p->host.record || !p->stop)
		return -EINVAL;
	/* A child would have to be traced from its first instruction after
	 * the fork, into a session of its own.  ptd's per-thread events
	 * are opened without inherit (the kernel refuses to map an
	 * inherited per-task event), so they do not follow a fork, and an
	 * event opened on the child once the source hears of it (its FORK
	 * record) misses what it ran before; the per-CPU events inherit,
	 * but into this session's buffers, not the child's.  The child must
	 * be stopped in the fork path before its first instruction, which
	 * the source cannot do: its host does (the daemon's BPF fork
	 * stopper, daemon/forkstop.h) and traces the child with a source of
	 * its own.  A host that asks the source is refused. */
	if (p->host.child)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED, "%s",
				 ptd_source_intelpt_no_children);
	if (!(h = calloc(1, sizeof(*h))))
		return -ENOMEM;
	ptd_source_init(&h->base, &intelpt_ops, p);
	h->pmu = *pmu;
	*ret = &h->base;
	return 0;
}
