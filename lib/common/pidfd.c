/* SPDX-License-Identifier: MIT */
#include "common/pidfd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

int ptd_pidfd_open(pid_t pid, int *ret_fd)
{
	long fd;

	if (pid <= 0)
		return -ESRCH;
	/* pidfds are close-on-exec from birth (PIDFD_CLOEXEC is implied) */
	fd = syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return -errno;
	/* off 0-2, where a stray write or a child's stdio would find it
	 * (and where "0: none" of ptd's options would) */
	if (fd < 3) {
		int moved = fcntl((int)fd, F_DUPFD_CLOEXEC, 3);
		int err = errno;

		(void)close((int)fd);
		if (moved < 0)
			return -err;
		fd = moved;
	}
	*ret_fd = (int)fd;
	return 0;
}

int ptd_pidfd_alive(int pidfd)
{
	/* Signal 0 checks without sending: ESRCH once the process is reaped
	 * (a zombie still answers), EPERM if we may not signal it -- it is
	 * there all the same. */
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0 ||
	    errno == EPERM)
		return 0;
	return -errno;
}
