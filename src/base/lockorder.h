/*
 * lockorder — the core's lock order, checked in debug builds. Each lock of
 * the order has a level (outermost lowest); sbx_lock() notes it per thread
 * and, with SBX_LOCK_DEBUG defined (configure --enable-debug, the ASan
 * build of scripts/test), aborts with a message when a thread takes a
 * lock whose level is not above every level it holds (two leases' locks
 * at once included), or when a provider call starts with one held
 * (sbx_lock_assert_none). Without SBX_LOCK_DEBUG the wrappers are the
 * bare pthread calls. It is not a deadlock detector for other locks: a
 * lock taken with pthread_mutex_lock directly is not seen.
 */
#ifndef SBX_LOCKORDER_H
#define SBX_LOCKORDER_H

#include <pthread.h>

/*
 * The order of lease.h, outermost first, with the remote metadata
 * engine's two locks (providers/rmeta_engine.h), taken in a provider call
 * and reporting to the lease (err) while a batch is applied.
 */
enum sbx_lock_level {
	SBX_LOCK_SAVE = 1,	/* mount.save_lock */
	SBX_LOCK_MOUNT = 2,	/* mount.lock */
	SBX_LOCK_LEASE = 3,	/* lease.lock */
	SBX_LOCK_RME_FLUSH = 4, /* sbx_rme.flush_lock */
	SBX_LOCK_RME = 5,	/* sbx_rme.lock */
	SBX_LOCK_ERR = 6,	/* mount.err_lock (a leaf) */
};

/* Notes that this thread takes/drops a lock of `level` (aborts on a wrong order). */
void sbx_lockorder_take(int level, const char *where);
void sbx_lockorder_drop(int level);
/* Aborts if this thread holds any lock of the order (before a provider call). */
void sbx_lockorder_none(const char *where);

#define SBX_LOCK_STR2(x) #x
#define SBX_LOCK_STR(x) SBX_LOCK_STR2(x)
#define SBX_LOCK_HERE __FILE__ ":" SBX_LOCK_STR(__LINE__)

#ifdef SBX_LOCK_DEBUG
#define sbx_lock(mu, level)                                                                        \
	do {                                                                                       \
		sbx_lockorder_take((level), SBX_LOCK_HERE);                                        \
		pthread_mutex_lock(mu);                                                            \
	} while (0)
#define sbx_unlock(mu, level)                                                                      \
	do {                                                                                       \
		pthread_mutex_unlock(mu);                                                          \
		sbx_lockorder_drop(level);                                                         \
	} while (0)
#define sbx_lock_assert_none() sbx_lockorder_none(SBX_LOCK_HERE)
#else
#define sbx_lock(mu, level) pthread_mutex_lock(mu)
#define sbx_unlock(mu, level) pthread_mutex_unlock(mu)
#define sbx_lock_assert_none() ((void)0)
#endif

#endif
