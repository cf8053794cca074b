/*
 * rmeta_engine — see rmeta_engine.h: the queue a remote provider holds
 * and applies, with its in-flight batch, locks and delay timer.
 */
#include "rmeta_engine.h"
#include "base/log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/fsutil.h"
#include "base/lockorder.h"

static void batch_init(struct sbx_rme_batch *b)
{
	memset(b, 0, sizeof(*b));
	sbx_rmq_init(&b->q);
	sbx_rmq_init(&b->native);
}

static void batch_clear(struct sbx_rme_batch *b)
{
	sbx_rmq_clear(&b->q);
	sbx_rmq_clear(&b->native);
	batch_init(b);
}

static size_t batch_n(const struct sbx_rme_batch *b)
{
	return b->q.n + b->native.n;
}

void sbx_rme_init(struct sbx_rme *e, const struct sbx_rme_slots *slots, void *ctx)
{
	memset(e, 0, sizeof(*e));
	e->slots = slots;
	e->ctx = ctx;
	pthread_mutex_init(&e->flush_lock, NULL);
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->wake, NULL);
	batch_init(&e->pending);
	batch_init(&e->inflight);
}

void sbx_rme_stop_timer(struct sbx_rme *e)
{
	bool on;
	sbx_lock(&e->lock, SBX_LOCK_RME);
	e->stopping = true;
	on = e->timer_on;
	e->timer_on = false;
	pthread_cond_signal(&e->wake);
	sbx_unlock(&e->lock, SBX_LOCK_RME);
	if (on)
		pthread_join(e->timer, NULL);
}

void sbx_rme_destroy(struct sbx_rme *e)
{
	sbx_rme_stop_timer(e);
	batch_clear(&e->pending);
	batch_clear(&e->inflight);
	pthread_cond_destroy(&e->wake);
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->flush_lock);
}

/* Whether b holds an op of lanes that an operation on path with need depends on. */
static bool batch_needs(const struct sbx_rme_batch *b, const char *path, enum sbx_rmq_need need,
			unsigned lanes)
{
	return ((lanes & SBX_RME_SCRIPT) && sbx_rmq_needs(&b->q, path, need)) ||
	       ((lanes & SBX_RME_NATIVE) && sbx_rmq_needs(&b->native, path, need));
}

void sbx_rme_flush(struct sbx_rme *e, const char *path, enum sbx_rmq_need need, unsigned lanes)
{
	const struct sbx_rme_slots *s = e->slots;
	bool wait;
	if (!path)
		need = SBX_RMQ_NEED_ALL;
	sbx_lock(&e->lock, SBX_LOCK_RME);
	wait = batch_needs(&e->pending, path, need, lanes) ||
	       batch_needs(&e->inflight, path, need, lanes);
	sbx_unlock(&e->lock, SBX_LOCK_RME);
	if (!wait)
		return;

	/* Taking flush_lock waits for the batch in flight. */
	sbx_lock(&e->flush_lock, SBX_LOCK_RME_FLUSH);
	sbx_lock(&e->lock, SBX_LOCK_RME);
	if (!batch_needs(&e->pending, path, need, lanes)) {
		sbx_unlock(&e->lock, SBX_LOCK_RME);
		sbx_unlock(&e->flush_lock, SBX_LOCK_RME_FLUSH);
		return;
	}
	sbx_log(SBX_LOG_DEBUG, "metadata batch of %zu ops (+%zu native), for %s", e->pending.q.n,
		e->pending.native.n, path ? path : "everything (full, timer, run)");
	e->inflight = e->pending; /* the in-flight batch is empty between flushes */
	batch_init(&e->pending);
	if (s->gather)
		sbx_rmq_gather(&e->inflight.q);
	sbx_unlock(&e->lock, SBX_LOCK_RME);

	/* Only this thread changes inflight until it is cleared below. */
	if (s->before)
		s->before(e->ctx, &e->inflight);
	s->apply(e->ctx, &e->inflight);
	if (s->after)
		s->after(e->ctx, &e->inflight);

	sbx_lock(&e->lock, SBX_LOCK_RME);
	batch_clear(&e->inflight);
	sbx_unlock(&e->lock, SBX_LOCK_RME);
	sbx_unlock(&e->flush_lock, SBX_LOCK_RME_FLUSH);
}

static void *timer_main(void *arg)
{
	struct sbx_rme *e = arg;
	sbx_lock(&e->lock, SBX_LOCK_RME);
	while (!e->stopping) {
		long long due = e->last_op_ms + e->slots->delay_ms, now = sbx_now_ms();
		if (!batch_n(&e->pending)) {
			pthread_cond_wait(&e->wake, &e->lock);
		} else if (now < due) {
			struct timespec ts;
			sbx_deadline_in((long)(due - now), &ts);
			sbx_cond_wait_until(&e->wake, &e->lock, &ts);
		} else {
			sbx_unlock(&e->lock, SBX_LOCK_RME);
			sbx_rme_flush(e, NULL, SBX_RMQ_NEED_ALL, SBX_RME_BOTH);
			sbx_lock(&e->lock, SBX_LOCK_RME);
		}
	}
	sbx_unlock(&e->lock, SBX_LOCK_RME);
	return NULL;
}

void sbx_rme_stop(struct sbx_rme *e)
{
	sbx_rme_stop_timer(e);
	sbx_rme_flush(e, NULL, SBX_RMQ_NEED_ALL, SBX_RME_BOTH);
}

size_t sbx_rme_drop(struct sbx_rme *e)
{
	size_t n;
	sbx_lock(&e->lock, SBX_LOCK_RME);
	n = batch_n(&e->pending);
	batch_clear(&e->pending);
	sbx_unlock(&e->lock, SBX_LOCK_RME);
	return n;
}

/* Whether path is new to b's native lane (lock held). */
static bool native_new_path(const struct sbx_rme_batch *b, const char *path)
{
	for (size_t i = 0; i < b->native.n; i++)
		if (!strcmp(b->native.ops[i].path, path))
			return false;
	return true;
}

/* Appends a copy of op to lane of b, counted as the slots say (lock held). */
static void batch_put(const struct sbx_rme_slots *s, struct sbx_rme_batch *b, bool native,
		      const struct sbx_rmq_op *op)
{
	/* native ops of one path are one call: counted once; a merged one not at all */
	bool counted = !native || native_new_path(b, op->path);
	if (native) {
		sbx_rmq_add(&b->native, op);
	} else if (sbx_rmq_add_merged(&b->q, op)) {
		return;
	}
	if (native && counted)
		b->n_native_paths++;
	if (!native && sbx_rmq_removal(op->kind))
		b->n_removals++;
	if (s->cost && counted)
		b->bytes += s->cost(op, native);
}

void sbx_rme_add(struct sbx_rme *e, enum sbx_rme_lane lane, const struct sbx_rmq_op *ops, size_t n)
{
	const struct sbx_rme_slots *s = e->slots;
	struct sbx_rme_batch *b = &e->pending;
	bool full;
	sbx_lock(&e->lock, SBX_LOCK_RME);
	for (size_t i = 0; i < n; i++)
		batch_put(s, b, lane == SBX_RME_NATIVE, &ops[i]);
	e->last_op_ms = sbx_now_ms();
	if (s->delay_ms > 0 && !e->timer_on && !e->stopping)
		e->timer_on = !pthread_create(&e->timer, NULL, timer_main, e);
	pthread_cond_signal(&e->wake);
	full = s->full ? s->full(b) : batch_n(b) >= s->max_ops;
	sbx_unlock(&e->lock, SBX_LOCK_RME);
	if (full)
		sbx_rme_flush(e, NULL, SBX_RMQ_NEED_ALL, SBX_RME_BOTH);
}

/* Counts b's ops again, after some were taken out (lock held). */
static void batch_recount(const struct sbx_rme_slots *s, struct sbx_rme_batch *b)
{
	struct sbx_rme_batch old = *b;
	batch_init(b);
	for (size_t i = 0; i < old.q.n; i++)
		batch_put(s, b, false, &old.q.ops[i]);
	for (size_t i = 0; i < old.native.n; i++)
		batch_put(s, b, true, &old.native.ops[i]);
	batch_clear(&old);
}

bool sbx_rme_rename_take(struct sbx_rme *e, const char *from, const char *to,
			 struct sbx_rme_batch *held)
{
	bool ok;
	batch_init(held);
	sbx_lock(&e->lock, SBX_LOCK_RME);
	ok = !batch_needs(&e->inflight, from, SBX_RMQ_NEED_TOUCH, SBX_RME_BOTH) &&
	     !batch_needs(&e->inflight, to, SBX_RMQ_NEED_TOUCH, SBX_RME_BOTH) &&
	     !batch_needs(&e->pending, to, SBX_RMQ_NEED_TOUCH, SBX_RME_BOTH) &&
	     sbx_rmq_only_attrs(&e->pending.q, from) &&
	     sbx_rmq_only_attrs(&e->pending.native, from);
	if (ok) {
		sbx_rmq_take_path(&held->q, &e->pending.q, from);
		sbx_rmq_take_path(&held->native, &e->pending.native, from);
		ok = batch_n(held) > 0;
		if (ok)
			batch_recount(e->slots, &e->pending);
	}
	sbx_unlock(&e->lock, SBX_LOCK_RME);
	return ok;
}

void sbx_rme_rename_done(struct sbx_rme *e, struct sbx_rme_batch *held, const char *path)
{
	sbx_rmq_repath(&held->q, path);
	sbx_rmq_repath(&held->native, path);
	if (held->q.n)
		sbx_rme_add(e, SBX_RME_SCRIPT, held->q.ops, held->q.n);
	if (held->native.n)
		sbx_rme_add(e, SBX_RME_NATIVE, held->native.ops, held->native.n);
	batch_clear(held);
}

void sbx_rme_rename_begin(struct sbx_rme *e, const char *from, const char *to, bool exchange,
			  struct sbx_rme_batch *held)
{
	batch_init(held);
	if (exchange || !strcmp(from, to) || !sbx_rme_rename_take(e, from, to, held))
		sbx_rme_flush(e, from, SBX_RMQ_NEED_TOUCH, SBX_RME_BOTH);
	sbx_rme_flush(e, to, SBX_RMQ_NEED_TOUCH, SBX_RME_BOTH);
}

bool sbx_rme_follow_link(struct sbx_rme *e, const char *path)
{
	const char *to = NULL;
	bool ok;
	sbx_lock(&e->lock, SBX_LOCK_RME);
	for (size_t i = 0; i < e->pending.q.n; i++) {
		const struct sbx_rmq_op *op = &e->pending.q.ops[i];
		if (op->kind == SBX_RMQ_LINK && op->arg && !strcmp(op->arg, path))
			to = op->path;
	}
	/* the new name must outlive the batch (no removal of it waits after the link) */
	ok = to && sbx_rmq_fate(&e->pending.q, to) == SBX_RMQ_MADE &&
	     !batch_needs(&e->inflight, path, SBX_RMQ_NEED_TOUCH, SBX_RME_BOTH) &&
	     sbx_rmq_only_attrs(&e->pending.native, path);
	/*
	 * Renamed where they are, not moved to the end: one inode, and a
	 * chmod through the new name queued after them is newer (link a b,
	 * chmod b, unlink a left b with a's older mode).
	 */
	if (ok && sbx_rmq_rename_path(&e->pending.native, path, to))
		batch_recount(e->slots, &e->pending);
	sbx_unlock(&e->lock, SBX_LOCK_RME);
	return ok;
}

enum sbx_rmq_fate sbx_rme_fate(struct sbx_rme *e, const char *path)
{
	enum sbx_rmq_fate f;
	sbx_lock(&e->lock, SBX_LOCK_RME);
	f = sbx_rmq_fate(&e->pending.q, path);
	if (f == SBX_RMQ_UNTOUCHED)
		f = sbx_rmq_fate(&e->inflight.q, path);
	sbx_unlock(&e->lock, SBX_LOCK_RME);
	return f;
}

void sbx_rme_overlay(struct sbx_rme *e, const char *path, struct sbx_stat *st)
{
	sbx_lock(&e->lock, SBX_LOCK_RME);
	sbx_rmq_overlay(&e->inflight.q, path, st);
	sbx_rmq_overlay(&e->inflight.native, path, st);
	sbx_rmq_overlay(&e->pending.q, path, st);
	sbx_rmq_overlay(&e->pending.native, path, st);
	sbx_unlock(&e->lock, SBX_LOCK_RME);
}

/* Appends copies of q's ops under path (itself, and its entries or, with subtree, all below). */
static void view_add(struct sbx_rmq_queue *view, const struct sbx_rmq_queue *q, const char *path,
		     bool subtree)
{
	for (size_t i = 0; i < q->n; i++)
		if (sbx_rmq_under(q->ops[i].path, path, subtree))
			sbx_rmq_add(view, &q->ops[i]);
}

void sbx_rme_view(struct sbx_rme *e, const char *path, bool subtree, struct sbx_rmq_queue *view)
{
	sbx_rmq_init(view);
	sbx_lock(&e->lock, SBX_LOCK_RME);
	view_add(view, &e->inflight.q, path, subtree);
	view_add(view, &e->inflight.native, path, subtree);
	view_add(view, &e->pending.q, path, subtree);
	view_add(view, &e->pending.native, path, subtree);
	sbx_unlock(&e->lock, SBX_LOCK_RME);
}

void sbx_rme_overlay_view(struct sbx_rme *e, const struct sbx_rmq_queue *view, const char *path,
			  struct sbx_stat *st)
{
	sbx_rmq_overlay(view, path, st);
	sbx_rme_overlay(e, path, st);
}

bool sbx_rme_link_target(struct sbx_rme *e, const char *path, char *buf, size_t size)
{
	const char *t;
	sbx_lock(&e->lock, SBX_LOCK_RME);
	t = sbx_rmq_link_target(&e->pending.q, path);
	if (!t)
		t = sbx_rmq_link_target(&e->inflight.q, path);
	if (t && size)
		snprintf(buf, size, "%s", t);
	sbx_unlock(&e->lock, SBX_LOCK_RME);
	return t != NULL;
}

bool sbx_rme_touches(struct sbx_rme *e, const char *path, bool subtree, unsigned lanes)
{
	enum sbx_rmq_need need = subtree ? SBX_RMQ_NEED_TOUCH : SBX_RMQ_NEED_NEAR;
	bool t;
	sbx_lock(&e->lock, SBX_LOCK_RME);
	t = batch_needs(&e->pending, path, need, lanes) ||
	    batch_needs(&e->inflight, path, need, lanes);
	sbx_unlock(&e->lock, SBX_LOCK_RME);
	return t;
}

void sbx_rme_drop_truncates(struct sbx_rme *e, const char *path)
{
	sbx_lock(&e->lock, SBX_LOCK_RME);
	sbx_rmq_drop_truncates(&e->pending.q, path);
	sbx_unlock(&e->lock, SBX_LOCK_RME);
}
