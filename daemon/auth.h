/* SPDX-License-Identifier: MIT */
/*
 * Who may do what: a client of the control socket may trace only the
 * processes it could ptrace itself, and see only its own sessions, unless
 * it is root.  The rules mirror the kernel's ptrace_may_access() for
 * PTRACE_MODE_ATTACH_REALCREDS plus Yama; see auth.c for each rule.
 */
#ifndef PTD_DAEMON_AUTH_H
#define PTD_DAEMON_AUTH_H

#include <stdbool.h>
#include <sys/types.h>

#include "common/diag.h"

/* The process at the other end of a Unix socket, as the kernel saw it
 * when it connected (SO_PEERCRED: effective uid/gid). */
struct ptd_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
};

/* Fill *ret from SO_PEERCRED of the connected Unix socket @fd.
 * Returns 0, or -errno from getsockopt (-ENOTSOCK, -EBADF, ...). */
int ptd_peer_get(int fd, struct ptd_peer *ret);

/* May @peer trace process @target?  @procroot is where proc is mounted
 * ("/proc" if NULL; tests pass a fake tree holding PID/status, PID/stat,
 * PID/mem (only its owner is used) and sys/kernel/yama/ptrace_scope).
 * Returns 0 if allowed, or with a message in @diag:
 *  -ESRCH   no such process, or a kernel thread, or a zombie
 *  -EPERM   a rule refused; the message names the rule, e.g.
 *           "pid 1234 belongs to uid 0, you are uid 1000",
 *           "pid 1234 is not dumpable",
 *           "Yama ptrace_scope=1: pid 1234 is not a descendant of your
 *           process 999"
 *  -PTD_EFORMAT  a proc file could not be parsed (names the file)
 *  -errno   reading proc failed otherwise. */
int ptd_auth_may_trace(const struct ptd_peer *peer, pid_t target,
		       const char *procroot, struct ptd_diag *diag);

/* ptd_auth_may_trace for the process @target pinned by a pidfd
 * (common/pidfd.h): the pidfd is taken first, the rules checked, and then
 * the pidfd's process must still hold @target -- so the rules were
 * checked on that process and not on one that took its pid since.
 * Whoever attaches later checks the pidfd again (the pid may be reused
 * after this returns).  Returns 0 with *ret_pidfd (the caller closes it),
 * what ptd_auth_may_trace returns, or with a message in @diag:
 *  -ESRCH   the process exited meanwhile
 *  -EINVAL  @target is a thread, not a process (the message names its
 *           process)
 *  -errno   pidfd_open failed otherwise (-ENOSYS: Linux < 5.3). */
int ptd_auth_pin(const struct ptd_peer *peer, pid_t target,
		 const char *procroot, int *ret_pidfd, struct ptd_diag *diag);

/* May @peer see (list, stream, detach) a session owned by uid @owner?
 * Root sees all, others only their own. */
bool ptd_auth_may_see(const struct ptd_peer *peer, uid_t owner);

#endif
