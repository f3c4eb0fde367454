/* SPDX-License-Identifier: MIT */
/*
 * Mapped files' identities (aspace/fileid.h) and the check where files are
 * sealed (aspace/iscache.c): a maps line or a MMAP2 record gives the
 * identity; the file at the path is used only if it is that file; another
 * file renamed over it is refused, named with both identities, and either
 * left unmapped or replaced by the process's own code; pieces of a mapped
 * file never reopen the path.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "check.h"
#include "aspace/fileid.h"
#include "aspace/image.h"
#include "aspace/iscache.h"
#include "aspace/maps.h"
#include "aspace/timeline.h"
#include "common/fileio.h"
#include "perf/sideband.h"

static char workdir[64];
static char lib[128], other[128];
static uint8_t orig[3 * 4096], repl[3 * 4096];

/* Write @n bytes of @b to @path as a new file; its stat in *@st. */
static int write_file(const char *path, const uint8_t *b, size_t n,
		      struct stat *st)
{
	int r = ptd_file_write_atomic(path, b, n);

	if (r == 0 && stat(path, st) < 0)
		r = -errno;
	return r;
}

/* "lib" holds orig; "other" (repl) renamed over it when @swap. */
static void files(bool swap, struct stat *ret_lib, struct stat *ret_other)
{
	struct stat a, b;

	for (size_t i = 0; i < sizeof(orig); i++) {
		orig[i] = (uint8_t)(0x90 ^ (i & 0x3f));
		repl[i] = 0xcc;
	}
	if (write_file(lib, orig, sizeof(orig), &a) < 0 ||
	    write_file(other, repl, sizeof(repl), &b) < 0)
		abort();
	if (swap && rename(other, lib) < 0)
		abort();
	if (ret_lib)
		*ret_lib = a;
	if (ret_other)
		*ret_other = b;
}

static void maps_line(char *buf, size_t n, uint64_t start, uint64_t end,
		      uint64_t off, const struct stat *st, const char *path)
{
	(void)snprintf(buf, n, "%" PRIx64 "-%" PRIx64 " r-xp %08" PRIx64
		       " %02x:%02x %llu %s\n", start, end, off,
		       major(st->st_dev), minor(st->st_dev),
		       (unsigned long long)st->st_ino, path);
}

/* A maps line gives the identity, in maps' hex device form; anonymous
 * memory gives none. */
static void test_fileid_from_maps(void)
{
	static const char text[] =
		"400000-401000 r-xp 00001000 08:1f 123456 /x/lib.so\n"
		"7f0000000000-7f0000001000 rwxp 00000000 00:00 0 \n";
	struct ptd_diag diag = { "" };
	struct ptd_maps maps;
	struct ptd_file_id id;

	REQUIRE(ptd_maps_parse(text, sizeof(text) - 1, "t", &maps, &diag) ==
		0);
	REQUIRE(maps.n == 2);
	ptd_file_id_from_map(&maps.v[0], &id);
	CHECK_EQ_INT(id.dev_major, 8);
	CHECK_EQ_INT(id.dev_minor, 0x1f);
	CHECK_EQ_INT(id.ino, 123456);
	CHECK(ptd_file_id_known(&id));
	ptd_file_id_from_map(&maps.v[1], &id);
	CHECK(!ptd_file_id_known(&id));
	ptd_maps_fini(&maps);
}

/* The comparison itself: device and inode; only the inode where the
 * file system's stat() device is not the kernel's maps device. */
static void test_fileid_check(void)
{
	struct ptd_file_id want = { 8, 1, 77 };
	struct ptd_file_found f = { { 8, 1, 77 }, false };
	struct ptd_diag diag = { "" };

	CHECK_EQ_INT(ptd_file_id_check(&want, &f, "/l", &diag), 0);
	f.id.dev_minor = 2;
	CHECK_EQ_INT(ptd_file_id_check(&want, &f, "/l", &diag),
		     -PTD_EIDENTITY);
	CHECK_EQ_STR(diag.msg, "'/l' is not the file the process mapped: "
			       "expected dev 08:01 inode 77, found dev 08:02 "
			       "inode 77");
	f.dev_unreliable = true;	/* overlayfs, btrfs */
	CHECK_EQ_INT(ptd_file_id_check(&want, &f, "/l", &diag), 0);
	f.id.ino = 78;
	CHECK_EQ_INT(ptd_file_id_check(&want, &f, "/l", &diag),
		     -PTD_EIDENTITY);
	want.ino = 0;		/* unknown: nothing to check */
	CHECK_EQ_INT(ptd_file_id_check(&want, &f, "/l", NULL), 0);
}

/* Through the maps and the image: the file the maps line names is used;
 * another file renamed over it is refused, named, counted once, and the
 * range is left unmapped (no process to read). */
static void test_fileid_maps_image(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img = NULL;
	struct ptd_diag diag = { "" };
	struct ptd_maps maps;
	struct stat a, b;
	char text[512], want[512];
	uint8_t buf[16];
	unsigned skipped = 9;

	REQUIRE(ic);
	ptd_iscache_check_identity(ic, true, 0);
	files(false, &a, NULL);
	maps_line(text, sizeof(text), 0x400000, 0x401000, 0x1000, &a, lib);
	REQUIRE(ptd_maps_parse(text, strlen(text), "t", &maps, &diag) == 0);

	/* the same file: mapped */
	(void)ptd_image_new(ic, "t", &img);
	REQUIRE(img);
	CHECK_EQ_INT(ptd_image_load_maps(img, &maps, &skipped, &diag), 0);
	CHECK_EQ_INT(skipped, 0);
	CHECK_EQ_INT(ptd_image_read(img, 0x400000, buf, sizeof(buf)), 16);
	CHECK(memcmp(buf, orig + 0x1000, sizeof(buf)) == 0);
	CHECK_EQ_INT(ptd_iscache_identity_mismatches(ic), 0);
	ptd_image_free(img);

	/* another file at the path: refused, with both identities */
	files(true, &a, &b);
	maps_line(text, sizeof(text), 0x400000, 0x401000, 0x1000, &a, lib);
	ptd_maps_fini(&maps);
	REQUIRE(ptd_maps_parse(text, strlen(text), "t", &maps, &diag) == 0);
	(void)ptd_image_new(ic, "t", &img);
	REQUIRE(img);
	CHECK_EQ_INT(ptd_image_load_maps(img, &maps, &skipped, &diag), 0);
	CHECK_EQ_INT(skipped, 1);
	(void)snprintf(want, sizeof(want),
		       "cannot map '%s' at 0x400000: '%s' is not the file the "
		       "process mapped: expected dev %02x:%02x inode %llu, "
		       "found dev %02x:%02x inode %llu; not decoded", lib, lib,
		       major(a.st_dev), minor(a.st_dev),
		       (unsigned long long)a.st_ino, major(b.st_dev),
		       minor(b.st_dev), (unsigned long long)b.st_ino);
	if (strncmp(diag.msg, want, strlen(want)) != 0)
		CHECK_FAIL_("message '%s', expected it to start '%s'",
			    diag.msg, want);
	CHECK(ptd_image_find(img, 0x400000) == NULL);
	CHECK_EQ_INT(ptd_image_read(img, 0x400000, buf, sizeof(buf)),
		     -PTD_ENOIMAGE);
	CHECK_EQ_INT(ptd_iscache_identity_mismatches(ic), 1);
	/* the same refusal again (another thread's image): counted once */
	CHECK_EQ_INT(ptd_image_map_file_id(img, lib, 0x1000, 0x1000, 0x400000,
					   NULL, &(struct ptd_file_id){
						   major(a.st_dev),
						   minor(a.st_dev),
						   a.st_ino },
					   &diag), -PTD_EIDENTITY);
	CHECK_EQ_INT(ptd_iscache_identity_mismatches(ic), 1);
	ptd_image_free(img);
	ptd_maps_fini(&maps);
	ptd_iscache_free(ic);

	/* checks off (offline decoders): the path is used as before */
	(void)ptd_iscache_new(&ic);
	(void)ptd_image_new(ic, "t", &img);
	REQUIRE(img);
	CHECK(ptd_image_map_file_id(img, lib, 0x1000, 0x1000, 0x400000, NULL,
				    &(struct ptd_file_id){ 1, 2, 3 },
				    &diag) > 0);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

/* With a process to read, the refused file's range holds the process's
 * code (here: our own memory), under the file's name. */
static void test_fileid_fallback(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "t", &img);
	struct ptd_diag diag = { "" };
	struct ptd_file_id id;
	const struct ptd_image_region *reg;
	const char *name = NULL;
	uint64_t modoff = 0, va;
	uint8_t *mem, buf[64];
	struct stat a;

	REQUIRE(img);
	mem = mmap(NULL, 0x2000, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(mem != MAP_FAILED);
	memcpy(mem, orig + 0x1000, 0x2000);
	va = (uint64_t)(uintptr_t)mem;
	ptd_iscache_check_identity(ic, true, getpid());
	files(true, &a, NULL);
	id = (struct ptd_file_id){ major(a.st_dev), minor(a.st_dev),
				   a.st_ino };
	CHECK_EQ_INT(ptd_image_map_file_id(img, lib, 0x1000, 0x2000, va, NULL,
					   &id, &diag), -PTD_EIDENTITY);
	CHECK(strstr(diag.msg, "is not the file the process mapped") != NULL);
	CHECK(strstr(diag.msg, "decoded from process") != NULL);
	reg = ptd_image_find(img, va + 0x1800);
	REQUIRE(reg);
	CHECK_EQ_INT(ptd_image_read(img, va + 0x1800, buf, sizeof(buf)),
		     (int)sizeof(buf));
	CHECK(memcmp(buf, orig + 0x2800, sizeof(buf)) == 0);
	CHECK_EQ_INT(ptd_image_module_of(img, reg->isid, va + 0x1800, &name,
					 &modoff), 0);
	CHECK_EQ_STR(name, lib);
	CHECK_EQ_INT(modoff, 0x2800);
	/* a piece of it stays the process's code */
	CHECK_EQ_INT(ptd_image_unmap(img, va, va + 0x1000), 0);
	CHECK_EQ_INT(ptd_image_read(img, va + 0x1000, buf, sizeof(buf)),
		     (int)sizeof(buf));
	CHECK(memcmp(buf, orig + 0x2000, sizeof(buf)) == 0);
	CHECK_EQ_INT(ptd_iscache_identity_mismatches(ic), 1);
	(void)munmap(mem, 0x2000);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

/* A piece left by a partial unmap comes from the sealed copy, not from
 * whatever the path names by then. */
static void test_fileid_piece(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "t", &img);
	struct ptd_diag diag = { "" };
	uint8_t buf[32];

	REQUIRE(img);
	files(false, NULL, NULL);
	CHECK(ptd_image_map_file(img, lib, 0, sizeof(orig), 0x500000, NULL,
				 &diag) > 0);
	REQUIRE(rename(other, lib) == 0);
	CHECK_EQ_INT(ptd_image_unmap(img, 0x501000, 0x502000), 0);
	CHECK_EQ_INT(ptd_image_read(img, 0x502000, buf, sizeof(buf)),
		     (int)sizeof(buf));
	CHECK(memcmp(buf, orig + 0x2000, sizeof(buf)) == 0);
	CHECK_EQ_INT(ptd_image_read(img, 0x500010, buf, sizeof(buf)),
		     (int)sizeof(buf));
	CHECK(memcmp(buf, orig + 0x10, sizeof(buf)) == 0);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

/* The MMAP2 path: maj/min/ino become the timeline event's identity and
 * applying it checks the file; a build-id MMAP2 carries none. */
static void test_fileid_mmap2(void)
{
	uint64_t rec_u64[512];
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "t", &img);
	struct ptd_perf_sample_id sid = { 0 };
	struct ptd_perf_mmap m = { 0 };
	struct ptd_perf_event ev;
	struct ptd_tl_event tl;
	struct ptd_diag diag = { "" };
	struct stat a;
	size_t n;

	REQUIRE(img);
	ptd_iscache_check_identity(ic, true, 0);
	files(true, &a, NULL);
	m.pid = m.tid = 1;
	m.addr = 0x600000;
	m.len = 0x1000;
	m.pgoff = 0x1000;
	m.maj = major(a.st_dev);
	m.min = minor(a.st_dev);
	m.ino = a.st_ino;
	m.prot = PROT_READ | PROT_EXEC;
	m.filename = lib;
	n = ptd_perf_encode_mmap2(rec_u64, sizeof(rec_u64), &m, 0, &sid);
	REQUIRE(n > 0);
	REQUIRE(ptd_perf_event_parse((const void *)rec_u64, 0, false, &ev,
				     &diag) == 0);
	REQUIRE(ptd_perf_event_to_tl(&ev, &tl, &diag) == 1);
	CHECK_EQ_INT(tl.id.dev_major, major(a.st_dev));
	CHECK_EQ_INT(tl.id.dev_minor, minor(a.st_dev));
	CHECK_EQ_INT(tl.id.ino, a.st_ino);
	CHECK_EQ_INT(ptd_tl_event_apply(&tl, img, NULL, &diag),
		     -PTD_EIDENTITY);
	CHECK(strstr(diag.msg, "is not the file the process mapped") != NULL);
	CHECK(strstr(diag.msg, lib) != NULL);
	CHECK(ptd_image_find(img, 0x600000) == NULL);

	m.has_build_id = true;
	m.build_id_size = 20;
	n = ptd_perf_encode_mmap2(rec_u64, sizeof(rec_u64), &m, 0, &sid);
	REQUIRE(n > 0);
	REQUIRE(ptd_perf_event_parse((const void *)rec_u64, 0, false, &ev,
				     &diag) == 0);
	REQUIRE(ptd_perf_event_to_tl(&ev, &tl, &diag) == 1);
	CHECK(!ptd_file_id_known(&tl.id));
	CHECK_EQ_INT(ptd_tl_event_apply(&tl, img, NULL, &diag), 0);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

int main(void)
{
	char tmpl[] = "/tmp/ptd-fileid-XXXXXX";

	if (!mkdtemp(tmpl))
		SKIP_ALL("mkdtemp: %s", strerror(errno));
	(void)snprintf(workdir, sizeof(workdir), "%s", tmpl);
	(void)snprintf(lib, sizeof(lib), "%s/lib.so", workdir);
	(void)snprintf(other, sizeof(other), "%s/other.so", workdir);
	RUN(test_fileid_from_maps);
	RUN(test_fileid_check);
	RUN(test_fileid_maps_image);
	RUN(test_fileid_fallback);
	RUN(test_fileid_piece);
	RUN(test_fileid_mmap2);
	if (!check_failures)
		(void)ptd_rm_rf(workdir);
	return check_done();
}
