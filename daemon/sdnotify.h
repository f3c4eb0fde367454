/* SPDX-License-Identifier: MIT */
/*
 * The two pieces of the systemd protocol ptd needs, without libsystemd:
 * sd_notify(3) (Type=notify: READY=1, STOPPING=1, STATUS=...) and
 * sd_listen_fds(3) (socket activation by ptd.socket).
 */
#ifndef PTD_DAEMON_SDNOTIFY_H
#define PTD_DAEMON_SDNOTIFY_H

#include <stddef.h>

#include "common/diag.h"

/* Send @state ("READY=1", "STOPPING=1", "STATUS=...", newline-separated
 * assignments) as one datagram to $NOTIFY_SOCKET (a path, or "@name" for
 * an abstract socket).
 * Returns 1 if sent, 0 if $NOTIFY_SOCKET is unset or empty (not run by
 * systemd: nothing to do), -EINVAL if $NOTIFY_SOCKET is neither absolute
 * nor "@..." or too long for sun_path or @state is NULL/empty, or -errno
 * from socket/sendmsg: -EAGAIN when the receiver's queue is full (the
 * message is dropped: a STATUS= update at once, anything else after
 * trying for a second; this never blocks longer). */
int ptd_sd_notify(const char *state);

/* Sockets passed by systemd socket activation: if $LISTEN_PID is our pid,
 * take the $LISTEN_FDS fds starting at 3, set FD_CLOEXEC on each, check
 * each is a listening AF_UNIX stream socket, and store them in
 * @ret_fds[0..n-1].  $LISTEN_PID, $LISTEN_FDS and $LISTEN_FDNAMES are
 * unset in every case (children must not inherit them).
 * Returns n (0: not socket-activated, or the variables were meant for
 * another process), or with a message in @diag:
 *  -PTD_EFORMAT  $LISTEN_PID or $LISTEN_FDS is not a number
 *  -PTD_ELIMIT   more than @max fds were passed
 *  -EBADF        a passed fd is not open
 *  -ENOTSOCK     a passed fd is not a socket
 *  -EINVAL       a passed socket is not AF_UNIX, not SOCK_STREAM or not
 *                listening.
 * @ret_fds is not written on failure. */
int ptd_sd_listen_fds(int *ret_fds, size_t max, struct ptd_diag *diag);

#endif
