/* SPDX-License-Identifier: MIT */
/*
 * intel_pt PMU discovery from sysfs, CPU identity from /proc/cpuinfo, and
 * the perf memory-lock check.
 */
#include "perf/pmu.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/strutil.h"

/* sysfs attributes are at most a page. */
#define SYSFS_MAX 4096
#define CPUINFO_MAX (16u << 20)

/* What to tell a user whose machine has no intel_pt PMU. */
#define NOPT_HINT                                                             \
	"this CPU or VM has no Intel PT: enable it in the BIOS, pass it "     \
	"through to the guest (e.g. KVM's kvm_intel pt_mode=1 / intel_pt "    \
	"CPU flag), or use the software PT source"

/* Read a sysfs attribute: exactly one non-empty line.  *ret_s is malloc'd
 * and holds the value without its newline.  @shown is the name used in
 * messages. */
static int read_attr(const char *path, char **ret_s, struct ptd_diag *diag)
{
	char *data = NULL;
	size_t len;
	int err;

	err = ptd_file_read_all(path, SYSFS_MAX, &data, &len);
	if (err == -PTD_ELIMIT)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "%s: larger than a sysfs attribute (%d bytes)",
				 path, SYSFS_MAX);
	if (err < 0)
		return ptd_diagf(diag, err, "failed to read '%s': %s", path,
				 ptd_strerror(err));
	if (len > 0 && data[len - 1] == '\n')
		data[--len] = '\0';
	if (len == 0 || strlen(data) != len || strchr(data, '\n')) {
		err = ptd_diagf(diag, -PTD_EFORMAT,
				"%s: expected one value on one line, got '%.64s'",
				path, data);
		free(data);
		return err;
	}
	*ret_s = data;
	return 0;
}

static int attr_err(struct ptd_diag *diag, const char *path, const char *s,
		    const char *expected)
{
	return ptd_diagf(diag, -PTD_EFORMAT, "%s: expected %s, got '%.64s'",
			 path, expected, s);
}

/* Read a decimal u32 attribute. */
static int read_u32(const char *path, uint32_t *ret, struct ptd_diag *diag)
{
	_cleanup_free_ char *s = NULL;
	uint64_t v;
	int err;

	err = read_attr(path, &s, diag);
	if (err < 0)
		return err;
	if (ptd_parse_u64(s, 10, &v) < 0 || v > UINT32_MAX)
		return attr_err(diag, path, s, "a decimal number below 2^32");
	*ret = (uint32_t)v;
	return 0;
}

static bool path_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* "config:N", "config:N-M", "config1:..", "config2:.." */
static int parse_format(const char *path, const char *s, const char *name,
			struct ptd_pt_format *ret, struct ptd_diag *diag)
{
	static const struct {
		const char *prefix;
		enum ptd_pt_config_word word;
	} words[] = {
		{ "config:", PTD_PT_CONFIG },
		{ "config1:", PTD_PT_CONFIG1 },
		{ "config2:", PTD_PT_CONFIG2 },
	};
	const char *p = NULL, *dash;
	uint64_t lo, hi;
	size_t i;

	for (i = 0; i < PTD_ARRAY_SIZE(words); i++) {
		size_t n = strlen(words[i].prefix);

		if (strncmp(s, words[i].prefix, n) == 0) {
			p = s + n;
			ret->word = words[i].word;
			break;
		}
	}
	if (!p)
		return attr_err(diag, path, s,
				"'config:N' or 'config:N-M' (or config1/config2)");
	dash = strchr(p, '-');
	if (dash) {
		if (ptd_parse_u64n(p, (size_t)(dash - p), 10, &lo) < 0 ||
		    ptd_parse_u64(dash + 1, 10, &hi) < 0)
			return attr_err(diag, path, s, "a bit range 'N-M'");
	} else {
		if (ptd_parse_u64(p, 10, &lo) < 0)
			return attr_err(diag, path, s, "a bit number");
		hi = lo;
	}
	if (lo > hi || hi > 63)
		return attr_err(diag, path, s, "bits 0..63 with N <= M");
	ret->lo = (uint8_t)lo;
	ret->hi = (uint8_t)hi;
	(void)ptd_strlcpy(ret->name, name, sizeof(ret->name));
	return 0;
}

static int parse_cap(const char *path, const char *s, const char *name,
		     struct ptd_pt_cap *ret, struct ptd_diag *diag)
{
	/* The kernel prints caps with "%x"; accept an optional 0x too. */
	if (ptd_parse_u64(s, strncmp(s, "0x", 2) == 0 ? 0 : 16, &ret->value) < 0)
		return attr_err(diag, path, s, "a hexadecimal number");
	(void)ptd_strlcpy(ret->name, name, sizeof(ret->name));
	return 0;
}

/* Called for each file of a directory with the slot to fill. */
typedef int (*entry_fn)(const char *path, const char *s, const char *name,
			void *slot, struct ptd_diag *diag);

static int format_entry(const char *path, const char *s, const char *name,
			void *slot, struct ptd_diag *diag)
{
	return parse_format(path, s, name, slot, diag);
}

static int cap_entry(const char *path, const char *s, const char *name,
		     void *slot, struct ptd_diag *diag)
{
	return parse_cap(path, s, name, slot, diag);
}

/* Read every file in @dir/@sub, calling @fn with slot i of @slots (each
 * @slot_size bytes, at most @max) for the i-th entry. */
static int read_dir(const char *dir, const char *sub, void *slots,
		    size_t slot_size, size_t max, entry_fn fn,
		    size_t *ret_n, struct ptd_diag *diag)
{
	char path[PATH_MAX + 1];
	struct dirent *de;
	size_t n = 0;
	DIR *d;
	int err = 0;

	if (snprintf(path, sizeof(path), "%s/%s", dir, sub) >= (int)sizeof(path))
		return ptd_diagf(diag, -ENAMETOOLONG, "%s/%s: path too long",
				 dir, sub);
	d = opendir(path);
	if (!d) {
		err = -errno;
		return ptd_diagf(diag, err, "failed to open directory '%s': %s",
				 path, ptd_strerror(err));
	}
	while ((errno = 0, de = readdir(d))) {
		char file[PATH_MAX + 2 + 256];
		_cleanup_free_ char *s = NULL;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (n == max) {
			err = ptd_diagf(diag, -PTD_ELIMIT,
					"%s: more than %zu entries", path, max);
			goto out;
		}
		if (strlen(de->d_name) >= PTD_PT_PMU_NAME_MAX) {
			err = ptd_diagf(diag, -PTD_ELIMIT,
					"%s: name '%.64s' longer than %d bytes",
					path, de->d_name,
					PTD_PT_PMU_NAME_MAX - 1);
			goto out;
		}
		(void)snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
		err = read_attr(file, &s, diag);
		if (err < 0)
			goto out;
		err = fn(file, s, de->d_name, (char *)slots + n * slot_size,
			 diag);
		if (err < 0)
			goto out;
		n++;
	}
	if (errno) {
		err = -errno;
		err = ptd_diagf(diag, err, "failed to read directory '%s': %s",
				path, ptd_strerror(err));
		goto out;
	}
	*ret_n = n;
out:
	closedir(d);
	return err;
}

/* Both slot types start with their name. */
static int cmp_name(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* tsc_art_ratio "num:den" */
static int read_ratio(const char *path, struct ptd_pt_pmu *p,
		      struct ptd_diag *diag)
{
	_cleanup_free_ char *s = NULL;
	uint64_t num, den;
	const char *colon;
	int err;

	err = read_attr(path, &s, diag);
	if (err < 0)
		return err;
	colon = strchr(s, ':');
	if (!colon || ptd_parse_u64n(s, (size_t)(colon - s), 10, &num) < 0 ||
	    ptd_parse_u64(colon + 1, 10, &den) < 0 || num > UINT32_MAX ||
	    den > UINT32_MAX)
		return attr_err(diag, path, s, "'num:den' (decimal u32)");
	p->has_tsc_art_ratio = true;
	p->tsc_art_num = (uint32_t)num;
	p->tsc_art_den = (uint32_t)den;
	return 0;
}

/* Read an optional file into *ret; *has is set when it exists. */
static int read_opt_u32(const char *dir, const char *name, uint32_t *ret,
			bool *has, struct ptd_diag *diag)
{
	char path[PATH_MAX + 1];

	(void)snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!path_exists(path))
		return 0;
	if (has)
		*has = true;
	return read_u32(path, ret, diag);
}

static int probe_files(const char *dir, struct ptd_pt_pmu *p,
		       struct ptd_diag *diag)
{
	char path[PATH_MAX + 1];
	int err;

	(void)snprintf(path, sizeof(path), "%s/type", dir);
	if (!path_exists(path))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "%s: missing (is '%s' a perf PMU directory?)",
				 path, dir);
	err = read_u32(path, &p->type, diag);
	if (err < 0)
		return err;
	(void)snprintf(path, sizeof(path), "%s/format", dir);
	if (!path_exists(path))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "%s: missing (the PMU describes no config "
				 "fields)", path);
	err = read_dir(dir, "format", p->formats, sizeof(p->formats[0]),
		       PTD_PT_PMU_MAX_FORMATS, format_entry, &p->nformats,
		       diag);
	if (err < 0)
		return err;
	qsort(p->formats, p->nformats, sizeof(p->formats[0]), cmp_name);
	(void)snprintf(path, sizeof(path), "%s/caps", dir);
	if (path_exists(path)) {
		err = read_dir(dir, "caps", p->caps, sizeof(p->caps[0]),
			       PTD_PT_PMU_MAX_CAPS, cap_entry, &p->ncaps, diag);
		if (err < 0)
			return err;
		qsort(p->caps, p->ncaps, sizeof(p->caps[0]), cmp_name);
	}
	err = read_opt_u32(dir, "nr_addr_filters", &p->nr_addr_filters, NULL,
			   diag);
	if (err < 0)
		return err;
	err = read_opt_u32(dir, "max_nonturbo_ratio", &p->max_nonturbo_ratio,
			   &p->has_max_nonturbo_ratio, diag);
	if (err < 0)
		return err;
	(void)snprintf(path, sizeof(path), "%s/tsc_art_ratio", dir);
	if (path_exists(path))
		return read_ratio(path, p, diag);
	return 0;
}

int ptd_pt_pmu_probe(const char *dir, struct ptd_pt_pmu *ret,
		     struct ptd_diag *diag)
{
	struct ptd_pt_pmu *p;
	struct stat st;
	int err;

	if (!dir || !ret)
		return ptd_diagf(diag, -EINVAL, "no PMU directory given");
	if (strlen(dir) > PATH_MAX - 64)
		return ptd_diagf(diag, -ENAMETOOLONG, "'%.64s...': too long",
				 dir);
	if (stat(dir, &st) < 0) {
		err = -errno;
		if (err == -ENOENT || err == -ENOTDIR)
			return ptd_diagf(diag, -PTD_ENOPT,
					 "no intel_pt PMU at '%s': " NOPT_HINT,
					 dir);
		return ptd_diagf(diag, err, "failed to look at '%s': %s", dir,
				 ptd_strerror(err));
	}
	if (!S_ISDIR(st.st_mode))
		return ptd_diagf(diag, -PTD_ENOPT,
				 "'%s' is not a directory: " NOPT_HINT, dir);
	/* Large (about 8 KiB): build it aside so *ret is untouched on
	 * failure. */
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	err = probe_files(dir, p, diag);
	if (err == 0)
		*ret = *p;
	free(p);
	return err;
}

const struct ptd_pt_format *ptd_pt_pmu_format(const struct ptd_pt_pmu *pmu,
					      const char *name)
{
	size_t i;

	if (!pmu || !name)
		return NULL;
	for (i = 0; i < pmu->nformats; i++)
		if (strcmp(pmu->formats[i].name, name) == 0)
			return &pmu->formats[i];
	return NULL;
}

int ptd_pt_pmu_cap(const struct ptd_pt_pmu *pmu, const char *name,
		   uint64_t *ret)
{
	size_t i;

	if (!pmu || !name)
		return -ENOENT;
	for (i = 0; i < pmu->ncaps; i++) {
		if (strcmp(pmu->caps[i].name, name) == 0) {
			if (ret)
				*ret = pmu->caps[i].value;
			return 0;
		}
	}
	return -ENOENT;
}

unsigned ptd_pt_format_width(const struct ptd_pt_format *f)
{
	return (unsigned)f->hi - f->lo + 1;
}

/* ---- /proc/cpuinfo ---- */

struct cpu_fields {
	const char *name;
	uint64_t max;
	bool seen;
	uint64_t value;
};

/* Handle one "key\t: value" line of the first processor block.  Returns
 * 0, or -PTD_EFORMAT. */
static int cpuinfo_line(const char *path, size_t lineno, const char *line,
			size_t len, struct cpu_fields *f, size_t nf,
			char *vendor, size_t vcap, struct ptd_diag *diag)
{
	const char *colon = memchr(line, ':', len);
	size_t klen, i;
	const char *v;
	size_t vlen;
	uint64_t x;

	if (!colon)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "%s:%zu: expected 'key : value'", path,
				 lineno);
	klen = (size_t)(colon - line);
	while (klen > 0 && (line[klen - 1] == ' ' || line[klen - 1] == '\t'))
		klen--;
	v = colon + 1;
	vlen = len - (size_t)(v - line);
	if (vlen > 0 && *v == ' ') {
		v++;
		vlen--;
	}
	if (klen == strlen("vendor_id") && memcmp(line, "vendor_id", klen) == 0) {
		if (vlen == 0 || vlen >= vcap)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s:%zu: bad vendor_id", path, lineno);
		memcpy(vendor, v, vlen);
		vendor[vlen] = '\0';
		return 0;
	}
	for (i = 0; i < nf; i++) {
		if (klen != strlen(f[i].name) ||
		    memcmp(line, f[i].name, klen) != 0)
			continue;
		if (ptd_parse_u64n(v, vlen, 10, &x) < 0 || x > f[i].max)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s:%zu: '%s' must be a decimal number "
					 "up to %" PRIu64 ", got '%.*s'",
					 path, lineno, f[i].name, f[i].max,
					 (int)(vlen > 64 ? 64 : vlen), v);
		if (f[i].seen && f[i].value != x)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s:%zu: '%s' given twice", path,
					 lineno, f[i].name);
		f[i].seen = true;
		f[i].value = x;
	}
	return 0;
}

int ptd_pt_cpu_read(const char *cpuinfo_path, struct pt_cpu *ret,
		    struct ptd_diag *diag)
{
	struct cpu_fields f[] = {
		{ "cpu family", UINT16_MAX, false, 0 },
		{ "model", UINT8_MAX, false, 0 },
		{ "stepping", UINT8_MAX, false, 0 },
	};
	_cleanup_free_ char *data = NULL;
	char vendor[64] = "";
	size_t len, lineno = 0, i;
	const char *p, *end;
	int err;

	if (!cpuinfo_path || !ret)
		return ptd_diagf(diag, -EINVAL, "no cpuinfo path given");
	err = ptd_file_read_all(cpuinfo_path, CPUINFO_MAX, &data, &len);
	if (err < 0)
		return ptd_diagf(diag, err, "failed to read '%s': %s",
				 cpuinfo_path, ptd_strerror(err));
	/* Only the first processor block: it ends at the first empty line. */
	for (p = data, end = data + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);

		lineno++;
		if (l == 0)
			break;
		err = cpuinfo_line(cpuinfo_path, lineno, p, l, f,
				   PTD_ARRAY_SIZE(f), vendor, sizeof(vendor),
				   diag);
		if (err < 0)
			return err;
		p += l + (nl ? 1 : 0);
	}
	if (!vendor[0])
		return ptd_diagf(diag, -PTD_EFORMAT, "%s: no 'vendor_id'",
				 cpuinfo_path);
	for (i = 0; i < PTD_ARRAY_SIZE(f); i++)
		if (!f[i].seen)
			return ptd_diagf(diag, -PTD_EFORMAT, "%s: no '%s'",
					 cpuinfo_path, f[i].name);
	memset(ret, 0, sizeof(*ret));
	ret->vendor = strcmp(vendor, "GenuineIntel") == 0 ? pcv_intel
							   : pcv_unknown;
	ret->family = (uint16_t)f[0].value;
	ret->model = (uint8_t)f[1].value;
	ret->stepping = (uint8_t)f[2].value;
	return 0;
}

/* ---- memory-lock limits ---- */

static bool has_cap_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
		.pid = 0,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	return (data[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &
		CAP_TO_MASK(CAP_IPC_LOCK)) != 0;
}

/* Read a sysctl under @procroot/sys/kernel as a signed decimal number. */
static int read_sysctl(const char *procroot, const char *name, int64_t *ret,
		       struct ptd_diag *diag)
{
	char path[PATH_MAX + 1];
	_cleanup_free_ char *s = NULL;
	uint64_t v;
	bool neg;
	int err;

	if (snprintf(path, sizeof(path), "%s/sys/kernel/%s", procroot, name) >=
	    (int)sizeof(path))
		return ptd_diagf(diag, -ENAMETOOLONG, "procroot too long");
	err = read_attr(path, &s, diag);
	if (err < 0)
		return err;
	neg = s[0] == '-';
	if (ptd_parse_u64(s + neg, 10, &v) < 0 || v > INT64_MAX)
		return attr_err(diag, path, s, "a decimal number");
	*ret = neg ? -(int64_t)v : (int64_t)v;
	return 0;
}

int ptd_perf_mlock_check(size_t bytes_per_buffer, unsigned nbuffers,
			 const char *procroot, struct ptd_diag *diag)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	int64_t mlock_kb, paranoid = 2;
	uint64_t need, allow, ncpu, rlim_bytes, pages;
	struct rlimit rl;
	int err;

	if (!procroot)
		procroot = "/proc";
	pages = bytes_per_buffer / page + (bytes_per_buffer % page != 0);
	if (nbuffers && pages > UINT64_MAX / page / nbuffers)
		return ptd_diagf(diag, -EOVERFLOW,
				 "%u buffers of %zu bytes overflow", nbuffers,
				 bytes_per_buffer);
	need = pages * page * nbuffers;
	if (has_cap_ipc_lock())
		return 0;
	err = read_sysctl(procroot, "perf_event_mlock_kb", &mlock_kb, diag);
	if (err < 0)
		return err;
	if (mlock_kb < 0 || mlock_kb > (int64_t)(UINT32_MAX))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "%s/sys/kernel/perf_event_mlock_kb: %" PRId64
				 " out of range", procroot, mlock_kb);
	/* The kernel skips the RLIMIT_MEMLOCK check when perf is not
	 * paranoid at all (perf_event_paranoid == -1); an unreadable or
	 * missing file counts as paranoid. */
	(void)read_sysctl(procroot, "perf_event_paranoid", &paranoid, NULL);
	ncpu = (uint64_t)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu < 1)
		ncpu = 1;
	/* perf_mmap(): per-user allowance = mlock_kb pages x online CPUs;
	 * perf-intel-pt.txt: minus one page per CPU (the data rings' header
	 * pages). */
	allow = (uint64_t)mlock_kb * 1024 / page * ncpu * page;
	allow = allow > ncpu * page ? allow - ncpu * page : 0;
	if (need <= allow || paranoid < 0)
		return 0;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
		err = -errno;
		return ptd_diagf(diag, err, "getrlimit(RLIMIT_MEMLOCK): %s",
				 ptd_strerror(err));
	}
	if (rl.rlim_cur == RLIM_INFINITY || need - allow <= rl.rlim_cur)
		return 0;
	rlim_bytes = rl.rlim_cur;
	/* Suggest the sysctl value that alone would make it fit. */
	return ptd_diagf(diag, -PTD_ELIMIT,
		"%u buffer(s) of %" PRIu64 " KiB (%" PRIu64 " KiB) exceed the "
		"perf_event_mlock_kb allowance (%" PRId64 " KiB x %" PRIu64
		" CPUs minus one page per CPU = %" PRIu64 " KiB) plus "
		"RLIMIT_MEMLOCK (%" PRIu64 " KiB): raise it with 'sysctl "
		"kernel.perf_event_mlock_kb=%" PRIu64 "', or 'ulimit -l' / "
		"LimitMEMLOCK= in the service unit, or give the process "
		"CAP_IPC_LOCK",
		nbuffers, pages * page / 1024, need / 1024, mlock_kb, ncpu,
		allow / 1024, rlim_bytes / 1024,
		(need / ncpu + page + 1023) / 1024 + 1);
}
