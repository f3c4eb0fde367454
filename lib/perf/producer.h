/* SPDX-License-Identifier: MIT */
/*
 * A producer that writes a perf buffer (perf/ring.h) the way the kernel
 * does, for the software PT source and for the reader's tests.
 *
 * Kernel rules followed (kernel/events/ring_buffer.c):
 *  - Data ring: a record is written only if it fits before data_tail
 *    (CIRC_SPACE: at most data_size - 1 bytes in use); otherwise it is
 *    dropped and counted.  The count is written as PERF_RECORD_LOST {id,
 *    lost} in front of the next record that fits (both must fit).
 *    data_head is published with release semantics after the bytes.
 *  - AUX, full-trace mode: bytes are written at aux_head as far as aux_tail
 *    allows (CIRC_SPACE); what does not fit is lost and the chunk's
 *    PERF_RECORD_AUX {aux_offset, aux_size, flags} carries
 *    PERF_AUX_FLAG_TRUNCATED.  aux_head is published, then the record is
 *    written to the data ring (it may itself be dropped and counted in a
 *    PERF_RECORD_LOST; the reader then sees an aux_offset jump).
 *  - AUX, overwrite mode: bytes always go in, overwriting the oldest;
 *    aux_head advances; no PERF_RECORD_AUX is written for plain chunks
 *    (Linux >= 4.20 suppresses OVERWRITE-only records), but one is written
 *    when the caller passes other flags.
 * Where ptd goes beyond the kernel, it says so: a chunk of which nothing
 * fits still gets a zero-size TRUNCATED record (the kernel would disable the
 * event silently), and ptd_perf_producer_flush() writes a pending
 * PERF_RECORD_LOST on its own (the kernel waits for the next record).
 *
 * Lossless use (the software PT source): before writing, ask
 * ptd_perf_producer_space(); if the record or chunk does not fit, stop the
 * traced program and wait (sleep or poll the reader's progress) until it
 * does.  The producer itself never waits.
 *
 * One producer per buffer; it may run in another thread than the reader.
 */
#ifndef PTD_PERF_PRODUCER_H
#define PTD_PERF_PRODUCER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "perf/ring.h"

struct ptd_perf_producer {
	struct ptd_perf_buf *buf;
	uint64_t data_head;	/* local copies of the published heads */
	uint64_t aux_head;
	uint64_t id;		/* PERF_RECORD_LOST.id (the event id) */
	uint64_t pending_lost;	/* dropped records not yet reported */
	/* wakeup: an eventfd (-1: none) written once wake_bytes (data + AUX)
	 * have been published since the last wake, and on flush */
	int wake_fd;
	uint64_t wake_bytes;
	uint64_t since_wake;
	uint64_t wakes;		/* wakeups written */
	/* counters (read them freely) */
	uint64_t records;	/* records written, LOST records included */
	uint64_t lost_records;	/* records dropped (AUX records included) */
	uint64_t lost_written;	/* PERF_RECORD_LOST records written */
	uint64_t aux_bytes;	/* AUX bytes written */
	uint64_t aux_lost_bytes;/* AUX bytes that did not fit (TRUNCATED) */
	uint64_t aux_records;	/* PERF_RECORD_AUX written */
	uint64_t aux_records_lost;	/* PERF_RECORD_AUX dropped */
	uint64_t aux_unannounced;	/* AUX bytes whose record was dropped */
	uint64_t truncated;	/* chunks that were truncated */
	uint64_t truncated_lost;/* ... whose (TRUNCATED) record was dropped */
	/* test injection (see the inject functions) */
	int bad_size;		/* next record's header.size, -1: none */
};

/* Produce into @buf (from ptd_perf_buf_alloc) starting at its current heads.
 * @buf must outlive the producer.  No wakeup fd; id 0. */
void ptd_perf_producer_init(struct ptd_perf_producer *p,
			    struct ptd_perf_buf *buf);

/* Write eventfd @fd (-1: none) once at least @wake_bytes (>= 1; like
 * aux_watermark / wakeup_watermark) have been published since the last
 * wake, and on flush.  The fd stays the caller's. */
void ptd_perf_producer_set_wake(struct ptd_perf_producer *p, int fd,
				uint64_t wake_bytes);

/* Write record @rec of @size bytes (its header.size must equal @size,
 * @size 8-aligned, >= 8, <= data_size - 8 and <= PTD_PERF_RECORD_MAX).
 * Returns 0, -ENOSPC if it did not fit (dropped and counted; reported later
 * as PERF_RECORD_LOST), or -EINVAL for a bad record or a buffer without
 * data ring. */
int ptd_perf_producer_record(struct ptd_perf_producer *p, const void *rec,
			     size_t size);

/* Write @len AUX bytes (see the rules above); @flags (PERF_AUX_FLAG_*) are
 * or-ed into the PERF_RECORD_AUX, so tests can inject PARTIAL/COLLISION.
 * @len 0 writes a record only if @flags are not 0.
 * Returns the bytes written (may be < @len: TRUNCATED), -ENOSPC if nothing
 * fit (full-trace mode, @len > 0), or -EINVAL without an AUX area. */
int64_t ptd_perf_producer_aux(struct ptd_perf_producer *p, const void *bytes,
			      size_t len, uint64_t flags);

/* Free space now: the largest record that would fit (a pending
 * PERF_RECORD_LOST's 24 bytes already deducted; 0 if none fits), and the
 * AUX bytes that fit without truncation (full-trace mode; overwrite mode:
 * aux_size).  Either pointer may be NULL. */
void ptd_perf_producer_space(const struct ptd_perf_producer *p,
			     size_t *ret_data_free, size_t *ret_aux_free);

/* Write a pending PERF_RECORD_LOST if it fits, then the wakeup (if a wake
 * fd is set).  Returns 0, -ENOSPC if a pending LOST still does not fit, or
 * -errno from writing the eventfd (EAGAIN, a full counter, is not an
 * error). */
int ptd_perf_producer_flush(struct ptd_perf_producer *p);

/* TEST INJECTION ONLY.  Advance aux_head by @bytes (filled with 0xa5) with
 * no PERF_RECORD_AUX, so the next record's aux_offset jumps by @bytes.
 * Returns 0, -ENOSPC if they do not fit (full-trace), -EINVAL without AUX. */
int ptd_perf_producer_inject_aux_gap(struct ptd_perf_producer *p,
				     uint64_t bytes);

/* TEST INJECTION ONLY.  The next record written (of any kind) carries
 * header.size = @size in the ring instead of its real size (its real
 * length is still what is written and what data_head advances by). */
void ptd_perf_producer_inject_bad_size(struct ptd_perf_producer *p,
				       uint16_t size);

#endif
