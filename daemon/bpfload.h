/* SPDX-License-Identifier: MIT */
/*
 * What ptd's BPF users (the exec watcher, watch.c; triggers, trigger.c)
 * share when they load their programs: whether the kernel can take them,
 * and why it refused one.
 */
#ifndef PTD_DAEMON_BPFLOAD_H
#define PTD_DAEMON_BPFLOAD_H

#include "common/diag.h"

/* 0 if the kernel has BTF to relocate ptd's programs against; else
 * -PTD_EUNSUPPORTED with a message ending in "@what need BPF programs"
 * (@what: "watch rules", "triggers"). */
int ptd_bpf_check(const char *what, struct ptd_diag *diag);

/* @err (negative errno) from loading or attaching a program, as a
 * message: for -EPERM/-EACCES, the kernel's lockdown or the missing
 * capabilities; returns @err. */
int ptd_bpf_refusal(int err, const char *what, struct ptd_diag *diag);

#endif
