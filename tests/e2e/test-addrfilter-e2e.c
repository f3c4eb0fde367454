/* SPDX-License-Identifier: MIT */
/*
 * Address filters on real programs, through the software PT source: trace
 * tests/progs/prog-recursion with a filter on one function given as
 * file+offset (found with libelf), and require that
 *  - both decoder paths reproduce the capture's ground truth exactly
 *    (ptd_capture_verify, the decoder configured from the capture),
 *  - every traced instruction lies inside the range,
 *  - an unfiltered trace of the same run (ASLR off) holds the same
 *    instructions inside the range, in the same order;
 * with two ranges at once; a range in a library the program has not
 * loaded yet is pending until its dlopen (as the kernel's filters are),
 * then exact; a range in a file the program never maps traces nothing
 * and is reported pending; a file that does not exist is refused by name.
 *
 * Through the daemon: `ptctl attach --filter` (with --capture) on a running
 * prog-attach, a filter on collatz(): the stream holds only instructions
 * inside the range, and per thread they are the end of the capture's
 * ground truth (the subscriber joins after the attach); status shows the
 * filter; a bad filter is refused naming the column, a file that does
 * not exist naming the file; a file not mapped yet is accepted.
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "e2e/daemon-harness.h"
#include "target.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "perf/addrfilter.h"
#include "swpt/capture.h"
#include "swpt/capdecode.h"
#include "swpt/tracer.h"

static const char *progs_dir;
static char workdir[256];

static char *prog(const char *name)
{
	static char path[4][PATH_MAX];
	static unsigned next;
	char *p = path[next++ % 4];

	char tmp[512];

	/* The path the kernel shows in /proc/PID/maps, which filters name. */
	(void)snprintf(tmp, sizeof(tmp), "%s/prog-%s", progs_dir, name);
	if (!realpath(tmp, p))
		(void)snprintf(p, 512, "%s", tmp);
	return p;
}

/* File offset and size of function @sym in @path (its symbol table and
 * the PT_LOAD segment holding it).  Returns 0 or -1 (printed). */
static int func_offset(const char *path, const char *sym, uint64_t *ret_off,
		       uint64_t *ret_size)
{
	Elf *e = NULL;
	Elf_Scn *scn = NULL;
	GElf_Sym found;
	bool have = false;
	size_t nph = 0;
	int fd, r = -1;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || !(e = elf_begin(fd, ELF_C_READ, NULL)))
		goto out;
	while (!have && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB ||
		    !sh.sh_entsize || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *n;

			if (!gelf_getsym(d, (int)i, &s) ||
			    GELF_ST_TYPE(s.st_info) != STT_FUNC || !s.st_size)
				continue;
			n = elf_strptr(e, sh.sh_link, s.st_name);
			if (n && !strcmp(n, sym)) {
				found = s;
				have = true;
				break;
			}
		}
	}
	if (!have || elf_getphdrnum(e, &nph) != 0)
		goto out;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    !(ph.p_flags & PF_X) || found.st_value < ph.p_vaddr ||
		    found.st_value >= ph.p_vaddr + ph.p_filesz)
			continue;
		*ret_off = found.st_value - ph.p_vaddr + ph.p_offset;
		*ret_size = found.st_size;
		r = 0;
		break;
	}
out:
	if (r)
		fprintf(stderr, "no function '%s' found in %s\n", sym, path);
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
	return r;
}

/* What the last trace() returned. */
static struct ptd_swpt_result last_res;

/* Trace @argv with @filter_text (NULL: none) into @name. */
static int trace(const char *name, char *const argv[], const char *filter_text,
		 char *dir, size_t cap, struct ptd_diag *diag)
{
	struct ptd_addrfilter f;
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	int r;

	(void)snprintf(dir, cap, "%s/%s", workdir, name);
	memset(&so, 0, sizeof(so));
	so.outdir = dir;
	so.quiet_target = true;
	memset(&f, 0, sizeof(f));
	if (filter_text) {
		r = ptd_addrfilter_parse(filter_text, PTD_ADDRFILTER_MAX, &f,
					 diag);
		if (r < 0)
			return r;
		so.filter = &f;
		so.filter_text = filter_text;
	}
	memset(&res, 0, sizeof(res));
	r = ptd_swpt_run(argv, &so, &res, diag);
	last_res = res;
	ptd_addrfilter_fini(&f);
	if (r == 0 && (!res.exited || res.exit_code != 0))
		r = ptd_diagf(diag, -EPROTO, "%s did not exit 0", argv[0]);
	return r;
}

struct range {
	uint64_t a, b;
};

static bool in_ranges(const struct range *rg, size_t n, uint64_t ip)
{
	for (size_t i = 0; i < n; i++)
		if (rg[i].a <= ip && ip <= rg[i].b)
			return true;
	return false;
}

/* Load @dir, verify it, check every truth IP is inside @rg, and return
 * thread 0's truth. */
static void check_capture(const char *dir, const char *text,
			  struct range *rg, size_t nrg, uint64_t **ret_truth,
			  size_t *ret_n)
{
	struct ptd_verify_report rep;
	struct ptd_diag diag = { "" };
	struct ptd_capture c;
	uint64_t *truth = NULL;
	size_t n = 0;
	int r;

	*ret_truth = NULL;
	*ret_n = 0;
	r = ptd_capture_load(dir, &c, &diag);
	if (r < 0) {
		CHECK_FAIL_("loading %s: %s", dir, diag.msg);
		return;
	}
	/* The capture records the filter, resolved. */
	CHECK_EQ_STR(c.filter, text);
	CHECK_EQ_INT(c.addr_filter.config.ctl.addr0_cfg, 1);
	CHECK_EQ_U64(c.addr_filter.addr0_b - c.addr_filter.addr0_a,
		     rg[0].b - rg[0].a);
	rg[0].a = c.addr_filter.addr0_a;
	rg[0].b = c.addr_filter.addr0_b;
	if (nrg > 1) {
		CHECK_EQ_INT(c.addr_filter.config.ctl.addr1_cfg, 1);
		CHECK_EQ_U64(c.addr_filter.addr1_b - c.addr_filter.addr1_a,
			     rg[1].b - rg[1].a);
		rg[1].a = c.addr_filter.addr1_a;
		rg[1].b = c.addr_filter.addr1_b;
	}
	r = ptd_capture_verify(&c, &rep, &diag);
	if (r < 0) {
		CHECK_FAIL_("verify %s: %s", dir, diag.msg);
	} else {
		for (size_t i = 0; i < rep.nthreads; i++)
			if (!rep.threads[i].ok)
				CHECK_FAIL_("thread %ld: %s",
					    (long)rep.threads[i].tid,
					    rep.threads[i].why);
		CHECK(rep.ok);
		ptd_verify_report_fini(&rep);
	}
	r = ptd_capture_read_truth(&c, 0, &truth, &n, &diag);
	CHECK_EQ_INT(r, 0);
	CHECK(n > 0);
	for (size_t i = 0; i < n; i++)
		if (!in_ranges(rg, nrg, truth[i])) {
			CHECK_FAIL_("truth[%zu] = %#" PRIx64 " is outside "
				    "the filter", i, truth[i]);
			break;
		}
	ptd_capture_fini(&c);
	*ret_truth = truth;
	*ret_n = n;
}

/* Thread @ti's instructions inside @rg in the unfiltered trace @dir equal
 * @want. */
static void check_subsequence(const char *dir, size_t ti,
			      const struct range *rg, size_t nrg,
			      const uint64_t *want, size_t nwant)
{
	struct ptd_diag diag = { "" };
	struct ptd_capture c;
	uint64_t *all = NULL;
	size_t n = 0, k = 0;

	if (ptd_capture_load(dir, &c, &diag) < 0 ||
	    ptd_capture_read_truth(&c, ti, &all, &n, &diag) < 0) {
		CHECK_FAIL_("reading %s: %s", dir, diag.msg);
		ptd_capture_fini(&c);
		return;
	}
	CHECK(!c.addr_filter.config.addr_cfg);
	for (size_t i = 0; i < n; i++) {
		if (!in_ranges(rg, nrg, all[i]))
			continue;
		if (k >= nwant || all[i] != want[k]) {
			CHECK_FAIL_("in-range instruction #%zu of the "
				    "unfiltered trace is %#" PRIx64 ", the "
				    "filtered trace has %#" PRIx64, k, all[i],
				    k < nwant ? want[k] : 0);
			break;
		}
		k++;
	}
	CHECK_EQ_INT(k, nwant);
	free(all);
	ptd_capture_fini(&c);
}

/* The unfiltered trace of prog-recursion (made once). */
static const char *unfiltered(void)
{
	static char dir[600];
	static bool done;
	char *argv[] = { prog("recursion"), NULL };
	struct ptd_diag diag = { "" };

	if (!done && trace("all", argv, NULL, dir, sizeof(dir), &diag) < 0) {
		CHECK_FAIL_("tracing %s: %s", argv[0], diag.msg);
		return NULL;
	}
	done = true;
	return dir;
}

static void test_one_function(void)
{
	char *argv[] = { prog("recursion"), NULL };
	struct ptd_diag diag = { "" };
	struct range rg[1];
	uint64_t off, size, *truth;
	char text[1024], dir[600];
	size_t n;
	int r;

	REQUIRE(func_offset(argv[0], "fib", &off, &size) == 0);
	rg[0].a = 0;
	rg[0].b = size - 1;
	(void)snprintf(text, sizeof(text), "filter %#" PRIx64 "/%#" PRIx64
		       "@%s", off, size, argv[0]);
	r = trace("fib", argv, text, dir, sizeof(dir), &diag);
	if (r < 0)
		CHECK_FAIL_("tracing with '%s': %s", text, diag.msg);
	REQUIRE(r == 0);
	check_capture(dir, text, rg, 1, &truth, &n);
	REQUIRE(truth);
	fprintf(stderr, "  fib: %zu instructions traced in [%#" PRIx64
		", %#" PRIx64 "]\n", n, rg[0].a, rg[0].b);
	if (unfiltered())
		check_subsequence(unfiltered(), 0, rg, 1, truth, n);
	free(truth);
}

/* Two ranges (fib and deep), the second with separators perf accepts. */
static void test_two_functions(void)
{
	char *argv[] = { prog("recursion"), NULL };
	struct ptd_diag diag = { "" };
	struct range rg[2];
	uint64_t off[2], size[2], *truth;
	char text[2048], dir[600];
	size_t n;
	int r;

	REQUIRE(func_offset(argv[0], "fib", &off[0], &size[0]) == 0);
	REQUIRE(func_offset(argv[0], "deep", &off[1], &size[1]) == 0);
	for (int i = 0; i < 2; i++) {
		rg[i].a = 0;
		rg[i].b = size[i] - 1;
	}
	(void)snprintf(text, sizeof(text),
		       "filter %#" PRIx64 "/%#" PRIx64 "@%s, filter %" PRIu64
		       " / %" PRIu64 " @ %s", off[0], size[0], argv[0],
		       off[1], size[1], argv[0]);
	r = trace("fib-deep", argv, text, dir, sizeof(dir), &diag);
	if (r < 0)
		CHECK_FAIL_("tracing with '%s': %s", text, diag.msg);
	REQUIRE(r == 0);
	check_capture(dir, text, rg, 2, &truth, &n);
	REQUIRE(truth);
	/* deep(100) alone runs > 100 instructions of deep. */
	{
		size_t in_deep = 0;

		for (size_t i = 0; i < n; i++)
			in_deep += rg[1].a <= truth[i] && truth[i] <= rg[1].b;
		CHECK(in_deep > 100);
		CHECK(in_deep < n);
	}
	if (unfiltered())
		check_subsequence(unfiltered(), 0, rg, 2, truth, n);
	free(truth);
}

/* A file the program never maps (but that exists): the range is pending
 * all along, as the kernel's would be: nothing traced, and the result
 * says so.  A file that does not exist is refused, naming it. */
static void test_unmapped_file(void)
{
	char *argv[] = { prog("recursion"), NULL };
	struct ptd_diag diag = { "" };
	char text[1024], dir[600];
	int r;

	(void)snprintf(text, sizeof(text), "filter 0x0/0x10@%s",
		       prog("fnptr"));
	r = trace("unmapped", argv, text, dir, sizeof(dir), &diag);
	if (r < 0)
		CHECK_FAIL_("tracing with '%s': %s", text, diag.msg);
	CHECK_EQ_U64(last_res.insns, 0);
	CHECK_EQ_INT(last_res.filter_pending, 1);

	(void)snprintf(text, sizeof(text), "filter 0x0/0x10@%s/no-such-lib.so",
		       progs_dir);
	r = trace("nonexistent", argv, text, dir, sizeof(dir), &diag);
	CHECK_EQ_INT(r, -PTD_ENOIMAGE);
	CHECK_CONTAINS(diag.msg, "no-such-lib.so");
}

/* Every thread of @c decodes to its ground truth on both paths. */
static void verify_capture(const struct ptd_capture *c)
{
	struct ptd_verify_report rep;
	struct ptd_diag diag = { "" };

	if (ptd_capture_verify(c, &rep, &diag) < 0) {
		CHECK_FAIL_("verify %s: %s", c->dir, diag.msg);
		return;
	}
	for (size_t i = 0; i < rep.nthreads; i++)
		if (!rep.threads[i].ok)
			CHECK_FAIL_("%s: thread %ld: %s", c->dir,
				    (long)rep.threads[i].tid,
				    rep.threads[i].why);
	CHECK(rep.ok);
	ptd_verify_report_fini(&rep);
}

/* A filter on a function of a library the program has not loaded yet
 * (prog-dlopen loads it, calls it and unloads it, twice): the range is
 * pending until a dlopen maps the library's code, and pending again once
 * it is unmapped.  The trace decodes to the ground truth, every
 * instruction traced is the function's in one of the library's mappings,
 * and an unfiltered trace of the same run holds the same instructions
 * there, in the same order, thread by thread.  @threaded: a second thread
 * that is tracing all along, without a syscall, calls the function too:
 * the new filter reaches it at once, as the kernel's restart of a running
 * event does, not at its next kernel entry. */
static void dlopen_case(const char *name, bool threaded)
{
	char lib[PATH_MAX], tmp[600], text[PATH_MAX + 64], dir[600];
	char *argv[] = { prog("dlopen"), lib, threaded ? "thread" : NULL,
			 NULL };
	struct ptd_diag diag = { "" };
	struct ptd_capture c;
	struct range rg[8];
	uint64_t off, size, *truth[2] = { NULL, NULL };
	size_t nrg = 0, n[2] = { 0, 0 }, nth = threaded ? 2 : 1, i, t;
	int r;

	(void)snprintf(tmp, sizeof(tmp), "%s/libptdtarget.so", progs_dir);
	REQUIRE(realpath(tmp, lib) != NULL);
	REQUIRE(func_offset(lib, "ptd_target_sum", &off, &size) == 0);
	(void)snprintf(text, sizeof(text), "filter %#" PRIx64 "/%#" PRIx64
		       "@%s", off, size, lib);
	r = trace(name, argv, text, dir, sizeof(dir), &diag);
	if (r < 0)
		CHECK_FAIL_("tracing with '%s': %s", text, diag.msg);
	REQUIRE(r == 0);
	CHECK_EQ_INT(last_res.filter_pending, 1);	/* unloaded at the end */
	REQUIRE(ptd_capture_load(dir, &c, &diag) == 0);
	REQUIRE(c.nthreads == nth);
	for (i = 0; i < c.tl.n; i++) {
		const struct ptd_tl_event *e = &c.tl.ev[i];

		if (e->op != PTD_TL_MAP || !e->path || strcmp(e->path, lib) ||
		    off < e->pgoff || off - e->pgoff >= e->end - e->start)
			continue;
		REQUIRE(nrg < PTD_ARRAY_SIZE(rg));
		rg[nrg].a = e->start + (off - e->pgoff);
		rg[nrg].b = rg[nrg].a + size - 1;
		nrg++;
	}
	CHECK(nrg >= 1);
	verify_capture(&c);
	for (t = 0; t < nth; t++)
		CHECK_EQ_INT(ptd_capture_read_truth(&c, t, &truth[t], &n[t],
						    &diag), 0);
	ptd_capture_fini(&c);
	/* main: ptd_target_sum(10) twice, a loop of ten rounds each time;
	 * the second thread: five times */
	CHECK(n[0] > 40);
	if (threaded)
		CHECK(n[1] > 100);
	for (t = 0; t < nth; t++) {
		for (i = 0; i < n[t]; i++)
			if (!in_ranges(rg, nrg, truth[t][i])) {
				CHECK_FAIL_("thread %zu: truth[%zu] = %#" PRIx64
					    " is outside the function", t, i,
					    truth[t][i]);
				break;
			}
		fprintf(stderr, "  %s: thread %zu: %zu instructions of "
			"ptd_target_sum in %zu mapping(s) of the library\n",
			name, t, n[t], nrg);
	}
	(void)snprintf(text, sizeof(text), "%s-all", name);
	r = trace(text, argv, NULL, tmp, sizeof(tmp), &diag);
	if (r < 0)
		CHECK_FAIL_("tracing unfiltered: %s", diag.msg);
	/* unfiltered, the second thread's calls come after its image's
	 * last change and before the dlclose that follows its end */
	if (r == 0 && ptd_capture_load(tmp, &c, &diag) == 0) {
		verify_capture(&c);
		ptd_capture_fini(&c);
	}
	for (t = 0; r == 0 && t < nth; t++)
		check_subsequence(tmp, t, rg, nrg, truth[t], n[t]);
	free(truth[0]);
	free(truth[1]);
}

static void test_dlopen(void)
{
	dlopen_case("dlopen", false);
}

static void test_dlopen_thread(void)
{
	dlopen_case("dlopen-thread", true);
}

/* ---- through the daemon --------------------------------------------- */

static struct daemon dmn;

/* Run ptctl to the end; its stdout (malloc'd) in *ret_out; stderr goes
 * to ours. */
static int ptctl(const char *const *args, char **ret_out)
{
	char out[700], err[700];
	char *etext = NULL;
	size_t len;
	int r;

	(void)snprintf(out, sizeof(out), "%s/ptctl.out", workdir);
	(void)snprintf(err, sizeof(err), "%s/ptctl.err", workdir);
	r = wait_exit(ptctl_spawn(&dmn, out, err, args));
	if (ptd_file_read_all(err, 1u << 20, &etext, &len) == 0 && etext) {
		fprintf(stderr, "%s", etext);
		/* refusals are checked on what the user sees */
		if (r != 0)
			(void)ptd_file_write_atomic(out, etext, len);
		free(etext);
	}
	if (ptd_file_read_all(out, 1u << 20, ret_out, &len) < 0)
		*ret_out = NULL;
	if (!*ret_out)
		*ret_out = calloc(1, 1);
	if (!*ret_out)
		abort();
	return r;
}

/* Whether the stream written to @path shows an insn record within @secs
 * seconds (it is read as it grows). */
static bool wait_for_insn(const char *path, unsigned secs)
{
	for (unsigned i = 0; i < secs * 20; i++) {
		_cleanup_free_ char *text = NULL;
		size_t n = 0;

		if (ptd_file_read_all(path, 1u << 30, &text, &n) == 0 &&
		    strstr(text, "\"type\":\"insn\""))
			return true;
		msleep(50);
	}
	return false;
}

/* prog-attach running for @secs, past its "ready". */
static pid_t start_target(double secs)
{
	char arg[32], buf[8];
	int p[2];
	pid_t pid;

	(void)snprintf(arg, sizeof(arg), "%g", secs);
	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(p[1], 3);
		execl(prog("attach"), prog("attach"), arg, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	if (read(p[0], buf, sizeof(buf)) <= 0) {
		close(p[0]);
		return -1;
	}
	close(p[0]);
	return pid;
}

/* The IPs of @tid's insn records in @text, in order. */
static size_t stream_ips(const char *text, pid_t tid, uint64_t *ips,
			 size_t cap)
{
	char key[64];
	size_t n = 0;

	if (!text)
		return 0;
	(void)snprintf(key, sizeof(key), "\"tid\":%d,", (int)tid);
	for (const char *p = text, *e; (e = strchr(p, '\n')); p = e + 1) {
		const char *ipp;
		uint64_t ip;

		if (strncmp(p, "{\"type\":\"insn\"", 14) ||
		    !memmem(p, (size_t)(e - p), key, strlen(key)) ||
		    !(ipp = memmem(p, (size_t)(e - p), "\"ip\":\"0x", 8)) ||
		    ptd_parse_u64n(ipp + 8, strcspn(ipp + 8, "\""), 16,
				   &ip) < 0)
			continue;
		if (n < cap)
			ips[n] = ip;
		n++;
	}
	return n;
}

/* Every insn record of the stream is inside [a, b]; per thread the stream
 * is the end of the capture's truth.  Returns the instructions streamed. */
static size_t check_stream(const char *text, const char *capdir)
{
	struct ptd_diag diag = { "" };
	struct ptd_capture c;
	size_t total = 0;

	if (ptd_capture_load(capdir, &c, &diag) < 0) {
		CHECK_FAIL_("capture: %s", diag.msg);
		return 0;
	}
	CHECK_EQ_INT(c.addr_filter.config.ctl.addr0_cfg, 1);
	for (size_t i = 0; i < c.nthreads; i++) {
		uint64_t *truth = NULL, *got;
		size_t nt = 0, ng;

		if (ptd_capture_read_truth(&c, i, &truth, &nt, &diag) < 0) {
			CHECK_FAIL_("truth: %s", diag.msg);
			continue;
		}
		ng = stream_ips(text, c.threads[i].tid, NULL, 0);
		got = calloc(ng + 1, sizeof(*got));
		if (!got) {
			CHECK_FAIL_("%s", "out of memory");
			free(truth);
			continue;
		}
		(void)stream_ips(text, c.threads[i].tid, got, ng);
		CHECK(ng <= nt);
		for (size_t k = 0; k < ng && ng <= nt; k++) {
			if (got[k] < c.addr_filter.addr0_a ||
			    got[k] > c.addr_filter.addr0_b) {
				CHECK_FAIL_("tid %d: streamed %#" PRIx64
					    " outside the filter",
					    (int)c.threads[i].tid, got[k]);
				break;
			}
			if (got[k] != truth[nt - ng + k]) {
				CHECK_FAIL_("tid %d: streamed insn %zu of %zu "
					    "is %#" PRIx64 ", truth %#" PRIx64,
					    (int)c.threads[i].tid, k, ng,
					    got[k], truth[nt - ng + k]);
				break;
			}
		}
		total += ng;
		free(got);
		free(truth);
	}
	ptd_capture_fini(&c);
	return total;
}

static void test_daemon(void)
{
	uint64_t off, size;
	char pidarg[32], filter[1200], capdir[700], sout[700], sid[32];
	char *out = NULL;
	pid_t t, streamer;
	int r;

	if (geteuid() != 0) {
		fprintf(stderr, "  skipped: --capture needs root\n");
		return;
	}
	REQUIRE(func_offset(prog("attach"), "collatz", &off, &size) == 0);
	REQUIRE(daemon_start(&dmn, "daemon", "subscriber_queue_size = 1G\n"));
	/* It runs until told, once its filtered range was traced: a fixed
	 * run time was outlasted by the checks before the attach under
	 * ASan and load ("pid N is a zombie"). */
	t = start_target(3600);
	REQUIRE(t > 0);
	(void)snprintf(pidarg, sizeof(pidarg), "%d", (int)t);

	/* A bad filter: the column and the reason. */
	{
		const char *a[] = { "attach", pidarg, "--filter",
				    "filter 0x10/0x10@/bin/x, filter 0x20",
				    NULL };

		CHECK(ptctl(a, &out) != 0);
		CHECK_CONTAINS(out, "column 26");
		free(out);
	}
	/* A file that does not exist. */
	{
		const char *a[] = { "attach", pidarg, "--filter",
				    "filter 0x0/0x10@/nonexistent/lib.so",
				    NULL };

		CHECK(ptctl(a, &out) != 0);
		CHECK_CONTAINS(out, "/nonexistent/lib.so");
		free(out);
	}
	/* A file that exists but that the process has not mapped (yet):
	 * accepted, the range pending; the session traces nothing and ends
	 * with its target, which runs on unharmed.  The target runs until
	 * told (SIGUSR1) once the attach answered: a fixed run time raced a
	 * slow attach (ASan, a loaded machine) and met a zombie. */
	{
		char pend[PATH_MAX + 32], parg[32];
		pid_t t2 = start_target(120);
		const char *a[] = { "attach", parg, "--filter", pend, NULL };

		REQUIRE(t2 > 0);
		(void)snprintf(parg, sizeof(parg), "%d", (int)t2);
		(void)snprintf(pend, sizeof(pend), "filter 0x0/0x10@%s",
			       prog("fnptr"));
		r = ptctl(a, &out);
		CHECK_EQ_INT(r, 0);
		if (r)
			fprintf(stderr, "  attach: %s", out ? out : "");
		free(out);
		CHECK_EQ_INT(target_tell(t2), 0);
		CHECK_EQ_INT(wait_exit(t2), 0);
	}

	(void)snprintf(filter, sizeof(filter), "filter %#" PRIx64 "/%#"
		       PRIx64 "@%s", off, size, prog("attach"));
	(void)snprintf(capdir, sizeof(capdir), "%s/daemon-capture", workdir);
	{
		const char *a[] = { "attach", pidarg, "--filter", filter,
				    "--capture", capdir, NULL };

		r = ptctl(a, &out);
		CHECK_EQ_INT(r, 0);
		if (r)
			fprintf(stderr, "  attach: %s", out ? out : "");
		if (!out)
			return;
		(void)snprintf(sid, sizeof(sid), "%.*s",
			       (int)strcspn(out, "\n"), out);
		free(out);
	}
	if (r == 0) {
		const char *st[] = { "status", sid, "--json", NULL };
		const char *sa[] = { "stream", sid, NULL };
		size_t n;

		(void)snprintf(sout, sizeof(sout), "%s/stream.out", workdir);
		streamer = ptctl_spawn(&dmn, sout, NULL, sa);
		CHECK_EQ_INT(ptctl(st, &out), 0);
		CHECK_CONTAINS(out, "\"filter\":\"filter 0x");
		free(out);
		out = NULL;
		CHECK(wait_for_insn(sout, 300));
		CHECK_EQ_INT(target_tell(t), 0);
		CHECK_EQ_INT(wait_exit(streamer), 0);
		out = NULL;
		REQUIRE(ptd_file_read_all(sout, 1u << 30, &out, &n) == 0);
		n = check_stream(out, capdir);
		fprintf(stderr, "  daemon: %zu in-range instructions streamed "
			"= the end of the truth\n", n);
		CHECK(n > 0);
		free(out);
	}
	CHECK_EQ_INT(wait_exit(t), 0);
	CHECK_EQ_INT(daemon_stop(&dmn), 0);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set (run through meson test)");
	/* Same addresses in every run: the unfiltered trace is compared
	 * with the filtered one address for address. */
	if (personality(ADDR_NO_RANDOMIZE) < 0)
		SKIP_ALL("personality(ADDR_NO_RANDOMIZE): %s", strerror(errno));
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-af-XXXXXX",
		       tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir)) {
		fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	RUN(test_one_function);
	RUN(test_two_functions);
	RUN(test_unmapped_file);
	RUN(test_dlopen);
	RUN(test_dlopen_thread);
	if (getenv("PTD_BUILD_ROOT")) {
		(void)snprintf(build_root, sizeof(build_root), "%s",
			       getenv("PTD_BUILD_ROOT"));
		(void)snprintf(progs, sizeof(progs), "%s", progs_dir);
		(void)snprintf(tmpdir, sizeof(tmpdir), "%s", workdir);
		RUN(test_daemon);
	}
	if (!check_failures || getenv("PTD_TEST_CLEANUP_ALWAYS"))
		(void)ptd_rm_rf(workdir);
	else
		fprintf(stderr, "captures kept in %s\n", workdir);
	return check_done();
}
