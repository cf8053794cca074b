/*
 * files — the filesystem slots of the E2B provider: envd's Filesystem RPCs
 * (Stat, ListDir, MakeDir, Move, Remove) and /files for contents, with
 * errno refined per operation (sshfs-style); and the metadata batch: ops
 * envd lacks are queued (rmeta_queue.h) and applied by the engine
 * (rmeta_engine.h, e2b_meta_slots) as one root shell script per batch at
 * sync, before a run, before any access to a path they touch, and by its
 * timer a second after the last one was queued.
 *
 * Not here: caching (the core's) and runs (run.c).
 */
#include "e2b/e2b.h"
#include "base/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/log.h"
#include "base/pathutil.h"

/* A queue this long is applied at once (memory, and the gather's cost). */
#define E2B_QUEUE_MAX 4096
#define E2B_LIST_MAX_REPLY (64u << 20)

/* --- the metadata batch --------------------------------------------------- */

/*
 * The engine's apply slot: every op of the batch (one run per
 * SBX_RMQ_SCRIPT_MAX of script). An op that fails is recorded against
 * its path (rmeta.h), with its message.
 */
static void apply(void *ctx, const struct sbx_rme_batch *b)
{
	struct e2b_inst *in = ctx;
	const struct sbx_rmq_queue *q = &b->q;
	struct sbx_buf script = SBX_BUF_INIT, out = SBX_BUF_INIT, err = SBX_BUF_INIT;
	for (size_t first = 0, next; first < q->n; first = next) {
		struct sbx_error e = SBX_ERROR_INIT;
		int code = 0, rc;
		sbx_buf_reset(&script);
		sbx_buf_reset(&out);
		sbx_buf_reset(&err);
		next = sbx_rmq_render(q, first, &sbx_rmq_style_root, SBX_RMQ_SCRIPT_MAX, &script);
		rc = e2b_run_capture(in, script.buf, true, 120000, 65536, &out, &err, &code, &e);
		sbx_rmq_settle(q, first, next, &in->fails, &in->base, rc, &e, err.buf, code, false);
	}
	sbx_buf_release(&script);
	sbx_buf_release(&out);
	sbx_buf_release(&err);
}

/* ---- our own batches' echoes ---------------------------------------------- */

#define E2B_OWN_ECHO_MS 2000
#define E2B_OWN_MAX 8192

/*
 * Marks the paths of q as ours for E2B_OWN_ECHO_MS (lock held): a batch
 * runs up to a second after its last op, and the events of tar x's
 * batched chmod/touch can come back after the core's echo window of the
 * upload (2 s), each dropping its file's attributes (a Stat at the next
 * utimens or stat of it).
 */
static void own_note_locked(struct e2b_inst *in, const struct sbx_rmq_queue *q)
{
	long long now = sbx_now_ms();
	in->own.max = E2B_OWN_MAX;
	for (size_t i = 0; i < q->n; i++) {
		const char *p = q->ops[i].path;
		size_t dl = sbx_path_dirlen(p);
		sbx_pathttl_note(&in->own, p, now, E2B_OWN_ECHO_MS);
		/* a removal changes its directory too (the core noted that at the call) */
		if (sbx_rmq_removal(q->ops[i].kind) && dl) {
			char *dir = sbx_xstrndup(p, dl);
			sbx_pathttl_note(&in->own, dir, now, E2B_OWN_ECHO_MS);
			free(dir);
		}
	}
}

/* The engine's hook before apply: events may come while the batch runs. */
static void before_apply(void *ctx, const struct sbx_rme_batch *b)
{
	struct e2b_inst *in = ctx;
	pthread_mutex_lock(&in->lock);
	own_note_locked(in, &b->q);
	pthread_mutex_unlock(&in->lock);
}

/* After apply: until now the engine showed these ops on recent entries; now they are stale. */
static void after_apply(void *ctx, const struct sbx_rme_batch *b)
{
	struct e2b_inst *in = ctx;
	pthread_mutex_lock(&in->lock);
	own_note_locked(in, &b->q);
	for (size_t i = 0; i < b->q.n; i++)
		e2b_recent_drop_locked(in, b->q.ops[i].path);
	pthread_mutex_unlock(&in->lock);
}

const struct sbx_rme_slots e2b_meta_slots = {
    .apply = apply,
    .before = before_apply,
    .after = after_apply,
    .max_ops = E2B_QUEUE_MAX,
    .delay_ms = 1000,
    .gather = true,
};

bool e2b_own_echo(struct e2b_inst *in, const char *path)
{
	pthread_mutex_lock(&in->lock);
	bool echo = sbx_pathttl_live(&in->own, path, sbx_now_ms());
	pthread_mutex_unlock(&in->lock);
	return echo;
}

void e2b_own_clear(struct e2b_inst *in)
{
	pthread_mutex_lock(&in->lock);
	sbx_pathttl_clear(&in->own);
	pthread_mutex_unlock(&in->lock);
}

/* The engine's flush, then the failure of a queued op of path itself (stat, list, read...). */
static int flush_access(struct e2b_inst *in, const char *path, enum sbx_rmq_need need,
			struct sbx_error *e)
{
	sbx_rme_flush(&in->meta, path, need, SBX_RME_BOTH);
	return sbx_rmeta_fail_take(&in->fails, path, e);
}

int e2b_take_failure(struct sbx_instance *inst, const char *path, struct sbx_error *err)
{
	return sbx_rmeta_fail_take(&e2b_of(inst)->fails, path, err);
}

static int enqueue(struct e2b_inst *in, const struct sbx_rmq_op *op)
{
	sbx_rmeta_df_forget(&in->df);
	sbx_rme_add(&in->meta, SBX_RME_SCRIPT, op, 1); /* failures go to their paths */
	return 0;
}

/* Whether path is gone once the queue is applied (a queued removal, nothing made after). */
static bool queued_gone(struct e2b_inst *in, const char *path)
{
	return sbx_rme_fate(&in->meta, path) == SBX_RMQ_GONE;
}

/*
 * A new entry belongs to who made it (sbx_rmeta_other_caller): a chown to
 * the caller is queued after it; the batch runs as root. The mount's
 * owner's entries stay the sandbox user's (the user who mounts works as
 * the sandbox's user).
 */
static void own_new(struct e2b_inst *in, const char *path)
{
	struct sbx_rmq_op op;
	if (sbx_rmeta_creator_op(path, false, &op))
		enqueue(in, &op);
}

int e2b_sync(struct sbx_instance *inst, struct sbx_error *err)
{
	/* A failed op went to its path (e2b_take_failure) and to the lease's `error`. */
	sbx_rme_flush(&e2b_of(inst)->meta, NULL, SBX_RMQ_NEED_ALL, SBX_RME_BOTH);
	return 0;
}

int e2b_chmod(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err)
{
	struct sbx_rmq_op op = {.kind = SBX_RMQ_CHMOD, .path = (char *)path, .mode = mode};
	return enqueue(e2b_of(inst), &op);
}

int e2b_chown(struct sbx_instance *inst, const char *path, uid_t uid, gid_t gid,
	      struct sbx_error *err)
{
	struct sbx_rmq_op op = {
	    .kind = SBX_RMQ_CHOWN, .path = (char *)path, .uid = uid, .gid = gid};
	if (uid == (uid_t)-1 && gid == (gid_t)-1)
		return 0;
	return enqueue(e2b_of(inst), &op);
}

int e2b_utimens(struct sbx_instance *inst, const char *path, const struct timespec ts[2],
		struct sbx_error *err)
{
	struct sbx_rmq_op op = sbx_rmq_utimens_op(path, ts);
	return enqueue(e2b_of(inst), &op);
}

int e2b_symlink(struct sbx_instance *inst, const char *target, const char *path,
		struct sbx_error *err)
{
	struct sbx_rmq_op op = {
	    .kind = SBX_RMQ_SYMLINK, .path = (char *)path, .arg = (char *)target};
	enqueue(e2b_of(inst), &op);
	own_new(e2b_of(inst), path);
	return 0;
}

int e2b_truncate(struct sbx_instance *inst, const char *path, off_t size, struct sbx_error *err)
{
	struct sbx_rmq_op op = {.kind = SBX_RMQ_TRUNCATE, .path = (char *)path, .size = size};
	if (size < 0)
		return sbx_error_set(err, EINVAL, SBX_E_INTERNAL, "truncate: negative size");
	return enqueue(e2b_of(inst), &op);
}

int e2b_link(struct sbx_instance *inst, const char *from, const char *to, struct sbx_error *err)
{
	struct sbx_rmq_op op = {.kind = SBX_RMQ_LINK, .path = (char *)to, .arg = (char *)from};
	return enqueue(e2b_of(inst), &op);
}

int e2b_mknod(struct sbx_instance *inst, const char *path, mode_t mode, dev_t dev,
	      struct sbx_error *err)
{
	struct sbx_rmq_op op = {
	    .kind = SBX_RMQ_MKNOD, .path = (char *)path, .mode = mode, .dev = dev};
	int rc = 0;
	if (S_ISSOCK(mode)) /* a command binds it: is there an interpreter to run one? */
		rc = sbx_rmeta_sock_check(&e2b_of(inst)->sock_ok, inst, e2b_helper_run,
					  e2b_of(inst), path, err);
	if (rc)
		return rc;
	enqueue(e2b_of(inst), &op);
	own_new(e2b_of(inst), path);
	return 0;
}

/* --- recent entries ------------------------------------------------------- */

/*
 * envd answers Move and MakeDir with the entry they made. The core stats
 * a file right after uploading it (to stamp its cache) and a directory
 * right after making it; answering that stat from the reply saves one
 * request per file of a `tar x`. An entry serves one stat, within
 * E2B_RECENT_MS, and any change of the path through us forgets it.
 */
static void recent_put(struct e2b_inst *in, const char *path, json_t *reply)
{
	struct sbx_stat st;
	struct e2b_recent *r;
	if (e2b_entry_to_stat(json_object_get(reply, "entry"), &in->ids, &st))
		return;
	pthread_mutex_lock(&in->lock);
	e2b_recent_drop_locked(in, path);
	r = &in->recent[in->recent_next++ % E2B_RECENT_MAX];
	free(r->path);
	r->path = sbx_xstrdup(path);
	r->st = st;
	r->at_ms = sbx_now_ms();
	pthread_mutex_unlock(&in->lock);
}

/*
 * path's recent entry into st: true when there was a fresh one. take: the
 * entry goes (fresh or not); else it stays for the stat that follows.
 */
static bool recent_get(struct e2b_inst *in, const char *path, struct sbx_stat *st, bool take)
{
	long now = sbx_now_ms();
	bool hit = false;
	pthread_mutex_lock(&in->lock);
	for (int i = 0; i < E2B_RECENT_MAX && !hit; i++) {
		struct e2b_recent *r = &in->recent[i];
		if (!r->path || strcmp(r->path, path))
			continue;
		hit = now - r->at_ms <= E2B_RECENT_MS;
		*st = r->st;
		if (take) {
			free(r->path);
			r->path = NULL;
		}
	}
	pthread_mutex_unlock(&in->lock);
	return hit;
}

void e2b_recent_drop_locked(struct e2b_inst *in, const char *path)
{
	for (int i = 0; i < E2B_RECENT_MAX; i++) {
		struct e2b_recent *r = &in->recent[i];
		if (r->path && sbx_path_under(r->path, path)) {
			free(r->path);
			r->path = NULL;
		}
	}
}

static void recent_drop(struct e2b_inst *in, const char *path)
{
	pthread_mutex_lock(&in->lock);
	e2b_recent_drop_locked(in, path);
	pthread_mutex_unlock(&in->lock);
}

void e2b_recent_clear(struct e2b_inst *in)
{
	for (int i = 0; i < E2B_RECENT_MAX; i++) {
		free(in->recent[i].path);
		in->recent[i].path = NULL;
	}
}

/* --- Filesystem RPCs ------------------------------------------------------ */

/* Replaces the errno an RPC failure was mapped to by the operation's own. */
static int refine(struct sbx_error *e, int err)
{
	e->err = err;
	return -err;
}

static int rpc_path(struct e2b_inst *in, const char *method, const char *path, json_t **out,
		    bool idempotent, const char *what, struct sbx_error *e)
{
	json_t *req = json_pack("{s:s}", "path", path);
	int rc = e2b_rpc(in, method, req, idempotent, 0, out, what, e);
	json_decref(req);
	return rc;
}

static int stat_raw(struct e2b_inst *in, const char *path, struct sbx_stat *st, json_t **entry_out,
		    struct sbx_error *err)
{
	json_t *out = NULL, *entry;
	sbx_log(SBX_LOG_DEBUG, "e2b: stat %s", path);
	int rc = rpc_path(in, "filesystem.Filesystem/Stat", path, &out, true, "stat", err);
	if (rc)
		return rc;
	entry = json_object_get(out, "entry");
	if (e2b_entry_to_stat(entry, &in->ids, st))
		rc = sbx_error_set(err, EPROTO, SBX_E_INTERNAL, "stat %s: bad entry", path);
	else if (entry_out)
		*entry_out = json_incref(entry);
	json_decref(out);
	return rc;
}

int e2b_stat(struct sbx_instance *inst, const char *path, struct sbx_stat *st,
	     struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	int rc;
	if (queued_gone(in, path)) /* its failure, if it fails, is its next access's */
		return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "stat %s: removed", path);
	struct sbx_rmq_queue view;
	rc = flush_access(in, path, SBX_RMQ_NEED_ENTRY, err);
	if (rc)
		return rc;
	sbx_rme_view(&in->meta, path, false, &view);
	if (!recent_get(in, path, st, true))
		rc = stat_raw(in, path, st, NULL, err);
	if (!rc)
		sbx_rme_overlay_view(&in->meta, &view, path, st);
	sbx_rmq_clear(&view);
	return rc;
}

/*
 * envd's symlinkTarget is the link resolved to an absolute path, not what
 * the link says: "blob" shows as "/home/user/d/blob", which a host
 * following the link through the mount would look up on the host. So the
 * raw target comes from readlink(1) in the sandbox (one command), unless
 * the link is still waiting in the batch.
 */
#define E2B_LINK_MARK "@sbxfs-link@"

int e2b_readlink(struct sbx_instance *inst, const char *path, char *buf, size_t size,
		 struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	struct sbx_buf cmd = SBX_BUF_INIT, out = SBX_BUF_INIT;
	const char *mark, *t;
	int code = 0, rc;

	if (!size)
		return sbx_error_set(err, EINVAL, SBX_E_INTERNAL, "readlink %s: no room", path);
	if (sbx_rme_link_target(&in->meta, path, buf, size))
		return 0;
	rc = flush_access(in, path, SBX_RMQ_NEED_ENTRY, err); /* a link or mknod of path */
	if (rc)
		return rc;
	/* exit 2: missing, 3: not a link; the target after a mark (a login shell may chatter). */
	sbx_buf_adds(&cmd, "if [ -L ");
	sbx_buf_add_shquoted(&cmd, path);
	sbx_buf_adds(&cmd, " ]; then printf '\\n" E2B_LINK_MARK "' && readlink -- ");
	sbx_buf_add_shquoted(&cmd, path);
	sbx_buf_adds(&cmd, "; elif [ -e ");
	sbx_buf_add_shquoted(&cmd, path);
	sbx_buf_adds(&cmd, " ]; then exit 3; else exit 2; fi");
	rc = e2b_run_capture(in, cmd.buf, false, 30000, PATH_MAX + 4096, &out, NULL, &code, err);
	mark = rc || code ? NULL : strstr(out.buf, "\n" E2B_LINK_MARK);
	if (!rc && code == 2)
		rc = sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "readlink %s: no such file", path);
	else if (!rc && code == 3)
		rc = sbx_error_set(err, EINVAL, SBX_E_NONE, "readlink %s: not a symlink", path);
	else if (!rc && !mark)
		rc = sbx_error_set(err, EIO, SBX_E_EXECUTION_FAILED, "readlink %s: exit %d", path,
				   code);
	if (!rc) { /* the text is all of the rest but readlink's newline: it may hold newlines */
		t = mark + strlen("\n" E2B_LINK_MARK);
		size_t tl = strlen(t);
		snprintf(buf, size, "%.*s", (int)(tl && t[tl - 1] == '\n' ? tl - 1 : tl), t);
	}
	sbx_buf_release(&cmd);
	sbx_buf_release(&out);
	return rc;
}

/* The links of dir, once what is queued for its entries is applied (sbx_rmeta_readlinks). */
int e2b_readlinks(struct sbx_instance *inst, const char *dir, sbx_link_fn fn, void *ctx,
		  struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	sbx_rme_flush(&in->meta, dir, SBX_RMQ_NEED_CHILDREN, SBX_RME_BOTH);
	return sbx_rmeta_readlinks(e2b_helper_run, in, dir, fn, ctx, err);
}

/*
 * ListDir of path to depth: each entry with its directory. Queued
 * removals of path's own entries stay queued (the listing leaves them
 * out); below them (depth > 1), anything queued is applied first.
 */
int e2b_list_tree(struct sbx_instance *inst, const char *path, int depth, sbx_tree_fn fn, void *ctx,
		  struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	json_t *req, *out = NULL, *entries, *entry;
	struct sbx_buf child = SBX_BUF_INIT;
	struct sbx_rmq_queue view;
	bool overlay;
	size_t i;
	int rc;
	depth = depth < 1 ? 1 : depth;
	rc = flush_access(in, path, depth > 1 ? SBX_RMQ_NEED_TOUCH : SBX_RMQ_NEED_LISTING, err);
	if (rc)
		return rc;
	sbx_rme_view(&in->meta, path, depth > 1, &view);
	sbx_log(SBX_LOG_DEBUG, "e2b: list %s (depth %d)", path, depth);
	req = json_pack("{s:s,s:i}", "path", path, "depth", depth);
	rc = e2b_rpc(in, "filesystem.Filesystem/ListDir", req, true, E2B_LIST_MAX_REPLY, &out,
		     "list", err);
	json_decref(req);
	if (rc == -EINVAL)
		rc = refine(err, ENOTDIR); /* ListDir on a file */
	if (rc) {
		sbx_rmq_clear(&view);
		return rc;
	}
	overlay = view.n || sbx_rme_touches(&in->meta, path, depth > 1, SBX_RME_BOTH);
	entries = json_object_get(out, "entries");
	json_array_foreach(entries, i, entry)
	{
		const char *name = json_string_value(json_object_get(entry, "name"));
		const char *epath = json_string_value(json_object_get(entry, "path")), *slash;
		struct sbx_stat st;
		if (!sbx_name_listable(name) || e2b_entry_to_stat(entry, &in->ids, &st))
			continue;
		sbx_buf_reset(&child);
		/* deeper than path's own entries: where envd says (built from path) */
		if (depth > 1 && epath && sbx_rmq_under(epath, path, true) && strcmp(epath, path))
			sbx_buf_adds(&child, epath);
		else
			sbx_buf_addf(&child, "%s/%s", sbx_path_prefix(path), name);
		if (overlay) {
			if (queued_gone(in, child.buf))
				continue;
			sbx_rme_overlay_view(&in->meta, &view, child.buf, &st);
		}
		slash = strrchr(child.buf, '/');
		child.buf[slash > child.buf ? slash - child.buf : 1] = '\0';
		if (fn(ctx, child.buf, name, &st))
			break;
	}
	sbx_buf_release(&child);
	sbx_rmq_clear(&view);
	json_decref(out);
	return 0;
}

int e2b_read(struct sbx_instance *inst, const char *path, off_t off, off_t len, sbx_sink_fn sink,
	     void *ctx, struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	long status = 0;
	int rc = flush_access(in, path, SBX_RMQ_NEED_CONTENT, err);
	if (rc || len == 0)
		return rc;
	rc = e2b_files_get(in, path, off, len, sink, ctx, &status, err);
	if (rc == -EINVAL && status == 400)
		rc = refine(err, EISDIR); /* "path ... is a directory" */
	return rc;
}

static bool utf8_ok(const char *s)
{
	json_t *j = json_string(s); /* jansson validates UTF-8 */
	json_decref(j);
	return j != NULL;
}

/* dir/.sbxfs-RANDOM~base, within NAME_MAX. */
static void temp_name(struct sbx_buf *b, const char *path)
{
	const char *slash = strrchr(path, '/');
	unsigned r = 0;
	if (sbx_random_bytes(&r, sizeof(r)))
		r = (unsigned)sbx_now_ms() ^ (unsigned)(uintptr_t)b;
	sbx_buf_add(b, path, (size_t)(slash - path) + 1);
	sbx_buf_addf(b, E2B_TEMP_PREFIX "%08x~%.200s", r, slash + 1);
}

/* Move; the entry envd made is kept for the stat that follows (see recent_put). */
static int move(struct e2b_inst *in, const char *from, const char *to, const char *what,
		struct sbx_error *e)
{
	json_t *req = json_pack("{s:s,s:s}", "source", from, "destination", to), *out = NULL;
	int rc = e2b_rpc(in, "filesystem.Filesystem/Move", req, false, 0, &out, what, e);
	recent_drop(in, from);
	if (!rc)
		recent_put(in, to, out);
	else
		recent_drop(in, to);
	json_decref(out);
	json_decref(req);
	return rc;
}

/* What every upload of path does first: the checks, and the queue's truncates. */
static int write_prep(struct e2b_inst *in, const char *path, struct sbx_error *err)
{
	/*
	 * The new content replaces any truncate still waiting; the waiting
	 * chmod/utimens of path stay queued and land on the new file.
	 */
	sbx_rme_drop_truncates(&in->meta, path);
	sbx_rme_flush(&in->meta, path, SBX_RMQ_NEED_NEW, SBX_RME_BOTH); /* and one in flight */
	if (!strrchr(path, '/') || !path[1])
		return sbx_error_set(err, EISDIR, SBX_E_INTERNAL, "write %s: not a file", path);
	if (!utf8_ok(path))
		return sbx_error_set(err, EINVAL, SBX_E_INTERNAL,
				     "write: the path is not valid UTF-8 (envd speaks JSON)");
	return 0;
}

/* Uploads arrive 0644; anything else is a (batched) chmod. */
static void write_mode(struct e2b_inst *in, const char *path, mode_t mode)
{
	if ((mode & 07777) && (mode & 07777) != 0644) {
		struct sbx_rmq_op op = {.kind = SBX_RMQ_CHMOD, .path = (char *)path, .mode = mode};
		enqueue(in, &op);
	}
}

/*
 * What a replaced file had, as on a local disk: its owner (envd's upload
 * is the sandbox user's, a new file moved over the name or the file
 * chowned in place) and, after a Move, its mode (an upload arrives 0644).
 * A chown clears set-ID bits: it goes first.
 */
static void keep_perms(struct e2b_inst *in, const char *path, const struct sbx_stat *old,
		       bool moved)
{
	struct sbx_stat now;
	if (!(moved && recent_get(in, path, &now, false) && now.uid == old->uid &&
	      now.gid == old->gid)) {
		struct sbx_rmq_op op = {
		    .kind = SBX_RMQ_CHOWN, .path = (char *)path, .uid = old->uid, .gid = old->gid};
		enqueue(in, &op);
	}
	if (moved || (old->mode & 06000)) /* in place, envd's own chown cleared them */
		write_mode(in, path, old->mode & 07777);
}

/*
 * e2b_write, or e2b_write_inplace: the file's own inode written, no
 * temporary name. The file's old mode and owner stay (one Stat first);
 * `mode` is a new file's only (provider.h).
 */
static int write_file(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
		      bool inplace, struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	struct sbx_buf tmp = SBX_BUF_INIT;
	struct sbx_error ignore = SBX_ERROR_INIT;
	struct sbx_stat old;
	int had; /* 0: path was there (old), -ENOENT: new, else unknown */
	int rc = write_prep(in, path, err);
	if (rc)
		return rc;
	had = stat_raw(in, path, &old, NULL, &ignore);
	if (!had)
		sbx_rme_overlay(&in->meta, path, &old); /* a chown still queued is the owner */
	if (inplace) { /* envd opens it O_TRUNC: the inode, and its other names, stay */
		rc = e2b_files_put(in, path, fd, size, err);
		recent_drop(in, path);
		goto placed;
	}
	/* Upload beside the target, then Move over it: readers never see half a file. */
	temp_name(&tmp, path);
	rc = e2b_files_put(in, tmp.buf, fd, size, err);
	if (!rc)
		rc = move(in, tmp.buf, path, "write", err);
	if (rc) {
		/* Best effort: no half upload left behind under a hidden name. */
		json_t *out = NULL;
		rpc_path(in, "filesystem.Filesystem/Remove", tmp.buf, &out, true, "write", &ignore);
		json_decref(out);
	}
placed:
	if (!rc && !had && S_ISREG(old.mode)) {
		keep_perms(in, path, &old, !inplace);
	} else if (!rc) {
		if (had == -ENOENT)
			own_new(in, path); /* before the chmod: a chown clears set-ID bits */
		write_mode(in, path, mode);
	}
	sbx_buf_release(&tmp);
	return rc;
}

int e2b_write(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
	      struct sbx_error *err)
{
	return write_file(inst, path, fd, size, mode, false, err);
}

int e2b_write_inplace(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
		      struct sbx_error *err)
{
	return write_file(inst, path, fd, size, mode, true, err);
}

/*
 * A path the core knows absent (provider.h): one upload to the name
 * itself. No one can be reading an old content there, so the temporary
 * name and the Move protect nothing; the caller does not stat it after.
 */
int e2b_write_new(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
		  struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	int rc = write_prep(in, path, err);
	if (!rc)
		rc = e2b_files_put(in, path, fd, size, err);
	recent_drop(in, path);
	if (!rc)
		own_new(in, path); /* another caller's new file is theirs; before the chmod */
	if (!rc)
		write_mode(in, path, mode);
	return rc;
}

/*
 * e2b_write_new for n files: those whose names can be filenames go up in
 * one multipart POST /files (bulkup.c), the others alone. When that
 * request fails as a whole, envd may have written some parts and not
 * others: each file is then sent alone, which tells its own fate.
 */
int e2b_write_new_many(struct sbx_instance *inst, struct sbx_new_file *files, size_t n)
{
	struct e2b_inst *in = e2b_of(inst);
	struct sbx_new_file **many = sbx_xcalloc(n, sizeof(*many));
	struct sbx_error err = SBX_ERROR_INIT;
	size_t m = 0;
	int failed = 0;
	for (size_t i = 0; i < n; i++) {
		struct sbx_new_file *f = &files[i];
		f->rc = -EAGAIN; /* not sent yet */
		if (!write_prep(in, f->path, &err) && e2b_part_name_ok(f->path))
			many[m++] = f;
		sbx_error_clear(&err);
	}
	if (m > 1 && e2b_files_put_many(in, many, m, &err)) {
		sbx_log(SBX_LOG_DEBUG, "%s; each file alone", err.msg);
		for (size_t i = 0; i < m; i++)
			many[i]->rc = -EAGAIN;
	}
	for (size_t i = 0; i < n; i++) {
		struct sbx_new_file *f = &files[i];
		if (f->rc == -EAGAIN) {
			sbx_error_clear(&f->err);
			f->rc = e2b_write_new(inst, f->path, f->fd, f->size, f->mode, &f->err);
			failed += f->rc != 0;
			continue;
		}
		recent_drop(in, f->path);
		if (!f->rc) {
			own_new(in, f->path); /* before the chmod */
			write_mode(in, f->path, f->mode);
		}
		failed += f->rc != 0;
	}
	free(many);
	return failed ? -EIO : 0;
}

int e2b_mkdir(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	json_t *out = NULL;
	int rc;
	sbx_rme_flush(&in->meta, path, SBX_RMQ_NEED_NEW, SBX_RME_BOTH);
	rc = rpc_path(in, "filesystem.Filesystem/MakeDir", path, &out, false, "mkdir", err);
	if (!rc)
		recent_put(in, path, out);
	json_decref(out);
	if (rc == -EINVAL)
		rc = refine(err, ENOTDIR); /* a parent is a file */
	if (!rc)
		own_new(in, path);
	if (!rc && (mode & 07777) && (mode & 07777) != 0755) {
		struct sbx_rmq_op op = {.kind = SBX_RMQ_CHMOD, .path = (char *)path, .mode = mode};
		enqueue(in, &op);
	}
	return rc;
}

/*
 * A directory the core made up (provider.h): queued in the root batch,
 * given to the user as MakeDir's are, unless an upload into it made it
 * first (envd's upload makes the directories above a file the user's,
 * 0755: the op then sets the mode). tar x cost a MakeDir per directory.
 * A name envd could not carry (not UTF-8) goes through MakeDir.
 */
int e2b_mkdir_new(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	struct sbx_rmq_op op = {.kind = SBX_RMQ_MKDIR, .path = (char *)path, .mode = mode};
	if (!path[1] || !utf8_ok(path))
		return e2b_mkdir(inst, path, mode, err);
	recent_drop(in, path);
	return enqueue(in, &op);
}

static int remove_path(struct e2b_inst *in, const char *path, const char *what,
		       struct sbx_error *err)
{
	json_t *out = NULL;
	recent_drop(in, path);
	int rc = rpc_path(in, "filesystem.Filesystem/Remove", path, &out, true, what, err);
	json_decref(out);
	if (!rc) /* a failed queued op of a removed path concerns nobody now */
		sbx_rmeta_fail_forget(&in->fails, path);
	return rc;
}

/*
 * Queued (`rm -f`, in the root batch as envd's own Remove runs): envd's
 * Remove is `rm -rf`, so a direct one needed a Stat first to refuse a
 * directory; the kernel has refused one already (the type of the name it
 * looked up), and the queued command refuses a directory the sandbox put
 * there since (EISDIR against the path, in `error`). What waits for it:
 * rmeta_queue.h's need levels; a stat of the name is ENOENT meanwhile.
 */
int e2b_unlink(struct sbx_instance *inst, const char *path, struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	struct sbx_rmq_op op = {.kind = SBX_RMQ_UNLINK, .path = (char *)path};
	if (!path[1])
		return sbx_error_set(err, EISDIR, SBX_E_INTERNAL, "unlink /: is a directory");
	recent_drop(in, path);
	sbx_rmeta_fail_forget(&in->fails, path); /* an old failure concerns no file now */
	return enqueue(in, &op);
}

/* A directory the core knows empty (provider.h): queued like an unlink, `rmdir`. */
int e2b_rmdir_empty(struct sbx_instance *inst, const char *path, struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	struct sbx_rmq_op op = {.kind = SBX_RMQ_RMDIR, .path = (char *)path};
	if (!strcmp(path, "/"))
		return sbx_error_set(err, EBUSY, SBX_E_INTERNAL, "rmdir /: refused");
	recent_drop(in, path);
	sbx_rmeta_fail_forget(&in->fails, path);
	return enqueue(in, &op);
}

static int count_entry(void *ctx, const char *name, const struct sbx_stat *st)
{
	(*(int *)ctx)++;
	return 1;
}

int e2b_rmdir(struct sbx_instance *inst, const char *path, struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	int n = 0, rc;
	if (!strcmp(path, "/"))
		return sbx_error_set(err, EBUSY, SBX_E_INTERNAL, "rmdir /: refused");
	sbx_rme_flush(&in->meta, path, SBX_RMQ_NEED_TOUCH, SBX_RME_BOTH);
	rc = sbx_rmeta_list(inst, path, count_entry, &n, err);
	if (!rc && n)
		rc = sbx_error_set(err, ENOTEMPTY, SBX_E_INTERNAL, "rmdir %s: not empty", path);
	return rc ? rc : remove_path(in, path, "rmdir", err);
}

static int exchange_move(void *ctx, const char *from, const char *to, struct sbx_error *err)
{
	return move(ctx, from, to, "rename", err);
}

/* RENAME_EXCHANGE as three Moves through a temporary name (sbx_rmeta_exchange). */
static int exchange(struct e2b_inst *in, const char *a, const char *b, struct sbx_error *err)
{
	struct sbx_buf tmp = SBX_BUF_INIT;
	int rc;
	temp_name(&tmp, a);
	rc = sbx_rmeta_exchange(exchange_move, in, &in->fails, a, b, tmp.buf, err);
	sbx_buf_release(&tmp);
	return rc;
}

/* A rename but RENAME_EXCHANGE, with what was queued on either name applied or held. */
static int rename_move(struct e2b_inst *in, const char *from, const char *to, unsigned flags,
		       struct sbx_error *err)
{
	struct sbx_stat st;
	int rc;
	if (flags & RENAME_NOREPLACE) {
		struct sbx_error ignore = SBX_ERROR_INIT;
		rc = stat_raw(in, to, &st, NULL, &ignore);
		if (!rc)
			return sbx_error_set(err, EEXIST, SBX_E_INTERNAL, "rename: %s exists", to);
		if (rc != -ENOENT) {
			*err = ignore;
			return rc;
		}
	}
	rc = move(in, from, to, "rename", err);
	if (!rc) {
		sbx_rmeta_fail_forget(&in->fails, from);
		sbx_rmeta_fail_forget(&in->fails, to);
	}
	if (rc == -EIO) {
		/* envd reports a rename onto a non-empty directory as an internal
		 * error: find out from the target itself, not from the text. */
		struct sbx_error ignore = SBX_ERROR_INIT;
		int n = 0;
		if (stat_raw(in, to, &st, NULL, &ignore) == 0 && S_ISDIR(st.mode) &&
		    sbx_rmeta_list(&in->base, to, count_entry, &n, &ignore) == 0 && n)
			rc = sbx_error_set(err, ENOTEMPTY, SBX_E_INTERNAL,
					   "rename %s: %s is a non-empty directory", from, to);
	}
	return rc;
}

int e2b_rename(struct sbx_instance *inst, const char *from, const char *to, unsigned flags,
	       struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	struct sbx_rme_batch held;
	int rc;
	if ((flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) ||
	    (flags == (RENAME_NOREPLACE | RENAME_EXCHANGE)))
		return sbx_error_set(err, EINVAL, SBX_E_INTERNAL, "rename: flags %#x unsupported",
				     flags);
	/* rsync's chmod, chown and times of its temporary file follow it to its name */
	sbx_rme_rename_begin(&in->meta, from, to, flags & RENAME_EXCHANGE, &held);
	if (flags & RENAME_EXCHANGE)
		return exchange(in, from, to, err);
	rc = rename_move(in, from, to, flags, err);
	sbx_rme_rename_done(&in->meta, &held, rc ? from : to);
	return rc;
}
