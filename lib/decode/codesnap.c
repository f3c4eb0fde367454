/* SPDX-License-Identifier: MIT */
/* Reassembling CODE chunks into snapshot files (see codesnap.h). */
#include "decode/codesnap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"

void ptd_codesnap_fini(struct ptd_codesnap *cs)
{
	free(cs->code);
	cs->code = NULL;
}

struct ptd_codesnap_file {
	uint64_t len, hash;
	unsigned seq;
};

void ptd_codesnap_files_init(struct ptd_codesnap_files *f, const char *dir)
{
	memset(f, 0, sizeof(*f));
	f->dir = dir;
	(void)pthread_mutex_init(&f->lock, NULL);
}

void ptd_codesnap_files_fini(struct ptd_codesnap_files *f)
{
	free(f->v);
	f->v = NULL;
	f->n = f->cap = 0;
	(void)pthread_mutex_destroy(&f->lock);
}

/* FNV-1a: a first look; equal bytes are then checked in the file. */
static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--)
		h = (h ^ *p++) * 0x100000001b3ull;
	return h;
}

/* File N's name in @file, and its path in @path. */
static void file_name(const struct ptd_codesnap_files *f, unsigned seq,
		      char file[64], char path[4096 + 64])
{
	snprintf(file, 64, "snap-%u.bin", seq);
	snprintf(path, 4096 + 64, "%s/%s", f->dir, file);
}

/* Does file N hold exactly @data? */
static bool same_file(const struct ptd_codesnap_files *f, unsigned seq,
		      const uint8_t *data, size_t len)
{
	char file[64], path[4096 + 64], *have = NULL;
	size_t n = 0;
	bool same;

	file_name(f, seq, file, path);
	if (ptd_file_read_all(path, len, &have, &n) < 0)
		return false;
	same = n == len && memcmp(have, data, len) == 0;
	free(have);
	return same;
}

int ptd_codesnap_files_put(struct ptd_codesnap_files *f, const uint8_t *data,
			   size_t len, char file[64], struct ptd_diag *diag)
{
	uint64_t h = fnv1a(data, len);
	char path[4096 + 64];
	unsigned seq;
	int r = 0;

	(void)pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].len == len && f->v[i].hash == h &&
		    same_file(f, f->v[i].seq, data, len)) {
			f->shared++;
			file_name(f, f->v[i].seq, file, path);
			goto out;
		}
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 16;
		struct ptd_codesnap_file *v = realloc(f->v, cap * sizeof(*v));

		if (!v) {
			r = -ENOMEM;
			goto out;
		}
		f->v = v;
		f->cap = cap;
	}
	seq = f->next++;
	file_name(f, seq, file, path);
	r = ptd_file_write_scratch(path, data, len);
	if (r < 0)
		r = ptd_diagf(diag, r, "cannot write '%s': %s", path,
			      ptd_strerror(r));
	else
		f->v[f->n++] = (struct ptd_codesnap_file){ len, h, seq };
out:
	(void)pthread_mutex_unlock(&f->lock);
	return r;
}

/* The region is whole: write it and describe it. */
static int done(struct ptd_codesnap *cs, struct ptd_codesnap_files *files,
		struct ptd_tl_event *ev, struct ptd_diag *diag)
{
	int r = ptd_codesnap_files_put(files, cs->code, cs->len, cs->file,
				       diag);

	ptd_codesnap_fini(cs);
	if (r < 0)
		return r;
	memset(ev, 0, sizeof(*ev));
	ev->op = PTD_TL_SNAPSHOT;
	ev->start = cs->vaddr;
	ev->end = cs->vaddr + cs->len;
	ev->name = cs->name;
	ev->file = cs->file;
	return 1;
}

int ptd_codesnap_add(struct ptd_codesnap *cs, const struct ptd_perf_code *c,
		     struct ptd_codesnap_files *files,
		     struct ptd_tl_event *ev, uint64_t *bad,
		     struct ptd_diag *diag)
{
	if (c->len > PTD_CODESNAP_MAX || c->len == 0) {
		(*bad)++;
		return 0;
	}
	if (c->offset == 0) {
		free(cs->code);
		cs->code = malloc(c->len);
		if (!cs->code)
			return -ENOMEM;
		cs->vaddr = c->vaddr;
		cs->len = c->len;
		cs->have = 0;
		snprintf(cs->name, sizeof(cs->name), "%s", c->name);
	}
	if (!cs->code || c->vaddr != cs->vaddr || c->len != cs->len ||
	    c->offset != cs->have || c->size > c->len - c->offset) {
		(*bad)++;
		ptd_codesnap_fini(cs);
		return 0;
	}
	memcpy(cs->code + c->offset, c->bytes, c->size);
	cs->have += c->size;
	return cs->have == cs->len ? done(cs, files, ev, diag) : 0;
}
