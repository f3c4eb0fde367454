/* SPDX-License-Identifier: MIT */
/*
 * The software source's live output into per-thread perf buffers.
 */
#include "swpt/livesink.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/strutil.h"
#include "perf/sideband.h"
#include "perf/time.h"

#define SAMPLE_TYPE PTD_SIDEBAND_SAMPLE_TYPE
#define WAIT_NS 200000l		/* poll interval while a ring is full */

/* A virtual CPU of per-CPU mode: one buffer for every thread it runs. */
struct vcpu {
	struct ptd_perf_buf buf;
	struct ptd_perf_producer prod;
	struct ptd_livesink_thread *cur;	/* the last one switched in */
	bool in;				/* cur is switched in */
};

/* An encoded record kept to replay into threads that begin later. */
struct blob {
	size_t len;
	uint8_t *bytes;
};

struct ptd_livesink {
	pid_t pid;
	size_t data_size, aux_size;
	int wake_fd;
	atomic_int *cancel;
	struct ptd_swpt_out out;
	bool overwrite;			/* AUX areas overwrite themselves */
	/* The pause gate: a producer is `busy` from the start of an output
	 * call to its end, except while it sleeps waiting for ring space;
	 * it enters only when not `paused`.  So once the pauser saw
	 * paused && !busy, no producer touches a buffer. */
	pthread_mutex_t gate;
	pthread_cond_t gate_cond;
	bool paused, busy;
	/* ptd_livesink_flush: asked (the tracer reads it at each stop),
	 * and done so many times (under gate) */
	atomic_bool flush_req;
	pid_t flush_tid;
	int64_t flush_after;
	uint64_t flushes;
	/* th, nth, nbegun, gone (the tracer adds threads, the reader
	 * releases them and copies the list) */
	pthread_mutex_t lock;
	struct ptd_livesink_thread **th;	/* in the order they began */
	size_t nth, cap;
	uint64_t nbegun;		/* threads begun: the next seq */
	struct ptd_livesink_stats gone;	/* released threads' counts */
	struct ptd_livesink_thread **to;	/* broadcast's (the tracer's) */
	size_t capto;
	struct ptd_livesink_thread *last;	/* lookup cache */
	struct blob *hist;		/* image records since the last exec */
	size_t nhist, caphist;
	/* per-CPU mode (ncpu > 0): see ptd_livesink_set_cpus */
	unsigned ncpu, migrate_every;
	struct vcpu *cpu;
	unsigned next_cpu;		/* round-robin for new threads */
	unsigned last_cpu;		/* where the last batch ran */
	uint64_t last_time;		/* the last sample time given */
	/* The clock every buffer publishes (ptd_livesink_set_clock); else
	 * each buffer calibrates its own when it is made. */
	bool clock_set;
	struct ptd_perf_clock clock;
	uint8_t rec[PTD_PERF_RECORD_MAX_SIZE + 8];
};

/* The clock for a new buffer: the one set, or a calibration now. */
static bool buffer_clock(const struct ptd_livesink *s,
			 struct ptd_perf_clock *ret)
{
	if (s->clock_set) {
		*ret = s->clock;
		return true;
	}
	return ptd_perf_clock_calibrate(ret, NULL) == 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct ptd_perf_sample_id sid_of(const struct ptd_livesink *s,
					pid_t tid)
{
	struct ptd_perf_sample_id sid = { 0 };

	sid.pid = (uint32_t)s->pid;
	sid.tid = (uint32_t)tid;
	sid.time = now_ns();
	return sid;
}

/* The tracing thread's: @tid's thread, not ended.  (s->last is never an
 * ended thread: a thread's end clears it, and only ended threads are
 * released.) */
static struct ptd_livesink_thread *find(struct ptd_livesink *s, pid_t tid)
{
	struct ptd_livesink_thread *t = NULL;

	if (s->last && s->last->tid == tid && !atomic_load(&s->last->ended))
		return s->last;
	(void)pthread_mutex_lock(&s->lock);
	for (size_t i = s->nth; i-- > 0;)
		if (s->th[i]->tid == tid && !atomic_load(&s->th[i]->ended)) {
			t = s->last = s->th[i];
			break;
		}
	(void)pthread_mutex_unlock(&s->lock);
	return t;
}

/* Add thread @t's counts to @st (s->lock held). */
static void count_thread(struct ptd_livesink_stats *st,
			 const struct ptd_livesink_thread *t)
{
	if (!atomic_load(&t->ended))
		st->live++;
	else	/* (migrations: written before ended) */
		st->migrated += t->migrations > 0;
	if (t->buf.meta)	/* none in per-CPU mode */
		st->aux_written += __atomic_load_n(&t->buf.meta->aux_head,
						   __ATOMIC_ACQUIRE);
}

/* Take ended thread @t out of the list, its counts kept (s->lock held). */
static void remove_locked(struct ptd_livesink *s, struct ptd_livesink_thread *t)
{
	size_t i = s->nth;

	while (i-- > 0 && s->th[i] != t)
		;
	if (i == SIZE_MAX)
		return;
	memmove(&s->th[i], &s->th[i + 1], (s->nth - i - 1) * sizeof(*s->th));
	s->nth--;
	count_thread(&s->gone, t);
}

static void gate_enter(struct ptd_livesink *s)
{
	(void)pthread_mutex_lock(&s->gate);
	while (s->paused)
		(void)pthread_cond_wait(&s->gate_cond, &s->gate);
	s->busy = true;
	(void)pthread_mutex_unlock(&s->gate);
}

static void gate_leave(struct ptd_livesink *s)
{
	(void)pthread_mutex_lock(&s->gate);
	s->busy = false;
	(void)pthread_cond_broadcast(&s->gate_cond);
	(void)pthread_mutex_unlock(&s->gate);
}

/* Wait until the reader made room for @data data bytes and @aux AUX bytes:
 * the traced program waits rather than lose trace. */
static int wait_space_p(struct ptd_livesink *s, struct ptd_perf_producer *p,
			size_t data, size_t aux)
{
	for (;;) {
		size_t dfree, afree;

		ptd_perf_producer_space(p, &dfree, &afree);
		if (dfree >= data && afree >= aux)
			return 0;
		if (s->cancel && atomic_load(s->cancel))
			return -ECANCELED;
		(void)ptd_perf_producer_flush(p);
		/* nothing half-written: a pause may come in meanwhile */
		gate_leave(s);
		(void)nanosleep(&(struct timespec){ 0, WAIT_NS }, NULL);
		gate_enter(s);
	}
}

static int wait_space(struct ptd_livesink *s, struct ptd_livesink_thread *t,
		      size_t data, size_t aux)
{
	return wait_space_p(s, &t->prod, data, aux);
}

static int put_record(struct ptd_livesink *s, struct ptd_livesink_thread *t,
		      const void *rec, size_t len)
{
	int r = wait_space(s, t, len, 0);

	if (r < 0)
		return r;
	return ptd_perf_producer_record(&t->prod, rec, len);
}

/* A PERF_RECORD_AUX costs this much of the data ring. */
static size_t aux_record_size(void)
{
	return sizeof(struct perf_event_header) + 3 * sizeof(uint64_t) +
	       ptd_perf_sample_id_size(SAMPLE_TYPE);
}

/* ---- per-CPU mode ---------------------------------------------------- *
 *
 * Switches happen only between two batches of PT bytes (pt() calls), and
 * every batch goes whole into one PERF_RECORD_AUX of the thread's virtual
 * CPU, so the splitter (perf/percpu.h) hands each thread exactly the bytes
 * the per-thread mode would: its stream after a switch goes on where its
 * PT left off (no PSB or TIP.PGD is needed at a switch).  Sample times are
 * strictly increasing (one tracing thread writes every record), so the
 * feed's merge across CPUs (decode/cpufeed.h) has no ties to break. */

static int add_thread(struct ptd_livesink *s, struct ptd_livesink_thread *t);

/* A sample_id for a record of @tid on virtual CPU @cpu. */
static struct ptd_perf_sample_id cpu_sid(struct ptd_livesink *s, pid_t tid,
					 unsigned cpu)
{
	struct ptd_perf_sample_id sid = sid_of(s, tid);

	if (sid.time <= s->last_time)
		sid.time = s->last_time + 1;
	s->last_time = sid.time;
	sid.cpu = cpu;
	return sid;
}

static int cpu_put(struct ptd_livesink *s, struct vcpu *c, const void *rec,
		   size_t len)
{
	int r;

	if (len == 0)
		return -EINVAL;
	r = wait_space_p(s, &c->prod, len, 0);
	return r < 0 ? r : ptd_perf_producer_record(&c->prod, rec, len);
}

/* PERF_RECORD_SWITCH (IN, or OUT) of @t on CPU @c. */
static int cpu_switch(struct ptd_livesink *s, struct vcpu *c,
		      const struct ptd_livesink_thread *t, bool out)
{
	struct ptd_perf_switch sw = { .out = out };
	struct ptd_perf_sample_id sid = cpu_sid(s, t->tid,
						(unsigned)(c - s->cpu));
	size_t len = ptd_perf_encode_switch(s->rec, sizeof(s->rec), &sw,
					    SAMPLE_TYPE, &sid);

	if (!len)
		return -EINVAL;
	return cpu_put(s, c, s->rec, len);
}

static int cpu_switch_out(struct ptd_livesink *s, struct vcpu *c)
{
	int r = 0;

	if (c->cur && c->in)
		r = cpu_switch(s, c, c->cur, true);
	c->in = false;
	return r;
}

/* Make @t the running thread of @c. */
static int cpu_switch_in(struct ptd_livesink *s, struct vcpu *c,
			 struct ptd_livesink_thread *t)
{
	int r;

	if (c->cur == t && c->in)
		return 0;
	if ((r = cpu_switch_out(s, c)) < 0)
		return r;
	c->cur = t;
	c->in = true;
	return cpu_switch(s, c, t, false);
}

/* Before a process-wide record: every running thread goes out. */
static int cpu_quiesce(struct ptd_livesink *s)
{
	int r;

	for (unsigned i = 0; i < s->ncpu; i++)
		if ((r = cpu_switch_out(s, &s->cpu[i])) < 0)
			return r;
	return 0;
}

static int cpu_pt(struct ptd_livesink *s, pid_t tid, const uint8_t *data,
		  size_t len)
{
	struct ptd_livesink_thread *t = find(s, tid);
	size_t chunk_max = s->aux_size / 2;
	struct vcpu *c;
	int r;

	if (!t)
		return -ESRCH;
	/* now and then a thread moves to the next CPU */
	if (s->migrate_every && s->ncpu > 1 &&
	    ++t->batches % s->migrate_every == 0) {
		c = &s->cpu[t->cpu];
		if (c->cur == t && (r = cpu_switch_out(s, c)) < 0)
			return r;
		t->cpu = (t->cpu + 1) % s->ncpu;
		t->migrations++;
	}
	c = &s->cpu[t->cpu];
	if ((r = cpu_switch_in(s, c, t)) < 0)
		return r;
	s->last_cpu = t->cpu;
	while (len > 0) {
		size_t n = len < chunk_max ? len : chunk_max;
		int64_t w;

		if ((r = wait_space_p(s, &c->prod, aux_record_size(), n)) < 0)
			return r;
		w = ptd_perf_producer_aux(&c->prod, data, n, 0);
		if (w < 0)
			return (int)w;
		if ((size_t)w != n)
			return -EIO;
		data += n;
		len -= n;
	}
	return 0;
}

static int cpu_thread_begin(struct ptd_livesink *s, pid_t tid)
{
	struct ptd_livesink_thread *t = calloc(1, sizeof(*t));
	struct ptd_perf_itrace_start it = { (uint32_t)s->pid, (uint32_t)tid };
	struct ptd_perf_sample_id sid;
	struct vcpu *c;
	size_t len;
	int r;

	if (!t)
		return -ENOMEM;
	t->tid = tid;
	t->cpu = s->next_cpu++ % s->ncpu;
	if ((r = add_thread(s, t)) < 0) {
		free(t);
		return r;
	}
	c = &s->cpu[t->cpu];
	if ((r = cpu_switch_out(s, c)) < 0)
		return r;
	/* ITRACE_START names the CPU's new owner */
	sid = cpu_sid(s, tid, t->cpu);
	len = ptd_perf_encode_itrace_start(s->rec, sizeof(s->rec), &it,
					   SAMPLE_TYPE, &sid);
	c->cur = t;
	c->in = true;
	return cpu_put(s, c, s->rec, len);
}

static int cpu_thread_end(struct ptd_livesink *s, pid_t tid)
{
	struct ptd_livesink_thread *t = find(s, tid);
	struct ptd_perf_sample_id sid;
	struct ptd_perf_task task;
	struct vcpu *c;
	size_t len;
	int r;

	if (!t)
		return -ESRCH;
	c = &s->cpu[t->cpu];
	/* out first: no record of the thread may follow its EXIT */
	r = c->cur == t ? cpu_switch_out(s, c) : 0;
	sid = cpu_sid(s, tid, t->cpu);
	task = (struct ptd_perf_task){ (uint32_t)s->pid, (uint32_t)s->pid,
				       (uint32_t)tid, (uint32_t)tid,
				       sid.time };
	len = ptd_perf_encode_task(s->rec, sizeof(s->rec), true, &task,
				   SAMPLE_TYPE, &sid);
	if (r == 0)
		r = cpu_put(s, c, s->rec, len);
	(void)ptd_perf_producer_flush(&c->prod);
	/* no buffer of its own: nothing of it is read, it goes now (a CPU
	 * it left keeps it as its last thread, not running) */
	for (unsigned i = 0; i < s->ncpu; i++)
		if (s->cpu[i].cur == t)
			s->cpu[i].cur = NULL;
	if (s->last == t)
		s->last = NULL;
	atomic_store(&t->ended, true);
	(void)ptd_livesink_release(s, t);
	if (s->wake_fd >= 0) {
		uint64_t one = 1;
		ssize_t n = write(s->wake_fd, &one, sizeof(one));

		(void)n;
	}
	return r;
}

static int on_pt_locked(void *ctx, pid_t tid, const uint8_t *data,
			size_t len)
{
	struct ptd_livesink *s = ctx;
	struct ptd_livesink_thread *t = find(s, tid);
	size_t chunk_max = s->aux_size / 2;

	if (s->ncpu)
		return cpu_pt(s, tid, data, len);
	if (!t)
		return -ESRCH;
	while (len > 0) {
		size_t n = len < chunk_max ? len : chunk_max;
		int64_t w;
		int r = wait_space(s, t, aux_record_size(), n);

		if (r < 0)
			return r;
		w = ptd_perf_producer_aux(&t->prod, data, n, 0);
		if (w < 0)
			return (int)w;
		if ((size_t)w != n)	/* wait_space made room: cannot be */
			return -EIO;
		data += n;
		len -= n;
	}
	return 0;
}

static int hist_add(struct ptd_livesink *s, const void *rec, size_t len)
{
	struct blob b = { len, malloc(len) };

	if (!b.bytes)
		return -ENOMEM;
	memcpy(b.bytes, rec, len);
	if (s->nhist == s->caphist) {
		size_t cap = s->caphist ? 2 * s->caphist : 64;
		struct blob *v = realloc(s->hist, cap * sizeof(*v));

		if (!v) {
			free(b.bytes);
			return -ENOMEM;
		}
		s->hist = v;
		s->caphist = cap;
	}
	s->hist[s->nhist++] = b;
	return 0;
}

static void hist_clear(struct ptd_livesink *s)
{
	for (size_t i = 0; i < s->nhist; i++)
		free(s->hist[i].bytes);
	s->nhist = 0;
}

/* Write @rec (@len) into every live thread's ring and keep it for threads
 * that begin later. */
static int broadcast(struct ptd_livesink *s, const void *rec, size_t len)
{
	size_t n;
	int r;

	if (len == 0)
		return -EINVAL;
	if (s->ncpu)	/* the process's: one copy, the feed keeps it */
		return cpu_put(s, &s->cpu[s->last_cpu], rec, len);
	/* the threads not ended, listed under the lock, written to
	 * outside it (a ring may be full: its reader, who releases ended
	 * threads under the lock, must be able to go on); the tracer is
	 * the only one to add threads or end them, so the list holds */
	(void)pthread_mutex_lock(&s->lock);
	r = 0;
	if (s->capto < s->nth) {
		void *v = realloc(s->to, s->nth * sizeof(*s->to));

		if (v) {
			s->to = v;
			s->capto = s->nth;
		} else
			r = -ENOMEM;
	}
	n = 0;
	for (size_t i = 0; r == 0 && i < s->nth; i++)
		if (!atomic_load(&s->th[i]->ended))
			s->to[n++] = s->th[i];
	(void)pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = put_record(s, s->to[i], rec, len);
	return r < 0 ? r : hist_add(s, rec, len);
}

static const char *base_name(const char *path)
{
	const char *p = strrchr(path, '/');

	return p ? p + 1 : path;
}

static int on_image_locked(void *ctx, const struct ptd_tl_event *ev,
			   const uint8_t *code, size_t ncode)
{
	struct ptd_livesink *s = ctx;
	struct ptd_perf_sample_id sid = sid_of(s, s->pid);
	size_t len = 0;
	int r;

	if (s->ncpu) {
		/* every CPU's bytes so far end with a timed record before
		 * this change (cpufeed.h's ordering rule) */
		if ((r = cpu_quiesce(s)) < 0)
			return r;
		sid = cpu_sid(s, s->pid, s->last_cpu);
	}
	switch (ev->op) {
	case PTD_TL_MAP: {
		struct ptd_perf_mmap m = { 0 };

		m.pid = m.tid = (uint32_t)s->pid;
		m.addr = ev->start;
		m.len = ev->end - ev->start;
		m.pgoff = ev->pgoff;
		m.prot = PROT_READ | PROT_EXEC;
		m.flags = MAP_PRIVATE;
		m.filename = ev->path;
		m.maj = ev->id.dev_major;	/* as the kernel's MMAP2 */
		m.min = ev->id.dev_minor;
		m.ino = ev->id.ino;
		len = ptd_perf_encode_mmap2(s->rec, sizeof(s->rec), &m,
					    SAMPLE_TYPE, &sid);
		return broadcast(s, s->rec, len);
	}
	case PTD_TL_UNMAP: {
		struct ptd_perf_unmap u = { (uint32_t)s->pid, (uint32_t)s->pid,
					    ev->start, ev->end };

		len = ptd_perf_encode_unmap(s->rec, sizeof(s->rec), &u,
					    SAMPLE_TYPE, &sid);
		return broadcast(s, s->rec, len);
	}
	case PTD_TL_EXEC: {
		struct ptd_perf_comm c = { (uint32_t)s->pid, (uint32_t)s->pid,
					   true, base_name(ev->path) };

		/* what came before is gone for threads born later */
		hist_clear(s);
		len = ptd_perf_encode_comm(s->rec, sizeof(s->rec), &c,
					   SAMPLE_TYPE, &sid);
		return broadcast(s, s->rec, len);
	}
	case PTD_TL_SNAPSHOT: {
		struct ptd_perf_code c = { 0 };
		uint32_t max = ptd_perf_code_chunk_max(ev->name, SAMPLE_TYPE);

		if (!code || ncode != ev->end - ev->start || max == 0)
			return -EINVAL;
		c.pid = c.tid = (uint32_t)s->pid;
		c.vaddr = ev->start;
		c.len = ncode;
		c.name = ev->name;
		for (size_t off = 0; off < ncode; off += c.size) {
			c.offset = off;
			c.size = (uint32_t)(ncode - off < max ? ncode - off
							      : max);
			c.bytes = code + off;
			len = ptd_perf_encode_code(s->rec, sizeof(s->rec), &c,
						   SAMPLE_TYPE, &sid);
			if ((r = broadcast(s, s->rec, len)) < 0)
				return r;
		}
		return 0;
	}
	}
	return -EINVAL;
}

static int add_thread(struct ptd_livesink *s, struct ptd_livesink_thread *t)
{
	int r = 0;

	(void)pthread_mutex_lock(&s->lock);
	if (s->nth == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		struct ptd_livesink_thread **v =
			realloc(s->th, cap * sizeof(*v));

		if (!v)
			r = -ENOMEM;
		else {
			s->th = v;
			s->cap = cap;
		}
	}
	if (r == 0) {
		t->seq = s->nbegun++;
		s->th[s->nth++] = t;
	}
	(void)pthread_mutex_unlock(&s->lock);
	return r;
}

static int on_thread_begin_locked(void *ctx, pid_t tid)
{
	struct ptd_livesink *s = ctx;
	struct ptd_perf_sample_id sid = sid_of(s, tid);
	struct ptd_perf_itrace_start it = { (uint32_t)s->pid, (uint32_t)tid };
	struct ptd_livesink_thread *t = calloc(1, sizeof(*t));
	struct ptd_perf_clock clk;
	size_t len;
	int r;

	if (!t)
		return -ENOMEM;
	if (s->ncpu) {
		free(t);
		return cpu_thread_begin(s, tid);
	}
	t->tid = tid;
	r = ptd_perf_buf_alloc(s->data_size, s->aux_size, s->overwrite,
			       &t->buf);
	if (r < 0) {
		free(t);
		return r;
	}
	/* The TSC -> perf time (CLOCK_MONOTONIC) conversion, in the header
	 * page as the kernel publishes its own (perf/time.h); without a
	 * usable TSC the page says none (cap_user_time_zero 0). */
	if (buffer_clock(s, &clk))
		(void)ptd_perf_clock_to_page(&clk, t->buf.meta);
	ptd_perf_producer_init(&t->prod, &t->buf);
	/* overwrite mode: nobody reads the AUX area as it fills, so the
	 * reader is woken for sideband (and full rings), not for PT bytes */
	ptd_perf_producer_set_wake(&t->prod, s->wake_fd,
				   s->overwrite ? s->aux_size : 1);
	r = add_thread(s, t);
	if (r < 0) {
		ptd_perf_buf_fini(&t->buf);
		free(t);
		return r;
	}
	len = ptd_perf_encode_itrace_start(s->rec, sizeof(s->rec), &it,
					   SAMPLE_TYPE, &sid);
	if ((r = put_record(s, t, s->rec, len)) < 0)
		return r;
	for (size_t i = 0; i < s->nhist; i++)
		if ((r = put_record(s, t, s->hist[i].bytes,
				    s->hist[i].len)) < 0)
			return r;
	return 0;
}

static int on_thread_end_locked(void *ctx, pid_t tid)
{
	struct ptd_livesink *s = ctx;
	struct ptd_livesink_thread *t = find(s, tid);
	struct ptd_perf_sample_id sid = sid_of(s, tid);
	struct ptd_perf_task task = { (uint32_t)s->pid, (uint32_t)s->pid,
				      (uint32_t)tid, (uint32_t)tid, sid.time };
	size_t len;
	int r;

	if (s->ncpu)
		return cpu_thread_end(s, tid);
	if (!t)
		return -ESRCH;
	len = ptd_perf_encode_task(s->rec, sizeof(s->rec), true, &task,
				   SAMPLE_TYPE, &sid);
	r = put_record(s, t, s->rec, len);
	(void)ptd_perf_producer_flush(&t->prod);
	atomic_store(&t->ended, true);
	if (s->last == t)
		s->last = NULL;
	/* wake the reader for the end even if no bytes were pending */
	if (s->wake_fd >= 0) {
		uint64_t one = 1;
		ssize_t n = write(s->wake_fd, &one, sizeof(one));

		(void)n;
	}
	return r;
}

/* The output calls, each inside the pause gate. */
static int on_pt(void *ctx, pid_t tid, const uint8_t *data, size_t len)
{
	int r;

	gate_enter(ctx);
	r = on_pt_locked(ctx, tid, data, len);
	gate_leave(ctx);
	return r;
}

static int on_image(void *ctx, const struct ptd_tl_event *ev,
		    const uint8_t *code, size_t ncode)
{
	int r;

	gate_enter(ctx);
	r = on_image_locked(ctx, ev, code, ncode);
	gate_leave(ctx);
	return r;
}

static int on_thread_begin(void *ctx, pid_t tid)
{
	int r;

	gate_enter(ctx);
	r = on_thread_begin_locked(ctx, tid);
	gate_leave(ctx);
	return r;
}

static int on_thread_end(void *ctx, pid_t tid)
{
	int r;

	gate_enter(ctx);
	r = on_thread_end_locked(ctx, tid);
	gate_leave(ctx);
	return r;
}

static bool on_flush_wanted(void *ctx, pid_t *tid, int64_t *after_ns)
{
	struct ptd_livesink *s = ctx;

	if (!atomic_load_explicit(&s->flush_req, memory_order_acquire))
		return false;
	(void)pthread_mutex_lock(&s->gate);
	*tid = s->flush_tid;
	*after_ns = s->flush_after;
	(void)pthread_mutex_unlock(&s->gate);
	return true;
}

static void on_flushed(void *ctx)
{
	struct ptd_livesink *s = ctx;

	(void)pthread_mutex_lock(&s->gate);
	atomic_store(&s->flush_req, false);
	s->flushes++;
	(void)pthread_cond_broadcast(&s->gate_cond);
	(void)pthread_mutex_unlock(&s->gate);
}

int ptd_livesink_new(pid_t pid, size_t data_size, size_t aux_size,
		     int wake_fd, atomic_int *cancel,
		     struct ptd_livesink **ret)
{
	struct ptd_livesink *s;
	long page = sysconf(_SC_PAGESIZE);

	if (!ret || pid <= 0 || page <= 0 || data_size < (size_t)page ||
	    aux_size < (size_t)page || (data_size & (data_size - 1)) ||
	    (aux_size & (aux_size - 1)))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->pid = pid;
	s->data_size = data_size;
	s->aux_size = aux_size;
	s->wake_fd = wake_fd;
	s->cancel = cancel;
	(void)pthread_mutex_init(&s->lock, NULL);
	(void)pthread_mutex_init(&s->gate, NULL);
	(void)pthread_cond_init(&s->gate_cond, NULL);
	s->out.thread_begin = on_thread_begin;
	s->out.pt = on_pt;
	s->out.image = on_image;
	s->out.thread_end = on_thread_end;
	s->out.flush_wanted = on_flush_wanted;
	s->out.flushed = on_flushed;
	s->out.ctx = s;
	*ret = s;
	return 0;
}

void ptd_livesink_free(struct ptd_livesink *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nth; i++) {
		ptd_perf_buf_fini(&s->th[i]->buf);
		free(s->th[i]);
	}
	free(s->th);
	free(s->to);
	for (unsigned c = 0; s->cpu && c < s->ncpu; c++)
		ptd_perf_buf_fini(&s->cpu[c].buf);
	free(s->cpu);
	hist_clear(s);
	free(s->hist);
	(void)pthread_mutex_destroy(&s->lock);
	(void)pthread_mutex_destroy(&s->gate);
	(void)pthread_cond_destroy(&s->gate_cond);
	free(s);
}

const struct ptd_swpt_out *ptd_livesink_out(struct ptd_livesink *s)
{
	return &s->out;
}

size_t ptd_livesink_threads(struct ptd_livesink *s, uint64_t from,
			    struct ptd_livesink_thread **out, size_t max)
{
	size_t n = 0, i;

	(void)pthread_mutex_lock(&s->lock);
	/* (those before @from were listed: usually all but a few) */
	for (i = s->nth; i > 0 && s->th[i - 1]->seq >= from; i--)
		;
	for (; i < s->nth && n < max; i++)
		out[n++] = s->th[i];
	(void)pthread_mutex_unlock(&s->lock);
	return n;
}

int ptd_livesink_release(struct ptd_livesink *s,
			 struct ptd_livesink_thread *t)
{
	if (!atomic_load(&t->ended))
		return -EBUSY;
	(void)pthread_mutex_lock(&s->lock);
	remove_locked(s, t);
	(void)pthread_mutex_unlock(&s->lock);
	ptd_perf_buf_fini(&t->buf);
	free(t);
	return 0;
}

void ptd_livesink_get_stats(struct ptd_livesink *s,
			    struct ptd_livesink_stats *ret)
{
	(void)pthread_mutex_lock(&s->lock);
	*ret = s->gone;
	ret->threads = s->nbegun;
	for (size_t i = 0; i < s->nth; i++)
		count_thread(ret, s->th[i]);
	for (unsigned c = 0; s->cpu && c < s->ncpu; c++)
		ret->aux_written += __atomic_load_n(&s->cpu[c].buf.meta->aux_head,
						    __ATOMIC_ACQUIRE);
	(void)pthread_mutex_unlock(&s->lock);
}

int ptd_livesink_set_overwrite(struct ptd_livesink *s, bool on)
{
	int r = 0;

	if (!s || (on && s->ncpu))
		return -EINVAL;
	(void)pthread_mutex_lock(&s->lock);
	if (s->nbegun > 0)
		r = -EBUSY;
	else
		s->overwrite = on;
	(void)pthread_mutex_unlock(&s->lock);
	return r;
}

bool ptd_livesink_flush(struct ptd_livesink *s, pid_t tid, int64_t after_ns,
			void (*kick)(void *ctx), void *ctx, unsigned ms)
{
	struct timespec end;
	uint64_t gen;
	bool done;
	int e = 0;

	(void)clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += ms / 1000;
	end.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	(void)pthread_mutex_lock(&s->gate);
	gen = s->flushes;
	s->flush_tid = tid;
	s->flush_after = after_ns;
	atomic_store(&s->flush_req, true);
	(void)pthread_mutex_unlock(&s->gate);
	if (kick)
		kick(ctx);
	(void)pthread_mutex_lock(&s->gate);
	while (s->flushes == gen && e != ETIMEDOUT)
		e = pthread_cond_timedwait(&s->gate_cond, &s->gate, &end);
	done = s->flushes != gen;
	(void)pthread_mutex_unlock(&s->gate);
	return done;
}

void ptd_livesink_pause(struct ptd_livesink *s)
{
	(void)pthread_mutex_lock(&s->gate);
	s->paused = true;
	while (s->busy)
		(void)pthread_cond_wait(&s->gate_cond, &s->gate);
	(void)pthread_mutex_unlock(&s->gate);
}

void ptd_livesink_resume(struct ptd_livesink *s)
{
	(void)pthread_mutex_lock(&s->gate);
	s->paused = false;
	(void)pthread_cond_broadcast(&s->gate_cond);
	(void)pthread_mutex_unlock(&s->gate);
}

bool ptd_livesink_paused(struct ptd_livesink *s)
{
	bool p;

	(void)pthread_mutex_lock(&s->gate);
	p = s->paused;
	(void)pthread_mutex_unlock(&s->gate);
	return p;
}

int ptd_livesink_set_clock(struct ptd_livesink *s,
			   const struct ptd_perf_clock *c)
{
	if (!s || !c || !c->time_mult || c->time_shift >= 32)
		return -EINVAL;
	(void)pthread_mutex_lock(&s->lock);
	s->clock = *c;
	s->clock_set = true;
	for (unsigned i = 0; i < s->ncpu; i++)
		(void)ptd_perf_clock_to_page(c, s->cpu[i].buf.meta);
	(void)pthread_mutex_unlock(&s->lock);
	return 0;
}

int ptd_livesink_set_cpus(struct ptd_livesink *s, unsigned ncpus,
			  unsigned migrate_every)
{
	struct ptd_perf_clock clk;
	bool has_clk;
	int r = 0;

	if (!s || ncpus == 0 || ncpus > PTD_LIVESINK_MAX_CPUS || s->overwrite)
		return -EINVAL;
	(void)pthread_mutex_lock(&s->lock);
	if (s->nbegun > 0 || s->ncpu > 0)
		r = -EBUSY;
	(void)pthread_mutex_unlock(&s->lock);
	if (r < 0)
		return r;
	s->cpu = calloc(ncpus, sizeof(*s->cpu));
	if (!s->cpu)
		return -ENOMEM;
	has_clk = buffer_clock(s, &clk);
	for (unsigned c = 0; c < ncpus; c++) {
		struct vcpu *v = &s->cpu[c];

		r = ptd_perf_buf_alloc(s->data_size, s->aux_size, false,
				       &v->buf);
		if (r < 0) {
			while (c-- > 0)
				ptd_perf_buf_fini(&s->cpu[c].buf);
			free(s->cpu);
			s->cpu = NULL;
			return r;
		}
		/* the perf clock, as for a per-thread buffer */
		if (has_clk)
			(void)ptd_perf_clock_to_page(&clk, v->buf.meta);
		ptd_perf_producer_init(&v->prod, &v->buf);
		ptd_perf_producer_set_wake(&v->prod, s->wake_fd, 1);
	}
	s->ncpu = ncpus;
	s->migrate_every = migrate_every;
	return 0;
}

size_t ptd_livesink_cpus(struct ptd_livesink *s, struct ptd_perf_buf **out,
			 size_t max)
{
	size_t n = 0;

	for (unsigned c = 0; s && c < s->ncpu && n < max; c++)
		out[n++] = &s->cpu[c].buf;
	return n;
}
