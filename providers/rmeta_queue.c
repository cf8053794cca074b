/* rmeta_queue — see rmeta_queue.h. */
#include "rmeta_queue.h"
#include "base/xalloc.h"

#include "rmeta.h"

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

/* a is path or lies below it (child only when !deep). */
static bool under(const char *a, const char *path, bool deep)
{
	size_t n = strlen(path);
	const char *rest;
	if (!a)
		return false;
	if (!strcmp(a, path))
		return true;
	if (n == 1 && path[0] == '/')
		n = 0;
	if (strncmp(a, path, n) || a[n] != '/')
		return false;
	rest = a + n + 1;
	return deep || !strchr(rest, '/');
}

bool sbx_rmq_touches(const struct sbx_rmq_queue *q, const char *path, bool subtree)
{
	for (size_t i = 0; i < q->n; i++) {
		const struct sbx_rmq_op *op = &q->ops[i];
		if (under(op->path, path, subtree))
			return true;
		if (op->kind == SBX_RMQ_LINK && under(op->arg, path, subtree))
			return true;
	}
	return false;
}

static bool creates_kind(enum sbx_rmq_kind k)
{
	return k == SBX_RMQ_SYMLINK || k == SBX_RMQ_LINK || k == SBX_RMQ_MKNOD;
}

bool sbx_rmq_creates(const struct sbx_rmq_queue *q, const char *path, bool children)
{
	for (size_t i = 0; i < q->n; i++)
		if (creates_kind(q->ops[i].kind) &&
		    (children ? under(q->ops[i].path, path, false) : !strcmp(q->ops[i].path, path)))
			return true;
	return false;
}

bool sbx_rmq_setgid_dir(const struct sbx_rmq_queue *q, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash && slash > path ? (size_t)(slash - path) : 1;
	for (size_t i = 0; i < q->n; i++)
		if (q->ops[i].kind == SBX_RMQ_CHMOD && (q->ops[i].mode & S_ISGID) &&
		    strlen(q->ops[i].path) == n && !strncmp(q->ops[i].path, path, n))
			return true;
	return false;
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
	size_t o = 0;
	for (size_t i = 0; i < q->n; i++) {
		if (q->ops[i].kind == SBX_RMQ_TRUNCATE && !strcmp(q->ops[i].path, path)) {
			free(q->ops[i].path);
			free(q->ops[i].arg);
			continue;
		}
		q->ops[o++] = q->ops[i];
	}
	q->n = o;
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
	static const char *const names[] = {"chmod",	"chown", "utimens", "symlink",
					    "truncate", "link",	 "mknod"};
	return kind <= SBX_RMQ_MKNOD ? names[kind] : "metadata change";
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
	return false;
}

static bool attr_kind(enum sbx_rmq_kind k)
{
	return k == SBX_RMQ_CHMOD || k == SBX_RMQ_CHOWN || k == SBX_RMQ_UTIMENS;
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
			    (under(pa[x], pb[y], true) || under(pb[y], pa[x], true)))
				return true;
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
	if (t->tv_nsec != UTIME_NOW)
		sbx_buf_addf(b, " -d @%lld.%09ld", (long long)t->tv_sec, t->tv_nsec);
	sbx_buf_adds(b, " --");
	for (; i < j; i++)
		add_path(b, q->ops[i].path);
}

/* " && chown -h OWNER: -- PATH": an entry the (root) script made goes to the default user. */
static void add_owner(struct sbx_buf *b, const char *path)
{
	sbx_buf_adds(b, " && chown -h " SBX_RMQ_OWNER ": --");
	add_path(b, path);
}

/* Renders op (and, for chmod/chown, the run [i, *next) of its like). */
static void render_one(const struct sbx_rmq_queue *q, size_t i, size_t *next, size_t room,
		       struct sbx_buf *b)
{
	const struct sbx_rmq_op *op = &q->ops[i];
	const struct timespec *ts = op->ts;
	size_t j = i + 1;
	switch (op->kind) {
	case SBX_RMQ_CHOWN:
		if (op->creator) {
			/* chown UID P, chgrp to DIR's group if it is setgid, else GID */
			const char *slash = strrchr(op->path, '/');
			char *dir = sbx_xstrndup(
			    op->path, slash && slash > op->path ? (size_t)(slash - op->path) : 1);
			sbx_buf_addf(b, "chown -h %u --", (unsigned)op->uid);
			add_path(b, op->path);
			sbx_buf_adds(b, " && if [ -g");
			add_path(b, dir);
			sbx_buf_adds(b, " ]; then chgrp -h \"$(stat -c %g --");
			add_path(b, dir);
			sbx_buf_adds(b, ")\" --");
			add_path(b, op->path);
			sbx_buf_addf(b, "; else chgrp -h %u --", (unsigned)op->gid);
			add_path(b, op->path);
			sbx_buf_adds(b, "; fi");
			free(dir);
			break;
		}
		/* fall through */
	case SBX_RMQ_CHMOD:
		if (op->kind == SBX_RMQ_CHMOD)
			sbx_buf_addf(b, "chmod %04o --", (unsigned)(op->mode & 07777));
		else if (op->uid != (uid_t)-1 && op->gid != (gid_t)-1)
			sbx_buf_addf(b, "chown -h %u:%u --", (unsigned)op->uid, (unsigned)op->gid);
		else if (op->uid != (uid_t)-1)
			sbx_buf_addf(b, "chown -h %u --", (unsigned)op->uid);
		else
			sbx_buf_addf(b, "chgrp -h %u --", (unsigned)op->gid);
		add_path(b, op->path);
		for (; j < q->n && same_group(op, &q->ops[j]) &&
		       b->len + strlen(q->ops[j].path) + 64 < room;
		     j++)
			add_path(b, q->ops[j].path);
		break;
	case SBX_RMQ_UTIMENS: {
		/* Alike times of several files (sbx_rmq_gather): one touch for all. */
		size_t len = b->len + 2 * strlen(op->path);
		for (; j < q->n && same_group(op, &q->ops[j]) &&
		       len + 2 * strlen(q->ops[j].path) + 128 < room;
		     j++)
			len += 2 * strlen(q->ops[j].path) + 6;
		if (ts[0].tv_nsec == UTIME_OMIT && ts[1].tv_nsec == UTIME_OMIT) {
			sbx_buf_adds(b, "true");
		} else if (ts[0].tv_nsec != UTIME_OMIT && ts[1].tv_nsec != UTIME_OMIT &&
			   same_time(&ts[0], &ts[1])) {
			add_touch(b, "", &ts[0], q, i, j);
		} else {
			sbx_buf_adds(b, "{ ");
			if (ts[0].tv_nsec != UTIME_OMIT) {
				add_touch(b, " -a", &ts[0], q, i, j);
				sbx_buf_adds(b, ts[1].tv_nsec != UTIME_OMIT ? " && " : "");
			}
			if (ts[1].tv_nsec != UTIME_OMIT)
				add_touch(b, " -m", &ts[1], q, i, j);
			sbx_buf_adds(b, "; }");
		}
		break;
	}
	case SBX_RMQ_SYMLINK:
		sbx_buf_adds(b, "ln -s --");
		add_path(b, op->arg);
		add_path(b, op->path);
		add_owner(b, op->path);
		break;
	case SBX_RMQ_TRUNCATE:
		sbx_buf_addf(b, "truncate -s %lld --", (long long)op->size);
		add_path(b, op->path);
		break;
	case SBX_RMQ_LINK:
		sbx_buf_adds(b, "ln --");
		add_path(b, op->arg);
		add_path(b, op->path);
		break;
	case SBX_RMQ_MKNOD:
		if (S_ISFIFO(op->mode)) {
			sbx_buf_addf(b, "mkfifo -m %04o --", (unsigned)(op->mode & 07777));
			add_path(b, op->path);
			add_owner(b, op->path);
		} else if (S_ISCHR(op->mode) || S_ISBLK(op->mode)) {
			sbx_buf_addf(b, "mknod -m %04o --", (unsigned)(op->mode & 07777));
			add_path(b, op->path);
			sbx_buf_addf(b, " %c %u %u", S_ISCHR(op->mode) ? 'c' : 'b', major(op->dev),
				     minor(op->dev));
			add_owner(b, op->path);
		} else if (S_ISSOCK(op->mode)) {
			sbx_rmeta_add_mksock(b, op->path, op->mode);
			add_owner(b, op->path);
		} else if (S_ISREG(op->mode) || !(op->mode & S_IFMT)) {
			/* noclobber in a subshell: EEXIST semantics, no leak */
			sbx_buf_adds(b, "( set -C; : >");
			add_path(b, op->path);
			sbx_buf_addf(b, " && chmod %04o --", (unsigned)(op->mode & 07777));
			add_path(b, op->path);
			add_owner(b, op->path);
			sbx_buf_adds(b, " )");
		} else {
			sbx_buf_adds(b, "false");
		}
		break;
	}
	/* After the command's own message, on the same stream: which ops failed. */
	sbx_rmeta_add_mark(b, i, j);
	*next = j;
}

size_t sbx_rmq_render(const struct sbx_rmq_queue *q, size_t first, size_t max_bytes,
		       struct sbx_buf *b)
{
	size_t i = first, start = b->len;
	sbx_rmeta_add_marker(b, true);
	while (i < q->n) {
		size_t mark = b->len, next;
		render_one(q, i, &next, start + max_bytes, b);
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
