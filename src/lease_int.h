/*
 * lease_int — private to the lease module: lease.c (the state machine),
 * leasetab.c (the table on disk, mount open/close) and leasetimer.c (the
 * timer thread). Everyone else uses lease.h. Lock rules: lease.h; a
 * *_locked function is called with l->lock held.
 */
#ifndef SBX_LEASE_INT_H
#define SBX_LEASE_INT_H

#include "base/lockorder.h"
#include "lease.h"

/* How often a lease in `error` (provider unreachable) is attached again. */
#define SBX_RETRY_EVERY_S 5

/* A create that got no answer, remembered to adopt or kill its sandbox (lease.c). */
struct sbx_pending_create {
	struct sbx_pending_create *next;
	char name[65];
	const struct sbx_provider *prov;
	struct sbx_spec spec;
	time_t since;		      /* wall clock: compared with the sandbox list's times */
	time_t failed_at, checked_at; /* sbx_boot_s() */
};

/* A snapshot of the table: each lease holds a reference (sbx_lease_put() each). */
struct lease_list {
	struct sbx_lease **v;
	size_t n;
};

/* sbx_lease_foreach() callback: appends l to the lease_list ctx, referenced. */
void collect(void *ctx, struct sbx_lease *l);

/* ---- lease.c ---- */
int state_from_name(const char *n);
/* Sets the root `error` line; err_lock is a leaf, so any lock may be held. */
void mount_error_line(struct sbx_mount *m, const char *op, const struct sbx_error *e, bool lookup);
/* The lease's `error` file and journal, without the reclaim check. */
void record_error(struct sbx_lease *l, const char *op, const struct sbx_error *e);
struct sbx_lease *lease_new(struct sbx_mount *m, const char *name);
void lease_free(struct sbx_lease *l);
void set_state_locked(struct sbx_lease *l, enum sbx_lease_state to, const char *cause);
void mark_gone_locked(struct sbx_lease *l, enum sbx_lease_state to, const char *cause);
int lease_prepare_dir(struct sbx_lease *l, struct sbx_error *err);
/* Inserts l into the table unless the name is taken, or (id not NULL) another
 * lease holds that sandbox (EEXIST). */
int table_insert(struct sbx_mount *m, struct sbx_lease *l, const char *id, struct sbx_error *err);
/* l->cache read under the lease lock (it is set once, possibly after the lease is in the table). */
struct sbx_cache *lease_cache(struct sbx_lease *l);
void lease_setup_cache(struct sbx_lease *l);
int resolve_provider(struct sbx_lease *l, struct sbx_error *err);
void pending_free(struct sbx_pending_create *p);
/* Timer: kills what timed-out creates made once the grace is over. */
void pending_sweep(struct sbx_mount *m);
/* A provider's "gone" believed only when its list agrees (no locks held). */
bool provider_confirms_gone(const struct sbx_provider *p, const char *id, struct sbx_error *err);
void settle_state(struct sbx_lease *l, struct sbx_instance *inst, enum sbx_remote_state rs,
		  const char *cause, const struct sbx_error *why);
void adopt_remote_state(struct sbx_lease *l, struct sbx_instance *inst, const char *cause);
/* The installed save_unsaved hook on l; without one, how many are unsaved. */
size_t lease_save_unsaved(struct sbx_lease *l, bool all, long long deadline_ms);
/* The quiesce hook (lease.h), before the mount is freed. */
void lease_quiesce(void);

/* ---- leasetab.c ---- */
/* (sbx_mount_save, sbx_mount_open, sbx_mount_close: lease.h) */

/* ---- leasetimer.c ---- */
/* (sbx_mount_tick, sbx_mount_start_timer: lease.h) */

#endif
