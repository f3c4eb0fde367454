/* SPDX-License-Identifier: MIT */
/*
 * first_exec and counters records (decode/counters.h) against the ground
 * truth.  Each program is traced with the software PT source and decoded
 * by `ptctl decode --records insn,first_exec,counters --top 0 --symbols`;
 * then:
 *  - every instruction's first insn record comes right after a first_exec
 *    record of the same instruction (ip, mode, isid, bytes), and no other
 *    insn record has one before it: a first_exec precedes exactly the
 *    first execution of its instruction;
 *  - the IPs of the first_exec records are exactly the distinct IPs of the
 *    truth (every thread's), each once in programs whose code never
 *    changes; where it changes (prog-jit rewrites its code in place,
 *    prog-dlopen maps its library again) the new code has a first_exec of
 *    its own;
 *  - the instruction counters equal the counts of each IP in the truth,
 *    their total the truth's length; the block counters are runs of
 *    instructions with the block's count, and the function counters sum
 *    their instructions' counts by symbol;
 *  - the instruction path, and the parallel decoder on both paths, give
 *    the same bytes;
 *  - the library decode through an instruction cache of 16 entries
 *    (cleared again and again) gives the same first executions and the
 *    truth's counts.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "e2e/run-cmd.h"
#include "aspace/iscache.h"
#include "common/fileio.h"
#include "decode/counters.h"
#include "decode/insncache.h"
#include "swpt/capdecode.h"
#include "swpt/capture.h"

static char ptctl[512];
static const char *progs;
static char workdir[256];

struct expect {
	const char *name;
	const char *arg;	/* NULL: none; "LIB": the test library */
	bool once;		/* code never changes: one first_exec an IP */
	bool jit;		/* prog-jit: the rewritten mov */
	int exit_code;
	bool remap;		/* prog-dlopen: its library mapped again */
};

static const struct expect cases[] = {
	{ "hello", NULL, true, false, 21 },
	{ "fnptr", NULL, true, false, 0 },
	{ "jumptable", NULL, true, false, 0 },
	{ "signal", NULL, true, false, 0 },
	{ "vdso", NULL, true, false, 0 },
	{ "threads", NULL, true, false, 0 },
	/* the library mapped again where it was: the same file at the same
	 * address is the same isid, but another mapping of it, so its
	 * instructions are first executed again ("map":2), each of them,
	 * since both rounds run the same library code */
	{ "dlopen", "LIB", false, false, 0, true },
	/* the code rewritten in place, snapshotted again: new sections,
	 * new first executions (the new mov's bytes, and the ret's) */
	{ "jit", NULL, false, true, 0, false },
};

/* --- A small open hash by 64-bit key. --- */

struct cnt {
	uint64_t key;	/* ip, or a key made of more (see ikey) */
	uint64_t n;	/* executions */
	uint64_t fe;	/* first_exec records */
	bool used;
};

struct map {
	struct cnt *v;
	size_t cap, n;
};

static struct cnt *map_get(struct map *m, uint64_t key)
{
	size_t i;

	if ((m->n + 1) * 2 > m->cap) {
		struct map g = { calloc(m->cap ? 2 * m->cap : 4096,
					sizeof(struct cnt)),
				 m->cap ? 2 * m->cap : 4096, 0 };

		if (!g.v)
			abort();
		for (size_t k = 0; k < m->cap; k++) {
			if (m->v[k].used)
				*map_get(&g, m->v[k].key) = m->v[k];
		}
		free(m->v);
		*m = g;
	}
	for (i = (key * 0x9e3779b97f4a7c15ull) >> 40 & (m->cap - 1);;
	     i = (i + 1) & (m->cap - 1)) {
		if (!m->v[i].used) {
			m->v[i].used = true;
			m->v[i].key = key;
			m->n++;
			return &m->v[i];
		}
		if (m->v[i].key == key)
			return &m->v[i];
	}
}

static struct cnt *map_find(const struct map *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	for (size_t i = (key * 0x9e3779b97f4a7c15ull) >> 40 & (m->cap - 1);;
	     i = (i + 1) & (m->cap - 1)) {
		if (!m->v[i].used)
			return NULL;
		if (m->v[i].key == key)
			return &m->v[i];
	}
}

/* splitmix64's finalizer: every input bit reaches every output bit */
static uint64_t mix(uint64_t h)
{
	h += 0x9e3779b97f4a7c15ull;
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	return h ^ (h >> 31);
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = mix(h ^ (uint8_t)*s);
	return mix(h);
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static uint64_t hex(const cJSON *o, const char *k)
{
	const char *s = str(o, k);

	return s ? strtoull(s, NULL, 16) : 0;
}

static long num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? (long)v->valuedouble : -1;
}

/* An instruction: ip, mode, isid and bytes (64 bits of a hash). */
static uint64_t ikey(const cJSON *o)
{
	uint64_t h = hash_str(mix(hex(o, "ip")), str(o, "raw"));

	h = hash_str(h, str(o, "mode"));
	return mix(h ^ (uint64_t)num(o, "isid"));
}

/* Which code a counter's ip is of: its isid and mapping, to xor with
 * the ip. */
static uint64_t at(const cJSON *o)
{
	long m = num(o, "map");

	return (uint64_t)num(o, "isid") << 56 ^ (uint64_t)(m < 0 ? 1 : m) << 48;
}

/* A function: module and symbol name (@off: @sym ends in +0xOFF, which
 * is cut; a name may hold a '+' itself: "*ABS*+0x9f1c0@plt"). */
static uint64_t fkey(const char *module, const char *sym, bool off)
{
	char name[1024];
	const char *plus = sym && off ? strrchr(sym, '+') : NULL;

	(void)snprintf(name, sizeof(name), "%.*s",
		       plus ? (int)(plus - sym) : (int)sizeof(name) - 1,
		       sym ? sym : "");
	return hash_str(hash_str(7, module), name);
}

/* What the decode says, and what the truth says. */
struct seen {
	struct map insn;	/* by ikey: insn records, first_exec records */
	struct map fe_ip;	/* by ip: first_exec records */
	struct map cnt_ikey;	/* by ikey: the instruction counters */
	struct map cnt_ip;	/* by ip: the instruction counters, summed */
	struct map cnt_at;	/* by ip ^ at(): the instruction counters */
	struct map fn_insn;	/* by fkey: insn records */
	struct map fn_cnt;	/* by fkey: the function counters */
	uint64_t ninsn, nfe, total, jit_movs;
	/* first_exec records of a second mapping ("map" > 1), of the test
	 * library's first mapping, and of a second mapping elsewhere */
	uint64_t nfe_remap, nfe_lib, remap_bad;
	unsigned order_bad, blocks_bad, ncnt_insn, nblocks, nfuncs;
	uint64_t *fe_seq;	/* first_exec IPs in order */
	size_t nfe_seq, capfe;
};

static void seen_free(struct seen *s)
{
	free(s->insn.v);
	free(s->fe_ip.v);
	free(s->cnt_ikey.v);
	free(s->cnt_ip.v);
	free(s->cnt_at.v);
	free(s->fn_insn.v);
	free(s->fn_cnt.v);
	free(s->fe_seq);
}

static void fe_push(struct seen *s, uint64_t ip)
{
	if (s->nfe_seq == s->capfe) {
		s->capfe = s->capfe ? 2 * s->capfe : 1024;
		s->fe_seq = realloc(s->fe_seq, s->capfe * sizeof(uint64_t));
		if (!s->fe_seq)
			abort();
	}
	s->fe_seq[s->nfe_seq++] = ip;
}

static void parse(struct seen *s, char *text)
{
	cJSON *prev = NULL;
	char *line = text;
	struct {
		uint64_t ip, end_ip, count, at;
		long isid;
	} *blk = NULL;
	size_t nblk = 0;

	while (line && *line) {
		char *nl = strchr(line, '\n');
		cJSON *o;
		const char *type;

		if (nl)
			*nl = '\0';
		o = cJSON_Parse(line);
		if (!o) {
			CHECK_FAIL_("not JSON: %.200s", line);
			line = nl ? nl + 1 : NULL;
			continue;
		}
		line = nl ? nl + 1 : NULL;
		type = str(o, "type");
		if (type && !strcmp(type, "first_exec")) {
			struct cnt *c = map_get(&s->insn, ikey(o));
			long m = num(o, "map");
			bool lib = str(o, "module") &&
				   strstr(str(o, "module"), "libptdtarget");

			/* before the first execution only, once a mapping
			 * of its code (the insn record right after it is
			 * checked below) */
			if (m < 0 ? c->n || c->fe : m <= 1 || c->fe != (uint64_t)m - 1)
				s->order_bad++;
			if (m > 1) {
				s->nfe_remap++;
				if (!lib)
					s->remap_bad++;
			} else if (lib) {
				s->nfe_lib++;
			}
			c->fe++;
			map_get(&s->fe_ip, hex(o, "ip"))->fe++;
			fe_push(s, hex(o, "ip"));
			s->nfe++;
			if (str(o, "raw") && !strcmp(str(o, "raw"), "b807000000"))
				s->jit_movs++;
		} else if (type && !strcmp(type, "insn")) {
			struct cnt *c = map_get(&s->insn, ikey(o));
			bool after_fe = prev && str(prev, "type") &&
					!strcmp(str(prev, "type"), "first_exec") &&
					ikey(prev) == ikey(o);

			/* the first execution right after its first_exec (of
			 * a later mapping: an execution after it) */
			if (!c->n ? !after_fe : after_fe && c->fe < 2)
				s->order_bad++;
			/* a first_exec right before another instruction */
			if (!after_fe && prev && str(prev, "type") &&
			    !strcmp(str(prev, "type"), "first_exec"))
				s->order_bad++;
			c->n++;
			s->ninsn++;
			map_get(&s->fn_insn, fkey(str(o, "module"),
						  str(o, "sym"), true))->n++;
		} else if (type && !strcmp(type, "counters")) {
			const char *of = str(o, "of");
			uint64_t n = hex(o, "count");

			if (!of) {
				CHECK_FAIL_("%s", "counters without \"of\"");
			} else if (!strcmp(of, "total")) {
				s->total = n;
				CHECK_EQ_U64(hex(o, "uncounted"), 0);
			} else if (!strcmp(of, "insn")) {
				map_get(&s->cnt_ikey, ikey(o))->n += n;
				map_get(&s->cnt_ip, hex(o, "ip"))->n += n;
				map_get(&s->cnt_at, hex(o, "ip") ^ at(o))->n = n;
				s->ncnt_insn++;
			} else if (!strcmp(of, "block")) {
				blk = realloc(blk, (nblk + 1) * sizeof(*blk));
				if (!blk)
					abort();
				blk[nblk].ip = hex(o, "ip");
				blk[nblk].end_ip = hex(o, "end_ip");
				blk[nblk].count = n;
				blk[nblk].isid = num(o, "isid");
				blk[nblk].at = at(o);
				nblk++;
			} else if (!strcmp(of, "function")) {
				map_get(&s->fn_cnt,
					fkey(str(o, "module"),
					     str(o, "function"), false))->n += n;
				s->nfuncs++;
			}
		}
		cJSON_Delete(prev);
		prev = o;
	}
	cJSON_Delete(prev);
	/* a block: its first and last instruction executed as often */
	s->nblocks = (unsigned)nblk;
	for (size_t i = 0; i < nblk; i++) {
		uint64_t isid = blk[i].at;
		const struct cnt *a = map_find(&s->cnt_at, blk[i].ip ^ isid);
		const struct cnt *b = map_find(&s->cnt_at, blk[i].end_ip ^ isid);

		if (blk[i].isid > 0 &&
		    (!a || !b || a->n != blk[i].count || b->n != blk[i].count))
			s->blocks_bad++;
	}
	free(blk);
}

/* The decoded records against each other. */
static void check_self(const struct seen *s)
{
	uint64_t nlater = 0;

	CHECK_EQ_U64(s->order_bad, 0);
	CHECK_EQ_U64(s->blocks_bad, 0);
	CHECK(s->nblocks > 0);
	CHECK_EQ_U64(s->total, s->ninsn);
	/* a counter per mapping of an instruction */
	CHECK_EQ_U64(s->ncnt_insn, s->insn.n + s->nfe_remap);
	/* each instruction's counters sum its insn records; each has a
	 * first_exec per mapping */
	for (size_t i = 0; i < s->insn.cap; i++) {
		const struct cnt *c = &s->insn.v[i];
		const struct cnt *k;

		if (!c->used)
			continue;
		k = map_find(&s->cnt_ikey, c->key);
		CHECK(k && k->n == c->n);
		CHECK(c->fe >= 1);
		nlater += c->fe - 1;
	}
	CHECK_EQ_U64(nlater, s->nfe_remap);
	/* each function's counter sums its insn records */
	CHECK_EQ_U64(s->nfuncs, s->fn_insn.n);
	for (size_t i = 0; i < s->fn_insn.cap; i++) {
		const struct cnt *c = &s->fn_insn.v[i];
		const struct cnt *k;

		if (!c->used)
			continue;
		k = map_find(&s->fn_cnt, c->key);
		CHECK(k && k->n == c->n);
	}
}

/* The truth of every thread of @dir: executions by IP into @m (and its
 * total). */
static uint64_t truth_counts(const struct expect *ex, const char *dir,
			     struct map *m)
{
	struct ptd_capture cap;
	struct ptd_diag diag = { "" };
	uint64_t total = 0;

	if (ptd_capture_load(dir, &cap, &diag) < 0) {
		CHECK_FAIL_("%s: %s", dir, diag.msg);
		return 0;
	}
	/* the program did what it is there for */
	CHECK(cap.exited && cap.exit_code == ex->exit_code);
	for (size_t t = 0; t < cap.nthreads; t++) {
		uint64_t *ips = NULL;
		size_t n = 0;

		if (ptd_capture_read_truth(&cap, t, &ips, &n, &diag) < 0) {
			CHECK_FAIL_("%s: truth: %s", dir, diag.msg);
			continue;
		}
		for (size_t i = 0; i < n; i++)
			map_get(m, ips[i])->n++;
		total += n;
		free(ips);
	}
	ptd_capture_fini(&cap);
	return total;
}

/* Counts by IP (@by_ip) and first executions (@fe_ip) against the
 * truth's (@truth). */
static void check_truth(const struct expect *ex, const struct map *truth,
			const struct map *by_ip, const struct map *fe_ip,
			uint64_t nfe, uint64_t nremap)
{
	CHECK_EQ_U64(by_ip->n, truth->n);
	CHECK_EQ_U64(fe_ip->n, truth->n);
	if (ex->once)
		CHECK_EQ_U64(nfe, truth->n);
	else if (ex->remap)	/* one more for each of a second mapping */
		CHECK(nremap > 0 && nfe == truth->n + nremap);
	else
		CHECK(nfe > truth->n);	/* new code, new first_exec */
	if (!ex->remap)
		CHECK_EQ_U64(nremap, 0);
	for (size_t i = 0; i < truth->cap; i++) {
		const struct cnt *c = &truth->v[i];
		const struct cnt *k, *f;

		if (!c->used)
			continue;
		k = map_find(by_ip, c->key);
		f = map_find(fe_ip, c->key);
		if (!k || k->n != c->n || !f || !f->fe) {
			CHECK_FAIL_("%s: ip 0x%" PRIx64 ": truth %" PRIu64
				    " executions, counted %" PRIu64
				    ", %" PRIu64 " first_exec",
				    ex->name, c->key, c->n, k ? k->n : 0,
				    f ? f->fe : 0);
			return;
		}
	}
}

/* --- The library decode through a tiny instruction cache. --- */

struct libsink {
	uint64_t *seq;
	size_t n, cap, nremap;
	struct ptd_counters *t;
	struct map by_ip;
};

static int lib_record(void *ctx, const struct ptd_record *r)
{
	struct libsink *ls = ctx;

	if (r->type == PTD_REC_FIRST_EXEC) {
		if (ls->n == ls->cap) {
			ls->cap = ls->cap ? 2 * ls->cap : 1024;
			ls->seq = realloc(ls->seq, ls->cap * sizeof(uint64_t));
			if (!ls->seq)
				abort();
		}
		ls->seq[ls->n++] = r->u.insn.ip;
		if (r->u.insn.gen > 1)
			ls->nremap++;
	}
	if (r->type == PTD_REC_COUNTERS &&
	    r->u.counters.of == PTD_COUNTERS_INSN)
		map_get(&ls->by_ip, r->u.counters.insn.ip)->n +=
			r->u.counters.count;
	return 0;
}

static void check_tiny_cache(const struct expect *ex, const char *dir,
			     const struct seen *s, const struct map *truth)
{
	struct ptd_capture cap;
	struct ptd_diag diag = { "" };
	struct ptd_iscache *ic = NULL;
	struct ptd_insncache *icache = NULL;
	struct ptd_insncache_stats ist;
	struct ptd_decode_opts o;
	struct libsink ls = { 0 };
	struct map fe = { 0 };

	REQUIRE(ptd_capture_load(dir, &cap, &diag) == 0);
	REQUIRE(ptd_iscache_new(&ic) == 0);
	REQUIRE(ptd_insncache_new(16, &icache) == 0);
	REQUIRE(ptd_counters_new(0, &ls.t) == 0);
	memset(&o, 0, sizeof(o));
	o.path = PTD_PATH_BLOCK;
	o.cpu = cap.cpu;
	o.want = PTD_REC_BIT(PTD_REC_FIRST_EXEC) |
		 PTD_REC_BIT(PTD_REC_COUNTERS) | PTD_REC_BIT(PTD_REC_ERROR);
	o.counters = ls.t;
	for (size_t t = 0; t < cap.nthreads; t++) {
		struct ptd_decode_stats st;

		CHECK_EQ_INT(ptd_capture_decode_thread(&cap, t, &o, ic, icache,
						       NULL, lib_record, &ls,
						       &st, &diag),
			     0);
		CHECK_EQ_U64(st.errors, 0);
	}
	CHECK_EQ_INT(ptd_counters_emit(ls.t, 0, cap.pid, 0, lib_record, &ls),
		     0);
	ptd_insncache_get_stats(icache, &ist);
	fprintf(stderr, "%s: 16-entry cache: %" PRIu64 " clears, %zu "
		"first executions\n", ex->name, ist.clears, ls.n);
	CHECK(ist.clears > 10);
	/* the same first executions, in the same order, as ptctl's */
	CHECK_EQ_U64(ls.n, s->nfe_seq);
	CHECK(ls.n == s->nfe_seq &&
	      !memcmp(ls.seq, s->fe_seq, ls.n * sizeof(uint64_t)));
	for (size_t i = 0; i < ls.n; i++)
		map_get(&fe, ls.seq[i])->fe++;
	check_truth(ex, truth, &ls.by_ip, &fe, ls.n, ls.nremap);
	free(fe.v);
	free(ls.by_ip.v);
	free(ls.seq);
	ptd_counters_free(ls.t);
	ptd_insncache_free(icache);
	ptd_iscache_free(ic);
	ptd_capture_fini(&cap);
}

/* ptctl decode EXTRA... --records insn,first_exec,counters --top 0
 * --symbols DIR: stdout (malloc'd), or NULL */
static char *decode(const char *dir, const char *const *extra)
{
	const char *args[24];
	size_t n = 0;
	struct run r;
	char *out;

	args[n++] = "decode";
	for (; extra && *extra; extra++)
		args[n++] = *extra;
	args[n++] = "--records";
	args[n++] = "insn,first_exec,counters";
	args[n++] = "--top";
	args[n++] = "0";
	args[n++] = "--symbols";
	args[n++] = dir;
	args[n] = NULL;
	r = run_cmd(ptctl, args, workdir);
	if (r.status != 0)
		CHECK_FAIL_("ptctl decode %s %s: %d: %s",
			    extra && extra[0] ? extra[0] : "", dir, r.status,
			    r.err ? r.err : "");
	out = r.out;
	r.out = NULL;
	run_free(&r);
	return out;
}

/* The records of @text without its hello and bye lines (malloc'd). */
static char *body_lines(const char *text)
{
	char *out = malloc(strlen(text) + 1), *p = out;

	if (!out)
		abort();
	while (*text) {
		const char *nl = strchr(text, '\n');
		size_t n = nl ? (size_t)(nl - text) + 1 : strlen(text);

		static const char hello[] = "{\"type\":\"hello\"";
		static const char bye[] = "{\"type\":\"bye\"";

		if (strncmp(text, hello, sizeof(hello) - 1) &&
		    strncmp(text, bye, sizeof(bye) - 1)) {
			memcpy(p, text, n);
			p += n;
		}
		text += n;
	}
	*p = '\0';
	return out;
}

/* The capture exported as perf.data and as an LLDB bundle: the same
 * first_exec and counters lines from each reader.  (Not for prog-jit: an
 * LLDB bundle has one static image, and perf.data names a snapshot by
 * its file.) */
static void check_exports(const char *dir)
{
	static const char *const fmt[] = { "perf-data", "lldb" };
	char *want = decode(dir, NULL), *w = want ? body_lines(want) : NULL;

	REQUIRE(w);
	for (size_t i = 0; i < 2; i++) {
		char out[700];
		const char *args[] = { "export", "--format", fmt[i], dir, out,
				       NULL };
		struct run r;
		char *got, *g;

		(void)snprintf(out, sizeof(out), "%s.%s", dir, fmt[i]);
		r = run_cmd(ptctl, args, workdir);
		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
		got = decode(out, NULL);
		g = got ? body_lines(got) : NULL;
		if (!g || strcmp(w, g))
			CHECK_FAIL_("exported as %s: other first_exec or "
				    "counters lines", fmt[i]);
		free(g);
		free(got);
	}
	free(w);
	free(want);
}

static void run_case(const struct expect *ex)
{
	static const char *const insn_path[] = { "--path", "insn", NULL };
	static const char *const par_insn[] = { "--jobs", "2", "--part-size",
						"1", "--path", "insn", NULL };
	static const char *const par_blk[] = { "--jobs", "2", NULL };
	char prog[700], dir[600], lib[700];
	struct seen s = { 0 };
	struct map truth = { 0 };
	uint64_t ntruth;
	char *out;
	struct run r;

	(void)snprintf(prog, sizeof(prog), "%s/prog-%s", progs, ex->name);
	if (access(prog, X_OK) != 0) {
		CHECK_FAIL_("%s is not built", prog);
		return;
	}
	(void)snprintf(dir, sizeof(dir), "%s/%s", workdir, ex->name);
	(void)snprintf(lib, sizeof(lib), "%s/libptdtarget.so", progs);
	{
		const char *arg = ex->arg && !strcmp(ex->arg, "LIB") ? lib
								     : ex->arg;
		const char *args[] = { "trace", "--out", dir, "--start",
				       "entry", "--no-decode",
				       "--quiet-target", "--", prog, arg,
				       NULL };

		r = run_cmd(ptctl, args, workdir);
	}
	if (r.status != 0) {
		CHECK_FAIL_("%s: ptctl trace: %d: %s", ex->name, r.status,
			    r.err ? r.err : "");
		run_free(&r);
		return;
	}
	run_free(&r);
	out = decode(dir, NULL);
	REQUIRE(out);
	/* the same bytes from the instruction path and the parallel
	 * decoder on both paths */
	{
		const char *const *other[] = { insn_path, par_insn, par_blk };

		for (size_t i = 0; i < 3; i++) {
			char *o2 = decode(dir, other[i]);

			if (!o2 || strcmp(out, o2))
				CHECK_FAIL_("%s: %s %s gives other records",
					    ex->name, other[i][0],
					    other[i][1]);
			free(o2);
		}
	}
	{
		char path[700];

		/* kept for a look when a check fails (the workdir stays) */
		(void)snprintf(path, sizeof(path), "%s/%s.jsonl", workdir,
			       ex->name);
		(void)ptd_file_write_atomic(path, out, strlen(out));
	}
	parse(&s, out);
	free(out);
	check_self(&s);
	ntruth = truth_counts(ex, dir, &truth);
	CHECK_EQ_U64(s.ninsn, ntruth);
	check_truth(ex, &truth, &s.cnt_ip, &s.fe_ip, s.nfe, s.nfe_remap);
	/* a second mapping only of the library, each of its instructions */
	CHECK_EQ_U64(s.remap_bad, 0);
	if (ex->remap)
		CHECK_EQ_U64(s.nfe_remap, s.nfe_lib);
	if (ex->jit) {	/* the rewritten mov $7,%eax ran as new code */
		CHECK_EQ_U64(s.jit_movs, 1);
		CHECK_EQ_U64(s.nfe, truth.n + 2);
	}
	fprintf(stderr, "%s: %" PRIu64 " executions, %zu distinct IPs, %"
		PRIu64 " first_exec, %u blocks, %u functions\n",
		ex->name, ntruth, truth.n, s.nfe, s.nblocks, s.nfuncs);
	check_tiny_cache(ex, dir, &s, &truth);
	if (!strcmp(ex->name, "hello"))
		check_exports(dir);
	free(truth.v);
	seen_free(&s);
}

static void test_hello(void) { run_case(&cases[0]); }
static void test_fnptr(void) { run_case(&cases[1]); }
static void test_jumptable(void) { run_case(&cases[2]); }
static void test_signal(void) { run_case(&cases[3]); }
static void test_vdso(void) { run_case(&cases[4]); }
static void test_threads(void) { run_case(&cases[5]); }
static void test_dlopen(void) { run_case(&cases[6]); }
static void test_jit(void) { run_case(&cases[7]); }

int main(void)
{
	const char *root = getenv("PTD_BUILD_ROOT");
	const char *tmp = getenv("TMPDIR");

	progs = getenv("PTD_TEST_PROGS");
	if (!root || !progs)
		SKIP_ALL("PTD_BUILD_ROOT/PTD_TEST_PROGS not set (run through "
			 "meson test)");
	(void)snprintf(ptctl, sizeof(ptctl), "%s/daemon/ptctl", root);
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-firstexec-XXXXXX",
		       tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir))
		return 1;
	RUN(test_hello);
	RUN(test_fnptr);
	RUN(test_jumptable);
	RUN(test_signal);
	RUN(test_vdso);
	RUN(test_threads);
	RUN(test_dlopen);
	RUN(test_jit);
	if (!check_failures)
		(void)ptd_rm_rf(workdir);
	else
		fprintf(stderr, "kept %s\n", workdir);
	return check_done();
}
