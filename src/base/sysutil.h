/*
 * sysutil — libc-only system helpers: the monotonic millisecond clock and
 * random bytes, detached threads and a wait for them (sbx_waitgroup). They use nothing
 * else of ours, so sbxfs-init (PID 1 of a local lease, libc only) links this file too.
 */
#ifndef SBX_SYSUTIL_H
#define SBX_SYSUTIL_H

#include <pthread.h>
#include <stddef.h>
#include <time.h>

/* Milliseconds of CLOCK_MONOTONIC. */
long long sbx_now_ms(void);
/*
 * Fills buf with len bytes from the kernel's random source (getrandom,
 * retried on EINTR and short reads). 0 or -errno.
 */
int sbx_random_bytes(void *buf, size_t len);
/* Starts fn(arg) on a detached thread (its id in *t when t); 0 or the errno. */
int sbx_thread_detached(pthread_t *t, void *(*fn)(void *), void *arg);
/* How many detached threads of a kind are at work, and a bounded wait for none of them. */
struct sbx_waitgroup {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned n;
};
#define SBX_WAITGROUP_INIT                                                                         \
	{                                                                                          \
		PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0                             \
	}
void sbx_wg_add(struct sbx_waitgroup *wg);
void sbx_wg_done(struct sbx_waitgroup *wg);
/* Waits until none is at work or deadline (CLOCK_REALTIME) has passed; how many still are. */
unsigned sbx_wg_wait(struct sbx_waitgroup *wg, const struct timespec *deadline);

#endif
