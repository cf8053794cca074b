/*
 * leasetab — the lease table on disk and the mount's life around it: at
 * open the config, providers and table are loaded and each lease attached
 * again; every transition saves the table (state_dir/leases.json, via
 * statedir.c); at close unsaved files go up and the table is saved a last
 * time. It is not the state machine (lease.c) nor the timer
 * (leasetimer.c). Locks: lease.h.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"
#include "base/xalloc.h"
#include "base/log.h"
#include "cache.h"
#include "lease.h"
#include "lease_int.h"
#include "statedir.h"

/* How long the daemon's exit (unmount, SIGTERM) spends uploading unsaved files. */
#define SBX_EXIT_SAVE_S 30

/* The lease's table entry; NULL with *skip set while it is being created. */
static json_t *lease_to_json(struct sbx_lease *l, bool *skip)
{
	char c[32], a[32], p[32];
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	*skip = l->state == SBX_LS_CREATING;
	if (*skip) {
		sbx_unlock(&l->lock, SBX_LOCK_LEASE);
		return NULL;
	}
	time_t created = sbx_boot_to_wall(l->created_boot),
	       active = sbx_boot_to_wall(l->active_boot), paused = sbx_boot_to_wall(l->paused_boot);
	sbx_iso_time(created, c, sizeof(c));
	sbx_iso_time(active, a, sizeof(a));
	sbx_iso_time(paused, p, sizeof(p));
	json_t *o =
	    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:s}", "name", l->name, "provider",
		      l->spec.provider, "sandboxId", l->sandbox_id, "state",
		      sbx_lease_state_name(l->state), "createdAt", c, "lastActiveAt", a, "pausedAt",
		      p, "spec", sbx_spec_to_json(&l->spec), "env", l->env_text);
	json_object_set_new(o, "createdAtEpoch", json_integer(created));
	json_object_set_new(o, "lastActiveEpoch", json_integer(active));
	json_object_set_new(o, "pausedEpoch", json_integer(paused));
	if (l->saved)
		json_object_set(o, "saved", l->saved);
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	return o;
}

void collect(void *ctx, struct sbx_lease *l)
{
	struct lease_list *ll = ctx;
	ll->v = sbx_xrealloc(ll->v, (ll->n + 1) * sizeof(*ll->v));
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
	sbx_lock(&m->save_lock, SBX_LOCK_SAVE);
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
	size_t i;
	json_t *u;
	json_array_foreach(m->unloaded, i, u) json_array_append(arr, json_object_get(u, "entry"));
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
	sbx_unlock(&m->save_lock, SBX_LOCK_SAVE);
	free(s);
	if (rc)
		mount_error_line(m, "save", &e, false);
	return rc;
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

/*
 * A saved spec from before envs names were checked: a name no shell takes
 * reached no run, and is dropped here rather than the whole lease (whose
 * sandbox would then be held by nobody).
 */
static void drop_bad_env_names(json_t *spec, const char *lease)
{
	json_t *envs = json_object_get(spec, "envs"), *v;
	const char *k;
	void *next;
	json_object_foreach_safe(envs, next, k, v)
	{
		if (sbx_env_name_valid(k, strlen(k)))
			continue;
		sbx_log(SBX_LOG_WARN,
			"lease table: %s: dropping envs name \"%s\" (no shell takes it)", lease, k);
		json_object_del(envs, k);
	}
}

/*
 * An entry this build cannot load is kept as it is (m->unloaded: {"entry":
 * the entry, "why": the reason}), and said in the root's error file:
 * dropped, the next save lost it, and its sandbox ran on with nobody
 * holding it (a table written by another version, a provider taken out of
 * the build, a hand edit).
 */
static void keep_unloaded(struct sbx_mount *m, json_t *j, const char *name, const char *why)
{
	struct sbx_error e = SBX_ERROR_INIT;
	/* why is never dumped: a message cut inside a character must not abort */
	json_array_append_new(m->unloaded,
			      sbx_xjson(json_pack("{s:O, s:o}", "entry", j, "why",
						  json_stringn_nocheck(why, strlen(why)))));
	sbx_error_set(&e, EINVAL, SBX_E_INTERNAL,
		      "lease table: lease %s is kept in the table but not loaded: %s",
		      name ? name : "(no name)", why);
	mount_error_line(m, "load", &e, false);
}

const char *sbx_mount_unloaded(struct sbx_mount *m, const char *name)
{
	size_t i;
	json_t *u;
	json_array_foreach(m->unloaded, i, u)
	{
		const char *n =
		    json_string_value(json_object_get(json_object_get(u, "entry"), "name"));
		if (n && !strcmp(n, name))
			return json_string_value(json_object_get(u, "why"));
	}
	return NULL;
}

static void load_one(struct sbx_mount *m, json_t *j)
{
	const char *name = json_string_value(json_object_get(j, "name"));
	const char *id = json_string_value(json_object_get(j, "sandboxId"));
	const char *st = json_string_value(json_object_get(j, "state"));
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_instance *inst = NULL;
	struct sbx_lease *l;
	if (!name || !id || !st || !sbx_lease_name_valid(name)) {
		keep_unloaded(m, j, name,
			      !name || !sbx_lease_name_valid(name) ? "no valid name"
			      : !id				   ? "no sandboxId"
								   : "no state");
		return;
	}
	l = lease_new(m, name);
	/* On a copy: an entry kept unloaded is written back as it was read. */
	json_t *given = json_object_get(j, "spec");
	json_t *spec = given ? sbx_xjson(json_deep_copy(given)) : NULL;
	drop_bad_env_names(spec, name);
	int bad = sbx_spec_apply_json(&l->spec, spec, &e) || resolve_provider(l, &e) ||
		  table_insert(m, l, NULL, &e);
	json_decref(spec);
	if (bad) {
		keep_unloaded(m, j, name, e.msg);
		lease_free(l);
		return;
	}
	snprintf(l->sandbox_id, sizeof(l->sandbox_id), "%s", id);
	l->created_boot =
	    sbx_wall_to_boot((time_t)json_integer_value(json_object_get(j, "createdAtEpoch")));
	l->active_boot =
	    sbx_wall_to_boot((time_t)json_integer_value(json_object_get(j, "lastActiveEpoch")));
	l->paused_boot =
	    sbx_wall_to_boot((time_t)json_integer_value(json_object_get(j, "pausedEpoch")));
	if (json_is_string(json_object_get(j, "env"))) {
		free(l->env_text);
		l->env_text = sbx_xstrdup(json_string_value(json_object_get(j, "env")));
	}
	l->saved = json_incref(json_object_get(j, "saved"));
	l->results_seq = last_result_number(l);
	l->state =
	    state_from_name(st) < 0 ? SBX_LS_ERROR : (enum sbx_lease_state)state_from_name(st);
	if (l->state == SBX_LS_KILLED || l->state == SBX_LS_RECLAIMED)
		return;
	lease_prepare_dir(l, &e);
	lease_setup_cache(l);
	if (!l->prov->attach) {
		l->state = SBX_LS_ERROR;
		return;
	}
	int rc = sbx_provider_ready(l->prov, &e);
	if (!rc)
		rc = l->prov->attach(&l->spec, id, l->saved, &inst, &e);
	if (rc == -ENOENT && provider_confirms_gone(l->prov, id, &e)) {
		sbx_lock(&l->lock, SBX_LOCK_LEASE);
		mark_gone_locked(l, SBX_LS_RECLAIMED, "sandbox gone while unmounted");
		sbx_unlock(&l->lock, SBX_LOCK_LEASE);
		record_error(l, "attach", &e); /* local: where its disk went */
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
	struct sbx_mount *m = sbx_xcalloc(1, sizeof(*m));
	json_t *table = NULL;
	int rc;
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->err_lock, NULL);
	pthread_mutex_init(&m->save_lock, NULL);
	pthread_cond_init(&m->timer_cond, NULL);
	m->tick_ms = 1000;
	m->state_dir = sbx_xstrdup(state_dir);
	m->unloaded = sbx_xjson(json_array());
	rc = sbx_config_load(&m->config, config_path, err);
	if (rc)
		goto fail;
	m->profile = sbx_xstrdup(profile ? profile : m->config.default_profile);
	if (!sbx_config_profile(&m->config, m->profile)) {
		rc = sbx_error_set(err, EINVAL, 0, "profile \"%s\" is not in the config",
				   m->profile);
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
	rc = sbx_provider_init_all(m->config.providers, state_dir, true, err);
	if (rc) {
		json_decref(table);
		goto fail;
	}
	if (table) {
		load_table(m, table);
		json_decref(table);
	}
	sbx_mount_save(m);
	*out = m;
	return 0;
fail:
	json_decref(m->unloaded);
	sbx_config_free(&m->config);
	free(m->state_dir);
	free(m->profile);
	free(m);
	return rc;
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
		size_t left = l->cache ? sbx_cache_unsaved_count(l->cache) : 0;
		if (left && sbx_lease_peek(l))
			left = lease_save_unsaved(l, true, deadline);
		if (left)
			sbx_log(SBX_LOG_WARN,
				"lease %s: %zu file(s) not uploaded, kept in %s/cache", l->name,
				left, l->dir);
		sbx_lease_put(l);
	}
	free(ll.v);
}

void sbx_mount_close(struct sbx_mount *m)
{
	struct sbx_lease *l, *tmp;
	if (!m)
		return;
	sbx_lock(&m->lock, SBX_LOCK_MOUNT);
	m->stopping = true;
	pthread_cond_broadcast(&m->timer_cond);
	sbx_unlock(&m->lock, SBX_LOCK_MOUNT);
	if (m->timer_running)
		pthread_join(m->timer, NULL);
	save_before_exit(m);
	lease_quiesce();
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
	sbx_provider_shutdown_all();
	sbx_config_free(&m->config);
	json_decref(m->unloaded);
	free(m->state_dir);
	free(m->profile);
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->err_lock);
	pthread_mutex_destroy(&m->save_lock);
	pthread_cond_destroy(&m->timer_cond);
	free(m);
}
