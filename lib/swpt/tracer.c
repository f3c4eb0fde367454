/* SPDX-License-Identifier: MIT */
/*
 * The software PT source: ptrace single-stepping of every thread of a
 * program, turned into Intel PT by swpt/ptgen.h.
 *
 * How Linux reports what a single step did (measured, kernel 6.x):
 *  - An ordinary instruction: SIGTRAP, si_code TRAP_TRACE, at the next ip.
 *  - A SYSCALL: SIGTRAP, si_code TRAP_BRKPT, where user space resumes
 *    (after the syscall, at the new program after execve, at the
 *    interrupted ip after rt_sigreturn).
 *  - A syscall interrupted by a signal returns -ERESTART* in rax; if no
 *    handler runs, the kernel rewinds rip onto the SYSCALL and runs it again,
 *    and the next stop is a TRAP_BRKPT at the same ip: the instruction that
 *    executed was the SYSCALL, not the one at ip.
 *  - A signal: a signal-delivery-stop (the pending instruction has not
 *    executed).  Injected with PTRACE_SINGLESTEP, a signal with a handler
 *    gives a SIGTRAP stop with si_code SIGTRAP (ptrace_notify) at the
 *    handler's first instruction, nothing executed; an ignored one lets the
 *    step run the pending instruction as usual.
 *
 * Tracing is enabled lazily: a thread's ptgen is enabled (TIP.PGE) just
 * before its first instruction after a start, a syscall or a signal handler
 * entry is recorded, so a signal delivered right after a syscall shows as
 * PGD at the SYSCALL and PGE at the handler, as the hardware has it.
 *
 * Limitation: the loop waits with waitpid(-1, __WALL | __WNOTHREAD), as it
 * must to see every thread: the calling thread should have no other
 * children whose status it expects to collect while tracing.  __WNOTHREAD
 * keeps tracers in other threads of the same process (one per session in
 * ptd) from taking each other's stops.
 *
 * Attaching (ptd_swpt_attach) seizes the threads of a running process with
 * PTRACE_SEIZE: they are stopped with PTRACE_INTERRUPT, stepped from where
 * they stand, and at the end detached the same way, each at a stop of its
 * own; nothing is injected and the trap flag is cleared by PTRACE_DETACH.
 *
 * The source's files: this one (the tracer's state and each thread's
 * stream, ptd_swpt_run: spawn and capture), tracer-code.c (the code the
 * trace needs: decoded instructions, maps, filter, snapshots),
 * tracer-stops.c (what each stop means; the trace loop), tracer-attach.c
 * (ptd_swpt_attach); tracer-int.h holds what they share.
 */
#include "swpt/tracer-int.h"

int ptd_swpt_step_parse(const char *s, enum ptd_swpt_step *ret)
{
	if (s && strcmp(s, "branch") == 0)
		*ret = PTD_SWPT_STEP_BRANCH;
	else if (s && strcmp(s, "single") == 0)
		*ret = PTD_SWPT_STEP_SINGLE;
	else
		return -EINVAL;
	return 0;
}

int ptd_swpt_start_parse(const char *s, enum ptd_swpt_start *ret)
{
	if (!s || !ret)
		return -EINVAL;
	if (strcmp(s, "exec") == 0)
		*ret = PTD_SWPT_START_EXEC;
	else if (strcmp(s, "entry") == 0)
		*ret = PTD_SWPT_START_ENTRY;
	else
		return -EINVAL;
	return 0;
}

int tr_failf(struct tracer *tr, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)ptd_vdiagf(tr->diag, err, fmt, ap);
	va_end(ap);
	return err;
}

/* The newest thread @tid, live or not (a thread id can be reused), or
 * NULL. */
struct tthread *tr_last_thread(struct tracer *tr, pid_t tid)
{
	for (size_t i = tr->nth; i-- > 0;)
		if (tr->th[i]->tid == tid)
			return tr->th[i];
	return NULL;
}

struct tthread *tr_find_thread(struct tracer *tr, pid_t tid)
{
	if (tr->last && tr->last->tid == tid && !tr->last->reaped)
		return tr->last;
	for (size_t i = tr->nth; i-- > 0;)
		if (tr->th[i]->tid == tid && !tr->th[i]->reaped)
			return tr->last = tr->th[i];
	return NULL;
}

/* ---- streams --------------------------------------------------------- */

static int pt_sink(void *ctx, const uint8_t *data, size_t len)
{
	struct tthread *t = ctx;
	const struct ptd_swpt_out *out = t->tr->opt->out;
	int r;

	if (t->pt && fwrite_unlocked(data, 1, len, t->pt) != len)
		return -EIO;
	if (out && (r = out->pt(out->ctx, t->tid, data, len)) < 0)
		return r;
	t->pt_bytes += len;
	return 0;
}

int64_t tr_now_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Live output: hand every live stream's bytes over (@tnt: the TNT bits
 * being collected too). */
static int flush_all(struct tracer *tr, bool tnt)
{
	int r;

	tr->last_flush = tr_now_ns();
	for (size_t i = 0; i < tr->nth; i++)
		if (tr->th[i]->gen &&
		    (r = tnt ? ptd_ptgen_flush_tnt(tr->th[i]->gen)
			     : ptd_ptgen_flush(tr->th[i]->gen)) < 0)
			return r;
	return 0;
}

int tr_flush_all(struct tracer *tr)
{
	return flush_all(tr, false);
}

bool tr_flush_wanted(const struct tracer *tr, pid_t *tid, int64_t *after_ns)
{
	const struct ptd_swpt_out *o = tr->opt->out;

	*tid = 0;
	*after_ns = 0;
	return o && o->flush_wanted && o->flush_wanted(o->ctx, tid, after_ns);
}

int tr_flush_asked(struct tracer *tr)
{
	const struct ptd_swpt_out *o = tr->opt->out;
	int r = flush_all(tr, true);

	tr->flush_since = 0;
	o->flushed(o->ctx);
	return r;
}

/* Live output: flush now and then, so records flow while threads run. */
int tr_flush_due(struct tracer *tr)
{
	if (!tr->opt->out || ++tr->flush_tick % FLUSH_CHECK)
		return 0;
	if (tr_now_ns() - tr->last_flush < FLUSH_NS)
		return 0;
	return tr_flush_all(tr);
}

/* @t's file PREFIX-TID.bin, or PREFIX-TID.N.bin for the Nth thread given
 * that id (capture.h), in OUTDIR with @dir. */
static char *file_name(const struct tracer *tr, const struct tthread *t,
		       const char *prefix, bool dir)
{
	const char *d = dir ? tr->opt->outdir : "", *sep = dir ? "/" : "";
	char *p;
	int n;

	if (t->nth_of_tid > 1)
		n = asprintf(&p, "%s%s%s-%d.%u.bin", d, sep, prefix,
			     (int)t->tid, t->nth_of_tid);
	else
		n = asprintf(&p, "%s%s%s-%d.bin", d, sep, prefix, (int)t->tid);
	return n < 0 ? NULL : p;
}

/* A new thread with its PT and truth files; its stream starts after every
 * timeline event added so far. */
static int thread_files(struct tracer *tr, struct tthread *t)
{
	_cleanup_free_ char *pt = file_name(tr, t, "pt", true);
	_cleanup_free_ char *truth = file_name(tr, t, "truth", true);
	int r;

	if (!pt || !truth)
		return -ENOMEM;
	t->pt = fopen(pt, "wxe");
	if (!t->pt) {
		r = -errno;
		return tr_failf(tr, r, "cannot create '%s': %s", pt,
				ptd_strerror(r));
	}
	if (setvbuf(t->pt, NULL, _IOFBF, 1u << 16) != 0)
		return -ENOMEM;
	r = ptd_truth_writer_open(&t->truth, truth);
	if (r < 0)
		return tr_failf(tr, r, "cannot create '%s': %s", truth,
				ptd_strerror(r));
	t->has_truth = true;
	return 0;
}

static void thread_free(struct tthread *t)
{
	if (!t)
		return;
	ptd_ptgen_free(t->gen);
	if (t->pt)
		(void)fclose(t->pt);
	if (t->has_truth)
		(void)ptd_truth_writer_close(&t->truth);
	free(t);
}

/* A live trace (no capture: nothing lists its threads) forgets threads
 * that are over -- reaped, stream finished, nothing pending on them -- so
 * that a target that starts and ends threads is held to
 * PTD_CAPTURE_MAX_THREADS at once, not in all.  (Not the leader: exec and
 * exit handling look for it; not one still waiting for its creator's
 * clone event, which finds it by id.)  Called between two stops only
 * (tr_trace_loop): loops over the threads may create threads.  Cheap
 * unless there are finished threads to forget: those kept (unsweepable)
 * by the last sweep, plus TR_SWEEP_EVERY, wait for the next. */
#define TR_SWEEP_EVERY 32u

void tr_threads_sweep(struct tracer *tr)
{
	size_t k = 0;

	if (tr->opt->outdir ||
	    tr->nth - tr->live < tr->sweep_kept + TR_SWEEP_EVERY)
		return;
	for (size_t i = 0; i < tr->nth; i++) {
		struct tthread *t = tr->th[i];

		if (!t->reaped || t->gen || t->unannounced || t->held ||
		    t->tid == tr->pid) {
			tr->th[k++] = t;
			continue;
		}
		tr_fast_drop_run(tr, t);
		if (tr->last == t)
			tr->last = NULL;
		tr->swept_pt_bytes += t->pt_bytes;
		thread_free(t);
	}
	tr->nth = k;
	tr->sweep_kept = tr->nth - tr->live;
}

int tr_thread_new(struct tracer *tr, pid_t tid, struct tthread **ret)
{
	const struct ptd_swpt_out *out = tr->opt->out;
	struct ptd_ptgen_config cfg = tr->opt->gen;
	struct tthread *t, **v;
	int r;

	if (tr->nth >= PTD_CAPTURE_MAX_THREADS)
		return tr_failf(tr, -PTD_ELIMIT, "more than %u threads%s",
				PTD_CAPTURE_MAX_THREADS,
				tr->opt->outdir ? "" : " at once");
	v = realloc(tr->th, (tr->nth + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	tr->th = v;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	tr->th[tr->nth++] = t;
	tr->nbegun++;
	if (tr->nth > tr->max_held)
		tr->max_held = tr->nth;
	t->tr = tr;
	t->tid = tid;
	t->nth_of_tid = 1;
	for (size_t i = tr->nth - 1; i-- > 0;)
		if (tr->th[i]->tid == tid) {
			t->nth_of_tid = tr->th[i]->nth_of_tid + 1;
			break;
		}
	t->first_seq = tr->tl.next_seq;
	if (tr->opt->outdir && (r = thread_files(tr, t)) < 0)
		return r;
	if (out && (r = out->thread_begin(out->ctx, tid)) < 0)
		return tr_failf(tr, r, "thread %d: live output: %s", (int)tid,
				ptd_strerror(r));
	cfg.sink = pt_sink;
	cfg.sink_ctx = t;
	r = ptd_ptgen_new(&cfg, &t->gen);
	if (!t->gen)
		return tr_failf(tr, r, "cannot set up the packet generator: %s",
				ptd_strerror(r));
	if (tr->fcfg_set && (r = ptd_ptgen_set_filter(t->gen, &tr->fcfg)) < 0)
		return tr_failf(tr, r, "thread %d: cannot set the filter: %s",
				(int)tid, ptd_strerror(r));
	t->filter_seq = tr->filter_seq;
	tr->live++;
	*ret = t;
	return 0;
}

/* End @t's stream with the thread about to execute @ip. */
int tr_thread_finish(struct tracer *tr, struct tthread *t, uint64_t ip)
{
	int r, r2, r3 = 0;

	if (!t->gen)
		return 0;
	r = ptd_ptgen_finish(t->gen, ip);
	r2 = ptd_ptgen_end(t->gen);
	ptd_ptgen_free(t->gen);
	t->gen = NULL;
	t->end_seq = tr->tl.next_seq;
	tr->live--;
	if (t->pt && fflush(t->pt) != 0)
		r3 = -errno;
	if (t->pt && fclose(t->pt) != 0 && r3 == 0)
		r3 = -errno;
	t->pt = NULL;
	if (r == 0)
		r = r2;
	if (r == 0)
		r = r3;
	if (t->has_truth) {
		r2 = ptd_truth_writer_close(&t->truth);
		t->has_truth = false;
		if (r == 0)
			r = r2;
	}
	if (tr->opt->out) {
		r2 = tr->opt->out->thread_end(tr->opt->out->ctx, t->tid);
		if (r == 0)
			r = r2;
	}
	if (r < 0)
		return tr_failf(tr, r, "thread %d: cannot finish its streams: %s",
				(int)t->tid, ptd_strerror(r));
	return 0;
}

/* ---- start ----------------------------------------------------------- */

static void child_fail(int fd, int err)
{
	ssize_t n = write(fd, &err, sizeof(err));

	(void)n;
	_exit(127);
}

/* In the child: only async-signal-safe calls until execvp. */
static void child_run(char *const argv[], bool quiet, int errfd)
{
	if (quiet) {
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			child_fail(errfd, errno);
	}
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0)
		child_fail(errfd, errno);
	/* wait here until the tracer has set its options */
	if (raise(SIGSTOP) != 0)
		child_fail(errfd, errno);
	execvp(argv[0], argv);
	child_fail(errfd, errno);
}

/* The errno the child reported before it could exec, or 0. */
static int child_errno(int fd)
{
	int err = 0;
	ssize_t n = read(fd, &err, sizeof(err));

	return n == (ssize_t)sizeof(err) && err > 0 ? -err : 0;
}

static int wait_pid(pid_t pid, int *status)
{
	for (;;) {
		pid_t r = waitpid(pid, status, WAIT_FLAGS);

		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* The child stopped before exec: set our options and let it exec.  Returns
 * once it stops at the exec event (the new program's first instruction). */
static int spawn_to_exec(struct tracer *tr, char *const argv[], int errfd)
{
	const long opts = PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK |
			  PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC |
			  PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL |
			  PTRACE_O_TRACESYSGOOD;
	int status, r, sig = 0;

	for (;;) {
		r = wait_pid(tr->pid, &status);
		if (r < 0)
			return tr_failf(tr, r, "waitpid: %s", ptd_strerror(r));
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			tr->leader_gone = true;
			r = child_errno(errfd);
			if (r == -ENOENT)
				return tr_failf(tr, r, "'%s': program not found",
						argv[0]);
			if (r == -EPERM)
				return tr_failf(tr, r, "'%s': ptrace refused "
						"(Yama ptrace_scope or seccomp?)",
						argv[0]);
			if (r < 0)
				return tr_failf(tr, r, "cannot run '%s': %s",
						argv[0], ptd_strerror(r));
			return tr_failf(tr, -ECHILD, "'%s' ended before exec",
					argv[0]);
		}
		if (!WIFSTOPPED(status))
			continue;
		if (status >> 16 == PTRACE_EVENT_EXEC)
			return 0;
		if (WSTOPSIG(status) == SIGSTOP && !sig) {
			/* our raise(SIGSTOP): options, then on to exec */
			sig = -1;
			if (ptrace(PTRACE_SETOPTIONS, tr->pid, NULL,
				   (void *)opts) < 0)
				return tr_failf(tr, -errno, "PTRACE_SETOPTIONS: "
						"%s", strerror(errno));
			if (ptrace(PTRACE_CONT, tr->pid, NULL, NULL) < 0)
				return tr_failf(tr, -errno, "PTRACE_CONT: %s",
						strerror(errno));
			continue;
		}
		/* any other signal before exec goes to the child */
		if (ptrace(PTRACE_CONT, tr->pid, NULL,
			   (void *)(long)WSTOPSIG(status)) < 0)
			return tr_failf(tr, -errno, "PTRACE_CONT: %s",
					strerror(errno));
	}
}

/* The program's entry point (AT_ENTRY) from /proc/@pid/auxv, read at the
 * exec stop: 0 and *ret, or a negative error. */
static int read_entry(struct tracer *tr, pid_t pid, uint64_t *ret)
{
	char path[64], *data = NULL;
	size_t len = 0;
	int r;

	(void)snprintf(path, sizeof(path), "/proc/%d/auxv", (int)pid);
	/* a few dozen pairs; 64 KiB is far beyond any real vector */
	r = ptd_file_read_all(path, 65536, &data, &len);
	if (r < 0)
		return tr_failf(tr, r, "%s: %s", path, ptd_strerror(r));
	r = -ENOENT;
	for (size_t off = 0; off + 16 <= len; off += 16) {
		uint64_t type, val;

		memcpy(&type, data + off, 8);
		memcpy(&val, data + off + 8, 8);
		if (type == AT_NULL)
			break;
		if (type == AT_ENTRY) {
			*ret = val;
			r = 0;
			break;
		}
	}
	free(data);
	if (r < 0)
		return tr_failf(tr, -PTD_EFORMAT, "%s: no AT_ENTRY in its %zu "
				"bytes", path, len);
	return 0;
}

/* An int3 written at @addr in stopped tracee @pid's memory (a private
 * copy of the page: the file is not touched); *@ret_word: the word it
 * replaced, which entry_unbreak puts back. */
static int entry_break(struct tracer *tr, pid_t pid, uint64_t addr,
		       long *ret_word)
{
	long w;

	errno = 0;
	w = ptrace(PTRACE_PEEKTEXT, pid, (void *)addr, NULL);
	if (errno)
		return tr_failf(tr, -errno, "cannot read the entry point %#"
				PRIx64 " of process %d: %s", addr, (int)pid,
				strerror(errno));
	if (ptrace(PTRACE_POKETEXT, pid, (void *)addr,
		   (void *)((w & ~0xffL) | 0xcc)) < 0)
		return tr_failf(tr, -errno, "cannot set a breakpoint at the "
				"entry point %#" PRIx64 " of process %d: %s",
				addr, (int)pid, strerror(errno));
	*ret_word = w;
	return 0;
}

static int entry_unbreak(struct tracer *tr, pid_t pid, uint64_t addr,
			 long word)
{
	if (ptrace(PTRACE_POKETEXT, pid, (void *)addr, (void *)word) < 0)
		return tr_failf(tr, -errno, "cannot restore the entry point %#"
				PRIx64 " of process %d: %s", addr, (int)pid,
				strerror(errno));
	return 0;
}

/* opt->start == PTD_SWPT_START_ENTRY: run the program untraced, at full
 * speed, from its exec stop to its entry point (the dynamic loader and the
 * libraries' constructors run meanwhile), then return with it stopped
 * there, as spawn_to_exec returns at the exec stop.  A breakpoint (int3)
 * written at the entry stops it, and the byte is put back before anything
 * is traced (the decoder reads the files, not this copy of the page).
 * (Not a hardware execute breakpoint, DR0, which writes nothing: some
 * hypervisors take the debug registers and never deliver their traps --
 * measured on a PVM guest, where the program ran past the entry to its
 * exit.)  An exec before the entry (a constructor that execs) replaces
 * the memory: the breakpoint goes to the new program's entry.  A thread
 * or process created before the entry cannot be followed from there:
 * that is refused (and the program killed, the copy of a forked child
 * too: PTRACE_O_EXITKILL). */
static int run_to_entry(struct tracer *tr, char *const argv[])
{
	struct user_regs_struct regs;
	uint64_t entry = 0;
	long word = 0;
	int status, r, sig = 0;

rearm:
	r = read_entry(tr, tr->pid, &entry);
	if (r < 0)
		return r;
	r = tr_get_regs(tr, tr->pid, &regs);
	if (r < 0)
		return r;
	if (regs.rip == entry)	/* no interpreter: nothing to skip */
		return 0;
	r = entry_break(tr, tr->pid, entry, &word);
	if (r < 0)
		return r;
	for (;;) {
		if (ptrace(PTRACE_CONT, tr->pid, NULL, (void *)(long)sig) < 0)
			return tr_failf(tr, -errno, "PTRACE_CONT: %s",
					strerror(errno));
		sig = 0;
		r = wait_pid(tr->pid, &status);
		if (r < 0)
			return tr_failf(tr, r, "waitpid: %s", ptd_strerror(r));
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			tr->leader_gone = true;
			return tr_failf(tr, -ECHILD, "'%s' ended before its "
					"entry point (%s %d)", argv[0],
					WIFEXITED(status) ? "exit status" :
					"signal", WIFEXITED(status) ?
					WEXITSTATUS(status) : WTERMSIG(status));
		}
		if (!WIFSTOPPED(status))
			continue;
		switch (status >> 16) {
		case PTRACE_EVENT_EXEC:
			goto rearm;
		case PTRACE_EVENT_CLONE:
		case PTRACE_EVENT_FORK:
		case PTRACE_EVENT_VFORK:
			return tr_failf(tr, -PTD_EUNSUPPORTED, "'%s' created a "
					"thread or process before its entry "
					"point (a library constructor?): it "
					"cannot be traced from the entry; "
					"trace it from the exec instead",
					argv[0]);
		case PTRACE_EVENT_EXIT:
			continue;
		case 0:
			break;
		default:
			continue;
		}
		if (WSTOPSIG(status) == SIGTRAP) {
			r = tr_get_regs(tr, tr->pid, &regs);
			if (r < 0)
				return r;
			/* the int3 ran: rip is past it */
			if (regs.rip == entry + 1)
				break;
		}
		sig = WSTOPSIG(status);	/* the program's own signal */
	}
	r = entry_unbreak(tr, tr->pid, entry, word);
	if (r < 0)
		return r;
	regs.rip = entry;
	if (ptrace(PTRACE_SETREGS, tr->pid, NULL, &regs) < 0)
		return tr_failf(tr, -errno, "process %d: PTRACE_SETREGS: %s",
				(int)tr->pid, strerror(errno));
	return 0;
}

/* The first stop of the new program: the main thread's stream begins, and
 * the initial executable mappings are the first timeline events, at its
 * position 0. */
static int start_main(struct tracer *tr, bool at_exec)
{
	struct user_regs_struct regs;
	struct tthread *t;
	int r;

	r = tr_get_regs(tr, tr->pid, &regs);
	if (r < 0)
		return r;
	r = tr_check_64bit(tr, &regs);
	if (r < 0)
		return r;
	r = tr_thread_new(tr, tr->pid, &t);
	if (r < 0)
		return r;
	r = tr_maps_load_all(tr);
	if (r == 0)
		r = tr_filter_resolve(tr);
	if (r < 0)
		return r;
	t->started = true;
	t->after_exec = at_exec;
	r = tr_prepare(tr, t, regs.rip, regs.rax);
	if (r < 0)
		return r;
	return tr_resume(tr, t, 0);
}

int tr_prepare_outdir(const char *dir, struct ptd_diag *diag)
{
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (mkdir(dir, 0755) == 0)
		return 0;
	if (errno != EEXIST)
		return ptd_diagf(diag, -errno, "cannot create '%s': %s", dir,
				 strerror(errno));
	d = opendir(dir);
	if (!d)
		return ptd_diagf(diag, -errno, "cannot open '%s': %s", dir,
				 strerror(errno));
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			r = ptd_diagf(diag, -EEXIST, "'%s' is not empty",
				      dir);
			break;
		}
	(void)closedir(d);
	return r;
}

/* vendor/family/model/stepping of the first CPU; unknown if not Intel. */
static void read_cpu(struct pt_cpu *cpu)
{
	_cleanup_free_ char *text = NULL;
	const char *keys[] = { "cpu family", "model", "stepping" };
	uint64_t vals[3] = { 0 };
	size_t len;

	memset(cpu, 0, sizeof(*cpu));
	cpu->vendor = pcv_unknown;
	if (ptd_file_read_all("/proc/cpuinfo", 1u << 24, &text, &len) < 0)
		return;
	if (!strstr(text, "vendor_id\t: GenuineIntel\n"))
		return;
	for (size_t i = 0; i < PTD_ARRAY_SIZE(keys); i++) {
		char key[32];
		const char *p;

		snprintf(key, sizeof(key), "\n%s\t", keys[i]);
		p = strstr(text, key);
		if (!p || !(p = strchr(p + 1, ':')))
			return;
		p += 1 + strspn(p + 1, " ");
		if (ptd_parse_u64n(p, strcspn(p, "\n"), 10, &vals[i]) < 0)
			return;
	}
	cpu->vendor = pcv_intel;
	cpu->family = (uint16_t)vals[0];
	cpu->model = (uint8_t)vals[1];
	cpu->stepping = (uint8_t)vals[2];
}

/* ---- capture, cleanup ------------------------------------------------ */

int tr_save_capture(struct tracer *tr, char *const argv[])
{
	struct ptd_capture c = { 0 };
	struct ptd_capture_thread *th;
	int r;

	th = calloc(tr->nth ? tr->nth : 1, sizeof(*th));
	if (!th)
		return -ENOMEM;
	for (size_t i = 0; i < tr->nth; i++) {
		const struct tthread *t = tr->th[i];

		th[i].tid = t->tid;
		th[i].first_seq = t->first_seq;
		th[i].has_end = true;
		th[i].end_seq = t->gen ? tr->tl.next_seq : t->end_seq;
		th[i].pt = file_name(tr, t, "pt", false);
		th[i].truth = file_name(tr, t, "truth", false);
		if (!th[i].pt || !th[i].truth) {
			r = -ENOMEM;
			goto out;
		}
		th[i].insns = t->insns;
		th[i].pt_bytes = t->pt_bytes;
	}
	c.dir = (char *)tr->opt->outdir;
	c.pid = tr->pid;
	c.argv = (char **)argv;
	read_cpu(&c.cpu);
	c.config = tr->opt->gen;
	c.config.sink = NULL;
	c.config.sink_ctx = NULL;
	c.addr_filter = tr->fcfg;
	c.filter = (char *)tr->opt->filter_text;
	/* The clock the readers were given, or (with TSC packets) this
	 * process's, measured over the whole trace by now. */
	if (tr->opt->clock) {
		c.has_clock = true;
		c.clock = *tr->opt->clock;
	} else if (tr->opt->gen.tsc) {
		c.has_clock = ptd_perf_clock_calibrate(&c.clock, NULL) == 0;
	}
	if (c.has_clock && tr->opt->wallref) {
		c.has_wallref = true;
		c.wallref = *tr->opt->wallref;
	} else if (c.has_clock) {
		/* perf time is CLOCK_MONOTONIC here (perf/time.h) */
		c.has_wallref = ptd_perf_wallref_sample(NULL, CLOCK_MONOTONIC,
							&c.wallref) == 0;
	}
	c.threads = th;
	c.nthreads = tr->nth;
	c.tl = tr->tl;
	c.exited = tr->exited && !tr->detaching;
	c.exit_code = tr->exit_code;
	c.exit_signal = tr->exit_signal;
	c.detached = tr->detaching;
	r = ptd_capture_save(&c, tr->diag);
out:
	for (size_t i = 0; i < tr->nth; i++) {
		free(th[i].pt);
		free(th[i].truth);
	}
	free(th);
	return r;
}

/* Wait until @tid is gone, letting it go on from any stop. */
static void reap_task(pid_t tid)
{
	int status;

	for (;;) {
		if (wait_pid(tid, &status) < 0 || WIFEXITED(status) ||
		    WIFSIGNALED(status))
			return;
		(void)ptrace(PTRACE_CONT, tid, NULL, NULL);
	}
}

/* On failure: kill the target and collect every task we trace.  The
 * leader's exit is reported only after every other thread's, so it is
 * collected last. */
static void kill_all(struct tracer *tr)
{
	if (tr->pid <= 0)
		return;
	if (!tr->leader_gone)
		(void)kill(tr->pid, SIGKILL);
	for (size_t i = 0; i < tr->nforks; i++) {
		if (tr->forks[i].detached)
			continue;
		(void)kill(tr->forks[i].pid, SIGKILL);
		reap_task(tr->forks[i].pid);
	}
	for (size_t i = 0; i < tr->nth; i++) {
		if (tr->th[i]->reaped || tr->th[i]->tid == tr->pid)
			continue;
		reap_task(tr->th[i]->tid);
		tr->th[i]->reaped = true;
	}
	if (!tr->leader_gone)
		reap_task(tr->pid);
	tr->leader_gone = true;
}

void tr_tracer_free(struct tracer *tr)
{
	tr_fast_free(tr);
	for (size_t i = 0; i < tr->nth; i++)
		thread_free(tr->th[i]);
	free(tr->th);
	free(tr->forks);
	free(tr->snaps);
	ptd_insncache_free(tr->ic);
	ptd_maps_fini(&tr->maps);
	ptd_timeline_fini(&tr->tl);
}

void tr_fill_result(const struct tracer *tr, struct ptd_swpt_result *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->pid = tr->pid;
	ret->insns = tr->insns;
	ret->steps = tr->steps;
	ret->branch = tr->branch;
	ret->runs = tr->runs;
	ret->emulated = tr->emulated;
	ret->pt_bytes = tr->swept_pt_bytes;
	for (size_t i = 0; i < tr->nth; i++)
		ret->pt_bytes += tr->th[i]->pt_bytes;
	ret->threads = tr->nbegun;
	ret->max_threads_held = (unsigned)tr->max_held;
	ret->forks_detached = tr->forks_detached;
	ret->exited = tr->exited && !tr->detaching;
	ret->exit_code = tr->exit_code;
	ret->exit_signal = tr->exit_signal;
	ret->detached = tr->detaching;
	ret->addr_filter = tr->fcfg;
	ret->filter_pending = tr->fpending;
}

int tr_tracer_init(struct tracer *tr, const struct ptd_swpt_options *opt,
		   struct ptd_diag *diag)
{
	int r;

	tr->memfd = -1;
	tr->opt = opt;
	tr->diag = diag;
	tr->branch = opt->step != PTD_SWPT_STEP_SINGLE;
	ptd_timeline_init(&tr->tl);
	r = tr_fast_init(tr);
	if (r < 0)
		return r;
	r = ptd_insncache_new(0, &tr->ic);
	if (r < 0)
		return r;
	return opt->outdir ? tr_prepare_outdir(opt->outdir, diag) : 0;
}

int ptd_swpt_run(char *const argv[], const struct ptd_swpt_options *opt,
		 struct ptd_swpt_result *ret, struct ptd_diag *diag)
{
	struct tracer tr = { 0 };
	int pfd[2], r;

	if (!argv || !argv[0] || !opt || (!opt->outdir && !opt->out))
		return -EINVAL;
	r = tr_tracer_init(&tr, opt, diag);
	if (r < 0)
		goto out;
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		r = -errno;
		goto out;
	}
	tr.pid = fork();
	if (tr.pid == 0) {
		(void)close(pfd[0]);
		child_run(argv, opt->quiet_target, pfd[1]);
	}
	(void)close(pfd[1]);
	if (tr.pid < 0) {
		r = tr_failf(&tr, -errno, "fork: %s", strerror(errno));
		(void)close(pfd[0]);
		goto out;
	}
	r = spawn_to_exec(&tr, argv, pfd[0]);
	(void)close(pfd[0]);
	if (r == 0 && opt->start == PTD_SWPT_START_ENTRY)
		r = run_to_entry(&tr, argv);
	if (r == 0)
		r = start_main(&tr, opt->start != PTD_SWPT_START_ENTRY);
	if (r == 0)
		r = tr_trace_loop(&tr);
	/* streams of threads still open (an error) end where they stand */
	for (size_t i = 0; r == 0 && i < tr.nth; i++)
		r = tr_thread_finish(&tr, tr.th[i], tr.th[i]->ip);
	if (r == 0 && opt->outdir)
		r = tr_save_capture(&tr, argv);
	if (r < 0)
		kill_all(&tr);
	else if (ret)
		tr_fill_result(&tr, ret);
out:
	tr_tracer_free(&tr);
	return r;
}
