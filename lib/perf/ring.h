/* SPDX-License-Identifier: MIT */
/*
 * The perf ring buffers of one event and the reader that drains them.
 *
 * Layout (the kernel's, see perf_event_open(2) and linux/perf_event.h):
 *
 *   offset 0            header page: struct perf_event_mmap_page
 *   data_offset (1 pg)  data ring, data_size = 2^n pages: perf records
 *   aux_offset          AUX area, aux_size = 2^m pages: raw trace bytes
 *
 * The same layout comes either from a real perf event (ptd_perf_buf_map) or
 * from anonymous shared memory written by ptd's producer
 * (ptd_perf_buf_alloc + perf/producer.h, used by the software PT source), so
 * one reader serves both.
 *
 * Head/tail rules (the kernel's): data_head/aux_head only grow (absolute
 * byte counts; the ring position is head & (size - 1)); the reader loads the
 * head with acquire semantics, reads, issues a full barrier, then stores the
 * tail with release semantics.  In full-trace mode (AUX mapped read-write)
 * the producer never overwrites bytes past the tails; in overwrite
 * (snapshot) mode (AUX mapped read-only) aux_tail is ignored and the AUX
 * ring is overwritten, oldest first.
 *
 * Thread safety: one reader and one producer per buffer, in any two threads
 * (or the kernel as producer).  Nothing else is shared.
 */
#ifndef PTD_PERF_RING_H
#define PTD_PERF_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/perf_event.h>

#include "common/diag.h"

/* Records are at most 64 KiB (perf_event_header.size is a u16). */
#define PTD_PERF_RECORD_MAX 65535u

/* Largest data ring / AUX area accepted (per event). */
#define PTD_PERF_DATA_MAX (1ull << 30)
#define PTD_PERF_AUX_MAX (1ull << 34)

enum ptd_perf_buf_kind {
	PTD_PERF_BUF_NONE = 0,	/* zeroed struct: nothing to free */
	PTD_PERF_BUF_MAPPED,	/* mmap()ed from a perf event fd */
	PTD_PERF_BUF_ALLOC,	/* anonymous shared memory (producer) */
};

/* One mapped buffer.  Fields are read-only for users. */
struct ptd_perf_buf {
	struct perf_event_mmap_page *meta;	/* header page */
	uint8_t *data;			/* data ring (NULL if data_size 0) */
	size_t data_size;		/* 0 or 2^n pages */
	uint8_t *aux;			/* AUX area (NULL if aux_size 0) */
	size_t aux_size;		/* 0 (no AUX) or 2^m pages */
	bool aux_overwrite;		/* snapshot mode: AUX read-only */
	size_t page_size;
	enum ptd_perf_buf_kind kind;
	/* what to munmap */
	void *map_base;
	size_t map_len;
	void *aux_base;			/* separate AUX mapping (MAPPED) */
	size_t aux_len;
};

/* Map the buffers of perf event @fd: header page + @data_size bytes of data
 * ring (PROT_READ|PROT_WRITE, so the kernel honours data_tail), then, if
 * @aux_size is not 0, write aux_offset/aux_size into the header and map the
 * AUX area (read-only if @aux_overwrite: snapshot mode, else read-write).
 * @data_size may be 0 (header page only, e.g. for the time fields).
 * Returns 0, or
 *   -EINVAL  @data_size/@aux_size not 0 or a power-of-two multiple of the
 *            page size, or above PTD_PERF_DATA_MAX/PTD_PERF_AUX_MAX, or @fd < 0,
 *            or the kernel refused the mapping as invalid;
 *   -EPERM / -ENOMEM  the kernel refused the mapping (locked-memory limits:
 *            RLIMIT_MEMLOCK / perf_event_mlock_kb; the message names the
 *            area and its size in KiB);
 *   -EPROTO  the header page the kernel filled disagrees with the layout;
 *   -errno   any other mmap failure (-EOPNOTSUPP: the event has no AUX).
 * with a message in @diag.  *ret is written only on success. */
int ptd_perf_buf_map(int fd, size_t data_size, size_t aux_size,
		     bool aux_overwrite, struct ptd_perf_buf *ret,
		     struct ptd_diag *diag);

/* Allocate the same layout in anonymous shared memory (MAP_SHARED, so it
 * survives fork), header fields filled as the kernel fills them (size,
 * data_offset = page size, data_size, aux_offset = data_offset + data_size,
 * aux_size, cap_bit0_is_deprecated; version/compat_version 0; heads and
 * tails 0).  The AUX area stays writable for the producer even with
 * @aux_overwrite.  @data_size must be a power-of-two multiple of the page
 * size (not 0); @aux_size 0 or likewise.
 * Returns 0, -EINVAL for a bad size, -ENOMEM/-errno from mmap. */
int ptd_perf_buf_alloc(size_t data_size, size_t aux_size, bool aux_overwrite,
		       struct ptd_perf_buf *ret);

/* Unmap either kind and zero the struct.  NULL and zeroed structs are fine;
 * calling it twice is fine. */
void ptd_perf_buf_fini(struct ptd_perf_buf *b);

/* ---- the reader ---- */

enum ptd_perf_loss_kind {
	PTD_PERF_LOSS_RECORDS = 1,	/* PERF_RECORD_LOST: `records` lost */
	PTD_PERF_LOSS_SAMPLES,		/* PERF_RECORD_LOST_SAMPLES: `records` */
	PTD_PERF_LOSS_TRUNCATED,	/* AUX TRUNCATED: trace lost after the
					 * chunk ending at aux_offset; bytes
					 * unknown (bytes_known false) */
	PTD_PERF_LOSS_PARTIAL,		/* AUX PARTIAL: the chunk starting at
					 * aux_offset (`bytes` long) has gaps */
	PTD_PERF_LOSS_COLLISION,	/* AUX COLLISION: likewise */
	PTD_PERF_LOSS_AUX_GAP,		/* aux_offset jumped: `bytes` lost from
					 * aux_offset on (exact) */
	PTD_PERF_LOSS_OVERWRITTEN,	/* AUX bytes no longer in the ring:
					 * `bytes` from aux_offset (exact) */
	PTD_PERF_LOSS_CORRUPT,		/* malformed data ring: `bytes` of it
					 * skipped at data_pos, records unknown;
					 * or (record_type PERF_RECORD_AUX) an
					 * AUX record reaching back before the
					 * expected offset: `bytes` of overlap
					 * from aux_offset, not passed again */
};

/* One loss, reported through ptd_perf_reader_ops.loss. */
struct ptd_perf_loss {
	enum ptd_perf_loss_kind kind;
	uint64_t records;	/* records lost (RECORDS, SAMPLES), else 0 */
	uint64_t bytes;		/* AUX bytes (GAP, OVERWRITTEN, PARTIAL,
				 * COLLISION: chunk size), data-ring bytes
				 * (CORRUPT); 0 if unknown */
	bool bytes_known;	/* false for TRUNCATED */
	uint64_t aux_offset;	/* where in the AUX stream (AUX kinds) */
	uint64_t data_pos;	/* data-ring position (absolute, as data_tail)
				 * of the record that revealed the loss */
	uint32_t record_type;	/* that record's type, 0 if none */
};

/* Callbacks of a drain.  Any may be NULL (ignored).  A negative return
 * aborts the drain and is returned by it; the tails then stay at the last
 * fully consumed record and a later drain resumes at the step that failed
 * (nothing delivered twice, nothing skipped). */
struct ptd_perf_reader_ops {
	/* One whole record, contiguous (copied out if it straddled the end of
	 * the ring); hdr->size has been validated: >= 8, 8-aligned. Valid
	 * only during the call. */
	int (*record)(void *ctx, const struct perf_event_header *hdr);
	/* AUX bytes [aux_offset, aux_offset + len) in stream order; called
	 * before the PERF_RECORD_AUX announcing them is passed to record(). */
	int (*aux)(void *ctx, uint64_t aux_offset, const void *bytes,
		   size_t len);
	int (*loss)(void *ctx, const struct ptd_perf_loss *loss);
};

struct ptd_perf_reader {
	struct ptd_perf_buf *buf;
	uint64_t data_tail;	/* local copy of meta->data_tail */
	uint64_t aux_next;	/* full-trace: next expected aux_offset (all
				 * before it consumed, = aux_tail) */
	uint64_t aux_rec_base;	/* aux_next when the AUX record at data_tail
				 * began to be processed (for resuming) */
	uint64_t snap_head;	/* snapshot: aux_head at the last snapshot */
	unsigned done_steps;	/* steps of the record at data_tail already
				 * done (resume after a callback error) */
	/* counters (read them freely) */
	uint64_t records;	/* records passed to record() */
	uint64_t aux_bytes;	/* AUX bytes passed to aux() */
	uint64_t lost_records;	/* sum of PERF_RECORD_LOST.lost */
	uint64_t lost_samples;	/* sum of PERF_RECORD_LOST_SAMPLES.lost */
	uint64_t lost_aux_bytes;/* AUX_GAP + OVERWRITTEN bytes */
	uint64_t corrupt_bytes;	/* data-ring bytes skipped as corrupt */
	uint64_t truncated;	/* AUX records flagged TRUNCATED */
	uint64_t partial;	/* ... PARTIAL */
	uint64_t collision;	/* ... COLLISION */
	/* a record straddling the ring end is copied here */
	uint64_t copy[(PTD_PERF_RECORD_MAX + 1) / 8];
};

/* Start reading @buf at its current tails (data_tail, aux_tail; snapshot
 * base aux_head 0).  @buf must outlive the reader.  Never fails. */
void ptd_perf_reader_init(struct ptd_perf_reader *r, struct ptd_perf_buf *buf);

/* Read every record from data_tail to data_head (loaded once, acquire).
 * For each PERF_RECORD_AUX {aux_offset, aux_size, flags}, in this order:
 * an AUX_GAP loss if aux_offset is past the expected one (a CORRUPT loss
 * with the overlap if it is before), PARTIAL/COLLISION losses, an
 * OVERWRITTEN loss for bytes no longer in the ring, then (full-trace mode
 * only) ops->aux with the bytes (twice when the range wraps the ring) and
 * aux_tail advanced past them, then a TRUNCATED loss, then ops->record.
 * PERF_RECORD_LOST / LOST_SAMPLES are reported as losses, then passed on.
 * A record with a size < 8, not 8-aligned or larger than what is left up to
 * data_head is a CORRUPT loss of everything up to data_head (resync there);
 * a PERF_RECORD_AUX/LOST shorter than its fields is a CORRUPT loss of that
 * record only.  data_tail is stored (full barrier, then release) after
 * each record.
 * Returns the number of records passed to ops->record (>= 0), or the
 * negative value a callback returned. */
int ptd_perf_reader_drain(struct ptd_perf_reader *r,
			  const struct ptd_perf_reader_ops *ops, void *ctx);

/* Overwrite (snapshot) mode: pass the newest min(aux_head, aux_size) bytes
 * ending at aux_head to ops->aux, oldest first (one or two calls), after an
 * OVERWRITTEN loss of the bytes written since the previous snapshot but
 * overwritten before this one (aux_head - previous aux_head - aux_size,
 * when positive).  Each snapshot passes the whole window, so bytes still in
 * the ring are passed again; aux_offset tells the caller what is new.
 * The caller disables the event around it.
 * Returns the number of bytes passed, -EINVAL if the buffer has no AUX area
 * or is not in overwrite mode, or a callback's negative value (the snapshot
 * base is then not advanced). */
int64_t ptd_perf_reader_snapshot(struct ptd_perf_reader *r,
				 const struct ptd_perf_reader_ops *ops,
				 void *ctx);

/* A short name for a loss kind ("lost-records", "aux-truncated", ...). */
const char *ptd_perf_loss_name(enum ptd_perf_loss_kind kind);

#endif
