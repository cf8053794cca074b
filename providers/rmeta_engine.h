/*
 * rmeta_engine — the engine that holds and applies a remote provider's
 * queue of metadata ops (rmeta_queue.h): the ops waiting, the ops being
 * applied, the locks, the delay timer, fullness, and the questions asked
 * of both (needs, fate, overlay, link target, touches). Both remote
 * providers (e2b, daytona) keep one in their instance and fill its slots:
 * how a taken batch is applied (the provider runs its script and any
 * native call), optional hooks before and after, and its fullness rule.
 *
 * What it is not: it renders and runs nothing itself (the provider's
 * apply slot does, through rmeta_queue.h), records no failure (apply
 * records them against their paths, rmeta.h) and knows no transport.
 *
 * A batch has two lanes: `q`, the ops the provider's script applies, in
 * order, and `native`, ops a native call applies after the script
 * (daytona's /files/permissions for chmod and chown; e2b leaves it
 * empty). A flush takes both lanes of everything waiting as one batch.
 *
 * Behaviour, the same for every provider:
 *  - sbx_rme_flush(path, need) waits only when an op waiting or in flight
 *    is one that need concerns (sbx_rmq_needs); it then applies all that
 *    waits, in one batch, or, when the batch in flight held them, only
 *    waits for it;
 *  - an op added while a batch is applied waits for the next flush;
 *  - while a batch is applied, its ops still answer fate, overlay, link
 *    target and touches (the in-flight batch first, then the waiting ops);
 *  - the timer flushes delay_ms after the last op added (0: no timer);
 *  - a batch is applied at once when it is full (slot `full`).
 *
 * Lock order (checked in debug builds, base/lockorder.h): flush_lock
 * (SBX_LOCK_RME_FLUSH, held while a batch is applied, so apply and the
 * hooks may take the provider's own locks and report failures to the
 * lease) before lock (SBX_LOCK_RME, the queues: a leaf under which only
 * the pure queue functions and the `full` and `cost` slots run). A
 * caller may hold its own provider lock when it calls an sbx_rme_* that
 * neither applies the queue nor waits for the timer: not sbx_rme_flush,
 * sbx_rme_add (it may flush), sbx_rme_stop_timer, sbx_rme_stop or
 * sbx_rme_destroy.
 */
#ifndef SBX_RMETA_ENGINE_H
#define SBX_RMETA_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "rmeta_queue.h"

/* The lanes of a batch, as a mask for the questions that may ask one. */
enum sbx_rme_lane {
	SBX_RME_SCRIPT = 1,
	SBX_RME_NATIVE = 2,
	SBX_RME_BOTH = 3,
};

struct sbx_rme_batch {
	struct sbx_rmq_queue q;	     /* the provider's script applies these, in order */
	struct sbx_rmq_queue native; /* a native call applies these after q */
	size_t bytes;		     /* the sum of the cost slot over the ops */
	size_t n_removals;	     /* unlink, rmdir in q */
	size_t n_native_paths;	     /* distinct paths in native */
};

struct sbx_rme_slots {
	/*
	 * Applies every op of b (the script lane, then the native one),
	 * recording each failure against its path (rmeta.h). Called with
	 * flush_lock held (one batch at a time), the queue lock not held.
	 */
	void (*apply)(void *ctx, const struct sbx_rme_batch *b);
	/* Optional, around apply (same locks): b was taken / has been applied
	 * (its ops still show in the answers until after returns). */
	void (*before)(void *ctx, const struct sbx_rme_batch *b);
	void (*after)(void *ctx, const struct sbx_rme_batch *b);
	/* Optional (lock held): what op adds to b->bytes in lane (native or not;
	 * a native op only for a path new to the lane: they fold into one call). */
	size_t (*cost)(const struct sbx_rmq_op *op, bool native);
	/* Optional (lock held): whether b must be applied now; NULL: max_ops ops. */
	bool (*full)(const struct sbx_rme_batch *b);
	size_t max_ops;
	long delay_ms; /* the timer applies the queue this long after the last op; 0: none */
	bool gather;   /* put alike ops together in a taken batch (sbx_rmq_gather) */
};

struct sbx_rme {
	const struct sbx_rme_slots *slots; /* immutable */
	void *ctx;			   /* the slots' ctx (immutable) */
	pthread_mutex_t flush_lock;	   /* held while a batch is applied */
	pthread_mutex_t lock;		   /* protects the fields marked (L) */
	struct sbx_rme_batch pending;	   /* (L) waiting */
	struct sbx_rme_batch inflight;	   /* (L) being applied (written under flush_lock too) */
	pthread_cond_t wake;		   /* signals the timer (with lock) */
	pthread_t timer;		   /* started with the first op */
	bool timer_on;			   /* (L) */
	bool stopping;			   /* (L) no timer any more */
	long long last_op_ms;		   /* (L) */
};

void sbx_rme_init(struct sbx_rme *e, const struct sbx_rme_slots *slots, void *ctx);
/* Stops the timer if it runs (applying nothing) and frees what still waits. */
void sbx_rme_destroy(struct sbx_rme *e);

/*
 * Appends copies of ops[0..n) to lane (SBX_RME_SCRIPT or SBX_RME_NATIVE)
 * as one step (no flush between them), starts the timer, and applies the
 * queue at once when it is full.
 */
void sbx_rme_add(struct sbx_rme *e, enum sbx_rme_lane lane, const struct sbx_rmq_op *ops, size_t n);
/*
 * Applies everything waiting, in one batch, if an op waiting in lanes is
 * one that an operation on path with `need` depends on (sbx_rmq_needs),
 * and waits for the batch in flight if one of its ops is. Returns at once,
 * without a request, when neither. path NULL: SBX_RMQ_NEED_ALL. Failures
 * go to their paths (the apply slot), never to this caller.
 */
void sbx_rme_flush(struct sbx_rme *e, const char *path, enum sbx_rmq_need need, unsigned lanes);
/*
 * Stops the timer for good (adds start none), waiting for a batch it is
 * applying: after it, only callers apply the queue (release clears the
 * instance's report slot in between, see the providers).
 */
void sbx_rme_stop_timer(struct sbx_rme *e);
/* sbx_rme_stop_timer, then applies what waits. */
void sbx_rme_stop(struct sbx_rme *e);
/* Drops what waits, unapplied (the sandbox is gone or paused for good); returns how many. */
size_t sbx_rme_drop(struct sbx_rme *e);

/*
 * A rename that need not apply what waits on from first (rsync sets the
 * mode, owner and times of its temporary file, then renames it; each
 * rename applied them, one command per file). When every op waiting on
 * from or below it is a chmod, chown or utimens of from itself
 * (sbx_rmq_only_attrs), none waits on to or below it and none of either
 * is in flight, takes them out into held (the caller's) and returns true;
 * the caller then moves the file and calls sbx_rme_rename_done with to
 * (or from, when the move failed), which queues them again on that name.
 * False (held empty): the caller applies them first (sbx_rme_flush).
 * Meanwhile they are in no batch: a flush of everything (a sync or a
 * run) during the rename does not wait for them, as it does not wait for
 * the rename itself; nor does a stat of either name show them (the
 * mount's own cache shows the file's attributes).
 */
bool sbx_rme_rename_take(struct sbx_rme *e, const char *from, const char *to,
			 struct sbx_rme_batch *held);
void sbx_rme_rename_done(struct sbx_rme *e, struct sbx_rme_batch *held, const char *path);
/*
 * Both providers' rename around their move: held takes what can follow
 * from (sbx_rme_rename_take; never for an exchange, nor a rename onto
 * itself), and whatever else is queued on from, on to or below them is
 * applied first. held is always initialised: sbx_rme_rename_done after
 * the move (with an empty held it does nothing).
 */
void sbx_rme_rename_begin(struct sbx_rme *e, const char *from, const char *to, bool exchange,
			  struct sbx_rme_batch *held);
/*
 * An unlink of path while a link op waits that gives path's file another
 * name (git's object: made 0444 under a temporary name, linked to its
 * name, the temporary unlinked): the native lane's waiting chmod and
 * chown of path move to that name, where they reach the same file (the
 * native lane applies after the script's link), so the unlink need not
 * apply them first. True then; false (no such link, a removal of its
 * name waiting after it, or path in flight): the caller applies what
 * waits on path first (sbx_rme_flush).
 */
bool sbx_rme_follow_link(struct sbx_rme *e, const char *path);
/* sbx_rmq_fate over the waiting ops, then, if UNTOUCHED, the ones in flight. */
enum sbx_rmq_fate sbx_rme_fate(struct sbx_rme *e, const char *path);
/* Shows the attribute ops of path in flight, then those waiting, on st (sbx_rmq_overlay). */
void sbx_rme_overlay(struct sbx_rme *e, const char *path, struct sbx_stat *st);
/*
 * Copies the ops waiting or in flight on path and its entries (subtree:
 * everything below it) into view (initialized here; the caller clears
 * it), before a remote request whose answer they are laid over after it
 * (sbx_rme_overlay_view): when their batch is applied and cleared while
 * the request is out, its answer may predate the apply, and the ops no
 * longer in the queue still show. A stat racing a flush showed the old
 * owner (test-daytona-posix, under load). Applying an op twice is
 * harmless: the attribute ops are absolute.
 */
void sbx_rme_view(struct sbx_rme *e, const char *path, bool subtree, struct sbx_rmq_queue *view);
/* Lays view's ops of path over st, then those waiting or in flight now (sbx_rme_overlay). */
void sbx_rme_overlay_view(struct sbx_rme *e, const struct sbx_rmq_queue *view, const char *path,
			  struct sbx_stat *st);
/* Copies the target of a symlink op of path waiting or in flight into buf; false: none. */
bool sbx_rme_link_target(struct sbx_rme *e, const char *path, char *buf, size_t size);
/* sbx_rmq_touches over the ops of lanes waiting or in flight. */
bool sbx_rme_touches(struct sbx_rme *e, const char *path, bool subtree, unsigned lanes);
/* Drops the waiting truncates of path (its whole content is being replaced). */
void sbx_rme_drop_truncates(struct sbx_rme *e, const char *path);

#endif
