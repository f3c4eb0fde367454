/* SPDX-License-Identifier: MIT */
/*
 * AUX drain throughput, side by side in one process:
 *
 *   memcpy baseline   one thread copies the same bytes, in the same chunk
 *                     sizes, from a ring-sized buffer into a growing sink
 *   drain             a producer thread writes AUX chunks into a perf
 *                     buffer laid out as the kernel's (lib/perf/producer.h,
 *                     waiting for space: nothing may be lost), the reader
 *                     (lib/perf/ring.h) drains them into the same sink
 *
 * Prints MB/s and the ratio drain/memcpy, and fails (exit 1) if a byte was
 * lost or out of order.  The machines are shared and noisy: compare the
 * ratio, not the absolute figures.
 *
 *   bench-ring [--mb TOTAL] [--aux-kb SIZE] [--chunk-kb SIZE] [--repeat N]
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/strutil.h"
#include "perf/producer.h"
#include "perf/ring.h"

static size_t total_bytes = 256u << 20, aux_size = 4u << 20,
	      chunk_size = 64u << 10;
static uint8_t *pattern;	/* chunk_size bytes, reused */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The consumer's side of every run: bytes land in a sink buffer (as a
 * stream decoder's append does), checked against the pattern. */
struct sink {
	uint8_t *buf;
	size_t len;		/* bytes so far (wraps the sink buffer) */
	size_t cap;
	uint64_t bad;
};

static void sink_put(struct sink *s, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len > 0) {
		size_t at = s->len % s->cap, n = s->cap - at;

		if (n > len)
			n = len;
		memcpy(s->buf + at, p, n);
		/* spot check: first byte of each piece */
		if (s->buf[at] != pattern[s->len % chunk_size])
			s->bad++;
		s->len += n;
		p += n;
		len -= n;
	}
}

static double run_memcpy(struct sink *s)
{
	uint8_t *ring = malloc(aux_size);
	double t0;

	if (!ring)
		exit(1);
	memset(ring, 0, aux_size);
	s->len = 0;
	t0 = now();
	for (size_t done = 0; done < total_bytes; done += chunk_size) {
		size_t at = done % aux_size;

		memcpy(ring + at, pattern, chunk_size);
		sink_put(s, ring + at, chunk_size);
	}
	t0 = now() - t0;
	free(ring);
	return t0;
}

struct prod {
	struct ptd_perf_producer p;
	atomic_int done;
};

static void *producer_main(void *arg)
{
	struct prod *pr = arg;

	for (size_t done = 0; done < total_bytes; done += chunk_size) {
		size_t dfree, afree;

		for (;;) {
			ptd_perf_producer_space(&pr->p, &dfree, &afree);
			if (afree >= chunk_size && dfree >= 256)
				break;
			__builtin_ia32_pause();
		}
		if (ptd_perf_producer_aux(&pr->p, pattern, chunk_size, 0) !=
		    (int64_t)chunk_size)
			exit(1);
	}
	atomic_store(&pr->done, 1);
	return NULL;
}

static int on_aux(void *ctx, uint64_t off, const void *bytes, size_t len)
{
	(void)off;
	sink_put(ctx, bytes, len);
	return 0;
}

static double run_drain(struct sink *s, uint64_t *lost)
{
	static const struct ptd_perf_reader_ops ops = { .aux = on_aux };
	struct ptd_perf_buf buf;
	struct ptd_perf_reader *r = malloc(sizeof(*r));
	struct prod pr;
	pthread_t th;
	double t0;

	if (!r || ptd_perf_buf_alloc(64u << 10, aux_size, false, &buf) < 0)
		exit(1);
	ptd_perf_producer_init(&pr.p, &buf);
	atomic_store(&pr.done, 0);
	ptd_perf_reader_init(r, &buf);
	s->len = 0;
	t0 = now();
	if (pthread_create(&th, NULL, producer_main, &pr) != 0)
		exit(1);
	while (!atomic_load(&pr.done) || s->len < total_bytes) {
		if (ptd_perf_reader_drain(r, &ops, s) < 0)
			exit(1);
		if (s->len >= total_bytes)
			break;
	}
	t0 = now() - t0;
	pthread_join(th, NULL);
	*lost = r->lost_aux_bytes + pr.p.aux_lost_bytes;
	ptd_perf_buf_fini(&buf);
	free(r);
	return t0;
}

static size_t opt_size(const char *arg, size_t unit)
{
	uint64_t v;

	if (ptd_parse_u64(arg, 10, &v) < 0 || v == 0 || v > (1u << 20)) {
		fprintf(stderr, "bench-ring: bad size '%s'\n", arg);
		exit(2);
	}
	return (size_t)v * unit;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "mb", required_argument, NULL, 'm' },
		{ "aux-kb", required_argument, NULL, 'a' },
		{ "chunk-kb", required_argument, NULL, 'c' },
		{ "repeat", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	struct sink s = { 0 };
	double best_copy = 1e9, best_drain = 1e9;
	uint64_t lost = 0;
	int repeat = 3, c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'm': total_bytes = opt_size(optarg, 1u << 20); break;
		case 'a': aux_size = opt_size(optarg, 1u << 10); break;
		case 'c': chunk_size = opt_size(optarg, 1u << 10); break;
		case 'r': repeat = (int)opt_size(optarg, 1); break;
		default: return 2;
		}
	}
	if ((aux_size & (aux_size - 1)) || aux_size < 4096 ||
	    chunk_size > aux_size / 2 || total_bytes % chunk_size) {
		fprintf(stderr, "bench-ring: aux size must be a power of two "
			"of pages, chunk at most half of it, total a multiple "
			"of the chunk\n");
		return 2;
	}
	pattern = malloc(chunk_size);
	s.cap = 8u << 20;
	s.buf = malloc(s.cap);
	if (!pattern || !s.buf)
		return 1;
	for (size_t i = 0; i < chunk_size; i++)
		pattern[i] = (uint8_t)(i * 131 + 7);
	for (int i = 0; i < repeat; i++) {
		double a = run_memcpy(&s), b;
		uint64_t l;

		b = run_drain(&s, &l);
		lost += l;
		if (a < best_copy)
			best_copy = a;
		if (b < best_drain)
			best_drain = b;
	}
	printf("AUX drain, %zu MiB in %zu KiB chunks through a %zu KiB AUX "
	       "area, best of %d\n", total_bytes >> 20, chunk_size >> 10,
	       aux_size >> 10, repeat);
	printf("  memcpy baseline  %8.0f MB/s\n", total_bytes / best_copy / 1e6);
	printf("  producer->reader %8.0f MB/s   %.2fx memcpy, %" PRIu64
	       " bytes lost, %" PRIu64 " bad\n", total_bytes / best_drain / 1e6,
	       best_copy / best_drain, lost, s.bad);
	return lost || s.bad ? 1 : 0;
}
