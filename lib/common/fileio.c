/* SPDX-License-Identifier: MIT */
#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/diag.h"
#include "common/strutil.h"

int ptd_buf_reserve(struct ptd_buf *b, size_t n)
{
	size_t want, cap;
	uint8_t *p;

	if (n <= b->cap - b->len)
		return 0;
	if (n > SIZE_MAX / 2 - b->len)
		return -ENOMEM;
	want = b->len + n;
	cap = b->cap ? b->cap : 4096;
	while (cap < want)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int ptd_buf_append(struct ptd_buf *b, const void *p, size_t n)
{
	int r = ptd_buf_reserve(b, n);

	if (r < 0)
		return r;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

void ptd_buf_fini(struct ptd_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

const char *ptd_file_type_name(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "a regular file";
	case S_IFDIR:
		return "a directory";
	case S_IFIFO:
		return "a FIFO";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFSOCK:
		return "a socket";
	case S_IFLNK:
		return "a symbolic link";
	default:
		return "not a file";
	}
}

int ptd_file_open_regular(int dfd, const char *path, int flags,
			  struct stat *ret_st, struct ptd_diag *diag)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r, fl;

	if (!path || (flags & ~O_NOFOLLOW))
		return -EINVAL;
	fd = openat(dfd, path,
		    O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | flags);
	if (fd < 0) {
		r = -errno;
		if (r == -ELOOP && (flags & O_NOFOLLOW))
			return ptd_diagf(diag, r, "cannot open '%s': it is a "
					 "symbolic link", path);
		return ptd_diagf(diag, r, "cannot open '%s': %s", path,
				 strerror(-r));
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		return ptd_diagf(diag, r, "cannot stat '%s': %s", path,
				 strerror(-r));
	}
	if (S_ISDIR(st.st_mode))
		return ptd_diagf(diag, -EISDIR, "'%s' is a directory, not a "
				 "regular file", path);
	if (!S_ISREG(st.st_mode))
		return ptd_diagf(diag, -PTD_ENOTREG, "'%s' is %s, not a "
				 "regular file", path,
				 ptd_file_type_name(st.st_mode));
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		r = -errno;
		return ptd_diagf(diag, r, "'%s': fcntl: %s", path,
				 strerror(-r));
	}
	if (ret_st)
		*ret_st = st;
	return PTD_TAKE_FD(fd);
}

int ptd_file_read_all(const char *path, size_t limit, char **ret_data,
		      size_t *ret_len)
{
	_cleanup_close_ int fd = -1;
	struct ptd_buf b = { 0 };
	int r;

	fd = ptd_file_open_regular(AT_FDCWD, path, 0, NULL, NULL);
	if (fd < 0)
		return fd;
	for (;;) {
		ssize_t n;

		r = ptd_buf_reserve(&b, 65536 + 1);
		if (r < 0)
			goto fail;
		n = read(fd, b.data + b.len, b.cap - b.len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			goto fail;
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
		if (b.len > limit) {
			r = -PTD_ELIMIT;
			goto fail;
		}
	}
	if (!b.data && (r = ptd_buf_reserve(&b, 1)) < 0)
		goto fail;
	b.data[b.len] = 0;
	*ret_data = (char *)b.data;
	*ret_len = b.len;
	return 0;
fail:
	ptd_buf_fini(&b);
	return r;
}

int ptd_write_all(int fd, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ptd_file_write_scratch(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				    O_CLOEXEC,
		      0600);
	int r;

	if (fd < 0)
		return -errno;
	r = ptd_write_all(fd, data, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r < 0)
		(void)unlink(path);
	return r;
}

int ptd_file_write_atomic(const char *path, const void *data, size_t len)
{
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = -1;
	int r;

	if (asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) < 0) {
		tmp = NULL;
		return -ENOMEM;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	r = ptd_write_all(fd, data, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && close(PTD_TAKE_FD(fd)) < 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		(void)unlink(tmp);
	return r;
}

static int rm_rf_err;

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	if (remove(path) < 0 && !rm_rf_err)
		rm_rf_err = -errno;
	return 0;
}

int ptd_rm_rf(const char *path)
{
	rm_rf_err = 0;
	if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && !rm_rf_err)
		rm_rf_err = -errno;
	return rm_rf_err;
}

long ptd_nofile_raise(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -errno;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			return -errno;
	}
	return rl.rlim_cur > (rlim_t)LONG_MAX ? LONG_MAX : (long)rl.rlim_cur;
}

int ptd_filename_check(const char *name, size_t len)
{
	if (!name || len == 0)
		return -EINVAL;
	if (len > NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(name, '/', len) || memchr(name, '\0', len))
		return -EINVAL;
	if ((len == 1 && name[0] == '.') ||
	    (len == 2 && name[0] == '.' && name[1] == '.'))
		return -EINVAL;
	return 0;
}
