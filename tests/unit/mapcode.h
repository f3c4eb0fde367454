/* SPDX-License-Identifier: MIT */
/*
 * Test helper: put machine code into a file and map it into an image.
 */
#ifndef PTD_TESTS_MAPCODE_H
#define PTD_TESTS_MAPCODE_H

#include <stdio.h>

#include "aspace/image.h"
#include "common/fileio.h"

/* Write @n bytes of @data to @dir/@name and map the file at @vaddr in @img.
 * Returns the isid (> 0) or a negative error (printed). */
static inline int mapcode(struct ptd_image *img, const char *dir,
			  const char *name, const void *data, size_t n,
			  uint64_t vaddr)
{
	char path[256];
	struct ptd_diag diag = { { 0 } };
	int r;

	(void)snprintf(path, sizeof(path), "%s/%s", dir, name);
	r = ptd_file_write_atomic(path, data, n);
	if (r < 0)
		return r;
	r = ptd_image_map_file(img, path, 0, n, vaddr, NULL, &diag);
	if (r < 0)
		fprintf(stderr, "map %s: %s\n", path, diag.msg);
	return r;
}

#endif
