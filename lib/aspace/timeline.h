/* SPDX-License-Identifier: MIT */
/*
 * The memory-map timeline of one process: every change to its executable
 * mappings, placed in each thread's PT stream.
 *
 * A change happens at one moment; at that moment each live thread's PT
 * stream has some length.  An event records, for every thread alive then,
 * that stream position ("pos").  A decoder of thread T applies an event to
 * T's image once its decoder offset in T's stream reaches pos[T]; a thread
 * created after the event starts with it already applied (its first stream
 * byte has no position for it, so every event with seq < the thread's
 * first_seq applies at once); an event after a thread's stream ended has
 * no position for it either, and is not applied to it.
 *
 * For the thread that made the change (an mmap/munmap/mprotect/execve
 * syscall) the software source places pos exactly between the TIP.PGD of the
 * syscall and the TIP.PGE of the return to user space, so the change falls
 * where the trace itself shows the thread was in the kernel.
 *
 * File form (timeline.jsonl, one JSON object per line, all addresses hex
 * strings):
 *   {"seq":3,"op":"map","start":"0x7f..","end":"0x7f..","pgoff":"0x2000",
 *    "path":"/usr/lib/x86_64-linux-gnu/libc.so.6","pos":{"123":4096}}
 *   {"seq":4,"op":"snapshot","start":..,"end":..,"name":"[vdso]",
 *    "file":"snap-4.bin","pos":{..}}     file is relative to the capture
 *   {"seq":5,"op":"unmap","start":..,"end":..,"pos":{..}}
 *   {"seq":6,"op":"exec","path":"/usr/bin/ls","pos":{..}}   clears the image
 * A map event may say which file the process mapped (aspace/fileid.h), as
 * /proc/PID/maps does: "dev":"fe:01","ino":"0x1a2b" (both or neither).
 * Saving a bundle checks that each file it copies is that one (an update
 * may have replaced it since: ptd_timeline_check_file); a live decode
 * checks too.  An offline decode does not (aspace/iscache.h says why).
 */
#ifndef PTD_ASPACE_TIMELINE_H
#define PTD_ASPACE_TIMELINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "aspace/image.h"
#include "common/diag.h"

enum ptd_tl_op {
	PTD_TL_MAP,		/* file-backed executable mapping appeared */
	PTD_TL_SNAPSHOT,	/* non-file code, bytes saved in a file */
	PTD_TL_UNMAP,		/* range no longer executable */
	PTD_TL_EXEC,		/* new program: image cleared */
};

struct ptd_tl_pos {
	pid_t tid;
	uint64_t pos;
};

struct ptd_tl_event {
	uint64_t seq;		/* strictly increasing */
	enum ptd_tl_op op;
	uint64_t start, end;	/* MAP, SNAPSHOT, UNMAP */
	uint64_t pgoff;		/* MAP */
	char *path;		/* MAP: file; EXEC: new program; else NULL */
	/* MAP: the file the process mapped, when known (live sessions:
	 * /proc/PID/maps, MMAP2); applying checks @path is that file
	 * (ptd_image_map_file_id). */
	struct ptd_file_id id;
	char *name;		/* SNAPSHOT: "[vdso]", "[anon]"...; else NULL */
	char *file;		/* SNAPSHOT: bytes file, relative to the
				 * capture directory; else NULL */
	struct ptd_tl_pos *pos;	/* per live thread */
	size_t npos;
};

struct ptd_timeline {
	struct ptd_tl_event *ev;
	size_t n;
	size_t cap;
	uint64_t next_seq;
};

/* Limits for parsing untrusted files. */
#define PTD_TL_MAX_EVENTS 1000000u
#define PTD_TL_MAX_LINE 65536u

void ptd_timeline_init(struct ptd_timeline *tl);
void ptd_timeline_fini(struct ptd_timeline *tl);

/* Append an event (the strings and pos are copied; seq is assigned).
 * Returns the seq (>= 0) or -ENOMEM. */
int64_t ptd_timeline_add(struct ptd_timeline *tl,
			 const struct ptd_tl_event *ev);

/* Position of @tid in @ev, or -1 if @ev has none for it. */
int64_t ptd_tl_event_pos(const struct ptd_tl_event *ev, pid_t tid);

/* Check that the file open at @fd is the one every map event of @path in
 * @tl says the process mapped (events that do not say: nothing to check).
 * Returns 0, -PTD_EIDENTITY with the message of ptd_file_id_check() in
 * @diag, or -errno from fstat. */
int ptd_timeline_check_file(const struct ptd_timeline *tl, const char *path,
			    int fd, struct ptd_diag *diag);

/* Write as JSON lines.  Returns 0 or -errno. */
int ptd_timeline_write(const struct ptd_timeline *tl, FILE *f);

/* Parse JSON lines (untrusted).  @origin names the input for messages.
 * Snapshot file names must be plain (ptd_filename_check()).
 * Returns 0, or -PTD_EFORMAT / -PTD_ELIMIT with "origin:LINE: what" (a
 * field: "origin:LINE: FIELD: what") in @diag, or -ENOMEM. */
int ptd_timeline_parse(const char *text, size_t len, const char *origin,
		       struct ptd_timeline *ret, struct ptd_diag *diag);

/* Apply one event to @img.  Snapshot files are resolved against @dir.
 * Returns 0 or a negative error with @diag naming the event and file. */
int ptd_tl_event_apply(const struct ptd_tl_event *ev, struct ptd_image *img,
		       const char *dir, struct ptd_diag *diag);

/* A cursor that follows one thread through the timeline. */
struct ptd_tl_cursor {
	const struct ptd_timeline *tl;
	const char *dir;
	pid_t tid;
	uint64_t end_seq;	/* events from this seq on are not the
				 * thread's (its id was reused) */
	size_t next;		/* index of the next event to consider */
	uint64_t next_pos;	/* stream position of that event for tid;
				 * UINT64_MAX if none is left */
};

/* Start following @tid, whose stream begins after event @first_seq - 1
 * and ended before event @end_seq (UINT64_MAX: not known to have ended):
 * every event with seq < @first_seq is applied to @img now, and none with
 * seq >= @end_seq ever is -- a later thread given the same id has its own
 * positions in those.  Returns 0 or a negative error (from
 * ptd_tl_event_apply). */
int ptd_tl_cursor_init(struct ptd_tl_cursor *c, const struct ptd_timeline *tl,
		       const char *dir, pid_t tid, uint64_t first_seq,
		       uint64_t end_seq, struct ptd_image *img,
		       struct ptd_diag *diag);

/* Apply every event whose position for the thread is <= @offset.  Cheap when
 * nothing is due (one comparison): call it before each decoder step.
 * Returns the number of events applied or a negative error; on error the
 * failed event is skipped so decoding can go on. */
static inline int ptd_tl_cursor_due(const struct ptd_tl_cursor *c,
				    uint64_t offset)
{
	return offset >= c->next_pos;
}
int ptd_tl_cursor_advance(struct ptd_tl_cursor *c, uint64_t offset,
			  struct ptd_image *img, struct ptd_diag *diag);

/* The event the cursor would apply next, or NULL if none is left. */
const struct ptd_tl_event *ptd_tl_cursor_peek(struct ptd_tl_cursor *c);

/* Apply exactly the next event, whatever its position.  Returns 1, 0 if
 * none is left, or a negative error (the event is skipped). */
int ptd_tl_cursor_apply_next(struct ptd_tl_cursor *c, struct ptd_image *img,
			     struct ptd_diag *diag);

/* Add to @ic every section a cursor of thread @tid over @tl (the
 * arguments of ptd_tl_cursor_init) adds on its way to the end: the image
 * as the thread started, then each of its events (one that fails is
 * passed over, as a decode's cursor passes it).  For decodes that share
 * @ic and must give its sections the same isids -- given in the order
 * sections are first added -- whatever order they run in
 * (decode/threadpar.h).  Returns 0 or -ENOMEM. */
int ptd_tl_add_sections(struct ptd_iscache *ic, const struct ptd_timeline *tl,
			const char *dir, pid_t tid, uint64_t first_seq,
			uint64_t end_seq);

#endif
