/* SPDX-License-Identifier: MIT */
/*
 * trace and trace_withdrawn records (decode/traces.h) against the ground
 * truth.  prog-jitloop runs a loop of its own, then a loop in JIT code,
 * rewrites that code in place and runs it again.  It is traced with the
 * software PT source and decoded by `ptctl decode --records
 * insn,first_exec,trace` (at the default threshold, 50, and at 10); then:
 *  - the insn records are the truth's instructions, in order;
 *  - each trace's blocks are the blocks the truth ran from the head's
 *    last execution before the trace record up to the record (a block
 *    split after every control transfer and where the flow is not
 *    sequential), its ninsn their instructions;
 *  - the program's loop and the JIT loop form their traces exactly when
 *    their head is entered by its backward branch for the threshold + 1st
 *    time (the threshold-th counted execution is recorded);
 *  - the JIT trace is withdrawn once, when its page stops being
 *    executable (the mprotect before the rewrite), and forms again on
 *    the new code (its first execution right after its first_exec) after
 *    the threshold;
 *  - prog-dlopen's library loop forms a trace, withdrawn at the dlclose
 *    ("unmapped"), and forms again on the library mapped again;
 *  - the instruction path, and the parallel decoder on both paths, give
 *    the same bytes.
 */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "e2e/run-cmd.h"
#include "common/fileio.h"
#include "swpt/capture.h"

static char ptctl[512];
static const char *progs;
static char workdir[256];

struct insn {
	uint64_t ip;
	unsigned size;
	bool branch;	/* jump, cond_jump, call: may make a head */
	bool other;	/* iclass "other": falls through */
};

struct trec {
	bool withdrawn;
	uint32_t id;
	uint64_t head, at;
	size_t pos;	/* insn records before it */
	size_t line;	/* its line number */
	uint32_t ninsn, nblocks;
	uint64_t blocks[128];
	char end[32], reason[32];
	char module[256];
};

struct seen {
	struct insn *in;
	size_t n, cap;
	struct trec *t;
	size_t nt, tcap;
	/* first_exec lines: their ip and line number */
	uint64_t *fe_ip;
	size_t *fe_line;
	size_t nfe, fecap;
	size_t *insn_line;
};

static uint64_t hex(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItem(o, k);

	return cJSON_IsString(v) ? strtoull(v->valuestring, NULL, 16) : 0;
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItem(o, k);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static void *grow(void *p, size_t *cap, size_t n, size_t sz)
{
	if (n < *cap)
		return p;
	*cap = *cap ? 2 * *cap : 1024;
	p = realloc(p, *cap * sz);
	if (!p)
		abort();
	return p;
}

static void parse(struct seen *s, char *text)
{
	size_t line = 0, icap = 0, lcap = 0, fcap2 = 0;

	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save), line++) {
		cJSON *o = cJSON_Parse(l);
		const char *type = str(o, "type");

		if (!o) {
			CHECK_FAIL_("line %zu is not JSON: %.80s", line, l);
			continue;
		}
		if (!strcmp(type, "insn")) {
			const char *ic = str(o, "iclass");
			struct insn *in;

			s->in = grow(s->in, &icap, s->n, sizeof(*s->in));
			s->insn_line = grow(s->insn_line, &lcap, s->n,
					    sizeof(*s->insn_line));
			in = &s->in[s->n];
			in->ip = hex(o, "ip");
			in->size = (unsigned)cJSON_GetObjectItem(o, "size")
					   ->valuedouble;
			in->other = !strcmp(ic, "other");
			in->branch = !strcmp(ic, "jump") ||
				     !strcmp(ic, "cond_jump") ||
				     !strcmp(ic, "call");
			s->insn_line[s->n++] = line;
		} else if (!strcmp(type, "first_exec")) {
			size_t c = s->fecap;

			s->fe_ip = grow(s->fe_ip, &c, s->nfe,
					sizeof(*s->fe_ip));
			s->fe_line = grow(s->fe_line, &fcap2, s->nfe,
					  sizeof(*s->fe_line));
			s->fecap = c;
			s->fe_ip[s->nfe] = hex(o, "ip");
			s->fe_line[s->nfe++] = line;
		} else if (!strncmp(type, "trace", 5)) {
			struct trec *t;
			const cJSON *b = cJSON_GetObjectItem(o, "blocks");

			s->t = grow(s->t, &s->tcap, s->nt, sizeof(*s->t));
			t = &s->t[s->nt++];
			memset(t, 0, sizeof(*t));
			t->withdrawn = !strcmp(type, "trace_withdrawn");
			t->id = (uint32_t)cJSON_GetObjectItem(o, "id")
					->valuedouble;
			t->head = hex(o, "head");
			t->at = hex(o, "at");
			t->pos = s->n;
			t->line = line;
			(void)snprintf(t->end, sizeof(t->end), "%s",
				       str(o, "end"));
			(void)snprintf(t->reason, sizeof(t->reason), "%s",
				       str(o, "reason"));
			(void)snprintf(t->module, sizeof(t->module), "%s",
				       str(o, "module"));
			if (!t->withdrawn) {
				t->ninsn = (uint32_t)cJSON_GetObjectItem(
						   o, "ninsn")
						   ->valuedouble;
				t->nblocks = (uint32_t)cJSON_GetArraySize(b);
				for (uint32_t i = 0; i < t->nblocks && i < 128;
				     i++)
					t->blocks[i] = strtoull(
						cJSON_GetArrayItem(b, (int)i)
							->valuestring,
						NULL, 16);
			}
		}
		cJSON_Delete(o);
	}
}

static void seen_free(struct seen *s)
{
	free(s->in);
	free(s->t);
	free(s->fe_ip);
	free(s->fe_line);
	free(s->insn_line);
	memset(s, 0, sizeof(*s));
}

/* Does a block start at insn @i? */
static bool block_start(const struct seen *s, size_t i)
{
	return i == 0 || !s->in[i - 1].other ||
	       s->in[i].ip != s->in[i - 1].ip + s->in[i - 1].size;
}

/* The first address of the block holding insn @i. */
static uint64_t block_of(const struct seen *s, size_t i)
{
	while (!block_start(s, i))
		i--;
	return s->in[i].ip;
}

/* Is insn @i the start of a block entered by a backward jump or call? */
static bool backward_entry(const struct seen *s, size_t i)
{
	return i > 0 && block_start(s, i) && s->in[i - 1].branch &&
	       s->in[i].ip <= block_of(s, i - 1);
}

/* The truth's instructions equal the insn records'. */
static void check_truth(const char *dir, const struct seen *s)
{
	struct ptd_capture cap;
	struct ptd_diag diag = { "" };
	uint64_t *ips = NULL;
	size_t n = 0;

	if (ptd_capture_load(dir, &cap, &diag) < 0) {
		CHECK_FAIL_("%s: %s", dir, diag.msg);
		return;
	}
	CHECK(cap.exited && cap.exit_code == 0);
	REQUIRE(cap.nthreads == 1);
	if (ptd_capture_read_truth(&cap, 0, &ips, &n, &diag) < 0) {
		CHECK_FAIL_("%s: truth: %s", dir, diag.msg);
		ptd_capture_fini(&cap);
		return;
	}
	CHECK_EQ_U64(s->n, n);
	for (size_t i = 0; i < n && i < s->n; i++) {
		if (ips[i] != s->in[i].ip) {
			CHECK_FAIL_("insn %zu: 0x%" PRIx64 ", truth 0x%" PRIx64,
				    i, s->in[i].ip, ips[i]);
			break;
		}
	}
	free(ips);
	ptd_capture_fini(&cap);
}

/* Trace @t's blocks are the truth's from the head's last start before
 * the record up to it. */
static void check_blocks(const struct seen *s, const struct trec *t)
{
	/* a trace cut at its block bound forms as its last instruction is
	 * taken, before that instruction's insn record */
	size_t k = t->pos + (!strcmp(t->end, "max_bbs") ? 1 : 0);
	size_t j = k, nb = 0;
	uint64_t exp[128];

	while (j > 0 && !(block_start(s, j - 1) && s->in[j - 1].ip == t->head))
		j--;
	REQUIRE(j > 0);
	j--;
	for (size_t i = j; i < k && nb < 128; i++) {
		if (block_start(s, i))
			exp[nb++] = s->in[i].ip;
	}
	CHECK_EQ_INT(t->nblocks, nb);
	CHECK_EQ_INT(t->ninsn, k - j);
	for (size_t b = 0; b < nb && b < t->nblocks; b++)
		CHECK_EQ_U64(t->blocks[b], exp[b]);
	if (!strcmp(t->end, "backward_branch"))
		CHECK(k < s->n && backward_entry(s, k));
}

/* A loop's trace forms exactly as its head is entered backward for the
 * @threshold + 1st time since @from. */
static void check_formed_at(const struct seen *s, const struct trec *t,
			    size_t from, unsigned threshold)
{
	unsigned n = 0;

	for (size_t i = from; i < t->pos; i++)
		n += backward_entry(s, i) && s->in[i].ip == t->head;
	CHECK_EQ_INT(n, threshold);
	CHECK(t->pos < s->n && s->in[t->pos].ip == t->head &&
	      backward_entry(s, t->pos));
}

static char *decode(const char *dir, const char *const *extra,
		    const char *threshold)
{
	const char *args[24];
	size_t n = 0;
	struct run r;
	char *out;

	args[n++] = "decode";
	for (; extra && *extra; extra++)
		args[n++] = *extra;
	args[n++] = "--records";
	args[n++] = "insn,first_exec,trace";
	if (threshold) {
		args[n++] = "--trace-threshold";
		args[n++] = threshold;
	}
	args[n++] = dir;
	args[n] = NULL;
	r = run_cmd(ptctl, args, workdir);
	if (r.status != 0)
		CHECK_FAIL_("ptctl decode %s: %d: %s", dir, r.status,
			    r.err ? r.err : "");
	out = r.out;
	r.out = NULL;
	run_free(&r);
	return out;
}

/* decode() of @dir at threshold @arg, checked to give the same bytes on
 * the instruction path and through the parallel decoder on both paths;
 * NULL if it failed. */
static char *decode_all_ways(const char *dir, const char *arg)
{
	static const char *const insn_path[] = { "--path", "insn", NULL };
	static const char *const par_insn[] = { "--jobs", "2", "--part-size",
						"1", "--path", "insn", NULL };
	static const char *const par_blk[] = { "--jobs", "2", NULL };
	const char *const *other[] = { insn_path, par_insn, par_blk };
	char *out = decode(dir, NULL, arg);

	for (size_t i = 0; out && i < 3; i++) {
		char *o2 = decode(dir, other[i], arg);

		if (!o2 || strcmp(out, o2))
			CHECK_FAIL_("%s, threshold %s: %s %s gives other "
				    "records", dir, arg ? arg : "default",
				    other[i][0], other[i][1]);
		free(o2);
	}
	return out;
}

/* ptctl trace of @prog (@arg: its argument, or NULL) from its entry into
 * workdir/@name, whose path goes to @dir.  Returns whether it worked. */
static bool capture(const char *name, const char *prog, const char *arg,
		    char *dir, size_t dirsz)
{
	const char *args[] = { "trace", "--out", dir, "--start", "entry",
			       "--no-decode", "--quiet-target", "--", prog,
			       arg, NULL };
	struct run r;
	bool ok;

	(void)snprintf(dir, dirsz, "%s/%s", workdir, name);
	if (access(prog, X_OK) != 0) {
		CHECK_FAIL_("%s is not built", prog);
		return false;
	}
	r = run_cmd(ptctl, args, workdir);
	ok = r.status == 0;
	if (!ok)
		CHECK_FAIL_("ptctl trace %s: %d: %s", prog, r.status,
			    r.err ? r.err : "");
	run_free(&r);
	return ok;
}

static void run_threshold(const char *dir, const char *arg,
			  unsigned threshold)
{
	const struct trec *prog = NULL, *jit = NULL, *wd = NULL,
			  *again = NULL;
	struct seen s = { 0 };
	char *out = decode_all_ways(dir, arg);

	REQUIRE(out);
	parse(&s, out);
	free(out);
	check_truth(dir, &s);
	for (size_t i = 0; i < s.nt; i++) {
		const struct trec *t = &s.t[i];

		if (t->withdrawn) {
			CHECK(wd == NULL);
			wd = t;
			continue;
		}
		check_blocks(&s, t);
		if (strstr(t->module, "/prog-jitloop"))
			prog = prog ? prog : t;
		else if (!strcmp(t->module, "[anon]"))
			*(wd ? &again : &jit) = t;
	}
	REQUIRE(prog && jit && wd && again);
	/* the program's loop: one block, formed at the threshold */
	CHECK_EQ_INT(prog->nblocks, 1);
	check_formed_at(&s, prog, 0, threshold);
	/* the JIT loop: add, dec, jnz */
	CHECK_EQ_INT(jit->nblocks, 1);
	CHECK_EQ_INT(jit->ninsn, 3);
	check_formed_at(&s, jit, 0, threshold);
	/* withdrawn when its page stopped being executable (the mprotect
	 * that lets the program write it: W^X), not later when the
	 * rewritten add first ran; that add's first execution is right
	 * after its first_exec */
	CHECK_EQ_INT(wd->id, jit->id);
	CHECK_EQ_U64(wd->head, jit->head);
	CHECK_EQ_STR(wd->reason, "unmapped");
	CHECK(wd->at <= jit->head && jit->head - wd->at < 4096);
	{
		size_t k = wd->pos;
		bool fe = false;

		while (k < s.n && s.in[k].ip != jit->head)
			k++;
		REQUIRE(k < s.n);
		for (size_t i = 0; i < s.nfe; i++)
			fe |= s.fe_ip[i] == jit->head &&
			      s.fe_line[i] + 1 == s.insn_line[k];
		CHECK(fe);
	}
	/* formed again on the new code, counted from the withdrawal */
	CHECK(again->id > wd->id);
	CHECK_EQ_U64(again->head, jit->head);
	check_formed_at(&s, again, wd->pos, threshold);
	fprintf(stderr,
		"threshold %u: %zu insns, %zu trace lines; program loop "
		"trace %u formed at insn %zu, JIT trace %u at %zu, withdrawn "
		"at %zu, formed again as %u at %zu\n",
		threshold, s.n, s.nt, prog->id, prog->pos, jit->id, jit->pos,
		wd->pos, again->id, again->pos);
	seen_free(&s);
}

static void test_jitloop(void)
{
	char prog[700], dir[600];

	(void)snprintf(prog, sizeof(prog), "%s/prog-jitloop", progs);
	if (!capture("jitloop", prog, NULL, dir, sizeof(dir)))
		return;
	run_threshold(dir, NULL, 50);
	run_threshold(dir, "10", 10);
	/* with symbols, the head's: the program's loop is in main */
	{
		static const char *const syms[] = { "--symbols", NULL };
		char *out = decode(dir, syms, NULL);
		const char *t = out ? strstr(out, "{\"type\":\"trace\"") : NULL;

		/* the first trace line is the program loop's */
		CHECK(t && strstr(t, "\"sym\":\"main+0x") &&
		      strstr(t, "\"sym\":\"main+0x") < strchr(t, '\n'));
		free(out);
	}
}

/* prog-dlopen: its library's loop forms a trace, which its dlclose
 * withdraws ("unmapped": no new code needs to run there for it), before
 * the library is mapped again and its loop forms a trace anew. */
static void test_dlopen(void)
{
	char prog[700], lib[700], dir[600];
	const struct trec *wd = NULL;
	size_t nlib = 0, nafter = 0;
	struct seen s = { 0 };
	char *out;

	(void)snprintf(prog, sizeof(prog), "%s/prog-dlopen", progs);
	(void)snprintf(lib, sizeof(lib), "%s/libptdtarget.so", progs);
	if (!capture("dlopen", prog, lib, dir, sizeof(dir)))
		return;
	out = decode_all_ways(dir, "3");
	REQUIRE(out);
	parse(&s, out);
	free(out);
	check_truth(dir, &s);
	for (size_t i = 0; i < s.nt; i++) {
		const struct trec *t = &s.t[i];
		const struct trec *f = NULL;

		if (!t->withdrawn) {
			check_blocks(&s, t);
			if (strstr(t->module, "libptdtarget")) {
				nlib++;
				nafter += wd != NULL;
			}
			continue;
		}
		for (size_t k = 0; k < i; k++)
			if (!s.t[k].withdrawn && s.t[k].id == t->id)
				f = &s.t[k];
		/* only the library's traces, at its unmap */
		CHECK(f && strstr(f->module, "libptdtarget"));
		CHECK_EQ_STR(t->reason, "unmapped");
		CHECK(t->at <= t->head);
		wd = wd ? wd : t;
	}
	REQUIRE(wd);
	/* every library trace formed before the first dlclose went then,
	 * before any instruction ran again */
	for (size_t i = 0; i < s.nt; i++) {
		const struct trec *t = &s.t[i], *w = NULL;

		if (t->withdrawn || !strstr(t->module, "libptdtarget") ||
		    t->line > wd->line)
			continue;
		for (size_t k = i + 1; k < s.nt; k++)
			if (s.t[k].withdrawn && s.t[k].id == t->id)
				w = &s.t[k];
		CHECK(w && w->pos == wd->pos);
	}
	/* and formed again on the library's second mapping */
	CHECK(nafter > 0);
	fprintf(stderr, "dlopen: %zu insns, %zu library traces (%zu after "
		"the first dlclose), first withdrawal at insn %zu\n", s.n,
		nlib, nafter, wd->pos);
	seen_free(&s);
}

/* A threshold out of range is refused, naming the option. */
static void test_bad_threshold(void)
{
	const char *bad[] = { "0", "x", "1073741825" };

	for (size_t i = 0; i < 3; i++) {
		const char *args[] = { "decode", "--records", "trace",
				       "--trace-threshold", bad[i], workdir,
				       NULL };
		struct run r = run_cmd(ptctl, args, workdir);

		CHECK(r.status != 0);
		CHECK_CONTAINS(r.err, "--trace-threshold");
		run_free(&r);
	}
}

int main(void)
{
	const char *root = getenv("PTD_BUILD_ROOT");
	const char *tmp = getenv("TMPDIR");

	progs = getenv("PTD_TEST_PROGS");
	if (!root || !progs)
		SKIP_ALL("PTD_BUILD_ROOT/PTD_TEST_PROGS not set (run through "
			 "meson test)");
	(void)snprintf(ptctl, sizeof(ptctl), "%s/daemon/ptctl", root);
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-hottrace-XXXXXX",
		       tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir))
		return 1;
	RUN(test_jitloop);
	RUN(test_dlopen);
	RUN(test_bad_threshold);
	if (!check_failures)
		(void)ptd_rm_rf(workdir);
	else
		fprintf(stderr, "kept %s\n", workdir);
	return check_done();
}
