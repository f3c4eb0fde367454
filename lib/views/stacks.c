/* SPDX-License-Identifier: MIT */
/*
 * Each thread's stack of functions from its records (views/stacks.h).
 */
#include "views/stacks.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vframe {
	const char *name;	/* interned */
	const char *rawsym;	/* the record's sym that named it, or NULL */
	bool named_by_sym;
	uint32_t node;
};

struct vthread {
	pid_t pid, tid;
	struct vframe *f;	/* f[0]: the base frame */
	uint32_t n, cap;	/* frames open; 0: none (a new base next) */
	uint32_t over;		/* frames above PTD_STACKS_MAX_DEPTH */
	uint64_t insns;
	uint64_t ts;
};

struct ptd_stacks {
	struct ptd_stacks_ops ops;
	enum ptd_stacks_clock clock;
	uint64_t insns, resets;
	/* threads, and the last one used */
	struct vthread *th;
	size_t nth, capth;
	size_t last;
	/* interned names: open hash of pointers */
	char **names;
	size_t nnames, capnames;
	/* the tree: nodes, and an open hash of (parent, name) -> index */
	struct ptd_stack_node *nodes;
	size_t nnodes, capnodes;
	uint32_t *nodetab;	/* index + 1; 0 empty */
	size_t capnodetab;
	bool finished;
};

const char *ptd_stacks_clock_name(enum ptd_stacks_clock c)
{
	switch (c) {
	case PTD_STACKS_CLOCK_NONE:
		return "none";
	case PTD_STACKS_CLOCK_TIME:
		return "time";
	case PTD_STACKS_CLOCK_TSC:
		return "tsc";
	case PTD_STACKS_CLOCK_INSNS:
		return "insns";
	}
	return "none";
}

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
	return h;
}

/* The interned copy of @s (cut to PTD_STACKS_MAX_NAME bytes), or NULL. */
static const char *intern(struct ptd_stacks *s, const char *str)
{
	size_t n = strnlen(str, PTD_STACKS_MAX_NAME), mask, i;

	if (2 * (s->nnames + 1) > s->capnames) {
		size_t cap = s->capnames ? 2 * s->capnames : 256;
		char **t = calloc(cap, sizeof(*t));

		if (!t)
			return NULL;
		for (size_t k = 0; k < s->capnames; k++) {
			char *e = s->names[k];

			if (!e)
				continue;
			for (i = hash_bytes(e, strlen(e)) & (cap - 1); t[i];
			     i = (i + 1) & (cap - 1))
				;
			t[i] = e;
		}
		free(s->names);
		s->names = t;
		s->capnames = cap;
	}
	mask = s->capnames - 1;
	for (i = hash_bytes(str, n) & mask; s->names[i]; i = (i + 1) & mask)
		if (!strncmp(s->names[i], str, n) && !s->names[i][n])
			return s->names[i];
	s->names[i] = strndup(str, n);
	if (!s->names[i])
		return NULL;
	s->nnames++;
	return s->names[i];
}

static uint64_t node_hash(uint32_t parent, const char *name)
{
	return ((uint64_t)(uintptr_t)name * 0x9e3779b97f4a7c15ull) ^
	       ((uint64_t)parent * 0xc2b2ae3d27d4eb4full);
}

static int node_add(struct ptd_stacks *s, uint32_t parent, const char *name)
{
	struct ptd_stack_node *nd;

	if (s->nnodes >= UINT32_MAX - 1)
		return -ENOMEM;
	if (s->nnodes == s->capnodes) {
		size_t cap = s->capnodes ? 2 * s->capnodes : 256;
		struct ptd_stack_node *t = reallocarray(s->nodes, cap,
							sizeof(*t));

		if (!t)
			return -ENOMEM;
		s->nodes = t;
		s->capnodes = cap;
	}
	nd = &s->nodes[s->nnodes];
	memset(nd, 0, sizeof(*nd));
	nd->name = name;
	nd->parent = parent;
	nd->depth = s->nnodes ? s->nodes[parent].depth + 1 : 0;
	s->nnodes++;
	return 0;
}

/* The node for @name above @parent, made if new; *@ret its index. */
static int child_of(struct ptd_stacks *s, uint32_t parent, const char *name,
		    uint32_t *ret)
{
	size_t mask, i;
	int rc;

	if (2 * (s->nnodes + 1) > s->capnodetab) {
		size_t cap = s->capnodetab ? 2 * s->capnodetab : 1024;
		uint32_t *t = calloc(cap, sizeof(*t));

		if (!t)
			return -ENOMEM;
		for (size_t k = 0; k < s->capnodetab; k++) {
			uint32_t e = s->nodetab[k];
			const struct ptd_stack_node *nd;

			if (!e)
				continue;
			nd = &s->nodes[e - 1];
			for (i = node_hash(nd->parent, nd->name) & (cap - 1);
			     t[i]; i = (i + 1) & (cap - 1))
				;
			t[i] = e;
		}
		free(s->nodetab);
		s->nodetab = t;
		s->capnodetab = cap;
	}
	mask = s->capnodetab - 1;
	for (i = node_hash(parent, name) & mask; s->nodetab[i];
	     i = (i + 1) & mask) {
		const struct ptd_stack_node *nd = &s->nodes[s->nodetab[i] - 1];

		if (nd->parent == parent && nd->name == name) {
			*ret = s->nodetab[i] - 1;
			return 0;
		}
	}
	rc = node_add(s, parent, name);
	if (rc)
		return rc;
	s->nodetab[i] = (uint32_t)s->nnodes;
	*ret = (uint32_t)s->nnodes - 1;
	return 0;
}

int ptd_stacks_new(const struct ptd_stacks_ops *ops, struct ptd_stacks **ret)
{
	struct ptd_stacks *s = calloc(1, sizeof(*s));
	const char *all;

	*ret = NULL;
	if (!s)
		return -ENOMEM;
	if (ops)
		s->ops = *ops;
	all = intern(s, "all");
	if (!all || node_add(s, 0, all) < 0) {
		ptd_stacks_free(s);
		return -ENOMEM;
	}
	*ret = s;
	return 0;
}

void ptd_stacks_free(struct ptd_stacks *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nth; i++)
		free(s->th[i].f);
	free(s->th);
	for (size_t i = 0; i < s->capnames; i++)
		free(s->names[i]);
	free(s->names);
	free(s->nodes);
	free(s->nodetab);
	free(s);
}

static struct vthread *thread_of(struct ptd_stacks *s,
				 const struct ptd_record *r, bool *is_new)
{
	struct vthread *t;

	*is_new = false;
	if (s->last < s->nth && s->th[s->last].tid == r->tid &&
	    s->th[s->last].pid == r->pid)
		return &s->th[s->last];
	for (size_t i = 0; i < s->nth; i++)
		if (s->th[i].tid == r->tid && s->th[i].pid == r->pid) {
			s->last = i;
			return &s->th[i];
		}
	if (s->nth == s->capth) {
		size_t cap = s->capth ? 2 * s->capth : 16;
		struct vthread *n = reallocarray(s->th, cap, sizeof(*n));

		if (!n)
			return NULL;
		s->th = n;
		s->capth = cap;
	}
	t = &s->th[s->nth];
	memset(t, 0, sizeof(*t));
	t->pid = r->pid;
	t->tid = r->tid;
	s->last = s->nth++;
	*is_new = true;
	return t;
}

static int do_open(struct ptd_stacks *s, struct vthread *t, uint32_t depth,
		   const char *name)
{
	return s->ops.open ? s->ops.open(s->ops.ctx, t->pid, t->tid, depth,
					 name, t->ts)
			   : 0;
}

static int do_close(struct ptd_stacks *s, struct vthread *t, uint32_t depth)
{
	return s->ops.close ? s->ops.close(s->ops.ctx, t->pid, t->tid, depth,
					   t->ts)
			    : 0;
}

/* Push a frame named @name (a new slice above the top), or, @name NULL,
 * one its next instruction names (name_top opens its slice). */
static int push(struct ptd_stacks *s, struct vthread *t, const char *name)
{
	struct vframe *fr;
	uint32_t parent;
	int rc;

	/* a frame left before any instruction ran in it (records out of
	 * the usual order): named now, so that what is above nests in it */
	if (t->n && !t->over && !t->f[t->n - 1].name) {
		struct vframe *top = &t->f[t->n - 1];

		top->name = intern(s, "[unknown]");
		if (!top->name)
			return -ENOMEM;
		rc = child_of(s, t->n > 1 ? t->f[t->n - 2].node : 0, top->name,
			      &top->node);
		if (rc == 0)
			rc = do_open(s, t, t->n - 1, top->name);
		if (rc)
			return rc;
	}
	parent = t->n ? t->f[t->n - 1].node : 0;
	if (t->over || t->n >= PTD_STACKS_MAX_DEPTH) {
		t->over++;
		return 0;
	}
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? 2 * t->cap : 32;
		struct vframe *f = reallocarray(t->f, cap, sizeof(*f));

		if (!f)
			return -ENOMEM;
		t->f = f;
		t->cap = cap;
	}
	fr = &t->f[t->n];
	memset(fr, 0, sizeof(*fr));
	t->n++;
	if (!name)
		return 0;
	fr->name = name;
	rc = child_of(s, parent, name, &fr->node);
	return rc ? rc : do_open(s, t, t->n - 1, name);
}

static int pop(struct ptd_stacks *s, struct vthread *t)
{
	if (t->over) {
		t->over--;
		return 0;
	}
	if (!t->n)
		return 0;
	t->n--;
	/* a frame no instruction ran in yet has no slice */
	return t->f[t->n].name ? do_close(s, t, t->n) : 0;
}

/* Frames above the base: @depth of them, as the call records count. */
static int sync_depth(struct ptd_stacks *s, struct vthread *t, uint64_t depth)
{
	const char *unknown;
	int rc = 0;

	while (rc == 0 && t->n && t->n - 1 + (uint64_t)t->over > depth)
		rc = pop(s, t);
	if (rc)
		return rc;
	if (t->n - 1 + (uint64_t)t->over >= depth || !t->n)
		return 0;
	unknown = intern(s, "[unknown]");
	if (!unknown)
		return -ENOMEM;
	while (rc == 0 && t->n - 1 + (uint64_t)t->over < depth)
		rc = push(s, t, unknown);
	return rc;
}

static int close_all(struct ptd_stacks *s, struct vthread *t)
{
	int rc = 0;

	while (rc == 0 && (t->n || t->over))
		rc = pop(s, t);
	return rc;
}

/* The top frame now runs @in: rename it when its function changed. */
static int name_top(struct ptd_stacks *s, struct vthread *t,
		    const struct ptd_rec_insn *in)
{
	struct vframe *top;
	const char *name;
	char hex[24];
	uint32_t parent;
	int rc;

	if (t->over)
		return 0;
	top = &t->f[t->n - 1];
	if (in->sym) {
		if (in->sym == top->rawsym)
			return 0;
		name = intern(s, in->sym);
	} else {
		if (!top->named_by_sym && top->name)
			return 0;
		(void)snprintf(hex, sizeof(hex), "0x%" PRIx64, in->ip);
		name = intern(s, hex);
	}
	if (!name)
		return -ENOMEM;
	top->rawsym = in->sym;
	top->named_by_sym = in->sym != NULL;
	if (name == top->name)
		return 0;
	parent = t->n > 1 ? t->f[t->n - 2].node : 0;
	if (top->name) {
		rc = do_close(s, t, t->n - 1);
		if (rc)
			return rc;
	}
	top->name = name;
	rc = child_of(s, parent, name, &top->node);
	return rc ? rc : do_open(s, t, t->n - 1, name);
}

static void stamp(struct ptd_stacks *s, struct vthread *t,
		  const struct ptd_record *r)
{
	uint64_t v;

	if (s->clock == PTD_STACKS_CLOCK_NONE)
		s->clock = r->has_time	? PTD_STACKS_CLOCK_TIME
			   : r->has_tsc ? PTD_STACKS_CLOCK_TSC
					: PTD_STACKS_CLOCK_INSNS;
	switch (s->clock) {
	case PTD_STACKS_CLOCK_TIME:
		if (!r->has_time)
			return;
		v = r->time;
		break;
	case PTD_STACKS_CLOCK_TSC:
		if (!r->has_tsc)
			return;
		v = r->tsc;
		break;
	case PTD_STACKS_CLOCK_INSNS:
	case PTD_STACKS_CLOCK_NONE:
	default:
		v = t->insns;
		break;
	}
	if (v > t->ts)
		t->ts = v;
}

static int on_insn(struct ptd_stacks *s, struct vthread *t,
		   const struct ptd_record *r)
{
	int rc = 0;

	stamp(s, t, r);
	/* no frame: a new base frame, named by this instruction */
	if (!t->n)
		rc = push(s, t, NULL);
	if (rc == 0)
		rc = name_top(s, t, &r->u.insn);
	if (rc)
		return rc;
	s->nodes[t->f[t->n - 1].node].self++;
	t->insns++;
	s->insns++;
	if (s->clock == PTD_STACKS_CLOCK_INSNS)
		t->ts = t->insns;
	return 0;
}

static int on_call(struct ptd_stacks *s, struct vthread *t,
		   const struct ptd_rec_call *c)
{
	uint64_t depth;
	int rc;

	switch (c->kind) {
	case PTD_CALL_CALL:
		if (!t->n)
			return 0;	/* no instruction yet */
		if (c->flags & PTD_CALL_F_TAIL)
			return sync_depth(s, t, c->depth);
		rc = sync_depth(s, t, c->depth ? c->depth - 1 : 0);
		if (rc)
			return rc;
		/* named by the target's first instruction, next */
		return push(s, t, NULL);
	case PTD_CALL_RETURN:
		if (!t->n)
			return 0;
		depth = c->depth >= c->frames ? c->depth - c->frames : 0;
		return sync_depth(s, t, depth);
	case PTD_CALL_RESET:
		break;
	}
	return 0;
}

static int on_reset(struct ptd_stacks *s, struct vthread *t,
		    const char *reason)
{
	bool had = t->n || t->over;
	int rc = close_all(s, t);

	if (rc || !had)
		return rc;
	s->resets++;
	return s->ops.reset ? s->ops.reset(s->ops.ctx, t->pid, t->tid, reason,
					   t->ts)
			    : 0;
}

int ptd_stacks_feed(void *ctx, const struct ptd_record *r)
{
	struct ptd_stacks *s = ctx;
	struct vthread *t;
	bool is_new;
	int rc;

	if (r->type != PTD_REC_INSN && r->type != PTD_REC_CALL &&
	    r->type != PTD_REC_ERROR)
		return 0;
	t = thread_of(s, r, &is_new);
	if (!t)
		return -ENOMEM;
	if (is_new && s->ops.thread) {
		rc = s->ops.thread(s->ops.ctx, r->pid, r->tid);
		if (rc)
			return rc;
	}
	switch (r->type) {
	case PTD_REC_INSN:
		return on_insn(s, t, r);
	case PTD_REC_CALL:
		if (r->u.call.kind == PTD_CALL_RESET)
			return on_reset(s, t, r->u.call.reason
						      ? r->u.call.reason
						      : "reset");
		return on_call(s, t, &r->u.call);
	case PTD_REC_ERROR:
		return on_reset(s, t, r->u.error.context ? r->u.error.context
							 : "error");
	case PTD_REC_BLOCK:
	case PTD_REC_EVENT:
	case PTD_REC_FIRST_EXEC:
	case PTD_REC_COUNTERS:
	case PTD_REC_TRACE:
	case PTD_REC_TRACE_WITHDRAWN:
	case PTD_REC_NTYPES:
	case PTD_REC_IMAGE:
		break;
	}
	return 0;
}

int ptd_stacks_thread_end(struct ptd_stacks *s, pid_t tid)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < s->nth; i++)
		if (s->th[i].tid == tid)
			rc = close_all(s, &s->th[i]);
	return rc;
}

static int by_parent_name(const void *a, const void *b, void *ctx)
{
	const struct ptd_stack_node *nodes = ctx;
	const struct ptd_stack_node *x = &nodes[*(const uint32_t *)a];
	const struct ptd_stack_node *y = &nodes[*(const uint32_t *)b];
	int c;

	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	c = strcmp(x->name, y->name);
	return c ? c : (*(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1);
}

int ptd_stacks_finish(struct ptd_stacks *s)
{
	uint32_t *order;
	size_t n = s->nnodes;
	int rc = 0;

	if (s->finished)
		return 0;
	for (size_t i = 0; rc == 0 && i < s->nth; i++)
		rc = close_all(s, &s->th[i]);
	if (rc)
		return rc;
	/* a parent is made before its children: totals from the top */
	for (size_t i = n; i-- > 0;) {
		s->nodes[i].total += s->nodes[i].self;
		s->nodes[i].child = s->nodes[i].next = 0;
		if (i)
			s->nodes[s->nodes[i].parent].total += s->nodes[i].total;
	}
	order = n > 1 ? calloc(n - 1, sizeof(*order)) : NULL;
	if (n > 1 && !order)
		return -ENOMEM;
	for (size_t i = 1; i < n; i++)
		order[i - 1] = (uint32_t)i;
	if (n > 1)
		qsort_r(order, n - 1, sizeof(*order), by_parent_name, s->nodes);
	/* link each parent's children in name order, last first */
	for (size_t k = n - 1; k-- > 0;) {
		struct ptd_stack_node *nd = &s->nodes[order[k]];

		nd->next = s->nodes[nd->parent].child;
		s->nodes[nd->parent].child = order[k];
	}
	free(order);
	s->finished = true;
	return 0;
}

void ptd_stacks_set_clock(struct ptd_stacks *s, enum ptd_stacks_clock c)
{
	s->clock = c;
}

enum ptd_stacks_clock ptd_stacks_clock(const struct ptd_stacks *s)
{
	return s->clock;
}

uint64_t ptd_stacks_insns(const struct ptd_stacks *s)
{
	return s->insns;
}

uint64_t ptd_stacks_resets(const struct ptd_stacks *s)
{
	return s->resets;
}

size_t ptd_stacks_nnodes(const struct ptd_stacks *s)
{
	return s->nnodes;
}

const struct ptd_stack_node *ptd_stacks_node(const struct ptd_stacks *s,
					     uint32_t i)
{
	return i < s->nnodes ? &s->nodes[i] : NULL;
}
