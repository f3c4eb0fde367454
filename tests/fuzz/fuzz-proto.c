/* SPDX-License-Identifier: MIT */
/*
 * Control requests (daemon/proto.c): one request line through
 * ptd_request_parse, and the response the server would send for it
 * (the id echoed back, the error code and message of a refusal).
 * Checked: a refusal names the field; the response is one JSON line.
 */
#include "fuzz-common.h"

#include "daemon/proto.h"

static void check_line(char *line, size_t n)
{
	cJSON *j;

	if (!line)
		return;	/* -ENOMEM */
	if (n == 0 || line[n - 1] != '\n' || memchr(line, '\n', n - 1))
		fuzz_fail("response", "not one line");
	j = cJSON_ParseWithLength(line, n - 1);
	if (!j)
		fuzz_fail("response", "not JSON");
	cJSON_Delete(j);
	free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ptd_request req;
	struct ptd_diag d = { "" };
	size_t n = 0;
	int r;

	r = ptd_request_parse((const char *)data, size, &req, &d);
	fuzz_check_refusal(r, &d, "ptd_request_parse");
	if (r < 0) {
		check_line(ptd_response_error(req.id,
					      ptd_proto_error_code(r),
					      d.msg, &n), n);
	} else {
		if (!ptd_cmd_name(req.cmd))
			fuzz_fail("ptd_request_parse", "an unnamed command");
		check_line(ptd_response_ok(req.id, NULL, &n), n);
	}
	ptd_request_fini(&req);
	return 0;
}
