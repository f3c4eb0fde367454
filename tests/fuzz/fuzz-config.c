/* SPDX-License-Identifier: MIT */
/*
 * ptd.conf (daemon/config.c): ptd_config_parse over the defaults.
 * Checked: a refusal names the line and leaves the configuration as it
 * was; an accepted one has its strings terminated.
 */
#include "fuzz-common.h"

#include "daemon/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ptd_config c, def;
	struct ptd_diag d = { "" };
	int r;

	ptd_config_defaults(&def);
	c = def;
	r = ptd_config_parse((const char *)data, size, "fuzz.conf", &c, &d);
	fuzz_check_refusal(r, &d, "ptd_config_parse");
	if (r < 0) {
		if (memcmp(&c, &def, sizeof(c)) != 0)
			fuzz_fail("ptd_config_parse",
				  "a refused file changed the configuration");
		return 0;
	}
	if (!memchr(c.socket_path, '\0', sizeof(c.socket_path)) ||
	    !memchr(c.socket_group, '\0', sizeof(c.socket_group)) ||
	    !memchr(c.intel_pt_sysfs, '\0', sizeof(c.intel_pt_sysfs)) ||
	    !ptd_log_level_name(c.log_level))
		fuzz_fail("ptd_config_parse", "a value out of its field");
	return 0;
}
