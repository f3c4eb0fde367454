/* SPDX-License-Identifier: MIT */
/*
 * One thread's call stack from its records (decode/calls.h).
 */
#include "decode/calls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct frame {
	uint64_t ret;		/* return address; resume IP of a signal */
	/* The function the call was made from (the site's symbol and
	 * module): where an unwinder or longjmp lands to end this frame. */
	const char *site_sym;
	const char *site_mod;
	bool async;		/* a signal handler's frame */
};

/* The last instruction, waiting for the next to say where it went. */
struct last {
	bool valid;
	uint64_t ip;
	uint8_t size;
	enum pt_insn_class iclass;
	const char *sym;
	const char *module;
	/* An asynchronous exit after it (async_disabled): resume IP. */
	bool exit;
	uint64_t exit_at;
	/* Tracing was disabled after it (a filter, a stop): where it went
	 * is not known. */
	bool off;
	bool has_tsc, has_time, has_wall;
	uint64_t tsc, time, wall;
};

struct ptd_calls {
	struct frame *f;
	size_t n, cap;
	/* Frames dropped from the bottom past PTD_CALLS_MAX_DEPTH. */
	uint32_t dropped;
	struct last last;
	pid_t pid, tid;
	ptd_calls_fn fn;
	void *ctx;
};

int ptd_calls_new(struct ptd_calls **ret)
{
	struct ptd_calls *c = calloc(1, sizeof(*c));

	*ret = c;
	return c ? 0 : -ENOMEM;
}

void ptd_calls_free(struct ptd_calls *c)
{
	if (!c)
		return;
	free(c->f);
	free(c);
}

uint32_t ptd_calls_depth(const struct ptd_calls *c)
{
	return c->dropped + (uint32_t)c->n;
}

static bool same_func(const char *sym_a, const char *mod_a, const char *sym_b,
		      const char *mod_b)
{
	if (!sym_a || !sym_b)
		return false;
	if (sym_a != sym_b && strcmp(sym_a, sym_b) != 0)
		return false;
	return mod_a == mod_b || (mod_a && mod_b && !strcmp(mod_a, mod_b));
}

/* A record of kind @kind, timed as the last instruction. */
static void rec_init(const struct ptd_calls *c, struct ptd_record *r,
		     enum ptd_call_kind kind)
{
	memset(r, 0, sizeof(*r));
	r->type = PTD_REC_CALL;
	r->pid = c->pid;
	r->tid = c->tid;
	r->has_tsc = c->last.has_tsc;
	r->tsc = c->last.tsc;
	r->has_time = c->last.has_time;
	r->time = c->last.time;
	r->has_wall = c->last.has_wall;
	r->wall = c->last.wall;
	r->u.call.kind = kind;
}

static int push(struct ptd_calls *c, uint64_t ret, bool async)
{
	struct frame *fr;

	if (c->n == PTD_CALLS_MAX_DEPTH) {
		size_t half = c->n / 2;

		memmove(c->f, c->f + half, (c->n - half) * sizeof(*c->f));
		c->n -= half;
		c->dropped += (uint32_t)half;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;
		struct frame *f = reallocarray(c->f, cap, sizeof(*f));

		if (!f)
			return -ENOMEM;
		c->f = f;
		c->cap = cap;
	}
	fr = &c->f[c->n++];
	fr->ret = ret;
	fr->site_sym = c->last.sym;
	fr->site_mod = c->last.module;
	fr->async = async;
	return 0;
}

static int emit_call(struct ptd_calls *c, const struct ptd_rec_insn *to,
		     uint64_t site, uint32_t flags)
{
	struct ptd_record r;

	rec_init(c, &r, PTD_CALL_CALL);
	r.u.call.depth = ptd_calls_depth(c);
	r.u.call.from = site;
	r.u.call.to = to->ip;
	r.u.call.sym = to->sym;
	r.u.call.symoff = to->symoff;
	r.u.call.flags = flags;
	return c->fn(c->ctx, &r);
}

/* Pop frames down to (and with) index @k: a return record from the last
 * instruction to @to. */
static int pop_to(struct ptd_calls *c, size_t k, const struct ptd_rec_insn *to,
		  uint32_t flags)
{
	struct ptd_record r;

	rec_init(c, &r, PTD_CALL_RETURN);
	r.u.call.depth = ptd_calls_depth(c);
	r.u.call.frames = (uint32_t)(c->n - k);
	r.u.call.from = c->last.ip;
	r.u.call.to = to->ip;
	r.u.call.sym = to->sym;
	r.u.call.symoff = to->symoff;
	r.u.call.flags = flags;
	c->n = k;
	return c->fn(c->ctx, &r);
}

/* The topmost frame whose return address is @ip (async frames or not as
 * @async says; any when @any); -1 if none. */
static long find_ret(const struct ptd_calls *c, uint64_t ip, bool any,
		     bool async)
{
	for (size_t i = c->n; i-- > 0;)
		if (c->f[i].ret == ip && (any || c->f[i].async == async))
			return (long)i;
	return -1;
}

/* The topmost frame called from the function holding @to. */
static long find_caller(const struct ptd_calls *c,
			const struct ptd_rec_insn *to)
{
	if (!to->sym)
		return -1;
	for (size_t i = c->n; i-- > 0;)
		if (same_func(c->f[i].site_sym, c->f[i].site_mod, to->sym,
			      to->module))
			return (long)i;
	return -1;
}

static int on_return(struct ptd_calls *c, const struct ptd_rec_insn *to)
{
	long k = find_ret(c, to->ip, true, false);

	if (k >= 0)
		return pop_to(c, (size_t)k, to, 0);
	k = find_caller(c, to);
	if (k >= 0)
		return pop_to(c, (size_t)k, to, PTD_CALL_F_UNWIND);
	/* a signal handler returning into the trampoline */
	if (c->n && c->f[c->n - 1].async)
		return 0;
	return pop_to(c, c->n ? c->n - 1 : 0, to, PTD_CALL_F_UNMATCHED);
}

static bool func_start(const struct ptd_rec_insn *to)
{
	return to->sym && to->symoff == 0;
}

static int on_jump(struct ptd_calls *c, const struct ptd_rec_insn *to)
{
	long k;

	if (!to->sym || same_func(c->last.sym, c->last.module, to->sym,
				  to->module))
		return 0;
	if (func_start(to)) {
		/* the callee's frame now runs @to: its caller's function is
		 * unchanged, the top frame keeps its return address */
		return emit_call(c, to, c->last.ip, PTD_CALL_F_TAIL);
	}
	k = find_caller(c, to);
	if (k >= 0)
		return pop_to(c, (size_t)k, to, PTD_CALL_F_UNWIND);
	return 0;
}

/* Control left the last instruction for @to, not where it resumes
 * (@resume): a signal handler, or the sigreturn of one. */
static int on_transfer(struct ptd_calls *c, uint64_t resume,
		       const struct ptd_rec_insn *to)
{
	long k = find_ret(c, to->ip, false, true);
	int rc;

	if (k >= 0)
		return pop_to(c, (size_t)k, to, PTD_CALL_F_SIGRETURN);
	rc = push(c, resume, true);
	if (rc)
		return rc;
	return emit_call(c, to, resume, PTD_CALL_F_ASYNC);
}

/* The last instruction went to @to (the next insn record). */
static int step(struct ptd_calls *c, const struct ptd_rec_insn *to)
{
	const struct last *l = &c->last;
	uint64_t fall = l->ip + l->size;
	int rc = 0;

	/* An instruction interrupted after it ran went where it would
	 * have, the resume IP; @to is where the exit led. */
	if (l->exit && l->exit_at != to->ip) {
		struct ptd_rec_insn at;

		memset(&at, 0, sizeof(at));
		at.ip = l->exit_at;
		if (l->iclass == ptic_call) {
			rc = push(c, fall, false);
			if (rc == 0)
				rc = emit_call(c, &at, l->ip, 0);
		} else if (l->iclass == ptic_return) {
			rc = on_return(c, &at);
		}
		/* jumps, to a target whose symbol is not known: none */
		return rc ? rc : on_transfer(c, l->exit_at, to);
	}
	/* Tracing went off after it and came back at @to: what ran between
	 * is not in the trace (a call into code outside the address filter
	 * returns there untraced).  Only a syscall's is a known transfer. */
	if (l->off && l->iclass != ptic_far_call)
		return 0;
	switch (l->iclass) {
	case ptic_call:
		rc = push(c, fall, false);
		return rc ? rc : emit_call(c, to, l->ip, 0);
	case ptic_return:
		return on_return(c, to);
	case ptic_jump:
		return on_jump(c, to);
	case ptic_far_call:
		return to->ip == fall ? 0 : on_transfer(c, fall, to);
	case ptic_error:
	case ptic_other:
	case ptic_cond_jump:
	case ptic_far_return:
	case ptic_far_jump:
	case ptic_ptwrite:
		break;
	}
	return 0;
}

static int reset(struct ptd_calls *c, const char *reason)
{
	struct ptd_record r;
	bool had = c->last.valid || c->n || c->dropped;

	rec_init(c, &r, PTD_CALL_RESET);
	r.u.call.depth = ptd_calls_depth(c);
	r.u.call.reason = reason;
	c->n = 0;
	c->dropped = 0;
	c->last.valid = false;
	return had ? c->fn(c->ctx, &r) : 0;
}

int ptd_calls_feed(struct ptd_calls *c, const struct ptd_record *r,
		   ptd_calls_fn fn, void *ctx)
{
	const struct ptd_rec_insn *in;
	int rc = 0;

	c->fn = fn;
	c->ctx = ctx;
	c->pid = r->pid;
	c->tid = r->tid;
	switch (r->type) {
	case PTD_REC_INSN:
		break;
	case PTD_REC_EVENT:
		if (r->u.event.ev.type == ptev_async_disabled && c->last.valid) {
			c->last.exit = true;
			c->last.exit_at = r->u.event.ev.variant.async_disabled.at;
		} else if (r->u.event.ev.type == ptev_disabled) {
			c->last.off = true;
		} else if (r->u.event.ev.type == ptev_overflow) {
			return reset(c, "overflow");
		}
		return 0;
	case PTD_REC_ERROR:
		return reset(c, r->u.error.context ? r->u.error.context
						   : "error");
	case PTD_REC_BLOCK:
	case PTD_REC_CALL:
	case PTD_REC_FIRST_EXEC:
	case PTD_REC_COUNTERS:
	case PTD_REC_TRACE:
	case PTD_REC_TRACE_WITHDRAWN:
	case PTD_REC_NTYPES:
	case PTD_REC_IMAGE:
		return 0;
	}
	in = &r->u.insn;
	if (c->last.valid)
		rc = step(c, in);
	c->last.valid = true;
	c->last.ip = in->ip;
	c->last.size = in->size;
	c->last.iclass = in->iclass;
	c->last.sym = in->sym;
	c->last.module = in->module;
	c->last.exit = false;
	c->last.off = false;
	c->last.has_tsc = r->has_tsc;
	c->last.tsc = r->tsc;
	c->last.has_time = r->has_time;
	c->last.time = r->time;
	c->last.has_wall = r->has_wall;
	c->last.wall = r->wall;
	return rc;
}
