/*
 * daytona/batch — the operations the toolbox has no endpoint for, done by
 * commands in the sandbox: utimens, symlink, truncate, link and mknod are
 * queued as the remote metadata layer's ops (rmeta_queue.h), rendered by
 * it in the style of a user's script (dt_style: what only root may do
 * falls back to `sudo -n`), and applied together as one script through
 * /process/execute by the engine (rmeta_engine.h, dt_meta_slots): on
 * sync, before a run, before any change to the filesystem, before a read
 * of a path they touch (a device node at once: see dt_mknod), and a
 * second after the last op. What stays here is daytona's own: the borrow
 * of a path through /files/permissions, and the symlink table. chmod and
 * chown are layer ops too, in the engine's native lane (one overlay for
 * both providers), folded per path into /files/permissions calls after
 * the script (see dt_chmod, fold_perms). readlink and statfs are one command each (statfs
 * cached by rmeta's statfs cache).
 *
 * A queued operation returns 0 at once; when its command later fails, the
 * failure is recorded against its path with the command's message
 * (rmeta.h): reported to the lease's `error`, returned by the next stat,
 * list or read of that path and by its fsync, and by no other call. The
 * kernel has already refused the common errors (EEXIST, ENOENT on the
 * parent) through its own lookups.
 *
 * Not here: anything with a toolbox endpoint (files.c).
 */
#include "daytona/daytona.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/df.h"
#include "base/log.h"
#include "base/pathutil.h"
#include "base/xalloc.h"

/* "'a' 'b'" helpers for the command lines below. */
static void arg(struct sbx_buf *b, const char *s)
{
	sbx_buf_addch(b, ' ');
	sbx_buf_add_shquoted(b, s);
}

/*
 * How the queued commands run: as the sandbox's user (what only root may
 * do through `sudo -n`), a name checked free before a link is made, each
 * op its own command (a refused one is retried alone: see run_ops).
 * Times too go through `sudo -n` when the user is refused, before any
 * borrow: the /files/permissions call of tar's or rsync's chown can go
 * out in an earlier flush than the touch that follows it (the queue
 * full, another path's stat), and the user may not set the times of a
 * file given away (seen under load with write-back: EPERM, the file
 * its own again by the time the script asked — cause of that not found).
 */
static const struct sbx_rmq_style dt_style = {
    .check_free = true, .times_root_else = true, .merge_removals = true};

/*
 * What op needs of the sandbox's user, and on which path, that a borrow
 * can give (see run_ops): 'O' (owner) of the file for utimens, 'w' on it
 * for truncate, 'w' on the directory for what makes an entry. NULL: no
 * borrow (a link's own times and owner: the permissions endpoint follows
 * links; they go through `sudo -n`). dir: room for the directory.
 */
static const char *borrow_of(const struct sbx_rmq_op *op, char *need, struct sbx_buf *dir)
{
	size_t dl;
	switch (op->kind) {
	case SBX_RMQ_UTIMENS:
		*need = 'O';
		return op->root ? NULL : op->path;
	case SBX_RMQ_TRUNCATE:
		*need = 'w';
		return op->path;
	case SBX_RMQ_SYMLINK:
	case SBX_RMQ_LINK:
	case SBX_RMQ_MKNOD:
	case SBX_RMQ_MKDIR:
		*need = 'w';
		dl = sbx_path_dirlen(op->path);
		sbx_buf_add(dir, op->path, dl ? dl : 1);
		return dir->buf;
	default:
		return NULL;
	}
}

/*
 * Op i's line: `e=$( { CMD; } 2>&1) || b I BPATH NEED "$e"` where a
 * refusal may ask for a borrow (borrow, and the op has a borrow path),
 * else `{ CMD; } 2>&1 || sbx_f I-J`, with the removals after it of the
 * same kind in the same command unless single. Returns the index after.
 */
static size_t op_line(struct sbx_buf *s, const struct sbx_rmq_queue *q, size_t i, bool borrow,
		      bool single)
{
	struct sbx_buf cmd = SBX_BUF_INIT, dir = SBX_BUF_INIT;
	char need = 0;
	const char *bpath = borrow_of(&q->ops[i], &need, &dir);
	size_t next;
	sbx_rmq_render_op(q, i, &dt_style, SIZE_MAX, &cmd, &next);
	if (single || next <= i)
		next = i + 1;
	if (borrow && bpath) {
		sbx_buf_adds(s, "e=$( { ");
		sbx_buf_adds(s, cmd.buf);
		sbx_buf_addf(s, "; } 2>&1) || b %zu", i);
		arg(s, bpath);
		sbx_buf_addf(s, " %c \"$e\"\n", need);
	} else {
		sbx_buf_adds(s, "{ ");
		sbx_buf_adds(s, cmd.buf);
		sbx_buf_adds(s, "; } 2>&1");
		sbx_rmeta_add_mark(s, i, next);
	}
	sbx_buf_release(&cmd);
	sbx_buf_release(&dir);
	return next;
}

/* As the user, quiet, alike times in one command: the first try of a run of utimens. */
static const struct sbx_rmq_style dt_fast_style = {.merge = true};

/*
 * The utimens ops from i on with the same times (sbx_rmq_gather put them
 * together): `{ touch ... P...; } 2>/dev/null || { LINE...; }`, one
 * process as the user for all, and only when it is refused (one not the
 * user's, or a link) each op's own line (op_line: its `sudo -n` and
 * borrow; setting the same times again is harmless). Per op that is one
 * process, not four: a subshell for the message, another for the first
 * try's, the `sh -c` and the touch (tar x as root: a 250-file batch took
 * 6 s on the fake). Returns the index after the run.
 */
static size_t times_run(struct sbx_buf *s, const struct sbx_rmq_queue *q, size_t i)
{
	struct sbx_buf cmd = SBX_BUF_INIT;
	size_t end;
	sbx_rmq_render_op(q, i, &dt_fast_style, SIZE_MAX, &cmd, &end);
	sbx_buf_addf(s, "{ %s; } 2>/dev/null || {\n", cmd.buf);
	for (size_t x = i; x < end; x++)
		op_line(s, q, x, true, true);
	sbx_buf_adds(s, "}\n");
	sbx_buf_release(&cmd);
	return end;
}

/* "rc=0 ... exit $rc" around the ops idx[0..n) (all of them when idx is NULL). */
static void script_of(struct sbx_buf *s, const struct sbx_rmq_queue *q, const size_t *idx, size_t n,
		      bool borrow)
{
	sbx_buf_adds(s, "rc=0\n");
	sbx_rmeta_add_marker(s, false);
	if (borrow)
		/* b I PATH NEED MSG: a refusal where the user lacks NEED (-O: owns,
		 * -w: may write) on PATH asks for a borrow (index, our uid, its
		 * uid gid mode); anything else fails with MSG. */
		sbx_buf_adds(s,
			     "b() { rc=1; if [ -e \"$2\" ] && ! [ \"-$3\" \"$2\" ]; then "
			     "printf '" DT_BORROW_TAG "%s %s %s\\n' \"$1\" \"$(id -u)\" "
			     "\"$(stat -c '%u %g %a' -- \"$2\")\"; "
			     "else printf '%s\\n' \"$4\"; " SBX_RMETA_MARK_FN " \"$1\"; fi; }\n");
	for (size_t k = 0; k < n;) {
		size_t i = idx ? idx[k] : k;
		if (idx) { /* the ops a borrow lets run again: each alone */
			op_line(s, q, i, borrow, true);
			k++;
		} else if (borrow && q->ops[i].kind == SBX_RMQ_UTIMENS) {
			k = times_run(s, q, i);
		} else { /* removals of many names are one command */
			k = op_line(s, q, i, borrow, false);
		}
	}
	if (borrow) /* who ran them: the owner of the links they made */
		sbx_buf_adds(s, "printf '" DT_IDS_TAG "%s %s\\n' \"$(id -u)\" \"$(id -g)\"\n");
	sbx_buf_adds(s, "exit $rc\n");
}

/* Takes the DT_IDS_TAG line of a script's output: who runs commands. */
static void note_ids(struct dt_instance *di, const char *out)
{
	const char *p = strstr(out, DT_IDS_TAG);
	long uid, gid;
	if (p && (p == out || p[-1] == '\n') &&
	    sscanf(p + strlen(DT_IDS_TAG), "%ld %ld", &uid, &gid) == 2 && uid >= 0 && gid >= 0) {
		pthread_mutex_lock(&di->lock);
		di->user_uid = uid;
		di->user_gid = gid;
		pthread_mutex_unlock(&di->lock);
	}
}

/* A borrowed path: who runs the commands, and what to give back. */
struct borrow {
	char *path; /* owned */
	char me[24], uid[24], gid[24];
	long mode; /* -1: the borrow itself failed, nothing to give back */
};

/*
 * Commands run as the sandbox's user, the toolbox's file endpoints as the
 * daemon's, which may own more (a `chown 0:0` through the mount, as rsync
 * -a or tar run by root make, leaves paths the user cannot change). So a
 * command the sandbox refuses where the user does not own the op's
 * borrow path (the file for utimens and truncate, the directory for the
 * ops that create an entry; removals go through `sudo -n` instead) borrows it: the daemon gives
 * that path to the user, the refused commands run again, the daemon gives it back (owner, group and
 * mode as they were). Two more permission calls and one more command, only when it happens.
 *
 * Each op that fails is recorded against its path (rmeta.h); returns
 * whether any did.
 */
static bool run_ops(struct dt_instance *di, const struct sbx_rmq_queue *q)
{
	struct sbx_buf s = SBX_BUF_INIT, out = SBX_BUF_INIT;
	struct sbx_error e = SBX_ERROR_INIT;
	struct borrow *bw = NULL;
	size_t nbw = 0, nidx = 0, *idx = NULL, skip = strlen(DT_BORROW_TAG), nfail = 0;
	bool *again = NULL;
	char *line;
	int rc, code = 0;

	script_of(&s, q, NULL, q->n, true);
	rc = dt_exec(di, s.buf, dt_conf.request_ms, &out, &code, &e);
	if (rc) {
		nfail = sbx_rmq_settle(q, 0, q->n, &di->fails, &di->base, rc, &e, NULL, 0, false);
		goto out;
	}
	note_ids(di, out.buf);
	/* Exit 0 still may have marks: only a borrow sets rc (below). */
	nfail = sbx_rmq_settle(q, 0, q->n, &di->fails, &di->base, 0, NULL, out.buf, 0, true);
	bw = sbx_xcalloc(q->n, sizeof(*bw));
	idx = sbx_xcalloc(q->n, sizeof(*idx));
	again = sbx_xcalloc(q->n, sizeof(*again));
	for (line = out.buf; *line; line += strcspn(line, "\n"), line += *line == '\n') {
		struct borrow x = {NULL};
		struct sbx_buf dir = SBX_BUF_INIT;
		const char *bpath;
		unsigned long mode;
		char need;
		size_t i, k;
		if (strncmp(line, DT_BORROW_TAG, skip))
			continue;
		if (sscanf(line + skip, "%zu %23s %23s %23s %lo", &i, x.me, x.uid, x.gid, &mode) !=
			5 ||
		    i >= q->n || again[i] || !(bpath = borrow_of(&q->ops[i], &need, &dir))) {
			sbx_buf_release(&dir);
			continue;
		}
		again[i] = true;
		x.mode = (long)(mode & 07777);
		for (k = 0; k < nbw && strcmp(bw[k].path, bpath); k++)
			;
		if (k == nbw) { /* several ops may need one path: borrowed once */
			x.path = sbx_xstrdup(bpath);
			bw[nbw++] = x;
		}
		sbx_buf_release(&dir);
	}
	/*
	 * An op runs again with the ops after it on its path: those failed,
	 * or did nothing, with it (the owner of an entry the borrowed mkfifo
	 * makes; they are absolute, so running one twice is harmless). So do
	 * the times of its directory set after it: the entry made now moves
	 * them (rsync -a as root: a directory in one it gave to root, then
	 * the times of that one).
	 */
	for (size_t i = 0; i < q->n && nbw; i++) {
		for (size_t j = 0; j < i && !again[i]; j++)
			again[i] = again[j] && sbx_rmq_creates_kind(q->ops[j].kind) &&
				   (!strcmp(q->ops[j].path, q->ops[i].path) ||
				    (q->ops[i].kind == SBX_RMQ_UTIMENS &&
				     sbx_rmq_under(q->ops[j].path, q->ops[i].path, false)));
		if (again[i])
			idx[nidx++] = i;
	}
	if (code && !nfail && !nidx) /* it failed, and not by an op: the script itself */
		nfail = sbx_rmq_settle(q, 0, q->n, &di->fails, &di->base, 0, NULL, out.buf, code,
				       false);
	if (!nidx)
		goto out;
	sbx_log(SBX_LOG_DEBUG, "daytona: %s: borrowing %zu path%s for %zu queued change%s",
		di->base.id, nbw, nbw == 1 ? "" : "s", nidx, nidx == 1 ? "" : "s");
	for (size_t k = 0; k < nbw; k++)
		if (dt_perms(di, bw[k].path, -1, bw[k].me, NULL, &e)) {
			sbx_rmeta_fail(&di->fails, &di->base, "borrow", bw[k].path, &e, true);
			bw[k].mode = -1;
		}
	sbx_buf_reset(&out);
	sbx_buf_reset(&s);
	script_of(&s, q, idx, nidx, false);
	if ((rc = dt_exec(di, s.buf, dt_conf.request_ms, &out, &code, &e)))
		for (size_t k = 0; k < nidx; k++)
			nfail += sbx_rmq_settle(q, idx[k], idx[k] + 1, &di->fails, &di->base, rc,
						&e, NULL, 0, false);
	else
		nfail +=
		    sbx_rmq_settle(q, 0, q->n, &di->fails, &di->base, 0, NULL, out.buf, 0, true);
	for (size_t k = 0; k < nbw; k++)
		if (bw[k].mode >= 0 &&
		    dt_perms(di, bw[k].path, bw[k].mode, bw[k].uid, bw[k].gid, &e))
			sbx_rmeta_fail(&di->fails, &di->base, "give back", bw[k].path, &e, true);
out:
	for (size_t k = 0; k < nbw; k++)
		free(bw[k].path);
	free(bw);
	free(idx);
	free(again);
	sbx_buf_release(&s);
	sbx_buf_release(&out);
	return nfail > 0;
}

/* Whether op i of p is the first of its path (the one that folds them all). */
static bool first_of_path(const struct sbx_rmq_queue *p, size_t i)
{
	for (size_t k = 0; k < i; k++)
		if (!strcmp(p->ops[k].path, p->ops[i].path))
			return false;
	return true;
}

/*
 * The native slot of the layer for chmod and chown: the queued ops of the
 * path of op i folded into one /files/permissions call (mode, uid, gid;
 * -1: unchanged). A mode the file has already (a known chmod after an
 * upload, then a chmod to that mode: tar's) asks for nothing.
 */
static void fold_perms(const struct sbx_rmq_queue *p, size_t i, long *mode, long *uid, long *gid)
{
	const char *path = p->ops[i].path;
	long base = -1, m = -1;
	*uid = *gid = -1;
	for (; i < p->n; i++) {
		const struct sbx_rmq_op *op = &p->ops[i];
		if (strcmp(op->path, path))
			continue;
		if (op->kind == SBX_RMQ_CHMOD) {
			m = op->known ? -1 : (long)(op->mode & 07777);
			if (op->known)
				base = (long)(op->mode & 07777);
			continue;
		}
		if (op->uid != (uid_t)-1)
			*uid = (long)op->uid;
		if (op->gid != (gid_t)-1)
			*gid = (long)op->gid;
	}
	*mode = m == base ? -1 : m;
}

/* What fold_perms asks of one path. */
struct perm {
	const char *path;
	long mode, uid, gid;
};

/*
 * Adds `sudo -n CMD SPEC -- P...` to s for each spec of v's paths but "-"
 * (no change), all the paths of one spec in one command.
 */
static void add_perm_cmds(struct sbx_buf *s, const char *cmd, const struct perm *v, size_t n,
			  void (*spec)(const struct perm *, char *, size_t))
{
	bool *done = sbx_xcalloc(n, sizeof(*done));
	char a[64], b[64];
	for (size_t i = 0; i < n; i++) {
		spec(&v[i], a, sizeof(a));
		if (done[i] || !strcmp(a, "-"))
			continue;
		sbx_buf_addf(s, "sudo -n %s %s --", cmd, a);
		for (size_t k = i; k < n; k++) {
			spec(&v[k], b, sizeof(b));
			if (done[k] || strcmp(a, b))
				continue;
			done[k] = true;
			arg(s, v[k].path);
		}
		sbx_buf_adds(s, " || exit 1\n");
	}
	free(done);
}

static void owner_spec(const struct perm *p, char *out, size_t size)
{
	if (p->uid < 0 && p->gid < 0)
		snprintf(out, size, "-");
	else if (p->gid < 0)
		snprintf(out, size, "%ld", p->uid);
	else if (p->uid < 0)
		snprintf(out, size, ":%ld", p->gid);
	else
		snprintf(out, size, "%ld:%ld", p->uid, p->gid);
}

static void mode_spec(const struct perm *p, char *out, size_t size)
{
	if (p->mode < 0)
		snprintf(out, size, "-");
	else
		snprintf(out, size, "%lo", (unsigned long)p->mode);
}

/*
 * The permissions calls of a batch as one command where the sandbox's
 * user may `sudo -n` (Daytona's images lend it): a `chown` per owner and
 * a `chmod` per mode for all the paths (the owner first: a chown clears
 * the setuid bits), not a /files/permissions call per path (tar x and
 * rsync -a as root ask for a chown to root of every file). Both follow
 * symbolic links, as the endpoint does. Nothing is lost when it fails:
 * the caller then sends the calls one per path as before, each with its
 * own error (they are absolute: applying one twice is harmless); and a
 * sandbox without sudo is remembered and not asked again.
 */
static bool perms_by_sudo(struct dt_instance *di, struct perm *v, size_t n)
{
	struct sbx_buf s = SBX_BUF_INIT, out = SBX_BUF_INIT;
	struct sbx_error e = SBX_ERROR_INIT;
	bool ok;
	int code = -1, rc;
	sbx_buf_adds(&s, "sudo -n true 2>/dev/null || exit 97\n");
	add_perm_cmds(&s, "chown", v, n, owner_spec);
	add_perm_cmds(&s, "chmod", v, n, mode_spec);
	rc = dt_exec(di, s.buf, dt_short_ms(), &out, &code, &e);
	ok = !rc && code == 0;
	if (!rc && code == 97) {
		di->perms_no_sudo = true;
		sbx_log(SBX_LOG_INFO,
			"daytona: %s: no sudo -n for the user: chmod and chown go "
			"through /files/permissions, a call per path",
			di->base.id);
	}
	sbx_buf_release(&s);
	sbx_buf_release(&out);
	return ok;
}

/*
 * The engine's apply slot: the commands, then the permissions calls (one
 * command for many, perms_by_sudo). Failures go to their paths (rmeta.h).
 */
static void apply(void *ctx, const struct sbx_rme_batch *b)
{
	struct dt_instance *di = ctx;
	struct sbx_error e = SBX_ERROR_INIT;
	if (b->q.n && run_ops(di, &b->q))
		for (size_t i = 0; i < b->q.n; i++) /* a link that failed is no link */
			if (b->q.ops[i].kind == SBX_RMQ_SYMLINK &&
			    sbx_rmeta_fail_has(&di->fails, b->q.ops[i].path))
				dt_links_forget(di, b->q.ops[i].path);
	/* After the commands: they may create the paths, and they run as a
	 * user who could not touch what a chown gives away. */
	struct perm *v = sbx_xcalloc(b->native.n + 1, sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; i < b->native.n; i++) {
		struct perm *p = &v[n];
		if (!first_of_path(&b->native, i))
			continue;
		fold_perms(&b->native, i, &p->mode, &p->uid, &p->gid);
		p->path = b->native.ops[i].path;
		if (p->mode >= 0 || p->uid >= 0 || p->gid >= 0)
			n++;
	}
	if (n < 2 || di->perms_no_sudo || !perms_by_sudo(di, v, n))
		for (size_t i = 0; i < n; i++) {
			char u[24], g[24];
			snprintf(u, sizeof(u), "%ld", v[i].uid);
			snprintf(g, sizeof(g), "%ld", v[i].gid);
			if (dt_perms(di, v[i].path, v[i].mode, v[i].uid >= 0 ? u : NULL,
				     v[i].gid >= 0 ? g : NULL, &e))
				sbx_rmeta_fail(&di->fails, &di->base,
					       v[i].mode >= 0 ? "chmod" : "chown", v[i].path, &e,
					       true);
		}
	free(v);
}

/*
 * About what an op's command takes (the path 3 times more with the checks;
 * a removal's twice: as the user, then with sudo); a permissions call's
 * path once (the engine asks for a path's first native op only).
 */
static size_t cost(const struct sbx_rmq_op *op, bool native)
{
	if (native)
		return strlen(op->path);
	if (sbx_rmq_removal(op->kind))
		return 2 * strlen(op->path) + 16;
	return 4 * strlen(op->path) + (op->arg ? 2 * strlen(op->arg) : 0) + 96;
}

/* Removals are merged into few commands: counted apart from the other entries. */
static bool full(const struct sbx_rme_batch *b)
{
	return b->q.n - b->n_removals + b->n_native_paths >= DT_BATCH_MAX_ENTRIES ||
	       b->n_removals >= DT_BATCH_MAX_REMOVALS || b->bytes >= DT_BATCH_MAX_BYTES;
}

const struct sbx_rme_slots dt_meta_slots = {
    .apply = apply,
    .cost = cost,
    .full = full,
    .delay_ms = DT_BATCH_DELAY_MS,
    .gather = true,
};

int dt_batch_flush(struct dt_instance *di, struct sbx_error *err)
{
	(void)err; /* failures go to their paths */
	sbx_rme_flush(&di->meta, NULL, SBX_RMQ_NEED_ALL, SBX_RME_BOTH);
	return 0;
}

int dt_batch_flush_for(struct dt_instance *di, const char *path, struct sbx_error *err)
{
	sbx_rme_flush(&di->meta, path, SBX_RMQ_NEED_NEAR, SBX_RME_BOTH);
	return 0;
}

int dt_batch_flush_put(struct dt_instance *di, const char *path)
{
	sbx_rme_flush(&di->meta, path, SBX_RMQ_NEED_PUT, SBX_RME_BOTH);
	return 0;
}

int dt_batch_flush_below(struct dt_instance *di, const char *path, struct sbx_error *err)
{
	sbx_rme_flush(&di->meta, path, SBX_RMQ_NEED_TOUCH, SBX_RME_BOTH);
	return 0;
}

int dt_batch_settle_for(struct dt_instance *di, const char *path, struct sbx_error *err)
{
	sbx_rme_flush(&di->meta, path, SBX_RMQ_NEED_NEAR, SBX_RME_SCRIPT);
	return sbx_rmeta_fail_take(&di->fails, path, err);
}

int dt_take_failure(struct sbx_instance *inst, const char *path, struct sbx_error *err)
{
	return sbx_rmeta_fail_take(&dt_inst(inst)->fails, path, err);
}

/* Queues op (copied); the engine applies the queue when full. */
static int enqueue(struct dt_instance *di, const struct sbx_rmq_op *op, struct sbx_error *err)
{
	sbx_rme_add(&di->meta, SBX_RME_SCRIPT, op, 1);
	return 0;
}

/* Queues the chmod/chown ops[0..n) (copied) for the permissions call. */
static int enqueue_perm(struct dt_instance *di, const struct sbx_rmq_op *ops, size_t n,
			struct sbx_error *err)
{
	sbx_rme_add(&di->meta, SBX_RME_NATIVE, ops, n);
	return 0;
}

int dt_batch_perms_new(struct dt_instance *di, const char *path, long mode, struct sbx_error *err)
{
	struct sbx_rmq_op ops[2] = {
	    {.kind = SBX_RMQ_CHMOD, .path = (char *)path, .mode = DT_UPLOAD_MODE, .known = true},
	    {.kind = SBX_RMQ_CHMOD, .path = (char *)path, .mode = (mode_t)mode}};
	return enqueue_perm(di, ops, mode == DT_UPLOAD_MODE ? 1 : 2, err);
}

int dt_batch_perms(struct dt_instance *di, const char *path, long mode, long uid, long gid,
		   struct sbx_error *err)
{
	struct sbx_rmq_op ops[2] = {
	    {.kind = SBX_RMQ_CHMOD, .path = (char *)path, .mode = (mode_t)mode},
	    {.kind = SBX_RMQ_CHOWN,
	     .path = (char *)path,
	     .uid = uid >= 0 ? (uid_t)uid : (uid_t)-1,
	     .gid = gid >= 0 ? (gid_t)gid : (gid_t)-1}};
	if (mode < 0 && uid < 0 && gid < 0)
		return 0;
	if (mode < 0)
		return enqueue_perm(di, &ops[1], 1, err);
	return enqueue_perm(di, ops, uid >= 0 || gid >= 0 ? 2 : 1, err);
}

int dt_sync(struct sbx_instance *inst, struct sbx_error *err)
{
	return dt_batch_flush(dt_inst(inst), err);
}

int dt_utimens(struct sbx_instance *inst, const char *path, const struct timespec ts[2],
	       struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct sbx_rmq_op op = sbx_rmq_utimens_op(path, ts);
	int rc;
	if (op.ts[0].tv_nsec == UTIME_OMIT && op.ts[1].tv_nsec == UTIME_OMIT)
		return 0;
	/*
	 * A link we made: its own times (utimensat AT_SYMLINK_NOFOLLOW, as
	 * rsync does). The daemon's permissions endpoint follows links: a
	 * link cannot be borrowed, so one root owns (an lchown 0:0 of rsync
	 * -a) is touched through sudo -n where the user may not.
	 */
	op.root = dt_link_lookup(di, path, NULL, NULL, 0);
	rc = enqueue(di, &op, err);
	if (!rc && op.root)
		dt_link_note(di, path, -1, -1, op.ts);
	return rc;
}

/*
 * chmod and chown wait in the queue and go to /files/permissions (one
 * call for both) after the commands: tar and rsync set times after a
 * chown, and the commands that set times run as the sandbox's user.
 */
int dt_chmod(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err)
{
	return dt_batch_perms(dt_inst(inst), path, (long)(mode & 07777), -1, -1, err);
}

int dt_chown(struct sbx_instance *inst, const char *path, uid_t uid, gid_t gid,
	     struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct sbx_rmq_op op;
	int rc;
	if (uid == (uid_t)-1 && gid == (gid_t)-1)
		return 0;
	if (!dt_link_lookup(di, path, NULL, NULL, 0))
		return dt_batch_perms(di, path, -1, uid == (uid_t)-1 ? -1 : (long)uid,
				      gid == (gid_t)-1 ? -1 : (long)gid, err);
	/*
	 * lchown of a link we made. The daemon's endpoint would follow it (and
	 * change the target, or fail on a dangling link), so it is `chown -h`
	 * as the sandbox's user, which can only give the link to itself or
	 * one of its groups; otherwise the link keeps its owner, and the mount
	 * shows the owner asked for while it knows the link (until the next
	 * run). The owner of a symbolic link grants nothing on Linux, and tar
	 * and rsync run by root always ask: refusing would fail every copy.
	 */
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_CHOWN,
				 .path = (char *)path,
				 .uid = uid,
				 .gid = gid,
				 .root = true,
				 .soft = true};
	rc = enqueue(di, &op, err);
	if (!rc)
		dt_link_note(di, path, uid == (uid_t)-1 ? -1 : (long)uid,
			     gid == (gid_t)-1 ? -1 : (long)gid, NULL);
	return rc;
}

/* --- the symlink table (see struct dt_link) ---------------------------------- */

/* Under di->lock. */
static void link_drop(struct dt_instance *di, struct dt_link *k)
{
	HASH_DEL(di->links, k);
	di->links_bytes -= strlen(k->path) + strlen(k->target);
	free(k->path);
	free(k->target);
	free(k);
}

/* Under di->lock: k (its path set) into the table. */
static void link_put(struct dt_instance *di, struct dt_link *k)
{
	di->links_bytes += strlen(k->path) + strlen(k->target);
	HASH_ADD_KEYPTR(hh, di->links, k->path, strlen(k->path), k);
}

/* Under di->lock: the link at path (a doubted one only with doubted_too), or NULL. */
static struct dt_link *link_find(struct dt_instance *di, const char *path, bool doubted_too)
{
	struct dt_link *k;
	HASH_FIND_STR(di->links, path, k);
	return k && (doubted_too || !k->doubt) ? k : NULL;
}

void dt_links_add(struct dt_instance *di, const char *path, const char *target, bool read)
{
	struct dt_link *k, *old;
	pthread_mutex_lock(&di->lock);
	if ((old = link_find(di, path, true)) && read) {
		/* Read again: its lchown and lutimes notes stay; the text is the sandbox's. */
		di->links_bytes += strlen(target) - strlen(old->target);
		free(old->target);
		old->target = sbx_xstrdup(target);
		pthread_mutex_unlock(&di->lock);
		return;
	}
	if (old)
		link_drop(di, old);
	/* Full: the oldest goes (it then looks like its target, as before the table). */
	while (di->links && (HASH_COUNT(di->links) >= DT_LINKS_MAX ||
			     di->links_bytes + strlen(path) + strlen(target) > DT_LINKS_BYTES))
		link_drop(di, di->links);
	k = sbx_xmalloc(sizeof(*k));
	*k = (struct dt_link){.uid = -1, .gid = -1, .doubt = read};
	/*
	 * One the mount makes is new: its times are now (as the batch that
	 * makes it is about to), not its target's, which /files/info answers.
	 */
	if (!read) {
		clock_gettime(CLOCK_REALTIME, &k->mtime);
		k->atime = k->mtime;
		k->has_mtime = k->has_atime = true;
	}
	k->path = sbx_xstrdup(path);
	k->target = sbx_xstrdup(target);
	link_put(di, k);
	pthread_mutex_unlock(&di->lock);
}

bool dt_link_lookup(struct dt_instance *di, const char *path, struct sbx_stat *st, char *target,
		    size_t size)
{
	pthread_mutex_lock(&di->lock);
	const struct dt_link *k = link_find(di, path, false);
	if (k && st) {
		/* Times not noted (a link read, not yet checked) stay those the caller has. */
		st->mode = S_IFLNK | 0777;
		st->size = (off_t)strlen(k->target);
		st->nlink = 1;
		/* Made by the user who runs commands, unless an lchown asked otherwise. */
		if (k->uid >= 0 || di->user_uid >= 0)
			st->uid = (uid_t)(k->uid >= 0 ? k->uid : di->user_uid);
		if (k->gid >= 0 || di->user_gid >= 0)
			st->gid = (gid_t)(k->gid >= 0 ? k->gid : di->user_gid);
		if (k->has_mtime)
			st->mtime = st->atime = st->ctime = k->mtime;
		if (k->has_atime)
			st->atime = k->atime;
	}
	if (k && target)
		snprintf(target, size, "%s", k->target);
	pthread_mutex_unlock(&di->lock);
	return k != NULL;
}

void dt_link_note(struct dt_instance *di, const char *path, long uid, long gid,
		  const struct timespec ts[2])
{
	pthread_mutex_lock(&di->lock);
	struct dt_link *k = link_find(di, path, true);
	if (k && uid >= 0)
		k->uid = uid;
	if (k && gid >= 0)
		k->gid = gid;
	if (k && ts && ts[0].tv_nsec != UTIME_OMIT) {
		k->atime = ts[0];
		k->has_atime = true;
	}
	if (k && ts && ts[1].tv_nsec != UTIME_OMIT) {
		k->mtime = ts[1];
		k->has_mtime = true;
	}
	pthread_mutex_unlock(&di->lock);
}

void dt_links_forget(struct dt_instance *di, const char *path)
{
	struct dt_link *k, *tmp;
	pthread_mutex_lock(&di->lock);
	HASH_ITER(hh, di->links, k, tmp)
	{
		if (sbx_rmq_under(k->path, path, true))
			link_drop(di, k);
	}
	pthread_mutex_unlock(&di->lock);
}

/*
 * Under di->lock: what is at or below from is at or below to now; with
 * swap, also the other way. The moved ones are taken out and put back
 * under their new paths (the key), in their old order.
 */
static void links_move_locked(struct dt_instance *di, const char *from, const char *to, bool swap)
{
	size_t fl = strlen(from), tl = strlen(to), n = 0;
	struct dt_link *k, *tmp, **moved = NULL;
	HASH_ITER(hh, di->links, k, tmp)
	{
		char *p;
		if (sbx_rmq_under(k->path, from, true))
			p = sbx_xasprintf("%s%s", to, k->path + fl);
		else if (swap && sbx_rmq_under(k->path, to, true))
			p = sbx_xasprintf("%s%s", from, k->path + tl);
		else
			continue;
		HASH_DEL(di->links, k);
		di->links_bytes -= strlen(k->path) + strlen(k->target);
		free(k->path);
		k->path = p;
		moved = sbx_xreallocarray(moved, n + 1, sizeof(*moved));
		moved[n++] = k;
	}
	for (size_t i = 0; i < n; i++)
		link_put(di, moved[i]);
	free(moved);
}

void dt_links_rename(struct dt_instance *di, const char *from, const char *to)
{
	dt_links_forget(di, to);
	pthread_mutex_lock(&di->lock);
	links_move_locked(di, from, to, false);
	pthread_mutex_unlock(&di->lock);
}

void dt_links_exchange(struct dt_instance *di, const char *a, const char *b)
{
	pthread_mutex_lock(&di->lock);
	links_move_locked(di, a, b, true);
	pthread_mutex_unlock(&di->lock);
}

void dt_links_doubt(struct dt_instance *di)
{
	struct dt_link *k, *tmp;
	pthread_mutex_lock(&di->lock);
	HASH_ITER(hh, di->links, k, tmp)
	{
		k->doubt = true;
	}
	pthread_mutex_unlock(&di->lock);
}

bool dt_link_doubted(struct dt_instance *di, const char *path)
{
	pthread_mutex_lock(&di->lock);
	const struct dt_link *k = link_find(di, path, true);
	bool doubted = k && k->doubt;
	pthread_mutex_unlock(&di->lock);
	return doubted;
}

void dt_link_check(struct dt_instance *di, const char *path, const struct sbx_stat *ls)
{
	pthread_mutex_lock(&di->lock);
	struct dt_link *k = link_find(di, path, true);
	/* another text (its length) is another link: its target is not known */
	if (k && (!ls || !S_ISLNK(ls->mode) || ls->size != (off_t)strlen(k->target))) {
		link_drop(di, k);
	} else if (k) {
		k->doubt = false;
		k->uid = (long)ls->uid;
		k->gid = (long)ls->gid;
		k->mtime = ls->mtime;
		k->has_mtime = true;
	}
	pthread_mutex_unlock(&di->lock);
}

bool dt_links_any(struct dt_instance *di)
{
	pthread_mutex_lock(&di->lock);
	bool any = di->links != NULL;
	pthread_mutex_unlock(&di->lock);
	return any;
}

void dt_links_clear(struct dt_instance *di)
{
	pthread_mutex_lock(&di->lock);
	while (di->links)
		link_drop(di, di->links);
	pthread_mutex_unlock(&di->lock);
}

/*
 * What another caller makes is theirs (sbx_rmeta_creator_op), as on e2b: a
 * chown queued after the entry, through `sudo -n` (the commands run as the
 * sandbox's user, who may not give a file away). Soft: without sudo the
 * entry, which was made, stays the user's, and its path is not failed.
 * New regular files get theirs from the core's cache (SBX_CF_NEW).
 */
int dt_own_new(struct dt_instance *di, const char *path, struct sbx_error *err)
{
	struct sbx_rmq_op op;
	int rc;
	if (!sbx_rmeta_creator_op(path, true, &op))
		return 0;
	op.soft = true;
	rc = enqueue(di, &op, err);
	if (!rc) /* a link we made shows its owner from the link table */
		dt_link_note(di, path, (long)op.uid, (long)op.gid, NULL);
	return rc;
}

/*
 * unlink, and rmdir of a directory the core knows empty: queued (`rm -f`,
 * `rmdir`, one command for a run of them), as the sandbox's user, then
 * through `sudo -n` (the daemon's DELETE, today's removal, is root's).
 * What waits for them: every flush rule of this file (NEAR: a stat or list
 * of the name or its directory, an upload of the name; mkdir, rename, a
 * run: all), but a stat of the name itself is ENOENT without a request
 * (dt_stat). A removal the sandbox refuses is recorded against its path.
 */
static int queue_removal(struct dt_instance *di, enum sbx_rmq_kind kind, const char *path,
			 struct sbx_error *err)
{
	struct sbx_rmq_op op = {.kind = kind, .path = (char *)path};
	if (!path[1])
		return sbx_error_set(err, EBUSY, 0, "%s /: refused", sbx_rmq_name(kind));
	/*
	 * The permissions calls go after the commands: a chmod or chown of
	 * the path waiting there (a new file's mode, vim's swap files) goes
	 * in first, as before (of a hard link, it is the other names' too),
	 * unless a link waiting gives the file another name: they follow it.
	 */
	if (kind != SBX_RMQ_UNLINK || !sbx_rme_follow_link(&di->meta, path))
		sbx_rme_flush(&di->meta, path, SBX_RMQ_NEED_TOUCH, SBX_RME_NATIVE);
	dt_links_forget(di, path);
	sbx_rmeta_fail_forget(&di->fails, path); /* an old failure concerns no file now */
	return enqueue(di, &op, err);
}

int dt_unlink(struct sbx_instance *inst, const char *path, struct sbx_error *err)
{
	return queue_removal(dt_inst(inst), SBX_RMQ_UNLINK, path, err);
}

int dt_batch_mkdir(struct dt_instance *di, const char *path, mode_t mode)
{
	struct sbx_rmq_op op = {.kind = SBX_RMQ_MKDIR, .path = (char *)path, .mode = mode};
	return enqueue(di, &op, NULL);
}

int dt_rmdir_empty(struct sbx_instance *inst, const char *path, struct sbx_error *err)
{
	return queue_removal(dt_inst(inst), SBX_RMQ_RMDIR, path, err);
}

bool dt_batch_gone(struct dt_instance *di, const char *path)
{
	return sbx_rme_fate(&di->meta, path) == SBX_RMQ_GONE;
}

int dt_symlink(struct sbx_instance *inst, const char *target, const char *path,
	       struct sbx_error *err)
{
	struct sbx_rmq_op op = {
	    .kind = SBX_RMQ_SYMLINK, .path = (char *)path, .arg = (char *)target};
	int rc = enqueue(dt_inst(inst), &op, err);
	if (!rc)
		dt_links_add(dt_inst(inst), path, target, false);
	return rc ? rc : dt_own_new(dt_inst(inst), path, err);
}

int dt_link(struct sbx_instance *inst, const char *from, const char *to, struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct sbx_rmq_op op = {.kind = SBX_RMQ_LINK, .path = (char *)to, .arg = (char *)from};
	char target[PATH_MAX];
	bool is_link = dt_link_lookup(di, from, NULL, target, sizeof(target));
	int rc = enqueue(di, &op, err);
	/* A second name of a link is a link too (info follows it: ENOENT once moved). */
	if (!rc && is_link)
		dt_links_add(di, to, target, false);
	return rc;
}

int dt_truncate(struct sbx_instance *inst, const char *path, off_t size, struct sbx_error *err)
{
	struct sbx_rmq_op op = {.kind = SBX_RMQ_TRUNCATE, .path = (char *)path, .size = size};
	if (size < 0)
		return sbx_error_set(err, EINVAL, 0, "truncate %s: negative size", path);
	return enqueue(dt_inst(inst), &op, err);
}

static int df_run(void *ctx, const char *cmd, struct sbx_buf *out, struct sbx_error *err);

int dt_mknod(struct sbx_instance *inst, const char *path, mode_t mode, dev_t dev,
	     struct sbx_error *err)
{
	struct sbx_rmq_op op = {
	    .kind = SBX_RMQ_MKNOD, .path = (char *)path, .mode = mode, .dev = dev};
	int rc;
	switch (mode & S_IFMT) {
	case S_IFIFO:
	case S_IFREG:
	case S_IFCHR:
	case S_IFBLK:
		break;
	case S_IFSOCK: /* a command binds it: is there an interpreter to run one? */
		if ((rc = sbx_rmeta_sock_check(&dt_inst(inst)->sock_ok, inst, df_run, dt_inst(inst),
					       path, err)))
			return rc;
		break;
	default:
		return sbx_error_set(err, ENOTSUP, 0, "mknod %s: this file type is not supported",
				     path);
	}
	rc = enqueue(dt_inst(inst), &op, err);
	if (!rc)
		rc = dt_own_new(dt_inst(inst), path, err);
	/*
	 * A device node is made now, not later: only root may make one, and
	 * commands run as the sandbox's user, so it is usually refused. Said
	 * by this call, the refusal leaves no name behind (a queued one
	 * returned 0, the mount then held a name the sandbox never made, and
	 * every later call on that name failed with the refusal or EEXIST).
	 */
	if (!rc && (S_ISCHR(mode) || S_ISBLK(mode)) && !(rc = dt_batch_flush(dt_inst(inst), err)))
		rc = sbx_rmeta_fail_take(&dt_inst(inst)->fails, path, err);
	return rc;
}

int dt_readlink(struct sbx_instance *inst, const char *path, char *buf, size_t size,
		struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct sbx_buf b = SBX_BUF_INIT, out = SBX_BUF_INIT;
	int rc, code = 0;

	if (!size)
		return sbx_error_set(err, EINVAL, 0, "readlink %s: no room", path);
	if ((rc = dt_batch_settle_for(di, path, err)))
		return rc;
	if (dt_link_lookup(di, path, NULL, buf, size))
		return 0;
	/* exit 2: missing, 3: not a link; the target alone on stdout. */
	sbx_buf_adds(&b, "if [ -L");
	arg(&b, path);
	sbx_buf_adds(&b, " ]; then readlink --");
	arg(&b, path);
	sbx_buf_adds(&b, " 2>/dev/null; elif [ -e");
	arg(&b, path);
	sbx_buf_adds(&b, " ]; then exit 3; else exit 2; fi");
	rc = dt_exec(di, b.buf, dt_short_ms(), &out, &code, err);
	if (!rc && code == 2)
		rc = sbx_error_set(err, ENOENT, 0, "readlink %s: no such file", path);
	else if (!rc && code == 3)
		rc = sbx_error_set(err, EINVAL, 0, "readlink %s: not a symbolic link", path);
	else if (!rc && code)
		rc = sbx_error_set(err, EIO, 0, "readlink %s: exit %d", path, code);
	if (!rc) {
		if (out.len && out.buf[out.len - 1] == '\n')
			out.buf[--out.len] = '\0';
		snprintf(buf, size, "%s", out.buf);
		/*
		 * A link something else made (a run): info follows it, so its
		 * stat showed its target. Known now, doubted, so the next stat
		 * takes its owner and times from the listing (dt_link_check).
		 */
		dt_links_add(di, path, out.buf, true);
	}
	sbx_buf_release(&b);
	sbx_buf_release(&out);
	return rc;
}

/* sbx_rmeta_run_fn: a helper command, its stdout. */
static int df_run(void *ctx, const char *cmd, struct sbx_buf *out, struct sbx_error *err)
{
	int code = 0;
	return dt_exec(ctx, cmd, dt_short_ms(), out, &code, err);
}

struct links_ctx {
	struct dt_instance *di;
	const char *dir;
	sbx_link_fn fn;
	void *ctx;
};

/* Each link read is known to the link table as dt_readlink's are (doubted: a run made it). */
static void link_seen(void *ctx, const char *name, const char *target)
{
	struct links_ctx *c = ctx;
	char *path = sbx_xasprintf("%s/%s", sbx_path_prefix(c->dir), name);
	dt_links_add(c->di, path, target, true);
	free(path);
	c->fn(c->ctx, name, target);
}

/* The links of dir, once what is queued for it and its entries is applied (sbx_rmeta_readlinks). */
int dt_readlinks(struct sbx_instance *inst, const char *dir, sbx_link_fn fn, void *ctx,
		 struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	sbx_rme_flush(&di->meta, dir, SBX_RMQ_NEED_NEAR, SBX_RME_SCRIPT);
	return sbx_rmeta_readlinks(df_run, di, dir, link_seen,
				   &(struct links_ctx){di, dir, fn, ctx}, err);
}

int dt_statfs(struct sbx_instance *inst, const char *path, struct statvfs *st,
	      struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	(void)path; /* one answer for the whole sandbox */
	return sbx_rmeta_statfs(&di->df, df_run, di, st, err);
}
