/* SPDX-License-Identifier: MIT */
/*
 * perf records (perf/sideband.c): one record of a perf DATA ring or a
 * perf.data file through ptd_perf_event_parse, then ptd_perf_event_to_tl.
 *
 * Input: one byte of flags, then the record (header first).  Flag bits
 * 0-5 pick the sample_id fields of its event's sample_type (TID, TIME, ID,
 * STREAM_ID, CPU, IDENTIFIER), bit 6 is sample_id_all.  As its callers do
 * (the ring reader, the perf.data reader), the harness hands over at most
 * the bytes it has: a header.size beyond them is cut to them.
 * Checked: a refusal names the record; every string and byte range the
 * parse points at lies inside the record, strings terminated there.
 */
#include "fuzz-common.h"

#include "perf/sideband.h"

static const uint64_t sid_bits[] = {
	PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ID,
	PERF_SAMPLE_STREAM_ID, PERF_SAMPLE_CPU, PERF_SAMPLE_IDENTIFIER,
};

static uint64_t rec[PTD_PERF_RECORD_MAX_SIZE / 8 + 1];

static void inside(const void *p, size_t n, size_t size)
{
	const uint8_t *b = (const uint8_t *)rec;

	if (!p || (const uint8_t *)p < b || (const uint8_t *)p > b + size ||
	    n > (size_t)(b + size - (const uint8_t *)p))
		fuzz_fail("ptd_perf_event_parse", "points outside the record");
}

static void string_inside(const char *s, size_t size)
{
	const uint8_t *b = (const uint8_t *)rec;

	inside(s, 0, size);
	if (!memchr(s, '\0', (size_t)(b + size - (const uint8_t *)s)))
		fuzz_fail("ptd_perf_event_parse", "unterminated string");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct perf_event_header *hdr = (struct perf_event_header *)rec;
	struct ptd_diag d = { "" };
	struct ptd_perf_event e;
	struct ptd_tl_event tl;
	uint64_t sample_type = 0;
	size_t n;
	int r;

	if (size < 1 + sizeof(*hdr))
		return 0;
	for (size_t i = 0; i < FUZZ_ARRAY_SIZE(sid_bits); i++)
		if (data[0] & (1u << i))
			sample_type |= sid_bits[i];
	n = size - 1;
	if (n > PTD_PERF_RECORD_MAX_SIZE)
		n = PTD_PERF_RECORD_MAX_SIZE;
	memcpy(rec, data + 1, n);
	if (hdr->size > n)
		hdr->size = (uint16_t)n;
	r = ptd_perf_event_parse(hdr, sample_type, data[0] & 0x40, &e, &d);
	fuzz_check_refusal(r, &d, "ptd_perf_event_parse");
	if (r < 0)
		return 0;
	n = hdr->size;
	if (!ptd_perf_record_name(e.type))
		fuzz_fail("ptd_perf_record_name", "NULL");
	if (!e.other) {
		switch (e.type) {
		case PERF_RECORD_MMAP:
		case PERF_RECORD_MMAP2:
			string_inside(e.u.mmap.filename, n);
			break;
		case PERF_RECORD_COMM:
			string_inside(e.u.comm.comm, n);
			break;
		case PTD_PERF_RECORD_CODE:
			string_inside(e.u.code.name, n);
			inside(e.u.code.bytes, e.u.code.size, n);
			break;
		case PERF_RECORD_TEXT_POKE:
			inside(e.u.poke.old_bytes, e.u.poke.old_len, n);
			inside(e.u.poke.new_bytes, e.u.poke.new_len, n);
			break;
		default:
			break;
		}
	}
	memset(&tl, 0, sizeof(tl));
	d.msg[0] = '\0';
	r = ptd_perf_event_to_tl(&e, &tl, &d);
	fuzz_check_refusal(r, &d, "ptd_perf_event_to_tl");
	if (r > 0 && tl.op != PTD_TL_UNMAP && tl.op != PTD_TL_SNAPSHOT &&
	    !tl.path)
		fuzz_fail("ptd_perf_event_to_tl", "no path");
	return 0;
}
