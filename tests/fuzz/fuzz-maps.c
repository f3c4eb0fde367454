/* SPDX-License-Identifier: MIT */
/*
 * /proc/PID/maps text (aspace/maps.c): ptd_maps_parse, then lookups.
 * Checked: a refusal names what was wrong; an accepted list is sorted,
 * each mapping non-empty, and ptd_maps_find finds each one by its first
 * and last byte.
 */
#include "fuzz-common.h"

#include "aspace/maps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ptd_diag d = { "" };
	struct ptd_maps m;
	int r;

	r = ptd_maps_parse((const char *)data, size, "fuzz.maps", &m, &d);
	fuzz_check_refusal(r, &d, "ptd_maps_parse");
	if (r < 0)
		return 0;
	for (size_t i = 0; i < m.n; i++) {
		const struct ptd_map *p = &m.v[i];

		if (p->start >= p->end || (i && p->start < m.v[i - 1].end))
			fuzz_fail("ptd_maps_parse", "an unsorted or empty map");
		if (ptd_maps_find(&m, p->start) != p ||
		    ptd_maps_find(&m, p->end - 1) != p)
			fuzz_fail("ptd_maps_find", "a mapping not found");
		if (!p->path || !ptd_map_kind_name(p->kind))
			fuzz_fail("ptd_maps_parse", "no path or kind");
	}
	ptd_maps_fini(&m);
	return 0;
}
