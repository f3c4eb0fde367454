/* SPDX-License-Identifier: MIT */
/*
 * LLDB per-CPU bundles: context switch traces and the time split (see
 * percpu.h).
 */
#include "lldb/percpu.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <linux/perf_event.h>

#include "common/bytes.h"

/* SWITCH_CPU_WIDE with sample_id TID|TIME: header, next_prev_pid/tid,
 * pid/tid, time. */
#define CSW_SIZE 32u
#define CSW_PID 16u
#define CSW_TID 20u
#define CSW_TIME 24u

struct sw {
	uint64_t tsc;
	bool out;
	uint32_t pid, tid;
};

struct pctx {
	size_t cpu;
	struct ptd_lldb_exec **v;
	size_t *n, *cap;
};

static int add_exec(struct pctx *p, const struct sw *who, uint64_t start,
		    uint64_t end)
{
	struct ptd_lldb_exec *e;

	if (*p->n >= PTD_LLDB_MAX_EXECS)
		return -PTD_ELIMIT;
	if (*p->n == *p->cap) {
		size_t nc = *p->cap ? *p->cap * 2 : 64;
		struct ptd_lldb_exec *nv = realloc(*p->v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*p->v = nv;
		*p->cap = nc;
	}
	e = &(*p->v)[(*p->n)++];
	memset(e, 0, sizeof(*e));
	e->cpu = p->cpu;
	e->pid = who->pid;
	e->tid = who->tid;
	e->start = start;
	e->end = end;
	return 0;
}

/* The executions two consecutive switch records of a CPU tell of. */
static int pair(struct pctx *p, const struct sw *prev, const struct sw *cur)
{
	int r;

	if (!prev)	/* a first OUT: the run began before the trace */
		return cur->out ? add_exec(p, cur, 0, cur->tsc) : 0;
	if (!prev->out && !cur->out)	/* IN IN: prev's OUT is missing */
		return add_exec(p, prev, prev->tsc, cur->tsc - 1);
	if (prev->out && cur->out)	/* OUT OUT: cur's IN is missing */
		return add_exec(p, cur, prev->tsc + 1, cur->tsc);
	if (prev->out)			/* OUT IN: a gap */
		return 0;
	if (prev->tid == cur->tid && prev->pid == cur->pid)
		return add_exec(p, cur, prev->tsc, cur->tsc);
	/* IN(a) OUT(b): a's end and b's start are both missing. */
	r = add_exec(p, prev, prev->tsc, cur->tsc - 1);
	return r < 0 ? r : add_exec(p, cur, prev->tsc + 1, cur->tsc);
}

/* @r from add_exec: the limit's message, or @r as it is. */
static int over_limit(int r, const char *what, struct ptd_diag *diag)
{
	if (r != -PTD_ELIMIT)
		return r;
	return ptd_diagf(diag, r, "%s: more than %u thread executions in all",
			 what, PTD_LLDB_MAX_EXECS);
}

int ptd_lldb_cswitch_parse(const uint8_t *data, size_t len, size_t cpu,
			   const struct ptd_perf_clock *conv, const char *what,
			   struct ptd_lldb_exec **v, size_t *n, size_t *cap,
			   struct ptd_diag *diag)
{
	struct pctx p = { cpu, v, n, cap };
	struct sw prev = { 0 }, cur;
	bool have_prev = false;
	size_t off = 0;
	int r;

	if ((!data && len) || !conv || !conv->time_mult || !what || !v ||
	    !n || !cap)
		return -EINVAL;
	while (off < len) {
		struct perf_event_header h;

		if (len - off < sizeof(h))
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s: offset %zu: %zu bytes left, too "
					 "few for a record header", what, off,
					 len - off);
		memcpy(&h, data + off, sizeof(h));
		if (h.size < sizeof(h) || h.size > len - off)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s: offset %zu: a record of %u bytes "
					 "(%zu left in the file; at least 8)",
					 what, off, h.size, len - off);
		if (h.type != PERF_RECORD_SWITCH_CPU_WIDE) {
			off += h.size;	/* not a switch: nothing to learn */
			continue;
		}
		if (h.size < CSW_SIZE)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s: offset %zu: a SWITCH_CPU_WIDE "
					 "record of %u bytes (expected %u: "
					 "sample_type TID|TIME)", what, off,
					 h.size, CSW_SIZE);
		cur.out = h.misc & PERF_RECORD_MISC_SWITCH_OUT;
		cur.pid = ptd_get_u32(data + off + CSW_PID);
		cur.tid = ptd_get_u32(data + off + CSW_TID);
		cur.tsc = ptd_perf_time_to_tsc(conv,
					       ptd_get_u64(data + off + CSW_TIME));
		if (have_prev && cur.tsc <= prev.tsc)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s: offset %zu: switch at TSC %#" PRIx64
					 " is not after the one before (TSC %#"
					 PRIx64 ")", what, off, cur.tsc,
					 prev.tsc);
		r = pair(&p, have_prev ? &prev : NULL, &cur);
		if (r < 0)
			return over_limit(r, what, diag);
		prev = cur;
		have_prev = true;
		off += h.size;
	}
	/* A last IN: the run goes on past the end of the trace. */
	if (have_prev && !prev.out) {
		r = add_exec(&p, &prev, prev.tsc, UINT64_MAX);
		if (r < 0)
			return over_limit(r, what, diag);
	}
	return 0;
}

size_t ptd_lldb_assign_blocks(const struct ptd_psb_block *blocks,
			      size_t nblocks, struct ptd_lldb_exec *ex,
			      size_t nex, uint64_t *ret_bytes)
{
	size_t i = 0, e, none = 0;
	uint64_t bytes = 0;

	for (e = 0; e < nex; e++) {
		/* An execution's blocks must be adjacent (one stretch of
		 * the trace): once one inside its run is not its (TSCs out
		 * of order in a damaged trace), the run is over. */
		bool closed = false;

		ex[e].first = 0;
		ex[e].nblocks = 0;
		for (; i < nblocks && blocks[i].tsc < ex[e].end; i++) {
			if (!closed && blocks[i].tsc > ex[e].start) {
				if (!ex[e].nblocks)
					ex[e].first = i;
				ex[e].nblocks++;
				continue;
			}
			closed = ex[e].nblocks > 0;
			none++;
			bytes += blocks[i].size;
		}
	}
	for (; i < nblocks; i++, none++)
		bytes += blocks[i].size;
	if (ret_bytes)
		*ret_bytes += bytes;
	return none;
}
