/*
 * writeback — a remote lease's write-back queue: close() of a dirty fs/
 * file queues its cache entry and returns; a few worker threads upload
 * the queued entries in parallel. fsync, runs, ttys, pause and exit wait
 * for what was queued before them (sbx_fs_drain). Bounded: when the queue
 * is full, the closing thread uploads itself (back-pressure).
 */
#ifndef SBX_WRITEBACK_H
#define SBX_WRITEBACK_H

#include <stdbool.h>
#include <sys/types.h>

struct sbx_lease;
struct sbx_cfile;
struct sbx_wb;

/* Worker threads per lease. */
#define SBX_WB_WORKERS 4
/* Most bytes queued or in flight per lease. */
#define SBX_WB_MAX_BYTES (64LL << 20)
/*
 * Batches (a provider with write_new_many): at most this many new files
 * per request, each at most FILE_MAX bytes, BYTES in all. While new files
 * keep being queued, a worker waits for more: until none came for
 * IDLE_MS, or the oldest waiting one is LINGER_MS old (not when a drain
 * waits, nor when the queue is half full).
 */
#define SBX_WB_BATCH_MAX 64
#define SBX_WB_BATCH_FILE_MAX (1LL << 20)
#define SBX_WB_BATCH_BYTES (8LL << 20)
#define SBX_WB_IDLE_MS 100
#define SBX_WB_LINGER_MS 2000

/* The entry bound when -o writeback is not given: write-back on (issue 13). */
#define SBX_WB_DEFAULT 128
/* Sets the entry bound of queues made from now on (-o writeback=N); 0: off. */
void sbx_wb_set_max(unsigned max);
unsigned sbx_wb_get_max(void);

/* A queue for l (NULL when write-back is off). */
struct sbx_wb *sbx_wb_new(struct sbx_lease *l);
/* Frees it (no workers can be left: each holds a lease reference). */
void sbx_wb_free(struct sbx_wb *wb);

/*
 * Queues cf (bytes long, at change count wgen: sbx_cache_file_dirty) for
 * upload; takes its own reference. True too when an item of cf waits, or
 * is in flight with no change since it was queued. False when write-back
 * is off or the queue is full: the caller uploads itself.
 */
bool sbx_wb_queue(struct sbx_wb *wb, struct sbx_cfile *cf, unsigned long wgen, off_t bytes);
/* True (once) if cf's last background upload failed: the caller retries it. */
bool sbx_wb_failed_take(struct sbx_wb *wb, struct sbx_cfile *cf);
/* Stops workers from starting uploads and waits for those in flight. */
void sbx_wb_hold(struct sbx_wb *wb);
void sbx_wb_unhold(struct sbx_wb *wb);
/* Waits until every upload queued before the call is done (failed ones too). */
void sbx_wb_drain(struct sbx_wb *wb);
/* At exit: drains and waits for the workers to be gone (caller holds a lease ref). */
void sbx_wb_stop(struct sbx_wb *wb);

/*
 * Waits for l's queued uploads, then tries the failed ones again
 * (sbx_fs_save_owed): before a run, a code cell, a tty, a pause, exit.
 * 0, or -errno when a file could not reach the sandbox for the sandbox's
 * sake (err names it and why).
 */
int sbx_fs_drain(struct sbx_lease *l, struct sbx_error *err);
/*
 * sbx_fs_drain before a run (its first write, and its start): a run must
 * see what close() returned for, so a file that could not reach the
 * sandbox for the sandbox's sake fails the run, not started, with the
 * file and why in err. A file's own failure (EACCES, ENOSPC in the
 * sandbox) does not: it is said in `error`, and a run is how it is fixed.
 */
int sbx_fs_drain_for_run(struct sbx_lease *l, struct sbx_error *err);

#endif
