/* SPDX-License-Identifier: MIT */
/*
 * What bundle.c (parsing, verifying, loading, decoding) and bundle-save.c
 * (the plan and the writing of a bundle) share; not an API.
 */
#ifndef PTD_BUNDLE_BUNDLE_INT_H
#define PTD_BUNDLE_BUNDLE_INT_H

#include "bundle/bundle.h"
#include "aspace/elf.h"

#define CAPTURE_SUBDIR "capture"
#define IMAGES_SUBDIR "images"
#define MANIFEST_TMP ".ptd-bundle.json.tmp"
#define CAPTURE_MANIFEST "capture.json"
#define CAPTURE_TIMELINE "timeline.jsonl"
#define BUILD_ID_MAX PTD_ELF_BUILD_ID_MAX	/* bytes */
#define SOURCE_SWPT "swpt-capture"
#define COPY_CHUNK (1u << 16)

/* The part of @name after "@subdir/" if it is exactly "@subdir/PLAIN",
 * else NULL. */
const char *bdl_in_subdir(const char *name, const char *subdir);
/* The image of @b for traced path @path, or NULL. */
const struct ptd_bundle_image *bdl_find_image(const struct ptd_bundle *b,
					      const char *path);

#endif
