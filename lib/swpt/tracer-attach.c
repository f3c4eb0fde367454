/* SPDX-License-Identifier: MIT */
/*
 * The software PT source (swpt/tracer.h): ptd_swpt_attach, tracing a
 * running process -- its threads seized and held until every one is
 * stopped, traced from where they stand, and let go untouched on an
 * error -- and ptd_swpt_wait_released.
 */
#include "swpt/tracer-int.h"

#include <linux/kcmp.h>

/* ---- attach ---------------------------------------------------------- */

static const long SEIZE_OPTS = PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK |
			       PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC |
			       PTRACE_O_TRACEEXIT | PTRACE_O_TRACESYSGOOD;

/* Who traces @tid already (TracerPid in its status), or -1. */
static pid_t tracer_of(pid_t tid)
{
	uint64_t v;

	if (tr_status_u64(tid, "TracerPid:", 10, &v) < 0 || v > INT_MAX)
		return -1;
	return (pid_t)v;
}

static int seize_refused(struct tracer *tr, pid_t tid, int err)
{
	pid_t other;

	if (err == -ESRCH)
		return tr_failf(tr, err, "no such process: %d", (int)tid);
	other = tracer_of(tid);
	if (err == -EPERM && tid == tr->pid && tr_thread_exited(tid))
		return tr_failf(tr, err, "process %d: its main thread has exited "
				"(a zombie); ptrace cannot attach to a process "
				"without its main thread", (int)tr->pid);
	if (err == -EPERM && other > 0)
		return tr_failf(tr, err, "thread %d of process %d is traced by "
				"process %d already (a debugger?)", (int)tid,
				(int)tr->pid, (int)other);
	if (err == -EPERM)
		return tr_failf(tr, err, "ptrace refused for process %d (not "
				"dumpable, Yama ptrace_scope, or missing "
				"CAP_SYS_PTRACE)", (int)tr->pid);
	return tr_failf(tr, err, "cannot attach to thread %d: %s", (int)tid,
			ptd_strerror(err));
}

/* A thread we trace without having seized it: the kernel attached it to
 * us as its creator, seized already, cloned it (PTRACE_O_TRACECLONE).  It
 * is one of ours like the others, and its first stop is on its way: the
 * kernel stops such a thread before its first instruction. */
static int adopt_thread(struct tracer *tr, pid_t tid)
{
	struct tthread *t;
	int r = tr_thread_new(tr, tid, &t);

	if (r < 0)
		return r;
	t->unannounced = true;	/* its creator's clone event may follow */
	return 1;
}

/* Seize one thread and stop it where it is; it gets a stream.  Returns 1,
 * 0 if the thread needs no seizing (see below), or -errno. */
static int seize_thread(struct tracer *tr, pid_t tid)
{
	struct tthread *t;
	int r;

	if (ptrace(PTRACE_SEIZE, tid, NULL, (void *)SEIZE_OPTS) < 0) {
		r = -errno;
		/* A thread gone, or exiting (EPERM: the kernel refuses a
		 * task whose exit has begun), needs nothing -- but the
		 * leader does: no process can be traced without it. */
		if (tid != tr->pid &&
		    (r == -ESRCH || (r == -EPERM && tr_thread_exited(tid))))
			return 0;
		/* One born since the scan began whose creator we had seized
		 * is traced by us already (PTRACE_O_TRACECLONE): seizing it
		 * again is refused, with EPERM.  TracerPid names the tracing
		 * *thread*: in the daemon that is not the process's main
		 * thread. */
		if (tid != tr->pid && r == -EPERM && tracer_of(tid) == gettid())
			return adopt_thread(tr, tid);
		return seize_refused(tr, tid, r);
	}
	r = tr_thread_new(tr, tid, &t);
	if (r < 0)
		return r;
	if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0 && errno != ESRCH)
		return tr_failf(tr, -errno, "thread %d: PTRACE_INTERRUPT: %s",
				(int)tid, strerror(errno));
	return 1;
}

/* One scan of /proc/PID/task: seize every thread not known yet.  Returns
 * how many were added, or -errno. */
static int seize_scan(struct tracer *tr)
{
	struct dirent *de;
	char path[64];
	int r = 0, n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)tr->pid);
	d = opendir(path);
	if (!d)
		return tr_failf(tr, -ESRCH, "process %d is gone", (int)tr->pid);
	while (r >= 0 && (de = readdir(d))) {
		uint64_t v;

		if (ptd_parse_u64(de->d_name, 10, &v) < 0 || v > INT_MAX ||
		    tr_find_thread(tr, (pid_t)v))
			continue;
		r = seize_thread(tr, (pid_t)v);
		n += r > 0;
	}
	(void)closedir(d);
	return r < 0 ? r : n;
}

/* A thread seized that has not stopped yet (nor ended). */
static bool unheld(const struct tracer *tr)
{
	for (size_t i = 0; i < tr->nth; i++)
		if (!tr->th[i]->held && !tr->th[i]->reaped)
			return true;
	return false;
}

/* A wait status met while the threads are being held: a thread's first
 * stop is kept for later (a later one replaces it: a thread killed in its
 * stop reports its exit event); a new thread of the process (created by
 * a thread seized but not yet stopped) is held too; a child process is let
 * go, as tracing does. */
static int hold_one(struct tracer *tr, pid_t pid, int status)
{
	struct tthread *t = tr_find_thread(tr, pid);
	pid_t tgid;
	int r;

	if (WIFEXITED(status) || WIFSIGNALED(status))
		return t ? tr_on_gone(tr, t, status) : 0;
	if (!WIFSTOPPED(status))
		return 0;
	if (!t) {
		if (tr_read_tgid(pid, &tgid) < 0 || tgid != tr->pid)
			return tr_detach_child(tr, pid);
		r = adopt_thread(tr, pid);
		if (r < 0)
			return r;
		t = tr_find_thread(tr, pid);
	}
	t->held = true;
	t->held_status = status;
	return 0;
}

/* Wait until every thread seized so far is in a ptrace stop (held).  A
 * thread can take long: one in vfork() stops only once its child has
 * exec'd or exited, one in an uninterruptible sleep when the sleep ends.
 * *opt->stop cancels the wait (the caller interrupts waitpid). */
static int hold_all(struct tracer *tr)
{
	while (unheld(tr)) {
		int status, r;
		pid_t pid;

		if (tr_stop_asked(tr))
			return tr_failf(tr, -ECANCELED, "the attach to process "
					"%d was cancelled before every thread "
					"had stopped", (int)tr->pid);
		pid = waitpid(-1, &status, WAIT_FLAGS);
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0 && errno != ECHILD)
			return tr_failf(tr, -errno, "waitpid: %s",
					strerror(errno));
		r = pid < 0 ? 0 : hold_one(tr, pid, status);
		if (r < 0)
			return r;
		if (pid < 0 || tr->leader_gone)
			return tr_failf(tr, -ESRCH, "process %d exited during the "
					"attach", (int)tr->pid);
	}
	return 0;
}

/* Seize every thread of the process and wait until each is stopped.  A
 * scan of /proc/PID/task made while every thread known is stopped and
 * that finds none new ends it: a stopped thread creates none, and one
 * created by a thread before we seized it is in the scan, traced by the
 * kernel's PTRACE_O_TRACECLONE or not (its creator was seized inside
 * clone(), after the kernel decided) -- then it is seized now. */
static int seize_all(struct tracer *tr)
{
	int r = seize_thread(tr, tr->pid);

	while (r >= 0) {
		r = seize_scan(tr);
		if (r == 0 && !unheld(tr))
			return 0;
		if (r >= 0)
			r = hold_all(tr);
	}
	return r;
}

/* Every thread is stopped: is it still the process the caller meant, and
 * may it still be traced? */
static int seized_check(struct tracer *tr)
{
	const struct ptd_swpt_options *o = tr->opt;
	int r;

	/* A pid belongs to one process until that process is reaped; the
	 * threads stopped now hold it, so if the pidfd's process still
	 * holds it, it is theirs. */
	if (o->pidfd > 0 && (r = ptd_pidfd_alive(o->pidfd)) < 0)
		return tr_failf(tr, r == -ESRCH ? -ESRCH : r,
				"process %d is not the one ptd was asked to "
				"trace: that one exited and its pid now names "
				"another process (%s); let go untouched",
				(int)tr->pid, r == -ESRCH ? "reused"
							 : ptd_strerror(r));
	if (o->seized && (r = o->seized(o->seized_ctx, tr->diag)) < 0)
		return r;
	return 0;
}

/* Each thread's first stop, kept while the others were stopping: handled
 * now, as if it had just come. */
static int held_replay(struct tracer *tr)
{
	for (size_t i = 0; i < tr->nth; i++) {
		struct tthread *t = tr->th[i];
		int r;

		if (!t->held)
			continue;
		t->held = false;
		if (t->reaped)
			continue;
		r = tr_on_wait(tr, t->tid, t->held_status);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The signal a thread was about to be given in the stop @status (a
 * signal-delivery stop: no event), which letting it go must not lose; 0
 * for our own interrupt's stop, a group-stop or an event. */
static int stop_signal(int status)
{
	return WIFSTOPPED(status) && (status >> 16) == 0 ? WSTOPSIG(status)
							 : 0;
}

/* Thread @tid, stopped by a SIGTRAP: if it stands just past one of
 * branch mode's breakpoints (an INT3 the kernel reported, si_code
 * SI_KERNEL), put it back on the instruction (the bytes are the
 * original ones again: tr_fast_abandon). */
static void undo_int3(struct tracer *tr, pid_t tid)
{
	struct user_regs_struct regs;
	siginfo_t si;

	if (ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) == 0 &&
	    si.si_signo == SIGTRAP && si.si_code == SI_KERNEL &&
	    ptrace(PTRACE_GETREGS, tid, NULL, &regs) == 0 &&
	    tr_fast_was_bp(tr, regs.rip - 1)) {
		regs.rip--;
		(void)ptrace(PTRACE_SETREGS, tid, NULL, &regs);
	}
}

/* Let thread @t go from a stop (or end) of @status the tracer had not
 * taken: a trap still queued is taken first (a step's, an INT3's: it must
 * not outlive us), a breakpoint's INT3 it stands past is undone, then it
 * is detached.  Returns true if it is to be waited for again. */
static bool release_stop(struct tracer *tr, struct tthread *t, int status)
{
	int sig;

	if (WIFSTOPPED(status) && status >> 16 == PTRACE_EVENT_STOP &&
	    t->started && tr_trap_pending(t->tid) &&
	    ptrace(PTRACE_CONT, t->tid, NULL, NULL) == 0)
		return true;
	if (WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP &&
	    !(status >> 16))
		undo_int3(tr, t->tid);
	/* a thread never stepped stops for signals of its own, not for a
	 * step's SIGTRAP: it keeps them */
	sig = t->started ? 0 : stop_signal(status);
	if (WIFSTOPPED(status) &&
	    ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)sig) < 0 &&
	    errno != ESRCH)
		return true;
	t->reaped = true;
	return false;
}

/* On an error after the attach: let every thread go, untouched.  A held
 * thread goes at once (with the signal it was to get); one tracing is
 * interrupted, waited for, and detached at its stop -- one already
 * stopped goes now: from the stop the tracer failed at (past a
 * breakpoint's INT3 it had not undone yet, put back), or from one the
 * tracer had not taken (release_stop: branch mode's threads run into
 * breakpoints all the time, and one detached past an INT3 ran on from
 * the middle of an instruction: test-live's test_attach_output_fails).
 * One seized that never stopped (one in vfork() waiting for its child)
 * cannot be detached before it stops and has run nothing under us: the
 * kernel lets it go when the tracing thread exits
 * (ptd_swpt_wait_released), unless it stops first. */
static void release_all(struct tracer *tr)
{
	size_t left = 0;

	/* branch mode: the original bytes back first (the addresses are
	 * kept: a thread that trapped on one is put back before it goes) */
	tr_fast_abandon(tr);
	for (size_t i = 0; i < tr->nth; i++) {
		struct tthread *t = tr->th[i];
		int sig = t->held ? stop_signal(t->held_status) : 0;
		int status;

		t->stop_sent = false;	/* now: waited for below */
		if (t->reaped || (!t->started && !t->held))
			continue;
		if (!t->held &&
		    waitpid(t->tid, &status, WAIT_FLAGS | WNOHANG) == t->tid) {
			if (release_stop(tr, t, status)) {
				t->stop_sent = true;
				left++;
			}
			continue;
		}
		if (!t->held && t->trap_unrewound)
			undo_int3(tr, t->tid);
		/* stopped already (the error came at its stop): go now */
		if (ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)sig) == 0) {
			t->reaped = true;
		} else if (ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL) == 0) {
			t->stop_sent = true;
			left++;
		} else {
			t->reaped = true;
		}
	}
	while (left > 0) {
		int status;
		pid_t pid = waitpid(-1, &status, WAIT_FLAGS);
		struct tthread *t;

		if (pid < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		t = tr_find_thread(tr, pid);
		if (!t || t->reaped) {
			/* a child process announced late: let it go too */
			if (WIFSTOPPED(status))
				(void)ptrace(PTRACE_DETACH, pid, NULL, NULL);
			continue;
		}
		if (release_stop(tr, t, status))
			continue;
		if (t->stop_sent)
			left--;
	}
}

/* The state letter of process @pid (/proc/PID/stat), or 0. */
static char proc_state(pid_t pid)
{
	char path[64], buf[512];
	const char *p;
	ssize_t n;
	int fd;

	(void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	(void)close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/* Does @pid share its memory with its parent (a vfork child waiting to
 * exec, a clone with CLONE_VM)?  Then that memory is also its parent's,
 * traced by another tracer perhaps: no breakpoint of ours may go there.
 * kcmp(KCMP_VM) says; where it cannot (a kernel without it), a parent in
 * an uninterruptible wait ('D': a vfork parent waits so for its child's
 * exec or exit) is taken as one that shares. */
static bool shares_parent_vm(pid_t pid)
{
	uint64_t ppid;
	long k;

	if (tr_status_u64(pid, "PPid:", 10, &ppid) < 0 || ppid == 0 ||
	    ppid > INT_MAX)
		return false;	/* no parent to share with */
	k = syscall(SYS_kcmp, pid, (pid_t)ppid, KCMP_VM, 0, 0);
	if (k >= 0)
		return k == 0;	/* 0: the same memory */
	return proc_state((pid_t)ppid) == 'D';
}

int ptd_swpt_attach(pid_t pid, const struct ptd_swpt_options *opt,
		    struct ptd_swpt_result *ret, struct ptd_diag *diag)
{
	struct tracer tr = { 0 };
	int r;

	if (pid <= 0 || !opt || (!opt->outdir && !opt->out))
		return -EINVAL;
	tr.pid = pid;
	tr.seized = true;
	tr.last_flush = tr_now_ns();
	r = tr_tracer_init(&tr, opt, diag);
	if (r < 0)
		goto out;
	r = seize_all(&tr);
	if (r == 0)
		r = seized_check(&tr);
	if (r == 0)
		tr.vm_shared = shares_parent_vm(pid);
	/* the image as it is: every stream starts with it (position 0) */
	if (r == 0)
		r = tr_maps_load_all(&tr);
	if (r == 0)
		r = tr_filter_resolve(&tr);
	if (r == 0 && opt->started)
		opt->started(opt->started_ctx);
	if (r == 0)
		r = held_replay(&tr);
	if (r == 0)
		r = tr_trace_loop(&tr);
	for (size_t i = 0; r == 0 && i < tr.nth; i++)
		r = tr_thread_finish(&tr, tr.th[i], tr.th[i]->ip);
	if (r == 0 && opt->outdir) {
		char exe[64], path[PATH_MAX];
		char *argv[2] = { path, NULL };
		ssize_t n;

		snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
		n = readlink(exe, path, sizeof(path) - 1);
		path[n > 0 ? n : 0] = 0;
		r = tr_save_capture(&tr, argv);
	}
	if (r < 0)
		release_all(&tr);
	else if (ret)
		tr_fill_result(&tr, ret);
out:
	tr_tracer_free(&tr);
	return r;
}

/* Is a thread of @pid traced by thread @tracer?  (-errno: cannot tell.) */
static int traced_by(pid_t pid, pid_t tracer)
{
	struct dirent *de;
	char path[64];
	int found = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (!found && (de = readdir(d))) {
		uint64_t v;

		if (ptd_parse_u64(de->d_name, 10, &v) == 0 && v <= INT_MAX)
			found = tracer_of((pid_t)v) == tracer;
	}
	(void)closedir(d);
	return found;
}

int ptd_swpt_wait_released(pid_t pid, pid_t tracer)
{
	const struct timespec ms = { 0, 1000000 };
	int r;

	if (pid <= 0 || tracer <= 0)
		return -EINVAL;
	/* The thread has exited (pthread_join returned): the kernel is
	 * finishing its exit, which ends in letting its tracees go. */
	while ((r = traced_by(pid, tracer)) > 0)
		(void)nanosleep(&ms, NULL);
	return r;
}
