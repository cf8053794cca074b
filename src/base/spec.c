/*
 * spec — SandboxSpec and profiles (see spec.h). Pure apart from reading the
 * config file. Every rejection names the offending key.
 */
#include "base/spec.h"
#include "base/jsonutil.h"
#include "base/keyfile.h"
#include "base/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void sbx_spec_init(struct sbx_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->provider = sbx_xstrdup("local");
	s->template_name = NULL;
	s->envs = json_object();
	s->packages = json_array();
	s->auto_resume = true;
}

void sbx_spec_free(struct sbx_spec *s)
{
	if (!s)
		return;
	free(s->provider);
	free(s->template_name);
	free(s->working_dir);
	free(s->network);
	free(s->language);
	free(s->shell);
	json_decref(s->envs);
	json_decref(s->packages);
	memset(s, 0, sizeof(*s));
}

static char *dup_or_null(const char *s)
{
	return s ? sbx_xstrdup(s) : NULL;
}

void sbx_spec_copy(struct sbx_spec *dst, const struct sbx_spec *src)
{
	*dst = *src;
	dst->provider = dup_or_null(src->provider);
	dst->template_name = dup_or_null(src->template_name);
	dst->working_dir = dup_or_null(src->working_dir);
	dst->network = dup_or_null(src->network);
	dst->language = dup_or_null(src->language);
	dst->shell = dup_or_null(src->shell);
	dst->envs = json_deep_copy(src->envs);
	dst->packages = json_deep_copy(src->packages);
}

long sbx_duration_parse(const char *s)
{
	long total = 0;
	int any = 0;
	if (!s)
		return -1;
	while (isspace((unsigned char)*s))
		s++;
	while (*s) {
		char *end;
		if (!isdigit((unsigned char)*s))
			return -1;
		errno = 0;
		long n = strtol(s, &end, 10);
		if (errno || n < 0)
			return -1;
		long mul = 1;
		switch (*end) {
		case 's':
			end++;
			break;
		case 'm':
			mul = 60;
			end++;
			break;
		case 'h':
			mul = 3600;
			end++;
			break;
		case 'd':
			mul = 86400;
			end++;
			break;
		case '\0':
			if (any)
				return -1; /* "1h30" is ambiguous */
			break;
		default:
			return -1;
		}
		if (n > SBX_DURATION_MAX / mul || total + n * mul > SBX_DURATION_MAX)
			return -1;
		total += n * mul;
		any = 1;
		s = end;
	}
	return any ? total : -1;
}

long sbx_duration_json(json_t *v)
{
	if (json_is_integer(v))
		return json_integer_value(v) >= 0 && json_integer_value(v) <= SBX_DURATION_MAX
			   ? (long)json_integer_value(v)
			   : -1;
	if (json_is_real(v)) /* NaN fails both tests: no cast of what no long holds */
		return json_real_value(v) >= 0 && json_real_value(v) <= SBX_DURATION_MAX
			   ? (long)json_real_value(v)
			   : -1;
	if (json_is_string(v))
		return sbx_duration_parse(json_string_value(v));
	return -1;
}

static int set_str(char **dst, json_t *v, const char *key, struct sbx_error *e)
{
	if (json_is_null(v)) {
		free(*dst);
		*dst = NULL;
		return 0;
	}
	if (!json_is_string(v))
		return sbx_error_set(e, EINVAL, 0, "spec: \"%s\" must be a string", key);
	free(*dst);
	*dst = sbx_xstrdup(json_string_value(v));
	return 0;
}

static int set_count(long *dst, json_t *v, const char *key, long max, struct sbx_error *e)
{
	if (json_is_null(v)) {
		*dst = 0;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return sbx_error_set(e, EINVAL, 0, "spec: \"%s\" must be a non-negative integer",
				     key);
	if (json_integer_value(v) > max)
		return sbx_error_set(e, EINVAL, 0, "spec: \"%s\" is out of range (at most %ld)",
				     key, max);
	*dst = (long)json_integer_value(v);
	return 0;
}

static int set_duration(long *dst, json_t *v, const char *key, struct sbx_error *e)
{
	long d = json_is_null(v) ? 0 : sbx_duration_json(v);
	if (d < 0)
		return sbx_error_set(e, EINVAL, 0,
				     "spec: \"%s\" must be seconds or a duration like 90s, 10m, 8h",
				     key);
	*dst = d;
	return 0;
}

static int apply_resources(struct sbx_spec *s, json_t *r, struct sbx_error *e)
{
	const char *k;
	json_t *v;
	if (!json_is_object(r))
		return sbx_error_set(e, EINVAL, 0, "spec: \"resources\" must be an object");
	json_object_foreach(r, k, v)
	{
		int rc;
		if (!strcmp(k, "cpu"))
			rc = set_count(&s->res.cpu, v, "resources.cpu", SBX_SPEC_CPU_MAX, e);
		else if (!strcmp(k, "memoryMB"))
			rc = set_count(&s->res.memory_mb, v, "resources.memoryMB", SBX_SPEC_MB_MAX,
				       e);
		else if (!strcmp(k, "diskMB"))
			rc = set_count(&s->res.disk_mb, v, "resources.diskMB", SBX_SPEC_MB_MAX, e);
		else if (!strcmp(k, "timeout"))
			rc = set_duration(&s->res.timeout_s, v, "resources.timeout", e);
		else
			rc = sbx_error_set(e, EINVAL, 0, "spec: unknown key \"resources.%s\"", k);
		if (rc)
			return rc;
	}
	return 0;
}

bool sbx_env_name_valid(const char *name, size_t n)
{
	if (!n || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(name[i] == '_' || (name[i] >= 'A' && name[i] <= 'Z') ||
		      (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9')))
			return false;
	return true;
}

static int check_string_map(json_t *v, const char *key, struct sbx_error *e)
{
	const char *k;
	json_t *x;
	size_t text = 0;
	if (!json_is_object(v))
		return sbx_error_set(e, EINVAL, 0, "spec: \"%s\" must be an object of strings",
				     key);
	if (json_object_size(v) > SBX_ENV_VARS_MAX)
		return sbx_error_set(e, E2BIG, 0, "spec: \"%s\" has more than %d variables", key,
				     SBX_ENV_VARS_MAX);
	json_object_foreach(v, k, x)
	{
		if (!json_is_string(x))
			return sbx_error_set(e, EINVAL, 0, "spec: \"%s.%s\" must be a string", key,
					     k);
		size_t line = strlen(k) + 1 + json_string_length(x);
		if (line > SBX_ENV_LINE_MAX || (text += line + 1) > SBX_ENV_TEXT_MAX)
			return sbx_error_set(e, E2BIG, 0,
					     "spec: \"%s.%s\" makes an environment no process "
					     "carries (%u bytes a variable, %u in all)",
					     key, k, SBX_ENV_LINE_MAX, SBX_ENV_TEXT_MAX);
		if (!sbx_env_name_valid(k, strlen(k)))
			return sbx_error_set(e, EINVAL, 0,
					     "spec: bad variable name \"%s\" in \"%s\" (letters, "
					     "digits and _, not a digit first)",
					     k, key);
	}
	return 0;
}

int sbx_spec_apply_json(struct sbx_spec *s, json_t *j, struct sbx_error *e)
{
	const char *k;
	json_t *v;
	if (!json_is_object(j))
		return sbx_error_set(e, EINVAL, 0, "spec: must be a JSON object");
	json_object_foreach(j, k, v)
	{
		int rc = 0;
		if (!strcmp(k, "provider")) {
			if (!json_is_string(v) || !*json_string_value(v))
				return sbx_error_set(
				    e, EINVAL, 0, "spec: \"provider\" must be a non-empty string");
			rc = set_str(&s->provider, v, k, e);
		} else if (!strcmp(k, "template")) {
			rc = set_str(&s->template_name, v, k, e);
		} else if (!strcmp(k, "resources")) {
			rc = apply_resources(s, v, e);
		} else if (!strcmp(k, "idleTimeout")) {
			rc = set_duration(&s->idle_timeout_s, v, k, e);
		} else if (!strcmp(k, "reclaimTTL")) {
			rc = set_duration(&s->reclaim_ttl_s, v, k, e);
		} else if (!strcmp(k, "runTimeout")) {
			rc = set_duration(&s->run_timeout_s, v, k, e);
		} else if (!strcmp(k, "envs")) {
			rc = check_string_map(v, k, e);
			if (!rc) {
				json_decref(s->envs);
				s->envs = json_deep_copy(v);
			}
		} else if (!strcmp(k, "packages")) {
			size_t i;
			json_t *p;
			if (!json_is_array(v))
				return sbx_error_set(
				    e, EINVAL, 0, "spec: \"packages\" must be an array of strings");
			json_array_foreach(v, i, p) if (!json_is_string(p)) return sbx_error_set(
			    e, EINVAL, 0, "spec: \"packages[%zu]\" must be a string", i);
			json_decref(s->packages);
			s->packages = json_deep_copy(v);
		} else if (!strcmp(k, "workingDirectory")) {
			rc = set_str(&s->working_dir, v, k, e);
			if (!rc && s->working_dir && s->working_dir[0] != '/')
				return sbx_error_set(e, EINVAL, 0,
						     "spec: \"workingDirectory\" must be absolute");
		} else if (!strcmp(k, "autoResume")) {
			if (!json_is_boolean(v))
				return sbx_error_set(e, EINVAL, 0,
						     "spec: \"autoResume\" must be true or false");
			s->auto_resume = json_is_true(v);
		} else if (!strcmp(k, "network")) {
			rc = set_str(&s->network, v, k, e);
			if (!rc && s->network && strcmp(s->network, "none") &&
			    strcmp(s->network, "default") && strcmp(s->network, "host"))
				return sbx_error_set(
				    e, EINVAL, 0,
				    "spec: \"network\" must be \"default\", \"none\" or \"host\"");
		} else if (!strcmp(k, "language")) {
			rc = set_str(&s->language, v, k, e);
		} else if (!strcmp(k, "shell")) {
			if (!json_is_string(v) || !*json_string_value(v))
				return sbx_error_set(e, EINVAL, 0,
						     "spec: \"shell\" must be a non-empty string");
			rc = set_str(&s->shell, v, k, e);
		} else {
			rc = sbx_error_set(e, EINVAL, 0, "spec: unknown key \"%s\"", k);
		}
		if (rc)
			return rc;
	}
	return 0;
}

int sbx_spec_apply_kv(struct sbx_spec *s, const char *key, const char *value, struct sbx_error *e)
{
	json_t *obj = json_object(), *v;
	int rc;
	/* Numbers and booleans in ctl lines are typed; everything else a string. */
	char *end;
	long n = strtol(value, &end, 10);
	if (*value && !*end)
		v = json_integer(n);
	else if (!strcmp(value, "true") || !strcmp(value, "false"))
		v = json_boolean(!strcmp(value, "true"));
	else
		v = json_string(value);
	if (!strncmp(key, "resources.", 10)) {
		json_t *r = json_object();
		json_object_set_new(r, key + 10, v);
		json_object_set_new(obj, "resources", r);
	} else if (!strncmp(key, "envs.", 5)) {
		json_t *envs = json_deep_copy(s->envs);
		json_object_set_new(envs, key + 5, json_string(value));
		json_decref(v);
		json_object_set_new(obj, "envs", envs);
	} else if (!strcmp(key, "packages")) {
		json_t *arr = json_array();
		char *dup = sbx_xstrdup(value), *save = NULL;
		for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save))
			json_array_append_new(arr, json_string(t));
		free(dup);
		json_decref(v);
		json_object_set_new(obj, "packages", arr);
	} else if (!strcmp(key, "provider") || !strcmp(key, "template") ||
		   !strcmp(key, "workingDirectory") || !strcmp(key, "network") ||
		   !strcmp(key, "language") || !strcmp(key, "shell")) {
		json_decref(v);
		json_object_set_new(obj, key, json_string(value));
	} else {
		json_object_set_new(obj, key, v);
	}
	rc = sbx_spec_apply_json(s, obj, e);
	json_decref(obj);
	return rc;
}

static void put_str(json_t *o, const char *k, const char *v)
{
	if (v)
		json_object_set_new(o, k, json_string(v));
}

json_t *sbx_spec_to_json(const struct sbx_spec *s)
{
	json_t *o = json_object(), *r = json_object();
	put_str(o, "provider", s->provider);
	put_str(o, "template", s->template_name);
	json_object_set_new(r, "cpu", json_integer(s->res.cpu));
	json_object_set_new(r, "memoryMB", json_integer(s->res.memory_mb));
	json_object_set_new(r, "diskMB", json_integer(s->res.disk_mb));
	json_object_set_new(r, "timeout", json_integer(s->res.timeout_s));
	json_object_set_new(o, "resources", r);
	json_object_set_new(o, "idleTimeout", json_integer(s->idle_timeout_s));
	json_object_set_new(o, "reclaimTTL", json_integer(s->reclaim_ttl_s));
	json_object_set_new(o, "runTimeout", json_integer(s->run_timeout_s));
	json_object_set(o, "envs", s->envs);
	json_object_set(o, "packages", s->packages);
	put_str(o, "workingDirectory", s->working_dir);
	json_object_set_new(o, "autoResume", json_boolean(s->auto_resume));
	put_str(o, "network", s->network);
	put_str(o, "language", s->language);
	put_str(o, "shell", s->shell);
	return o;
}

void sbx_config_free(struct sbx_config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_profiles; i++) {
		free(c->profiles[i].name);
		sbx_spec_free(&c->profiles[i].spec);
		json_decref(c->profiles[i].raw);
	}
	free(c->profiles);
	free(c->default_profile);
	json_decref(c->providers);
	memset(c, 0, sizeof(*c));
}

static int valid_profile_name(const char *n)
{
	if (!*n || strlen(n) > 64)
		return 0;
	for (; *n; n++)
		if (!isalnum((unsigned char)*n) && *n != '-' && *n != '_' && *n != '.')
			return 0;
	return 1;
}

static void add_profile(struct sbx_config *c, const char *name, json_t *raw,
			const struct sbx_spec *spec)
{
	c->profiles = sbx_xrealloc(c->profiles, (c->n_profiles + 1) * sizeof(*c->profiles));
	struct sbx_profile *p = &c->profiles[c->n_profiles++];
	p->name = sbx_xstrdup(name);
	p->raw = raw;
	p->spec = *spec;
}

int sbx_config_parse(struct sbx_config *c, json_t *root, struct sbx_error *e)
{
	const char *k;
	json_t *v, *profiles;
	int rc = 0;
	memset(c, 0, sizeof(*c));
	c->providers = json_object();
	if (!json_is_object(root))
		return sbx_error_set(e, EINVAL, 0, "config: top level must be a JSON object");
	static const char *const top[] = {"defaultProfile", "profiles", "providers", NULL};
	if ((k = sbx_json_unknown_key(root, top))) {
		rc = sbx_error_set(e, EINVAL, 0, "config: unknown key \"%s\"", k);
		goto fail;
	}
	v = json_object_get(root, "providers");
	if (v) {
		if (!json_is_object(v)) {
			rc = sbx_error_set(e, EINVAL, 0, "config: \"providers\" must be an object");
			goto fail;
		}
		json_decref(c->providers);
		c->providers = json_deep_copy(v);
	}
	profiles = json_object_get(root, "profiles");
	if (profiles && !json_is_object(profiles)) {
		rc = sbx_error_set(e, EINVAL, 0, "config: \"profiles\" must be an object");
		goto fail;
	}
	json_object_foreach(profiles, k, v)
	{
		struct sbx_spec spec;
		if (!valid_profile_name(k)) {
			rc = sbx_error_set(e, EINVAL, 0, "config: bad profile name \"%s\"", k);
			goto fail;
		}
		sbx_spec_init(&spec);
		rc = sbx_spec_apply_json(&spec, v, e);
		if (rc) {
			sbx_spec_free(&spec);
			sbx_error_prefix(e, k);
			sbx_error_prefix(e, "config: profile");
			goto fail;
		}
		add_profile(c, k, json_incref(v), &spec);
	}
	v = json_object_get(root, "defaultProfile");
	if (v && !json_is_string(v)) {
		rc = sbx_error_set(e, EINVAL, 0, "config: \"defaultProfile\" must be a string");
		goto fail;
	}
	c->default_profile = sbx_xstrdup(v ? json_string_value(v) : "default");
	if (!sbx_config_profile(c, c->default_profile)) {
		if (v) {
			rc = sbx_error_set(e, EINVAL, 0,
					   "config: defaultProfile \"%s\" is not in \"profiles\"",
					   c->default_profile);
			goto fail;
		}
		struct sbx_spec spec;
		sbx_spec_init(&spec);
		add_profile(c, "default", sbx_spec_to_json(&spec), &spec);
	}
	return 0;
fail:
	sbx_config_free(c);
	return rc;
}

int sbx_config_load(struct sbx_config *c, const char *path, struct sbx_error *e)
{
	json_error_t jerr;
	json_t *root;
	int rc;
	if (!path || access(path, F_OK) != 0) {
		root = json_object();
	} else {
		/*
		 * A regular file only: it is read twice (checked before mounting,
		 * loaded once mounted), so a pipe (`config=<(...)`) would be empty
		 * the second time, and a FIFO with no writer would hang the start.
		 */
		struct stat st;
		int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			return sbx_error_set(e, errno, 0, "config %s: %s", path, strerror(errno));
		if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
			close(fd);
			return sbx_error_set(e, EINVAL, 0,
					     "config %s is not a regular file (it is read again "
					     "once mounted: give a file)",
					     path);
		}
		/* Its initPath runs as us: another user must not be able to edit it. */
		rc = sbx_trusted_check("config", path, &st, e);
		if (rc) {
			close(fd);
			return rc;
		}
		root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
		close(fd);
		if (!root)
			return sbx_error_set(e, EINVAL, 0, "config %s:%d:%d: %s", path, jerr.line,
					     jerr.column, jerr.text);
	}
	rc = sbx_config_parse(c, root, e);
	json_decref(root);
	return rc;
}

const struct sbx_profile *sbx_config_profile(const struct sbx_config *c, const char *name)
{
	for (size_t i = 0; i < c->n_profiles; i++)
		if (!strcmp(c->profiles[i].name, name))
			return &c->profiles[i];
	return NULL;
}
