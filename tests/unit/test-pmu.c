/* SPDX-License-Identifier: MIT */
/* Tests for perf/pmu.h: sysfs probing on fake trees modelled on real CPUs,
 * the real (absent) intel_pt PMU, /proc/cpuinfo, the memory-lock check. */
#include <errno.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "perf/pmu.h"

static char tmproot[256];

static const char *data_dir(void)
{
	const char *d = getenv("PTD_TEST_DATA");

	if (!d)
		SKIP_ALL("PTD_TEST_DATA not set (run through meson test)");
	return d;
}

static void tree_path(char *buf, size_t cap, const char *cpu)
{
	(void)snprintf(buf, cap, "%s/sysfs/%s", data_dir(), cpu);
}

static void write_file(const char *fmt_path, const char *content, ...)
	__attribute__((format(printf, 1, 3)));

/* Write @content to the path formatted from @fmt_path (varargs), creating
 * nothing but the file. */
static void write_file(const char *fmt_path, const char *content, ...)
{
	char path[512];
	va_list ap;
	FILE *f;

	va_start(ap, content);
	(void)vsnprintf(path, sizeof(path), fmt_path, ap);
	va_end(ap);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "cannot write %s\n", path);
		abort();
	}
	fputs(content, f);
	fclose(f);
}

/* A minimal valid tree in a fresh directory; returns its path. */
static const char *make_tree(const char *name)
{
	static char dir[512];

	(void)snprintf(dir, sizeof(dir), "%s/%s", tmproot, name);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		abort();
	(void)snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir), "%s", "");
	{
		char sub[600];

		(void)snprintf(sub, sizeof(sub), "%s/format", dir);
		(void)mkdir(sub, 0755);
		(void)snprintf(sub, sizeof(sub), "%s/caps", dir);
		(void)mkdir(sub, 0755);
	}
	write_file("%s/type", "8\n", dir);
	write_file("%s/format/tsc", "config:10\n", dir);
	write_file("%s/format/mtc_period", "config:14-17\n", dir);
	write_file("%s/caps/mtc", "1\n", dir);
	return dir;
}

static void test_skylake(void)
{
	char dir[512];
	struct ptd_pt_pmu pmu;
	struct ptd_diag diag = { "" };
	const struct ptd_pt_format *f;
	uint64_t v = 0;
	size_t i;

	tree_path(dir, sizeof(dir), "skylake");
	CHECK_EQ_INT(ptd_pt_pmu_probe(dir, &pmu, &diag), 0);
	CHECK_EQ_STR(diag.msg, "");
	CHECK_EQ_INT(pmu.type, 8);
	CHECK_EQ_INT(pmu.nformats, 12);
	CHECK_EQ_INT(pmu.ncaps, 16);
	CHECK_EQ_INT(pmu.nr_addr_filters, 2);
	CHECK(pmu.has_max_nonturbo_ratio);
	CHECK_EQ_INT(pmu.max_nonturbo_ratio, 40);
	CHECK(pmu.has_tsc_art_ratio);
	CHECK_EQ_INT(pmu.tsc_art_num, 334);
	CHECK_EQ_INT(pmu.tsc_art_den, 2);
	f = ptd_pt_pmu_format(&pmu, "mtc_period");
	REQUIRE(f);
	CHECK_EQ_INT(f->word, PTD_PT_CONFIG);
	CHECK_EQ_INT(f->lo, 14);
	CHECK_EQ_INT(f->hi, 17);
	CHECK_EQ_INT(ptd_pt_format_width(f), 4);
	f = ptd_pt_pmu_format(&pmu, "pt");
	REQUIRE(f);
	CHECK_EQ_INT(f->lo, 0);
	CHECK_EQ_INT(f->hi, 0);
	CHECK(ptd_pt_pmu_format(&pmu, "notnt") == NULL);
	/* caps are hex as the kernel prints them */
	CHECK_EQ_INT(ptd_pt_pmu_cap(&pmu, "mtc_periods", &v), 0);
	CHECK_EQ_U64(v, 0x249);
	CHECK_EQ_INT(ptd_pt_pmu_cap(&pmu, "cycle_thresholds", &v), 0);
	CHECK_EQ_U64(v, 0x3fff);
	v = 77;
	CHECK_EQ_INT(ptd_pt_pmu_cap(&pmu, "no_such_cap", &v), -ENOENT);
	CHECK_EQ_U64(v, 77);
	/* sorted by name */
	for (i = 1; i < pmu.nformats; i++)
		CHECK(strcmp(pmu.formats[i - 1].name, pmu.formats[i].name) < 0);
	for (i = 1; i < pmu.ncaps; i++)
		CHECK(strcmp(pmu.caps[i - 1].name, pmu.caps[i].name) < 0);
}

static void test_other_cpus(void)
{
	char dir[512];
	struct ptd_pt_pmu pmu;
	uint64_t v;

	tree_path(dir, sizeof(dir), "icelake-server");
	CHECK_EQ_INT(ptd_pt_pmu_probe(dir, &pmu, NULL), 0);
	CHECK_EQ_INT(pmu.type, 10);
	CHECK_EQ_INT(pmu.nr_addr_filters, 4);
	REQUIRE(ptd_pt_pmu_format(&pmu, "notnt"));
	CHECK_EQ_INT(ptd_pt_pmu_format(&pmu, "notnt")->lo, 55);
	CHECK_EQ_INT(ptd_pt_pmu_cap(&pmu, "ptwrite", &v), 0);
	CHECK_EQ_U64(v, 1);

	tree_path(dir, sizeof(dir), "goldmont");
	CHECK_EQ_INT(ptd_pt_pmu_probe(dir, &pmu, NULL), 0);
	CHECK(ptd_pt_pmu_format(&pmu, "ptw") == NULL);
	CHECK_EQ_INT(ptd_pt_pmu_cap(&pmu, "ptwrite", &v), -ENOENT);
	CHECK_EQ_INT(pmu.tsc_art_num, 96);

	tree_path(dir, sizeof(dir), "broadwell-nocycmtc");
	CHECK_EQ_INT(ptd_pt_pmu_probe(dir, &pmu, NULL), 0);
	CHECK(ptd_pt_pmu_format(&pmu, "cyc") == NULL);
	CHECK(ptd_pt_pmu_format(&pmu, "mtc") == NULL);
	CHECK_EQ_INT(pmu.nr_addr_filters, 0);
	CHECK(pmu.has_tsc_art_ratio);
	CHECK_EQ_INT(pmu.tsc_art_num, 0);
}

/* Optional files absent, unknown caps kept by name, "0x" accepted. */
static void test_minimal_and_unknown_cap(void)
{
	const char *dir = make_tree("minimal");
	struct ptd_pt_pmu pmu;
	uint64_t v = 0;

	write_file("%s/caps/some_future_cap", "abc\n", dir);
	write_file("%s/caps/hexprefixed", "0x10", dir); /* no newline: ok */
	CHECK_EQ_INT(ptd_pt_pmu_probe(dir, &pmu, NULL), 0);
	CHECK_EQ_INT(pmu.nr_addr_filters, 0);
	CHECK(!pmu.has_max_nonturbo_ratio);
	CHECK(!pmu.has_tsc_art_ratio);
	CHECK_EQ_INT(ptd_pt_pmu_cap(&pmu, "some_future_cap", &v), 0);
	CHECK_EQ_U64(v, 0xabc);
	CHECK_EQ_INT(ptd_pt_pmu_cap(&pmu, "hexprefixed", &v), 0);
	CHECK_EQ_U64(v, 0x10);
}

static void test_missing_pmu(void)
{
	char dir[512];
	struct ptd_pt_pmu pmu;
	struct ptd_diag diag = { "" };

	(void)snprintf(dir, sizeof(dir), "%s/no-such-pmu", tmproot);
	CHECK_EQ_INT(ptd_pt_pmu_probe(dir, &pmu, &diag), -PTD_ENOPT);
	CHECK_CONTAINS(diag.msg, dir);
	CHECK_CONTAINS(diag.msg, "BIOS");
	CHECK_CONTAINS(diag.msg, "guest");
	CHECK_CONTAINS(diag.msg, "software");
	CHECK_EQ_INT(ptd_pt_pmu_probe(NULL, &pmu, &diag), -EINVAL);
}

/* The real machine: this VM has no intel_pt PMU. */
static void test_real_sysfs(void)
{
	struct ptd_pt_pmu pmu;
	struct ptd_diag diag = { "" };
	struct stat st;
	int err;

	err = ptd_pt_pmu_probe(PTD_PT_PMU_DEFAULT_DIR, &pmu, &diag);
	if (stat(PTD_PT_PMU_DEFAULT_DIR, &st) == 0) {
		fprintf(stderr, "note: this machine has an intel_pt PMU; "
				"checking it probes cleanly instead\n");
		CHECK_EQ_INT(err, 0);
		CHECK(pmu.nformats > 0);
		return;
	}
	CHECK_EQ_INT(err, -PTD_ENOPT);
	CHECK_CONTAINS(diag.msg, "/sys/bus/event_source/devices/intel_pt");
	CHECK_CONTAINS(diag.msg, "software PT source");
}

struct bad_case {
	const char *file;	/* relative to the tree */
	const char *content;
	const char *expect;	/* in the message, besides the path */
};

static void test_malformed(void)
{
	static const struct bad_case cases[] = {
		{ "type", "abc\n", "'abc'" },
		{ "type", "8 9\n", "'8 9'" },
		{ "type", "\n", "one value" },
		{ "type", "8\n9\n", "one value" },
		{ "type", "99999999999\n", "99999999999" },
		{ "format/tsc", "config:17-14\n", "'config:17-14'" },
		{ "format/tsc", "config:x\n", "'config:x'" },
		{ "format/tsc", "configx:1\n", "'configx:1'" },
		{ "format/tsc", "config:64\n", "'config:64'" },
		{ "format/tsc", "config:1-\n", "'config:1-'" },
		{ "format/tsc", "config:0-3,8\n", "'config:0-3,8'" },
		{ "format/tsc", "config3:1\n", "'config3:1'" },
		{ "caps/mtc", "zz\n", "'zz'" },
		{ "caps/mtc", " 1\n", "' 1'" },
		{ "caps/mtc", "", "one value" },
		{ "nr_addr_filters", "-1\n", "'-1'" },
		{ "max_nonturbo_ratio", "4x\n", "'4x'" },
		{ "tsc_art_ratio", "334/2\n", "'334/2'" },
		{ "tsc_art_ratio", "334:\n", "'334:'" },
		{ "tsc_art_ratio", ":2\n", "':2'" },
	};
	size_t i;

	for (i = 0; i < PTD_ARRAY_SIZE(cases); i++) {
		char name[32], path[700];
		const char *dir;
		struct ptd_pt_pmu pmu;
		struct ptd_diag diag = { "" };
		int err;

		(void)snprintf(name, sizeof(name), "bad%zu", i);
		dir = make_tree(name);
		write_file("%s/%s", cases[i].content, dir, cases[i].file);
		(void)snprintf(path, sizeof(path), "%s/%s", dir, cases[i].file);
		memset(&pmu, 0xcd, sizeof(pmu));
		err = ptd_pt_pmu_probe(dir, &pmu, &diag);
		if (err != -PTD_EFORMAT)
			fprintf(stderr, "case %zu: %s = '%s'\n", i,
				cases[i].file, cases[i].content);
		CHECK_EQ_INT(err, -PTD_EFORMAT);
		CHECK_CONTAINS(diag.msg, path);
		CHECK_CONTAINS(diag.msg, cases[i].expect);
		/* *ret untouched on failure */
		CHECK_EQ_U64(pmu.type, 0xcdcdcdcdu);
	}
}

static void test_missing_required(void)
{
	const char *dir;
	char path[700];
	struct ptd_pt_pmu pmu;
	struct ptd_diag diag = { "" };

	dir = make_tree("notype");
	(void)snprintf(path, sizeof(path), "%s/type", dir);
	(void)unlink(path);
	CHECK_EQ_INT(ptd_pt_pmu_probe(dir, &pmu, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, path);
	CHECK_CONTAINS(diag.msg, "missing");

	dir = make_tree("noformat");
	(void)snprintf(path, sizeof(path), "%s/format", dir);
	CHECK_EQ_INT(ptd_rm_rf(path), 0);
	CHECK_EQ_INT(ptd_pt_pmu_probe(dir, &pmu, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, path);

	/* a file where the directory should be */
	(void)snprintf(path, sizeof(path), "%s/type", dir);
	CHECK_EQ_INT(ptd_pt_pmu_probe(path, &pmu, &diag), -PTD_ENOPT);
	CHECK_CONTAINS(diag.msg, "not a directory");
}

static void test_limits(void)
{
	const char *dir = make_tree("many");
	struct ptd_pt_pmu pmu;
	struct ptd_diag diag = { "" };
	char longname[PTD_PT_PMU_NAME_MAX + 8];
	unsigned i;

	for (i = 0; i < PTD_PT_PMU_MAX_FORMATS + 1; i++)
		write_file("%s/format/f%u", "config:1\n", dir, i);
	CHECK_EQ_INT(ptd_pt_pmu_probe(dir, &pmu, &diag), -PTD_ELIMIT);
	CHECK_CONTAINS(diag.msg, "more than 64 entries");

	dir = make_tree("longname");
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	write_file("%s/caps/%s", "1\n", dir, longname);
	CHECK_EQ_INT(ptd_pt_pmu_probe(dir, &pmu, &diag), -PTD_ELIMIT);
	CHECK_CONTAINS(diag.msg, "longer than");
}

/* ---- cpuinfo ---- */

static const char *write_tmp(const char *name, const char *content)
{
	static char path[512];

	(void)snprintf(path, sizeof(path), "%s/%s", tmproot, name);
	write_file("%s", content, path);
	return path;
}

static void test_cpuinfo(void)
{
	struct pt_cpu cpu;
	struct ptd_diag diag = { "" };
	const char *p;

	p = write_tmp("cpuinfo-skl",
		      "processor\t: 0\nvendor_id\t: GenuineIntel\n"
		      "cpu family\t: 6\nmodel\t\t: 94\n"
		      "model name\t: Intel(R) Core(TM) i7-6700K CPU @ 4.00GHz\n"
		      "stepping\t: 3\nflags\t\t: fpu intel_pt\n\n"
		      "processor\t: 1\nvendor_id\t: GenuineIntel\n"
		      "cpu family\t: 6\nmodel\t\t: 95\nstepping\t: 9\n\n");
	memset(&cpu, 0xcd, sizeof(cpu));
	CHECK_EQ_INT(ptd_pt_cpu_read(p, &cpu, &diag), 0);
	CHECK_EQ_INT(cpu.vendor, pcv_intel);
	CHECK_EQ_INT(cpu.family, 6);
	CHECK_EQ_INT(cpu.model, 94);	/* the first processor's */
	CHECK_EQ_INT(cpu.stepping, 3);

	p = write_tmp("cpuinfo-amd", "processor\t: 0\nvendor_id\t: AuthenticAMD\n"
				     "cpu family\t: 26\nmodel\t\t: 2\n"
				     "stepping\t: 1\n");
	CHECK_EQ_INT(ptd_pt_cpu_read(p, &cpu, &diag), 0);
	CHECK_EQ_INT(cpu.vendor, pcv_unknown);
	CHECK_EQ_INT(cpu.family, 26);

	p = write_tmp("cpuinfo-bad", "vendor_id\t: GenuineIntel\n"
				     "cpu family\t: 6\nmodel\t\t: 9x\n"
				     "stepping\t: 3\n");
	memset(&cpu, 0xcd, sizeof(cpu));
	CHECK_EQ_INT(ptd_pt_cpu_read(p, &cpu, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, ":3:");
	CHECK_CONTAINS(diag.msg, "'model'");
	CHECK_CONTAINS(diag.msg, "9x");
	CHECK_EQ_INT(cpu.family, 0xcdcd);

	p = write_tmp("cpuinfo-range", "vendor_id\t: GenuineIntel\n"
				       "cpu family\t: 6\nmodel\t\t: 256\n"
				       "stepping\t: 3\n");
	CHECK_EQ_INT(ptd_pt_cpu_read(p, &cpu, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, "256");

	p = write_tmp("cpuinfo-nostep", "vendor_id\t: GenuineIntel\n"
					"cpu family\t: 6\nmodel\t\t: 94\n\n"
					"stepping\t: 3\n");
	CHECK_EQ_INT(ptd_pt_cpu_read(p, &cpu, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, "no 'stepping'");

	p = write_tmp("cpuinfo-twice", "vendor_id\t: GenuineIntel\n"
				       "cpu family\t: 6\nmodel\t\t: 94\n"
				       "model\t\t: 95\nstepping\t: 3\n");
	CHECK_EQ_INT(ptd_pt_cpu_read(p, &cpu, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, "given twice");

	p = write_tmp("cpuinfo-nocolon", "vendor_id GenuineIntel\n");
	CHECK_EQ_INT(ptd_pt_cpu_read(p, &cpu, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, ":1:");

	CHECK_EQ_INT(ptd_pt_cpu_read("/nonexistent/cpuinfo", &cpu, &diag),
		     -ENOENT);

	/* The real file parses. */
	CHECK_EQ_INT(ptd_pt_cpu_read("/proc/cpuinfo", &cpu, &diag), 0);
	CHECK(cpu.family > 0);
}

/* ---- memory-lock limits ---- */

static const char *make_procroot(const char *name, const char *mlock_kb,
				 const char *paranoid)
{
	static char dir[512];
	char sub[600];

	(void)snprintf(dir, sizeof(dir), "%s/%s", tmproot, name);
	(void)mkdir(dir, 0755);
	(void)snprintf(sub, sizeof(sub), "%s/sys", dir);
	(void)mkdir(sub, 0755);
	(void)snprintf(sub, sizeof(sub), "%s/sys/kernel", dir);
	(void)mkdir(sub, 0755);
	write_file("%s/sys/kernel/perf_event_mlock_kb", mlock_kb, dir);
	if (paranoid)
		write_file("%s/sys/kernel/perf_event_paranoid", paranoid, dir);
	return dir;
}

static int drop_cap_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	unsigned i;

	if (syscall(SYS_capget, &hdr, data) < 0)
		return -errno;
	i = CAP_TO_INDEX(CAP_IPC_LOCK);
	data[i].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	data[i].permitted &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	data[i].inheritable &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

/* In a child without CAP_IPC_LOCK and with RLIMIT_MEMLOCK at 64 KiB. */
static void mlock_child(void)
{
	struct rlimit rl = { 64 * 1024, 64 * 1024 };
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	long page = sysconf(_SC_PAGESIZE);
	struct ptd_diag diag = { "" };
	const char *root;
	char expect[64];

	REQUIRE(drop_cap_ipc_lock() == 0);
	REQUIRE(setrlimit(RLIMIT_MEMLOCK, &rl) == 0);
	root = make_procroot("proc-516", "516\n", "2\n");
	/* 4 x 4 MiB: far over 516 KiB per CPU + 64 KiB */
	CHECK_EQ_INT(ptd_perf_mlock_check(4u << 20, 4, root, &diag),
		     -PTD_ELIMIT);
	CHECK_CONTAINS(diag.msg, "perf_event_mlock_kb");
	CHECK_CONTAINS(diag.msg, "RLIMIT_MEMLOCK (64 KiB)");
	CHECK_CONTAINS(diag.msg, "(16384 KiB)");
	CHECK_CONTAINS(diag.msg, "sysctl kernel.perf_event_mlock_kb=");
	CHECK_CONTAINS(diag.msg, "ulimit -l");
	CHECK_CONTAINS(diag.msg, "LimitMEMLOCK=");
	CHECK_CONTAINS(diag.msg, "CAP_IPC_LOCK");
	(void)snprintf(expect, sizeof(expect), "516 KiB x %ld CPUs", ncpu);
	CHECK_CONTAINS(diag.msg, expect);
	/* Exactly the allowance fits; one more page does not unless
	 * RLIMIT_MEMLOCK takes it (64 KiB = 16 pages). */
	{
		size_t allow = (size_t)(516 * 1024 / page * ncpu - ncpu) *
			       (size_t)page;

		CHECK_EQ_INT(ptd_perf_mlock_check(allow, 1, root, NULL), 0);
		CHECK_EQ_INT(ptd_perf_mlock_check(allow + 64 * 1024, 1, root,
						  NULL), 0);
		CHECK_EQ_INT(ptd_perf_mlock_check(allow + 64 * 1024 + 1, 1,
						  root, NULL), -PTD_ELIMIT);
	}
	/* perf_event_paranoid -1: the kernel skips the check */
	root = make_procroot("proc-noparanoid", "516\n", "-1\n");
	CHECK_EQ_INT(ptd_perf_mlock_check(4u << 20, 4, root, NULL), 0);
	/* malformed sysctl */
	root = make_procroot("proc-bad", "5x6\n", "2\n");
	CHECK_EQ_INT(ptd_perf_mlock_check(4096, 1, root, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, "perf_event_mlock_kb");
	CHECK_CONTAINS(diag.msg, "'5x6'");
	/* missing procroot */
	CHECK_EQ_INT(ptd_perf_mlock_check(4096, 1, "/nonexistent", &diag),
		     -ENOENT);
}

static void test_mlock(void)
{
	const char *root = make_procroot("proc-tiny", "4\n", "2\n");
	pid_t pid;
	int status;

	/* We run as root with CAP_IPC_LOCK: anything fits. */
	if (getuid() == 0)
		CHECK_EQ_INT(ptd_perf_mlock_check(1u << 30, 64, root, NULL), 0);
	CHECK_EQ_INT(ptd_perf_mlock_check(SIZE_MAX, 4, root, NULL),
		     -EOVERFLOW);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		check_current = "test_mlock (child)";
		check_failures = 0;	/* count only the child's own */
		mlock_child();
		_exit(check_failures ? 1 : 0);
	}
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ_INT(WEXITSTATUS(status), 0);
}

int main(void)
{
	(void)data_dir();
	(void)snprintf(tmproot, sizeof(tmproot), "/tmp/ptd-test-pmu-XXXXXX");
	if (!mkdtemp(tmproot))
		SKIP_ALL("cannot create a temporary directory");
	RUN(test_skylake);
	RUN(test_other_cpus);
	RUN(test_minimal_and_unknown_cap);
	RUN(test_missing_pmu);
	RUN(test_real_sysfs);
	RUN(test_malformed);
	RUN(test_missing_required);
	RUN(test_limits);
	RUN(test_cpuinfo);
	RUN(test_mlock);
	(void)ptd_rm_rf(tmproot);
	return check_done();
}
