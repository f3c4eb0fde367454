/* SPDX-License-Identifier: MIT */
/*
 * What ptd's BPF users (the exec watcher, watch.c; triggers, trigger.c)
 * share when they load their programs: whether the kernel can take them,
 * and why it refused one.
 */
#ifndef PTD_DAEMON_BPFLOAD_H
#define PTD_DAEMON_BPFLOAD_H

#include "common/diag.h"

/* 0 if the kernel has BTF to relocate ptd's programs against and ptd
 * runs in the initial PID namespace (the one the programs' pids are of);
 * else -PTD_EUNSUPPORTED with a message saying which (@what: "watch
 * rules", "triggers"). */
int ptd_bpf_check(const char *what, struct ptd_diag *diag);

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
