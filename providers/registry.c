/*
 * registry — the table of providers. The compiled-in ones are listed here
 * (adding a provider is one directory under providers/ plus one line here
 * and its .am fragment; no core file changes); sbx_provider_register adds
 * one at run time (tests). Every provider is checked before it is listed:
 * the contract version it was built for, and the slots its capability
 * bits promise. One that fails is refused with the reason, never half used.
 */
#include "provider.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/keyfile.h"
#include "base/log.h"
#include "base/sysutil.h"
#include "base/xalloc.h"
#include "rmeta.h"

extern const struct sbx_provider sbx_provider_local;
extern const struct sbx_provider sbx_provider_daytona;
extern const struct sbx_provider sbx_provider_e2b;

static const struct sbx_provider *const builtin[] = {
    &sbx_provider_local,
    &sbx_provider_daytona,
    &sbx_provider_e2b,
};

#define SBX_PROVIDERS_MAX 16

/* The checked providers, NULL-terminated. Protected by lock. */
static const struct sbx_provider *registry[SBX_PROVIDERS_MAX + 1];
/* Why registry[i]'s last init failed (err 0: it did not). Protected by lock. */
static struct sbx_error init_errs[SBX_PROVIDERS_MAX];
static size_t n_registered;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/*
 * What sbx_provider_init_all(keep) was given, so that a provider whose key
 * file could not be used (missing, mode 0640, unreadable) is initialised
 * again when asked, at most every RETRY_MS: a key file fixed after the
 * mount is taken without a remount (its leases stayed in error until one).
 * Protected by retry_lock, which init's own lock nests in.
 */
#define RETRY_MS 2000
static json_t *kept_cfg;
static char *kept_state_dir;
static long long retry_at[SBX_PROVIDERS_MAX];
static pthread_mutex_t retry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

int sbx_provider_check(const struct sbx_provider *p, struct sbx_error *err)
{
	const char *name = p && p->name && *p->name ? p->name : NULL;
	const char *missing = NULL;
	if (!name)
		return sbx_error_set(err, EINVAL, SBX_E_INTERNAL, "a provider without a name");
	if (p->abi != SBX_PROVIDER_ABI)
		return sbx_error_set(err, EPROTO, SBX_E_INTERNAL,
				     "provider %s was built for contract version %u, this sbxfs "
				     "speaks %u",
				     name, p->abi, SBX_PROVIDER_ABI);
	/* Without these a lease can neither exist nor end. */
	if (!p->create)
		missing = "create";
	else if (!p->kill)
		missing = "kill";
	else if (!p->release)
		missing = "release";
	else if ((p->caps & SBX_CAP_DIRECT_IO) &&
		 (!p->open || !p->pread || !p->pwrite || !p->close || !p->fstat))
		missing = "open/pread/pwrite/close/fstat (SBX_CAP_DIRECT_IO)";
	else if ((p->caps & SBX_CAP_LIST_ATTRS) && !p->list)
		missing = "list (SBX_CAP_LIST_ATTRS)";
	else if (p->list == sbx_rmeta_list && !p->list_tree)
		missing = "list_tree (list is sbx_rmeta_list, which calls it)";
	else if ((p->caps & SBX_CAP_PAUSE_MEMORY) && (!p->pause || !p->unpause))
		missing = "pause/unpause (SBX_CAP_PAUSE_MEMORY)";
	/* The core calls the whole tty group once tty_open is there. */
	else if (p->tty_open && (!p->tty_write || !p->tty_resize || !p->tty_close))
		missing = "tty_write/tty_resize/tty_close (tty_open is set)";
	if (missing)
		return sbx_error_set(err, EINVAL, SBX_E_INTERNAL, "provider %s lacks %s", name,
				     missing);
	return 0;
}

/* Called with lock held. */
static int add_locked(const struct sbx_provider *p, struct sbx_error *err)
{
	int rc = sbx_provider_check(p, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < n_registered; i++)
		if (!strcmp(registry[i]->name, p->name))
			return sbx_error_set(err, EEXIST, SBX_E_INTERNAL,
					     "provider %s is registered already", p->name);
	if (n_registered == SBX_PROVIDERS_MAX)
		return sbx_error_set(err, ENOSPC, SBX_E_INTERNAL, "too many providers");
	registry[n_registered++] = p;
	return 0;
}

static void add_builtins(void)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < sizeof(builtin) / sizeof(*builtin); i++) {
		struct sbx_error err = SBX_ERROR_INIT;
		if (add_locked(builtin[i], &err))
			sbx_log(SBX_LOG_ERR, "provider refused: %s", err.msg);
	}
	pthread_mutex_unlock(&lock);
}

int sbx_provider_register(const struct sbx_provider *p, struct sbx_error *err)
{
	int rc;
	pthread_once(&builtins_once, add_builtins);
	pthread_mutex_lock(&lock);
	rc = add_locked(p, err);
	pthread_mutex_unlock(&lock);
	if (rc)
		sbx_log(SBX_LOG_ERR, "provider refused: %s", err->msg);
	return rc;
}

const struct sbx_provider *sbx_provider_find(const char *name)
{
	const struct sbx_provider *found = NULL;
	pthread_once(&builtins_once, add_builtins);
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_registered && !found; i++)
		if (!strcmp(registry[i]->name, name))
			found = registry[i];
	pthread_mutex_unlock(&lock);
	return found;
}

const struct sbx_provider *sbx_provider_lookup(const char *name, struct sbx_error *err)
{
	const struct sbx_provider *p = sbx_provider_find(name);
	char known[256] = "";
	size_t n = 0;
	if (p)
		return p;
	for (const struct sbx_provider *const *q = sbx_provider_all(); *q && n < sizeof(known); q++)
		n += (size_t)snprintf(known + n, sizeof(known) - n, "%s%s", n ? ", " : "",
				      (*q)->name);
	sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED, "unknown provider \"%s\" (known: %s)",
		      name, known);
	return NULL;
}

const struct sbx_provider *const *sbx_provider_all(void)
{
	pthread_once(&builtins_once, add_builtins);
	return registry;
}

/* Under lock: p's place in the registry, or n_registered when p is not registered. */
static size_t index_locked(const struct sbx_provider *p)
{
	size_t i = 0;
	while (i < n_registered && registry[i] != p)
		i++;
	return i;
}

/* Under lock: where p's init error is kept, or NULL when p is not registered. */
static struct sbx_error *init_err_locked(const struct sbx_provider *p)
{
	size_t i = index_locked(p);
	return i < n_registered ? &init_errs[i] : NULL;
}

/* A copy of p's init error (cleared when it has none). */
static struct sbx_error init_err_copy(const struct sbx_provider *p)
{
	struct sbx_error why = SBX_ERROR_INIT;
	pthread_mutex_lock(&lock);
	const struct sbx_error *kept = init_err_locked(p);
	if (kept)
		why = *kept;
	pthread_mutex_unlock(&lock);
	return why;
}

/* -o env_file=: set once before any thread starts, read by every key read. */
static char *env_file;

void sbx_provider_set_env_file(const char *path)
{
	free(env_file);
	env_file = path ? sbx_xstrdup(path) : NULL;
}

/* Whether p's key comes from a file: its keyFile, else its variable in the env_file. */
static bool key_in_files(const struct sbx_provider *p, json_t *settings)
{
	return json_is_string(json_object_get(settings, "keyFile")) || (env_file && p->key_var);
}

/*
 * p's key from the files that hold keys: its keyFile in settings, else its
 * key_var in the env_file. *key stays NULL when neither names one (p then
 * reads its environment). An error is prefixed with where it came from.
 */
static int key_from_files(const struct sbx_provider *p, json_t *settings, char **key,
			  struct sbx_error *err)
{
	const char *key_file = json_string_value(json_object_get(settings, "keyFile"));
	char what[96];
	int rc = 0;
	*key = NULL;
	if (!key_in_files(p, settings))
		return 0;
	if (key_file) {
		snprintf(what, sizeof(what), "providers.%s.keyFile", p->name);
		rc = sbx_keyfile_read(key_file, key, err);
	} else {
		snprintf(what, sizeof(what), "env_file");
		rc = sbx_envfile_value(env_file, p->key_var, key, err);
	}
	if (rc)
		sbx_error_prefix(err, what);
	return rc;
}

int sbx_provider_init(const struct sbx_provider *p, json_t *providers_cfg, const char *state_dir,
		      struct sbx_error *err)
{
	json_t *settings = json_object_get(providers_cfg, p->name);
	struct sbx_provider_env env = {settings ? json_incref(settings) : json_object(), state_dir};
	env.reread_key = sbx_provider_key_reread;
	env.provider = p;
	struct sbx_error key_err = SBX_ERROR_INIT;
	char *key = NULL;
	int rc;

	/* A key file instead of the environment (systemd units, several users). */
	if ((rc = key_from_files(p, env.settings, &key, &key_err))) {
		key_err.code = SBX_E_AUTH;
		env.key_error = &key_err;
	}
	env.api_key = key;
	if (p->init)
		rc = p->init(&env, err);
	else if (rc && err)
		*err = key_err;
	sbx_wipe_free(key);
	json_decref(env.settings);
	pthread_mutex_lock(&lock);
	struct sbx_error *why = init_err_locked(p);
	if (why) {
		sbx_error_clear(why);
		if (rc && err && err->err)
			*why = *err;
		else if (rc)
			sbx_error_set(why, -rc, SBX_E_INTERNAL, "%s", strerror(-rc));
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

int sbx_provider_init_all(json_t *providers_cfg, const char *state_dir, bool keep,
			  struct sbx_error *err)
{
	int rc = 0;
	for (const struct sbx_provider *const *p = sbx_provider_all(); *p && !rc; p++) {
		struct sbx_error pe = SBX_ERROR_INIT;
		if (!sbx_provider_init(*p, providers_cfg, state_dir, &pe))
			continue;
		if (pe.err == EINVAL)
			rc = sbx_error_set(err, EINVAL, SBX_E_INTERNAL, "%s", pe.msg);
		else if (keep)
			sbx_log(SBX_LOG_INFO, "provider %s unavailable: %s", (*p)->name, pe.msg);
	}
	if (rc || !keep) {
		sbx_provider_shutdown_all();
	} else {
		pthread_mutex_lock(&retry_lock);
		json_decref(kept_cfg);
		free(kept_state_dir);
		kept_cfg = json_incref(providers_cfg);
		kept_state_dir = state_dir ? sbx_xstrdup(state_dir) : NULL;
		pthread_mutex_unlock(&retry_lock);
	}
	return rc;
}

void sbx_provider_shutdown_all(void)
{
	for (const struct sbx_provider *const *p = sbx_provider_all(); *p; p++)
		if ((*p)->shutdown)
			(*p)->shutdown();
	pthread_mutex_lock(&retry_lock);
	json_decref(kept_cfg);
	free(kept_state_dir);
	kept_cfg = NULL;
	kept_state_dir = NULL;
	pthread_mutex_unlock(&retry_lock);
}

/* p's init again, if it has a key file (what failed it) and RETRY_MS have passed. */
static void retry_key_file(const struct sbx_provider *p)
{
	pthread_mutex_lock(&retry_lock);
	json_t *settings = kept_cfg ? json_object_get(kept_cfg, p->name) : NULL;
	size_t i, n;
	pthread_mutex_lock(&lock);
	i = index_locked(p);
	n = n_registered;
	pthread_mutex_unlock(&lock);
	if (key_in_files(p, settings) && i < n && sbx_now_ms() >= retry_at[i]) {
		struct sbx_error e = SBX_ERROR_INIT;
		retry_at[i] = sbx_now_ms() + RETRY_MS;
		if (!sbx_provider_init(p, kept_cfg, kept_state_dir, &e))
			sbx_log(SBX_LOG_INFO, "provider %s: its key file is usable now", p->name);
	}
	pthread_mutex_unlock(&retry_lock);
}

void sbx_provider_key_reread(const struct sbx_provider *p)
{
	struct sbx_error e = SBX_ERROR_INIT;
	char *key = NULL;
	bool changed = false;
	if (!p->set_key)
		return;
	pthread_mutex_lock(&retry_lock);
	if (kept_cfg && !key_from_files(p, json_object_get(kept_cfg, p->name), &key, &e) && key)
		changed = p->set_key(key);
	pthread_mutex_unlock(&retry_lock);
	sbx_wipe_free(key);
	if (changed)
		sbx_log(SBX_LOG_INFO,
			"provider %s: its key was refused; its file has a new one: using it",
			p->name);
	else if (e.err)
		sbx_log(SBX_LOG_WARN,
			"provider %s: its key was refused, and cannot be read again: %s", p->name,
			e.msg);
}

int sbx_provider_ready(const struct sbx_provider *p, struct sbx_error *err)
{
	struct sbx_error why = init_err_copy(p);
	if (why.err && why.code == SBX_E_AUTH) {
		retry_key_file(p); /* ready now, or the retry's reason */
		why = init_err_copy(p);
	}
	if (!why.err)
		return 0;
	return sbx_error_set(err, why.err, why.code, "provider %s is unavailable: %s", p->name,
			     why.msg);
}
