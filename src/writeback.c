/*
 * writeback — the write-back queue of a remote lease (see writeback.h).
 *
 * An item is a cache entry (with a reference of its own) and the order it
 * was queued in. Up to SBX_WB_WORKERS detached threads take items in
 * order and upload them through fsc_upload_bg(); the entry's busy claim
 * (cache_file.c) serialises an upload with opens, settles, fsync and
 * other uploads of the same entry, so an fsync either finds the entry
 * clean or uploads it itself. A worker holds a lease reference while it
 * lives (teardown never joins a thread that may hold the last one) and
 * ends when the queue is empty.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fsutil.h"
#include "base/log.h"
#include "base/sysutil.h"
#include "base/xalloc.h"
#include "cache.h"
#include "fs_cached.h"
#include "lease.h"
#include "writeback.h"

struct wb_item {
	struct wb_item *next;
	struct sbx_cfile *cf;
	unsigned long long seq;
	unsigned long wgen; /* cf's change count when queued */
	off_t bytes;
	long long at_ms; /* when queued */
	bool inflight;
	bool fresh; /* a new file when queued: may join a batch */
};

struct sbx_wb {
	struct sbx_lease *l;
	pthread_mutex_t lock;
	pthread_cond_t cond;  /* an item is done, a hold ended, a worker left */
	struct wb_item *head; /* in queue order; in-flight items stay until done */
	unsigned max;	      /* items queued or in flight */
	unsigned items, inflight, holds;
	unsigned threads; /* workers taking items */
	unsigned busy;	  /* of them, those uploading a batch (inflight counts items) */
	unsigned leaving; /* workers done with items, not yet past their lease put */
	long long bytes;
	unsigned long long seq;
	unsigned drains; /* callers waiting in sbx_wb_drain: no lingering */
	bool stopping;
};

static unsigned wb_max = SBX_WB_DEFAULT; /* -o writeback=N; 0: off */

void sbx_wb_set_max(unsigned max)
{
	wb_max = max;
}

unsigned sbx_wb_get_max(void)
{
	return wb_max;
}

struct sbx_wb *sbx_wb_new(struct sbx_lease *l)
{
	if (!wb_max)
		return NULL;
	struct sbx_wb *wb = sbx_xcalloc(1, sizeof(*wb));
	wb->l = l;
	wb->max = wb_max;
	pthread_mutex_init(&wb->lock, NULL);
	pthread_cond_init(&wb->cond, NULL);
	return wb;
}

void sbx_wb_free(struct sbx_wb *wb)
{
	if (!wb)
		return;
	/* No worker is left (each held a lease reference); queued items lose theirs. */
	while (wb->head) {
		struct wb_item *it = wb->head;
		wb->head = it->next;
		sbx_cache_file_put(wb->l->cache, it->cf);
		free(it);
	}
	pthread_mutex_destroy(&wb->lock);
	pthread_cond_destroy(&wb->cond);
	free(wb);
}

/*
 * A worker's last act. When others hold the lease (sbx_wb_stop's caller
 * among them), the reference is dropped and `leaving` counted down under
 * the mount's lock, so that a stopper who saw none left and then took
 * that lock knows no worker touches the lease or mount again. When this
 * may be the last reference, no stopper exists: counted down, then put.
 */
static void worker_leave(struct sbx_wb *wb)
{
	struct sbx_lease *l = wb->l;
	pthread_mutex_lock(&l->mount->lock);
	if (l->refs > 1) {
		l->refs--;
		pthread_mutex_lock(&wb->lock);
		wb->leaving--;
		pthread_cond_broadcast(&wb->cond);
		pthread_mutex_unlock(&wb->lock);
		pthread_mutex_unlock(&l->mount->lock);
		return;
	}
	pthread_mutex_unlock(&l->mount->lock);
	pthread_mutex_lock(&wb->lock);
	wb->leaving--;
	pthread_cond_broadcast(&wb->cond);
	pthread_mutex_unlock(&wb->lock);
	sbx_lease_put(l);
}

static struct wb_item *next_waiting_locked(struct sbx_wb *wb)
{
	for (struct wb_item *it = wb->head; it; it = it->next)
		if (!it->inflight)
			return it;
	return NULL;
}

/* Can it and the batch so far (n items, bytes) go in one write_new_many? */
static bool batchable(const struct wb_item *it, size_t n, off_t bytes)
{
	return it->fresh && it->bytes <= SBX_WB_BATCH_FILE_MAX && n < SBX_WB_BATCH_MAX &&
	       bytes + it->bytes <= SBX_WB_BATCH_BYTES;
}

/* cf is in flight in another item (a second item of a file rewritten meanwhile). */
static bool cf_inflight_locked(struct sbx_wb *wb, const struct sbx_cfile *cf)
{
	for (struct wb_item *it = wb->head; it; it = it->next)
		if (it->inflight && it->cf == cf)
			return true;
	return false;
}

/*
 * Takes the next batch (lock held): the first waiting item, and when it
 * is a new file, the waiting new files after it that fit (SBX_WB_BATCH_*).
 * An entry in flight elsewhere is left for later: two workers never claim
 * the same entry, so their claims cannot cross.
 */
static size_t take_batch_locked(struct sbx_wb *wb, struct wb_item **out)
{
	struct wb_item *first = next_waiting_locked(wb);
	off_t bytes = 0;
	size_t n = 0;
	bool many = first && wb->l->prov->write_new_many && batchable(first, 0, 0);
	for (struct wb_item *it = first; it && (n == 0 || many); it = it->next) {
		if (it->inflight || cf_inflight_locked(wb, it->cf))
			continue;
		if (n && !batchable(it, n, bytes))
			continue;
		bool dup = false;
		for (size_t i = 0; i < n; i++)
			dup = dup || out[i]->cf == it->cf;
		if (dup)
			continue;
		it->inflight = true;
		wb->inflight++;
		bytes += it->bytes;
		out[n++] = it;
	}
	return n;
}

/*
 * How long a worker waits for more new files before sending a short batch
 * (ms, 0: send now). While files keep coming (`tar x`, `cp -r` close one
 * every few milliseconds), it waits until none came for SBX_WB_IDLE_MS
 * or the first waiting one is SBX_WB_LINGER_MS old; not at all when a
 * batch's worth waits, half the queue waits or it is nearly full (those in
 * flight count: a full queue makes closes upload themselves), or someone
 * drains, holds or stops the queue. Counting those in flight as "half
 * full" sent 6 files per request while a batch of 32 was in flight.
 */
static long linger_ms_locked(struct sbx_wb *wb)
{
	struct wb_item *first = next_waiting_locked(wb);
	long long now = sbx_now_ms(), last = 0, idle, age;
	unsigned waiting = 0;
	if (!first || !wb->l->prov->write_new_many || !first->fresh || wb->drains || wb->stopping ||
	    wb->holds)
		return 0;
	for (struct wb_item *it = first; it; it = it->next) {
		if (!it->inflight && it->fresh)
			waiting++;
		if (!it->inflight && it->at_ms > last)
			last = it->at_ms;
	}
	/* Half the queue waits, or it is nearly full with those in flight: send. */
	if (waiting >= SBX_WB_BATCH_MAX || 2 * (wb->items - wb->inflight) >= wb->max ||
	    wb->items + 2 >= wb->max)
		return 0;
	idle = last + SBX_WB_IDLE_MS - now;
	age = first->at_ms + SBX_WB_LINGER_MS - now;
	if (idle <= 0 || age <= 0)
		return 0;
	return (long)(idle < age ? idle : age);
}

static void wait_ms_locked(struct sbx_wb *wb, long ms)
{
	struct timespec ts;
	sbx_deadline_in(ms, &ts);
	sbx_cond_wait_until(&wb->cond, &wb->lock, &ts);
}

static void *worker(void *arg)
{
	struct sbx_wb *wb = arg;
	struct wb_item *batch[SBX_WB_BATCH_MAX];
	struct sbx_cfile *cfs[SBX_WB_BATCH_MAX];
	int rcs[SBX_WB_BATCH_MAX];
	long linger;
	size_t n;
	pthread_mutex_lock(&wb->lock);
	for (;;) {
		while (wb->holds && next_waiting_locked(wb))
			pthread_cond_wait(&wb->cond, &wb->lock);
		if ((linger = linger_ms_locked(wb)) > 0) {
			wait_ms_locked(wb, linger);
			continue;
		}
		n = take_batch_locked(wb, batch);
		if (!n)
			break;
		wb->busy++;
		pthread_mutex_unlock(&wb->lock);
		for (size_t i = 0; i < n; i++)
			cfs[i] = batch[i]->cf;
		if (n == 1)
			rcs[0] = fsc_upload_bg(wb->l, cfs[0]);
		else
			fsc_upload_bg_many(wb->l, cfs, n, rcs);
		pthread_mutex_lock(&wb->lock);
		wb->busy--;
		for (size_t i = 0; i < n; i++) {
			struct wb_item *it = batch[i];
			if (rcs[i])
				sbx_cache_file_bg_failed(wb->l->cache, it->cf);
			wb->inflight--;
			wb->items--;
			wb->bytes -= it->bytes;
			for (struct wb_item **p = &wb->head; *p; p = &(*p)->next) {
				if (*p == it) {
					*p = it->next;
					break;
				}
			}
			sbx_cache_file_put(wb->l->cache, it->cf);
			free(it);
		}
		pthread_cond_broadcast(&wb->cond);
	}
	/* Counted out now: an item queued from here on starts a new worker. */
	wb->threads--;
	wb->leaving++;
	pthread_mutex_unlock(&wb->lock);
	worker_leave(wb);
	return NULL;
}

/*
 * Counts a new worker in if the waiting items outnumber the idle workers
 * (lock held); the caller starts it with start_worker() once unlocked
 * (the lease reference takes the mount's lock, which is taken before ours).
 * Idle is threads minus busy, not minus inflight: a batch puts many items
 * in flight on one worker (threads - inflight wrapped around, and while
 * one batch of 30 was out no second worker started: the queue filled and
 * closes uploaded themselves, daytona's `tar x` at 20 ms).
 */
static bool want_worker_locked(struct sbx_wb *wb)
{
	unsigned waiting = wb->items - wb->inflight;
	if (wb->threads >= SBX_WB_WORKERS || wb->threads - wb->busy >= waiting)
		return false;
	wb->threads++;
	return true;
}

static void start_worker(struct sbx_wb *wb)
{
	int rc;
	sbx_lease_hold(wb->l);
	rc = sbx_thread_detached(NULL, worker, wb);
	if (rc == 0)
		return;
	sbx_log(SBX_LOG_WARN, "lease %s: cannot start a write-back worker (%s)", wb->l->name,
		strerror(rc));
	pthread_mutex_lock(&wb->lock);
	wb->threads--;
	pthread_cond_broadcast(&wb->cond);
	pthread_mutex_unlock(&wb->lock);
	sbx_lease_put(wb->l);
}

bool sbx_wb_queue(struct sbx_wb *wb, struct sbx_cfile *cf, unsigned long wgen, off_t bytes)
{
	struct wb_item **tail;
	bool ok = false, start = false, fresh;
	if (!wb)
		return false;
	fresh = sbx_cache_file_is_new(wb->l->cache, cf);
	pthread_mutex_lock(&wb->lock);
	if (wb->stopping)
		goto out;
	for (tail = &wb->head; *tail; tail = &(*tail)->next) {
		/*
		 * Queued already and not started (it takes the new data), or in
		 * flight with no write since it was queued (its upload read the
		 * data after that): nothing to add. The release after a close's
		 * flush lands here.
		 */
		if ((*tail)->cf == cf && (!(*tail)->inflight || (*tail)->wgen == wgen)) {
			ok = true;
			goto out;
		}
	}
	if (wb->items >= wb->max || (wb->items && wb->bytes + bytes > SBX_WB_MAX_BYTES))
		goto out; /* full: the caller uploads itself */
	struct wb_item *it = sbx_xcalloc(1, sizeof(*it));
	sbx_cache_file_hold(wb->l->cache, cf);
	it->cf = cf;
	it->wgen = wgen;
	it->bytes = bytes;
	it->fresh = fresh;
	it->at_ms = sbx_now_ms();
	it->seq = ++wb->seq;
	*tail = it;
	wb->items++;
	wb->bytes += bytes;
	start = want_worker_locked(wb);
	ok = true;
out:
	sbx_log(SBX_LOG_DEBUG, "lease %s: write-back %s (%u queued, %u in flight, %u workers)",
		wb->l->name, ok ? "queued" : "full or stopping: close uploads", wb->items,
		wb->inflight, wb->threads);
	pthread_mutex_unlock(&wb->lock);
	if (start)
		start_worker(wb);
	return ok;
}

bool sbx_wb_failed_take(struct sbx_wb *wb, struct sbx_cfile *cf)
{
	return wb && sbx_cache_file_bg_failed_take(wb->l->cache, cf);
}

void sbx_wb_hold(struct sbx_wb *wb)
{
	if (!wb)
		return;
	pthread_mutex_lock(&wb->lock);
	wb->holds++;
	while (wb->inflight)
		pthread_cond_wait(&wb->cond, &wb->lock);
	pthread_mutex_unlock(&wb->lock);
}

void sbx_wb_unhold(struct sbx_wb *wb)
{
	if (!wb)
		return;
	pthread_mutex_lock(&wb->lock);
	wb->holds--;
	pthread_cond_broadcast(&wb->cond);
	pthread_mutex_unlock(&wb->lock);
}

/* An item queued at or before seq is still there (lock held). */
static bool pending_locked(struct sbx_wb *wb, unsigned long long seq)
{
	for (struct wb_item *it = wb->head; it; it = it->next)
		if (it->seq <= seq)
			return true;
	return false;
}

void sbx_wb_drain(struct sbx_wb *wb)
{
	if (!wb)
		return;
	pthread_mutex_lock(&wb->lock);
	unsigned long long seq = wb->seq;
	wb->drains++; /* lingering workers send at once */
	pthread_cond_broadcast(&wb->cond);
	while (pending_locked(wb, seq))
		pthread_cond_wait(&wb->cond, &wb->lock);
	wb->drains--;
	pthread_mutex_unlock(&wb->lock);
}

void sbx_wb_stop(struct sbx_wb *wb)
{
	if (!wb)
		return;
	pthread_mutex_lock(&wb->lock);
	wb->stopping = true;
	pthread_cond_broadcast(&wb->cond);
	while (wb->threads || wb->leaving)
		pthread_cond_wait(&wb->cond, &wb->lock);
	pthread_mutex_unlock(&wb->lock);
	/* A worker counted out under the mount's lock: past it, none is left. */
	pthread_mutex_lock(&wb->l->mount->lock);
	pthread_mutex_unlock(&wb->l->mount->lock);
}

int sbx_fs_drain(struct sbx_lease *l, struct sbx_error *err)
{
	sbx_wb_drain(l->wb);
	/* and what no queue holds: a close's upload, an orphan's (lease timer) */
	if (l->cache)
		sbx_cache_wait_uploads(l->cache);
	/* and the failed uploads, whatever their back-off: a run sees what close returned for */
	return sbx_fs_save_owed(l, err);
}

int sbx_fs_drain_for_run(struct sbx_lease *l, struct sbx_error *err)
{
	int rc = sbx_fs_drain(l, err);
	if (rc)
		sbx_error_prefix(err, "the run was not started: a file written in fs/ has not "
				      "reached the sandbox (it is kept, and retried)");
	return rc;
}
