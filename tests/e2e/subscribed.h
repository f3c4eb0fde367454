/* SPDX-License-Identifier: MIT */
/*
 * For tests that start `ptctl stream` as a separate process and then let
 * the traced program run: wait until ptd counts the streamer among the
 * session's subscribers, since records decoded before it subscribed never
 * reach it.  (A fixed sleep is not enough on a loaded machine.)
 */
#ifndef PTD_TESTS_E2E_SUBSCRIBED_H
#define PTD_TESTS_E2E_SUBSCRIBED_H

#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The "subscribers" count of session @sid (decimal) from one status
 * request to ptd at @sock; -1 if there is no answer or no count. */
static inline long session_subscribers(const char *sock, const char *sid)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char req[160], buf[16384];
	size_t have = 0;
	long n = -1;
	int fd;

	if (strlen(sock) >= sizeof(a.sun_path))
		return -1;
	strcpy(a.sun_path, sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"status\",\"session\":%s}\n", sid);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    write(fd, req, strlen(req)) == (ssize_t)strlen(req)) {
		struct pollfd p = { fd, POLLIN, 0 };

		while (have < sizeof(buf) - 1 && !memchr(buf, '\n', have) &&
		       poll(&p, 1, 10000) == 1) {
			ssize_t r = read(fd, buf + have,
					 sizeof(buf) - 1 - have);

			if (r <= 0)
				break;
			have += (size_t)r;
		}
	}
	close(fd);
	buf[have] = '\0';
	if (memchr(buf, '\n', have)) {
		const char *k = strstr(buf, "\"subscribers\":");

		if (k)
			n = strtol(k + 14, NULL, 10);
	}
	return n;
}

/* Wait up to 60 s until session @sid has at least one subscriber. */
static inline bool wait_subscribed(const char *sock, const char *sid)
{
	for (int i = 0; i < 6000; i++) {
		if (session_subscribers(sock, sid) >= 1)
			return true;
		(void)nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 },
				NULL);
	}
	return false;
}

#endif
