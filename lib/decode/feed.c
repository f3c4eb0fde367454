/* SPDX-License-Identifier: MIT */
#include "decode/feed.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aspace/timeline.h"
#include "decode/codesnap.h"
#include "perf/sideband.h"
#include "perf/time.h"


struct ptd_feed {
	struct ptd_perf_reader reader;	/* large: keep it on the heap */
	struct ptd_stream *stream;
	pid_t tid;
	struct ptd_codesnap_files *snapfiles;
	uint64_t sample_type;
	bool sample_id_all;
	bool ended;
	struct ptd_feed_stats st;
	struct ptd_feed_hooks hooks;
	struct ptd_diag *diag;		/* during a drain */
	/* hooks.positions: aux_head before the last drain, and before the
	 * one before it (the position of what this drain reads) */
	uint64_t head_last, head_mark;
	/* a snapshot being reassembled from CODE chunks */
	struct ptd_codesnap cs;
};

static int on_aux(void *ctx, uint64_t off, const void *bytes, size_t len)
{
	struct ptd_feed *f = ctx;

	(void)off;
	f->st.aux_bytes += len;
	return ptd_stream_append(f->stream, bytes, len);
}

static int on_loss(void *ctx, const struct ptd_perf_loss *l)
{
	struct ptd_feed *f = ctx;
	uint64_t bytes = 0;

	switch (l->kind) {
	case PTD_PERF_LOSS_RECORDS:
	case PTD_PERF_LOSS_SAMPLES:
		f->st.lost_records += l->records;
		return 0;
	case PTD_PERF_LOSS_CORRUPT:
		f->st.bad_records++;
		return 0;
	case PTD_PERF_LOSS_PARTIAL:
	case PTD_PERF_LOSS_COLLISION:
		/* the chunk has gaps somewhere: resync after it */
		bytes = 1;
		break;
	case PTD_PERF_LOSS_TRUNCATED:
		f->st.truncations++;
		bytes = 1;
		break;
	case PTD_PERF_LOSS_AUX_GAP:
	case PTD_PERF_LOSS_OVERWRITTEN:
		bytes = l->bytes ? l->bytes : 1;
		break;
	}
	f->st.lost_bytes += bytes;
	return ptd_stream_lost(f->stream, bytes);
}

static int add_event(struct ptd_feed *f, const struct ptd_tl_event *ev)
{
	struct ptd_tl_pos pos = { f->tid, f->head_mark };
	struct ptd_tl_event e = *ev;

	f->st.image_events++;
	if (!f->hooks.image)
		return ptd_stream_add_event(f->stream, ev);
	if (f->hooks.positions && !ev->npos) {
		e.pos = &pos;
		e.npos = 1;
	}
	return f->hooks.image(f->hooks.ctx, f->tid, &e);
}

static int on_code(struct ptd_feed *f, const struct ptd_perf_code *c)
{
	struct ptd_tl_event ev;
	int r = ptd_codesnap_add(&f->cs, c, f->snapfiles, &ev,
				 &f->st.bad_records, f->diag);

	return r > 0 ? add_event(f, &ev) : r;
}

static int on_record(void *ctx, const struct perf_event_header *hdr)
{
	struct ptd_feed *f = ctx;
	struct ptd_perf_event e;
	struct ptd_tl_event ev = { 0 };
	struct ptd_diag d;
	int r;

	f->st.records++;
	/* the reader acted on these already (bytes, losses) */
	if (hdr->type == PERF_RECORD_AUX || hdr->type == PERF_RECORD_LOST ||
	    hdr->type == PERF_RECORD_LOST_SAMPLES)
		return 0;
	if (ptd_perf_event_parse(hdr, f->sample_type, f->sample_id_all, &e,
				 &d) < 0) {
		f->st.bad_records++;
		return 0;
	}
	switch (e.type) {
	case PTD_PERF_RECORD_CODE:
		return on_code(f, &e.u.code);
	case PERF_RECORD_EXIT:
		if ((pid_t)e.u.task.tid == f->tid)
			f->ended = true;
		return f->hooks.task ? f->hooks.task(f->hooks.ctx, &e) : 0;
	case PERF_RECORD_FORK:
		return f->hooks.task ? f->hooks.task(f->hooks.ctx, &e) : 0;
	default:
		break;
	}
	r = ptd_perf_event_to_tl(&e, &ev, &d);
	if (r < 0) {
		f->st.bad_records++;
		return 0;
	}
	if (r == 1)
		return add_event(f, &ev);
	/* Non-file code without ptd CODE records (the hardware path): the
	 * decoder reads it from the live process if it can. */
	return 0;
}

static const struct ptd_perf_reader_ops feed_ops = {
	.record = on_record,
	.aux = on_aux,
	.loss = on_loss,
};

/* The clock of the buffer's header page to the stream: the kernel's for an
 * intel_pt event, the calibrated one for the software source's buffers; a
 * page without one (cap_user_time_zero 0) leaves the records without
 * times.  Read at each drain: the kernel may update it (under its seqlock).
 * A page that kept changing while read keeps the last clock. */
static void update_clock(struct ptd_feed *f)
{
	struct ptd_perf_clock c;
	int r;

	if (!f->reader.buf || !f->reader.buf->meta)
		return;
	r = ptd_perf_clock_from_page(f->reader.buf->meta, &c, NULL);
	if (r == 0)
		(void)ptd_stream_set_clock(f->stream, &c, NULL);
	else if (r != -EAGAIN)
		(void)ptd_stream_set_clock(f->stream, NULL, NULL);
}

int ptd_feed_new(struct ptd_perf_buf *buf, pid_t tid,
		 struct ptd_stream *stream,
		 struct ptd_codesnap_files *snapfiles, uint64_t sample_type,
		 bool sample_id_all, struct ptd_feed **ret)
{
	struct ptd_feed *f;

	if (!buf || !stream || !snapfiles || !ret)
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	ptd_perf_reader_init(&f->reader, buf);
	f->stream = stream;
	f->tid = tid;
	f->snapfiles = snapfiles;
	f->sample_type = sample_type;
	f->sample_id_all = sample_id_all;
	update_clock(f);
	*ret = f;
	return 0;
}

void ptd_feed_free(struct ptd_feed *f)
{
	if (!f)
		return;
	ptd_codesnap_fini(&f->cs);
	free(f);
}

int ptd_feed_drain(struct ptd_feed *f, struct ptd_diag *diag)
{
	int r;

	f->diag = diag;
	update_clock(f);
	if (f->hooks.positions && f->reader.buf->meta) {
		f->head_mark = f->head_last;
		f->head_last = __atomic_load_n(&f->reader.buf->meta->aux_head,
					       __ATOMIC_ACQUIRE);
	}
	r = ptd_perf_reader_drain(&f->reader, &feed_ops, f);
	f->diag = NULL;
	return r;
}

void ptd_feed_set_hooks(struct ptd_feed *f, const struct ptd_feed_hooks *h)
{
	f->hooks = *h;
}

bool ptd_feed_ended(const struct ptd_feed *f)
{
	return f->ended;
}

void ptd_feed_get_stats(const struct ptd_feed *f, struct ptd_feed_stats *ret)
{
	*ret = f->st;
}
