/* SPDX-License-Identifier: MIT */
/*
 * Binary frames (record/binframe.h): the input is a stream of frames,
 * checked one after another by ptd_bin_frame_parse as the readers do.
 * Checked: a refusal has a message naming an offset inside the input; a
 * frame that passes is within the input and its limits, and each of its
 * records converts to a JSON line that cJSON parses (a records frame's
 * through the renderer of its field set, as ptctl decode --from-binary
 * does; an address frame's each of its records, read one after the
 * other, the last ending exactly at the payload's end).
 */
#include "fuzz-common.h"

#include "record/binframe.h"

static void check_records(const struct ptd_bin_frame *fr)
{
	static char line[PTD_JSON_MAX_RECORD];
	struct ptd_jsonr jr;
	struct ptd_record r;
	struct ptd_bin_addrs it;
	bool addrs = fr->type == PTD_BIN_ADDRS;
	/* an address frame's records come one after the other: all */
	uint32_t n = addrs || fr->count < 256 ? fr->count : 256;

	ptd_jsonr_init(&jr, fr->fields);
	if (addrs)
		ptd_bin_addrs_begin(fr, &it);
	for (uint32_t i = 0; i < n; i++) {
		size_t k;
		cJSON *j;

		if (addrs)
			ptd_bin_addrs_next(&it, &r);
		else
			ptd_bin_record_get(fr, i, &r);
		k = ptd_jsonr_render(&jr, line, &r);
		if (k == 0 || line[k - 1] != '\n')
			fuzz_fail("ptd_bin_record_get", "did not render");
		j = cJSON_ParseWithLength(line, k - 1);
		if (!j)
			fuzz_fail("ptd_bin_record_get", "a record is not JSON");
		cJSON_Delete(j);
	}
	if (addrs && it.p != fr->payload + fr->len)
		fuzz_fail("ptd_bin_addrs_next", "the last record does not end "
			  "at the payload's end");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ptd_bin_frame fr;
	struct ptd_diag d = { "" };
	size_t off = 0;

	while (off < size) {
		ssize_t n = ptd_bin_frame_parse(data + off, size - off, off,
						&fr, &d);
		const char *at;

		if (n == 0)
			break;	/* a frame cut short: a reader needs more */
		if (n < 0) {
			fuzz_check_refusal((int)n, &d, "ptd_bin_frame_parse");
			at = strstr(d.msg, "offset ");
			if (!at || strtoull(at + 7, NULL, 10) >= size)
				fuzz_fail("ptd_bin_frame_parse",
					  "a refusal names no offset in the "
					  "input");
			break;
		}
		if ((size_t)n > size - off || (size_t)n != PTD_BIN_HDR + fr.len)
			fuzz_fail("ptd_bin_frame_parse", "frame size");
		if (fr.type == PTD_BIN_RECORDS) {
			if (fr.len > PTD_BIN_MAX_RECORDS_PAYLOAD ||
			    (uint64_t)fr.count * fr.recsize != fr.len)
				fuzz_fail("ptd_bin_frame_parse",
					  "records frame limits");
			check_records(&fr);
		} else if (fr.type == PTD_BIN_ADDRS) {
			if (fr.len > PTD_BIN_MAX_RECORDS_PAYLOAD ||
			    !fr.count || fr.count > PTD_BIN_MAX_ADDRS ||
			    !ptd_bin_fields_addrs(fr.fields))
				fuzz_fail("ptd_bin_frame_parse",
					  "address frame limits");
			check_records(&fr);
		} else if (fr.len > PTD_BIN_MAX_JSON_PAYLOAD) {
			fuzz_fail("ptd_bin_frame_parse", "json frame limit");
		}
		off += (size_t)n;
	}
	return 0;
}
