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
 * Time that a stepped wall clock does not move. Every wait has a
 * CLOCK_MONOTONIC deadline: *ts = now + ms (sbx_deadline_in), waited for by
 * sbx_cond_wait_until (0, or ETIMEDOUT once it has passed) whatever clock the
 * condition variable was made with. Durations of seconds (idle time, a
 * lease's lifetime) count CLOCK_BOOTTIME (sbx_boot_s), which also counts a
 * suspended host: a sandbox's own clock ran meanwhile. A boot-clock time is
 * shown and saved as the wall time it stands for (sbx_boot_to_wall) and read
 * back from one (sbx_wall_to_boot); 0, never, stays 0 both ways.
 */
void sbx_deadline_in(long ms, struct timespec *ts);
int sbx_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *lock,
			const struct timespec *deadline);
time_t sbx_boot_s(void);
time_t sbx_boot_to_wall(time_t boot);
time_t sbx_wall_to_boot(time_t wall);
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
/* Waits until none is at work or deadline (sbx_deadline_in) has passed; how many still are. */
unsigned sbx_wg_wait(struct sbx_waitgroup *wg, const struct timespec *deadline);

#endif
