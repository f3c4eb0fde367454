/* SPDX-License-Identifier: MIT */
/*
 * perf.data decoding, inside (not an interface: decode.h is): the state of
 * one decode and what its three files share.
 *   decode.c  the pass over the records (threads, losses, image changes),
 *             then the decode of every thread
 *   code.c    where the traced code is: files by path and build-id, the
 *             kernel's (kcore, vmlinux, modules, text pokes)
 *   cpus.c    per-CPU recordings split among their threads
 */
#ifndef PTD_PERFDATA_DECODE_INT_H
#define PTD_PERFDATA_DECODE_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "aspace/elf.h"
#include "aspace/iscache.h"
#include "aspace/timeline.h"
#include "common/fileio.h"
#include "perfdata/decode.h"

/* A place in a thread's stream where something was lost. */
struct loss {
	uint64_t pos;
	uint64_t bytes;		/* trace bytes lost, 0 unknown */
	bool split;		/* the stream is discontinuous here */
	char *why;
};

/* A thread's life: a tid the kernel gives again after the thread exited
 * (FORK of a tid whose EXIT was read) begins a new one, with a stream of
 * its own. */
struct thr {
	pid_t pid, tid;
	size_t proc;
	bool exited;		/* its EXIT was read: */
	uint64_t end_seq;	/* its process's image events from here on
				 * came after it */
	bool gone;		/* a later life took its tid */
	bool have_idx;
	uint32_t idx;		/* per-thread layout: its AUX buffer's index */
	uint64_t first_seq;
	struct ptd_buf pt;
	bool have_next;
	uint64_t next_aux;	/* expected AUX offset of the next payload */
	uint64_t last_len;	/* bytes of the last payload appended */
	bool have_aux_end;
	uint64_t aux_end;	/* end of the AUX data PERF_RECORD_AUX announced */
	struct loss *loss;
	size_t nloss;
};

/* A mapping whose file was not found. */
struct miss {
	uint64_t seq;
	char *msg;
};

struct proc {
	pid_t pid;
	bool exited;		/* its leader's EXIT was read */
	bool gone;		/* a later process took its pid */
	struct ptd_timeline tl;
	struct miss *miss;
	size_t nmiss;
	/* The recording's address filter resolved in this process (see
	 * proc_filter): done once; all zero if there is none. */
	bool filter_done;
	struct pt_conf_addr_filter filter;
};

/* A traced path's build-id (MMAP2 records). */
struct bid {
	char *path;
	char hex[2 * PTD_PERFDATA_BUILD_ID_MAX + 1];
};

/* A change of the kernel's part of every image: a MAP of kernel code from
 * the kernel ELF, or the UNMAP of a range whose code was not found (with
 * why in @miss, reported once). */
struct kev {
	struct ptd_tl_event ev;
	char *miss;
};

/* Where the kernel's code comes from (decode.h "Kernel code"). */
struct kernel {
	bool traced;		/* some intel_pt event traces the kernel */
	const char *kcore;	/* the perf.data directory's kcore, or NULL */
	bool looked;
	bool found;
	char path[PATH_MAX];	/* the ELF (found) */
	struct ptd_elf_info elf;
	char why[1024];		/* why none was found (!found) */
	bool told_missing;	/* a miss was attached to a kev already */
	bool told_modules;
	struct kev *kev;	/* every change so far, in order */
	size_t nkev;
	char **names;		/* traced names resolved to @path */
	size_t nnames;
	/* TEXT_POKE bytes, one after the other, in a memfd mapped as
	 * "[text_poke]" */
	bool poke_open;
	int poke_fd;
	uint64_t poke_size;
	char poke_path[64];
};

struct dec {
	const struct ptd_perfdata *pd;
	const struct ptd_input_opts *o;
	struct ptd_diag *diag;
	struct thr *th;
	size_t nth;
	struct proc *pr;
	size_t npr;
	struct bid *bids;
	size_t nbids;
	struct ptd_iscache *ic;
	struct kernel k;
	/* tid -> pid (pid_of), made on first need */
	bool pidmap_made;
	struct tidpid *pidmap;
	size_t npidmap, npidmap_cap;
	/* This machine's vDSO (own_vdso), made on first need. */
	bool vdso_made;
	int vdso_fd;
	char vdso_bid[2 * PTD_ELF_BUILD_ID_MAX + 1];
};

/* Which process each thread belongs to, by the first record that names
 * both (ITRACE_START, COMM, FORK), sorted by tid: made once, on the first
 * thread whose process is not known. */
struct tidpid {
	pid_t tid, pid;
	size_t seq;		/* the record's place: the first one wins */
};

/* What code changed by PERF_RECORD_TEXT_POKE is called in records. */
#define POKE_NAME "[text_poke]"

/* decode.c */
int pdd_tl_add_proc(struct dec *d, size_t pi, struct ptd_tl_event *ev,
		    const char *miss);
struct thr *pdd_thr_get(struct dec *d, pid_t pid, pid_t tid);
int pdd_thr_append(struct dec *d, struct thr *t, const uint8_t *p,
		   size_t len);
int pdd_add_loss(struct thr *t, uint64_t bytes, bool split,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int pdd_thread_record(struct dec *d, const struct ptd_perf_event *e);

/* code.c */
int pdd_resolve(void *ctx, const char *path, char *out, size_t outsz,
		struct ptd_diag *diag);
bool pdd_is_kernel_map(const struct ptd_perf_event *e);
int pdd_kernel_give(struct dec *d, size_t pi, size_t from, bool maps_only);
int pdd_kernel_change(struct dec *d, const struct ptd_perf_event *e);
int pdd_kernel_poke(struct dec *d, const struct ptd_perf_event *e);
void pdd_kernel_free(struct kernel *k);

/* cpus.c */
int pdd_percpu_pass(struct dec *d);

#endif
