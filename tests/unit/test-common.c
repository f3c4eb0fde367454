/* SPDX-License-Identifier: MIT */
/* Tests for lib/common: strict number parsing, buffers, file I/O, errors,
 * the plain file name check. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/diag.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "check.h"

static char tmpdir[] = "/tmp/ptd-test-common-XXXXXX";

#define POISON UINT64_C(0xcdcdcdcdcdcdcdcd)

/* Parse @s and check the result (and that a failure writes nothing). */
static void check_u64(const char *s, int base, int want_r, uint64_t want_v)
{
	uint64_t v = POISON;
	int r = ptd_parse_u64(s, base, &v);

	if (r != want_r)
		CHECK_FAIL_("ptd_parse_u64(\"%s\", %d): expected %d, got %d",
			    s ? s : "(null)", base, want_r, r);
	else if (r == 0 && v != want_v)
		CHECK_FAIL_("ptd_parse_u64(\"%s\", %d): expected 0x%" PRIx64
			    ", got 0x%" PRIx64,
			    s, base, want_v, v);
	else if (r < 0 && v != POISON)
		CHECK_FAIL_("ptd_parse_u64(\"%s\", %d) failed but wrote 0x%"
			    PRIx64, s, base, v);
}

static void test_parse_u64(void)
{
	check_u64("0", 10, 0, 0);
	check_u64("123", 10, 0, 123);
	check_u64("18446744073709551615", 10, 0, UINT64_MAX);
	check_u64("18446744073709551616", 10, -ERANGE, 0);
	check_u64("99999999999999999999", 10, -ERANGE, 0);
	check_u64("", 10, -EINVAL, 0);
	check_u64("12abc", 10, -EINVAL, 0);
	check_u64("-1", 10, -EINVAL, 0);
	check_u64("+1", 10, -EINVAL, 0);
	check_u64(" 1", 10, -EINVAL, 0);
	check_u64("1 ", 10, -EINVAL, 0);
	check_u64("1a", 10, -EINVAL, 0);
	check_u64(NULL, 10, -EINVAL, 0);

	check_u64("ff", 16, 0, 0xff);
	check_u64("FF", 16, 0, 0xff);
	check_u64("ffffffffffffffff", 16, 0, UINT64_MAX);
	check_u64("10000000000000000", 16, -ERANGE, 0);
	check_u64("0x10", 16, -EINVAL, 0);	/* no prefix in base 16 */
	check_u64("fg", 16, -EINVAL, 0);
	check_u64("", 16, -EINVAL, 0);

	check_u64("0x10", 0, 0, 16);
	check_u64("0X1f", 0, 0, 31);
	check_u64("0x", 0, -EINVAL, 0);
	check_u64("0xg", 0, -EINVAL, 0);
	check_u64("010", 0, 0, 10);		/* no octal */
	check_u64("0", 0, 0, 0);
	check_u64("12abc", 0, -EINVAL, 0);
	check_u64("0x0x1", 0, -EINVAL, 0);
	check_u64("0xffffffffffffffff", 0, 0, UINT64_MAX);
	check_u64("0x10000000000000000", 0, -ERANGE, 0);

	check_u64("10", 8, -EINVAL, 0);
	check_u64("10", 2, -EINVAL, 0);
	CHECK_EQ_INT(ptd_parse_u64("1", 10, NULL), -EINVAL);
}

static void test_parse_u64n(void)
{
	uint64_t v = POISON;

	CHECK_EQ_INT(ptd_parse_u64n("123abc", 3, 10, &v), 0);
	CHECK_EQ_U64(v, 123);
	CHECK_EQ_INT(ptd_parse_u64n("123abc", 4, 10, &v), -EINVAL);
	CHECK_EQ_INT(ptd_parse_u64n("123", 0, 10, &v), -EINVAL);
	/* only the first @len bytes count: "0x" alone is no number */
	v = POISON;
	CHECK_EQ_INT(ptd_parse_u64n("0x1234", 2, 0, &v), -EINVAL);
	CHECK_EQ_U64(v, POISON);
	CHECK_EQ_INT(ptd_parse_u64n("0x1234", 4, 0, &v), 0);
	CHECK_EQ_U64(v, 0x12);
	CHECK_EQ_INT(ptd_parse_u64n(NULL, 1, 10, &v), -EINVAL);
}

static void check_size(const char *s, int want_r, uint64_t want_v)
{
	uint64_t v = POISON;
	int r = ptd_parse_size(s, &v);

	if (r != want_r)
		CHECK_FAIL_("ptd_parse_size(\"%s\"): expected %d, got %d", s,
			    want_r, r);
	else if (r == 0 && v != want_v)
		CHECK_FAIL_("ptd_parse_size(\"%s\"): expected %" PRIu64
			    ", got %" PRIu64, s, want_v, v);
	else if (r < 0 && v != POISON)
		CHECK_FAIL_("ptd_parse_size(\"%s\") failed but wrote", s);
}

static void test_parse_size(void)
{
	check_size("0", 0, 0);
	check_size("10", 0, 10);
	check_size("4k", 0, 4096);
	check_size("4K", 0, 4096);
	check_size("2m", 0, 2u << 20);
	check_size("2M", 0, 2u << 20);
	check_size("1G", 0, 1u << 30);
	check_size("16777215G", 0, UINT64_C(16777215) << 30);
	check_size("17179869184G", -ERANGE, 0);	/* 2^64 */
	check_size("18014398509481984k", -ERANGE, 0);
	check_size("18446744073709551616", -ERANGE, 0);
	check_size("", -EINVAL, 0);
	check_size("k", -EINVAL, 0);
	check_size("1x", -EINVAL, 0);
	check_size("1kk", -EINVAL, 0);
	check_size("1T", -EINVAL, 0);
	check_size("-1k", -EINVAL, 0);
	check_size(" 1k", -EINVAL, 0);
	check_size("0x10", -EINVAL, 0);
	CHECK_EQ_INT(ptd_parse_size(NULL, (uint64_t[1]){ 0 }), -EINVAL);
	CHECK_EQ_INT(ptd_parse_size("1", NULL), -EINVAL);
}

static void test_strlcpy(void)
{
	char dst[8];

	memset(dst, 'z', sizeof(dst));
	CHECK_EQ_INT(ptd_strlcpy(dst, "abc", sizeof(dst)), 0);
	CHECK_EQ_STR(dst, "abc");
	CHECK_EQ_INT(ptd_strlcpy(dst, "1234567", sizeof(dst)), 0);
	CHECK_EQ_STR(dst, "1234567");
	CHECK_EQ_INT(ptd_strlcpy(dst, "12345678", sizeof(dst)), -ENAMETOOLONG);
	CHECK_EQ_STR(dst, "1234567");	/* untouched */
	CHECK_EQ_INT(ptd_strlcpy(dst, "", sizeof(dst)), 0);
	CHECK_EQ_STR(dst, "");
	CHECK_EQ_INT(ptd_strlcpy(dst, "", 0), -ENAMETOOLONG);
}

static void test_buf(void)
{
	struct ptd_buf b = { 0 };
	uint8_t chunk[1000];

	for (size_t i = 0; i < sizeof(chunk); i++)
		chunk[i] = (uint8_t)i;
	CHECK_EQ_INT(ptd_buf_append(&b, NULL, 0), 0);
	CHECK_EQ_INT(b.len, 0);
	for (int i = 0; i < 100; i++)
		REQUIRE(ptd_buf_append(&b, chunk, sizeof(chunk)) == 0);
	CHECK_EQ_INT(b.len, 100 * sizeof(chunk));
	CHECK(b.cap >= b.len);
	for (size_t i = 0; i < b.len; i++) {
		if (b.data[i] != (uint8_t)(i % sizeof(chunk))) {
			CHECK_FAIL_("byte %zu: expected %u, got %u", i,
				    (unsigned)(uint8_t)(i % sizeof(chunk)),
				    b.data[i]);
			break;
		}
	}
	/* reserve leaves len alone and makes room */
	CHECK_EQ_INT(ptd_buf_reserve(&b, 1 << 20), 0);
	CHECK(b.cap - b.len >= (1u << 20));
	CHECK_EQ_INT(b.len, 100 * sizeof(chunk));
	/* an impossible size fails cleanly */
	CHECK_EQ_INT(ptd_buf_reserve(&b, SIZE_MAX - 10), -ENOMEM);
	CHECK_EQ_INT(b.len, 100 * sizeof(chunk));
	ptd_buf_fini(&b);
	CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
	ptd_buf_fini(&b);
}

static void tmp_path(char *out, size_t cap, const char *name)
{
	(void)snprintf(out, cap, "%s/%s", tmpdir, name);
}

static void test_file_read_all(void)
{
	char path[PATH_MAX], *data = (char *)0x1;
	size_t len = 77;
	uint8_t *big;
	const size_t n = 200000;	/* several read() chunks */

	tmp_path(path, sizeof(path), "big");
	big = malloc(n);
	REQUIRE(big);
	for (size_t i = 0; i < n; i++)
		big[i] = (uint8_t)(i * 13);
	REQUIRE(ptd_file_write_atomic(path, big, n) == 0);

	CHECK_EQ_INT(ptd_file_read_all(path, n, &data, &len), 0);
	CHECK_EQ_INT(len, n);
	CHECK(memcmp(data, big, n) == 0);
	CHECK_EQ_INT(data[n], 0);	/* NUL-terminated */
	free(data);

	/* one byte over the limit */
	data = (char *)0x1;
	len = 77;
	CHECK_EQ_INT(ptd_file_read_all(path, n - 1, &data, &len), -PTD_ELIMIT);
	CHECK(data == (char *)0x1 && len == 77);
	CHECK_EQ_INT(ptd_file_read_all(path, 10, &data, &len), -PTD_ELIMIT);
	free(big);
	(void)unlink(path);

	/* empty file */
	tmp_path(path, sizeof(path), "empty");
	REQUIRE(ptd_file_write_atomic(path, "", 0) == 0);
	CHECK_EQ_INT(ptd_file_read_all(path, 0, &data, &len), 0);
	CHECK_EQ_INT(len, 0);
	CHECK_EQ_INT(data[0], 0);
	free(data);
	(void)unlink(path);

	/* errors */
	data = (char *)0x1;
	CHECK_EQ_INT(ptd_file_read_all("/nonexistent/x", 10, &data, &len),
		     -ENOENT);
	CHECK(data == (char *)0x1);
	CHECK_EQ_INT(ptd_file_read_all(tmpdir, 10, &data, &len), -EISDIR);

	/* /proc files report st_size 0 */
	CHECK_EQ_INT(ptd_file_read_all("/proc/self/status", 1 << 20, &data,
				       &len),
		     0);
	CHECK(len > 0);
	CHECK_CONTAINS(data, "Pid:");
	free(data);
}

/* Files a client controls are opened without blocking and refused unless
 * regular: a FIFO with no writer (which a plain open would wait on for
 * ever), a device, a directory, a final symlink with O_NOFOLLOW -- each
 * named in the message.  A regular file comes back blocking. */
static void test_open_regular(void)
{
	char path[PATH_MAX], link[PATH_MAX], *data = NULL;
	struct ptd_diag d = { "" };
	struct stat st;
	size_t len;
	int fd;

	tmp_path(path, sizeof(path), "reg");
	REQUIRE(ptd_file_write_atomic(path, "abc", 3) == 0);
	fd = ptd_file_open_regular(AT_FDCWD, path, 0, &st, &d);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_EQ_INT(st.st_size, 3);
		CHECK_EQ_INT(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
		CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
		close(fd);
	}
	/* through a symlink: followed, unless O_NOFOLLOW */
	tmp_path(link, sizeof(link), "reg-link");
	REQUIRE(symlink(path, link) == 0);
	fd = ptd_file_open_regular(AT_FDCWD, link, 0, NULL, &d);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK_EQ_INT(ptd_file_open_regular(AT_FDCWD, link, O_NOFOLLOW, NULL,
					   &d), -ELOOP);
	CHECK_CONTAINS(d.msg, link);
	CHECK_CONTAINS(d.msg, "symbolic link");
	(void)unlink(link);
	(void)unlink(path);

	tmp_path(path, sizeof(path), "fifo");
	REQUIRE(mkfifo(path, 0600) == 0);
	CHECK_EQ_INT(ptd_file_open_regular(AT_FDCWD, path, 0, NULL, &d),
		     -PTD_ENOTREG);
	CHECK_CONTAINS(d.msg, path);
	CHECK_CONTAINS(d.msg, "is a FIFO, not a regular file");
	/* and so for every reader built on it */
	CHECK_EQ_INT(ptd_file_read_all(path, 10, &data, &len), -PTD_ENOTREG);
	(void)unlink(path);

	CHECK_EQ_INT(ptd_file_open_regular(AT_FDCWD, "/dev/null", 0, NULL, &d),
		     -PTD_ENOTREG);
	CHECK_CONTAINS(d.msg, "'/dev/null' is a character device");
	CHECK_EQ_INT(ptd_file_open_regular(AT_FDCWD, tmpdir, 0, NULL, &d),
		     -EISDIR);
	CHECK_CONTAINS(d.msg, tmpdir);
	CHECK_EQ_INT(ptd_file_open_regular(AT_FDCWD, "/nonexistent/x", 0, NULL,
					   &d), -ENOENT);
	CHECK_CONTAINS(d.msg, "cannot open '/nonexistent/x'");
	CHECK_EQ_INT(ptd_file_open_regular(AT_FDCWD, "x", O_TRUNC, NULL, &d),
		     -EINVAL);
	CHECK_EQ_STR(ptd_strerror(-PTD_ENOTREG), "not a regular file");
}

static unsigned count_dir_entries(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	unsigned n = 0;

	if (!d)
		return 9999;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void test_write_atomic(void)
{
	char path[PATH_MAX], *data = NULL;
	size_t len = 0;

	tmp_path(path, sizeof(path), "atomic");
	CHECK_EQ_INT(ptd_file_write_atomic(path, "first version", 13), 0);
	CHECK_EQ_INT(ptd_file_read_all(path, 100, &data, &len), 0);
	CHECK_EQ_STR(data, "first version");
	free(data);
	CHECK_EQ_INT(ptd_file_write_atomic(path, "second", 6), 0);
	CHECK_EQ_INT(ptd_file_read_all(path, 100, &data, &len), 0);
	CHECK_EQ_STR(data, "second");
	CHECK_EQ_INT(len, 6);
	free(data);
	/* no temporary file is left behind */
	CHECK_EQ_INT(count_dir_entries(), 1);
	(void)unlink(path);

	CHECK_EQ_INT(ptd_file_write_atomic("/nonexistent/dir/x", "a", 1),
		     -ENOENT);
	CHECK_EQ_INT(count_dir_entries(), 0);
}

/* A session's scratch file: written whole, 0600, never over a file or
 * through a link that is already there (the name is the writer's own). */
static void test_write_scratch(void)
{
	char path[PATH_MAX], link_path[PATH_MAX], *data = NULL;
	size_t len = 0;
	struct stat st;

	tmp_path(path, sizeof(path), "scratch");
	tmp_path(link_path, sizeof(link_path), "scratch-link");
	CHECK_EQ_INT(ptd_file_write_scratch(path, "code bytes", 10), 0);
	CHECK_EQ_INT(ptd_file_read_all(path, 100, &data, &len), 0);
	CHECK_EQ_STR(data, "code bytes");
	CHECK_EQ_INT(len, 10);
	free(data);
	CHECK_EQ_INT(stat(path, &st), 0);
	CHECK_EQ_INT(st.st_mode & 0777, 0600);
	/* there already: refused, the file as it was */
	CHECK_EQ_INT(ptd_file_write_scratch(path, "other", 5), -EEXIST);
	CHECK_EQ_INT(ptd_file_read_all(path, 100, &data, &len), 0);
	CHECK_EQ_STR(data, "code bytes");
	free(data);
	/* a link put at the name: not followed, its target unchanged */
	CHECK_EQ_INT(symlink(path, link_path), 0);
	CHECK_EQ_INT(ptd_file_write_scratch(link_path, "other", 5), -EEXIST);
	CHECK_EQ_INT(ptd_file_read_all(path, 100, &data, &len), 0);
	CHECK_EQ_STR(data, "code bytes");
	free(data);
	(void)unlink(link_path);
	(void)unlink(path);
	CHECK_EQ_INT(ptd_file_write_scratch("/nonexistent/dir/x", "a", 1),
		     -ENOENT);
	CHECK_EQ_INT(count_dir_entries(), 0);
}

static void test_write_all(void)
{
	int fds[2];
	char buf[16] = { 0 };

	REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
	CHECK_EQ_INT(ptd_write_all(fds[1], "hello", 5), 0);
	CHECK_EQ_INT(read(fds[0], buf, sizeof(buf)), 5);
	CHECK_EQ_STR(buf, "hello");
	(void)close(fds[0]);
	(void)close(fds[1]);
	CHECK_EQ_INT(ptd_write_all(fds[1], "x", 1), -EBADF);
}

static void test_errors(void)
{
	struct ptd_diag d;

	CHECK_EQ_STR(ptd_strerror(-PTD_EFORMAT), "malformed input");
	CHECK_EQ_STR(ptd_strerror(-PTD_ELIMIT), "limit exceeded");
	CHECK_EQ_STR(ptd_strerror(PTD_ENOIMAGE),
		     "code not available in the image");
	CHECK_EQ_STR(ptd_strerror(-ENOENT), strerror(ENOENT));
	CHECK_EQ_STR(ptd_strerror(0), "success");
	for (int e = PTD_ERR_BASE; e < PTD_ERR_MAX; e++)
		CHECK(ptd_strerror(-e) != NULL && *ptd_strerror(-e));

	memset(&d, 0xcd, sizeof(d));
	CHECK_EQ_INT(ptd_diagf(&d, -PTD_EFORMAT, "%s:%u: bad", "f", 3u),
		     -PTD_EFORMAT);
	CHECK_EQ_STR(d.msg, "f:3: bad");
	CHECK_EQ_INT(ptd_diagf(NULL, -EIO, "x"), -EIO);
	{
		char long_s[PTD_DIAG_MAX * 2];

		memset(long_s, 'a', sizeof(long_s) - 1);
		long_s[sizeof(long_s) - 1] = '\0';
		(void)ptd_diagf(&d, -EIO, "%s", long_s);
		CHECK_EQ_INT(strlen(d.msg), PTD_DIAG_MAX - 1);
	}
}

static char *take_it(void)
{
	_cleanup_free_ char *p = strdup("kept");

	/* __extension__: the macro is a GNU statement expression */
	return __extension__ PTD_TAKE_PTR(p);
}

static void test_cleanup(void)
{
	char *p = take_it();
	int fd;

	CHECK_EQ_STR(p, "kept");
	free(p);
	{
		_cleanup_close_ int cfd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		fd = cfd;
		CHECK(fd >= 0);
	}
	/* closed on scope exit */
	CHECK_EQ_INT(fcntl(fd, F_GETFD), -1);
}

static void test_rm_rf(void)
{
	char dir[] = "/tmp/ptd-rmrf-XXXXXX";
	char path[64], outside[] = "/tmp/ptd-rmrf-keep-XXXXXX";
	int fd;

	REQUIRE(mkdtemp(dir));
	REQUIRE(mkdtemp(outside));
	(void)snprintf(path, sizeof(path), "%s/a", dir);
	REQUIRE(mkdir(path, 0755) == 0);
	(void)snprintf(path, sizeof(path), "%s/a/file", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	REQUIRE(fd >= 0);
	close(fd);
	/* A symlink out of the tree is removed, not followed. */
	(void)snprintf(path, sizeof(path), "%s/link", dir);
	REQUIRE(symlink(outside, path) == 0);
	CHECK_EQ_INT(ptd_rm_rf(dir), 0);
	CHECK(access(dir, F_OK) != 0);
	CHECK(access(outside, F_OK) == 0);
	CHECK_EQ_INT(ptd_rm_rf(dir), -ENOENT);
	(void)rmdir(outside);
}

/* The soft open-file limit goes up to the hard one (ptd keeps an fd per
 * private copy of decoded code). */
static void test_nofile_raise(void)
{
	struct rlimit rl, low;
	long n;

	REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	low = rl;
	if (low.rlim_max > 64)
		low.rlim_cur = 64;
	REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
	n = ptd_nofile_raise();
	REQUIRE(getrlimit(RLIMIT_NOFILE, &low) == 0);
	CHECK_EQ_U64(low.rlim_cur, rl.rlim_max);
	CHECK(n > 0 && (rlim_t)n == (low.rlim_cur > (rlim_t)LONG_MAX ?
				     (rlim_t)LONG_MAX : low.rlim_cur));
	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

/* One plain-name check for every name from a file or request that
 * becomes a path component: what it refuses and what it lets through. */
static void test_filename_check(void)
{
	static const char *const plain[] = {
		"pt-100.bin", "a", "..a", "a..", "a..b", "...", ".hidden",
		"snap-1.bin", "-rf", "a b", "\n", "\xff\xfe", "[vdso]",
	};
	static const char *const refused[] = {
		"", ".", "..", "/", "a/b", "../x", "x/..", "/etc/passwd",
		"a/", "/a",
	};
	char name[NAME_MAX + 2];
	size_t i;

	for (i = 0; i < PTD_ARRAY_SIZE(plain); i++) {
		if (ptd_filename_check(plain[i], strlen(plain[i])) != 0)
			CHECK_FAIL_("\"%s\": refused", plain[i]);
		CHECK(ptd_filename_is_plain(plain[i]));
	}
	for (i = 0; i < PTD_ARRAY_SIZE(refused); i++) {
		if (ptd_filename_check(refused[i], strlen(refused[i])) !=
		    -EINVAL)
			CHECK_FAIL_("\"%s\": not refused", refused[i]);
		CHECK(!ptd_filename_is_plain(refused[i]));
	}
	/* a NUL inside the bytes given: the name would be cut there */
	CHECK_EQ_INT(ptd_filename_check("a\0b", 3), -EINVAL);
	CHECK_EQ_INT(ptd_filename_check("..\0", 3), -EINVAL);
	CHECK_EQ_INT(ptd_filename_check("ab", 1), 0);	/* "a" */
	CHECK_EQ_INT(ptd_filename_check(".a", 1), -EINVAL);	/* "." */
	CHECK_EQ_INT(ptd_filename_check(NULL, 0), -EINVAL);
	CHECK(!ptd_filename_is_plain(NULL));
	/* NAME_MAX bytes, and one more */
	memset(name, 'n', sizeof(name));
	name[NAME_MAX] = 0;
	CHECK_EQ_INT(ptd_filename_check(name, NAME_MAX), 0);
	CHECK(ptd_filename_is_plain(name));
	name[NAME_MAX] = 'n';
	name[NAME_MAX + 1] = 0;
	CHECK_EQ_INT(ptd_filename_check(name, NAME_MAX + 1), -ENAMETOOLONG);
	CHECK(!ptd_filename_is_plain(name));
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		SKIP_ALL("cannot create a temporary directory: %s",
			 strerror(errno));
	RUN(test_parse_u64);
	RUN(test_nofile_raise);
	RUN(test_parse_u64n);
	RUN(test_parse_size);
	RUN(test_strlcpy);
	RUN(test_buf);
	RUN(test_file_read_all);
	RUN(test_open_regular);
	RUN(test_write_atomic);
	RUN(test_write_scratch);
	RUN(test_write_all);
	RUN(test_errors);
	RUN(test_cleanup);
	RUN(test_rm_rf);
	RUN(test_filename_check);
	(void)rmdir(tmpdir);
	return check_done();
}
