/* rmeta_queue — see rmeta_queue.h. */
#include "rmeta_queue.h"
#include "base/xalloc.h"

#include "base/pathutil.h"
#include "rmeta.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

void sbx_rmq_init(struct sbx_rmq_queue *q)
{
	memset(q, 0, sizeof(*q));
}

void sbx_rmq_clear(struct sbx_rmq_queue *q)
{
	for (size_t i = 0; i < q->n; i++) {
		free(q->ops[i].path);
		free(q->ops[i].arg);
	}
	free(q->ops);
	memset(q, 0, sizeof(*q));
}

static void reserve(struct sbx_rmq_queue *q, size_t more)
{
	if (q->n + more <= q->alloc)
		return;
	q->alloc = q->alloc ? q->alloc * 2 : 16;
	if (q->alloc < q->n + more)
		q->alloc = q->n + more;
	q->ops = sbx_xrealloc(q->ops, q->alloc * sizeof(*q->ops));
}

static char *dup_or_null(const char *s)
{
	char *d;
	if (!s)
		return NULL;
	d = sbx_xstrdup(s);
	return d;
}

void sbx_rmq_add(struct sbx_rmq_queue *q, const struct sbx_rmq_op *op)
{
	reserve(q, 1);
	q->ops[q->n] = *op;
	q->ops[q->n].path = dup_or_null(op->path);
	q->ops[q->n].arg = dup_or_null(op->arg);
	q->n++;
}

void sbx_rmq_take(struct sbx_rmq_queue *dst, struct sbx_rmq_queue *src)
{
	if (!dst->n) {
		sbx_rmq_clear(dst);
		*dst = *src;
		memset(src, 0, sizeof(*src));
		return;
	}
	reserve(dst, src->n);
	memcpy(dst->ops + dst->n, src->ops, src->n * sizeof(*src->ops));
	dst->n += src->n;
	free(src->ops);
	memset(src, 0, sizeof(*src));
}

bool sbx_rmq_under(const char *a, const char *path, bool deep)
{
	size_t n = strlen(path);
	if (!a || !sbx_path_within(a, path, n))
		return false;
	if (deep || !a[n])
		return true;
	return !strchr(n == 1 ? a + 1 : a + n + 1, '/'); /* an entry directly in path */
}

bool sbx_rmq_touches(const struct sbx_rmq_queue *q, const char *path, bool subtree)
{
	for (size_t i = 0; i < q->n; i++) {
		const struct sbx_rmq_op *op = &q->ops[i];
		if (sbx_rmq_under(op->path, path, subtree))
			return true;
		if (op->kind == SBX_RMQ_LINK && sbx_rmq_under(op->arg, path, subtree))
			return true;
	}
	return false;
}

static bool attr_kind(enum sbx_rmq_kind k)
{
	return k == SBX_RMQ_CHMOD || k == SBX_RMQ_CHOWN || k == SBX_RMQ_UTIMENS;
}

bool sbx_rmq_only_attrs(const struct sbx_rmq_queue *q, const char *path)
{
	for (size_t i = 0; i < q->n; i++) {
		const struct sbx_rmq_op *op = &q->ops[i];
		if (op->kind == SBX_RMQ_LINK && sbx_rmq_under(op->arg, path, true))
			return false;
		if (sbx_rmq_under(op->path, path, true) &&
		    !(attr_kind(op->kind) && !strcmp(op->path, path)))
			return false;
	}
	return true;
}

/*
 * Takes q's ops of path (of that kind only, unless kind < 0) out of q, in
 * order: appended to dst, or freed when dst is NULL. Returns how many.
 */
static size_t take_ops(struct sbx_rmq_queue *dst, struct sbx_rmq_queue *q, const char *path,
		       int kind)
{
	size_t o = 0, n = 0;
	for (size_t i = 0; i < q->n; i++) {
		struct sbx_rmq_op *op = &q->ops[i];
		if (strcmp(op->path, path) || (kind >= 0 && op->kind != (enum sbx_rmq_kind)kind)) {
			q->ops[o++] = *op;
			continue;
		}
		n++;
		if (dst) {
			reserve(dst, 1);
			dst->ops[dst->n++] = *op;
		} else {
			free(op->path);
			free(op->arg);
		}
	}
	q->n = o;
	return n;
}

size_t sbx_rmq_take_path(struct sbx_rmq_queue *dst, struct sbx_rmq_queue *q, const char *path)
{
	return take_ops(dst, q, path, -1);
}

void sbx_rmq_repath(struct sbx_rmq_queue *q, const char *path)
{
	for (size_t i = 0; i < q->n; i++) {
		free(q->ops[i].path);
		q->ops[i].path = sbx_xstrdup(path);
	}
}

size_t sbx_rmq_rename_path(struct sbx_rmq_queue *q, const char *from, const char *to)
{
	size_t n = 0;
	for (size_t i = 0; i < q->n; i++)
		if (q->ops[i].path && !strcmp(q->ops[i].path, from)) {
			free(q->ops[i].path);
			q->ops[i].path = sbx_xstrdup(to);
			n++;
		}
	return n;
}

bool sbx_rmq_creates_kind(enum sbx_rmq_kind k)
{
	return k == SBX_RMQ_SYMLINK || k == SBX_RMQ_LINK || k == SBX_RMQ_MKNOD ||
	       k == SBX_RMQ_MKDIR;
}

/* A queued mkdir of a directory above path. */
static bool made_above(const struct sbx_rmq_queue *q, const char *path)
{
	for (size_t i = 0; i < q->n; i++)
		if (q->ops[i].kind == SBX_RMQ_MKDIR && strcmp(path, q->ops[i].path) &&
		    sbx_rmq_under(path, q->ops[i].path, true))
			return true;
	return false;
}

bool sbx_rmq_creates(const struct sbx_rmq_queue *q, const char *path, bool children)
{
	for (size_t i = 0; i < q->n; i++)
		if (sbx_rmq_creates_kind(q->ops[i].kind) &&
		    (children ? sbx_rmq_under(q->ops[i].path, path, false)
			      : !strcmp(q->ops[i].path, path)))
			return true;
	return false;
}

bool sbx_rmq_setgid_dir(const struct sbx_rmq_queue *q, const char *path)
{
	size_t n = sbx_path_dirlen(path);
	for (size_t i = 0; i < q->n; i++)
		if (q->ops[i].kind == SBX_RMQ_CHMOD && (q->ops[i].mode & S_ISGID) &&
		    strlen(q->ops[i].path) == n && !strncmp(q->ops[i].path, path, n))
			return true;
	return false;
}

bool sbx_rmq_removal(enum sbx_rmq_kind k)
{
	return k == SBX_RMQ_UNLINK || k == SBX_RMQ_RMDIR;
}

/* A removal of path or of a directory above it; with children, of an entry in path too. */
static bool removes(const struct sbx_rmq_queue *q, const char *path, bool children)
{
	for (size_t i = 0; i < q->n; i++)
		if (sbx_rmq_removal(q->ops[i].kind) &&
		    (sbx_rmq_under(path, q->ops[i].path, true) ||
		     (children && sbx_rmq_under(q->ops[i].path, path, false))))
			return true;
	return false;
}

enum sbx_rmq_fate sbx_rmq_fate(const struct sbx_rmq_queue *q, const char *path)
{
	enum sbx_rmq_fate f = SBX_RMQ_UNTOUCHED;
	for (size_t i = 0; i < q->n; i++) {
		const struct sbx_rmq_op *op = &q->ops[i];
		if (sbx_rmq_removal(op->kind) && sbx_rmq_under(path, op->path, true))
			f = SBX_RMQ_GONE;
		else if (sbx_rmq_creates_kind(op->kind) && !strcmp(op->path, path))
			f = SBX_RMQ_MADE;
	}
	return f;
}

bool sbx_rmq_needs(const struct sbx_rmq_queue *q, const char *path, enum sbx_rmq_need need)
{
	if (need != SBX_RMQ_NEED_ALL && need != SBX_RMQ_NEED_NEW && need != SBX_RMQ_NEED_PUT &&
	    made_above(q, path))
		return true;
	switch (need) {
	case SBX_RMQ_NEED_ALL:
		return q->n > 0;
	case SBX_RMQ_NEED_TOUCH:
		return sbx_rmq_touches(q, path, true);
	case SBX_RMQ_NEED_NEAR:
	case SBX_RMQ_NEED_PUT:
		return sbx_rmq_touches(q, path, false);
	case SBX_RMQ_NEED_ENTRY:
		return sbx_rmq_creates(q, path, false) || removes(q, path, false);
	case SBX_RMQ_NEED_CHILDREN:
		return sbx_rmq_creates(q, path, true) || removes(q, path, true);
	case SBX_RMQ_NEED_LISTING:
		return sbx_rmq_creates(q, path, true) || removes(q, path, false);
	case SBX_RMQ_NEED_CONTENT:
		return sbx_rmq_creates(q, path, false) || removes(q, path, false) ||
		       sbx_rmq_truncates(q, path);
	case SBX_RMQ_NEED_NEW: /* a new entry takes a setgid directory's group (and bit) */
		return sbx_rmq_creates(q, path, false) || removes(q, path, false) ||
		       sbx_rmq_truncates(q, path) || sbx_rmq_setgid_dir(q, path);
	}
	return true;
}

const char *sbx_rmq_link_target(const struct sbx_rmq_queue *q, const char *path)
{
	for (size_t i = q->n; i-- > 0;)
		if (q->ops[i].kind == SBX_RMQ_SYMLINK && !strcmp(q->ops[i].path, path))
			return q->ops[i].arg;
	return NULL;
}

bool sbx_rmq_truncates(const struct sbx_rmq_queue *q, const char *path)
{
	for (size_t i = 0; i < q->n; i++)
		if (q->ops[i].kind == SBX_RMQ_TRUNCATE && !strcmp(q->ops[i].path, path))
			return true;
	return false;
}

void sbx_rmq_drop_truncates(struct sbx_rmq_queue *q, const char *path)
{
	take_ops(NULL, q, path, SBX_RMQ_TRUNCATE);
}

void sbx_rmq_overlay(const struct sbx_rmq_queue *q, const char *path, struct sbx_stat *st)
{
	for (size_t i = 0; i < q->n; i++) {
		const struct sbx_rmq_op *op = &q->ops[i];
		if (strcmp(op->path, path))
			continue;
		switch (op->kind) {
		case SBX_RMQ_CHMOD:
			st->mode = (st->mode & S_IFMT) | (op->mode & 07777);
			break;
		case SBX_RMQ_CHOWN:
			if (op->uid != (uid_t)-1)
				st->uid = op->uid;
			if (op->gid != (gid_t)-1)
				st->gid = op->gid;
			break;
		case SBX_RMQ_UTIMENS:
			if (op->ts[0].tv_nsec != UTIME_OMIT)
				st->atime = op->ts[0];
			if (op->ts[1].tv_nsec != UTIME_OMIT)
				st->mtime = op->ts[1];
			break;
		case SBX_RMQ_TRUNCATE:
			st->size = op->size;
			break;
		default:
			break;
		}
	}
}

const char *sbx_rmq_name(enum sbx_rmq_kind kind)
{
	static const char *const names[] = {"chmod", "chown", "utimens", "symlink", "truncate",
					    "link",  "mknod", "unlink",	 "rmdir",   "mkdir"};
	return kind <= SBX_RMQ_MKDIR ? names[kind] : "metadata change";
}

void sbx_rmq_op_of(void *ctx, size_t i, const char **name, const char **path)
{
	const struct sbx_rmq_queue *q = ctx;
	*name = sbx_rmq_name(q->ops[i].kind);
	*path = q->ops[i].path;
}

size_t sbx_rmq_settle(const struct sbx_rmq_queue *q, size_t first, size_t end,
		      struct sbx_rmeta_fails *f, struct sbx_instance *inst, int rc,
		      const struct sbx_error *e, const char *out, int code, bool explained)
{
	struct sbx_error all = SBX_ERROR_INIT;
	size_t n;
	if (rc) {
		sbx_error_set(&all, EIO, SBX_E_EXECUTION_FAILED, "%s",
			      e && e->msg[0] ? e->msg : "the script did not run");
		sbx_rmeta_fail_all(f, inst, first, end, sbx_rmq_op_of, (void *)q, &all);
		return end - first;
	}
	n = sbx_rmeta_attribute(f, inst, out ? out : "", first, end, sbx_rmq_op_of, (void *)q);
	if (n || !code || explained)
		return n;
	out = out ? out : "";
	sbx_error_set(&all, EIO, SBX_E_EXECUTION_FAILED, "the script ended %d: %.*s", code,
		      (int)strcspn(out, "\n"), out);
	sbx_rmeta_fail_all(f, inst, first, end, sbx_rmq_op_of, (void *)q, &all);
	return end - first;
}

static void add_path(struct sbx_buf *b, const char *p)
{
	sbx_buf_addch(b, ' ');
	sbx_buf_add_shquoted(b, p);
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_nsec == b->tv_nsec &&
	       (a->tv_nsec == UTIME_NOW || a->tv_nsec == UTIME_OMIT || a->tv_sec == b->tv_sec);
}

/* a and b are one command with both paths: same kind and same value. */
static bool same_group(const struct sbx_rmq_op *a, const struct sbx_rmq_op *b)
{
	if (a->kind != b->kind)
		return false;
	if (a->kind == SBX_RMQ_CHMOD)
		return (a->mode & 07777) == (b->mode & 07777);
	if (a->kind == SBX_RMQ_CHOWN)
		return a->uid == b->uid && a->gid == b->gid && !a->creator && !b->creator;
	if (a->kind == SBX_RMQ_UTIMENS)
		return same_time(&a->ts[0], &b->ts[0]) && same_time(&a->ts[1], &b->ts[1]);
	return sbx_rmq_removal(a->kind); /* rm -f, rmdir: one command for many names */
}

/*
 * The order of a and b matters: one of the paths they name is the other
 * or lies below it. Except between attribute changes: of different paths
 * they do not touch each other, and of one path times commute with mode
 * and owner (mode and owner do not: chown clears the setuid bits).
 */
static bool related(const struct sbx_rmq_op *a, const struct sbx_rmq_op *b)
{
	if (attr_kind(a->kind) && attr_kind(b->kind))
		return !strcmp(a->path, b->path) &&
		       (a->kind == SBX_RMQ_UTIMENS) == (b->kind == SBX_RMQ_UTIMENS);
	const char *pa[2] = {a->path, a->kind == SBX_RMQ_LINK ? a->arg : NULL};
	const char *pb[2] = {b->path, b->kind == SBX_RMQ_LINK ? b->arg : NULL};
	for (int x = 0; x < 2; x++)
		for (int y = 0; y < 2; y++)
			if (pa[x] && pb[y] &&
			    (sbx_rmq_under(pa[x], pb[y], true) ||
			     sbx_rmq_under(pb[y], pa[x], true)))
				return true;
	return false;
}

bool sbx_rmq_add_merged(struct sbx_rmq_queue *q, const struct sbx_rmq_op *op)
{
	size_t stop = q->n > SBX_RMQ_MERGE_LOOKBACK ? q->n - SBX_RMQ_MERGE_LOOKBACK : 0;
	for (size_t i = q->n; op->kind == SBX_RMQ_UTIMENS && i-- > stop;) {
		struct sbx_rmq_op *old = &q->ops[i];
		if (!related(old, op))
			continue;
		if (old->kind != SBX_RMQ_UTIMENS || old->root != op->root || old->soft != op->soft)
			break;
		for (int t = 0; t < 2; t++)
			if (op->ts[t].tv_nsec != UTIME_OMIT)
				old->ts[t] = op->ts[t];
		return true;
	}
	sbx_rmq_add(q, op);
	return false;
}

#define GATHER_MAX 8192 /* beyond this many ops the queue stays in its order */

void sbx_rmq_gather(struct sbx_rmq_queue *q)
{
	size_t n = q->n, k = 0, *prev;
	struct sbx_rmq_op *out;
	bool *used;
	if (n < 3 || n > GATHER_MAX)
		return;
	/* prev[j]: 1 + the last op before j it must stay after (0: none). */
	prev = sbx_xcalloc(n, sizeof(*prev));
	for (size_t j = 1; j < n; j++)
		for (size_t i = j; i-- > 0;)
			if (related(&q->ops[i], &q->ops[j])) {
				prev[j] = i + 1;
				break;
			}
	out = sbx_xcalloc(n, sizeof(*out));
	used = sbx_xcalloc(n, sizeof(*used));
	for (size_t i = 0; i < n; i++) {
		if (used[i])
			continue;
		out[k++] = q->ops[i];
		used[i] = true;
		for (size_t j = i + 1; j < n; j++)
			if (!used[j] && prev[j] <= i && same_group(&q->ops[i], &q->ops[j])) {
				out[k++] = q->ops[j];
				used[j] = true;
			}
	}
	free(q->ops);
	q->ops = out;
	q->alloc = n;
	free(prev);
	free(used);
}

/* "touch -h -cFLAG [-d @T] -- P..." for the paths of ops [i, j). */
static void add_touch(struct sbx_buf *b, const char *flag, const struct timespec *t,
		      const struct sbx_rmq_queue *q, size_t i, size_t j)
{
	sbx_buf_addf(b, "touch -h -c%s", flag);
	/* Before 1970 with a fraction: {-2, 250000000} is -1.75 s, "@-1.750000000". */
	if (t->tv_nsec != UTIME_NOW && t->tv_sec < 0 && t->tv_nsec > 0)
		sbx_buf_addf(b, " -d @-%lld.%09ld", -((long long)t->tv_sec + 1),
			     1000000000L - t->tv_nsec);
	else if (t->tv_nsec != UTIME_NOW)
		sbx_buf_addf(b, " -d @%lld.%09ld", (long long)t->tv_sec, t->tv_nsec);
	sbx_buf_adds(b, " --");
	for (; i < j; i++)
		add_path(b, q->ops[i].path);
}

const struct sbx_rmq_style sbx_rmq_style_root = {
    .new_owner = "user", .check_free = true, .merge = true};

/* " && chown -h OWNER: -- PATH": an entry the (root) script made goes to the default user. */
static void add_owner(struct sbx_buf *b, const struct sbx_rmq_style *st, const char *path)
{
	if (!st->new_owner)
		return;
	sbx_buf_addf(b, " && chown -h %s: --", st->new_owner);
	add_path(b, path);
}

/* cmd as it is, else retry through `sudo -n`; cmd's own error when both fail. */
static void add_as_root_retry(struct sbx_buf *b, const char *cmd, const char *retry)
{
	sbx_buf_addf(
	    b, "{ m=$(%s 2>&1) || sudo -n %s 2>/dev/null || { printf '%%s\\n' \"$m\"; false; }; }",
	    cmd, retry);
}

void sbx_rmq_add_as_root_else(struct sbx_buf *b, const char *cmd)
{
	add_as_root_retry(b, cmd, cmd);
}

/* `{ [ ! -e P ] && [ ! -L P ] || { echo "P: File exists" >&2; false; }; } && ` */
static void add_must_not_exist(struct sbx_buf *b, const char *path)
{
	sbx_buf_adds(b, "{ { [ ! -e");
	add_path(b, path);
	sbx_buf_adds(b, " ] && [ ! -L");
	add_path(b, path);
	sbx_buf_adds(b, " ]; } || { echo");
	add_path(b, path);
	sbx_buf_adds(b, "': File exists' >&2; false; }; } && ");
}

/*
 * Appends cmd (text of its own buffer) to b as it runs: as it is where
 * the script runs as root or the op does not need root, else through
 * sbx_rmq_add_as_root_else (a compound command as `sh -c '...'`).
 */
static void add_maybe_root(struct sbx_buf *b, const struct sbx_rmq_style *st, bool root,
			   const struct sbx_buf *cmd, bool compound)
{
	struct sbx_buf sh = SBX_BUF_INIT;
	if (st->new_owner || !root) {
		sbx_buf_adds(b, cmd->buf);
		return;
	}
	if (compound) {
		sbx_buf_adds(&sh, "sh -c ");
		sbx_buf_add_shquoted(&sh, cmd->buf);
	}
	sbx_rmq_add_as_root_else(b, compound ? sh.buf : cmd->buf);
	sbx_buf_release(&sh);
}

/* Renders op (and, with merge, for chmod/chown/utimens the run [i, *next) of its like). */
void sbx_rmq_render_op(const struct sbx_rmq_queue *q, size_t i, const struct sbx_rmq_style *st,
		       size_t room, struct sbx_buf *b, size_t *next)
{
	const struct sbx_rmq_op *op = &q->ops[i];
	const struct timespec *ts = op->ts;
	struct sbx_buf c = SBX_BUF_INIT;
	size_t j = i + 1,
	       n = st->merge || (st->merge_removals && sbx_rmq_removal(op->kind)) ? q->n : i + 1;
	bool compound = false;
	switch (op->kind) {
	case SBX_RMQ_CHOWN:
		if (op->creator) {
			/* chown UID P, chgrp to DIR's group if it is setgid, else GID */
			char *dir = sbx_xstrndup(op->path, sbx_path_dirlen(op->path));
			sbx_buf_addf(&c, "chown -h %u --", (unsigned)op->uid);
			add_path(&c, op->path);
			sbx_buf_adds(&c, " && if [ -g");
			add_path(&c, dir);
			sbx_buf_adds(&c, " ]; then chgrp -h \"$(stat -c %g --");
			add_path(&c, dir);
			sbx_buf_adds(&c, ")\" --");
			add_path(&c, op->path);
			sbx_buf_addf(&c, "; else chgrp -h %u --", (unsigned)op->gid);
			add_path(&c, op->path);
			sbx_buf_adds(&c, "; fi");
			free(dir);
			compound = true;
			break;
		}
		/* fall through */
	case SBX_RMQ_CHMOD:
		if (op->kind == SBX_RMQ_CHMOD)
			sbx_buf_addf(&c, "chmod %04o --", (unsigned)(op->mode & 07777));
		else if (op->uid != (uid_t)-1 && op->gid != (gid_t)-1)
			sbx_buf_addf(&c, "chown -h %u:%u --", (unsigned)op->uid, (unsigned)op->gid);
		else if (op->uid != (uid_t)-1)
			sbx_buf_addf(&c, "chown -h %u --", (unsigned)op->uid);
		else
			sbx_buf_addf(&c, "chgrp -h %u --", (unsigned)op->gid);
		add_path(&c, op->path);
		for (; j < n && same_group(op, &q->ops[j]) &&
		       b->len + c.len + strlen(q->ops[j].path) + 64 < room;
		     j++)
			add_path(&c, q->ops[j].path);
		break;
	case SBX_RMQ_UTIMENS: {
		/* Alike times of several files (sbx_rmq_gather): one touch for all. */
		size_t len = b->len + 2 * strlen(op->path);
		for (; j < n && same_group(op, &q->ops[j]) &&
		       len + 2 * strlen(q->ops[j].path) + 128 < room;
		     j++)
			len += 2 * strlen(q->ops[j].path) + 6;
		if (ts[0].tv_nsec == UTIME_OMIT && ts[1].tv_nsec == UTIME_OMIT) {
			sbx_buf_adds(&c, "true");
		} else if (ts[0].tv_nsec != UTIME_OMIT && ts[1].tv_nsec != UTIME_OMIT &&
			   same_time(&ts[0], &ts[1])) {
			add_touch(&c, "", &ts[0], q, i, j);
		} else {
			sbx_buf_adds(&c, "{ ");
			if (ts[0].tv_nsec != UTIME_OMIT) {
				add_touch(&c, " -a", &ts[0], q, i, j);
				sbx_buf_adds(&c, ts[1].tv_nsec != UTIME_OMIT ? " && " : "");
			}
			if (ts[1].tv_nsec != UTIME_OMIT)
				add_touch(&c, " -m", &ts[1], q, i, j);
			sbx_buf_adds(&c, "; }");
			compound = true;
		}
		break;
	}
	case SBX_RMQ_SYMLINK:
		if (st->check_free)
			add_must_not_exist(b, op->path);
		sbx_buf_adds(&c, "ln -s --");
		add_path(&c, op->arg);
		add_path(&c, op->path);
		add_owner(&c, st, op->path);
		break;
	case SBX_RMQ_UNLINK:
	case SBX_RMQ_RMDIR:
		/*
		 * As the script runs: as root (e2b: envd's own Remove runs as
		 * root), or as the user, then through `sudo -n` (daytona: its
		 * DELETE is the daemon's, root's); the mount's kernel has
		 * checked the caller's permissions and the sticky bit. `rmdir`
		 * of many names takes them in order (a child before its parent).
		 */
		sbx_buf_adds(&c, op->kind == SBX_RMQ_UNLINK ? "rm -f --" : "rmdir --");
		add_path(&c, op->path);
		for (; j < n && same_group(op, &q->ops[j]) &&
		       b->len + 3 * c.len + 3 * strlen(q->ops[j].path) + 160 < room;
		     j++)
			add_path(&c, q->ops[j].path);
		if (op->kind == SBX_RMQ_RMDIR && !st->new_owner) {
			/*
			 * The retry as root skips what the user's try removed: it
			 * failed on those, and the whole was reported against the
			 * name root removed (pjdfstest rename/10.t on daytona).
			 */
			struct sbx_buf r = SBX_BUF_INIT;
			sbx_buf_adds(&r,
				     "sh -c 'for p; do [ ! -d \"$p\" ] || rmdir -- \"$p\" || exit; "
				     "done' sh");
			sbx_buf_adds(&r, c.buf + strlen("rmdir --"));
			add_as_root_retry(b, c.buf, r.buf);
			sbx_buf_release(&r);
		} else {
			add_maybe_root(b, st, true, &c, false);
		}
		goto out;
	case SBX_RMQ_TRUNCATE:
		sbx_buf_addf(&c, "truncate -s %lld --", (long long)op->size);
		add_path(&c, op->path);
		break;
	case SBX_RMQ_LINK:
		if (st->check_free)
			add_must_not_exist(b, op->path);
		sbx_buf_adds(&c, "ln --");
		add_path(&c, op->arg);
		add_path(&c, op->path);
		/* as the user, a link to what it does not own needs root
		 * (the mount's kernel applied fs.protected_hardlinks already) */
		add_maybe_root(b, st, true, &c, false);
		goto out;
	case SBX_RMQ_MKDIR:
		/*
		 * mkdir -m MODE -- P [&& chown]  2>/dev/null || { [ -d P ] && [ ! -L P ]
		 * [&& chmod MODE -- P]; } || mkdir -m MODE -- P: made here, or by an
		 * upload (before, or racing this: MkdirAll, 0755), else mkdir's error.
		 */
		sbx_buf_addf(&c, "{ mkdir -m %04o --", (unsigned)(op->mode & 07777));
		add_path(&c, op->path);
		add_owner(&c, st, op->path);
		sbx_buf_adds(&c, "; } 2>/dev/null || { [ -d");
		add_path(&c, op->path);
		sbx_buf_adds(&c, " ] && [ ! -L");
		add_path(&c, op->path);
		sbx_buf_adds(&c, " ]");
		if ((op->mode & 07777) != SBX_RMQ_MKDIR_ALL_MODE) {
			sbx_buf_addf(&c, " && chmod %04o --", (unsigned)(op->mode & 07777));
			add_path(&c, op->path);
		}
		sbx_buf_addf(&c, "; } || mkdir -m %04o --", (unsigned)(op->mode & 07777));
		add_path(&c, op->path);
		compound = true;
		break;
	case SBX_RMQ_MKNOD:
		if (S_ISFIFO(op->mode)) {
			sbx_buf_addf(&c, "mkfifo -m %04o --", (unsigned)(op->mode & 07777));
			add_path(&c, op->path);
			add_owner(&c, st, op->path);
		} else if (S_ISCHR(op->mode) || S_ISBLK(op->mode)) {
			sbx_buf_addf(&c, "mknod -m %04o --", (unsigned)(op->mode & 07777));
			add_path(&c, op->path);
			sbx_buf_addf(&c, " %c %u %u", S_ISCHR(op->mode) ? 'c' : 'b', major(op->dev),
				     minor(op->dev));
			add_owner(&c, st, op->path);
			add_maybe_root(b, st, true, &c, false); /* only root may */
			goto out;
		} else if (S_ISSOCK(op->mode)) {
			sbx_rmeta_add_mksock(&c, op->path, op->mode);
			add_owner(&c, st, op->path);
		} else if (S_ISREG(op->mode) || !(op->mode & S_IFMT)) {
			/* noclobber in a subshell: EEXIST semantics, no leak */
			sbx_buf_adds(&c, "( set -C; : >");
			add_path(&c, op->path);
			sbx_buf_addf(&c, " && chmod %04o --", (unsigned)(op->mode & 07777));
			add_path(&c, op->path);
			add_owner(&c, st, op->path);
			sbx_buf_adds(&c, " )");
		} else {
			sbx_buf_adds(&c, "false");
		}
		break;
	}
	bool root = op->root || (st->times_root_else && op->kind == SBX_RMQ_UTIMENS);
	if (op->soft) {
		/* its own try as the user, then as root, quiet, and never a failure */
		sbx_buf_adds(b, "{ ");
		add_maybe_root(b, st, root, &c, compound);
		sbx_buf_adds(b, "; } >/dev/null 2>&1 || :");
	} else {
		add_maybe_root(b, st, root, &c, compound);
	}
out:
	sbx_buf_release(&c);
	*next = j;
}

size_t sbx_rmq_render(const struct sbx_rmq_queue *q, size_t first, const struct sbx_rmq_style *st,
		      size_t max_bytes, struct sbx_buf *b)
{
	size_t i = first, start = b->len;
	sbx_rmeta_add_marker(b, true);
	while (i < q->n) {
		size_t mark = b->len, next;
		sbx_rmq_render_op(q, i, st, start + max_bytes, b, &next);
		/* After the command's own message, on the same stream: which ops failed. */
		sbx_rmeta_add_mark(b, i, next);
		if (b->len - start > max_bytes && i > first) {
			/* Did not fit: leave it for the next script. */
			b->len = mark;
			b->buf[mark] = '\0';
			break;
		}
		i = next;
	}
	return i;
}

struct sbx_rmq_op sbx_rmq_utimens_op(const char *path, const struct timespec ts[2])
{
	struct sbx_rmq_op op = {.kind = SBX_RMQ_UTIMENS, .path = (char *)path};
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	for (int i = 0; i < 2; i++) {
		op.ts[i] = ts ? ts[i] : now;
		/* "now" is the time of the call, not of the flush. */
		if (op.ts[i].tv_nsec == UTIME_NOW)
			op.ts[i] = now;
	}
	return op;
}
