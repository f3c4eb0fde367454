/* SPDX-License-Identifier: MIT */
/*
 * perf ring buffers: mapping, allocation and the reader (see ring.h).
 */
#include "perf/ring.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Fields of PERF_RECORD_AUX / LOST / LOST_SAMPLES after the header. */
struct aux_fields {
	uint64_t aux_offset;
	uint64_t aux_size;
	uint64_t flags;
};

struct lost_fields {
	uint64_t id;
	uint64_t lost;
};

static size_t page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	return ps > 0 ? (size_t)ps : 4096;
}

/* A ring size the kernel accepts: a power-of-two number of pages. */
static bool ring_size_ok(size_t size, size_t page)
{
	return size >= page && (size & (size - 1)) == 0;
}

static int check_sizes(size_t data_size, size_t aux_size, size_t page,
		       struct ptd_diag *diag)
{
	if (data_size != 0 && !ring_size_ok(data_size, page))
		return ptd_diagf(diag, -EINVAL,
				 "perf data ring size %zu is not a power-of-two "
				 "number of %zu-byte pages", data_size, page);
	if (data_size > PTD_PERF_DATA_MAX)
		return ptd_diagf(diag, -EINVAL,
				 "perf data ring size %zu KiB is above the "
				 "limit of %llu KiB", data_size >> 10,
				 PTD_PERF_DATA_MAX >> 10);
	if (aux_size != 0 && !ring_size_ok(aux_size, page))
		return ptd_diagf(diag, -EINVAL,
				 "perf AUX area size %zu is not a power-of-two "
				 "number of %zu-byte pages", aux_size, page);
	if (aux_size > PTD_PERF_AUX_MAX)
		return ptd_diagf(diag, -EINVAL,
				 "perf AUX area size %zu KiB is above the "
				 "limit of %llu KiB", aux_size >> 10,
				 PTD_PERF_AUX_MAX >> 10);
	return 0;
}

/* The message for a refused mmap of @what (@size bytes). */
static int map_error(struct ptd_diag *diag, int err, const char *what,
		     size_t size)
{
	if (err == -EPERM || err == -ENOMEM)
		return ptd_diagf(diag, err,
				 "%s of %zu KiB refused (%s): RLIMIT_MEMLOCK / "
				 "perf_event_mlock_kb", what, size >> 10,
				 ptd_strerror(err));
	return ptd_diagf(diag, err, "failed to map %s of %zu KiB: %s", what,
			 size >> 10, ptd_strerror(err));
}

int ptd_perf_buf_map(int fd, size_t data_size, size_t aux_size,
		     bool aux_overwrite, struct ptd_perf_buf *ret,
		     struct ptd_diag *diag)
{
	size_t page = page_size();
	struct ptd_perf_buf b = { .page_size = page };
	int err;

	if (fd < 0)
		return ptd_diagf(diag, -EINVAL, "no perf event fd (%d)", fd);
	err = check_sizes(data_size, aux_size, page, diag);
	if (err < 0)
		return err;

	b.map_len = page + data_size;
	b.map_base = mmap(NULL, b.map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
			  fd, 0);
	if (b.map_base == MAP_FAILED)
		return map_error(diag, -errno, "perf data ring (+ header page)",
				 data_size);
	b.kind = PTD_PERF_BUF_MAPPED;
	b.meta = b.map_base;
	b.data_size = data_size;
	b.data = data_size ? (uint8_t *)b.map_base + page : NULL;

	/* Kernels since 4.1 say where the data ring is; it must be where we
	 * mapped it (0 means an older kernel: the fixed layout). */
	if (data_size && b.meta->data_offset != 0 &&
	    (b.meta->data_offset != page || b.meta->data_size != data_size)) {
		err = ptd_diagf(diag, -EPROTO,
				"perf header page says data ring at %llu size "
				"%llu, mapped at %zu size %zu",
				(unsigned long long)b.meta->data_offset,
				(unsigned long long)b.meta->data_size, page,
				data_size);
		goto err;
	}
	if (aux_size) {
		int prot = aux_overwrite ? PROT_READ : PROT_READ | PROT_WRITE;
		uint64_t aux_offset = page + data_size;

		/* The kernel takes the AUX geometry from the header page. */
		b.meta->aux_offset = aux_offset;
		b.meta->aux_size = aux_size;
		b.aux_base = mmap(NULL, aux_size, prot, MAP_SHARED, fd,
				  (off_t)aux_offset);
		if (b.aux_base == MAP_FAILED) {
			b.aux_base = NULL;
			err = map_error(diag, -errno, "AUX area", aux_size);
			goto err;
		}
		b.aux_len = aux_size;
		b.aux = b.aux_base;
		b.aux_size = aux_size;
		b.aux_overwrite = aux_overwrite;
	}
	*ret = b;
	return 0;
err:
	ptd_perf_buf_fini(&b);
	return err;
}

int ptd_perf_buf_alloc(size_t data_size, size_t aux_size, bool aux_overwrite,
		       struct ptd_perf_buf *ret)
{
	size_t page = page_size();
	struct ptd_perf_buf b = { .page_size = page };
	struct perf_event_mmap_page *m;

	if (data_size == 0 || check_sizes(data_size, aux_size, page, NULL) < 0)
		return -EINVAL;
	b.map_len = page + data_size + aux_size;
	b.map_base = mmap(NULL, b.map_len, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (b.map_base == MAP_FAILED)
		return -errno;
	b.kind = PTD_PERF_BUF_ALLOC;
	b.meta = m = b.map_base;
	b.data = (uint8_t *)b.map_base + page;
	b.data_size = data_size;
	if (aux_size) {
		b.aux = b.data + data_size;
		b.aux_size = aux_size;
		b.aux_overwrite = aux_overwrite;
	}
	/* What perf_event_init_userpage() and the AUX mmap leave there. */
	m->version = 0;
	m->compat_version = 0;
	m->cap_bit0_is_deprecated = 1;
	m->size = offsetof(struct perf_event_mmap_page, __reserved);
	m->data_offset = page;
	m->data_size = data_size;
	m->aux_offset = aux_size ? page + data_size : 0;
	m->aux_size = aux_size;
	*ret = b;
	return 0;
}

void ptd_perf_buf_fini(struct ptd_perf_buf *b)
{
	if (!b)
		return;
	if (b->aux_base)
		(void)munmap(b->aux_base, b->aux_len);
	if (b->map_base)
		(void)munmap(b->map_base, b->map_len);
	memset(b, 0, sizeof(*b));
}

/* ---- the reader ---- */

static uint64_t load_acquire(const volatile __u64 *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* The kernel's order for a tail: all reads of the consumed bytes done
 * (full barrier, smp_mb() in the documentation), then the store. */
static void store_tail(volatile __u64 *p, uint64_t v)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* Copy @len bytes at absolute position @pos of ring @ring (@size a power
 * of two, @len <= @size) into @dst, across the wrap. */
static void ring_copy(void *dst, const uint8_t *ring, size_t size,
		      uint64_t pos, size_t len)
{
	size_t off = (size_t)(pos & (size - 1));
	size_t first = len < size - off ? len : size - off;

	memcpy(dst, ring + off, first);
	memcpy((uint8_t *)dst + first, ring, len - first);
}

void ptd_perf_reader_init(struct ptd_perf_reader *r, struct ptd_perf_buf *buf)
{
	memset(r, 0, offsetof(struct ptd_perf_reader, copy));
	r->buf = buf;
	if (buf->meta) {
		r->data_tail = load_acquire(&buf->meta->data_tail);
		r->aux_next = load_acquire(&buf->meta->aux_tail);
	}
}

const char *ptd_perf_loss_name(enum ptd_perf_loss_kind kind)
{
	switch (kind) {
	case PTD_PERF_LOSS_RECORDS:
		return "lost-records";
	case PTD_PERF_LOSS_SAMPLES:
		return "lost-samples";
	case PTD_PERF_LOSS_TRUNCATED:
		return "aux-truncated";
	case PTD_PERF_LOSS_PARTIAL:
		return "aux-partial";
	case PTD_PERF_LOSS_COLLISION:
		return "aux-collision";
	case PTD_PERF_LOSS_AUX_GAP:
		return "aux-gap";
	case PTD_PERF_LOSS_OVERWRITTEN:
		return "aux-overwritten";
	case PTD_PERF_LOSS_CORRUPT:
		return "corrupt";
	}
	return "unknown";
}

static void count_loss(struct ptd_perf_reader *r, const struct ptd_perf_loss *l)
{
	switch (l->kind) {
	case PTD_PERF_LOSS_RECORDS:
		r->lost_records += l->records;
		break;
	case PTD_PERF_LOSS_SAMPLES:
		r->lost_samples += l->records;
		break;
	case PTD_PERF_LOSS_TRUNCATED:
		r->truncated++;
		break;
	case PTD_PERF_LOSS_PARTIAL:
		r->partial++;
		break;
	case PTD_PERF_LOSS_COLLISION:
		r->collision++;
		break;
	case PTD_PERF_LOSS_AUX_GAP:
	case PTD_PERF_LOSS_OVERWRITTEN:
		r->lost_aux_bytes += l->bytes;
		break;
	case PTD_PERF_LOSS_CORRUPT:
		r->corrupt_bytes += l->bytes;
		break;
	}
}

/*
 * Resuming after a callback error: the work for the record at data_tail is
 * a fixed sequence of steps computed from the record alone (and the AUX
 * position when its processing began), so a later drain recomputes the
 * same sequence and skips the first r->done_steps of them.  Counters move
 * only when a step succeeds.
 */
static bool step_due(struct ptd_perf_reader *r, unsigned *n)
{
	return (*n)++ >= r->done_steps;
}

/* Report loss @l (and count it, if @count). */
static int step_loss_opt(struct ptd_perf_reader *r, unsigned *n,
			 const struct ptd_perf_reader_ops *ops, void *ctx,
			 const struct ptd_perf_loss *l, bool count)
{
	if (!step_due(r, n))
		return 0;
	if (ops->loss) {
		int err = ops->loss(ctx, l);

		if (err < 0)
			return err;
	}
	if (count)
		count_loss(r, l);
	r->done_steps = *n;
	return 0;
}

static int step_loss(struct ptd_perf_reader *r, unsigned *n,
		     const struct ptd_perf_reader_ops *ops, void *ctx,
		     const struct ptd_perf_loss *l)
{
	return step_loss_opt(r, n, ops, ctx, l, true);
}

/* Pass AUX bytes [from, to) (at most aux_size) in one or two pieces. */
static int step_aux_bytes(struct ptd_perf_reader *r, unsigned *n,
			  const struct ptd_perf_reader_ops *ops, void *ctx,
			  uint64_t from, uint64_t to)
{
	const struct ptd_perf_buf *b = r->buf;

	while (from < to) {
		size_t off = (size_t)(from & (b->aux_size - 1));
		size_t len = b->aux_size - off;

		if (len > to - from)
			len = (size_t)(to - from);
		if (step_due(r, n)) {
			if (ops->aux) {
				int err = ops->aux(ctx, from, b->aux + off,
						   len);

				if (err < 0)
					return err;
			}
			r->aux_bytes += len;
			r->done_steps = *n;
		}
		from += len;
	}
	return 0;
}

/* Give back consumed AUX space to the producer. */
static void aux_release(struct ptd_perf_reader *r, uint64_t end)
{
	if (end <= r->aux_next)
		return;
	r->aux_next = end;
	if (!r->buf->aux_overwrite)
		store_tail(&r->buf->meta->aux_tail, end);
}

static int flag_losses(struct ptd_perf_reader *r, unsigned *n,
		       const struct ptd_perf_reader_ops *ops, void *ctx,
		       struct ptd_perf_loss *l, uint64_t flags)
{
	int err = 0;

	if (flags & PERF_AUX_FLAG_PARTIAL) {
		l->kind = PTD_PERF_LOSS_PARTIAL;
		err = step_loss(r, n, ops, ctx, l);
	}
	if (err == 0 && (flags & PERF_AUX_FLAG_COLLISION)) {
		l->kind = PTD_PERF_LOSS_COLLISION;
		err = step_loss(r, n, ops, ctx, l);
	}
	return err;
}

/* Everything a PERF_RECORD_AUX implies, before the record itself. */
static int handle_aux(struct ptd_perf_reader *r,
		      const struct ptd_perf_reader_ops *ops, void *ctx,
		      const struct aux_fields *a, uint64_t pos, unsigned *n)
{
	const struct ptd_perf_buf *b = r->buf;
	struct ptd_perf_loss l = {
		.bytes_known = true,
		.aux_offset = a->aux_offset,
		.bytes = a->aux_size,
		.data_pos = pos,
		.record_type = PERF_RECORD_AUX,
	};
	uint64_t from = a->aux_offset, end = a->aux_offset + a->aux_size;
	int err;

	if (r->done_steps == 0)
		r->aux_rec_base = r->aux_next;
	if (b->aux_size && !b->aux_overwrite) {
		uint64_t base = r->aux_rec_base;
		struct ptd_perf_loss g = l;

		if (from > base) {
			g.kind = PTD_PERF_LOSS_AUX_GAP;
			g.aux_offset = base;
			g.bytes = from - base;
			err = step_loss(r, n, ops, ctx, &g);
			if (err < 0)
				return err;
		} else if (from < base) {
			/* reaches back into what was consumed: not again
			 * (reported, but nothing is lost: not counted) */
			g.kind = PTD_PERF_LOSS_CORRUPT;
			g.bytes = (end < base ? end : base) - from;
			err = step_loss_opt(r, n, ops, ctx, &g, false);
			if (err < 0)
				return err;
			from = end < base ? end : base;
		}
	}
	err = flag_losses(r, n, ops, ctx, &l, a->flags);
	if (err < 0)
		return err;
	if (b->aux_size && !b->aux_overwrite) {
		/* A chunk larger than the ring: its start was overwritten. */
		if (end - from > b->aux_size) {
			struct ptd_perf_loss o = l;

			o.kind = PTD_PERF_LOSS_OVERWRITTEN;
			o.aux_offset = from;
			o.bytes = end - b->aux_size - from;
			err = step_loss(r, n, ops, ctx, &o);
			if (err < 0)
				return err;
			from = end - b->aux_size;
		}
		err = step_aux_bytes(r, n, ops, ctx, from, end);
		if (err < 0)
			return err;
		aux_release(r, end);
	}
	if (a->flags & PERF_AUX_FLAG_TRUNCATED) {
		l.kind = PTD_PERF_LOSS_TRUNCATED;
		l.aux_offset = end;
		l.bytes = 0;
		l.bytes_known = false;
		err = step_loss(r, n, ops, ctx, &l);
	}
	return err;
}

/* Mark the record at data_tail (@size bytes) consumed. */
static void consume(struct ptd_perf_reader *r, uint64_t size)
{
	r->data_tail += size;
	r->done_steps = 0;
	store_tail(&r->buf->meta->data_tail, r->data_tail);
}

/* Skip @bytes of corrupt data ring at data_tail. */
static int skip_corrupt(struct ptd_perf_reader *r,
			const struct ptd_perf_reader_ops *ops, void *ctx,
			uint64_t bytes, uint32_t type)
{
	struct ptd_perf_loss l = {
		.kind = PTD_PERF_LOSS_CORRUPT,
		.bytes = bytes,
		.bytes_known = true,
		.data_pos = r->data_tail,
		.record_type = type,
	};
	unsigned n = 0;
	int err = step_loss(r, &n, ops, ctx, &l);

	if (err < 0)
		return err;
	consume(r, bytes);
	return 0;
}

/* Losses a PERF_RECORD_LOST / LOST_SAMPLES reports. */
static int handle_lost(struct ptd_perf_reader *r,
		       const struct ptd_perf_reader_ops *ops, void *ctx,
		       const struct perf_event_header *h, uint64_t pos,
		       unsigned *n)
{
	const uint8_t *body = (const uint8_t *)(h + 1);
	struct ptd_perf_loss l = {
		.bytes_known = true,
		.data_pos = pos,
		.record_type = h->type,
	};
	struct lost_fields f;

	if (h->type == PERF_RECORD_LOST) {
		memcpy(&f, body, sizeof(f));
		l.kind = PTD_PERF_LOSS_RECORDS;
		l.records = f.lost;
	} else {
		memcpy(&f.lost, body, sizeof(f.lost));
		l.kind = PTD_PERF_LOSS_SAMPLES;
		l.records = f.lost;
	}
	return step_loss(r, n, ops, ctx, &l);
}

/* The smallest valid size of a record type whose fields ptd reads. */
static size_t min_record_size(uint32_t type)
{
	switch (type) {
	case PERF_RECORD_AUX:
		return sizeof(struct perf_event_header) +
		       sizeof(struct aux_fields);
	case PERF_RECORD_LOST:
		return sizeof(struct perf_event_header) +
		       sizeof(struct lost_fields);
	case PERF_RECORD_LOST_SAMPLES:
		return sizeof(struct perf_event_header) + sizeof(uint64_t);
	default:
		return sizeof(struct perf_event_header);
	}
}

/* Read the record at data_tail, @avail bytes being left up to the head.
 * Returns 1 if it was passed to ops->record, 0 if not, or an error. */
static int read_one(struct ptd_perf_reader *r,
		    const struct ptd_perf_reader_ops *ops, void *ctx,
		    uint64_t avail)
{
	const struct ptd_perf_buf *b = r->buf;
	uint64_t pos = r->data_tail;
	struct perf_event_header h;
	const struct perf_event_header *rec;
	size_t off = (size_t)(pos & (b->data_size - 1));
	unsigned n = 0;
	int err;

	if (avail < sizeof(h))
		return skip_corrupt(r, ops, ctx, avail, 0);
	ring_copy(&h, b->data, b->data_size, pos, sizeof(h));
	if (h.size < sizeof(h) || h.size % 8 || h.size > avail)
		return skip_corrupt(r, ops, ctx, avail, 0);
	if (h.size < min_record_size(h.type))
		return skip_corrupt(r, ops, ctx, h.size, h.type);

	/* Contiguous in the ring, or copied out (never read across the
	 * wrap). */
	if (off + h.size <= b->data_size) {
		rec = (const void *)(b->data + off);
	} else {
		ring_copy(r->copy, b->data, b->data_size, pos, h.size);
		rec = (const void *)r->copy;
	}

	if (h.type == PERF_RECORD_AUX) {
		struct aux_fields a;

		memcpy(&a, rec + 1, sizeof(a));
		if (a.aux_offset + a.aux_size < a.aux_offset)
			return skip_corrupt(r, ops, ctx, h.size, h.type);
		err = handle_aux(r, ops, ctx, &a, pos, &n);
	} else if (h.type == PERF_RECORD_LOST ||
		   h.type == PERF_RECORD_LOST_SAMPLES) {
		err = handle_lost(r, ops, ctx, rec, pos, &n);
	} else {
		err = 0;
	}
	if (err < 0)
		return err;
	if (step_due(r, &n) && ops->record) {
		err = ops->record(ctx, rec);
		if (err < 0)
			return err;
	}
	r->records++;
	consume(r, h.size);
	return 1;
}

int ptd_perf_reader_drain(struct ptd_perf_reader *r,
			  const struct ptd_perf_reader_ops *ops, void *ctx)
{
	static const struct ptd_perf_reader_ops none;
	const struct ptd_perf_buf *b = r->buf;
	uint64_t head;
	int count = 0;

	if (!ops)
		ops = &none;
	if (!b->meta || !b->data_size)
		return 0;
	head = load_acquire(&b->meta->data_head);

	/* A head behind the tail or more than a ring ahead cannot be
	 * parsed: resync at it.  (The kernel never does this with a
	 * writable mapping; a corrupt or foreign producer might.) */
	if (head - r->data_tail > b->data_size) {
		uint64_t skip = head > r->data_tail ? head - r->data_tail : 0;
		struct ptd_perf_loss l = {
			.kind = PTD_PERF_LOSS_CORRUPT,
			.bytes = skip,
			.bytes_known = true,
			.data_pos = r->data_tail,
		};
		unsigned n = 0;
		int err = step_loss(r, &n, ops, ctx, &l);

		if (err < 0)
			return err;
		r->data_tail = head;
		r->done_steps = 0;
		store_tail(&b->meta->data_tail, head);
		return 0;
	}
	while (r->data_tail != head) {
		int ret = read_one(r, ops, ctx, head - r->data_tail);

		if (ret < 0)
			return ret;
		if (count < INT32_MAX)
			count += ret;
	}
	return count;
}

/* Pass AUX bytes [from, to) of the overwrite ring, all or nothing. */
static int snapshot_bytes(const struct ptd_perf_buf *b,
			  const struct ptd_perf_reader_ops *ops, void *ctx,
			  uint64_t from, uint64_t to)
{
	while (from < to) {
		size_t off = (size_t)(from & (b->aux_size - 1));
		size_t len = b->aux_size - off;
		int err;

		if (len > to - from)
			len = (size_t)(to - from);
		err = ops->aux ? ops->aux(ctx, from, b->aux + off, len) : 0;
		if (err < 0)
			return err;
		from += len;
	}
	return 0;
}

int64_t ptd_perf_reader_snapshot(struct ptd_perf_reader *r,
				 const struct ptd_perf_reader_ops *ops,
				 void *ctx)
{
	static const struct ptd_perf_reader_ops none;
	const struct ptd_perf_buf *b = r->buf;
	uint64_t head, n;
	struct ptd_perf_loss l = {
		.kind = PTD_PERF_LOSS_OVERWRITTEN,
		.bytes_known = true,
		.aux_offset = r->snap_head,
		.data_pos = r->data_tail,
	};
	int err;

	if (!ops)
		ops = &none;
	if (!b->meta || !b->aux_size || !b->aux_overwrite)
		return -EINVAL;
	head = load_acquire(&b->meta->aux_head);
	n = head < b->aux_size ? head : b->aux_size;
	if (head >= r->snap_head && head - r->snap_head > b->aux_size) {
		l.bytes = head - r->snap_head - b->aux_size;
		err = ops->loss ? ops->loss(ctx, &l) : 0;
		if (err < 0)
			return err;
	}
	err = snapshot_bytes(b, ops, ctx, head - n, head);
	if (err < 0)
		return err;
	r->lost_aux_bytes += l.bytes;
	r->aux_bytes += n;
	r->snap_head = head;
	return (int64_t)n;
}
