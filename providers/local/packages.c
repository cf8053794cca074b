/*
 * packages — installs a spec's packages inside a new local lease, with the
 * lease's own pip or npm, through an ordinary run.
 *
 * "pip:NAME" and "npm:NAME" choose the installer; a bare name uses npm for
 * javascript/typescript leases and pip otherwise. A local path that the
 * lease cannot see (say under the host's /tmp, which leases do not share)
 * is copied into the lease's /tmp/.sbxfs-packages first; local paths are
 * built without build isolation, so they install without a network. Not
 * here: version pinning or caches beyond what pip/npm do themselves.
 */
#include "local.h"
#include "base/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"

#define INSTALL_TIMEOUT_MS (15 * 60 * 1000L)
#define STAGE_DIR "/tmp/.sbxfs-packages"

extern char **environ;

struct tail {
	struct sbx_buf out, err; /* the last few KiB of each stream */
};

static int keep_tail(void *ctx, enum sbx_stream s, const char *data, size_t len)
{
	struct tail *t = ctx;
	struct sbx_buf *b = s == SBX_STDERR ? &t->err : &t->out;
	sbx_buf_add(b, data, len);
	if (b->len > 8192)
		sbx_buf_consume(b, b->len - 4096);
	return 0;
}

/* The last non-empty line of b (modified in place). */
static const char *last_line(struct sbx_buf *b)
{
	while (b->len && (b->buf[b->len - 1] == '\n' || b->buf[b->len - 1] == ' '))
		b->buf[--b->len] = '\0';
	char *nl = strrchr(b->buf, '\n');
	return nl ? nl + 1 : b->buf;
}

/* Copies a host path into the lease's STAGE_DIR; *staged gets the lease-side path. */
static int stage(struct local_inst *li, const char *host, struct sbx_buf *staged,
		 struct sbx_error *err)
{
	struct sbx_buf dest = SBX_BUF_INIT;
	char *copy = sbx_xstrdup(host), *base = basename(copy);
	pid_t pid;
	int st, e;

	if ((e = lcl_mkdir_p(li, STAGE_DIR, 0755)) < 0) {
		e = sbx_error_set(err, e, 0, "package %s: mkdir %s: %s", host, STAGE_DIR,
				  strerror(-e));
		goto out;
	}
	/* The lease is brand new (nothing of it has run yet), so its tree holds no traps. */
	sbx_buf_addf(&dest, "%s/root%s/%s", li->dir, STAGE_DIR, base);
	char *argv[] = {"cp", "-a", "--", (char *)host, dest.buf, NULL};
	if ((e = posix_spawnp(&pid, "cp", NULL, NULL, argv, environ)) != 0) {
		e = sbx_error_set(err, e, 0, "package %s: cp: %s", host, strerror(e));
		goto out;
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		e = sbx_error_set(err, EIO, SBX_E_EXECUTION_FAILED, "package %s: copying it failed",
				  host);
		goto out;
	}
	sbx_buf_addf(staged, "%s/%s", STAGE_DIR, base);
	e = 0;
out:
	free(copy);
	sbx_buf_release(&dest);
	return e;
}

static int install_one(struct local_inst *li, const char *entry, bool npm_default,
		       struct sbx_error *err)
{
	struct sbx_buf cmd = SBX_BUF_INIT, staged = SBX_BUF_INIT;
	struct tail t = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_run_result res;
	bool npm = npm_default;
	const char *name = entry;
	int e, fd;

	if (!strncmp(entry, "pip:", 4) || !strncmp(entry, "npm:", 4)) {
		npm = entry[0] == 'n';
		name = entry + 4;
	}
	bool local = name[0] == '/' || !strncmp(name, "./", 2);
	if (name[0] == '/' && (fd = lcl_open_in_root(li, name, O_PATH, 0)) >= 0) {
		close(fd);
	} else if (name[0] == '/' && access(name, F_OK) == 0) {
		if ((e = stage(li, name, &staged, err)) < 0)
			goto out;
		name = staged.buf;
	}
	if (npm) {
		sbx_buf_adds(&cmd, "NPM_CONFIG_UPDATE_NOTIFIER=false npm install -g --no-audit "
				   "--no-fund --loglevel=error -- ");
	} else {
		sbx_buf_adds(&cmd,
			     "PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore "
			     "python3 -m pip install --no-input --disable-pip-version-check ");
		if (local)
			sbx_buf_adds(&cmd, "--no-build-isolation ");
	}
	sbx_buf_add_shquoted(&cmd, name);
	struct sbx_run_req req = {.shell = cmd.buf, .cwd = "/", .timeout_ms = INSTALL_TIMEOUT_MS};
	struct sbx_run_sink sink = {.ctx = &t, .output = keep_tail};
	if ((e = lcl_run(&li->base, &req, &sink, &res, err)) < 0) {
		sbx_error_prefix(err, entry);
		goto out;
	}
	if (res.exit_code) {
		const char *why = last_line(t.err.len ? &t.err : &t.out);
		e = sbx_error_set(err, EIO, SBX_E_EXECUTION_FAILED,
				  "installing %s failed (exit %d%s): %s", entry, res.exit_code,
				  res.timed_out ? ", timed out" : "", why);
	}
out:
	sbx_buf_release(&cmd);
	sbx_buf_release(&staged);
	sbx_buf_release(&t.out);
	sbx_buf_release(&t.err);
	return e;
}

int lcl_install_packages(struct local_inst *li, const struct sbx_spec *spec, struct sbx_error *err)
{
	const char *lang = spec->language ? spec->language : "python";
	bool npm = !strcmp(lang, "javascript") || !strcmp(lang, "typescript");
	size_t i;
	json_t *v;

	json_array_foreach(spec->packages, i, v)
	{
		const char *entry = json_string_value(v);
		int e;
		if (!entry || !*entry)
			return sbx_error_set(err, EINVAL, 0, "packages[%zu] is not a name", i);
		if ((e = install_one(li, entry, npm, err)) < 0)
			return e;
	}
	return 0;
}
