/*
 * nodes — the names of the mount: which path is the root, a lease, one of
 * its control files or something under its fs/. Pure: parse a path, list
 * a directory's static entries; no FUSE, no providers.
 */
#ifndef SBX_NODES_H
#define SBX_NODES_H

#include <sys/types.h>

#include "base/pathmax.h"

enum sbx_node_kind {
	SBX_N_NONE = 0,
	SBX_N_ROOT,
	SBX_N_README,
	SBX_N_CTL,
	SBX_N_STATUS,
	SBX_N_ERROR,
	SBX_N_PROFILES,
	SBX_N_PROFILE, /* profiles/NAME.json */
	SBX_N_LEASE,
	SBX_N_FS, /* fs/ and everything below; sub = the sandbox path */
	SBX_N_EXEC,
	SBX_N_CODE, /* code.py, code.js, code.ts; sub = the extension */
	SBX_N_STDOUT,
	SBX_N_STDERR,
	SBX_N_RESULT,
	SBX_N_RESULTS,	   /* results/ */
	SBX_N_RESULT_FILE, /* results/N.ext; sub = the file name */
	SBX_N_ENV,
	SBX_N_STATE,
	SBX_N_SPEC,
	SBX_N_INFO,
	SBX_N_PORTS, /* ports/ */
	SBX_N_PORT,  /* ports/PORT; sub = the number */
	SBX_N_LEASE_ERROR,
	SBX_N_LOG,
	SBX_N_RUNS,	   /* runs/ */
	SBX_N_RUN_DIR,	   /* runs/N; sub = "N" */
	SBX_N_RUN_FILE,	   /* runs/N/{cmd,stdout,stderr,result}; sub = "N/name" */
	SBX_N_RUN_CTL,	   /* runs/N/ctl; sub = "N/ctl" */
	SBX_N_RUN_MINE,	   /* runs/mine */
	SBX_N_TTY,	   /* tty/ */
	SBX_N_TTY_CLONE,   /* tty/clone */
	SBX_N_TTY_SESSION, /* tty/N/; sub = N */
	SBX_N_TTY_DATA,	   /* tty/N/data; sub = N */
	SBX_N_TTY_CTL,	   /* tty/N/ctl; sub = N */
	SBX_N_TTY_STATUS,  /* tty/N/status; sub = N */
};

struct sbx_node {
	enum sbx_node_kind kind;
	char lease[65];
	char sub[SBX_FS_PATH_MAX]; /* see the kinds */
};

/* Static entries of a directory kind: name, kind, mode. */
struct sbx_node_entry {
	const char *name;
	enum sbx_node_kind kind;
	mode_t mode;
};

/* Classifies an absolute mount path. Returns 0 or -ENOENT (-ENAMETOOLONG). */
int sbx_node_parse(const char *path, struct sbx_node *n);
/* The fixed entries of the root or of a lease directory (NULL-name terminated). */
const struct sbx_node_entry *sbx_node_root_entries(void);
const struct sbx_node_entry *sbx_node_lease_entries(void);
/* The mode (type and permissions) of a node kind. */
mode_t sbx_node_mode(enum sbx_node_kind kind);
/* True for files that run something (exec, code.*): direct_io + nonseekable. */
int sbx_node_is_runner(enum sbx_node_kind kind);
/* True for kinds that are directories. */
int sbx_node_is_dir(enum sbx_node_kind kind);

/* The README text of the mount. */
extern const char sbx_readme_text[];

#endif
