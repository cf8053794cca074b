/*
 * nodes — the static shape of the mount (see nodes.h), declared as tables
 * the way Plan 9 file servers declare theirs.
 */
#include "nodes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lease.h"

static const struct sbx_node_entry root_entries[] = {
    {"README", SBX_N_README, S_IFREG | 0444},	  {"ctl", SBX_N_CTL, S_IFREG | 0222},
    {"status", SBX_N_STATUS, S_IFREG | 0444},	  {"error", SBX_N_ERROR, S_IFREG | 0444},
    {"profiles", SBX_N_PROFILES, S_IFDIR | 0555}, {NULL, SBX_N_NONE, 0},
};

static const struct sbx_node_entry lease_entries[] = {
    {"fs", SBX_N_FS, S_IFDIR | 0755},
    {"exec", SBX_N_EXEC, S_IFREG | 0666},
    {"code.py", SBX_N_CODE, S_IFREG | 0666},
    {"code.js", SBX_N_CODE, S_IFREG | 0666},
    {"code.ts", SBX_N_CODE, S_IFREG | 0666},
    {"stdout", SBX_N_STDOUT, S_IFREG | 0444},
    {"stderr", SBX_N_STDERR, S_IFREG | 0444},
    {"result", SBX_N_RESULT, S_IFREG | 0444},
    {"results", SBX_N_RESULTS, S_IFDIR | 0555},
    {"env", SBX_N_ENV, S_IFREG | 0644},
    {"state", SBX_N_STATE, S_IFREG | 0644},
    {"spec", SBX_N_SPEC, S_IFREG | 0444},
    {"info", SBX_N_INFO, S_IFREG | 0444},
    {"ports", SBX_N_PORTS, S_IFDIR | 0555},
    {"error", SBX_N_LEASE_ERROR, S_IFREG | 0444},
    {"log", SBX_N_LOG, S_IFREG | 0444},
    {"runs", SBX_N_RUNS, S_IFDIR | 0555},
    {"tty", SBX_N_TTY, S_IFDIR | 0555},
    {NULL, SBX_N_NONE, 0},
};

const struct sbx_node_entry *sbx_node_root_entries(void)
{
	return root_entries;
}

const struct sbx_node_entry *sbx_node_lease_entries(void)
{
	return lease_entries;
}

mode_t sbx_node_mode(enum sbx_node_kind kind)
{
	switch (kind) {
	case SBX_N_ROOT:
	case SBX_N_LEASE:
		return S_IFDIR | 0755;
	case SBX_N_PROFILE:
	case SBX_N_RESULT_FILE:
	case SBX_N_PORT:
	case SBX_N_RUN_FILE:
	case SBX_N_RUN_MINE:
		return S_IFREG | 0444;
	case SBX_N_RUN_DIR:
		return S_IFDIR | 0555;
	case SBX_N_TTY_CLONE:
	case SBX_N_TTY_STATUS:
		return S_IFREG | 0444;
	case SBX_N_TTY_SESSION:
		return S_IFDIR | 0555;
	case SBX_N_TTY_DATA:
		return S_IFREG | 0666;
	case SBX_N_RUN_CTL:
	case SBX_N_TTY_CTL:
		return S_IFREG | 0222;
	default:
		break;
	}
	for (const struct sbx_node_entry *e = root_entries; e->name; e++)
		if (e->kind == kind)
			return e->mode;
	for (const struct sbx_node_entry *e = lease_entries; e->name; e++)
		if (e->kind == kind)
			return e->mode;
	return 0;
}

int sbx_node_is_runner(enum sbx_node_kind kind)
{
	return kind == SBX_N_EXEC || kind == SBX_N_CODE;
}

int sbx_node_is_dir(enum sbx_node_kind kind)
{
	return S_ISDIR(sbx_node_mode(kind));
}

/* Copies the next component of *p into out; returns its length (0 at the end). */
static size_t next_part(const char **p, char *out, size_t size)
{
	const char *s = *p, *e;
	while (*s == '/')
		s++;
	e = strchr(s, '/');
	size_t n = e ? (size_t)(e - s) : strlen(s);
	if (n >= size)
		n = size - 1;
	memcpy(out, s, n);
	out[n] = '\0';
	*p = s + (e ? (size_t)(e - s) : strlen(s));
	return n;
}

static int is_port(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	return *s && !*end && s[0] != '0' && v > 0 && v < 65536;
}

/* runs/mine, runs/N, runs/N/FILE: part is the component after runs/. */
static int parse_run(const char **p, char *part, struct sbx_node *n)
{
	static const char *const files[] = {"cmd", "stdout", "stderr", "result", "ctl"};
	char file[256];
	if (!strcmp(part, "mine")) {
		n->kind = SBX_N_RUN_MINE;
		return next_part(p, file, sizeof(file)) ? -ENOENT : 0;
	}
	if (part[0] < '1' || part[0] > '9' || strspn(part, "0123456789") != strlen(part) ||
	    strlen(part) > 18)
		return -ENOENT;
	n->kind = SBX_N_RUN_DIR;
	snprintf(n->sub, sizeof(n->sub), "%s", part);
	if (!next_part(p, file, sizeof(file)))
		return 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++) {
		if (strcmp(file, files[i]))
			continue;
		n->kind = strcmp(file, "ctl") ? SBX_N_RUN_FILE : SBX_N_RUN_CTL;
		snprintf(n->sub, sizeof(n->sub), "%s/%s", part, file);
		return next_part(p, file, sizeof(file)) ? -ENOENT : 0;
	}
	return -ENOENT;
}

/* tty/clone, tty/N, tty/N/{data,ctl,status}: part is the name after tty/. */
static int parse_tty(const char **p, char *part, struct sbx_node *n)
{
	static const struct sbx_node_entry files[] = {
	    {"data", SBX_N_TTY_DATA, 0},
	    {"ctl", SBX_N_TTY_CTL, 0},
	    {"status", SBX_N_TTY_STATUS, 0},
	};
	if (!strcmp(part, "clone")) {
		n->kind = SBX_N_TTY_CLONE;
		return 0;
	}
	if (part[0] < '1' || part[0] > '9' || strspn(part, "0123456789") != strlen(part) ||
	    strlen(part) > 9)
		return -ENOENT;
	n->kind = SBX_N_TTY_SESSION;
	snprintf(n->sub, sizeof(n->sub), "%s", part);
	if (!next_part(p, part, 256))
		return 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++)
		if (!strcmp(part, files[i].name)) {
			n->kind = files[i].kind;
			return 0;
		}
	return -ENOENT;
}

int sbx_node_parse(const char *path, struct sbx_node *n)
{
	char part[256];
	const char *p = path;
	memset(n, 0, sizeof(*n) - sizeof(n->sub));
	n->sub[0] = '\0';
	if (strlen(path) >= sizeof(n->sub))
		return -ENAMETOOLONG;
	if (!next_part(&p, part, sizeof(part))) {
		n->kind = SBX_N_ROOT;
		return 0;
	}
	for (const struct sbx_node_entry *e = root_entries; e->name; e++) {
		if (strcmp(part, e->name))
			continue;
		n->kind = e->kind;
		if (e->kind == SBX_N_PROFILES && next_part(&p, part, sizeof(part))) {
			size_t len = strlen(part);
			if (len <= 5 || strcmp(part + len - 5, ".json"))
				return -ENOENT;
			n->kind = SBX_N_PROFILE;
			snprintf(n->sub, sizeof(n->sub), "%.*s", (int)(len - 5), part);
		}
		return next_part(&p, part, sizeof(part)) ? -ENOENT : 0;
	}
	if (!sbx_lease_name_valid(part)) /* also bounds it to 64 characters */
		return -ENOENT;
	memcpy(n->lease, part, strlen(part) + 1);
	if (!next_part(&p, part, sizeof(part))) {
		n->kind = SBX_N_LEASE;
		return 0;
	}
	for (const struct sbx_node_entry *e = lease_entries; e->name; e++) {
		if (strcmp(part, e->name))
			continue;
		n->kind = e->kind;
		if (e->kind == SBX_N_FS) {
			/* p now points at "" or "/rest": the sandbox path. */
			snprintf(n->sub, sizeof(n->sub), "%s", *p ? p : "/");
			return 0;
		}
		if (e->kind == SBX_N_CODE)
			snprintf(n->sub, sizeof(n->sub), "%s", e->name + 5);
		if (e->kind == SBX_N_RESULTS && next_part(&p, part, sizeof(part))) {
			if (part[0] == '.' || strchr(part, '/'))
				return -ENOENT;
			n->kind = SBX_N_RESULT_FILE;
			snprintf(n->sub, sizeof(n->sub), "%s", part);
		} else if (e->kind == SBX_N_RUNS && next_part(&p, part, sizeof(part))) {
			return parse_run(&p, part, n);
		} else if (e->kind == SBX_N_TTY && next_part(&p, part, sizeof(part))) {
			if (parse_tty(&p, part, n))
				return -ENOENT;
		} else if (e->kind == SBX_N_PORTS && next_part(&p, part, sizeof(part))) {
			if (!is_port(part))
				return -ENOENT;
			n->kind = SBX_N_PORT;
			snprintf(n->sub, sizeof(n->sub), "%s", part);
		}
		return next_part(&p, part, sizeof(part)) ? -ENOENT : 0;
	}
	return -ENOENT;
}

const char sbx_readme_text[] =
    "sbxfs — code sandboxes as directories\n"
    "\n"
    "  mkdir NAME                 create a lease (a sandbox) from the default profile\n"
    "  echo 'new NAME profile=P key=value' > ctl   ... from profile P, with overrides\n"
    "  echo 'new NAME runTimeout=5m' > ctl   ... whose runs stop after 5 minutes (ETIMEDOUT)\n"
    "  echo 'attach NAME SANDBOXID provider=P' > ctl   adopt an existing sandbox\n"
    "  rmdir NAME                 kill the sandbox and forget the lease\n"
    "                             (never `rm -r NAME`: it would delete fs/ file by file)\n"
    "  cat status                 one line per lease: name provider state idle sandbox-id\n"
    "  cat error                  the last mount-level error\n"
    "  profiles/NAME.json         the configured profiles\n"
    "\n"
    "In a lease NAME/:\n"
    "  fs/                        the sandbox's filesystem, rooted at its /\n"
    "  echo 'make' > exec         run a shell command; close returns when it ends\n"
    "  cat exec                   stdout of the last run (exit code: cat result)\n"
    "  exec 3<>exec; echo cmd >&3; cat <&3   stream the output while it runs\n"
    "  echo 'x = 41' > code.py    run code in the lease's persistent interpreter\n"
    "  cat code.py                its stdout and the value of the last expression\n"
    "  stdout stderr result       the last run's streams and result (JSON)\n"
    "  results/                   images, SVG, HTML, JSON shown by code runs\n"
    "  env                        KEY=VALUE lines added to every run\n"
    "  state                      read the state; write pause, resume, kill,\n"
    "                             restart [python|javascript|typescript], forget\n"
    "                             (drop the lease, leave its sandbox: attach takes it back)\n"
    "  spec info                  the lease's SandboxSpec and facts (JSON)\n"
    "  ports/PORT                 how to reach PORT inside the sandbox\n"
    "  error log                  the last error; the journal of runs and state changes\n"
    "  runs/N/                    run N: cmd stdout stderr result, ctl (write kill);\n"
    "                             the last 100 runs are kept; runs/mine names yours\n"
    "  tty/clone                  read: a terminal session N (tty/N/data, ctl, status);\n"
    "                             `sbx shell NAME` drives it\n"
    "exec, stdout, stderr and result answer the run started by your own process\n"
    "(or its nearest ancestor); a run still going is followed until it ends.\n";
