/* SPDX-License-Identifier: MIT */
/*
 * Software-source captures (swpt/capture.c, with their timeline,
 * aspace/timeline.c): the input is a capture directory in the form
 * fuzz-common.h describes ("@@@ capture.json", "@@@ timeline.jsonl",
 * "@@@ pt-N.bin", ...), unpacked, then ptd_capture_load, each thread's
 * PT and ground truth read, and ptd_capture_decode on both decoder paths.
 * Checked: a refusal names the file; every record rendered is JSON; no
 * descriptor is left open.
 */
#include "fuzz-common.h"

#include "swpt/capture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *dir = fuzz_files_write(data, size);
	struct ptd_capture c;
	struct ptd_diag d = { "" };
	int r;

	memset(&c, 0, sizeof(c));
	r = ptd_capture_load(dir, &c, &d);
	fuzz_check_refusal(r, &d, "ptd_capture_load");
	if (r < 0)
		fuzz_report("ptd_capture_load", r, &d, NULL);
	if (r == 0) {
		for (size_t i = 0; i < c.nthreads; i++) {
			uint64_t *ips = NULL;
			uint8_t *pt = NULL;
			size_t n = 0;

			d.msg[0] = '\0';
			r = ptd_capture_read_truth(&c, i, &ips, &n, &d);
			fuzz_check_refusal(r, &d, "ptd_capture_read_truth");
			free(ips);
			d.msg[0] = '\0';
			r = ptd_capture_read_pt(&c, i, &pt, &n, &d);
			fuzz_check_refusal(r, &d, "ptd_capture_read_pt");
			free(pt);
		}
		ptd_capture_fini(&c);
		fuzz_decode_dir(ptd_capture_decode, "ptd_capture_decode", dir);
	}
	fuzz_files_remove(dir);
	fuzz_check_fds();
	return 0;
}
