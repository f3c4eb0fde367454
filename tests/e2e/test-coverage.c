/* SPDX-License-Identifier: MIT */
/*
 * ptctl coverage (lib/views/coverage.h) against the ground truth and
 * independent tools.  tests/progs/coverage.c (built -O0 -g, with branches
 * it never takes and a function it never calls) is traced by the software
 * PT source, then:
 *
 *  - text: for each of the program's sized functions (`nm -S`) that ran,
 *    "run" equals the distinct truth addresses in it, "executions" the
 *    truth's instructions in it, and "total" the instructions objdump -d
 *    finds between its start and end (an independent disassembler), so
 *    the never-run instructions are found; at least one function has some;
 *  - lcov: the record of coverage.c has exactly one DA line per source
 *    line that addr2line (binutils) gives for the instructions of those
 *    functions, its count the largest truth count among that line's
 *    instructions (0: none ran), the lines the program marks "never" at
 *    0; FN at addr2line's line of the function's address, FNDA the
 *    truth's count there; SF the path addr2line prints;
 *  - genhtml (lcov) reads that record without an error;
 *  - the same trace as a ptd bundle and as a perf.data gives the same
 *    functions' rows;
 *  - DWARF made garbage (a copy of the program under --sysroot) gives
 *    the text as before and lcov without its lines, naming the file;
 *  - a session of ptd's (attached with record) as SESSION: ptd records it
 *    into ptctl's directory once it has ended, and its coverage is the
 *    coverage of that bundle (the program's loop function among it); its
 *    Perfetto export and flame graph likewise (recorded again);
 *  - bad usage and missing inputs are refused, naming them.
 * Without libdw in the build, the lcov checks skip, saying so, and the
 * refusal of --format lcov is checked instead.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "e2e/daemon-harness.h"
#include "e2e/daemon-client.h"
#include "e2e/run-cmd.h"
#include "common/fileio.h"
#include "swpt/capture.h"
#include "views/coverage.h"

static char ptctl[1100];
static char exe[1200], capdir[600];

#define MAXF 64

struct func {
	uint64_t addr, size;
	char name[128];
	/* truth */
	uint64_t run, execs;
	/* objdump */
	uint64_t *insn;
	size_t ninsn;
	/* ptctl coverage's row */
	bool listed;
	uint64_t c_run, c_execs, c_total;
	bool c_has_total;
};

static struct func fn[MAXF];
static size_t nfn;

/* the truth of the program's code: (vaddr, count), by vaddr */
struct tc {
	uint64_t vaddr, count;
};
static struct tc *truth;
static size_t ntruth;

static struct run ptctl_run(const char *const *args)
{
	return run_cmd(ptctl, args, tmpdir);
}

static int tc_cmp(const void *x, const void *y)
{
	const struct tc *a = x, *b = y;

	return a->vaddr < b->vaddr ? -1 : a->vaddr > b->vaddr;
}

static uint64_t truth_count(uint64_t vaddr)
{
	struct tc key = { vaddr, 0 }, *t;

	t = bsearch(&key, truth, ntruth, sizeof(*truth), tc_cmp);
	return t ? t->count : 0;
}

static uint64_t hexval(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	return p ? strtoull(p + strlen(key), NULL, 16) : 0;
}

static void load_nm(void)
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
		REQUIRE(nfn < MAXF);
		fn[nfn].addr = a;
		fn[nfn].size = s;
		(void)snprintf(fn[nfn].name, sizeof(fn[nfn].name), "%s", name);
		nfn++;
	}
	CHECK_EQ_INT(pclose(f), 0);
	CHECK(nfn >= 4);
}

/* Each function's instructions by objdump -d. */
static void load_objdump(struct func *f)
{
	char cmd[1600], line[512];
	FILE *p;

	(void)snprintf(cmd, sizeof(cmd),
		       "objdump -d --no-show-raw-insn --start-address=0x%" PRIx64
		       " --stop-address=0x%" PRIx64 " '%s'",
		       f->addr, f->addr + f->size, exe);
	p = popen(cmd, "r");
	REQUIRE(p);
	f->insn = calloc(f->size, sizeof(*f->insn));
	REQUIRE(f->insn);
	while (fgets(line, sizeof(line), p)) {
		unsigned long long a;
		char colon;

		/* "    1146:\tmov ..." */
		if (sscanf(line, " %llx%c", &a, &colon) == 2 && colon == ':' &&
		    line[0] == ' ' && a >= f->addr && a < f->addr + f->size) {
			REQUIRE(f->ninsn < f->size);
			f->insn[f->ninsn++] = a;
		}
	}
	CHECK_EQ_INT(pclose(p), 0);
	CHECK(f->ninsn > 0);
}

/* The truth, as file vaddrs of the program (its load address from the
 * decode's insn records: ip - offset, the text at its file offset as ld
 * lays out a PIE). */
static void load_truth(void)
{
	const char *args[] = { "decode", "--records", "insn", "--fields",
			       "ip,module,offset", capdir, NULL };
	struct ptd_diag diag = { "" };
	struct ptd_capture cap;
	struct run r = ptctl_run(args);
	uint64_t base = 0;
	bool have_base = false;
	char *line = r.out;
	size_t n = 0;

	CHECK_EQ_INT(r.status, 0);
	while (line && *line) {
		char *nl = strchr(line, '\n');
		char want[1300];

		if (nl)
			*nl = '\0';
		(void)snprintf(want, sizeof(want), "\"module\":\"%s\"", exe);
		if (!have_base && strstr(line, want)) {
			base = hexval(line, "\"ip\":\"") -
			       hexval(line, "\"offset\":\"");
			have_base = true;
		}
		line = nl ? nl + 1 : NULL;
	}
	run_free(&r);
	REQUIRE(have_base);
	REQUIRE(ptd_capture_load(capdir, &cap, &diag) == 0);
	for (size_t t = 0; t < cap.nthreads; t++) {
		uint64_t *ips = NULL;
		size_t k = 0;
		struct tc *v;

		REQUIRE(ptd_capture_read_truth(&cap, t, &ips, &k, &diag) == 0);
		v = reallocarray(truth, n + k, sizeof(*truth));
		REQUIRE(v);
		truth = v;
		for (size_t i = 0; i < k; i++) {
			truth[n].vaddr = ips[i] - base;
			truth[n].count = 1;
			n++;
		}
		free(ips);
	}
	ptd_capture_fini(&cap);
	qsort(truth, n, sizeof(*truth), tc_cmp);
	ntruth = 0;
	for (size_t i = 0; i < n; i++) {
		if (ntruth && truth[ntruth - 1].vaddr == truth[i].vaddr) {
			truth[ntruth - 1].count++;
			continue;
		}
		truth[ntruth++] = truth[i];
	}
	for (size_t k = 0; k < nfn; k++)
		for (size_t i = 0; i < ntruth; i++)
			if (truth[i].vaddr - fn[k].addr < fn[k].size) {
				fn[k].run++;
				fn[k].execs += truth[i].count;
			}
}

/* The program's rows of a text report: every function's. */
static void parse_text(const char *out, bool store)
{
	char want[1300];
	const char *p;

	(void)snprintf(want, sizeof(want), "\nmodule %s\n", exe);
	p = strstr(out, want);
	REQUIRE(p);
	p += strlen(want);
	while (*p && *p != '\n') {
		const char *nl = strchr(p, '\n');
		unsigned long long run, execs;
		char total[32], cover[32], name[128];
		int used = 0;

		if (sscanf(p, " %llu %31s %31s %llu %n", &run, total, cover,
			   &execs, &used) == 4 &&
		    used > 0) {
			size_t len = (size_t)(nl ? nl - (p + used)
						 : (long)strlen(p + used));

			(void)snprintf(name, sizeof(name), "%.*s", (int)len,
				       p + used);
			for (size_t k = 0; k < nfn; k++) {
				struct func *f = &fn[k];

				if (strcmp(f->name, name))
					continue;
				if (store) {
					f->listed = true;
					f->c_run = run;
					f->c_execs = execs;
					f->c_has_total = strcmp(total, "-");
					f->c_total = strtoull(total, NULL, 10);
				} else {
					CHECK(f->listed);
					CHECK_EQ_U64(run, f->c_run);
					CHECK_EQ_U64(execs, f->c_execs);
					CHECK_EQ_U64(strtoull(total, NULL, 10),
						     f->c_total);
				}
			}
		}
		if (!nl)
			break;
		p = nl + 1;
	}
}

static void test_text(void)
{
	const char *args[] = { "coverage", capdir, NULL };
	struct run r = ptctl_run(args);
	bool never_found = false;

	CHECK_EQ_INT(r.status, 0);
	REQUIRE(r.out);
	parse_text(r.out, true);
	for (size_t k = 0; k < nfn; k++) {
		struct func *f = &fn[k];

		load_objdump(f);
		fprintf(stderr, "  %-22s truth run %4" PRIu64 " execs %6" PRIu64
				" objdump %4zu | coverage %4" PRIu64 " %6" PRIu64
				" %4" PRIu64 "%s\n",
			f->name, f->run, f->execs, f->ninsn, f->c_run,
			f->c_execs, f->c_total, f->listed ? "" : " (not listed)");
		/* a function is listed if and only if it ran */
		CHECK_EQ_INT(f->listed, f->run > 0);
		if (!f->run)
			continue;
		CHECK_EQ_U64(f->c_run, f->run);
		CHECK_EQ_U64(f->c_execs, f->execs);
		CHECK(f->c_has_total);
		CHECK_EQ_U64(f->c_total, f->ninsn);
		never_found |= f->c_total > f->c_run;
	}
	/* main, loop, classify at least; never_called never */
	for (size_t k = 0; k < nfn; k++) {
		if (!strcmp(fn[k].name, "never_called"))
			CHECK(!fn[k].listed);
		if (!strcmp(fn[k].name, "classify") ||
		    !strcmp(fn[k].name, "main"))
			CHECK(fn[k].listed && fn[k].c_total > fn[k].c_run);
	}
	CHECK(never_found);
	run_free(&r);
}

/* The same trace as a bundle and a perf.data: the same rows. */
static void test_other_inputs(void)
{
	static const char *const fmts[] = { "bundle", "perf-data" };

	for (size_t i = 0; i < 2; i++) {
		char out[700];
		const char *ex[] = { "export", "--format", fmts[i], capdir, out,
				     NULL };
		const char *args[] = { "coverage", out, NULL };
		struct run r;

		(void)snprintf(out, sizeof(out), "%s/as-%s", tmpdir, fmts[i]);
		r = ptctl_run(ex);
		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
		r = ptctl_run(args);
		CHECK_EQ_INT(r.status, 0);
		if (r.out)
			parse_text(r.out, false);
		fprintf(stderr, "  %s: the same rows\n", fmts[i]);
		run_free(&r);
	}
}

/* addr2line's file:line of each address of @addrs. */
struct a2l {
	char file[2048];
	int line;
};

static void addr2line(const uint64_t *addrs, size_t n, struct a2l *ret)
{
	char in[700], cmd[2000], line[2048];
	size_t i = 0;
	FILE *f;

	(void)snprintf(in, sizeof(in), "%s/addrs", tmpdir);
	f = fopen(in, "w");
	REQUIRE(f);
	for (size_t k = 0; k < n; k++)
		fprintf(f, "0x%" PRIx64 "\n", addrs[k]);
	fclose(f);
	(void)snprintf(cmd, sizeof(cmd), "addr2line -e '%s' < '%s'", exe, in);
	f = popen(cmd, "r");
	REQUIRE(f);
	while (i < n && fgets(line, sizeof(line), f)) {
		char *colon;

		line[strcspn(line, "\n")] = 0;
		/* "FILE:LINE" or "FILE:LINE (discriminator N)" */
		line[strcspn(line, " ")] = 0;
		colon = strrchr(line, ':');
		ret[i].line = 0;
		ret[i].file[0] = 0;
		if (colon) {
			*colon = 0;
			ret[i].line = atoi(colon + 1);
			(void)snprintf(ret[i].file, sizeof(ret[i].file), "%s",
				       line);
		}
		i++;
	}
	CHECK_EQ_INT(pclose(f), 0);
	CHECK_EQ_U64(i, n);
}

struct daline {
	int line;
	uint64_t count;
};

#define MAXL 1024

static void run_genhtml(const char *info)
{
	static const char *const gh = "/usr/bin/genhtml";
	char out[700], idx[760];
	const char *args[] = { "-q", "-o", out, info, NULL };
	struct run r;

	if (access(gh, X_OK) != 0) {
		fprintf(stderr, "  no %s (Debian's lcov): the tracefile is not "
				"checked by genhtml\n", gh);
		return;
	}
	(void)snprintf(out, sizeof(out), "%s/html", tmpdir);
	(void)snprintf(idx, sizeof(idx), "%s/index.html", out);
	r = run_cmd(gh, args, tmpdir);
	if (r.status != 0)
		fprintf(stderr, "genhtml: %s\n", r.err ? r.err : "");
	CHECK_EQ_INT(r.status, 0);
	CHECK(access(idx, R_OK) == 0);
	fprintf(stderr, "  genhtml read it: %s\n", idx);
	run_free(&r);
}

static void test_lcov(void)
{
	char info[700], rec[760], *text = NULL, *p, *end, src[1024] = "";
	const char *args[] = { "coverage", "--format", "lcov", "--test-name",
			       "cov", "--output", info, capdir, NULL };
	static struct daline want[MAXL], got[MAXL];
	size_t nwant = 0, ngot = 0, len = 0, nfnrec = 0;
	struct run r;
	FILE *f;

	if (!ptd_coverage_have_lcov()) {
		const char *a2[] = { "coverage", "--format", "lcov", capdir,
				     NULL };

		fprintf(stderr, "SKIP lcov: ptd was built without libdw "
				"(Debian's libdw-dev): checking its refusal\n");
		r = ptctl_run(a2);
		CHECK_EQ_INT(r.status, 1);
		CHECK_CONTAINS(r.err, "without libdw");
		run_free(&r);
		return;
	}
	(void)snprintf(info, sizeof(info), "%s/cov.info", tmpdir);
	r = ptctl_run(args);
	CHECK_EQ_INT(r.status, 0);
	run_free(&r);
	REQUIRE(ptd_file_read_all(info, 64u << 20, &text, &len) == 0);
	CHECK(!strncmp(text, "TN:cov\n", 7));

	/* the expectation: every instruction of the functions that ran */
	for (size_t k = 0; k < nfn; k++) {
		struct func *fu = &fn[k];
		struct a2l *a;

		if (!fu->run || !fu->ninsn)
			continue;
		a = calloc(fu->ninsn, sizeof(*a));
		REQUIRE(a);
		addr2line(fu->insn, fu->ninsn, a);
		for (size_t i = 0; i < fu->ninsn; i++) {
			uint64_t c = truth_count(fu->insn[i]);
			size_t j;

			if (a[i].line <= 0 || !strstr(a[i].file, "coverage.c"))
				continue;
			if (!src[0])
				(void)snprintf(src, sizeof(src), "%s",
					       a[i].file);
			CHECK_EQ_STR(a[i].file, src);
			for (j = 0; j < nwant && want[j].line != a[i].line; j++)
				;
			if (j == nwant) {
				REQUIRE(nwant < MAXL);
				want[nwant].line = a[i].line;
				want[nwant++].count = 0;
			}
			if (c > want[j].count)
				want[j].count = c;
		}
		/* FN at the function's first line, FNDA its entry count */
		{
			char fnl[300], fnda[300];

			(void)snprintf(fnl, sizeof(fnl), "\nFN:%d,%s\n",
				       a[0].line, fu->name);
			(void)snprintf(fnda, sizeof(fnda),
				       "\nFNDA:%" PRIu64 ",%s\n",
				       truth_count(fu->addr), fu->name);
			if (strstr(a[0].file, "coverage.c")) {
				CHECK_CONTAINS(text, fnl);
				CHECK_CONTAINS(text, fnda);
				nfnrec++;
			}
		}
		free(a);
	}
	CHECK(nfnrec >= 3);
	REQUIRE(src[0]);

	/* the record of coverage.c */
	(void)snprintf(rec, sizeof(rec), "SF:%s\n", src);
	p = strstr(text, rec);
	REQUIRE(p);
	end = strstr(p, "end_of_record\n");
	REQUIRE(end);
	for (char *q = p; q < end; q = strchr(q, '\n') + 1) {
		int line;
		unsigned long long c;

		if (sscanf(q, "DA:%d,%llu", &line, &c) == 2) {
			REQUIRE(ngot < MAXL);
			got[ngot].line = line;
			got[ngot++].count = c;
		}
	}
	fprintf(stderr, "  %s: %zu DA lines, addr2line gives %zu\n", src, ngot,
		nwant);
	CHECK_EQ_U64(ngot, nwant);
	for (size_t j = 0; j < nwant; j++) {
		bool found = false;

		for (size_t i = 0; i < ngot; i++)
			if (got[i].line == want[j].line) {
				found = true;
				if (got[i].count != want[j].count)
					CHECK_FAIL_("line %d: DA %" PRIu64
						    ", truth %" PRIu64,
						    want[j].line, got[i].count,
						    want[j].count);
			}
		if (!found)
			CHECK_FAIL_("line %d (count %" PRIu64 ") has no DA",
				    want[j].line, want[j].count);
	}
	/* the lines the program marks as never run are there, at 0 */
	{
		char *source = NULL;
		size_t slen = 0;
		unsigned lineno = 1, never = 0;

		REQUIRE(ptd_file_read_all(src, 1u << 20, &source, &slen) == 0);
		for (char *q = source; q && *q; lineno++) {
			char *nl = strchr(q, '\n');

			if (nl)
				*nl = 0;
			if (strstr(q, "/* never:")) {
				char da[64];

				(void)snprintf(da, sizeof(da), "\nDA:%u,0\n",
					       lineno);
				CHECK_CONTAINS(text, da);
				never++;
			}
			q = nl ? nl + 1 : NULL;
		}
		CHECK_EQ_INT(never, 2);
		free(source);
	}

	/* genhtml on that record alone (the C library's sources are not
	 * on this machine) */
	{
		char one[700];

		(void)snprintf(one, sizeof(one), "%s/one.info", tmpdir);
		f = fopen(one, "w");
		REQUIRE(f);
		fprintf(f, "TN:cov\n%.*s", (int)(end + 14 - p), p);
		fclose(f);
		run_genhtml(one);
	}
	free(text);
}

/* The program's DWARF made garbage, in a copy under --sysroot (which a
 * perf.data's files are looked up in; a capture names its files where
 * they are): the text is the same, lcov has no line of it and says which
 * file. */
static void test_bad_dwarf(void)
{
	char root[700], copy[1900], cmd[5200], line[512], info[700], pd[700];
	const char *ex[] = { "export", "--format", "perf-data", capdir, pd,
			     NULL };
	const char *args[] = { "coverage", "--sysroot", root, pd, NULL };
	const char *largs[] = { "coverage", "--format", "lcov", "--sysroot",
				root, "--output", info, pd, NULL };
	unsigned smashed = 0;
	struct run r;
	FILE *f;
	int fd;

	if (!ptd_coverage_have_lcov()) {
		fprintf(stderr, "SKIP bad DWARF: built without libdw\n");
		return;
	}
	(void)snprintf(root, sizeof(root), "%s/root", tmpdir);
	(void)snprintf(copy, sizeof(copy), "%s%s", root, exe);
	(void)snprintf(info, sizeof(info), "%s/bad.info", tmpdir);
	(void)snprintf(pd, sizeof(pd), "%s/bad.perf.data", tmpdir);
	r = ptctl_run(ex);
	CHECK_EQ_INT(r.status, 0);
	run_free(&r);
	(void)snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\" && "
					 "cp '%s' '%s'", copy, exe, copy);
	REQUIRE(system(cmd) == 0);
	/* every .debug_* section's bytes: 0xff */
	(void)snprintf(cmd, sizeof(cmd), "readelf -S -W '%s'", exe);
	f = popen(cmd, "r");
	REQUIRE(f);
	fd = open(copy, O_WRONLY);
	REQUIRE(fd >= 0);
	while (fgets(line, sizeof(line), f)) {
		char name[64], type[64];
		unsigned long long addr, off, size;
		const char *b = strchr(line, ']');

		if (!b || sscanf(b + 1, " %63s %63s %llx %llx %llx", name, type,
				 &addr, &off, &size) != 5 ||
		    strncmp(name, ".debug_", 7))
			continue;
		for (unsigned long long i = 0; i < size; i++)
			CHECK(pwrite(fd, "\xff", 1, (off_t)(off + i)) == 1);
		smashed++;
	}
	(void)close(fd);
	CHECK_EQ_INT(pclose(f), 0);
	CHECK(smashed >= 3);

	r = ptctl_run(args);
	CHECK_EQ_INT(r.status, 0);
	CHECK_CONTAINS(r.out, copy);	/* read from the copy */
	if (r.out)
		parse_text(r.out, false);
	run_free(&r);
	r = ptctl_run(largs);
	CHECK_EQ_INT(r.status, 0);
	/* the file is named; no line of coverage.c */
	CHECK_CONTAINS(r.err, copy);
	fprintf(stderr, "  %s", r.err ? r.err : "");
	run_free(&r);
	{
		char *text = NULL;
		size_t len = 0;

		REQUIRE(ptd_file_read_all(info, 64u << 20, &text, &len) == 0);
		CHECK(!strstr(text, "coverage.c"));
		free(text);
	}
}

/* ptctl coverage SESSION, for a session attached with record. */
static void test_session(void)
{
	char req[200], out[700], err[700], sid[32], want[1300];
	const char *args[] = { "coverage", sid, NULL };
	const char *bad[] = { "coverage", "999", NULL };
	char *text = NULL, *msg = NULL;
	size_t len = 0;
	struct daemon d;
	int go = -1, rc;
	pid_t t, p;
	cJSON *r;
	long s;

	REQUIRE(daemon_start(&d, "d", ""));
	t = spawn_target(0.3, &go);
	REQUIRE(t > 0);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":\"a\",\"cmd\":\"attach\",\"pid\":%ld,"
		       "\"options\":{\"record\":true}}\n",
		       (long)t);
	r = dc_call1(&d, req);
	if (!dc_ok(r))
		CHECK_FAIL_("attach: %s: %s", dc_err_code(r), dc_err_msg(r));
	s = (long)dc_num(r, "session");
	cJSON_Delete(r);
	release(&go);
	(void)snprintf(sid, sizeof(sid), "%ld", s);
	(void)snprintf(out, sizeof(out), "%s/session.out", tmpdir);
	(void)snprintf(err, sizeof(err), "%s/session.err", tmpdir);
	p = ptctl_spawn(&d, out, err, args);
	REQUIRE(p > 0);
	rc = wait_target(p, 300000);
	(void)ptd_file_read_all(err, 1 << 16, &msg, &len);
	if (rc != 0)
		fprintf(stderr, "  coverage %s: exit %d: %s\n", sid, rc,
			msg ? msg : "");
	CHECK_EQ_INT(rc, 0);
	REQUIRE(ptd_file_read_all(out, 1 << 24, &text, &len) == 0);
	(void)snprintf(want, sizeof(want), "# coverage of session %ld\n", s);
	CHECK(!strncmp(text, want, strlen(want)));
	(void)snprintf(want, sizeof(want), "\nmodule %s/prog-attach\n", progs);
	CHECK_CONTAINS(text, want);
	CHECK_CONTAINS(text, "  collatz\n");
	fprintf(stderr, "  session %ld: %zu bytes of coverage\n", s, len);
	free(text);
	free(msg);
	msg = NULL;
	/* the other views of the same session, recorded again */
	{
		const char *pf[] = { "export", "--format", "perfetto", sid,
				     NULL };
		const char *fg[] = { "flamegraph", sid, NULL };
		const char *const *views[] = { pf, fg };
		static const char *const want_in[] = {
			"\"input\":\"session ", "<svg" };

		for (size_t i = 0; i < 2; i++) {
			p = ptctl_spawn(&d, out, err, views[i]);
			REQUIRE(p > 0);
			rc = wait_target(p, 300000);
			(void)ptd_file_read_all(err, 1 << 16, &msg, &len);
			if (rc != 0)
				fprintf(stderr, "  %s %s: exit %d: %s\n",
					views[i][0], sid, rc, msg ? msg : "");
			CHECK_EQ_INT(rc, 0);
			free(msg);
			msg = NULL;
			REQUIRE(ptd_file_read_all(out, 1 << 24, &text, &len) ==
				0);
			CHECK_CONTAINS(text, want_in[i]);
			CHECK_CONTAINS(text, "collatz");
			free(text);
		}
	}
	/* no such session: refused, saying so */
	p = ptctl_spawn(&d, out, err, bad);
	REQUIRE(p > 0);
	rc = wait_target(p, 60000);
	(void)ptd_file_read_all(err, 1 << 16, &msg, &len);
	CHECK(rc != 0);
	CHECK_CONTAINS(msg, "no_such_session");
	free(msg);
	CHECK_EQ_INT(wait_target(t, 60000), 0);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

static void test_usage(void)
{
	char out[700];
	const char *bad[] = { "coverage", "--format", "xml", capdir, NULL };
	const char *none[] = { "coverage", "/nonexistent/trace", NULL };
	const char *twice[] = { "coverage", "--output", out, capdir, NULL };
	const char *notfor[] = { "coverage", "--title", "x", capdir, NULL };
	struct run r;

	r = ptctl_run(bad);
	CHECK_EQ_INT(r.status, 1);
	CHECK_CONTAINS(r.err, "'xml'");
	run_free(&r);
	r = ptctl_run(notfor);
	CHECK_EQ_INT(r.status, 1);
	CHECK_CONTAINS(r.err, "--title is for ptctl flamegraph");
	run_free(&r);
	r = ptctl_run(none);
	CHECK_EQ_INT(r.status, 2);
	CHECK_CONTAINS(r.err, "/nonexistent/trace");
	run_free(&r);
	(void)snprintf(out, sizeof(out), "%s/twice.txt", tmpdir);
	r = ptctl_run(twice);
	CHECK_EQ_INT(r.status, 0);
	run_free(&r);
	r = ptctl_run(twice);
	CHECK_EQ_INT(r.status, 2);
	CHECK_CONTAINS(r.err, "not replaced");
	run_free(&r);
}

int main(void)
{
	struct run r;

	harness_setup("/tmp/ptd-cov-XXXXXX");
	(void)snprintf(ptctl, sizeof(ptctl), "%s/daemon/ptctl", build_root);
	(void)snprintf(exe, sizeof(exe), "%s/prog-coverage", progs);
	(void)snprintf(capdir, sizeof(capdir), "%s/cap", tmpdir);
	if (access(exe, X_OK) != 0)
		SKIP_ALL("%s is not built", exe);
	{
		const char *args[] = { "trace", "--out", capdir, "--start",
				       "entry", "--no-decode", "--quiet-target",
				       "--", exe, NULL };

		r = ptctl_run(args);
		if (r.status != 0) {
			CHECK_FAIL_("ptctl trace %s: %s", exe,
				    r.err ? r.err : "");
			run_free(&r);
			return harness_done();
		}
		run_free(&r);
	}
	load_nm();
	load_truth();
	RUN(test_text);
	RUN(test_other_inputs);
	RUN(test_lcov);
	RUN(test_bad_dwarf);
	RUN(test_session);
	RUN(test_usage);
	for (size_t k = 0; k < nfn; k++)
		free(fn[k].insn);
	free(truth);
	return harness_done();
}
