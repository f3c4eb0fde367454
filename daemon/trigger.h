/* SPDX-License-Identifier: MIT */
/*
 * Triggers: a uprobe on an instruction of a traced process (a function by
 * its symbol in a file the process maps, or a file offset), run by the BPF
 * program of daemon/bpf/trigger.bpf.c, which reports each hit -- which
 * trigger, which thread, when -- through its ring buffer to the control
 * loop (server/trigger.c: what a hit does).  Also the text form of a
 * trigger, as attach's options.triggers and the trigger request give it.
 */
#ifndef PTD_DAEMON_TRIGGER_H
#define PTD_DAEMON_TRIGGER_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/diag.h"
#include "daemon/bpf/trigger-abi.h"

/* ---- the text form: ACTION:FILE:WHERE ---- */

enum ptd_trigger_action {
	PTD_TRIGGER_SNAPSHOT,	/* take a snapshot (snapshot-mode session) */
	PTD_TRIGGER_START,	/* full mode: the thread's records from here */
	PTD_TRIGGER_STOP,	/* full mode: ... up to here */
};

#define PTD_TRIGGER_TEXT_MAX 4400
#define PTD_TRIGGER_SYMBOL_MAX 255

#define PTD_TRIGGER_TP_NAME_MAX 63

/* ACTION:FILE:WHERE.  ACTION: "snapshot", "start", "stop".  FILE: an absolute path, or a
 * file name without '/' (the mapped file of that name); it may hold ':'
 * (the text is split at its first and last).  WHERE: a symbol (letters,
 * digits, '_', '.', '$', '@'; not starting with a digit), or a file
 * offset as 0x followed by hex digits.
 *
 * Or ACTION:tracepoint:CATEGORY:NAME, a kernel tracepoint (as perf and
 * tracefs name them: syscalls:sys_enter_openat), hit whenever a thread of
 * the process runs into it.  Letters, digits and '_' only, at most 63 of
 * them each.  (A mapped file named "tracepoint:..." is given by its
 * path.) */
struct ptd_trigger_spec {
	enum ptd_trigger_action action;
	bool tracepoint;
	char tp_category[PTD_TRIGGER_TP_NAME_MAX + 1];
	char tp_name[PTD_TRIGGER_TP_NAME_MAX + 1];
	char file[PATH_MAX];
	char symbol[PTD_TRIGGER_SYMBOL_MAX + 1];	/* "" with an offset */
	bool has_offset;
	uint64_t offset;
};

const char *ptd_trigger_action_name(enum ptd_trigger_action a);

/* Parse @text; -PTD_EFORMAT with a message (naming the part) in @diag. */
int ptd_trigger_spec_parse(const char *text, struct ptd_trigger_spec *ret,
			   struct ptd_diag *diag);

/* ---- the BPF program ---- */

struct ptd_triggers;
struct ptd_uprobe;

/* Load the program.  Returns 0, or with a message in @diag saying why BPF
 * cannot be used here: -PTD_EUNSUPPORTED (built without BPF, no BTF),
 * -EPERM (no CAP_BPF/CAP_PERFMON, or lockdown: the message says which),
 * -errno. */
int ptd_triggers_new(struct ptd_triggers **ret, struct ptd_diag *diag);
void ptd_triggers_free(struct ptd_triggers *t);

/* The ring buffer's epoll fd: readable when hits wait. */
int ptd_triggers_fd(const struct ptd_triggers *t);

/* Hits the program could not report (its ring buffer was full). */
uint64_t ptd_triggers_missed(const struct ptd_triggers *t);

/* A uprobe at file offset @offset of @path (a path the kernel resolves
 * in ptd's own context: /proc/self/fd/N pins the file), installed by the
 * kernel in process @pid only, reporting hits of @pid's threads as
 * trigger @id.  Returns 0, or -errno with a message in @diag. */
int ptd_triggers_attach(struct ptd_triggers *t, const char *path,
			uint64_t offset, pid_t pid, uint32_t id,
			struct ptd_uprobe **ret, struct ptd_diag *diag);
/* The same for kernel tracepoint @category:@name: a hit whenever a thread
 * of @pid runs into it, reported with the thread's user-space ip.
 * -ENOENT with a message if the kernel has no such tracepoint. */
int ptd_triggers_attach_tracepoint(struct ptd_triggers *t,
				   const char *category, const char *name,
				   pid_t pid, uint32_t id,
				   struct ptd_uprobe **ret,
				   struct ptd_diag *diag);
/* Unregister it, a uprobe's or a tracepoint's (NULL is fine). */
void ptd_uprobe_free(struct ptd_uprobe *u);

/* Hand every hit waiting to @fn, in order.  Returns how many, or -errno. */
int ptd_triggers_drain(struct ptd_triggers *t,
		       void (*fn)(void *ctx, const struct ptd_trigger_hit *h),
		       void *ctx);

#endif
