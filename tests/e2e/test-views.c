/* SPDX-License-Identifier: MIT */
/*
 * The views (lib/views/, ptctl export --format perfetto, ptctl
 * flamegraph) against the ground truth.  Each program is traced with the
 * software PT source; both views are written from the capture and checked:
 *
 *  - the Perfetto JSON parses (cJSON), every B has its E on the same
 *    thread in LIFO order with times that never go back, every thread is
 *    named, and (time axis: instructions) each thread's outermost slices
 *    last exactly its truth's instruction count;
 *  - the SVG is well-formed XML (xmllint, else a structural check), every
 *    frame lies inside its parent, and its width is its count times one
 *    scale;
 *  - the same trace as a perf.data, a ptd bundle and an LLDB bundle gives
 *    the same flame graph;
 *  - for the program's own functions, the instruction counts both views
 *    give -- self and inclusive in the flame graph, inclusive slice time in
 *    the timeline -- equal counts this test makes itself: each truth IP is
 *    resolved to a function with `nm -S` of the program, a stack of call
 *    sites is kept from the truth (a call pushes the function it was made
 *    from, a return pops to the frame of its return address; the
 *    instruction classes from lib/x86 on the instruction bytes), and every
 *    instruction counts for the function it ran in (self) and once for
 *    each distinct function on its stack (inclusive).  Signals, longjmp
 *    and exceptions are checked for nesting only (the stack here knows no
 *    signal frames or unwinding);
 *  - against an independent tool: the flame graph's own count of each of
 *    the program's functions equals valgrind callgrind's Ir for it, in a
 *    run of callgrind's own (the programs are deterministic).
 * Where headless Chromium is installed, it renders the SVG to a PNG and
 * reads it as SVG (no parse error in its DOM); where python3-jsonschema
 * is, the Perfetto JSON is valid against a JSON Schema of the Trace Event
 * Format (tests/data/schema/), and invalid documents are not.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "e2e/daemon-harness.h"
#include "e2e/run-cmd.h"
#include "common/fileio.h"
#include "swpt/capture.h"
#include "views/flamegraph.h"
#include "x86/insn.h"

static char ptctl[1100];

#define MAXF 64		/* program functions */

struct func {
	uint64_t addr, size;
	char name[128];
	uint64_t self, incl;		/* from the truth */
	uint64_t fg_self, fg_incl;	/* from the flame graph */
	uint64_t pf_incl;		/* from the Perfetto slices */
};

struct prog {
	struct func f[MAXF];
	size_t nf;
	uint64_t base;
	bool have_base;
};

struct insn {
	uint64_t ip;
	uint8_t raw[16];
	uint8_t size;
};

/* An open hash of the decoded instructions by ip. */
struct itab {
	struct insn *t;
	size_t cap;
};

static struct insn *itab_get(struct itab *it, uint64_t ip, bool add)
{
	size_t mask = it->cap - 1, i = (ip * 0x9e3779b97f4a7c15ull) >> 40;

	for (i &= mask;; i = (i + 1) & mask) {
		if (!it->t[i].size) {
			if (!add)
				return NULL;
			it->t[i].ip = ip;
			return &it->t[i];
		}
		if (it->t[i].ip == ip)
			return &it->t[i];
	}
}

static struct run ptctl_run(const char *const *args)
{
	return run_cmd(ptctl, args, tmpdir);
}

/* The program's sized functions from `nm -S`. */
static void load_nm(struct prog *p, const char *exe)
{
	char cmd[1400], line[512];
	FILE *f;

	(void)snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s'", exe);
	f = popen(cmd, "r");
	REQUIRE(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, s;
		char type, name[128];

		if (sscanf(line, "%llx %llx %c %127s", &a, &s, &type, name) !=
			    4 ||
		    (type != 't' && type != 'T') || !s)
			continue;
		REQUIRE(p->nf < MAXF);
		p->f[p->nf].addr = a;
		p->f[p->nf].size = s;
		(void)snprintf(p->f[p->nf].name, sizeof(p->f[p->nf].name),
			       "%s", name);
		p->nf++;
	}
	CHECK_EQ_INT(pclose(f), 0);
	CHECK(p->nf >= 2);
}

static struct func *func_at(struct prog *p, uint64_t ip)
{
	if (!p->have_base)
		return NULL;
	for (size_t i = 0; i < p->nf; i++)
		if (ip - p->base >= p->f[i].addr &&
		    ip - p->base < p->f[i].addr + p->f[i].size)
			return &p->f[i];
	return NULL;
}

static struct func *func_named(struct prog *p, const char *name)
{
	for (size_t i = 0; i < p->nf; i++)
		if (!strcmp(p->f[i].name, name))
			return &p->f[i];
	return NULL;
}

static uint64_t hexval(const cJSON *o, const char *k)
{
	const char *s = cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(o, k));

	return s ? strtoull(s, NULL, 16) : 0;
}

/* The instruction bytes (from `ptctl decode`), and the program's load
 * address: its module's records give ip - file offset (the program's
 * text is at its file offset, as ld lays out a PIE). */
static void load_insns(struct itab *it, struct prog *p, const char *dir,
		       const char *exe)
{
	const char *args[] = { "decode", "--records", "insn", "--fields",
			       "ip,size,raw,module,offset", dir, NULL };
	struct run r = ptctl_run(args);
	char *line = r.out;

	CHECK_EQ_INT(r.status, 0);
	it->cap = 1u << 18;
	it->t = calloc(it->cap, sizeof(*it->t));
	REQUIRE(it->t);
	while (line && *line) {
		char *nl = strchr(line, '\n');
		cJSON *o;

		if (nl)
			*nl = '\0';
		o = cJSON_Parse(line);
		if (o && is_type(line, "insn")) {
			uint64_t ip = hexval(o, "ip");
			const char *raw = cJSON_GetStringValue(
				cJSON_GetObjectItemCaseSensitive(o, "raw"));
			const char *mod = cJSON_GetStringValue(
				cJSON_GetObjectItemCaseSensitive(o, "module"));
			struct insn *in = itab_get(it, ip, true);

			for (size_t i = 0; raw && raw[2 * i] && i < 15; i++) {
				unsigned b;

				(void)sscanf(raw + 2 * i, "%2x", &b);
				in->raw[i] = (uint8_t)b;
				in->size = (uint8_t)(i + 1);
			}
			if (mod && !strcmp(mod, exe)) {
				uint64_t base = ip - hexval(o, "offset");

				if (p->have_base && base != p->base)
					CHECK_FAIL_("%s: two load addresses",
						    exe);
				p->base = base;
				p->have_base = true;
			}
		}
		cJSON_Delete(o);
		line = nl ? nl + 1 : NULL;
	}
	CHECK(p->have_base);
	run_free(&r);
}

/* The counts of one thread's truth (see the top comment). */
static void count_truth(struct prog *p, struct itab *it, const uint64_t *ips,
			size_t n)
{
	struct {
		uint64_t ret;
		struct func *fn;
	} *st = calloc(65536, sizeof(*st));
	size_t depth = 0;

	REQUIRE(st);
	for (size_t i = 0; i < n; i++) {
		struct func *leaf = func_at(p, ips[i]);
		const struct insn *in = itab_get(it, ips[i], false);
		struct ptd_x86_insn xi;
		struct func *seen[MAXF];
		size_t nseen = 0;

		if (leaf)
			leaf->self++;
		for (size_t k = 0; k <= depth; k++) {
			struct func *fn = k < depth ? st[k].fn : leaf;
			bool dup = !fn;

			for (size_t j = 0; j < nseen && !dup; j++)
				dup = seen[j] == fn;
			if (dup)
				continue;
			seen[nseen++] = fn;
			fn->incl++;
		}
		if (!in || i + 1 == n) {
			if (!in)
				CHECK_FAIL_("0x%" PRIx64 ": not decoded",
					    ips[i]);
			continue;
		}
		REQUIRE(ptd_x86_decode(in->raw, in->size, in->ip, ptem_64bit,
				       &xi) == 0);
		if (xi.kind == PTD_X86_CALL_DIRECT ||
		    xi.kind == PTD_X86_CALL_INDIRECT) {
			REQUIRE(depth < 65536);
			st[depth].ret = in->ip + in->size;
			st[depth].fn = leaf;
			depth++;
		} else if (xi.kind == PTD_X86_RET) {
			size_t k = depth;

			while (k > 0 && st[k - 1].ret != ips[i + 1])
				k--;
			depth = k ? k - 1 : depth ? depth - 1 : 0;
		}
	}
	free(st);
}

/* ---- the Perfetto JSON ---- */

struct pthr {
	long tid;
	const char *stack[8192];	/* open slices' names */
	double start[8192];
	size_t n;
	double last_ts, base_sum;
	bool named;
};

static struct pthr *pthr_of(struct pthr *th, size_t *nth, long tid)
{
	for (size_t i = 0; i < *nth; i++)
		if (th[i].tid == tid)
			return &th[i];
	if (*nth >= 16)
		abort();
	memset(&th[*nth], 0, sizeof(th[*nth]));
	th[*nth].tid = tid;
	return &th[(*nth)++];
}

/* Check @path's nesting; fill the program's pf_incl and each thread's
 * outermost slices' time (base_sum).  Returns the threads. */
static void check_perfetto(const char *path, struct prog *p,
			   struct pthr *th, size_t *ret_nth, const char *axis,
			   unsigned *deepest, const char *deep)
{
	char *text = NULL;
	size_t len = 0, nth = 0;
	cJSON *doc, *ev, *e;
	const char *got_axis;
	unsigned bad = 0;

	REQUIRE(ptd_file_read_all(path, 1u << 30, &text, &len) == 0);
	doc = cJSON_Parse(text);
	free(text);
	if (!doc) {
		CHECK_FAIL_("%s: not JSON", path);
		return;
	}
	got_axis = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(doc, "otherData"),
		"time_axis"));
	CHECK(got_axis && !strcmp(got_axis, axis));
	ev = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
	CHECK(cJSON_IsArray(ev));
	cJSON_ArrayForEach(e, ev)
	{
		const char *ph = cJSON_GetStringValue(
			cJSON_GetObjectItemCaseSensitive(e, "ph"));
		const char *name = cJSON_GetStringValue(
			cJSON_GetObjectItemCaseSensitive(e, "name"));
		const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
		long tid = (long)cJSON_GetNumberValue(
			cJSON_GetObjectItemCaseSensitive(e, "tid"));
		struct pthr *t;

		if (!ph) {
			CHECK_FAIL_("%s: an event without ph", path);
			break;
		}
		t = pthr_of(th, &nth, tid);
		if (!strcmp(ph, "M")) {
			if (name && !strcmp(name, "thread_name"))
				t->named = true;
			continue;
		}
		if (!cJSON_IsNumber(ts) || ts->valuedouble < t->last_ts) {
			if (bad++ < 3)
				CHECK_FAIL_("%s: tid %ld: time goes back or "
					    "is missing", path, tid);
			continue;
		}
		t->last_ts = ts->valuedouble;
		if (!strcmp(ph, "B")) {
			unsigned same = 0;

			if (!name || t->n >= 8192) {
				CHECK_FAIL_("tid %ld: B without a name or too "
					    "deep", tid);
				break;
			}
			if (!t->named && bad++ < 3)
				CHECK_FAIL_("tid %ld: a slice before the "
					    "thread's name", tid);
			t->stack[t->n] = name;
			t->start[t->n++] = ts->valuedouble;
			for (size_t k = 0; k < t->n; k++)
				same += deep && !strcmp(t->stack[k], deep);
			if (same > *deepest)
				*deepest = same;
		} else if (!strcmp(ph, "E")) {
			double dur;
			struct func *fn;
			bool outer = true;

			if (!t->n) {
				if (bad++ < 3)
					CHECK_FAIL_("tid %ld: E without B",
						    tid);
				continue;
			}
			t->n--;
			dur = ts->valuedouble - t->start[t->n];
			if (!t->n)
				t->base_sum += dur;
			fn = func_named(p, t->stack[t->n]);
			for (size_t k = 0; fn && k < t->n; k++)
				outer = outer && strcmp(t->stack[k], fn->name);
			if (fn && outer)
				fn->pf_incl += (uint64_t)dur;
		} else if (strcmp(ph, "i")) {
			CHECK_FAIL_("%s: event kind '%s'", path, ph);
		}
	}
	for (size_t i = 0; i < nth; i++)
		if (th[i].n)
			CHECK_FAIL_("tid %ld: %zu slices never end", th[i].tid,
				    th[i].n);
	CHECK_EQ_U64(bad, 0);
	cJSON_Delete(doc);
	*ret_nth = nth;
}

/* ---- the SVG ---- */

struct frame {
	char name[160];
	uint64_t n;
	double x, y, w;
	long parent;
	unsigned depth;
};

static double attr(const char *s, const char *key)
{
	const char *p = strstr(s, key);

	return p ? strtod(p + strlen(key), NULL) : NAN;
}

/* Parse the frames (<g><title>NAME (N instructions, P%)</title><rect
 * ...>) of @svg in order; returns how many. */
static void parse_svg(const char *svg, struct frame *fr, size_t max,
		      size_t *ret_n)
{
	size_t n = 0;
	double base_y = 0;

	for (const char *g = strstr(svg, "<g><title>"); g;
	     g = strstr(g + 1, "<g><title>")) {
		const char *t = g + strlen("<g><title>");
		const char *open = strstr(t, " (");
		const char *rect = strstr(t, "<rect ");
		struct frame *f = &fr[n];

		REQUIRE(n < max && open && rect);
		/* names here are plain: no entities to undo */
		(void)snprintf(f->name, sizeof(f->name), "%.*s",
			       (int)(open - t), t);
		f->n = strtoull(open + 2, NULL, 10);
		f->x = attr(rect, "x=\"");
		f->y = attr(rect, "y=\"");
		f->w = attr(rect, "width=\"");
		if (!n)
			base_y = f->y;
		f->depth = (unsigned)lround((base_y - f->y) /
					    PTD_FLAMEGRAPH_FRAME_H);
		f->parent = -1;
		for (size_t k = n; f->depth && k-- > 0;)
			if (fr[k].depth + 1 == f->depth) {
				f->parent = (long)k;
				break;
			}
		n++;
	}
	*ret_n = n;
}

static void check_svg(const char *path, struct prog *p, uint64_t total)
{
	static struct frame fr[20000];
	char *svg = NULL;
	size_t len = 0, n = 0;
	double scale;

	REQUIRE(ptd_file_read_all(path, 1u << 30, &svg, &len) == 0);
	if (access("/usr/bin/xmllint", X_OK) == 0) {
		char cmd[1200];

		(void)snprintf(cmd, sizeof(cmd), "xmllint --noout '%s'", path);
		CHECK_EQ_INT(system(cmd), 0);
	} else {
		/* no xmllint: the structure this writer promises */
		CHECK(!strncmp(svg, "<?xml ", 6));
		CHECK(strstr(svg, "</svg>\n") == svg + len - 7);
		CHECK(!strstr(svg, "<script"));
	}
	parse_svg(svg, fr, sizeof(fr) / sizeof(fr[0]), &n);
	REQUIRE(n > 2);
	CHECK_EQ_STR(fr[0].name, "all");
	CHECK_EQ_U64(fr[0].n, total);
	scale = fr[0].w / (double)fr[0].n;
	for (size_t i = 0; i < n; i++) {
		const struct frame *f = &fr[i];
		uint64_t children = 0;
		struct func *fn = func_named(p, f->name);
		bool outer = true;

		CHECK(fabs(f->w - (double)f->n * scale) < 1e-3);
		if (i && (f->parent < 0 ||
			  f->x < fr[f->parent].x - 1e-3 ||
			  f->x + f->w > fr[f->parent].x + fr[f->parent].w +
						1e-3))
			CHECK_FAIL_("frame %zu (%s) is not inside its parent",
				    i, f->name);
		for (size_t k = i + 1; k < n && fr[k].depth > f->depth; k++)
			if (fr[k].parent == (long)i)
				children += fr[k].n;
		CHECK(children <= f->n);
		for (long a = f->parent; fn && a >= 0; a = fr[a].parent)
			outer = outer && strcmp(fr[a].name, fn->name);
		if (fn) {
			fn->fg_self += f->n - children;
			if (outer)
				fn->fg_incl += f->n;
		}
	}
	free(svg);
}

/* The Perfetto JSON against a JSON Schema of the Trace Event Format
 * (tests/data/schema/, written from the format's document), read by
 * Debian's python3-jsonschema, not by ptd: @valid says whether it must
 * pass.  Skips, saying so, where python3-jsonschema is missing. */
static void schema_check(const char *json, bool valid)
{
	const char *data = getenv("PTD_TEST_DATA");
	char script[700], schema[700];
	struct run r;

	if (!data) {
		fprintf(stderr, "SKIP schema: PTD_TEST_DATA not set\n");
		return;
	}
	(void)snprintf(script, sizeof(script), "%s/../schema-check.py", data);
	(void)snprintf(schema, sizeof(schema),
		       "%s/schema/trace-event-format.schema.json", data);
	{
		const char *args[] = { script, schema, json, NULL };

		/* Debian's python, which python3-jsonschema is for */
		r = run_cmd("/usr/bin/python3", args, tmpdir);
	}
	if (r.status == 77) {
		fprintf(stderr, "SKIP schema: %s", r.err ? r.err : "");
		run_free(&r);
		return;
	}
	if (valid && r.status != 0)
		CHECK_FAIL_("%s: not of the Trace Event Format: %s", json,
			    r.err ? r.err : "");
	if (!valid)
		CHECK_EQ_INT(r.status, 1);
	run_free(&r);
}

/* The schema check can fail: events a reader of the format refuses. */
static void test_schema_refuses(void)
{
	static const char *const bad[] = {
		/* no phase */
		"{\"traceEvents\":[{\"name\":\"f\",\"ts\":0,\"pid\":1,"
		"\"tid\":1}]}",
		/* a begin without its thread */
		"{\"traceEvents\":[{\"ph\":\"B\",\"name\":\"f\",\"ts\":0,"
		"\"pid\":1}]}",
		/* a thread name that is not a string */
		"{\"traceEvents\":[{\"ph\":\"M\",\"name\":\"thread_name\","
		"\"pid\":1,\"tid\":1,\"args\":{\"name\":7}}]}",
		/* no events at all */
		"{\"displayTimeUnit\":\"ns\"}",
	};
	char path[700];

	(void)snprintf(path, sizeof(path), "%s/bad.json", tmpdir);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		REQUIRE(ptd_file_write_atomic(path, bad[i], strlen(bad[i])) ==
			0);
		schema_check(path, false);
	}
}

/* Headless Chromium renders the SVG, where it is installed. */
static void render_svg(const char *svg)
{
	static const char *const names[] = { "/usr/bin/chromium",
					     "/usr/bin/chromium-browser",
					     "/usr/bin/google-chrome" };
	const char *chrome = NULL;
	char shot[700], arg[800], url[800];
	char *png = NULL;
	size_t len = 0;

	for (size_t i = 0; i < 3 && !chrome; i++)
		if (access(names[i], X_OK) == 0)
			chrome = names[i];
	if (!chrome) {
		fprintf(stderr, "SKIP rendering: no headless Chromium "
				"installed (/usr/bin/chromium)\n");
		return;
	}
	(void)snprintf(shot, sizeof(shot), "%s/shot.png", tmpdir);
	(void)snprintf(arg, sizeof(arg), "--screenshot=%s", shot);
	(void)snprintf(url, sizeof(url), "file://%s", svg);
	{
		const char *args[] = { "--headless", "--no-sandbox",
				       "--disable-gpu", arg,
				       "--window-size=1200,900", url, NULL };
		struct run r = run_cmd(chrome, args, tmpdir);

		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
	}
	CHECK(ptd_file_read_all(shot, 1u << 28, &png, &len) == 0 &&
	      len > 100 && !memcmp(png, "\x89PNG", 4));
	free(png);
	/* and parsed it as SVG: its DOM, with no parsererror (what
	 * Chromium shows for XML it cannot read) */
	{
		const char *args[] = { "--headless", "--no-sandbox",
				       "--disable-gpu", "--dump-dom", url,
				       NULL };
		struct run r = run_cmd(chrome, args, tmpdir);

		CHECK_EQ_INT(r.status, 0);
		CHECK(r.out && !strstr(r.out, "parsererror") &&
		      strstr(r.out, "<svg") && strstr(r.out, "<rect"));
		run_free(&r);
	}
}

/* The same trace as a perf.data, a ptd bundle and an LLDB bundle gives
 * the same flame graph, byte for byte. */
static void check_other_inputs(const char *dir, const char *svg)
{
	static const char *const formats[] = { "perf-data", "bundle",
					       "lldb" };
	char *want = NULL;
	size_t len = 0;

	REQUIRE(ptd_file_read_all(svg, 1u << 30, &want, &len) == 0);
	for (size_t i = 0; i < 3; i++) {
		char out[700];
		const char *exp[] = { "export", "--format", formats[i], dir,
				      out, NULL };
		const char *fg[] = { "flamegraph", "--min-width", "0", out,
				     NULL };
		struct run r;

		(void)snprintf(out, sizeof(out), "%s.%s", dir, formats[i]);
		r = ptctl_run(exp);
		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
		r = ptctl_run(fg);
		CHECK_EQ_INT(r.status, 0);
		if (!r.out || strcmp(r.out, want))
			CHECK_FAIL_("the flame graph of %s differs from the "
				    "capture's", out);
		run_free(&r);
	}
	free(want);
}

/* Against an independent tool: valgrind's callgrind runs @exe itself (a
 * run of its own: the programs are deterministic) and counts each
 * function's own instructions (Ir, self).  Every function of the program
 * the flame graph holds must have callgrind's count, exactly -- for the
 * program's own functions: library code may take other paths under
 * valgrind's CPU (other CPUID, so other IFUNC choices), and code before the
 * entry (_init) is not traced from there. */
static void check_callgrind(const struct prog *p, const char *exe,
			    const char *dir)
{
	static const char *const vg = "/usr/bin/valgrind";
	char out[700], opt[760], line[512], cur[512] = "";
	bool skip = false;
	unsigned same = 0;
	struct run r;
	uint64_t *cg;
	FILE *f;

	if (access(vg, X_OK) != 0) {
		fprintf(stderr, "  no %s (Debian's valgrind): counts not "
			"checked against callgrind\n", vg);
		return;
	}
	cg = calloc(p->nf, sizeof(*cg));
	REQUIRE(cg);
	(void)snprintf(out, sizeof(out), "%s.callgrind", dir);
	(void)snprintf(opt, sizeof(opt), "--callgrind-out-file=%s", out);
	{
		/* --skip-plt=no: a PLT stub's instructions are its own,
		 * not its caller's (callgrind's default) */
		const char *args[] = { "--tool=callgrind", "--separate-recs=1",
				       "--skip-plt=no", "--compress-strings=no",
				       "--compress-pos=no", opt, exe, NULL };

		r = run_cmd(vg, args, tmpdir);
		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
	}
	/* fn=NAME, then "POSITION COST" lines of its own; a calls= line's
	 * next line is the call's inclusive cost, not the function's */
	f = fopen(out, "r");
	REQUIRE(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long pos, cost;

		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "fn=", 3)) {
			(void)snprintf(cur, sizeof(cur), "%s", line + 3);
			continue;
		}
		if (!strncmp(line, "calls=", 6)) {
			skip = true;
			continue;
		}
		if (sscanf(line, "%llu %llu", &pos, &cost) != 2)
			continue;
		if (skip) {
			skip = false;
			continue;
		}
		for (size_t i = 0; i < p->nf; i++)
			if (!strcmp(p->f[i].name, cur))
				cg[i] += cost;
	}
	fclose(f);
	for (size_t i = 0; i < p->nf; i++) {
		const struct func *fn = &p->f[i];

		if (!fn->fg_self || !cg[i])
			continue;	/* not run, or not from the entry */
		fprintf(stderr, "  %-24s flame graph self %6" PRIu64
			", callgrind Ir %6" PRIu64 "\n", fn->name, fn->fg_self,
			cg[i]);
		CHECK_EQ_U64(fn->fg_self, cg[i]);
		same++;
	}
	/* main and at least one function it calls */
	CHECK(same >= 2);
	free(cg);
}

struct vcase {
	const char *name;
	const char *cpp;	/* a C++ program: may be absent */
	bool counts;		/* the truth's stack holds (no signals...) */
	const char *deep;	/* a function and how deep it nests */
	unsigned deep_min;
	size_t threads;
};

static void run_case(const struct vcase *vc, bool tsc)
{
	char exe[1200], dir[600], json[700], svg[700];
	struct pthr *th = calloc(16, sizeof(*th));
	struct prog *p = calloc(1, sizeof(*p));
	struct itab it = { 0 };
	struct ptd_capture cap;
	struct ptd_diag diag = { "" };
	uint64_t total = 0;
	unsigned deepest = 0;
	size_t nth = 0;
	struct run r;

	REQUIRE(th && p);
	(void)snprintf(exe, sizeof(exe), "%s/prog-%s", progs, vc->name);
	if (access(exe, X_OK) != 0) {
		if (vc->cpp)
			fprintf(stderr, "SKIP %s: not built: no C++ "
					"compiler\n", exe);
		else
			CHECK_FAIL_("%s is not built", exe);
		goto out;
	}
	(void)snprintf(dir, sizeof(dir), "%s/%s%s", tmpdir, vc->name,
		       tsc ? "-tsc" : "");
	(void)snprintf(json, sizeof(json), "%s.json", dir);
	(void)snprintf(svg, sizeof(svg), "%s.svg", dir);
	{
		const char *args[] = { "trace", "--out", dir, "--start",
				       "entry", "--no-decode",
				       "--quiet-target", tsc ? "--tsc" : "--",
				       tsc ? "--" : exe, tsc ? exe : NULL,
				       NULL };

		r = ptctl_run(args);
		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
	}
	{
		const char *args[] = { "export", "--format", "perfetto",
				       "--out", json, dir, NULL };

		r = ptctl_run(args);
		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
		/* never replaced */
		r = ptctl_run(args);
		CHECK_EQ_INT(r.status, 2);
		CHECK(r.err && strstr(r.err, "not replaced"));
		run_free(&r);
	}
	{
		const char *args[] = { "flamegraph", "--min-width", "0",
				       "--out", svg, dir, NULL };

		r = ptctl_run(args);
		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
	}
	REQUIRE(ptd_capture_load(dir, &cap, &diag) == 0);
	if (vc->threads)
		CHECK_EQ_U64(cap.nthreads, vc->threads);
	load_nm(p, exe);
	load_insns(&it, p, dir, exe);
	check_perfetto(json, p, th, &nth, tsc ? "time" : "insns", &deepest,
		       vc->deep);
	schema_check(json, true);
	if (tsc) {
		/* the same trace on the instruction axis (--time insns):
		 * what follows checks that one */
		char json2[720];
		const char *args[] = { "export", "--format", "perfetto",
				       "--time", "insns", "--out", json2, dir,
				       NULL };

		(void)snprintf(json2, sizeof(json2), "%s-insns.json", dir);
		r = ptctl_run(args);
		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
		for (size_t i = 0; i < p->nf; i++)
			p->f[i].pf_incl = 0;
		memset(th, 0, 16 * sizeof(*th));
		check_perfetto(json2, p, th, &nth, "insns", &deepest,
			       vc->deep);
	}
	CHECK_EQ_U64(nth, cap.nthreads);
	for (size_t t = 0; t < cap.nthreads; t++) {
		uint64_t *ips = NULL;
		size_t n = 0;
		struct pthr *pt = pthr_of(th, &nth, cap.threads[t].tid);

		REQUIRE(ptd_capture_read_truth(&cap, t, &ips, &n, &diag) == 0);
		total += n;
		/* instruction axis: a thread's outermost slices last as many
		 * instructions as it ran */
		CHECK_EQ_U64((uint64_t)pt->base_sum, n);
		if (vc->counts)
			count_truth(p, &it, ips, n);
		free(ips);
	}
	ptd_capture_fini(&cap);
	fprintf(stderr, "%s%s: %zu threads, %" PRIu64 " instructions, %s "
			"nests %u deep\n",
		vc->name, tsc ? " (tsc)" : "", nth, total,
		vc->deep ? vc->deep : "-", deepest);
	if (vc->deep)
		CHECK(deepest >= vc->deep_min);
	check_svg(svg, p, total);
	for (size_t i = 0; vc->counts && i < p->nf; i++) {
		const struct func *f = &p->f[i];

		fprintf(stderr, "  %-24s self %6" PRIu64 " incl %6" PRIu64
				" | flame graph %6" PRIu64 " %6" PRIu64
				" | perfetto %6" PRIu64 "\n",
			f->name, f->self, f->incl, f->fg_self, f->fg_incl,
			f->pf_incl);
		CHECK_EQ_U64(f->fg_self, f->self);
		CHECK_EQ_U64(f->fg_incl, f->incl);
		CHECK_EQ_U64(f->pf_incl, f->incl);
	}
	if (vc->counts) {
		const struct func *m = func_named(p, "main");

		CHECK(m && m->self > 0 && m->incl > m->self);
		if (!tsc)
			check_callgrind(p, exe, dir);
	}
	if (!tsc && !strcmp(vc->name, "recursion")) {
		check_other_inputs(dir, svg);
		render_svg(svg);
	}
out:
	free(it.t);
	free(th);
	free(p);
}

static const struct vcase cases[] = {
	{ "recursion", NULL, true, "deep", 101, 1 },
	{ "fnptr", NULL, true, NULL, 0, 1 },
	{ "tailcall", NULL, true, NULL, 0, 1 },
	{ "threads", NULL, true, "work", 1, 3 },
	{ "longjmp", NULL, false, "leaf", 1, 1 },
	{ "signal", NULL, false, "handler", 1, 1 },
	{ "except", "c++", false, "_ZL7throweri", 1, 1 },
};

static void test_recursion(void) { run_case(&cases[0], false); }
static void test_fnptr(void) { run_case(&cases[1], false); }
static void test_tailcall(void) { run_case(&cases[2], false); }
static void test_threads(void) { run_case(&cases[3], false); }
static void test_longjmp(void) { run_case(&cases[4], false); }
static void test_signal(void) { run_case(&cases[5], false); }
static void test_except(void) { run_case(&cases[6], false); }
/* with TSC packets: perf time is the axis (and with --time insns the
 * instruction count); the counts do not depend on it */
static void test_recursion_tsc(void) { run_case(&cases[0], true); }

int main(void)
{
	harness_setup("/tmp/ptd-views-XXXXXX");
	(void)snprintf(ptctl, sizeof(ptctl), "%s/daemon/ptctl", build_root);
	RUN(test_recursion);
	RUN(test_fnptr);
	RUN(test_tailcall);
	RUN(test_threads);
	RUN(test_longjmp);
	RUN(test_signal);
	RUN(test_except);
	RUN(test_recursion_tsc);
	RUN(test_schema_refuses);
	return harness_done();
}
