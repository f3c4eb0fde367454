/* SPDX-License-Identifier: MIT */
/*
 * The software PT source (swpt/tracer.h): what each ptrace stop means --
 * a step, a syscall, a signal, a clone, fork or exec, an exit -- turned
 * into trace packets and truth, and the loop that waits for them.  How
 * Linux reports a single step is described in tracer.c.
 */
#include "swpt/tracer-int.h"

/* ---- recording ------------------------------------------------------- */

/* The instruction at @ip executes: enable tracing first if it is off (the
 * thread just started, or came back from the kernel), then the truth
 * (unless @truth is false). */
int tr_record_if(struct tracer *tr, struct tthread *t, uint64_t ip,
		 bool truth)
{
	int r;

	/* A new filter reaches a thread that is tracing as the kernel's
	 * reaches a running event (perf_event_stop with restart: an IPI):
	 * tracing stops before this instruction and starts again with the
	 * new ranges. */
	if (t->filter_seq != tr->filter_seq && ptd_ptgen_enabled(t->gen) &&
	    (r = ptd_ptgen_interrupt(t->gen, ip)) < 0)
		return r;
	if (!ptd_ptgen_enabled(t->gen)) {
		if (t->filter_seq != tr->filter_seq) {
			r = ptd_ptgen_set_filter(t->gen, &tr->fcfg);
			if (r < 0)
				return tr_failf(tr, r, "thread %d: cannot set "
						"the filter: %s", (int)t->tid,
						ptd_strerror(r));
			t->filter_seq = tr->filter_seq;
		}
		if (tr->opt->gen.tsc)
			ptd_ptgen_set_tsc(t->gen, __builtin_ia32_rdtsc());
		r = ptd_ptgen_enable(t->gen, ip);
		if (r < 0)
			return r;
	}
	/* Outside the filter ranges: not in the trace, nor the truth. */
	if (!truth || !ptd_ptgen_traces(t->gen, ip))
		return 0;
	if (t->has_truth && (r = ptd_truth_writer_add(&t->truth, ip)) < 0)
		return r;
	t->insns++;
	tr->insns++;
	return 0;
}

static int record(struct tracer *tr, struct tthread *t, uint64_t ip)
{
	return tr_record_if(tr, t, ip, true);
}

static bool maps_syscall(uint64_t nr)
{
	switch (nr) {
	case SYS_mmap:
	case SYS_mprotect:
	case SYS_munmap:
	case SYS_brk:
	case SYS_mremap:
	case SYS_shmat:
	case SYS_shmdt:
	case SYS_remap_file_pages:
	case SYS_pkey_mprotect:
		return true;
	default:
		return false;
	}
}

static bool restart_code(uint64_t rax)
{
	int64_t v = (int64_t)rax;

	return v == -ERESTARTSYS || v == -ERESTARTNOINTR ||
	       v == -ERESTARTNOHAND || v == -ERESTART_RESTARTBLOCK;
}

/* The SYSCALL/INT at @ip entered the kernel (once per execution).  An INT
 * is not in the truth: its packets are FUP(its own ip) + TIP.PGD, an
 * asynchronous exit before it as a decoder sees it, so no decoder reports
 * it. */
static int kernel_entry(struct tracer *tr, struct tthread *t, uint64_t ip,
			const struct ptd_x86_insn *insn)
{
	int r;

	if (t->entered)
		return 0;
	r = tr_record_if(tr, t, ip, insn->kind != PTD_X86_INT);
	if (r < 0)
		return r;
	t->entered = true;
	r = ptd_ptgen_kernel_entry(t->gen, ip, insn);
	/* live: the thread may block in there; what it did goes out now */
	if (r == 0 && tr->opt->out)
		r = ptd_ptgen_flush(t->gen);
	return r;
}

/* @t executed the instruction at @ip (@insn) and is now at @next, stopped
 * with registers @regs.  Records it and prepares the next one. */
int tr_completed(struct tracer *tr, struct tthread *t, uint64_t ip,
		 const struct ptd_x86_insn *insn, uint64_t sysnr,
		 const struct user_regs_struct *regs)
{
	uint64_t next = regs->rip;
	struct ptd_x86_insn cur = *insn;
	int r;

	/* a packet follows (TNT, TIP, the kernel's entry): a snapshot
	 * decodes this thread's trace up to here (flush_reached) */
	if (insn->kind != PTD_X86_OTHER && insn->kind != PTD_X86_JMP_DIRECT &&
	    insn->kind != PTD_X86_CALL_DIRECT && insn->kind != PTD_X86_PTWRITE)
		t->branch_ns = t->stop_ns;

	if (insn->kind == PTD_X86_SYSCALL || insn->kind == PTD_X86_INT) {
		r = kernel_entry(tr, t, ip, &cur);
		t->entered = false;
		t->rep_recorded = false;
		if (r < 0)
			return r;
		t->restart = insn->kind == PTD_X86_SYSCALL &&
			     restart_code(regs->rax);
		t->restart_ip = ip;
		/* a fork that will run again keeps every breakpoint away */
		if (!t->restart)
			tr_fast_release(tr, t);
		if (insn->kind == PTD_X86_SYSCALL && maps_syscall(sysnr) &&
		    (r = tr_maps_refresh(tr)) < 0)
			return r;
		return tr_prepare(tr, t, next, regs->rax);
	}
	t->restart = false;
	tr_fast_release(tr, t);
	/* A REP string instruction is one instruction however many steps. */
	if (insn->rep && next == ip) {
		if (!t->rep_recorded) {
			r = record(tr, t, ip);
			if (r < 0)
				return r;
			t->rep_recorded = true;
		}
		return 0;
	}
	if (!t->rep_recorded) {
		r = record(tr, t, ip);
		if (r < 0)
			return r;
	}
	t->rep_recorded = false;
	/* A single step over CPUID that stopped past the instruction after
	 * it: the hypervisor ran the CPUID for the guest and lost the trap,
	 * and the next instruction ran too (a PVM guest, kernel 6.18: ld.so's
	 * CPUID, then the step stopped 8 bytes on, past a 6-byte mov).  Both
	 * ran: the CPUID falls through, and the instruction after it is
	 * completed at the stop, and checked there, as if stepped alone (the
	 * CPUID's own step makes no packet: nothing to prepare at @next for
	 * it). */
	if (cur.cpuid && next != ip + cur.size && !tr->branch) {
		r = ptd_ptgen_step(t->gen, ip, &cur, ip + cur.size);
		if (r == 0)
			r = tr_prepare(tr, t, ip + cur.size, regs->rax);
		if (r < 0)
			return r;
		cur = t->insn;
		return tr_completed(tr, t, t->ip, &cur, t->sysnr, regs);
	}
	/* Next first: code reached through this transfer is saved before
	 * the packet that leads there. */
	r = tr_prepare(tr, t, next, regs->rax);
	if (r < 0)
		return r;
	r = ptd_ptgen_step(t->gen, ip, &cur, next);
	if (r == -EINVAL)	/* the step is no way that instruction goes */
		return tr_failf(tr, r, "thread %d: the instruction at %#" PRIx64
				" (%u bytes) went on at %#" PRIx64 ", where it "
				"cannot lead", (int)t->tid, ip,
				(unsigned)cur.size, next);
	return r;
}

/* A step stop: the pending instruction ran (or, for TRAP_BRKPT after a
 * restarted syscall, the SYSCALL before it ran again). */
static int on_step(struct tracer *tr, struct tthread *t, int si_code,
		   const struct user_regs_struct *regs)
{
	struct ptd_x86_insn sys;
	int r;

	if (t->after_exec) {
		t->after_exec = false;
		/* the execve returning into the new program: nothing ran */
		if (si_code == TRAP_BRKPT && regs->rip == t->ip)
			return 0;
	}
	if (si_code == TRAP_BRKPT && t->insn.kind != PTD_X86_SYSCALL &&
	    t->insn.kind != PTD_X86_INT) {
		if (!t->restart)
			return tr_failf(tr, -EPROTO, "thread %d: syscall stop at "
					"%#llx, but %#" PRIx64 " is no syscall",
					(int)t->tid, regs->rip, t->ip);
		/* The kernel rewound onto the SYSCALL and ran it again. */
		r = tr_prepare(tr, t, t->restart_ip, regs->orig_rax);
		if (r < 0)
			return r;
		sys = t->insn;
		return tr_completed(tr, t, t->restart_ip, &sys, regs->orig_rax,
				 regs);
	}
	sys = t->insn;
	return tr_completed(tr, t, t->ip, &sys, t->sysnr, regs);
}

/* ---- stops ----------------------------------------------------------- */

int tr_get_regs(struct tracer *tr, pid_t tid,
		struct user_regs_struct *regs)
{
	if (ptrace(PTRACE_GETREGS, tid, NULL, regs) < 0)
		return tr_failf(tr, -errno, "thread %d: PTRACE_GETREGS: %s",
				(int)tid, strerror(errno));
	return 0;
}

int tr_check_64bit(struct tracer *tr, const struct user_regs_struct *regs)
{
	if (regs->cs != USER_CS_64)
		return tr_failf(tr, -PTD_EUNSUPPORTED, "process %d runs 32-bit "
				"code (cs %#llx): only 64-bit programs are "
				"supported", (int)tr->pid, regs->cs);
	return 0;
}

/* Resume @t for one more instruction.  A thread that vanished meanwhile
 * reports its exit later. */
int tr_resume(struct tracer *tr, struct tthread *t, int sig)
{
	int r = tr_fast_before_step(tr, t, sig);

	if (r != 0)
		return r < 0 ? r : 0;	/* parked until no breakpoint is left */
	t->inject = sig;
	if (ptrace(PTRACE_SINGLESTEP, t->tid, NULL, (void *)(long)sig) < 0 &&
	    errno != ESRCH)
		return tr_failf(tr, -errno, "thread %d: PTRACE_SINGLESTEP: %s",
				(int)t->tid, strerror(errno));
	return 0;
}

/* The value after "@key" (e.g. "Tgid:") in /proc/TID/status, up to the end
 * of its line, into @buf.  Returns 0, -errno (no such thread), or
 * -PTD_EFORMAT (no such key, or a value longer than @cap). */
static int status_field(pid_t tid, const char *key, char *buf, size_t cap)
{
	_cleanup_free_ char *text = NULL;
	char path[64], k[32];
	const char *p;
	size_t len;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	r = ptd_file_read_all(path, 1u << 16, &text, &len);
	if (r < 0)
		return r;
	snprintf(k, sizeof(k), "\n%s", key);
	p = strstr(text, k);
	if (!p)
		return -PTD_EFORMAT;
	p += strlen(k);
	p += strspn(p, " \t");
	len = strcspn(p, "\n");
	if (len >= cap)
		return -PTD_EFORMAT;
	memcpy(buf, p, len);
	buf[len] = 0;
	return 0;
}

/* The number after "@key" in /proc/TID/status, in @base.  Returns 0,
 * -errno (no such thread), or -PTD_EFORMAT. */
int tr_status_u64(pid_t tid, const char *key, int base, uint64_t *ret)
{
	char v[32];
	int r = status_field(tid, key, v, sizeof(v));

	if (r < 0)
		return r;
	return ptd_parse_u64n(v, strlen(v), base, ret) < 0 ? -PTD_EFORMAT : 0;
}

/* Whether @tid has exited or is exiting: gone from /proc, or a zombie or
 * dead task -- which PTRACE_SEIZE refuses with EPERM, not ESRCH. */
bool tr_thread_exited(pid_t tid)
{
	char st[64];
	int r = status_field(tid, "State:", st, sizeof(st));

	if (r == -ENOENT || r == -ESRCH)
		return true;
	return r == 0 && (st[0] == 'Z' || st[0] == 'X');
}

int tr_read_tgid(pid_t tid, pid_t *ret)
{
	uint64_t v;
	int r = tr_status_u64(tid, "Tgid:", 10, &v);

	if (r < 0)
		return r;
	if (v > INT_MAX)
		return -PTD_EFORMAT;
	*ret = (pid_t)v;
	return 0;
}

static struct forkrec *fork_find(struct tracer *tr, pid_t pid, bool add)
{
	struct forkrec *v;

	for (size_t i = 0; i < tr->nforks; i++)
		if (tr->forks[i].pid == pid)
			return &tr->forks[i];
	if (!add)
		return NULL;
	v = realloc(tr->forks, (tr->nforks + 1) * sizeof(*v));
	if (!v)
		return NULL;
	tr->forks = v;
	v[tr->nforks] = (struct forkrec){ pid, false, false };
	return &v[tr->nforks++];
}

/* Forget a child process once it is both announced and detached. */
static void fork_settle(struct tracer *tr, struct forkrec *f)
{
	if (f->announced && f->detached)
		*f = tr->forks[--tr->nforks];
}

static bool forks_pending(const struct tracer *tr)
{
	for (size_t i = 0; i < tr->nforks; i++)
		if (!tr->forks[i].detached)
			return true;
	return false;
}

/* A stopped child process of the target: let it run untraced.  Detaching
 * clears the trap flag the kernel set for stepping.  With opt->child it
 * is handed over stopped: a SIGSTOP queued while it is in its ptrace stop
 * (PTRACE_DETACH's own signal is ignored in an event stop, a seized
 * child's first) is taken as it leaves the kernel, before its first
 * instruction, and holds it in a group stop until a SIGCONT. */
int tr_detach_child(struct tracer *tr, pid_t pid)
{
	struct forkrec *f = fork_find(tr, pid, true);
	bool handed = false;

	if (!f)
		return -ENOMEM;
	if (tr->opt->child)
		handed = syscall(SYS_tgkill, pid, pid, SIGSTOP) == 0;
	if (ptrace(PTRACE_DETACH, pid, NULL, NULL) < 0 && errno != ESRCH)
		return tr_failf(tr, -errno, "cannot detach child process %d: %s",
				(int)pid, strerror(errno));
	f->detached = true;
	tr->forks_detached++;
	fork_settle(tr, f);
	if (handed)
		tr->opt->child(tr->opt->child_ctx, pid);
	return 0;
}

/* max_insns: finish @t's stream and let it run on untraced.  In branch
 * mode, not before every breakpoint is gone: @t waits (parked) while other
 * threads still run towards theirs. */
int tr_detach_thread(struct tracer *tr, struct tthread *t)
{
	int r = tr_fast_detach(tr, t);

	if (r != 0)
		return r < 0 ? r : 0;
	tr_fast_drop_run(tr, t);
	r = tr_thread_finish(tr, t, t->ip);

	if (ptrace(PTRACE_DETACH, t->tid, NULL, NULL) < 0 && errno != ESRCH &&
	    r == 0)
		r = tr_failf(tr, -errno, "cannot detach thread %d: %s",
			     (int)t->tid, strerror(errno));
	t->reaped = true;	/* no longer ours to wait for */
	return r;
}

/* The instruction limit is reached at @t's stop, or a stop was asked for
 * (@t NULL): detach @t now, and every other thread at its next stop.
 * Seized threads are stopped with PTRACE_INTERRUPT.  Others are made to
 * stop with a SIGSTOP of their own, which is swallowed when it arrives (a
 * thread may not be detached while that signal is still pending: it would
 * stop the whole process once untraced). */
static int start_detach(struct tracer *tr, struct tthread *t)
{
	tr->detaching = true;
	for (size_t i = 0; i < tr->nth; i++) {
		struct tthread *u = tr->th[i];

		if (u == t || u->reaped || !u->gen || !u->started)
			continue;
		if (tr->seized) {
			if (ptrace(PTRACE_INTERRUPT, u->tid, NULL, NULL) == 0)
				u->stop_sent = true;
		} else if (syscall(SYS_tgkill, tr->pid, u->tid, SIGSTOP) == 0) {
			u->stop_sent = true;
		}
	}
	return t ? tr_detach_thread(tr, t) : 0;
}

bool tr_stop_asked(const struct tracer *tr)
{
	return tr->opt->stop && atomic_load(tr->opt->stop) != 0;
}

/* After a stop was handled: detach at the limit or when asked, else step
 * on (branch mode: run to the next branch).  A seized thread can go at any
 * stop of its own; one sent a SIGSTOP waits for it. */
int tr_step_on(struct tracer *tr, struct tthread *t,
	       struct user_regs_struct *regs, bool dirty)
{
	if (tr->detaching && tr->seized)
		return tr_detach_thread(tr, t);
	if (!tr->detaching && ((tr->opt->max_insns &&
				tr->insns >= tr->opt->max_insns) ||
			       tr_stop_asked(tr)))
		return start_detach(tr, t);
	return tr_fast_go(tr, t, regs, dirty);
}

static int on_first_stop(struct tracer *tr, struct tthread *t, int sig,
			 const struct user_regs_struct *regs)
{
	int r;

	t->started = true;
	r = tr_check_64bit(tr, regs);
	if (r < 0)
		return r;
	r = tr_prepare(tr, t, regs->rip, regs->rax);
	if (r < 0)
		return r;
	if (tr->detaching)
		return tr_detach_thread(tr, t);
	/* Seized inside a syscall that will be restarted: the kernel rewinds
	 * onto the SYSCALL as it resumes, and the first step stop is that
	 * SYSCALL's (on_step's restart case). */
	if (tr->seized && (int64_t)regs->orig_rax >= 0 &&
	    restart_code(regs->rax)) {
		t->restart = true;
		t->restart_ip = regs->rip - 2;
	}
	/* a new thread starts with a SIGSTOP of the kernel's (or, seized, an
	 * event stop): swallow it */
	return tr_resume(tr, t, sig == SIGSTOP || sig == SIGTRAP ? 0 : sig);
}

static int add_exec_event(struct tracer *tr);

/* A seized thread's first stop is an event inside a syscall (it was
 * seized as it made it): the syscall completes with a step stop at the
 * same ip when resumed, where nothing ran.  After an exec the image is new
 * (the maps read at the attach may be the old program's). */
static int on_first_event(struct tracer *tr, struct tthread *t, int event,
			  const struct user_regs_struct *regs)
{
	int r;

	t->started = true;
	t->after_exec = true;
	if (event == PTRACE_EVENT_EXEC) {
		r = tr_check_64bit(tr, regs);
		if (r == 0)
			r = add_exec_event(tr);
		if (r == 0)
			r = tr_maps_load_all(tr);
		if (r < 0)
			return r;
	}
	r = tr_prepare(tr, t, regs->rip, regs->rax);
	if (r < 0)
		return r;
	if (tr->detaching)
		return tr_detach_thread(tr, t);
	return tr_resume(tr, t, 0);
}

/* A stop of a task we do not know: a new thread whose parent's clone event
 * has not been seen yet, or a child process of the target. */
static int on_unknown(struct tracer *tr, pid_t pid, int status,
		      const struct user_regs_struct *regs)
{
	struct tthread *t;
	pid_t tgid;
	int r;

	if (tr_read_tgid(pid, &tgid) == 0 && tgid == tr->pid) {
		r = tr_thread_new(tr, pid, &t);
		if (r < 0)
			return r;
		t->unannounced = true;
		return on_first_stop(tr, t, WSTOPSIG(status), regs);
	}
	return tr_detach_child(tr, pid);
}

/* A clone, fork or vfork event in @t: the new task is a thread of ours (its
 * stream starts now, before its first stop) or a child process (detached
 * at its first stop; forks_pending waits for that).
 *
 * The kernel reports newer tracees first, so a new thread's first stop can
 * come before this event, and the event can wait while the thread is
 * stepped, detached (as the tracer detaches) or even reaped: such a thread
 * was met in on_unknown and marked unannounced.  It is the same thread,
 * not a new one to wait for -- and, once reaped, no longer in /proc to
 * tell its process by.  A task that is gone without having been met was
 * killed before its first stop (a fatal signal, or an exec in another
 * thread): nothing to wait for either. */
static int on_clone_event(struct tracer *tr, struct tthread *t, int event)
{
	unsigned long msg = 0;
	struct tthread *n;
	struct forkrec *f;
	pid_t tgid;
	int r;

	if (ptrace(PTRACE_GETEVENTMSG, t->tid, NULL, &msg) < 0)
		return tr_failf(tr, -errno, "thread %d: PTRACE_GETEVENTMSG: %s",
				(int)t->tid, strerror(errno));
	n = event == PTRACE_EVENT_CLONE ? tr_last_thread(tr, (pid_t)msg) : NULL;
	if (n && n->unannounced) {
		n->unannounced = false;
	} else if (tr_read_tgid((pid_t)msg, &tgid) < 0) {
		/* gone before its first stop */
	} else if (event == PTRACE_EVENT_CLONE && tgid == tr->pid) {
		if (!tr_find_thread(tr, (pid_t)msg)) {
			r = tr_thread_new(tr, (pid_t)msg, &n);
			if (r < 0)
				return r;
		}
	} else {
		f = fork_find(tr, (pid_t)msg, true);
		if (!f)
			return -ENOMEM;
		f->announced = true;
		fork_settle(tr, f);
	}
	/* the clone SYSCALL completes at the next step stop */
	return tr_resume(tr, t, 0);
}

static int add_exec_event(struct tracer *tr)
{
	struct ptd_tl_event ev = { 0 };
	char link[64], path[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/exe", (int)tr->pid);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return tr_failf(tr, -errno, "cannot read %s: %s", link,
				strerror(errno));
	path[n] = 0;
	ev.op = PTD_TL_EXEC;
	ev.path = path;
	return tr_tl_add(tr, &ev);
}

/* execve succeeded in @t (the leader): the SYSCALL entered the kernel, the
 * image is new from here. */
static int on_exec_event(struct tracer *tr, struct tthread *t,
			 const struct user_regs_struct *regs)
{
	unsigned long former = 0;
	int r;

	if (ptrace(PTRACE_GETEVENTMSG, t->tid, NULL, &former) < 0)
		return tr_failf(tr, -errno, "thread %d: PTRACE_GETEVENTMSG: %s",
				(int)t->tid, strerror(errno));
	if ((pid_t)former != t->tid)
		return tr_failf(tr, -PTD_EUNSUPPORTED, "thread %lu of process %d "
				"called execve: only the main thread may",
				former, (int)tr->pid);
	if (t->insn.kind != PTD_X86_SYSCALL)
		return tr_failf(tr, -EPROTO, "thread %d: exec, but %#" PRIx64
				" is no syscall", (int)t->tid, t->ip);
	r = tr_check_64bit(tr, regs);
	if (r < 0)
		return r;
	r = kernel_entry(tr, t, t->ip, &t->insn);
	if (r < 0)
		return r;
	tr_fast_exec(tr, t);	/* the old memory went with its INT3s */
	t->sysnr = UINT64_MAX;	/* the maps are read here, not after */
	r = add_exec_event(tr);
	if (r < 0)
		return r;
	r = tr_maps_load_all(tr);
	if (r < 0)
		return r;
	return tr_resume(tr, t, 0);
}

/* The thread is about to exit (exit syscall, or killed). */
static int on_exit_event(struct tracer *tr, struct tthread *t,
			 const struct user_regs_struct *regs)
{
	int r;

	/* rip moved: the pending instruction (the exit SYSCALL, or one
	 * that completed as a fatal signal came) executed -- unless the
	 * thread was killed before the registers that put it at ip were
	 * written: it dies where the trace says it is */
	if (t->gen && regs->rip != t->ip && !t->regs_unset) {
		r = on_step(tr, t, TRAP_TRACE, regs);
		if (r < 0)
			return r;
	}
	r = tr_thread_finish(tr, t, t->ip);
	if (r < 0)
		return r;
	if (ptrace(PTRACE_CONT, t->tid, NULL, NULL) < 0 && errno != ESRCH)
		return tr_failf(tr, -errno, "thread %d: PTRACE_CONT: %s",
				(int)t->tid, strerror(errno));
	return 0;
}

static int on_handler_entry(struct tracer *tr, struct tthread *t,
			    const struct user_regs_struct *regs)
{
	int r = 0;

	/* The pending instruction did not run: an asynchronous exit at it,
	 * unless tracing is off already (the signal came after a syscall). */
	if (ptd_ptgen_enabled(t->gen))
		r = ptd_ptgen_interrupt(t->gen, t->ip);
	if (r < 0)
		return r;
	t->rep_recorded = false;	/* a REP resumed is reported again */
	t->restart = false;		/* the kernel restarts via the frame */
	t->entered = false;
	tr_fast_release(tr, t);
	r = tr_prepare(tr, t, regs->rip, regs->rax);
	if (r < 0)
		return r;
	return tr_step_on(tr, t, (struct user_regs_struct *)regs, false);
}

static int on_signal(struct tracer *tr, struct tthread *t, int sig,
		     const struct user_regs_struct *regs)
{
	int r;

	/* A trap such as INT3 reports after its instruction ran. */
	if (regs->rip != t->ip) {
		r = on_step(tr, t, TRAP_TRACE, regs);
		if (r < 0)
			return r;
	}
	if (sig == SIGSTOP && t->stop_sent && !tr->seized)
		return tr_detach_thread(tr, t);
	if (tr->detaching && tr->seized) {
		/* the signal goes to the thread as it leaves */
		r = tr_thread_finish(tr, t, t->ip);

		if (ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)sig) < 0 &&
		    errno != ESRCH && r == 0)
			r = tr_failf(tr, -errno, "cannot detach thread %d: %s",
				     (int)t->tid, strerror(errno));
		t->reaped = true;
		return r;
	}
	return tr_resume(tr, t, sig);
}

/* Whether a SIGTRAP is queued for thread @tid (SigPnd in its status). */
bool tr_trap_pending(pid_t tid)
{
	uint64_t v;

	return tr_status_u64(tid, "SigPnd:", 16, &v) == 0 &&
	       (v & (1ull << (SIGTRAP - 1)));
}

static bool is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN ||
	       sig == SIGTTOU;
}

static int on_stopped(struct tracer *tr, struct tthread *t, int status,
		      struct user_regs_struct *regs)
{
	int sig = WSTOPSIG(status), event = status >> 16, inject = t->inject;
	bool handled;
	siginfo_t si;
	int r;

	t->inject = 0;
	if (t->run) {
		/* branch mode: the run ended here */
		r = tr_fast_stopped(tr, t, status, regs, &handled);
		if (r < 0 || handled)
			return r;
	}
	if (event == 0 && sig == (SIGTRAP | 0x80))
		return tr_failf(tr, -EPROTO, "thread %d: a syscall stop outside "
				"a run", (int)t->tid);
	switch (event) {
	case 0:
		break;
	case PTRACE_EVENT_CLONE:
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
		return on_clone_event(tr, t, event);
	case PTRACE_EVENT_EXEC:
		return on_exec_event(tr, t, regs);
	case PTRACE_EVENT_EXIT:
		return on_exit_event(tr, t, regs);
	case PTRACE_EVENT_STOP:
		/* Seized: our PTRACE_INTERRUPT, or a group-stop.  The kernel
		 * reports it before signals still queued; a step's SIGTRAP
		 * may be one, and must not outlive us (it would kill the
		 * process): step on, and detach at that trap's stop. */
		if (tr->detaching && !tr_trap_pending(t->tid))
			return tr_detach_thread(tr, t);
		return tr_resume(tr, t, 0);
	default:
		return tr_resume(tr, t, 0);
	}
	if (sig != SIGTRAP && !is_stop_signal(sig))
		return on_signal(tr, t, sig, regs);
	if (ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &si) < 0) {
		if (errno == EINVAL)	/* a group-stop: carry on */
			return tr_resume(tr, t, 0);
		return tr_failf(tr, -errno, "thread %d: PTRACE_GETSIGINFO: %s",
				(int)t->tid, strerror(errno));
	}
	if (sig != SIGTRAP)
		return on_signal(tr, t, sig, regs);
	/* an INT3 of branch mode, stepped onto */
	if (si.si_code == SI_KERNEL &&
	    ((r = tr_fast_trap(tr, t, regs, &handled)) < 0 || handled))
		return r;
	/* ptrace_notify() at a signal handler's first instruction */
	if (si.si_code == SIGTRAP && inject)
		return on_handler_entry(tr, t, regs);
	/* The step of an instruction under a kernel uprobe (swpt/tracer.h):
	 * the kernel ran it out of line (then TRAP_BRKPT) or emulated it
	 * (then a SIGTRAP from the thread itself, SI_USER) -- one
	 * instruction, and not a syscall, so the thread cannot have sent it. */
	if (((si.si_code == TRAP_BRKPT && t->insn.kind != PTD_X86_SYSCALL &&
	      !t->restart) ||
	     (si.si_code == SI_USER && si.si_pid == tr->pid)) &&
	    tr_uprobe_at(tr, t->ip)) {
		r = on_step(tr, t, TRAP_TRACE, regs);
		if (r < 0)
			return r;
		return tr_step_on(tr, t, regs, false);
	}
	if (si.si_code == TRAP_TRACE || si.si_code == TRAP_BRKPT ||
	    si.si_code == SIGTRAP) {
		r = on_step(tr, t, si.si_code, regs);
		if (r < 0)
			return r;
		return tr_step_on(tr, t, regs, false);
	}
	/* a SIGTRAP someone sent, or INT3's */
	return on_signal(tr, t, sig, regs);
}

int tr_on_gone(struct tracer *tr, struct tthread *t, int status)
{
	int r = 0;

	tr_fast_drop_run(tr, t);
	if (t->gen)	/* killed without an exit event */
		r = tr_thread_finish(tr, t, t->ip);
	t->reaped = true;
	if (t->tid == tr->pid) {
		tr->leader_gone = true;
		tr->exited = true;
		if (WIFEXITED(status))
			tr->exit_code = WEXITSTATUS(status);
		else
			tr->exit_signal = WTERMSIG(status);
	}
	return r;
}

int tr_on_wait(struct tracer *tr, pid_t pid, int status)
{
	struct tthread *t = tr_find_thread(tr, pid);
	struct user_regs_struct regs;
	int r;

	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		r = t ? tr_on_gone(tr, t, status) : 0;
		return r < 0 ? r : tr_fast_settle(tr);
	}
	if (!WIFSTOPPED(status))
		return 0;
	if (t)
		t->trap_unrewound = WSTOPSIG(status) == SIGTRAP &&
				    !(status >> 16);
	tr->steps++;
	r = tr_get_regs(tr, pid, &regs);
	if (r == -ESRCH)	/* killed meanwhile: its exit comes next */
		return 0;
	if (r < 0)
		return r;
	if (!t)
		return on_unknown(tr, pid, status, &regs);
	{
		struct timespec ts;

		(void)clock_gettime(CLOCK_MONOTONIC, &ts);
		t->stop_ns = (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
	}
	tr->mem_tid = pid;	/* stopped: branch mode may write through it */
	if (!t->started && tr->seized && (status >> 16) != 0 &&
	    (status >> 16) != PTRACE_EVENT_STOP)
		return on_first_event(tr, t, status >> 16, &regs);
	if (!t->started)
		r = on_first_stop(tr, t, WSTOPSIG(status), &regs);
	else
		r = on_stopped(tr, t, status, &regs);
	if (r == -ESRCH) {
		/* A request on a thread held stopped (PTRACE_SETREGS, a
		 * breakpoint's POKEDATA, ...) finds it running: a SIGKILL, or
		 * another thread's exec, has taken it out of its stop.  Its
		 * exit (or the exec) comes next and ends its stream: this is
		 * no error of the trace. */
		if (tr->diag)
			tr->diag->msg[0] = 0;
		return 0;
	}
	if (r == 0)
		r = tr_fast_settle(tr);
	return r;
}

/* Threads whose streams are finished but which have not been reaped. */
static bool exiting_pending(const struct tracer *tr)
{
	for (size_t i = 0; i < tr->nth; i++)
		if (!tr->th[i]->reaped && tr->th[i]->tid != tr->pid)
			return true;
	return false;
}

/* A safety net, not the usual end of the wait: the hit thread stops at
 * its next branch a few instructions on, as soon as it is scheduled.  On
 * a loaded machine that took longer than the 100 ms this once was (a
 * clean-clone run beside other builds: a snapshot without its hit). */
#define FLUSH_WAIT_NS 2000000000ll	/* 2 s */

/* Whether thread @tid completed a branch at a stop taken at or after
 * @after_ns: what it ran before is then in its packets, and a decoder
 * reaches past it (or it is not one we trace, or is gone: nothing to wait
 * for). */
static bool flush_reached(struct tracer *tr, pid_t tid, int64_t after_ns)
{
	struct tthread *t = tr_find_thread(tr, tid);

	return !t || !t->gen || t->branch_ns >= after_ns;
}

int tr_trace_loop(struct tracer *tr)
{
	for (;;) {
		int status, r;
		int64_t fafter;
		pid_t pid, ftid;
		bool want;

		if (tr->detaching && tr->live == 0 && !exiting_pending(tr) &&
		    !forks_pending(tr))
			return 0;
		if (tr->leader_gone && !forks_pending(tr))
			return 0;
		if (!tr->detaching && tr_stop_asked(tr) &&
		    (r = start_detach(tr, NULL)) < 0)
			return r;
		if ((r = tr_flush_due(tr)) < 0)
			return r;
		tr_threads_sweep(tr);
		/* A flush asked for (a snapshot): for a thread that ran an
		 * instruction the snapshot is for (a trigger's hit), its
		 * first stop taken since is waited for (its run there is
		 * recorded only at that stop; its stops are taken first),
		 * else the stops already waiting are taken; then everything
		 * is flushed.  Bounded by FLUSH_WAIT_NS: a thread blocked in
		 * a syscall does not hold the others. */
		want = tr_flush_wanted(tr, &ftid, &fafter);
		if (want && !tr->flush_since)
			tr->flush_since = tr_now_ns();
		if (want && ((ftid && flush_reached(tr, ftid, fafter)) ||
			     tr_now_ns() - tr->flush_since >= FLUSH_WAIT_NS)) {
			if ((r = tr_flush_asked(tr)) < 0)
				return r;
			want = false;
		}
		pid = 0;
		if (want && ftid)
			pid = waitpid(ftid, &status, WAIT_FLAGS | WNOHANG);
		if (pid <= 0)
			pid = waitpid(-1, &status, WAIT_FLAGS |
						   (want && !ftid ? WNOHANG
								 : 0));
		if (pid == 0) {
			if ((r = tr_flush_asked(tr)) < 0)
				return r;
			continue;
		}
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ECHILD)
				return 0;
			return tr_failf(tr, -errno, "waitpid: %s",
					strerror(errno));
		}
		r = tr_on_wait(tr, pid, status);
		if (r < 0)
			return r;
	}
}
