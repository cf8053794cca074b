/*
 * lease — the lifecycle state machine (see lease.h): the table in memory,
 * create, attach, remove, pause, resume, kill, use, the `error` files and
 * the journal. The table on disk and mount open/close are leasetab.c; the
 * timer thread is leasetimer.c; what they share is lease_int.h.
 *
 * Transitions (creating → running ⇄ paused → killed/reclaimed) run with
 * the lease's `transition` flag set and its lock released, so readers of
 * `state`, `info` and `status` never wait on a provider. Every transition
 * is journaled with its cause and the table is saved after it.
 */
#include "lease.h"
#include "lease_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "cache.h"
#include "fsmirror.h"
#include "inotab.h"
#include "kinval.h"
#include "statedir.h"

/* How long an operation waits for a transition in flight (resume, pause). */
#define SBX_TRANSITION_WAIT_S 120

/* The fs/ cache's hooks (lease.h); set once at start-up, before any lease. */
static const struct sbx_lease_hooks *fs_hooks;

void sbx_lease_set_hooks(const struct sbx_lease_hooks *h)
{
	fs_hooks = h;
}

size_t lease_save_unsaved(struct sbx_lease *l, bool all, long long deadline_ms)
{
	if (fs_hooks && fs_hooks->save_unsaved)
		return fs_hooks->save_unsaved(l, all, deadline_ms);
	return l->cache ? sbx_cache_unsaved_count(l->cache) : 0;
}

void lease_quiesce(void)
{
	if (fs_hooks && fs_hooks->quiesce)
		fs_hooks->quiesce();
}

static const char *const state_names[] = {
    "creating", "running", "pausing", "paused", "resuming", "killed", "reclaimed", "error",
};

const char *sbx_lease_state_name(enum sbx_lease_state s)
{
	return (unsigned)s < sizeof(state_names) / sizeof(*state_names) ? state_names[s] : "error";
}

int state_from_name(const char *n)
{
	for (size_t i = 0; i < sizeof(state_names) / sizeof(*state_names); i++)
		if (!strcmp(n, state_names[i]))
			return (int)i;
	return -1;
}

const char *sbx_lease_name_problem(const char *n)
{
	static const char *const reserved[] = {"README", "ctl",	     "status",
					       "error",	 "profiles", NULL};
	size_t len = strlen(n);
	if (!len)
		return "it is empty";
	if (len > 64)
		return "more than 64 characters";
	if (n[0] == '.' || n[0] == '-')
		return "it begins with . or -";
	for (const char *const *r = reserved; *r; r++)
		if (!strcmp(n, *r))
			return "one of the mount's own files has it";
	for (; *n; n++)
		if (!((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') ||
		      (*n >= '0' && *n <= '9') || *n == '-' || *n == '_' || *n == '.'))
			return "only letters, digits, - _ and . may be in it";
	return NULL;
}

bool sbx_lease_name_valid(const char *n)
{
	return !sbx_lease_name_problem(n);
}

char *sbx_lease_path(struct sbx_lease *l, const char *file)
{
	struct sbx_buf b = SBX_BUF_INIT;
	sbx_buf_addf(&b, "%s/%s", l->dir, file);
	return sbx_buf_detach(&b, NULL);
}

/* The journal `log` past this becomes `log.1` (the older one dropped). */
#define SBX_JOURNAL_MAX (256 << 10)

/* Appends ev to l's journal (takes it); *e says why not. */
static void journal_append(struct sbx_lease *l, json_t *ev, struct sbx_error *e)
{
	char ts[32];
	sbx_iso_time(time(NULL), ts, sizeof(ts));
	json_object_set_new(ev, "time", json_string(ts));
	/* ASCII only: paths a sandbox named may hold C1 controls (U+009B is a CSI). */
	char *line = json_dumps(ev, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(ev);
	if (!line) {
		sbx_error_set(e, EINVAL, SBX_E_INTERNAL, "lease %s: a journal event is not JSON",
			      l->name);
	} else {
		size_t n = strlen(line);
		line = sbx_xrealloc(line, n + 2);
		line[n] = '\n';
		line[n + 1] = '\0';
		char *p = sbx_lease_path(l, "log");
		int rc = sbx_append_file_capped(p, line, n + 1, SBX_JOURNAL_MAX);
		if (rc)
			sbx_error_set(e, rc, SBX_E_INTERNAL, "cannot write the journal %s: %s", p,
				      strerror(-rc));
		free(p);
		free(line);
	}
}

int sbx_lease_journal(struct sbx_lease *l, json_t *ev)
{
	struct sbx_error e = SBX_ERROR_INIT;
	journal_append(l, ev, &e);
	/* The lease's own error file may be on the same full disk: the root's is memory. */
	if (e.err && l->mount)
		mount_error_line(l->mount, "journal", &e, false);
	return -e.err;
}

static void journal_transition(struct sbx_lease *l, enum sbx_lease_state from,
			       enum sbx_lease_state to, const char *cause)
{
	struct sbx_buf why = SBX_BUF_INIT;
	sbx_buf_add_utf8_escaped(&why, cause ? cause : "");
	sbx_lease_journal(l, sbx_xjson(json_pack("{s:s, s:s, s:s, s:s}", "event", "state", "from",
						 sbx_lease_state_name(from), "to",
						 sbx_lease_state_name(to), "cause", why.buf)));
	sbx_buf_release(&why);
	sbx_log(SBX_LOG_INFO, "lease %s: %s -> %s (%s)", l->name, sbx_lease_state_name(from),
		sbx_lease_state_name(to), cause ? cause : "");
}

/*
 * An `error` file's line, "TIME OP CODE: MESSAGE\n", into line[size];
 * returns its length. The op names a path too: fitted with the message
 * (sbx_fit), so a long path never pushes the reason or the newline out,
 * and made one line with no control character (the message was; the op's
 * path, which a sandbox may have named, was not).
 */
static size_t error_line(char *line, size_t size, const char *op, const struct sbx_error *e)
{
	char ts[32], *all;
	size_t n = 0;
	sbx_iso_time(time(NULL), ts, sizeof(ts));
	if (asprintf(&all, "%s %s %s: %s", ts, op, sbx_errcode_name(e->code), e->msg) >= 0) {
		n = sbx_fit(line, size - 1, all);
		free(all);
	}
	sbx_one_line(line); /* the op's path too: a sandbox named it */
	line[n++] = '\n';
	line[n] = '\0';
	return n;
}

/* The lease's `error` file and journal, without the reclaim check. */
void record_error(struct sbx_lease *l, const char *op, const struct sbx_error *e)
{
	char line[SBX_ERR_MSG_MAX + 128];
	size_t n = error_line(line, sizeof(line), op, e);
	char *p = sbx_lease_path(l, "error");
	int frc = sbx_write_file_atomic(p, line, n);
	struct sbx_error je = SBX_ERROR_INIT;
	free(p);
	/*
	 * The op and the message may name a path that is not UTF-8 (a sandbox's
	 * or a user's name, or one cut mid-character): journalled with \xNN for
	 * those bytes, as jansson takes only UTF-8.
	 */
	struct sbx_buf what = SBX_BUF_INIT, msg = SBX_BUF_INIT;
	sbx_buf_add_utf8_escaped(&what, op);
	sbx_buf_add_utf8_escaped(&msg, e->msg);
	journal_append(l,
		       sbx_xjson(json_pack("{s:s, s:s, s:s, s:s, s:i}", "event", "error", "op",
					   what.buf, "code", sbx_errcode_name(e->code), "message",
					   msg.buf, "errno", e->err)),
		       &je);
	sbx_buf_release(&what);
	sbx_buf_release(&msg);
	sbx_log(SBX_LOG_WARN, "lease %s: %s: %s", l->name, op, e->msg);
	/*
	 * The lease's error file or journal refused it (their disk is full):
	 * the root's `error` (memory) carries the error itself, naming the
	 * lease, not the journal's failure to keep it, which would hide it.
	 */
	if ((frc || je.err) && l->mount) {
		struct sbx_error in_root = *e;
		size_t pre = strlen(l->name);
		if (je.err)
			sbx_log(SBX_LOG_WARN, "journal: %s", je.msg);
		if (strncmp(e->msg, "lease ", 6) || strncmp(e->msg + 6, l->name, pre) ||
		    e->msg[6 + pre] != ':') {
			char *who = sbx_xasprintf("lease %s", l->name);
			sbx_error_prefix(&in_root, who);
			free(who);
		}
		mount_error_line(l->mount, op, &in_root, false);
	}
}

void sbx_lease_error(struct sbx_lease *l, const char *op, const struct sbx_error *e)
{
	record_error(l, op, e);
	/*
	 * A failure that may mean "the sandbox is gone": let the timer probe it
	 * now (not here: the caller may hold a cache lock the probe would need).
	 */
	if (e->code == SBX_E_NOT_FOUND || e->code == SBX_E_CONNECTION_FAILED) {
		atomic_store(&l->probe_due, true);
		if (l->mount)
			pthread_cond_signal(&l->mount->timer_cond);
	}
}

/* sbx_instance.report: a provider's failure that no call returned (a queued change). */
static void instance_report(void *ctx, const char *what, const struct sbx_error *e)
{
	sbx_lease_error(ctx, what, e);
}

/* The lease takes inst: its provider's late failures go to the lease's `error`. */
static void adopt_instance(struct sbx_lease *l, struct sbx_instance *inst)
{
	inst->report_ctx = l;
	inst->report = instance_report;
}

/* ---- the mount -------------------------------------------------------- */

/*
 * How long a failure stays in the root `error` below a later lookup miss.
 * Tools probe names that are no lease all the time (git looks for HEAD and
 * objects in every parent directory, shells complete names): each miss
 * replaced the line, and a failure read a moment later (a refused ctl
 * line, a table that could not be saved) said "no lease HEAD".
 */
#define SBX_ERROR_KEEP_MS 60000

/* Sets the root `error` line; err_lock is a leaf, so any lock may be held. */
void mount_error_line(struct sbx_mount *m, const char *op, const struct sbx_error *e, bool lookup)
{
	sbx_lock(&m->err_lock, SBX_LOCK_ERR);
	if (lookup) {
		error_line(m->lookup_line, sizeof(m->lookup_line), op, e);
		m->lookup_ms = sbx_now_ms();
	} else {
		error_line(m->error_line, sizeof(m->error_line), op, e);
		m->error_ms = sbx_now_ms();
	}
	sbx_unlock(&m->err_lock, SBX_LOCK_ERR);
	sbx_log(lookup ? SBX_LOG_DEBUG : SBX_LOG_WARN, "%s: %s", op, e->msg);
}

void sbx_mount_error(struct sbx_mount *m, const char *op, const struct sbx_error *e)
{
	mount_error_line(m, op, e, !strcmp(op, "lookup"));
}

/* A lookup miss is only worth reporting until the name is created after all. */
static void forget_lookup_error(struct sbx_mount *m)
{
	sbx_lock(&m->err_lock, SBX_LOCK_ERR);
	m->lookup_line[0] = '\0';
	sbx_unlock(&m->err_lock, SBX_LOCK_ERR);
}

char *sbx_mount_error_text(struct sbx_mount *m)
{
	char *s;
	sbx_lock(&m->err_lock, SBX_LOCK_ERR);
	if (!m->lookup_line[0] || (m->error_line[0] && m->error_ms >= m->lookup_ms))
		s = sbx_xstrdup(m->error_line);
	else if (m->error_line[0] && m->lookup_ms - m->error_ms <= SBX_ERROR_KEEP_MS)
		s = sbx_xasprintf("%s%s", m->lookup_line, m->error_line);
	else
		s = sbx_xstrdup(m->lookup_line);
	sbx_unlock(&m->err_lock, SBX_LOCK_ERR);
	return s;
}

char *sbx_mount_failure_text(struct sbx_mount *m)
{
	sbx_lock(&m->err_lock, SBX_LOCK_ERR);
	char *s = sbx_xstrdup(m->error_line);
	sbx_unlock(&m->err_lock, SBX_LOCK_ERR);
	return s;
}

struct sbx_lease *lease_new(struct sbx_mount *m, const char *name)
{
	struct sbx_lease *l = sbx_xcalloc(1, sizeof(*l));
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->mount = m;
	l->refs = 1; /* the table's */
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	sbx_spec_init(&l->spec);
	struct sbx_buf b = SBX_BUF_INIT;
	sbx_buf_addf(&b, "%s/leases/%s", m->state_dir, name);
	l->dir = sbx_buf_detach(&b, NULL);
	l->env_text = sbx_xstrdup("");
	l->created_boot = l->active_boot = sbx_boot_s();
	l->kinval = sbx_kinval_new();
	l->inotab = sbx_inotab_new(0);
	return l;
}

void lease_free(struct sbx_lease *l)
{
	if (l->inst)
		l->prov->release(l->inst);
	for (int i = 0; i < l->n_gone; i++)
		l->prov->release(l->gone[i]);
	free(l->gone);
	if (fs_hooks && fs_hooks->wb_free)
		fs_hooks->wb_free(l->wb);
	sbx_cache_free(l->cache);
	sbx_kinval_free(l->kinval);
	sbx_inotab_free(l->inotab);
	if (l->runtab_free) /* runs.c's, so the lease module does not call it */
		l->runtab_free(l);
	sbx_spec_free(&l->spec);
	json_decref(l->saved);
	free(l->env_text);
	free(l->dir);
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->cond);
	free(l);
}

struct sbx_lease *sbx_lease_get(struct sbx_mount *m, const char *name)
{
	struct sbx_lease *l;
	sbx_lock(&m->lock, SBX_LOCK_MOUNT);
	HASH_FIND_STR(m->leases, name, l);
	if (l)
		l->refs++;
	sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
	return l;
}

void sbx_lease_hold(struct sbx_lease *l)
{
	sbx_lock(&l->mount->lock, SBX_LOCK_MOUNT);
	l->refs++;
	sbx_unlock(&l->mount->lock, SBX_LOCK_MOUNT);
}

void sbx_lease_put(struct sbx_lease *l)
{
	if (!l)
		return;
	struct sbx_mount *m = l->mount;
	sbx_lock(&m->lock, SBX_LOCK_MOUNT);
	int last = --l->refs == 0;
	sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
	if (last)
		lease_free(l);
}

void sbx_lease_foreach(struct sbx_mount *m, void (*fn)(void *, struct sbx_lease *), void *ctx)
{
	struct sbx_lease *l, *tmp;
	sbx_lock(&m->lock, SBX_LOCK_MOUNT);
	HASH_ITER(hh, m->leases, l, tmp)
	fn(ctx, l);
	sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
}

/* Sets the state under l->lock, journals, wakes waiters. */
void set_state_locked(struct sbx_lease *l, enum sbx_lease_state to, const char *cause)
{
	enum sbx_lease_state from = l->state;
	l->state = to;
	if (to == SBX_LS_PAUSED)
		l->paused_boot = sbx_boot_s();
	if (to == SBX_LS_RUNNING) /* created, attached, resumed: it just answered */
		sbx_lease_heard(l);
	pthread_cond_broadcast(&l->cond);
	if (from != to)
		journal_transition(l, from, to, cause);
}

/* Drops the instance of a lease whose sandbox is gone. Called with l->lock. */
void mark_gone_locked(struct sbx_lease *l, enum sbx_lease_state to, const char *cause)
{
	struct sbx_instance *inst = l->inst;
	l->inst = NULL;
	set_state_locked(l, to, cause);
	if (inst) { /* released with the lease */
		l->gone = sbx_xrealloc(l->gone, (size_t)(l->n_gone + 1) * sizeof(*l->gone));
		l->gone[l->n_gone++] = inst;
	}
	sbx_fs_invalidate_gone(l);
}

/* ---- creating and attaching ------------------------------------------- */

int lease_prepare_dir(struct sbx_lease *l, struct sbx_error *err)
{
	int rc = sbx_mkdir_p(l->dir, 0700);
	if (rc)
		return sbx_error_set(err, rc, SBX_E_INTERNAL, "cannot create %s: %s", l->dir,
				     strerror(-rc));
	return 0;
}

/*
 * The lease of the table (mount lock held) that holds sandbox id, or NULL:
 * on prov (NULL: any provider), and unless any_state, one not killed or
 * reclaimed.
 */
static struct sbx_lease *holder_locked(struct sbx_mount *m, const struct sbx_provider *prov,
				       const char *id, bool any_state)
{
	struct sbx_lease *x, *tmp, *found = NULL;
	HASH_ITER(hh, m->leases, x, tmp)
	{
		sbx_lock(&x->lock, SBX_LOCK_LEASE);
		if ((!prov || x->prov == prov) && !strcmp(x->sandbox_id, id) &&
		    (any_state || (x->state != SBX_LS_KILLED && x->state != SBX_LS_RECLAIMED)))
			found = x;
		sbx_unlock(&x->lock, SBX_LOCK_LEASE);
		if (found)
			break;
	}
	return found;
}

/*
 * Inserts l into the table unless the name is taken, or (id not NULL: an
 * attach) another lease holds that sandbox already: two leases on one
 * sandbox would keep two caches and queues of its files, and the rmdir of
 * either would end what the other still uses.
 */
int table_insert(struct sbx_mount *m, struct sbx_lease *l, const char *id, struct sbx_error *err)
{
	struct sbx_lease *old;
	sbx_lock(&m->lock, SBX_LOCK_MOUNT);
	HASH_FIND_STR(m->leases, l->name, old);
	if (old) {
		sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
		return sbx_error_set(err, EEXIST, SBX_E_EXECUTION_FAILED, "lease %s already exists",
				     l->name);
	}
	if (id && (old = holder_locked(m, l->prov, id, false))) {
		int rc = sbx_error_set(err, EEXIST, SBX_E_EXECUTION_FAILED,
				       "sandbox %s is lease %s's already", id, old->name);
		sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
		return rc;
	}
	const char *why = sbx_mount_unloaded(m, l->name);
	if (why) {
		sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
		return sbx_error_set(err, EEXIST, SBX_E_EXECUTION_FAILED,
				     "lease %s is in the lease table but not loaded: %s", l->name,
				     why);
	}
	HASH_ADD_STR(m->leases, name, l);
	sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
	return 0;
}

static void table_remove(struct sbx_mount *m, struct sbx_lease *l)
{
	sbx_lock(&m->lock, SBX_LOCK_MOUNT);
	struct sbx_lease *cur;
	HASH_FIND_STR(m->leases, l->name, cur);
	if (cur == l)
		HASH_DEL(m->leases, l);
	sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
	if (cur == l) /* the table's reference, once: a second remover finds nothing */
		sbx_lease_put(l);
}

struct sbx_cache *lease_cache(struct sbx_lease *l)
{
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	struct sbx_cache *c = l->cache;
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	return c;
}

void lease_setup_cache(struct sbx_lease *l)
{
	if (!(l->prov->caps & SBX_CAP_DIRECT_IO) && !lease_cache(l)) {
		char *d = sbx_lease_path(l, "cache");
		struct sbx_cache *c = sbx_cache_new(d);
		struct sbx_wb *wb = fs_hooks && fs_hooks->wb_new ? fs_hooks->wb_new(l) : NULL;
		free(d);
		/* The lease may be in the table already: the timer reads l->cache under the lock.
		 */
		sbx_lock(&l->lock, SBX_LOCK_LEASE);
		l->cache = c;
		l->wb = wb;
		sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	}
}

int resolve_provider(struct sbx_lease *l, struct sbx_error *err)
{
	l->prov = sbx_provider_lookup(l->spec.provider, err);
	return l->prov ? 0 : -EINVAL;
}

/*
 * Saves the table with the new lease l in it. When it cannot be recorded
 * the lease would be lost at the next mount, so it is undone: a sandbox
 * this mount created is killed (kill), an attached one only let go.
 */
static int record_or_undo(struct sbx_mount *m, struct sbx_lease *l, bool kill,
			  struct sbx_error *err)
{
	struct sbx_error ke = SBX_ERROR_INIT;
	int rc = sbx_mount_save(m);
	if (!rc)
		return 0;
	char *why = sbx_mount_failure_text(m); /* the save's, not a lookup miss since */
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	struct sbx_instance *inst = l->inst;
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	int krc = kill && inst && l->prov->kill ? l->prov->kill(inst, &ke) : 0;
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	mark_gone_locked(l, SBX_LS_KILLED, "the lease table could not be saved");
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	why[strcspn(why, "\n")] = '\0';
	if (krc && krc != -ENOENT)
		sbx_error_set(err, rc, SBX_E_INTERNAL,
			      "lease %s not recorded (%s); killing its sandbox %s failed too: %s",
			      l->name, why, l->sandbox_id, ke.msg);
	else
		sbx_error_set(err, rc, SBX_E_INTERNAL, "lease %s not recorded, its sandbox %s: %s",
			      l->name, kill ? "killed" : "let go", why);
	free(why);
	if (kill)
		sbx_rm_rf(l->dir);
	table_remove(m, l); /* may free l */
	return rc;
}

/* ---- creates that got no answer ------------------------------------------------ */

/*
 * A create that timed out (or lost its connection) may still make the
 * sandbox: the server has the request. Such a name is remembered for
 * SBX_PENDING_KEEP_S; the provider's list (sandboxes labelled with the
 * lease name, created since the attempt, not any lease's) finds what it
 * made: a `mkdir` of the same name adopts it, and past SBX_PENDING_GRACE_S
 * the timer kills it. Another mount on the same account with a lease of
 * the same name created in that window would look the same; the window
 * is what bounds that risk.
 */
#define SBX_PENDING_GRACE_S 20
#define SBX_PENDING_KEEP_S 600
#define SBX_PENDING_EVERY_S 5

struct orphan_ctx {
	struct sbx_mount *m;
	const char *name;
	time_t since;
	char ids[8][128];
	int n;
};

static time_t iso_to_time(const char *s)
{
	struct tm tm = {0};
	if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
			 &tm.tm_min, &tm.tm_sec) != 6)
		return 0;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return timegm(&tm);
}

static bool id_is_leased(struct sbx_mount *m, const char *id)
{
	sbx_lock(&m->lock, SBX_LOCK_MOUNT);
	bool found = holder_locked(m, NULL, id, true) != NULL;
	sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
	return found;
}

static int orphan_one(void *ctx, const struct sbx_sandbox_entry *sb)
{
	struct orphan_ctx *oc = ctx;
	/* 60 s of slack: the provider's clock is not ours. */
	if (!sb->id || !sb->lease || strcmp(sb->lease, oc->name) ||
	    (sb->state && !strcmp(sb->state, "gone")) ||
	    iso_to_time(sb->created_at) < oc->since - 60 ||
	    oc->n == (int)(sizeof(oc->ids) / sizeof(*oc->ids)) || id_is_leased(oc->m, sb->id))
		return 0;
	snprintf(oc->ids[oc->n++], sizeof(oc->ids[0]), "%s", sb->id);
	return 0;
}

/* The sandboxes a pending create of p->name made (no locks held). */
static int find_orphans(struct sbx_mount *m, const struct sbx_pending_create *p,
			struct orphan_ctx *oc)
{
	struct sbx_error e = SBX_ERROR_INIT;
	*oc = (struct orphan_ctx){.m = m, .name = p->name, .since = p->since};
	return p->prov->list_sandboxes ? p->prov->list_sandboxes(orphan_one, oc, &e) : -ENOTSUP;
}

static void pending_add(struct sbx_mount *m, struct sbx_lease *l, time_t since,
			struct sbx_error *err)
{
	struct sbx_pending_create *p = sbx_xcalloc(1, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", l->name);
	p->prov = l->prov;
	sbx_spec_copy(&p->spec, &l->spec);
	p->since = since;
	p->failed_at = p->checked_at = sbx_boot_s();
	sbx_lock(&m->lock, SBX_LOCK_MOUNT);
	p->next = m->pending;
	m->pending = p;
	sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
	if (l->prov->list_sandboxes) {
		size_t n = strlen(err->msg);
		snprintf(err->msg + n, sizeof(err->msg) - n,
			 "; if the provider still makes the sandbox, `mkdir %s` again adopts it, "
			 "else it is killed after %d s",
			 l->name, SBX_PENDING_GRACE_S);
	}
}

/* Takes the pending entry for l's name out of the list (NULL if none). */
static struct sbx_pending_create *pending_take(struct sbx_mount *m, const char *name,
					       const struct sbx_provider *prov)
{
	struct sbx_pending_create **pp, *p = NULL;
	sbx_lock(&m->lock, SBX_LOCK_MOUNT);
	for (pp = &m->pending; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->name, name) && (*pp)->prov == prov) {
			p = *pp;
			*pp = p->next;
			break;
		}
	sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
	return p;
}

void pending_free(struct sbx_pending_create *p)
{
	sbx_spec_free(&p->spec);
	free(p);
}

/* mkdir NAME again after a create of NAME got no answer: its sandbox, if the provider made it. */
static bool pending_adopt(struct sbx_mount *m, struct sbx_lease *l, struct sbx_instance **inst)
{
	struct sbx_pending_create *p = pending_take(m, l->name, l->prov);
	struct sbx_error e = SBX_ERROR_INIT;
	struct orphan_ctx oc;
	bool adopted = false;
	if (!p)
		return false;
	if (find_orphans(m, p, &oc) == 0 && oc.n > 0 && l->prov->attach &&
	    l->prov->attach(&l->spec, oc.ids[0], NULL, inst, &e) == 0) {
		adopted = true;
		sbx_log(SBX_LOG_INFO,
			"lease %s: adopted sandbox %s, made by a create that timed out", l->name,
			oc.ids[0]);
	}
	if (adopted)
		pending_free(p);
	else { /* still pending: it may appear later */
		sbx_lock(&m->lock, SBX_LOCK_MOUNT);
		p->next = m->pending;
		m->pending = p;
		sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
	}
	return adopted;
}

/* Timer: kills what timed-out creates made once the grace is over; forgets old entries. */
void pending_sweep(struct sbx_mount *m)
{
	time_t now = sbx_boot_s();
	struct sbx_pending_create *todo = NULL, **pp, *p;
	sbx_lock(&m->lock, SBX_LOCK_MOUNT);
	for (pp = &m->pending; (p = *pp);) {
		if (now - p->failed_at < SBX_PENDING_GRACE_S ||
		    now - p->checked_at < SBX_PENDING_EVERY_S) {
			pp = &p->next;
			continue;
		}
		*pp = p->next; /* taken out while checked: no lock across the provider calls */
		p->next = todo;
		todo = p;
	}
	sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
	while ((p = todo)) {
		struct orphan_ctx oc;
		todo = p->next;
		p->checked_at = now;
		if (find_orphans(m, p, &oc) == 0) {
			for (int i = 0; i < oc.n; i++) {
				struct sbx_error e = SBX_ERROR_INIT;
				struct sbx_instance *inst = NULL;
				int rc = p->prov->attach && p->prov->kill
					     ? p->prov->attach(&p->spec, oc.ids[i], NULL, &inst, &e)
					     : sbx_error_set(&e, ENOTSUP, 0, "cannot attach");
				if (!rc) {
					rc = p->prov->kill(inst, &e);
					p->prov->release(inst);
				}
				sbx_log(rc ? SBX_LOG_WARN : SBX_LOG_INFO,
					"sandbox %s, made for %s by a create that timed out: %s%s",
					oc.ids[i], p->name, rc ? "cannot kill it: " : "killed",
					rc ? e.msg : "");
			}
		}
		if (now - p->failed_at > SBX_PENDING_KEEP_S || !p->prov->list_sandboxes) {
			pending_free(p);
			continue;
		}
		sbx_lock(&m->lock, SBX_LOCK_MOUNT);
		p->next = m->pending;
		m->pending = p;
		sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
	}
}

int sbx_lease_create(struct sbx_mount *m, const char *name, const char *profile,
		     const char *const *kv, json_t *overlay, struct sbx_error *err)
{
	const struct sbx_profile *p;
	struct sbx_lease *l;
	struct sbx_instance *inst = NULL;
	int rc;

	const char *why = sbx_lease_name_problem(name);
	if (why)
		return sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED,
				     "bad lease name \"%s\": %s", name, why);
	p = sbx_config_profile(&m->config, profile ? profile : m->profile);
	if (!p)
		return sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED, "no profile \"%s\"",
				     profile ? profile : m->profile);
	l = lease_new(m, name);
	sbx_spec_free(&l->spec);
	sbx_spec_copy(&l->spec, &p->spec);
	if (overlay) {
		rc = sbx_spec_apply_json(&l->spec, overlay, err);
		if (rc)
			goto out_free;
	}
	for (; kv && *kv; kv++) {
		char *dup = sbx_xstrdup(*kv), *eq = strchr(dup, '=');
		if (!eq) {
			rc = sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED,
					   "expected key=value, got \"%s\"", *kv);
			free(dup);
			goto out_free;
		}
		*eq = '\0';
		rc = sbx_spec_apply_kv(&l->spec, dup, eq + 1, err);
		free(dup);
		if (rc)
			goto out_free;
	}
	rc = resolve_provider(l, err);
	if (!rc)
		rc = sbx_provider_ready(l->prov, err);
	if (rc)
		goto out_free;
	if (!l->prov->create) {
		rc = sbx_error_set(err, ENOTSUP, SBX_E_EXECUTION_FAILED,
				   "provider %s cannot create sandboxes", l->prov->name);
		goto out_free;
	}
	rc = table_insert(m, l, NULL, err);
	if (rc)
		goto out_free;
	/* From here the lease is visible as `creating`; the table owns it. */
	rc = lease_prepare_dir(l, err);
	time_t started = time(NULL);
	/* A sandbox a timed-out create of this name made after all: adopted. */
	if (!rc && !pending_adopt(m, l, &inst))
		rc = l->prov->create(&l->spec, l->name, &inst, err);
	if (rc == -ETIMEDOUT || rc == -ENOTCONN)
		pending_add(m, l, started, err);
	if (rc) {
		sbx_rm_rf(l->dir); /* nothing of a refused create stays */
		table_remove(m, l);
		return rc;
	}
	lease_setup_cache(l);
	json_t *saved = l->prov->save ? l->prov->save(inst) : NULL; /* no lock held */
	adopt_instance(l, inst);
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	l->inst = inst;
	snprintf(l->sandbox_id, sizeof(l->sandbox_id), "%s", inst->id);
	l->created_boot = l->active_boot = sbx_boot_s();
	l->saved = saved;
	set_state_locked(l, SBX_LS_RUNNING, "created");
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	rc = record_or_undo(m, l, true, err);
	if (!rc)
		forget_lookup_error(m);
	return rc;
out_free:
	lease_free(l);
	return rc;
}

struct find_ctx {
	const char *id;
	bool found, ended;
};

static int find_sandbox(void *ctx, const struct sbx_sandbox_entry *sb)
{
	struct find_ctx *fc = ctx;
	if (!sb->id || strcmp(sb->id, fc->id))
		return 0;
	fc->found = true;
	fc->ended = sb->state && !strcmp(sb->state, "gone");
	return 1;
}

/*
 * A provider said sandbox `id` is gone (a 404, probe GONE). Reclaimed means
 * gone, so that is believed only when the provider's list call answers and
 * does not have it (or lists it as ended): a wrong URL, a refused key or a
 * server in trouble answer 404/401/5xx for everything, and must not cost
 * the user their leases. Without a list slot the provider's word stands.
 * Called without locks; false with err set when it cannot be confirmed.
 */
bool provider_confirms_gone(const struct sbx_provider *p, const char *id, struct sbx_error *err)
{
	struct find_ctx fc = {id, false, false};
	if (!p->list_sandboxes)
		return true;
	int rc = p->list_sandboxes(find_sandbox, &fc, err);
	if (rc && !fc.found) {
		sbx_error_prefix(err, "the provider said the sandbox is gone, but its list call "
				      "failed, so the lease is kept");
		return false;
	}
	if (fc.found && !fc.ended) {
		sbx_error_set(err, EIO, SBX_E_INTERNAL,
			      "the provider said sandbox %s is gone but still lists it: the lease "
			      "is kept",
			      id);
		return false;
	}
	return true;
}

/*
 * Settles a lease after an attach or a probe: rs (and whether a GONE is
 * confirmed) decides running, paused, reclaimed, or `error` (kept, retried
 * by the timer). Called without locks; takes inst (may be NULL).
 */
void settle_state(struct sbx_lease *l, struct sbx_instance *inst, enum sbx_remote_state rs,
		  const char *cause, const struct sbx_error *why)
{
	struct sbx_instance *old = NULL;
	struct sbx_error note = SBX_ERROR_INIT;
	if (inst)
		adopt_instance(l, inst);
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	if (inst && l->inst != inst) {
		old = l->inst; /* released below, with no lock held */
		l->inst = inst;
	}
	if (inst && inst->attach_note[0]) { /* what taking it back changed: said once */
		sbx_error_set(&note, ESRCH, SBX_E_EXECUTION_FAILED, "%s", inst->attach_note);
		inst->attach_note[0] = '\0';
	}
	if (rs == SBX_REMOTE_PAUSED)
		set_state_locked(l, SBX_LS_PAUSED, cause);
	else if (rs == SBX_REMOTE_GONE)
		mark_gone_locked(l, SBX_LS_RECLAIMED, "sandbox gone (the provider's list agrees)");
	else if (rs == SBX_REMOTE_UNKNOWN && why)
		set_state_locked(l, SBX_LS_ERROR, why->msg);
	else
		set_state_locked(l, SBX_LS_RUNNING, cause);
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	if (old)
		l->prov->release(old);
	if (note.err)
		record_error(l, "attach", &note);
	if (rs == SBX_REMOTE_UNKNOWN && why)
		record_error(l, cause, why);
}

/* Probes inst and sets the lease state to match. Called without locks. */
void adopt_remote_state(struct sbx_lease *l, struct sbx_instance *inst, const char *cause)
{
	enum sbx_remote_state rs = SBX_REMOTE_UNKNOWN;
	struct sbx_error e = SBX_ERROR_INIT;
	if (l->prov->probe && l->prov->probe(inst, &rs, &e) != 0)
		rs = SBX_REMOTE_RUNNING; /* attach just answered: assume it runs */
	if (rs == SBX_REMOTE_GONE && !provider_confirms_gone(l->prov, inst->id, &e)) {
		settle_state(l, inst, SBX_REMOTE_UNKNOWN, cause, &e);
		return;
	}
	settle_state(l, inst, rs, cause, NULL);
}

int sbx_lease_attach(struct sbx_mount *m, const char *name, const char *sandbox_id,
		     const char *provider, struct sbx_error *err)
{
	struct sbx_lease *l;
	struct sbx_instance *inst = NULL;
	const struct sbx_profile *p = sbx_config_profile(&m->config, m->profile);
	int rc;

	const char *why = sbx_lease_name_problem(name);
	if (why)
		return sbx_error_set(err, EINVAL, 0, "bad lease name \"%s\": %s", name, why);
	l = lease_new(m, name);
	if (p) {
		sbx_spec_free(&l->spec);
		sbx_spec_copy(&l->spec, &p->spec);
	}
	if (provider) {
		free(l->spec.provider);
		l->spec.provider = sbx_xstrdup(provider);
	}
	rc = resolve_provider(l, err);
	if (!rc)
		rc = sbx_provider_ready(l->prov, err);
	if (!rc && !l->prov->attach)
		rc = sbx_error_set(err, ENOTSUP, 0, "provider %s cannot attach", l->prov->name);
	if (rc) {
		lease_free(l);
		return rc;
	}
	rc = table_insert(m, l, sandbox_id, err);
	if (rc) {
		lease_free(l);
		return rc;
	}
	rc = lease_prepare_dir(l, err);
	if (!rc)
		rc = l->prov->attach(&l->spec, sandbox_id, NULL, &inst, err);
	if (rc) {
		sbx_rm_rf(l->dir);
		table_remove(m, l);
		return rc;
	}
	snprintf(l->sandbox_id, sizeof(l->sandbox_id), "%s", inst->id);
	lease_setup_cache(l);
	adopt_remote_state(l, inst, "attached");
	rc = record_or_undo(m, l, false, err);
	if (!rc)
		forget_lookup_error(m);
	return rc;
}

/*
 * rmdir of a lease whose sandbox is gone (or forget, which leaves it):
 * what was written here and never reached it (write-back, failed uploads)
 * is the only copy left, so it is moved to STATE/unsaved/NAME-TIME-XXXXXX
 * and the root `error` says where (op: "rmdir" or "forget"). A sandbox
 * the user ends takes its files with it, as on a local lease.
 */
static int keep_unsaved(struct sbx_mount *m, struct sbx_lease *l, bool forget,
			struct sbx_error *err)
{
	char stamp[32], *first = NULL, *left = NULL;
	sbx_file_time(time(NULL), stamp, sizeof(stamp));
	char *cache = sbx_lease_path(l, "cache");
	char *dest = sbx_xasprintf("%s/unsaved/%s-%s-XXXXXX", m->state_dir, l->name, stamp);
	int n = sbx_cache_keep_unsaved(cache, dest, &first, err);
	struct sbx_error e = SBX_ERROR_INIT;
	/* forget's line is a notice ("forget OK: ..."): where the sandbox is, for an attach */
	if (forget)
		left =
		    sbx_xasprintf("lease %s forgotten; its sandbox %s (%s) was left as it is",
				  l->name, l->sandbox_id[0] ? l->sandbox_id : "-", l->prov->name);
	if (n > 0 && !forget)
		sbx_error_set(&e, ENOENT, SBX_E_NOT_FOUND,
			      "lease %s: %d file%s written here never reached its sandbox, which "
			      "is gone: kept in %s (the first: %s)",
			      l->name, n, n == 1 ? "" : "s", dest, first);
	else if (n > 0)
		snprintf(e.msg, sizeof(e.msg),
			 "%s; %d file%s written here never reached it: kept in %s (the first: %s)",
			 left, n, n == 1 ? "" : "s", dest, first);
	else if (forget)
		snprintf(e.msg, sizeof(e.msg), "%s", left);
	if (n > 0 || (forget && n == 0))
		mount_error_line(m, forget ? "forget" : "rmdir", &e, false);
	free(left);
	free(first);
	free(dest);
	free(cache);
	return n < 0 ? n : 0;
}

static int wait_transition_locked(struct sbx_lease *l, struct sbx_error *err);
/* How long `forget` of a running lease spends uploading its unsaved files. */
#define SBX_FORGET_SAVE_S 30

/* rmdir (kill first) or forget (leave the sandbox) of the lease NAME. */
static int lease_end(struct sbx_mount *m, const char *name, bool kill, struct sbx_error *err)
{
	struct sbx_lease *l = sbx_lease_get(m, name);
	int rc = 0;
	if (!l)
		return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "no lease %s", name);
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	if (l->ending) { /* rmdir and forget (or two forgets: no VFS lock orders them) */
		sbx_unlock(&l->lock, SBX_LOCK_LEASE);
		sbx_lease_put(l);
		return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "lease %s is being removed",
				     name);
	}
	l->ending = true;
	bool gone = !kill || l->state == SBX_LS_RECLAIMED;
	if (!kill) /* an attach again, a pause... in flight ends first (kill waits too) */
		rc = wait_transition_locked(l, err);
	bool running = l->state == SBX_LS_RUNNING;
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	/* forget leaves the sandbox: what was written for it goes up first, if it can */
	if (!kill && !rc && running && l->cache && sbx_cache_unsaved_count(l->cache))
		lease_save_unsaved(l, true, sbx_now_ms() + SBX_FORGET_SAVE_S * 1000LL);
	if (kill)
		rc = sbx_lease_kill(l, "rmdir", err);
	if (rc == -ENOTCONN) {
		char *hint = sbx_xasprintf("its sandbox cannot be killed now (`echo forget > "
					   "%s/state` drops the lease and leaves the sandbox)",
					   name);
		sbx_error_prefix(err, hint);
		free(hint);
	}
	if (!rc && gone)
		rc = keep_unsaved(m, l, !kill, err);
	if (rc && rc != -ENOENT) { /* the lease stays: a later rmdir or forget may try again */
		sbx_lock(&l->lock, SBX_LOCK_LEASE);
		l->ending = false;
		sbx_unlock(&l->lock, SBX_LOCK_LEASE);
		sbx_lease_put(l);
		return rc;
	}
	table_remove(m, l);
	sbx_rm_rf(l->dir);
	sbx_lease_put(l);
	sbx_mount_save(m);
	return 0;
}

int sbx_lease_remove(struct sbx_mount *m, const char *name, struct sbx_error *err)
{
	return lease_end(m, name, true, err);
}

int sbx_lease_forget(struct sbx_mount *m, const char *name, struct sbx_error *err)
{
	return lease_end(m, name, false, err);
}

/* ---- lifecycle transitions -------------------------------------------- */

/* Waits (l->lock held) until no transition is in flight; ETIMEDOUT past the bound. */
static int wait_transition_locked(struct sbx_lease *l, struct sbx_error *err)
{
	struct timespec dl;
	sbx_deadline_in(SBX_TRANSITION_WAIT_S * 1000L, &dl);
	while (l->transition) {
		if (sbx_cond_wait_until(&l->cond, &l->lock, &dl) == ETIMEDOUT)
			return sbx_error_set(err, ETIMEDOUT, SBX_E_TIMEOUT,
					     "lease %s: %s did not finish within %d s", l->name,
					     sbx_lease_state_name(l->state), SBX_TRANSITION_WAIT_S);
	}
	return 0;
}

static int gone_error_locked(struct sbx_lease *l, struct sbx_error *err)
{
	switch (l->state) {
	case SBX_LS_KILLED:
		return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "lease %s was killed", l->name);
	case SBX_LS_RECLAIMED:
		return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND,
				     "lease %s was reclaimed (its sandbox no longer exists)",
				     l->name);
	case SBX_LS_ERROR:
		return sbx_error_set(err, ENOTCONN, SBX_E_CONNECTION_FAILED,
				     "lease %s: its provider does not answer for it (the reason is "
				     "in its error file); tried again every %d s",
				     l->name, SBX_RETRY_EVERY_S);
	default:
		return 0;
	}
}

int sbx_lease_ended(struct sbx_lease *l, struct sbx_error *err)
{
	struct sbx_error we = SBX_ERROR_INIT;
	int rc = 0;
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	if (!wait_transition_locked(l, &we) &&
	    (l->state == SBX_LS_KILLED || l->state == SBX_LS_RECLAIMED))
		rc = gone_error_locked(l, err);
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	return rc;
}

/*
 * Runs one provider lifecycle call as a transition: from state `via` to
 * `to` (or back to `from` on failure). Called and returns with l->lock held.
 */
static int transition_locked(struct sbx_lease *l, enum sbx_lease_state via, enum sbx_lease_state to,
			     int (*call)(struct sbx_instance *, struct sbx_error *),
			     const char *cause, const char *op, struct sbx_error *err)
{
	enum sbx_lease_state from = l->state;
	struct sbx_instance *inst = l->inst;
	int rc;
	if (!call)
		return sbx_error_set(err, ENOTSUP, SBX_E_EXECUTION_FAILED, "provider %s cannot %s",
				     l->prov->name, op);
	l->transition = true;
	set_state_locked(l, via, cause);
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	sbx_lock_assert_none(); /* `state`, `info`, `status` never wait on it */
	rc = call(inst, err);
	bool gone = false;
	if (rc == -ENOENT && to != SBX_LS_KILLED) {
		struct sbx_error ce = SBX_ERROR_INIT;
		gone = provider_confirms_gone(l->prov, inst->id, &ce);
		if (!gone) {
			char was[SBX_ERR_MSG_MAX];
			snprintf(was, sizeof(was), "%s", err->msg);
			sbx_error_set(err, ENOTCONN, SBX_E_CONNECTION_FAILED, "%s: %s (%s)", op,
				      was, ce.msg);
		}
	}
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	l->transition = false;
	if (rc == 0) {
		set_state_locked(l, to, cause);
	} else if (gone) {
		mark_gone_locked(l, SBX_LS_RECLAIMED, "sandbox gone");
	} else {
		set_state_locked(l, from, "failed");
	}
	return rc;
}

int sbx_lease_pause(struct sbx_lease *l, const char *cause, struct sbx_error *err)
{
	int rc;
	if (fs_hooks && fs_hooks->before_pause)
		fs_hooks->before_pause(l);
	/* Queued metadata first, with no lock held: `state` must not wait on it. */
	struct sbx_instance *inst = sbx_lease_peek(l);
	if (inst && l->prov->sync) {
		struct sbx_error se = SBX_ERROR_INIT;
		sbx_lock_assert_none();
		if (l->prov->sync(inst, &se))
			record_error(l, "sync before pause", &se);
	}
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	rc = wait_transition_locked(l, err);
	if (!rc)
		rc = gone_error_locked(l, err);
	if (!rc && l->state == SBX_LS_RUNNING) {
		rc = transition_locked(l, SBX_LS_PAUSING, SBX_LS_PAUSED, l->prov->pause, cause,
				       "pause", err);
	}
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	if (rc)
		sbx_lease_error(l, "pause", err);
	sbx_mount_save(l->mount);
	return rc;
}

static int resume_locked(struct sbx_lease *l, const char *cause, struct sbx_error *err)
{
	int rc = transition_locked(l, SBX_LS_RESUMING, SBX_LS_RUNNING, l->prov->unpause, cause,
				   "resume", err);
	if (!rc) {
		l->active_boot = sbx_boot_s();
		atomic_store(&l->unsaved_due, true); /* what the pause refused goes up now */
	}
	return rc;
}

int sbx_lease_resume(struct sbx_lease *l, const char *cause, struct sbx_error *err)
{
	int rc;
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	rc = wait_transition_locked(l, err);
	if (!rc)
		rc = gone_error_locked(l, err);
	if (!rc && l->state == SBX_LS_PAUSED)
		rc = resume_locked(l, cause, err);
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	if (rc)
		sbx_lease_error(l, "resume", err);
	sbx_mount_save(l->mount);
	return rc;
}

int sbx_lease_kill(struct sbx_lease *l, const char *cause, struct sbx_error *err)
{
	int rc;
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	rc = wait_transition_locked(l, err);
	if (!rc && (l->state == SBX_LS_KILLED || l->state == SBX_LS_RECLAIMED)) {
		sbx_unlock(&l->lock, SBX_LOCK_LEASE);
		return 0;
	}
	if (!rc && !l->inst) {
		/* Never attached (provider down at mount): nothing to kill here. */
		mark_gone_locked(l, SBX_LS_KILLED, cause);
		sbx_unlock(&l->lock, SBX_LOCK_LEASE);
		sbx_kinval_wait_detached(SBX_GONE_INVAL_WAIT_MS);
		return 0;
	}
	if (!rc) {
		rc = transition_locked(l, l->state, SBX_LS_KILLED, l->prov->kill, cause, "kill",
				       err);
		if (rc == -ENOENT)
			rc = 0; /* already gone: what kill wanted */
		if (!rc)
			mark_gone_locked(l, SBX_LS_KILLED, cause);
	}
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	/* Unlocked: the reads the kernel's invalidation waits for can finish. */
	sbx_kinval_wait_detached(SBX_GONE_INVAL_WAIT_MS);
	if (rc)
		sbx_lease_error(l, "kill", err);
	sbx_mount_save(l->mount);
	return rc;
}

int sbx_lease_use(struct sbx_lease *l, struct sbx_instance **inst, struct sbx_error *err)
{
	int rc;
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	rc = wait_transition_locked(l, err);
	if (!rc)
		rc = gone_error_locked(l, err);
	if (!rc && l->state == SBX_LS_PAUSED) {
		if (!l->spec.auto_resume)
			rc = sbx_error_set(err, EAGAIN, SBX_E_EXECUTION_FAILED,
					   "lease %s is paused and autoResume is off: write "
					   "\"resume\" to its state file",
					   l->name);
		else
			rc = resume_locked(l, "access", err);
	}
	if (!rc && !l->inst)
		rc = sbx_error_set(err, ENOTCONN, SBX_E_CONNECTION_FAILED,
				   "lease %s has no sandbox", l->name);
	if (!rc) {
		l->active++;
		l->active_boot = sbx_boot_s();
		*inst = l->inst;
	}
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	return rc;
}

void sbx_lease_unuse(struct sbx_lease *l)
{
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	if (l->active > 0)
		l->active--;
	l->active_boot = sbx_boot_s();
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
}

struct sbx_instance *sbx_lease_peek(struct sbx_lease *l)
{
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	struct sbx_instance *i =
	    (l->state == SBX_LS_RUNNING || l->state == SBX_LS_PAUSED) ? l->inst : NULL;
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	return i;
}

/* ---- visibility --------------------------------------------------------- */

json_t *sbx_lease_info(struct sbx_lease *l)
{
	char c[32], a[32];
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	sbx_iso_time(sbx_boot_to_wall(l->created_boot), c, sizeof(c));
	sbx_iso_time(sbx_boot_to_wall(l->active_boot), a, sizeof(a));
	json_t *res =
	    json_pack("{s:I, s:I, s:I, s:I}", "cpu", (json_int_t)l->spec.res.cpu, "memoryMB",
		      (json_int_t)l->spec.res.memory_mb, "diskMB", (json_int_t)l->spec.res.disk_mb,
		      "timeout", (json_int_t)l->spec.res.timeout_s);
	json_t *o = json_pack(
	    "{s:s, s:s, s:s, s:s?, s:s, s:s, s:s, s:I, s:o, s:s?, s:b}", "name", l->name,
	    "provider", l->spec.provider, "sandboxId", l->sandbox_id, "template",
	    l->spec.template_name, "state", sbx_lease_state_name(l->state), "createdAt", c,
	    "lastActiveAt", a, "idleTimeout", (json_int_t)l->spec.idle_timeout_s, "resources", res,
	    "workingDirectory", l->spec.working_dir, "autoResume", l->spec.auto_resume);
	json_object_set_new(o, "runs", json_integer((json_int_t)l->runs));
	if (l->state == SBX_LS_PAUSED) {
		char p[32];
		sbx_iso_time(sbx_boot_to_wall(l->paused_boot), p, sizeof(p));
		json_object_set_new(o, "pausedAt", json_string(p));
	}
	struct sbx_instance *inst = l->inst;
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	/* The provider's own facts (info() answers from memory, never the network). */
	json_t *facts = NULL;
	struct sbx_error e = SBX_ERROR_INIT;
	if (inst && l->prov->info && l->prov->info(inst, &facts, &e) == 0 && facts) {
		json_t *t = json_object_get(facts, "template");
		if (json_is_null(json_object_get(o, "template")) || !json_object_get(o, "template"))
			if (json_is_string(t))
				json_object_set(o, "template", t);
		json_object_set_new(o, "sandbox", facts);
	}
	return o;
}

void sbx_lease_status_line(struct sbx_lease *l, struct sbx_buf *out)
{
	size_t unsaved = l->cache ? sbx_cache_unsaved_count(l->cache) : 0;
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	long idle = (long)(sbx_boot_s() - l->active_boot);
	if (l->active)
		idle = 0;
	sbx_buf_addf(out, "%s %s %s %lds %s", l->name, l->spec.provider,
		     sbx_lease_state_name(l->state), idle < 0 ? 0 : idle,
		     l->sandbox_id[0] ? l->sandbox_id : "-");
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	/* Files written here, not in the sandbox yet (`error` says where they are kept). */
	if (unsaved)
		sbx_buf_addf(out, " unsaved=%zu:%s/cache", unsaved, l->dir);
}

int sbx_refuse(struct sbx_mount *m, struct sbx_lease *l, int errnum, const char *op,
	       const char *fmt, ...)
{
	struct sbx_error e = SBX_ERROR_INIT;
	va_list ap;
	int rc;
	va_start(ap, fmt);
	rc = sbx_error_vset(&e, errnum, SBX_E_EXECUTION_FAILED, fmt, ap);
	va_end(ap);
	if (l)
		sbx_lease_error(l, op, &e);
	else
		sbx_mount_error(m, op, &e);
	return rc;
}
