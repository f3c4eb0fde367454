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

/* The inode of the initial PID namespace (the kernel's PROC_PID_INIT_INO,
 * fixed since namespaces have inodes in nsfs). */
#define PID_NS_INIT_INO 0xEFFFFFFCu

int ptd_bpf_check(const char *what, struct ptd_diag *diag)
{
	struct stat st;

	/* The programs name processes as the initial PID namespace does
	 * (bpf_get_current_pid_tgid); in a container's namespace ptd would
	 * take them for others -- or stop a matched process it can then
	 * never find. */
	if (stat("/proc/self/ns/pid", &st) == 0 &&
	    st.st_ino != PID_NS_INIT_INO)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED,
				 "ptd runs in a PID namespace of its own (a "
				 "container's): its BPF programs see the "
				 "machine's process ids, not this namespace's: "
				 "%s need ptd in the initial PID namespace",
				 what);
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
