/* SPDX-License-Identifier: MIT */
/*
 * The software PT source: run a program under ptrace, follow every
 * user-space instruction of every thread, and write what Intel PT would
 * have recorded into a capture directory (swpt/capture.h), with the ground
 * truth beside it.  Threads either run from branch to branch (branch mode,
 * the default: tracer-fast.c says how and where it falls back to single
 * steps) or are single-stepped (the reference); both give the same packets
 * and truth.
 *
 *  - Threads: PTRACE_O_TRACECLONE; every thread, including ones created
 *    later, is stepped and has its own PT stream and truth file.
 *  - fork/vfork children (clone without CLONE_THREAD): caught with
 *    PTRACE_O_TRACEFORK/VFORK and detached at once, so they run untraced
 *    and unharmed (no stray trap flag); with opt->child, detached stopped
 *    (a SIGSTOP) and handed to the caller, who traces them or continues
 *    them.
 *  - A process that shares its memory with its parent (a vfork child, a
 *    clone with CLONE_VM: kcmp says so when attaching, or without kcmp a
 *    parent in an uninterruptible wait, as a vfork parent waits) is
 *    single-stepped until it execs: its parent's tracer must find no
 *    breakpoint of ours in that memory.
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
 *  - Address filters (opt->filter): the generator traces only inside the
 *    ranges (swpt/ptgen.h); the truth holds only the traced instructions,
 *    and the capture records the ranges.  File ranges are resolved to
 *    addresses once, with the target's /proc/PID/maps when tracing starts
 *    (ptd_swpt_run: when the program is exec'd, its dynamic libraries are
 *    not mapped yet, so only the executable itself can be named there;
 *    ptd_swpt_attach: at the attach); code mapped later (dlopen) or a
 *    later exec is not re-resolved: the ranges stay where they were.
 *  - Non-file executable memory ([vdso], anonymous, deleted files) is
 *    snapshotted the first time an instruction in it executes (and again
 *    after its mapping changes).
 */
#ifndef PTD_SWPT_TRACER_H
#define PTD_SWPT_TRACER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "aspace/timeline.h"
#include "common/diag.h"
#include "perf/addrfilter.h"
#include "perf/time.h"
#include "swpt/ptgen.h"

/* Where a live trace goes, as it is made (swpt/livesink.h writes it into
 * perf buffers).  Every call comes from the tracing thread; a negative
 * return ends tracing with that error. */
struct ptd_swpt_out {
	/* A thread's stream begins; image events before this call are not
	 * in it (a new thread starts with the image as it is). */
	int (*thread_begin)(void *ctx, pid_t tid);
	/* The next bytes of @tid's PT stream.  Bytes come in batches (at
	 * least at every syscall, and every ~50 ms while a thread runs). */
	int (*pt)(void *ctx, pid_t tid, const uint8_t *data, size_t len);
	/* An image change, after every live thread's stream was given all
	 * its bytes up to its position in @ev->pos.  For a SNAPSHOT, @code
	 * holds the @ncode bytes (@ev->file is where a capture keeps them). */
	int (*image)(void *ctx, const struct ptd_tl_event *ev,
		     const uint8_t *code, size_t ncode);
	/* @tid's stream is complete (the thread exited or was detached). */
	int (*thread_end)(void *ctx, pid_t tid);
	/* Optional: asked before each wait for a stop; true: hand every
	 * stream's bytes over, the TNT bits being collected too (a
	 * snapshot is about to be taken), then call flushed -- once thread
	 * *@tid (0: none) has completed a branch at a stop taken at or
	 * after CLOCK_MONOTONIC *@after_ns (the run that brought it past an
	 * instruction it ran then is recorded only at a stop, and a decoder
	 * delivers it only with a packet after it), or, for none, once the
	 * stops already waiting are taken; at most ~100 ms later. */
	bool (*flush_wanted)(void *ctx, pid_t *tid, int64_t *after_ns);
	void (*flushed)(void *ctx);
	void *ctx;
};

/* How threads are stepped (see tracer-fast.c). */
enum ptd_swpt_step {
	PTD_SWPT_STEP_DEFAULT,	/* branch */
	PTD_SWPT_STEP_BRANCH,	/* run to the next branch the trace observes
				 * (breakpoints, PTRACE_SYSCALL); the
				 * instructions between are implied */
	PTD_SWPT_STEP_SINGLE,	/* single-step every instruction (the
				 * reference) */
};

/* Where ptd_swpt_run begins tracing the program it runs. */
enum ptd_swpt_start {
	PTD_SWPT_START_EXEC,	/* its first instruction after the exec
				 * (the dynamic loader's, for a dynamically
				 * linked program) */
	PTD_SWPT_START_ENTRY,	/* its entry point (AT_ENTRY): the dynamic
				 * loader and the libraries' constructors
				 * run untraced, at full speed, before it;
				 * the trace begins with the libraries
				 * already mapped */
};

/* "exec" or "entry" into *@ret; -EINVAL otherwise. */
int ptd_swpt_start_parse(const char *s, enum ptd_swpt_start *ret);

/* "branch" or "single" into *@ret; -EINVAL otherwise. */
int ptd_swpt_step_parse(const char *s, enum ptd_swpt_step *ret);

/* The breakpoints branch mode keeps in the traced process, for whoever
 * reads its memory on another thread while it is traced (a decoder that
 * reads code from the process): ptd_swpt_patches_read reads it as it is
 * without them.  Made by the caller, handed to the tracer in
 * opt->patches, freed after the tracer returned. */
struct ptd_swpt_patches;
int ptd_swpt_patches_new(struct ptd_swpt_patches **ret);
void ptd_swpt_patches_free(struct ptd_swpt_patches *p);
/* Read @len bytes at @addr of process @pid (@ctx: the patches) as they
 * are without the breakpoints: bytes read (short at an unmapped page), or
 * -errno. */
ssize_t ptd_swpt_patches_read(void *ctx, pid_t pid, uint64_t addr, void *buf,
			      size_t len);

/* Kernel uprobes in the traced process (ptd's triggers): the kernel writes
 * an INT3 over the first byte of the probed instruction in every mapping
 * of the file, handles the trap itself (the instruction is run out of
 * line or emulated) and, if the thread was being single-stepped, ends the
 * step with a SIGTRAP of its own (si_code TRAP_BRKPT, or SI_USER after an
 * emulated instruction) -- which the tracer would otherwise take for a
 * signal to deliver, killing the process.  With a uprobe known here the
 * tracer reads the code there as the file has it (@insn), and takes that
 * SIGTRAP as the end of the step.  Add one before the uprobe is
 * registered, remove it once unregistered; any thread.
 * Branch mode must not be asked to stop at such an instruction (its
 * INT3 would be the kernel's): callers refuse uprobes on the instructions
 * it stops at (conditional branches, returns, indirect jumps and calls,
 * syscalls). */
struct ptd_swpt_uprobe {
	uint32_t dev_major, dev_minor;	/* the file, as /proc/PID/maps */
	uint64_t inode;
	uint64_t offset;		/* file offset of the instruction */
	uint8_t insn[16];		/* its bytes, from the file */
	uint8_t len;			/* 1..15 */
};
int ptd_swpt_patches_uprobe_add(struct ptd_swpt_patches *p,
				const struct ptd_swpt_uprobe *u);
void ptd_swpt_patches_uprobe_remove(struct ptd_swpt_patches *p,
				    const struct ptd_swpt_uprobe *u);

struct ptd_swpt_options {
	/* packet generation (sink and sink_ctx are set by the tracer) */
	struct ptd_ptgen_config gen;
	/* Capture directory: created if missing, must be empty otherwise.
	 * May be NULL when @out is set. */
	const char *outdir;
	/* Live output (may be NULL; at least one of outdir and out). */
	const struct ptd_swpt_out *out;
	/* ptd_swpt_attach: set (to non-zero) from another thread to detach;
	 * the tracing thread notices at its next ptrace stop, so also
	 * interrupt its waitpid (pthread_kill with a signal whose handler
	 * has no SA_RESTART) when every thread may be blocked.  Set while
	 * the attach waits for the threads to stop, it cancels the attach
	 * (-ECANCELED).  NULL: none. */
	atomic_int *stop;
	/* ptd_swpt_attach: a pidfd of the process (common/pidfd.h), taken
	 * when the caller decided the process may be traced; 0 or -1: none.
	 * Once every thread is seized and stopped, the pidfd's process must
	 * still hold its pid, or the attach is undone and refused (-ESRCH):
	 * the pid was reused, the threads seized are another process's. */
	int pidfd;
	/* ptd_swpt_attach, may be NULL: called once, on the tracing thread,
	 * when every thread is seized and stopped (the pidfd checked) and
	 * before anything else is read from the process, to check again
	 * that it may be traced (its owner may have changed since the
	 * caller's check, by an exec of a set-user-ID program).  A negative
	 * return undoes the attach (every thread let go as it was) and is
	 * ptd_swpt_attach's, with the message the call put in @diag. */
	int (*seized)(void *ctx, struct ptd_diag *diag);
	void *seized_ctx;
	/* Called once, on the tracing thread, when every thread is attached
	 * and tracing begins (NULL: not called). */
	void (*started)(void *ctx);
	void *started_ctx;
	/* Stepping mode; both give the same trace and truth. */
	enum ptd_swpt_step step;
	/* ptd_swpt_run: where tracing begins (ptd_swpt_attach ignores it). */
	enum ptd_swpt_start start;
	/* Branch mode's breakpoints, shown to readers on other threads
	 * (NULL: kept to the tracer). */
	struct ptd_swpt_patches *patches;
	/* Stop tracing (detach, target keeps running) after this many
	 * instructions in all threads; 0: no limit. */
	uint64_t max_insns;
	/* Redirect the target's stdout/stderr to /dev/null. */
	bool quiet_target;
	/* Address filter (perf/addrfilter.h; NULL: trace everything) and
	 * its text for the capture (may be NULL).  Kernel-address ranges
	 * never match: the software source traces user space only.  If a
	 * range's file is not mapped yet, the range is pending until the
	 * process maps the file's code (a dlopen) and holds tracing off
	 * meanwhile, as the kernel's filters do; the file must exist, else
	 * tracing fails with -PTD_ENOIMAGE, as it does with -PTD_ENOIMAGE
	 * or -PTD_EFORMAT for a mapped file's range that no mapping holds
	 * (see ptd_addrfilter_resolve).  Resolved again after an exec.
	 * With a filter, insns and max_insns count traced instructions
	 * only. */
	const struct ptd_addrfilter *filter;
	const char *filter_text;
	/* For the capture: the clock (TSC -> CLOCK_MONOTONIC ns) the live
	 * output published to its readers, and the wall-clock reference
	 * paired with it, so that a decode of the capture times records as
	 * the live stream did.  NULL: with TSC packets (gen.tsc), the
	 * tracer calibrates one when it saves the capture and samples the
	 * reference then. */
	const struct ptd_perf_clock *clock;
	const struct ptd_perf_wallref *wallref;
	/* ptd_swpt_attach, may be NULL: a child process of the target
	 * (fork, vfork, clone without CLONE_THREAD), at its first stop,
	 * before it ran an instruction.  It is sent a SIGSTOP and detached,
	 * so it stays stopped (its parent may see the stop with
	 * waitpid(WUNTRACED)) until whoever is told sends it a SIGCONT --
	 * after seizing it, to trace it from its first instruction, or
	 * without, to let it run untraced.  Called on the tracing thread,
	 * after the detach.  NULL: children are let go at once, untraced. */
	void (*child)(void *ctx, pid_t pid);
	void *child_ctx;
};

struct ptd_swpt_result {
	pid_t pid;
	uint64_t insns;		/* all threads */
	uint64_t steps;		/* ptrace stops (REP iterations count) */
	bool branch;		/* traced in branch mode */
	uint64_t runs;		/* branch mode: runs to a branch */
	uint64_t emulated;	/* branch mode: branches computed, not
				 * stepped */
	uint64_t pt_bytes;
	unsigned threads;	/* traced, in all */
	/* the most the tracer held at once: a live trace (no outdir)
	 * forgets threads that ended, a capture keeps every one; either way
	 * at most PTD_CAPTURE_MAX_THREADS */
	unsigned max_threads_held;
	unsigned forks_detached;
	bool exited;
	int exit_code;
	int exit_signal;
	bool detached;		/* max_insns reached */
	/* The filter as last resolved (all zero: none), and the ranges
	 * (bit i: range i) still pending at the end: their files were never
	 * mapped, nothing was traced for them. */
	struct pt_conf_addr_filter addr_filter;
	unsigned filter_pending;
};

/* Run @argv (argv[0] is looked up in PATH) under the software source until
 * it exits (or max_insns), writing the capture to opt->outdir.
 * Returns 0 and fills *ret (may be NULL), or a negative error with a message
 * in @diag: -ENOENT (program not found), -EPERM (ptrace refused, e.g. Yama
 * or seccomp), -EEXIST (outdir not empty), -PTD_EUNSUPPORTED (a 32-bit
 * program), -errno. */
int ptd_swpt_run(char *const argv[], const struct ptd_swpt_options *opt,
		 struct ptd_swpt_result *ret, struct ptd_diag *diag);

/* Trace the running process @pid (every thread, and threads it creates)
 * until it exits, *opt->stop is set, or max_insns; then detach: the
 * process runs on exactly as before (a blocked syscall is restarted).
 * The threads are seized (PTRACE_SEIZE) and interrupted where they are;
 * tracing begins once every one of them has stopped (a thread in vfork()
 * stops only when its child has exec'd or exited: the attach waits for
 * that, or for *opt->stop), so the image read then is the one every
 * thread starts with.  A thread inside a syscall starts its stream when
 * it returns to user space.
 * Returns 0 and fills *ret, or a negative error with a message in @diag:
 * -ESRCH (no such process, it exited during the attach, or opt->pidfd's
 * process no longer holds @pid), -EPERM (ptrace refused: Yama, another
 * tracer, not dumpable), -ECANCELED (*opt->stop set before tracing
 * began), -PTD_EUNSUPPORTED (32-bit), opt->seized's error, -errno.  On an
 * error after the attach, the target is detached, never killed. */
int ptd_swpt_attach(pid_t pid, const struct ptd_swpt_options *opt,
		    struct ptd_swpt_result *ret, struct ptd_diag *diag);

/* Once the thread that called ptd_swpt_attach has exited (pthread_join
 * returned), wait until the kernel has let go of every thread of @pid it
 * traced.  After an error, a thread that was seized but had not stopped
 * yet (one in vfork() waiting for its child) cannot be detached; the
 * kernel detaches it as the tracing thread @tracer (its tid) exits -- at
 * the very end of that exit, after pthread_join has returned (the kernel
 * wakes joiners as the thread lets go of its memory, earlier).  Returns 0
 * (at once if nothing is left), -EINVAL, or -errno if /proc/@pid/task
 * cannot be read. */
int ptd_swpt_wait_released(pid_t pid, pid_t tracer);

#endif
