/*
 * leasetimer — the mount's timer thread: once a tick (1 s) it pauses idle
 * leases, kills those past their lifetime or paused TTL, probes running
 * ones for reclaim, attaches leases in `error` again, keeps the provider's
 * own lifetime ahead of the lease's, uploads unsaved files and sweeps
 * creates that got no answer. Each action is a call into the state
 * machine (lease.c) made with no lock held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"
#include "base/xalloc.h"
#include "base/log.h"
#include "cache.h"
#include "lease.h"
#include "lease_int.h"

/* How often running leases are probed for reclaim (local probes are cheap). */
#define SBX_PROBE_EVERY_S 30
#define SBX_PROBE_LOCAL_EVERY_S 5
/* While a lease is in use, the provider's own lifetime is extended this often ... */
#define SBX_EXTEND_EVERY_S 120
/* ... to at least this many seconds ahead (past the idle timeout). */
#define SBX_EXTEND_MIN_S 900

/* ---- the timer ------------------------------------------------------------ */

enum timer_action {
	T_NONE,
	T_PAUSE,
	T_KILL_LIFETIME,
	T_KILL_TTL,
	T_PROBE,
	T_PROBE_HINTED, /* asked for by a failure (probe_due) */
	T_EXTEND,
	T_RETRY
};

static enum timer_action timer_decide(struct sbx_lease *l, time_t now)
{
	enum timer_action a = T_NONE;
	long probe_every =
	    (l->prov->caps & SBX_CAP_DIRECT_IO) ? SBX_PROBE_LOCAL_EVERY_S : SBX_PROBE_EVERY_S;
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	if (l->state == SBX_LS_ERROR && !l->transition &&
	    now - l->last_probe >= SBX_RETRY_EVERY_S) {
		l->last_probe = now;
		sbx_unlock(&l->lock, SBX_LOCK_LEASE);
		return T_RETRY;
	}
	if (l->transition || !l->inst || l->state == SBX_LS_ERROR) {
		sbx_unlock(&l->lock, SBX_LOCK_LEASE);
		return T_NONE;
	}
	bool live = l->state == SBX_LS_RUNNING || l->state == SBX_LS_PAUSED;
	if (l->spec.res.timeout_s && live && now - l->created_boot >= l->spec.res.timeout_s)
		a = T_KILL_LIFETIME;
	else if (l->state == SBX_LS_PAUSED && l->spec.reclaim_ttl_s &&
		 now - l->paused_boot >= l->spec.reclaim_ttl_s)
		a = T_KILL_TTL;
	/* > on whole seconds: a lease is idle at least idleTimeout before it pauses */
	else if (l->state == SBX_LS_RUNNING && !l->active && l->spec.idle_timeout_s &&
		 now - l->active_boot > l->spec.idle_timeout_s)
		a = T_PAUSE;
	else if (live && atomic_exchange(&l->probe_due, false))
		a = T_PROBE_HINTED;
	else if (l->state == SBX_LS_RUNNING && now - l->last_probe >= probe_every)
		a = T_PROBE;
	else if (l->state == SBX_LS_RUNNING && l->prov->set_timeout &&
		 now - l->last_extend >= SBX_EXTEND_EVERY_S)
		a = T_EXTEND;
	if (a == T_PROBE || a == T_PROBE_HINTED)
		l->last_probe = now;
	if (a == T_EXTEND)
		l->last_extend = now;
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	return a;
}

/* Keeps the provider's own lifetime ahead of the lease's (E2B kills on timeout). */
static void extend_lease(struct sbx_lease *l)
{
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_instance *inst = sbx_lease_peek(l);
	long want = l->spec.idle_timeout_s * 2 + SBX_EXTEND_EVERY_S;
	if (want < SBX_EXTEND_MIN_S)
		want = SBX_EXTEND_MIN_S;
	if (l->spec.res.timeout_s) {
		long left = (long)(l->created_boot + l->spec.res.timeout_s - sbx_boot_s()) + 60;
		if (left < want)
			want = left > 60 ? left : 60;
	}
	if (inst && l->prov->set_timeout(inst, want, &e))
		sbx_log(SBX_LOG_WARN, "lease %s: cannot extend the sandbox's lifetime: %s", l->name,
			e.msg);
}

/*
 * Whether the sandbox itself answers (a stat of /), not only the provider's
 * API: on e2b the API may say "running" while envd cannot be reached.
 */
static bool sandbox_answers(struct sbx_lease *l, struct sbx_instance *inst, struct sbx_error *e)
{
	struct sbx_stat st;
	sbx_error_clear(e);
	if (l->prov->stat && l->prov->stat(inst, "/", &st, e) &&
	    (e->code == SBX_E_CONNECTION_FAILED || e->code == SBX_E_TIMEOUT))
		return false;
	sbx_lease_heard(l);
	return true;
}

/*
 * A lease in `error` (its provider did not answer at mount, or said it was
 * gone without its list agreeing): attach (or probe) again; the lease comes
 * back as soon as the provider answers. Returns true when its state changed.
 */
static bool retry_lease(struct sbx_lease *l)
{
	enum sbx_remote_state rs = SBX_REMOTE_UNKNOWN;
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_instance *inst, *fresh = NULL;
	char id[sizeof(l->sandbox_id)];
	int rc;
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	if (l->state != SBX_LS_ERROR || l->transition) {
		sbx_unlock(&l->lock, SBX_LOCK_LEASE);
		return false;
	}
	l->transition = true; /* kill/rmdir wait for this attempt */
	inst = l->inst;
	memcpy(id, l->sandbox_id, sizeof(id));
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	if (!inst && l->prov->attach) {
		rc = sbx_provider_ready(l->prov, &e);
		if (!rc)
			rc = l->prov->attach(&l->spec, id, l->saved, &fresh, &e);
		if (rc == -ENOENT)
			rs = SBX_REMOTE_GONE;
		else if (!rc)
			inst = fresh;
	}
	if (inst && l->prov->probe && l->prov->probe(inst, &rs, &e))
		rs = SBX_REMOTE_UNKNOWN;
	else if (inst && !l->prov->probe)
		rs = SBX_REMOTE_RUNNING;
	if (rs == SBX_REMOTE_RUNNING && !sandbox_answers(l, inst, &e))
		rs = SBX_REMOTE_UNKNOWN; /* its API answers, the sandbox does not */
	if (rs == SBX_REMOTE_GONE && !provider_confirms_gone(l->prov, id, &e))
		rs = SBX_REMOTE_UNKNOWN;
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	l->transition = false;
	pthread_cond_broadcast(&l->cond);
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	if (rs == SBX_REMOTE_UNKNOWN) {
		if (fresh)
			l->prov->release(fresh);
		sbx_log(SBX_LOG_DEBUG, "lease %s: still unreachable: %s", l->name, e.msg);
		return false;
	}
	settle_state(l, inst, rs, "provider answers again", NULL);
	/* what the outage held goes up now, not at its back-off */
	atomic_store(&l->unsaved_due, true);
	return true;
}

/*
 * Once, when a lease's sandbox is gone with files written here that never
 * reached it: no pass retries them any more, and only the first failed
 * upload was reported (a pass stops at the first failure of the sandbox).
 */
static void tell_stranded(struct sbx_lease *l, struct sbx_cache *c, size_t n)
{
	struct sbx_cfile *cf;
	struct sbx_error e = SBX_ERROR_INIT;
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	bool gone = l->state == SBX_LS_RECLAIMED && !l->stranded_told;
	l->stranded_told = l->stranded_told || gone;
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	if (!gone || !sbx_cache_file_unsaved(c, &cf, 1, SBX_UNSAVED_ALL))
		return;
	char *path = sbx_cfile_path(c, cf);
	sbx_cache_file_put(c, cf);
	sbx_error_set(&e, ENOENT, SBX_E_NOT_FOUND,
		      "%zu file%s written here never reached the sandbox, which is gone (the "
		      "first: %s): kept in %s/cache; rmdir %s moves them to %s/unsaved/",
		      n, n == 1 ? "" : "s", path, l->dir, l->name, l->mount->state_dir);
	free(path);
	record_error(l, "upload", &e);
}

static bool lease_running(struct sbx_lease *l)
{
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	bool r = l->state == SBX_LS_RUNNING && !l->transition;
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	return r;
}

/*
 * A probe asked for by a failure to reach the sandbox (hinted) could not
 * reach the provider either: the lease is `error` until retry_lease's probe
 * answers, so what is known before a run fails its first write(2) with
 * ENOTCONN (`$?` 1 in a shell, whose close() errors nobody sees) instead
 * of each run failing only at its close. A periodic probe alone does not
 * (e2b's API may be down while the sandbox works), nor does any other
 * failure (5xx, a refused key), nor a paused lease (its cached files are
 * read without the provider). Returns true when the state changed.
 */
static bool unreachable(struct sbx_lease *l, struct sbx_instance *inst, const struct sbx_error *e,
			bool hinted)
{
	bool changed = false;
	if (!hinted || (e->code != SBX_E_CONNECTION_FAILED && e->code != SBX_E_TIMEOUT)) {
		sbx_log(SBX_LOG_DEBUG, "lease %s: probe: %s", l->name, e->msg);
		return false;
	}
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	if (!l->transition && l->inst == inst && l->state == SBX_LS_RUNNING) {
		set_state_locked(l, SBX_LS_ERROR, "provider unreachable");
		l->last_probe = sbx_boot_s(); /* the retry comes SBX_RETRY_EVERY_S after */
		changed = true;
	}
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	if (changed)
		record_error(l, "probe", e);
	return changed;
}

static long alive_check_ms = 30000;

void sbx_lease_set_alive_check(long seconds)
{
	alive_check_ms = seconds * 1000;
}

void sbx_lease_heard(struct sbx_lease *l)
{
	atomic_store(&l->heard_ms, sbx_now_ms());
}

int sbx_lease_alive_check(struct sbx_lease *l, struct sbx_error *err)
{
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_instance *inst;
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	bool running = l->state == SBX_LS_RUNNING && !l->transition;
	bool paused = l->state == SBX_LS_PAUSED || l->state == SBX_LS_PAUSING;
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	if (paused) { /* resumed now (autoResume: runs_precheck refused it otherwise) */
		int rc = sbx_lease_use(l, &inst, err);
		if (!rc)
			sbx_lease_unuse(l);
		else
			sbx_error_prefix(err, "the paused lease could not be resumed for the run");
		return rc;
	}
	if (!running || sbx_now_ms() - atomic_load(&l->heard_ms) < alive_check_ms ||
	    sbx_lease_use(l, &inst, &e))
		return 0;
	bool answers = sandbox_answers(l, inst, &e);
	sbx_lease_unuse(l);
	if (answers)
		return 0;
	unreachable(l, inst, &e, true);
	return sbx_error_set(err, ENOTCONN, SBX_E_CONNECTION_FAILED,
			     "lease %s: its sandbox does not answer: %s", l->name, e.msg);
}

/* Asks the provider how the sandbox is; returns true when the lease's state changed. */
static bool probe_lease(struct sbx_lease *l, bool hinted)
{
	enum sbx_remote_state rs = SBX_REMOTE_UNKNOWN;
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_instance *inst = sbx_lease_peek(l);
	bool changed = false;
	if (!inst || !l->prov->probe)
		return false;
	if (l->prov->probe(inst, &rs, &e) ||
	    (hinted && rs == SBX_REMOTE_RUNNING && !sandbox_answers(l, inst, &e)))
		return unreachable(l, inst, &e, hinted);
	if (rs == SBX_REMOTE_GONE && !provider_confirms_gone(l->prov, inst->id, &e)) {
		record_error(l, "probe", &e); /* kept as it is: the next probe asks again */
		return false;
	}
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	bool gone = rs == SBX_REMOTE_GONE && !l->transition && l->inst == inst;
	if (gone) {
		mark_gone_locked(l, SBX_LS_RECLAIMED, "sandbox gone (provider)");
		changed = true;
	} else if (rs == SBX_REMOTE_PAUSED && l->state == SBX_LS_RUNNING && !l->transition) {
		set_state_locked(l, SBX_LS_PAUSED, "paused by provider");
		changed = true;
	}
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	if (gone && e.msg[0]) /* what the provider knows of it (local: where its disk went) */
		record_error(l, "probe", &e);
	return changed;
}

void sbx_mount_tick(struct sbx_mount *m)
{
	struct lease_list ll = {0};
	time_t now = sbx_boot_s();
	bool changed = false;
	sbx_lease_foreach(m, collect, &ll);
	for (size_t i = 0; i < ll.n; i++) {
		struct sbx_lease *l = ll.v[i];
		struct sbx_error e = SBX_ERROR_INIT;
		enum timer_action act = timer_decide(l, now);
		switch (act) {
		case T_PAUSE:
			sbx_lease_pause(l, "idle", &e);
			changed = true;
			break;
		case T_KILL_LIFETIME:
		case T_KILL_TTL: {
			const char *cause =
			    now - l->created_boot >= l->spec.res.timeout_s && l->spec.res.timeout_s
				? "lifetime reached"
				: "paused TTL reached";
			if (sbx_lease_kill(l, cause, &e) == 0) {
				sbx_lock(&l->lock, SBX_LOCK_LEASE);
				set_state_locked(l, SBX_LS_RECLAIMED, cause);
				sbx_unlock(&l->lock, SBX_LOCK_LEASE);
			}
			changed = true;
			break;
		}
		case T_PROBE:
		case T_PROBE_HINTED:
			changed |= probe_lease(l, act == T_PROBE_HINTED);
			break;
		case T_RETRY:
			changed |= retry_lease(l);
			break;
		case T_EXTEND:
			extend_lease(l);
			break;
		default:
			break;
		}
		/* Unsaved files (left by a failed upload, or by the last daemon): up again. */
		struct sbx_cache *c = lease_cache(l);
		size_t unsaved = c ? sbx_cache_unsaved_count(c) : 0;
		if (unsaved && lease_running(l))
			lease_save_unsaved(l, false, sbx_now_ms() + SBX_UNSAVED_PASS_MS);
		else if (unsaved)
			tell_stranded(l, c, unsaved);
		sbx_lease_put(l);
	}
	free(ll.v);
	pending_sweep(m);
	if (changed)
		sbx_mount_save(m);
}

static void *timer_main(void *arg)
{
	struct sbx_mount *m = arg;
	sbx_lock(&m->lock, SBX_LOCK_MOUNT);
	while (!m->stopping) {
		struct timespec dl;
		sbx_deadline_in((long)m->tick_ms, &dl);
		sbx_cond_wait_until(&m->timer_cond, &m->lock, &dl);
		if (m->stopping)
			break;
		sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
		sbx_mount_tick(m);
		sbx_lock(&m->lock, SBX_LOCK_MOUNT);
	}
	sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
	return NULL;
}

int sbx_mount_start_timer(struct sbx_mount *m)
{
	if (pthread_create(&m->timer, NULL, timer_main, m))
		return -EAGAIN;
	m->timer_running = true;
	return 0;
}
