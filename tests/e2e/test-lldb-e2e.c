/* SPDX-License-Identifier: MIT */
/*
 * LLDB decodes what ptd exports: real programs are traced with the
 * software source, exported as LLDB bundles (lldb/export.h), loaded with
 * `lldb-22 ... trace load`, and every thread's instruction addresses as
 * LLDB dumps them must be the ground truth, in order.
 *
 * Per-CPU bundles: a multi-threaded program's capture (with TSC packets)
 * is laid out as LLDB's per-CPU bundles are -- each thread's trace cut
 * into runs at PSBs where the thread had just entered the kernel, the runs
 * scheduled on virtual CPUs in time order (threads that ran at once on
 * different CPUs, a thread's runs moving between CPUs), each CPU's trace
 * the runs it ran, its context switch trace SWITCH_CPU_WIDE records around
 * each run.  ptd's reader (lldb/percpu.h) must decode every thread to its
 * ground truth, with perf time on the records, and so must LLDB.
 *
 * The LLDB checks skip (with the reason) when no lldb-22 is installed;
 * ptd's own decode of the per-CPU bundle runs everywhere.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <linux/perf_event.h>

#include "check.h"
#include "e2e/daemon-harness.h"
#include "target.h"
#include "common/fileio.h"
#include "decode/psbsplit.h"
#include "input/input.h"
#include "record/jsonw.h"
#include "perf/sideband.h"
#include "perf/time.h"
#include "common/strutil.h"
#include "lldb/export.h"
#include "lldb/trace.h"
#include "swpt/capture.h"
#include "swpt/tracer.h"

static const char *progs_dir;
static const char *lldb;
static char workdir[256];

static const char *find_lldb(void)
{
	static const char *const cands[] = { "/usr/bin/lldb-22",
					     "/usr/lib/llvm-22/bin/lldb" };
	const char *env = getenv("PTD_LLDB");

	if (env && *env)
		return access(env, X_OK) == 0 ? env : NULL;
	for (size_t i = 0; i < PTD_ARRAY_SIZE(cands); i++)
		if (access(cands[i], X_OK) == 0)
			return cands[i];
	return NULL;
}

/* Run lldb with @args (NULL-terminated, after the program name), output to
 * @log.  Returns the exit status, or -1. */
static int run_lldb(char *const args[], const char *log)
{
	char *argv[64];
	size_t n = 0;
	int st = 0;
	pid_t pid;

	argv[n++] = (char *)"timeout";
	argv[n++] = (char *)"120";
	argv[n++] = (char *)lldb;
	for (size_t i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			      0644);

		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* What a thread executed: its instruction addresses (malloc'd, or NULL
 * with *ret_n 0 and a check failure when the thread is unknown). */
typedef uint64_t *(*truth_fn)(void *ctx, long tid, size_t *ret_n);

static uint64_t *capture_truth(void *ctx, long tid, size_t *ret_n)
{
	const struct ptd_capture *c = ctx;
	struct ptd_diag d = { "" };
	uint64_t *ips = NULL;
	ssize_t idx = ptd_capture_find_thread(c, (pid_t)tid);

	*ret_n = 0;
	if (idx < 0) {
		CHECK_FAIL_("lldb shows thread %ld, which the capture lacks",
			    tid);
		return NULL;
	}
	if (ptd_capture_read_truth(c, (size_t)idx, &ips, ret_n, &d) < 0) {
		CHECK_FAIL_("truth: %s", d.msg);
		return NULL;
	}
	return ips;
}

/* Compare LLDB's dump of one thread (the file @path, written by `thread
 * trace dump instructions -f -a -r -F`) with what @truth says the thread
 * executed. */
static void compare_dump(truth_fn truth_of, void *ctx, const char *path,
			 const char *log)
{
	_cleanup_free_ char *text = NULL;
	uint64_t *truth = NULL;
	size_t len = 0, ntruth = 0, k = 0, lineno = 0;
	long tid = -1;
	char *line, *save = NULL;

	if (ptd_file_read_all(path, 1u << 30, &text, &len) < 0) {
		CHECK_FAIL_("no dump '%s' from lldb (see %s)", path, log);
		return;
	}
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		unsigned long long id, ip;
		int used = 0;

		lineno++;
		if (sscanf(line, "thread #%*u: tid = %ld", &tid) == 1) {
			free(truth);
			truth = truth_of(ctx, tid, &ntruth);
			if (!truth)
				return;
			k = 0;
			continue;
		}
		if (strstr(line, "no more data"))
			continue;
		if (sscanf(line, " %llu: 0x%llx%n", &id, &ip, &used) != 2 ||
		    line[used] != '\0' || !truth) {
			CHECK_FAIL_("%s:%zu: unexpected line from lldb: "
				    "\"%.120s\"", path, lineno, line);
			break;
		}
		if (k >= ntruth || ip != truth[k]) {
			CHECK_FAIL_("thread %ld: instruction %zu: expected "
				    "0x%" PRIx64 ", lldb decoded 0x%llx", tid,
				    k, k < ntruth ? truth[k] : 0, ip);
			break;
		}
		k++;
	}
	if (!truth)
		CHECK_FAIL_("%s: no thread header from lldb", path);
	else if (k != ntruth)
		CHECK_FAIL_("thread %ld: lldb decoded %zu instructions, %zu "
			    "were executed", tid, k, ntruth);
	else
		fprintf(stderr, "  tid %ld: %zu instructions, as executed\n",
			tid, k);
	free(truth);
}

/* Whether the bundle in @bdir has a module named @system_path. */
static bool bundle_has(const char *bdir, const char *system_path)
{
	struct ptd_lldb_trace t;
	struct ptd_diag d = { "" };
	bool found = false;

	if (ptd_lldb_trace_load(bdir, &t, &d) < 0) {
		CHECK_FAIL_("%s", d.msg);
		return false;
	}
	for (size_t i = 0; i < t.nprocs; i++)
		for (size_t j = 0; j < t.procs[i].nmodules; j++)
			if (!strcmp(t.procs[i].modules[j].system_path,
				    system_path))
				found = true;
	ptd_lldb_trace_fini(&t);
	return found;
}

static bool lldb_dump_matches(const char *cdir, const char *bdir,
			      const char *name);

static void check_prog(const char *name, size_t want_threads,
		       const char *want_module)
{
	char prog[512], cdir[512], bdir[512];
	char *argv[] = { prog, NULL };
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag d = { "" };
	struct ptd_capture c;
	int r;

	(void)snprintf(prog, sizeof(prog), "%s/prog-%s", progs_dir, name);
	(void)snprintf(cdir, sizeof(cdir), "%s/%s-cap", workdir, name);
	(void)snprintf(bdir, sizeof(bdir), "%s/%s-lldb", workdir, name);
	memset(&so, 0, sizeof(so));
	so.outdir = cdir;
	so.quiet_target = true;
	r = ptd_swpt_run(argv, &so, &res, &d);
	if (r == -EPERM)
		SKIP_ALL("ptrace refused: %s", d.msg);
	if (r < 0) {
		CHECK_FAIL_("tracing %s: %s", name, d.msg);
		return;
	}
	REQUIRE(ptd_capture_load(cdir, &c, &d) == 0);
	CHECK_EQ_INT(c.nthreads, want_threads);
	r = ptd_lldb_export_capture(&c, bdir, &d);
	if (r < 0) {
		CHECK_FAIL_("export of %s: %s", name, d.msg);
		ptd_capture_fini(&c);
		return;
	}
	if (want_module)
		CHECK(bundle_has(bdir, want_module));
	ptd_capture_fini(&c);
	if (lldb_dump_matches(cdir, bdir, name))
		fprintf(stderr, "  lldb decodes %s as executed\n", name);
}

/* Load the bundle in @bdir into lldb and dump each of its first @nthreads
 * threads' instructions to WORKDIR/NAME-I.txt (@files).  Returns false
 * (nothing dumped) without lldb or when lldb fails (a check failure). */
#define MAX_DUMPS 8
static bool lldb_dump(const char *bdir, size_t nthreads, const char *name,
		      char files[MAX_DUMPS][600])
{
	char desc[600], log[600], load[700];
	/* sized for gcc, which bounds files[i] by all of files */
	static char cmds[MAX_DUMPS][4900];
	char *args[40];
	size_t n = 0, i;
	int r;

	if (!lldb)
		return false;
	(void)snprintf(desc, sizeof(desc), "%s/trace.json", bdir);
	(void)snprintf(log, sizeof(log), "%s/%s-lldb.log", workdir, name);
	(void)snprintf(load, sizeof(load), "trace load -v %s", desc);
	args[n++] = (char *)"-b";
	args[n++] = (char *)"-o";
	args[n++] = load;
	/* one dump per thread, by LLDB's thread index (1-based) */
	for (i = 0; i < nthreads && i < MAX_DUMPS; i++) {
		(void)snprintf(files[i], 600, "%s/%s-%zu.txt", workdir, name,
			       i + 1);
		(void)snprintf(cmds[i], sizeof(cmds[i]),
			       "thread trace dump instructions -f -a -r -F "
			       "%s %zu", files[i], i + 1);
		args[n++] = (char *)"-o";
		args[n++] = cmds[i];
	}
	args[n] = NULL;
	r = run_lldb(args, log);
	if (r != 0) {
		_cleanup_free_ char *out = NULL;
		size_t len = 0;

		(void)ptd_file_read_all(log, 1u << 20, &out, &len);
		CHECK_FAIL_("lldb exited with %d:\n%s", r, out ? out : "");
		return false;
	}
	return true;
}

/* Load the bundle in @bdir into lldb and compare each thread's dump with
 * the ground truth of the capture in @cdir.  Returns false (nothing
 * checked) without lldb. */
static bool lldb_dump_matches(const char *cdir, const char *bdir,
			      const char *name)
{
	char files[MAX_DUMPS][600];
	struct ptd_diag d = { "" };
	struct ptd_capture c;
	bool ok;

	if (!lldb)
		return false;
	if (ptd_capture_load(cdir, &c, &d) < 0) {
		CHECK_FAIL_("%s", d.msg);
		return false;
	}
	char log[600];

	(void)snprintf(log, sizeof(log), "%s/%s-lldb.log", workdir, name);
	ok = lldb_dump(bdir, c.nthreads, name, files);
	for (size_t i = 0; ok && i < c.nthreads && i < MAX_DUMPS; i++)
		compare_dump(capture_truth, &c, files[i], log);
	ptd_capture_fini(&c);
	return ok;
}

static void test_recursion(void) { check_prog("recursion", 1, NULL); }
static void test_fnptr(void) { check_prog("fnptr", 1, NULL); }
static void test_threads(void) { check_prog("threads", 3, NULL); }
/* the vDSO goes to LLDB wrapped as an ELF (lldb/elfwrap.h) */
static void test_vdso(void) { check_prog("vdso", 1, "[vdso]"); }

/* ---- per-CPU bundles ------------------------------------------------------ */

/* The synthesized bundles' conversion: ns = timeZero + tsc * 3 / 2, with
 * a timeZero past 2^63 as real machines have (perf's time_zero is the
 * sched clock at TSC 0, "negative" when the TSC started before it), which
 * trace.json holds as a 64-bit integer literal: a reader that keeps it
 * as a double is off by up to 2048 ns, far more than PC_MARGIN, and puts
 * the threads' runs in the wrong places.  PC_MARGIN: the TSC ticks kept
 * between a switch and the nearest PSB (more than the conversion's
 * rounding). */
#define PC_TIME_ZERO "18433473881008870804"
static const struct ptd_perf_clock pc_conv = {
	.time_zero = 18433473881008870804ull,
	.time_mult = 3,
	.time_shift = 1 };
#define PC_MARGIN 4u
#define PC_IDLE_TID 2147483647
#define PC_MAX_CPUS 16u

/* One run: bytes [off, off + len) of thread @thread's trace. */
struct pc_run {
	size_t thread;
	uint64_t off, len;
	uint64_t first_tsc, last_tsc;
	unsigned cpu;
};

struct pc_layout {
	struct pc_run *runs;
	size_t nruns;
	unsigned ncpus;
	size_t migrations;
};

/* Whether the last packet in [from, to) of @pt is a TIP.PGD: the thread
 * went into the kernel there, where a real switch would happen. */
static bool ends_in_kernel(const uint8_t *pt, size_t len, uint64_t from,
			   uint64_t to, const struct pt_cpu *cpu)
{
	struct pt_packet_decoder *pd;
	struct pt_config cfg;
	enum pt_packet_type last = ppt_invalid;

	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)(uintptr_t)pt;
	cfg.end = cfg.begin + len;
	cfg.cpu = *cpu;
	pd = pt_pkt_alloc_decoder(&cfg);
	if (!pd || pt_pkt_sync_set(pd, from) < 0) {
		pt_pkt_free_decoder(pd);
		return false;
	}
	for (;;) {
		struct pt_packet p;
		uint64_t off = 0;

		if (pt_pkt_get_offset(pd, &off) < 0 || off >= to ||
		    pt_pkt_next(pd, &p, sizeof(p)) < 0)
			break;
		last = p.type;
	}
	pt_pkt_free_decoder(pd);
	return last == ppt_tip_pgd;
}

static int run_cmp(const void *a, const void *b)
{
	const struct pc_run *x = a, *y = b;

	return x->first_tsc < y->first_tsc ? -1 : x->first_tsc > y->first_tsc;
}

/* Cut thread @ti's trace into runs and append them to @L. */
static void cut_thread(const struct ptd_capture *c, size_t ti,
		       const uint8_t *pt, size_t len, struct pc_layout *L)
{
	struct ptd_psb_block *b = NULL;
	uint64_t skipped = 1;
	size_t n = 0, k, start = 0;

	REQUIRE(ptd_psb_split(pt, len, &c->cpu, &b, &n, &skipped) == 0);
	REQUIRE(n > 0 && skipped == 0);
	for (k = 0; k < n; k++)
		REQUIRE(b[k].has_tsc);
	for (k = 1; k <= n; k++) {
		struct pc_run *r;

		if (k < n && !ends_in_kernel(pt, len, b[k - 1].offset,
					     b[k].offset, &c->cpu))
			continue;
		L->runs = realloc(L->runs, (L->nruns + 1) * sizeof(*L->runs));
		REQUIRE(L->runs);
		r = &L->runs[L->nruns++];
		r->thread = ti;
		r->off = b[start].offset;
		r->len = (k < n ? b[k].offset : len) - r->off;
		r->first_tsc = b[start].tsc;
		r->last_tsc = b[k - 1].tsc;
		start = k;
	}
	free(b);
}

/* Schedule the runs on CPUs in time order: each run goes to the first CPU
 * free by then, looking from a CPU that turns with every run, but never to
 * the CPU its thread last ran on (a CPU is added instead), so that every
 * thread with more than one run moves between CPUs however the threads'
 * runs happened to fall in time. */
static void schedule(struct pc_layout *L, size_t nthreads)
{
	uint64_t busy_until[PC_MAX_CPUS] = { 0 };
	unsigned *last_cpu = calloc(nthreads, sizeof(*last_cpu));
	size_t i;

	REQUIRE(last_cpu);
	for (i = 0; i < nthreads; i++)
		last_cpu[i] = UINT32_MAX;
	qsort(L->runs, L->nruns, sizeof(*L->runs), run_cmp);
	L->ncpus = 2;
	for (i = 0; i < L->nruns; i++) {
		struct pc_run *r = &L->runs[i];
		unsigned j, cpu = UINT32_MAX;

		REQUIRE(r->first_tsc > 2 * PC_MARGIN);
		for (j = 0; j < L->ncpus && cpu == UINT32_MAX; j++) {
			unsigned k = (unsigned)((i + j) % L->ncpus);

			if (k != last_cpu[r->thread] &&
			    (!busy_until[k] ||
			     busy_until[k] + 2 * PC_MARGIN + 2 < r->first_tsc))
				cpu = k;
		}
		if (cpu == UINT32_MAX) {
			REQUIRE(L->ncpus < PC_MAX_CPUS);
			cpu = L->ncpus++;
		}
		r->cpu = cpu;
		busy_until[cpu] = r->last_tsc;
		if (last_cpu[r->thread] != UINT32_MAX)
			L->migrations++;
		last_cpu[r->thread] = cpu;
	}
	free(last_cpu);
}

static void put_switch(struct ptd_buf *cs, bool out, pid_t pid, pid_t tid,
		       uint64_t tsc)
{
	struct ptd_perf_switch sw = { .out = out, .cpu_wide = true };
	struct ptd_perf_sample_id sid = { .pid = (uint32_t)pid,
					  .tid = (uint32_t)tid,
					  .time = ptd_perf_tsc_to_time(
						  &pc_conv, tsc) };
	uint8_t rec[64];
	size_t n = ptd_perf_encode_switch(rec, sizeof(rec), &sw,
					  PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
					  &sid);

	REQUIRE(n == 32);
	REQUIRE(ptd_buf_append(cs, rec, n) == 0);
}

/* Turn the per-thread bundle in @bdir (of capture @c) into a per-CPU one:
 * cpus/N.* files, trace.json rewritten. */
static void make_percpu(const struct ptd_capture *c, const char *bdir,
			struct pc_layout *L)
{
	uint8_t **pts = calloc(c->nthreads, sizeof(*pts));
	size_t *lens = calloc(c->nthreads, sizeof(*lens));
	_cleanup_free_ char *text = NULL;
	struct ptd_diag d = { "" };
	char path[700];
	cJSON *root, *cpus, *conv, *procs, *pr, *th;
	size_t i, len = 0;
	unsigned cpu;

	REQUIRE(pts && lens);
	memset(L, 0, sizeof(*L));
	for (i = 0; i < c->nthreads; i++) {
		REQUIRE(ptd_capture_read_pt(c, i, &pts[i], &lens[i], &d) == 0);
		cut_thread(c, i, pts[i], lens[i], L);
	}
	schedule(L, c->nthreads);
	(void)snprintf(path, sizeof(path), "%s/cpus", bdir);
	REQUIRE(mkdir(path, 0755) == 0);
	cpus = cJSON_CreateArray();
	for (cpu = 0; cpu < L->ncpus; cpu++) {
		struct ptd_buf pt = { 0 }, cs = { 0 };
		cJSON *o = cJSON_CreateObject();
		char rel[64];

		for (i = 0; i < L->nruns; i++) {
			const struct pc_run *r = &L->runs[i];
			pid_t tid = c->threads[r->thread].tid;

			if (r->cpu != cpu)
				continue;
			REQUIRE(ptd_buf_append(&pt, pts[r->thread] + r->off,
					       r->len) == 0);
			put_switch(&cs, false, c->pid, tid,
				   r->first_tsc - PC_MARGIN);
			put_switch(&cs, true, c->pid, tid,
				   r->last_tsc + PC_MARGIN);
		}
		(void)snprintf(rel, sizeof(rel), "cpus/%u.intelpt.trace", cpu);
		(void)snprintf(path, sizeof(path), "%s/%s", bdir, rel);
		REQUIRE(ptd_file_write_atomic(path, pt.data, pt.len) == 0);
		cJSON_AddNumberToObject(o, "id", cpu);
		cJSON_AddStringToObject(o, "iptTrace", rel);
		(void)snprintf(rel, sizeof(rel),
			       "cpus/%u.perf_context_switch_trace", cpu);
		(void)snprintf(path, sizeof(path), "%s/%s", bdir, rel);
		REQUIRE(ptd_file_write_atomic(path, cs.data, cs.len) == 0);
		cJSON_AddStringToObject(o, "contextSwitchTrace", rel);
		cJSON_AddItemToArray(cpus, o);
		ptd_buf_fini(&pt);
		ptd_buf_fini(&cs);
	}
	for (i = 0; i < c->nthreads; i++)
		free(pts[i]);
	free(pts);
	free(lens);

	(void)snprintf(path, sizeof(path), "%s/trace.json", bdir);
	REQUIRE(ptd_file_read_all(path, 1u << 24, &text, &len) == 0);
	root = cJSON_Parse(text);
	REQUIRE(root);
	procs = cJSON_GetObjectItem(root, "processes");
	cJSON_ArrayForEach(pr, procs)
		cJSON_ArrayForEach(th, cJSON_GetObjectItem(pr, "threads"))
			cJSON_DeleteItemFromObject(th, "iptTrace");
	/* and a thread that never ran on a traced CPU: listed last (LLDB's
	 * thread indices of the others stay), it has no trace in either */
	th = cJSON_CreateObject();
	cJSON_AddNumberToObject(th, "tid", PC_IDLE_TID);
	cJSON_AddItemToArray(cJSON_GetObjectItem(cJSON_GetArrayItem(procs, 0),
						 "threads"), th);
	cJSON_AddItemToObject(root, "cpus", cpus);
	/* the capture's clock (ptd's exporter writes it) gives way to the
	 * synthesized one, with which the switch times were written */
	cJSON_DeleteItemFromObject(root, "tscPerfZeroConversion");
	cJSON_DeleteItemFromObject(root, PTD_LLDB_WALLCLOCK);
	conv = cJSON_CreateObject();
	cJSON_AddNumberToObject(conv, "timeMult", pc_conv.time_mult);
	cJSON_AddNumberToObject(conv, "timeShift", pc_conv.time_shift);
	/* the exact integer: cJSON would print a double */
	cJSON_AddRawToObject(conv, "timeZero", PC_TIME_ZERO);
	cJSON_AddItemToObject(root, "tscPerfZeroConversion", conv);
	free(text);
	text = cJSON_Print(root);
	cJSON_Delete(root);
	REQUIRE(text);
	REQUIRE(strstr(text, "\t" PC_TIME_ZERO "\n"));
	REQUIRE(ptd_file_write_atomic(path, text, strlen(text)) == 0);
}

/* What ptd decodes from a bundle: each thread's instruction addresses. */
struct pc_decoded {
	pid_t tid[16];
	uint64_t *ips[16];
	size_t n[16], cap[16];
	size_t nthreads;
	size_t timed, untimed, bad_time, errors, notices;
	size_t done, done_empty;	/* threads reported, without insns */
};

static int pc_record(void *ctx, const struct ptd_record *rec)
{
	struct pc_decoded *o = ctx;
	size_t t;

	if (rec->type == PTD_REC_ERROR) {
		o->errors++;
		return 0;
	}
	if (rec->type != PTD_REC_INSN)
		return 0;
	for (t = 0; t < o->nthreads && o->tid[t] != rec->tid; t++)
		;
	if (t == o->nthreads) {
		if (t == 16)
			return -ENOSPC;
		o->tid[o->nthreads++] = rec->tid;
	}
	if (o->n[t] == o->cap[t]) {
		uint64_t *nv;

		o->cap[t] = o->cap[t] ? o->cap[t] * 2 : 4096;
		nv = realloc(o->ips[t], o->cap[t] * sizeof(uint64_t));
		if (!nv)
			return -ENOMEM;
		o->ips[t] = nv;
	}
	o->ips[t][o->n[t]++] = rec->u.insn.ip;
	if (!rec->has_tsc)
		o->untimed++;
	else if (!rec->has_time ||
		 rec->time != ptd_perf_tsc_to_time(&pc_conv, rec->tsc))
		o->bad_time++;
	else
		o->timed++;
	return 0;
}

static void pc_done(void *ctx, pid_t tid, const struct ptd_decode_stats *st,
		    int err, const struct ptd_diag *d)
{
	struct pc_decoded *o = ctx;

	(void)tid;
	if (err)
		fprintf(stderr, "  thread %ld: %s\n", (long)tid, d->msg);
	o->done++;
	if (!st->insns && !err)
		o->done_empty++;
}

static void pc_notice(void *ctx, const struct ptd_diag *d)
{
	fprintf(stderr, "  notice: %s\n", d->msg);
	((struct pc_decoded *)ctx)->notices++;
}

/* ptd's decode of the bundle @bdir into @got (zeroed first): accepted,
 * no error record, no thread ended early, nothing unclaimed. */
static void pc_decode(const char *bdir, struct pc_decoded *got)
{
	struct ptd_input_sink sink = { NULL, pc_record, pc_done, got,
				       pc_notice };
	struct ptd_input_opts o;
	struct ptd_diag d = { "" };
	size_t thread_errors = 0;
	int r;

	memset(got, 0, sizeof(*got));
	memset(&o, 0, sizeof(o));
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_ERROR);
	r = ptd_input_decode(bdir, &o, &sink, &thread_errors, &d);
	CHECK_EQ_INT(r, 0);
	if (r < 0)
		fprintf(stderr, "  %s: %s\n", bdir, d.msg);
	CHECK_EQ_INT(thread_errors, 0);
	CHECK_EQ_INT(got->errors, 0);
	CHECK_EQ_INT(got->notices, 0);
}

/* Thread @tid of @got decoded exactly @want (@n addresses); @as says
 * what @want is ("executed", "streamed live"). */
static void pc_check_thread(const struct pc_decoded *got, pid_t tid,
			    const uint64_t *want, size_t n, const char *as)
{
	size_t t, k = 0;

	for (t = 0; t < got->nthreads && got->tid[t] != tid; t++)
		;
	if (t == got->nthreads) {
		CHECK_FAIL_("thread %ld: nothing decoded", (long)tid);
		return;
	}
	while (k < n && k < got->n[t] && got->ips[t][k] == want[k])
		k++;
	if (k < n || got->n[t] != n)
		CHECK_FAIL_("thread %ld: instruction %zu of %zu (%zu decoded): "
			    "expected 0x%" PRIx64 ", got 0x%" PRIx64,
			    (long)tid, k, n, got->n[t], k < n ? want[k] : 0,
			    k < got->n[t] ? got->ips[t][k] : 0);
	else
		fprintf(stderr, "  ptd: tid %ld: %zu instructions, as %s\n",
			(long)tid, k, as);
}

/* A copy of @s appended to *@v (*@n strings, room for *@cap), which
 * doubles: dumps and streams have 100k+ lines, and ASan's realloc copies
 * every time (one line at a time took test_threads_percpu minutes). */
static bool strv_push(char ***v, size_t *n, size_t *cap, const char *s)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 1024;
		char **nv = realloc(*v, c * sizeof(*nv));

		if (!nv)
			return false;
		*v = nv;
		*cap = c;
	}
	(*v)[*n] = strdup(s);
	if (!(*v)[*n])
		return false;
	(*n)++;
	return true;
}

/* The lines of an lldb dump without the item numbers ("  41534: 0x..."
 * is "0x...": events that a dump does not show still take numbers). */
static char **dump_lines(const char *path, size_t *ret_n)
{
	_cleanup_free_ char *text = NULL;
	char **v = NULL, *line, *save = NULL;
	size_t len = 0, n = 0, cap = 0;

	*ret_n = 0;
	if (ptd_file_read_all(path, 1u << 30, &text, &len) < 0)
		return NULL;
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *p = line + strspn(line, " ");
		size_t digits = strspn(p, "0123456789");

		if (digits && p[digits] == ':' && p[digits + 1] == ' ')
			p += digits + 2;
		if (!strv_push(&v, &n, &cap, p))
			break;
	}
	*ret_n = n;
	return v;
}

/* LLDB reads the per-CPU bundle into the same threads as the per-thread
 * bundle of the same capture: each thread's dump is the same, line for
 * line (whatever LLDB's own decode makes of the trace). */
static void lldb_percpu_same(const char *pt_bdir, const char *pc_bdir,
			     size_t nthreads)
{
	char fa[MAX_DUMPS][600], fb[MAX_DUMPS][600];

	if (!lldb_dump(pt_bdir, nthreads, "threads-pt", fa) ||
	    !lldb_dump(pc_bdir, nthreads, "threads-pc", fb))
		return;
	for (size_t i = 0; i < nthreads && i < MAX_DUMPS; i++) {
		size_t na = 0, nb = 0, k;
		char **a = dump_lines(fa[i], &na), **b = dump_lines(fb[i], &nb);

		for (k = 0; k < na && k < nb && !strcmp(a[k], b[k]); k++)
			;
		if (k < na || k < nb || !na)
			CHECK_FAIL_("thread %zu: lldb's dumps differ at line "
				    "%zu: per-thread \"%s\", per-CPU \"%s\" "
				    "(%s, %s)", i + 1, k + 1,
				    k < na ? a[k] : "(end)",
				    k < nb ? b[k] : "(end)", fa[i], fb[i]);
		else
			fprintf(stderr, "  lldb: thread %zu: per-CPU dump = "
				"per-thread dump (%zu lines)\n", i + 1, na);
		for (k = 0; k < na; k++)
			free(a[k]);
		for (k = 0; k < nb; k++)
			free(b[k]);
		free(a);
		free(b);
	}
}

static void test_threads_percpu(void)
{
	char prog[512], cdir[512], bdir[512], tbdir[512];
	char *argv[] = { prog, NULL };
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag d = { "" };
	struct ptd_capture c;
	struct pc_layout L;
	struct pc_decoded got;
	size_t i, t;
	int r;

	/* threads that enter the kernel again and again: the layout's cuts
	 * (cut_thread) fall in every thread whatever the scheduler did */
	(void)snprintf(prog, sizeof(prog), "%s/prog-switches", progs_dir);
	(void)snprintf(cdir, sizeof(cdir), "%s/percpu-cap", workdir);
	(void)snprintf(bdir, sizeof(bdir), "%s/percpu-lldb", workdir);
	(void)snprintf(tbdir, sizeof(tbdir), "%s/perthread-lldb", workdir);
	memset(&so, 0, sizeof(so));
	so.outdir = cdir;
	so.quiet_target = true;
	so.gen.tsc = true;
	so.gen.psb_period = 256;
	/* single steps: the threads' runs, cut from their TSCs into the
	 * per-CPU layout, interleave; in branch mode they are short enough
	 * to run one after the other, with no migration to exercise */
	so.step = PTD_SWPT_STEP_SINGLE;
	r = ptd_swpt_run(argv, &so, &res, &d);
	if (r == -EPERM)
		SKIP_ALL("ptrace refused: %s", d.msg);
	REQUIRE(r == 0);
	REQUIRE(ptd_capture_load(cdir, &c, &d) == 0);
	REQUIRE(c.nthreads == 3);
	REQUIRE(ptd_lldb_export_capture(&c, bdir, &d) == 0);
	REQUIRE(ptd_lldb_export_capture(&c, tbdir, &d) == 0);
	make_percpu(&c, bdir, &L);
	fprintf(stderr, "  per-CPU bundle: %u cpus, %zu runs, %zu moves "
		"between cpus\n", L.ncpus, L.nruns, L.migrations);
	/* the layout exercises what it is meant to */
	CHECK(L.nruns > c.nthreads);
	CHECK(L.migrations > 0);

	pc_decode(bdir, &got);
	CHECK_EQ_INT(got.nthreads, c.nthreads);
	/* every listed thread is decoded, the idle one to nothing */
	CHECK_EQ_INT(got.done, c.nthreads + 1);
	CHECK_EQ_INT(got.done_empty, 1);
	for (i = 0; i < c.nthreads; i++) {
		uint64_t *truth = NULL;
		size_t ntruth = 0;

		REQUIRE(ptd_capture_read_truth(&c, i, &truth, &ntruth, &d) ==
			0);
		pc_check_thread(&got, c.threads[i].tid, truth, ntruth,
				"executed");
		free(truth);
	}
	/* perf time from the bundle's conversion on every timed record */
	CHECK(got.timed > 0);
	CHECK_EQ_INT(got.bad_time, 0);
	for (t = 0; t < got.nthreads; t++)
		free(got.ips[t]);
	/* LLDB's own decode of this capture is not the ground truth: with
	 * PSBs every 256 bytes, lldb-22 repeats or drops instructions where
	 * a PSB block ends just after a TIP.PGE -- in the per-thread bundle
	 * as well.  What must hold is that it reads the per-CPU bundle into
	 * the same threads. */
	lldb_percpu_same(tbdir, bdir, c.nthreads);
	ptd_capture_fini(&c);
	free(L.runs);
}

static uint64_t *decoded_truth(void *ctx, long tid, size_t *ret_n)
{
	const struct pc_decoded *o = ctx;
	uint64_t *ips;

	*ret_n = 0;
	for (size_t t = 0; t < o->nthreads; t++) {
		if (o->tid[t] != tid)
			continue;
		ips = malloc((o->n[t] ? o->n[t] : 1) * sizeof(*ips));
		if (!ips)
			return NULL;
		memcpy(ips, o->ips[t], o->n[t] * sizeof(*ips));
		*ret_n = o->n[t];
		return ips;
	}
	/* A thread born as the session ended is in the bundle with no
	 * instruction; the live stream has no record of it.  LLDB must
	 * decode none either. */
	return calloc(1, sizeof(uint64_t));
}

static void pc_free(struct pc_decoded *o)
{
	for (size_t t = 0; t < o->nthreads; t++)
		free(o->ips[t]);
	memset(o, 0, sizeof(*o));
}

/* The value of field @name in JSON line @line ("" if absent), up to the
 * next ',' or '}' (ptd's values of these fields hold neither). */
static void line_field(const char *line, const char *name, char *out,
		       size_t cap)
{
	char key[32];
	const char *v;
	size_t n;

	(void)snprintf(key, sizeof(key), "\"%s\":", name);
	v = strstr(line, key);
	if (!v) {
		*out = 0;
		return;
	}
	v += strlen(key);
	n = strcspn(v, ",}");
	if (n >= cap)
		n = cap - 1;
	memcpy(out, v, n);
	out[n] = 0;
}

/* The insn lines of @text as "tid ip tsc time wall" keys, in order, into
 * *@ret_v (*@ret_n of them, *@ret_timed with time and wall). */
static void insn_keys(char *text, char ***ret_v, size_t *ret_n,
		      size_t *ret_timed)
{
	char *line, *save = NULL;
	size_t n = 0, cap = 0;

	*ret_v = NULL;
	*ret_n = 0;
	*ret_timed = 0;
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char f[5][64], key[400];

		if (!is_type(line, "insn"))
			continue;
		line_field(line, "tid", f[0], sizeof(f[0]));
		line_field(line, "ip", f[1], sizeof(f[1]));
		line_field(line, "tsc", f[2], sizeof(f[2]));
		line_field(line, "time", f[3], sizeof(f[3]));
		line_field(line, "wall", f[4], sizeof(f[4]));
		(void)snprintf(key, sizeof(key), "%s %s %s %s %s", f[0], f[1],
			       f[2], f[3], f[4]);
		*ret_timed += f[3][0] && f[4][0];
		REQUIRE(strv_push(ret_v, &n, &cap, key));
		*ret_n = n;
	}
}

static int put_line(void *ctx, const struct ptd_record *rec)
{
	return ptd_jsonw_put(ctx, rec);
}

/* ptd's decode of the bundle in @dir written as JSON lines (as `ptctl
 * decode` writes them) into @path. */
static void decode_to_lines(const char *dir, const char *path)
{
	struct ptd_jsonw w;
	struct ptd_input_opts o;
	struct ptd_input_sink sink = { NULL, put_line, NULL, &w, NULL };
	struct ptd_diag d = { "" };
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int r;

	REQUIRE(fd >= 0);
	REQUIRE(ptd_jsonw_init(&w, fd, 0) == 0);
	memset(&o, 0, sizeof(o));
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN);
	r = ptd_input_decode(dir, &o, &sink, NULL, &d);
	if (r < 0)
		CHECK_FAIL_("%s: %s", dir, d.msg);
	CHECK_EQ_INT(ptd_jsonw_fini(&w), 0);
	(void)close(fd);
}

/* Each thread's insn records in the live stream @live and in the decode of
 * the recorded bundle @offline carry the same tsc, time and wall. */
static void same_times(char *live, char *offline)
{
	size_t nl = 0, no = 0, tl = 0, to = 0, i, j, k, same = 0;
	char **a = NULL, **b = NULL;
	bool *used;

	insn_keys(live, &a, &nl, &tl);
	insn_keys(offline, &b, &no, &to);
	used = calloc(nl + 1, sizeof(*used));
	REQUIRE(used);
	fprintf(stderr, "  live: %zu insn records (%zu with time and wall), "
		"bundle: %zu (%zu)\n", nl, tl, no, to);
	CHECK(tl > 0);
	CHECK_EQ_INT(to, tl);
	/* thread by thread: the first live record of each thread not yet
	 * compared starts its sequence */
	for (i = 0; i < nl; i++) {
		char tid[32];

		if (used[i])
			continue;
		(void)snprintf(tid, sizeof(tid), "%.*s",
			       (int)strcspn(a[i], " "), a[i]);
		for (j = i, k = 0; j < nl || k < no;) {
			while (j < nl && (strncmp(a[j], tid, strlen(tid)) ||
					  a[j][strlen(tid)] != ' '))
				j++;
			while (k < no && (strncmp(b[k], tid, strlen(tid)) ||
					  b[k][strlen(tid)] != ' '))
				k++;
			if (j == nl || k == no) {
				if (j != nl || k != no)
					CHECK_FAIL_("thread %s: %s live, %s in "
						    "the bundle", tid,
						    j < nl ? a[j] : "(end)",
						    k < no ? b[k] : "(end)");
				break;
			}
			if (strcmp(a[j], b[k])) {
				CHECK_FAIL_("thread %s: \"%s\" live, \"%s\" "
					    "in the bundle", tid, a[j], b[k]);
				break;
			}
			used[j] = true;
			same++;
			j++;
			k++;
		}
		for (j = i; j < nl; j++)	/* done with this thread */
			if (!strncmp(a[j], tid, strlen(tid)) &&
			    a[j][strlen(tid)] == ' ')
				used[j] = true;
	}
	fprintf(stderr, "  %zu insn records alike, tsc, time and wall\n",
		same);
	for (i = 0; i < nl; i++)
		free(a[i]);
	for (i = 0; i < no; i++)
		free(b[i]);
	free(a);
	free(b);
	free(used);
}

/* A live session recorded as an LLDB bundle by ptctl (attach --record DIR
 * --record-format lldb --follow: the stream, then the bundle written once
 * the session ended): ptd decodes the bundle to each thread's live insn
 * records, and so does LLDB. */
static void test_record_lldb(void)
{
	char ldir[600], out[600], err[600], pidarg[32];
	struct pc_decoded live, got;
	_cleanup_free_ char *text = NULL, *live_text = NULL;
	struct daemon dm;
	struct target tg = { -1, -1 };
	size_t len = 0;
	char *line, *save = NULL;
	unsigned lost = 0;
	pid_t ctl;
	int r;

	REQUIRE(daemon_start(&dm, "rec", ""));
	/* the target runs until told, after the session: a fixed run time
	 * raced a slow attach (ASan, a loaded machine) and met a zombie */
	REQUIRE(target_start(progs_dir, 3600, &tg) == 0);
	(void)snprintf(ldir, sizeof(ldir), "%s/rec-lldb", workdir);
	(void)snprintf(out, sizeof(out), "%s/rec.out", workdir);
	(void)snprintf(err, sizeof(err), "%s/rec.err", workdir);
	(void)snprintf(pidarg, sizeof(pidarg), "%d", (int)tg.pid);
	{
		const char *args[] = { "attach", "--record", ldir,
				       "--record-format", "lldb", "--tsc",
				       "--max-insns", "20000", "--follow",
				       "--kinds", "insn", pidarg, NULL };

		ctl = ptctl_spawn(&dm, out, err, args);
		r = wait_exit(ctl);
	}
	CHECK_EQ_INT(target_tell(tg.pid), 0);
	target_finish(&tg);	/* unharmed by the session */
	(void)daemon_stop(&dm);
	if (r != 0) {
		_cleanup_free_ char *e = NULL;
		size_t n;

		(void)ptd_file_read_all(err, 1u << 20, &e, &n);
		CHECK_FAIL_("ptctl attach --record-format lldb: exit %d: %s", r,
			    e ? e : "");
		return;
	}
	/* the live stream's insn records, by thread */
	memset(&live, 0, sizeof(live));
	REQUIRE(ptd_file_read_all(out, 1u << 30, &text, &len) == 0);
	live_text = strdup(text);	/* the loop below cuts text up */
	REQUIRE(live_text);
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		struct ptd_record rec;
		const char *t = strstr(line, "\"tid\":");
		const char *ip = strstr(line, "\"ip\":\"");

		lost += is_type(line, "lost");
		if (!is_type(line, "insn") || !t || !ip)
			continue;
		memset(&rec, 0, sizeof(rec));
		rec.type = PTD_REC_INSN;
		rec.tid = (pid_t)strtol(t + 6, NULL, 10);
		rec.u.insn.ip = strtoull(ip + 6, NULL, 16);
		REQUIRE(pc_record(&live, &rec) == 0);
	}
	CHECK_EQ_INT(lost, 0);
	CHECK(live.nthreads > 0);

	/* the bundle's records have the live stream's times: the session's
	 * clock and wall-clock reference went into it */
	{
		char lines[700];
		_cleanup_free_ char *dec = NULL;
		size_t dlen = 0;

		(void)snprintf(lines, sizeof(lines), "%s/rec-decoded.jsonl",
			       workdir);
		decode_to_lines(ldir, lines);
		REQUIRE(ptd_file_read_all(lines, 1u << 30, &dec, &dlen) == 0);
		same_times(live_text, dec);
	}
	pc_decode(ldir, &got);
	CHECK_EQ_INT(got.nthreads, live.nthreads);
	for (size_t i = 0; i < live.nthreads; i++)
		pc_check_thread(&got, live.tid[i], live.ips[i], live.n[i],
				"streamed live");
	if (lldb) {
		char files[MAX_DUMPS][600], log[600];

		(void)snprintf(log, sizeof(log), "%s/record-lldb.log",
			       workdir);
		struct ptd_lldb_trace lt;
		struct ptd_diag d = { "" };
		size_t nt = 0;

		/* every thread the bundle lists, those without an
		 * instruction too */
		REQUIRE(ptd_lldb_trace_load(ldir, &lt, &d) == 0);
		for (size_t p = 0; p < lt.nprocs; p++)
			nt += lt.procs[p].nthreads;
		ptd_lldb_trace_fini(&lt);
		CHECK(nt >= live.nthreads);
		if (lldb_dump(ldir, nt, "record", files))
			for (size_t i = 0; i < nt && i < MAX_DUMPS; i++)
				compare_dump(decoded_truth, &live, files[i],
					     log);
	}
	pc_free(&got);
	pc_free(&live);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	char tmpl[256];

	lldb = find_lldb();
	if (!lldb)
		fprintf(stderr, "lldb-22 is not installed (apt-get install "
			"lldb-22): the LLDB checks are skipped, ptd's are "
			"not\n");
	(void)snprintf(tmpl, sizeof(tmpl), "%s/ptd-test-lldb-e2e-XXXXXX",
		       tmp ? tmp : "/tmp");
	harness_setup(tmpl);
	progs_dir = progs;
	(void)snprintf(workdir, sizeof(workdir), "%s", tmpdir);
	RUN(test_recursion);
	RUN(test_fnptr);
	RUN(test_threads);
	RUN(test_vdso);
	RUN(test_threads_percpu);
	RUN(test_record_lldb);
	return harness_done();
}
