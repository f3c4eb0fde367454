/* SPDX-License-Identifier: MIT */
/* Reassembling CODE chunks into snapshot files (see codesnap.h). */
#include "decode/codesnap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"

void ptd_codesnap_fini(struct ptd_codesnap *cs)
{
	free(cs->code);
	cs->code = NULL;
}

/* The region is whole: write it and describe it. */
static int done(struct ptd_codesnap *cs, const char *snapdir,
		atomic_uint *snapseq, struct ptd_tl_event *ev,
		struct ptd_diag *diag)
{
	char path[4096 + sizeof(cs->file)];
	int r;

	snprintf(cs->file, sizeof(cs->file), "snap-%u.bin",
		 atomic_fetch_add(snapseq, 1u));
	snprintf(path, sizeof(path), "%s/%s", snapdir, cs->file);
	r = ptd_file_write_scratch(path, cs->code, cs->len);
	ptd_codesnap_fini(cs);
	if (r < 0)
		return ptd_diagf(diag, r, "cannot write '%s': %s", path,
				 ptd_strerror(r));
	memset(ev, 0, sizeof(*ev));
	ev->op = PTD_TL_SNAPSHOT;
	ev->start = cs->vaddr;
	ev->end = cs->vaddr + cs->len;
	ev->name = cs->name;
	ev->file = cs->file;
	return 1;
}

int ptd_codesnap_add(struct ptd_codesnap *cs, const struct ptd_perf_code *c,
		     const char *snapdir, atomic_uint *snapseq,
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
	return cs->have == cs->len ? done(cs, snapdir, snapseq, ev, diag) : 0;
}
