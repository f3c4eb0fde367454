/* SPDX-License-Identifier: MIT */
/*
 * A kernel-faithful perf buffer producer (see producer.h).
 */
#include "perf/producer.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

struct lost_record {
	struct perf_event_header header;
	uint64_t id;
	uint64_t lost;
};

struct aux_record {
	struct perf_event_header header;
	uint64_t aux_offset;
	uint64_t aux_size;
	uint64_t flags;
};

/* The kernel's CIRC_SPACE(head, tail, size): free bytes, keeping one byte
 * unused so a full ring never looks empty; 0 if the consumer's tail is
 * nonsense (more than a ring behind, or ahead of the head). */
static uint64_t circ_space(uint64_t head, uint64_t tail, uint64_t size)
{
	if (head - tail >= size)
		return 0;
	return (tail - head - 1) & (size - 1);
}

static uint64_t load_acquire(const volatile __u64 *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Copy @len bytes (<= @size) to absolute position @pos of ring @ring. */
static void ring_put(uint8_t *ring, size_t size, uint64_t pos,
		     const void *src, size_t len)
{
	size_t off = (size_t)(pos & (size - 1));
	size_t first = len < size - off ? len : size - off;

	memcpy(ring + off, src, first);
	memcpy(ring, (const uint8_t *)src + first, len - first);
}

void ptd_perf_producer_init(struct ptd_perf_producer *p,
			    struct ptd_perf_buf *buf)
{
	memset(p, 0, sizeof(*p));
	p->buf = buf;
	p->wake_fd = -1;
	p->wake_bytes = 1;
	p->bad_size = -1;
	if (buf->meta) {
		p->data_head = load_acquire(&buf->meta->data_head);
		p->aux_head = load_acquire(&buf->meta->aux_head);
	}
}

void ptd_perf_producer_set_wake(struct ptd_perf_producer *p, int fd,
				uint64_t wake_bytes)
{
	p->wake_fd = fd;
	p->wake_bytes = wake_bytes ? wake_bytes : 1;
	p->since_wake = 0;
}

static int wake(struct ptd_perf_producer *p)
{
	uint64_t one = 1;

	if (p->wake_fd < 0)
		return 0;
	p->since_wake = 0;
	if (write(p->wake_fd, &one, sizeof(one)) != (ssize_t)sizeof(one)) {
		/* EAGAIN: the counter is full, the reader is awake anyway */
		if (errno != EAGAIN)
			return -errno;
	}
	p->wakes++;
	return 0;
}

/* After a publish: wake the reader once enough has accumulated.  A failed
 * eventfd write here is not the writer's problem; flush() reports it. */
static void published(struct ptd_perf_producer *p, uint64_t bytes)
{
	p->since_wake += bytes;
	if (p->wake_fd >= 0 && p->since_wake >= p->wake_bytes)
		(void)wake(p);
}

static void put_data(struct ptd_perf_producer *p, const void *src,
		     size_t len)
{
	ring_put(p->buf->data, p->buf->data_size, p->data_head, src, len);
	p->data_head += len;
}

static void put_lost(struct ptd_perf_producer *p)
{
	struct lost_record l = {
		.header = { .type = PERF_RECORD_LOST, .size = sizeof(l) },
		.id = p->id,
		.lost = p->pending_lost,
	};

	put_data(p, &l, sizeof(l));
	p->pending_lost = 0;
	p->lost_written++;
	p->records++;
}

/* perf_output_begin()/end(): the record (and a pending LOST in front of
 * it) if both fit, else drop and count it. */
static int put_record(struct ptd_perf_producer *p, const void *rec,
		      size_t size)
{
	struct ptd_perf_buf *b = p->buf;
	uint64_t tail = load_acquire(&b->meta->data_tail);
	uint64_t start = p->data_head;
	size_t need = size + (p->pending_lost ? sizeof(struct lost_record) : 0);

	if (circ_space(p->data_head, tail, b->data_size) < need) {
		p->lost_records++;
		p->pending_lost++;
		return -ENOSPC;
	}
	if (p->pending_lost)
		put_lost(p);
	if (p->bad_size >= 0) {
		/* test injection: a lying header.size */
		struct perf_event_header h;

		memcpy(&h, rec, sizeof(h));
		h.size = (uint16_t)p->bad_size;
		p->bad_size = -1;
		put_data(p, &h, sizeof(h));
		put_data(p, (const uint8_t *)rec + sizeof(h),
			 size - sizeof(h));
	} else {
		put_data(p, rec, size);
	}
	p->records++;
	/* perf_output_put_handle(): smp_wmb(), then data_head */
	__atomic_store_n(&b->meta->data_head, p->data_head, __ATOMIC_RELEASE);
	published(p, p->data_head - start);
	return 0;
}

int ptd_perf_producer_record(struct ptd_perf_producer *p, const void *rec,
			     size_t size)
{
	const struct ptd_perf_buf *b = p->buf;
	struct perf_event_header h;

	if (!b->meta || !b->data_size || !rec)
		return -EINVAL;
	if (size < sizeof(h) || size % 8 || size > PTD_PERF_RECORD_MAX ||
	    size > b->data_size - 8)
		return -EINVAL;
	memcpy(&h, rec, sizeof(h));
	if (h.size != size)
		return -EINVAL;
	return put_record(p, rec, size);
}

/* Overwrite mode: everything goes in; only the last aux_size bytes of a
 * longer chunk survive, at their stream positions. */
static int64_t aux_overwrite(struct ptd_perf_producer *p, const void *bytes,
			     size_t len, uint64_t flags)
{
	struct ptd_perf_buf *b = p->buf;
	uint64_t start = p->aux_head;
	size_t skip = len > b->aux_size ? len - b->aux_size : 0;

	if (len)
		ring_put(b->aux, b->aux_size, start + skip,
			 (const uint8_t *)bytes + skip, len - skip);
	p->aux_head += len;
	p->aux_bytes += len;
	__atomic_store_n(&b->meta->aux_head, p->aux_head, __ATOMIC_RELEASE);
	/* Linux >= 4.20 writes no record for OVERWRITE alone. */
	if (flags & ~(uint64_t)PERF_AUX_FLAG_OVERWRITE) {
		struct aux_record a = {
			.header = { .type = PERF_RECORD_AUX,
				    .size = sizeof(a) },
			.aux_offset = start,
			.aux_size = len,
			.flags = flags | PERF_AUX_FLAG_OVERWRITE,
		};

		if (put_record(p, &a, sizeof(a)) == 0)
			p->aux_records++;
		else
			p->aux_records_lost++;
	}
	published(p, len);
	return (int64_t)len;
}

int64_t ptd_perf_producer_aux(struct ptd_perf_producer *p, const void *bytes,
			      size_t len, uint64_t flags)
{
	struct ptd_perf_buf *b = p->buf;
	struct aux_record a = {
		.header = { .type = PERF_RECORD_AUX, .size = sizeof(a) },
		.aux_offset = p->aux_head,
	};
	uint64_t n;

	if (!b->meta || !b->aux_size || !b->data_size || (len && !bytes))
		return -EINVAL;
	if (b->aux_overwrite)
		return aux_overwrite(p, bytes, len, flags);

	n = circ_space(p->aux_head, load_acquire(&b->meta->aux_tail),
		       b->aux_size);
	if (n > len)
		n = len;
	a.flags = flags;
	if (n < len) {
		/* the PMU ran out of room: the rest of the trace is lost */
		a.flags |= PERF_AUX_FLAG_TRUNCATED;
		p->aux_lost_bytes += len - n;
		p->truncated++;
	}
	if (n == 0 && a.flags == 0)
		return 0;
	ring_put(b->aux, b->aux_size, p->aux_head, bytes, (size_t)n);
	p->aux_head += n;
	p->aux_bytes += n;
	a.aux_size = n;
	/* perf_aux_output_end(): the record and the published aux_head */
	__atomic_store_n(&b->meta->aux_head, p->aux_head, __ATOMIC_RELEASE);
	if (put_record(p, &a, sizeof(a)) == 0) {
		p->aux_records++;
	} else {
		p->aux_records_lost++;
		p->aux_unannounced += n;
		if (a.flags & PERF_AUX_FLAG_TRUNCATED)
			p->truncated_lost++;
	}
	published(p, n);
	if (len && n == 0)
		return -ENOSPC;
	return (int64_t)n;
}

void ptd_perf_producer_space(const struct ptd_perf_producer *p,
			     size_t *ret_data_free, size_t *ret_aux_free)
{
	const struct ptd_perf_buf *b = p->buf;

	if (ret_data_free) {
		uint64_t s = 0;

		if (b->meta && b->data_size)
			s = circ_space(p->data_head,
				       load_acquire(&b->meta->data_tail),
				       b->data_size);
		if (p->pending_lost)
			s = s > sizeof(struct lost_record) ?
				    s - sizeof(struct lost_record) : 0;
		s &= ~(uint64_t)7;	/* records are 8-aligned */
		if (s > PTD_PERF_RECORD_MAX)
			s = PTD_PERF_RECORD_MAX & ~7u;
		*ret_data_free = (size_t)s;
	}
	if (ret_aux_free) {
		uint64_t s = 0;

		if (b->meta && b->aux_size)
			s = b->aux_overwrite ?
				    b->aux_size :
				    circ_space(p->aux_head,
					       load_acquire(&b->meta->aux_tail),
					       b->aux_size);
		*ret_aux_free = (size_t)s;
	}
}

int ptd_perf_producer_flush(struct ptd_perf_producer *p)
{
	struct ptd_perf_buf *b = p->buf;
	int err = 0;

	/* Beyond the kernel, which writes LOST only in front of the next
	 * record: a stream that ends must still account for its drops. */
	if (p->pending_lost && b->meta && b->data_size) {
		uint64_t tail = load_acquire(&b->meta->data_tail);
		uint64_t start = p->data_head;

		if (circ_space(p->data_head, tail, b->data_size) <
		    sizeof(struct lost_record)) {
			err = -ENOSPC;
		} else {
			put_lost(p);
			__atomic_store_n(&b->meta->data_head, p->data_head,
					 __ATOMIC_RELEASE);
			p->since_wake += p->data_head - start;
		}
	}
	if (p->wake_fd >= 0) {
		int werr = wake(p);

		if (werr < 0)
			return werr;
	}
	return err;
}

int ptd_perf_producer_inject_aux_gap(struct ptd_perf_producer *p,
				     uint64_t bytes)
{
	struct ptd_perf_buf *b = p->buf;
	uint8_t fill[256];

	if (!b->meta || !b->aux_size)
		return -EINVAL;
	if (!b->aux_overwrite &&
	    circ_space(p->aux_head, load_acquire(&b->meta->aux_tail),
		       b->aux_size) < bytes)
		return -ENOSPC;
	memset(fill, 0xa5, sizeof(fill));
	for (uint64_t done = 0; done < bytes;) {
		size_t n = bytes - done < sizeof(fill) ? (size_t)(bytes - done) :
							 sizeof(fill);

		ring_put(b->aux, b->aux_size, p->aux_head, fill, n);
		p->aux_head += n;
		done += n;
	}
	__atomic_store_n(&b->meta->aux_head, p->aux_head, __ATOMIC_RELEASE);
	return 0;
}

void ptd_perf_producer_inject_bad_size(struct ptd_perf_producer *p,
				       uint16_t size)
{
	p->bad_size = size;
}
