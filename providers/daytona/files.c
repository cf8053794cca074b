/*
 * daytona/files — the file ops over the toolbox's /files endpoints: stat
 * (/files/info), list (/files: every entry with its attributes in one
 * call), read (/files/bulk-download, a multipart reply parsed as it
 * streams), write (/files/bulk-upload through curl_mime, streamed from the
 * cache file), mkdir, unlink, rmdir, rename, and /files/permissions.
 *
 * Rename-over. The daemon's move refuses an existing destination (409), so
 * replacing a file is three moves: target -> backup, new -> target,
 * delete backup; a failed second move moves the backup back. Between the
 * first two moves (one round trip) the target does not exist; that is the
 * window. A write first uploads to a hidden temporary name in the same
 * directory, so a failed or cut upload never touches the old content, and
 * gives the new file the old one's mode and owner before the swap (see
 * dt_write).
 *
 * Not here: commands (run.c) and the operations done by commands (batch.c).
 */
#include "daytona/daytona.h"
#include "base/xalloc.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/pathutil.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* "op path" for error messages: whole (a path the sandbox takes is under PATH_MAX). */
#define DT_WHAT_MAX (PATH_MAX + 32)
static const char *what(char *buf, size_t size, const char *op, const char *path)
{
	snprintf(buf, size, "%s %s", op, path);
	return buf;
}

/* GET /files/info: the FileInfo object (new reference) and/or st. */
static int info(struct dt_instance *di, const char *path, json_t **out, struct sbx_stat *st,
		struct sbx_error *err)
{
	struct sbx_buf url = SBX_BUF_INIT;
	char w[DT_WHAT_MAX];
	json_t *j = NULL;
	int rc;
	dt_path_url(di, &url, "/files/info", path);
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .reply = &j,
				       .what = what(w, sizeof(w), "stat", path),
				       .idempotent = true},
		     err);
	if (!rc && st && dt_fileinfo_parse(j, st, NULL))
		rc = sbx_error_set(err, EIO, SBX_E_INTERNAL, "%s: unreadable file info", w);
	if (!rc && out)
		*out = json_incref(j);
	json_decref(j);
	sbx_buf_release(&url);
	return rc;
}

/* A sibling of path with a hidden unique name: "DIR/.sbxfs-KIND-HEX". */
static char *sibling(const char *path, const char *kind)
{
	const char *slash = strrchr(path, '/');
	char hex[25], *s;
	dt_random_hex(hex, 12);
	s = sbx_xasprintf("%.*s/.sbxfs-%s-%s", (int)(slash ? slash - path : 0), path, kind, hex);
	return s;
}

static int move(struct dt_instance *di, const char *from, const char *to, struct sbx_error *err)
{
	struct sbx_buf url = SBX_BUF_INIT;
	char w[DT_WHAT_MAX];
	int rc;
	dt_toolbox_url(di, &url, "/files/move");
	sbx_http_add_query(&url, "source", from);
	sbx_http_add_query(&url, "destination", to);
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .empty_post = true,
				       .what = what(w, sizeof(w), "rename", from)},
		     err);
	sbx_buf_release(&url);
	return rc;
}

static int del(struct dt_instance *di, const char *path, bool recursive, struct sbx_error *err)
{
	struct sbx_buf url = SBX_BUF_INIT;
	char w[DT_WHAT_MAX];
	int rc;
	dt_path_url(di, &url, "/files", path);
	if (recursive)
		sbx_http_add_query(&url, "recursive", "true");
	rc = dt_call(&(struct dt_call){.method = "DELETE",
				       .url = url.buf,
				       .what = what(w, sizeof(w), "delete", path),
				       .idempotent = true},
		     err);
	sbx_buf_release(&url);
	return rc;
}

static void del_quietly(struct dt_instance *di, const char *path, bool recursive)
{
	struct sbx_error e = SBX_ERROR_INIT;
	if (del(di, path, recursive, &e) && e.err != ENOENT)
		sbx_log(SBX_LOG_WARN, "daytona: %s: leftover %s: %s", di->base.id, path, e.msg);
}

/*
 * Puts `from` in the place of the existing `to` (see the top comment);
 * to_dir: `to` is an (empty) directory, so its backup is deleted recursively.
 */
static int replace(struct dt_instance *di, const char *from, const char *to, bool to_dir,
		   struct sbx_error *err)
{
	char *bak = sibling(to, "old");
	struct sbx_error e2 = SBX_ERROR_INIT;
	int rc = move(di, to, bak, err);
	if (rc == -ENOENT) { /* gone meanwhile: a plain move will do */
		sbx_error_clear(err);
		rc = move(di, from, to, err);
		goto out;
	}
	if (rc)
		goto out;
	rc = move(di, from, to, err);
	if (rc) {
		if (move(di, bak, to, &e2))
			sbx_log(SBX_LOG_ERR, "daytona: %s: could not restore %s from %s: %s",
				di->base.id, to, bak, e2.msg);
		goto out;
	}
	del_quietly(di, bak, to_dir);
out:
	free(bak);
	return rc;
}

/* --- stat, list -------------------------------------------------------------- */

/* sbx_rmeta_list's callback for stat_listed: the entry named f->name. */
struct find_entry {
	const char *name;
	struct sbx_stat *st;
	bool found;
};

static int find_entry(void *ctx, const char *name, const struct sbx_stat *st)
{
	struct find_entry *f = ctx;
	if (strcmp(name, f->name))
		return 0;
	*f->st = *st;
	f->found = true;
	return 1;
}

/*
 * path as its directory's listing shows it (lstat: the daemon lists with
 * the entry's own FileInfo). For a path /files/info could not describe
 * with a server error (it follows links: a symlink loop is ELOOP there),
 * so such an entry stats as the link it is and its directory stays
 * listable; one request more only when that happens.
 */
static int stat_listed(struct sbx_instance *inst, const char *path, struct sbx_stat *st)
{
	const char *slash = strrchr(path, '/');
	struct sbx_error e = SBX_ERROR_INIT;
	struct find_entry f = {slash ? slash + 1 : path, st, false};
	char *dir;
	int rc;
	if (!slash || !slash[1])
		return -ENOENT;
	dir = sbx_xstrndup(path, sbx_path_dirlen(path));
	rc = sbx_rmeta_list(inst, dir, find_entry, &f, &e);
	free(dir);
	return rc ? rc : f.found ? 0 : -ENOENT;
}

int dt_stat(struct sbx_instance *inst, const char *path, struct sbx_stat *st, struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	int rc;
	if (dt_batch_gone(di, path)) /* a queued removal: no request to say so */
		return sbx_error_set(err, ENOENT, 0, "stat %s: removed", path);
	struct sbx_rmq_queue view;
	if ((rc = dt_batch_settle_for(di, path, err)))
		return rc;
	sbx_rme_view(&di->meta, path, false, &view);
	rc = info(di, path, NULL, st, err);
	if (rc == -EIO && !stat_listed(inst, path, st)) {
		sbx_rmq_clear(&view);
		sbx_error_clear(err);
		return 0;
	}
	if (!rc)
		sbx_rme_overlay_view(&di->meta, &view, path, st);
	sbx_rmq_clear(&view);
	/* The directory's listing, asked at most once below (1: not asked). */
	struct sbx_stat ls = {0};
	int lrc = 1;
	if ((!rc || rc == -ENOENT) && dt_link_doubted(di, path)) {
		lrc = stat_listed(inst, path, &ls);
		dt_link_check(di, path, lrc ? NULL : &ls);
	}
	bool ours = (!rc || rc == -ENOENT) && dt_link_lookup(di, path, NULL, NULL, 0);
	/*
	 * /files/info follows links, so a dangling one the mount did not make
	 * (`ln -s /nowhere x` in a run) is a 404 there: its directory's
	 * listing (the entry's own FileInfo) shows it, else `rm`, `stat` and
	 * `readlink` of a name `ls` lists failed with ENOENT. One request more
	 * for a name that is missing from a directory the mount has not listed;
	 * none while ops wait under the directory: the listing would apply them
	 * first (the chmod of git's objects), and the mount's own links are in
	 * the link table.
	 */
	if (rc == -ENOENT && !ours) {
		char *dir = sbx_xstrndup(path, sbx_path_dirlen(path));
		bool queued = sbx_rme_touches(&di->meta, dir, true, SBX_RME_BOTH);
		free(dir);
		if (!queued && lrc == 1)
			lrc = stat_listed(inst, path, &ls);
		if (!queued && !lrc && S_ISLNK(ls.mode)) {
			*st = ls;
			sbx_error_clear(err);
			return 0;
		}
	}
	/* The daemon follows links: one we made is shown as the link it is. */
	if (ours) {
		if (rc) {
			memset(st, 0, sizeof(*st));
			clock_gettime(CLOCK_REALTIME, &st->mtime);
			st->atime = st->ctime = st->mtime;
			sbx_error_clear(err);
			rc = 0;
		}
		dt_link_lookup(di, path, st, NULL, 0);
	}
	return rc;
}

/* GET /files of path to depth: each entry with its directory (FileInfo's path, deeper). */
int dt_list_tree(struct sbx_instance *inst, const char *path, int depth, sbx_tree_fn fn, void *ctx,
		 struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct sbx_buf url = SBX_BUF_INIT, child = SBX_BUF_INIT;
	char w[DT_WHAT_MAX], d[16];
	json_t *arr = NULL, *e;
	struct sbx_rmq_queue view;
	bool links, queued;
	size_t i;
	int rc;

	depth = depth < 1 ? 1 : depth;
	pthread_mutex_lock(&di->lock);
	rc = depth > 1 && di->no_tree ? -ENOTSUP : 0;
	pthread_mutex_unlock(&di->lock);
	if (rc)
		return sbx_error_set(err, ENOTSUP, 0, "list %s: the daemon lists no subtrees",
				     path);
	if ((rc = depth > 1 ? dt_batch_flush_below(di, path, err)
			    : dt_batch_settle_for(di, path, err)))
		return rc;
	sbx_rme_view(&di->meta, path, depth > 1, &view);
	dt_path_url(di, &url, "/files", path);
	if (depth > 1) {
		snprintf(d, sizeof(d), "%d", depth);
		sbx_http_add_query(&url, "depth", d);
	}
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .reply = &arr,
				       .what = what(w, sizeof(w), "list", path),
				       .max_body = DT_LIST_MAX,
				       .idempotent = true},
		     err);
	if (!rc && !json_is_array(arr))
		rc = sbx_error_set(err, EIO, SBX_E_INTERNAL, "%s: reply is not a list", w);
	links = dt_links_any(di);
	queued = view.n || sbx_rme_touches(&di->meta, path, depth > 1, SBX_RME_BOTH);
	json_array_foreach(rc ? NULL : arr, i, e)
	{
		const char *epath = json_string_value(json_object_get(e, "path")), *slash;
		struct sbx_stat st;
		const char *name;
		if (dt_fileinfo_parse(e, &st, &name)) {
			sbx_log(SBX_LOG_DEBUG, "daytona: %s: skipping an unreadable entry", w);
			continue;
		}
		sbx_buf_reset(&child);
		if (depth > 1 &&
		    !(epath && sbx_rmq_under(epath, path, true) && strcmp(epath, path))) {
			rc = sbx_error_set(err, ENOTSUP, 0,
					   "%s: the daemon lists no paths (before 0.218)", w);
			pthread_mutex_lock(&di->lock);
			di->no_tree = true; /* asked once per instance */
			pthread_mutex_unlock(&di->lock);
			break;
		}
		if (depth > 1)
			sbx_buf_adds(&child, epath);
		else
			sbx_buf_addf(&child, "%s/%s", sbx_path_prefix(path), name);
		if (links || queued) {
			sbx_rme_overlay_view(&di->meta, &view, child.buf, &st);
			dt_link_lookup(di, child.buf, &st, NULL, 0);
		}
		slash = strrchr(child.buf, '/');
		child.buf[slash > child.buf ? slash - child.buf : 1] = '\0';
		if (fn(ctx, child.buf, name, &st))
			break;
	}
	sbx_buf_release(&child);
	sbx_rmq_clear(&view);
	json_decref(arr);
	sbx_buf_release(&url);
	return rc;
}

/* --- read ---------------------------------------------------------------------- */

struct read_ctx {
	struct dt_download d;
	bool started;
	struct sbx_error derr; /* the download's own error (http's would be generic) */
	const char *path;
	long long off, len;
	sbx_sink_fn sink;
	void *sink_ctx;
};

static int read_on_response(void *ctx, const struct sbx_http_resp *resp)
{
	struct read_ctx *r = ctx;
	int rc = dt_download_init(&r->d, resp->content_type, r->path, r->off, r->len, r->sink,
				  r->sink_ctx, &r->derr);
	r->started = true;
	return rc;
}

static int read_sink(void *ctx, const char *data, size_t len)
{
	struct read_ctx *r = ctx;
	int rc = dt_download_feed(&r->d, data, len);
	/* The range is complete: stop the transfer (read_done() says it is fine). */
	return rc == DT_DOWNLOAD_DONE ? -ECANCELED : rc;
}

/*
 * A part of a file: the toolbox's raw download, which serves HTTP Range
 * (the daemon's DownloadFile is gin's c.File, Go's http.ServeContent);
 * the bulk-download the SDK uses has no range. A 416 (past the end) is
 * no bytes.
 */
static int read_range(struct dt_instance *di, const char *path, off_t off, off_t len,
		      sbx_sink_fn sink, void *ctx, struct sbx_error *err)
{
	struct sbx_http_range rs;
	struct sbx_buf url = SBX_BUF_INIT;
	char w[DT_WHAT_MAX], hdr[96];
	long status = 0;
	int rc;

	sbx_http_range_init(&rs, off, len, sink, ctx);
	dt_toolbox_url(di, &url, "/files/download");
	sbx_http_add_query(&url, "path", path);
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .accept = "application/octet-stream",
				       .range = sbx_http_range_header(hdr, sizeof(hdr), off, len),
				       .what = what(w, sizeof(w), "read", path),
				       .status = &status,
				       .on_response = sbx_http_range_response,
				       .sink = sbx_http_range_write,
				       .sink_ctx = &rs,
				       .stream = true,
				       .idempotent = true},
		     err);
	if (rc && (rs.done || status == 416)) {
		rc = 0;
		sbx_error_clear(err);
	}
	sbx_buf_release(&url);
	return rc;
}

int dt_read(struct sbx_instance *inst, const char *path, off_t off, off_t len, sbx_sink_fn sink,
	    void *ctx, struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct read_ctx r = {.path = path, .off = off, .len = len, .sink = sink, .sink_ctx = ctx};
	struct sbx_buf url = SBX_BUF_INIT;
	json_t *body;
	char w[DT_WHAT_MAX];
	int rc;

	if ((rc = dt_batch_settle_for(di, path, err)))
		return rc;
	if (off > 0 || len >= 0)
		return read_range(di, path, off, len, sink, ctx, err);
	body = json_pack("{s[s]}", "paths", path);
	if ((rc = dt_check_body(body, what(w, sizeof(w), "read", path), err)))
		return rc;
	dt_toolbox_url(di, &url, "/files/bulk-download");
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .body = body,
				       .accept = "multipart/form-data",
				       .what = what(w, sizeof(w), "read", path),
				       .on_response = read_on_response,
				       .sink = read_sink,
				       .sink_ctx = &r,
				       .stream = true,
				       .idempotent = true},
		     err);
	if (r.started) {
		/* -ECANCELED with the range complete is read_sink's early stop. */
		if (!r.derr.err && (!rc || (rc == -ECANCELED && r.d.got_file && r.d.left == 0)))
			rc = dt_download_finish(&r.d);
		if (r.derr.err) {
			/* The download's own reason beats http's generic one. */
			rc = -r.derr.err;
			if (err)
				*err = r.derr;
		} else if (!rc) {
			sbx_error_clear(err);
		}
		dt_download_release(&r.d);
	}
	json_decref(body);
	sbx_buf_release(&url);
	return rc;
}

/* --- write ---------------------------------------------------------------------- */

struct upload {
	const char *path; /* the destination in the sandbox */
	struct sbx_http_fdpart src;
};

/* files[i].path (text) before files[i].file (streamed from the cache file). */
static int add_parts(struct curl_mime *mime, size_t i, struct upload *u)
{
	const char *base = strrchr(u->path, '/');
	curl_mimepart *p;
	char name[48];
	snprintf(name, sizeof(name), "files[%zu].path", i);
	if (!(p = curl_mime_addpart(mime)) || curl_mime_name(p, name) ||
	    curl_mime_data(p, u->path, CURL_ZERO_TERMINATED))
		return -ENOMEM;
	snprintf(name, sizeof(name), "files[%zu].file", i);
	if (!(p = curl_mime_addpart(mime)) || curl_mime_name(p, name) ||
	    curl_mime_filename(p, base ? base + 1 : u->path) ||
	    curl_mime_type(p, "application/octet-stream"))
		return -ENOMEM;
	return sbx_http_mime_fd(p, &u->src);
}

static int upload_mime(void *ctx, struct curl_mime *mime)
{
	return add_parts(mime, 0, ctx);
}

static int upload(struct dt_instance *di, const char *dest, int fd, off_t size,
		  struct sbx_error *err)
{
	struct upload u = {.path = dest, .src = {.fd = fd, .size = size}};
	struct sbx_buf url = SBX_BUF_INIT;
	char w[DT_WHAT_MAX];
	int rc;
	dt_toolbox_url(di, &url, "/files/bulk-upload");
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .mime_fn = upload_mime,
				       .mime_ctx = &u,
				       .what = what(w, sizeof(w), "upload", dest),
				       .stream = true},
		     err);
	if (u.src.err)
		rc = sbx_error_set(err, u.src.err, SBX_E_INTERNAL,
				   "%s: reading the local copy failed", w);
	sbx_buf_release(&url);
	return rc;
}

/* Gives tmp the mode, owner and group of the existing file `path` it replaces. */
static int adopt_perms(struct dt_instance *di, const char *path, const char *tmp,
		       struct sbx_error *err)
{
	struct sbx_stat old;
	json_t *fi = NULL;
	const char *owner, *group;
	int rc = info(di, path, &fi, &old, err);
	if (!rc && S_ISDIR(old.mode))
		rc = sbx_error_set(err, EISDIR, 0, "write %s: is a directory", path);
	if (rc)
		goto out;
	owner = json_string_value(json_object_get(fi, "owner"));
	group = json_string_value(json_object_get(fi, "group"));
	rc = dt_perms(di, tmp, (long)(old.mode & 07777), owner, group, err);
	if (rc && (owner || group)) /* not ours to give away: keep the mode at least */
		rc = dt_perms(di, tmp, (long)(old.mode & 07777), NULL, NULL, err);
out:
	json_decref(fi);
	return rc;
}

/*
 * Uploads to a hidden sibling, then moves it into place. A new file (the
 * common case: tar, cp, rsync, editors' temporaries) costs the upload and
 * the move; its mode waits in the queue, where the chmod and chown that
 * usually follow join it, unless it is more private than what an upload
 * makes (group or others may not read it): then it is set before the file
 * appears. When the move meets an existing file (the daemon answers 409),
 * the new one takes the old one's mode and owner and the two are swapped.
 */
int dt_write(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
	     struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	bool private = (mode & 0044) != 0044, queue_mode = !private;
	char *tmp = NULL;
	int rc;

	/* Only queued changes of this path matter here (a truncate, a chmod). */
	if ((rc = dt_batch_flush_for(di, path, err)))
		return rc;
	tmp = sibling(path, "new");
	if ((rc = upload(di, tmp, fd, size, err)))
		goto out;
	if (private && (rc = dt_perms(di, tmp, (long)(mode & 07777), NULL, NULL, err)))
		goto out;
	sbx_rmeta_gate_enter(&di->placing, path, NULL);
	rc = move(di, tmp, path, err);
	if (rc == -EEXIST) {
		sbx_error_clear(err);
		rc = adopt_perms(di, path, tmp, err);
		if (!rc)
			rc = replace(di, tmp, path, false, err);
		queue_mode = false; /* adopt_perms set it */
	}
	sbx_rmeta_gate_leave(&di->placing, path, NULL);
	if (!rc && queue_mode) {
		rc = dt_batch_perms(di, path, (long)(mode & 07777), -1, -1, err);
		goto done; /* the file is in place: a failed flush does not undo it */
	}
out:
	if (rc)
		del_quietly(di, tmp, false);
done:
	if (!rc)
		dt_links_forget(di, path);
	free(tmp);
	return rc;
}

/*
 * Into the file itself (provider.h): the toolbox creates or truncates the
 * named file (os.Create), so its inode, its other hard links, its mode
 * and its owner stay; `mode` is a new file's only.
 */
int dt_write_inplace(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
		     struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	int rc;
	(void)mode;
	if ((rc = dt_batch_flush_for(di, path, err)))
		return rc;
	sbx_rmeta_gate_enter(&di->placing, path, NULL);
	rc = upload(di, path, fd, size, err);
	sbx_rmeta_gate_leave(&di->placing, path, NULL);
	return rc;
}

/*
 * A path the core knows absent (provider.h): one bulk-upload to the name
 * itself, no hidden sibling, no move, no info. The mode is queued, where
 * tar's chmod and chown join it; a private one too (tar as root creates
 * files 0600 and chmods them after), so until the batch runs such a file
 * is readable by the sandbox's other users as the upload made it (0644),
 * as on e2b, whose uploads have always worked that way (DESIGN.md).
 */
int dt_write_new(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
		 struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	int rc;
	dt_batch_flush_put(di, path);
	sbx_rmeta_gate_enter(&di->placing, path, NULL);
	rc = upload(di, path, fd, size, err);
	sbx_rmeta_gate_leave(&di->placing, path, NULL);
	if (rc)
		return rc;
	dt_links_forget(di, path);
	return dt_batch_perms_new(di, path, (long)(mode & 07777), err);
}

/* n files for one bulk-upload: each its own reader. */
struct upload_many {
	struct upload *u;
	size_t n;
};

/* Every file's parts, in order (the daemon streams them: each path before its file). */
static int upload_many_mime(void *ctx, struct curl_mime *mime)
{
	struct upload_many *m = ctx;
	int rc = 0;
	for (size_t i = 0; !rc && i < m->n; i++)
		rc = add_parts(mime, i, &m->u[i]);
	return rc;
}

/* The file of the batch an `errors` entry is about, or NULL. */
static struct sbx_new_file *bulk_error_file(json_t *e, struct sbx_new_file *files, size_t n,
					    const char **why)
{
	const char *p = json_string_value(json_object_get(e, "path"));
	const char *s = json_string_value(e);
	*why = json_string_value(json_object_get(e, "error"));
	if (!*why)
		*why = json_string_value(json_object_get(e, "message"));
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(files[i].path);
		if (p && !strcmp(p, files[i].path))
			return &files[i];
		if (s && !strncmp(s, files[i].path, l) && s[l] == ':') {
			*why = s + l + 1 + (s[l + 1] == ' ');
			return &files[i];
		}
	}
	return NULL;
}

void dt_bulk_upload_results(long status, const char *body, size_t len, struct sbx_new_file *files,
			    size_t n)
{
	json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
	json_t *ok = json_object_get(j, "files"), *bad = json_object_get(j, "errors"), *e;
	size_t i, k;
	for (i = 0; i < n; i++)
		files[i].rc = sbx_error_set(&files[i].err, EIO, SBX_E_INTERNAL,
					    "upload %s: not in the reply of bulk-upload (HTTP %ld)",
					    files[i].path, status);
	json_array_foreach(bad, k, e)
	{
		const char *why = NULL;
		struct sbx_new_file *f = bulk_error_file(e, files, n, &why);
		if (f && why)
			f->rc =
			    sbx_error_set(&f->err, sbx_rmeta_msg_errno(why, strlen(why)),
					  SBX_E_EXECUTION_FAILED, "upload %s: %s", f->path, why);
	}
	json_array_foreach(ok, k, e)
	{
		const char *p = json_string_value(json_object_get(e, "path"));
		for (i = 0; p && i < n; i++) {
			if (!strcmp(p, files[i].path)) {
				files[i].rc = 0;
				sbx_error_clear(&files[i].err);
			}
		}
	}
	json_decref(j);
}

/*
 * dt_write_new for n files in one bulk-upload (what the SDK's uploadFiles
 * sends). 200 lists every file; 400 lists the written ones under "files"
 * and the refused ones under "errors" (dt_bulk_upload_results). Anything
 * else (a transport failure, 5xx) fails every file with that error.
 */
int dt_write_new_many(struct sbx_instance *inst, struct sbx_new_file *files, size_t n)
{
	struct dt_instance *di = dt_inst(inst);
	struct upload_many m = {sbx_xcalloc(n, sizeof(*m.u)), 0};
	struct sbx_new_file **sent = sbx_xcalloc(n, sizeof(*sent));
	struct sbx_buf url = SBX_BUF_INIT, body = SBX_BUF_INIT;
	struct sbx_error err = SBX_ERROR_INIT;
	long status = 0;
	char w[DT_WHAT_MAX];
	int rc = 0, failed = 0;

	for (size_t i = 0; i < n; i++) {
		struct sbx_new_file *f = &files[i];
		f->rc = dt_batch_flush_put(di, f->path);
		m.u[m.n] = (struct upload){.path = f->path, .src = {.fd = f->fd, .size = f->size}};
		sent[m.n++] = f;
	}
	for (size_t i = 0; i < m.n; i++)
		sbx_rmeta_gate_enter(&di->placing, sent[i]->path, NULL);
	snprintf(w, sizeof(w), "upload %zu files", m.n);
	dt_toolbox_url(di, &url, "/files/bulk-upload");
	if (m.n)
		rc = dt_call(&(struct dt_call){.url = url.buf,
					       .mime_fn = upload_many_mime,
					       .mime_ctx = &m,
					       .what = w,
					       .status = &status,
					       .raw = &body,
					       .err_body = &body,
					       .stream = true},
			     &err);
	for (size_t i = 0; i < m.n; i++) {
		struct sbx_new_file *f = sent[i];
		sbx_rmeta_gate_leave(&di->placing, f->path, NULL);
		if (m.u[i].src.err)
			f->rc = sbx_error_set(&f->err, m.u[i].src.err, SBX_E_INTERNAL,
					      "upload %s: reading the local copy failed", f->path);
		else if (rc && status != 400)
			f->rc = sbx_error_set(&f->err, -rc, err.code, "%s", err.msg);
	}
	/* The per-file results, when the reply has them. */
	if (m.n && (!rc || status == 400)) {
		struct sbx_new_file *tmp = sbx_xcalloc(m.n, sizeof(*tmp));
		for (size_t i = 0; i < m.n; i++)
			tmp[i] = *sent[i];
		dt_bulk_upload_results(status, body.buf, body.len, tmp, m.n);
		for (size_t i = 0; i < m.n; i++)
			if (!m.u[i].src.err)
				*sent[i] = tmp[i];
		free(tmp);
	}
	for (size_t i = 0; i < m.n; i++) {
		struct sbx_new_file *f = sent[i];
		if (f->rc)
			continue;
		dt_links_forget(di, f->path);
		f->rc = dt_batch_perms_new(di, f->path, (long)(f->mode & 07777), &f->err);
	}
	for (size_t i = 0; i < n; i++)
		failed += files[i].rc != 0;
	sbx_buf_release(&body);
	sbx_buf_release(&url);
	free(sent);
	free(m.u);
	return failed ? -EIO : 0;
}

/* --- namespace ops ------------------------------------------------------------------ */

int dt_mkdir(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct sbx_buf url = SBX_BUF_INIT;
	char m[16], w[DT_WHAT_MAX];
	int rc;
	/* What is queued on this name (a removal of it), as e2b_mkdir. */
	sbx_rme_flush(&di->meta, path, SBX_RMQ_NEED_NEW, SBX_RME_BOTH);
	snprintf(m, sizeof(m), "%o", (unsigned)(mode & 07777));
	dt_path_url(di, &url, "/files/folder", path);
	sbx_http_add_query(&url, "mode", m);
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .empty_post = true,
				       .what = what(w, sizeof(w), "mkdir", path)},
		     err);
	sbx_buf_release(&url);
	return rc ? rc : dt_own_new(di, path, err);
}

/*
 * A directory the core made up (provider.h): queued, made as the user (a
 * directory it may not write is borrowed, see batch.c's run_ops), unless
 * an upload into it made it first (the daemon's MkdirAll, the user's,
 * 0755: the op then sets the mode). tar x cost a folder call and a
 * lookup per directory.
 */
int dt_mkdir_new(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err)
{
	if (!path[1])
		return dt_mkdir(inst, path, mode, err);
	return dt_batch_mkdir(dt_inst(inst), path, mode);
}

static int count_entry(void *ctx, const char *name, const struct sbx_stat *st)
{
	(*(size_t *)ctx)++;
	return 1; /* one is enough */
}

int dt_rmdir(struct sbx_instance *inst, const char *path, struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct sbx_stat st;
	size_t n = 0;
	int rc;
	/* What is queued on it or below (the removals of its entries), as e2b_rmdir. */
	sbx_rme_flush(&di->meta, path, SBX_RMQ_NEED_TOUCH, SBX_RME_BOTH);
	rc = sbx_rmeta_list(inst, path, count_entry, &n, err);
	if (rc && rc != -ENOENT && !info(di, path, NULL, &st, NULL) && !S_ISDIR(st.mode))
		return sbx_error_set(err, ENOTDIR, 0, "rmdir %s: not a directory", path);
	if (rc)
		return rc;
	if (n)
		return sbx_error_set(err, ENOTEMPTY, 0, "rmdir %s: directory not empty", path);
	if (!(rc = del(di, path, true, err))) {
		dt_links_forget(di, path);
		sbx_rmeta_fail_forget(&di->fails, path);
	}
	return rc;
}

/*
 * What lstat(2) says of path's type, as rename needs it. /files/info
 * follows links: a dangling link is ENOENT there and a link to a directory
 * a directory. So a link we made is taken from the table, and when info
 * says ENOENT, a server error or a directory, the directory's listing
 * (lstat) decides: one request more, only then (a regular file, the
 * common rename-over, costs none).
 */
static int lstat_type(struct dt_instance *di, const char *path, struct sbx_stat *st,
		      struct sbx_error *err)
{
	struct sbx_stat lst;
	int rc;
	if (dt_link_lookup(di, path, NULL, NULL, 0)) {
		memset(st, 0, sizeof(*st));
		st->mode = S_IFLNK | 0777;
		return 0;
	}
	rc = info(di, path, NULL, st, err);
	if ((rc == -ENOENT || rc == -EIO || (!rc && S_ISDIR(st->mode))) &&
	    !stat_listed(&di->base, path, &lst)) {
		*st = lst;
		sbx_error_clear(err);
		rc = 0;
	}
	return rc;
}

/* rename(2)'s rules for an existing target, then the three-move swap. */
static int rename_over(struct dt_instance *di, const char *from, const char *to,
		       struct sbx_error *err)
{
	struct sbx_stat fst, tst;
	size_t n = 0;
	int rc;
	if ((rc = lstat_type(di, from, &fst, err)) || (rc = lstat_type(di, to, &tst, err)))
		return rc;
	if (S_ISDIR(tst.mode)) {
		if (!S_ISDIR(fst.mode))
			return sbx_error_set(err, EISDIR, 0, "rename %s: %s is a directory", from,
					     to);
		if ((rc = sbx_rmeta_list(&di->base, to, count_entry, &n, err)))
			return rc;
		if (n)
			return sbx_error_set(err, ENOTEMPTY, 0, "rename %s: %s is not empty", from,
					     to);
	} else if (S_ISDIR(fst.mode)) {
		return sbx_error_set(err, ENOTDIR, 0, "rename %s: %s is not a directory", from, to);
	}
	return replace(di, from, to, S_ISDIR(tst.mode), err);
}

static int exchange_move(void *ctx, const char *from, const char *to, struct sbx_error *err)
{
	return move(ctx, from, to, err);
}

/* RENAME_EXCHANGE as three moves through a hidden sibling (sbx_rmeta_exchange). */
static int exchange(struct dt_instance *di, const char *a, const char *b, struct sbx_error *err)
{
	char *tmp = sibling(a, "swap");
	int rc = sbx_rmeta_exchange(exchange_move, di, &di->fails, a, b, tmp, err);
	free(tmp);
	return rc;
}

int dt_rename(struct sbx_instance *inst, const char *from, const char *to, unsigned flags,
	      struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct sbx_rme_batch held;
	int rc;
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return sbx_error_set(err, EINVAL, 0, "rename %s: unknown flags", from);
	/* What is queued on either name or below: rsync's renames wait for none of the rest,
	 * and the chmod, chown and times of its temporary file follow it to its name. */
	sbx_rme_rename_begin(&di->meta, from, to, flags & RENAME_EXCHANGE, &held);
	if (flags & RENAME_EXCHANGE) {
		sbx_rmeta_gate_enter(&di->placing, from, to);
		rc = exchange(di, from, to, err);
		sbx_rmeta_gate_leave(&di->placing, from, to);
		/*
		 * The links swap places with their directories (forgotten, a
		 * link showed as its target: info follows links; a dangling
		 * one was ENOENT while its directory listed it). A failed
		 * exchange may have left either anywhere: forgotten then.
		 */
		if (!rc) {
			dt_links_exchange(di, from, to);
		} else {
			dt_links_forget(di, from);
			dt_links_forget(di, to);
		}
		return rc;
	}
	if (!strcmp(from, to))
		return 0;
	sbx_rmeta_gate_enter(&di->placing, from, to);
	rc = move(di, from, to, err);
	if (rc == -EEXIST && !(flags & RENAME_NOREPLACE)) {
		sbx_error_clear(err);
		rc = rename_over(di, from, to, err);
	}
	sbx_rmeta_gate_leave(&di->placing, from, to);
	sbx_rme_rename_done(&di->meta, &held, rc ? from : to);
	if (!rc) {
		dt_links_rename(di, from, to);
		sbx_rmeta_fail_forget(&di->fails, from);
		sbx_rmeta_fail_forget(&di->fails, to);
	}
	return rc;
}
