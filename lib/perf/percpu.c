/* SPDX-License-Identifier: MIT */
/*
 * Per-CPU intel_pt buffers split into per-thread streams (see percpu.h for
 * the ownership, loss and validation rules this file implements).
 */
#include "perf/percpu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One tracked thread.  The table is sorted by tid (binary search); it
 * changes only when a thread is first seen or forgotten. */
struct pc_thread {
	uint32_t tid, pid;
	bool exited;
	bool exit_has_time;
	uint64_t exit_time;	/* EXIT record's time (if exit_has_time) */
	uint64_t exit_seq;	/* order of EXITs, for eviction */
	bool has_seg;
	uint64_t seg_time;	/* latest switch-in time seen (any CPU) */
};

/* The state of one CPU ring. */
struct pc_cpu {
	struct ptd_percpu *pc;
	bool has_owner;		/* an ITRACE_START / switch IN was obeyed */
	bool out;		/* the owner switched out (still owns the
				 * AUX bytes until the next IN) */
	uint32_t pid, tid;	/* the owner */
	/* Owners since the last AUX chunk ([0]: the owner of that chunk, or
	 * the first owner); an AUX gap is exact only if there is one. */
	uint32_t pend_pid[PTD_PERCPU_PENDING_MAX];
	uint32_t pend_tid[PTD_PERCPU_PENDING_MAX];
	unsigned npend;
	bool pend_overflow;
};

struct ptd_percpu {
	struct ptd_percpu_opts opts;
	struct ptd_percpu_sink sink;
	struct pc_cpu *cpus;
	struct pc_thread *threads;	/* sorted by tid */
	size_t nthreads, max_threads;
	uint64_t exit_seq;
	uint32_t pids[PTD_PERCPU_PIDS_MAX];	/* the process filter */
	size_t npids;
	struct ptd_percpu_stats st;
	struct ptd_diag last_error;
};

/* Why data of a thread did not reach the sinks. */
enum pc_route {
	PC_DELIVER = 0,
	PC_FILTERED,
	PC_OVER_LIMIT,
};

int ptd_percpu_new(const struct ptd_percpu_opts *o,
		   const struct ptd_percpu_sink *sink, struct ptd_percpu **ret)
{
	struct ptd_percpu *pc;

	if (!o || !sink || !ret)
		return -EINVAL;
	if (o->ncpus == 0 || o->ncpus > PTD_PERCPU_MAX_CPUS ||
	    o->pid < -1 || o->pid > INT32_MAX ||
	    o->max_threads > PTD_PERCPU_THREADS_MAX ||
	    !o->sample_id_all || !(o->sample_type & PERF_SAMPLE_TID))
		return -EINVAL;

	pc = calloc(1, sizeof(*pc));
	if (!pc)
		return -ENOMEM;
	pc->opts = *o;
	pc->sink = *sink;
	pc->max_threads = o->max_threads ? o->max_threads
					 : PTD_PERCPU_THREADS_DEFAULT;
	pc->cpus = calloc(o->ncpus, sizeof(*pc->cpus));
	pc->threads = calloc(pc->max_threads, sizeof(*pc->threads));
	if (!pc->cpus || !pc->threads) {
		ptd_percpu_free(pc);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < o->ncpus; i++)
		pc->cpus[i].pc = pc;
	if (o->pid >= 0)
		pc->pids[pc->npids++] = (uint32_t)o->pid;
	*ret = pc;
	return 0;
}

void ptd_percpu_free(struct ptd_percpu *pc)
{
	if (!pc)
		return;
	free(pc->cpus);
	free(pc->threads);
	free(pc);
}

/* ---- process filter ---- */

static bool pid_passes(const struct ptd_percpu *pc, uint32_t pid)
{
	if (pc->opts.pid < 0)
		return true;
	for (size_t i = 0; i < pc->npids; i++)
		if (pc->pids[i] == pid)
			return true;
	return false;
}

/* A FORK record: follow a child process of a process that passes. */
static void follow_fork(struct ptd_percpu *pc, const struct ptd_perf_task *t)
{
	if (!pc->opts.follow_children || pc->opts.pid < 0 ||
	    t->pid == t->ppid || !pid_passes(pc, t->ppid) ||
	    pid_passes(pc, t->pid))
		return;
	if (pc->npids == PTD_PERCPU_PIDS_MAX) {
		pc->st.pids_over_limit++;
		return;
	}
	pc->pids[pc->npids++] = t->pid;
}

/* ---- thread table ---- */

/* Index of @tid, or where it would be inserted (*found false). */
static size_t thread_find(const struct ptd_percpu *pc, uint32_t tid,
			  bool *found)
{
	size_t lo = 0, hi = pc->nthreads;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pc->threads[mid].tid < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < pc->nthreads && pc->threads[lo].tid == tid;
	return lo;
}

/* Forget the thread that exited first; false if none has exited. */
static bool thread_evict(struct ptd_percpu *pc)
{
	size_t best = SIZE_MAX;

	for (size_t i = 0; i < pc->nthreads; i++) {
		const struct pc_thread *t = &pc->threads[i];

		if (t->exited &&
		    (best == SIZE_MAX || t->exit_seq < pc->threads[best].exit_seq))
			best = i;
	}
	if (best == SIZE_MAX)
		return false;
	memmove(&pc->threads[best], &pc->threads[best + 1],
		(pc->nthreads - best - 1) * sizeof(*pc->threads));
	pc->nthreads--;
	return true;
}

/* Is this sighting of an exited thread a new thread with the same tid?
 * A FORK is (unless its time says it is the old thread's own FORK, read
 * late from another CPU); anything else only if its time is later than
 * the EXIT's.  Without times, late data of the old thread is the safer
 * guess. */
static bool thread_reused(const struct pc_thread *t, bool has_time,
			  uint64_t time, bool fork)
{
	bool later = has_time && t->exit_has_time && time > t->exit_time;

	if (fork)
		return later || !has_time || !t->exit_has_time;
	return later;
}

static int seen(struct ptd_percpu *pc, uint32_t pid, uint32_t tid)
{
	int err = 0;

	if (pc->sink.thread_seen)
		err = pc->sink.thread_seen(pc->sink.ctx, pid, tid);
	if (err >= 0)
		pc->st.threads++;
	return err < 0 ? err : 0;
}

/* Make sure thread @tid of @pid (which passes the filter) is tracked,
 * calling thread_seen for a new one.  Returns PC_DELIVER, PC_OVER_LIMIT
 * (table full of live threads), or a sink's negative value. */
static int thread_note(struct ptd_percpu *pc, uint32_t pid, uint32_t tid,
		       bool has_time, uint64_t time, bool fork)
{
	bool found;
	size_t i = thread_find(pc, tid, &found);
	int err;

	if (found) {
		struct pc_thread *t = &pc->threads[i];

		/* Another process with this tid, or a reuse after EXIT. */
		if (t->pid != pid ||
		    (t->exited && thread_reused(t, has_time, time, fork))) {
			err = seen(pc, pid, tid);
			if (err < 0)
				return err;
			t->pid = pid;
			t->exited = false;
		}
		return PC_DELIVER;
	}
	if (pc->nthreads == pc->max_threads) {
		if (!thread_evict(pc))
			return PC_OVER_LIMIT;
		i = thread_find(pc, tid, &found);
	}
	err = seen(pc, pid, tid);
	if (err < 0)
		return err;
	memmove(&pc->threads[i + 1], &pc->threads[i],
		(pc->nthreads - i) * sizeof(*pc->threads));
	pc->threads[i] = (struct pc_thread){ .tid = tid, .pid = pid };
	pc->nthreads++;
	return PC_DELIVER;
}

static void thread_exited(struct ptd_percpu *pc, uint32_t tid,
			  const struct ptd_perf_event *e)
{
	bool found;
	size_t i = thread_find(pc, tid, &found);

	if (!found)
		return;
	pc->threads[i].exited = true;
	pc->threads[i].exit_has_time = true;
	pc->threads[i].exit_time = e->u.task.time;
	pc->threads[i].exit_seq = ++pc->exit_seq;
}

/* Where data of thread @tid of @pid goes (PC_*), or a sink's error. */
static int route(struct ptd_percpu *pc, uint32_t pid, uint32_t tid,
		 bool has_time, uint64_t time, bool fork)
{
	if (!pid_passes(pc, pid))
		return PC_FILTERED;
	return thread_note(pc, pid, tid, has_time, time, fork);
}

/* ---- ownership ---- */

static void set_owner(struct pc_cpu *c, uint32_t pid, uint32_t tid)
{
	c->has_owner = true;
	c->out = false;
	c->pid = pid;
	c->tid = tid;
	if (c->npend > 0 && c->pend_pid[c->npend - 1] == pid &&
	    c->pend_tid[c->npend - 1] == tid)
		return;
	if (c->npend == PTD_PERCPU_PENDING_MAX) {
		c->pend_overflow = true;
		return;
	}
	c->pend_pid[c->npend] = pid;
	c->pend_tid[c->npend] = tid;
	c->npend++;
}

/* Thread @tid (tracked) switched in at @time: its bytes from here on come
 * after those it wrote since any earlier switch-in.  If another CPU's ring
 * already gave a later segment, these bytes arrive out of order: the
 * thread's stream must resync (unknown loss) and it is counted. */
static int segment_start(struct ptd_percpu *pc, uint32_t tid, uint64_t time)
{
	bool found;
	size_t i = thread_find(pc, tid, &found);
	struct pc_thread *t;
	int err;

	if (!found)
		return 0;
	t = &pc->threads[i];
	if (t->has_seg && time < t->seg_time) {
		if (pc->sink.lost) {
			err = pc->sink.lost(pc->sink.ctx, tid, 0);
			if (err < 0)
				return err;
		}
		pc->st.losses++;
		pc->st.reordered++;
		return 0;
	}
	t->has_seg = true;
	t->seg_time = time;
	return 0;
}

/* A switch-in / ITRACE_START of @pid/@tid at @time (if @has_time). */
static int switch_in(struct pc_cpu *c, uint32_t pid, uint32_t tid,
		     bool has_time, uint64_t time)
{
	int r = route(c->pc, pid, tid, has_time, time, false);

	if (r < 0)
		return r;
	if (r == PC_DELIVER && has_time) {
		r = segment_start(c->pc, tid, time);
		if (r < 0)
			return r;
	}
	set_owner(c, pid, tid);
	c->pc->st.switches++;
	return 0;
}

/* An AUX chunk was read: the owners before it no longer matter. */
static void chunk_seen(struct pc_cpu *c)
{
	c->npend = 0;
	c->pend_overflow = false;
	if (c->has_owner) {
		c->pend_pid[0] = c->pid;
		c->pend_tid[0] = c->tid;
		c->npend = 1;
	}
}

/* Records may be missing: nobody owns the CPU until the next IN. */
static void owner_reset(struct pc_cpu *c)
{
	c->has_owner = false;
	c->out = false;
	c->npend = 0;
	c->pend_overflow = false;
	c->pc->st.owner_resets++;
}

static int pc_cpu_get(struct ptd_percpu *pc, unsigned cpu,
		      struct pc_cpu **ret)
{
	if (!pc || cpu >= pc->opts.ncpus)
		return -EINVAL;
	*ret = &pc->cpus[cpu];
	return 0;
}

/* ---- AUX bytes ---- */

static int cpu_aux(struct pc_cpu *c, const void *bytes, size_t len)
{
	struct ptd_percpu *pc = c->pc;
	int r;

	if (!c->has_owner) {
		pc->st.orphan_bytes += len;
		chunk_seen(c);
		return 0;
	}
	r = route(pc, c->pid, c->tid, false, 0, false);
	if (r < 0)
		return r;
	if (r == PC_FILTERED) {
		pc->st.filtered_bytes += len;
	} else if (r == PC_OVER_LIMIT) {
		pc->st.over_limit_bytes += len;
	} else if (len > 0) {
		if (pc->sink.bytes) {
			r = pc->sink.bytes(pc->sink.ctx, c->tid, bytes, len);
			if (r < 0)
				return r;
		}
		pc->st.bytes += len;
	}
	chunk_seen(c);
	return 0;
}

int ptd_percpu_aux(struct ptd_percpu *pc, unsigned cpu, uint64_t aux_offset,
		   const void *bytes, size_t len)
{
	struct pc_cpu *c;
	int err = pc_cpu_get(pc, cpu, &c);

	(void)aux_offset;	/* stream order is all that matters here */
	if (err < 0)
		return err;
	if (!bytes && len)
		return -EINVAL;
	return cpu_aux(c, bytes, len);
}

/* ---- losses ---- */

/* Report a loss of @bytes (0: unknown) to thread @tid of @pid. */
static int lost_to(struct ptd_percpu *pc, uint32_t pid, uint32_t tid,
		   uint64_t bytes)
{
	int r = route(pc, pid, tid, false, 0, false);

	if (r < 0)
		return r;
	if (r != PC_DELIVER)
		return 0;	/* not a thread we follow: nothing to resync */
	if (pc->sink.lost) {
		r = pc->sink.lost(pc->sink.ctx, tid, bytes);
		if (r < 0)
			return r;
	}
	pc->st.losses++;
	return 0;
}

static int lost_to_owner(struct pc_cpu *c, uint64_t bytes)
{
	if (!c->has_owner) {
		c->pc->st.orphan_losses++;
		return 0;
	}
	return lost_to(c->pc, c->pid, c->tid, bytes);
}

/* An AUX gap: exact if only one thread can have written it. */
static int aux_gap(struct pc_cpu *c, uint64_t bytes)
{
	int err;

	if (c->npend == 0)
		return lost_to_owner(c, bytes);	/* orphan, or no change */
	if (c->npend == 1 && !c->pend_overflow)
		return lost_to(c->pc, c->pend_pid[0], c->pend_tid[0], bytes);
	c->pc->st.ambiguous_losses++;
	for (unsigned i = 0; i < c->npend; i++) {
		err = lost_to(c->pc, c->pend_pid[i], c->pend_tid[i], 0);
		if (err < 0)
			return err;
	}
	return 0;
}

static int cpu_loss(struct pc_cpu *c, const struct ptd_perf_loss *l)
{
	struct ptd_percpu *pc = c->pc;
	int err;

	switch (l->kind) {
	case PTD_PERF_LOSS_AUX_GAP:
		err = aux_gap(c, l->bytes);
		if (err == 0)
			pc->st.lost_bytes += l->bytes;
		return err;
	case PTD_PERF_LOSS_OVERWRITTEN:
		err = lost_to_owner(c, l->bytes);
		if (err == 0)
			pc->st.lost_bytes += l->bytes;
		return err;
	case PTD_PERF_LOSS_TRUNCATED:
	case PTD_PERF_LOSS_PARTIAL:
	case PTD_PERF_LOSS_COLLISION:
		return lost_to_owner(c, 0);
	case PTD_PERF_LOSS_CORRUPT:
		if (l->record_type == PERF_RECORD_AUX)
			return 0;	/* overlap: no trace byte lost */
		/* records of the data ring are unknown: as a LOST */
		__attribute__((fallthrough));
	case PTD_PERF_LOSS_RECORDS:
		err = lost_to_owner(c, 0);
		if (err == 0)
			owner_reset(c);
		return err;
	case PTD_PERF_LOSS_SAMPLES:
		return 0;
	}
	return 0;
}

int ptd_percpu_loss(struct ptd_percpu *pc, unsigned cpu,
		    const struct ptd_perf_loss *loss)
{
	struct pc_cpu *c;
	int err = pc_cpu_get(pc, cpu, &c);

	if (err < 0)
		return err;
	if (!loss)
		return -EINVAL;
	return cpu_loss(c, loss);
}

/* ---- records ---- */

static int on_itrace_start(struct pc_cpu *c, const struct ptd_perf_event *e)
{
	const struct ptd_perf_itrace_start *it = &e->u.itrace;
	bool has_time = (e->sid.mask & PTD_PERF_SID_TIME) != 0;

	return switch_in(c, it->pid, it->tid, has_time, e->sid.time);
}

static int on_switch(struct pc_cpu *c, const struct ptd_perf_event *e)
{
	struct ptd_percpu *pc = c->pc;
	bool has_time = (e->sid.mask & PTD_PERF_SID_TIME) != 0;
	bool missing_out;
	int r;

	if (!(e->sid.mask & PTD_PERF_SID_TID)) {
		pc->st.bad_switches++;	/* cannot happen with our opts */
		return 0;
	}
	if (e->u.sw.out) {
		/* The owner keeps the bytes flushed after its OUT. */
		if (!c->has_owner || c->out || c->tid != e->sid.tid) {
			pc->st.bad_switches++;
			return 0;
		}
		c->out = true;
		pc->st.switches++;
		return 0;
	}
	missing_out = c->has_owner && !c->out && c->tid != e->sid.tid;
	r = switch_in(c, e->sid.pid, e->sid.tid, has_time, e->sid.time);
	if (r == 0 && missing_out)
		pc->st.bad_switches++;	/* the IN is obeyed all the same */
	return r;
}

/* The pid/tid a sideband record is about; false if none is known. */
static bool record_thread(const struct pc_cpu *c, const struct ptd_perf_event *e,
			  uint32_t *pid, uint32_t *tid)
{
	switch (e->type) {
	case PERF_RECORD_MMAP:
	case PERF_RECORD_MMAP2:
		*pid = e->u.mmap.pid;
		*tid = e->u.mmap.tid;
		return true;
	case PERF_RECORD_COMM:
		*pid = e->u.comm.pid;
		*tid = e->u.comm.tid;
		return true;
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		*pid = e->u.task.pid;
		*tid = e->u.task.tid;
		return true;
	case PTD_PERF_RECORD_CODE:
		*pid = e->u.code.pid;
		*tid = e->u.code.tid;
		return true;
	case PTD_PERF_RECORD_UNMAP:
		*pid = e->u.unmap.pid;
		*tid = e->u.unmap.tid;
		return true;
	default:
		break;
	}
	if (!e->other && (e->sid.mask & PTD_PERF_SID_TID)) {
		*pid = e->sid.pid;
		*tid = e->sid.tid;
		return true;
	}
	if (!c->has_owner)
		return false;
	*pid = c->pid;
	*tid = c->tid;
	return true;
}

static int on_sideband(struct pc_cpu *c, const struct ptd_perf_event *e)
{
	struct ptd_percpu *pc = c->pc;
	bool fork = e->type == PERF_RECORD_FORK;
	bool has_time = (e->sid.mask & PTD_PERF_SID_TIME) != 0;
	uint64_t time = e->sid.time;
	uint32_t pid, tid;
	int r;

	if (fork || e->type == PERF_RECORD_EXIT) {
		has_time = true;
		time = e->u.task.time;
	}
	if (fork)
		follow_fork(pc, &e->u.task);
	if (!record_thread(c, e, &pid, &tid)) {
		pc->st.filtered_records++;
		return 0;
	}
	r = route(pc, pid, tid, has_time, time, fork);
	if (r < 0)
		return r;
	if (r == PC_FILTERED) {
		pc->st.filtered_records++;
		return 0;
	}
	if (r == PC_OVER_LIMIT) {
		pc->st.over_limit_records++;
		return 0;
	}
	if (pc->sink.record) {
		r = pc->sink.record(pc->sink.ctx, tid, e);
		if (r < 0)
			return r;
	}
	if (e->type == PERF_RECORD_EXIT)
		thread_exited(pc, tid, e);
	return 0;
}

static int cpu_event(struct pc_cpu *c, const struct ptd_perf_event *e)
{
	switch (e->type) {
	case PERF_RECORD_ITRACE_START:
		return on_itrace_start(c, e);
	case PERF_RECORD_SWITCH:
	case PERF_RECORD_SWITCH_CPU_WIDE:
		return on_switch(c, e);
	default:
		return on_sideband(c, e);
	}
}

static int cpu_record(struct pc_cpu *c, const struct perf_event_header *hdr)
{
	struct ptd_percpu *pc = c->pc;
	struct ptd_perf_event e;
	struct ptd_diag diag = { .msg = "" };
	int err;

	pc->st.records++;
	/* AUX and LOST act through aux() and loss(); not parsed here (ptd's
	 * producer writes AUX records without a sample_id trailer). */
	if (hdr->type == PERF_RECORD_AUX || hdr->type == PERF_RECORD_LOST ||
	    hdr->type == PERF_RECORD_LOST_SAMPLES)
		return 0;
	err = ptd_perf_event_parse(hdr, pc->opts.sample_type,
				   pc->opts.sample_id_all, &e, &diag);
	if (err < 0) {
		pc->st.bad_records++;
		pc->last_error = diag;
		return 0;
	}
	return cpu_event(c, &e);
}

int ptd_percpu_record(struct ptd_percpu *pc, unsigned cpu,
		      const struct perf_event_header *hdr)
{
	struct pc_cpu *c;
	int err = pc_cpu_get(pc, cpu, &c);

	if (err < 0)
		return err;
	if (!hdr)
		return -EINVAL;
	return cpu_record(c, hdr);
}

int ptd_percpu_event(struct ptd_percpu *pc, unsigned cpu,
		     const struct ptd_perf_event *e)
{
	struct pc_cpu *c;
	int err = pc_cpu_get(pc, cpu, &c);

	if (err < 0)
		return err;
	if (!e)
		return -EINVAL;
	pc->st.records++;
	if (e->type == PERF_RECORD_AUX || e->type == PERF_RECORD_LOST ||
	    e->type == PERF_RECORD_LOST_SAMPLES)
		return 0;
	return cpu_event(c, e);
}

/* ---- the reader's callbacks ---- */

static int op_record(void *ctx, const struct perf_event_header *hdr)
{
	return cpu_record(ctx, hdr);
}

static int op_aux(void *ctx, uint64_t aux_offset, const void *bytes,
		  size_t len)
{
	(void)aux_offset;
	return cpu_aux(ctx, bytes, len);
}

static int op_loss(void *ctx, const struct ptd_perf_loss *loss)
{
	return cpu_loss(ctx, loss);
}

static const struct ptd_perf_reader_ops percpu_ops = {
	.record = op_record,
	.aux = op_aux,
	.loss = op_loss,
};

int ptd_percpu_drain(struct ptd_percpu *pc, unsigned cpu,
		     struct ptd_perf_reader *r)
{
	struct pc_cpu *c;
	int err = pc_cpu_get(pc, cpu, &c);

	if (err < 0)
		return err;
	if (!r)
		return -EINVAL;
	return ptd_perf_reader_drain(r, &percpu_ops, c);
}

/* ---- queries ---- */

int ptd_percpu_owner(const struct ptd_percpu *pc, unsigned cpu,
		     uint32_t *ret_pid, uint32_t *ret_tid)
{
	const struct pc_cpu *c;

	if (!pc || cpu >= pc->opts.ncpus || !ret_pid || !ret_tid)
		return -EINVAL;
	c = &pc->cpus[cpu];
	if (!c->has_owner)
		return 0;
	*ret_pid = c->pid;
	*ret_tid = c->tid;
	return 1;
}

void ptd_percpu_get_stats(const struct ptd_percpu *pc,
			  struct ptd_percpu_stats *ret)
{
	if (!pc || !ret)
		return;
	*ret = pc->st;
}

const char *ptd_percpu_last_error(const struct ptd_percpu *pc)
{
	return pc ? pc->last_error.msg : "";
}
