/* SPDX-License-Identifier: MIT */
/*
 * LLDB Intel PT trace bundles: reading trace.json and decoding it.
 *
 * A bundle (what LLDB's `trace save` writes and `trace load` reads) is a
 * directory with a description, trace.json:
 *
 *   {"type":"intel-pt",
 *    "cpuInfo":{"vendor":"GenuineIntel","family":6,"model":85,"stepping":4},
 *    "processes":[{"pid":123,"triple":"x86_64-unknown-linux-gnu",
 *       "threads":[{"tid":123,"iptTrace":"threads/123.intelpt.trace"}],
 *       "modules":[{"systemPath":"/usr/bin/ls","file":"modules/ls",
 *                   "loadAddress":"0x555555554000","uuid":"..."}]}],
 *    "cpus":[{"id":0,"iptTrace":"cpus/0.intelpt.trace",
 *             "contextSwitchTrace":"cpus/0.perf_context_switch_trace"}],
 *    "tscPerfZeroConversion":{"timeMult":1,"timeShift":0,"timeZero":0},
 *    "kernel":{"file":"vmlinux","loadAddress":"0xffffffff81000000"}}
 *
 * What ptd holds to (LLDB is laxer in places; we refuse, naming the field):
 *  - "file", "iptTrace", "contextSwitchTrace" and kernel "file" name files
 *    as LLDB takes them: an absolute path as it is, a relative one from
 *    the bundle directory (".." included: bundles written by hand or by
 *    other tools point where they like; the daemon reads them with the
 *    client's rights).  Not empty.  "systemPath" is the path the module
 *    had on the traced machine: any non-empty string, used as the
 *    module's name in records (and as the file to read when "file" is
 *    absent).
 *  - tscPerfZeroConversion: timeMult 1..2^32-1, timeShift 0..31 (what
 *    perf's header page can hold; others would not convert).
 *  - integers are read exactly (common/json.h), whatever their size: a
 *    fraction, an exponent, a negative number or a value out of the
 *    field's range is refused (tid/pid > 0 and < 2^31).  The fields LLDB
 *    reads as 64-bit (JSONUINT64: "loadAddress", "timeZero", which LLDB
 *    writes as a string) are a JSON integer up to 2^64-1 or a decimal or
 *    "0x" hex string.
 *  - an optional field given as null is absent, as in LLDB (a thread
 *    with "iptTrace": null has no trace).
 *  - "ptdWallClock":{"perfTime":N,"wallTime":N}, ptd's own key (LLDB
 *    ignores it; ptd's exporter writes it): perf time N and CLOCK_REALTIME
 *    ns N at one instant, 64-bit integers as "timeZero" is.  Only with
 *    "tscPerfZeroConversion".  With both, records carry "time" and
 *    "wall" as the live stream did; a bundle without it gives "time"
 *    only (perf time alone says nothing of the wall clock).
 *  - "cpus" given: every thread's "iptTrace" must be absent, and
 *    "tscPerfZeroConversion" present; "kernel" given: "cpus" present and
 *    "processes" absent or empty.  Unknown keys are ignored (newer LLDBs
 *    may add some).
 *  - limits: PTD_LLDB_MAX_DESC bytes of trace.json, PTD_LLDB_MAX_PROCS,
 *    PTD_LLDB_MAX_THREADS threads in all, PTD_LLDB_MAX_MODULES per process,
 *    PTD_LLDB_MAX_CPUS.
 * Messages read "DIR/trace.json: processes[0].threads[2].tid: expected an
 * integer".
 *
 * Decoding: each process's modules make one image: every executable
 * PT_LOAD segment of each module's ELF file, moved as LLDB moves it (the
 * module's first PT_LOAD goes to loadAddress, the others keep their
 * distance).  Each thread's iptTrace is decoded with it, threads in the
 * order the bundle lists them.  Per-CPU bundles: each listed thread's runs
 * on the CPUs, found as lldb/percpu.h says, decoded in time order.  With
 * tscPerfZeroConversion, records carry perf time (and wall-clock time
 * with ptdWallClock).  Kernel bundles are
 * parsed but not decoded: -PTD_EUNSUPPORTED.
 */
#ifndef PTD_LLDB_TRACE_H
#define PTD_LLDB_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <intel-pt.h>

#include "common/diag.h"
#include "input/input.h"
#include "perf/time.h"

#define PTD_LLDB_DESC "trace.json"
#define PTD_LLDB_WALLCLOCK "ptdWallClock"
#define PTD_LLDB_MAX_DESC (16u << 20)
#define PTD_LLDB_MAX_PROCS 1024u
#define PTD_LLDB_MAX_THREADS 65536u
#define PTD_LLDB_MAX_MODULES 65536u
#define PTD_LLDB_MAX_CPUS 4096u
/* Largest PT file decoded (a thread's whole trace is read into memory). */
#define PTD_LLDB_MAX_PT (4ull << 30)

struct ptd_lldb_module {
	char *system_path;	/* traced path: the name in records */
	char *file;		/* the file, or NULL ("file" absent) */
	uint64_t load_address;
	char *uuid;		/* NULL if absent */
};

struct ptd_lldb_thread {
	pid_t tid;
	char *ipt_trace;	/* the iptTrace file, or NULL (absent) */
};

struct ptd_lldb_process {
	pid_t pid;
	char *triple;		/* NULL if absent */
	struct ptd_lldb_thread *threads;
	size_t nthreads;
	struct ptd_lldb_module *modules;
	size_t nmodules;
};

struct ptd_lldb_cpu {
	uint32_t id;
	char *ipt_trace;		/* the iptTrace file */
	char *context_switch_trace;	/* the contextSwitchTrace file */
};

struct ptd_lldb_trace {
	char *dir;		/* the bundle directory */
	char *origin;		/* DIR/trace.json, for messages */
	struct pt_cpu cpu;	/* vendor pcv_unknown unless "GenuineIntel" */
	struct ptd_lldb_process *procs;
	size_t nprocs;
	struct ptd_lldb_cpu *cpus;
	size_t ncpus;
	bool has_tsc_conv;	/* tscPerfZeroConversion */
	uint32_t time_mult;
	uint16_t time_shift;
	uint64_t time_zero;
	bool has_wallref;	/* ptdWallClock */
	struct ptd_perf_wallref wallref;
	bool has_kernel;
	char *kernel_file;	/* the kernel file */
	uint64_t kernel_load;	/* default 0xffffffff81000000 */
};

void ptd_lldb_trace_fini(struct ptd_lldb_trace *t);

/* Parse the trace description @text (@len bytes) of the bundle in @dir;
 * @origin names it in messages.  Returns 0, -PTD_EFORMAT (bad JSON, a
 * missing or bad field: the message names it), -PTD_ELIMIT (too many
 * processes/threads/modules/cpus, or @len over PTD_LLDB_MAX_DESC), -EINVAL
 * (NULL argument) or -ENOMEM.  Nothing is written to @ret on failure. */
int ptd_lldb_trace_parse(const char *text, size_t len, const char *dir,
			 const char *origin, struct ptd_lldb_trace *ret,
			 struct ptd_diag *diag);

/* Read @path: a bundle directory holding trace.json, or the description
 * file itself (its directory is the bundle's).  Returns what
 * ptd_lldb_trace_parse returns, or -errno / -PTD_ELIMIT reading the file,
 * with @diag naming it. */
int ptd_lldb_trace_load(const char *path, struct ptd_lldb_trace *ret,
			struct ptd_diag *diag);

/* The LLDB bundle reader (ptd_input_decode_fn, see input/input.h).  Besides
 * the interface's errors: -PTD_EUNSUPPORTED for a kernel bundle;
 * -ENOENT / -PTD_EFORMAT / -PTD_ENOIMAGE naming a module whose file is
 * missing or not a usable ELF (processes[i].modules[j]); per-CPU:
 * -ENOENT / -PTD_ELIMIT naming a CPU's file that cannot be read (the
 * CPUs' traces are read whole, at most PTD_LLDB_MAX_PT bytes in all),
 * -PTD_EFORMAT for a trace without TSC or a malformed context switch
 * trace (cpus[i].contextSwitchTrace: offset N: what).  Trace bytes that
 * fall in no thread's run are told through sink->notice. */
int ptd_lldb_decode(const char *path, const struct ptd_input_opts *o,
		    const struct ptd_input_sink *sink,
		    size_t *ret_thread_errors, struct ptd_diag *diag);

#endif
