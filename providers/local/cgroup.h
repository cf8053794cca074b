/*
 * cgroup — the local provider's per-lease control groups: resource caps
 * (memory, cpu, pids) and freezing (pause), on cgroup v1 or v2, chosen at
 * run time. Internal to providers/local/.
 *
 * v1: a group sbxfs/<id> under each of the freezer, memory, cpu and pids
 * hierarchies (under the hierarchy's root, or under our own group when the
 * root is not writable). v2: <root>/sbxfs/<id>, with the controllers
 * enabled in the parents' cgroup.subtree_control where the kernel lets us.
 * A missing controller is not an error: the lease simply runs without that
 * cap (info() says which caps hold). It does not move processes itself: the
 * spawner opens the cgroup.procs files with lcl_cg_open_procs() and the
 * child writes "0" into them before it execs init.
 */
#ifndef SBX_LOCAL_CGROUP_H
#define SBX_LOCAL_CGROUP_H

#include <jansson.h>
#include <stdbool.h>

#include "base/err.h"
#include "base/spec.h"

enum lcl_cg_kind { LCL_CG_NONE = 0, LCL_CG_V1, LCL_CG_V2 };

/* Where the cgroups of one lease live. Every path may be NULL (not made). */
struct lcl_cgroup {
	enum lcl_cg_kind kind;
	char *freezer; /* v1: freezer group; v2: the lease's group */
	char *memory;  /* v1 only */
	char *cpu;     /* v1 only */
	char *pids;    /* v1 only */
};

#define LCL_CG_MAX_DIRS 4

/* How the provider was configured: "auto" (default), "v1", "v2" or "none", and the mount root. */
struct lcl_cg_config {
	const char *mode;
	const char *root; /* default /sys/fs/cgroup */
	long pids_max;	  /* 0: no pids cap */
};

/* "v1", "v2" or "none". */
const char *lcl_cg_kind_name(enum lcl_cg_kind kind);
/*
 * Creates the lease's groups and writes the caps of res (memory_mb, cpu;
 * zero means no cap). Returns 0 (cg filled; cg->kind may be LCL_CG_NONE
 * when no cgroup file system is usable) or -errno. On failure nothing is
 * left behind.
 */
int lcl_cg_create(struct lcl_cgroup *cg, const struct lcl_cg_config *cfg, const char *id,
		  const struct sbx_resources *res, struct sbx_error *err);
/* Opens (O_WRONLY|O_CLOEXEC) each group's cgroup.procs into fds; returns the count or -errno. */
int lcl_cg_open_procs(const struct lcl_cgroup *cg, int fds[LCL_CG_MAX_DIRS]);
/* Freezes (on) or thaws the lease and waits until the kernel says it is done.
 * -ENOTSUP when the lease has no freezer. */
int lcl_cg_freeze(const struct lcl_cgroup *cg, bool on, struct sbx_error *err);
/* 1 frozen (or freezing), 0 not, -ENOTSUP without a freezer, -errno. */
int lcl_cg_frozen(const struct lcl_cgroup *cg);
/* SIGKILLs every process in the lease's groups (thawing first). */
void lcl_cg_kill_all(const struct lcl_cgroup *cg);
/* Waits (bounded) until the groups are empty and removes them. 0 or -errno. */
int lcl_cg_destroy(const struct lcl_cgroup *cg, struct sbx_error *err);
/* The caps that are in force, as JSON {"memory":bool,"cpu":bool,"pids":bool,"freezer":bool}. */
json_t *lcl_cg_caps(const struct lcl_cgroup *cg);
/* Persistence for lease.json: a new object, and back (0 or -EINVAL). */
json_t *lcl_cg_to_json(const struct lcl_cgroup *cg);
int lcl_cg_from_json(struct lcl_cgroup *cg, json_t *j);
/* Frees the strings (not cg itself); NULL-safe. */
void lcl_cg_clear(struct lcl_cgroup *cg);

#endif
