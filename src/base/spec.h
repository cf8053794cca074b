/*
 * spec — the SandboxSpec of a lease and the profiles file that names them.
 *
 * Pure: JSON in, struct out, struct out as JSON; no I/O besides reading the
 * config file in sbx_config_load(). A zero resource means "provider
 * default". Durations are whole seconds (the file may say 90, "90s",
 * "10m", "8h", "2d").
 */
#ifndef SBX_SPEC_H
#define SBX_SPEC_H

#include <jansson.h>
#include <stdbool.h>

#include "base/err.h"

struct sbx_resources {
	long cpu; /* millicores */
	long memory_mb;
	long disk_mb;
	long timeout_s; /* hard wall-clock lifetime */
};

struct sbx_spec {
	char *provider; /* "local", "e2b", "daytona", ... */
	char *template_name;
	struct sbx_resources res;
	long idle_timeout_s; /* 0: never idle-pause */
	long reclaim_ttl_s;  /* paused longer than this: killed; 0 = never */
	long run_timeout_s;  /* each run's deadline (exec, code.*); 0: none */
	json_t *envs;	     /* object of string values (owned, never NULL) */
	json_t *packages;    /* array of strings (owned, never NULL) */
	char *working_dir;   /* NULL: provider default */
	bool auto_resume;
	char *network;	/* NULL/"default" or "none" */
	char *language; /* default code language (NULL: python) */
	char *shell;	/* runs commands under SHELL -c (NULL: bash where present, else sh) */
};

void sbx_spec_init(struct sbx_spec *s);
void sbx_spec_free(struct sbx_spec *s); /* frees members, not s */
void sbx_spec_copy(struct sbx_spec *dst, const struct sbx_spec *src);
/*
 * Overlays the fields present in `j` on `s` (so a profile can start from
 * defaults and `new NAME key=value` can override). Unknown keys, wrong
 * types and bad durations are EINVAL with the key named in e.
 */
int sbx_spec_apply_json(struct sbx_spec *s, json_t *j, struct sbx_error *e);
/*
 * Whether name[0..n) is a shell variable name ([A-Za-z_][A-Za-z0-9_]*):
 * the rule of `envs` and of the `env` file (another name reaches no
 * shell: bash drops it from the environment it passes on).
 */
bool sbx_env_name_valid(const char *name, size_t n);
/* Sets one `key=value` from a ctl line (resources.cpu=500, idleTimeout=2m, envs.FOO=bar, ...). */
int sbx_spec_apply_kv(struct sbx_spec *s, const char *key, const char *value, struct sbx_error *e);
/* A new JSON object describing s (caller owns the reference). */
json_t *sbx_spec_to_json(const struct sbx_spec *s);

/*
 * Bounds of what a spec may ask. A value past them is a typo, not a wish:
 * unchecked, memoryMB or diskMB past 2^43 overflowed the byte count of a
 * cgroup limit or a disk image (a negative image size then fell back to
 * an unbounded tmpfs), and a duration past a long's milliseconds wrapped
 * the timer's arithmetic. cpu is in millicores (1,000 cores); 16 TiB is
 * ext4's largest file (the local disk image) and more memory than a
 * machine has; 10^9 s is 31 years.
 */
#define SBX_SPEC_CPU_MAX 1000000L
#define SBX_SPEC_MB_MAX (16L << 20)
#define SBX_DURATION_MAX 1000000000L
/*
 * What a run's environment can carry, for the `env` file and the spec's
 * envs each (E2BIG past it): Linux's execve takes at most 128 KiB a string
 * (MAX_ARG_STRLEN) and a quarter of the stack limit (2 MiB by default) for
 * arguments and environment together; the local provider's init takes
 * 65,536 variables. Past them every later run failed ("malformed run
 * request", EPROTO, on local; E2BIG from execve in a sandbox).
 */
#define SBX_ENV_TEXT_MAX (1u << 20)
#define SBX_ENV_LINE_MAX (128u * 1024 - 1)
#define SBX_ENV_VARS_MAX 16384

/* Parses "90", "90s", "10m", "8h", "2d", "1h30m" into seconds, at most
 * SBX_DURATION_MAX; -1 when malformed or longer. */
long sbx_duration_parse(const char *s);
/* Parses a JSON number (seconds) or string duration; -1 when malformed or
 * past SBX_DURATION_MAX. */
long sbx_duration_json(json_t *v);

struct sbx_profile {
	char *name;
	struct sbx_spec spec;
	json_t *raw; /* the profile as written, for profiles/NAME.json */
};

struct sbx_config {
	char *default_profile;
	struct sbx_profile *profiles;
	size_t n_profiles;
	json_t *providers; /* "providers": {name: {settings}} (never NULL) */
};

/*
 * Loads the config file at path. A missing file is not an error: the
 * result then has one profile "default" on the local provider. Returns 0
 * or -errno with the reason (file, line, column) in e.
 */
int sbx_config_load(struct sbx_config *c, const char *path, struct sbx_error *e);
int sbx_config_parse(struct sbx_config *c, json_t *root, struct sbx_error *e);
void sbx_config_free(struct sbx_config *c);
const struct sbx_profile *sbx_config_profile(const struct sbx_config *c, const char *name);

#endif
