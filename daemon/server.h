/* SPDX-License-Identifier: MIT */
/*
 * The daemon's control loop: the listening socket, client connections,
 * requests (proto.h), sessions (session.h) and their subscribers
 * (fanout.h), in ONE epoll loop that never blocks on decoding or on a
 * client.  struct ptd_server owns all of it.
 *
 * Wake-ups: SIGTERM/SIGINT through a signalfd (clean shutdown; SIGPIPE is
 * ignored), and an eventfd the sessions' decode threads write when a
 * subscriber queue gets data or a session ends.
 */
#ifndef PTD_DAEMON_SERVER_H
#define PTD_DAEMON_SERVER_H

#include "common/diag.h"
#include "daemon/config.h"

/* How long shutdown waits for sessions to end and subscribers to get their
 * bye before it closes everything. */
#define PTD_SERVER_SHUTDOWN_MS 10000
/* How long an ended session stays listed (state "ended") for late
 * subscribers and status, once it has no subscribers left. */
#define PTD_SERVER_LINGER_MS 30000

struct ptd_server;

/* Build the server: socket-activated sockets if $LISTEN_FDS names some,
 * else config->socket_path created (parent directory made 0755 if missing;
 * a stale socket removed only if nothing listens on it; chmod socket_mode;
 * chown socket_group, or a warning); the signalfd (blocks SIGTERM and
 * SIGINT in the calling thread, which must be the only one; ignores
 * SIGPIPE), the eventfd, epoll.  @procroot: where /proc is (NULL: "/proc").
 * Returns 0 with *ret_server, or -errno / -PTD_E* with a message in @diag
 * (-EADDRINUSE: another ptd listens on the socket). */
int ptd_server_new(const struct ptd_config *config, const char *procroot,
		   struct ptd_server **ret_server, struct ptd_diag *diag);

/* Run the loop until a shutdown has completed (READY=1 is sent on entry,
 * STOPPING=1 at the signal).  Returns 0, or -errno if the loop itself
 * failed (epoll). */
int ptd_server_run(struct ptd_server *s);

/* Close everything, end sessions that are still running (SHUTDOWN), remove
 * the socket if ptd created it.  NULL is fine. */
void ptd_server_free(struct ptd_server *s);

#endif
