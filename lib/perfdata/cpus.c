/* SPDX-License-Identifier: MIT */
/*
 * perf.data decoding: a per-CPU recording (perf record's default layout)
 * split among its threads by the records that say which thread ran where,
 * in the order of their sample times.
 */
#include "perfdata/decode-int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/percpu.h"

/* ---- per-CPU recordings ----------------------------------------------- */

static int pc_bytes(void *ctx, uint32_t tid, const uint8_t *data, size_t len)
{
	struct thr *t = pdd_thr_get(ctx, 0, (pid_t)tid);

	return t ? pdd_thr_append(ctx, t, data, len) : -ENOMEM;
}

static int pc_record(void *ctx, uint32_t tid, const struct ptd_perf_event *e)
{
	(void)tid;
	return pdd_thread_record(ctx, e);
}

static int pc_lost(void *ctx, uint32_t tid, uint64_t bytes)
{
	struct thr *t = pdd_thr_get(ctx, 0, (pid_t)tid);

	if (!t)
		return -ENOMEM;
	if (bytes)
		return pdd_add_loss(t, bytes, true, "lost %" PRIu64 " trace "
				"bytes", bytes);
	return pdd_add_loss(t, 0, true, "trace lost (size unknown)");
}

static int pc_seen(void *ctx, uint32_t pid, uint32_t tid)
{
	return pdd_thr_get(ctx, (pid_t)pid, (pid_t)tid) ? 0 : -ENOMEM;
}

/* The AUXTRACE payloads by (cpu, offset), to find the one holding a CPU's
 * AUX byte without a scan of them all. */
struct auxidx {
	uint32_t cpu;
	uint64_t off, end;	/* AUX offsets [off, end) */
	size_t rec;		/* index in pd->auxtrace (input order) */
	uint64_t maxend;	/* the largest end of this CPU's entries up
				 * to here */
};

static int auxidx_cmp(const void *a, const void *b)
{
	const struct auxidx *x = a, *y = b;

	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->rec < y->rec ? -1 : x->rec > y->rec;
}

static struct auxidx *auxidx_make(const struct ptd_perfdata *pd)
{
	struct auxidx *v = calloc(pd->nauxtrace ? pd->nauxtrace : 1,
				  sizeof(*v));
	size_t i;

	if (!v)
		return NULL;
	for (i = 0; i < pd->nauxtrace; i++) {
		const struct ptd_perfdata_auxtrace_rec *a = &pd->auxtrace[i];

		v[i].cpu = a->cpu;
		v[i].off = a->offset;
		/* sizes are bounded by the input's; an offset near 2^64
		 * holds up to the end of the offsets */
		v[i].end = a->offset + a->size < a->offset ? UINT64_MAX
							  : a->offset + a->size;
		v[i].rec = i;
	}
	qsort(v, pd->nauxtrace, sizeof(*v), auxidx_cmp);
	for (i = 0; i < pd->nauxtrace; i++)
		v[i].maxend = i && v[i - 1].cpu == v[i].cpu &&
				      v[i - 1].maxend > v[i].end
				      ? v[i - 1].maxend
				      : v[i].end;
	return v;
}

/* The first payload in input order of CPU @cpu that holds AUX offset
 * @want, or NULL. */
static const struct ptd_perfdata_auxtrace_rec *
auxidx_find(const struct ptd_perfdata *pd, const struct auxidx *v,
	    uint32_t cpu, uint64_t want)
{
	size_t lo = 0, hi = pd->nauxtrace, best = SIZE_MAX;

	/* the first entry past (cpu, want) */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].cpu < cpu || (v[mid].cpu == cpu &&
					 v[mid].off <= want))
			lo = mid + 1;
		else
			hi = mid;
	}
	/* back over this CPU's entries that start at or before @want while
	 * one of them may still reach past it */
	while (lo > 0 && v[lo - 1].cpu == cpu && v[lo - 1].maxend > want) {
		lo--;
		if (v[lo].end > want && v[lo].rec < best)
			best = v[lo].rec;
	}
	return best == SIZE_MAX ? NULL : &pd->auxtrace[best];
}

/* Copy CPU @cpu's AUX bytes [off, off + len) from its payloads; returns
 * the bytes found contiguous from @off (the rest is a gap).  @out NULL:
 * only count them. */
static size_t cpu_bytes(const struct ptd_perfdata *pd, const struct auxidx *v,
			uint32_t cpu, uint64_t off, uint64_t len, uint8_t *out)
{
	uint64_t have = 0;

	while (have < len) {
		uint64_t want = off + have, n;
		const struct ptd_perfdata_auxtrace_rec *a =
			auxidx_find(pd, v, cpu, want);

		if (!a)
			break;
		n = a->size - (want - a->offset);	/* want is inside */
		if (n > len - have)
			n = len - have;
		if (out)
			memcpy(out + have, a->data + (want - a->offset), n);
		have += n;
	}
	return have;
}

/* A kernel record's place in time: perf's ordered events.  perf drains
 * one CPU's ring after another, so a file holds CPU 0's records (and AUX
 * data) of a round before CPU 3's even when CPU 3's came first; perf sorts
 * each round's records by sample time before it acts on them.  ptd sorts
 * them all (a round never holds records older than the last round's
 * flush, so the whole sort is the same order).  A record without a time
 * keeps its place after the record it followed in the file. */
struct tord {
	uint64_t time;
	size_t rec;
};

static int tord_cmp(const void *a, const void *b)
{
	const struct tord *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->rec < y->rec ? -1 : x->rec > y->rec;
}

static int time_order(struct dec *d, struct tord **ret, size_t *ret_n)
{
	const struct ptd_perfdata *pd = d->pd;
	struct tord *v = calloc(pd->nrecs ? pd->nrecs : 1, sizeof(*v));
	uint64_t last = 0;
	size_t i, n = 0;
	int r;

	if (!v)
		return -ENOMEM;
	for (i = 0; i < pd->nrecs; i++) {
		struct ptd_perf_event e;

		if (pd->recs[i].type >= PTD_PERFDATA_RECORD_USER_TYPE_START ||
		    pd->recs[i].attr < 0)
			continue;
		r = ptd_perfdata_event(pd, i, &e, d->diag);
		if (r < 0) {
			free(v);
			return r;
		}
		if (e.sid.mask & PTD_PERF_SID_TIME)
			last = e.sid.time;
		v[n].time = last;
		v[n++].rec = i;
	}
	qsort(v, n, sizeof(*v), tord_cmp);
	*ret = v;
	*ret_n = n;
	return 0;
}

/* Records that say whose trace is on a CPU, or bring it: without the CPU
 * in their sample_id they cannot be placed. */
static bool needs_cpu(uint32_t type)
{
	return type == PERF_RECORD_AUX || type == PERF_RECORD_ITRACE_START ||
	       type == PERF_RECORD_SWITCH ||
	       type == PERF_RECORD_SWITCH_CPU_WIDE ||
	       type == PERF_RECORD_LOST;
}

int pdd_percpu_pass(struct dec *d)
{
	const struct ptd_perfdata *pd = d->pd;
	struct ptd_percpu_sink sink = { pc_bytes, pc_record, pc_lost,
					pc_seen, d };
	struct ptd_percpu_opts po;
	struct ptd_percpu *pc = NULL;
	uint32_t ncpus = 1;
	uint8_t *buf = NULL;
	struct auxidx *idx = NULL;
	struct tord *ord = NULL;
	size_t i, k, nord = 0;
	int r;

	/* Each event has its own sample_type (perf needs only the id's
	 * place to agree); every record is parsed with its own.  Switches
	 * name their thread through TID. */
	for (i = 0; i < pd->nattrs; i++) {
		const struct perf_event_attr *a = &pd->attrs[i].attr;

		if (!a->sample_id_all || !(a->sample_type & PERF_SAMPLE_TID))
			return ptd_diagf(d->diag, -PTD_EUNSUPPORTED, "%s: "
					 "per-CPU trace needs sample_id_all "
					 "and TID in every event's sample "
					 "ids; event %zu has %s", pd->name, i,
					 a->sample_id_all ? "no TID" :
					 "no sample_id_all");
	}
	for (i = 0; i < pd->nauxtrace; i++)
		if (pd->auxtrace[i].cpu != UINT32_MAX &&
		    pd->auxtrace[i].cpu >= ncpus)
			ncpus = pd->auxtrace[i].cpu + 1;
	if (ncpus > PTD_PERCPU_MAX_CPUS)
		return ptd_diagf(d->diag, -PTD_EFORMAT, "%s: AUXTRACE cpu %u "
				 "(at most %u)", pd->name, ncpus - 1,
				 PTD_PERCPU_MAX_CPUS - 1);
	memset(&po, 0, sizeof(po));
	po.ncpus = ncpus;
	po.pid = -1;
	po.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
	po.sample_id_all = true;
	r = ptd_percpu_new(&po, &sink, &pc);
	if (r == 0 && !(idx = auxidx_make(pd)))
		r = -ENOMEM;
	if (r == 0)
		r = time_order(d, &ord, &nord);
	for (k = 0; r == 0 && k < nord; k++) {
		struct ptd_perf_event e;
		size_t got;

		i = ord[k].rec;
		r = ptd_perfdata_event(pd, i, &e, d->diag);
		if (r < 0)
			break;
		if (!(e.sid.mask & PTD_PERF_SID_CPU)) {
			if (!needs_cpu(e.type))
				continue;	/* not about a CPU's trace */
			r = ptd_diagf(d->diag, -PTD_EUNSUPPORTED, "%s: offset "
				      "0x%" PRIx64 ": %s record has no CPU in "
				      "its sample id (event %d), so no CPU's "
				      "trace can take it", pd->name,
				      pd->recs[i].offset,
				      ptd_perf_record_name(e.type),
				      pd->recs[i].attr);
			break;
		}
		if (e.sid.cpu >= ncpus)
			continue;	/* no trace there */
		if (e.type == PERF_RECORD_AUX && e.u.aux.aux_size) {
			if (e.u.aux.aux_size > PTD_PERF_AUX_MAX) {
				r = ptd_diagf(d->diag, -PTD_EFORMAT, "%s: "
					      "offset 0x%" PRIx64 ": AUX size "
					      "%" PRIu64, pd->name,
					      pd->recs[i].offset,
					      e.u.aux.aux_size);
				break;
			}
			/* The record's size is the file's word: take room for
			 * the bytes the file holds, not for what it claims. */
			got = cpu_bytes(pd, idx, e.sid.cpu, e.u.aux.aux_offset,
					e.u.aux.aux_size, NULL);
			free(buf);
			buf = malloc(got ? got : 1);
			if (!buf) {
				r = -ENOMEM;
				break;
			}
			got = cpu_bytes(pd, idx, e.sid.cpu, e.u.aux.aux_offset,
					got, buf);
			r = ptd_percpu_aux(pc, e.sid.cpu, e.u.aux.aux_offset,
					   buf, got);
			if (r == 0 && got < e.u.aux.aux_size) {
				struct ptd_perf_loss l = {
					.kind = PTD_PERF_LOSS_AUX_GAP,
					.bytes = e.u.aux.aux_size - got,
					.bytes_known = true,
					.aux_offset = e.u.aux.aux_offset + got,
				};
				r = ptd_percpu_loss(pc, e.sid.cpu, &l);
			}
			if (r < 0)
				break;
		}
		r = ptd_percpu_event(pc, e.sid.cpu, &e);
	}
	free(ord);
	free(buf);
	free(idx);
	ptd_percpu_free(pc);
	return r;
}
