/* SPDX-License-Identifier: MIT */
/*
 * ptd bundles: a saved trace that can be moved to another machine and
 * decoded there, and that is verified before anything in it is used.
 *
 * A bundle is a directory:
 *
 *   ptd-bundle.json   the manifest (below), written last
 *   capture/          the software-source capture's files (swpt/capture.h)
 *   images/           a copy of every file the capture's timeline maps,
 *                     named "images/N-BASENAME" so names cannot collide
 *
 * ptd-bundle.json:
 *   {"format":"ptd-bundle","version":1,"created":"2024-05-01T12:00:00Z",
 *    "source":"swpt-capture",
 *    "files":[{"name":"capture/pt-123.bin","size":N,"sha256":"hex"},...],
 *    "images":[{"path":"/usr/lib/x86_64-linux-gnu/libc.so.6",
 *               "file":"images/1-libc.so.6","size":N,"sha256":"hex",
 *               "build_id":"hex"},...]}
 *
 * "files" lists every file under capture/ the capture needs (its manifest,
 * timeline, PT, truth and snapshot files).  An image without "file" is
 * referenced, not copied: loading checks that the file at "path" still has
 * that size and sha256.  "build_id" is absent when the ELF file has none.
 *
 * Loading is strict: an unknown format or version, a missing, extra or
 * wrongly typed field, a name that is absolute, contains "..", or is not a
 * plain relative path inside the bundle, a duplicate, a size beyond the
 * limits are refused; then EVERY listed file is checked (exists, regular,
 * size, sha256) and every file the capture needs must be listed.  Only then
 * is the capture loaded.  Messages name the file and what was wrong.
 */
#ifndef PTD_BUNDLE_BUNDLE_H
#define PTD_BUNDLE_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bundle/sha256.h"
#include "common/diag.h"
#include "input/input.h"
#include "swpt/capture.h"

#define PTD_BUNDLE_FORMAT "ptd-bundle"
#define PTD_BUNDLE_VERSION 1
#define PTD_BUNDLE_MANIFEST "ptd-bundle.json"
#define PTD_BUNDLE_MAX_MANIFEST (16u << 20)
#define PTD_BUNDLE_MAX_FILES 100000u	/* entries in "files" */
#define PTD_BUNDLE_MAX_IMAGES 10000u	/* entries in "images" */
#define PTD_BUNDLE_MAX_FILE_SIZE (PTD_CAPTURE_MAX_PT)	/* one file */
#define PTD_BUNDLE_MAX_NAME 1024u	/* a name or path, bytes */

struct ptd_bundle_save_opts {
	/* sizeof(struct ptd_bundle_save_opts): set by
	 * PTD_BUNDLE_SAVE_OPTS_INIT.  A larger size whose extra bytes are not
	 * all zero is refused with -EINVAL. */
	size_t sz;
	/* Reference images (path, size, sha256) instead of copying them. */
	bool reference_images;
	/* Give every file and directory written to @uid:@gid (fchown), e.g.
	 * the client a daemon saves for. */
	bool set_owner;
	uid_t uid;
	gid_t gid;
};

#define PTD_BUNDLE_SAVE_OPTS_INIT \
	((struct ptd_bundle_save_opts){ .sz = sizeof(struct ptd_bundle_save_opts) })

struct ptd_bundle_file {
	char *name;		/* relative to the bundle directory */
	uint64_t size;
	uint8_t sha256[PTD_SHA256_LEN];
};

struct ptd_bundle_image {
	char *path;		/* the traced path */
	char *file;		/* the copy, relative to the bundle directory;
				 * NULL if referenced (then @path is used) */
	uint64_t size;
	uint8_t sha256[PTD_SHA256_LEN];
	char *build_id;		/* lower-case hex, NULL if none */
};

struct ptd_bundle {
	char *dir;
	char *created;
	char *source;
	struct ptd_bundle_file *files;
	size_t nfiles;
	struct ptd_bundle_image *images;
	size_t nimages;
	/* Loaded from dir/capture once everything was verified. */
	struct ptd_capture capture;
	bool have_capture;
};

/* Free what @b holds (not @b itself); accepts a zeroed or half-built one. */
void ptd_bundle_fini(struct ptd_bundle *b);

/* Save the capture in @capture_dir as a bundle at @bundle_dir.  Everything
 * is written into a temporary sibling "BUNDLE_DIR.tmp-XXXXXX", fsynced, the
 * manifest last, then renamed into place; on any failure the temporary
 * directory is removed and nothing is left at @bundle_dir.  @opts may be
 * NULL (defaults).
 * Returns 0, or:
 *   -EEXIST   @bundle_dir exists and is not an empty directory
 *   -EINVAL   bad arguments or options
 *   -PTD_EFORMAT/-PTD_EVERSION/-PTD_ELIMIT  the capture is not valid
 *   -ENOENT   a file the capture needs (or an image it maps) is missing
 *   -errno    reading or writing failed
 * with a message naming the file in @diag. */
int ptd_bundle_save(const char *capture_dir, const char *bundle_dir,
		    const struct ptd_bundle_save_opts *opts,
		    struct ptd_diag *diag);

/* Save INTO the existing empty directory open at @dir_fd (not closed; e.g.
 * a client's directory passed to the daemon).  Files are written under a
 * temporary directory inside it, then moved into place; the manifest is
 * written last (temporary name + rename), so a directory without it is not
 * a bundle.  On failure everything written is removed again.
 * Returns as ptd_bundle_save; -EEXIST if the directory is not empty,
 * -ENOTDIR if @dir_fd is not a directory. */
int ptd_bundle_save_at(const char *capture_dir, int dir_fd,
		       const struct ptd_bundle_save_opts *opts,
		       struct ptd_diag *diag);

/* Parse a manifest's text (untrusted) without touching any file: the
 * strict checks above, before verification.  @origin names it in messages.
 * Returns 0 (fills files/images/created/source of @ret; dir and capture
 * unset), or -PTD_EFORMAT / -PTD_EVERSION / -PTD_ELIMIT / -ENOMEM with the
 * field in @diag. */
int ptd_bundle_parse_manifest(const char *text, size_t len,
			      const char *origin, struct ptd_bundle *ret,
			      struct ptd_diag *diag);

/* Load and verify the bundle in @bundle_dir, then load its capture.
 * Returns 0, or:
 *   -ENOENT        no manifest, or a listed file is missing
 *   -PTD_EFORMAT / -PTD_EVERSION / -PTD_ELIMIT  a bad manifest (field named)
 *   -PTD_ECHECKSUM a file's size or sha256 differs ("truncated: size X
 *                  expected Y", "checksum mismatch")
 *   -PTD_EFORMAT   a file is not a regular file, or a file the capture
 *                  needs is not listed ("not listed")
 *   -errno         reading failed
 * with a message naming the file in @diag. */
int ptd_bundle_load(const char *bundle_dir, struct ptd_bundle *ret,
		    struct ptd_diag *diag);

/* ptd_bundle_load that asks @cancel (may be NULL) between blocks of the
 * files it verifies (a bundle may hold gigabytes): -ECANCELED naming the
 * file it was verifying once @cancel says stop. */
int ptd_bundle_load_until(const char *bundle_dir,
			  const struct ptd_cancel *cancel,
			  struct ptd_bundle *ret, struct ptd_diag *diag);

/* An iscache resolver (ptd_iscache_resolve_fn) for a loaded bundle (@ctx):
 * a traced path the bundle has an image for -> its copy (or the verified
 * referenced path).  -ENOENT "not in the bundle" otherwise,
 * -ENAMETOOLONG if @outsz is too small. */
int ptd_bundle_resolve(void *ctx, const char *path, char *out, size_t outsz,
		       struct ptd_diag *diag);

/* The bundle reader (ptd_input_decode_fn): load and verify (cancelled by
 * @o->cancel), then decode the capture with images resolved into the
 * bundle; records name the traced paths.  Returns as ptd_input_decode_fn;
 * refusals as ptd_bundle_load_until. */
int ptd_bundle_decode(const char *path, const struct ptd_input_opts *o,
		      const struct ptd_input_sink *sink,
		      size_t *ret_thread_errors, struct ptd_diag *diag);

#endif
