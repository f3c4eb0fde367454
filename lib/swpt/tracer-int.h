/* SPDX-License-Identifier: MIT */
/*
 * The software PT source's insides, shared by its files (not an API):
 * tracer.c (the state, streams, ptd_swpt_run: spawn and capture),
 * tracer-code.c (decoded-instruction cache, timeline and maps, code
 * snapshots), tracer-stops.c (what each ptrace stop means, the trace
 * loop) and tracer-attach.c (ptd_swpt_attach: seize, hold, release).
 */
#ifndef PTD_SWPT_TRACER_INT_H
#define PTD_SWPT_TRACER_INT_H

#include "swpt/tracer.h"
#include "decode/insncache.h"


#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "aspace/maps.h"
#include "aspace/timeline.h"
#include "common/fileio.h"
#include "common/pidfd.h"
#include "common/strutil.h"
#include "swpt/capture.h"
#include "x86/insn.h"

#define USER_CS_64 0x33
#define SNAP_MAX (256ull << 20)	/* bytes of one non-file mapping */
#define FLUSH_NS 50000000ll	/* live output: flush streams this often */
#define FLUSH_CHECK 256u	/* ... checking the clock every so many stops */
#define WAIT_FLAGS (__WALL | __WNOTHREAD)

/* Kernel-internal restart codes a syscall may leave in rax when a signal
 * interrupted it (include/linux/errno.h). */
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516


/* ---- state ----------------------------------------------------------- */

struct tracer;
struct tr_block;	/* tracer-fast.c */

/* A breakpoint of branch mode (tracer-fast.c). */
struct tr_bp {
	uint64_t addr;		/* 0: a free slot */
	uint8_t orig;		/* the byte under the INT3 */
	bool gone;		/* removed, kept to recognise its trap */
};

/* The breakpoints in the process: written by the tracing thread (under
 * lock), read under lock by readers of the memory on other threads
 * (ptd_swpt_patches_read). */
struct ptd_swpt_patches {
	pthread_mutex_t lock;
	struct tr_bp *bps;	/* hash table, cap slots */
	size_t nbps, cap;
	/* kernel uprobes (ptd_swpt_patches_uprobe_add), under lock too */
	struct ptd_swpt_uprobe *ups;
	size_t nups;
};

enum {
	TR_PARK_STEP = 1,	/* single-step once no breakpoint is left */
	TR_PARK_DETACH,		/* detach once no breakpoint is left */
};

struct tthread {
	struct tracer *tr;
	pid_t tid;
	unsigned nth_of_tid;	/* 1: the first thread with this id; N: the
				 * Nth (the kernel reuses a freed id) */
	uint64_t first_seq;
	uint64_t end_seq;	/* timeline's next seq when its stream ended */
	struct ptd_ptgen *gen;	/* NULL once the stream is finished */
	FILE *pt;
	uint64_t pt_bytes;
	struct ptd_truth_writer truth;
	bool has_truth;		/* writing a capture */
	uint64_t insns;
	bool started;		/* had its first stop */
	int64_t stop_ns;	/* CLOCK_MONOTONIC when its last stop was
				 * taken (tr_on_wait) */
	int64_t branch_ns;	/* stop_ns of the last stop at which a
				 * branch was completed (tr_completed) */
	bool reaped;
	/* met at its first stop, before its creator's clone event (see
	 * on_clone_event) */
	bool unannounced;
	/* As of the thread's last stop: */
	uint64_t ip;		/* the instruction it executes next */
	struct ptd_x86_insn insn;	/* decoded at ip */
	uint64_t sysnr;		/* rax at ip, for a SYSCALL */
	bool entered;		/* kernel entry of the SYSCALL at ip already
				 * emitted (at an exec event) */
	bool rep_recorded;	/* REP at ip already in the truth */
	bool regs_unset;	/* a PTRACE_SETREGS found it killed: the
				 * branch recorded as ending at ip (an
				 * emulated one) never reached the thread */
	int inject;		/* signal injected by the last resume */
	bool restart;		/* last syscall returned -ERESTART* ... */
	uint64_t restart_ip;	/* ... from the SYSCALL here */
	bool stop_sent;		/* detaching: SIGSTOP sent, not yet seen */
	/* its stop taken last is a SIGTRAP that has not been handled as
	 * one of branch mode's breakpoints (the INT3 undone) yet: where the
	 * tracer fails there, release_all undoes it if it was one */
	bool trap_unrewound;
	uint32_t filter_seq;	/* the tracer's filter_seq its generator has */
	bool after_exec;	/* resumed from the first exec event: the
				 * syscall-exit stop at ip comes first */
	/* ptd_swpt_attach: its first stop, met while the attach waits for
	 * every thread to stop (hold_all), handled once tracing begins */
	bool held;
	int held_status;
	/* branch mode (tracer-fast.c) */
	struct tr_block *run;	/* running to the end of this block */
	struct tr_block *run_last;	/* the last run's block */
	bool hold;		/* no breakpoint may be set meanwhile */
	int park;		/* TR_PARK_*: stopped, waiting; 0: not */
	int park_sig;
};

/* A child process of the target (fork, vfork, clone without CLONE_THREAD):
 * seen announced by its parent's event and/or stopped; detached once
 * stopped, forgotten once both. */
struct forkrec {
	pid_t pid;
	bool announced;
	bool detached;
};

struct snap_range {
	uint64_t start, end;
};

struct tracer {
	const struct ptd_swpt_options *opt;
	struct ptd_diag *diag;
	pid_t pid;
	struct ptd_timeline tl;
	/* the threads in creation order: every one for a capture (it lists
	 * them all); a live trace forgets those that are over
	 * (tr_threads_sweep) */
	struct tthread **th;
	size_t nth;
	unsigned nbegun;	/* threads ever */
	size_t max_held;	/* the most in th at once */
	uint64_t swept_pt_bytes;	/* PT bytes of threads forgotten */
	size_t sweep_kept;	/* finished threads the last sweep kept */
	size_t live;		/* threads with an open stream */
	struct tthread *last;	/* lookup cache */
	struct ptd_maps maps;	/* as last read */
	struct snap_range *snaps;	/* non-file code already saved */
	size_t nsnaps;
	struct ptd_insncache *ic;	/* decoded instructions by ip */
	uint64_t insns, steps;
	unsigned forks_detached;
	struct forkrec *forks;
	size_t nforks;
	bool detaching;
	bool seized;		/* attached with PTRACE_SEIZE */
	unsigned flush_tick;
	int64_t flush_since;	/* a flush asked for since (0: none) */
	int64_t last_flush;	/* CLOCK_MONOTONIC ns */
	bool leader_gone;
	/* opt->filter resolved when tracing starts, again whenever the
	 * executable mappings change and after an exec (filter_update);
	 * each thread's generator takes it at its next instruction
	 * (record_if). */
	struct pt_conf_addr_filter fcfg;
	bool fcfg_set;
	unsigned fpending;	/* ranges whose file is not mapped (yet) */
	uint32_t filter_seq;	/* changes of fcfg */
	bool exited;
	int exit_code, exit_signal;
	/* branch mode (tracer-fast.c) */
	bool branch;		/* opt->step resolved */
	bool fast_dead;		/* off for good (memory shared with an
				 * untraced process) */
	bool vm_shared;		/* off until the next exec: the process
				 * shares its parent's memory (a vfork
				 * child), whose tracer owns it */
	/* the breakpoints: opt->patches, or own_patches */
	struct ptd_swpt_patches *pa;
	struct ptd_swpt_patches *own_patches;
	int memfd;		/* /proc/PID/mem, or -1 */
	bool memfd_failed;	/* not ours to open: ptrace peek/poke */
	pid_t mem_tid;		/* a stopped thread, for those */
	struct tr_block **blks;	/* hash table by start, blkcap slots */
	size_t nblks, blkcap;
	unsigned nrunners;	/* threads in a run */
	unsigned holds;		/* threads with hold set */
	unsigned nparked;
	uint64_t runs, emulated, bp_installs;
};

/* ---- shared between the files ------------------------------------- */

/* tracer.c */
int tr_failf(struct tracer *tr, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
struct tthread *tr_last_thread(struct tracer *tr, pid_t tid);
struct tthread *tr_find_thread(struct tracer *tr, pid_t tid);
int64_t tr_now_ns(void);	/* CLOCK_MONOTONIC */
int tr_flush_all(struct tracer *tr);
int tr_flush_due(struct tracer *tr);
/* The output asks for every byte now (a snapshot: ptd_swpt_out's
 * flush_wanted); flush_asked: do it, TNT bits included, and say so. */
bool tr_flush_wanted(const struct tracer *tr, pid_t *tid, int64_t *after_ns);
int tr_flush_asked(struct tracer *tr);
int tr_thread_new(struct tracer *tr, pid_t tid, struct tthread **ret);
void tr_threads_sweep(struct tracer *tr);
int tr_thread_finish(struct tracer *tr, struct tthread *t, uint64_t ip);
int tr_prepare_outdir(const char *dir, struct ptd_diag *diag);
int tr_save_capture(struct tracer *tr, char *const argv[]);
/* The parts ptd_swpt_run and ptd_swpt_attach set up alike (a failure:
 * tr_tracer_free what was made). */
int tr_tracer_init(struct tracer *tr, const struct ptd_swpt_options *opt,
		   struct ptd_diag *diag);
void tr_tracer_free(struct tracer *tr);
void tr_fill_result(const struct tracer *tr, struct ptd_swpt_result *ret);

/* tracer-code.c */
int tr_tl_add(struct tracer *tr, struct ptd_tl_event *ev);
int tr_maps_refresh(struct tracer *tr);
int tr_maps_load_all(struct tracer *tr);
int tr_filter_resolve(struct tracer *tr);
int tr_prepare(struct tracer *tr, struct tthread *t, uint64_t ip,
	       uint64_t rax);
/* Decode the instruction at @ip (cached) without moving @t there. */
int tr_decode_at(struct tracer *tr, struct tthread *t, uint64_t ip,
		 struct ptd_x86_insn *ret);
/* Read @tid's code at @addr as it is without our breakpoints: bytes read,
 * or -errno. */
ssize_t tr_read_code(struct tracer *tr, pid_t tid, uint64_t addr, void *buf,
		     size_t len);
/* Whether a kernel uprobe (swpt/tracer.h) is at @addr. */
bool tr_uprobe_at(struct tracer *tr, uint64_t addr);

/* tracer-stops.c */
int tr_record_if(struct tracer *tr, struct tthread *t, uint64_t ip,
		 bool truth);
int tr_get_regs(struct tracer *tr, pid_t tid,
		struct user_regs_struct *regs);
int tr_check_64bit(struct tracer *tr, const struct user_regs_struct *regs);
int tr_resume(struct tracer *tr, struct tthread *t, int sig);
int tr_status_u64(pid_t tid, const char *key, int base, uint64_t *ret);
bool tr_thread_exited(pid_t tid);
int tr_read_tgid(pid_t tid, pid_t *ret);
int tr_detach_child(struct tracer *tr, pid_t pid);
bool tr_stop_asked(const struct tracer *tr);
int tr_on_gone(struct tracer *tr, struct tthread *t, int status);
int tr_on_wait(struct tracer *tr, pid_t pid, int status);
int tr_trace_loop(struct tracer *tr);
/* @t executed @insn at @ip and stands at regs->rip: record it. */
int tr_completed(struct tracer *tr, struct tthread *t, uint64_t ip,
		 const struct ptd_x86_insn *insn, uint64_t sysnr,
		 const struct user_regs_struct *regs);
/* After a stop of @t was handled: detach, or go on (@regs: its registers,
 * @dirty: changed and not yet written back). */
int tr_step_on(struct tracer *tr, struct tthread *t,
	       struct user_regs_struct *regs, bool dirty);
int tr_detach_thread(struct tracer *tr, struct tthread *t);
bool tr_trap_pending(pid_t tid);

/* tracer-fast.c: branch mode */
bool tr_fast_enabled(const struct tracer *tr);
int tr_fast_go(struct tracer *tr, struct tthread *t,
	       struct user_regs_struct *regs, bool dirty);
int tr_fast_stopped(struct tracer *tr, struct tthread *t, int status,
		    struct user_regs_struct *regs, bool *handled);
int tr_fast_trap(struct tracer *tr, struct tthread *t,
		 struct user_regs_struct *regs, bool *handled);
int tr_fast_before_step(struct tracer *tr, struct tthread *t, int sig);
int tr_fast_detach(struct tracer *tr, struct tthread *t);
int tr_fast_settle(struct tracer *tr);
void tr_fast_release(struct tracer *tr, struct tthread *t);
void tr_fast_drop_run(struct tracer *tr, struct tthread *t);
void tr_fast_exec(struct tracer *tr, struct tthread *t);
void tr_fast_abandon(struct tracer *tr);
bool tr_fast_was_bp(const struct tracer *tr, uint64_t addr);
void tr_fast_unpatch(const struct tracer *tr, uint64_t addr, uint8_t *buf,
		     size_t len);
int tr_fast_maps_changed(struct tracer *tr, const struct ptd_maps *old,
			 const struct ptd_maps *now);
void tr_fast_blocks_clear(struct tracer *tr);
int tr_fast_init(struct tracer *tr);
void tr_fast_free(struct tracer *tr);

#endif
