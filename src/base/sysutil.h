/*
 * sysutil — libc-only system helpers: the monotonic millisecond clock and
 * random bytes, a detached thread. They use nothing else of ours, so sbxfs-init (PID 1 of a
 * local lease, libc only) links this file too.
 */
#ifndef SBX_SYSUTIL_H
#define SBX_SYSUTIL_H

#include <pthread.h>
#include <stddef.h>

/* Milliseconds of CLOCK_MONOTONIC. */
long long sbx_now_ms(void);
/*
 * Fills buf with len bytes from the kernel's random source (getrandom,
 * retried on EINTR and short reads). 0 or -errno.
 */
int sbx_random_bytes(void *buf, size_t len);
/* Starts fn(arg) on a detached thread (its id in *t when t); 0 or the errno. */
int sbx_thread_detached(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
