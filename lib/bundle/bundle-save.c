/* SPDX-License-Identifier: MIT */
/*
 * ptd bundles (see bundle.h): saving a capture with everything it needs --
 * the plan of what goes in, then the writing, into a new directory made
 * whole before it gets its name.
 */
#include "bundle/bundle.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "aspace/elf.h"
#include "common/fileio.h"
#include "common/json.h"
#include "common/strutil.h"
#include "bundle/bundle-int.h"

/* ---- saving: the plan ------------------------------------------------- */

static bool plan_has_file(const struct ptd_bundle *b, const char *name)
{
	size_t i;

	for (i = 0; i < b->nfiles; i++)
		if (!strcmp(b->files[i].name, name))
			return true;
	return false;
}

/* Add "capture/@plain" to the plan (once). */
static int plan_file(struct ptd_bundle *b, size_t cap, const char *plain)
{
	char *name;

	if (asprintf(&name, CAPTURE_SUBDIR "/%s", plain) < 0)
		return -ENOMEM;
	if (plan_has_file(b, name)) {
		free(name);
		return 0;
	}
	if (b->nfiles >= cap) {	/* cannot happen: cap counts every name */
		free(name);
		return -PTD_ELIMIT;
	}
	b->files[b->nfiles++].name = name;
	return 0;
}

/* "images/N-BASENAME": the index keeps names apart. */
static int plan_image(struct ptd_bundle *b, const char *path, bool copy)
{
	const char *base = strrchr(path, '/');
	struct ptd_bundle_image *im = &b->images[b->nimages];

	base = base ? base + 1 : path;
	if (!ptd_filename_is_plain(base))
		base = "image";
	im->path = strdup(path);
	if (!im->path)
		return -ENOMEM;
	b->nimages++;
	if (copy && asprintf(&im->file, IMAGES_SUBDIR "/%zu-%.200s",
			     b->nimages, base) < 0) {
		im->file = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* What a bundle of @c holds: every capture file it needs, every image its
 * timeline maps. */
static int make_plan(const struct ptd_capture *c, bool copy,
		     struct ptd_bundle *b)
{
	size_t fcap = 2 + 2 * c->nthreads + c->tl.n, i;
	int r;

	b->files = calloc(fcap, sizeof(*b->files));
	b->images = calloc(c->tl.n ? c->tl.n : 1, sizeof(*b->images));
	if (!b->files || !b->images)
		return -ENOMEM;
	r = plan_file(b, fcap, CAPTURE_MANIFEST);
	if (r == 0)
		r = plan_file(b, fcap, CAPTURE_TIMELINE);
	for (i = 0; r == 0 && i < c->nthreads; i++) {
		r = plan_file(b, fcap, c->threads[i].pt);
		if (r == 0)
			r = plan_file(b, fcap, c->threads[i].truth);
	}
	for (i = 0; r == 0 && i < c->tl.n; i++) {
		const struct ptd_tl_event *ev = &c->tl.ev[i];

		if (ev->op == PTD_TL_SNAPSHOT && ev->file)
			r = plan_file(b, fcap, ev->file);
		else if (ev->op == PTD_TL_MAP && ev->path &&
			 !bdl_find_image(b, ev->path))
			r = plan_image(b, ev->path, copy);
	}
	if (r == 0 && (b->nfiles > PTD_BUNDLE_MAX_FILES ||
		       b->nimages > PTD_BUNDLE_MAX_IMAGES))
		r = -PTD_ELIMIT;
	return r;
}

/* ---- saving: writing -------------------------------------------------- */

struct writer {
	const struct ptd_bundle_save_opts *o;
	struct ptd_diag *diag;
	const struct ptd_capture *c;	/* once loaded */
};

static int own_fd(const struct writer *w, int fd, const char *what)
{
	if (w->o->set_owner && fchown(fd, w->o->uid, w->o->gid) < 0)
		return ptd_diagf(w->diag, -errno, "cannot give '%s' to "
				 "%u:%u: %s", what, (unsigned)w->o->uid,
				 (unsigned)w->o->gid, strerror(errno));
	return 0;
}

/* Make directory @name in @dfd and open it. */
static int make_dir(const struct writer *w, int dfd, const char *name,
		    int *ret_fd)
{
	int fd, r;

	if (mkdirat(dfd, name, 0755) < 0)
		return ptd_diagf(w->diag, -errno, "cannot create directory "
				 "'%s': %s", name, strerror(errno));
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
	if (fd < 0)
		return ptd_diagf(w->diag, -errno, "cannot open directory "
				 "'%s': %s", name, strerror(errno));
	r = own_fd(w, fd, name);
	if (r < 0) {
		(void)close(fd);
		return r;
	}
	*ret_fd = fd;
	return 0;
}

/* Hash @src (and copy it to @dst_fd if >= 0): size and sha256 out. */
static int copy_hash(const struct writer *w, int src, const char *src_name,
		     int dst_fd, uint64_t *ret_size,
		     uint8_t sha[PTD_SHA256_LEN])
{
	_cleanup_free_ uint8_t *buf = malloc(COPY_CHUNK);
	struct ptd_sha256 s;
	uint64_t total = 0;
	int r;

	if (!buf)
		return -ENOMEM;
	ptd_sha256_init(&s);
	for (;;) {
		ssize_t n = read(src, buf, COPY_CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return ptd_diagf(w->diag, -errno, "cannot read '%s': "
					 "%s", src_name, strerror(errno));
		if (n == 0)
			break;
		total += (uint64_t)n;
		if (total > PTD_BUNDLE_MAX_FILE_SIZE)
			return ptd_diagf(w->diag, -PTD_ELIMIT, "'%s' is "
					 "larger than %llu bytes", src_name,
					 (unsigned long long)
					 PTD_BUNDLE_MAX_FILE_SIZE);
		ptd_sha256_update(&s, buf, (size_t)n);
		if (dst_fd >= 0) {
			r = ptd_write_all(dst_fd, buf, (size_t)n);
			if (r < 0)
				return ptd_diagf(w->diag, r, "cannot write "
						 "the copy of '%s': %s",
						 src_name, ptd_strerror(r));
		}
	}
	ptd_sha256_final(&s, sha);
	*ret_size = total;
	return 0;
}

/* Open a source file; it must be regular (-PTD_ENOTREG, the message
 * saying what it is instead). */
static int open_source(const struct writer *w, const char *path, int flags,
		       int *ret_fd)
{
	int fd = ptd_file_open_regular(AT_FDCWD, path, flags, NULL, w->diag);

	if (fd == -EISDIR)
		return -PTD_ENOTREG;
	if (fd < 0)
		return fd;
	*ret_fd = fd;
	return 0;
}

/* Copy @src_path into @name of @dfd (created, fsynced, owned).  @tl: the
 * file is a traced process's image; it must be the file the process mapped
 * (checked on the descriptor copied from, so a rename over the path between
 * check and copy cannot slip through). */
static int copy_into(const struct writer *w, const char *src_path, int sflags,
		     const struct ptd_timeline *tl, int dfd, const char *name,
		     uint64_t *ret_size, uint8_t sha[PTD_SHA256_LEN])
{
	_cleanup_close_ int src = -1;
	_cleanup_close_ int dst = -1;
	int r = open_source(w, src_path, sflags, &src);

	if (r < 0)
		return r;
	if (tl && (r = ptd_timeline_check_file(tl, src_path, src,
					       w->diag)) < 0)
		return r;
	if (dfd < 0)	/* hash only: a referenced image */
		return copy_hash(w, src, src_path, -1, ret_size, sha);
	dst = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		     O_CLOEXEC, 0644);
	if (dst < 0)
		return ptd_diagf(w->diag, -errno, "cannot create '%s': %s",
				 name, strerror(errno));
	r = own_fd(w, dst, name);
	if (r == 0)
		r = copy_hash(w, src, src_path, dst, ret_size, sha);
	if (r == 0 && fsync(dst) < 0)
		r = ptd_diagf(w->diag, -errno, "cannot fsync '%s': %s", name,
			      strerror(errno));
	return r;
}

static int save_capture_files(const struct writer *w, const char *cdir,
			      int dfd, struct ptd_bundle *b)
{
	_cleanup_close_ int sub = -1;
	size_t i;
	int r = make_dir(w, dfd, CAPTURE_SUBDIR, &sub);

	for (i = 0; r == 0 && i < b->nfiles; i++) {
		struct ptd_bundle_file *f = &b->files[i];
		const char *plain = bdl_in_subdir(f->name, CAPTURE_SUBDIR);
		_cleanup_free_ char *src = NULL;

		if (asprintf(&src, "%s/%s", cdir, plain) < 0) {
			src = NULL;
			return -ENOMEM;
		}
		r = copy_into(w, src, O_NOFOLLOW, NULL, sub, plain, &f->size,
			      f->sha256);
	}
	if (r == 0 && fsync(sub) < 0)
		r = ptd_diagf(w->diag, -errno, "cannot fsync '"
			      CAPTURE_SUBDIR "': %s", strerror(errno));
	return r;
}

/* How far into file @path the capture's mappings of it reach (0: none). */
static uint64_t mapped_end(const struct ptd_capture *c, const char *path)
{
	uint64_t end = 0;

	for (size_t i = 0; c && i < c->tl.n; i++) {
		const struct ptd_tl_event *ev = &c->tl.ev[i];

		if (ev->op == PTD_TL_MAP && ev->path && !strcmp(ev->path, path) &&
		    ev->pgoff + (ev->end - ev->start) > end)
			end = ev->pgoff + (ev->end - ev->start);
	}
	return end;
}

/* The file copied for image @im still holds what the process mapped of
 * it: not cut since (a mapping ends at most at the page that holds the
 * file's end). */
static int check_image_size(const struct writer *w,
			    const struct ptd_bundle_image *im)
{
	uint64_t end = mapped_end(w->c, im->path);

	if (end > ((im->size + 4095) & ~4095ull))
		return ptd_diagf(w->diag, -PTD_ETRUNC, "'%s' is shorter (%"
				 PRIu64 " bytes) than the traced process "
				 "mapped it (to byte %" PRIu64 "): it changed "
				 "after it was traced", im->path, im->size,
				 end);
	return 0;
}

static int save_images(const struct writer *w, int dfd, struct ptd_bundle *b)
{
	_cleanup_close_ int sub = -1;
	size_t i;
	int r = make_dir(w, dfd, IMAGES_SUBDIR, &sub);

	for (i = 0; r == 0 && i < b->nimages; i++) {
		struct ptd_bundle_image *im = &b->images[i];
		char hex[2 * PTD_ELF_BUILD_ID_MAX + 1];
		_cleanup_close_ int fd = -1;

		r = im->file ? copy_into(w, im->path, 0, &w->c->tl, sub,
					 bdl_in_subdir(im->file, IMAGES_SUBDIR),
					 &im->size, im->sha256)
			     : copy_into(w, im->path, 0, &w->c->tl, -1, NULL,
					 &im->size, im->sha256);
		if (r == 0)
			r = check_image_size(w, im);
		if (r == 0 && open_source(w, im->path, 0, &fd) == 0 &&
		    ptd_elf_build_id_fd(fd, hex, sizeof(hex))) {
			im->build_id = strdup(hex);
			if (!im->build_id)
				r = -ENOMEM;
		}
	}
	if (r == 0 && fsync(sub) < 0)
		r = ptd_diagf(w->diag, -errno, "cannot fsync '"
			      IMAGES_SUBDIR "': %s", strerror(errno));
	return r;
}

static bool add_sha(cJSON *o, const uint8_t sha[PTD_SHA256_LEN])
{
	char hex[PTD_SHA256_HEX_LEN + 1];

	ptd_sha256_hex(sha, hex);
	return cJSON_AddStringToObject(o, "sha256", hex) != NULL;
}

static cJSON *manifest_json(const struct ptd_bundle *b)
{
	cJSON *root = cJSON_CreateObject(), *files, *images, *o;
	bool ok = root != NULL;
	size_t i;

	ok = ok && cJSON_AddStringToObject(root, "format", PTD_BUNDLE_FORMAT);
	ok = ok && cJSON_AddNumberToObject(root, "version",
					   PTD_BUNDLE_VERSION);
	ok = ok && cJSON_AddStringToObject(root, "created", b->created);
	ok = ok && cJSON_AddStringToObject(root, "source", SOURCE_SWPT);
	ok = ok && (files = cJSON_AddArrayToObject(root, "files")) != NULL;
	for (i = 0; ok && i < b->nfiles; i++) {
		ok = (o = cJSON_CreateObject()) != NULL &&
		     cJSON_AddItemToArray(files, o);
		ok = ok && cJSON_AddStringToObject(o, "name", b->files[i].name);
		ok = ok && cJSON_AddNumberToObject(o, "size",
						   (double)b->files[i].size);
		ok = ok && add_sha(o, b->files[i].sha256);
	}
	ok = ok && (images = cJSON_AddArrayToObject(root, "images")) != NULL;
	for (i = 0; ok && i < b->nimages; i++) {
		const struct ptd_bundle_image *im = &b->images[i];

		ok = (o = cJSON_CreateObject()) != NULL &&
		     cJSON_AddItemToArray(images, o);
		ok = ok && cJSON_AddStringToObject(o, "path", im->path);
		if (ok && im->file)
			ok = cJSON_AddStringToObject(o, "file", im->file);
		ok = ok && cJSON_AddNumberToObject(o, "size", (double)im->size);
		ok = ok && add_sha(o, im->sha256);
		if (ok && im->build_id)
			ok = cJSON_AddStringToObject(o, "build_id",
						     im->build_id);
	}
	if (!ok) {
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

/* The manifest, last: a temporary name, fsync, rename, fsync the dir. */
static int save_manifest(const struct writer *w, int dfd,
			 const struct ptd_bundle *b)
{
	cJSON *j = manifest_json(b);
	char *text = j ? cJSON_Print(j) : NULL;
	_cleanup_close_ int fd = -1;
	int r = 0;

	cJSON_Delete(j);
	if (!text)
		return -ENOMEM;
	fd = openat(dfd, MANIFEST_TMP, O_WRONLY | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		r = ptd_diagf(w->diag, -errno, "cannot create " MANIFEST_TMP
			      ": %s", strerror(errno));
	if (r == 0)
		r = own_fd(w, fd, MANIFEST_TMP);
	if (r == 0) {
		r = ptd_write_all(fd, text, strlen(text));
		if (r == 0 && fsync(fd) < 0)
			r = -errno;
		if (r < 0)
			r = ptd_diagf(w->diag, r, "cannot write " MANIFEST_TMP
				      ": %s", ptd_strerror(r));
	}
	free(text);
	if (r == 0 && renameat(dfd, MANIFEST_TMP, dfd, PTD_BUNDLE_MANIFEST))
		r = ptd_diagf(w->diag, -errno, "cannot rename " MANIFEST_TMP
			      ": %s", strerror(errno));
	if (r == 0 && fsync(dfd) < 0)
		r = ptd_diagf(w->diag, -errno, "cannot fsync the bundle "
			      "directory: %s", strerror(errno));
	if (r < 0)
		(void)unlinkat(dfd, MANIFEST_TMP, 0);
	return r;
}

static int now_iso(char **ret)
{
	char s[32];
	time_t t = time(NULL);
	struct tm tm;

	if (!gmtime_r(&t, &tm) ||
	    !strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%SZ", &tm))
		return -EINVAL;
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

static int check_opts(const struct ptd_bundle_save_opts *o)
{
	const uint8_t *p = (const uint8_t *)o;
	size_t i;

	if (o->sz < sizeof(size_t) + sizeof(bool))
		return -EINVAL;
	for (i = sizeof(*o); i < o->sz; i++)
		if (p[i])
			return -EINVAL;
	return 0;
}

/* Options as this version knows them (zero where the caller's are
 * shorter). */
static int get_opts(const struct ptd_bundle_save_opts *in,
		    struct ptd_bundle_save_opts *out)
{
	*out = PTD_BUNDLE_SAVE_OPTS_INIT;
	if (!in)
		return 0;
	if (check_opts(in) < 0)
		return -EINVAL;
	memcpy(out, in, in->sz < sizeof(*out) ? in->sz : sizeof(*out));
	out->sz = sizeof(*out);
	return 0;
}

/* Load the capture and plan its bundle. */
static int prepare(const char *capture_dir, const struct writer *w,
		   struct ptd_capture *c, struct ptd_bundle *b)
{
	int r = ptd_capture_load(capture_dir, c, w->diag);

	if (r < 0)
		return r;
	r = make_plan(c, !w->o->reference_images, b);
	if (r == -PTD_ELIMIT)
		return ptd_diagf(w->diag, r, "capture '%s' needs more files "
				 "than a bundle may hold", capture_dir);
	if (r == 0)
		r = now_iso(&b->created);
	return r;
}

/* Write capture/ and images/ into @dfd. */
static int save_payload(const char *capture_dir, const struct writer *w,
			int dfd, struct ptd_bundle *b)
{
	int r = save_capture_files(w, capture_dir, dfd, b);

	if (r == 0)
		r = save_images(w, dfd, b);
	return r;
}

/* @path without trailing slashes (malloc'd). */
static char *strip_slashes(const char *path)
{
	char *p = strdup(path);
	size_t n;

	if (!p)
		return NULL;
	n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	return p;
}

/* 0 if @dir does not exist or is an empty directory, -EEXIST if it holds
 * anything or is no directory, -errno. */
static int check_empty_fd(int fd)
{
	int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (dup_fd < 0)
		return -errno;
	d = fdopendir(dup_fd);
	if (!d) {
		r = -errno;
		(void)close(dup_fd);
		return r;
	}
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			r = -EEXIST;
			break;
		}
	(void)closedir(d);
	return r;
}

static int check_target(const char *dir, struct ptd_diag *diag)
{
	struct stat st;
	int fd, r;

	if (lstat(dir, &st) < 0)
		return errno == ENOENT ? 0
				       : ptd_diagf(diag, -errno, "'%s': %s", dir,
						   strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return ptd_diagf(diag, -EEXIST, "'%s' exists and is not a "
				 "directory", dir);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return ptd_diagf(diag, -errno, "'%s': %s", dir,
				 strerror(errno));
	r = check_empty_fd(fd);
	(void)close(fd);
	if (r == -EEXIST)
		return ptd_diagf(diag, r, "'%s' exists and is not empty", dir);
	return r < 0 ? ptd_diagf(diag, r, "'%s': %s", dir, strerror(-r)) : 0;
}

static int fsync_parent(const char *path)
{
	_cleanup_free_ char *p = strdup(path);
	char *slash;
	int fd, r = 0;

	if (!p)
		return -ENOMEM;
	slash = strrchr(p, '/');
	if (slash == p)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	fd = open(slash ? p : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	(void)close(fd);
	return r;
}

int ptd_bundle_save(const char *capture_dir, const char *bundle_dir,
		    const struct ptd_bundle_save_opts *opts,
		    struct ptd_diag *diag)
{
	struct ptd_bundle_save_opts o;
	struct writer w = { &o, diag };
	struct ptd_capture c = { 0 };
	struct ptd_bundle b = { 0 };
	_cleanup_free_ char *dst = NULL;
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int tfd = -1;
	bool made = false;
	int r;

	if (!capture_dir || !bundle_dir || !*bundle_dir ||
	    get_opts(opts, &o) < 0)
		return -EINVAL;
	dst = strip_slashes(bundle_dir);
	if (!dst || asprintf(&tmp, "%s.tmp-XXXXXX", dst) < 0) {
		tmp = NULL;
		return -ENOMEM;
	}
	r = check_target(dst, diag);
	if (r < 0)
		return r;
	ptd_timeline_init(&c.tl);
	r = prepare(capture_dir, &w, &c, &b);
	w.c = &c;
	if (r < 0)
		goto out;
	if (!mkdtemp(tmp)) {
		r = ptd_diagf(diag, -errno, "cannot create '%s': %s", tmp,
			      strerror(errno));
		goto out;
	}
	made = true;
	tfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tfd < 0)
		r = ptd_diagf(diag, -errno, "cannot open '%s': %s", tmp,
			      strerror(errno));
	if (r == 0 && o.set_owner)
		r = own_fd(&w, tfd, tmp);
	if (r == 0 && fchmod(tfd, 0755) < 0)	/* mkdtemp made it 0700 */
		r = -errno;
	if (r == 0)
		r = save_payload(capture_dir, &w, tfd, &b);
	if (r == 0)
		r = save_manifest(&w, tfd, &b);
	/* rename(2) replaces an empty directory, refuses a non-empty one */
	if (r == 0 && rename(tmp, dst) < 0)
		r = ptd_diagf(diag, errno == ENOTEMPTY ? -EEXIST : -errno,
			      "cannot move the bundle to '%s': %s", dst,
			      strerror(errno));
	if (r == 0) {
		made = false;
		(void)fsync_parent(dst);
	}
out:
	if (made)	/* only what mkdtemp made: never a name it did not */
		(void)ptd_rm_rf(tmp);
	ptd_bundle_fini(&b);
	ptd_capture_fini(&c);
	return r;
}

/* Remove @name in @dfd and everything below it, not following symlinks. */
static void rm_rf_at(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			O_CLOEXEC);
	DIR *d;
	struct dirent *de;

	if (fd < 0) {
		(void)unlinkat(dfd, name, 0);
		return;
	}
	d = fdopendir(fd);
	if (!d) {
		(void)close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (de->d_type == DT_DIR)
			rm_rf_at(dirfd(d), de->d_name);
		else
			(void)unlinkat(dirfd(d), de->d_name, 0);
	}
	(void)closedir(d);
	(void)unlinkat(dfd, name, AT_REMOVEDIR);
}

/* A fresh temporary directory ".ptd-bundle.tmp-XXXXXX" in @dfd. */
static int make_tmp_at(int dfd, char name[32])
{
	static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned tries;

	for (tries = 0; tries < 100; tries++) {
		uint8_t rnd[6];
		size_t i;

		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			return -EIO;
		memcpy(name, ".ptd-bundle.tmp-", 17);
		for (i = 0; i < sizeof(rnd); i++)
			name[16 + i] = chars[rnd[i] % (sizeof(chars) - 1)];
		name[16 + sizeof(rnd)] = '\0';
		if (mkdirat(dfd, name, 0700) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* Write capture/ and images/ under a temporary directory in @dfd, then
 * move them out of it. */
static int save_at_payload(const char *capture_dir, const struct writer *w,
			   int dfd, struct ptd_bundle *b, bool *ret_moved)
{
	char tmp[32];
	int tfd, r = make_tmp_at(dfd, tmp);

	if (r < 0)
		return ptd_diagf(w->diag, r, "cannot create a temporary "
				 "directory in the bundle directory: %s",
				 ptd_strerror(r));
	tfd = openat(dfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		     O_CLOEXEC);
	if (tfd < 0)
		r = ptd_diagf(w->diag, -errno, "cannot open '%s': %s", tmp,
			      strerror(errno));
	if (r == 0)
		r = save_payload(capture_dir, w, tfd, b);
	if (r == 0) {
		*ret_moved = true;
		if (renameat(tfd, CAPTURE_SUBDIR, dfd, CAPTURE_SUBDIR) < 0 ||
		    renameat(tfd, IMAGES_SUBDIR, dfd, IMAGES_SUBDIR) < 0)
			r = ptd_diagf(w->diag, -errno, "cannot move the "
				      "bundle's files into place: %s",
				      strerror(errno));
	}
	if (tfd >= 0)
		(void)close(tfd);
	rm_rf_at(dfd, tmp);
	return r;
}

int ptd_bundle_save_at(const char *capture_dir, int dir_fd,
		       const struct ptd_bundle_save_opts *opts,
		       struct ptd_diag *diag)
{
	struct ptd_bundle_save_opts o;
	struct writer w = { &o, diag };
	struct ptd_capture c = { 0 };
	struct ptd_bundle b = { 0 };
	struct stat st;
	bool moved = false;
	int r;

	if (!capture_dir || dir_fd < 0 || get_opts(opts, &o) < 0)
		return -EINVAL;
	if (fstat(dir_fd, &st) < 0)
		return ptd_diagf(diag, -errno, "bundle directory: %s",
				 strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return ptd_diagf(diag, -ENOTDIR, "the bundle directory is not "
				 "a directory");
	r = check_empty_fd(dir_fd);
	if (r < 0)
		return ptd_diagf(diag, r, "the bundle directory %s", r == -EEXIST
				 ? "is not empty" : ptd_strerror(r));
	ptd_timeline_init(&c.tl);
	r = prepare(capture_dir, &w, &c, &b);
	w.c = &c;
	if (r == 0)
		r = save_at_payload(capture_dir, &w, dir_fd, &b, &moved);
	if (r == 0)
		r = save_manifest(&w, dir_fd, &b);
	if (r < 0 && moved) {
		rm_rf_at(dir_fd, CAPTURE_SUBDIR);
		rm_rf_at(dir_fd, IMAGES_SUBDIR);
	}
	ptd_bundle_fini(&b);
	ptd_capture_fini(&c);
	return r;
}
