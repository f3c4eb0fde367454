/* SPDX-License-Identifier: MIT */
#include "perf/sideband.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/strutil.h"

/* ---- bounds-checked reading of one record ---------------------------- */

/* Reads fields of one record: [pos, end) is what is left to read.  Every
 * read checks the bound first; no pointer arithmetic past end happens. */
struct rd {
	const uint8_t *p;
	size_t pos;
	size_t end;
};

static bool rd_u32(struct rd *r, uint32_t *v)
{
	if (r->end - r->pos < sizeof(*v))
		return false;
	memcpy(v, r->p + r->pos, sizeof(*v));
	r->pos += sizeof(*v);
	return true;
}

static bool rd_u64(struct rd *r, uint64_t *v)
{
	if (r->end - r->pos < sizeof(*v))
		return false;
	memcpy(v, r->p + r->pos, sizeof(*v));
	r->pos += sizeof(*v);
	return true;
}

static bool rd_bytes(struct rd *r, void *v, size_t n)
{
	if (r->end - r->pos < n)
		return false;
	memcpy(v, r->p + r->pos, n);
	r->pos += n;
	return true;
}

/* A NUL-terminated string in the next @space bytes (the rest of the body
 * if @space is 0).  Consumes the whole space. */
static bool rd_str(struct rd *r, size_t space, const char **v)
{
	const uint8_t *nul;

	if (space == 0)
		space = r->end - r->pos;
	if (space == 0 || r->end - r->pos < space)
		return false;
	nul = memchr(r->p + r->pos, '\0', space);
	if (!nul)
		return false;
	*v = (const char *)(r->p + r->pos);
	r->pos += space;
	return true;
}

/* ---- names and sizes -------------------------------------------------- */

const char *ptd_perf_record_name(uint32_t type)
{
	switch (type) {
	case PERF_RECORD_MMAP:
		return "MMAP";
	case PERF_RECORD_MMAP2:
		return "MMAP2";
	case PERF_RECORD_COMM:
		return "COMM";
	case PERF_RECORD_FORK:
		return "FORK";
	case PERF_RECORD_EXIT:
		return "EXIT";
	case PERF_RECORD_SWITCH:
		return "SWITCH";
	case PERF_RECORD_SWITCH_CPU_WIDE:
		return "SWITCH_CPU_WIDE";
	case PERF_RECORD_ITRACE_START:
		return "ITRACE_START";
	case PERF_RECORD_AUX:
		return "AUX";
	case PERF_RECORD_LOST:
		return "LOST";
	case PERF_RECORD_LOST_SAMPLES:
		return "LOST_SAMPLES";
	case PERF_RECORD_TEXT_POKE:
		return "TEXT_POKE";
	case PTD_PERF_RECORD_CODE:
		return "ptd CODE";
	case PTD_PERF_RECORD_UNMAP:
		return "ptd UNMAP";
	default:
		return "unknown";
	}
}

static bool type_known(uint32_t type)
{
	return strcmp(ptd_perf_record_name(type), "unknown") != 0;
}

size_t ptd_perf_sample_id_size(uint64_t st)
{
	size_t n = 0;

	if (st & PERF_SAMPLE_TID)
		n += 8;
	if (st & PERF_SAMPLE_TIME)
		n += 8;
	if (st & PERF_SAMPLE_ID)
		n += 8;
	if (st & PERF_SAMPLE_STREAM_ID)
		n += 8;
	if (st & PERF_SAMPLE_CPU)
		n += 8;
	if (st & PERF_SAMPLE_IDENTIFIER)
		n += 8;
	return n;
}

/* ---- parser ------------------------------------------------------------ */

/* Refuse with "perf record TYPE (type N, S bytes): what". */
static int bad(struct ptd_diag *diag, const struct ptd_perf_event *ev,
	       const char *what)
{
	return ptd_diagf(diag, -PTD_EFORMAT, "perf record %s (type %" PRIu32
			 ", %u bytes): %s", ptd_perf_record_name(ev->type),
			 ev->type, (unsigned)ev->size, what);
}

/* The trailer: struct sample_id in the kernel's field order. */
static void parse_sample_id(struct rd *r, uint64_t st,
			    struct ptd_perf_sample_id *sid)
{
	uint32_t res;

	/* The caller checked the trailer fits: no read below can fail. */
	if (st & PERF_SAMPLE_TID) {
		(void)rd_u32(r, &sid->pid);
		(void)rd_u32(r, &sid->tid);
		sid->mask |= PTD_PERF_SID_TID;
	}
	if (st & PERF_SAMPLE_TIME) {
		(void)rd_u64(r, &sid->time);
		sid->mask |= PTD_PERF_SID_TIME;
	}
	if (st & PERF_SAMPLE_ID) {
		(void)rd_u64(r, &sid->id);
		sid->mask |= PTD_PERF_SID_ID;
	}
	if (st & PERF_SAMPLE_STREAM_ID) {
		(void)rd_u64(r, &sid->stream_id);
		sid->mask |= PTD_PERF_SID_STREAM_ID;
	}
	if (st & PERF_SAMPLE_CPU) {
		(void)rd_u32(r, &sid->cpu);
		(void)rd_u32(r, &res);
		sid->mask |= PTD_PERF_SID_CPU;
	}
	if (st & PERF_SAMPLE_IDENTIFIER) {
		(void)rd_u64(r, &sid->identifier);
		sid->mask |= PTD_PERF_SID_IDENTIFIER;
	}
}

static int parse_mmap(struct rd *r, struct ptd_perf_event *ev,
		      struct ptd_diag *diag)
{
	struct ptd_perf_mmap *m = &ev->u.mmap;

	if (!rd_u32(r, &m->pid) || !rd_u32(r, &m->tid) ||
	    !rd_u64(r, &m->addr) || !rd_u64(r, &m->len) ||
	    !rd_u64(r, &m->pgoff))
		return bad(diag, ev, "too short for pid, tid, addr, len, pgoff");
	m->exec = !(ev->misc & PERF_RECORD_MISC_MMAP_DATA);
	if (!rd_str(r, 0, &m->filename))
		return bad(diag, ev, "filename is not NUL-terminated inside "
			   "the record");
	return 0;
}

static int parse_mmap2(struct rd *r, struct ptd_perf_event *ev,
		       struct ptd_diag *diag)
{
	struct ptd_perf_mmap *m = &ev->u.mmap;
	uint8_t res[3];

	if (!rd_u32(r, &m->pid) || !rd_u32(r, &m->tid) ||
	    !rd_u64(r, &m->addr) || !rd_u64(r, &m->len) ||
	    !rd_u64(r, &m->pgoff))
		return bad(diag, ev, "too short for pid, tid, addr, len, pgoff");
	if (ev->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
		m->has_build_id = true;
		if (!rd_bytes(r, &m->build_id_size, 1) ||
		    !rd_bytes(r, res, 3) ||
		    !rd_bytes(r, m->build_id, sizeof(m->build_id)))
			return bad(diag, ev, "too short for the build id");
		if (m->build_id_size > sizeof(m->build_id))
			return bad(diag, ev, "build_id_size is larger than 20");
	} else if (!rd_u32(r, &m->maj) || !rd_u32(r, &m->min) ||
		   !rd_u64(r, &m->ino) || !rd_u64(r, &m->ino_generation)) {
		return bad(diag, ev, "too short for maj, min, ino, "
			   "ino_generation");
	}
	if (!rd_u32(r, &m->prot) || !rd_u32(r, &m->flags))
		return bad(diag, ev, "too short for prot, flags");
	m->exec = (m->prot & PROT_EXEC) != 0;
	if (!rd_str(r, 0, &m->filename))
		return bad(diag, ev, "filename is not NUL-terminated inside "
			   "the record");
	return 0;
}

static int parse_comm(struct rd *r, struct ptd_perf_event *ev,
		      struct ptd_diag *diag)
{
	struct ptd_perf_comm *c = &ev->u.comm;

	if (!rd_u32(r, &c->pid) || !rd_u32(r, &c->tid))
		return bad(diag, ev, "too short for pid, tid");
	c->exec = (ev->misc & PERF_RECORD_MISC_COMM_EXEC) != 0;
	if (!rd_str(r, 0, &c->comm))
		return bad(diag, ev, "comm is not NUL-terminated inside the "
			   "record");
	return 0;
}

static int parse_task(struct rd *r, struct ptd_perf_event *ev,
		      struct ptd_diag *diag)
{
	struct ptd_perf_task *t = &ev->u.task;

	if (!rd_u32(r, &t->pid) || !rd_u32(r, &t->ppid) ||
	    !rd_u32(r, &t->tid) || !rd_u32(r, &t->ptid) ||
	    !rd_u64(r, &t->time))
		return bad(diag, ev, "too short for pid, ppid, tid, ptid, time");
	return 0;
}

static int parse_switch(struct rd *r, struct ptd_perf_event *ev,
			struct ptd_diag *diag)
{
	struct ptd_perf_switch *s = &ev->u.sw;

	s->out = (ev->misc & PERF_RECORD_MISC_SWITCH_OUT) != 0;
	s->preempt = (ev->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0;
	if (ev->type != PERF_RECORD_SWITCH_CPU_WIDE)
		return 0;
	s->cpu_wide = true;
	if (!rd_u32(r, &s->next_prev_pid) || !rd_u32(r, &s->next_prev_tid))
		return bad(diag, ev, "too short for next_prev_pid, "
			   "next_prev_tid");
	return 0;
}

static int parse_code(struct rd *r, struct ptd_perf_event *ev,
		      struct ptd_diag *diag)
{
	struct ptd_perf_code *c = &ev->u.code;
	uint32_t name_size;
	size_t padded;

	if (!rd_u32(r, &c->pid) || !rd_u32(r, &c->tid) ||
	    !rd_u64(r, &c->vaddr) || !rd_u64(r, &c->len) ||
	    !rd_u64(r, &c->offset) || !rd_u32(r, &c->size) ||
	    !rd_u32(r, &name_size))
		return bad(diag, ev, "too short for its fixed fields");
	if (name_size == 0 || name_size % 8 != 0)
		return bad(diag, ev, "name_size is not a non-zero multiple "
			   "of 8");
	if (!rd_str(r, name_size, &c->name))
		return bad(diag, ev, "name is not NUL-terminated inside "
			   "name_size bytes in the record");
	if (c->size == 0)
		return bad(diag, ev, "chunk size is 0");
	padded = ((size_t)c->size + 7) & ~(size_t)7;
	if (r->end - r->pos < padded)
		return bad(diag, ev, "chunk bytes run past the record end");
	c->bytes = r->p + r->pos;
	r->pos += padded;
	if (c->offset > c->len || c->len - c->offset < c->size)
		return bad(diag, ev, "chunk offset + size is past the mapping "
			   "length");
	if (c->vaddr + c->len < c->vaddr)
		return bad(diag, ev, "vaddr + len overflows");
	return 0;
}

static int parse_text_poke(struct rd *r, struct ptd_perf_event *ev,
			   struct ptd_diag *diag)
{
	struct ptd_perf_text_poke *t = &ev->u.poke;
	uint8_t lens[4];

	if (!rd_u64(r, &t->addr) || !rd_bytes(r, lens, sizeof(lens)))
		return bad(diag, ev, "too short for addr, old_len, new_len");
	t->old_len = (uint16_t)(lens[0] | lens[1] << 8);
	t->new_len = (uint16_t)(lens[2] | lens[3] << 8);
	if (r->end - r->pos < (size_t)t->old_len + t->new_len)
		return bad(diag, ev, "old and new bytes run past the record "
			   "end");
	t->old_bytes = r->p + r->pos;
	t->new_bytes = t->old_bytes + t->old_len;
	r->pos += (size_t)t->old_len + t->new_len;
	if (t->addr + t->new_len < t->addr)
		return bad(diag, ev, "addr + new_len overflows");
	return 0;
}

static int parse_body(struct rd *r, struct ptd_perf_event *ev,
		      struct ptd_diag *diag)
{
	switch (ev->type) {
	case PERF_RECORD_MMAP:
		return parse_mmap(r, ev, diag);
	case PERF_RECORD_MMAP2:
		return parse_mmap2(r, ev, diag);
	case PERF_RECORD_COMM:
		return parse_comm(r, ev, diag);
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		return parse_task(r, ev, diag);
	case PERF_RECORD_SWITCH:
	case PERF_RECORD_SWITCH_CPU_WIDE:
		return parse_switch(r, ev, diag);
	case PERF_RECORD_ITRACE_START:
		if (!rd_u32(r, &ev->u.itrace.pid) ||
		    !rd_u32(r, &ev->u.itrace.tid))
			return bad(diag, ev, "too short for pid, tid");
		return 0;
	case PERF_RECORD_AUX:
		if (!rd_u64(r, &ev->u.aux.aux_offset) ||
		    !rd_u64(r, &ev->u.aux.aux_size) ||
		    !rd_u64(r, &ev->u.aux.flags))
			return bad(diag, ev, "too short for aux_offset, "
				   "aux_size, flags");
		return 0;
	case PERF_RECORD_LOST:
		if (!rd_u64(r, &ev->u.lost.id) || !rd_u64(r, &ev->u.lost.lost))
			return bad(diag, ev, "too short for id, lost");
		return 0;
	case PERF_RECORD_LOST_SAMPLES:
		if (!rd_u64(r, &ev->u.lost.lost))
			return bad(diag, ev, "too short for lost");
		return 0;
	case PERF_RECORD_TEXT_POKE:
		return parse_text_poke(r, ev, diag);
	case PTD_PERF_RECORD_CODE:
		return parse_code(r, ev, diag);
	case PTD_PERF_RECORD_UNMAP:
		if (!rd_u32(r, &ev->u.unmap.pid) ||
		    !rd_u32(r, &ev->u.unmap.tid) ||
		    !rd_u64(r, &ev->u.unmap.start) ||
		    !rd_u64(r, &ev->u.unmap.end))
			return bad(diag, ev, "too short for pid, tid, start, "
				   "end");
		if (ev->u.unmap.start >= ev->u.unmap.end)
			return bad(diag, ev, "start is not below end");
		return 0;
	default:
		return 0;
	}
}

int ptd_perf_event_parse(const struct perf_event_header *hdr,
			 uint64_t sample_type, bool sample_id_all,
			 struct ptd_perf_event *ret, struct ptd_diag *diag)
{
	struct ptd_perf_event ev;
	struct rd r;
	size_t tsz = 0;
	int err;

	if (!hdr || !ret)
		return -EINVAL;
	memset(&ev, 0, sizeof(ev));
	ev.type = hdr->type;
	ev.misc = hdr->misc;
	ev.size = hdr->size;
	if (hdr->size < sizeof(*hdr))
		return bad(diag, &ev, "size is below the 8-byte header");
	if (!type_known(hdr->type)) {
		ev.other = true;
		*ret = ev;
		return 0;
	}
	r.p = (const uint8_t *)hdr;
	r.end = hdr->size;
	/* The trailer sits at the very end (the body before it may be
	 * padded), so it is found from the end, as perf does. */
	if (sample_id_all) {
		tsz = ptd_perf_sample_id_size(sample_type);
		if (tsz > (size_t)hdr->size - sizeof(*hdr))
			return bad(diag, &ev, "too short for its sample_id "
				   "trailer");
		r.pos = hdr->size - tsz;
		parse_sample_id(&r, sample_type, &ev.sid);
	}
	r.pos = sizeof(*hdr);
	r.end = hdr->size - tsz;
	err = parse_body(&r, &ev, diag);
	if (err < 0)
		return err;
	*ret = ev;
	return 0;
}

/* ---- encoders ------------------------------------------------------------ */

/* Writes a record whose size was computed and checked up front. */
struct wr {
	uint8_t *p;
	size_t pos;
};

static void wr_bytes(struct wr *w, const void *v, size_t n)
{
	memcpy(w->p + w->pos, v, n);
	w->pos += n;
}

static void wr_u32(struct wr *w, uint32_t v)
{
	wr_bytes(w, &v, sizeof(v));
}

static void wr_u64(struct wr *w, uint64_t v)
{
	wr_bytes(w, &v, sizeof(v));
}

/* @n bytes of @s (which may be shorter: zero fill) padded to @space. */
static void wr_padded(struct wr *w, const void *s, size_t n, size_t space)
{
	memset(w->p + w->pos, 0, space);
	memcpy(w->p + w->pos, s, n);
	w->pos += space;
}

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* Start a record of @size bytes; false if it does not fit. */
static bool wr_begin(struct wr *w, void *buf, size_t cap, size_t size,
		     uint32_t type, uint16_t misc)
{
	struct perf_event_header h = { .type = type, .misc = misc };

	if (!buf || size > cap || size > PTD_PERF_RECORD_MAX_SIZE)
		return false;
	h.size = (uint16_t)size;
	w->p = buf;
	w->pos = 0;
	wr_bytes(w, &h, sizeof(h));
	return true;
}

static void wr_sample_id(struct wr *w, uint64_t st,
			 const struct ptd_perf_sample_id *sid)
{
	static const struct ptd_perf_sample_id zero;

	if (!sid)
		sid = &zero;
	if (st & PERF_SAMPLE_TID) {
		wr_u32(w, sid->pid);
		wr_u32(w, sid->tid);
	}
	if (st & PERF_SAMPLE_TIME)
		wr_u64(w, sid->time);
	if (st & PERF_SAMPLE_ID)
		wr_u64(w, sid->id);
	if (st & PERF_SAMPLE_STREAM_ID)
		wr_u64(w, sid->stream_id);
	if (st & PERF_SAMPLE_CPU) {
		wr_u32(w, sid->cpu);
		wr_u32(w, 0);
	}
	if (st & PERF_SAMPLE_IDENTIFIER)
		wr_u64(w, sid->identifier);
}

size_t ptd_perf_encode_mmap2(void *buf, size_t cap,
			     const struct ptd_perf_mmap *m,
			     uint64_t sample_type,
			     const struct ptd_perf_sample_id *sid)
{
	uint16_t misc = PERF_RECORD_MISC_USER;
	size_t flen, size;
	struct wr w;

	if (!m || !m->filename ||
	    (m->has_build_id && m->build_id_size > sizeof(m->build_id)))
		return 0;
	flen = strnlen(m->filename, PTD_PERF_RECORD_MAX_SIZE);
	/* The kernel: size = round_up(strlen(name) + 1, sizeof(u64)). */
	size = sizeof(struct perf_event_header) + 2 * 4 + 3 * 8 + 24 + 2 * 4 +
	       pad8(flen + 1) + ptd_perf_sample_id_size(sample_type);
	if (!(m->prot & PROT_EXEC))
		misc |= PERF_RECORD_MISC_MMAP_DATA;
	if (m->has_build_id)
		misc |= PERF_RECORD_MISC_MMAP_BUILD_ID;
	if (!wr_begin(&w, buf, cap, size, PERF_RECORD_MMAP2, misc))
		return 0;
	wr_u32(&w, m->pid);
	wr_u32(&w, m->tid);
	wr_u64(&w, m->addr);
	wr_u64(&w, m->len);
	wr_u64(&w, m->pgoff);
	if (m->has_build_id) {
		uint8_t head[4] = { m->build_id_size, 0, 0, 0 };

		wr_bytes(&w, head, sizeof(head));
		wr_padded(&w, m->build_id, m->build_id_size,
			  sizeof(m->build_id));
	} else {
		wr_u32(&w, m->maj);
		wr_u32(&w, m->min);
		wr_u64(&w, m->ino);
		wr_u64(&w, m->ino_generation);
	}
	wr_u32(&w, m->prot);
	wr_u32(&w, m->flags);
	wr_padded(&w, m->filename, flen, pad8(flen + 1));
	wr_sample_id(&w, sample_type, sid);
	return size;
}

/* TASK_COMM_LEN - 1: what the kernel's comm can hold. */
#define COMM_MAX 15u

size_t ptd_perf_encode_comm(void *buf, size_t cap,
			    const struct ptd_perf_comm *c,
			    uint64_t sample_type,
			    const struct ptd_perf_sample_id *sid)
{
	size_t clen, size;
	struct wr w;

	if (!c || !c->comm)
		return 0;
	clen = strnlen(c->comm, COMM_MAX);
	size = sizeof(struct perf_event_header) + 2 * 4 + pad8(clen + 1) +
	       ptd_perf_sample_id_size(sample_type);
	if (!wr_begin(&w, buf, cap, size, PERF_RECORD_COMM,
		      c->exec ? PERF_RECORD_MISC_COMM_EXEC : 0))
		return 0;
	wr_u32(&w, c->pid);
	wr_u32(&w, c->tid);
	wr_padded(&w, c->comm, clen, pad8(clen + 1));
	wr_sample_id(&w, sample_type, sid);
	return size;
}

size_t ptd_perf_encode_task(void *buf, size_t cap, bool exit,
			    const struct ptd_perf_task *t,
			    uint64_t sample_type,
			    const struct ptd_perf_sample_id *sid)
{
	size_t size = sizeof(struct perf_event_header) + 4 * 4 + 8 +
		      ptd_perf_sample_id_size(sample_type);
	struct wr w;

	if (!t || !wr_begin(&w, buf, cap, size,
			    exit ? PERF_RECORD_EXIT : PERF_RECORD_FORK, 0))
		return 0;
	wr_u32(&w, t->pid);
	wr_u32(&w, t->ppid);
	wr_u32(&w, t->tid);
	wr_u32(&w, t->ptid);
	wr_u64(&w, t->time);
	wr_sample_id(&w, sample_type, sid);
	return size;
}

size_t ptd_perf_encode_itrace_start(void *buf, size_t cap,
				    const struct ptd_perf_itrace_start *it,
				    uint64_t sample_type,
				    const struct ptd_perf_sample_id *sid)
{
	size_t size = sizeof(struct perf_event_header) + 2 * 4 +
		      ptd_perf_sample_id_size(sample_type);
	struct wr w;

	if (!it || !wr_begin(&w, buf, cap, size, PERF_RECORD_ITRACE_START, 0))
		return 0;
	wr_u32(&w, it->pid);
	wr_u32(&w, it->tid);
	wr_sample_id(&w, sample_type, sid);
	return size;
}

size_t ptd_perf_encode_switch(void *buf, size_t cap,
			      const struct ptd_perf_switch *sw,
			      uint64_t sample_type,
			      const struct ptd_perf_sample_id *sid)
{
	size_t size = sizeof(struct perf_event_header) +
		      (sw && sw->cpu_wide ? 2 * 4 : 0) +
		      ptd_perf_sample_id_size(sample_type);
	uint16_t misc = 0;
	struct wr w;

	if (sw && sw->out)
		misc = PERF_RECORD_MISC_SWITCH_OUT |
		       (sw->preempt ? PERF_RECORD_MISC_SWITCH_OUT_PREEMPT : 0);
	if (!sw || !wr_begin(&w, buf, cap, size,
			     sw->cpu_wide ? PERF_RECORD_SWITCH_CPU_WIDE
					  : PERF_RECORD_SWITCH,
			     misc))
		return 0;
	if (sw->cpu_wide) {
		wr_u32(&w, sw->next_prev_pid);
		wr_u32(&w, sw->next_prev_tid);
	}
	wr_sample_id(&w, sample_type, sid);
	return size;
}

/* Bytes of a CODE record before its name. */
#define CODE_FIXED (sizeof(struct perf_event_header) + 2 * 4 + 3 * 8 + 2 * 4)

uint32_t ptd_perf_code_chunk_max(const char *name, uint64_t sample_type)
{
	size_t nlen = name ? strnlen(name, PTD_PERF_RECORD_MAX_SIZE) : 0;
	size_t used = CODE_FIXED + pad8(nlen + 1) +
		      ptd_perf_sample_id_size(sample_type);

	if (used >= PTD_PERF_RECORD_MAX_SIZE)
		return 0;
	return (uint32_t)((PTD_PERF_RECORD_MAX_SIZE - used) & ~(size_t)7);
}

size_t ptd_perf_encode_code(void *buf, size_t cap,
			    const struct ptd_perf_code *c,
			    uint64_t sample_type,
			    const struct ptd_perf_sample_id *sid)
{
	size_t nlen, size;
	struct wr w;

	if (!c || !c->name || !c->bytes || c->size == 0 ||
	    c->offset > c->len || c->len - c->offset < c->size ||
	    c->size > PTD_PERF_RECORD_MAX_SIZE)
		return 0;
	nlen = strnlen(c->name, PTD_PERF_RECORD_MAX_SIZE);
	size = CODE_FIXED + pad8(nlen + 1) + pad8(c->size) +
	       ptd_perf_sample_id_size(sample_type);
	if (!wr_begin(&w, buf, cap, size, PTD_PERF_RECORD_CODE, 0))
		return 0;
	wr_u32(&w, c->pid);
	wr_u32(&w, c->tid);
	wr_u64(&w, c->vaddr);
	wr_u64(&w, c->len);
	wr_u64(&w, c->offset);
	wr_u32(&w, c->size);
	wr_u32(&w, (uint32_t)pad8(nlen + 1));
	wr_padded(&w, c->name, nlen, pad8(nlen + 1));
	wr_padded(&w, c->bytes, c->size, pad8(c->size));
	wr_sample_id(&w, sample_type, sid);
	return size;
}

size_t ptd_perf_encode_unmap(void *buf, size_t cap,
			     const struct ptd_perf_unmap *u,
			     uint64_t sample_type,
			     const struct ptd_perf_sample_id *sid)
{
	size_t size = sizeof(struct perf_event_header) + 2 * 4 + 2 * 8 +
		      ptd_perf_sample_id_size(sample_type);
	struct wr w;

	if (!u || u->start >= u->end ||
	    !wr_begin(&w, buf, cap, size, PTD_PERF_RECORD_UNMAP, 0))
		return 0;
	wr_u32(&w, u->pid);
	wr_u32(&w, u->tid);
	wr_u64(&w, u->start);
	wr_u64(&w, u->end);
	wr_sample_id(&w, sample_type, sid);
	return size;
}

/* ---- sideband to image changes ----------------------------------------- */

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Whether the kernel's name for a mapping is a file ptd can open.  The
 * kernel writes "//anon" for anonymous memory, "//toolong" when d_path
 * fails, "[vdso]"/"[heap]"/... for special mappings, and appends
 * " (deleted)" to unlinked files (memfd and SysV shm included). */
static bool is_file_name(const char *name)
{
	return name[0] == '/' && name[1] != '/' &&
	       strncmp(name, "/memfd:", 7) != 0 &&
	       !ends_with(name, " (deleted)");
}

static int mmap_to_tl(const struct ptd_perf_event *e, struct ptd_tl_event *ret,
		      struct ptd_diag *diag)
{
	const struct ptd_perf_mmap *m = &e->u.mmap;
	struct ptd_tl_event t = { 0 };

	if (!m->exec)
		return 0;
	if (m->len == 0 || m->addr + m->len < m->addr)
		return ptd_diagf(diag, -PTD_EFORMAT, "perf record %s of '%s': "
				 "bad range 0x%" PRIx64 " + 0x%" PRIx64,
				 ptd_perf_record_name(e->type), m->filename,
				 m->addr, m->len);
	t.start = m->addr;
	t.end = m->addr + m->len;
	if (is_file_name(m->filename)) {
		t.op = PTD_TL_MAP;
		t.pgoff = m->pgoff;
		t.path = (char *)m->filename;
		/* which file it is (MMAP2 without a build id; MMAP: none) */
		if (e->type == PERF_RECORD_MMAP2 && !m->has_build_id) {
			t.id.dev_major = m->maj;
			t.id.dev_minor = m->min;
			t.id.ino = m->ino;
		}
		*ret = t;
		return 1;
	}
	t.op = PTD_TL_SNAPSHOT;
	t.name = (char *)m->filename;
	*ret = t;
	return PTD_PERF_TL_NONFILE;
}

int ptd_perf_event_to_tl(const struct ptd_perf_event *e,
			 struct ptd_tl_event *ret, struct ptd_diag *diag)
{
	struct ptd_tl_event t = { 0 };

	if (!e || !ret)
		return -EINVAL;
	if (e->other)
		return 0;
	switch (e->type) {
	case PERF_RECORD_MMAP:
	case PERF_RECORD_MMAP2:
		return mmap_to_tl(e, ret, diag);
	case PERF_RECORD_COMM:
		if (!e->u.comm.exec)
			return 0;
		t.op = PTD_TL_EXEC;
		t.path = (char *)e->u.comm.comm;
		*ret = t;
		return 1;
	case PTD_PERF_RECORD_UNMAP:
		t.op = PTD_TL_UNMAP;
		t.start = e->u.unmap.start;
		t.end = e->u.unmap.end;
		*ret = t;
		return 1;
	default:
		return 0;
	}
}

/* ---- the real dummy sideband event --------------------------------------- */

int ptd_sideband_attr(struct perf_event_attr *ret, bool cpu_wide)
{
	struct perf_event_attr a;

	if (!ret)
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	/* As perf's dummy: a sampling event that never samples. */
	a.sample_period = 1;
	a.sample_type = PTD_SIDEBAND_SAMPLE_TYPE;
	a.sample_id_all = 1;
	a.mmap = 1;
	a.mmap2 = 1;
	a.comm = 1;
	a.comm_exec = 1;
	a.task = 1;
	a.context_switch = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	a.disabled = 1;
	/* The kernel maps an inherited event's ring only per CPU. */
	a.inherit = cpu_wide ? 1 : 0;
	/* Sideband is sparse: wake the reader per page, not per record. */
	a.watermark = 1;
	a.wakeup_watermark = PTD_SIDEBAND_WAKEUP_BYTES;
	*ret = a;
	return 0;
}

static int open_error(int err, pid_t pid, int cpu, struct ptd_diag *diag)
{
	const char *why;

	switch (-err) {
	case EACCES:
	case EPERM:
		why = "not allowed: lower /proc/sys/kernel/perf_event_paranoid "
		      "or give ptd CAP_PERFMON (or CAP_SYS_ADMIN)";
		break;
	case ESRCH:
		why = "no such process";
		break;
	case ENOENT:
	case ENODEV:
	case EOPNOTSUPP:
		why = "this kernel or CPU has no perf software events";
		break;
	default:
		why = ptd_strerror(err);
		break;
	}
	return ptd_diagf(diag, err, "failed to open the sideband event for pid "
			 "%d on cpu #%d: %s", (int)pid, cpu, why);
}

int ptd_sideband_open(pid_t pid, int cpu, bool inherit, int *ret_fd,
		      struct ptd_diag *diag)
{
	struct perf_event_attr attr;
	long fd;

	if (!ret_fd)
		return -EINVAL;
	if (cpu == -1 && inherit)
		return ptd_diagf(diag, -EINVAL, "sideband event for pid %d: "
				 "the kernel refuses to mmap the ring of an "
				 "inherited per-thread event (cpu -1 with "
				 "inherit); open one inherited event per CPU "
				 "instead", (int)pid);
	if (pid == -1 && cpu == -1)
		return ptd_diagf(diag, -EINVAL, "sideband event: pid -1 (every "
				 "task) needs a CPU, not cpu -1");
	if (cpu < -1 || pid < -1)
		return ptd_diagf(diag, -EINVAL, "sideband event: bad pid %d or "
				 "cpu %d", (int)pid, cpu);
	(void)ptd_sideband_attr(&attr, cpu >= 0);
	attr.inherit = inherit ? 1 : 0;
	fd = syscall(SYS_perf_event_open, &attr, pid, cpu, -1,
		     PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return open_error(-errno, pid, cpu, diag);
	*ret_fd = (int)fd;
	return 0;
}

/* ---- online CPUs ------------------------------------------------------ */

/* One decimal CPU number at text[*i]; strict: digits only, no leading
 * zeros but "0" itself, below PTD_SIDEBAND_MAX_CPUS. */
static int cpulist_num(const char *text, size_t len, size_t *i,
		       const char *origin, unsigned *ret,
		       struct ptd_diag *diag)
{
	size_t start = *i;
	unsigned v = 0;

	while (*i < len && text[*i] >= '0' && text[*i] <= '9') {
		if (*i > start && text[start] == '0')
			return ptd_diagf(diag, -PTD_EFORMAT, "%s: leading zero "
					 "at column %zu", origin, start + 1);
		v = v * 10 + (unsigned)(text[*i] - '0');
		if (v >= PTD_SIDEBAND_MAX_CPUS)
			return ptd_diagf(diag, -PTD_ELIMIT, "%s: cpu number "
					 "at column %zu is not below %u",
					 origin, start + 1,
					 PTD_SIDEBAND_MAX_CPUS);
		(*i)++;
	}
	if (*i == start)
		return ptd_diagf(diag, -PTD_EFORMAT, "%s: expected a cpu "
				 "number at column %zu", origin, start + 1);
	*ret = v;
	return 0;
}

int ptd_cpulist_parse(const char *text, size_t len, const char *origin,
		      int **ret_cpus, size_t *ret_n, struct ptd_diag *diag)
{
	_cleanup_free_ int *cpus = NULL;
	size_t n = 0, i = 0;
	long next = 0;		/* the lowest number the next range may use */

	if (!text || !ret_cpus || !ret_n)
		return -EINVAL;
	if (!origin)
		origin = "cpu list";
	if (len > 0 && text[len - 1] == '\n')
		len--;
	if (len == 0)
		return ptd_diagf(diag, -PTD_EFORMAT, "%s: empty cpu list",
				 origin);
	for (;;) {
		unsigned lo, hi;
		int err = cpulist_num(text, len, &i, origin, &lo, diag);

		if (err < 0)
			return err;
		hi = lo;
		if (i < len && text[i] == '-') {
			i++;
			err = cpulist_num(text, len, &i, origin, &hi, diag);
			if (err < 0)
				return err;
			if (hi < lo)
				return ptd_diagf(diag, -PTD_EFORMAT, "%s: range "
						 "%u-%u goes backwards before "
						 "column %zu", origin, lo, hi,
						 i + 1);
		}
		if ((long)lo < next)
			return ptd_diagf(diag, -PTD_EFORMAT, "%s: cpu %u is not "
					 "above the previous ones (before "
					 "column %zu)", origin, lo, i + 1);
		/* Ascending and below the limit: at most MAX_CPUS entries. */
		if (!cpus) {
			cpus = calloc(PTD_SIDEBAND_MAX_CPUS, sizeof(*cpus));
			if (!cpus)
				return -ENOMEM;
		}
		for (unsigned c = lo; c <= hi; c++)
			cpus[n++] = (int)c;
		next = (long)hi + 1;
		if (i == len)
			break;
		if (text[i] != ',')
			return ptd_diagf(diag, -PTD_EFORMAT, "%s: unexpected "
					 "character at column %zu", origin,
					 i + 1);
		i++;
	}
	*ret_n = n;
	*ret_cpus = PTD_TAKE_PTR(cpus);
	return 0;
}

/* /sys/devices/system/cpu/online is one short line. */
#define CPULIST_MAX_BYTES 65536u

int ptd_sideband_online_cpus(const char *path, int **ret_cpus, size_t *ret_n,
			     struct ptd_diag *diag)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	int err;

	if (!path)
		path = "/sys/devices/system/cpu/online";
	err = ptd_file_read_all(path, CPULIST_MAX_BYTES, &text, &len);
	if (err < 0)
		return ptd_diagf(diag, err, "failed to read '%s': %s", path,
				 ptd_strerror(err));
	if (strlen(text) != len)
		return ptd_diagf(diag, -PTD_EFORMAT, "%s: contains a NUL byte",
				 path);
	return ptd_cpulist_parse(text, len, path, ret_cpus, ret_n, diag);
}
