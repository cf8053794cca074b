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
	while (wg->n && pthread_cond_timedwait(&wg->cond, &wg->lock, deadline) == 0)
		;
	n = wg->n;
	pthread_mutex_unlock(&wg->lock);
	return n;
}
