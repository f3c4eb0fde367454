/* SPDX-License-Identifier: MIT */
#include "daemon/memlimit.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/diag.h"
#include "common/strutil.h"

/* One uid's use; entries are kept (a handful of users). */
struct mem_user {
	uid_t uid;
	uint64_t used;
};

struct ptd_memlimit {
	pthread_mutex_t lock;
	uint64_t limit;
	struct mem_user *u;	/* guarded by lock */
	size_t n, cap;
};

static struct ptd_memlimit *memlimit_alloc(uint64_t limit)
{
	struct ptd_memlimit *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	(void)pthread_mutex_init(&m->lock, NULL);
	m->limit = limit;
	return m;
}

int ptd_memlimit_new(uint64_t limit, struct ptd_memlimit **ret)
{
	if (!ret)
		return -EINVAL;
	*ret = memlimit_alloc(limit);
	return *ret ? 0 : -ENOMEM;
}

void ptd_memlimit_free(struct ptd_memlimit *m)
{
	if (!m)
		return;
	(void)pthread_mutex_destroy(&m->lock);
	free(m->u);
	free(m);
}

uint64_t ptd_memlimit_limit(const struct ptd_memlimit *m)
{
	return m ? m->limit : 0;
}

/* @uid's entry, made if @make (NULL: none, or no memory). Locked. */
static struct mem_user *user_of(struct ptd_memlimit *m, uid_t uid, bool make)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->u[i].uid == uid)
			return &m->u[i];
	if (!make)
		return NULL;
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 8;
		struct mem_user *v = realloc(m->u, cap * sizeof(*v));

		if (!v)
			return NULL;
		m->u = v;
		m->cap = cap;
	}
	m->u[m->n] = (struct mem_user){ uid, 0 };
	return &m->u[m->n++];
}

int ptd_memlimit_charge(struct ptd_memlimit *m, uid_t uid, uint64_t bytes,
			uint64_t *ret_used)
{
	struct mem_user *u;
	uint64_t used;
	int r = 0;

	if (!m) {
		if (ret_used)
			*ret_used = 0;
		return 0;
	}
	(void)pthread_mutex_lock(&m->lock);
	u = user_of(m, uid, true);
	used = u ? u->used : 0;
	if (!u)
		r = -ENOMEM;
	else if (bytes > m->limit || used > m->limit - bytes)
		r = -PTD_ELIMIT;
	else
		u->used += bytes;
	(void)pthread_mutex_unlock(&m->lock);
	if (ret_used)
		*ret_used = used;
	return r;
}

void ptd_memlimit_release(struct ptd_memlimit *m, uid_t uid, uint64_t bytes)
{
	struct mem_user *u;

	if (!m || !bytes)
		return;
	(void)pthread_mutex_lock(&m->lock);
	u = user_of(m, uid, false);
	if (u)
		u->used = bytes > u->used ? 0 : u->used - bytes;
	(void)pthread_mutex_unlock(&m->lock);
}

uint64_t ptd_memlimit_used(struct ptd_memlimit *m, uid_t uid)
{
	struct mem_user *u;
	uint64_t used;

	if (!m)
		return 0;
	(void)pthread_mutex_lock(&m->lock);
	u = user_of(m, uid, false);
	used = u ? u->used : 0;
	(void)pthread_mutex_unlock(&m->lock);
	return used;
}

int ptd_memacct_charge(struct ptd_memacct *a, uint64_t bytes,
		       uint64_t *ret_used)
{
	int r;

	if (!a || !a->m) {
		if (ret_used)
			*ret_used = 0;
		return 0;
	}
	r = ptd_memlimit_charge(a->m, a->uid, bytes, ret_used);
	if (r == 0)
		atomic_fetch_add(&a->charged, bytes);
	return r;
}

void ptd_memacct_give_back(struct ptd_memacct *a, uint64_t bytes)
{
	uint_fast64_t had, n;

	if (!a || !a->m)
		return;
	had = atomic_load(&a->charged);
	do
		n = bytes < had ? bytes : had;
	while (!atomic_compare_exchange_weak(&a->charged, &had, had - n));
	ptd_memlimit_release(a->m, a->uid, n);
}

void ptd_memacct_release(struct ptd_memacct *a)
{
	if (!a || !a->m)
		return;
	ptd_memlimit_release(a->m, a->uid, atomic_exchange(&a->charged, 0));
}

size_t ptd_memlimit_stream_bytes(size_t aux_size)
{
	return aux_size > PTD_MEMLIMIT_STREAM_MIN ? aux_size
						  : (size_t)PTD_MEMLIMIT_STREAM_MIN;
}

uint64_t ptd_memlimit_thread_bytes(size_t data_size, size_t aux_size,
				   bool snapshot)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t n = (uint64_t)(page > 0 ? page : 4096) + data_size + aux_size;

	n += ptd_memlimit_stream_bytes(aux_size);
	if (snapshot)
		n += aux_size;
	return n;
}

const char *ptd_memlimit_fmt(uint64_t bytes, char *buf, size_t cap)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned i = 0;
	uint64_t whole = bytes, div = 1;

	while (i + 1 < PTD_ARRAY_SIZE(unit) && whole >= 1024) {
		whole /= 1024;
		div *= 1024;
		i++;
	}
	if (i == 0 || bytes % div == 0)
		(void)snprintf(buf, cap, "%llu %s", (unsigned long long)whole,
			       unit[i]);
	else
		(void)snprintf(buf, cap, "%.1f %s", (double)bytes / (double)div,
			       unit[i]);
	return buf;
}
