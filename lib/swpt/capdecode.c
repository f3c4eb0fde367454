/* SPDX-License-Identifier: MIT */
#include "swpt/capdecode.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aspace/image.h"
#include "aspace/timeline.h"
#include "common/lockopt.h"
#include "common/strutil.h"
#include "record/diff.h"

int ptd_capture_stream_open(const struct ptd_capture *c, size_t idx,
		    struct ptd_iscache *ic, struct ptd_capture_stream *rs,
		    struct ptd_diag *diag)
{
	const struct ptd_capture_thread *t;
	char name[64];
	int r;

	memset(rs, 0, sizeof(*rs));
	if (!c || idx >= c->nthreads || !ic)
		return -EINVAL;
	t = &c->threads[idx];
	(void)snprintf(name, sizeof(name), "tid %ld", (long)t->tid);
	(void)ptd_image_new(ic, name, &rs->img);
	if (!rs->img)
		return -ENOMEM;
	r = ptd_capture_read_pt(c, idx, &rs->pt, &rs->len, diag);
	if (r < 0)
		return r;
	r = ptd_tl_cursor_init(&rs->cursor, &c->tl, c->dir, t->tid,
			       t->first_seq,
			       t->has_end ? t->end_seq : UINT64_MAX, rs->img,
			       diag);
	if (r < 0)
		return r;
	rs->args.pt = rs->pt;
	rs->args.len = rs->len;
	rs->args.pid = c->pid;
	rs->args.tid = t->tid;
	rs->args.img = rs->img;
	rs->args.cursor = &rs->cursor;
	return 0;
}

void ptd_capture_stream_close(struct ptd_capture_stream *rs)
{
	free(rs->pt);
	ptd_image_free(rs->img);
	memset(rs, 0, sizeof(*rs));
}

int ptd_capture_decode_thread(const struct ptd_capture *c, size_t idx,
		      const struct ptd_decode_opts *o, struct ptd_iscache *ic,
		      struct ptd_insncache *icache, pthread_mutex_t *lock,
		      ptd_record_fn fn, void *ctx,
		      struct ptd_decode_stats *stats, struct ptd_diag *diag)
{
	struct ptd_iscache *own_ic = NULL;
	struct ptd_capture_stream rs;
	struct ptd_decode_opts dopts;
	int r;

	if (!c || idx >= c->nthreads || !o || !fn)
		return -EINVAL;
	if (!ic) {
		(void)ptd_iscache_new(&own_ic);
		if (!own_ic)
			return -ENOMEM;
		ic = own_ic;
	}
	/* The capture's filter, unless the caller gave one. */
	dopts = *o;
	if (!dopts.addr_filter.config.addr_cfg)
		dopts.addr_filter = c->addr_filter;
	ptd_lock_opt(lock);
	r = ptd_capture_stream_open(c, idx, ic, &rs, diag);
	ptd_unlock_opt(lock);
	if (r == 0) {
		rs.args.icache = icache;
		rs.args.lock = lock;
		r = ptd_decode_thread(&dopts, &rs.args, fn, ctx, stats);
	}
	ptd_lock_opt(lock);
	ptd_capture_stream_close(&rs);
	ptd_unlock_opt(lock);
	ptd_iscache_free(own_ic);
	return r;
}

/* One decoded instruction, with the module compared by name. */
struct vinsn {
	struct ptd_rec_insn in;
};

struct collect {
	struct vinsn *v;
	size_t n, cap;
	uint64_t errors;
	char first_error[160];
};

static int collect_fn(void *ctx, const struct ptd_record *rec)
{
	struct collect *co = ctx;

	if (rec->type == PTD_REC_ERROR) {
		if (!co->errors)
			(void)snprintf(co->first_error,
				       sizeof(co->first_error),
				       "%s error %s at offset 0x%" PRIx64
				       ", ip 0x%" PRIx64,
				       rec->u.error.context,
				       ptd_pterr_name(rec->u.error.code),
				       rec->u.error.offset, rec->u.error.ip);
		co->errors++;
		return 0;
	}
	if (rec->type != PTD_REC_INSN)
		return 0;
	if (co->n == co->cap) {
		size_t cap = co->cap ? co->cap * 2 : 65536;
		struct vinsn *v = realloc(co->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		co->v = v;
		co->cap = cap;
	}
	co->v[co->n++].in = rec->u.insn;
	return 0;
}

/* Describe the first field in which @a and @b differ, or return false. */
static bool insn_differs(const struct ptd_rec_insn *a,
			 const struct ptd_rec_insn *b, char *why, size_t len)
{
	struct ptd_record ra, rb;
	const char *field;

	memset(&ra, 0, sizeof(ra));
	ra.type = PTD_REC_INSN;
	rb = ra;
	ra.u.insn = *a;
	rb.u.insn = *b;
	field = ptd_record_diff(&ra, &rb, PTD_DIFF_IGNORE_TIME);
	if (!field)
		return false;
	(void)snprintf(why, len, "%s at ip 0x%" PRIx64 " / 0x%" PRIx64, field,
		       a->ip, b->ip);
	return true;
}

static int verify_thread(const struct ptd_capture *c, size_t idx,
			 struct ptd_iscache *ic, struct ptd_verify_thread *vt,
			 struct ptd_diag *diag)
{
	struct collect ci = { 0 }, cb = { 0 };
	struct ptd_decode_opts o;
	uint64_t *truth = NULL;
	size_t ntruth = 0, i;
	char why[160];
	int r;

	memset(&o, 0, sizeof(o));
	o.cpu = c->cpu;
	o.want = PTD_REC_BIT(PTD_REC_INSN);
	vt->tid = c->threads[idx].tid;

	r = ptd_capture_read_truth(c, idx, &truth, &ntruth, diag);
	if (r < 0)
		goto out;
	o.path = PTD_PATH_INSN;
	r = ptd_capture_decode_thread(c, idx, &o, ic, NULL, NULL, collect_fn,
				      &ci, NULL, diag);
	if (r < 0)
		goto out;
	o.path = PTD_PATH_BLOCK;
	r = ptd_capture_decode_thread(c, idx, &o, ic, NULL, NULL, collect_fn,
				      &cb, NULL, diag);
	if (r < 0)
		goto out;

	vt->truth = ntruth;
	vt->insn_path = ci.n;
	vt->block_path = cb.n;
	vt->errors = ci.errors + cb.errors;
	vt->ok = false;
	if (ci.errors) {
		(void)snprintf(vt->why, sizeof(vt->why), "insn path: %s",
			       ci.first_error);
		goto out;
	}
	if (cb.errors) {
		(void)snprintf(vt->why, sizeof(vt->why), "block path: %s",
			       cb.first_error);
		goto out;
	}
	for (i = 0; i < ntruth && i < ci.n; i++)
		if (truth[i] != ci.v[i].in.ip)
			break;
	if (i < ntruth || i < ci.n) {
		(void)snprintf(vt->why, sizeof(vt->why),
			       "insn path leaves the ground truth at "
			       "instruction %zu: executed 0x%" PRIx64
			       ", decoded 0x%" PRIx64 " (%zu executed, %zu "
			       "decoded)",
			       i, i < ntruth ? truth[i] : 0,
			       i < ci.n ? ci.v[i].in.ip : 0, ntruth, ci.n);
		goto out;
	}
	for (i = 0; i < ci.n && i < cb.n; i++)
		if (insn_differs(&ci.v[i].in, &cb.v[i].in, why, sizeof(why)))
			break;
	if (i < ci.n || i < cb.n) {
		if (i == ci.n || i == cb.n)
			(void)snprintf(why, sizeof(why), "%zu vs %zu records",
				       ci.n, cb.n);
		(void)snprintf(vt->why, sizeof(vt->why),
			       "block path differs from insn path at record "
			       "%zu: %s",
			       i, why);
		goto out;
	}
	vt->ok = true;
out:
	free(truth);
	free(ci.v);
	free(cb.v);
	return r;
}

int ptd_capture_verify(const struct ptd_capture *c,
		      struct ptd_verify_report *report, struct ptd_diag *diag)
{
	struct ptd_iscache *ic;
	size_t i;
	int r = 0;

	if (!c || !report)
		return -EINVAL;
	memset(report, 0, sizeof(*report));
	report->threads = calloc(c->nthreads ? c->nthreads : 1,
				 sizeof(*report->threads));
	(void)ptd_iscache_new(&ic);
	if (!report->threads || !ic) {
		ptd_iscache_free(ic);
		ptd_verify_report_fini(report);
		return -ENOMEM;
	}
	report->nthreads = c->nthreads;
	report->ok = c->nthreads > 0;
	for (i = 0; i < c->nthreads; i++) {
		r = verify_thread(c, i, ic, &report->threads[i], diag);
		if (r < 0)
			break;
		if (!report->threads[i].ok)
			report->ok = false;
	}
	ptd_iscache_free(ic);
	if (r < 0)
		ptd_verify_report_fini(report);
	return r < 0 ? r : 0;
}

void ptd_verify_report_fini(struct ptd_verify_report *r)
{
	if (!r)
		return;
	free(r->threads);
	r->threads = NULL;
	r->nthreads = 0;
}
