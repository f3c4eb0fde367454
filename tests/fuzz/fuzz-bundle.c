/* SPDX-License-Identifier: MIT */
/*
 * ptd bundles (bundle/bundle.c): the input is a bundle directory in the
 * form fuzz-common.h describes ("@@@ ptd-bundle.json",
 * "@@@ capture/capture.json", "@@@ images/1-prog", ...), unpacked, then
 * ptd_bundle_decode: manifest, verification of every file, the capture,
 * decoding with the bundle's images, on both decoder paths.
 * Checked: a refusal names the file; every record rendered is JSON; no
 * descriptor is left open.
 */
#include "fuzz-common.h"

#include "bundle/bundle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *dir = fuzz_files_write(data, size);

	fuzz_decode_dir(ptd_bundle_decode, "ptd_bundle_decode", dir);
	fuzz_files_remove(dir);
	fuzz_check_fds();
	return 0;
}
