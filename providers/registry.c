/*
 * registry — the static table of compiled-in providers. Adding a provider
 * is one directory under providers/ plus one line here (and its .am
 * fragment); no core file changes.
 */
#include "provider.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/keyfile.h"

extern const struct sbx_provider sbx_provider_local;
extern const struct sbx_provider sbx_provider_daytona;
extern const struct sbx_provider sbx_provider_e2b;

static const struct sbx_provider *const registry[] = {
	&sbx_provider_local,
	&sbx_provider_daytona,
	&sbx_provider_e2b,
	NULL,
};

const struct sbx_provider *sbx_provider_find(const char *name)
{
	for (const struct sbx_provider *const *p = registry; *p; p++)
		if (!strcmp((*p)->name, name))
			return *p;
	return NULL;
}

const struct sbx_provider *const *sbx_provider_all(void)
{
	return registry;
}

int sbx_provider_init(const struct sbx_provider *p, json_t *providers_cfg, const char *state_dir,
		      struct sbx_error *err)
{
	json_t *settings = json_object_get(providers_cfg, p->name);
	struct sbx_provider_env env = {settings ? json_incref(settings) : json_object(), state_dir};
	const char *key_file = json_string_value(json_object_get(env.settings, "keyFile"));
	struct sbx_error key_err = SBX_ERROR_INIT;
	char *key = NULL;
	int rc = 0;

	/* A key file instead of the environment (systemd units, several users). */
	if (key_file && (rc = sbx_keyfile_read(key_file, &key, &key_err))) {
		char what[96];
		snprintf(what, sizeof(what), "providers.%s.keyFile", p->name);
		sbx_error_prefix(&key_err, what);
		key_err.code = SBX_E_AUTH;
		env.key_error = &key_err;
	}
	env.api_key = key;
	if (p->init)
		rc = p->init(&env, err);
	else if (rc && err)
		*err = key_err;
	if (key) {
		explicit_bzero(key, strlen(key));
		free(key);
	}
	json_decref(env.settings);
	return rc;
}
