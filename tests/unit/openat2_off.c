/* openat2_off — see openat2_off.h. */
#include "openat2_off.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int kernel_open_in_root(int rootfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
	    .flags = (unsigned long long)(flags | O_CLOEXEC),
	    .mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode : 0,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd;
	/*
	 * With "..", RESOLVE_IN_ROOT answers EAGAIN when a rename or mount
	 * happened anywhere during the lookup (another test's mount, in CI):
	 * tried again, as lcl_resolve_open does; the answer compared is the
	 * settled one.
	 */
	for (int tries = 0; tries < 50; tries++) {
		fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
		if (fd >= 0 || (errno != EAGAIN && errno != EINTR))
			break;
	}
	return fd < 0 ? -errno : (int)fd;
}

bool refuse_openat2(int e)
{
	const char *fork = getenv("CK_FORK");
	if (fork && !strcmp(fork, "no"))
		return false; /* the filter would outlive the test */
	/* No architecture check: the tests run the build's own architecture. */
	struct sock_filter filter[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)e & SECCOMP_RET_DATA)),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
	ck_assert_int_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	ck_assert_int_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
	ck_assert_int_eq(kernel_open_in_root(AT_FDCWD, "/", O_PATH, 0), -e);
	return true;
}
