/* SPDX-License-Identifier: MIT */
/*
 * Pinning a process with a pidfd (pidfd_open(2), Linux 5.3).  A pid is only
 * a number: once its process has exited and been reaped, the kernel may give
 * it to another process.  A pidfd refers to one process for as long as it is
 * open, so "does the pidfd's process still hold its pid?" tells whether
 * what was checked or done by pid concerned that process.
 */
#ifndef PTD_COMMON_PIDFD_H
#define PTD_COMMON_PIDFD_H

#include <sys/types.h>

/* A pidfd (close-on-exec, never 0-2) for process @pid.  Returns 0 and
 * *ret_fd, or -ESRCH (no such process), -EINVAL or -ENOENT (@pid names a
 * thread, not a process: Linux < 6.9 and later say it differently),
 * -ENOSYS (a kernel older than 5.3), -errno. */
int ptd_pidfd_open(pid_t pid, int *ret_fd);

/* Does the process of @pidfd still hold its pid: running, stopped, or a
 * zombie nobody has reaped yet (its pid cannot be reused before)?
 * Returns 0 if so, -ESRCH once it has been reaped (its pid may name
 * another process now), -errno (-EBADF: not a pidfd). */
int ptd_pidfd_alive(int pidfd);

#endif
