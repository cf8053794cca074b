/*
 * init_seccomp — the seccomp filter sbxfs-init installs for every process
 * of a local lease (written by hand as classic BPF: no libseccomp).
 *
 * A denylist of the obvious escapes, answered with EPERM (ENOSYS for
 * clone3, so that libc falls back to clone, whose flags can be checked):
 * kernel keyrings (keyctl, add_key, request_key), bpf, userfaultfd,
 * perf_event_open, module loading, every mount call (the old mount API and
 * the new fsopen/fsmount family), pivot_root, new namespaces (unshare,
 * setns, clone with a CLONE_NEW* flag: user namespaces are the usual door
 * to kernel bugs), open_by_handle_at (the "shocker" escape), kexec,
 * swap, acct, quotactl, io_uring, and raw port I/O. A syscall of another
 * ABI than the native one (x32 and i386 on x86-64) is refused outright.
 * ptrace stays: the pid namespace already limits it to the lease, and
 * debuggers are a daily story. doc/DESIGN.md ("Threat model") compares
 * this with bubblewrap, crun and systemd-nspawn.
 */
#include "init_seccomp.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "sbxfs-init: add this architecture's AUDIT_ARCH"
#endif

#define CLONE_NEW_ANY                                                                              \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |             \
	 CLONE_NEWPID | CLONE_NEWNET | 0x00000080 /* CLONE_NEWTIME */)

static const int denied[] = {
    SYS_keyctl,
    SYS_add_key,
    SYS_request_key,
    SYS_bpf,
    SYS_userfaultfd,
    SYS_perf_event_open,
    SYS_init_module,
    SYS_finit_module,
    SYS_delete_module,
    SYS_mount,
    SYS_umount2,
    SYS_pivot_root,
    SYS_open_tree,
    SYS_move_mount,
    SYS_fsopen,
    SYS_fsconfig,
    SYS_fsmount,
    SYS_fspick,
    SYS_mount_setattr,
    SYS_unshare,
    SYS_setns,
    SYS_open_by_handle_at,
    SYS_kexec_load,
    SYS_kexec_file_load,
    SYS_swapon,
    SYS_swapoff,
    SYS_acct,
    SYS_quotactl,
    SYS_io_uring_setup,
    SYS_io_uring_enter,
    SYS_io_uring_register,
#ifdef SYS_iopl
    SYS_iopl,
    SYS_ioperm,
#endif
#ifdef SYS_umount
    SYS_umount,
#endif
};

#define DENIED_N (sizeof(denied) / sizeof(denied[0]))

static struct sock_filter op(unsigned short code, unsigned k, size_t jt, size_t jf)
{
	return (struct sock_filter){code, (unsigned char)jt, (unsigned char)jf, k};
}

#define LD(off) op(BPF_LD | BPF_W | BPF_ABS, (off), 0, 0)
#define RET(v) op(BPF_RET | BPF_K, (v), 0, 0)
#define JEQ(k, jt, jf) op(BPF_JMP | BPF_JEQ | BPF_K, (k), (jt), (jf))

int lcl_seccomp_install(void)
{
	/*
	 *  0-2   arch check        3   load nr        4-5  x32 check
	 *  6..   one JEQ per denied call, to EPERM
	 *  C     clone3 -> ENOSYS (C+1)
	 *  C+2   clone? no: ALLOW; C+3 load flags; C+4 CLONE_NEW* -> EPERM
	 *  C+5   ALLOW             C+6 EPERM
	 */
	struct sock_filter f[DENIED_N + 13];
	const size_t C = 6 + DENIED_N, allow = C + 5, eperm = C + 6;
	size_t n = 0;

	f[n++] = LD(offsetof(struct seccomp_data, arch));
	f[n++] = JEQ(NATIVE_ARCH, 1, 0);
	f[n++] = RET(SECCOMP_RET_ERRNO | ENOSYS); /* another ABI */
	f[n++] = LD(offsetof(struct seccomp_data, nr));
	/* x32 syscalls share the x86-64 arch value, with bit 30 set */
	f[n++] = op(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1);
	f[n++] = RET(SECCOMP_RET_ERRNO | ENOSYS);
	for (size_t i = 0; i < DENIED_N; i++, n++)
		f[n] = JEQ((unsigned)denied[i], eperm - n - 1, 0);
	f[n++] = JEQ(SYS_clone3, 0, 1);
	f[n++] = RET(SECCOMP_RET_ERRNO | ENOSYS); /* libc falls back to clone */
	f[n] = JEQ(SYS_clone, 0, allow - n - 1);
	n++;
	f[n++] = LD(offsetof(struct seccomp_data, args[0]));
	f[n] = op(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEW_ANY, eperm - n - 1, 0);
	n++;
	f[n++] = RET(SECCOMP_RET_ALLOW);
	f[n++] = RET(SECCOMP_RET_ERRNO | EPERM);

	struct sock_fprog prog = {.len = (unsigned short)n, .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return -errno;
	return 0;
}
