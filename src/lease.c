/*
 * lease — lease table, lifecycle state machine and timers (see lease.h).
 *
 * Transitions (creating → running ⇄ paused → killed/reclaimed) run with
 * the lease's `transition` flag set and its lock released, so readers of
 * `state`, `info` and `status` never wait on a provider. Every transition
 * is journaled with its cause and the table is saved after it.
 */
#include "lease.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "cache.h"
#include "writeback.h"
#include "fsmirror.h"
#include "kinval.h"
#include "runs.h"
#include "statedir.h"

/* How long an operation waits for a transition in flight (resume, pause). */
#define SBX_TRANSITION_WAIT_S 120
/* How often running leases are probed for reclaim (local probes are cheap). */
#define SBX_PROBE_EVERY_S 30
#define SBX_PROBE_LOCAL_EVERY_S 5
/* How long the daemon's exit (unmount, SIGTERM) spends uploading unsaved files. */
#define SBX_EXIT_SAVE_S 30
/* How often a lease in `error` (provider unreachable) is attached again. */
#define SBX_RETRY_EVERY_S 5
/* While a lease is in use, the provider's own lifetime is extended this often ... */
#define SBX_EXTEND_EVERY_S 120
/* ... to at least this many seconds ahead (past the idle timeout). */
#define SBX_EXTEND_MIN_S 900

static const char *const state_names[] = {
	"creating", "running", "pausing", "paused", "resuming", "killed", "reclaimed", "error",
};

const char *sbx_lease_state_name(enum sbx_lease_state s)
{
	return (unsigned)s < sizeof(state_names) / sizeof(*state_names) ? state_names[s] : "error";
}

static int state_from_name(const char *n)
{
	for (size_t i = 0; i < sizeof(state_names) / sizeof(*state_names); i++)
		if (!strcmp(n, state_names[i]))
			return (int)i;
	return -1;
}

bool sbx_lease_name_valid(const char *n)
{
	static const char *const reserved[] = {"README", "ctl", "status", "error", "profiles",
					       NULL};
	size_t len = strlen(n);
	if (!len || len > 64 || n[0] == '.' || n[0] == '-')
		return false;
	for (const char *const *r = reserved; *r; r++)
		if (!strcmp(n, *r))
			return false;
	for (; *n; n++)
		if (!((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') ||
		      (*n >= '0' && *n <= '9') || *n == '-' || *n == '_' || *n == '.'))
			return false;
	return true;
}

char *sbx_lease_path(struct sbx_lease *l, const char *file)
{
	struct sbx_buf b = SBX_BUF_INIT;
	sbx_buf_addf(&b, "%s/%s", l->dir, file);
	return sbx_buf_detach(&b, NULL);
}

static void mount_error_line(struct sbx_mount *m, const char *op, const struct sbx_error *e,
			     bool lookup);

int sbx_lease_journal(struct sbx_lease *l, json_t *ev)
{
	char ts[32];
	struct sbx_error e = SBX_ERROR_INIT;
	sbx_iso_time(time(NULL), ts, sizeof(ts));
	json_object_set_new(ev, "time", json_string(ts));
	char *line = json_dumps(ev, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(ev);
	if (!line) {
		sbx_error_set(&e, EINVAL, SBX_E_INTERNAL, "lease %s: a journal event is not JSON",
			      l->name);
	} else {
		size_t n = strlen(line);
		line = sbx_xrealloc(line, n + 2);
		line[n] = '\n';
		line[n + 1] = '\0';
		char *p = sbx_lease_path(l, "log");
		int rc = sbx_append_file(p, line, n + 1);
		if (rc)
			sbx_error_set(&e, rc, SBX_E_INTERNAL, "cannot write the journal %s: %s", p,
				      strerror(-rc));
		free(p);
		free(line);
	}
	/* The lease's own error file may be on the same full disk: the root's is memory. */
	if (e.err && l->mount)
		mount_error_line(l->mount, "journal", &e, false);
	return -e.err;
}

static void journal_transition(struct sbx_lease *l, enum sbx_lease_state from,
			       enum sbx_lease_state to, const char *cause)
{
	sbx_lease_journal(l, json_pack("{s:s, s:s, s:s, s:s}", "event", "state", "from",
				       sbx_lease_state_name(from), "to", sbx_lease_state_name(to),
				       "cause", cause ? cause : ""));
	sbx_log(SBX_LOG_INFO, "lease %s: %s -> %s (%s)", l->name, sbx_lease_state_name(from),
		sbx_lease_state_name(to), cause ? cause : "");
}

/* The lease's `error` file and journal, without the reclaim check. */
static void record_error(struct sbx_lease *l, const char *op, const struct sbx_error *e)
{
	char ts[32], line[SBX_ERR_MSG_MAX + 128];
	sbx_iso_time(time(NULL), ts, sizeof(ts));
	snprintf(line, sizeof(line), "%s %s %s: %s\n", ts, op, sbx_errcode_name(e->code), e->msg);
	char *p = sbx_lease_path(l, "error");
	sbx_write_file_atomic(p, line, strlen(line));
	free(p);
	sbx_lease_journal(l, json_pack("{s:s, s:s, s:s, s:s, s:i}", "event", "error", "op", op,
				       "code", sbx_errcode_name(e->code), "message", e->msg,
				       "errno", e->err));
	sbx_log(SBX_LOG_WARN, "lease %s: %s: %s", l->name, op, e->msg);
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

/* ---- the mount -------------------------------------------------------- */

/* Sets the root `error` line; err_lock is a leaf, so any lock may be held. */
static void mount_error_line(struct sbx_mount *m, const char *op, const struct sbx_error *e,
			     bool lookup)
{
	char ts[32];
	sbx_iso_time(time(NULL), ts, sizeof(ts));
	pthread_mutex_lock(&m->err_lock);
	snprintf(m->error_line, sizeof(m->error_line), "%s %s %s: %s\n", ts, op,
		 sbx_errcode_name(e->code), e->msg);
	m->error_is_lookup = lookup;
	pthread_mutex_unlock(&m->err_lock);
	sbx_log(lookup ? SBX_LOG_DEBUG : SBX_LOG_WARN, "%s: %s", op, e->msg);
}

void sbx_mount_error(struct sbx_mount *m, const char *op, const struct sbx_error *e)
{
	mount_error_line(m, op, e, !strcmp(op, "lookup"));
}

/* A lookup miss is only worth reporting until the name is created after all. */
static void forget_lookup_error(struct sbx_mount *m)
{
	pthread_mutex_lock(&m->err_lock);
	if (m->error_is_lookup) {
		m->error_line[0] = '\0';
		m->error_is_lookup = false;
	}
	pthread_mutex_unlock(&m->err_lock);
}

char *sbx_mount_error_text(struct sbx_mount *m)
{
	pthread_mutex_lock(&m->err_lock);
	char *s = strdup(m->error_line);
	pthread_mutex_unlock(&m->err_lock);
	return s;
}

static struct sbx_lease *lease_new(struct sbx_mount *m, const char *name)
{
	struct sbx_lease *l = calloc(1, sizeof(*l));
	if (!l)
		abort();
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->mount = m;
	l->refs = 1; /* the table's */
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	sbx_spec_init(&l->spec);
	struct sbx_buf b = SBX_BUF_INIT;
	sbx_buf_addf(&b, "%s/leases/%s", m->state_dir, name);
	l->dir = sbx_buf_detach(&b, NULL);
	l->env_text = strdup("");
	l->created_at = l->last_active = time(NULL);
	l->kinval = sbx_kinval_new();
	return l;
}

static void lease_free(struct sbx_lease *l)
{
	if (l->inst)
		l->prov->release(l->inst);
	for (int i = 0; i < l->n_gone; i++)
		l->prov->release(l->gone[i]);
	sbx_wb_free(l->wb);
	sbx_cache_free(l->cache);
	sbx_kinval_free(l->kinval);
	sbx_runs_free(l);
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
	pthread_mutex_lock(&m->lock);
	HASH_FIND_STR(m->leases, name, l);
	if (l)
		l->refs++;
	pthread_mutex_unlock(&m->lock);
	return l;
}

void sbx_lease_put(struct sbx_lease *l)
{
	if (!l)
		return;
	struct sbx_mount *m = l->mount;
	pthread_mutex_lock(&m->lock);
	int last = --l->refs == 0;
	pthread_mutex_unlock(&m->lock);
	if (last)
		lease_free(l);
}

void sbx_lease_foreach(struct sbx_mount *m, void (*fn)(void *, struct sbx_lease *), void *ctx)
{
	struct sbx_lease *l, *tmp;
	pthread_mutex_lock(&m->lock);
	HASH_ITER(hh, m->leases, l, tmp)
	fn(ctx, l);
	pthread_mutex_unlock(&m->lock);
}

/* The lease's table entry; NULL with *skip set while it is being created. */
static json_t *lease_to_json(struct sbx_lease *l, bool *skip)
{
	char c[32], a[32], p[32];
	pthread_mutex_lock(&l->lock);
	*skip = l->state == SBX_LS_CREATING;
	if (*skip) {
		pthread_mutex_unlock(&l->lock);
		return NULL;
	}
	sbx_iso_time(l->created_at, c, sizeof(c));
	sbx_iso_time(l->last_active, a, sizeof(a));
	sbx_iso_time(l->paused_at, p, sizeof(p));
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:s}", "name", l->name,
			      "provider", l->spec.provider, "sandboxId", l->sandbox_id, "state",
			      sbx_lease_state_name(l->state), "createdAt", c, "lastActiveAt", a,
			      "pausedAt", p, "spec", sbx_spec_to_json(&l->spec), "env",
			      l->env_text);
	json_object_set_new(o, "createdAtEpoch", json_integer(l->created_at));
	json_object_set_new(o, "lastActiveEpoch", json_integer(l->last_active));
	json_object_set_new(o, "pausedEpoch", json_integer(l->paused_at));
	if (l->saved)
		json_object_set(o, "saved", l->saved);
	pthread_mutex_unlock(&l->lock);
	return o;
}

struct lease_list {
	struct sbx_lease **v;
	size_t n;
};

static void collect(void *ctx, struct sbx_lease *l)
{
	struct lease_list *ll = ctx;
	ll->v = realloc(ll->v, (ll->n + 1) * sizeof(*ll->v));
	if (!ll->v)
		abort();
	l->refs++; /* under the table lock */
	ll->v[ll->n++] = l;
}

int sbx_mount_save(struct sbx_mount *m)
{
	struct sbx_error e = SBX_ERROR_INIT;
	struct lease_list ll = {0};
	json_t *arr = json_array();
	int rc;
	/* save_lock: a slower save never overwrites a newer one's snapshot. */
	pthread_mutex_lock(&m->save_lock);
	sbx_lease_foreach(m, collect, &ll);
	for (size_t i = 0; i < ll.n; i++) {
		bool skip;
		json_t *j = lease_to_json(ll.v[i], &skip);
		if (j)
			json_array_append_new(arr, j);
		else if (!skip && !e.err) /* never a table without it, silently */
			sbx_error_set(&e, EINVAL, SBX_E_INTERNAL,
				      "lease %s cannot be written into the lease table "
				      "(a field is not UTF-8?): the table is left as it was",
				      ll.v[i]->name);
		sbx_lease_put(ll.v[i]);
	}
	free(ll.v);
	json_t *root = json_pack("{s:i, s:o}", "version", 1, "leases", arr);
	char *s = e.err ? NULL : json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (e.err)
		rc = -e.err;
	else if (!s)
		rc = sbx_error_set(&e, EINVAL, SBX_E_INTERNAL,
				   "the lease table cannot be written as JSON");
	else
		rc = sbx_statedir_write_table(m->state_dir, s, &e);
	pthread_mutex_unlock(&m->save_lock);
	free(s);
	if (rc)
		mount_error_line(m, "save", &e, false);
	return rc;
}

/* Sets the state under l->lock, journals, wakes waiters. */
static void set_state_locked(struct sbx_lease *l, enum sbx_lease_state to, const char *cause)
{
	enum sbx_lease_state from = l->state;
	l->state = to;
	if (to == SBX_LS_PAUSED)
		l->paused_at = time(NULL);
	pthread_cond_broadcast(&l->cond);
	if (from != to)
		journal_transition(l, from, to, cause);
}

/* Drops the instance of a lease whose sandbox is gone. Called with l->lock. */
static void mark_gone_locked(struct sbx_lease *l, enum sbx_lease_state to, const char *cause)
{
	struct sbx_instance *inst = l->inst;
	l->inst = NULL;
	set_state_locked(l, to, cause);
	if (inst && l->n_gone < (int)(sizeof(l->gone) / sizeof(*l->gone)))
		l->gone[l->n_gone++] = inst; /* released with the lease */
	else if (inst)
		l->prov->release(inst); /* only after repeated attach/kill cycles */
	if (l->cache)
		sbx_cache_invalidate_all(l->cache);
	sbx_kinval_flush(l->kinval);
}

/* ---- creating and attaching ------------------------------------------- */

static int lease_prepare_dir(struct sbx_lease *l, struct sbx_error *err)
{
	int rc = sbx_mkdir_p(l->dir, 0700);
	if (rc)
		return sbx_error_set(err, rc, SBX_E_INTERNAL, "cannot create %s: %s", l->dir,
				     strerror(-rc));
	return 0;
}

/* Inserts l into the table unless the name is taken. */
static int table_insert(struct sbx_mount *m, struct sbx_lease *l, struct sbx_error *err)
{
	struct sbx_lease *old;
	pthread_mutex_lock(&m->lock);
	HASH_FIND_STR(m->leases, l->name, old);
	if (old) {
		pthread_mutex_unlock(&m->lock);
		return sbx_error_set(err, EEXIST, SBX_E_EXECUTION_FAILED, "lease %s already exists",
				     l->name);
	}
	HASH_ADD_STR(m->leases, name, l);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static void table_remove(struct sbx_mount *m, struct sbx_lease *l)
{
	pthread_mutex_lock(&m->lock);
	struct sbx_lease *cur;
	HASH_FIND_STR(m->leases, l->name, cur);
	if (cur == l)
		HASH_DEL(m->leases, l);
	pthread_mutex_unlock(&m->lock);
	sbx_lease_put(l);
}

static void lease_setup_cache(struct sbx_lease *l)
{
	if (!(l->prov->caps & SBX_CAP_DIRECT_IO) && !l->cache) {
		char *d = sbx_lease_path(l, "cache");
		l->cache = sbx_cache_new(d);
		l->wb = sbx_wb_new(l);
		free(d);
	}
}

static int resolve_provider(struct sbx_lease *l, struct sbx_error *err)
{
	l->prov = sbx_provider_find(l->spec.provider);
	if (!l->prov)
		return sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED, "unknown provider \"%s\"",
				     l->spec.provider);
	return 0;
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
	char *why = sbx_mount_error_text(m);
	pthread_mutex_lock(&l->lock);
	struct sbx_instance *inst = l->inst;
	pthread_mutex_unlock(&l->lock);
	int krc = kill && inst && l->prov->kill ? l->prov->kill(inst, &ke) : 0;
	pthread_mutex_lock(&l->lock);
	mark_gone_locked(l, SBX_LS_KILLED, "the lease table could not be saved");
	pthread_mutex_unlock(&l->lock);
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

struct sbx_pending_create {
	struct sbx_pending_create *next;
	char name[65];
	const struct sbx_provider *prov;
	struct sbx_spec spec;
	time_t since, failed_at, checked_at;
};

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
	if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			 &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
		return 0;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return timegm(&tm);
}

static bool id_is_leased(struct sbx_mount *m, const char *id)
{
	struct sbx_lease *l, *tmp;
	bool found = false;
	pthread_mutex_lock(&m->lock);
	HASH_ITER(hh, m->leases, l, tmp)
	{
		pthread_mutex_lock(&l->lock);
		found = found || !strcmp(l->sandbox_id, id);
		pthread_mutex_unlock(&l->lock);
	}
	pthread_mutex_unlock(&m->lock);
	return found;
}

static int orphan_one(void *ctx, const struct sbx_sandbox_entry *sb)
{
	struct orphan_ctx *oc = ctx;
	/* 60 s of slack: the provider's clock is not ours. */
	if (!sb->id || !sb->lease || strcmp(sb->lease, oc->name) ||
	    (sb->state && !strcmp(sb->state, "gone")) || iso_to_time(sb->created_at) < oc->since - 60 ||
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
	struct sbx_pending_create *p = calloc(1, sizeof(*p));
	if (!p)
		abort();
	snprintf(p->name, sizeof(p->name), "%s", l->name);
	p->prov = l->prov;
	sbx_spec_copy(&p->spec, &l->spec);
	p->since = since;
	p->failed_at = p->checked_at = time(NULL);
	pthread_mutex_lock(&m->lock);
	p->next = m->pending;
	m->pending = p;
	pthread_mutex_unlock(&m->lock);
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
	pthread_mutex_lock(&m->lock);
	for (pp = &m->pending; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->name, name) && (*pp)->prov == prov) {
			p = *pp;
			*pp = p->next;
			break;
		}
	pthread_mutex_unlock(&m->lock);
	return p;
}

static void pending_free(struct sbx_pending_create *p)
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
		sbx_log(SBX_LOG_INFO, "lease %s: adopted sandbox %s, made by a create that timed out",
			l->name, oc.ids[0]);
	}
	if (adopted)
		pending_free(p);
	else { /* still pending: it may appear later */
		pthread_mutex_lock(&m->lock);
		p->next = m->pending;
		m->pending = p;
		pthread_mutex_unlock(&m->lock);
	}
	return adopted;
}

/* Timer: kills what timed-out creates made once the grace is over; forgets old entries. */
static void pending_sweep(struct sbx_mount *m)
{
	time_t now = time(NULL);
	struct sbx_pending_create *todo = NULL, **pp, *p;
	pthread_mutex_lock(&m->lock);
	for (pp = &m->pending; (p = *pp);) {
		if (now - p->failed_at < SBX_PENDING_GRACE_S || now - p->checked_at < SBX_PENDING_EVERY_S) {
			pp = &p->next;
			continue;
		}
		*pp = p->next; /* taken out while checked: no lock across the provider calls */
		p->next = todo;
		todo = p;
	}
	pthread_mutex_unlock(&m->lock);
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
		pthread_mutex_lock(&m->lock);
		p->next = m->pending;
		m->pending = p;
		pthread_mutex_unlock(&m->lock);
	}
}

int sbx_lease_create(struct sbx_mount *m, const char *name, const char *profile,
		     const char *const *kv, json_t *overlay, struct sbx_error *err)
{
	const struct sbx_profile *p;
	struct sbx_lease *l;
	struct sbx_instance *inst = NULL;
	int rc;

	if (!sbx_lease_name_valid(name))
		return sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED,
				     "bad lease name \"%s\" (letters, digits, - _ . ; at most 64)",
				     name);
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
		char *dup = strdup(*kv), *eq = strchr(dup, '=');
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
	if (rc)
		goto out_free;
	if (!l->prov->create) {
		rc = sbx_error_set(err, ENOTSUP, SBX_E_EXECUTION_FAILED,
				   "provider %s cannot create sandboxes", l->prov->name);
		goto out_free;
	}
	rc = table_insert(m, l, err);
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
		table_remove(m, l);
		return rc;
	}
	lease_setup_cache(l);
	pthread_mutex_lock(&l->lock);
	l->inst = inst;
	snprintf(l->sandbox_id, sizeof(l->sandbox_id), "%s", inst->id);
	l->created_at = l->last_active = time(NULL);
	l->saved = l->prov->save ? l->prov->save(inst) : NULL;
	set_state_locked(l, SBX_LS_RUNNING, "created");
	pthread_mutex_unlock(&l->lock);
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
static bool provider_confirms_gone(const struct sbx_provider *p, const char *id,
				   struct sbx_error *err)
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
static void settle_state(struct sbx_lease *l, struct sbx_instance *inst, enum sbx_remote_state rs,
			 const char *cause, const struct sbx_error *why)
{
	pthread_mutex_lock(&l->lock);
	if (inst && l->inst != inst) {
		if (l->inst)
			l->prov->release(l->inst);
		l->inst = inst;
	}
	if (rs == SBX_REMOTE_PAUSED)
		set_state_locked(l, SBX_LS_PAUSED, cause);
	else if (rs == SBX_REMOTE_GONE)
		mark_gone_locked(l, SBX_LS_RECLAIMED, "sandbox gone (the provider's list agrees)");
	else if (rs == SBX_REMOTE_UNKNOWN && why)
		set_state_locked(l, SBX_LS_ERROR, why->msg);
	else
		set_state_locked(l, SBX_LS_RUNNING, cause);
	pthread_mutex_unlock(&l->lock);
	if (rs == SBX_REMOTE_UNKNOWN && why)
		record_error(l, cause, why);
}

/* Probes inst and sets the lease state to match. Called without locks. */
static void adopt_remote_state(struct sbx_lease *l, struct sbx_instance *inst, const char *cause)
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

	if (!sbx_lease_name_valid(name))
		return sbx_error_set(err, EINVAL, 0, "bad lease name \"%s\"", name);
	l = lease_new(m, name);
	if (p) {
		sbx_spec_free(&l->spec);
		sbx_spec_copy(&l->spec, &p->spec);
	}
	if (provider) {
		free(l->spec.provider);
		l->spec.provider = strdup(provider);
	}
	rc = resolve_provider(l, err);
	if (!rc && !l->prov->attach)
		rc = sbx_error_set(err, ENOTSUP, 0, "provider %s cannot attach", l->prov->name);
	if (rc) {
		lease_free(l);
		return rc;
	}
	rc = table_insert(m, l, err);
	if (rc) {
		lease_free(l);
		return rc;
	}
	rc = lease_prepare_dir(l, err);
	if (!rc)
		rc = l->prov->attach(&l->spec, sandbox_id, NULL, &inst, err);
	if (rc) {
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

int sbx_lease_remove(struct sbx_mount *m, const char *name, struct sbx_error *err)
{
	struct sbx_lease *l = sbx_lease_get(m, name);
	int rc;
	if (!l)
		return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "no lease %s", name);
	rc = sbx_lease_kill(l, "rmdir", err);
	if (rc && rc != -ENOENT) {
		sbx_lease_put(l);
		return rc;
	}
	table_remove(m, l);
	sbx_rm_rf(l->dir);
	sbx_lease_put(l);
	sbx_mount_save(m);
	return 0;
}

/* ---- lifecycle transitions -------------------------------------------- */

/* Waits (l->lock held) until no transition is in flight; ETIMEDOUT past the bound. */
static int wait_transition_locked(struct sbx_lease *l, struct sbx_error *err)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += SBX_TRANSITION_WAIT_S;
	while (l->transition) {
		if (pthread_cond_timedwait(&l->cond, &l->lock, &dl) == ETIMEDOUT)
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

/*
 * Runs one provider lifecycle call as a transition: from state `via` to
 * `to` (or back to `from` on failure). Called and returns with l->lock held.
 */
static int transition_locked(struct sbx_lease *l, enum sbx_lease_state via,
			     enum sbx_lease_state to,
			     int (*call)(struct sbx_instance *, struct sbx_error *), const char *cause,
			     const char *op, struct sbx_error *err)
{
	enum sbx_lease_state from = l->state;
	struct sbx_instance *inst = l->inst;
	int rc;
	if (!call)
		return sbx_error_set(err, ENOTSUP, SBX_E_EXECUTION_FAILED,
				     "provider %s cannot %s", l->prov->name, op);
	l->transition = true;
	set_state_locked(l, via, cause);
	pthread_mutex_unlock(&l->lock);
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
	pthread_mutex_lock(&l->lock);
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
	sbx_fs_drain(l);
	sbx_fs_before_pause(l);
	/* Queued metadata first, with no lock held: `state` must not wait on it. */
	struct sbx_instance *inst = sbx_lease_peek(l);
	if (inst && l->prov->sync) {
		struct sbx_error se = SBX_ERROR_INIT;
		if (l->prov->sync(inst, &se))
			record_error(l, "sync before pause", &se);
	}
	pthread_mutex_lock(&l->lock);
	rc = wait_transition_locked(l, err);
	if (!rc)
		rc = gone_error_locked(l, err);
	if (!rc && l->state == SBX_LS_RUNNING) {
		rc = transition_locked(l, SBX_LS_PAUSING, SBX_LS_PAUSED, l->prov->pause, cause,
				       "pause", err);
	}
	pthread_mutex_unlock(&l->lock);
	if (rc)
		sbx_lease_error(l, "pause", err);
	sbx_mount_save(l->mount);
	return rc;
}

static int resume_locked(struct sbx_lease *l, const char *cause, struct sbx_error *err)
{
	int rc = transition_locked(l, SBX_LS_RESUMING, SBX_LS_RUNNING, l->prov->unpause, cause,
				   "resume", err);
	if (!rc)
		l->last_active = time(NULL);
	return rc;
}

int sbx_lease_resume(struct sbx_lease *l, const char *cause, struct sbx_error *err)
{
	int rc;
	pthread_mutex_lock(&l->lock);
	rc = wait_transition_locked(l, err);
	if (!rc)
		rc = gone_error_locked(l, err);
	if (!rc && l->state == SBX_LS_PAUSED)
		rc = resume_locked(l, cause, err);
	pthread_mutex_unlock(&l->lock);
	if (rc)
		sbx_lease_error(l, "resume", err);
	sbx_mount_save(l->mount);
	return rc;
}

int sbx_lease_kill(struct sbx_lease *l, const char *cause, struct sbx_error *err)
{
	int rc;
	pthread_mutex_lock(&l->lock);
	rc = wait_transition_locked(l, err);
	if (!rc && (l->state == SBX_LS_KILLED || l->state == SBX_LS_RECLAIMED)) {
		pthread_mutex_unlock(&l->lock);
		return 0;
	}
	if (!rc && !l->inst) {
		/* Never attached (provider down at mount): nothing to kill here. */
		mark_gone_locked(l, SBX_LS_KILLED, cause);
		pthread_mutex_unlock(&l->lock);
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
	pthread_mutex_unlock(&l->lock);
	if (rc)
		sbx_lease_error(l, "kill", err);
	sbx_mount_save(l->mount);
	return rc;
}

int sbx_lease_use(struct sbx_lease *l, struct sbx_instance **inst, struct sbx_error *err)
{
	int rc;
	pthread_mutex_lock(&l->lock);
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
		l->last_active = time(NULL);
		*inst = l->inst;
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

void sbx_lease_unuse(struct sbx_lease *l)
{
	pthread_mutex_lock(&l->lock);
	if (l->active > 0)
		l->active--;
	l->last_active = time(NULL);
	pthread_mutex_unlock(&l->lock);
}

struct sbx_instance *sbx_lease_peek(struct sbx_lease *l)
{
	pthread_mutex_lock(&l->lock);
	struct sbx_instance *i =
		(l->state == SBX_LS_RUNNING || l->state == SBX_LS_PAUSED) ? l->inst : NULL;
	pthread_mutex_unlock(&l->lock);
	return i;
}

/* ---- visibility --------------------------------------------------------- */

json_t *sbx_lease_info(struct sbx_lease *l)
{
	char c[32], a[32];
	pthread_mutex_lock(&l->lock);
	sbx_iso_time(l->created_at, c, sizeof(c));
	sbx_iso_time(l->last_active, a, sizeof(a));
	json_t *res = json_pack("{s:I, s:I, s:I, s:I}", "cpu", (json_int_t)l->spec.res.cpu,
				"memoryMB", (json_int_t)l->spec.res.memory_mb, "diskMB",
				(json_int_t)l->spec.res.disk_mb, "timeout",
				(json_int_t)l->spec.res.timeout_s);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s, s:s, s:I, s:o, s:s?, s:b}", "name",
			      l->name, "provider", l->spec.provider, "sandboxId", l->sandbox_id,
			      "template", l->spec.template_name, "state",
			      sbx_lease_state_name(l->state), "createdAt", c, "lastActiveAt", a,
			      "idleTimeout", (json_int_t)l->spec.idle_timeout_s, "resources", res,
			      "workingDirectory", l->spec.working_dir, "autoResume",
			      l->spec.auto_resume);
	json_object_set_new(o, "runs", json_integer((json_int_t)l->runs));
	if (l->state == SBX_LS_PAUSED) {
		char p[32];
		sbx_iso_time(l->paused_at, p, sizeof(p));
		json_object_set_new(o, "pausedAt", json_string(p));
	}
	struct sbx_instance *inst = l->inst;
	pthread_mutex_unlock(&l->lock);
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
	pthread_mutex_lock(&l->lock);
	long idle = (long)(time(NULL) - l->last_active);
	if (l->active)
		idle = 0;
	sbx_buf_addf(out, "%s %s %s %lds %s", l->name, l->spec.provider,
		     sbx_lease_state_name(l->state), idle < 0 ? 0 : idle,
		     l->sandbox_id[0] ? l->sandbox_id : "-");
	pthread_mutex_unlock(&l->lock);
	/* Files written here, not in the sandbox yet (`error` says where they are kept). */
	if (unsaved)
		sbx_buf_addf(out, " unsaved=%zu:%s/cache", unsaved, l->dir);
}

/* ---- the timer ------------------------------------------------------------ */

enum timer_action { T_NONE, T_PAUSE, T_KILL_LIFETIME, T_KILL_TTL, T_PROBE, T_EXTEND, T_RETRY };

static enum timer_action timer_decide(struct sbx_lease *l, time_t now)
{
	enum timer_action a = T_NONE;
	long probe_every = (l->prov->caps & SBX_CAP_DIRECT_IO) ? SBX_PROBE_LOCAL_EVERY_S
								: SBX_PROBE_EVERY_S;
	pthread_mutex_lock(&l->lock);
	if (l->state == SBX_LS_ERROR && !l->transition && now - l->last_probe >= SBX_RETRY_EVERY_S) {
		l->last_probe = now;
		pthread_mutex_unlock(&l->lock);
		return T_RETRY;
	}
	if (l->transition || !l->inst || l->state == SBX_LS_ERROR) {
		pthread_mutex_unlock(&l->lock);
		return T_NONE;
	}
	bool live = l->state == SBX_LS_RUNNING || l->state == SBX_LS_PAUSED;
	if (l->spec.res.timeout_s && live && now - l->created_at >= l->spec.res.timeout_s)
		a = T_KILL_LIFETIME;
	else if (l->state == SBX_LS_PAUSED && l->spec.reclaim_ttl_s &&
		 now - l->paused_at >= l->spec.reclaim_ttl_s)
		a = T_KILL_TTL;
	/* > on whole seconds: a lease is idle at least idleTimeout before it pauses */
	else if (l->state == SBX_LS_RUNNING && !l->active && l->spec.idle_timeout_s &&
		 now - l->last_active > l->spec.idle_timeout_s)
		a = T_PAUSE;
	else if (live && (atomic_exchange(&l->probe_due, false) ||
			  (l->state == SBX_LS_RUNNING && now - l->last_probe >= probe_every)))
		a = T_PROBE;
	else if (l->state == SBX_LS_RUNNING && l->prov->set_timeout &&
		 now - l->last_extend >= SBX_EXTEND_EVERY_S)
		a = T_EXTEND;
	if (a == T_PROBE)
		l->last_probe = now;
	if (a == T_EXTEND)
		l->last_extend = now;
	pthread_mutex_unlock(&l->lock);
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
		long left = (long)(l->created_at + l->spec.res.timeout_s - time(NULL)) + 60;
		if (left < want)
			want = left > 60 ? left : 60;
	}
	if (inst && l->prov->set_timeout(inst, want, &e))
		sbx_log(SBX_LOG_WARN, "lease %s: cannot extend the sandbox's lifetime: %s", l->name,
			e.msg);
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
	pthread_mutex_lock(&l->lock);
	if (l->state != SBX_LS_ERROR || l->transition) {
		pthread_mutex_unlock(&l->lock);
		return false;
	}
	l->transition = true; /* kill/rmdir wait for this attempt */
	inst = l->inst;
	memcpy(id, l->sandbox_id, sizeof(id));
	pthread_mutex_unlock(&l->lock);
	if (!inst && l->prov->attach) {
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
	if (rs == SBX_REMOTE_GONE && !provider_confirms_gone(l->prov, id, &e))
		rs = SBX_REMOTE_UNKNOWN;
	pthread_mutex_lock(&l->lock);
	l->transition = false;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	if (rs == SBX_REMOTE_UNKNOWN) {
		if (fresh)
			l->prov->release(fresh);
		sbx_log(SBX_LOG_DEBUG, "lease %s: still unreachable: %s", l->name, e.msg);
		return false;
	}
	settle_state(l, inst, rs, "provider answers again", NULL);
	return true;
}

static bool lease_running(struct sbx_lease *l)
{
	pthread_mutex_lock(&l->lock);
	bool r = l->state == SBX_LS_RUNNING && !l->transition;
	pthread_mutex_unlock(&l->lock);
	return r;
}

/* Asks the provider how the sandbox is; returns true when the lease's state changed. */
static bool probe_lease(struct sbx_lease *l)
{
	enum sbx_remote_state rs = SBX_REMOTE_UNKNOWN;
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_instance *inst = sbx_lease_peek(l);
	bool changed = false;
	if (!inst || !l->prov->probe || l->prov->probe(inst, &rs, &e))
		return false;
	if (rs == SBX_REMOTE_GONE && !provider_confirms_gone(l->prov, inst->id, &e)) {
		record_error(l, "probe", &e); /* kept as it is: the next probe asks again */
		return false;
	}
	pthread_mutex_lock(&l->lock);
	if (rs == SBX_REMOTE_GONE && !l->transition && l->inst == inst) {
		mark_gone_locked(l, SBX_LS_RECLAIMED, "sandbox gone (provider)");
		changed = true;
	} else if (rs == SBX_REMOTE_PAUSED && l->state == SBX_LS_RUNNING && !l->transition) {
		set_state_locked(l, SBX_LS_PAUSED, "paused by provider");
		changed = true;
	}
	pthread_mutex_unlock(&l->lock);
	return changed;
}

void sbx_mount_tick(struct sbx_mount *m)
{
	struct lease_list ll = {0};
	time_t now = time(NULL);
	bool changed = false;
	sbx_lease_foreach(m, collect, &ll);
	for (size_t i = 0; i < ll.n; i++) {
		struct sbx_lease *l = ll.v[i];
		struct sbx_error e = SBX_ERROR_INIT;
		switch (timer_decide(l, now)) {
		case T_PAUSE:
			sbx_lease_pause(l, "idle", &e);
			changed = true;
			break;
		case T_KILL_LIFETIME:
		case T_KILL_TTL: {
			const char *cause = now - l->created_at >= l->spec.res.timeout_s &&
							    l->spec.res.timeout_s
						    ? "lifetime reached"
						    : "paused TTL reached";
			if (sbx_lease_kill(l, cause, &e) == 0) {
				pthread_mutex_lock(&l->lock);
				set_state_locked(l, SBX_LS_RECLAIMED, cause);
				pthread_mutex_unlock(&l->lock);
			}
			changed = true;
			break;
		}
		case T_PROBE:
			changed |= probe_lease(l);
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
		if (l->cache && sbx_cache_unsaved_count(l->cache) && lease_running(l))
			sbx_fs_save_unsaved(l, false, sbx_now_ms() + 60000);
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
	pthread_mutex_lock(&m->lock);
	while (!m->stopping) {
		struct timespec dl;
		sbx_deadline_in(CLOCK_REALTIME, (long)m->tick_ms, &dl);
		pthread_cond_timedwait(&m->timer_cond, &m->lock, &dl);
		if (m->stopping)
			break;
		pthread_mutex_unlock(&m->lock);
		sbx_mount_tick(m);
		pthread_mutex_lock(&m->lock);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

/* ---- mount open/close ------------------------------------------------------ */

/* The highest N of results/N.ext, so a remounted lease does not reuse names. */
static unsigned long last_result_number(struct sbx_lease *l)
{
	unsigned long max = 0;
	char *p = sbx_lease_path(l, "results");
	DIR *d = opendir(p);
	free(p);
	if (!d)
		return 0;
	for (struct dirent *de; (de = readdir(d));) {
		unsigned long n = strtoul(de->d_name, NULL, 10);
		if (n > max)
			max = n;
	}
	closedir(d);
	return max;
}

static void load_one(struct sbx_mount *m, json_t *j)
{
	const char *name = json_string_value(json_object_get(j, "name"));
	const char *id = json_string_value(json_object_get(j, "sandboxId"));
	const char *st = json_string_value(json_object_get(j, "state"));
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_instance *inst = NULL;
	struct sbx_lease *l;
	if (!name || !id || !st || !sbx_lease_name_valid(name))
		return;
	l = lease_new(m, name);
	if (sbx_spec_apply_json(&l->spec, json_object_get(j, "spec"), &e) ||
	    resolve_provider(l, &e) || table_insert(m, l, &e)) {
		sbx_log(SBX_LOG_WARN, "lease table: dropping %s: %s", name, e.msg);
		lease_free(l);
		return;
	}
	snprintf(l->sandbox_id, sizeof(l->sandbox_id), "%s", id);
	l->created_at = (time_t)json_integer_value(json_object_get(j, "createdAtEpoch"));
	l->last_active = (time_t)json_integer_value(json_object_get(j, "lastActiveEpoch"));
	l->paused_at = (time_t)json_integer_value(json_object_get(j, "pausedEpoch"));
	if (json_is_string(json_object_get(j, "env"))) {
		free(l->env_text);
		l->env_text = strdup(json_string_value(json_object_get(j, "env")));
	}
	l->saved = json_incref(json_object_get(j, "saved"));
	l->results_seq = last_result_number(l);
	l->state = state_from_name(st) < 0 ? SBX_LS_ERROR : (enum sbx_lease_state)state_from_name(st);
	if (l->state == SBX_LS_KILLED || l->state == SBX_LS_RECLAIMED)
		return;
	lease_prepare_dir(l, &e);
	lease_setup_cache(l);
	if (!l->prov->attach) {
		l->state = SBX_LS_ERROR;
		return;
	}
	int rc = l->prov->attach(&l->spec, id, l->saved, &inst, &e);
	if (rc == -ENOENT && provider_confirms_gone(l->prov, id, &e)) {
		pthread_mutex_lock(&l->lock);
		mark_gone_locked(l, SBX_LS_RECLAIMED, "sandbox gone while unmounted");
		pthread_mutex_unlock(&l->lock);
	} else if (rc) {
		/* Kept as `error`; the timer attaches again until the provider answers. */
		l->state = SBX_LS_ERROR;
		record_error(l, "attach", &e);
	} else {
		adopt_remote_state(l, inst, "remount");
	}
}

static void load_table(struct sbx_mount *m, json_t *root)
{
	size_t i;
	json_t *j;
	json_array_foreach(json_object_get(root, "leases"), i, j) load_one(m, j);
}

int sbx_mount_open(struct sbx_mount **out, const char *state_dir, const char *config_path,
		   const char *profile, struct sbx_error *err)
{
	struct sbx_mount *m = calloc(1, sizeof(*m));
	json_t *table = NULL;
	int rc;
	if (!m)
		abort();
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->err_lock, NULL);
	pthread_mutex_init(&m->save_lock, NULL);
	pthread_cond_init(&m->timer_cond, NULL);
	m->tick_ms = 1000;
	m->state_dir = strdup(state_dir);
	rc = sbx_config_load(&m->config, config_path, err);
	if (rc)
		goto fail;
	m->profile = strdup(profile ? profile : m->config.default_profile);
	if (!sbx_config_profile(&m->config, m->profile)) {
		rc = sbx_error_set(err, EINVAL, 0, "profile \"%s\" is not in the config", m->profile);
		goto fail;
	}
	rc = sbx_mkdir_p(state_dir, 0700);
	if (rc) {
		sbx_error_set(err, rc, SBX_E_INTERNAL, "cannot create state dir %s", state_dir);
		goto fail;
	}
	/* A table that exists but cannot be read refuses the mount: never an empty table. */
	rc = sbx_statedir_read_table(state_dir, &table, err);
	if (rc)
		goto fail;
	for (const struct sbx_provider *const *p = sbx_provider_all(); *p; p++) {
		struct sbx_error pe = SBX_ERROR_INIT;
		if (sbx_provider_init(*p, m->config.providers, state_dir, &pe))
			sbx_log(SBX_LOG_INFO, "provider %s unavailable: %s", (*p)->name, pe.msg);
	}
	if (table) {
		load_table(m, table);
		json_decref(table);
	}
	sbx_mount_save(m);
	*out = m;
	return 0;
fail:
	sbx_config_free(&m->config);
	free(m->state_dir);
	free(m->profile);
	free(m);
	return rc;
}

int sbx_mount_start_timer(struct sbx_mount *m)
{
	if (pthread_create(&m->timer, NULL, timer_main, m))
		return -EAGAIN;
	m->timer_running = true;
	return 0;
}

/*
 * The daemon's last act: every lease's files written here and not uploaded
 * (still open at SIGTERM, or whose upload failed) go up, within
 * SBX_EXIT_SAVE_S in all. What stays is kept on disk with its sandbox path
 * (cache.h) and the lease's `error` says where; the next mount uploads it.
 */
static void save_before_exit(struct sbx_mount *m)
{
	struct lease_list ll = {0};
	long long deadline = sbx_now_ms() + SBX_EXIT_SAVE_S * 1000LL;
	sbx_lease_foreach(m, collect, &ll);
	for (size_t i = 0; i < ll.n; i++) {
		struct sbx_lease *l = ll.v[i];
		sbx_wb_stop(l->wb);
		size_t left = l->cache ? sbx_cache_unsaved_count(l->cache) : 0;
		if (left && sbx_lease_peek(l))
			left = sbx_fs_save_unsaved(l, true, deadline);
		if (left)
			sbx_log(SBX_LOG_WARN, "lease %s: %zu file(s) not uploaded, kept in %s/cache",
				l->name, left, l->dir);
		sbx_lease_put(l);
	}
	free(ll.v);
}

void sbx_mount_close(struct sbx_mount *m)
{
	struct sbx_lease *l, *tmp;
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->stopping = true;
	pthread_cond_broadcast(&m->timer_cond);
	pthread_mutex_unlock(&m->lock);
	if (m->timer_running)
		pthread_join(m->timer, NULL);
	save_before_exit(m);
	sbx_mount_save(m);
	for (struct sbx_pending_create *p; (p = m->pending);) {
		m->pending = p->next;
		pending_free(p);
	}
	HASH_ITER(hh, m->leases, l, tmp)
	{
		HASH_DEL(m->leases, l);
		sbx_lease_put(l);
	}
	for (const struct sbx_provider *const *p = sbx_provider_all(); *p; p++)
		if ((*p)->shutdown)
			(*p)->shutdown();
	sbx_config_free(&m->config);
	free(m->state_dir);
	free(m->profile);
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->err_lock);
	pthread_mutex_destroy(&m->save_lock);
	pthread_cond_destroy(&m->timer_cond);
	free(m);
}
