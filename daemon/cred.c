/* SPDX-License-Identifier: MIT */
/*
 * A thread taking a client's file-system rights, and its capabilities
 * (see cred.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <pthread.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/strutil.h"
#include "daemon/cred.h"

/* The calling thread's capability sets (capget), into @d.  Returns 0 or
 * -errno. */
static int caps_get(struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3])
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };

	memset(d, 0, sizeof(*d) * _LINUX_CAPABILITY_U32S_3);
	return syscall(SYS_capget, &h, d) < 0 ? -errno : 0;
}

bool ptd_cred_has_cap(int cap)
{
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (cap < 0 || CAP_TO_INDEX(cap) >= _LINUX_CAPABILITY_U32S_3 ||
	    caps_get(d) < 0)
		return false;
	return d[CAP_TO_INDEX(cap)].effective & CAP_TO_MASK(cap);
}

/* Drop the capabilities that bypass file permissions from this thread's
 * effective and permitted sets (capset acts on the calling thread).  With
 * @keep_read, CAP_DAC_READ_SEARCH stays and is made effective again (the
 * kernel clears it from the effective set when fsuid leaves 0). */
static int drop_dac_caps(bool keep_read, struct ptd_diag *diag)
{
	static const int caps[] = { CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,
				    CAP_FOWNER };
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	size_t i;
	int r = caps_get(d);

	if (r < 0)
		return ptd_diagf(diag, r, "capget failed: %s", strerror(-r));
	for (i = 0; i < PTD_ARRAY_SIZE(caps); i++) {
		if (keep_read && caps[i] == CAP_DAC_READ_SEARCH) {
			if (d[CAP_TO_INDEX(caps[i])].permitted &
			    CAP_TO_MASK(caps[i]))
				d[CAP_TO_INDEX(caps[i])].effective |=
					CAP_TO_MASK(caps[i]);
			continue;
		}
		d[CAP_TO_INDEX(caps[i])].effective &= ~CAP_TO_MASK(caps[i]);
		d[CAP_TO_INDEX(caps[i])].permitted &= ~CAP_TO_MASK(caps[i]);
	}
	if (syscall(SYS_capset, &h, d) < 0)
		return ptd_diagf(diag, -errno, "capset failed: %s",
				 strerror(errno));
	return 0;
}

static int become(const struct ptd_cred *c, bool keep_read,
		  struct ptd_diag *diag)
{
	if (!c || (c->ngroups && !c->groups) ||
	    c->ngroups > PTD_CRED_MAX_GROUPS)
		return -EINVAL;
	if (geteuid() != 0) {
		/* Without root ptd cannot become anyone else; reading as its
		 * own uid is reading as the client only if they are one. */
		if (c->uid != geteuid())
			return ptd_diagf(diag, -EPERM,
					 "ptd runs as uid %u and cannot %s "
					 "files as uid %u",
					 (unsigned)geteuid(),
					 keep_read ? "write" : "read",
					 (unsigned)c->uid);
		return 0;
	}
	/* The raw syscall: glibc's setgroups changes every thread.  Needs
	 * CAP_SETGID (and setfs*id CAP_SETUID/CAP_SETGID): ptd.service's
	 * CapabilityBoundingSet= keeps them. */
	if (syscall(SYS_setgroups, c->ngroups, c->groups) < 0)
		return ptd_diagf(diag, -errno, "setgroups failed: %s",
				 strerror(errno));
	(void)setfsgid(c->gid);
	(void)setfsuid(c->uid);
	/* setfs*id return the previous value: ask again to be sure. */
	if ((uid_t)setfsuid((uid_t)-1) != c->uid ||
	    (gid_t)setfsgid((gid_t)-1) != c->gid)
		return ptd_diagf(diag, -EPERM,
				 "could not take uid %u gid %u for %s",
				 (unsigned)c->uid, (unsigned)c->gid,
				 keep_read ? "writing" : "reading");
	if (c->uid == 0)
		return 0;
	return drop_dac_caps(keep_read, diag);
}

int ptd_cred_become_reader(const struct ptd_cred *c, struct ptd_diag *diag)
{
	return become(c, false, diag);
}

int ptd_cred_become_writer(const struct ptd_cred *c, struct ptd_diag *diag)
{
	return become(c, true, diag);
}

struct open_job {
	const struct ptd_cred *c;
	const char *path;
	struct stat st;
	struct ptd_diag diag;
	int r;
};

static void *open_main(void *arg)
{
	struct open_job *j = arg;

	j->r = ptd_cred_become_reader(j->c, &j->diag);
	if (j->r == 0)
		j->r = ptd_file_open_regular(AT_FDCWD, j->path, 0, &j->st,
					     &j->diag);
	return NULL;
}

int ptd_cred_open(const struct ptd_cred *c, const char *path,
		  struct stat *ret_st, struct ptd_diag *diag)
{
	struct open_job j = { .c = c, .path = path, .diag = { "" } };
	pthread_t th;
	int r;

	if (!c || !path)
		return -EINVAL;
	if (c->uid == 0 && geteuid() == 0)
		return ptd_file_open_regular(AT_FDCWD, path, 0, ret_st, diag);
	/* The thread ends with the rights it took: nothing else runs on
	 * it.  (Threads start with their creator's credentials: ptd's.) */
	r = pthread_create(&th, NULL, open_main, &j);
	if (r)
		return ptd_diagf(diag, -r, "'%s': cannot start a thread to "
				 "open it as uid %u: %s", path,
				 (unsigned)c->uid, strerror(r));
	(void)pthread_join(th, NULL);
	if (j.r < 0) {
		if (diag)
			*diag = j.diag;
		return j.r;
	}
	if (ret_st)
		*ret_st = j.st;
	return j.r;
}
