/* SPDX-License-Identifier: MIT */
/*
 * LLDB trace bundles: parsing trace.json (good, per-CPU, every kind of bad
 * field), the minimal ELF wrapper, and the round trip of a real capture:
 * exported, read back, decoded to the ground truth and to the same records
 * as the capture itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "input/input.h"
#include "lldb/elfwrap.h"
#include "lldb/export.h"
#include "lldb/trace.h"
#include "swpt/capture.h"
#include "swpt/tracer.h"
#include "unit/ptenc.h"
#include "unit/reccmp.h"

static char workdir[256];

static const char *wpath(const char *name)
{
	static char p[4][512];
	static unsigned next;
	char *s = p[next++ % 4];

	(void)snprintf(s, 512, "%s/%s", workdir, name);
	return s;
}

static int parse(const char *json, struct ptd_lldb_trace *t,
		 struct ptd_diag *d)
{
	return ptd_lldb_trace_parse(json, strlen(json), "/b", "/b/trace.json",
				    t, d);
}

#define CPU "\"cpuInfo\":{\"vendor\":\"GenuineIntel\",\"family\":6," \
	    "\"model\":85,\"stepping\":4}"

static void test_parse_per_thread(void)
{
	const char *j =
		"{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":10,"
		"\"triple\":\"x86_64-unknown-linux-gnu\",\"threads\":["
		"{\"tid\":10,\"iptTrace\":\"threads/10.trace\"},{\"tid\":11}],"
		"\"modules\":[{\"systemPath\":\"/bin/true\",\"file\":\"m/true\","
		"\"loadAddress\":\"0x555555554000\",\"uuid\":\"ab-cd\"},"
		"{\"systemPath\":\"[vdso]\",\"loadAddress\":4096},"
		"{\"systemPath\":\"/lib/x.so\",\"loadAddress\":\"1234\"}]}],"
		"\"futureKey\":[1,2]}";
	struct ptd_lldb_trace t;
	struct ptd_diag d = { "" };

	memset(&t, 0xcd, sizeof(t));
	REQUIRE(parse(j, &t, &d) == 0);
	CHECK_EQ_INT(t.cpu.vendor, pcv_intel);
	CHECK_EQ_INT(t.cpu.family, 6);
	CHECK_EQ_INT(t.cpu.model, 85);
	CHECK_EQ_INT(t.cpu.stepping, 4);
	REQUIRE(t.nprocs == 1);
	CHECK_EQ_INT(t.procs[0].pid, 10);
	CHECK_EQ_STR(t.procs[0].triple, "x86_64-unknown-linux-gnu");
	REQUIRE(t.procs[0].nthreads == 2);
	CHECK_EQ_INT(t.procs[0].threads[0].tid, 10);
	CHECK_EQ_STR(t.procs[0].threads[0].ipt_trace, "/b/threads/10.trace");
	CHECK(t.procs[0].threads[1].ipt_trace == NULL);
	REQUIRE(t.procs[0].nmodules == 3);
	CHECK_EQ_STR(t.procs[0].modules[0].system_path, "/bin/true");
	CHECK_EQ_STR(t.procs[0].modules[0].file, "/b/m/true");
	CHECK_EQ_U64(t.procs[0].modules[0].load_address, 0x555555554000ull);
	CHECK_EQ_STR(t.procs[0].modules[0].uuid, "ab-cd");
	CHECK(t.procs[0].modules[1].file == NULL);
	CHECK_EQ_U64(t.procs[0].modules[1].load_address, 4096);
	CHECK_EQ_U64(t.procs[0].modules[2].load_address, 1234);
	CHECK_EQ_INT(t.ncpus, 0);
	CHECK(!t.has_kernel && !t.has_tsc_conv);
	ptd_lldb_trace_fini(&t);
	ptd_lldb_trace_fini(&t);	/* twice: a freed trace is empty */
}

static const char *percpu_json =
	"{\"type\":\"intel-pt\",\"cpuInfo\":{\"vendor\":\"unknown\","
	"\"family\":0,\"model\":0,\"stepping\":0},\"processes\":[{\"pid\":7,"
	"\"threads\":[{\"tid\":7},{\"tid\":8}],\"modules\":[]}],"
	"\"cpus\":[{\"id\":0,\"iptTrace\":\"cpus/0.trace\","
	"\"contextSwitchTrace\":\"cpus/0.cs\"},{\"id\":3,\"iptTrace\":"
	"\"cpus/3.trace\",\"contextSwitchTrace\":\"cpus/3.cs\"}],"
	"\"tscPerfZeroConversion\":{\"timeMult\":1076,\"timeShift\":10,"
	"\"timeZero\":\"0x1234567890abcdef\"}}";

static void test_parse_per_cpu(void)
{
	struct ptd_lldb_trace t;
	struct ptd_diag d = { "" };

	REQUIRE(parse(percpu_json, &t, &d) == 0);
	CHECK_EQ_INT(t.cpu.vendor, pcv_unknown);
	REQUIRE(t.ncpus == 2);
	CHECK_EQ_INT(t.cpus[1].id, 3);
	CHECK_EQ_STR(t.cpus[1].ipt_trace, "/b/cpus/3.trace");
	CHECK_EQ_STR(t.cpus[1].context_switch_trace, "/b/cpus/3.cs");
	CHECK(t.has_tsc_conv);
	CHECK_EQ_INT(t.time_mult, 1076);
	CHECK_EQ_INT(t.time_shift, 10);
	CHECK_EQ_U64(t.time_zero, 0x1234567890abcdefull);
	CHECK_EQ_INT(t.procs[0].nthreads, 2);
	ptd_lldb_trace_fini(&t);

	/* a kernel trace */
	const char *k =
		"{\"type\":\"intel-pt\"," CPU ",\"cpus\":[{\"id\":0,"
		"\"iptTrace\":\"a\",\"contextSwitchTrace\":\"b\"}],"
		"\"tscPerfZeroConversion\":{\"timeMult\":1,\"timeShift\":0,"
		"\"timeZero\":0},\"kernel\":{\"file\":\"vmlinux\"}}";
	REQUIRE(parse(k, &t, &d) == 0);
	CHECK(t.has_kernel);
	CHECK_EQ_U64(t.kernel_load, 0xffffffff81000000ull);
	CHECK_EQ_STR(t.kernel_file, "/b/vmlinux");
	ptd_lldb_trace_fini(&t);
}

/* Integers past 2^53 are read exactly: a real machine's timeZero (LLDB
 * reads it as a 64-bit integer or a string), addresses at the top of the
 * address space. */
static void test_parse_exact_integers(void)
{
	static const char *const tz[] = { "18433473881008870804",
					  "\"18433473881008870804\"",
					  "\"0xFFD0DAD47DF99594\"" };
	struct ptd_lldb_trace t;
	struct ptd_diag d = { "" };
	char j[1024];

	for (size_t i = 0; i < PTD_ARRAY_SIZE(tz); i++) {
		(void)snprintf(j, sizeof(j),
			       "{\"type\":\"intel-pt\"," CPU ",\"processes\":"
			       "[{\"pid\":7,\"threads\":[{\"tid\":7}],"
			       "\"modules\":[{\"systemPath\":\"[vsyscall]\","
			       "\"loadAddress\":18446744073699065856}]}],"
			       "\"cpus\":[{\"id\":0,\"iptTrace\":\"c0\","
			       "\"contextSwitchTrace\":\"s0\"}],"
			       "\"tscPerfZeroConversion\":{\"timeMult\":"
			       "4294967295,\"timeShift\":31,\"timeZero\":%s}}",
			       tz[i]);
		memset(&d, 0, sizeof(d));
		if (parse(j, &t, &d) < 0) {
			CHECK_FAIL_("timeZero %s: %s", tz[i], d.msg);
			continue;
		}
		CHECK(t.has_tsc_conv);
		CHECK_EQ_U64(t.time_zero, 18433473881008870804ull);
		CHECK_EQ_U64(t.time_mult, UINT32_MAX);
		CHECK_EQ_INT(t.time_shift, 31);
		CHECK_EQ_U64(t.procs[0].modules[0].load_address,
			     0xffffffffff600000ull);
		ptd_lldb_trace_fini(&t);
	}
}

/* Files as LLDB takes them: absolute as they are, relative (".." too) from
 * the bundle directory; an optional field given as null is absent. */
static void test_parse_paths_and_nulls(void)
{
	const char *j =
		"{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":10,"
		"\"triple\":null,\"threads\":["
		"{\"tid\":10,\"iptTrace\":\"/data/t/10.trace\"},"
		"{\"tid\":11,\"iptTrace\":null},{\"tid\":12},"
		"{\"tid\":13,\"iptTrace\":\"../elsewhere/13.trace\"}],"
		"\"modules\":[{\"systemPath\":\"/bin/true\",\"file\":"
		"\"/srv/mods/true\",\"loadAddress\":1,\"uuid\":null},"
		"{\"systemPath\":\"/lib/a.so\",\"file\":null,"
		"\"loadAddress\":\"0x7f0000000000\"}]}],"
		"\"cpus\":null,\"kernel\":null,\"tscPerfZeroConversion\":null}";
	const char *k =
		"{\"type\":\"intel-pt\"," CPU ",\"cpus\":[{\"id\":0,"
		"\"iptTrace\":\"/abs/cpu0.trace\",\"contextSwitchTrace\":"
		"\"../cs/0\"}],\"tscPerfZeroConversion\":{\"timeMult\":1,"
		"\"timeShift\":0,\"timeZero\":0},\"kernel\":{\"file\":"
		"\"/boot/vmlinux\",\"loadAddress\":null}}";
	struct ptd_lldb_trace t;
	struct ptd_diag d = { "" };

	if (parse(j, &t, &d) < 0) {
		CHECK_FAIL_("%s", d.msg);
		return;
	}
	CHECK(t.procs[0].triple == NULL);
	REQUIRE(t.procs[0].nthreads == 4);
	CHECK_EQ_STR(t.procs[0].threads[0].ipt_trace, "/data/t/10.trace");
	CHECK(t.procs[0].threads[1].ipt_trace == NULL);
	CHECK(t.procs[0].threads[2].ipt_trace == NULL);
	CHECK_EQ_STR(t.procs[0].threads[3].ipt_trace,
		     "/b/../elsewhere/13.trace");
	CHECK_EQ_STR(t.procs[0].modules[0].file, "/srv/mods/true");
	CHECK(t.procs[0].modules[0].uuid == NULL);
	CHECK(t.procs[0].modules[1].file == NULL);
	CHECK(!t.ncpus && !t.has_kernel && !t.has_tsc_conv);
	ptd_lldb_trace_fini(&t);

	REQUIRE(parse(k, &t, &d) == 0);
	CHECK_EQ_STR(t.cpus[0].ipt_trace, "/abs/cpu0.trace");
	CHECK_EQ_STR(t.cpus[0].context_switch_trace, "/b/../cs/0");
	CHECK_EQ_STR(t.kernel_file, "/boot/vmlinux");
	CHECK_EQ_U64(t.kernel_load, 0xffffffff81000000ull);
	ptd_lldb_trace_fini(&t);
}

/* ptd's wall-clock reference: read exactly, only with a TSC conversion. */
static void test_parse_wallclock(void)
{
	const char *j =
		"{\"type\":\"intel-pt\"," CPU ",\"processes\":[],"
		"\"tscPerfZeroConversion\":{\"timeMult\":3,\"timeShift\":1,"
		"\"timeZero\":\"18433473881008870804\"},"
		"\"ptdWallClock\":{\"perfTime\":\"9007199254740993\","
		"\"wallTime\":1764100000123456789}}";
	struct ptd_lldb_trace t;
	struct ptd_diag d = { "" };

	if (parse(j, &t, &d) < 0) {
		CHECK_FAIL_("%s", d.msg);
		return;
	}
	CHECK(t.has_tsc_conv && t.has_wallref);
	CHECK_EQ_U64(t.wallref.perf_ns, (1ull << 53) + 1);
	CHECK_EQ_U64(t.wallref.wall_ns, 1764100000123456789ull);
	ptd_lldb_trace_fini(&t);
	REQUIRE(parse(percpu_json, &t, &d) == 0);
	CHECK(!t.has_wallref);
	ptd_lldb_trace_fini(&t);
}

/* Each bad description, the error and a piece of the message. */
static const struct {
	const char *json;
	int err;
	const char *msg;
} bad_cases[] = {
	{ "{", -PTD_EFORMAT, "not valid JSON" },
	{ "[1]", -PTD_EFORMAT, "not a JSON object" },
	{ "{\"type\":\"intel-pt\"}", -PTD_EFORMAT, "cpuInfo: missing" },
	{ "{" CPU "}", -PTD_EFORMAT, "type: missing" },
	{ "{\"type\":\"amd-ibs\"," CPU "}", -PTD_EFORMAT, "is not \"intel-pt\"" },
	{ "{\"type\":3," CPU "}", -PTD_EFORMAT, "type: expected a string" },
	{ "{\"type\":\"intel-pt\",\"cpuInfo\":{\"vendor\":\"AuthenticAMD\","
	  "\"family\":6,\"model\":1,\"stepping\":1}}", -PTD_EFORMAT,
	  "cpuInfo.vendor: \"AuthenticAMD\"" },
	{ "{\"type\":\"intel-pt\",\"cpuInfo\":{\"vendor\":\"GenuineIntel\","
	  "\"family\":\"6\",\"model\":1,\"stepping\":1}}", -PTD_EFORMAT,
	  "cpuInfo.family: expected an integer" },
	{ "{\"type\":\"intel-pt\",\"cpuInfo\":{\"vendor\":\"GenuineIntel\","
	  "\"family\":6,\"model\":256,\"stepping\":1}}", -PTD_EFORMAT,
	  "cpuInfo.model: 256 out of range" },
	{ "{\"type\":\"intel-pt\",\"cpuInfo\":{\"vendor\":\"GenuineIntel\","
	  "\"family\":6,\"model\":1.5,\"stepping\":1}}", -PTD_EFORMAT,
	  "cpuInfo.model: expected an integer" },
	{ "{\"type\":\"intel-pt\",\"cpuInfo\":{\"vendor\":\"GenuineIntel\","
	  "\"family\":6,\"model\":1}}", -PTD_EFORMAT,
	  "cpuInfo.stepping: missing" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":{}}", -PTD_EFORMAT,
	  "processes: expected an array" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[3]}", -PTD_EFORMAT,
	  "processes[0]: expected an object" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"threads\":[],"
	  "\"modules\":[]}]}", -PTD_EFORMAT, "processes[0].pid: missing" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":-4,"
	  "\"threads\":[],\"modules\":[]}]}", -PTD_EFORMAT,
	  "processes[0].pid: expected a non-negative integer" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":0,"
	  "\"threads\":[],\"modules\":[]}]}", -PTD_EFORMAT,
	  "processes[0].pid: 0 out of range" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"modules\":[]}]}", -PTD_EFORMAT, "processes[0].threads: missing" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[{\"tid\":1},{\"tid\":2},{\"tid\":\"x\"}],"
	  "\"modules\":[]}]}", -PTD_EFORMAT,
	  "processes[0].threads[2].tid: expected an integer" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[{\"tid\":4294967296}],\"modules\":[]}]}", -PTD_EFORMAT,
	  "processes[0].threads[0].tid: 4294967296 out of range" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[{\"tid\":1,\"iptTrace\":\"\"}],\"modules\":[]}]}",
	  -PTD_EFORMAT, "processes[0].threads[0].iptTrace: empty string" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[]}]}", -PTD_EFORMAT, "processes[0].modules: missing" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[],\"modules\":[{\"loadAddress\":0}]}]}", -PTD_EFORMAT,
	  "processes[0].modules[0].systemPath: missing" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[],\"modules\":[{\"systemPath\":\"/a\"}]}]}",
	  -PTD_EFORMAT, "processes[0].modules[0].loadAddress: missing" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[],\"modules\":[{\"systemPath\":\"/a\","
	  "\"loadAddress\":\"0x12g\"}]}]}", -PTD_EFORMAT,
	  "processes[0].modules[0].loadAddress: \"0x12g\" is not a decimal" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[],\"modules\":[{\"systemPath\":\"/a\","
	  "\"loadAddress\":\"0x10000000000000000\"}]}]}", -PTD_EFORMAT,
	  "loadAddress: \"0x10000000000000000\" out of range" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[],\"modules\":[{\"systemPath\":\"/a\","
	  "\"loadAddress\":1e300}]}]}", -PTD_EFORMAT,
	  "processes[0].modules[0].loadAddress: expected an integer, not a "
	  "fraction or an exponent" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[],\"modules\":[{\"systemPath\":\"/a\","
	  "\"loadAddress\":true}]}]}", -PTD_EFORMAT,
	  "loadAddress: expected an integer or an integer string" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[],\"modules\":[{\"systemPath\":\"/a\","
	  "\"loadAddress\":1,\"uuid\":7}]}]}", -PTD_EFORMAT,
	  "processes[0].modules[0].uuid: expected a string" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"cpus\":[{\"id\":0,\"iptTrace\":"
	  "\"a\",\"contextSwitchTrace\":\"b\"}]}", -PTD_EFORMAT,
	  "tscPerfZeroConversion: missing (required with \"cpus\")" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"cpus\":[{\"id\":0,\"iptTrace\":"
	  "\"a\"}],\"tscPerfZeroConversion\":{\"timeMult\":1,\"timeShift\":0,"
	  "\"timeZero\":0}}", -PTD_EFORMAT,
	  "cpus[0].contextSwitchTrace: missing" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"cpus\":[{\"id\":0,\"iptTrace\":"
	  "\"a\",\"contextSwitchTrace\":\"b\"},{\"id\":0,\"iptTrace\":\"c\","
	  "\"contextSwitchTrace\":\"d\"}],\"tscPerfZeroConversion\":{"
	  "\"timeMult\":1,\"timeShift\":0,\"timeZero\":0}}", -PTD_EFORMAT,
	  "cpus[1].id: cpu 0 is listed twice" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"cpus\":[],\"tscPerfZeroConversion\":"
	  "{\"timeMult\":1,\"timeShift\":64,\"timeZero\":0}}", -PTD_EFORMAT,
	  "tscPerfZeroConversion.timeShift: 64 out of range" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"cpus\":[],\"tscPerfZeroConversion\":"
	  "{\"timeMult\":1,\"timeShift\":32,\"timeZero\":0}}", -PTD_EFORMAT,
	  "tscPerfZeroConversion.timeShift: 32 out of range" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"cpus\":[],\"tscPerfZeroConversion\":"
	  "{\"timeMult\":0,\"timeShift\":0,\"timeZero\":0}}", -PTD_EFORMAT,
	  "tscPerfZeroConversion.timeMult: 0 out of range" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[{\"tid\":1,\"iptTrace\":\"t\"}],\"modules\":[]}],"
	  "\"cpus\":[{\"id\":0,\"iptTrace\":\"a\",\"contextSwitchTrace\":"
	  "\"b\"}],\"tscPerfZeroConversion\":{\"timeMult\":1,\"timeShift\":0,"
	  "\"timeZero\":0}}", -PTD_EFORMAT,
	  "processes[0].threads[0].iptTrace: not allowed with \"cpus\"" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[{\"tid\":9007199254740993}],\"modules\":[]}]}",
	  -PTD_EFORMAT, "processes[0].threads[0].tid: 9007199254740993 out "
	  "of range [1, 2147483647]" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[{\"tid\":1.0}],\"modules\":[]}]}", -PTD_EFORMAT,
	  "processes[0].threads[0].tid: expected an integer, not a fraction" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[{\"tid\":null}],\"modules\":[]}]}", -PTD_EFORMAT,
	  "processes[0].threads[0].tid: expected an integer" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[],\"modules\":[{\"systemPath\":\"/a\","
	  "\"loadAddress\":18446744073709551616}]}]}", -PTD_EFORMAT,
	  "processes[0].modules[0].loadAddress: an integer over 64 bits out "
	  "of range" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[],\"modules\":[{\"systemPath\":\"/a\","
	  "\"loadAddress\":\"0400000\"}]}]}", -PTD_EFORMAT,
	  "loadAddress: \"0400000\" is not a decimal or 0x-hex integer (a "
	  "leading 0: octal to LLDB)" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"cpus\":[],\"tscPerfZeroConversion\":"
	  "{\"timeMult\":1,\"timeShift\":0,\"timeZero\":1.8433473881008871e19}}",
	  -PTD_EFORMAT, "tscPerfZeroConversion.timeZero: expected an integer, "
	  "not a fraction or an exponent" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"cpus\":[],\"tscPerfZeroConversion\":"
	  "{\"timeMult\":1,\"timeShift\":0,\"timeZero\":-13270192700680812}}",
	  -PTD_EFORMAT, "tscPerfZeroConversion.timeZero: expected a "
	  "non-negative integer" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"cpus\":[],\"tscPerfZeroConversion\":"
	  "{\"timeMult\":1,\"timeShift\":0,\"timeZero\":"
	  "\"18446744073709551616\"}}", -PTD_EFORMAT,
	  "tscPerfZeroConversion.timeZero: \"18446744073709551616\" out of "
	  "range" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"cpus\":[],\"tscPerfZeroConversion\":"
	  "{\"timeMult\":4294967296,\"timeShift\":0,\"timeZero\":0}}",
	  -PTD_EFORMAT, "tscPerfZeroConversion.timeMult: 4294967296 out of "
	  "range" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"cpus\":[{\"id\":0,\"iptTrace\":"
	  "null,\"contextSwitchTrace\":\"b\"}],\"tscPerfZeroConversion\":{"
	  "\"timeMult\":1,\"timeShift\":0,\"timeZero\":0}}", -PTD_EFORMAT,
	  "cpus[0].iptTrace: expected a string" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":01,"
	  "\"threads\":[],\"modules\":[]}]}", -PTD_EFORMAT,
	  "not valid JSON (near byte " },
	{ "{\"type\":\"intel-pt\"," CPU ",\"ptdWallClock\":{\"perfTime\":1,"
	  "\"wallTime\":2}}", -PTD_EFORMAT,
	  "ptdWallClock: given without \"tscPerfZeroConversion\"" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"tscPerfZeroConversion\":{"
	  "\"timeMult\":1,\"timeShift\":0,\"timeZero\":0},\"ptdWallClock\":{"
	  "\"perfTime\":1}}", -PTD_EFORMAT, "ptdWallClock.wallTime: missing" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"tscPerfZeroConversion\":{"
	  "\"timeMult\":1,\"timeShift\":0,\"timeZero\":0},\"ptdWallClock\":{"
	  "\"perfTime\":1.5,\"wallTime\":1}}", -PTD_EFORMAT,
	  "ptdWallClock.perfTime: expected an integer, not a fraction" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"tscPerfZeroConversion\":{"
	  "\"timeMult\":1,\"timeShift\":0,\"timeZero\":0},\"ptdWallClock\":"
	  "[]}", -PTD_EFORMAT, "ptdWallClock: expected an object" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"kernel\":{\"file\":\"k\"}}",
	  -PTD_EFORMAT, "kernel: a kernel trace needs \"cpus\"" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"processes\":[{\"pid\":1,"
	  "\"threads\":[],\"modules\":[]}],\"kernel\":{\"file\":\"k\"}}",
	  -PTD_EFORMAT, "kernel: a kernel trace has no \"processes\"" },
	{ "{\"type\":\"intel-pt\"," CPU ",\"kernel\":{\"loadAddress\":1}}",
	  -PTD_EFORMAT, "kernel.file: missing" },
};

static void test_parse_bad(void)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		struct ptd_lldb_trace t;
		struct ptd_diag d = { "" };
		int r;

		memset(&t, 0xcd, sizeof(t));
		r = parse(bad_cases[i].json, &t, &d);
		if (r != bad_cases[i].err)
			CHECK_FAIL_("case %zu: expected %d, got %d (%s)", i,
				    bad_cases[i].err, r, d.msg);
		CHECK_CONTAINS(d.msg, bad_cases[i].msg);
		CHECK_CONTAINS(d.msg, "/b/trace.json: ");
		/* nothing written on failure */
		CHECK_EQ_U64(*(uint8_t *)&t, 0xcd);
		if (r == 0)
			ptd_lldb_trace_fini(&t);
	}
}

static void test_parse_limits(void)
{
	struct ptd_lldb_trace t;
	struct ptd_diag d = { "" };
	struct ptd_buf b = { 0 };
	const char *head = "{\"type\":\"intel-pt\"," CPU ",\"processes\":[";
	int r;

	CHECK_EQ_INT(ptd_lldb_trace_parse(NULL, 0, "/b", "o", &t, &d),
		     -EINVAL);
	CHECK_EQ_INT(ptd_lldb_trace_parse("{}", PTD_LLDB_MAX_DESC + 1u, "/b",
					  "o", &t, &d), -PTD_ELIMIT);
	/* one process too many */
	REQUIRE(ptd_buf_append(&b, head, strlen(head)) == 0);
	for (unsigned i = 0; i <= PTD_LLDB_MAX_PROCS; i++) {
		const char *p = i ? ",{}" : "{}";

		REQUIRE(ptd_buf_append(&b, p, strlen(p)) == 0);
	}
	REQUIRE(ptd_buf_append(&b, "]}", 2) == 0);
	r = ptd_lldb_trace_parse((char *)b.data, b.len, "/b", "/b/trace.json",
				 &t, &d);
	CHECK_EQ_INT(r, -PTD_ELIMIT);
	CHECK_CONTAINS(d.msg, "processes: 1025 elements");
	ptd_buf_fini(&b);

	/* a file name longer than a path may be */
	{
		static char j[PATH_MAX + 512];
		int n = snprintf(j, sizeof(j), "{\"type\":\"intel-pt\"," CPU
				 ",\"processes\":[{\"pid\":1,\"threads\":"
				 "[{\"tid\":1,\"iptTrace\":\"/");

		REQUIRE(n > 0 && (size_t)n + PATH_MAX + 64 < sizeof(j));
		memset(j + n, 'a', PATH_MAX);
		(void)snprintf(j + n + PATH_MAX, sizeof(j) - (size_t)n - PATH_MAX,
			       "\"}],\"modules\":[]}]}");
		CHECK_EQ_INT(parse(j, &t, &d), -PTD_EFORMAT);
		CHECK_CONTAINS(d.msg, "processes[0].threads[0].iptTrace: "
			       "\"/aaaa");
		CHECK_CONTAINS(d.msg, "is longer than a path may be");
	}
}

static void test_load(void)
{
	struct ptd_lldb_trace t;
	struct ptd_diag d = { "" };
	const char *dir = wpath("load");
	char file[600];

	REQUIRE(mkdir(dir, 0755) == 0);
	CHECK_EQ_INT(ptd_lldb_trace_load(dir, &t, &d), -ENOENT);
	CHECK_CONTAINS(d.msg, "trace.json");
	(void)snprintf(file, sizeof(file), "%s/trace.json", dir);
	REQUIRE(ptd_file_write_atomic(file, percpu_json,
				      strlen(percpu_json)) == 0);
	REQUIRE(ptd_lldb_trace_load(dir, &t, &d) == 0);
	CHECK_EQ_STR(t.dir, dir);
	CHECK_EQ_INT(t.ncpus, 2);
	ptd_lldb_trace_fini(&t);
	REQUIRE(ptd_lldb_trace_load(file, &t, &d) == 0);
	CHECK_EQ_STR(t.dir, dir);
	CHECK_EQ_STR(t.origin, file);
	ptd_lldb_trace_fini(&t);
}

static int count_rec(void *ctx, const struct ptd_record *r)
{
	(void)r;
	(*(size_t *)ctx)++;
	return 0;
}

static void notice_count(void *ctx, const struct ptd_diag *d)
{
	(void)d;
	(*(size_t *)ctx) += 1000;
}

static void write_in(const char *dir, const char *name, const void *data,
		     size_t len)
{
	char p[700];

	(void)snprintf(p, sizeof(p), "%s/%s", dir, name);
	REQUIRE(ptd_file_write_atomic(p, data, len) == 0);
}

/* Per-CPU bundles: what is refused, and by name (the whole decode is in
 * e2e/test-lldb-e2e.c, the pieces in test-lldb-percpu.c). */
static void test_decode_per_cpu_errors(void)
{
	struct ptd_input_opts o;
	struct ptd_diag d = { "" };
	size_t n = 0;
	struct ptd_input_sink sink = { NULL, count_rec, NULL, &n,
				       notice_count };
	const char *dir = wpath("load");
	char cpus[600];
	struct trace t;

	memset(&o, 0, sizeof(o));
	/* the CPUs' files are missing */
	CHECK_EQ_INT(ptd_lldb_decode(dir, &o, &sink, NULL, &d), -ENOENT);
	CHECK_CONTAINS(d.msg, "trace.json: cpus[0].iptTrace: cannot read");
	CHECK_CONTAINS(d.msg, "cpus/0.trace");
	(void)snprintf(cpus, sizeof(cpus), "%s/cpus", dir);
	REQUIRE(mkdir(cpus, 0755) == 0);

	/* a trace without TSC packets cannot be split by time */
	tr_begin(&t);
	psb(&t);
	tr_end(&t);
	write_in(dir, "cpus/0.trace", t.buf, t.len);
	CHECK_EQ_INT(ptd_lldb_decode(dir, &o, &sink, NULL, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "cpus[0].iptTrace: the PSB at offset 0 has no "
		       "TSC");

	/* a bad context switch trace, named with the offset */
	tr_begin(&t);
	simple(&t, ppt_pad);
	psb_tsc(&t, 0x1000, 0);
	tr_end(&t);
	write_in(dir, "cpus/0.trace", t.buf, t.len);
	write_in(dir, "cpus/0.cs", "\x01\x00\x00\x00\x00\x00\x04\x00", 8);
	CHECK_EQ_INT(ptd_input_decode(wpath("load/trace.json"), &o, &sink,
				      NULL, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "trace.json: cpus[0].contextSwitchTrace: "
		       "offset 0: a record of 4 bytes");

	/* no switch records: nothing is any thread's, and the decode says
	 * so (a notice) instead of losing it silently */
	write_in(dir, "cpus/0.cs", "", 0);
	write_in(dir, "cpus/3.trace", t.buf, t.len);
	write_in(dir, "cpus/3.cs", "", 0);
	n = 0;
	CHECK_EQ_INT(ptd_lldb_decode(dir, &o, &sink, NULL, &d), 0);
	CHECK_EQ_INT(n, 1000);	/* one notice, no record */

	/* kernel traces are not decoded */
	const char *k =
		"{\"type\":\"intel-pt\"," CPU ",\"cpus\":[{\"id\":0,"
		"\"iptTrace\":\"a\",\"contextSwitchTrace\":\"b\"}],"
		"\"tscPerfZeroConversion\":{\"timeMult\":1,\"timeShift\":0,"
		"\"timeZero\":0},\"kernel\":{\"file\":\"vmlinux\"}}";
	const char *kdir = wpath("kernel");

	REQUIRE(mkdir(kdir, 0755) == 0);
	write_in(kdir, "trace.json", k, strlen(k));
	CHECK_EQ_INT(ptd_lldb_decode(kdir, &o, &sink, NULL, &d),
		     -PTD_EUNSUPPORTED);
	CHECK_CONTAINS(d.msg, "a kernel LLDB trace");
}

/* ---- elfwrap ------------------------------------------------------------ */

static void check_wrapped(const char *path, const uint8_t *code, size_t len,
			  uint64_t vaddr)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e;
	GElf_Ehdr eh;
	GElf_Phdr ph;
	size_t n = 0, shstrndx = 0;
	Elf_Scn *scn = NULL;
	bool text = false;

	REQUIRE(fd >= 0);
	REQUIRE(elf_version(EV_CURRENT) != EV_NONE);
	e = elf_begin(fd, ELF_C_READ, NULL);
	REQUIRE(e && elf_kind(e) == ELF_K_ELF);
	REQUIRE(gelf_getehdr(e, &eh));
	CHECK_EQ_INT(eh.e_ident[EI_CLASS], ELFCLASS64);
	CHECK_EQ_INT(eh.e_type, ET_EXEC);
	CHECK_EQ_INT(eh.e_machine, EM_X86_64);
	REQUIRE(elf_getphdrnum(e, &n) == 0);
	CHECK_EQ_INT(n, 1);
	REQUIRE(gelf_getphdr(e, 0, &ph));
	CHECK_EQ_INT(ph.p_type, PT_LOAD);
	CHECK_EQ_INT(ph.p_flags, PF_R | PF_X);
	CHECK_EQ_U64(ph.p_vaddr, vaddr);
	CHECK_EQ_U64(ph.p_filesz, len);
	CHECK_EQ_U64(ph.p_memsz, len);
	CHECK_EQ_U64(ph.p_offset % 4096, vaddr % 4096);
	/* the bytes are at p_offset */
	{
		char *data = NULL;
		size_t flen = 0;

		REQUIRE(ptd_file_read_all(path, 1 << 24, &data, &flen) == 0);
		REQUIRE(ph.p_offset + len <= flen);
		CHECK(!memcmp(data + ph.p_offset, code, len));
		free(data);
	}
	REQUIRE(elf_getshdrstrndx(e, &shstrndx) == 0);
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;

		REQUIRE(gelf_getshdr(scn, &sh));
		name = elf_strptr(e, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".text"))
			continue;
		text = true;
		CHECK_EQ_U64(sh.sh_addr, vaddr);
		CHECK_EQ_U64(sh.sh_size, len);
		CHECK_EQ_U64(sh.sh_offset, ph.p_offset);
		CHECK(sh.sh_flags & SHF_EXECINSTR);
		Elf_Data *dd = elf_getdata(scn, NULL);
		REQUIRE(dd && dd->d_size == len);
		CHECK(!memcmp(dd->d_buf, code, len));
	}
	CHECK(text);
	elf_end(e);
	close(fd);
}

static void test_elfwrap(void)
{
	uint8_t code[300];
	struct ptd_buf b = { 0 };
	struct ptd_diag d = { "" };

	for (size_t i = 0; i < sizeof(code); i++)
		code[i] = (uint8_t)(i * 7 + 1);
	REQUIRE(ptd_elfwrap_write(wpath("w1.elf"), code, sizeof(code),
				  0x7fff12345000ull, &d) == 0);
	check_wrapped(wpath("w1.elf"), code, sizeof(code), 0x7fff12345000ull);
	/* an address not page-aligned */
	REQUIRE(ptd_elfwrap_write(wpath("w2.elf"), code, 17, 0x401234, &d) ==
		0);
	check_wrapped(wpath("w2.elf"), code, 17, 0x401234);

	CHECK_EQ_INT(ptd_elfwrap_build(code, 0, 0x1000, &b, &d), -EINVAL);
	CHECK_EQ_INT(ptd_elfwrap_build(NULL, 1, 0x1000, &b, &d), -EINVAL);
	CHECK_EQ_INT(ptd_elfwrap_build(code, 16, UINT64_MAX - 8, &b, &d),
		     -PTD_ELIMIT);
	CHECK_CONTAINS(d.msg, "cannot be wrapped");
	CHECK_EQ_INT(ptd_elfwrap_build(code, PTD_ELFWRAP_MAX_CODE + 1u, 0, &b,
				       &d), -PTD_ELIMIT);
	CHECK_EQ_INT(b.len, 0);
	CHECK_EQ_INT(ptd_elfwrap_write(wpath("nodir/x.elf"), code, 4, 0x1000,
				       &d), -ENOENT);
	CHECK_CONTAINS(d.msg, "nodir/x.elf");
}

/* ---- export, and reading it back --------------------------------------- */

/* Module names outlive the decode that made them (they belong to its
 * section cache): keep one copy of each. */
static char *names[64];

static const char *intern(const char *s)
{
	size_t i;

	for (i = 0; i < 64 && names[i]; i++)
		if (!strcmp(names[i], s))
			return names[i];
	if (i == 64)
		abort();
	names[i] = strdup(s);
	if (!names[i])
		abort();
	return names[i];
}

/* Records, with isids zeroed: section ids number the sections in the order
 * they were added, which differs between the capture's timeline and a
 * bundle's module list; everything else must be equal. */
static int collect_noisid(void *ctx, const struct ptd_record *rec)
{
	struct ptd_record r = *rec;

	if (r.type == PTD_REC_INSN || r.type == PTD_REC_FIRST_EXEC) {
		r.u.insn.isid = 0;
		r.u.insn.module = intern(r.u.insn.module);
		r.u.insn.json_body = NULL;
		r.u.insn.json_body_len = 0;
	}
	if (r.type == PTD_REC_BLOCK) {
		r.u.block.isid = 0;
		r.u.block.module = intern(r.u.block.module);
	}
	return reclist_add(ctx, &r);
}

static struct ptd_input_info seen_info;
static unsigned seen_info_calls;

static int on_info(void *ctx, const struct ptd_input_info *i)
{
	(void)ctx;
	seen_info = *i;
	seen_info_calls++;
	return 0;
}

static const char *progs_dir;
static size_t done_calls;
static pid_t done_tids[8];

static void on_done(void *ctx, pid_t tid, const struct ptd_decode_stats *st,
		    int err, const struct ptd_diag *d)
{
	(void)ctx;
	(void)st;
	(void)err;
	(void)d;
	if (done_calls < PTD_ARRAY_SIZE(done_tids))
		done_tids[done_calls] = tid;
	done_calls++;
}

/* Replace the relative path in string member @key of @o with its
 * absolute path under @dir. */
static void absolutize(cJSON *o, const char *key, const char *dir)
{
	cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	char abs[1024];

	if (!cJSON_IsString(it))
		return;
	REQUIRE(it->valuestring[0] != '/');
	(void)snprintf(abs, sizeof(abs), "%s/%s", dir, it->valuestring);
	REQUIRE(cJSON_ReplaceItemInObjectCaseSensitive(
		o, key, cJSON_CreateString(abs)));
}

/* The bundle @bdir described from another directory: its trace.json names
 * every file by absolute path and lists two threads more that have no
 * trace ("iptTrace" null, and absent), as hand-made bundles do.  It
 * decodes to the same records (@want, made with @o), and only the traced
 * thread is decoded. */
static void check_moved(const char *bdir, const struct ptd_input_opts *o,
			const struct reclist *want, pid_t tid)
{
	const char *mdir = wpath("moved");
	char path[700];
	_cleanup_free_ char *text = NULL;
	char *out;
	size_t len = 0, errs = 99;
	struct reclist got = { 0 };
	struct ptd_input_sink s = { on_info, collect_noisid, on_done, &got };
	struct ptd_diag d = { "" };
	cJSON *root, *pr, *it, *threads, *th;
	int r;

	(void)snprintf(path, sizeof(path), "%s/trace.json", bdir);
	REQUIRE(ptd_file_read_all(path, 1u << 24, &text, &len) == 0);
	root = cJSON_ParseWithLength(text, len);
	REQUIRE(root);
	pr = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "processes"), 0);
	REQUIRE(pr);
	threads = cJSON_GetObjectItem(pr, "threads");
	cJSON_ArrayForEach(it, threads)
		absolutize(it, "iptTrace", bdir);
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(pr, "modules"))
		absolutize(it, "file", bdir);
	th = cJSON_CreateObject();
	cJSON_AddNumberToObject(th, "tid", 999999);
	cJSON_AddNullToObject(th, "iptTrace");
	cJSON_AddItemToArray(threads, th);
	th = cJSON_CreateObject();
	cJSON_AddNumberToObject(th, "tid", 999998);
	cJSON_AddItemToArray(threads, th);
	out = cJSON_Print(root);
	cJSON_Delete(root);
	REQUIRE(out);
	REQUIRE(mkdir(mdir, 0755) == 0);
	(void)snprintf(path, sizeof(path), "%s/trace.json", mdir);
	REQUIRE(ptd_file_write_atomic(path, out, strlen(out)) == 0);
	free(out);

	seen_info_calls = 0;
	done_calls = 0;
	r = ptd_input_decode(mdir, o, &s, &errs, &d);
	if (r < 0)
		CHECK_FAIL_("decode of the moved bundle: %s", d.msg);
	CHECK_EQ_INT(r, 0);
	CHECK_EQ_INT(errs, 0);
	CHECK_EQ_INT(seen_info_calls, 1);
	CHECK_EQ_INT(seen_info.nthreads, 1);
	CHECK_EQ_INT(done_calls, 1);
	CHECK_EQ_INT(done_tids[0], tid);
	CHECK(reccmp_lists(stderr, "bundle: ", want, "moved:  ", &got));
	reclist_free(&got);
}


static void test_export_roundtrip(void)
{
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag d = { "" };
	struct ptd_capture c;
	struct ptd_input_opts o;
	struct reclist direct = { 0 }, bundle = { 0 };
	char prog[512];
	char *argv[] = { prog, NULL };
	const char *cdir = wpath("cap"), *bdir = wpath("bundle");
	uint64_t *truth = NULL;
	size_t ntruth = 0, errs = 99, i, k;
	int r;

	(void)snprintf(prog, sizeof(prog), "%s/prog-recursion", progs_dir);
	memset(&so, 0, sizeof(so));
	so.outdir = cdir;
	so.quiet_target = true;
	so.gen.tsc = true;	/* a clock and a wall-clock reference */
	r = ptd_swpt_run(argv, &so, &res, &d);
	if (r == -EPERM)
		SKIP_ALL("ptrace refused: %s", d.msg);
	REQUIRE(r == 0);
	REQUIRE(ptd_capture_load(cdir, &c, &d) == 0);
	r = ptd_lldb_export_capture(&c, bdir, &d);
	if (r < 0)
		CHECK_FAIL_("export: %s", d.msg);
	REQUIRE(r == 0);
	/* again: the directory exists */
	CHECK_EQ_INT(ptd_lldb_export_capture(&c, bdir, &d), -EEXIST);
	CHECK_CONTAINS(d.msg, "already exists");

	memset(&o, 0, sizeof(o));
	o.decode.path = PTD_PATH_INSN;
	/* (first_exec, not the table's other kinds: their names and blocks
	 * live in the decode's table, gone when the decode ends, after these
	 * lists are made; test-firstexec and test-hottrace compare them as
	 * lines) */
	o.decode.want = (PTD_REC_ALL & ~(PTD_REC_BIT(PTD_REC_BLOCK) |
					 PTD_COUNTERS_KINDS)) |
			PTD_REC_BIT(PTD_REC_FIRST_EXEC);
	struct ptd_input_sink sd = { NULL, collect_noisid, NULL, &direct };
	struct ptd_input_sink sb = { on_info, collect_noisid, NULL, &bundle };

	REQUIRE(ptd_capture_decode(cdir, &o, &sd, NULL, &d) == 0);
	/* through the one interface: detection of trace.json included */
	r = ptd_input_decode(bdir, &o, &sb, &errs, &d);
	if (r < 0)
		CHECK_FAIL_("decode of the bundle: %s", d.msg);
	REQUIRE(r == 0);
	CHECK_EQ_INT(errs, 0);
	CHECK_EQ_INT(seen_info_calls, 1);
	CHECK_EQ_INT(seen_info.kind, PTD_INPUT_LLDB);
	CHECK_EQ_STR(seen_info.source, "lldb-bundle");
	CHECK_EQ_INT(seen_info.pid, c.pid);
	CHECK_EQ_INT(seen_info.nthreads, 1);
	CHECK(reccmp_lists(stderr, "capture: ", &direct, "bundle:  ",
			   &bundle));
	check_moved(bdir, &o, &bundle, c.threads[0].tid);
	/* the records' time and wall are the capture's, which are the live
	 * stream's (reccmp leaves them out) */
	REQUIRE(c.has_clock && c.has_wallref);
	for (i = 0, k = 0; i < direct.n && i < bundle.n; i++) {
		const struct ptd_record *a = &direct.r[i], *b = &bundle.r[i];

		if (a->has_time != b->has_time || a->time != b->time ||
		    a->has_wall != b->has_wall || a->wall != b->wall) {
			CHECK_FAIL_("record %zu: time %d:%" PRIu64 " wall %d:%"
				    PRIu64 " in the capture, time %d:%" PRIu64
				    " wall %d:%" PRIu64 " in the bundle", i,
				    a->has_time, a->time, a->has_wall, a->wall,
				    b->has_time, b->time, b->has_wall,
				    b->wall);
			break;
		}
		k += b->has_time && b->has_wall;
	}
	CHECK(k > 1000);

	/* the bundle's instructions are the ground truth */
	REQUIRE(ptd_capture_read_truth(&c, 0, &truth, &ntruth, &d) == 0);
	for (i = 0, k = 0; i < bundle.n; i++) {
		if (bundle.r[i].type != PTD_REC_INSN)
			continue;
		if (k >= ntruth || bundle.r[i].u.insn.ip != truth[k]) {
			CHECK_FAIL_("instruction %zu: expected 0x%llx, got "
				    "0x%llx", k,
				    k < ntruth ? (unsigned long long)truth[k]
					       : 0ull,
				    (unsigned long long)bundle.r[i].u.insn.ip);
			break;
		}
		k++;
	}
	CHECK_EQ_INT(k, ntruth);
	CHECK(ntruth > 1000);

	/* the block path gives the same instructions */
	reclist_free(&bundle);
	o.decode.path = PTD_PATH_BLOCK;
	REQUIRE(ptd_lldb_decode(bdir, &o, &sb, NULL, &d) == 0);
	for (i = 0, k = 0; i < bundle.n && k < ntruth; i++)
		if (bundle.r[i].type == PTD_REC_INSN &&
		    bundle.r[i].u.insn.ip == truth[k])
			k++;
	CHECK_EQ_INT(k, ntruth);

	/* a thread the bundle does not have */
	o.have_tid = true;
	o.tid = 1;
	CHECK_EQ_INT(ptd_lldb_decode(bdir, &o, &sb, NULL, &d), -ENOENT);
	CHECK_CONTAINS(d.msg, "no trace of thread 1");

	free(truth);
	reclist_free(&direct);
	reclist_free(&bundle);
	ptd_capture_fini(&c);
}

/* A module the bundle names but does not hold is refused, by name. */
static void test_decode_missing_module(void)
{
	const char *dir = wpath("bundle");
	char p[600];
	struct ptd_input_opts o;
	struct ptd_diag d = { "" };
	size_t n = 0;
	struct ptd_input_sink sink = { NULL, count_rec, NULL, &n };

	(void)snprintf(p, sizeof(p), "%s/modules/1", dir);
	REQUIRE(ptd_rm_rf(p) == 0);
	memset(&o, 0, sizeof(o));
	CHECK_EQ_INT(ptd_lldb_decode(dir, &o, &sink, NULL, &d), -ENOENT);
	CHECK_CONTAINS(d.msg, "processes[0].modules[1]: cannot open");
	CHECK_EQ_INT(n, 0);

	/* a module that is not an ELF file */
	REQUIRE(mkdir(p, 0755) == 0);
	(void)snprintf(p, sizeof(p), "%s/modules/1/ld-linux-x86-64.so.2",
		       dir);
	REQUIRE(ptd_file_write_atomic(p, "junk", 4) == 0);
	CHECK_EQ_INT(ptd_lldb_decode(dir, &o, &sink, NULL, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "is not an ELF file");
}

/* Captures whose image is not one static image are refused. */
/* A thread id given to two threads of the capture (the kernel reuses a
 * freed id): LLDB knows one trace per thread id, so the bundle lists it
 * once, with both streams one after the other. */
static void test_export_reused_tid(void)
{
	static const char *const name[] = { "pt-5.bin", "pt-6.bin",
					    "pt-6.2.bin" };
	static const char *const bytes[] = { "AAAA", "BB", "CCC" };
	struct ptd_capture_thread th[3];
	struct ptd_lldb_trace t;
	struct ptd_capture c;
	struct ptd_tl_event ev;
	struct ptd_diag d = { "" };
	_cleanup_free_ char *got = NULL;
	char dir[512], path[600];
	uint8_t code[64];
	size_t n = 0;

	memset(code, 0x90, sizeof(code));
	(void)snprintf(dir, sizeof(dir), "%s", wpath("reuse"));
	REQUIRE(mkdir(dir, 0755) == 0);
	(void)snprintf(path, sizeof(path), "%s/snap-a.bin", dir);
	REQUIRE(ptd_file_write_atomic(path, code, sizeof(code)) == 0);
	memset(th, 0, sizeof(th));
	for (size_t i = 0; i < 3; i++) {
		(void)snprintf(path, sizeof(path), "%s/%s", dir, name[i]);
		REQUIRE(ptd_file_write_atomic(path, bytes[i],
					      strlen(bytes[i])) == 0);
		th[i].tid = i ? 6 : 5;
		th[i].pt = (char *)name[i];
		th[i].pt_bytes = strlen(bytes[i]);
	}
	memset(&c, 0, sizeof(c));
	c.dir = dir;
	c.pid = 5;
	c.threads = th;
	c.nthreads = 3;
	ptd_timeline_init(&c.tl);
	memset(&ev, 0, sizeof(ev));
	ev.op = PTD_TL_SNAPSHOT;
	ev.start = 0x10000;
	ev.end = 0x10040;
	ev.name = (char *)"[anon]";
	ev.file = (char *)"snap-a.bin";
	REQUIRE(ptd_timeline_add(&c.tl, &ev) >= 0);
	REQUIRE(ptd_lldb_export_capture(&c, wpath("reuse-b"), &d) == 0);
	REQUIRE(ptd_lldb_trace_load(wpath("reuse-b"), &t, &d) == 0);
	REQUIRE(t.nprocs == 1);
	REQUIRE(t.procs[0].nthreads == 2);
	CHECK_EQ_INT(t.procs[0].threads[0].tid, 5);
	CHECK_EQ_INT(t.procs[0].threads[1].tid, 6);
	REQUIRE(ptd_file_read_all(t.procs[0].threads[1].ipt_trace, 64, &got,
				  &n) == 0);
	CHECK_EQ_INT(n, 5);
	CHECK(n == 5 && memcmp(got, "BBCCC", 5) == 0);
	ptd_lldb_trace_fini(&t);
	ptd_timeline_fini(&c.tl);
}

static void test_export_refusals(void)
{
	struct ptd_capture c;
	struct ptd_tl_event ev;
	struct ptd_diag d = { "" };
	char dir[512];
	char snap[600];
	uint8_t a[64], b[64];

	memset(a, 0x90, sizeof(a));
	memset(b, 0xc3, sizeof(b));
	(void)snprintf(dir, sizeof(dir), "%s", wpath("fake"));
	REQUIRE(mkdir(dir, 0755) == 0);
	(void)snprintf(snap, sizeof(snap), "%s/snap-a.bin", dir);
	REQUIRE(ptd_file_write_atomic(snap, a, sizeof(a)) == 0);
	(void)snprintf(snap, sizeof(snap), "%s/snap-b.bin", dir);
	REQUIRE(ptd_file_write_atomic(snap, b, sizeof(b)) == 0);

	memset(&c, 0, sizeof(c));
	c.dir = dir;
	c.pid = 5;
	ptd_timeline_init(&c.tl);
	memset(&ev, 0, sizeof(ev));
	ev.op = PTD_TL_SNAPSHOT;
	ev.start = 0x10000;
	ev.end = 0x10040;
	ev.name = (char *)"[anon]";
	ev.file = (char *)"snap-a.bin";
	REQUIRE(ptd_timeline_add(&c.tl, &ev) >= 0);
	/* the same bytes again: fine, one module */
	REQUIRE(ptd_timeline_add(&c.tl, &ev) >= 0);
	REQUIRE(ptd_lldb_export_capture(&c, wpath("fake-ok"), &d) == 0);
	{
		struct ptd_lldb_trace t;

		REQUIRE(ptd_lldb_trace_load(wpath("fake-ok"), &t, &d) == 0);
		REQUIRE(t.nprocs == 1);
		CHECK_EQ_INT(t.procs[0].nmodules, 1);
		CHECK_EQ_STR(t.procs[0].modules[0].system_path, "[anon]");
		CHECK_EQ_U64(t.procs[0].modules[0].load_address, 0x10000);
		check_wrapped(t.procs[0].modules[0].file, a, sizeof(a),
			      0x10000);
		/* the software source has no CPU: an Intel one LLDB takes */
		CHECK_EQ_INT(t.cpu.vendor, pcv_intel);
		ptd_lldb_trace_fini(&t);
	}

	/* rewritten in place (JIT): two images */
	ev.file = (char *)"snap-b.bin";
	REQUIRE(ptd_timeline_add(&c.tl, &ev) >= 0);
	CHECK_EQ_INT(ptd_lldb_export_capture(&c, wpath("fake-jit"), &d),
		     -PTD_EUNSUPPORTED);
	CHECK_CONTAINS(d.msg, "overlap at 0x10000");
	CHECK(access(wpath("fake-jit"), F_OK) != 0);

	/* an exec after code was mapped */
	ptd_timeline_fini(&c.tl);
	ptd_timeline_init(&c.tl);
	ev.file = (char *)"snap-a.bin";
	REQUIRE(ptd_timeline_add(&c.tl, &ev) >= 0);
	memset(&ev, 0, sizeof(ev));
	ev.op = PTD_TL_EXEC;
	ev.path = (char *)"/bin/true";
	REQUIRE(ptd_timeline_add(&c.tl, &ev) >= 0);
	CHECK_EQ_INT(ptd_lldb_export_capture(&c, wpath("fake-exec"), &d),
		     -PTD_EUNSUPPORTED);
	CHECK_CONTAINS(d.msg, "exec of '/bin/true'");

	/* a mapped file that is not an ELF */
	ptd_timeline_fini(&c.tl);
	ptd_timeline_init(&c.tl);
	memset(&ev, 0, sizeof(ev));
	ev.op = PTD_TL_MAP;
	ev.start = 0x20000;
	ev.end = 0x21000;
	ev.path = snap;
	REQUIRE(ptd_timeline_add(&c.tl, &ev) >= 0);
	CHECK_EQ_INT(ptd_lldb_export_capture(&c, wpath("fake-notelf"), &d),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "is not an ELF file");
	ptd_timeline_fini(&c.tl);
	CHECK_EQ_INT(ptd_lldb_export_capture(NULL, "x", &d), -EINVAL);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	progs_dir = getenv("PTD_TEST_PROGS");
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-test-lldb-XXXXXX",
		       tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir))
		SKIP_ALL("cannot create a work directory");
	RUN(test_parse_per_thread);
	RUN(test_parse_per_cpu);
	RUN(test_parse_exact_integers);
	RUN(test_parse_paths_and_nulls);
	RUN(test_parse_wallclock);
	RUN(test_parse_bad);
	RUN(test_parse_limits);
	RUN(test_load);
	RUN(test_decode_per_cpu_errors);
	RUN(test_elfwrap);
	RUN(test_export_refusals);
	RUN(test_export_reused_tid);
	if (progs_dir) {
		RUN(test_export_roundtrip);
		RUN(test_decode_missing_module);
	} else {
		fprintf(stderr, "PTD_TEST_PROGS unset: no round trip\n");
		check_failures++;
	}
	(void)ptd_rm_rf(workdir);
	for (size_t i = 0; i < 64; i++)
		free(names[i]);
	return check_done();
}
