/* SPDX-License-Identifier: MIT */
/*
 * The software PT source: ptrace single-stepping of every thread of a
 * program, turned into Intel PT by swpt/ptgen.h.
 *
 * How Linux reports what a single step did (measured, kernel 6.x):
 *  - An ordinary instruction: SIGTRAP, si_code TRAP_TRACE, at the next ip.
 *  - A SYSCALL: SIGTRAP, si_code TRAP_BRKPT, where user space resumes
 *    (after the syscall, at the new program after execve, at the
 *    interrupted ip after rt_sigreturn).
 *  - A syscall interrupted by a signal returns -ERESTART* in rax; if no
 *    handler runs, the kernel rewinds rip onto the SYSCALL and runs it again,
 *    and the next stop is a TRAP_BRKPT at the same ip: the instruction that
 *    executed was the SYSCALL, not the one at ip.
 *  - A signal: a signal-delivery-stop (the pending instruction has not
 *    executed).  Injected with PTRACE_SINGLESTEP, a signal with a handler
 *    gives a SIGTRAP stop with si_code SIGTRAP (ptrace_notify) at the
 *    handler's first instruction, nothing executed; an ignored one lets the
 *    step run the pending instruction as usual.
 *
 * Tracing is enabled lazily: a thread's ptgen is enabled (TIP.PGE) just
 * before its first instruction after a start, a syscall or a signal handler
 * entry is recorded, so a signal delivered right after a syscall shows as
 * PGD at the SYSCALL and PGE at the handler, as the hardware has it.
 *
 * Limitation: the loop waits with waitpid(-1, __WALL | __WNOTHREAD), as it
 * must to see every thread: the calling thread should have no other
 * children whose status it expects to collect while tracing.  __WNOTHREAD
 * keeps tracers in other threads of the same process (one per session in
 * ptd) from taking each other's stops.
 *
 * Attaching (ptd_swpt_attach) seizes the threads of a running process with
 * PTRACE_SEIZE: they are stopped with PTRACE_INTERRUPT, stepped from where
 * they stand, and at the end detached the same way, each at a stop of its
 * own; nothing is injected and the trap flag is cleared by PTRACE_DETACH.
 */
#include "swpt/tracer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "aspace/maps.h"
#include "aspace/timeline.h"
#include "common/fileio.h"
#include "common/pidfd.h"
#include "common/strutil.h"
#include "swpt/capture.h"
#include "x86/insn.h"

#define USER_CS_64 0x33
#define CODE_READ 16u
#define ICACHE_MIN 4096u
#define ICACHE_MAX (1u << 22)
#define SNAP_MAX (256ull << 20)	/* bytes of one non-file mapping */
#define FLUSH_NS 50000000ll	/* live output: flush streams this often */
#define FLUSH_CHECK 256u	/* ... checking the clock every so many stops */
#define WAIT_FLAGS (__WALL | __WNOTHREAD)

/* Kernel-internal restart codes a syscall may leave in rax when a signal
 * interrupted it (include/linux/errno.h). */
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

/* ---- decoded-instruction cache --------------------------------------- */

struct icache_ent {
	uint64_t ip;
	uint32_t gen;		/* valid iff == icache.gen */
	struct ptd_x86_insn insn;
};

/* Open addressing, linear probing; cleared in O(1) by bumping gen. */
struct icache {
	struct icache_ent *v;
	size_t cap;		/* power of two */
	size_t n;
	uint32_t gen;
};

static size_t icache_slot(const struct icache *c, uint64_t ip)
{
	return (size_t)((ip * 0x9e3779b97f4a7c15ull) >> 20) & (c->cap - 1);
}

static struct ptd_x86_insn *icache_find(struct icache *c, uint64_t ip)
{
	for (size_t i = icache_slot(c, ip);; i = (i + 1) & (c->cap - 1)) {
		struct icache_ent *e = &c->v[i];

		if (e->gen != c->gen)
			return NULL;
		if (e->ip == ip)
			return &e->insn;
	}
}

static void icache_clear(struct icache *c)
{
	c->n = 0;
	if (++c->gen == 0) {	/* wrapped: really clear */
		memset(c->v, 0, c->cap * sizeof(*c->v));
		c->gen = 1;
	}
}

static int icache_grow(struct icache *c)
{
	struct icache old = *c;

	c->cap = old.cap ? old.cap * 2 : ICACHE_MIN;
	c->v = calloc(c->cap, sizeof(*c->v));
	if (!c->v) {
		*c = old;
		return -ENOMEM;
	}
	c->gen = 1;
	c->n = 0;
	for (size_t i = 0; i < old.cap; i++) {
		const struct icache_ent *e = &old.v[i];
		size_t j;

		if (e->gen != old.gen)
			continue;
		for (j = icache_slot(c, e->ip); c->v[j].gen == c->gen;
		     j = (j + 1) & (c->cap - 1))
			;
		c->v[j] = *e;
		c->v[j].gen = c->gen;
		c->n++;
	}
	free(old.v);
	return 0;
}

static int icache_put(struct icache *c, uint64_t ip,
		      const struct ptd_x86_insn *insn)
{
	size_t i;

	if (c->n + 1 > c->cap / 2) {
		if (c->cap >= ICACHE_MAX)
			icache_clear(c);
		else if (icache_grow(c) < 0)
			return -ENOMEM;
	}
	for (i = icache_slot(c, ip); c->v[i].gen == c->gen;
	     i = (i + 1) & (c->cap - 1))
		;
	c->v[i].ip = ip;
	c->v[i].gen = c->gen;
	c->v[i].insn = *insn;
	c->n++;
	return 0;
}

/* ---- state ----------------------------------------------------------- */

struct tracer;

struct tthread {
	struct tracer *tr;
	pid_t tid;
	uint64_t first_seq;
	struct ptd_ptgen *gen;	/* NULL once the stream is finished */
	FILE *pt;
	uint64_t pt_bytes;
	struct ptd_truth_writer truth;
	bool has_truth;		/* writing a capture */
	uint64_t insns;
	bool started;		/* had its first stop */
	bool reaped;
	/* met at its first stop, before its creator's clone event (see
	 * on_clone_event) */
	bool unannounced;
	/* As of the thread's last stop: */
	uint64_t ip;		/* the instruction it executes next */
	struct ptd_x86_insn insn;	/* decoded at ip */
	uint64_t sysnr;		/* rax at ip, for a SYSCALL */
	bool entered;		/* kernel entry of the SYSCALL at ip already
				 * emitted (at an exec event) */
	bool rep_recorded;	/* REP at ip already in the truth */
	int inject;		/* signal injected by the last resume */
	bool restart;		/* last syscall returned -ERESTART* ... */
	uint64_t restart_ip;	/* ... from the SYSCALL here */
	bool stop_sent;		/* detaching: SIGSTOP sent, not yet seen */
	uint32_t filter_seq;	/* the tracer's filter_seq its generator has */
	bool after_exec;	/* resumed from the first exec event: the
				 * syscall-exit stop at ip comes first */
	/* ptd_swpt_attach: its first stop, met while the attach waits for
	 * every thread to stop (hold_all), handled once tracing begins */
	bool held;
	int held_status;
};

/* A child process of the target (fork, vfork, clone without CLONE_THREAD):
 * seen announced by its parent's event and/or stopped; detached once
 * stopped, forgotten once both. */
struct forkrec {
	pid_t pid;
	bool announced;
	bool detached;
};

struct snap_range {
	uint64_t start, end;
};

struct tracer {
	const struct ptd_swpt_options *opt;
	struct ptd_diag *diag;
	pid_t pid;
	struct ptd_timeline tl;
	struct tthread **th;	/* every thread, in creation order */
	size_t nth;
	size_t live;		/* threads with an open stream */
	struct tthread *last;	/* lookup cache */
	struct ptd_maps maps;	/* as last read */
	struct snap_range *snaps;	/* non-file code already saved */
	size_t nsnaps;
	struct icache ic;
	uint64_t insns, steps;
	unsigned forks_detached;
	struct forkrec *forks;
	size_t nforks;
	bool detaching;
	bool seized;		/* attached with PTRACE_SEIZE */
	unsigned flush_tick;
	int64_t last_flush;	/* CLOCK_MONOTONIC ns */
	bool leader_gone;
	/* opt->filter resolved when tracing starts, again whenever the
	 * executable mappings change and after an exec (filter_update);
	 * each thread's generator takes it at its next instruction
	 * (record_if). */
	struct pt_conf_addr_filter fcfg;
	bool fcfg_set;
	unsigned fpending;	/* ranges whose file is not mapped (yet) */
	uint32_t filter_seq;	/* changes of fcfg */
	bool exited;
	int exit_code, exit_signal;
};

static int failf(struct tracer *tr, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int failf(struct tracer *tr, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)ptd_vdiagf(tr->diag, err, fmt, ap);
	va_end(ap);
	return err;
}

/* The newest thread @tid, live or not (a thread id can be reused), or
 * NULL. */
static struct tthread *last_thread(struct tracer *tr, pid_t tid)
{
	for (size_t i = tr->nth; i-- > 0;)
		if (tr->th[i]->tid == tid)
			return tr->th[i];
	return NULL;
}

static struct tthread *find_thread(struct tracer *tr, pid_t tid)
{
	if (tr->last && tr->last->tid == tid && !tr->last->reaped)
		return tr->last;
	for (size_t i = tr->nth; i-- > 0;)
		if (tr->th[i]->tid == tid && !tr->th[i]->reaped)
			return tr->last = tr->th[i];
	return NULL;
}

/* ---- streams --------------------------------------------------------- */

static int pt_sink(void *ctx, const uint8_t *data, size_t len)
{
	struct tthread *t = ctx;
	const struct ptd_swpt_out *out = t->tr->opt->out;
	int r;

	if (t->pt && fwrite_unlocked(data, 1, len, t->pt) != len)
		return -EIO;
	if (out && (r = out->pt(out->ctx, t->tid, data, len)) < 0)
		return r;
	t->pt_bytes += len;
	return 0;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Live output: hand every live stream's bytes over. */
static int flush_all(struct tracer *tr)
{
	int r;

	tr->last_flush = now_ns();
	for (size_t i = 0; i < tr->nth; i++)
		if (tr->th[i]->gen && (r = ptd_ptgen_flush(tr->th[i]->gen)) < 0)
			return r;
	return 0;
}

/* Live output: flush now and then, so records flow while threads run. */
static int flush_due(struct tracer *tr)
{
	if (!tr->opt->out || ++tr->flush_tick % FLUSH_CHECK)
		return 0;
	if (now_ns() - tr->last_flush < FLUSH_NS)
		return 0;
	return flush_all(tr);
}

/* OUTDIR/PREFIX-TID.bin */
static char *out_path(const struct tracer *tr, const char *prefix, pid_t tid)
{
	char *p;

	if (asprintf(&p, "%s/%s-%d.bin", tr->opt->outdir, prefix, (int)tid) < 0)
		return NULL;
	return p;
}

/* A new thread with its PT and truth files; its stream starts after every
 * timeline event added so far. */
static int thread_files(struct tracer *tr, struct tthread *t)
{
	_cleanup_free_ char *pt = out_path(tr, "pt", t->tid);
	_cleanup_free_ char *truth = out_path(tr, "truth", t->tid);
	int r;

	if (!pt || !truth)
		return -ENOMEM;
	t->pt = fopen(pt, "wxe");
	if (!t->pt) {
		r = -errno;
		return failf(tr, r, "cannot create '%s': %s", pt,
			     ptd_strerror(r));
	}
	if (setvbuf(t->pt, NULL, _IOFBF, 1u << 16) != 0)
		return -ENOMEM;
	r = ptd_truth_writer_open(&t->truth, truth);
	if (r < 0)
		return failf(tr, r, "cannot create '%s': %s", truth,
			     ptd_strerror(r));
	t->has_truth = true;
	return 0;
}

static int thread_new(struct tracer *tr, pid_t tid, struct tthread **ret)
{
	const struct ptd_swpt_out *out = tr->opt->out;
	struct ptd_ptgen_config cfg = tr->opt->gen;
	struct tthread *t, **v;
	int r;

	if (tr->nth >= PTD_CAPTURE_MAX_THREADS)
		return failf(tr, -PTD_ELIMIT, "more than %u threads",
			     PTD_CAPTURE_MAX_THREADS);
	v = realloc(tr->th, (tr->nth + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	tr->th = v;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	tr->th[tr->nth++] = t;
	t->tr = tr;
	t->tid = tid;
	t->first_seq = tr->tl.next_seq;
	if (tr->opt->outdir && (r = thread_files(tr, t)) < 0)
		return r;
	if (out && (r = out->thread_begin(out->ctx, tid)) < 0)
		return failf(tr, r, "thread %d: live output: %s", (int)tid,
			     ptd_strerror(r));
	cfg.sink = pt_sink;
	cfg.sink_ctx = t;
	t->gen = ptd_ptgen_new(&cfg, &r);
	if (!t->gen)
		return failf(tr, r, "cannot set up the packet generator: %s",
			     ptd_strerror(r));
	if (tr->fcfg_set && (r = ptd_ptgen_set_filter(t->gen, &tr->fcfg)) < 0)
		return failf(tr, r, "thread %d: cannot set the filter: %s",
			     (int)tid, ptd_strerror(r));
	t->filter_seq = tr->filter_seq;
	tr->live++;
	*ret = t;
	return 0;
}

/* End @t's stream with the thread about to execute @ip. */
static int thread_finish(struct tracer *tr, struct tthread *t, uint64_t ip)
{
	int r, r2, r3 = 0;

	if (!t->gen)
		return 0;
	r = ptd_ptgen_finish(t->gen, ip);
	r2 = ptd_ptgen_free(t->gen);
	t->gen = NULL;
	tr->live--;
	if (t->pt && fflush(t->pt) != 0)
		r3 = -errno;
	if (t->pt && fclose(t->pt) != 0 && r3 == 0)
		r3 = -errno;
	t->pt = NULL;
	if (r == 0)
		r = r2;
	if (r == 0)
		r = r3;
	if (t->has_truth) {
		r2 = ptd_truth_writer_close(&t->truth);
		t->has_truth = false;
		if (r == 0)
			r = r2;
	}
	if (tr->opt->out) {
		r2 = tr->opt->out->thread_end(tr->opt->out->ctx, t->tid);
		if (r == 0)
			r = r2;
	}
	if (r < 0)
		return failf(tr, r, "thread %d: cannot finish its streams: %s",
			     (int)t->tid, ptd_strerror(r));
	return 0;
}

static void thread_free(struct tthread *t)
{
	if (!t)
		return;
	(void)ptd_ptgen_free(t->gen);
	if (t->pt)
		(void)fclose(t->pt);
	if (t->has_truth)
		(void)ptd_truth_writer_close(&t->truth);
	free(t);
}

/* ---- timeline -------------------------------------------------------- */

/* Add @ev with the current position of every live thread; a live output
 * gets every stream up to there first, then the event (and @code, the
 * bytes of a snapshot). */
static int tl_add_code(struct tracer *tr, struct ptd_tl_event *ev,
		       const uint8_t *code, size_t ncode)
{
	const struct ptd_swpt_out *out = tr->opt->out;
	struct ptd_tl_pos *pos;
	size_t n = 0;
	int64_t seq;
	int r;

	if (out && (r = flush_all(tr)) < 0)
		return r;
	pos = calloc(tr->live ? tr->live : 1, sizeof(*pos));
	if (!pos)
		return -ENOMEM;
	for (size_t i = 0; i < tr->nth; i++) {
		if (!tr->th[i]->gen)
			continue;
		pos[n].tid = tr->th[i]->tid;
		pos[n].pos = ptd_ptgen_offset(tr->th[i]->gen);
		n++;
	}
	ev->pos = pos;
	ev->npos = n;
	seq = ptd_timeline_add(&tr->tl, ev);
	free(pos);
	if (seq < 0)
		return (int)seq;
	if (out && (r = out->image(out->ctx, &tr->tl.ev[tr->tl.n - 1], code,
				   ncode)) < 0)
		return failf(tr, r, "live output of an image change: %s",
			     ptd_strerror(r));
	return 0;
}

static int tl_add(struct tracer *tr, struct ptd_tl_event *ev)
{
	return tl_add_code(tr, ev, NULL, 0);
}

static bool map_exec(const struct ptd_map *m)
{
	return m->prot & PTD_MAP_PROT_X;
}

static bool map_same(const struct ptd_map *a, const struct ptd_map *b)
{
	return a->start == b->start && a->end == b->end &&
	       a->offset == b->offset && a->inode == b->inode &&
	       a->dev_major == b->dev_major && a->dev_minor == b->dev_minor &&
	       a->prot == b->prot && a->kind == b->kind &&
	       strcmp(a->path, b->path) == 0;
}

/* Whether @maps has a mapping identical to @m. */
static bool maps_has(const struct ptd_maps *maps, const struct ptd_map *m)
{
	const struct ptd_map *f = ptd_maps_find(maps, m->start);

	return f && map_same(f, m);
}

static int add_map_event(struct tracer *tr, const struct ptd_map *m)
{
	struct ptd_tl_event ev = { 0 };

	ev.op = PTD_TL_MAP;
	ev.start = m->start;
	ev.end = m->end;
	ev.pgoff = m->offset;
	ev.path = m->path;
	ptd_file_id_from_map(m, &ev.id);	/* checked where it is read */
	return tl_add(tr, &ev);
}

static void drop_snaps(struct tracer *tr, uint64_t start, uint64_t end)
{
	size_t k = 0;

	for (size_t i = 0; i < tr->nsnaps; i++)
		if (tr->snaps[i].end <= start || tr->snaps[i].start >= end)
			tr->snaps[k++] = tr->snaps[i];
	tr->nsnaps = k;
}

static int read_maps(struct tracer *tr, struct ptd_maps *ret)
{
	int r = ptd_maps_read_pid("/proc", tr->pid, ret, tr->diag);

	if (r < 0 && r != -PTD_EFORMAT && r != -PTD_ELIMIT)
		return failf(tr, r, "cannot read /proc/%d/maps: %s",
			     (int)tr->pid, ptd_strerror(r));
	return r;
}

static void filter_update(struct tracer *tr, bool exec);

/* Re-read the maps and put the difference in executable mappings into the
 * timeline: UNMAP for what is gone or changed, MAP for new file code.
 * Non-file code is saved when it first executes (ensure_snapshot). */
static int maps_refresh(struct tracer *tr)
{
	struct ptd_maps now;
	bool changed = false;
	int r = read_maps(tr, &now);

	if (r < 0)
		return r;
	for (size_t i = 0; i < tr->maps.n; i++) {
		const struct ptd_map *m = &tr->maps.v[i];
		struct ptd_tl_event ev = { 0 };

		if (!map_exec(m) || maps_has(&now, m))
			continue;
		changed = true;
		drop_snaps(tr, m->start, m->end);
		ev.op = PTD_TL_UNMAP;
		ev.start = m->start;
		ev.end = m->end;
		if ((r = tl_add(tr, &ev)) < 0)
			goto out;
	}
	for (size_t i = 0; i < now.n; i++) {
		const struct ptd_map *m = &now.v[i];

		if (!map_exec(m) || maps_has(&tr->maps, m))
			continue;
		changed = true;
		drop_snaps(tr, m->start, m->end);
		if (m->kind == PTD_MAP_FILE && (r = add_map_event(tr, m)) < 0)
			goto out;
	}
	if (changed)
		icache_clear(&tr->ic);
	ptd_maps_free(&tr->maps);
	tr->maps = now;
	if (changed)
		filter_update(tr, false);
	return 0;
out:
	ptd_maps_free(&now);
	return r;
}

/* The whole map set is new (first stop, exec): MAP every file mapping. */
static int maps_load_all(struct tracer *tr)
{
	int r;

	ptd_maps_free(&tr->maps);
	tr->nsnaps = 0;
	icache_clear(&tr->ic);
	r = read_maps(tr, &tr->maps);
	if (r < 0)
		return r;
	for (size_t i = 0; i < tr->maps.n; i++) {
		const struct ptd_map *m = &tr->maps.v[i];

		if (map_exec(m) && m->kind == PTD_MAP_FILE &&
		    (r = add_map_event(tr, m)) < 0)
			return r;
	}
	filter_update(tr, true);
	return 0;
}

/* Resolve opt->filter against the maps just read (once) and hand it to
 * every thread's generator; none of them is tracing yet (the threads were
 * just seized, or the program was just exec'd).  A range in a file the
 * process does not map yet is pending (it must exist, in the process's
 * root), as the kernel has it. */
static int filter_resolve(struct tracer *tr)
{
	char root[64];
	int r;

	if (!tr->opt->filter || tr->fcfg_set)
		return 0;
	(void)snprintf(root, sizeof(root), "/proc/%d/root", (int)tr->pid);
	r = ptd_addrfilter_resolve(tr->opt->filter, &tr->maps, root,
				   &tr->fcfg, &tr->fpending, tr->diag);
	if (r < 0)
		return r;	/* the message is in diag */
	tr->fcfg_set = true;
	tr->filter_seq++;
	for (size_t i = 0; i < tr->nth; i++) {
		if (!tr->th[i]->gen)
			continue;
		r = ptd_ptgen_set_filter(tr->th[i]->gen, &tr->fcfg);
		if (r < 0)
			return failf(tr, r, "thread %d: cannot set the filter "
				     "while it is tracing: %s",
				     (int)tr->th[i]->tid, ptd_strerror(r));
		tr->th[i]->filter_seq = tr->filter_seq;
	}
	return 0;
}

/* The maps changed: resolve the file ranges again, as the kernel does at
 * every executable mapping (a pending range's file was mapped by a dlopen,
 * a library was mapped elsewhere) and after an exec (@exec), where the old
 * program's addresses are void.  A range whose file is no longer mapped
 * is pending again.  A range that does not resolve otherwise (the mapping
 * does not hold it) keeps its addresses; after an exec it is pending.
 * Each thread takes the new filter at its next instruction (record_if):
 * the hardware's filter MSRs are written only with TraceEn clear, so a
 * thread that is tracing stops and starts again, as the kernel restarts
 * a running event for it. */
static void filter_update(struct tracer *tr, bool exec)
{
	static const struct ptd_maps none;
	const struct ptd_addrfilter *f = tr->opt->filter;
	struct pt_conf_addr_filter c;
	bool files = false;
	unsigned pending;

	for (size_t i = 0; tr->fcfg_set && i < f->n; i++)
		files |= f->v[i].file != NULL;
	if (!files)
		return;
	if (ptd_addrfilter_resolve(f, &tr->maps, NULL, &c, &pending,
				   NULL) < 0) {
		if (!exec)
			return;
		if (ptd_addrfilter_resolve(f, &none, NULL, &c, &pending,
					   NULL) < 0)
			return;
	}
	if (!memcmp(&c, &tr->fcfg, sizeof(c)))
		return;
	tr->fcfg = c;
	tr->fpending = pending;
	tr->filter_seq++;
}

/* ---- code bytes, snapshots ------------------------------------------- */

/* Read up to @len bytes at @addr of @tid; a range that crosses into an
 * unreadable page gives what lies before it.  Returns bytes read or
 * -errno. */
static ssize_t read_mem(pid_t tid, uint64_t addr, void *buf, size_t len)
{
	const uint64_t page = 4096;
	uint64_t first = page - (addr & (page - 1));
	struct iovec local = { buf, len };
	struct iovec remote[2];
	int nr = 1;
	ssize_t n;

	remote[0].iov_base = (void *)(uintptr_t)addr;
	remote[0].iov_len = len;
	/* Transfers are partial only at iovec boundaries: split at pages. */
	if (first < len) {
		remote[0].iov_len = first;
		remote[1].iov_base = (void *)(uintptr_t)(addr + first);
		remote[1].iov_len = len - first;
		nr = 2;
	}
	n = process_vm_readv(tid, &local, 1, remote, (unsigned long)nr, 0);
	return n < 0 ? -errno : n;
}

static bool snapped(const struct tracer *tr, uint64_t ip)
{
	for (size_t i = 0; i < tr->nsnaps; i++)
		if (ip >= tr->snaps[i].start && ip < tr->snaps[i].end)
			return true;
	return false;
}

static const char *snap_name(const struct ptd_map *m)
{
	if (m->path[0])
		return m->path;
	return m->kind == PTD_MAP_ANON ? "[anon]" : ptd_map_kind_name(m->kind);
}

/* Save the bytes of non-file mapping @m in snap-SEQ.bin. */
static int snapshot(struct tracer *tr, pid_t tid, const struct ptd_map *m)
{
	uint64_t size = m->end - m->start;
	struct ptd_tl_event ev = { 0 };
	_cleanup_free_ uint8_t *buf = NULL;
	_cleanup_free_ char *path = NULL;
	char file[64];
	struct snap_range *v;
	size_t done = 0;
	int r;

	if (size > SNAP_MAX)
		return failf(tr, -PTD_ELIMIT, "cannot save code at %#" PRIx64
			     ": mapping of %" PRIu64 " bytes is too large",
			     m->start, size);
	buf = malloc(size);
	snprintf(file, sizeof(file), "snap-%" PRIu64 ".bin", tr->tl.next_seq);
	if (tr->opt->outdir &&
	    asprintf(&path, "%s/%s", tr->opt->outdir, file) < 0)
		return -ENOMEM;
	if (!buf)
		return -ENOMEM;
	while (done < size) {
		size_t chunk = size - done < (1u << 20) ? size - done
							: (1u << 20);
		ssize_t n = read_mem(tid, m->start + done, buf + done, chunk);

		if (n <= 0)
			return failf(tr, n < 0 ? (int)n : -EIO,
				     "cannot read code at %#" PRIx64 " of "
				     "thread %d", m->start + done, (int)tid);
		done += (size_t)n;
	}
	r = path ? ptd_file_write_atomic(path, buf, size) : 0;
	if (r < 0)
		return failf(tr, r, "cannot write '%s': %s", path,
			     ptd_strerror(r));
	v = realloc(tr->snaps, (tr->nsnaps + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	tr->snaps = v;
	tr->snaps[tr->nsnaps++] = (struct snap_range){ m->start, m->end };
	ev.op = PTD_TL_SNAPSHOT;
	ev.start = m->start;
	ev.end = m->end;
	ev.name = (char *)snap_name(m);
	ev.file = file;
	return tl_add_code(tr, &ev, buf, size);
}

static const struct ptd_map *find_map(struct tracer *tr, uint64_t ip)
{
	const struct ptd_map *m = ptd_maps_find(&tr->maps, ip);

	/* Not there: the maps changed behind our back (another process
	 * sharing them, or a syscall we do not watch).  Catch up once. */
	if (!m && maps_refresh(tr) == 0)
		m = ptd_maps_find(&tr->maps, ip);
	return m;
}

/* Make @ip's code available to a decoder: file code is in the timeline
 * already; other code is saved when it first runs. */
static int ensure_snapshot(struct tracer *tr, pid_t tid, uint64_t ip)
{
	const struct ptd_map *m = find_map(tr, ip);

	if (!m)
		return failf(tr, -PTD_ENOIMAGE, "thread %d: ip %#" PRIx64
			     " is not in any mapping", (int)tid, ip);
	switch (m->kind) {
	case PTD_MAP_FILE:
		return 0;
	case PTD_MAP_VSYSCALL:
		return failf(tr, -PTD_EUNSUPPORTED, "thread %d: ip %#" PRIx64
			     " is in [vsyscall]", (int)tid, ip);
	case PTD_MAP_DELETED:
	case PTD_MAP_ANON:
	case PTD_MAP_HEAP:
	case PTD_MAP_STACK:
	case PTD_MAP_VDSO:
	case PTD_MAP_VVAR:
	case PTD_MAP_OTHER:
		break;
	}
	if (snapped(tr, ip))
		return 0;
	return snapshot(tr, tid, m);
}

/* Decode the instruction @t executes next (at @ip, with @rax in rax), from
 * the cache or the live process; save non-file code first. */
static int prepare(struct tracer *tr, struct tthread *t, uint64_t ip,
		   uint64_t rax)
{
	struct ptd_x86_insn *c = icache_find(&tr->ic, ip);
	uint8_t bytes[CODE_READ];
	ssize_t n;
	int r;

	t->ip = ip;
	t->sysnr = rax;		/* the number, should ip be a SYSCALL */
	if (c) {
		t->insn = *c;
		return 0;
	}
	r = ensure_snapshot(tr, t->tid, ip);
	if (r < 0)
		return r;
	n = read_mem(t->tid, ip, bytes, sizeof(bytes));
	if (n <= 0)
		return failf(tr, n < 0 ? (int)n : -EIO,
			     "thread %d: cannot read code at %#" PRIx64 ": %s",
			     (int)t->tid, ip, ptd_strerror(n < 0 ? (int)n
						      : -EIO));
	r = ptd_x86_decode(bytes, (size_t)n, ip, ptem_64bit, &t->insn);
	if (r < 0)
		return failf(tr, r, "thread %d: cannot decode the instruction "
			     "at %#" PRIx64 ": %s", (int)t->tid, ip,
			     ptd_strerror(r));
	return icache_put(&tr->ic, ip, &t->insn);
}

/* ---- recording ------------------------------------------------------- */

/* The instruction at @ip executes: enable tracing first if it is off (the
 * thread just started, or came back from the kernel), then the truth
 * (unless @truth is false). */
static int record_if(struct tracer *tr, struct tthread *t, uint64_t ip,
		     bool truth)
{
	int r;

	/* A new filter reaches a thread that is tracing as the kernel's
	 * reaches a running event (perf_event_stop with restart: an IPI):
	 * tracing stops before this instruction and starts again with the
	 * new ranges. */
	if (t->filter_seq != tr->filter_seq && ptd_ptgen_enabled(t->gen) &&
	    (r = ptd_ptgen_interrupt(t->gen, ip)) < 0)
		return r;
	if (!ptd_ptgen_enabled(t->gen)) {
		if (t->filter_seq != tr->filter_seq) {
			r = ptd_ptgen_set_filter(t->gen, &tr->fcfg);
			if (r < 0)
				return failf(tr, r, "thread %d: cannot set "
					     "the filter: %s", (int)t->tid,
					     ptd_strerror(r));
			t->filter_seq = tr->filter_seq;
		}
		if (tr->opt->gen.tsc)
			ptd_ptgen_set_tsc(t->gen, __builtin_ia32_rdtsc());
		r = ptd_ptgen_enable(t->gen, ip);
		if (r < 0)
			return r;
	}
	/* Outside the filter ranges: not in the trace, nor the truth. */
	if (!truth || !ptd_ptgen_traces(t->gen, ip))
		return 0;
	if (t->has_truth && (r = ptd_truth_writer_add(&t->truth, ip)) < 0)
		return r;
	t->insns++;
	tr->insns++;
	return 0;
}

static int record(struct tracer *tr, struct tthread *t, uint64_t ip)
{
	return record_if(tr, t, ip, true);
}

static bool maps_syscall(uint64_t nr)
{
	switch (nr) {
	case SYS_mmap:
	case SYS_mprotect:
	case SYS_munmap:
	case SYS_brk:
	case SYS_mremap:
	case SYS_shmat:
	case SYS_shmdt:
	case SYS_remap_file_pages:
	case SYS_pkey_mprotect:
		return true;
	default:
		return false;
	}
}

static bool restart_code(uint64_t rax)
{
	int64_t v = (int64_t)rax;

	return v == -ERESTARTSYS || v == -ERESTARTNOINTR ||
	       v == -ERESTARTNOHAND || v == -ERESTART_RESTARTBLOCK;
}

/* The SYSCALL/INT at @ip entered the kernel (once per execution).  An INT
 * is not in the truth: its packets are FUP(its own ip) + TIP.PGD, an
 * asynchronous exit before it as a decoder sees it, so no decoder reports
 * it. */
static int kernel_entry(struct tracer *tr, struct tthread *t, uint64_t ip,
			const struct ptd_x86_insn *insn)
{
	int r;

	if (t->entered)
		return 0;
	r = record_if(tr, t, ip, insn->kind != PTD_X86_INT);
	if (r < 0)
		return r;
	t->entered = true;
	r = ptd_ptgen_kernel_entry(t->gen, ip, insn);
	/* live: the thread may block in there; what it did goes out now */
	if (r == 0 && tr->opt->out)
		r = ptd_ptgen_flush(t->gen);
	return r;
}

/* @t executed the instruction at @ip (@insn) and is now at @next, stopped
 * with registers @regs.  Records it and prepares the next one. */
static int completed(struct tracer *tr, struct tthread *t, uint64_t ip,
		     const struct ptd_x86_insn *insn, uint64_t sysnr,
		     const struct user_regs_struct *regs)
{
	uint64_t next = regs->rip;
	struct ptd_x86_insn cur = *insn;
	int r;

	if (insn->kind == PTD_X86_SYSCALL || insn->kind == PTD_X86_INT) {
		r = kernel_entry(tr, t, ip, &cur);
		t->entered = false;
		t->rep_recorded = false;
		if (r < 0)
			return r;
		t->restart = insn->kind == PTD_X86_SYSCALL &&
			     restart_code(regs->rax);
		t->restart_ip = ip;
		if (insn->kind == PTD_X86_SYSCALL && maps_syscall(sysnr) &&
		    (r = maps_refresh(tr)) < 0)
			return r;
		return prepare(tr, t, next, regs->rax);
	}
	t->restart = false;
	/* A REP string instruction is one instruction however many steps. */
	if (insn->rep && next == ip) {
		if (!t->rep_recorded) {
			r = record(tr, t, ip);
			if (r < 0)
				return r;
			t->rep_recorded = true;
		}
		return 0;
	}
	if (!t->rep_recorded) {
		r = record(tr, t, ip);
		if (r < 0)
			return r;
	}
	t->rep_recorded = false;
	/* Next first: code reached through this transfer is saved before
	 * the packet that leads there. */
	r = prepare(tr, t, next, regs->rax);
	if (r < 0)
		return r;
	return ptd_ptgen_step(t->gen, ip, &cur, next);
}

/* A step stop: the pending instruction ran (or, for TRAP_BRKPT after a
 * restarted syscall, the SYSCALL before it ran again). */
static int on_step(struct tracer *tr, struct tthread *t, int si_code,
		   const struct user_regs_struct *regs)
{
	struct ptd_x86_insn sys;
	int r;

	if (t->after_exec) {
		t->after_exec = false;
		/* the execve returning into the new program: nothing ran */
		if (si_code == TRAP_BRKPT && regs->rip == t->ip)
			return 0;
	}
	if (si_code == TRAP_BRKPT && t->insn.kind != PTD_X86_SYSCALL &&
	    t->insn.kind != PTD_X86_INT) {
		if (!t->restart)
			return failf(tr, -EPROTO, "thread %d: syscall stop at "
				     "%#llx, but %#" PRIx64 " is no syscall",
				     (int)t->tid, regs->rip, t->ip);
		/* The kernel rewound onto the SYSCALL and ran it again. */
		r = prepare(tr, t, t->restart_ip, regs->orig_rax);
		if (r < 0)
			return r;
		sys = t->insn;
		return completed(tr, t, t->restart_ip, &sys, regs->orig_rax,
				 regs);
	}
	sys = t->insn;
	return completed(tr, t, t->ip, &sys, t->sysnr, regs);
}

/* ---- stops ----------------------------------------------------------- */

static int get_regs(struct tracer *tr, pid_t tid,
		    struct user_regs_struct *regs)
{
	if (ptrace(PTRACE_GETREGS, tid, NULL, regs) < 0)
		return failf(tr, -errno, "thread %d: PTRACE_GETREGS: %s",
			     (int)tid, strerror(errno));
	return 0;
}

static int check_64bit(struct tracer *tr, const struct user_regs_struct *regs)
{
	if (regs->cs != USER_CS_64)
		return failf(tr, -PTD_EUNSUPPORTED, "process %d runs 32-bit "
			     "code (cs %#llx): only 64-bit programs are "
			     "supported", (int)tr->pid, regs->cs);
	return 0;
}

/* Resume @t for one more instruction.  A thread that vanished meanwhile
 * reports its exit later. */
static int resume(struct tracer *tr, struct tthread *t, int sig)
{
	t->inject = sig;
	if (ptrace(PTRACE_SINGLESTEP, t->tid, NULL, (void *)(long)sig) < 0 &&
	    errno != ESRCH)
		return failf(tr, -errno, "thread %d: PTRACE_SINGLESTEP: %s",
			     (int)t->tid, strerror(errno));
	return 0;
}

/* The value after "@key" (e.g. "Tgid:") in /proc/TID/status, up to the end
 * of its line, into @buf.  Returns 0, -errno (no such thread), or
 * -PTD_EFORMAT (no such key, or a value longer than @cap). */
static int status_field(pid_t tid, const char *key, char *buf, size_t cap)
{
	_cleanup_free_ char *text = NULL;
	char path[64], k[32];
	const char *p;
	size_t len;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	r = ptd_file_read_all(path, 1u << 16, &text, &len);
	if (r < 0)
		return r;
	snprintf(k, sizeof(k), "\n%s", key);
	p = strstr(text, k);
	if (!p)
		return -PTD_EFORMAT;
	p += strlen(k);
	p += strspn(p, " \t");
	len = strcspn(p, "\n");
	if (len >= cap)
		return -PTD_EFORMAT;
	memcpy(buf, p, len);
	buf[len] = 0;
	return 0;
}

/* The number after "@key" in /proc/TID/status, in @base.  Returns 0,
 * -errno (no such thread), or -PTD_EFORMAT. */
static int status_u64(pid_t tid, const char *key, int base, uint64_t *ret)
{
	char v[32];
	int r = status_field(tid, key, v, sizeof(v));

	if (r < 0)
		return r;
	return ptd_parse_u64n(v, strlen(v), base, ret) < 0 ? -PTD_EFORMAT : 0;
}

/* Whether @tid has exited or is exiting: gone from /proc, or a zombie or
 * dead task -- which PTRACE_SEIZE refuses with EPERM, not ESRCH. */
static bool thread_exited(pid_t tid)
{
	char st[64];
	int r = status_field(tid, "State:", st, sizeof(st));

	if (r == -ENOENT || r == -ESRCH)
		return true;
	return r == 0 && (st[0] == 'Z' || st[0] == 'X');
}

static int read_tgid(pid_t tid, pid_t *ret)
{
	uint64_t v;
	int r = status_u64(tid, "Tgid:", 10, &v);

	if (r < 0)
		return r;
	if (v > INT_MAX)
		return -PTD_EFORMAT;
	*ret = (pid_t)v;
	return 0;
}

static struct forkrec *fork_find(struct tracer *tr, pid_t pid, bool add)
{
	struct forkrec *v;

	for (size_t i = 0; i < tr->nforks; i++)
		if (tr->forks[i].pid == pid)
			return &tr->forks[i];
	if (!add)
		return NULL;
	v = realloc(tr->forks, (tr->nforks + 1) * sizeof(*v));
	if (!v)
		return NULL;
	tr->forks = v;
	v[tr->nforks] = (struct forkrec){ pid, false, false };
	return &v[tr->nforks++];
}

/* Forget a child process once it is both announced and detached. */
static void fork_settle(struct tracer *tr, struct forkrec *f)
{
	if (f->announced && f->detached)
		*f = tr->forks[--tr->nforks];
}

static bool forks_pending(const struct tracer *tr)
{
	for (size_t i = 0; i < tr->nforks; i++)
		if (!tr->forks[i].detached)
			return true;
	return false;
}

/* A stopped child process of the target: let it run untraced.  Detaching
 * clears the trap flag the kernel set for stepping. */
static int detach_child(struct tracer *tr, pid_t pid)
{
	struct forkrec *f = fork_find(tr, pid, true);

	if (!f)
		return -ENOMEM;
	if (ptrace(PTRACE_DETACH, pid, NULL, NULL) < 0 && errno != ESRCH)
		return failf(tr, -errno, "cannot detach child process %d: %s",
			     (int)pid, strerror(errno));
	f->detached = true;
	tr->forks_detached++;
	fork_settle(tr, f);
	return 0;
}

/* max_insns: finish @t's stream and let it run on untraced. */
static int detach_thread(struct tracer *tr, struct tthread *t)
{
	int r = thread_finish(tr, t, t->ip);

	if (ptrace(PTRACE_DETACH, t->tid, NULL, NULL) < 0 && errno != ESRCH &&
	    r == 0)
		r = failf(tr, -errno, "cannot detach thread %d: %s",
			  (int)t->tid, strerror(errno));
	t->reaped = true;	/* no longer ours to wait for */
	return r;
}

/* The instruction limit is reached at @t's stop, or a stop was asked for
 * (@t NULL): detach @t now, and every other thread at its next stop.
 * Seized threads are stopped with PTRACE_INTERRUPT.  Others are made to
 * stop with a SIGSTOP of their own, which is swallowed when it arrives (a
 * thread may not be detached while that signal is still pending: it would
 * stop the whole process once untraced). */
static int start_detach(struct tracer *tr, struct tthread *t)
{
	tr->detaching = true;
	for (size_t i = 0; i < tr->nth; i++) {
		struct tthread *u = tr->th[i];

		if (u == t || u->reaped || !u->gen || !u->started)
			continue;
		if (tr->seized) {
			if (ptrace(PTRACE_INTERRUPT, u->tid, NULL, NULL) == 0)
				u->stop_sent = true;
		} else if (syscall(SYS_tgkill, tr->pid, u->tid, SIGSTOP) == 0) {
			u->stop_sent = true;
		}
	}
	return t ? detach_thread(tr, t) : 0;
}

static bool stop_asked(const struct tracer *tr)
{
	return tr->opt->stop && atomic_load(tr->opt->stop) != 0;
}

/* After a stop was handled: detach at the limit or when asked, else step
 * on.  A seized thread can go at any stop of its own; one sent a SIGSTOP
 * waits for it. */
static int step_on(struct tracer *tr, struct tthread *t)
{
	if (tr->detaching && tr->seized)
		return detach_thread(tr, t);
	if (!tr->detaching && ((tr->opt->max_insns &&
				tr->insns >= tr->opt->max_insns) ||
			       stop_asked(tr)))
		return start_detach(tr, t);
	return resume(tr, t, 0);
}

static int on_first_stop(struct tracer *tr, struct tthread *t, int sig,
			 const struct user_regs_struct *regs)
{
	int r;

	t->started = true;
	r = check_64bit(tr, regs);
	if (r < 0)
		return r;
	r = prepare(tr, t, regs->rip, regs->rax);
	if (r < 0)
		return r;
	if (tr->detaching)
		return detach_thread(tr, t);
	/* Seized inside a syscall that will be restarted: the kernel rewinds
	 * onto the SYSCALL as it resumes, and the first step stop is that
	 * SYSCALL's (on_step's restart case). */
	if (tr->seized && (int64_t)regs->orig_rax >= 0 &&
	    restart_code(regs->rax)) {
		t->restart = true;
		t->restart_ip = regs->rip - 2;
	}
	/* a new thread starts with a SIGSTOP of the kernel's (or, seized, an
	 * event stop): swallow it */
	return resume(tr, t, sig == SIGSTOP || sig == SIGTRAP ? 0 : sig);
}

static int add_exec_event(struct tracer *tr);

/* A seized thread's first stop is an event inside a syscall (it was
 * seized as it made it): the syscall completes with a step stop at the
 * same ip when resumed, where nothing ran.  After an exec the image is new
 * (the maps read at the attach may be the old program's). */
static int on_first_event(struct tracer *tr, struct tthread *t, int event,
			  const struct user_regs_struct *regs)
{
	int r;

	t->started = true;
	t->after_exec = true;
	if (event == PTRACE_EVENT_EXEC) {
		r = check_64bit(tr, regs);
		if (r == 0)
			r = add_exec_event(tr);
		if (r == 0)
			r = maps_load_all(tr);
		if (r < 0)
			return r;
	}
	r = prepare(tr, t, regs->rip, regs->rax);
	if (r < 0)
		return r;
	if (tr->detaching)
		return detach_thread(tr, t);
	return resume(tr, t, 0);
}

/* A stop of a task we do not know: a new thread whose parent's clone event
 * has not been seen yet, or a child process of the target. */
static int on_unknown(struct tracer *tr, pid_t pid, int status,
		      const struct user_regs_struct *regs)
{
	struct tthread *t;
	pid_t tgid;
	int r;

	if (read_tgid(pid, &tgid) == 0 && tgid == tr->pid) {
		r = thread_new(tr, pid, &t);
		if (r < 0)
			return r;
		t->unannounced = true;
		return on_first_stop(tr, t, WSTOPSIG(status), regs);
	}
	return detach_child(tr, pid);
}

/* A clone, fork or vfork event in @t: the new task is a thread of ours (its
 * stream starts now, before its first stop) or a child process (detached
 * at its first stop; forks_pending waits for that).
 *
 * The kernel reports newer tracees first, so a new thread's first stop can
 * come before this event, and the event can wait while the thread is
 * stepped, detached (as the tracer detaches) or even reaped: such a thread
 * was met in on_unknown and marked unannounced.  It is the same thread,
 * not a new one to wait for -- and, once reaped, no longer in /proc to
 * tell its process by.  A task that is gone without having been met was
 * killed before its first stop (a fatal signal, or an exec in another
 * thread): nothing to wait for either. */
static int on_clone_event(struct tracer *tr, struct tthread *t, int event)
{
	unsigned long msg = 0;
	struct tthread *n;
	struct forkrec *f;
	pid_t tgid;
	int r;

	if (ptrace(PTRACE_GETEVENTMSG, t->tid, NULL, &msg) < 0)
		return failf(tr, -errno, "thread %d: PTRACE_GETEVENTMSG: %s",
			     (int)t->tid, strerror(errno));
	n = event == PTRACE_EVENT_CLONE ? last_thread(tr, (pid_t)msg) : NULL;
	if (n && n->unannounced) {
		n->unannounced = false;
	} else if (read_tgid((pid_t)msg, &tgid) < 0) {
		/* gone before its first stop */
	} else if (event == PTRACE_EVENT_CLONE && tgid == tr->pid) {
		if (!find_thread(tr, (pid_t)msg)) {
			r = thread_new(tr, (pid_t)msg, &n);
			if (r < 0)
				return r;
		}
	} else {
		f = fork_find(tr, (pid_t)msg, true);
		if (!f)
			return -ENOMEM;
		f->announced = true;
		fork_settle(tr, f);
	}
	/* the clone SYSCALL completes at the next step stop */
	return resume(tr, t, 0);
}

static int add_exec_event(struct tracer *tr)
{
	struct ptd_tl_event ev = { 0 };
	char link[64], path[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/exe", (int)tr->pid);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return failf(tr, -errno, "cannot read %s: %s", link,
			     strerror(errno));
	path[n] = 0;
	ev.op = PTD_TL_EXEC;
	ev.path = path;
	return tl_add(tr, &ev);
}

/* execve succeeded in @t (the leader): the SYSCALL entered the kernel, the
 * image is new from here. */
static int on_exec_event(struct tracer *tr, struct tthread *t,
			 const struct user_regs_struct *regs)
{
	unsigned long former = 0;
	int r;

	if (ptrace(PTRACE_GETEVENTMSG, t->tid, NULL, &former) < 0)
		return failf(tr, -errno, "thread %d: PTRACE_GETEVENTMSG: %s",
			     (int)t->tid, strerror(errno));
	if ((pid_t)former != t->tid)
		return failf(tr, -PTD_EUNSUPPORTED, "thread %lu of process %d "
			     "called execve: only the main thread may",
			     former, (int)tr->pid);
	if (t->insn.kind != PTD_X86_SYSCALL)
		return failf(tr, -EPROTO, "thread %d: exec, but %#" PRIx64
			     " is no syscall", (int)t->tid, t->ip);
	r = check_64bit(tr, regs);
	if (r < 0)
		return r;
	r = kernel_entry(tr, t, t->ip, &t->insn);
	if (r < 0)
		return r;
	t->sysnr = UINT64_MAX;	/* the maps are read here, not after */
	r = add_exec_event(tr);
	if (r < 0)
		return r;
	r = maps_load_all(tr);
	if (r < 0)
		return r;
	return resume(tr, t, 0);
}

/* The thread is about to exit (exit syscall, or killed). */
static int on_exit_event(struct tracer *tr, struct tthread *t,
			 const struct user_regs_struct *regs)
{
	int r;

	/* rip moved: the pending instruction (the exit SYSCALL, or one
	 * that completed as a fatal signal came) executed */
	if (t->gen && regs->rip != t->ip) {
		r = on_step(tr, t, TRAP_TRACE, regs);
		if (r < 0)
			return r;
	}
	r = thread_finish(tr, t, t->ip);
	if (r < 0)
		return r;
	if (ptrace(PTRACE_CONT, t->tid, NULL, NULL) < 0 && errno != ESRCH)
		return failf(tr, -errno, "thread %d: PTRACE_CONT: %s",
			     (int)t->tid, strerror(errno));
	return 0;
}

static int on_handler_entry(struct tracer *tr, struct tthread *t,
			    const struct user_regs_struct *regs)
{
	int r = 0;

	/* The pending instruction did not run: an asynchronous exit at it,
	 * unless tracing is off already (the signal came after a syscall). */
	if (ptd_ptgen_enabled(t->gen))
		r = ptd_ptgen_interrupt(t->gen, t->ip);
	if (r < 0)
		return r;
	t->rep_recorded = false;	/* a REP resumed is reported again */
	t->restart = false;		/* the kernel restarts via the frame */
	t->entered = false;
	r = prepare(tr, t, regs->rip, regs->rax);
	if (r < 0)
		return r;
	return step_on(tr, t);
}

static int on_signal(struct tracer *tr, struct tthread *t, int sig,
		     const struct user_regs_struct *regs)
{
	int r;

	/* A trap such as INT3 reports after its instruction ran. */
	if (regs->rip != t->ip) {
		r = on_step(tr, t, TRAP_TRACE, regs);
		if (r < 0)
			return r;
	}
	if (sig == SIGSTOP && t->stop_sent && !tr->seized)
		return detach_thread(tr, t);
	if (tr->detaching && tr->seized) {
		/* the signal goes to the thread as it leaves */
		r = thread_finish(tr, t, t->ip);

		if (ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)sig) < 0 &&
		    errno != ESRCH && r == 0)
			r = failf(tr, -errno, "cannot detach thread %d: %s",
				  (int)t->tid, strerror(errno));
		t->reaped = true;
		return r;
	}
	return resume(tr, t, sig);
}

/* Whether a SIGTRAP is queued for thread @tid (SigPnd in its status). */
static bool trap_pending(pid_t tid)
{
	uint64_t v;

	return status_u64(tid, "SigPnd:", 16, &v) == 0 &&
	       (v & (1ull << (SIGTRAP - 1)));
}

static bool is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN ||
	       sig == SIGTTOU;
}

static int on_stopped(struct tracer *tr, struct tthread *t, int status,
		      const struct user_regs_struct *regs)
{
	int sig = WSTOPSIG(status), event = status >> 16, inject = t->inject;
	siginfo_t si;
	int r;

	t->inject = 0;
	switch (event) {
	case 0:
		break;
	case PTRACE_EVENT_CLONE:
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
		return on_clone_event(tr, t, event);
	case PTRACE_EVENT_EXEC:
		return on_exec_event(tr, t, regs);
	case PTRACE_EVENT_EXIT:
		return on_exit_event(tr, t, regs);
	case PTRACE_EVENT_STOP:
		/* Seized: our PTRACE_INTERRUPT, or a group-stop.  The kernel
		 * reports it before signals still queued; a step's SIGTRAP
		 * may be one, and must not outlive us (it would kill the
		 * process): step on, and detach at that trap's stop. */
		if (tr->detaching && !trap_pending(t->tid))
			return detach_thread(tr, t);
		return resume(tr, t, 0);
	default:
		return resume(tr, t, 0);
	}
	if (sig != SIGTRAP && !is_stop_signal(sig))
		return on_signal(tr, t, sig, regs);
	if (ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &si) < 0) {
		if (errno == EINVAL)	/* a group-stop: carry on */
			return resume(tr, t, 0);
		return failf(tr, -errno, "thread %d: PTRACE_GETSIGINFO: %s",
			     (int)t->tid, strerror(errno));
	}
	if (sig != SIGTRAP)
		return on_signal(tr, t, sig, regs);
	/* ptrace_notify() at a signal handler's first instruction */
	if (si.si_code == SIGTRAP && inject)
		return on_handler_entry(tr, t, regs);
	if (si.si_code == TRAP_TRACE || si.si_code == TRAP_BRKPT ||
	    si.si_code == SIGTRAP) {
		r = on_step(tr, t, si.si_code, regs);
		if (r < 0)
			return r;
		return step_on(tr, t);
	}
	/* a SIGTRAP someone sent, or INT3's */
	return on_signal(tr, t, sig, regs);
}

static int on_gone(struct tracer *tr, struct tthread *t, int status)
{
	int r = 0;

	if (t->gen)	/* killed without an exit event */
		r = thread_finish(tr, t, t->ip);
	t->reaped = true;
	if (t->tid == tr->pid) {
		tr->leader_gone = true;
		tr->exited = true;
		if (WIFEXITED(status))
			tr->exit_code = WEXITSTATUS(status);
		else
			tr->exit_signal = WTERMSIG(status);
	}
	return r;
}

static int on_wait(struct tracer *tr, pid_t pid, int status)
{
	struct tthread *t = find_thread(tr, pid);
	struct user_regs_struct regs;
	int r;

	if (WIFEXITED(status) || WIFSIGNALED(status))
		return t ? on_gone(tr, t, status) : 0;
	if (!WIFSTOPPED(status))
		return 0;
	tr->steps++;
	r = get_regs(tr, pid, &regs);
	if (r == -ESRCH)	/* killed meanwhile: its exit comes next */
		return 0;
	if (r < 0)
		return r;
	if (!t)
		return on_unknown(tr, pid, status, &regs);
	if (!t->started && tr->seized && (status >> 16) != 0 &&
	    (status >> 16) != PTRACE_EVENT_STOP)
		return on_first_event(tr, t, status >> 16, &regs);
	if (!t->started)
		return on_first_stop(tr, t, WSTOPSIG(status), &regs);
	return on_stopped(tr, t, status, &regs);
}

/* Threads whose streams are finished but which have not been reaped. */
static bool exiting_pending(const struct tracer *tr)
{
	for (size_t i = 0; i < tr->nth; i++)
		if (!tr->th[i]->reaped && tr->th[i]->tid != tr->pid)
			return true;
	return false;
}

static int trace_loop(struct tracer *tr)
{
	for (;;) {
		int status, r;
		pid_t pid;

		if (tr->detaching && tr->live == 0 && !exiting_pending(tr) &&
		    !forks_pending(tr))
			return 0;
		if (tr->leader_gone && !forks_pending(tr))
			return 0;
		if (!tr->detaching && stop_asked(tr) &&
		    (r = start_detach(tr, NULL)) < 0)
			return r;
		if ((r = flush_due(tr)) < 0)
			return r;
		pid = waitpid(-1, &status, WAIT_FLAGS);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ECHILD)
				return 0;
			return failf(tr, -errno, "waitpid: %s",
				     strerror(errno));
		}
		r = on_wait(tr, pid, status);
		if (r < 0)
			return r;
	}
}

/* ---- start ----------------------------------------------------------- */

static void child_fail(int fd, int err)
{
	ssize_t n = write(fd, &err, sizeof(err));

	(void)n;
	_exit(127);
}

/* In the child: only async-signal-safe calls until execvp. */
static void child_run(char *const argv[], bool quiet, int errfd)
{
	if (quiet) {
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			child_fail(errfd, errno);
	}
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0)
		child_fail(errfd, errno);
	/* wait here until the tracer has set its options */
	if (raise(SIGSTOP) != 0)
		child_fail(errfd, errno);
	execvp(argv[0], argv);
	child_fail(errfd, errno);
}

/* The errno the child reported before it could exec, or 0. */
static int child_errno(int fd)
{
	int err = 0;
	ssize_t n = read(fd, &err, sizeof(err));

	return n == (ssize_t)sizeof(err) && err > 0 ? -err : 0;
}

static int wait_pid(pid_t pid, int *status)
{
	for (;;) {
		pid_t r = waitpid(pid, status, WAIT_FLAGS);

		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* The child stopped before exec: set our options and let it exec.  Returns
 * once it stops at the exec event (the new program's first instruction). */
static int spawn_to_exec(struct tracer *tr, char *const argv[], int errfd)
{
	const long opts = PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK |
			  PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC |
			  PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL;
	int status, r, sig = 0;

	for (;;) {
		r = wait_pid(tr->pid, &status);
		if (r < 0)
			return failf(tr, r, "waitpid: %s", ptd_strerror(r));
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			tr->leader_gone = true;
			r = child_errno(errfd);
			if (r == -ENOENT)
				return failf(tr, r, "'%s': program not found",
					     argv[0]);
			if (r == -EPERM)
				return failf(tr, r, "'%s': ptrace refused "
					     "(Yama ptrace_scope or seccomp?)",
					     argv[0]);
			if (r < 0)
				return failf(tr, r, "cannot run '%s': %s",
					     argv[0], ptd_strerror(r));
			return failf(tr, -ECHILD, "'%s' ended before exec",
				     argv[0]);
		}
		if (!WIFSTOPPED(status))
			continue;
		if (status >> 16 == PTRACE_EVENT_EXEC)
			return 0;
		if (WSTOPSIG(status) == SIGSTOP && !sig) {
			/* our raise(SIGSTOP): options, then on to exec */
			sig = -1;
			if (ptrace(PTRACE_SETOPTIONS, tr->pid, NULL,
				   (void *)opts) < 0)
				return failf(tr, -errno, "PTRACE_SETOPTIONS: "
					     "%s", strerror(errno));
			if (ptrace(PTRACE_CONT, tr->pid, NULL, NULL) < 0)
				return failf(tr, -errno, "PTRACE_CONT: %s",
					     strerror(errno));
			continue;
		}
		/* any other signal before exec goes to the child */
		if (ptrace(PTRACE_CONT, tr->pid, NULL,
			   (void *)(long)WSTOPSIG(status)) < 0)
			return failf(tr, -errno, "PTRACE_CONT: %s",
				     strerror(errno));
	}
}

/* The first stop of the new program: the main thread's stream begins, and
 * the initial executable mappings are the first timeline events, at its
 * position 0. */
static int start_main(struct tracer *tr)
{
	struct user_regs_struct regs;
	struct tthread *t;
	int r;

	r = get_regs(tr, tr->pid, &regs);
	if (r < 0)
		return r;
	r = check_64bit(tr, &regs);
	if (r < 0)
		return r;
	r = thread_new(tr, tr->pid, &t);
	if (r < 0)
		return r;
	r = maps_load_all(tr);
	if (r == 0)
		r = filter_resolve(tr);
	if (r < 0)
		return r;
	t->started = true;
	t->after_exec = true;
	r = prepare(tr, t, regs.rip, regs.rax);
	if (r < 0)
		return r;
	return resume(tr, t, 0);
}

static int prepare_outdir(const char *dir, struct ptd_diag *diag)
{
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (mkdir(dir, 0755) == 0)
		return 0;
	if (errno != EEXIST)
		return ptd_diagf(diag, -errno, "cannot create '%s': %s", dir,
				 strerror(errno));
	d = opendir(dir);
	if (!d)
		return ptd_diagf(diag, -errno, "cannot open '%s': %s", dir,
				 strerror(errno));
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			r = ptd_diagf(diag, -EEXIST, "'%s' is not empty",
				      dir);
			break;
		}
	(void)closedir(d);
	return r;
}

/* vendor/family/model/stepping of the first CPU; unknown if not Intel. */
static void read_cpu(struct pt_cpu *cpu)
{
	_cleanup_free_ char *text = NULL;
	const char *keys[] = { "cpu family", "model", "stepping" };
	uint64_t vals[3] = { 0 };
	size_t len;

	memset(cpu, 0, sizeof(*cpu));
	cpu->vendor = pcv_unknown;
	if (ptd_file_read_all("/proc/cpuinfo", 1u << 24, &text, &len) < 0)
		return;
	if (!strstr(text, "vendor_id\t: GenuineIntel\n"))
		return;
	for (size_t i = 0; i < PTD_ARRAY_SIZE(keys); i++) {
		char key[32];
		const char *p;

		snprintf(key, sizeof(key), "\n%s\t", keys[i]);
		p = strstr(text, key);
		if (!p || !(p = strchr(p + 1, ':')))
			return;
		p += 1 + strspn(p + 1, " ");
		if (ptd_parse_u64n(p, strcspn(p, "\n"), 10, &vals[i]) < 0)
			return;
	}
	cpu->vendor = pcv_intel;
	cpu->family = (uint16_t)vals[0];
	cpu->model = (uint8_t)vals[1];
	cpu->stepping = (uint8_t)vals[2];
}

/* ---- capture, cleanup ------------------------------------------------ */

static int save_capture(struct tracer *tr, char *const argv[])
{
	struct ptd_capture c = { 0 };
	struct ptd_capture_thread *th;
	int r;

	th = calloc(tr->nth ? tr->nth : 1, sizeof(*th));
	if (!th)
		return -ENOMEM;
	for (size_t i = 0; i < tr->nth; i++) {
		const struct tthread *t = tr->th[i];

		th[i].tid = t->tid;
		th[i].first_seq = t->first_seq;
		if (asprintf(&th[i].pt, "pt-%d.bin", (int)t->tid) < 0 ||
		    asprintf(&th[i].truth, "truth-%d.bin", (int)t->tid) < 0) {
			r = -ENOMEM;
			goto out;
		}
		th[i].insns = t->insns;
		th[i].pt_bytes = t->pt_bytes;
	}
	c.dir = (char *)tr->opt->outdir;
	c.pid = tr->pid;
	c.argv = (char **)argv;
	read_cpu(&c.cpu);
	c.config = tr->opt->gen;
	c.config.sink = NULL;
	c.config.sink_ctx = NULL;
	c.addr_filter = tr->fcfg;
	c.filter = (char *)tr->opt->filter_text;
	/* The clock the readers were given, or (with TSC packets) this
	 * process's, measured over the whole trace by now. */
	if (tr->opt->clock) {
		c.has_clock = true;
		c.clock = *tr->opt->clock;
	} else if (tr->opt->gen.tsc) {
		c.has_clock = ptd_perf_clock_calibrate(&c.clock, NULL) == 0;
	}
	if (c.has_clock && tr->opt->wallref) {
		c.has_wallref = true;
		c.wallref = *tr->opt->wallref;
	} else if (c.has_clock) {
		/* perf time is CLOCK_MONOTONIC here (perf/time.h) */
		c.has_wallref = ptd_perf_wallref_sample(NULL, CLOCK_MONOTONIC,
							&c.wallref) == 0;
	}
	c.threads = th;
	c.nthreads = tr->nth;
	c.tl = tr->tl;
	c.exited = tr->exited && !tr->detaching;
	c.exit_code = tr->exit_code;
	c.exit_signal = tr->exit_signal;
	c.detached = tr->detaching;
	r = ptd_capture_save(&c, tr->diag);
out:
	for (size_t i = 0; i < tr->nth; i++) {
		free(th[i].pt);
		free(th[i].truth);
	}
	free(th);
	return r;
}

/* Wait until @tid is gone, letting it go on from any stop. */
static void reap_task(pid_t tid)
{
	int status;

	for (;;) {
		if (wait_pid(tid, &status) < 0 || WIFEXITED(status) ||
		    WIFSIGNALED(status))
			return;
		(void)ptrace(PTRACE_CONT, tid, NULL, NULL);
	}
}

/* On failure: kill the target and collect every task we trace.  The
 * leader's exit is reported only after every other thread's, so it is
 * collected last. */
static void kill_all(struct tracer *tr)
{
	if (tr->pid <= 0)
		return;
	if (!tr->leader_gone)
		(void)kill(tr->pid, SIGKILL);
	for (size_t i = 0; i < tr->nforks; i++) {
		if (tr->forks[i].detached)
			continue;
		(void)kill(tr->forks[i].pid, SIGKILL);
		reap_task(tr->forks[i].pid);
	}
	for (size_t i = 0; i < tr->nth; i++) {
		if (tr->th[i]->reaped || tr->th[i]->tid == tr->pid)
			continue;
		reap_task(tr->th[i]->tid);
		tr->th[i]->reaped = true;
	}
	if (!tr->leader_gone)
		reap_task(tr->pid);
	tr->leader_gone = true;
}

static void tracer_free(struct tracer *tr)
{
	for (size_t i = 0; i < tr->nth; i++)
		thread_free(tr->th[i]);
	free(tr->th);
	free(tr->forks);
	free(tr->snaps);
	free(tr->ic.v);
	ptd_maps_free(&tr->maps);
	ptd_timeline_free(&tr->tl);
}

static void fill_result(const struct tracer *tr, struct ptd_swpt_result *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->pid = tr->pid;
	ret->insns = tr->insns;
	ret->steps = tr->steps;
	for (size_t i = 0; i < tr->nth; i++)
		ret->pt_bytes += tr->th[i]->pt_bytes;
	ret->threads = (unsigned)tr->nth;
	ret->forks_detached = tr->forks_detached;
	ret->exited = tr->exited && !tr->detaching;
	ret->exit_code = tr->exit_code;
	ret->exit_signal = tr->exit_signal;
	ret->detached = tr->detaching;
	ret->addr_filter = tr->fcfg;
	ret->filter_pending = tr->fpending;
}

int ptd_swpt_run(char *const argv[], const struct ptd_swpt_options *opt,
		 struct ptd_swpt_result *ret, struct ptd_diag *diag)
{
	struct tracer tr = { 0 };
	int pfd[2], r;

	if (!argv || !argv[0] || !opt || (!opt->outdir && !opt->out))
		return -EINVAL;
	tr.opt = opt;
	tr.diag = diag;
	ptd_timeline_init(&tr.tl);
	r = icache_grow(&tr.ic);
	if (r < 0)
		return r;
	r = opt->outdir ? prepare_outdir(opt->outdir, diag) : 0;
	if (r < 0)
		goto out;
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		r = -errno;
		goto out;
	}
	tr.pid = fork();
	if (tr.pid == 0) {
		(void)close(pfd[0]);
		child_run(argv, opt->quiet_target, pfd[1]);
	}
	(void)close(pfd[1]);
	if (tr.pid < 0) {
		r = failf(&tr, -errno, "fork: %s", strerror(errno));
		(void)close(pfd[0]);
		goto out;
	}
	r = spawn_to_exec(&tr, argv, pfd[0]);
	(void)close(pfd[0]);
	if (r == 0)
		r = start_main(&tr);
	if (r == 0)
		r = trace_loop(&tr);
	/* streams of threads still open (an error) end where they stand */
	for (size_t i = 0; r == 0 && i < tr.nth; i++)
		r = thread_finish(&tr, tr.th[i], tr.th[i]->ip);
	if (r == 0 && opt->outdir)
		r = save_capture(&tr, argv);
	if (r < 0)
		kill_all(&tr);
	else if (ret)
		fill_result(&tr, ret);
out:
	tracer_free(&tr);
	return r;
}

/* ---- attach ---------------------------------------------------------- */

static const long SEIZE_OPTS = PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK |
			       PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC |
			       PTRACE_O_TRACEEXIT;

/* Who traces @tid already (TracerPid in its status), or -1. */
static pid_t tracer_of(pid_t tid)
{
	uint64_t v;

	if (status_u64(tid, "TracerPid:", 10, &v) < 0 || v > INT_MAX)
		return -1;
	return (pid_t)v;
}

static int seize_refused(struct tracer *tr, pid_t tid, int err)
{
	pid_t other;

	if (err == -ESRCH)
		return failf(tr, err, "no such process: %d", (int)tid);
	other = tracer_of(tid);
	if (err == -EPERM && tid == tr->pid && thread_exited(tid))
		return failf(tr, err, "process %d: its main thread has exited "
			     "(a zombie); ptrace cannot attach to a process "
			     "without its main thread", (int)tr->pid);
	if (err == -EPERM && other > 0)
		return failf(tr, err, "thread %d of process %d is traced by "
			     "process %d already (a debugger?)", (int)tid,
			     (int)tr->pid, (int)other);
	if (err == -EPERM)
		return failf(tr, err, "ptrace refused for process %d (not "
			     "dumpable, Yama ptrace_scope, or missing "
			     "CAP_SYS_PTRACE)", (int)tr->pid);
	return failf(tr, err, "cannot attach to thread %d: %s", (int)tid,
		     ptd_strerror(err));
}

/* A thread we trace without having seized it: the kernel attached it to
 * us as its creator, seized already, cloned it (PTRACE_O_TRACECLONE).  It
 * is one of ours like the others, and its first stop is on its way: the
 * kernel stops such a thread before its first instruction. */
static int adopt_thread(struct tracer *tr, pid_t tid)
{
	struct tthread *t;
	int r = thread_new(tr, tid, &t);

	if (r < 0)
		return r;
	t->unannounced = true;	/* its creator's clone event may follow */
	return 1;
}

/* Seize one thread and stop it where it is; it gets a stream.  Returns 1,
 * 0 if the thread needs no seizing (see below), or -errno. */
static int seize_thread(struct tracer *tr, pid_t tid)
{
	struct tthread *t;
	int r;

	if (ptrace(PTRACE_SEIZE, tid, NULL, (void *)SEIZE_OPTS) < 0) {
		r = -errno;
		/* A thread gone, or exiting (EPERM: the kernel refuses a
		 * task whose exit has begun), needs nothing -- but the
		 * leader does: no process can be traced without it. */
		if (tid != tr->pid &&
		    (r == -ESRCH || (r == -EPERM && thread_exited(tid))))
			return 0;
		/* One born since the scan began whose creator we had seized
		 * is traced by us already (PTRACE_O_TRACECLONE): seizing it
		 * again is refused, with EPERM.  TracerPid names the tracing
		 * *thread*: in the daemon that is not the process's main
		 * thread. */
		if (tid != tr->pid && r == -EPERM && tracer_of(tid) == gettid())
			return adopt_thread(tr, tid);
		return seize_refused(tr, tid, r);
	}
	r = thread_new(tr, tid, &t);
	if (r < 0)
		return r;
	if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0 && errno != ESRCH)
		return failf(tr, -errno, "thread %d: PTRACE_INTERRUPT: %s",
			     (int)tid, strerror(errno));
	return 1;
}

/* One scan of /proc/PID/task: seize every thread not known yet.  Returns
 * how many were added, or -errno. */
static int seize_scan(struct tracer *tr)
{
	struct dirent *de;
	char path[64];
	int r = 0, n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)tr->pid);
	d = opendir(path);
	if (!d)
		return failf(tr, -ESRCH, "process %d is gone", (int)tr->pid);
	while (r >= 0 && (de = readdir(d))) {
		uint64_t v;

		if (ptd_parse_u64(de->d_name, 10, &v) < 0 || v > INT_MAX ||
		    find_thread(tr, (pid_t)v))
			continue;
		r = seize_thread(tr, (pid_t)v);
		n += r > 0;
	}
	(void)closedir(d);
	return r < 0 ? r : n;
}

/* A thread seized that has not stopped yet (nor ended). */
static bool unheld(const struct tracer *tr)
{
	for (size_t i = 0; i < tr->nth; i++)
		if (!tr->th[i]->held && !tr->th[i]->reaped)
			return true;
	return false;
}

/* A wait status met while the threads are being held: a thread's first
 * stop is kept for later (a later one replaces it: a thread killed in its
 * stop reports its exit event); a new thread of the process (created by
 * a thread seized but not yet stopped) is held too; a child process is let
 * go, as tracing does. */
static int hold_one(struct tracer *tr, pid_t pid, int status)
{
	struct tthread *t = find_thread(tr, pid);
	pid_t tgid;
	int r;

	if (WIFEXITED(status) || WIFSIGNALED(status))
		return t ? on_gone(tr, t, status) : 0;
	if (!WIFSTOPPED(status))
		return 0;
	if (!t) {
		if (read_tgid(pid, &tgid) < 0 || tgid != tr->pid)
			return detach_child(tr, pid);
		r = adopt_thread(tr, pid);
		if (r < 0)
			return r;
		t = find_thread(tr, pid);
	}
	t->held = true;
	t->held_status = status;
	return 0;
}

/* Wait until every thread seized so far is in a ptrace stop (held).  A
 * thread can take long: one in vfork() stops only once its child has
 * exec'd or exited, one in an uninterruptible sleep when the sleep ends.
 * *opt->stop cancels the wait (the caller interrupts waitpid). */
static int hold_all(struct tracer *tr)
{
	while (unheld(tr)) {
		int status, r;
		pid_t pid;

		if (stop_asked(tr))
			return failf(tr, -ECANCELED, "the attach to process "
				     "%d was cancelled before every thread "
				     "had stopped", (int)tr->pid);
		pid = waitpid(-1, &status, WAIT_FLAGS);
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0 && errno != ECHILD)
			return failf(tr, -errno, "waitpid: %s",
				     strerror(errno));
		r = pid < 0 ? 0 : hold_one(tr, pid, status);
		if (r < 0)
			return r;
		if (pid < 0 || tr->leader_gone)
			return failf(tr, -ESRCH, "process %d exited during the "
				     "attach", (int)tr->pid);
	}
	return 0;
}

/* Seize every thread of the process and wait until each is stopped.  A
 * scan of /proc/PID/task made while every thread known is stopped and
 * that finds none new ends it: a stopped thread creates none, and one
 * created by a thread before we seized it is in the scan, traced by the
 * kernel's PTRACE_O_TRACECLONE or not (its creator was seized inside
 * clone(), after the kernel decided) -- then it is seized now. */
static int seize_all(struct tracer *tr)
{
	int r = seize_thread(tr, tr->pid);

	while (r >= 0) {
		r = seize_scan(tr);
		if (r == 0 && !unheld(tr))
			return 0;
		if (r >= 0)
			r = hold_all(tr);
	}
	return r;
}

/* Every thread is stopped: is it still the process the caller meant, and
 * may it still be traced? */
static int seized_check(struct tracer *tr)
{
	const struct ptd_swpt_options *o = tr->opt;
	int r;

	/* A pid belongs to one process until that process is reaped; the
	 * threads stopped now hold it, so if the pidfd's process still
	 * holds it, it is theirs. */
	if (o->pidfd > 0 && (r = ptd_pidfd_alive(o->pidfd)) < 0)
		return failf(tr, r == -ESRCH ? -ESRCH : r,
			     "process %d is not the one ptd was asked to "
			     "trace: that one exited and its pid now names "
			     "another process (%s); let go untouched",
			     (int)tr->pid, r == -ESRCH ? "reused"
						      : ptd_strerror(r));
	if (o->seized && (r = o->seized(o->seized_ctx, tr->diag)) < 0)
		return r;
	return 0;
}

/* Each thread's first stop, kept while the others were stopping: handled
 * now, as if it had just come. */
static int held_replay(struct tracer *tr)
{
	for (size_t i = 0; i < tr->nth; i++) {
		struct tthread *t = tr->th[i];
		int r;

		if (!t->held)
			continue;
		t->held = false;
		if (t->reaped)
			continue;
		r = on_wait(tr, t->tid, t->held_status);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The signal a thread was about to be given in the stop @status (a
 * signal-delivery stop: no event), which letting it go must not lose; 0
 * for our own interrupt's stop, a group-stop or an event. */
static int stop_signal(int status)
{
	return WIFSTOPPED(status) && (status >> 16) == 0 ? WSTOPSIG(status)
							 : 0;
}

/* On an error after the attach: let every thread go, untouched.  A held
 * thread goes at once (with the signal it was to get); one tracing is
 * interrupted, waited for, and detached at its stop.  One seized that
 * never stopped (one in vfork() waiting for its child) cannot be detached
 * before it stops and has run nothing under us: the kernel lets it go
 * when the tracing thread exits (ptd_swpt_wait_released), unless it stops
 * first. */
static void release_all(struct tracer *tr)
{
	size_t left = 0;

	for (size_t i = 0; i < tr->nth; i++) {
		struct tthread *t = tr->th[i];
		int sig = t->held ? stop_signal(t->held_status) : 0;

		t->stop_sent = false;	/* now: waited for below */
		if (t->reaped || (!t->started && !t->held))
			continue;
		/* stopped already (the error came at its stop): go now */
		if (ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)sig) == 0) {
			t->reaped = true;
		} else if (ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL) == 0) {
			t->stop_sent = true;
			left++;
		} else {
			t->reaped = true;
		}
	}
	while (left > 0) {
		int status, sig;
		pid_t pid = waitpid(-1, &status, WAIT_FLAGS);
		struct tthread *t;

		if (pid < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		t = find_thread(tr, pid);
		if (!t || t->reaped) {
			/* a child process announced late: let it go too */
			if (WIFSTOPPED(status))
				(void)ptrace(PTRACE_DETACH, pid, NULL, NULL);
			continue;
		}
		/* a thread never stepped stops for signals of its own, not
		 * for a step's SIGTRAP: it keeps them */
		sig = t->started ? 0 : stop_signal(status);
		if (WIFSTOPPED(status) &&
		    ptrace(PTRACE_DETACH, pid, NULL, (void *)(long)sig) < 0 &&
		    errno != ESRCH)
			continue;
		t->reaped = true;
		if (t->stop_sent)
			left--;
	}
}

int ptd_swpt_attach(pid_t pid, const struct ptd_swpt_options *opt,
		    struct ptd_swpt_result *ret, struct ptd_diag *diag)
{
	struct tracer tr = { 0 };
	int r;

	if (pid <= 0 || !opt || (!opt->outdir && !opt->out))
		return -EINVAL;
	tr.opt = opt;
	tr.diag = diag;
	tr.pid = pid;
	tr.seized = true;
	tr.last_flush = now_ns();
	ptd_timeline_init(&tr.tl);
	r = icache_grow(&tr.ic);
	if (r < 0)
		return r;
	r = opt->outdir ? prepare_outdir(opt->outdir, diag) : 0;
	if (r < 0)
		goto out;
	r = seize_all(&tr);
	if (r == 0)
		r = seized_check(&tr);
	/* the image as it is: every stream starts with it (position 0) */
	if (r == 0)
		r = maps_load_all(&tr);
	if (r == 0)
		r = filter_resolve(&tr);
	if (r == 0 && opt->started)
		opt->started(opt->started_ctx);
	if (r == 0)
		r = held_replay(&tr);
	if (r == 0)
		r = trace_loop(&tr);
	for (size_t i = 0; r == 0 && i < tr.nth; i++)
		r = thread_finish(&tr, tr.th[i], tr.th[i]->ip);
	if (r == 0 && opt->outdir) {
		char exe[64], path[PATH_MAX];
		char *argv[2] = { path, NULL };
		ssize_t n;

		snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
		n = readlink(exe, path, sizeof(path) - 1);
		path[n > 0 ? n : 0] = 0;
		r = save_capture(&tr, argv);
	}
	if (r < 0)
		release_all(&tr);
	else if (ret)
		fill_result(&tr, ret);
out:
	tracer_free(&tr);
	return r;
}

/* Is a thread of @pid traced by thread @tracer?  (-errno: cannot tell.) */
static int traced_by(pid_t pid, pid_t tracer)
{
	struct dirent *de;
	char path[64];
	int found = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (!found && (de = readdir(d))) {
		uint64_t v;

		if (ptd_parse_u64(de->d_name, 10, &v) == 0 && v <= INT_MAX)
			found = tracer_of((pid_t)v) == tracer;
	}
	(void)closedir(d);
	return found;
}

int ptd_swpt_wait_released(pid_t pid, pid_t tracer)
{
	const struct timespec ms = { 0, 1000000 };
	int r;

	if (pid <= 0 || tracer <= 0)
		return -EINVAL;
	/* The thread has exited (pthread_join returned): the kernel is
	 * finishing its exit, which ends in letting its tracees go. */
	while ((r = traced_by(pid, tracer)) > 0)
		(void)nanosleep(&ms, NULL);
	return r;
}
