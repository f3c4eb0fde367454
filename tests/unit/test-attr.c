/* SPDX-License-Identifier: MIT */
/* Tests for perf/attr.h: golden perf_event_attr files for fake CPU trees x
 * option sets (PTD_REGEN_GOLDEN=1 rewrites them), every refusal, format
 * positions honoured, and the libipt config. */
#include <errno.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "perf/attr.h"

static char tmproot[256];

static const char *data_dir(void)
{
	const char *d = getenv("PTD_TEST_DATA");

	if (!d)
		SKIP_ALL("PTD_TEST_DATA not set (run through meson test)");
	return d;
}

static int probe(const char *cpu, struct ptd_pt_pmu *pmu)
{
	char dir[512];
	struct ptd_diag diag = { "" };
	int err;

	(void)snprintf(dir, sizeof(dir), "%s/sysfs/%s", data_dir(), cpu);
	err = ptd_pt_pmu_probe(dir, pmu, &diag);
	if (err < 0)
		fprintf(stderr, "probe %s: %s\n", cpu, diag.msg);
	return err;
}

static void write_file(const char *path, const char *content)
{
	FILE *f = fopen(path, "w");

	if (!f)
		abort();
	fputs(content, f);
	fclose(f);
}

/* ---- goldens ---- */

struct optset {
	const char *name;
	void (*apply)(struct ptd_pt_options *o);
	bool snapshot;
};

static void opt_default(struct ptd_pt_options *o) { (void)o; }

static void opt_timing(struct ptd_pt_options *o)
{
	o->mtc = true;
	o->mtc_period = 3;
	o->cyc = true;
	o->cyc_thresh = 2;
	o->psb_period = 1;
}

static void opt_kernel(struct ptd_pt_options *o)
{
	o->kernel = true;
	o->noretcomp = true;
	o->inherit = true;
}

static void opt_lean(struct ptd_pt_options *o)
{
	o->tsc = false;
	o->branch = false;
}

static void opt_ptw(struct ptd_pt_options *o)
{
	o->ptw = true;
	o->pwr_evt = true;
}

static const struct optset optsets[] = {
	{ "default", opt_default, false },
	{ "timing", opt_timing, false },
	{ "kernel-snapshot", opt_kernel, true },
	{ "lean", opt_lean, false },
	{ "ptw-pwr", opt_ptw, false },
};

static const char *const cpus[] = { "skylake", "icelake-server", "goldmont",
				    "broadwell-nocycmtc" };

/* The text a golden holds: the attr, or the refusal. */
static void golden_text(const struct ptd_pt_pmu *pmu, const struct optset *s,
			char *buf, size_t cap)
{
	struct ptd_pt_options o = ptd_pt_options_default();
	struct perf_event_attr a;
	struct ptd_diag diag = { "" };
	int err;

	s->apply(&o);
	err = ptd_pt_attr_build(pmu, &o, 4u << 20, s->snapshot, &a, &diag);
	if (err < 0) {
		(void)snprintf(buf, cap, "refused %s: %s\n", ptd_strerror(err),
			       diag.msg);
		return;
	}
	CHECK(ptd_perf_attr_format(&a, buf, cap) < cap);
}

static void test_goldens(void)
{
	bool regen = getenv("PTD_REGEN_GOLDEN") &&
		     strcmp(getenv("PTD_REGEN_GOLDEN"), "1") == 0;
	unsigned compared = 0, refused = 0;
	size_t c, s;

	for (c = 0; c < PTD_ARRAY_SIZE(cpus); c++) {
		struct ptd_pt_pmu pmu;

		REQUIRE(probe(cpus[c], &pmu) == 0);
		for (s = 0; s < PTD_ARRAY_SIZE(optsets); s++) {
			char path[512], text[8192];
			_cleanup_free_ char *want = NULL;
			size_t len;
			int err;

			(void)snprintf(path, sizeof(path), "%s/attr/%s-%s.txt",
				       data_dir(), cpus[c], optsets[s].name);
			golden_text(&pmu, &optsets[s], text, sizeof(text));
			if (strncmp(text, "refused", 7) == 0)
				refused++;
			if (regen) {
				CHECK_EQ_INT(ptd_file_write_atomic(
						     path, text, strlen(text)),
					     0);
				continue;
			}
			err = ptd_file_read_all(path, 1 << 20, &want, &len);
			if (err < 0) {
				CHECK_FAIL_("missing golden %s (run with "
					    "PTD_REGEN_GOLDEN=1)", path);
				continue;
			}
			/* byte-identical */
			if (len != strlen(text) || memcmp(want, text, len) != 0)
				CHECK_FAIL_("%s differs:\n--- expected\n%s--- "
					    "got\n%s", path, want, text);
			compared++;
		}
	}
	if (!regen)
		CHECK_EQ_INT(compared, PTD_ARRAY_SIZE(cpus) *
					       PTD_ARRAY_SIZE(optsets));
	/* Some combinations must be refusals (broadwell has no mtc/cyc,
	 * skylake no ptwrite), some must build. */
	CHECK(refused >= 3);
	CHECK(refused < PTD_ARRAY_SIZE(cpus) * PTD_ARRAY_SIZE(optsets) / 2);
}

/* ---- semantics independent of the goldens ---- */

static void test_defaults(void)
{
	struct ptd_pt_options o = ptd_pt_options_default();

	CHECK(o.user);
	CHECK(!o.kernel);
	CHECK(o.tsc);
	CHECK(!o.noretcomp);
	CHECK(o.branch);
	CHECK(!o.mtc);
	CHECK(!o.cyc);
	CHECK_EQ_INT(o.psb_period, -1);
	CHECK(!o.pwr_evt);
	CHECK(!o.ptw);
	CHECK(!o.inherit);
}

static void test_skylake_default_attr(void)
{
	struct ptd_pt_pmu pmu;
	struct ptd_pt_options o = ptd_pt_options_default();
	struct perf_event_attr a;

	REQUIRE(probe("skylake", &pmu) == 0);
	memset(&a, 0xcd, sizeof(a));
	REQUIRE(ptd_pt_attr_build(&pmu, &o, 1u << 20, false, &a, NULL) == 0);
	CHECK_EQ_INT(a.type, 8);
	CHECK_EQ_INT(a.size, sizeof(a));
	/* pt(0) + tsc(10) + branch(13), as perf's intel_pt//u */
	CHECK_EQ_U64(a.config, 0x2401);
	CHECK_EQ_U64(a.config1, 0);
	CHECK_EQ_U64(a.config2, 0);
	CHECK_EQ_INT(a.exclude_kernel, 1);
	CHECK_EQ_INT(a.exclude_user, 0);
	CHECK_EQ_INT(a.exclude_hv, 1);
	CHECK_EQ_INT(a.disabled, 1);
	CHECK_EQ_INT(a.enable_on_exec, 0);
	CHECK_EQ_INT(a.sample_id_all, 1);
	CHECK_EQ_U64(a.sample_type, PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
					    PERF_SAMPLE_CPU |
					    PERF_SAMPLE_IDENTIFIER);
	CHECK_EQ_INT(a.aux_watermark, 256 * 1024);
	CHECK_EQ_INT(a.inherit, 0);
	REQUIRE(ptd_pt_attr_build(&pmu, &o, 1u << 20, true, &a, NULL) == 0);
	CHECK_EQ_INT(a.aux_watermark, 0);
	o.inherit = true;
	o.kernel = true;
	o.user = false;
	REQUIRE(ptd_pt_attr_build(&pmu, &o, 1u << 20, true, &a, NULL) == 0);
	CHECK_EQ_INT(a.inherit, 1);
	CHECK_EQ_INT(a.exclude_kernel, 0);
	CHECK_EQ_INT(a.exclude_user, 1);
}

/* Bits go where format/ says, not where Skylake has them. */
static void test_format_positions_honoured(void)
{
	char dir[512], p[700];
	struct ptd_pt_pmu pmu;
	struct ptd_pt_options o = ptd_pt_options_default();
	struct perf_event_attr a;
	struct ptd_diag diag = { "" };

	(void)snprintf(dir, sizeof(dir), "%s/moved", tmproot);
	(void)mkdir(dir, 0755);
	(void)snprintf(p, sizeof(p), "%s/format", dir);
	(void)mkdir(p, 0755);
	(void)snprintf(p, sizeof(p), "%s/caps", dir);
	(void)mkdir(p, 0755);
#define W(name, content)                                                      \
	do {                                                                  \
		(void)snprintf(p, sizeof(p), "%s/%s", dir, name);             \
		write_file(p, content);                                       \
	} while (0)
	W("type", "42\n");
	W("format/pt", "config:3\n");
	W("format/branch", "config:40\n");
	W("format/tsc", "config2:7\n");
	W("format/mtc", "config1:63\n");
	W("format/mtc_period", "config1:0-3\n");
	W("caps/mtc", "1\n");
	W("caps/mtc_periods", "ffffffff\n");
	REQUIRE(ptd_pt_pmu_probe(dir, &pmu, &diag) == 0);
	o.mtc = true;
	o.mtc_period = 9;
	REQUIRE(ptd_pt_attr_build(&pmu, &o, 4096, false, &a, &diag) == 0);
	CHECK_EQ_INT(a.type, 42);
	CHECK_EQ_U64(a.config, (UINT64_C(1) << 3) | (UINT64_C(1) << 40));
	CHECK_EQ_U64(a.config1, (UINT64_C(1) << 63) | 9);
	CHECK_EQ_U64(a.config2, UINT64_C(1) << 7);

	/* Value wider than the field, though the cap mask allows it. */
	o.mtc_period = 16;
	CHECK_EQ_INT(ptd_pt_attr_build(&pmu, &o, 4096, false, &a, &diag),
		     -ERANGE);
	CHECK_CONTAINS(diag.msg, "mtc_period=16");
	CHECK_CONTAINS(diag.msg, "4-bit field");

	/* A kernel without "pt" cannot turn branch tracing off. */
	(void)snprintf(p, sizeof(p), "%s/format/pt", dir);
	(void)unlink(p);
	REQUIRE(ptd_pt_pmu_probe(dir, &pmu, &diag) == 0);
	o = ptd_pt_options_default();
	REQUIRE(ptd_pt_attr_build(&pmu, &o, 4096, false, &a, &diag) == 0);
	CHECK_EQ_U64(a.config, 0);	/* legacy: BranchEn implied */
	o.branch = false;
	CHECK_EQ_INT(ptd_pt_attr_build(&pmu, &o, 4096, false, &a, &diag),
		     -PTD_EUNSUPPORTED);
	CHECK_CONTAINS(diag.msg, "'pt' format");

	/* caps/mtc present but 0 */
	W("format/pt", "config:0\n");
	W("caps/mtc", "0\n");
	REQUIRE(ptd_pt_pmu_probe(dir, &pmu, &diag) == 0);
	o = ptd_pt_options_default();
	o.mtc = true;
	CHECK_EQ_INT(ptd_pt_attr_build(&pmu, &o, 4096, false, &a, &diag),
		     -PTD_EUNSUPPORTED);
	CHECK_CONTAINS(diag.msg, "caps/mtc is 0");
#undef W
}

struct refusal {
	const char *cpu;
	void (*apply)(struct ptd_pt_options *o);
	int err;
	const char *msg1;
	const char *msg2;
};

static void r_mtc(struct ptd_pt_options *o) { o->mtc = true; }
static void r_cyc(struct ptd_pt_options *o) { o->cyc = true; }
static void r_psb(struct ptd_pt_options *o) { o->psb_period = 2; }
static void r_mtc_period(struct ptd_pt_options *o)
{
	o->mtc = true;
	o->mtc_period = 1;
}
static void r_cyc_thresh(struct ptd_pt_options *o)
{
	o->cyc = true;
	o->cyc_thresh = 14;
}
static void r_psb_period(struct ptd_pt_options *o) { o->psb_period = 6; }
static void r_psb_neg(struct ptd_pt_options *o) { o->psb_period = -2; }
static void r_ptw(struct ptd_pt_options *o) { o->ptw = true; }
static void r_pwr(struct ptd_pt_options *o) { o->pwr_evt = true; }
static void r_nothing(struct ptd_pt_options *o) { o->user = false; }
static void r_gm_mtc(struct ptd_pt_options *o)
{
	o->mtc = true;
	o->mtc_period = 6;
}

static void test_refusals(void)
{
	static const struct refusal cases[] = {
		{ "broadwell-nocycmtc", r_mtc, -PTD_EUNSUPPORTED, "mtc",
		  "caps/mtc is 0" },
		{ "broadwell-nocycmtc", r_cyc, -PTD_EUNSUPPORTED, "cyc",
		  "caps/psb_cyc is 0" },
		{ "broadwell-nocycmtc", r_psb, -PTD_EUNSUPPORTED, "psb_period",
		  "caps/psb_cyc" },
		{ "skylake", r_mtc_period, -ERANGE, "mtc_period=1",
		  "valid values are 0, 3, 6, 9" },
		{ "goldmont", r_gm_mtc, -ERANGE, "caps/mtc_periods = 9",
		  "valid values are 0, 3" },
		{ "goldmont", r_cyc_thresh, -ERANGE, "cyc_thresh=14",
		  "caps/cycle_thresholds" },
		{ "skylake", r_psb_period, -ERANGE, "psb_period=6",
		  "0, 1, 2, 3, 4, 5" },
		{ "skylake", r_psb_neg, -ERANGE, "psb_period=-2", "-1" },
		{ "skylake", r_ptw, -PTD_EUNSUPPORTED, "ptw", "caps/ptwrite is 0" },
		{ "goldmont", r_ptw, -PTD_EUNSUPPORTED, "ptw",
		  "caps/ptwrite is missing" },
		{ "skylake", r_pwr, -PTD_EUNSUPPORTED, "pwr_evt",
		  "caps/power_event_trace" },
		{ "skylake", r_nothing, -EINVAL, "neither user nor kernel", "" },
	};
	size_t i;

	for (i = 0; i < PTD_ARRAY_SIZE(cases); i++) {
		struct ptd_pt_pmu pmu;
		struct ptd_pt_options o = ptd_pt_options_default();
		struct perf_event_attr a;
		struct ptd_diag diag = { "" };

		REQUIRE(probe(cases[i].cpu, &pmu) == 0);
		cases[i].apply(&o);
		memset(&a, 0xcd, sizeof(a));
		CHECK_EQ_INT(ptd_pt_attr_build(&pmu, &o, 4096, false, &a,
					       &diag), cases[i].err);
		CHECK_CONTAINS(diag.msg, cases[i].msg1);
		CHECK_CONTAINS(diag.msg, cases[i].msg2);
		CHECK_EQ_U64(a.config, 0xcdcdcdcdcdcdcdcdu);
	}
	/* Broadwell: a format field that does not exist at all (the cap
	 * check comes first for mtc; ptw has no format there either). */
	{
		struct ptd_pt_pmu pmu;
		struct ptd_pt_options o = ptd_pt_options_default();
		struct perf_event_attr a;
		struct ptd_diag diag = { "" };

		REQUIRE(probe("icelake-server", &pmu) == 0);
		o.ptw = true;
		o.pwr_evt = true;
		CHECK_EQ_INT(ptd_pt_attr_build(&pmu, &o, 4096, false, &a,
					       &diag), 0);
		REQUIRE(probe("goldmont", &pmu) == 0);
		CHECK_EQ_INT(ptd_pt_attr_build(NULL, &o, 4096, false, &a,
					       &diag), -EINVAL);
	}
}

static void test_missing_format_refused(void)
{
	struct ptd_pt_pmu pmu;
	struct ptd_pt_options o = ptd_pt_options_default();
	struct perf_event_attr a;
	struct ptd_diag diag = { "" };
	size_t i;

	/* Caps say yes, but the kernel lists no "mtc" format field. */
	REQUIRE(probe("skylake", &pmu) == 0);
	for (i = 0; i < pmu.nformats; i++)
		if (strcmp(pmu.formats[i].name, "mtc") == 0)
			strcpy(pmu.formats[i].name, "renamed");
	o.mtc = true;
	CHECK_EQ_INT(ptd_pt_attr_build(&pmu, &o, 4096, false, &a, &diag),
		     -PTD_EUNSUPPORTED);
	CHECK_CONTAINS(diag.msg, "no 'mtc' format field");
}

static void test_format_text(void)
{
	struct ptd_pt_pmu pmu;
	struct ptd_pt_options o = ptd_pt_options_default();
	struct perf_event_attr a;
	char big[8192], small[16];
	size_t n;

	REQUIRE(probe("skylake", &pmu) == 0);
	REQUIRE(ptd_pt_attr_build(&pmu, &o, 4096, false, &a, NULL) == 0);
	n = ptd_perf_attr_format(&a, big, sizeof(big));
	CHECK_EQ_INT(n, strlen(big));
	CHECK_CONTAINS(big, "type 8\n");
	CHECK_CONTAINS(big, "config 0x2401\n");
	CHECK_CONTAINS(big, "aux_watermark 1024\n");
	CHECK_CONTAINS(big, "sig_data 0x0\n");
	/* truncation: snprintf semantics */
	CHECK_EQ_INT(ptd_perf_attr_format(&a, small, sizeof(small)), n);
	CHECK_EQ_INT(strlen(small), sizeof(small) - 1);
	CHECK_EQ_INT(ptd_perf_attr_format(&a, NULL, 0), n);
}

static void test_config_from_pmu(void)
{
	struct ptd_pt_pmu pmu;
	struct ptd_pt_options o = ptd_pt_options_default();
	struct perf_event_attr a;
	struct pt_cpu skl = { pcv_intel, 6, 0x5e, 3 };
	struct pt_cpu amd = { pcv_unknown, 26, 2, 1 };
	struct pt_config cfg;

	REQUIRE(probe("skylake", &pmu) == 0);
	o.mtc = true;
	o.mtc_period = 6;
	REQUIRE(ptd_pt_attr_build(&pmu, &o, 4096, false, &a, NULL) == 0);
	pt_config_init(&cfg);
	CHECK_EQ_INT(ptd_pt_config_from_pmu(&pmu, &skl, a.config, &cfg), 0);
	CHECK_EQ_INT(cfg.size, sizeof(cfg));
	CHECK_EQ_INT(cfg.cpu.model, 0x5e);
	CHECK_EQ_INT(cfg.errata.skl014, 1);
	CHECK_EQ_INT(cfg.errata.bdm70, 1);
	CHECK_EQ_INT(cfg.nom_freq, 40);
	CHECK_EQ_INT(cfg.cpuid_0x15_eax, 2);
	CHECK_EQ_INT(cfg.cpuid_0x15_ebx, 334);
	CHECK_EQ_INT(cfg.mtc_freq, 6);

	/* MTC off: no mtc_freq; unknown CPU: no errata, no error. */
	pt_config_init(&cfg);
	CHECK_EQ_INT(ptd_pt_config_from_pmu(&pmu, &amd, 0x2401, &cfg), 0);
	CHECK_EQ_INT(cfg.mtc_freq, 0);
	CHECK_EQ_INT(cfg.errata.skl014, 0);
	CHECK_EQ_INT(cfg.cpu.family, 26);

	pmu.max_nonturbo_ratio = 300;
	CHECK_EQ_INT(ptd_pt_config_from_pmu(&pmu, &skl, 0, &cfg), -ERANGE);
	CHECK_EQ_INT(ptd_pt_config_from_pmu(NULL, &skl, 0, &cfg), -EINVAL);
}

int main(void)
{
	(void)data_dir();
	(void)snprintf(tmproot, sizeof(tmproot), "/tmp/ptd-test-attr-XXXXXX");
	if (!mkdtemp(tmproot))
		SKIP_ALL("cannot create a temporary directory");
	RUN(test_defaults);
	RUN(test_goldens);
	RUN(test_skylake_default_attr);
	RUN(test_format_positions_honoured);
	RUN(test_refusals);
	RUN(test_missing_format_refused);
	RUN(test_format_text);
	RUN(test_config_from_pmu);
	(void)ptd_rm_rf(tmproot);
	return check_done();
}
