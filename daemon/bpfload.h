/* SPDX-License-Identifier: MIT */
/*
 * What ptd's BPF users (the exec watcher, watch.c; triggers, trigger.c)
 * share when they load their programs: whether the kernel can take them,
 * and why it refused one.
 */
#ifndef PTD_DAEMON_BPFLOAD_H
#define PTD_DAEMON_BPFLOAD_H

#include "common/diag.h"

#include <stdbool.h>
#include <stdint.h>

/* The PID namespace ptd's programs name processes in: ptd's own.  In the
 * initial one, they take the kernel's global ids (every process on the
 * machine, in any container, is seen); in a container's (ptd under
 * systemd-nspawn, docker ...), they translate each process's ids into
 * this namespace (bpf_get_ns_current_pid_tgid), and a process whose own
 * namespace is another one (a container inside ptd's) is not seen. */
struct ptd_bpf_pidns {
	bool initial;
	uint64_t dev, ino;	/* of /proc/self/ns/pid */
};

/* 0 if the kernel has BTF to relocate ptd's programs against, and ptd's
 * user namespace is the initial one (the programs compare the kernel's
 * uids with the clients'), with ptd's PID namespace in *@ret; else
 * -PTD_EUNSUPPORTED with a message saying which (@what: "watch rules",
 * "triggers"). */
int ptd_bpf_check(const char *what, struct ptd_bpf_pidns *ret,
		  struct ptd_diag *diag);

/* @err (negative errno) from loading or attaching a program, as a
 * message: for -EPERM/-EACCES, the kernel's lockdown or the missing
 * capabilities; returns @err. */
int ptd_bpf_refusal(int err, const char *what, struct ptd_diag *diag);

struct ring_buffer;
/* A libbpf ring buffer over the BPF_MAP_TYPE_RINGBUF map @map_fd, each
 * sample handed to @fn(@ctx, data, size), into *@ret.  Returns 0, or
 * -errno with a message in @diag. */
int ptd_bpf_ringbuf(int map_fd, int (*fn)(void *ctx, void *data, size_t len),
		    void *ctx, struct ring_buffer **ret,
		    struct ptd_diag *diag);

#endif
