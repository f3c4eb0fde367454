/* SPDX-License-Identifier: MIT */
/* Tests for perf/addrfilter.h: the --filter grammar, every refusal with its
 * column, the kernel string, file ranges resolved through maps, and the
 * ioctl on a real event. */
#include <errno.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "common/strutil.h"
#include "perf/addrfilter.h"

static void kstring(const char *text, uint32_t nr, const char *want)
{
	struct ptd_addrfilter f;
	struct ptd_diag diag = { "" };
	char buf[512];
	int err;

	err = ptd_addrfilter_parse(text, nr, &f, &diag);
	if (err < 0) {
		CHECK_FAIL_("'%s' refused: %s", text, diag.msg);
		return;
	}
	CHECK_EQ_INT(ptd_addrfilter_kernel_string(&f, buf, sizeof(buf)), 0);
	CHECK_EQ_STR(buf, want);
	ptd_addrfilter_fini(&f);
}

static void test_good(void)
{
	kstring("filter 0x1000/0x200@/bin/ls", 2,
		"filter 0x1000/0x200@/bin/ls");
	kstring("filter 0x1000 / 0x200 @ /bin/ls", 2,
		"filter 0x1000/0x200@/bin/ls");
	kstring("  filter 4096/512@/a,tracestop 0x30/4@/b  ", 2,
		"filter 0x1000/0x200@/a,stop 0x30/0x4@/b");
	kstring("filter 0x10/0x20@/a tracestop 0x30/4@/b", 2,
		"filter 0x10/0x20@/a,stop 0x30/0x4@/b");
	kstring("stop 0x30/4@/b,,filter\t0x1/1@/c", 4,
		"stop 0x30/0x4@/b,filter 0x1/0x1@/c");
	/* no file: a kernel address range */
	kstring("filter 0xffffffff81000000/0x1000", 1,
		"filter 0xffffffff81000000/0x1000");
	kstring("filter 0xffffffffffffff00/0x100", 1,
		"filter 0xffffffffffffff00/0x100");
}

static void test_fields(void)
{
	struct ptd_addrfilter f;

	REQUIRE(ptd_addrfilter_parse("filter 1/2@/x, tracestop 3/4", 2, &f,
				     NULL) == 0);
	CHECK_EQ_INT(f.n, 2);
	CHECK_EQ_INT(f.v[0].action, PTD_ADDRFILTER_FILTER);
	CHECK_EQ_U64(f.v[0].start, 1);
	CHECK_EQ_U64(f.v[0].size, 2);
	CHECK_EQ_STR(f.v[0].file, "/x");
	CHECK_EQ_INT(f.v[0].column, 1);
	CHECK_EQ_INT(f.v[1].action, PTD_ADDRFILTER_TRACESTOP);
	CHECK(f.v[1].file == NULL);
	CHECK_EQ_INT(f.v[1].column, 16);
	ptd_addrfilter_fini(&f);
	ptd_addrfilter_fini(&f);	/* idempotent */
	ptd_addrfilter_fini(NULL);
}

struct bad {
	const char *text;
	uint32_t nr;
	int err;
	const char *msg1;
	const char *msg2;
};

static void test_bad(void)
{
	static const struct bad cases[] = {
		{ "filter 0x1000/0x200@/a,bogus 1/2", 2, -PTD_EFORMAT,
		  "column 24:", "unknown action 'bogus'" },
		{ "filter main@/bin/ls", 2, -PTD_EFORMAT, "column 8:",
		  "'main' is not a number" },
		{ "filter 0x10@/a", 2, -PTD_EFORMAT, "column 1:",
		  "needs a size" },
		{ "  tracestop 0x10", 2, -PTD_EFORMAT, "column 3:",
		  "needs a size" },
		{ "start 0x10@/a", 2, -PTD_EFORMAT, "column 1:",
		  "'start'" },
		{ "filter 0x10/0@/a", 2, -PTD_EFORMAT, "column 1:",
		  "size must not be 0" },
		{ "filter 0x10/0x20@", 2, -PTD_EFORMAT, "column 18:",
		  "file name" },
		{ "filter 0x10/0x20@ ,", 2, -PTD_EFORMAT, "column 19:",
		  "file name" },
		{ "", 2, -PTD_EFORMAT, "column 1:", "empty filter" },
		{ " , ", 2, -PTD_EFORMAT, "column 1:", "empty filter" },
		{ "filter 0xffffffffffffffff/2", 2, -PTD_EFORMAT, "column 1:",
		  "past the end" },
		{ "filter 1/2/3", 2, -PTD_EFORMAT, "column 11:",
		  "unexpected '/'" },
		{ "filter 99999999999999999999/1", 2, -PTD_EFORMAT,
		  "column 8:", "larger than 64 bits" },
		{ "filter /1@/a", 2, -PTD_EFORMAT, "column 8:",
		  "expected the start address" },
		{ "filter 1/@/a", 2, -PTD_EFORMAT, "column 10:",
		  "expected the size" },
		{ "filter", 2, -PTD_EFORMAT, "column 7:",
		  "expected a space" },
		{ "filter0x10/2", 2, -PTD_EFORMAT, "column 1:",
		  "unknown action" },
		{ "filter 1/2@/a,filter 3/4@/a,filter 5/6@/a", 2, -PTD_ELIMIT,
		  "3 filters but this CPU supports 2", "" },
		{ "filter 1/2@/a", 0, -PTD_ELIMIT,
		  "1 filter but this CPU supports 0", "" },
		{ "filter 1/1,filter 2/1,filter 3/1,filter 4/1,filter 5/1", 8,
		  -PTD_ELIMIT, "5 filters but this CPU supports 4",
		  "ptd's limit" },
	};
	size_t i;

	for (i = 0; i < PTD_ARRAY_SIZE(cases); i++) {
		struct ptd_addrfilter f;
		struct ptd_diag diag = { "" };

		memset(&f, 0xcd, sizeof(f));
		CHECK_EQ_INT(ptd_addrfilter_parse(cases[i].text, cases[i].nr,
						  &f, &diag), cases[i].err);
		CHECK_CONTAINS(diag.msg, cases[i].msg1);
		CHECK_CONTAINS(diag.msg, cases[i].msg2);
		CHECK_EQ_U64(f.n, 0xcdcdcdcdcdcdcdcdu);	/* untouched */
	}
}

static void test_limits(void)
{
	struct ptd_addrfilter f;
	struct ptd_diag diag = { "" };
	char *text = malloc(PTD_ADDRFILTER_TEXT_MAX + 2);
	char buf[16];

	REQUIRE(text);
	memset(text, ' ', PTD_ADDRFILTER_TEXT_MAX + 1);
	text[PTD_ADDRFILTER_TEXT_MAX + 1] = '\0';
	CHECK_EQ_INT(ptd_addrfilter_parse(text, 2, &f, &diag), -PTD_ELIMIT);
	CHECK_CONTAINS(diag.msg, "longer than");
	/* a file name one byte over PATH_MAX - 1 */
	memcpy(text, "filter 1/1@", 11);
	memset(text + 11, 'a', PTD_ADDRFILTER_FILE_MAX);
	text[11 + PTD_ADDRFILTER_FILE_MAX] = '\0';
	CHECK_EQ_INT(ptd_addrfilter_parse(text, 2, &f, &diag), -PTD_ELIMIT);
	CHECK_CONTAINS(diag.msg, "file name longer than");
	free(text);
	CHECK_EQ_INT(ptd_addrfilter_parse(NULL, 2, &f, &diag), -EINVAL);

	REQUIRE(ptd_addrfilter_parse("filter 0x1000/0x200@/bin/ls", 2, &f,
				     NULL) == 0);
	CHECK_EQ_INT(ptd_addrfilter_kernel_string(&f, buf, sizeof(buf)),
		     -ENAMETOOLONG);
	CHECK_EQ_STR(buf, "");
	ptd_addrfilter_fini(&f);
}

static const char maps_text[] =
	"00400000-00401000 r--p 00000000 08:01 100 /bin/prog\n"
	"00401000-00403000 r-xp 00001000 08:01 100 /bin/prog\n"
	"00403000-00404000 r--p 00003000 08:01 100 /bin/prog\n"
	"7f0000000000-7f0000010000 r-xp 00002000 08:01 200 /lib/libc.so\n"
	"7f0000010000-7f0000020000 r-xp 00012000 08:01 200 /lib/libc.so\n";

static void test_to_config(void)
{
	struct ptd_maps maps;
	struct ptd_addrfilter f;
	struct pt_conf_addr_filter c;
	struct ptd_diag diag = { "" };

	REQUIRE(ptd_maps_parse(maps_text, strlen(maps_text), "test", &maps,
			       NULL) == 0);
	REQUIRE(ptd_addrfilter_parse("filter 0x1100/0x100@/bin/prog,"
				     "tracestop 0x2000/0x10@/lib/libc.so,"
				     "filter 0xffffffff81000000/0x1000,"
				     "stop 0x12ff0/0x10@/lib/libc.so",
				     4, &f, &diag) == 0);
	memset(&c, 0xcd, sizeof(c));
	CHECK_EQ_INT(ptd_addrfilter_to_config(&f, &maps, &c, &diag), 0);
	CHECK_EQ_INT(c.config.ctl.addr0_cfg, 1);
	CHECK_EQ_U64(c.addr0_a, 0x401100);
	CHECK_EQ_U64(c.addr0_b, 0x4011ff);
	CHECK_EQ_INT(c.config.ctl.addr1_cfg, 2);
	CHECK_EQ_U64(c.addr1_a, 0x7f0000000000);
	CHECK_EQ_U64(c.addr1_b, 0x7f000000000f);
	CHECK_EQ_INT(c.config.ctl.addr2_cfg, 1);
	CHECK_EQ_U64(c.addr2_a, 0xffffffff81000000);
	CHECK_EQ_U64(c.addr2_b, 0xffffffff81000fff);
	CHECK_EQ_INT(c.config.ctl.addr3_cfg, 2);
	CHECK_EQ_U64(c.addr3_a, 0x7f0000010ff0);
	CHECK_EQ_U64(c.addr3_b, 0x7f0000010fff);
	CHECK_EQ_U64(c.reserved[0], 0);
	ptd_addrfilter_fini(&f);

	/* Across the end of the mapping holding its start (even though the
	 * next mapping continues the file): refused. */
	REQUIRE(ptd_addrfilter_parse("filter 0x1000/1@/bin/prog "
				     "filter 0x2f00/0x200@/bin/prog", 2, &f,
				     NULL) == 0);
	memset(&c, 0xcd, sizeof(c));
	CHECK_EQ_INT(ptd_addrfilter_to_config(&f, &maps, &c, &diag),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, "column 27:");
	CHECK_CONTAINS(diag.msg, "not inside one mapping");
	CHECK_CONTAINS(diag.msg, "/bin/prog");
	CHECK_EQ_U64(c.addr0_a, 0xcdcdcdcdcdcdcdcdu);	/* untouched */
	ptd_addrfilter_fini(&f);
	REQUIRE(ptd_addrfilter_parse("filter 0x11ff0/0x20@/lib/libc.so", 2,
				     &f, NULL) == 0);
	CHECK_EQ_INT(ptd_addrfilter_to_config(&f, &maps, &c, &diag),
		     -PTD_EFORMAT);
	ptd_addrfilter_fini(&f);

	/* Offset only in a non-executable mapping, unknown file. */
	REQUIRE(ptd_addrfilter_parse("filter 0x10/0x10@/bin/prog", 2, &f,
				     NULL) == 0);
	CHECK_EQ_INT(ptd_addrfilter_to_config(&f, &maps, &c, &diag),
		     -PTD_ENOIMAGE);
	CHECK_CONTAINS(diag.msg, "no executable mapping of '/bin/prog'");
	CHECK_EQ_INT(ptd_addrfilter_to_config(&f, NULL, &c, &diag), -EINVAL);
	ptd_addrfilter_fini(&f);
	REQUIRE(ptd_addrfilter_parse("filter 0x1100/0x10@/bin/other", 2, &f,
				     NULL) == 0);
	CHECK_EQ_INT(ptd_addrfilter_to_config(&f, &maps, &c, &diag),
		     -PTD_ENOIMAGE);
	ptd_addrfilter_fini(&f);
	ptd_maps_fini(&maps);
}

/* Pending ranges: a file with no executable mapping is pending (cfg set,
 * a = b = 0, its bit in the mask) when the caller asks for it; it must
 * exist under the root given; a mapped file whose mapping does not hold
 * the range is still refused. */
static void test_resolve_pending(void)
{
	struct ptd_maps maps;
	struct ptd_addrfilter f;
	struct pt_conf_addr_filter c;
	struct ptd_diag diag = { "" };
	unsigned pending = 99;

	REQUIRE(ptd_maps_parse(maps_text, strlen(maps_text), "test", &maps,
			       NULL) == 0);
	/* /bin/sh exists; the maps hold no /bin/sh */
	REQUIRE(ptd_addrfilter_parse("filter 0x1100/0x100@/bin/prog,"
				     "filter 0x10/0x20@/bin/sh,"
				     "tracestop 0x40/0x10@/bin/sh",
				     4, &f, &diag) == 0);
	memset(&c, 0xcd, sizeof(c));
	CHECK_EQ_INT(ptd_addrfilter_resolve(&f, &maps, "/", &c, &pending,
					    &diag), 0);
	CHECK_EQ_INT(pending, 6);
	CHECK_EQ_INT(c.config.ctl.addr0_cfg, 1);
	CHECK_EQ_U64(c.addr0_a, 0x401100);
	CHECK_EQ_INT(c.config.ctl.addr1_cfg, 1);
	CHECK_EQ_U64(c.addr1_a, 0);
	CHECK_EQ_U64(c.addr1_b, 0);
	CHECK_EQ_INT(c.config.ctl.addr2_cfg, 2);
	CHECK_EQ_U64(c.addr2_a, 0);
	CHECK_EQ_U64(c.addr2_b, 0);
	CHECK_EQ_INT(c.config.ctl.addr3_cfg, 0);
	/* without the pending mask: refused as before */
	CHECK_EQ_INT(ptd_addrfilter_resolve(&f, &maps, "/", &c, NULL, &diag),
		     -PTD_ENOIMAGE);
	CHECK_CONTAINS(diag.msg, "'/bin/sh'");
	ptd_addrfilter_fini(&f);

	/* a file that does not exist under the root */
	REQUIRE(ptd_addrfilter_parse("filter 0x10/0x20@/no/such/lib.so", 4,
				     &f, &diag) == 0);
	CHECK_EQ_INT(ptd_addrfilter_resolve(&f, &maps, "/", &c, &pending,
					    &diag), -PTD_ENOIMAGE);
	CHECK_CONTAINS(diag.msg, "column 1: '/no/such/lib.so'");
	/* without a root, nothing is checked */
	CHECK_EQ_INT(ptd_addrfilter_resolve(&f, &maps, NULL, &c, &pending,
					    &diag), 0);
	CHECK_EQ_INT(pending, 1);
	ptd_addrfilter_fini(&f);

	/* mapped, but no executable mapping holds the offset: refused */
	REQUIRE(ptd_addrfilter_parse("filter 0x10/0x10@/bin/prog", 2, &f,
				     NULL) == 0);
	CHECK_EQ_INT(ptd_addrfilter_resolve(&f, &maps, "/", &c, &pending,
					    &diag), -PTD_ENOIMAGE);
	CHECK_CONTAINS(diag.msg, "no executable mapping of '/bin/prog'");
	ptd_addrfilter_fini(&f);
	ptd_maps_fini(&maps);
}

/* The ioctl on a real event: a software event has no address filters, so
 * the kernel says EINVAL; a bad fd EBADF. */
static void test_apply(void)
{
	struct perf_event_attr a;
	struct ptd_diag diag = { "" };
	int fd;

	CHECK_EQ_INT(ptd_addrfilter_apply(-1, "filter 1/1@/a", &diag), -EBADF);
	CHECK_CONTAINS(diag.msg, "failed to set address filter");
	CHECK_EQ_INT(ptd_addrfilter_apply(-1, NULL, &diag), -EINVAL);

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.disabled = 1;
	a.exclude_kernel = 1;
	fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "note: perf_event_open refused (%s); skipping "
				"the live ioctl check\n", strerror(errno));
		return;
	}
	CHECK_EQ_INT(ptd_addrfilter_apply(fd, "filter 0x1000/0x10@/bin/true",
					  &diag), -EINVAL);
	CHECK_CONTAINS(diag.msg, "refused address filter "
				 "'filter 0x1000/0x10@/bin/true'");
	close(fd);
}

int main(void)
{
	RUN(test_good);
	RUN(test_fields);
	RUN(test_bad);
	RUN(test_limits);
	RUN(test_to_config);
	RUN(test_resolve_pending);
	RUN(test_apply);
	return check_done();
}
