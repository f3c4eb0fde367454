/* SPDX-License-Identifier: MIT */
/*
 * Capture timelines (aspace/timeline.c, timeline.jsonl of a capture):
 * ptd_timeline_parse, then the round trip ptd_timeline_write -> parse.
 * Checked: a refusal names the line; what ptd accepted it writes back in
 * a form it accepts again, event for event.
 */
#include "fuzz-common.h"

#include "aspace/timeline.h"

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static void compare(const struct ptd_timeline *a, const struct ptd_timeline *b)
{
	if (a->n != b->n)
		fuzz_fail("timeline round trip", "event count differs");
	for (size_t i = 0; i < a->n; i++) {
		const struct ptd_tl_event *x = &a->ev[i], *y = &b->ev[i];

		if (x->seq != y->seq || x->op != y->op ||
		    x->start != y->start || x->end != y->end ||
		    x->pgoff != y->pgoff || !same_str(x->path, y->path) ||
		    !same_str(x->name, y->name) ||
		    !same_str(x->file, y->file) || x->npos != y->npos)
			fuzz_fail("timeline round trip", "an event differs");
		for (size_t k = 0; k < x->npos; k++)
			if (x->pos[k].tid != y->pos[k].tid ||
			    x->pos[k].pos != y->pos[k].pos)
				fuzz_fail("timeline round trip",
					  "a position differs");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ptd_timeline tl, again;
	struct ptd_diag d = { "" };
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int r;

	r = ptd_timeline_parse((const char *)data, size, "fuzz.jsonl", &tl,
			       &d);
	fuzz_check_refusal(r, &d, "ptd_timeline_parse");
	if (r < 0)
		return 0;
	f = open_memstream(&text, &len);
	if (!f)
		abort();
	if (ptd_timeline_write(&tl, f) != 0)
		fuzz_fail("ptd_timeline_write", "failed");
	fclose(f);
	r = ptd_timeline_parse(text, len, "again.jsonl", &again, &d);
	if (r < 0) {
		fprintf(stderr, "%s\n", d.msg);
		fuzz_fail("timeline round trip", "written form refused");
	}
	compare(&tl, &again);
	ptd_timeline_fini(&again);
	ptd_timeline_fini(&tl);
	free(text);
	return 0;
}
