/* keyfile — see keyfile.h. */
#include "base/keyfile.h"
#include "base/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fsutil.h"

#define KEYFILE_MAX (64 * 1024)

int sbx_keyfile_check(const char *path, struct sbx_error *err)
{
	struct stat st;
	if (stat(path, &st))
		return sbx_error_set(err, errno, SBX_E_INTERNAL, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return sbx_error_set(err, EINVAL, SBX_E_INTERNAL, "%s is not a regular file", path);
	if (st.st_uid != geteuid() && st.st_uid != 0)
		return sbx_error_set(err, EACCES, SBX_E_INTERNAL,
				     "%s belongs to uid %u, not to uid %u running sbxfs", path,
				     (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 077)
		return sbx_error_set(err, EACCES, SBX_E_INTERNAL,
				     "%s holds secrets but has mode %04o: chmod 600 %s", path,
				     (unsigned)(st.st_mode & 07777), path);
	return 0;
}

/* Whether another user than us (or root) can change what st is. */
static bool others_write(const struct stat *st, bool sticky_ok)
{
	if (st->st_uid != geteuid() && st->st_uid != 0)
		return true;
	if (sticky_ok && (st->st_mode & S_ISVTX))
		return false;
	return (st->st_mode & S_IWOTH) || ((st->st_mode & S_IWGRP) && st->st_gid != getegid());
}

int sbx_trusted_check(const char *what, const char *path, const struct stat *st,
		      struct sbx_error *err)
{
	char real[PATH_MAX];
	if (others_write(st, false))
		return sbx_error_set(
		    err, EACCES, SBX_E_INTERNAL,
		    "%s %s (uid %u, mode %04o) can be changed by another user than "
		    "uid %u: chown and chmod go-w it, or use another",
		    what, path, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777),
		    (unsigned)geteuid());
	if (!realpath(path, real))
		return sbx_error_set(err, errno, SBX_E_INTERNAL, "%s %s: %s", what, path,
				     strerror(errno));
	for (char *slash = strrchr(real, '/'); slash; slash = strrchr(real, '/')) {
		struct stat d;
		slash[slash == real] = '\0'; /* "/x" -> "/", then "/" ends the walk */
		if (stat(real, &d))
			return sbx_error_set(err, errno, SBX_E_INTERNAL, "%s %s: %s: %s", what,
					     path, real, strerror(errno));
		if (others_write(&d, true))
			return sbx_error_set(err, EACCES, SBX_E_INTERNAL,
					     "%s %s is in %s (uid %u, mode %04o), where another "
					     "user than uid %u can replace it: use another place",
					     what, path, real, (unsigned)d.st_uid,
					     (unsigned)(d.st_mode & 07777), (unsigned)geteuid());
		if (slash == real)
			break;
	}
	return 0;
}

static int load(const char *path, struct sbx_buf *b, struct sbx_error *err)
{
	int rc = sbx_keyfile_check(path, err);
	if (rc)
		return rc;
	rc = sbx_read_file(path, b, KEYFILE_MAX);
	if (rc)
		return sbx_error_set(err, rc, SBX_E_INTERNAL, "%s: %s", path, strerror(-rc));
	return 0;
}

static char *trim(char *s)
{
	char *e;
	while (*s && isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int sbx_keyfile_read(const char *path, char **out, struct sbx_error *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char *line, *nl;
	int rc = load(path, &b, err);
	*out = NULL;
	if (!rc) {
		line = b.buf;
		if ((nl = strchr(line, '\n')))
			*nl = '\0';
		line = trim(line);
		if (!*line)
			rc = sbx_error_set(err, EINVAL, SBX_E_INTERNAL, "%s is empty", path);
		else
			*out = sbx_xstrdup(line);
	}
	if (b.len)
		memset(b.buf, 0, b.len);
	sbx_buf_release(&b);
	return rc;
}

void sbx_wipe_free(char *secret)
{
	if (secret) {
		explicit_bzero(secret, strlen(secret));
		free(secret);
	}
}

static bool valid_name(const char *k)
{
	if (!*k || isdigit((unsigned char)*k))
		return false;
	for (; *k; k++)
		if (!isalnum((unsigned char)*k) && *k != '_')
			return false;
	return true;
}

/*
 * Calls fn(ctx, KEY, VALUE) for each KEY=VALUE line of path (see
 * sbx_envfile_load for the syntax); stops at fn's non-zero answer, which
 * is returned. A leading '-' on path: a missing file has no lines.
 */
static int each_var(const char *path, int (*fn)(void *ctx, const char *k, const char *v), void *ctx,
		    struct sbx_error *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	bool optional = path[0] == '-';
	char *p, *line, *next;
	int rc, n = 0;

	if (optional)
		path++;
	if (optional && access(path, F_OK) && errno == ENOENT)
		return 0;
	rc = load(path, &b, err);
	if (!rc && b.len && memchr(b.buf, '\0', b.len))
		rc = sbx_error_set(err, EINVAL, SBX_E_INTERNAL,
				   "%s contains a NUL byte: not a text file", path);
	/* Line by line, blank ones counted (strtok skipped them: the numbers were off). */
	for (p = b.buf; !rc && p && p < b.buf + b.len; p = next) {
		char *eq, *k, *v;
		size_t vl;
		if ((next = strchr(p, '\n')))
			*next++ = '\0';
		n++;
		line = trim(p);
		if (!*line || *line == '#' || *line == ';')
			continue;
		if (!strncmp(line, "export ", 7))
			line = trim(line + 7);
		if (!(eq = strchr(line, '='))) {
			rc = sbx_error_set(err, EINVAL, SBX_E_INTERNAL, "%s:%d: not KEY=VALUE",
					   path, n);
			break;
		}
		*eq = '\0';
		k = trim(line);
		v = trim(eq + 1);
		vl = strlen(v);
		if (vl >= 2 && (v[0] == '"' || v[0] == '\'') && v[vl - 1] == v[0]) {
			v[vl - 1] = '\0';
			v++;
		}
		if (!valid_name(k)) {
			rc = sbx_error_set(err, EINVAL, SBX_E_INTERNAL,
					   "%s:%d: \"%s\" is not a variable name", path, n, k);
			break;
		}
		if ((rc = fn(ctx, k, v)) && err && !err->err)
			sbx_error_set(err, -rc, SBX_E_INTERNAL, "%s:%d: %s", path, n,
				      strerror(-rc));
	}
	if (b.len)
		memset(b.buf, 0, b.len);
	sbx_buf_release(&b);
	return rc;
}

static int put_env(void *ctx, const char *k, const char *v)
{
	(void)ctx;
	return setenv(k, v, 1) ? -errno : 0;
}

int sbx_envfile_load(const char *path, struct sbx_error *err)
{
	return each_var(path, put_env, NULL, err);
}

struct wanted {
	const char *name;
	char *value;
};

static int take_value(void *ctx, const char *k, const char *v)
{
	struct wanted *w = ctx;
	if (!strcmp(k, w->name)) {
		sbx_wipe_free(w->value);
		w->value = sbx_xstrdup(v); /* the last line naming it wins, as when loaded */
	}
	return 0;
}

int sbx_envfile_value(const char *path, const char *name, char **out, struct sbx_error *err)
{
	struct wanted w = {name, NULL};
	int rc = each_var(path, take_value, &w, err);
	if (rc) {
		sbx_wipe_free(w.value);
		w.value = NULL;
	}
	*out = w.value;
	return rc;
}
