/*
 * common — small helpers every provider needs (attribute conversion, env
 * merging). Not a place for provider logic.
 */
#include "provider.h"
#include "base/keyfile.h"
#include "base/xalloc.h"

#include <stdlib.h>
#include <string.h>

void sbx_code_result_free(struct sbx_code_result *r)
{
	if (!r)
		return;
	free(r->text);
	free(r->err_name);
	free(r->err_value);
	free(r->err_traceback);
	for (size_t i = 0; i < r->n_outputs; i++) {
		free(r->outputs[i].mime);
		free(r->outputs[i].data);
	}
	free(r->outputs);
	memset(r, 0, sizeof(*r));
}

void sbx_stat_from_sys(struct sbx_stat *st, const struct stat *sys)
{
	memset(st, 0, sizeof(*st));
	st->mode = sys->st_mode;
	st->nlink = sys->st_nlink;
	st->uid = sys->st_uid;
	st->gid = sys->st_gid;
	st->size = sys->st_size;
	st->rdev = sys->st_rdev;
	st->atime = sys->st_atim;
	st->mtime = sys->st_mtim;
	st->ctime = sys->st_ctim;
	st->ino = sys->st_ino;
	st->blocks = sys->st_blocks;
	st->has_blocks = true;
}

void sbx_stat_to_sys(struct stat *sys, const struct sbx_stat *st)
{
	memset(sys, 0, sizeof(*sys));
	sys->st_mode = st->mode;
	sys->st_nlink = st->nlink ? st->nlink : (S_ISDIR(st->mode) ? 2 : 1);
	sys->st_uid = st->uid;
	sys->st_gid = st->gid;
	sys->st_size = st->size;
	sys->st_rdev = st->rdev;
	sys->st_atim = st->atime;
	sys->st_mtim = st->mtime;
	sys->st_ctim = st->ctime;
	sys->st_blksize = 4096;
	sys->st_blocks = st->has_blocks ? st->blocks : (st->size + 511) / 512;
	sys->st_ino = st->ino;
}

static void env_put(char **out, size_t *n, const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
	for (size_t i = 0; i < *n; i++) {
		if (!strncmp(out[i], kv, klen) && out[i][klen] == '=') {
			out[i] = (char *)kv;
			return;
		}
	}
	out[(*n)++] = (char *)kv;
}

char **sbx_envs_merge(const struct sbx_spec *spec, const char *const *extra)
{
	/* One block: the pointer array followed by the strings of spec envs. */
	size_t nspec = spec && spec->envs ? json_object_size(spec->envs) : 0, nextra = 0, bytes = 0,
	       n = 0;
	const char *k;
	json_t *v;
	for (; extra && extra[nextra]; nextra++)
		;
	if (nspec) {
		json_object_foreach(spec->envs, k, v) bytes +=
		    strlen(k) + 1 + strlen(json_string_value(v)) + 1;
	}
	size_t nptr = nspec + nextra + 1;
	size_t extra_bytes = 0;
	for (size_t i = 0; i < nextra; i++)
		extra_bytes += strlen(extra[i]) + 1;
	char **out = sbx_xmalloc(nptr * sizeof(char *) + bytes + extra_bytes);
	char *p = (char *)(out + nptr);
	if (nspec) {
		json_object_foreach(spec->envs, k, v)
		{
			int len = sprintf(p, "%s=%s", k, json_string_value(v));
			env_put(out, &n, p);
			p += len + 1;
		}
	}
	for (size_t i = 0; i < nextra; i++) {
		strcpy(p, extra[i]);
		env_put(out, &n, p);
		p += strlen(extra[i]) + 1;
	}
	out[n] = NULL;
	return out;
}

void sbx_keyhdr_start(struct sbx_keyhdr *k, const struct sbx_provider_env *env, const char *prefix,
		      const char *key)
{
	pthread_mutex_lock(&k->lock);
	k->prefix = prefix;
	k->reread = env ? env->reread_key : NULL;
	k->provider = env ? env->provider : NULL;
	pthread_mutex_unlock(&k->lock);
	(void)sbx_keyhdr_set(k, key);
}

bool sbx_keyhdr_set(struct sbx_keyhdr *k, const char *key)
{
	char *line;
	bool changed;
	pthread_mutex_lock(&k->lock);
	line = sbx_xasprintf("%s%s", k->prefix ? k->prefix : "", key);
	changed = !k->line || strcmp(k->line, line);
	if (changed) {
		sbx_wipe_free(k->line);
		k->line = line;
		line = NULL;
		k->gen++;
	}
	pthread_mutex_unlock(&k->lock);
	sbx_wipe_free(line);
	return changed;
}

char *sbx_keyhdr_get(struct sbx_keyhdr *k, unsigned *gen)
{
	pthread_mutex_lock(&k->lock);
	char *line = sbx_xstrdup(k->line ? k->line : "");
	*gen = k->gen;
	pthread_mutex_unlock(&k->lock);
	return line;
}

bool sbx_keyhdr_renewed(struct sbx_keyhdr *k, char **line, unsigned *gen)
{
	unsigned now;
	if (k->reread)
		k->reread(k->provider);
	pthread_mutex_lock(&k->lock);
	now = k->gen;
	pthread_mutex_unlock(&k->lock);
	if (now == *gen)
		return false;
	sbx_wipe_free(*line);
	*line = sbx_keyhdr_get(k, gen);
	return true;
}

void sbx_keyhdr_clear(struct sbx_keyhdr *k)
{
	pthread_mutex_lock(&k->lock);
	sbx_wipe_free(k->line);
	k->line = NULL;
	pthread_mutex_unlock(&k->lock);
}
