/* SPDX-License-Identifier: MIT */
/*
 * Acting on a client's behalf with the client's file-system rights, on
 * the calling thread only.
 *
 * ptd runs as root; what it reads or writes for a client (a replay's
 * trace, a recorded session's bundle) it does on a thread of its own that
 * first takes the client's supplementary groups (raw SYS_setgroups: per
 * thread, unlike glibc's setgroups), fsgid and fsuid, and drops
 * CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER from its effective
 * and permitted sets (capset on the calling thread only).  Needs
 * CAP_SETUID and CAP_SETGID (ptd.service's CapabilityBoundingSet= keeps
 * them).  The thread keeps these rights until it ends: use a thread made
 * for the job.
 */
#ifndef PTD_DAEMON_CRED_H
#define PTD_DAEMON_CRED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/diag.h"

/* Supplementary groups carried at most (NGROUPS_MAX is 65536). */
#define PTD_CRED_MAX_GROUPS 65536u

/* Whose rights a thread takes. */
struct ptd_cred {
	uid_t uid;
	gid_t gid;
	const gid_t *groups;	/* supplementary groups */
	size_t ngroups;
};

/* Take @c's file-system credentials for reading on the calling thread
 * (see above).  Returns 0, or -EINVAL (bad groups), -EPERM (ptd may not
 * take them: it is not root and @c is not its own uid), -errno with a
 * message in @diag. */
int ptd_cred_become_reader(const struct ptd_cred *c, struct ptd_diag *diag);

/* The same for a thread that writes files for @c from files only ptd may
 * read (a recorded session's bundle from ptd's spool and the traced
 * images): what it creates is @c's and is created only where @c may
 * write (fsuid, fsgid, groups; CAP_DAC_OVERRIDE and CAP_FOWNER dropped),
 * what it reads is read with ptd's CAP_DAC_READ_SEARCH, kept effective.
 * Returns as ptd_cred_become_reader. */
int ptd_cred_become_writer(const struct ptd_cred *c, struct ptd_diag *diag);

/* Whether the calling thread holds capability @cap (CAP_*) in its
 * effective set (false if it cannot tell). */
bool ptd_cred_has_cap(int cap);

/* Open @path as ptd_file_open_regular(AT_FDCWD, @path, 0, @ret_st, @diag)
 * does, with @c's file-system rights: on a thread made for it, which takes
 * them (ptd_cred_become_reader), opens and ends.  For the files a thread
 * that keeps ptd's own rights opens for a client (a live session's decode
 * thread: the files its symbols come from).  @c root: opened here.
 * Returns the fd (the caller's), or ptd_cred_become_reader's or
 * ptd_file_open_regular's error with a message in @diag (may be NULL),
 * -errno if the thread could not be made. */
int ptd_cred_open(const struct ptd_cred *c, const char *path,
		  struct stat *ret_st, struct ptd_diag *diag);

#endif
