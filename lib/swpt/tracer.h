/* SPDX-License-Identifier: MIT */
/*
 * The software PT source: run a program under ptrace, single-step every
 * user-space instruction of every thread, and write what Intel PT would
 * have recorded into a capture directory (swpt/capture.h), with the ground
 * truth beside it.
 *
 *  - Threads: PTRACE_O_TRACECLONE; every thread, including ones created
 *    later, is stepped and has its own PT stream and truth file.
 *  - fork/vfork children (clone without CLONE_THREAD): caught with
 *    PTRACE_O_TRACEFORK/VFORK and detached at once, so they run untraced
 *    and unharmed (no stray trap flag).
 *  - Instructions are decoded with x86/insn.h (cached per address, dropped
 *    when the map changes); the packets come from swpt/ptgen.h.
 *  - A REP-prefixed string instruction is one instruction however many
 *    steps it takes.
 *  - Syscalls: TIP.PGD at the SYSCALL, TIP.PGE where user space resumes.
 *    After a syscall that can change mappings (mmap, munmap, mprotect,
 *    mremap, brk, shmat/shmdt, execve) /proc/PID/maps is re-read and the
 *    difference in executable mappings goes into the timeline at the
 *    thread's position between PGD and PGE.
 *  - Signals: a signal delivered to a handler is FUP + TIP.PGD at the
 *    interrupted instruction and TIP.PGE at the handler.
 *  - Non-file executable memory ([vdso], anonymous, deleted files) is
 *    snapshotted the first time an instruction in it executes (and again
 *    after its mapping changes).
 */
#ifndef PTD_SWPT_TRACER_H
#define PTD_SWPT_TRACER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/diag.h"
#include "swpt/ptgen.h"

struct ptd_swpt_options {
	/* packet generation (sink and sink_ctx are set by the tracer) */
	struct ptd_ptgen_config gen;
	/* Capture directory: created if missing, must be empty otherwise. */
	const char *outdir;
	/* Stop tracing (detach, target keeps running) after this many
	 * instructions in all threads; 0: no limit. */
	uint64_t max_insns;
	/* Redirect the target's stdout/stderr to /dev/null. */
	bool quiet_target;
};

struct ptd_swpt_result {
	pid_t pid;
	uint64_t insns;		/* all threads */
	uint64_t steps;		/* ptrace stops (REP iterations count) */
	uint64_t pt_bytes;
	unsigned threads;
	unsigned forks_detached;
	bool exited;
	int exit_code;
	int exit_signal;
	bool detached;		/* max_insns reached */
};

/* Run @argv (argv[0] is looked up in PATH) under the software source until
 * it exits (or max_insns), writing the capture to opt->outdir.
 * Returns 0 and fills *ret (may be NULL), or a negative error with a message
 * in @diag: -ENOENT (program not found), -EPERM (ptrace refused, e.g. Yama
 * or seccomp), -EEXIST (outdir not empty), -PTD_EUNSUPPORTED (a 32-bit
 * program), -errno. */
int ptd_swpt_run(char *const argv[], const struct ptd_swpt_options *opt,
		 struct ptd_swpt_result *ret, struct ptd_diag *diag);

#endif
