/* SPDX-License-Identifier: MIT */
/*
 * call/return records against the ground truth.  Each program is traced
 * with the software PT source, decoded by `ptctl decode --records
 * insn,call --symbols`, and the call records of every thread are compared
 * with the ones this test derives on its own from the thread's truth (every
 * IP it executed, in order): each truth instruction is classified here from
 * its bytes (lib/x86), and a stack is kept by the rules of doc/protocol.md
 * ("call"), written again here, without decode/calls.c.  Where the decoder
 * learns of a signal from the trace's events, this test sees only the
 * truth: control going elsewhere than the instruction allows.  The insn
 * records give each IP's bytes and symbol, after their IPs are checked to
 * be the truth's.  The insn path (--path insn) must give the same call
 * records as the block path.
 *
 * Besides equality, each program must show what it is there for:
 * recursion depth, indirect calls, a longjmp unwinding, handlers entered
 * and left by sigreturn, an exception's unwinding, a tail call, threads.
 * A live session (ptd, `ptctl attach --capture --symbols`, `ptctl stream
 * --kinds insn,call`) is held to the same: its stack is kept across the
 * stream decoder's rounds.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "e2e/daemon-harness.h"
#include "e2e/run-cmd.h"
#include "e2e/subscribed.h"
#include "common/fileio.h"
#include "swpt/capture.h"
#include "x86/insn.h"

static char ptctl[1100];
static const char *workdir = tmpdir;

static struct run run_ptctl_args(const char *const *args)
{
	return run_cmd(ptctl, args, workdir);
}

/* An instruction as the insn records describe it. */
struct insn {
	uint64_t ip;
	uint8_t raw[16];
	size_t size;
	char *sym;		/* function name, without +0xOFF; or NULL */
	uint64_t symoff;
	char *module;
};

/* A call record, expected or decoded. */
struct crec {
	int kind;		/* 0 call, 1 return, 2 stack_reset */
	long tid;
	uint64_t depth, frames, from, to;
	uint64_t from2;		/* expected async call: the other resume IP
				 * the truth allows (or from) */
	bool tail, async, sigreturn, unwind, unmatched;
	char *sym;		/* of to */
};

struct thread {
	long tid;
	uint64_t *ips;		/* insn records' IPs */
	size_t n, cap;
	struct crec *calls;
	size_t ncalls, capcalls;
};

struct decoded {
	struct insn *tab;	/* open hash by ip */
	size_t tabcap, ntab;
	struct thread *th;
	size_t nth;
	unsigned errors;
};

static void *grow(void *p, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return p;
	*cap = *cap ? 2 * *cap : 1024;
	p = realloc(p, *cap * elem);
	if (!p)
		abort();
	return p;
}

static struct insn *tab_find(struct decoded *d, uint64_t ip, bool add)
{
	size_t mask = d->tabcap - 1, i = (ip * 0x9e3779b97f4a7c15ull) >> 40;

	for (i &= mask;; i = (i + 1) & mask) {
		if (d->tab[i].size == 0) {
			if (!add)
				return NULL;
			d->ntab++;
			d->tab[i].ip = ip;
			return &d->tab[i];
		}
		if (d->tab[i].ip == ip)
			return &d->tab[i];
	}
}

static uint64_t hex(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? strtoull(v->valuestring, NULL, 16) : 0;
}

static bool flag(const cJSON *o, const char *k)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k));
}

/* "name+0xOFF" into its name (malloc'd) and offset. */
static char *split_sym(const cJSON *o, uint64_t *off)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "sym");
	const char *plus;

	*off = 0;
	if (!cJSON_IsString(v))
		return NULL;
	plus = strrchr(v->valuestring, '+');
	if (!plus)
		return strdup(v->valuestring);
	*off = strtoull(plus + 1, NULL, 16);
	return strndup(v->valuestring, (size_t)(plus - v->valuestring));
}

static struct thread *thread_of(struct decoded *d, long tid)
{
	for (size_t i = 0; i < d->nth; i++)
		if (d->th[i].tid == tid)
			return &d->th[i];
	d->th = realloc(d->th, (d->nth + 1) * sizeof(*d->th));
	if (!d->th)
		abort();
	memset(&d->th[d->nth], 0, sizeof(*d->th));
	d->th[d->nth].tid = tid;
	return &d->th[d->nth++];
}

static void parse_line(struct decoded *d, const char *line)
{
	cJSON *o = cJSON_Parse(line);
	const cJSON *t = o ? cJSON_GetObjectItemCaseSensitive(o, "type") : NULL;
	const char *type = cJSON_IsString(t) ? t->valuestring : "";
	long tid = (long)cJSON_GetNumberValue(
		cJSON_GetObjectItemCaseSensitive(o, "tid"));
	struct thread *th;

	if (!o) {
		CHECK_FAIL_("unparsable line: %.200s", line);
		return;
	}
	if (!strcmp(type, "insn")) {
		uint64_t ip = hex(o, "ip");
		struct insn *in;

		th = thread_of(d, tid);
		th->ips = grow(th->ips, &th->cap, th->n, sizeof(*th->ips));
		th->ips[th->n++] = ip;
		in = tab_find(d, ip, true);
		if (!in->size) {
			const char *raw = cJSON_GetStringValue(
				cJSON_GetObjectItemCaseSensitive(o, "raw"));
			const char *mod = cJSON_GetStringValue(
				cJSON_GetObjectItemCaseSensitive(o,
								 "module"));

			for (size_t i = 0; raw && raw[2 * i] && i < 15; i++) {
				unsigned b;

				(void)sscanf(raw + 2 * i, "%2x", &b);
				in->raw[i] = (uint8_t)b;
				in->size = i + 1;
			}
			in->sym = split_sym(o, &in->symoff);
			in->module = mod ? strdup(mod) : NULL;
		}
		if (d->ntab * 2 > d->tabcap)
			CHECK_FAIL_("%s", "more distinct instructions than "
				    "the table holds");
	} else if (!strcmp(type, "call") || !strcmp(type, "return") ||
		   !strcmp(type, "stack_reset")) {
		struct crec *c;
		uint64_t off;

		th = thread_of(d, tid);
		th->calls = grow(th->calls, &th->capcalls, th->ncalls,
				 sizeof(*th->calls));
		c = &th->calls[th->ncalls++];
		memset(c, 0, sizeof(*c));
		c->kind = type[0] == 'c' ? 0 : type[0] == 'r' ? 1 : 2;
		c->tid = tid;
		c->depth = (uint64_t)cJSON_GetNumberValue(
			cJSON_GetObjectItemCaseSensitive(o, "depth"));
		c->frames = c->kind == 1 ? (uint64_t)cJSON_GetNumberValue(
			cJSON_GetObjectItemCaseSensitive(o, "frames")) : 0;
		c->from = hex(o, c->kind == 0 ? "site" : "from");
		c->to = hex(o, c->kind == 0 ? "target" : "to");
		c->tail = flag(o, "tail");
		c->async = flag(o, "async");
		c->sigreturn = flag(o, "sigreturn");
		c->unwind = flag(o, "unwind");
		c->unmatched = flag(o, "unmatched");
		c->sym = split_sym(o, &off);
	} else if (!strcmp(type, "error")) {
		d->errors++;
	}
	cJSON_Delete(o);
}

/* --- The stack this test keeps, from the truth. --- */

struct frame {
	uint64_t ret, ret2;	/* async: the resume IPs the truth allows */
	const char *site_sym, *site_mod;
	bool async;
};

struct model {
	struct frame f[4096];
	size_t n;
	struct crec *out;
	size_t nout, capout;
	long tid;
};

static bool func_eq(const char *s1, const char *m1, const char *s2,
		    const char *m2)
{
	return s1 && s2 && !strcmp(s1, s2) && m1 && m2 && !strcmp(m1, m2);
}

static struct crec *model_rec(struct model *m, int kind, uint64_t from,
			      uint64_t to, const struct insn *toi)
{
	struct crec *c;

	m->out = grow(m->out, &m->capout, m->nout, sizeof(*m->out));
	c = &m->out[m->nout++];
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->tid = m->tid;
	c->from = c->from2 = from;
	c->to = to;
	c->sym = toi && toi->sym ? strdup(toi->sym) : NULL;
	return c;
}

static void model_push(struct model *m, uint64_t ret, uint64_t ret2,
		       const struct insn *site, bool async)
{
	REQUIRE(m->n < sizeof(m->f) / sizeof(m->f[0]));
	m->f[m->n].ret = ret;
	m->f[m->n].ret2 = ret2;
	m->f[m->n].site_sym = site->sym;
	m->f[m->n].site_mod = site->module;
	m->f[m->n].async = async;
	m->n++;
}

static void model_pop(struct model *m, size_t k, const struct insn *p,
		      const struct insn *x, bool sigret, bool unwind,
		      bool unmatched)
{
	struct crec *c = model_rec(m, 1, p->ip, x->ip, x);

	c->depth = m->n;
	c->frames = m->n - k;
	c->sigreturn = sigret;
	c->unwind = unwind;
	c->unmatched = unmatched;
	m->n = k;
}

/* The topmost frame called from the function holding @x, or -1. */
static long model_caller(const struct model *m, const struct insn *x)
{
	for (size_t i = m->n; i-- > 0;)
		if (func_eq(m->f[i].site_sym, m->f[i].site_mod, x->sym,
			    x->module))
			return (long)i;
	return -1;
}

/* Control went from @p to @x, not where @p continues (@r1 or @r2). */
static void model_transfer(struct model *m, const struct insn *p,
			   const struct insn *x, uint64_t r1, uint64_t r2)
{
	struct crec *c;

	for (size_t i = m->n; i-- > 0;)
		if (m->f[i].async &&
		    (m->f[i].ret == x->ip || m->f[i].ret2 == x->ip)) {
			model_pop(m, i, p, x, true, false, false);
			return;
		}
	model_push(m, r1, r2, p, true);
	c = model_rec(m, 0, r1, x->ip, x);
	c->from2 = r2;
	c->depth = m->n;
	c->async = true;
}

static void model_step(struct model *m, const struct insn *p,
		       const struct insn *x)
{
	struct ptd_x86_insn xi;
	uint64_t fall = p->ip + p->size;
	struct crec *c;
	long k;

	if (ptd_x86_decode(p->raw, p->size, p->ip, ptem_64bit, &xi) < 0) {
		CHECK_FAIL_("0x%" PRIx64 ": not an instruction", p->ip);
		return;
	}
	switch (xi.kind) {
	case PTD_X86_OTHER:
	case PTD_X86_PTWRITE:
		if (x->ip != fall)
			model_transfer(m, p, x, fall, fall);
		return;
	case PTD_X86_COND:
		if (x->ip != fall && x->ip != xi.target)
			model_transfer(m, p, x, xi.target, fall);
		return;
	case PTD_X86_SYSCALL:
	case PTD_X86_INT:
		if (x->ip != fall)
			model_transfer(m, p, x, fall, fall);
		return;
	case PTD_X86_CALL_DIRECT:
	case PTD_X86_CALL_INDIRECT:
		model_push(m, fall, fall, p, false);
		c = model_rec(m, 0, p->ip, x->ip, x);
		c->depth = m->n;
		if (xi.kind == PTD_X86_CALL_DIRECT && x->ip != xi.target)
			CHECK_FAIL_("0x%" PRIx64 ": a signal at a call's "
				    "target: not modelled here", p->ip);
		return;
	case PTD_X86_RET:
		for (size_t i = m->n; i-- > 0;)
			if (!m->f[i].async && m->f[i].ret == x->ip) {
				model_pop(m, i, p, x, false, false, false);
				return;
			}
		k = model_caller(m, x);
		if (k >= 0)
			model_pop(m, (size_t)k, p, x, false, true, false);
		else if (m->n && m->f[m->n - 1].async)
			; /* the handler's ret into the signal trampoline */
		else
			model_pop(m, m->n ? m->n - 1 : 0, p, x, false, false,
				  true);
		return;
	case PTD_X86_JMP_DIRECT:
	case PTD_X86_JMP_INDIRECT:
		if (!x->sym || func_eq(p->sym, p->module, x->sym, x->module))
			return;
		if (x->symoff == 0) {
			c = model_rec(m, 0, p->ip, x->ip, x);
			c->depth = m->n;
			c->tail = true;
			return;
		}
		k = model_caller(m, x);
		if (k >= 0)
			model_pop(m, (size_t)k, p, x, false, true, false);
		return;
	case PTD_X86_FAR:
		return;
	}
}

static bool crec_eq(const struct crec *e, const struct crec *g)
{
	bool sym_eq = (!e->sym && !g->sym) ||
		      (e->sym && g->sym && !strcmp(e->sym, g->sym));

	return e->kind == g->kind && e->depth == g->depth &&
	       e->frames == g->frames &&
	       (e->from == g->from || e->from2 == g->from) && e->to == g->to &&
	       e->tail == g->tail && e->async == g->async &&
	       e->sigreturn == g->sigreturn && e->unwind == g->unwind &&
	       e->unmatched == g->unmatched && sym_eq;
}

static void crec_show(const char *what, const struct crec *c)
{
	fprintf(stderr,
		"  %s: %s depth %" PRIu64 " frames %" PRIu64 " from 0x%" PRIx64
		" to 0x%" PRIx64 " %s%s%s%s%s%s\n",
		what, c->kind == 0 ? "call" : c->kind == 1 ? "return" : "reset",
		c->depth, c->frames, c->from, c->to, c->sym ? c->sym : "-",
		c->tail ? " tail" : "", c->async ? " async" : "",
		c->sigreturn ? " sigreturn" : "", c->unwind ? " unwind" : "",
		c->unmatched ? " unmatched" : "");
}

/* What a program must show, counted over the expected records. */
struct expect {
	const char *name;
	size_t threads;
	const char *cpp;	/* nonzero: a C++ program */
	uint64_t min_depth_of;	/* deepest call to @deep_sym at least */
	const char *deep_sym;
	unsigned async, sigreturn, unwind, tail;
	const char *tail_sym;	/* a tail call lands here */
};

static const struct expect cases[] = {
	{ "recursion", 1, NULL, 100, "deep", 0, 0, 0, 0, NULL },
	{ "fnptr", 1, NULL, 1, "mul", 0, 0, 0, 0, NULL },
	{ "longjmp", 1, NULL, 15, "leaf", 0, 0, 5, 0, NULL },
	{ "signal", 1, NULL, 1, "handler", 4, 4, 0, 0, NULL },
	{ "except", 1, "c++", 3, "_ZL7throweri", 0, 0, 4, 0, NULL },
	{ "tailcall", 1, NULL, 1, "forward", 0, 0, 0, 5, "leaf" },
	{ "threads", 3, NULL, 1, "work", 0, 0, 0, 0, NULL },
};

static void check_thread(const struct expect *ex, struct decoded *d,
			 const struct thread *th, const uint64_t *truth,
			 size_t ntruth, unsigned *tot)
{
	struct model *m = calloc(1, sizeof(*m));
	size_t i, bad = 0;

	REQUIRE(m);
	m->tid = th->tid;
	CHECK_EQ_U64(th->n, ntruth);
	if (th->n != ntruth ||
	    memcmp(th->ips, truth, ntruth * sizeof(*truth))) {
		CHECK_FAIL_("%s: thread %ld: insn records are not the truth",
			    ex->name, th->tid);
		free(m);
		return;
	}
	for (i = 0; i + 1 < ntruth; i++) {
		const struct insn *p = tab_find(d, truth[i], false);
		const struct insn *x = tab_find(d, truth[i + 1], false);

		REQUIRE(p && x);
		model_step(m, p, x);
	}
	CHECK_EQ_U64(th->ncalls, m->nout);
	for (i = 0; i < m->nout && i < th->ncalls; i++) {
		if (crec_eq(&m->out[i], &th->calls[i]))
			continue;
		if (bad++ < 3) {
			CHECK_FAIL_("%s: thread %ld: call record %zu differs",
				    ex->name, th->tid, i);
			crec_show("expected", &m->out[i]);
			crec_show("decoded ", &th->calls[i]);
		}
	}
	CHECK_EQ_U64(bad, 0);
	for (i = 0; i < m->nout; i++) {
		const struct crec *c = &m->out[i];

		if (c->kind == 0 && c->sym && !strcmp(c->sym, ex->deep_sym) &&
		    c->depth > tot[0])
			tot[0] = (unsigned)c->depth;
		tot[1] += c->async;
		tot[2] += c->sigreturn;
		tot[3] += c->unwind;
		tot[4] += c->tail && c->sym && ex->tail_sym &&
			  !strcmp(c->sym, ex->tail_sym);
		tot[5] += c->unmatched;
		free(c->sym);
	}
	free(m->out);
	free(m);
}

/* The call, return and stack_reset lines of @out (malloc'd). */
static char *call_lines(const char *out)
{
	size_t n = out ? strlen(out) : 0, len = 0;
	char *res = malloc(n + 1);

	if (!res)
		return NULL;
	for (const char *p = out; p && *p;) {
		const char *e = strchr(p, '\n');
		size_t l = e ? (size_t)(e - p + 1) : strlen(p);

		if (is_type(p, "call") || is_type(p, "return") ||
		    is_type(p, "stack_reset")) {
			memcpy(res + len, p, l);
			len += l;
		}
		p += l;
	}
	res[len] = '\0';
	return res;
}

/* Parse @out (ptctl's JSON lines) into @d. */
static void parse_output(struct decoded *d, char *out)
{
	char *line;

	d->tabcap = 1u << 18;
	d->tab = calloc(d->tabcap, sizeof(*d->tab));
	REQUIRE(d->tab);
	for (line = out; line && *line;) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		parse_line(d, line);
		line = nl ? nl + 1 : NULL;
	}
}

static void decoded_free(struct decoded *d)
{
	for (size_t i = 0; i < d->tabcap; i++) {
		free(d->tab[i].sym);
		free(d->tab[i].module);
	}
	for (size_t i = 0; i < d->nth; i++) {
		for (size_t j = 0; j < d->th[i].ncalls; j++)
			free(d->th[i].calls[j].sym);
		free(d->th[i].calls);
		free(d->th[i].ips);
	}
	free(d->th);
	free(d->tab);
}

/* Every thread of the capture in @dir against the records in @d; the
 * counts of what the expected records show into @tot. */
static void check_capture(const struct expect *ex, const char *dir,
			  struct decoded *d, unsigned *tot)
{
	struct ptd_capture cap;
	struct ptd_diag diag = { "" };

	CHECK_EQ_U64(d->errors, 0);
	if (ptd_capture_load(dir, &cap, &diag) < 0) {
		CHECK_FAIL_("%s: loading the capture: %s", ex->name, diag.msg);
		return;
	}
	if (ex->threads)
		CHECK_EQ_U64(cap.nthreads, ex->threads);
	for (size_t t = 0; t < cap.nthreads; t++) {
		uint64_t *ips = NULL;
		size_t n = 0;
		const struct thread *th = thread_of(d, cap.threads[t].tid);

		if (ptd_capture_read_truth(&cap, t, &ips, &n, &diag) < 0) {
			CHECK_FAIL_("%s: truth: %s", ex->name, diag.msg);
			continue;
		}
		check_thread(ex, d, th, ips, n, tot);
		free(ips);
	}
	fprintf(stderr,
		"%s: %zu threads, deepest %s %u, async %u, sigreturn %u, "
		"unwind %u, tail %u, unmatched %u\n",
		ex->name, cap.nthreads, ex->deep_sym, tot[0], tot[1], tot[2],
		tot[3], tot[4], tot[5]);
	ptd_capture_fini(&cap);
}

static void run_case(const struct expect *ex)
{
	char prog[1200], dir[512];
	struct decoded d = { 0 };
	unsigned tot[6] = { 0 };
	struct run r;

	(void)snprintf(prog, sizeof(prog), "%s/prog-%s", progs, ex->name);
	if (access(prog, X_OK) != 0) {
		/* only a C++ program may be absent (meson built none
		 * without a C++ compiler) */
		if (ex->cpp)
			fprintf(stderr, "SKIP %s: %s not built: no C++ "
				"compiler\n", ex->name, prog);
		else
			CHECK_FAIL_("%s is not built", prog);
		return;
	}
	(void)snprintf(dir, sizeof(dir), "%s/%s", workdir, ex->name);
	{
		const char *args[] = { "trace", "--out", dir, "--start",
				       "entry", "--no-decode",
				       "--quiet-target", "--", prog, NULL };

		r = run_ptctl_args(args);
	}
	if (r.status != 0) {
		CHECK_FAIL_("%s: ptctl trace: %d: %s", ex->name, r.status,
			    r.err ? r.err : "");
		run_free(&r);
		return;
	}
	run_free(&r);
	{
		const char *args[] = { "decode", "--records", "insn,call",
				       "--symbols", dir, NULL };

		r = run_ptctl_args(args);
	}
	CHECK_EQ_INT(r.status, 0);
	/* the insn path (pt_insn_next) gives the same call records */
	{
		const char *args[] = { "decode", "--records", "call",
				       "--symbols", "--path", "insn", dir,
				       NULL };
		struct run ri = run_ptctl_args(args);
		char *a = call_lines(r.out), *b = call_lines(ri.out);

		CHECK_EQ_INT(ri.status, 0);
		CHECK(a && b && strlen(a) > 0 && !strcmp(a, b));
		free(a);
		free(b);
		run_free(&ri);
	}
	parse_output(&d, r.out);
	run_free(&r);
	check_capture(ex, dir, &d, tot);
	CHECK(tot[0] >= ex->min_depth_of);
	CHECK_EQ_U64(tot[1], ex->async);
	CHECK_EQ_U64(tot[2], ex->sigreturn);
	CHECK(tot[3] >= ex->unwind);
	CHECK(tot[4] >= ex->tail);
	if (!ex->unwind)
		CHECK_EQ_U64(tot[3], 0);
	decoded_free(&d);
}

/* A live session of prog-attach (threads come and go, nanosleep, the
 * vDSO), attached while it waits to exec: the stream's call records equal
 * the stack kept from the session's capture. */
static void test_live(void)
{
	static const struct expect live = { "live", 0, NULL, 1, "collatz",
					    0, 0, 0, 0, NULL };
	struct daemon dm;
	struct decoded d = { 0 };
	unsigned tot[6] = { 0 };
	char pidarg[32], capdir[700], attach_out[700], stream_out[700];
	char sidarg[32], *text = NULL;
	const char *attach_args[] = { "attach", pidarg, "--capture", capdir,
				      "--symbols", NULL };
	const char *stream_args[] = { "stream", sidarg, "--kinds",
				      "insn,call", "--symbols", NULL };
	size_t len = 0;
	pid_t t, streamer;
	int go;

	REQUIRE(daemon_start(&dm, "live", "subscriber_queue_size = 1G\n"));
	t = spawn_target(0.3, &go);
	REQUIRE(t > 0);
	(void)snprintf(pidarg, sizeof(pidarg), "%ld", (long)t);
	(void)snprintf(capdir, sizeof(capdir), "%s/capture", dm.dir);
	(void)snprintf(attach_out, sizeof(attach_out), "%s/attach.out",
		       dm.dir);
	(void)snprintf(stream_out, sizeof(stream_out), "%s/stream.out",
		       dm.dir);
	CHECK_EQ_INT(wait_exit(ptctl_spawn(&dm, attach_out, NULL,
					   attach_args)), 0);
	REQUIRE(ptd_file_read_all(attach_out, 4096, &text, &len) == 0);
	(void)snprintf(sidarg, sizeof(sidarg), "%.*s",
		       (int)strcspn(text, "\n"), text);
	free(text);
	text = NULL;
	streamer = ptctl_spawn(&dm, stream_out, NULL, stream_args);
	CHECK(wait_subscribed(dm.sock, sidarg));
	release(&go);
	CHECK_EQ_INT(wait_exit(streamer), 0);
	CHECK_EQ_INT(wait_target(t, 120000), 0);
	REQUIRE(ptd_file_read_all(stream_out, 1u << 30, &text, &len) == 0);
	parse_output(&d, text);
	free(text);
	check_capture(&live, capdir, &d, tot);
	CHECK(tot[0] >= 1);
	CHECK_EQ_U64(tot[1], 1);	/* sh's exec of prog-attach */
	decoded_free(&d);
	CHECK_EQ_INT(daemon_stop(&dm), 0);
}

static void test_recursion(void) { run_case(&cases[0]); }
static void test_fnptr(void) { run_case(&cases[1]); }
static void test_longjmp(void) { run_case(&cases[2]); }
static void test_signal(void) { run_case(&cases[3]); }
static void test_exception(void) { run_case(&cases[4]); }
static void test_tailcall(void) { run_case(&cases[5]); }
static void test_threads(void) { run_case(&cases[6]); }

int main(void)
{
	harness_setup("/tmp/ptd-calls-XXXXXX");
	(void)snprintf(ptctl, sizeof(ptctl), "%s/daemon/ptctl", build_root);
	RUN(test_recursion);
	RUN(test_fnptr);
	RUN(test_longjmp);
	RUN(test_signal);
	RUN(test_exception);
	RUN(test_tailcall);
	RUN(test_threads);
	RUN(test_live);
	return harness_done();
}
