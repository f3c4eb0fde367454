/* SPDX-License-Identifier: MIT */
#include "daemon/sdnotify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/strutil.h"

#define SD_LISTEN_FDS_START 3

/* Build the address of $NOTIFY_SOCKET: "/path" or "@abstract" (the '@'
 * stands for the leading NUL of an abstract name). */
static int notify_addr(const char *e, struct sockaddr_un *sa,
		       socklen_t *ret_len)
{
	size_t n = strlen(e);

	if ((e[0] != '/' && e[0] != '@') || n < 2 ||
	    n > sizeof(sa->sun_path) - (e[0] == '/'))
		return -EINVAL;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, e, n);
	if (e[0] == '@')
		sa->sun_path[0] = '\0';
	/* An abstract name is exactly n bytes long, no trailing NUL. */
	*ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
			       (e[0] == '/'));
	return 0;
}

/* How long READY=1 / STOPPING=1 wait for room in a full queue. */
#define NOTIFY_RETRY_MS 1000u

int ptd_sd_notify(const char *state)
{
	const char *e = getenv("NOTIFY_SOCKET");
	_cleanup_close_ int fd = -1;
	struct sockaddr_un sa;
	socklen_t salen;
	ssize_t w;
	int r;

	if (!state || !*state)
		return -EINVAL;
	if (!e || !*e)
		return 0;
	r = notify_addr(e, &sa, &salen);
	if (r < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Never wait long: the control loop calls this, and a notify socket
	 * whose queue is full (a reader that does not read) would stop it.
	 * A STATUS= update is dropped at once (-EAGAIN); READY/STOPPING are
	 * tried for up to NOTIFY_RETRY_MS first. */
	for (unsigned waited = 0;; waited += 10) {
		do
			w = sendto(fd, state, strlen(state),
				   MSG_NOSIGNAL | MSG_DONTWAIT,
				   (const struct sockaddr *)&sa, salen);
		while (w < 0 && errno == EINTR);
		if (w >= 0 || errno != EAGAIN || waited >= NOTIFY_RETRY_MS ||
		    !strncmp(state, "STATUS=", 7))
			break;
		(void)nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 },
				NULL);
	}
	if (w < 0)
		return -errno;
	return 1;
}

/* A strict decimal from the environment; -1 if absent, -2 if malformed. */
static long long env_number(const char *name)
{
	const char *e = getenv(name);
	uint64_t v;

	if (!e)
		return -1;
	if (ptd_parse_u64(e, 10, &v) < 0 || v > INT32_MAX)
		return -2;
	return (long long)v;
}

static int check_listen_fd(int fd, struct ptd_diag *diag)
{
	int v, flags;
	socklen_t l = sizeof(v);

	flags = fcntl(fd, F_GETFD);
	if (flags < 0)
		return ptd_diagf(diag, -EBADF,
				 "socket activation: fd %d is not open", fd);
	if (fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0)
		return ptd_diagf(diag, -errno,
				 "socket activation: cannot set CLOEXEC on "
				 "fd %d", fd);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0)
		return ptd_diagf(diag, -ENOTSOCK,
				 "socket activation: fd %d is not a socket",
				 fd);
	if (v != AF_UNIX)
		return ptd_diagf(diag, -EINVAL,
				 "socket activation: fd %d is not an AF_UNIX "
				 "socket (family %d)", fd, v);
	l = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0 ||
	    v != SOCK_STREAM)
		return ptd_diagf(diag, -EINVAL,
				 "socket activation: fd %d is not a stream "
				 "socket (ListenStream= expected)", fd);
	l = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || !v)
		return ptd_diagf(diag, -EINVAL,
				 "socket activation: fd %d is not listening",
				 fd);
	return 0;
}

int ptd_sd_listen_fds(int *ret_fds, size_t max, struct ptd_diag *diag)
{
	long long pid = env_number("LISTEN_PID");
	long long n = env_number("LISTEN_FDS");
	int r;

	/* Unset first, whatever happens next: a child we spawn must not
	 * believe the fds are meant for it. */
	(void)unsetenv("LISTEN_PID");
	(void)unsetenv("LISTEN_FDS");
	(void)unsetenv("LISTEN_FDNAMES");

	if (pid == -1)
		return 0;
	if (pid == -2)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "socket activation: $LISTEN_PID is not a "
				 "process id");
	if (pid != (long long)getpid())
		return 0;
	if (n < 0)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "socket activation: $LISTEN_FDS is %s",
				 n == -1 ? "missing" : "not a number");
	if ((unsigned long long)n > max)
		return ptd_diagf(diag, -PTD_ELIMIT,
				 "socket activation: %lld sockets passed, at "
				 "most %zu expected", n, max);
	for (int i = 0; i < (int)n; i++) {
		r = check_listen_fd(SD_LISTEN_FDS_START + i, diag);
		if (r < 0)
			return r;
	}
	for (int i = 0; i < (int)n; i++)
		ret_fds[i] = SD_LISTEN_FDS_START + i;
	return (int)n;
}
