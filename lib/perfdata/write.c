// SPDX-License-Identifier: MIT
/*
 * perf.data writer for software-source captures (see write.h).
 *
 * The file is written front to back through a small buffer: header
 * (placeholder, rewritten at the end), attrs, sample ids, data records,
 * feature sections.  Offsets are tracked as bytes are queued, so every
 * section's place is known without seeking back, except the header.
 */
#include "perfdata/write.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/strutil.h"
#include "perf/addrfilter.h"
#include "perf/pmu.h"
#include "perf/sideband.h"
#include "perfdata/format.h"

/* Flush the queue to the file once it holds this much. */
#define W_FLUSH_AT (1u << 20)

/* Sample type of both events (the PT event adds IP, as perf record
 * does); the trailer of non-sample records is TID, TIME, CPU, IDENTIFIER
 * for both. */
#define W_SAMPLE_TYPE PTD_SIDEBAND_SAMPLE_TYPE

struct writer {
	const struct ptd_capture *c;
	struct ptd_diag *diag;
	int fd;
	const char *tmp;	/* the temporary file's name, for messages */
	uint64_t off;		/* file offset of the next queued byte */
	struct ptd_buf q;	/* queued bytes, not yet written */
	uint64_t time;		/* last sample_id time handed out */
	char *absdir;		/* the capture directory, absolute */
	struct ptd_perfdata_auxtrace_index_entry *idx;
	size_t nidx;
	size_t idxcap;
	bool *exited_early;	/* per thread: EXIT written in the sideband */
	uint64_t *ptlen;	/* per thread: its PT's bytes */
	uint64_t *written;	/* its PT bytes written so far */
	uint8_t *chunk;		/* W_CHUNK bytes: PT read piece by piece */
};

/* PT is read from the capture a piece at a time (never one thread's, let
 * alone every thread's, whole). */
#define W_CHUNK (1u << 20)

static int w_flush(struct writer *w)
{
	int r;

	if (!w->q.len)
		return 0;
	r = ptd_write_all(w->fd, w->q.data, w->q.len);
	if (r < 0)
		return ptd_diagf(w->diag, r, "writing '%s': %s", w->tmp,
				 ptd_strerror(r));
	w->q.len = 0;
	return 0;
}

static int w_put(struct writer *w, const void *p, size_t n)
{
	int r = ptd_buf_append(&w->q, p, n);

	if (r < 0)
		return ptd_diagf(w->diag, r, "writing '%s': out of memory",
				 w->tmp);
	w->off += n;
	return w->q.len >= W_FLUSH_AT ? w_flush(w) : 0;
}

/* Queue zero bytes up to the next multiple of 8. */
static int w_align8(struct writer *w)
{
	static const uint8_t zero[8];

	return w->off % 8 ? w_put(w, zero, 8 - w->off % 8) : 0;
}

/* Write bytes @from..@from+@len of thread @i's PT file directly (flushing
 * the queue first), read a chunk at a time. */
static int w_put_pt(struct writer *w, size_t i, uint64_t from, uint64_t len)
{
	int fd = -1, r = w_flush(w);

	if (r >= 0)
		r = ptd_capture_open_pt(w->c, i, &fd, w->diag);
	while (r >= 0 && len) {
		size_t n = len < W_CHUNK ? (size_t)len : W_CHUNK;
		ssize_t got = pread(fd, w->chunk, n, (off_t)from);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			r = ptd_diagf(w->diag, -errno, "%s/%s: read failed: %s",
				      w->c->dir, w->c->threads[i].pt,
				      strerror(errno));
			break;
		}
		if (got == 0) {
			r = ptd_diagf(w->diag, -PTD_ECHECKSUM, "%s/%s: ends at "
				      "%" PRIu64 " while written, but the "
				      "manifest's pt_bytes says %" PRIu64,
				      w->c->dir, w->c->threads[i].pt, from,
				      w->ptlen[i]);
			break;
		}
		r = ptd_write_all(w->fd, w->chunk, (size_t)got);
		if (r < 0) {
			r = ptd_diagf(w->diag, r, "writing '%s': %s", w->tmp,
				      ptd_strerror(r));
			break;
		}
		w->off += (uint64_t)got;
		from += (uint64_t)got;
		len -= (uint64_t)got;
	}
	if (fd >= 0)
		(void)close(fd);
	return r;
}

/* The sample_id trailer of the next record: times increase in file order
 * so perf's time-ordered processing keeps the file's order. */
static struct ptd_perf_sample_id w_sid(struct writer *w, pid_t tid,
				       uint64_t id)
{
	struct ptd_perf_sample_id s;

	memset(&s, 0, sizeof(s));
	s.pid = (uint32_t)w->c->pid;
	s.tid = (uint32_t)tid;
	s.time = ++w->time;
	s.cpu = 0;
	s.id = id;
	s.identifier = id;
	return s;
}

/* Queue one encoded record; @n is the encoder's result (0: did not fit). */
static int w_record(struct writer *w, const void *rec, size_t n,
		    const char *what)
{
	if (!n)
		return ptd_diagf(w->diag, -PTD_ELIMIT,
				 "%s: a %s record does not fit in perf's 64 KiB "
				 "record size", w->c->dir, what);
	return w_put(w, rec, n);
}

/* ---- attributes ---- */

/* Set the format field @name of the PMU (or bits @lo..@lo+@width-1 of
 * config when there is no PMU or it lacks the field) to @val. */
static void set_field(const struct ptd_pt_pmu *pmu, const char *name,
		      unsigned lo, unsigned width, uint64_t val,
		      struct perf_event_attr *a)
{
	const struct ptd_pt_format *f = pmu ? ptd_pt_pmu_format(pmu, name)
					    : NULL;
	__u64 *word = &a->config;

	if (f) {
		lo = f->lo;
		width = ptd_pt_format_width(f);
		if (f->word == PTD_PT_CONFIG1)
			word = &a->config1;
		else if (f->word == PTD_PT_CONFIG2)
			word = &a->config2;
	}
	if (width < 64)
		val &= (1ull << width) - 1;
	*word |= val << lo;
}

/* psb_period as the hardware field: 2^(11+field) bytes; periods below
 * 2 KiB (the software source allows 256) are written as 0. */
static uint64_t psb_field(uint64_t bytes)
{
	uint64_t f = 0;

	if (!bytes)
		bytes = 4096;
	while (bytes > 2048 && f < 15) {
		bytes >>= 1;
		f++;
	}
	return f;
}

/* The intel_pt attr: user-only, pt + branch + the capture's options, at
 * the PMU's bit positions (defaults: the architectural ones). */
static void pt_attr(const struct ptd_capture *c, const struct ptd_pt_pmu *pmu,
		    struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->size = PTD_PERFDATA_ATTR_SIZE;
	a->type = pmu ? pmu->type : PTD_PERFDATA_PT_TYPE_DEFAULT;
	set_field(pmu, "pt", 0, 1, 1, a);
	set_field(pmu, "branch", 13, 1, 1, a);
	if (c->config.tsc)
		set_field(pmu, "tsc", 10, 1, 1, a);
	if (c->config.noretcomp)
		set_field(pmu, "noretcomp", 11, 1, 1, a);
	set_field(pmu, "psb_period", 24, 4, psb_field(c->config.psb_period), a);
	a->sample_period = 1;
	a->sample_type = PERF_SAMPLE_IP | W_SAMPLE_TYPE;
	a->sample_id_all = 1;
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
	a->disabled = 1;
	a->enable_on_exec = 1;
	a->aux_watermark = 0;
}

/* Bit mask of format field @name in attr.config (default: @width bits
 * from @lo), as perf writes the AUXTRACE_INFO *_BIT words. */
static uint64_t field_mask(const struct ptd_pt_pmu *pmu, const char *name,
			   unsigned lo, unsigned width)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	set_field(pmu, name, lo, width, ~0ull, &a);
	return a.config;
}

static int dummy_attr(struct perf_event_attr *a)
{
	int r = ptd_sideband_attr(a, false);

	if (r < 0)
		return r;
	a->size = PTD_PERFDATA_ATTR_SIZE;
	a->sample_type = W_SAMPLE_TYPE;
	a->context_switch = 0;	/* no switch records are written */
	return 0;
}

/* Attrs section (two entries) followed by their id arrays. */
static int write_attrs(struct writer *w, const struct ptd_pt_pmu *pmu,
		       struct ptd_perfdata_file_header *h)
{
	struct perf_event_attr pa, da;
	struct ptd_perfdata_file_attr fa[2];
	uint64_t ids[2] = { PTD_PERFDATA_PT_ID, PTD_PERFDATA_DUMMY_ID };
	uint64_t ids_off;
	int r;

	pt_attr(w->c, pmu, &pa);
	r = dummy_attr(&da);
	if (r < 0)
		return ptd_diagf(w->diag, r, "building the dummy event attr");
	memset(fa, 0, sizeof(fa));
	memcpy(fa[0].attr, &pa, PTD_PERFDATA_ATTR_SIZE);
	memcpy(fa[1].attr, &da, PTD_PERFDATA_ATTR_SIZE);
	h->attrs.offset = w->off;
	h->attrs.size = sizeof(fa);
	ids_off = w->off + sizeof(fa);
	for (size_t i = 0; i < 2; i++) {
		fa[i].ids.offset = ids_off + i * sizeof(uint64_t);
		fa[i].ids.size = sizeof(uint64_t);
	}
	r = w_put(w, fa, sizeof(fa));
	if (r < 0)
		return r;
	return w_put(w, ids, sizeof(ids));
}

/* ---- data records ---- */

/* Bytes of the capture's filter text as AUXTRACE_INFO carries it (with
 * its NUL, padded to 8); 0 without one, or one too long for a record. */
static size_t filter_bytes(const struct ptd_capture *c)
{
	size_t n = c->filter ? strlen(c->filter) : 0;

	if (!n || n > PTD_ADDRFILTER_TEXT_MAX)
		return 0;
	return (n + 1 + 7) & ~(size_t)7;
}

static int write_auxtrace_info(struct writer *w, const struct ptd_pt_pmu *pmu)
{
	uint64_t rec[(sizeof(struct ptd_perfdata_auxtrace_info) / 8) +
		     PTD_PERFDATA_INTEL_PT_PRIV_MAX];
	struct ptd_perfdata_auxtrace_info h;
	uint64_t *p = rec + sizeof(h) / 8;
	size_t fb = filter_bytes(w->c);
	char pad[8] = { 0 };
	int r;

	memset(rec, 0, sizeof(rec));
	memset(&h, 0, sizeof(h));
	h.header.type = PTD_PERFDATA_RECORD_AUXTRACE_INFO;
	h.header.size = (uint16_t)(sizeof(rec) + fb);
	h.type = PTD_PERFDATA_AUXTRACE_INTEL_PT;
	memcpy(rec, &h, sizeof(h));
	p[PTD_PERFDATA_INTEL_PT_PMU_TYPE] =
		pmu ? pmu->type : PTD_PERFDATA_PT_TYPE_DEFAULT;
	/* No time conversion (cap_user_time_zero 0): perf decodes each
	 * thread "timeless", when it exits, against every mapping seen. */
	p[PTD_PERFDATA_INTEL_PT_TIME_MULT] = 1;
	p[PTD_PERFDATA_INTEL_PT_TSC_BIT] = field_mask(pmu, "tsc", 10, 1);
	p[PTD_PERFDATA_INTEL_PT_NORETCOMP_BIT] =
		field_mask(pmu, "noretcomp", 11, 1);
	p[PTD_PERFDATA_INTEL_PT_MTC_BIT] = field_mask(pmu, "mtc", 9, 1);
	p[PTD_PERFDATA_INTEL_PT_MTC_FREQ_BITS] =
		field_mask(pmu, "mtc_period", 14, 4);
	p[PTD_PERFDATA_INTEL_PT_TSC_CTC_N] = 0;
	p[PTD_PERFDATA_INTEL_PT_TSC_CTC_D] = 0;
	p[PTD_PERFDATA_INTEL_PT_CYC_BIT] = field_mask(pmu, "cyc", 1, 1);
	if (pmu && pmu->has_max_nonturbo_ratio)
		p[PTD_PERFDATA_INTEL_PT_MAX_NONTURBO_RATIO] =
			pmu->max_nonturbo_ratio;
	/* The filter the trace was made with, as perf record writes its
	 * --filter text (decoders need it for erratum SKL014). */
	if (fb)
		p[PTD_PERFDATA_INTEL_PT_FILTER_STR_LEN] = strlen(w->c->filter);
	r = w_put(w, rec, sizeof(rec));
	if (r == 0 && fb)
		r = w_put(w, w->c->filter, strlen(w->c->filter));
	if (r == 0 && fb)
		r = w_put(w, pad, fb - strlen(w->c->filter));
	return r;
}

/* The last path component of argv[0], for COMM. */
static const char *comm_name(const struct ptd_capture *c)
{
	const char *a = c->argv && c->argv[0] ? c->argv[0] : "";
	const char *s = strrchr(a, '/');

	return s ? s + 1 : a;
}

static int write_comm(struct writer *w, pid_t tid, bool exec)
{
	uint8_t rec[128];
	struct ptd_perf_comm cm = { (uint32_t)w->c->pid, (uint32_t)tid, exec,
				    comm_name(w->c) };
	struct ptd_perf_sample_id s = w_sid(w, tid, PTD_PERFDATA_DUMMY_ID);

	return w_record(w, rec,
			ptd_perf_encode_comm(rec, sizeof(rec), &cm,
					     W_SAMPLE_TYPE, &s),
			"COMM");
}

/* A thread other than the leader appears: FORK from the leader, COMM. */
static int write_fork(struct writer *w, pid_t tid)
{
	uint8_t rec[128];
	struct ptd_perf_task t;
	struct ptd_perf_sample_id s = w_sid(w, tid, PTD_PERFDATA_DUMMY_ID);

	memset(&t, 0, sizeof(t));
	t.pid = t.ppid = (uint32_t)w->c->pid;
	t.tid = (uint32_t)tid;
	t.ptid = (uint32_t)w->c->pid;
	t.time = s.time;
	return w_record(w, rec,
			ptd_perf_encode_task(rec, sizeof(rec), false, &t,
					     W_SAMPLE_TYPE, &s),
			"FORK");
}

static int write_exit(struct writer *w, pid_t tid)
{
	uint8_t rec[128];
	struct ptd_perf_task t;
	struct ptd_perf_sample_id s = w_sid(w, tid, PTD_PERFDATA_DUMMY_ID);

	memset(&t, 0, sizeof(t));
	t.pid = t.ppid = (uint32_t)w->c->pid;
	t.tid = t.ptid = (uint32_t)tid;
	t.time = s.time;
	return w_record(w, rec,
			ptd_perf_encode_task(rec, sizeof(rec), true, &t,
					     W_SAMPLE_TYPE, &s),
			"EXIT");
}

static int write_itrace_start(struct writer *w, pid_t tid)
{
	uint8_t rec[64];
	struct ptd_perf_itrace_start it = { (uint32_t)w->c->pid,
					    (uint32_t)tid };
	struct ptd_perf_sample_id s = w_sid(w, tid, PTD_PERFDATA_PT_ID);

	return w_record(w, rec,
			ptd_perf_encode_itrace_start(rec, sizeof(rec), &it,
						     W_SAMPLE_TYPE, &s),
			"ITRACE_START");
}

/* PERF_RECORD_AUX: the kernel's record that @size bytes of AUX data were
 * written at @offset (no encoder in sideband.h: laid out here). */
static int write_aux(struct writer *w, pid_t tid, uint64_t offset,
		     uint64_t size)
{
	struct {
		struct perf_event_header h;
		uint64_t aux_offset, aux_size, flags;
		uint32_t pid, tid;
		uint64_t time;
		uint32_t cpu, res;
		uint64_t identifier;
	} rec;
	struct ptd_perf_sample_id s = w_sid(w, tid, PTD_PERFDATA_PT_ID);

	static_assert(sizeof(rec) == 64, "AUX record");
	memset(&rec, 0, sizeof(rec));
	rec.h.type = PERF_RECORD_AUX;
	rec.h.size = sizeof(rec);
	rec.aux_offset = offset;
	rec.aux_size = size;
	rec.pid = s.pid;
	rec.tid = s.tid;
	rec.time = s.time;
	rec.identifier = s.identifier;
	return w_put(w, &rec, sizeof(rec));
}

/* Snapshot file @file of the capture as an absolute path (malloc'd), after
 * checking it can be read.  NULL with @diag set on failure (*ret_err). */
static char *snapshot_path(struct writer *w, const struct ptd_tl_event *ev,
			   int *ret_err)
{
	char *p = NULL;
	int r;

	if (!ev->file || !*ev->file || strchr(ev->file, '/')) {
		*ret_err = ptd_diagf(w->diag, -PTD_EFORMAT,
				     "%s: timeline event %llu: bad snapshot "
				     "file name", w->c->dir,
				     (unsigned long long)ev->seq);
		return NULL;
	}
	if (asprintf(&p, "%s/%s", w->absdir, ev->file) < 0) {
		*ret_err = -ENOMEM;
		return NULL;
	}
	if (access(p, R_OK) != 0) {
		r = -errno;
		*ret_err = ptd_diagf(w->diag, r,
				     "snapshot '%s' (timeline event %llu): %s",
				     p, (unsigned long long)ev->seq,
				     ptd_strerror(r));
		free(p);
		return NULL;
	}
	return p;
}

/* One timeline event as perf can see it: MAP and SNAPSHOT become MMAP2,
 * EXEC a COMM exec; UNMAP has no perf record. */
static int write_tl_event(struct writer *w, const struct ptd_tl_event *ev)
{
	static uint8_t rec[PTD_PERF_RECORD_MAX_SIZE + 1];
	struct ptd_perf_mmap m;
	struct ptd_perf_sample_id s;
	char *snap = NULL;
	size_t n;
	int r = 0;

	if (ev->op == PTD_TL_EXEC)
		return write_comm(w, w->c->pid, true);
	if (ev->op != PTD_TL_MAP && ev->op != PTD_TL_SNAPSHOT)
		return 0;
	memset(&m, 0, sizeof(m));
	m.pid = m.tid = (uint32_t)w->c->pid;
	m.addr = ev->start;
	m.len = ev->end - ev->start;
	m.prot = PROT_READ | PROT_EXEC;
	m.flags = MAP_PRIVATE;
	if (ev->op == PTD_TL_MAP) {
		m.pgoff = ev->pgoff;
		m.filename = ev->path ? ev->path : "";
	} else {
		snap = snapshot_path(w, ev, &r);
		if (!snap)
			return r;
		m.filename = snap;
	}
	s = w_sid(w, w->c->pid, PTD_PERFDATA_DUMMY_ID);
	n = ptd_perf_encode_mmap2(rec, sizeof(rec), &m, W_SAMPLE_TYPE, &s);
	if (!n)
		r = ptd_diagf(w->diag, -PTD_ELIMIT,
			      "%s: timeline event %llu: path '%s' too long "
			      "for an MMAP2 record", w->c->dir,
			      (unsigned long long)ev->seq, m.filename);
	else
		r = w_put(w, rec, n);
	free(snap);
	return r;
}

/* Thread @i begins: FORK (not the leader), COMM, ITRACE_START. */
static int write_thread_start(struct writer *w, size_t i)
{
	pid_t tid = w->c->threads[i].tid;
	int r = 0;

	if (tid != w->c->pid) {
		r = write_fork(w, tid);
		if (r >= 0)
			r = write_comm(w, tid, false);
	}
	return r < 0 ? r : write_itrace_start(w, tid);
}

/* Whether thread @i ended before the timeline's event @seq: its EXIT goes
 * there, before a thread that takes its tid again is started. */
static bool ended_before(const struct ptd_capture *c, size_t i, uint64_t seq)
{
	return c->threads[i].has_end && c->threads[i].end_seq <= seq &&
	       c->threads[i].tid != c->pid;
}

/* Whether a later thread of the capture has thread @i's tid. */
static bool tid_again(const struct ptd_capture *c, size_t i)
{
	for (size_t j = i + 1; j < c->nthreads; j++)
		if (c->threads[j].tid == c->threads[i].tid)
			return true;
	return false;
}

/* Thread @i's PT up to byte @end not written yet: the kernel's AUX record
 * for it, then an AUXTRACE record + data (zero-padded to 8 bytes, the next
 * one starting at the unpadded end, as perf writes them), indexed for the
 * HEADER_AUXTRACE feature. */
static int write_pt_to(struct writer *w, size_t i, uint64_t end)
{
	const struct ptd_capture_thread *t = &w->c->threads[i];
	struct ptd_perfdata_auxtrace rec;
	uint64_t from = w->written[i], len;
	int r;

	if (end > w->ptlen[i])
		end = w->ptlen[i];
	if (end <= from)
		return 0;
	len = end - from;
	if (w->nidx == w->idxcap) {
		size_t cap = w->idxcap ? 2 * w->idxcap : 16;
		void *v = reallocarray(w->idx, cap, sizeof(*w->idx));

		if (!v)
			return -ENOMEM;
		w->idx = v;
		w->idxcap = cap;
	}
	memset(&rec, 0, sizeof(rec));
	rec.header.type = PTD_PERFDATA_RECORD_AUXTRACE;
	rec.header.size = sizeof(rec);
	rec.size = (len + 7) & ~(uint64_t)7;
	rec.offset = from;
	rec.reference = 0;
	rec.idx = (uint32_t)i;
	rec.tid = (uint32_t)t->tid;
	rec.cpu = UINT32_MAX;
	/* the kernel's record first, as perf record drains the data ring
	 * before the AUX area: a reader knows the payload's padding */
	r = write_aux(w, t->tid, from, len);
	if (r < 0)
		return r;
	w->idx[w->nidx].file_offset = w->off;
	w->idx[w->nidx].sz = sizeof(rec);	/* the header only, as perf */
	w->nidx++;
	r = w_put(w, &rec, sizeof(rec));
	if (r >= 0)
		r = w_put_pt(w, i, from, len);
	if (r >= 0)
		r = w_align8(w);
	if (r >= 0)
		w->written[i] = end;
	return r;
}

/* COMM exec of the leader, then the timeline.  Each thread is started
 * just before the first event it did not see (seq >= first_seq); before
 * each event, every thread's trace up to where the event happened in it
 * (the event's position for that thread), so that a reader places each
 * image change where it was in every stream (code rewritten in place
 * decodes as it was when it ran); a thread that ended before the end
 * (end_seq) has the rest of its trace and its EXIT just before the first
 * event it did not see, so that a tid the kernel gave again is a FORK
 * after the EXIT, as the kernel records it. */
static int write_sideband(struct writer *w)
{
	const struct ptd_capture *c = w->c;
	bool *started = calloc(c->nthreads ? 2 * c->nthreads : 1,
			       sizeof(*started));
	bool *exited = started + c->nthreads;
	int r = write_comm(w, c->pid, true);

	if (!started)
		return -ENOMEM;
	for (size_t e = 0; r >= 0 && e <= c->tl.n; e++) {
		uint64_t seq = e < c->tl.n ? c->tl.ev[e].seq : UINT64_MAX;

		for (size_t i = 0; r >= 0 && i < c->nthreads; i++) {
			if (!started[i] || exited[i] ||
			    !ended_before(c, i, seq) ||
			    (e == c->tl.n && !tid_again(c, i)))
				continue;
			exited[i] = true;
			r = write_pt_to(w, i, UINT64_MAX);
			if (r >= 0)
				r = write_exit(w, c->threads[i].tid);
		}
		for (size_t i = 0; r >= 0 && i < c->nthreads; i++) {
			if (started[i] || c->threads[i].first_seq > seq)
				continue;
			started[i] = true;
			r = write_thread_start(w, i);
		}
		if (e == c->tl.n)
			break;
		for (size_t i = 0; r >= 0 && i < c->nthreads; i++) {
			int64_t pos;

			if (!started[i] || exited[i] ||
			    c->threads[i].first_seq > seq)
				continue;
			pos = ptd_tl_event_pos(&c->tl.ev[e], c->threads[i].tid);
			if (pos > 0)
				r = write_pt_to(w, i, (uint64_t)pos);
		}
		if (r >= 0)
			r = write_tl_event(w, &c->tl.ev[e]);
	}
	/* the rest exit after their trace (write_data) */
	for (size_t i = 0; i < c->nthreads; i++)
		w->exited_early[i] = exited[i];
	free(started);
	return r;
}

static int write_data(struct writer *w, const struct ptd_pt_pmu *pmu)
{
	const struct ptd_capture *c = w->c;
	int r = write_auxtrace_info(w, pmu);

	/* every PT file checked before anything is written */
	for (size_t i = 0; r >= 0 && i < c->nthreads; i++) {
		int fd = -1;

		r = ptd_capture_open_pt(c, i, &fd, w->diag);
		if (fd >= 0)
			(void)close(fd);
		w->ptlen[i] = c->threads[i].pt_bytes;
	}
	if (r >= 0)
		r = write_sideband(w);
	for (size_t i = 0; r >= 0 && i < c->nthreads; i++)
		r = write_pt_to(w, i, UINT64_MAX);
	if (c->detached)
		return r;
	/* Exits: other threads first, the leader last. */
	for (size_t i = 0; r >= 0 && i < c->nthreads; i++)
		if (c->threads[i].tid != c->pid && !w->exited_early[i])
			r = write_exit(w, c->threads[i].tid);
	for (size_t i = 0; r >= 0 && i < c->nthreads; i++)
		if (c->threads[i].tid == c->pid)
			r = write_exit(w, c->threads[i].tid);
	return r;
}

/* ---- features ---- */

/* A perf header string: u32 length (NUL and padding to 64 included). */
static int put_string(struct ptd_buf *b, const char *s)
{
	static const uint8_t zero[PTD_PERFDATA_NAME_ALIGN];
	size_t n = strlen(s) + 1;
	size_t padded = (n + PTD_PERFDATA_NAME_ALIGN - 1) &
			~(size_t)(PTD_PERFDATA_NAME_ALIGN - 1);
	uint32_t len = (uint32_t)padded;
	int r;

	if ((r = ptd_buf_append(b, &len, sizeof(len))) < 0 ||
	    (r = ptd_buf_append(b, s, n)) < 0)
		return r;
	return ptd_buf_append(b, zero, padded - n);
}

/* The body of feature @feat into @b (empty: not written). */
static int feature_body(struct writer *w, unsigned feat, struct ptd_buf *b)
{
	const struct ptd_capture *c = w->c;
	char cpuid[96];

	switch (feat) {
	case PTD_PERFDATA_HEADER_ARCH:
		return put_string(b, "x86_64");
	case PTD_PERFDATA_HEADER_NRCPUS: {
		long conf = sysconf(_SC_NPROCESSORS_CONF);
		long onl = sysconf(_SC_NPROCESSORS_ONLN);
		struct ptd_perfdata_nrcpus n = {
			(uint32_t)(conf > 0 ? conf : 1),
			(uint32_t)(onl > 0 ? onl : 1),
		};
		return ptd_buf_append(b, &n, sizeof(n));
	}
	case PTD_PERFDATA_HEADER_CPUID:
		if (c->cpu.vendor != pcv_intel)
			return 0;
		(void)snprintf(cpuid, sizeof(cpuid), "GenuineIntel,%u,%u,%u",
			       (unsigned)c->cpu.family, (unsigned)c->cpu.model,
			       (unsigned)c->cpu.stepping);
		return put_string(b, cpuid);
	case PTD_PERFDATA_HEADER_AUXTRACE: {
		uint64_t nr = w->nidx;
		int r = ptd_buf_append(b, &nr, sizeof(nr));

		if (r < 0 || !nr)
			return r;
		return ptd_buf_append(b, w->idx, w->nidx * sizeof(*w->idx));
	}
	default:
		return 0;
	}
}

/* Feature sections right after the data: the table, then the bodies. */
static int write_features(struct writer *w,
			  struct ptd_perfdata_file_header *h)
{
	static const unsigned feats[] = {
		PTD_PERFDATA_HEADER_ARCH, PTD_PERFDATA_HEADER_NRCPUS,
		PTD_PERFDATA_HEADER_CPUID, PTD_PERFDATA_HEADER_AUXTRACE,
	};
	struct ptd_buf body[PTD_ARRAY_SIZE(feats)];
	struct ptd_perfdata_section sec[PTD_ARRAY_SIZE(feats)];
	size_t n = 0;
	uint64_t off;
	int r = 0;

	memset(body, 0, sizeof(body));
	for (size_t i = 0; r >= 0 && i < PTD_ARRAY_SIZE(feats); i++) {
		r = feature_body(w, feats[i], &body[n]);
		if (r >= 0 && body[n].len) {
			ptd_perfdata_feat_set(h->features, feats[i]);
			n++;
		}
	}
	off = w->off + n * sizeof(sec[0]);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		sec[i].offset = off;
		sec[i].size = body[i].len;
		off += body[i].len;
	}
	if (r >= 0 && n)
		r = w_put(w, sec, n * sizeof(sec[0]));
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = w_put(w, body[i].data, body[i].len);
	for (size_t i = 0; i < PTD_ARRAY_SIZE(feats); i++)
		ptd_buf_fini(&body[i]);
	if (r == -ENOMEM)
		return ptd_diagf(w->diag, r, "building features: out of memory");
	return r;
}

/* ---- the whole file ---- */

static int write_file(struct writer *w)
{
	struct ptd_perfdata_file_header h;
	struct ptd_pt_pmu pmu_buf;
	const struct ptd_pt_pmu *pmu = NULL;
	int r;

	/* A real intel_pt PMU gives the type and bit positions; absent or
	 * unreadable, the defaults are used (the file stays decodable). */
	if (ptd_pt_pmu_probe(PTD_PT_PMU_DEFAULT_DIR, &pmu_buf, NULL) == 0)
		pmu = &pmu_buf;

	memset(&h, 0, sizeof(h));
	h.magic = PTD_PERFDATA_MAGIC;
	h.size = sizeof(h);
	h.attr_size = sizeof(struct ptd_perfdata_file_attr);
	r = w_put(w, &h, sizeof(h));
	if (r >= 0)
		r = write_attrs(w, pmu, &h);
	if (r < 0)
		return r;
	h.data.offset = w->off;
	r = write_data(w, pmu);
	if (r < 0)
		return r;
	h.data.size = w->off - h.data.offset;
	r = write_features(w, &h);
	if (r >= 0)
		r = w_flush(w);
	if (r < 0)
		return r;
	if (pwrite(w->fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
		r = -errno;
		if (!r)
			r = -EIO;
		return ptd_diagf(w->diag, r, "writing '%s': %s", w->tmp,
				 ptd_strerror(r));
	}
	return 0;
}

/* Create the temporary file "@path.XXXXXX" next to @path. */
static int open_tmp(const char *path, char **ret_tmp, int *ret_fd,
		    struct ptd_diag *diag)
{
	char *tmp = NULL;
	int fd, r;

	if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
		return -ENOMEM;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		ptd_diagf(diag, r, "cannot create a temporary file for '%s': %s",
			  path, ptd_strerror(r));
		free(tmp);
		return r;
	}
	*ret_tmp = tmp;
	*ret_fd = fd;
	return 0;
}

int ptd_perfdata_write_capture(const struct ptd_capture *c, const char *path,
			       struct ptd_diag *diag)
{
	struct writer w;
	char *tmp = NULL;
	int fd = -1, r;

	if (!c || !path || !*path || !c->nthreads || !c->dir)
		return ptd_diagf(diag, -EINVAL, "no capture or no path");
	memset(&w, 0, sizeof(w));
	w.c = c;
	w.diag = diag;
	w.absdir = realpath(c->dir, NULL);
	if (!w.absdir) {
		r = -errno;
		return ptd_diagf(diag, r, "capture directory '%s': %s", c->dir,
				 ptd_strerror(r));
	}
	w.exited_early = calloc(c->nthreads, sizeof(*w.exited_early));
	w.ptlen = calloc(c->nthreads, sizeof(*w.ptlen));
	w.chunk = malloc(W_CHUNK);
	w.written = calloc(c->nthreads, sizeof(*w.written));
	r = w.exited_early && w.ptlen && w.written && w.chunk
		    ? open_tmp(path, &tmp, &fd, diag)
		    : -ENOMEM;
	if (r < 0)
		goto out;
	w.fd = fd;
	w.tmp = tmp;
	r = write_file(&w);
	if (r >= 0 && fsync(fd) != 0)
		r = ptd_diagf(diag, -errno, "syncing '%s': %s", tmp,
			      strerror(errno));
	if (r >= 0 && rename(tmp, path) != 0)
		r = ptd_diagf(diag, -errno, "renaming '%s' to '%s': %s", tmp,
			      path, strerror(errno));
	if (r < 0)
		(void)unlink(tmp);
out:
	if (fd >= 0)
		(void)close(fd);
	if (r == -ENOMEM && diag && !diag->msg[0])
		ptd_diagf(diag, r, "writing '%s': out of memory", path);
	ptd_buf_fini(&w.q);
	free(w.idx);
	free(w.exited_early);
	free(w.chunk);
	free(w.ptlen);
	free(w.written);
	free(w.absdir);
	free(tmp);
	return r < 0 ? r : 0;
}
