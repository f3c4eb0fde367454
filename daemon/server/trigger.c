/* SPDX-License-Identifier: MIT */
/*
 * Triggers (srv.h): uprobes on a session's process, each hit reported by
 * the BPF program of daemon/bpf/trigger.bpf.c through its ring buffer,
 * which the loop polls (EP_TRIGGER) like any other fd.  Or a kernel
 * tracepoint (snapshot only): a hit whenever a thread of the process runs
 * into it; nothing is written into the process, so any source takes it.
 *
 * A trigger names an instruction: a symbol of a file the process maps, or
 * a file offset.  It is resolved against the process as it is when the
 * trigger is given (its /proc/PID/maps; the file opened through
 * /proc/PID/map_files, or /proc/PID/root/PATH checked to be the mapped
 * file by device and inode), and the kernel's uprobe is registered on that
 * file (by /proc/self/fd/N: the file resolved, not whatever the path names
 * later), in that process only.  Every thread of the process that runs
 * the instruction is a hit.
 *
 * The snapshot action: each hit queues a snapshot (at most SRV_HITQ wait
 * per session; more are counted as dropped), taken one after the other
 * through the snapshot path a snapshot request takes
 * (ptd_session_snapshot); its records are preceded in every subscriber's
 * stream by a trigger record naming the trigger, the thread and the time
 * (sessions.c writes it with the snapshot's begin marker).  The snapshot
 * is taken when the loop reads the hit, so it holds the trace up to a
 * little after the hit: the hitting thread's trace contains the
 * instruction, as long as its snapshot_size holds what it ran since.
 *
 * The software source and uprobes: the kernel writes an INT3 over the
 * instruction, which the tracer would read as code, and a step across it
 * ends in a SIGTRAP the tracer would deliver (killing the process); the
 * source is told of every uprobe before it is registered and after it is
 * gone (ptd_session_uprobe; swpt/tracer.h says what it does with it).  Its
 * branch mode stops at conditional branches, returns, indirect jumps and
 * calls with an INT3 of its own, which the kernel's would take: a trigger
 * on such an instruction is refused for it (single-step mode takes it),
 * as are syscalls and 5-byte NOPs (which the kernel may turn into a call
 * instead of an INT3), when the trigger is installed (the source is known
 * once the attach has begun).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "aspace/elf.h"
#include "aspace/maps.h"
#include "common/strutil.h"
#include "sym/symtab.h"
#include "daemon/log.h"
#include "daemon/server/srv.h"
#include "x86/insn.h"

static unsigned triggers_of(const struct ptd_server *s, uid_t uid,
			    unsigned *all)
{
	const struct srv_trigger *t;
	unsigned n = 0;

	*all = 0;
	for (t = s->triggers; t; t = t->next) {
		n += t->owner == uid;
		(*all)++;
	}
	return n;
}

/* The program, loaded with the first trigger; refused: false, @diag and
 * *@code say why. */
static int triggers_ready(struct ptd_server *s, struct ptd_diag *diag)
{
	int r;

	if (s->trig)
		return 0;
	r = ptd_triggers_new(&s->trig, diag);
	if (r < 0)
		return r;
	s->trig_ep.kind = EP_TRIGGER;
	s->trig_ep.fd = ptd_triggers_fd(s->trig);
	r = srv_ep_add(s, &s->trig_ep, EPOLLIN);
	if (r < 0) {
		ptd_triggers_free(s->trig);
		s->trig = NULL;
		return ptd_diagf(diag, r, "epoll: %s", strerror(-r));
	}
	ptd_log_info("trigger program loaded (BPF, uprobes)");
	return 0;
}

/* No trigger left: unload the program (closing its fd takes it out of
 * epoll). */
static void triggers_maybe_unload(struct ptd_server *s)
{
	if (s->triggers || !s->trig)
		return;
	ptd_triggers_free(s->trig);
	s->trig = NULL;
	ptd_log_info("trigger program unloaded (no trigger left)");
}

static const char *err_code(int r)
{
	switch (r) {
	case -EPERM:
	case -EACCES:
		return PTD_ERR_PERMISSION;
	case -PTD_EUNSUPPORTED:
		return PTD_ERR_UNSUPPORTED;
	case -PTD_ELIMIT:
		return PTD_ERR_LIMIT;
	case -ENOENT:
		return PTD_ERR_NO_SUCH_FILE;
	case -ESRCH:
		return PTD_ERR_NO_SUCH_PROCESS;
	case -ENOMEM:
		return PTD_ERR_INTERNAL;
	default:
		return PTD_ERR_BAD_REQUEST;
	}
}

/* What may take a trigger of @sp's on session @ss (mode, limits, BPF):
 * 0, or an error with a message. */
static int trigger_allowed(struct ptd_server *s, uid_t uid,
			   const struct srv_session *ss, unsigned adding,
			   struct ptd_diag *diag)
{
	unsigned all, mine = triggers_of(s, uid, &all);

	if (mine + adding > s->cfg.max_triggers_per_user)
		return ptd_diagf(diag, -PTD_ELIMIT, "uid %u has %u triggers and "
				 "asks for %u more: at most %u "
				 "(max_triggers_per_user)", (unsigned)uid, mine,
				 adding, s->cfg.max_triggers_per_user);
	if (all + adding > PTD_TRIGGERS_MAX)
		return ptd_diagf(diag, -PTD_ELIMIT, "ptd has %u triggers, all "
				 "users together: no more fit (%u)", all,
				 PTD_TRIGGERS_MAX);
	return triggers_ready(s, diag);
}

static bool name_matches(const struct ptd_map *m, const char *file)
{
	const char *base;

	if (m->kind != PTD_MAP_FILE)
		return false;
	if (file[0] == '/')
		return !strcmp(m->path, file);
	base = strrchr(m->path, '/');
	return !strcmp(base ? base + 1 : m->path, file);
}

static bool same_file(const struct ptd_map *m, const struct stat *st)
{
	return S_ISREG(st->st_mode) && st->st_ino == m->inode &&
	       major(st->st_dev) == m->dev_major &&
	       minor(st->st_dev) == m->dev_minor;
}

/* The file of mapping @m of @pid, open: through map_files (the mapping
 * itself), else through the process's root by its path, checked to be
 * the mapped file. */
static int open_mapped(const struct ptd_server *s, pid_t pid,
		       const struct ptd_map *m, struct ptd_diag *diag)
{
	char path[PATH_MAX + 64];
	struct stat st;
	int fd, k;

	k = snprintf(path, sizeof(path), "%s/%d/map_files/%" PRIx64 "-%"
		     PRIx64, s->procroot, (int)pid, m->start, m->end);
	fd = k > 0 && (size_t)k < sizeof(path)
		     ? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
		     : -1;
	if (fd >= 0 && fstat(fd, &st) == 0 && same_file(m, &st))
		return fd;
	if (fd >= 0)
		close(fd);
	k = snprintf(path, sizeof(path), "%s/%d/root%s", s->procroot,
		     (int)pid, m->path);
	fd = k > 0 && (size_t)k < sizeof(path)
		     ? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
		     : -1;
	if (fd < 0)
		return ptd_diagf(diag, -errno, "cannot open '%s' as pid %d "
				 "maps it: %s", m->path, (int)pid,
				 strerror(errno));
	if (fstat(fd, &st) < 0 || !same_file(m, &st)) {
		close(fd);
		return ptd_diagf(diag, -PTD_EIDENTITY, "'%s' is no longer the "
				 "file pid %d mapped (device %u:%u, inode %"
				 PRIu64 ")", m->path, (int)pid, m->dev_major,
				 m->dev_minor, m->inode);
	}
	return fd;
}


/* The file offset of the first byte of function @name of the ELF file open
 * at @fd (path @path), through the PT_LOAD segment holding it: where a
 * uprobe on it goes.  The symbol tables are read as symbol resolution
 * reads them (lib/sym/symtab.h: bounded, every offset checked); a name
 * two functions at different addresses bear is refused, not guessed. */
static int symbol_offset(int fd, const char *path, const char *text,
			 const char *name, uint64_t *ret,
			 struct ptd_diag *diag)
{
	struct ptd_symtab *t = NULL;
	uint64_t addr = 0;
	unsigned n;
	int r;

	r = ptd_symtab_new(&t);
	if (r < 0)
		return ptd_diagf(diag, r, "out of memory");
	r = ptd_symtab_add_elf(t, fd, path, 0, NULL, diag);
	if (r < 0)
		goto out;
	n = ptd_symtab_find(t, name, &addr);
	if (n == 0)
		r = ptd_diagf(diag, -ENOENT, "trigger '%.200s': '%s' has no "
			      "function '%s' (its .symtab and .dynsym define "
			      "none of that name)", text, path, name);
	else if (n > 1)
		r = ptd_diagf(diag, -EINVAL, "trigger '%.200s': '%s' has more "
			      "than one function '%s': give its file offset",
			      text, path, name);
	else if (ptd_symtab_offset_of(t, addr, ret) < 0)
		r = ptd_diagf(diag, -ENOENT, "trigger '%.200s': function '%s' "
			      "(%#" PRIx64 ") is in no loaded segment's bytes "
			      "of '%s'", text, name, addr, path);
out:
	ptd_symtab_free(t);
	return r;
}

/* Whether the kernel has tracepoint @c:@n: its directory in tracefs
 * (where libbpf finds its id), mounted where systemd and the kernel's
 * own documentation put it, or under debugfs. */
static int tracepoint_check(const char *text, const char *c, const char *n,
			    struct ptd_diag *diag)
{
	static const char *const roots[] = { "/sys/kernel/tracing",
					     "/sys/kernel/debug/tracing" };
	char path[256];
	bool tracefs = false;

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		(void)snprintf(path, sizeof(path), "%s/events", roots[i]);
		if (access(path, X_OK) != 0)
			continue;
		tracefs = true;
		(void)snprintf(path, sizeof(path), "%s/events/%s/%s/id",
			       roots[i], c, n);
		if (access(path, R_OK) == 0)
			return 0;
	}
	if (!tracefs)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED, "trigger '%.200s': "
				 "tracefs is not mounted where ptd can see it "
				 "(/sys/kernel/tracing): tracepoints cannot be "
				 "found", text);
	return ptd_diagf(diag, -ENOENT, "trigger '%.200s': the kernel has no "
			 "tracepoint %s:%s", text, c, n);
}

/* A tracepoint trigger of @sp on @ss (snapshot only: a tracepoint has no
 * instruction of the process to gate its records at). */
static int tracepoint_resolve(struct srv_session *ss, uid_t owner,
			      const char *text,
			      const struct ptd_trigger_spec *sp,
			      struct srv_trigger **ret, struct ptd_diag *diag)
{
	struct srv_trigger *t;
	int r;

	if (sp->action != PTD_TRIGGER_SNAPSHOT)
		return ptd_diagf(diag, -EINVAL, "trigger '%.200s': %s needs an "
				 "instruction of the process to start or stop "
				 "its records at; a tracepoint has none (use a "
				 "function, or snapshot)", text,
				 ptd_trigger_action_name(sp->action));
	r = tracepoint_check(text, sp->tp_category, sp->tp_name, diag);
	if (r < 0)
		return r;
	t = calloc(1, sizeof(*t));
	if (!t || !(t->text = strdup(text))) {
		free(t);
		return -ENOMEM;
	}
	t->ss = ss;
	t->owner = owner;
	t->action = sp->action;
	t->tracepoint = true;
	(void)ptd_strlcpy(t->tp_category, sp->tp_category,
			  sizeof(t->tp_category));
	(void)ptd_strlcpy(t->tp_name, sp->tp_name, sizeof(t->tp_name));
	t->fd = -1;
	*ret = t;
	return 0;
}

/* Resolve @text against @ss's process into a new trigger (not yet
 * installed, not yet listed).  0 or an error with a message. */
static int trigger_resolve(struct ptd_server *s, struct srv_session *ss,
			   uid_t owner, const char *text,
			   struct srv_trigger **ret, struct ptd_diag *diag)
{
	struct ptd_trigger_spec *sp = calloc(1, sizeof(*sp));
	struct ptd_maps maps = { 0 };
	const struct ptd_map *m = NULL, *x = NULL;
	struct ptd_x86_insn insn;
	struct srv_trigger *t = NULL;
	uint8_t bytes[16];
	struct stat st;
	ssize_t n;
	size_t i;
	int r, fd = -1;

	*ret = NULL;
	if (!sp)
		return -ENOMEM;
	r = ptd_trigger_spec_parse(text, sp, diag);
	if (r < 0)
		goto out;
	if (sp->action == PTD_TRIGGER_SNAPSHOT &&
	    ss->mode != PTD_MODE_SNAPSHOT) {
		r = ptd_diagf(diag, -EINVAL, "trigger '%.200s': a snapshot "
			      "trigger needs a session in snapshot mode (attach "
			      "with \"mode\": \"snapshot\", ptctl attach "
			      "--snapshot)", text);
		goto out;
	}
	if (sp->action != PTD_TRIGGER_SNAPSHOT &&
	    ss->mode != PTD_MODE_FULL) {
		r = ptd_diagf(diag, -EINVAL, "trigger '%.200s': start and stop "
			      "triggers need a session in full mode", text);
		goto out;
	}
	if (sp->tracepoint) {
		r = tracepoint_resolve(ss, owner, text, sp, ret, diag);
		goto out;
	}
	r = ptd_maps_read_pid(s->procroot, ss->pid, &maps, diag);
	if (r < 0)
		goto out;
	for (i = 0; i < maps.n; i++) {
		const struct ptd_map *v = &maps.v[i];

		if (!name_matches(v, sp->file))
			continue;
		if (m && (m->inode != v->inode || m->dev_major != v->dev_major ||
			  m->dev_minor != v->dev_minor)) {
			r = ptd_diagf(diag, -EINVAL, "trigger '%.200s': pid %d "
				      "maps two files named '%s' (%s, %s): give "
				      "the path", text, (int)ss->pid,
				      sp->file, m->path, v->path);
			goto out;
		}
		if (!m)
			m = v;
	}
	if (!m) {
		r = ptd_diagf(diag, -ENOENT, "trigger '%.200s': pid %d maps no "
			      "file %s '%s'", text, (int)ss->pid,
			      sp->file[0] == '/' ? "at" : "named", sp->file);
		goto out;
	}
	fd = open_mapped(s, ss->pid, m, diag);
	if (fd < 0) {
		r = fd;
		goto out;
	}
	if (sp->has_offset) {
		r = fstat(fd, &st) < 0 ? -errno : 0;
		if (r == 0 && sp->offset >= (uint64_t)st.st_size)
			r = ptd_diagf(diag, -EINVAL, "trigger '%.200s': offset "
				      "%#" PRIx64 " is past the end of '%s' (%"
				      PRIu64 " bytes)", text, sp->offset,
				      m->path, (uint64_t)st.st_size);
		if (r < 0)
			goto out;
	} else {
		r = symbol_offset(fd, m->path, text, sp->symbol, &sp->offset,
				  diag);
		if (r < 0)
			goto out;
	}
	/* where the process runs it: an executable mapping of the file */
	for (i = 0; i < maps.n && !x; i++) {
		const struct ptd_map *v = &maps.v[i];

		if (v->kind == PTD_MAP_FILE && v->inode == m->inode &&
		    v->dev_major == m->dev_major &&
		    v->dev_minor == m->dev_minor &&
		    (v->prot & PTD_MAP_PROT_X) && sp->offset >= v->offset &&
		    sp->offset - v->offset < v->end - v->start)
			x = v;
	}
	if (!x) {
		r = ptd_diagf(diag, -EINVAL, "trigger '%.200s': offset %#" PRIx64
			      " of '%s' is in no executable mapping of pid %d",
			      text, sp->offset, m->path, (int)ss->pid);
		goto out;
	}
	n = pread(fd, bytes, sizeof(bytes), (off_t)sp->offset);
	if (n <= 0 || ptd_x86_decode(bytes, (size_t)n,
				     x->start + (sp->offset - x->offset),
				     ptem_64bit, &insn) < 0) {
		r = ptd_diagf(diag, -EINVAL, "trigger '%.200s': no instruction "
			      "decodes at offset %#" PRIx64 " of '%s'", text,
			      sp->offset, m->path);
		goto out;
	}
	t = calloc(1, sizeof(*t));
	if (!t || !(t->text = strdup(text)) || !(t->file = strdup(m->path))) {
		r = -ENOMEM;
		goto out;
	}
	t->ss = ss;
	t->owner = owner;
	t->action = sp->action;
	(void)ptd_strlcpy(t->symbol, sp->symbol, sizeof(t->symbol));
	t->offset = sp->offset;
	t->site.dev_major = m->dev_major;
	t->site.dev_minor = m->dev_minor;
	t->site.inode = m->inode;
	t->site.offset = sp->offset;
	t->site.len = insn.size;
	t->kind = insn.kind;
	t->nop5 = insn.size == 5 && bytes[0] == 0x0f && bytes[1] == 0x1f;
	memcpy(t->site.insn, bytes, insn.size);
	t->vaddr = x->start + (sp->offset - x->offset);
	t->fd = fd;
	fd = -1;
	*ret = t;
	t = NULL;
	r = 0;
out:
	if (t) {
		free(t->text);
		free(t->file);
		free(t);
	}
	if (fd >= 0)
		close(fd);
	ptd_maps_fini(&maps);
	free(sp);
	return r;
}

/* A start/stop trigger's gate in its session, or it gone (@add false). */
static int gate_set(struct srv_trigger *t, bool add, struct ptd_diag *diag)
{
	struct srv_session *ss = t->ss;
	unsigned n, i;
	int r = 0;

	if (t->action == PTD_TRIGGER_SNAPSHOT || add == t->gated)
		return 0;
	if (!atomic_load(&ss->gate_init)) {
		if (!add)
			return 0;
		(void)pthread_mutex_init(&ss->gate_lock, NULL);
		atomic_store_explicit(&ss->gate_init, true,
				      memory_order_release);
	}
	(void)pthread_mutex_lock(&ss->gate_lock);
	n = atomic_load(&ss->ngates);
	if (add && n == SRV_GATES) {
		r = ptd_diagf(diag, -PTD_ELIMIT, "session %" PRIu64 " has %u "
			      "start and stop triggers: no more", ss->id,
			      SRV_GATES);
	} else if (add) {
		ss->gates[n] = (struct srv_gate){ t->vaddr, t->id,
						  t->action ==
							  PTD_TRIGGER_START };
		atomic_store(&ss->ngates, n + 1);
		t->gated = true;
	} else {
		t->gated = false;
		for (i = 0; i < n; i++)
			if (ss->gates[i].trigger == t->id) {
				ss->gates[i] = ss->gates[n - 1];
				atomic_store(&ss->ngates, n - 1);
				break;
			}
	}
	(void)pthread_mutex_unlock(&ss->gate_lock);
	return r;
}

static struct srv_gate_thread *gate_thread(struct srv_session *ss, pid_t tid,
					   bool on)
{
	struct srv_gate_thread *v;

	for (size_t i = 0; i < ss->ngate_th; i++)
		if (ss->gate_th[i].tid == tid)
			return &ss->gate_th[i];
	if (ss->ngate_th == ss->capgate_th) {
		size_t cap = ss->capgate_th ? 2 * ss->capgate_th : 16;

		v = realloc(ss->gate_th, cap * sizeof(*v));
		if (!v)
			return NULL;
		ss->gate_th = v;
		ss->capgate_th = cap;
	}
	v = &ss->gate_th[ss->ngate_th++];
	v->tid = tid;
	v->on = on;
	return v;
}

static void gate_record(struct srv_session *ss, const struct srv_gate *g,
			const struct ptd_record *rec)
{
	int k = snprintf(ss->gate_line, sizeof(ss->gate_line),
			 "{\"type\":\"trigger\",\"session\":%" PRIu64
			 ",\"trigger\":%" PRIu32 ",\"action\":\"%s\","
			 "\"pid\":%d,\"tid\":%d,\"ip\":\"%#" PRIx64 "\"}\n",
			 ss->id, g->trigger, g->start ? "start" : "stop",
			 (int)ss->pid, (int)rec->tid, g->ip);

	if (k > 0 && (size_t)k < sizeof(ss->gate_line))
		ptd_fanout_line(ss->fan, ss->gate_line, (size_t)k);
}

/* Exact, per thread: a thread's records pass from an instruction at a
 * start trigger's address (its first, with a trigger record before it)
 * up to one at a stop trigger's (its last, a trigger record after it);
 * with no start trigger a thread's records pass until a stop.  Decided
 * on the decoded instructions themselves, not on the uprobe's hits
 * (which the loop reads later), so it is where the thread ran them. */
bool srv_gate_pass(struct srv_session *ss, const struct ptd_record *rec)
{
	const struct srv_gate *hit = NULL;
	struct srv_gate_thread *th;
	bool any_start = false, pass;
	unsigned n, i;

	(void)pthread_mutex_lock(&ss->gate_lock);
	n = atomic_load(&ss->ngates);
	for (i = 0; i < n; i++) {
		any_start |= ss->gates[i].start;
		if (rec->type == PTD_REC_INSN && ss->gates[i].ip ==
						      rec->u.insn.ip)
			hit = &ss->gates[i];
	}
	th = gate_thread(ss, rec->tid, !any_start);
	if (!th) {
		(void)pthread_mutex_unlock(&ss->gate_lock);
		return true;
	}
	if (hit && hit->start && !th->on) {
		th->on = true;
		gate_record(ss, hit, rec);
	}
	pass = th->on;
	if (hit && !hit->start && th->on) {
		th->on = false;
		/* after this record: the caller delivers it first */
		ptd_fanout_record(ss->fan, rec);
		gate_record(ss, hit, rec);
		pass = false;
	}
	(void)pthread_mutex_unlock(&ss->gate_lock);
	return pass;
}

static void trigger_free(struct srv_trigger *t)
{
	struct srv_session *ss = t->ss;

	(void)gate_set(t, false, NULL);

	/* the uprobe first, then the source forgets it */
	ptd_uprobe_free(t->probe);
	if (t->told_source && ss && ss->s)
		(void)ptd_session_uprobe(ss->s, false, &t->site);
	if (t->fd >= 0)
		close(t->fd);
	free(t->text);
	free(t->file);
	free(t);
}

/* Whether the software source can trace exactly across a uprobe on @t's
 * instruction (the file comment says why not): 0 or -PTD_EUNSUPPORTED. */
static int software_refusal(const struct srv_trigger *t,
			    struct ptd_diag *diag)
{
	const char *why = NULL;

	switch (t->kind) {
	case PTD_X86_SYSCALL:
	case PTD_X86_INT:
	case PTD_X86_FAR:
		why = "a syscall, interrupt or far transfer";
		break;
	case PTD_X86_COND:
	case PTD_X86_RET:
	case PTD_X86_JMP_INDIRECT:
	case PTD_X86_CALL_INDIRECT:
		if (!t->ss->single_step)
			why = "a branch the software source's branch mode "
			      "stops at with an INT3 of its own (attach with "
			      "\"step\": \"single\", or put the trigger on "
			      "another instruction)";
		break;
	case PTD_X86_OTHER:
	case PTD_X86_JMP_DIRECT:
	case PTD_X86_CALL_DIRECT:
	case PTD_X86_PTWRITE:
		if (t->nop5)
			why = "a 5-byte NOP (the kernel may turn a uprobe "
			      "there into a call)";
		break;
	}
	if (!why)
		return 0;
	return ptd_diagf(diag, -PTD_EUNSUPPORTED, "trigger '%.200s': the "
			 "instruction at offset %#" PRIx64 " of '%s' is %s: "
			 "the software source cannot trace exactly across a "
			 "uprobe there", t->text, t->offset, t->file, why);
}

/* Register @t's uprobe (the source told first). */
static int trigger_install(struct ptd_server *s, struct srv_trigger *t,
			   struct ptd_diag *diag)
{
	char path[64];
	int r;

	if (t->probe)
		return 0;
	if (t->tracepoint)	/* nothing in the process changes */
		return ptd_triggers_attach_tracepoint(
			s->trig, t->tp_category, t->tp_name, t->ss->pid, t->id,
			&t->probe, diag);
	if (t->ss->source == PTD_SOURCE_SOFTWARE &&
	    (r = software_refusal(t, diag)) < 0)
		return r;
	if ((r = gate_set(t, true, diag)) < 0)
		return r;
	r = ptd_session_uprobe(t->ss->s, true, &t->site);
	if (r < 0)
		return ptd_diagf(diag, r, "trigger '%.200s': %s", t->text,
				 ptd_strerror(r));
	t->told_source = true;
	(void)snprintf(path, sizeof(path), "/proc/self/fd/%d", t->fd);
	r = ptd_triggers_attach(s->trig, path, t->offset, t->ss->pid, t->id,
				&t->probe, diag);
	if (r < 0) {
		(void)ptd_session_uprobe(t->ss->s, false, &t->site);
		t->told_source = false;
		(void)gate_set(t, false, NULL);
		return r;
	}
	close(t->fd);
	t->fd = -1;
	return 0;
}

static void trigger_link(struct ptd_server *s, struct srv_trigger *t)
{
	t->id = ++s->next_trigger_id;
	if (!t->id)
		t->id = ++s->next_trigger_id;
	t->next = s->triggers;
	s->triggers = t;
}

static void trigger_unlink(struct ptd_server *s, struct srv_trigger *t)
{
	struct srv_trigger **p;

	for (p = &s->triggers; *p; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			return;
		}
}

bool srv_triggers_attach_check(struct ptd_server *s, struct conn *c,
			       const struct ptd_request *req,
			       struct srv_session *ss)
{
	struct ptd_diag diag = { "" };
	int r;

	ss->single_step = req->single_step;
	r = trigger_allowed(s, ss->owner, ss, req->ntriggers, &diag);
	for (unsigned i = 0; r == 0 && i < req->ntriggers; i++) {
		struct srv_trigger *t;

		r = trigger_resolve(s, ss, ss->owner, req->triggers[i], &t,
				    &diag);
		if (r == 0)
			trigger_link(s, t);
		/* The gates before the session begins: its decode thread
		 * may deliver records before the loop installs the uprobes
		 * (a rule's process runs on at once), and a thread's first
		 * record decides whether it starts gated. */
		if (r == 0 && !t->tracepoint)
			r = gate_set(t, true, &diag);
	}
	if (r == 0)
		return true;
	srv_reply_error(c, req->id, err_code(r), "%s", diag.msg);
	/* attach_drop frees the session, and with it those resolved */
	return false;
}

int srv_triggers_install(struct ptd_server *s, struct srv_session *ss,
			 struct ptd_diag *diag)
{
	struct srv_trigger *t;
	int r;

	for (t = s->triggers; t; t = t->next)
		if (t->ss == ss && (r = trigger_install(s, t, diag)) < 0)
			return r;
	return 0;
}

void srv_triggers_drop(struct ptd_server *s, struct srv_session *ss)
{
	struct srv_trigger *t, *next;

	for (t = s->triggers; t; t = next) {
		next = t->next;
		if (t->ss != ss)
			continue;
		trigger_unlink(s, t);
		ptd_log_info("session %" PRIu64 ": trigger %u '%s' removed (%"
			     PRIu64 " hits)", ss->id, t->id, t->text, t->hits);
		trigger_free(t);
	}
	ss->hitq_n = 0;
	triggers_maybe_unload(s);
}

void srv_triggers_unload(struct ptd_server *s)
{
	while (s->triggers) {
		struct srv_trigger *t = s->triggers;

		s->triggers = t->next;
		trigger_free(t);
	}
	triggers_maybe_unload(s);
}

static cJSON *trigger_json(const struct srv_trigger *t)
{
	cJSON *o = cJSON_CreateObject();
	char hex[32];

	cJSON_AddNumberToObject(o, "trigger", t->id);
	cJSON_AddStringToObject(o, "spec", t->text);
	cJSON_AddStringToObject(o, "action", ptd_trigger_action_name(t->action));
	if (t->tracepoint) {
		char tp[2 * PTD_TRIGGER_TP_NAME_MAX + 2];

		(void)snprintf(tp, sizeof(tp), "%s:%s", t->tp_category,
			       t->tp_name);
		cJSON_AddStringToObject(o, "tracepoint", tp);
	} else {
		cJSON_AddStringToObject(o, "file", t->file);
		if (t->symbol[0])
			cJSON_AddStringToObject(o, "symbol", t->symbol);
		(void)snprintf(hex, sizeof(hex), "%#" PRIx64, t->offset);
		cJSON_AddStringToObject(o, "offset", hex);
	}
	cJSON_AddNumberToObject(o, "hits", (double)t->hits);
	cJSON_AddNumberToObject(o, "snapshots", (double)t->snapshots);
	cJSON_AddNumberToObject(o, "dropped", (double)t->dropped);
	return o;
}

void srv_triggers_status(struct ptd_server *s, const struct srv_session *ss,
			 cJSON *res)
{
	const struct srv_trigger *t;
	cJSON *a = NULL;

	for (t = s->triggers; t; t = t->next) {
		if (t->ss != ss)
			continue;
		if (!a && !(a = cJSON_AddArrayToObject(res, "triggers")))
			return;
		cJSON_AddItemToArray(a, trigger_json(t));
	}
	if (a && s->trig)
		cJSON_AddNumberToObject(res, "trigger_hits_missed",
					(double)ptd_triggers_missed(s->trig));
}

static struct srv_trigger *trigger_by_id(struct ptd_server *s, uint32_t id)
{
	struct srv_trigger *t;

	for (t = s->triggers; t; t = t->next)
		if (t->id == id)
			return t;
	return NULL;
}

/* Take the next queued hit's snapshot, unless one is being taken. */
void srv_trigger_pump(struct srv_session *ss)
{
	struct ptd_server *s = ss->srv;

	while (ss->hitq_n && !ss->snap_busy) {
		struct srv_hit *h = &ss->hitq[ss->hitq_head];
		struct srv_trigger *t = trigger_by_id(s, h->trigger);
		uint64_t seq;
		int r;

		ss->hitq_head = (ss->hitq_head + 1) % SRV_HITQ;
		ss->hitq_n--;
		if (!ss->s || ss->reaped)
			continue;
		ss->snap_hit = *h;
		ss->snap_hit_set = true;
		r = ptd_session_snapshot_upto(ss->s, h->tid,
					      (int64_t)h->ktime_ns, &seq);
		if (r < 0) {
			ss->snap_hit_set = false;
			if (t)
				t->dropped++;
			continue;
		}
		ss->snap_busy = true;	/* answered to nobody */
		if (t)
			t->snapshots++;
	}
}

/* CLOCK_REALTIME less CLOCK_MONOTONIC now, in ns (0: unknown). */
static int64_t wall_offset(void)
{
	struct timespec r, m;

	if (clock_gettime(CLOCK_REALTIME, &r) < 0 ||
	    clock_gettime(CLOCK_MONOTONIC, &m) < 0)
		return 0;
	return ((int64_t)r.tv_sec - m.tv_sec) * 1000000000 +
	       (r.tv_nsec - m.tv_nsec);
}

static void on_hit(void *ctx, const struct ptd_trigger_hit *h)
{
	struct ptd_server *s = ctx;
	struct srv_trigger *t = trigger_by_id(s, h->id);
	struct srv_session *ss;
	struct srv_hit *q;

	if (!t || (pid_t)h->pid != t->ss->pid)
		return;		/* removed since */
	ss = t->ss;
	t->hits++;
	if (t->action != PTD_TRIGGER_SNAPSHOT)
		return;		/* start/stop: decided on the decode */
	if (ss->hitq_n == SRV_HITQ) {
		t->dropped++;
		return;
	}
	q = &ss->hitq[(ss->hitq_head + ss->hitq_n) % SRV_HITQ];
	ss->hitq_n++;
	q->trigger = t->id;
	q->tid = (pid_t)h->tid;
	q->ip = h->ip;
	q->ktime_ns = h->ktime_ns;
	q->wall_ns = h->ktime_ns + (uint64_t)wall_offset();
	srv_trigger_pump(ss);
}

void srv_trigger_readable(struct ptd_server *s)
{
	if (s->trig)
		(void)ptd_triggers_drain(s->trig, on_hit, s);
}

void srv_cmd_trigger(struct ptd_server *s, struct conn *c,
		     const struct ptd_request *req)
{
	struct srv_session *ss = srv_session_find_ready(s, c, req);
	struct ptd_diag diag = { "" };
	struct srv_trigger *t;
	cJSON *res;
	int r;

	if (!ss)
		return;
	if (ss->path || ss->reaped || !ss->s) {
		srv_reply_error(c, req->id, PTD_ERR_NO_SUCH_SESSION,
				"session %" PRIu64 " %s", ss->id,
				ss->path ? "is a replay: it has no process"
					 : "has ended");
		return;
	}
	if (req->trigger_remove) {
		for (t = s->triggers; t; t = t->next)
			if (t->ss == ss && t->id == req->trigger_id)
				break;
		if (!t) {
			srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
					"session %" PRIu64 " has no trigger %"
					PRIu64, ss->id, req->trigger_id);
			return;
		}
		res = trigger_json(t);
		trigger_unlink(s, t);
		ptd_log_info("session %" PRIu64 ": trigger %u '%s' removed",
			     ss->id, t->id, t->text);
		trigger_free(t);
		triggers_maybe_unload(s);
		srv_reply_ok(c, req->id, res);
		return;
	}
	r = trigger_allowed(s, c->peer.uid, ss, 1, &diag);
	if (r == 0)
		r = trigger_resolve(s, ss, c->peer.uid, req->triggers[0], &t,
				    &diag);
	if (r < 0) {
		srv_reply_error(c, req->id, err_code(r), "%s", diag.msg);
		triggers_maybe_unload(s);
		return;
	}
	trigger_link(s, t);
	r = trigger_install(s, t, &diag);
	if (r < 0) {
		trigger_unlink(s, t);
		trigger_free(t);
		triggers_maybe_unload(s);
		srv_reply_error(c, req->id, err_code(r), "%s", diag.msg);
		return;
	}
	if (t->tracepoint)
		ptd_log_info("session %" PRIu64 ": uid %u: trigger %u '%s' on "
			     "tracepoint %s:%s", ss->id, (unsigned)c->peer.uid,
			     t->id, t->text, t->tp_category, t->tp_name);
	else
		ptd_log_info("session %" PRIu64 ": uid %u: trigger %u '%s' at "
			     "offset %#" PRIx64 " of %s", ss->id,
			     (unsigned)c->peer.uid, t->id, t->text, t->offset,
			     t->file);
	res = trigger_json(t);
	cJSON_AddNumberToObject(res, "session", (double)ss->id);
	srv_reply_ok(c, req->id, res);
}
