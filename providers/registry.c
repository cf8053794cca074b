/*
 * registry — the static table of compiled-in providers. Adding a provider
 * is one directory under providers/ plus one line here (and its .am
 * fragment); no core file changes.
 */
#include "provider.h"

#include <string.h>

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
	int rc = p->init ? p->init(&env, err) : 0;
	json_decref(env.settings);
	return rc;
}
