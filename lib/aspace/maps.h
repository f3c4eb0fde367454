/* SPDX-License-Identifier: MIT */
/*
 * A strict parser for /proc/PID/maps.
 *
 * Line format (proc(5)):
 *   START-END PERMS OFFSET MAJ:MIN INODE [PATHNAME]
 * e.g. "7f2c1a000000-7f2c1a022000 r-xp 00002000 08:01 1234 /usr/lib/libc.so.6"
 * START/END/OFFSET are hex, MAJ/MIN hex, INODE decimal.  The pathname may
 * contain spaces and ends with " (deleted)" when the file was unlinked.
 * Every field is checked: a line that does not have exactly this shape, a
 * start not below its end, or addresses going backwards are refused with the
 * origin, line number and what was wrong.
 */
#ifndef PTD_ASPACE_MAPS_H
#define PTD_ASPACE_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/diag.h"

enum ptd_map_kind {
	PTD_MAP_FILE,		/* backed by a file that still exists */
	PTD_MAP_DELETED,	/* backed by a file that was unlinked */
	PTD_MAP_ANON,		/* no pathname */
	PTD_MAP_HEAP,		/* [heap] */
	PTD_MAP_STACK,		/* [stack] */
	PTD_MAP_VDSO,		/* [vdso] */
	PTD_MAP_VVAR,		/* [vvar] */
	PTD_MAP_VSYSCALL,	/* [vsyscall] */
	PTD_MAP_OTHER,		/* any other [bracketed] or pseudo name,
				 * e.g. "[anon:name]", "/memfd:x (deleted)" is
				 * DELETED */
};

/* PTD_MAP_PROT_* mirror PROT_READ/WRITE/EXEC. */
#define PTD_MAP_PROT_R 0x1u
#define PTD_MAP_PROT_W 0x2u
#define PTD_MAP_PROT_X 0x4u

struct ptd_map {
	uint64_t start;		/* first byte */
	uint64_t end;		/* one past the last byte */
	uint64_t offset;	/* file offset of start */
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t prot;		/* PTD_MAP_PROT_* */
	bool shared;		/* 's' rather than 'p' */
	enum ptd_map_kind kind;
	/* Pathname as the kernel printed it, without a " (deleted)" suffix;
	 * "" for anonymous mappings. Owned by the ptd_maps. */
	char *path;
};

struct ptd_maps {
	struct ptd_map *v;
	size_t n;
};

/* Hard limits: a maps file larger than this or with more lines is refused
 * with -PTD_ELIMIT. */
#define PTD_MAPS_MAX_BYTES (64u << 20)
#define PTD_MAPS_MAX_LINES 1000000u

/* Parse @len bytes of maps text.  @origin names the input in messages
 * (e.g. "/proc/42/maps").
 * Returns 0 and fills *ret (free with ptd_maps_fini) on success.
 * Returns -PTD_EFORMAT with "@origin:LINE: what" in @diag for a bad line.
 * Returns -PTD_ELIMIT if the input exceeds the limits above.
 * Returns -ENOMEM. */
int ptd_maps_parse(const char *text, size_t len, const char *origin,
		   struct ptd_maps *ret, struct ptd_diag *diag);

/* Read and parse @procroot/@pid/maps (@procroot is "/proc" in production;
 * tests pass a directory of their own).
 * Returns what ptd_maps_parse returns, or -errno from reading (-ENOENT: no
 * such process, -EACCES). */
int ptd_maps_read_pid(const char *procroot, pid_t pid, struct ptd_maps *ret,
		      struct ptd_diag *diag);

void ptd_maps_fini(struct ptd_maps *maps);

/* The mapping containing @addr, or NULL. O(log n). */
const struct ptd_map *ptd_maps_find(const struct ptd_maps *maps,
				    uint64_t addr);

/* Name of a kind, for messages and JSON ("file", "anon", "vdso", ...). */
const char *ptd_map_kind_name(enum ptd_map_kind kind);

#endif
