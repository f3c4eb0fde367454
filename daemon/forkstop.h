/* SPDX-License-Identifier: MIT */
/*
 * The fork stopper: the BPF programs of daemon/bpf/forkstop.bpf.c, loaded
 * through their libbpf skeleton.  Every child process of a process
 * followed here is stopped by a SIGSTOP before its first user-space
 * instruction and reported through a ring buffer.  The control loop owns
 * one (server/children.c), loaded the first time an intel_pt session
 * follows children, whose per-thread events do not follow a fork.
 */
#ifndef PTD_DAEMON_FORKSTOP_H
#define PTD_DAEMON_FORKSTOP_H

#include <stdint.h>
#include <sys/types.h>

#include "common/diag.h"
#include "daemon/bpf/forkstop-abi.h"

struct ptd_forkstop;

/* Load the programs and attach them, the ring buffer of reports
 * @ring_bytes long (a power of 2, a multiple of the page size; 0: 256
 * KiB).  Returns 0, or with a message in
 * @diag naming @what (the feature that needs them, "children with the
 * intel_pt source") and why BPF cannot be used here: -PTD_EUNSUPPORTED
 * (built without BPF, no BTF), -EPERM (no CAP_BPF/CAP_PERFMON, or the
 * kernel's lockdown), -errno. */
int ptd_forkstop_new(const char *what, uint32_t ring_bytes,
		     struct ptd_forkstop **ret, struct ptd_diag *diag);
/* Detach the programs, then hand what the ring buffer still holds to
 * @fn (NULL: each child is sent a SIGCONT), and free. */
void ptd_forkstop_free(struct ptd_forkstop *f,
		       void (*fn)(void *ctx,
				  const struct ptd_forkstop_event *ev),
		       void *ctx);

/* The ring buffer's epoll fd: readable when reports wait. */
int ptd_forkstop_fd(const struct ptd_forkstop *f);

/* Stop the children process @pid (in ptd's PID namespace) creates from
 * now on, their reports carrying @cookie.  -EEXIST: @pid is followed
 * already; -E2BIG: PTD_FORKSTOP_FOLLOWED are; -errno. */
int ptd_forkstop_follow(struct ptd_forkstop *f, pid_t pid, uint64_t cookie);
/* No more: @pid's children run on; *@ret_missed (if not NULL): how many
 * of them were let go untraced while it was followed (the programs'
 * tables or ring buffer full, a signal that could not be sent).  -ENOENT
 * if @pid was not followed with @cookie (then nothing changes). */
int ptd_forkstop_unfollow(struct ptd_forkstop *f, pid_t pid,
			  uint64_t cookie, uint64_t *ret_missed);
/* The children of @pid (followed with @cookie) let go untraced so far. */
int ptd_forkstop_missed(const struct ptd_forkstop *f, pid_t pid,
			uint64_t cookie, uint64_t *ret);

int ptd_forkstop_counts(const struct ptd_forkstop *f,
			struct ptd_forkstop_count *ret);

/* Hand every report waiting to @fn (in the order they came): the child
 * is stopped, or about to be (the SIGSTOP is taken on its way to user
 * space).  Returns how many, or -errno. */
int ptd_forkstop_drain(struct ptd_forkstop *f,
		       void (*fn)(void *ctx,
				  const struct ptd_forkstop_event *ev),
		       void *ctx);

#endif
