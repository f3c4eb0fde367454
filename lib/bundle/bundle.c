/* SPDX-License-Identifier: MIT */
/*
 * ptd bundles (see bundle.h): loading one only after every byte of it was
 * verified, and decoding it.  Saving one is bundle-save.c's.
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

/* ---- small helpers ---------------------------------------------------- */

void ptd_bundle_fini(struct ptd_bundle *b)
{
	size_t i;

	if (!b)
		return;
	for (i = 0; i < b->nfiles; i++)
		free(b->files[i].name);
	for (i = 0; i < b->nimages; i++) {
		free(b->images[i].path);
		free(b->images[i].file);
		free(b->images[i].build_id);
	}
	free(b->files);
	free(b->images);
	free(b->dir);
	free(b->created);
	free(b->source);
	if (b->have_capture)
		ptd_capture_fini(&b->capture);
	memset(b, 0, sizeof(*b));
}

/* Whether @name has a ".." component. */
static bool has_dotdot(const char *name)
{
	const char *p = name;

	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return true;
		if (!slash)
			return false;
		p = slash + 1;
	}
}

/* The part of @name after "@subdir/" if it is exactly "@subdir/PLAIN",
 * else NULL. */
const char *bdl_in_subdir(const char *name, const char *subdir)
{
	size_t n = strlen(subdir);

	if (strncmp(name, subdir, n) != 0 || name[n] != '/')
		return NULL;
	name += n + 1;
	return ptd_filename_is_plain(name) ? name : NULL;
}

static bool is_hex(const char *s)
{
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* Read all of @fd, at most @limit bytes, NUL-terminated. */
static int read_fd_all(int fd, size_t limit, char **ret, size_t *ret_len)
{
	struct ptd_buf b = { 0 };
	char chunk[65536];
	int r;

	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto err;
		}
		if (n == 0)
			break;
		if (b.len + (size_t)n > limit) {
			r = -PTD_ELIMIT;
			goto err;
		}
		r = ptd_buf_append(&b, chunk, (size_t)n);
		if (r < 0)
			goto err;
	}
	r = ptd_buf_append(&b, "", 1);
	if (r < 0)
		goto err;
	*ret = (char *)b.data;
	*ret_len = b.len - 1;
	return 0;
err:
	ptd_buf_fini(&b);
	return r;
}

/* ---- the manifest: parsing -------------------------------------------- */

/* Every field is required; integers are read exactly, and as cJSON (our
 * writer) prints them: 1e+15 is an integer. */
#define REQ (PTD_JSON_REQUIRED | PTD_JSON_INT_WHOLE)

/* A string of at most PTD_BUNDLE_MAX_NAME bytes. */
static int get_str(const struct ptd_json_reader *r, const cJSON *obj,
		   const char *prefix, const char *key, const char **ret)
{
	return ptd_json_get_strn(r, obj, prefix, key, REQ | PTD_JSON_LIMIT,
				 PTD_BUNDLE_MAX_NAME, ret);
}

/* A file or image size. */
static int get_size(const struct ptd_json_reader *r, const cJSON *obj,
		    const char *prefix, uint64_t *ret)
{
	return ptd_json_get_u64(r, obj, prefix, "size", REQ | PTD_JSON_LIMIT,
				0, PTD_BUNDLE_MAX_FILE_SIZE, ret);
}

static int get_sha(const struct ptd_json_reader *r, const cJSON *obj,
		   const char *prefix, uint8_t out[PTD_SHA256_LEN])
{
	char path[PTD_JSON_PATH_MAX];
	const char *s;
	int e = get_str(r, obj, prefix, "sha256", &s);

	if (e < 0)
		return e;
	if (strlen(s) != PTD_SHA256_HEX_LEN || !is_hex(s) ||
	    ptd_sha256_parse_hex(s, out) < 0)
		return ptd_json_bad(r, ptd_json_path(path, prefix, "sha256"),
				    "not 64 lower-case hex digits");
	return 0;
}

/* A name of a file in the bundle: "@subdir/PLAIN". */
static int get_name(const struct ptd_json_reader *r, const cJSON *obj,
		    const char *prefix, const char *key, const char *subdir,
		    char **ret)
{
	char path[PTD_JSON_PATH_MAX];
	const char *s;
	int e = get_str(r, obj, prefix, key, &s);

	if (e < 0)
		return e;
	ptd_json_path(path, prefix, key);
	if (s[0] == '/')
		return ptd_json_bad(r, path, "an absolute name, not a path "
				    "inside the bundle");
	if (has_dotdot(s))
		return ptd_json_bad(r, path, "contains \"..\": it would leave "
				    "the bundle");
	if (!bdl_in_subdir(s, subdir))
		return ptd_json_badf(r, -PTD_EFORMAT, path,
				     "\"%.64s\" is not a plain file name "
				     "under %s/", s, subdir);
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

/* "YYYY-MM-DDTHH:MM:SSZ" */
static bool iso_time(const char *s)
{
	static const char pat[] = "dddd-dd-ddTdd:dd:ddZ";
	size_t i;

	if (strlen(s) != sizeof(pat) - 1)
		return false;
	for (i = 0; pat[i]; i++)
		if (pat[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9')
				  : s[i] != pat[i])
			return false;
	return true;
}

static int parse_header(const struct ptd_json_reader *r, const cJSON *root,
			struct ptd_bundle *b)
{
	static const char *const keys[] = { "format", "version", "created",
					     "source", "files", "images",
					     NULL };
	const char *s;
	int e;

	e = ptd_json_check_format(r, root, PTD_BUNDLE_FORMAT,
				  PTD_BUNDLE_VERSION);
	if (e < 0)
		return e;
	e = ptd_json_check_keys(r, root, "", keys);
	if (e < 0)
		return e;
	e = get_str(r, root, "", "created", &s);
	if (e < 0)
		return e;
	if (!iso_time(s))
		return ptd_json_bad(r, "created",
				    "not a time YYYY-MM-DDTHH:MM:SSZ");
	b->created = strdup(s);
	if (!b->created)
		return -ENOMEM;
	e = get_str(r, root, "", "source", &s);
	if (e < 0)
		return e;
	if (strcmp(s, SOURCE_SWPT) != 0)
		return ptd_json_bad(r, "source", "not \"" SOURCE_SWPT "\"");
	b->source = strdup(s);
	return b->source ? 0 : -ENOMEM;
}

static int parse_file(const struct ptd_json_reader *r, const cJSON *it,
		      const char *where, struct ptd_bundle_file *f)
{
	static const char *const keys[] = { "name", "size", "sha256", NULL };
	int e;

	if (!cJSON_IsObject(it))
		return ptd_json_badf(r, -PTD_EFORMAT, where,
				     "expected an object, not %s",
				     ptd_json_type_name(it));
	if ((e = ptd_json_check_keys(r, it, where, keys)) < 0 ||
	    (e = get_name(r, it, where, "name", CAPTURE_SUBDIR,
			  &f->name)) < 0 ||
	    (e = get_size(r, it, where, &f->size)) < 0)
		return e;
	return get_sha(r, it, where, f->sha256);
}

static int parse_image(const struct ptd_json_reader *r, const cJSON *it,
		       const char *where, struct ptd_bundle_image *im)
{
	static const char *const keys[] = { "path", "size", "sha256", "file",
					     "build_id", NULL };
	char path[PTD_JSON_PATH_MAX];
	const char *s;
	int e;

	if (!cJSON_IsObject(it))
		return ptd_json_badf(r, -PTD_EFORMAT, where,
				     "expected an object, not %s",
				     ptd_json_type_name(it));
	if ((e = ptd_json_check_keys(r, it, where, keys)) < 0 ||
	    (e = get_str(r, it, where, "path", &s)) < 0)
		return e;
	if (s[0] != '/')
		return ptd_json_bad(r, ptd_json_path(path, where, "path"),
				    "not an absolute path (the traced file)");
	im->path = strdup(s);
	if (!im->path)
		return -ENOMEM;
	if ((e = get_size(r, it, where, &im->size)) < 0 ||
	    (e = get_sha(r, it, where, im->sha256)) < 0)
		return e;
	if (cJSON_GetObjectItemCaseSensitive(it, "file") &&
	    (e = get_name(r, it, where, "file", IMAGES_SUBDIR,
			  &im->file)) < 0)
		return e;
	if (cJSON_GetObjectItemCaseSensitive(it, "build_id")) {
		e = get_str(r, it, where, "build_id", &s);
		if (e < 0)
			return e;
		if (!*s || strlen(s) % 2 || strlen(s) > 2 * BUILD_ID_MAX ||
		    !is_hex(s))
			return ptd_json_bad(r, ptd_json_path(path, where,
							     "build_id"),
					    "not lower-case hex bytes");
		im->build_id = strdup(s);
		if (!im->build_id)
			return -ENOMEM;
	}
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The first name given twice in @names (@n entries; sorted in place), or
 * NULL. */
static const char *first_dup(const char **names, size_t n)
{
	size_t i;

	qsort(names, n, sizeof(*names), cmp_str);
	for (i = 1; i < n; i++)
		if (!strcmp(names[i - 1], names[i]))
			return names[i];
	return NULL;
}

/* No file named twice, no traced path given twice. */
static int check_dups(const struct ptd_json_reader *r,
		      const struct ptd_bundle *b)
{
	size_t n = b->nfiles + b->nimages, k = 0, i;
	const char **names = calloc(n ? n : 1, sizeof(*names));
	const char *dup;

	if (!names)
		return -ENOMEM;
	for (i = 0; i < b->nfiles; i++)
		names[k++] = b->files[i].name;
	for (i = 0; i < b->nimages; i++)
		if (b->images[i].file)
			names[k++] = b->images[i].file;
	dup = first_dup(names, k);
	if (dup) {
		int e = ptd_diagf(r->diag, -PTD_EFORMAT,
				  "%s: file \"%.64s\" is listed twice",
				  r->origin, dup);
		free(names);
		return e;
	}
	for (k = 0, i = 0; i < b->nimages; i++)
		names[k++] = b->images[i].path;
	dup = first_dup(names, k);
	free(names);
	if (dup)
		return ptd_diagf(r->diag, -PTD_EFORMAT,
				 "%s: image path \"%.64s\" is listed twice",
				 r->origin, dup);
	return 0;
}

static int parse_lists(const struct ptd_json_reader *r, const cJSON *root,
		       struct ptd_bundle *b)
{
	char where[PTD_JSON_PATH_MAX];
	const cJSON *arr, *it;
	size_t n, i;
	int e;

	e = ptd_json_get_array(r, root, "", "files", REQ,
			       PTD_BUNDLE_MAX_FILES, &arr, &n);
	if (e < 0)
		return e;
	b->files = calloc(n ? n : 1, sizeof(*b->files));
	if (!b->files)
		return -ENOMEM;
	i = 0;
	cJSON_ArrayForEach(it, arr) {
		b->nfiles = i + 1;
		e = parse_file(r, it, ptd_json_path_index(where, "", "files",
							  i),
			       &b->files[i]);
		if (e < 0)
			return e;
		i++;
	}
	e = ptd_json_get_array(r, root, "", "images", REQ,
			       PTD_BUNDLE_MAX_IMAGES, &arr, &n);
	if (e < 0)
		return e;
	b->images = calloc(n ? n : 1, sizeof(*b->images));
	if (!b->images)
		return -ENOMEM;
	i = 0;
	cJSON_ArrayForEach(it, arr) {
		b->nimages = i + 1;
		e = parse_image(r, it, ptd_json_path_index(where, "", "images",
							   i),
				&b->images[i]);
		if (e < 0)
			return e;
		i++;
	}
	return check_dups(r, b);
}

int ptd_bundle_parse_manifest(const char *text, size_t len,
			      const char *origin, struct ptd_bundle *ret,
			      struct ptd_diag *diag)
{
	struct ptd_bundle b = { 0 };
	struct ptd_json_reader r = { NULL,
				     origin ? origin : PTD_BUNDLE_MANIFEST,
				     diag };
	struct ptd_json *doc = NULL;
	int e;

	if (!text || !ret)
		return -EINVAL;
	if (len > PTD_BUNDLE_MAX_MANIFEST)
		return ptd_diagf(diag, -PTD_ELIMIT,
				 "%s: larger than %u bytes", r.origin,
				 PTD_BUNDLE_MAX_MANIFEST);
	e = ptd_json_parse(text, len, r.origin, &doc, diag);
	if (e < 0)
		return e;
	r.doc = doc;
	e = parse_header(&r, ptd_json_root(doc), &b);
	if (e == 0)
		e = parse_lists(&r, ptd_json_root(doc), &b);
	ptd_json_free(doc);
	if (e < 0) {
		ptd_bundle_fini(&b);
		return e;
	}
	*ret = b;
	return 0;
}

/* ---- loading: verification -------------------------------------------- */

/* Open "@subdir/NAME" under @dfd: neither the subdirectory nor the file may
 * be a symlink; it must be a regular file (ptd_file_open_regular: a FIFO
 * is refused before it could block, -PTD_ENOTREG). */
static int open_member(int dfd, const char *name, int *ret_fd)
{
	const char *slash = strchr(name, '/');
	char sub[NAME_MAX + 1];
	_cleanup_close_ int sfd = -1;
	int fd;

	if (!slash || (size_t)(slash - name) > NAME_MAX)
		return -EINVAL;
	memcpy(sub, name, (size_t)(slash - name));
	sub[slash - name] = '\0';
	sfd = openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		     O_CLOEXEC);
	if (sfd < 0)
		return errno == ENOTDIR ? -ELOOP : -errno;
	fd = ptd_file_open_regular(sfd, slash + 1, O_NOFOLLOW, NULL, NULL);
	if (fd < 0)
		return fd;
	*ret_fd = fd;
	return 0;
}

/* Check the file open at @fd (called @what) against @size and @sha;
 * -ECANCELED if @cancel says stop first. */
static int verify_fd(int fd, const char *what, uint64_t size,
		     const uint8_t sha[PTD_SHA256_LEN],
		     const struct ptd_cancel *cancel, struct ptd_diag *diag)
{
	uint8_t got[PTD_SHA256_LEN];
	char hg[PTD_SHA256_HEX_LEN + 1], hw[PTD_SHA256_HEX_LEN + 1];
	struct stat st;
	uint64_t n = 0;
	int r;

	if (fstat(fd, &st) < 0)
		return ptd_diagf(diag, -errno, "%s: cannot stat: %s", what,
				 strerror(errno));
	if (!S_ISREG(st.st_mode))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "%s: not a regular file", what);
	if ((uint64_t)st.st_size < size)
		return ptd_diagf(diag, -PTD_ECHECKSUM,
				 "%s: truncated: size %" PRIu64
				 " expected %" PRIu64, what,
				 (uint64_t)st.st_size, size);
	if ((uint64_t)st.st_size != size)
		return ptd_diagf(diag, -PTD_ECHECKSUM,
				 "%s: wrong size: size %" PRIu64
				 " expected %" PRIu64, what,
				 (uint64_t)st.st_size, size);
	r = ptd_sha256_fd_until(fd, size, cancel, got, &n);
	if (r == -ECANCELED)
		return ptd_diagf(diag, r, "%s: verification stopped (the "
				 "load was cancelled)", what);
	if (r == -PTD_ELIMIT || (r == 0 && n != size))
		return ptd_diagf(diag, -PTD_ECHECKSUM,
				 "%s: changed while being read", what);
	if (r < 0)
		return ptd_diagf(diag, r, "%s: cannot read: %s", what,
				 ptd_strerror(r));
	if (memcmp(got, sha, PTD_SHA256_LEN) != 0) {
		ptd_sha256_hex(got, hg);
		ptd_sha256_hex(sha, hw);
		return ptd_diagf(diag, -PTD_ECHECKSUM,
				 "%s: tampered: checksum mismatch (sha256 "
				 "%.16s..., expected %.16s...)", what, hg, hw);
	}
	return 0;
}

/* Verify bundle member @name. */
static int verify_member(int dfd, const char *dir, const char *name,
			 uint64_t size, const uint8_t sha[PTD_SHA256_LEN],
			 const struct ptd_cancel *cancel,
			 struct ptd_diag *diag)
{
	_cleanup_close_ int fd = -1;
	char what[PATH_MAX + 32];
	int r;

	(void)snprintf(what, sizeof(what), "bundle '%s': file '%s'", dir,
		       name);
	r = open_member(dfd, name, &fd);
	if (r == -ENOENT)
		return ptd_diagf(diag, -ENOENT, "%s: missing", what);
	if (r == -ELOOP)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "%s: a symlink, not a regular file", what);
	if (r == -PTD_ENOTREG || r == -EISDIR)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "%s: not a regular file", what);
	if (r < 0)
		return ptd_diagf(diag, r, "%s: cannot open: %s", what,
				 ptd_strerror(r));
	return verify_fd(fd, what, size, sha, cancel, diag);
}

/* Verify a referenced image at its traced path. */
static int verify_reference(const char *dir,
			    const struct ptd_bundle_image *im,
			    const struct ptd_cancel *cancel,
			    struct ptd_diag *diag)
{
	_cleanup_close_ int fd = -1;
	char what[PATH_MAX + 64];

	(void)snprintf(what, sizeof(what),
		       "bundle '%s': referenced image '%s'", dir, im->path);
	fd = ptd_file_open_regular(AT_FDCWD, im->path, 0, NULL, NULL);
	if (fd == -ENOENT)
		return ptd_diagf(diag, -ENOENT, "%s: missing", what);
	if (fd == -PTD_ENOTREG || fd == -EISDIR)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "%s: not a regular file", what);
	if (fd < 0)
		return ptd_diagf(diag, fd, "%s: cannot open: %s", what,
				 ptd_strerror(fd));
	return verify_fd(fd, what, im->size, im->sha256, cancel, diag);
}

static int verify_all(int dfd, const struct ptd_bundle *b,
		      const struct ptd_cancel *cancel, struct ptd_diag *diag)
{
	size_t i;
	int r;

	for (i = 0; i < b->nfiles; i++) {
		r = verify_member(dfd, b->dir, b->files[i].name,
				  b->files[i].size, b->files[i].sha256,
				  cancel, diag);
		if (r < 0)
			return r;
	}
	for (i = 0; i < b->nimages; i++) {
		const struct ptd_bundle_image *im = &b->images[i];

		r = im->file ? verify_member(dfd, b->dir, im->file, im->size,
					     im->sha256, cancel, diag)
			     : verify_reference(b->dir, im, cancel, diag);
		if (r < 0)
			return r;
	}
	return 0;
}

static bool file_listed(const struct ptd_bundle *b, const char *plain)
{
	size_t i;

	for (i = 0; i < b->nfiles; i++) {
		const char *n = bdl_in_subdir(b->files[i].name, CAPTURE_SUBDIR);

		if (n && !strcmp(n, plain))
			return true;
	}
	return false;
}

const struct ptd_bundle_image *bdl_find_image(const struct ptd_bundle *b,
						  const char *path)
{
	size_t i;

	for (i = 0; i < b->nimages; i++)
		if (!strcmp(b->images[i].path, path))
			return &b->images[i];
	return NULL;
}

static int not_listed(const struct ptd_bundle *b, const char *plain,
		      struct ptd_diag *diag)
{
	return ptd_diagf(diag, -PTD_EFORMAT,
			 "bundle '%s': file '" CAPTURE_SUBDIR "/%s': not "
			 "listed in " PTD_BUNDLE_MANIFEST, b->dir, plain);
}

/* Every file the loaded capture needs is listed (and so verified). */
static int check_needed(const struct ptd_bundle *b, struct ptd_diag *diag)
{
	const struct ptd_capture *c = &b->capture;
	size_t i;

	for (i = 0; i < c->nthreads; i++) {
		if (!file_listed(b, c->threads[i].pt))
			return not_listed(b, c->threads[i].pt, diag);
		if (!file_listed(b, c->threads[i].truth))
			return not_listed(b, c->threads[i].truth, diag);
	}
	for (i = 0; i < c->tl.n; i++) {
		const struct ptd_tl_event *ev = &c->tl.ev[i];

		if (ev->op == PTD_TL_SNAPSHOT && ev->file &&
		    !file_listed(b, ev->file))
			return not_listed(b, ev->file, diag);
		if (ev->op == PTD_TL_MAP && ev->path && !bdl_find_image(b, ev->path))
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "bundle '%s': image '%s' (timeline "
					 "seq %" PRIu64 "): not listed in "
					 PTD_BUNDLE_MANIFEST, b->dir,
					 ev->path, ev->seq);
	}
	return 0;
}

static int read_manifest(int dfd, const char *dir, char **ret_text,
			 size_t *ret_len, struct ptd_diag *diag)
{
	_cleanup_close_ int fd = ptd_file_open_regular(dfd,
							PTD_BUNDLE_MANIFEST,
							O_NOFOLLOW, NULL, NULL);
	int r;

	if (fd == -ENOENT)
		return ptd_diagf(diag, -ENOENT, "'%s' is not a bundle: no "
				 PTD_BUNDLE_MANIFEST, dir);
	if (fd == -PTD_ENOTREG || fd == -EISDIR || fd == -ELOOP)
		return ptd_diagf(diag, -PTD_EFORMAT, "bundle '%s': "
				 PTD_BUNDLE_MANIFEST " is not a regular file",
				 dir);
	if (fd < 0)
		return ptd_diagf(diag, fd, "bundle '%s': cannot open "
				 PTD_BUNDLE_MANIFEST ": %s", dir,
				 ptd_strerror(fd));
	r = read_fd_all(fd, PTD_BUNDLE_MAX_MANIFEST, ret_text, ret_len);
	if (r == -PTD_ELIMIT)
		return ptd_diagf(diag, r, "bundle '%s': " PTD_BUNDLE_MANIFEST
				 " is larger than %u bytes", dir,
				 PTD_BUNDLE_MAX_MANIFEST);
	if (r < 0)
		return ptd_diagf(diag, r, "bundle '%s': cannot read "
				 PTD_BUNDLE_MANIFEST ": %s", dir,
				 ptd_strerror(r));
	return 0;
}

/* Load the capture, once its manifest and timeline are known verified. */
static int load_capture(struct ptd_bundle *b, struct ptd_diag *diag)
{
	_cleanup_free_ char *cdir = NULL;
	int r;

	if (!file_listed(b, CAPTURE_MANIFEST))
		return not_listed(b, CAPTURE_MANIFEST, diag);
	if (!file_listed(b, CAPTURE_TIMELINE))
		return not_listed(b, CAPTURE_TIMELINE, diag);
	if (asprintf(&cdir, "%s/" CAPTURE_SUBDIR, b->dir) < 0) {
		cdir = NULL;
		return -ENOMEM;
	}
	r = ptd_capture_load(cdir, &b->capture, diag);
	if (r < 0)
		return r;
	b->have_capture = true;
	return check_needed(b, diag);
}

int ptd_bundle_load(const char *bundle_dir, struct ptd_bundle *ret,
		    struct ptd_diag *diag)
{
	return ptd_bundle_load_until(bundle_dir, NULL, ret, diag);
}

int ptd_bundle_load_until(const char *bundle_dir,
			  const struct ptd_cancel *cancel,
			  struct ptd_bundle *ret, struct ptd_diag *diag)
{
	struct ptd_bundle b = { 0 };
	_cleanup_close_ int dfd = -1;
	_cleanup_free_ char *text = NULL;
	_cleanup_free_ char *origin = NULL;
	size_t len;
	int r;

	if (!bundle_dir || !ret)
		return -EINVAL;
	dfd = open(bundle_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return ptd_diagf(diag, -errno, "bundle '%s': %s", bundle_dir,
				 strerror(errno));
	r = read_manifest(dfd, bundle_dir, &text, &len, diag);
	if (r < 0)
		return r;
	if (asprintf(&origin, "%s/" PTD_BUNDLE_MANIFEST, bundle_dir) < 0) {
		origin = NULL;
		return -ENOMEM;
	}
	r = ptd_bundle_parse_manifest(text, len, origin, &b, diag);
	if (r < 0)
		return r;
	b.dir = strdup(bundle_dir);
	if (!b.dir) {
		r = -ENOMEM;
		goto err;
	}
	r = verify_all(dfd, &b, cancel, diag);
	if (r == 0)
		r = load_capture(&b, diag);
	if (r < 0)
		goto err;
	*ret = b;
	return 0;
err:
	ptd_bundle_fini(&b);
	return r;
}

/* ---- decoding --------------------------------------------------------- */

int ptd_bundle_resolve(void *ctx, const char *path, char *out, size_t outsz,
		       struct ptd_diag *diag)
{
	const struct ptd_bundle *b = ctx;
	const struct ptd_bundle_image *im;
	int n;

	if (!b || !path || !out)
		return -EINVAL;
	im = bdl_find_image(b, path);
	if (im) {
		n = im->file ? snprintf(out, outsz, "%s/%s", b->dir, im->file)
			     : snprintf(out, outsz, "%s", im->path);
		if (n < 0 || (size_t)n >= outsz)
			return ptd_diagf(diag, -ENAMETOOLONG,
					 "'%s': its bundle path is too long",
					 path);
		return 0;
	}
	/* Snapshots are opened from the capture directory: only listed,
	 * verified ones. */
	if (b->have_capture) {
		size_t dl = strlen(b->capture.dir);

		if (!strncmp(path, b->capture.dir, dl) && path[dl] == '/' &&
		    ptd_filename_is_plain(path + dl + 1) &&
		    file_listed(b, path + dl + 1))
			return ptd_strlcpy(out, path, outsz) < 0
				       ? ptd_diagf(diag, -ENAMETOOLONG,
						   "'%s': too long", path)
				       : 0;
	}
	return ptd_diagf(diag, -ENOENT, "'%s' is not in the bundle", path);
}

int ptd_bundle_decode(const char *path, const struct ptd_input_opts *o,
		      const struct ptd_input_sink *sink,
		      size_t *ret_thread_errors, struct ptd_diag *diag)
{
	struct ptd_bundle b = { 0 };
	int r;

	if (!path || !o || !sink || !sink->record)
		return -EINVAL;
	if (ret_thread_errors)
		*ret_thread_errors = 0;
	r = ptd_bundle_load_until(path, &o->cancel, &b, diag);
	if (r < 0)
		return r;
	r = ptd_capture_decode_loaded(&b.capture, path, PTD_INPUT_BUNDLE,
				      "ptd-bundle", ptd_bundle_resolve, &b, o,
				      sink, ret_thread_errors, diag);
	ptd_bundle_fini(&b);
	return r;
}
