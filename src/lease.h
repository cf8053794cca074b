/*
 * lease — the table of sandboxes the mount holds, their lifecycle state
 * machine (lease.c), idle/lifetime timers (leasetimer.c), and the lease
 * table on disk (leasetab.c).
 *
 * A lease is one sandbox leased by the mount under a name. This module
 * talks to providers for lifecycle only (create, attach, pause, unpause,
 * kill, probe); file and run traffic goes through sbx_lease_use(), which
 * resumes a paused sandbox first and marks the lease active. It knows
 * nothing of FUSE.
 *
 * Locking: struct sbx_mount.lock protects the name table (leases);
 * struct sbx_lease.lock protects every field of one lease marked (L).
 * The lock order, outermost first:
 *
 *   mount.save_lock  >  mount.lock  >  lease.lock  >  mount.err_lock
 *
 * (the `status` listing reads each lease under mount.lock; never the other
 * way round). sbx_mount_save takes references under mount.lock, drops it,
 * then reads each lease under its own lock, so a save never holds the
 * table while it waits for a lease. mount.err_lock (the root `error` line) is a leaf: nothing is
 * taken under it, so a lease journal failing under lease.lock can still report there. NO lock is
 * held across a provider call (release() included: it may flush over the network): lifecycle
 * transitions set the lease's `transition` flag and drop lease.lock (waiters sleep on lease.cond),
 * so `state`, `info`, `status`, `error` and the root listing never wait on a provider. The lease
 * module takes these locks through sbx_lock() (base/lockorder.h): debug builds (--enable-debug,
 * scripts/test's ASan build) abort on a wrong order or a provider call with one held.
 * Nor is the kernel told to drop fs/ pages with lease.lock held: that waits for pages a
 * read holds locked, and the read's request may be waiting for lease.lock (mark_gone_locked
 * hands it to another thread, sbx_fs_invalidate_gone; the caller waits once unlocked).
 */
#ifndef SBX_LEASE_H
#define SBX_LEASE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <uthash.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/spec.h"
#include "provider.h"

enum sbx_lease_state {
	SBX_LS_CREATING = 0,
	SBX_LS_RUNNING,
	SBX_LS_PAUSING,
	SBX_LS_PAUSED,
	SBX_LS_RESUMING,
	SBX_LS_KILLED,
	SBX_LS_RECLAIMED,
	SBX_LS_ERROR,
};

const char *sbx_lease_state_name(enum sbx_lease_state s);

struct sbx_cache;
struct sbx_wb;
struct sbx_runs;
struct sbx_pending_create;

struct sbx_lease {
	char name[65];
	UT_hash_handle hh;
	struct sbx_mount *mount;
	int refs; /* protected by mount->lock */

	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct sbx_spec spec;		 /* read-only after creation */
	const struct sbx_provider *prov; /* read-only */
	struct sbx_instance *inst;	 /* (L) NULL while creating or once gone */
	struct sbx_instance **gone;	 /* (L) instances of ended sandboxes: a run or open
					    file may still hold them; released with the lease
					    (release may flush: never under a lock) */
	int n_gone;			 /* (L) */
	enum sbx_lease_state state;	 /* (L) */
	bool transition;		 /* (L) a lifecycle call is in flight */
	char sandbox_id[128];		 /* (L) */
	/* (L) sbx_boot_s() times (a stepped wall clock moves no timer), shown and saved as the wall
	 * times they stand for (sbx_boot_to_wall) */
	time_t created_boot, active_boot, paused_boot;
	int active;			/* (L) operations in flight */
	unsigned long runs;		/* (L) runs started */
	unsigned long results_seq;	/* (L) last N used for results/N.* */
	char *env_text;			/* (L) the `env` file */
	json_t *saved;			/* (L) provider's save() blob */
	time_t last_probe, last_extend; /* (L) timer bookkeeping (sbx_boot_s) */
	atomic_bool probe_due;		/* a failure suggested the sandbox is gone */
	atomic_bool unsaved_due;	/* resumed: unsaved files are retried at once */
	_Atomic long long heard_ms;	/* sbx_now_ms() when its sandbox last answered */
	bool stranded_told;		/* (L) gone with unsaved files: `error` said so */
	bool ending;			/* (L) an rmdir or forget of it is under way */
	char *dir;			/* state_dir/leases/NAME (read-only) */
	struct sbx_cache *cache;	/* fs/ cache (NULL for direct-I/O providers) */
	struct sbx_kinval *kinval;	/* what the kernel caches of fs/ */
	struct sbx_inotab *inotab;	/* fs/ inode numbers the mount kept (inotab.h) */
	struct sbx_wb *wb;		/* fs/ write-back queue (NULL: off, or direct I/O) */
	struct sbx_runs *runtab;	/* (L) its recent runs (runs.c), made at first use */
	void (*runtab_free)(struct sbx_lease *l); /* set with runtab: frees it with the lease */
	struct {				  /* -o idmap=user (idmap.c) */
		atomic_int state;		  /* enum sbx_ids_state */
		atomic_llong retry_at;		  /* no probe before (a failed one) */
		uid_t uid;			  /* the sandbox user's, once state is KNOWN */
		gid_t gid;
	} ids;
};

enum sbx_ids_state { SBX_IDS_UNKNOWN = 0, SBX_IDS_PROBING, SBX_IDS_KNOWN };

struct sbx_mount {
	pthread_mutex_t lock;
	struct sbx_lease *leases; /* uthash by name, protected by lock */
	struct sbx_config config;
	char *state_dir;
	char *profile; /* profile for new leases */
	/* The root `error` (under err_lock): the last mount-level failure, and
	 * apart from it the last lookup miss (cleared by a create), each with
	 * its sbx_now_ms, so a tool probing names does not hide a failure. */
	char error_line[1024];
	long long error_ms;
	char lookup_line[1024];
	long long lookup_ms;
	pthread_t timer;
	bool timer_running;
	bool stopping;
	pthread_cond_t timer_cond;
	int tick_ms;			    /* timer period (tests shorten it) */
	struct sbx_pending_create *pending; /* creates with no answer (lease.c), under lock */
	pthread_mutex_t err_lock;	    /* error_line, lookup_line: a leaf lock */
	pthread_mutex_t save_lock; /* one table save at a time, taken before any other lock */
	/* Table entries that could not be loaded (an unknown provider, a spec
	 * this build refuses), each {"entry", "why"}: the entry written back
	 * as it was by every save, its name refused to new leases. Set by
	 * sbx_mount_open, read-only afterwards (no lock). */
	json_t *unloaded;
};

/*
 * Loads the config, initialises providers, reads the lease table under
 * state_dir and re-attaches to each lease (a lease whose sandbox is gone is
 * kept as `reclaimed`). Starts the timer thread. Returns 0 or -errno.
 */
int sbx_mount_open(struct sbx_mount **out, const char *state_dir, const char *config_path,
		   const char *profile, struct sbx_error *err);
/* Starts the idle/lifetime timer thread (after daemonising). */
int sbx_mount_start_timer(struct sbx_mount *m);
/* Stops the timer, saves the table, releases instances (sandboxes live on). */
void sbx_mount_close(struct sbx_mount *m);
/* Records a mount-level error (the root `error` file) and logs it. */
void sbx_mount_error(struct sbx_mount *m, const char *op, const struct sbx_error *e);
/* Why the lease table's entry name was not loaded (sbx_mount.unloaded), or NULL. */
const char *sbx_mount_unloaded(struct sbx_mount *m, const char *name);
/*
 * The root `error` file's text (caller frees): the newer of the last
 * failure and the last lookup miss; when that is the miss, the failure
 * too on a second line if it came at most SBX_ERROR_KEEP_MS before.
 */
char *sbx_mount_error_text(struct sbx_mount *m);
/* The last failure's line alone (not a lookup miss; caller frees). */
char *sbx_mount_failure_text(struct sbx_mount *m);

/* Looks a lease up and takes a reference (NULL if none). */
struct sbx_lease *sbx_lease_get(struct sbx_mount *m, const char *name);
void sbx_lease_put(struct sbx_lease *l);
/* Takes one more reference on a referenced lease (a background thread's). */
void sbx_lease_hold(struct sbx_lease *l);
/* Calls fn for every lease name under the table lock (fn must not block). */
void sbx_lease_foreach(struct sbx_mount *m, void (*fn)(void *ctx, struct sbx_lease *l), void *ctx);
bool sbx_lease_name_valid(const char *name);
/* Why name cannot be a lease's ("bad lease name NAME: WHY"), or NULL when it can. */
const char *sbx_lease_name_problem(const char *name);

/*
 * Creates a lease NAME from profile (NULL: the mount's), overlaid with the
 * JSON spec fields of `overlay` (may be NULL) and then key=value overrides
 * (NULL-terminated "k=v" strings, may be NULL). Blocks until the sandbox is
 * up. EEXIST, EINVAL (bad name/spec/profile), or the provider's errno.
 */
int sbx_lease_create(struct sbx_mount *m, const char *name, const char *profile,
		     const char *const *kv, json_t *overlay, struct sbx_error *err);
/* Attaches an existing sandbox under NAME. */
int sbx_lease_attach(struct sbx_mount *m, const char *name, const char *sandbox_id,
		     const char *provider, struct sbx_error *err);
/* Kills the sandbox (if still there) and forgets the lease. */
int sbx_lease_remove(struct sbx_mount *m, const char *name, struct sbx_error *err);
/*
 * Forgets the lease and leaves its sandbox as it is (`forget` on `state`:
 * the way out when its provider no longer answers, or to hand the sandbox
 * on); a running lease's unsaved files go up first, what is left is kept
 * apart as for a gone sandbox.
 */
int sbx_lease_forget(struct sbx_mount *m, const char *name, struct sbx_error *err);

/*
 * Marks the start of an operation that needs the sandbox: resumes it if
 * paused (EAGAIN when autoResume is off), waits out a transition in flight
 * (bounded; ETIMEDOUT), fails fast with ENOENT/ENOTCONN when the sandbox is
 * gone. On success *inst is usable until sbx_lease_unuse().
 */
int sbx_lease_use(struct sbx_lease *l, struct sbx_instance **inst, struct sbx_error *err);
/*
 * After a call on the sandbox failed: -ENOENT (err filled) when the lease
 * was killed or reclaimed meanwhile (a kill under way is waited for), so
 * the failure is said as that rather than as the provider's symptom; else 0.
 */
int sbx_lease_ended(struct sbx_lease *l, struct sbx_error *err);
void sbx_lease_unuse(struct sbx_lease *l);
/*
 * The instance if the lease is in a state where it exists (running or
 * paused), without resuming or counting as use; NULL otherwise.
 */
struct sbx_instance *sbx_lease_peek(struct sbx_lease *l);

/*
 * Before a run of a running lease whose sandbox was not heard from for the
 * -o alive_check time (a run that completed, a probe's stat): whether it
 * answers (a stat of /). A run that met an outage failed only its
 * close(), which `echo CMD > exec` never sees; asked first, the write
 * fails ENOTCONN and the lease becomes `error`, as the probe a failure
 * asks for makes it. A paused lease is resumed here (autoResume), so a
 * resume that fails fails the write too. 0, or -errno with err set.
 */
int sbx_lease_alive_check(struct sbx_lease *l, struct sbx_error *err);
/* The sandbox answered just now (sbx_lease_alive_check's clock). */
void sbx_lease_heard(struct sbx_lease *l);
/* -o alive_check=SECONDS (default 30; 0: before every run). */
void sbx_lease_set_alive_check(long seconds);

/* Explicit lifecycle (the `state` file). */
int sbx_lease_pause(struct sbx_lease *l, const char *cause, struct sbx_error *err);
int sbx_lease_resume(struct sbx_lease *l, const char *cause, struct sbx_error *err);
int sbx_lease_kill(struct sbx_lease *l, const char *cause, struct sbx_error *err);

/*
 * A provider call failed with e: records it in the lease's `error` file and
 * journal; when the failure says the sandbox is gone, probes it and marks
 * the lease reclaimed.
 */
void sbx_lease_error(struct sbx_lease *l, const char *op, const struct sbx_error *e);
/* Appends one JSON object (stolen) to the lease's journal `log`; a failed
 * write is logged and reported in the root `error` file. 0 or -errno. */
int sbx_lease_journal(struct sbx_lease *l, json_t *event);
/* Per-lease state files: state_dir/leases/NAME/<file> (caller frees). */
char *sbx_lease_path(struct sbx_lease *l, const char *file);
/* info JSON (caller owns), never waits on a provider. */
json_t *sbx_lease_info(struct sbx_lease *l);
/* One `status` line, no newline. */
void sbx_lease_status_line(struct sbx_lease *l, struct sbx_buf *out);
/* Saves the lease table (state_dir/leases.json) atomically, keeping the
 * previous generation; a failure is logged and reported in the root `error`. */
int sbx_mount_save(struct sbx_mount *m);
/* Runs one timer pass now (idle pause, lifetime, reclaim TTL, probe). */
void sbx_mount_tick(struct sbx_mount *m);

/*
 * What the fs/ cache needs from the lifecycle, installed by the cache
 * (sbx_fs_cached_install(), at start-up, as fuse_ops installs kinval's
 * callback) so the lease module never calls into it. Each is called with
 * no lock held; until installed, none is (and nothing is uploaded).
 *   before_pause  fetches what a paused lease's cache would lack;
 *   save_unsaved  uploads l's unsaved files (the timer, the daemon's exit),
 *                 as sbx_fs_save_unsaved(); returns how many stay unsaved.
 *   quiesce       waits (bounded) for fs/'s own threads holding lease
 *                 references beyond the handles (streamed reads) to end,
 *                 before the mount is freed at exit.
 */
/* How long one pass over unsaved files (save_unsaved, not all) may go on starting uploads. */
#define SBX_UNSAVED_PASS_MS 60000
struct sbx_lease_hooks {
	void (*before_pause)(struct sbx_lease *l);
	size_t (*save_unsaved)(struct sbx_lease *l, bool all, long long deadline_ms);
	/* fs/'s write-back queue of a lease with a cache: made with it, freed with the lease */
	struct sbx_wb *(*wb_new)(struct sbx_lease *l);
	void (*wb_free)(struct sbx_wb *wb);
	void (*quiesce)(void);
};
/* Installs h (static storage; one set per process, before sbx_mount_open). */
void sbx_lease_set_hooks(const struct sbx_lease_hooks *h);

/*
 * A refused request (a control-file misuse, bad input): formats the reason,
 * records it in l's `error` and journal (or the mount's `error` when l is
 * NULL) under op, and returns -errnum.
 */
__attribute__((format(printf, 5, 6))) int sbx_refuse(struct sbx_mount *m, struct sbx_lease *l,
						     int errnum, const char *op, const char *fmt,
						     ...);

#endif
