/*
 * openat2_off — for the tests of the local provider's path resolution:
 * openat2 called directly, and a seccomp filter that makes it fail in the
 * calling process (as valgrind 3.19 and kernels before 5.6 do, ENOSYS).
 * The filter cannot be lifted: call it in a forked test only.
 */
#ifndef OPENAT2_OFF_H
#define OPENAT2_OFF_H

#include <stdbool.h>
#include <sys/types.h>

/* openat2(rootfd, path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): fd or -errno. */
int kernel_open_in_root(int rootfd, const char *path, int flags, mode_t mode);
/* Makes every later openat2 of this process fail with errno e (asserted);
 * false, doing nothing, when the tests do not fork (CK_FORK=no). */
bool refuse_openat2(int e);

#endif
