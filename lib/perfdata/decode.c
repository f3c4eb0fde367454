/* SPDX-License-Identifier: MIT */
/*
 * perf.data decoding (see decode.h): one pass over the records builds each
 * thread's stream, its losses, and each process's timeline; then every
 * thread is decoded, segment by segment between losses.  Where the code
 * comes from is code.c's; per-CPU recordings are split by cpus.c
 * (decode-int.h).
 */
#include "perfdata/decode-int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <elf.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aspace/elf.h"
#include "aspace/iscache.h"
#include "common/lockopt.h"
#include "aspace/timeline.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "decode/insncache.h"
#include "decode/threadpar.h"
#include "perf/addrfilter.h"
#include "perf/percpu.h"

/* ---- threads and processes -------------------------------------------- */

static struct proc *proc_get(struct dec *d, pid_t pid, size_t *ret_idx)
{
	struct proc *p;
	size_t i;

	for (i = 0; i < d->npr; i++)
		if (d->pr[i].pid == pid && !d->pr[i].gone)
			goto out;
	p = reallocarray(d->pr, d->npr + 1, sizeof(*p));
	if (!p)
		return NULL;
	d->pr = p;
	memset(&d->pr[i], 0, sizeof(*p));
	d->pr[i].pid = pid;
	ptd_timeline_init(&d->pr[i].tl);
	d->npr++;
	/* Every process runs the kernel mapped so far. */
	if (pdd_kernel_give(d, i, 0, false) < 0)
		return NULL;
out:
	if (ret_idx)
		*ret_idx = i;
	return &d->pr[i];
}

static struct thr *thr_find(struct dec *d, pid_t tid)
{
	size_t i;

	for (i = 0; i < d->nth; i++)
		if (d->th[i].tid == tid && !d->th[i].gone)
			return &d->th[i];
	return NULL;
}

/* A FORK of @pid/@tid: a tid (or a process's pid) the kernel gives again
 * once its thread (process) exited names another one from here on.  The
 * one before keeps its stream and image up to here.  Without the EXIT (a
 * lost record, a FORK perf synthesized for a thread it found running) the
 * tid stays the thread it was. */
static void new_life(struct dec *d, pid_t pid, pid_t tid)
{
	struct thr *t = thr_find(d, tid);
	size_t i;

	if (t && t->exited)
		t->gone = true;
	if (pid != tid)
		return;
	for (i = 0; i < d->npr; i++)
		if (d->pr[i].pid == pid && !d->pr[i].gone && d->pr[i].exited)
			d->pr[i].gone = true;
}

/* A per-thread payload's thread: of the lives of its tid, the one its AUX
 * buffer (@idx) was given to, else the first not given one (a life whose
 * buffer perf drained after the next life began), else the current. */
static struct thr *payload_thr(struct dec *d, pid_t tid, uint32_t idx)
{
	struct thr *first = NULL;
	size_t i;

	for (i = 0; i < d->nth; i++) {
		struct thr *t = &d->th[i];

		if (t->tid != tid)
			continue;
		if (t->have_idx && t->idx == idx)
			return t;
		if (!t->have_idx && !first)
			first = t;
	}
	if (!first)
		first = pdd_thr_get(d, 0, tid);
	if (first && !first->have_idx) {
		first->have_idx = true;
		first->idx = idx;
	}
	return first;
}


static int tidpid_cmp(const void *a, const void *b)
{
	const struct tidpid *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int tid_cmp(const void *a, const void *b)
{
	const struct tidpid *x = a, *y = b;

	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int make_pidmap(struct dec *d)
{
	size_t i, n = 0, k;

	d->pidmap_made = true;
	for (i = 0; i < d->pd->nrecs; i++) {
		struct ptd_perf_event e;
		pid_t tid, pid;

		if (d->pd->recs[i].attr < 0 ||
		    ptd_perfdata_event(d->pd, i, &e, NULL) < 0)
			continue;
		if (e.type == PERF_RECORD_ITRACE_START) {
			tid = (pid_t)e.u.itrace.tid;
			pid = (pid_t)e.u.itrace.pid;
		} else if (e.type == PERF_RECORD_COMM) {
			tid = (pid_t)e.u.comm.tid;
			pid = (pid_t)e.u.comm.pid;
		} else if (e.type == PERF_RECORD_FORK) {
			tid = (pid_t)e.u.task.tid;
			pid = (pid_t)e.u.task.pid;
		} else {
			continue;
		}
		if (n == d->npidmap_cap) {
			size_t cap = n ? 2 * n : 64;
			struct tidpid *v = reallocarray(d->pidmap, cap,
							sizeof(*v));

			if (!v)
				return -ENOMEM;
			d->pidmap = v;
			d->npidmap_cap = cap;
		}
		d->pidmap[n].tid = tid;
		d->pidmap[n].pid = pid;
		d->pidmap[n].seq = n;
		n++;
	}
	/* by tid, each tid's first record first; keep that one */
	if (n)
		qsort(d->pidmap, n, sizeof(*d->pidmap), tidpid_cmp);
	for (i = 0, k = 0; i < n; i++)
		if (!k || d->pidmap[k - 1].tid != d->pidmap[i].tid)
			d->pidmap[k++] = d->pidmap[i];
	d->npidmap = k;
	return 0;
}

/* The process of @tid by the records that name both (0: none does). */
static pid_t pid_of(struct dec *d, pid_t tid)
{
	struct tidpid key = { tid, 0, 0 };
	const struct tidpid *hit;

	if (!d->pidmap_made && make_pidmap(d) < 0)
		return 0;
	if (!d->npidmap)	/* no map at all: bsearch wants a base */
		return 0;
	hit = bsearch(&key, d->pidmap, d->npidmap, sizeof(key), tid_cmp);
	return hit ? hit->pid : 0;
}

/* Thread @tid (of @pid, 0: look it up), created on first sight. */
struct thr *pdd_thr_get(struct dec *d, pid_t pid, pid_t tid)
{
	struct thr *t = thr_find(d, tid);
	struct proc *p;
	size_t pi;

	if (t)
		return t;
	if (pid <= 0)
		pid = pid_of(d, tid);
	if (pid <= 0)
		pid = tid;
	p = proc_get(d, pid, &pi);
	if (!p)
		return NULL;
	t = reallocarray(d->th, d->nth + 1, sizeof(*t));
	if (!t)
		return NULL;
	d->th = t;
	t = &d->th[d->nth++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->tid = tid;
	t->proc = pi;
	t->first_seq = p->tl.next_seq;
	return t;
}

/* Append trace bytes to @t.  Every image change read before a thread's
 * first byte is in effect when its stream starts -- but none read after
 * it exited (a per-thread recording's last bytes come after its EXIT). */
int pdd_thr_append(struct dec *d, struct thr *t, const uint8_t *p,
		   size_t n)
{
	if (!n)
		return 0;
	if (!t->pt.len) {
		t->first_seq = d->pr[t->proc].tl.next_seq;
		if (t->exited && t->end_seq < t->first_seq)
			t->first_seq = t->end_seq;
	}
	t->last_len = n;
	return ptd_buf_append(&t->pt, p, n);
}

int pdd_add_loss(struct thr *t, uint64_t bytes, bool split,
		 const char *fmt, ...)
{
	struct loss *l = reallocarray(t->loss, t->nloss + 1, sizeof(*l));
	va_list ap;
	int n;

	if (!l)
		return -ENOMEM;
	t->loss = l;
	l = &t->loss[t->nloss];
	l->pos = t->pt.len;
	l->bytes = bytes;
	l->split = split;
	va_start(ap, fmt);
	n = vasprintf(&l->why, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	t->nloss++;
	return 0;
}

/* ---- the pass over the records ---------------------------------------- */

/* Add @ev to process @pi's timeline, placed at every known thread's
 * length; @miss: why its code was not found (an error record for each
 * thread it concerns). */
int pdd_tl_add_proc(struct dec *d, size_t pi, struct ptd_tl_event *ev,
		    const char *miss)
{
	struct ptd_tl_pos *pos;
	struct proc *p = &d->pr[pi];
	size_t i, n = 0;
	int64_t seq;

	pos = calloc(d->nth + 1, sizeof(*pos));
	if (!pos)
		return -ENOMEM;
	for (i = 0; i < d->nth; i++)
		if (d->th[i].pid == p->pid && !d->th[i].exited) {
			pos[n].tid = d->th[i].tid;
			pos[n++].pos = d->th[i].pt.len;
		}
	ev->pos = pos;
	ev->npos = n;
	seq = ptd_timeline_add(&p->tl, ev);
	ev->pos = NULL;
	ev->npos = 0;
	free(pos);
	if (seq < 0)
		return (int)seq;
	if (miss) {
		struct miss *m = reallocarray(p->miss, p->nmiss + 1,
					      sizeof(*m));

		if (!m)
			return -ENOMEM;
		p->miss = m;
		m[p->nmiss].seq = (uint64_t)seq;
		m[p->nmiss].msg = strdup(miss);
		if (!m[p->nmiss].msg)
			return -ENOMEM;
		p->nmiss++;
	}
	return 0;
}

/* The same for process @pid (created on first sight). */
static int tl_add(struct dec *d, pid_t pid, struct ptd_tl_event *ev,
		  const char *miss)
{
	size_t pi;

	if (!proc_get(d, pid, &pi))
		return -ENOMEM;
	return pdd_tl_add_proc(d, pi, ev, miss);
}

static int note_buildid(struct dec *d, const struct ptd_perf_mmap *m)
{
	struct bid *b;
	size_t i;

	if (!m->has_build_id || !m->build_id_size)
		return 0;
	b = reallocarray(d->bids, d->nbids + 1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	d->bids = b;
	b = &d->bids[d->nbids];
	b->path = strdup(m->filename);
	if (!b->path)
		return -ENOMEM;
	for (i = 0; i < m->build_id_size; i++)
		(void)snprintf(b->hex + 2 * i, 3, "%02x", m->build_id[i]);
	d->nbids++;
	return 0;
}

/* An image change from record @e of process @pid. */
static int image_change(struct dec *d, const struct ptd_perf_event *e)
{
	struct ptd_tl_event ev;
	struct ptd_diag rd = { "" };
	char out[4096];
	pid_t pid;
	int r;

	memset(&ev, 0, sizeof(ev));
	r = ptd_perf_event_to_tl(e, &ev, NULL);
	if (r <= 0)
		return 0;	/* nothing for the image (or a bad range) */
	pid = (pid_t)(e->type == PERF_RECORD_COMM ? e->u.comm.pid
			 : e->type == PTD_PERF_RECORD_UNMAP ? e->u.unmap.pid
							    : e->u.mmap.pid);
	if (e->type == PERF_RECORD_MMAP2) {
		int br = note_buildid(d, &e->u.mmap);

		if (br < 0)
			return br;
	}
	if (!thr_find(d, (pid_t)(e->type == PERF_RECORD_COMM
					 ? e->u.comm.tid
					 : e->u.mmap.tid)) &&
	    e->type != PTD_PERF_RECORD_UNMAP &&
	    !pdd_thr_get(d, pid, (pid_t)(e->type == PERF_RECORD_COMM
					     ? e->u.comm.tid
					     : e->u.mmap.tid)))
		return -ENOMEM;
	if (r == PTD_PERF_TL_NONFILE) {
		/* Non-file code: by build-id only, as a file named like it
		 * (the resolver finds it); else left out of the image. */
		ev.op = PTD_TL_MAP;
		ev.path = ev.name;
		ev.pgoff = 0;
		ev.name = NULL;
	}
	if (ev.op == PTD_TL_MAP &&
	    pdd_resolve(d, ev.path, out, sizeof(out), &rd) < 0) {
		ev.op = PTD_TL_UNMAP;	/* no stale code stays there */
		ev.path = NULL;
		return tl_add(d, pid, &ev, rd.msg);
	}
	r = tl_add(d, pid, &ev, NULL);
	if (r == 0 && ev.op == PTD_TL_EXEC) {
		/* The exec emptied the image; the kernel is still there. */
		size_t pi;

		if (!proc_get(d, pid, &pi))
			return -ENOMEM;
		r = pdd_kernel_give(d, pi, 0, true);
	}
	return r;
}

/* Snapshot mode: whether payload @a takes up the thread's stream where the
 * last one ended -- it starts at that AUX offset, or before it with the
 * bytes it shares with the stream's end identical (a snapshot taken
 * before the ring overwrote them; perf's decoder finds such overlaps by
 * content too).  *@ret_skip: the bytes to skip. */
static bool snapshot_continues(const struct thr *t,
			       const struct ptd_perfdata_auxtrace_rec *a,
			       uint64_t *ret_skip)
{
	uint64_t over;

	*ret_skip = 0;
	if (a->offset == t->next_aux)
		return true;
	if (a->offset > t->next_aux)
		return false;
	over = t->next_aux - a->offset;
	if (over > a->size || over > t->last_len || over > t->pt.len)
		return false;
	if (memcmp(a->data, t->pt.data + t->pt.len - over, over))
		return false;
	*ret_skip = over;
	return true;
}

/* An AUXTRACE payload of a per-thread recording. */
static int thread_payload(struct dec *d,
			  const struct ptd_perfdata_auxtrace_rec *a)
{
	struct thr *t = payload_thr(d, (pid_t)a->tid, a->idx);
	uint64_t skip = 0, size = a->size;
	int r = 0;

	if (!t)
		return -ENOMEM;
	if (t->have_next && d->pd->pt.snapshot_mode &&
	    snapshot_continues(t, a, &skip)) {
		/* the stream goes on: nothing lost, skip what repeats */
	} else if (t->have_next && d->pd->pt.snapshot_mode)
		r = pdd_add_loss(t, 0, true, "snapshot: trace between AUXTRACE "
			     "records (0x%" PRIx64 ") not recorded",
			     a->rec_offset);
	else if (t->have_next && a->offset > t->next_aux)
		r = pdd_add_loss(t, a->offset - t->next_aux, true,
			     "lost %" PRIu64 " trace bytes (AUX offset "
			     "0x%" PRIx64 " to 0x%" PRIx64 ")",
			     a->offset - t->next_aux, t->next_aux, a->offset);
	else if (t->have_next && a->offset < t->next_aux) {
		/* perf pads each payload to 8 bytes with zeros and the next
		 * one starts at the unpadded end: the overlap is the last
		 * payload's padding, dropped.  A larger overlap is data
		 * passed before: skipped. */
		uint64_t over = t->next_aux - a->offset;

		if (over < 8 && over <= t->last_len)
			t->pt.len -= over;
		else
			skip = over;
	}
	if (r < 0)
		return r;
	/* Zero padding past the AUX data the kernel announced (its
	 * PERF_RECORD_AUX, which perf writes before the payload) is not
	 * trace: left out now, not when the next payload shows it, so that
	 * an image change read in between is placed where the trace ends. */
	if (t->have_aux_end && a->offset + size > t->aux_end &&
	    a->offset + size - t->aux_end < 8 &&
	    t->aux_end >= a->offset + skip) {
		uint64_t end = t->aux_end - a->offset, i;

		for (i = end; i < size && !a->data[i]; i++)
			;
		if (i == size)
			size = end;
	}
	t->have_next = true;
	if (a->offset + size > t->next_aux || !skip)
		t->next_aux = a->offset + size;
	if (skip >= size)
		return 0;
	return pdd_thr_append(d, t, a->data + skip, size - skip);
}

/* Losses a record announces, for thread @tid (0: every thread). */
static int record_loss(struct dec *d, const struct ptd_perf_event *e)
{
	struct thr *t = thr_find(d, (pid_t)e->sid.tid);
	size_t i;

	if (e->type == PERF_RECORD_AUX && t) {
		uint64_t f = e->u.aux.flags;

		if (!t->have_aux_end ||
		    e->u.aux.aux_offset + e->u.aux.aux_size > t->aux_end)
			t->aux_end = e->u.aux.aux_offset + e->u.aux.aux_size;
		t->have_aux_end = true;
		if (f & PERF_AUX_FLAG_TRUNCATED)
			return pdd_add_loss(t, 0, true, "AUX data truncated "
					"after offset 0x%" PRIx64 " (buffer "
					"full): trace lost",
					e->u.aux.aux_offset +
						e->u.aux.aux_size);
		if (f & (PERF_AUX_FLAG_PARTIAL | PERF_AUX_FLAG_COLLISION))
			return pdd_add_loss(t, 0, false, "AUX chunk of %" PRIu64
					" bytes at 0x%" PRIx64 " has gaps",
					e->u.aux.aux_size,
					e->u.aux.aux_offset);
		return 0;
	}
	if (e->type != PERF_RECORD_LOST)
		return 0;
	for (i = 0; i < d->nth; i++) {
		int r = pdd_add_loss(&d->th[i], 0, false, "%" PRIu64 " sideband "
				 "records lost: the image may be wrong",
				 e->u.lost.lost);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A kernel record of a per-thread recording. */
int pdd_thread_record(struct dec *d, const struct ptd_perf_event *e)
{
	switch (e->type) {
	case PERF_RECORD_ITRACE_START:
		return pdd_thr_get(d, (pid_t)e->u.itrace.pid,
			       (pid_t)e->u.itrace.tid) ? 0 : -ENOMEM;
	case PERF_RECORD_FORK:
		new_life(d, (pid_t)e->u.task.pid, (pid_t)e->u.task.tid);
		return pdd_thr_get(d, (pid_t)e->u.task.pid,
			       (pid_t)e->u.task.tid) ? 0 : -ENOMEM;
	case PERF_RECORD_EXIT: {
		struct thr *t = thr_find(d, (pid_t)e->u.task.tid);
		size_t i;

		if (t && !t->exited) {
			t->exited = true;
			t->end_seq = d->pr[t->proc].tl.next_seq;
		}
		if (e->u.task.pid == e->u.task.tid)
			for (i = 0; i < d->npr; i++)
				if (d->pr[i].pid == (pid_t)e->u.task.pid &&
				    !d->pr[i].gone)
					d->pr[i].exited = true;
		return 0;
	}
	case PERF_RECORD_COMM:
		if (!pdd_thr_get(d, (pid_t)e->u.comm.pid, (pid_t)e->u.comm.tid))
			return -ENOMEM;
		return image_change(d, e);
	case PERF_RECORD_MMAP:
	case PERF_RECORD_MMAP2:
		if (pdd_is_kernel_map(e))
			return pdd_kernel_change(d, e);
		return image_change(d, e);
	case PERF_RECORD_TEXT_POKE:
		return pdd_kernel_poke(d, e);
	case PTD_PERF_RECORD_UNMAP:
		return image_change(d, e);
	case PERF_RECORD_AUX:
	case PERF_RECORD_LOST:
		return record_loss(d, e);
	default:
		return 0;
	}
}

static int build(struct dec *d)
{
	const struct ptd_perfdata *pd = d->pd;
	bool per_cpu = pd->pt.per_cpu_mmaps;
	size_t i;
	int r = 0;

	for (i = 0; i < pd->nauxtrace; i++)
		if (pd->auxtrace[i].tid == UINT32_MAX)
			per_cpu = true;
	if (per_cpu)
		return pdd_percpu_pass(d);
	for (i = 0; r == 0 && i < pd->nrecs; i++) {
		const struct ptd_perfdata_rec *rec = &pd->recs[i];
		struct ptd_perf_event e;

		if (rec->aux != UINT32_MAX) {
			r = thread_payload(d, &pd->auxtrace[rec->aux]);
			continue;
		}
		if (rec->attr < 0)
			continue;
		r = ptd_perfdata_event(pd, i, &e, d->diag);
		if (r == 0)
			r = pdd_thread_record(d, &e);
	}
	/* The last payload's zero padding, past the end the AUX records
	 * announced, is not trace. */
	for (i = 0; r == 0 && i < d->nth; i++) {
		struct thr *t = &d->th[i];

		if (t->have_aux_end && t->have_next &&
		    t->next_aux > t->aux_end &&
		    t->next_aux - t->aux_end < 8 &&
		    t->next_aux - t->aux_end <= t->last_len)
			t->pt.len -= t->next_aux - t->aux_end;
	}
	return r;
}

/* ---- decoding --------------------------------------------------------- */

static int emit_error(const struct ptd_input_sink *sink, const struct thr *t,
		      int code, uint64_t off, uint64_t skipped,
		      const char *why)
{
	struct ptd_record rec;

	memset(&rec, 0, sizeof(rec));
	rec.type = PTD_REC_ERROR;
	rec.pid = t->pid;
	rec.tid = t->tid;
	rec.u.error.code = code;
	rec.u.error.ptd_code = true;
	rec.u.error.offset = off;
	rec.u.error.context = why;
	rec.u.error.skipped = skipped;
	return sink->record(sink->ctx, &rec);
}

/* Image errors of thread @t: every missing file it would have mapped. */
static int image_errors(const struct dec *d, const struct thr *t,
			const struct ptd_input_sink *sink,
			struct ptd_decode_stats *st)
{
	const struct proc *p = &d->pr[t->proc];
	size_t i;

	for (i = 0; i < p->nmiss; i++) {
		const struct ptd_tl_event *ev = NULL;
		int64_t pos = 0;
		size_t k;
		int r;

		for (k = 0; k < p->tl.n; k++)
			if (p->tl.ev[k].seq == p->miss[i].seq)
				ev = &p->tl.ev[k];
		if (ev && ev->seq >= t->first_seq &&
		    (pos = ptd_tl_event_pos(ev, t->tid)) < 0)
			continue;	/* not in this thread's life */
		st->errors++;
		r = emit_error(sink, t, -PTD_ENOIMAGE, (uint64_t)pos, 0,
			       p->miss[i].msg);
		if (r)
			return r;
	}
	return 0;
}

static void add_stats(struct ptd_decode_stats *a,
		      const struct ptd_decode_stats *b)
{
	a->insns += b->insns;
	a->blocks += b->blocks;
	a->events += b->events;
	a->errors += b->errors;
	a->bytes += b->bytes;
	a->skipped += b->skipped;
	a->tl_applied += b->tl_applied;
	a->serial_parts += b->serial_parts;
	if (!a->serial_why)
		a->serial_why = b->serial_why;
}

/* Decode thread @t, its records to @sink->record; @lock: decode/threadpar.h
 * (NULL: no other thread uses the section cache). */
static int decode_thread(const struct dec *d, const struct thr *t,
			 const struct ptd_decode_opts *dopts,
			 struct ptd_insncache *icache, pthread_mutex_t *lock,
			 const struct ptd_input_sink *sink,
			 struct ptd_decode_stats *st, struct ptd_diag *td)
{
	const struct proc *p = &d->pr[t->proc];
	struct ptd_decode_thread_args a;
	struct ptd_tl_cursor cur;
	struct ptd_image *img;
	char name[64];
	uint64_t start = 0;
	size_t li = 0;
	int r;

	(void)snprintf(name, sizeof(name), "tid %ld", (long)t->tid);
	ptd_lock_opt(lock);
	(void)ptd_image_new(d->ic, name, &img);
	/* Missing files were taken out of the timeline and are reported
	 * here, so an error applying the rest is not expected. */
	if (img)
		(void)ptd_tl_cursor_init(&cur, &p->tl, NULL, t->tid,
					 t->first_seq,
					 t->exited ? t->end_seq : UINT64_MAX,
					 img, td);
	ptd_unlock_opt(lock);
	if (!img)
		return -ENOMEM;
	r = image_errors(d, t, sink, st);
	while (r == 0) {
		uint64_t end = t->pt.len;
		struct ptd_decode_stats s;
		size_t k;

		/* The losses up to @start, then the segment up to the next
		 * discontinuity (split losses are in increasing order). */
		for (; r == 0 && li < t->nloss && t->loss[li].pos <= start;
		     li++) {
			st->errors++;
			r = emit_error(sink, t, -PTD_ETRUNC, t->loss[li].pos,
				       t->loss[li].bytes, t->loss[li].why);
		}
		if (r)
			break;
		for (k = li; k < t->nloss; k++)
			if (t->loss[k].split && t->loss[k].pos > start) {
				end = t->loss[k].pos;
				break;
			}
		memset(&a, 0, sizeof(a));
		memset(&s, 0, sizeof(s));
		a.pt = t->pt.data + start;
		a.len = end - start;
		a.base = start;
		a.pid = t->pid;
		a.tid = t->tid;
		a.img = img;
		a.cursor = &cur;
		a.icache = icache;
		a.lock = lock;
		if (end > start)
			r = ptd_decode_thread(dopts, &a, sink->record,
					      sink->ctx, &s);
		add_stats(st, &s);
		if (end >= t->pt.len)
			break;
		start = end;
	}
	/* Losses after the last byte (a truncated end). */
	for (; r == 0 && li < t->nloss; li++) {
		st->errors++;
		r = emit_error(sink, t, -PTD_ETRUNC, t->loss[li].pos,
			       t->loss[li].bytes, t->loss[li].why);
	}
	ptd_lock_opt(lock);
	ptd_image_free(img);
	ptd_unlock_opt(lock);
	return r;
}

static void dec_free(struct dec *d)
{
	size_t i, k;

	for (i = 0; i < d->nth; i++) {
		for (k = 0; k < d->th[i].nloss; k++)
			free(d->th[i].loss[k].why);
		free(d->th[i].loss);
		ptd_buf_fini(&d->th[i].pt);
	}
	free(d->th);
	for (i = 0; i < d->npr; i++) {
		for (k = 0; k < d->pr[i].nmiss; k++)
			free(d->pr[i].miss[k].msg);
		free(d->pr[i].miss);
		ptd_timeline_fini(&d->pr[i].tl);
	}
	free(d->pr);
	for (i = 0; i < d->nbids; i++)
		free(d->bids[i].path);
	free(d->bids);
	ptd_iscache_free(d->ic);
	pdd_kernel_free(&d->k);
	free(d->pidmap);
	if (d->vdso_made && d->vdso_fd >= 0)
		(void)close(d->vdso_fd);
}

static bool selected(const struct ptd_input_opts *o, const struct thr *t)
{
	return t->pt.len && (!o->have_tid || t->tid == o->tid);
}

/* The address filter perf recorded with (AUXTRACE_INFO's filter text),
 * as libipt's decoder needs it for process @p: file ranges at the
 * addresses the process mapped the files at (its MMAP records).  A text or
 * range that does not pdd_resolve is said once through the sink's notice;
 * decoding goes on without it (it matters for erratum SKL014 only). */
static void proc_filter(const struct dec *d, struct proc *p,
			const struct ptd_input_sink *sink)
{
	const char *text = d->pd->pt.filter;
	struct ptd_addrfilter f = { .n = 0 };
	struct ptd_diag fd = { "" };
	struct ptd_maps maps = { NULL, 0 };
	int r;

	if (p->filter_done)
		return;
	p->filter_done = true;
	if (!text || !*text)
		return;
	r = ptd_addrfilter_parse(text, PTD_ADDRFILTER_MAX, &f, &fd);
	if (r == 0) {
		maps.v = calloc(p->tl.n ? p->tl.n : 1, sizeof(*maps.v));
		if (!maps.v)
			r = -ENOMEM;
	}
	for (size_t i = 0; r == 0 && i < p->tl.n; i++) {
		const struct ptd_tl_event *ev = &p->tl.ev[i];
		struct ptd_map *m = &maps.v[maps.n];

		if (ev->op != PTD_TL_MAP || !ev->path)
			continue;
		m->start = ev->start;
		m->end = ev->end;
		m->offset = ev->pgoff;
		m->prot = PTD_MAP_PROT_R | PTD_MAP_PROT_X;
		m->kind = PTD_MAP_FILE;
		m->path = ev->path;
		maps.n++;
	}
	if (r == 0)
		r = ptd_addrfilter_to_config(&f, &maps, &p->filter, &fd);
	free(maps.v);
	ptd_addrfilter_fini(&f);
	if (r < 0 && sink->notice) {
		struct ptd_diag n = { "" };

		(void)ptd_diagf(&n, r, "%s: process %ld: address filter '%s' "
				"(AUXTRACE_INFO): %s; decoded without it",
				d->pd->name, (long)p->pid, text,
				fd.msg[0] ? fd.msg : ptd_strerror(r));
		sink->notice(sink->ctx, &n);
	}
}

/* Timing packets as perf's decoder reads them: AUXTRACE_INFO's MTC word
 * is the mask of the mtc bit in the intel_pt event's config and its
 * "MTC_FREQ_BITS" word the mask of the mtc_period field; with mtc set the
 * MTC period is that field.  The TSC:CTC ratio and the nominal ratio come
 * from AUXTRACE_INFO as they are. */
static void timing(const struct ptd_perfdata *pd, struct ptd_decode_opts *o)
{
	const struct ptd_perfdata_ptinfo *pt = &pd->pt;
	uint64_t fmask = pt->mtc_freq_bits;
	unsigned shift = 0;
	size_t i;

	if (!pt->present)
		return;
	while (fmask && !(fmask & 1)) {
		fmask >>= 1;
		shift++;
	}
	for (i = 0; i < pd->nattrs; i++) {
		const struct perf_event_attr *a = &pd->attrs[i].attr;
		uint64_t v;

		if (a->type != pt->pmu_type)
			continue;
		v = (a->config & pt->mtc_freq_bits) >> shift;
		if (pt->mtc_bit && (a->config & pt->mtc_bit) && v < 16)
			o->mtc_freq = (uint8_t)v;
		break;
	}
	if (pt->tsc_ctc_n <= UINT32_MAX && pt->tsc_ctc_d <= UINT32_MAX) {
		o->cpuid_0x15_eax = (uint32_t)pt->tsc_ctc_d;
		o->cpuid_0x15_ebx = (uint32_t)pt->tsc_ctc_n;
	}
	if (pt->max_nonturbo_ratio <= UINT8_MAX)
		o->nom_freq = (uint8_t)pt->max_nonturbo_ratio;
}

/* The selected threads as units (decode/threadpar.h). */
struct units {
	const struct dec *d;
	const size_t *sel;		/* indexes in d->th */
	struct ptd_insncache *icache;	/* one thread at a time only */
	const struct ptd_input_sink *sink;
	size_t errors;
};

/* Every section the thread's decode can add (threadpar.h). */
static int unit_sections(void *ctx, size_t i)
{
	const struct units *u = ctx;
	const struct thr *t = &u->d->th[u->sel[i]];

	return ptd_tl_add_sections(u->d->ic, &u->d->pr[t->proc].tl, NULL,
				  t->tid, t->first_seq,
				  t->exited ? t->end_seq : UINT64_MAX);
}

static int unit_decode(void *ctx, size_t i, const struct ptd_decode_opts *uo,
		       pthread_mutex_t *lock, ptd_record_fn fn, void *fctx,
		       struct ptd_decode_stats *st, struct ptd_diag *diag)
{
	const struct units *u = ctx;
	const struct thr *t = &u->d->th[u->sel[i]];
	struct ptd_decode_opts o = *uo;
	struct ptd_input_sink sink = *u->sink;

	sink.record = fn;
	sink.ctx = fctx;
	if (!u->d->o->decode.addr_filter.config.addr_cfg)
		o.addr_filter = u->d->pr[t->proc].filter;
	return decode_thread(u->d, t, &o, lock ? NULL : u->icache, lock,
			     &sink, st, diag);
}

static void unit_done(void *ctx, size_t i, int err,
		      const struct ptd_decode_stats *st,
		      const struct ptd_diag *diag)
{
	struct units *u = ctx;

	if (err < 0)
		u->errors++;
	if (u->sink->thread_done)
		u->sink->thread_done(u->sink->ctx, u->d->th[u->sel[i]].tid, st,
				     err, diag);
}

static int run(struct dec *d, const struct ptd_input_sink *sink,
	       size_t *ret_thread_errors)
{
	const struct ptd_perfdata *pd = d->pd;
	struct ptd_insncache *icache = NULL;
	struct ptd_decode_opts dopts = d->o->decode;
	struct ptd_input_info info;
	struct units u;
	struct ptd_threadpar_ops ops = { unit_sections, unit_decode, unit_done,
					 &u };
	size_t i, nsel = 0, *sel;
	uint64_t *bytes;
	pid_t pid = 0;
	int r;

	sel = calloc(d->nth ? d->nth : 1, sizeof(*sel));
	bytes = calloc(d->nth ? d->nth : 1, sizeof(*bytes));
	if (!sel || !bytes) {
		free(sel);
		free(bytes);
		return -ENOMEM;
	}
	for (i = 0; i < d->nth; i++) {
		if (!selected(d->o, &d->th[i]))
			continue;
		sel[nsel] = i;
		bytes[nsel] = d->th[i].pt.len;
		if (nsel++ == 0)
			pid = d->th[i].pid;
		else if (pid != d->th[i].pid)
			pid = -1;
	}
	if (d->o->have_tid && !nsel) {
		free(sel);
		free(bytes);
		return ptd_diagf(d->diag, -ENOENT, "%s has no trace of thread "
				 "%ld", pd->name, (long)d->o->tid);
	}
	if (!d->o->cpu_given && pd->have_cpu)
		dopts.cpu = pd->cpu;
	/* Perf time on records: the TSC conversion AUXTRACE_INFO carries
	 * when the kernel gave one (cap_user_time_zero; the reader refused
	 * one that would not convert), as perf's own decoder uses it. */
	if (!dopts.has_clock && pd->pt.present && pd->pt.cap_user_time_zero) {
		dopts.has_clock = true;
		dopts.clock = pd->pt.clock;
	}
	timing(pd, &dopts);
	(void)ptd_insncache_new(0, &icache);
	if (!icache) {
		free(sel);
		free(bytes);
		return -ENOMEM;
	}
	info = (struct ptd_input_info){ PTD_INPUT_PERFDATA, "perf.data",
					pid > 0 ? (long)pid : 0, nsel };
	r = sink->info ? sink->info(sink->ctx, &info) : 0;
	/* each process's filter (and its notice) before its threads */
	for (i = 0; r == 0 && i < nsel; i++)
		if (!d->o->decode.addr_filter.config.addr_cfg)
			proc_filter(d, &d->pr[d->th[sel[i]].proc], sink);
	u = (struct units){ d, sel, icache, sink, 0 };
	if (r == 0)
		r = ptd_threadpar_run(&dopts, nsel,
				      ptd_threadpar_fits(&dopts, bytes, nsel),
				      &ops, sink->record, sink->ctx);
	if (ret_thread_errors)
		*ret_thread_errors = u.errors;
	ptd_insncache_free(icache);
	free(sel);
	free(bytes);
	return r;
}

/* Whether an intel_pt event of @pd traces kernel code. */
static bool traces_kernel(const struct ptd_perfdata *pd)
{
	size_t i;

	for (i = 0; i < pd->nattrs; i++)
		if (pd->attrs[i].attr.type == pd->pt.pmu_type &&
		    !pd->attrs[i].attr.exclude_kernel)
			return true;
	return false;
}

static int decode_parsed(const struct ptd_perfdata *pd, const char *kcore,
			 const struct ptd_input_opts *o,
			 const struct ptd_input_sink *sink,
			 size_t *ret_thread_errors, struct ptd_diag *diag)
{
	struct dec d;
	int r;

	if (!pd || !o || !sink || !sink->record)
		return -EINVAL;
	if (ret_thread_errors)
		*ret_thread_errors = 0;
	if (!pd->pt.present || pd->pt.type != PTD_PERFDATA_AUXTRACE_INTEL_PT)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED, "%s: %s", pd->name,
				 pd->pt.present ? "its AUX trace is not Intel "
						  "PT" : "no Intel PT trace "
						  "(no AUXTRACE_INFO record)");
	memset(&d, 0, sizeof(d));
	d.pd = pd;
	d.o = o;
	d.diag = diag;
	d.k.traced = traces_kernel(pd);
	d.k.kcore = kcore;
	(void)ptd_iscache_new(&d.ic);
	if (!d.ic)
		return -ENOMEM;
	ptd_iscache_set_resolver(d.ic, pdd_resolve, &d);
	r = build(&d);
	if (r == 0)
		r = run(&d, sink, ret_thread_errors);
	dec_free(&d);
	return r;
}

int ptd_perfdata_decode_parsed(const struct ptd_perfdata *pd,
			       const struct ptd_input_opts *o,
			       const struct ptd_input_sink *sink,
			       size_t *ret_thread_errors,
			       struct ptd_diag *diag)
{
	return decode_parsed(pd, NULL, o, sink, ret_thread_errors, diag);
}

int ptd_perfdata_decode(const char *path, const struct ptd_input_opts *o,
			const struct ptd_input_sink *sink,
			size_t *ret_thread_errors, struct ptd_diag *diag)
{
	struct ptd_perfdata *pd = NULL;
	char data[PATH_MAX], kcore[PATH_MAX];
	const char *kc = NULL;
	struct stat st;
	int r;

	if (!path || !o || !sink || !sink->record)
		return -EINVAL;
	if (strcmp(path, "-") && stat(path, &st) == 0 &&
	    S_ISDIR(st.st_mode)) {
		/* perf record --kcore: PATH/data, PATH/kcore_dir/kcore.
		 * perf record --threads adds PATH/data.N files, which
		 * hold records this reader would miss. */
		if (snprintf(data, sizeof(data), "%s/data.0", path) >=
		    (int)sizeof(data))
			return -ENAMETOOLONG;
		if (stat(data, &st) == 0)
			return ptd_diagf(diag, -PTD_EUNSUPPORTED, "'%s' was "
					 "recorded with perf record --threads "
					 "(it has data.N files), which ptd "
					 "does not read: record without "
					 "--threads", path);
		(void)snprintf(data, sizeof(data), "%s/data", path);
		if (snprintf(kcore, sizeof(kcore), "%s/kcore_dir", path) <
			    (int)sizeof(kcore) &&
		    stat(kcore, &st) == 0 && S_ISDIR(st.st_mode) &&
		    snprintf(kcore, sizeof(kcore), "%s/kcore_dir/kcore",
			     path) < (int)sizeof(kcore))
			kc = kcore;
		path = data;
	}
	r = o->streams ? ptd_perfdata_open(path, &pd, diag)
		       : ptd_perfdata_open_file(path, &pd, diag);
	if (r < 0)
		return r;
	r = decode_parsed(pd, kc, o, sink, ret_thread_errors, diag);
	ptd_perfdata_free(pd);
	return r;
}
