/* sysutil — monotonic milliseconds, random bytes, detached threads and their waits (libc only). */
#include "base/sysutil.h"

#include <errno.h>
#include <sys/random.h>
#include <time.h>

long long sbx_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sbx_deadline_in(long ms, struct timespec *ts)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += ms % 1000 * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

int sbx_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *lock,
			const struct timespec *deadline)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 30)
	return pthread_cond_clockwait(cond, lock, CLOCK_MONOTONIC, deadline);
#else
	/* No clockwait: the wall-clock deadline is made afresh for each wait. */
	struct timespec mono, wall;
	long long left_ns;
	clock_gettime(CLOCK_MONOTONIC, &mono);
	left_ns = (long long)(deadline->tv_sec - mono.tv_sec) * 1000000000LL +
		  (deadline->tv_nsec - mono.tv_nsec);
	if (left_ns <= 0)
		return ETIMEDOUT;
	clock_gettime(CLOCK_REALTIME, &wall);
	left_ns += wall.tv_nsec;
	wall.tv_sec += (time_t)(left_ns / 1000000000LL);
	wall.tv_nsec = (long)(left_ns % 1000000000LL);
	return pthread_cond_timedwait(cond, lock, &wall);
#endif
}

time_t sbx_boot_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec;
}

/*
 * The wall clock minus the boot clock, to the nearest second: one value
 * between two steps of the wall clock. Two clocks read in whole seconds
 * (time(NULL) - sbx_boot_s()) tick apart, so a time shown that way moved
 * a second back and forth within every second (info's createdAt, the
 * lease directory's mtime).
 */
static time_t wall_minus_boot(void)
{
	struct timespec w, b;
	clock_gettime(CLOCK_REALTIME, &w);
	clock_gettime(CLOCK_BOOTTIME, &b);
	long long ns = (long long)(w.tv_sec - b.tv_sec) * 1000000000LL + (w.tv_nsec - b.tv_nsec);
	return (time_t)((ns + 500000000LL) / 1000000000LL);
}

time_t sbx_boot_to_wall(time_t boot)
{
	return boot ? boot + wall_minus_boot() : 0;
}

time_t sbx_wall_to_boot(time_t wall)
{
	return wall ? wall - wall_minus_boot() : 0;
}

int sbx_random_bytes(void *buf, size_t len)
{
	unsigned char *p = buf;
	while (len) {
		ssize_t n = getrandom(p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int sbx_thread_detached(pthread_t *t, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t mine;
	int rc = pthread_attr_init(&attr);
	if (rc)
		return rc;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(t ? t : &mine, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return rc;
}

void sbx_wg_add(struct sbx_waitgroup *wg)
{
	pthread_mutex_lock(&wg->lock);
	wg->n++;
	pthread_mutex_unlock(&wg->lock);
}

void sbx_wg_done(struct sbx_waitgroup *wg)
{
	pthread_mutex_lock(&wg->lock);
	wg->n--;
	pthread_cond_broadcast(&wg->cond);
	pthread_mutex_unlock(&wg->lock);
}

unsigned sbx_wg_wait(struct sbx_waitgroup *wg, const struct timespec *deadline)
{
	unsigned n;
	pthread_mutex_lock(&wg->lock);
	while (wg->n && sbx_cond_wait_until(&wg->cond, &wg->lock, deadline) == 0)
		;
	n = wg->n;
	pthread_mutex_unlock(&wg->lock);
	return n;
}
