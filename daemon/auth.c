/* SPDX-License-Identifier: MIT */
/*
 * The rules, in the order they are checked:
 *  1. the target must exist and be a live user process (-ESRCH for a
 *     missing pid, a zombie, a kernel thread);
 *  2. Yama ptrace_scope=3 refuses everyone, root included: the kernel
 *     refuses PTRACE_ATTACH at scope 3 even with CAP_SYS_PTRACE, and ptd
 *     would otherwise be a way around that switch;
 *  3. root (uid 0) may trace any process (it holds CAP_SYS_PTRACE);
 *  4. Yama ptrace_scope=2 refuses every other user (admin only);
 *  5. ptrace_may_access(): the target's real, effective and saved uids
 *     must all be the peer's uid, and likewise its gids the peer's gid
 *     (a setuid/setgid program is out of reach, as with ptrace);
 *  6. the target must be dumpable (not PR_SET_DUMPABLE 0, not running a
 *     setuid binary);
 *  7. Yama ptrace_scope=1: the target must be the peer process or one of
 *     its descendants.  Yama also honours a PR_SET_PTRACER exception the
 *     target declared; that is not visible in proc, so ptd is stricter.
 * These are checked when the client asks; the daemon attaches moments
 * later with its own privileges.  Two gaps the session must close, as
 * these checks cannot: the pid may be reused in between (ptd_auth_pin
 * takes a pidfd with the check; the session checks that its process
 * still holds the pid once every thread is seized, and runs these rules
 * again then), and a traced target that execs a setuid binary DOES gain
 * its privileges, because the tracer (ptd) holds CAP_SYS_PTRACE
 * (ptracer_capable() in the kernel): on exec the session re-checks the
 * owner and detaches if it now fails.
 */
#include "daemon/auth.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/pidfd.h"
#include "common/strutil.h"

#define PF_KTHREAD 0x00200000u		/* include/linux/sched.h */
#define PROC_FILE_MAX (64 * 1024)
#define ANCESTRY_MAX 4096		/* a loop in a (fake) tree ends here */

int ptd_peer_get(int fd, struct ptd_peer *ret)
{
	struct ucred uc;
	socklen_t l = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0)
		return -errno;
	if (l != sizeof(uc))
		return -EINVAL;
	ret->pid = uc.pid;
	ret->uid = uc.uid;
	ret->gid = uc.gid;
	return 0;
}

bool ptd_auth_may_see(const struct ptd_peer *peer, uid_t owner)
{
	return peer->uid == 0 || peer->uid == owner;
}

/* What the checks need from /proc/PID/{status,stat}. */
struct proc_info {
	char state;		/* State: R, S, Z... */
	pid_t ppid;
	uint32_t uid[3];	/* real, effective, saved */
	uint32_t gid[3];
	unsigned long flags;	/* PF_* from stat */
};

/* Read procroot/PID/NAME; a vanished process is -ESRCH. */
static int proc_read(const char *procroot, pid_t pid, const char *name,
		     char **ret, struct ptd_diag *diag)
{
	char path[PATH_MAX];
	size_t len;
	int r;

	if (snprintf(path, sizeof(path), "%s/%d/%s", procroot, (int)pid,
		     name) >= (int)sizeof(path))
		return ptd_diagf(diag, -ENAMETOOLONG, "%s: path too long",
				 procroot);
	r = ptd_file_read_all(path, PROC_FILE_MAX, ret, &len);
	if (r == -ENOENT || r == -ESRCH)
		return ptd_diagf(diag, -ESRCH, "no such process: pid %d",
				 (int)pid);
	if (r < 0)
		return ptd_diagf(diag, r, "cannot read %s: %s", path,
				 ptd_strerror(r));
	if (memchr(*ret, '\0', len)) {
		free(*ret);
		*ret = NULL;
		return ptd_diagf(diag, -PTD_EFORMAT, "%s: NUL byte", path);
	}
	return 0;
}

/* Parse the whitespace-separated numbers after a "Key:" of status into
 * @out; exactly @want must be there when @exact, else at least @want. */
static int parse_fields(const char *s, uint32_t *out, size_t want,
			bool exact)
{
	size_t n = 0;

	for (;;) {
		uint64_t v;
		size_t l;

		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '\0' || *s == '\n')
			break;
		l = strcspn(s, " \t\n");
		if (n == want) {
			if (exact)
				return -1;
			break;
		}
		if (ptd_parse_u64n(s, l, 10, &v) < 0 || v > UINT32_MAX)
			return -1;
		out[n++] = (uint32_t)v;
		s += l;
	}
	return n == want ? 0 : -1;
}

static const char *status_field(const char *text, const char *key)
{
	size_t kl = strlen(key);

	/* Keys are matched at line starts only. */
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');

		if (strncmp(p, key, kl) == 0)
			return p + kl;
		if (!nl)
			break;
		p = nl + 1;
	}
	return NULL;
}

static int parse_status(const char *text, struct proc_info *pi,
			const char *procroot, pid_t pid, struct ptd_diag *diag)
{
	const char *st = status_field(text, "State:");
	const char *pp = status_field(text, "PPid:");
	const char *u = status_field(text, "Uid:");
	const char *g = status_field(text, "Gid:");
	uint32_t ppid, four[4];
	const char *bad;

	bad = !st ? "State" : !pp ? "PPid" : !u ? "Uid" : !g ? "Gid" : NULL;
	if (bad)
		goto err;
	st += strspn(st, " \t");
	/* upper case, and 't' (tracing stop: traced, e.g. by ptd itself) */
	if ((*st < 'A' || *st > 'Z') && (*st < 'a' || *st > 'z')) {
		bad = "State";
		goto err;
	}
	pi->state = *st;
	if (parse_fields(pp, &ppid, 1, true) < 0 || ppid > INT32_MAX) {
		bad = "PPid";
		goto err;
	}
	pi->ppid = (pid_t)ppid;
	/* Uid:/Gid: list real, effective, saved and filesystem ids. */
	if (parse_fields(u, four, 4, true) < 0) {
		bad = "Uid";
		goto err;
	}
	memcpy(pi->uid, four, sizeof(pi->uid));
	if (parse_fields(g, four, 4, true) < 0) {
		bad = "Gid";
		goto err;
	}
	memcpy(pi->gid, four, sizeof(pi->gid));
	return 0;
err:
	return ptd_diagf(diag, -PTD_EFORMAT,
			 "%s/%d/status: missing or malformed %s: line",
			 procroot, (int)pid, bad);
}

/* stat: "PID (COMM) S PPID PGRP SESSION TTY TPGID FLAGS ..."; COMM may
 * hold ')' and spaces, so fields are counted from the last ')'. */
static int parse_stat_flags(const char *text, struct proc_info *pi,
			    const char *procroot, pid_t pid,
			    struct ptd_diag *diag)
{
	const char *p = strrchr(text, ')');
	uint64_t v;

	if (!p)
		goto err;
	p++;
	for (int field = 3; field < 9; field++) {
		p += strspn(p, " ");
		p += strcspn(p, " \n");
		if (*p != ' ')
			goto err;
	}
	p++;
	if (ptd_parse_u64n(p, strcspn(p, " \n"), 10, &v) < 0 ||
	    v > ULONG_MAX)
		goto err;
	pi->flags = (unsigned long)v;
	return 0;
err:
	return ptd_diagf(diag, -PTD_EFORMAT,
			 "%s/%d/stat: cannot find the flags field", procroot,
			 (int)pid);
}

static int proc_info_get(const char *procroot, pid_t pid,
			 struct proc_info *pi, bool want_flags,
			 struct ptd_diag *diag)
{
	_cleanup_free_ char *status = NULL, *stat = NULL;
	int r;

	r = proc_read(procroot, pid, "status", &status, diag);
	if (r < 0)
		return r;
	r = parse_status(status, pi, procroot, pid, diag);
	if (r < 0 || !want_flags)
		return r;
	r = proc_read(procroot, pid, "stat", &stat, diag);
	if (r < 0)
		return r;
	return parse_stat_flags(stat, pi, procroot, pid, diag);
}

/* Yama's ptrace_scope, 0 (or no Yama) to 3. */
static int yama_scope(const char *procroot, struct ptd_diag *diag)
{
	_cleanup_free_ char *text = NULL;
	char path[PATH_MAX];
	size_t len;
	int r;

	if (snprintf(path, sizeof(path), "%s/sys/kernel/yama/ptrace_scope",
		     procroot) >= (int)sizeof(path))
		return ptd_diagf(diag, -ENAMETOOLONG, "%s: path too long",
				 procroot);
	r = ptd_file_read_all(path, 64, &text, &len);
	if (r == -ENOENT)
		return 0;	/* no Yama: classic ptrace rules */
	if (r < 0)
		return ptd_diagf(diag, r, "cannot read %s: %s", path,
				 ptd_strerror(r));
	if (len < 1 || text[0] < '0' || text[0] > '3' ||
	    (len > 1 && !(len == 2 && text[1] == '\n')))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "%s: expected 0, 1, 2 or 3", path);
	return text[0] - '0';
}

static int check_ids(const struct ptd_peer *peer, pid_t target,
		     const struct proc_info *pi, struct ptd_diag *diag)
{
	const uint32_t *u = pi->uid, *g = pi->gid;

	if (u[0] != peer->uid || u[1] != peer->uid || u[2] != peer->uid) {
		if (u[0] == u[1] && u[1] == u[2])
			return ptd_diagf(diag, -EPERM,
					 "pid %d belongs to uid %u, you are "
					 "uid %u", (int)target, u[0],
					 (unsigned)peer->uid);
		return ptd_diagf(diag, -EPERM,
				 "pid %d runs with uids %u/%u/%u "
				 "(real/effective/saved), you are uid %u",
				 (int)target, u[0], u[1], u[2],
				 (unsigned)peer->uid);
	}
	if (g[0] != peer->gid || g[1] != peer->gid || g[2] != peer->gid)
		return ptd_diagf(diag, -EPERM,
				 "pid %d runs with gids %u/%u/%u "
				 "(real/effective/saved), your gid is %u",
				 (int)target, g[0], g[1], g[2],
				 (unsigned)peer->gid);
	return 0;
}

/* There is no proc file that shows another process's dumpable flag, but
 * the kernel shows it through ownership: the files under /proc/PID that
 * are not world-readable (mem, environ, fd/...) belong to the task's
 * euid/egid only while it is dumpable (SUID_DUMP_USER), to root otherwise
 * (task_dump_owner() in fs/proc/base.c; the /proc/PID directory itself
 * keeps the euid, so it cannot tell).  The uids were checked to be the
 * peer's, so a /proc/PID/mem owned by someone else means "not dumpable".
 * stat() does not open the file: no ptrace access check is involved. */
static int check_dumpable(const struct ptd_peer *peer, pid_t target,
			  const char *procroot, struct ptd_diag *diag)
{
	char path[PATH_MAX];
	struct stat st;

	(void)snprintf(path, sizeof(path), "%s/%d/mem", procroot, (int)target);
	if (stat(path, &st) < 0) {
		int r = -errno;

		if (r == -ENOENT)
			return ptd_diagf(diag, -ESRCH,
					 "no such process: pid %d",
					 (int)target);
		return ptd_diagf(diag, r, "cannot stat %s: %s", path,
				 ptd_strerror(r));
	}
	if (st.st_uid != peer->uid)
		return ptd_diagf(diag, -EPERM, "pid %d is not dumpable",
				 (int)target);
	return 0;
}

/* Yama scope 1: walk up from the target through PPid: to the peer. */
static int check_descendant(const struct ptd_peer *peer, pid_t target,
			    const char *procroot, struct ptd_diag *diag)
{
	pid_t p = target;

	for (int i = 0; i < ANCESTRY_MAX && p > 0; i++) {
		struct proc_info pi;
		int r;

		if (p == peer->pid)
			return 0;
		r = proc_info_get(procroot, p, &pi, false, diag);
		if (r == -ESRCH)
			break;	/* an ancestor exited mid-walk: not ours */
		if (r < 0)
			return r;
		p = pi.ppid;
	}
	return ptd_diagf(diag, -EPERM,
			 "Yama ptrace_scope=1: pid %d is not a descendant of "
			 "your process %d", (int)target, (int)peer->pid);
}

int ptd_auth_may_trace(const struct ptd_peer *peer, pid_t target,
		       const char *procroot, struct ptd_diag *diag)
{
	struct proc_info pi;
	int r, scope;

	if (!procroot)
		procroot = "/proc";
	if (target <= 0)
		return ptd_diagf(diag, -ESRCH, "no such process: pid %d",
				 (int)target);
	r = proc_info_get(procroot, target, &pi, true, diag);
	if (r < 0)
		return r;
	if (pi.flags & PF_KTHREAD)
		return ptd_diagf(diag, -ESRCH,
				 "pid %d is a kernel thread", (int)target);
	if (pi.state == 'Z' || pi.state == 'X')
		return ptd_diagf(diag, -ESRCH, "pid %d is a zombie",
				 (int)target);
	scope = yama_scope(procroot, diag);
	if (scope < 0)
		return scope;
	if (scope == 3)
		return ptd_diagf(diag, -EPERM,
				 "Yama ptrace_scope=3: ptrace is disabled for "
				 "everyone, root included");
	if (peer->uid == 0)
		return 0;
	if (scope == 2)
		return ptd_diagf(diag, -EPERM,
				 "Yama ptrace_scope=2: only root may trace, "
				 "you are uid %u", (unsigned)peer->uid);
	r = check_ids(peer, target, &pi, diag);
	if (r < 0)
		return r;
	r = check_dumpable(peer, target, procroot, diag);
	if (r < 0)
		return r;
	if (scope == 1)
		return check_descendant(peer, target, procroot, diag);
	return 0;
}

int ptd_auth_pin(const struct ptd_peer *peer, pid_t target,
		 const char *procroot, int *ret_pidfd, struct ptd_diag *diag)
{
	uint64_t tgid = 0;
	int fd, r;

	if (target <= 0)
		return ptd_diagf(diag, -ESRCH, "no such process: pid %d",
				 (int)target);
	r = ptd_pidfd_open(target, &fd);
	if (r == -EINVAL || r == -ENOENT) {
		/* a thread's id: pidfd_open takes processes only (Linux
		 * says EINVAL, or ENOENT since 6.9) */
		_cleanup_free_ char *status = NULL;
		const char *t;

		if (proc_read(procroot ? procroot : "/proc", target, "status",
			      &status, NULL) == 0 &&
		    (t = status_field(status, "Tgid:")))
			(void)ptd_parse_u64n(t + strspn(t, " \t"),
					     strcspn(t + strspn(t, " \t"),
						     "\n"), 10, &tgid);
		if (tgid && tgid != (uint64_t)target)
			return ptd_diagf(diag, -EINVAL, "pid %d is a thread "
					 "of process %llu, not a process: "
					 "attach to the process", (int)target,
					 (unsigned long long)tgid);
		r = -ESRCH;
	}
	if (r == -ESRCH)
		return ptd_diagf(diag, r, "no such process: pid %d",
				 (int)target);
	if (r < 0)
		return ptd_diagf(diag, r, "cannot pin pid %d (pidfd_open): %s",
				 (int)target, ptd_strerror(r));
	r = ptd_auth_may_trace(peer, target, procroot, diag);
	if (r == 0 && ptd_pidfd_alive(fd) < 0)
		r = ptd_diagf(diag, -ESRCH, "no such process: pid %d (it "
			      "exited while ptd checked it)", (int)target);
	if (r < 0) {
		close(fd);
		return r;
	}
	*ret_pidfd = fd;
	return 0;
}
