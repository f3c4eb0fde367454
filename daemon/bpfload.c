/* SPDX-License-Identifier: MIT */
/* Loading ptd's BPF programs (bpfload.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "daemon/bpfload.h"

int ptd_bpf_ringbuf(int map_fd, int (*fn)(void *ctx, void *data, size_t len),
		    void *ctx, struct ring_buffer **ret,
		    struct ptd_diag *diag)
{
	*ret = ring_buffer__new(map_fd, fn, ctx, NULL);
	if (!*ret) {
		int r = -errno;

		return ptd_diagf(diag, r, "cannot map the BPF ring buffer: %s",
				 strerror(-r));
	}
	return 0;
}

/* The inodes of the initial PID and user namespaces (the kernel's
 * PROC_PID_INIT_INO and PROC_USER_INIT_INO, fixed since namespaces have
 * inodes in nsfs). */
#define PID_NS_INIT_INO 0xEFFFFFFCu
#define USER_NS_INIT_INO 0xEFFFFFFDu

int ptd_bpf_check(const char *what, struct ptd_bpf_pidns *ret,
		  struct ptd_diag *diag)
{
	struct stat st;

	/* A watch rule matches a user's processes by the kernel's uids,
	 * which are a user namespace's own only in the initial one. */
	if (stat("/proc/self/ns/user", &st) == 0 &&
	    st.st_ino != USER_NS_INIT_INO)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED,
				 "ptd runs in a user namespace of its own: "
				 "its BPF programs see the machine's user "
				 "ids, not this namespace's: %s need ptd in "
				 "the initial user namespace", what);
	if (stat("/proc/self/ns/pid", &st) < 0)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED,
				 "/proc/self/ns/pid: %s: ptd cannot tell its "
				 "PID namespace, which %s name processes in",
				 strerror(errno), what);
	ret->initial = st.st_ino == PID_NS_INIT_INO;
	ret->dev = st.st_dev;
	ret->ino = st.st_ino;
	if (access("/sys/kernel/btf/vmlinux", R_OK) < 0)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED,
				 "the kernel has no BTF (/sys/kernel/btf/"
				 "vmlinux: %s; CONFIG_DEBUG_INFO_BTF): ptd's "
				 "BPF programs cannot be relocated to it: %s "
				 "need them", strerror(errno), what);
	return 0;
}

int ptd_bpf_refusal(int err, const char *what, struct ptd_diag *diag)
{
	char buf[256] = "";
	FILE *f;

	if (err != -EPERM && err != -EACCES)
		return ptd_diagf(diag, err, "cannot load ptd's BPF program: "
				 "%s (%s need it)", strerror(-err), what);
	f = fopen("/sys/kernel/security/lockdown", "re");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
	}
	if (strstr(buf, "[integrity]") || strstr(buf, "[confidentiality]"))
		return ptd_diagf(diag, err, "BPF is refused by the kernel's "
				 "lockdown (%.*s): %s need BPF programs",
				 (int)strcspn(buf, "\n"), buf, what);
	return ptd_diagf(diag, err, "ptd may not load BPF programs (%s; it "
			 "needs CAP_BPF and CAP_PERFMON, or root): %s need "
			 "them", strerror(-err), what);
}
