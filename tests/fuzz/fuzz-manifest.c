/* SPDX-License-Identifier: MIT */
/*
 * ptd bundle manifests (bundle/bundle.c, ptd-bundle.json):
 * ptd_bundle_parse_manifest, without touching any file.
 * Checked: a refusal names the field; what is accepted has only plain
 * relative names.
 */
#include "fuzz-common.h"

#include "bundle/bundle.h"

/* Relative, no empty, "." or ".." component. */
static void check_name(const char *name)
{
	const char *p = name;

	if (!name || !*name || name[0] == '/')
		fuzz_fail("ptd_bundle_parse_manifest", "accepted a bad name");
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if (n == 0 || (n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			fuzz_fail("ptd_bundle_parse_manifest",
				  "accepted a name with a bad component");
		if (!slash)
			break;
		p = slash + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ptd_bundle b;
	struct ptd_diag d = { "" };
	int r;

	memset(&b, 0, sizeof(b));
	r = ptd_bundle_parse_manifest((const char *)data, size,
				      "fuzz/ptd-bundle.json", &b, &d);
	fuzz_check_refusal(r, &d, "ptd_bundle_parse_manifest");
	if (r == 0) {
		for (size_t i = 0; i < b.nfiles; i++)
			check_name(b.files[i].name);
		for (size_t i = 0; i < b.nimages; i++) {
			if (b.images[i].file)
				check_name(b.images[i].file);
			if (!b.images[i].path)
				fuzz_fail("ptd_bundle_parse_manifest",
					  "an image without a path");
		}
	}
	ptd_bundle_fini(&b);
	return 0;
}
