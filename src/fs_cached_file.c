/*
 * fs_cached_file — open files of a remote lease's fs/ (see fs_cached.c):
 * open downloads into the content cache or reuses a stamped copy, reads
 * and writes go to the local cache file, flush/fsync/last release upload
 * dirty data, and a failed upload keeps the data for the next try.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/log.h"
#include "base/sysutil.h"
#include "base/xalloc.h"
#include "fs_cached.h"
#include "fs_prefetch.h"
#include "writeback.h"

/* ---- uploads ---------------------------------------------------------------- */

/*
 * Hands the provider the chmod/chown/utimens that waited for this upload
 * (write-back, cache_defer.c), now that the data is there: both remote
 * providers queue them in their metadata queue, ordered after the upload.
 * The mode of a new file went with the write itself. The owner goes
 * before the mode: a chown clears set-ID bits, so `chown 0:0 f; chmod
 * 4755 f` replayed in the other order lost the 4 (a chmod then chown
 * arrives from the kernel with the cleared mode already).
 */
static int apply_attrs(struct sbx_lease *l, struct sbx_instance *inst,
		       const struct sbx_cfile_state *s, const struct sbx_cfile_attrs *a,
		       struct sbx_error *err)
{
	int rc = 0;
	bool written = !s->remote && (a->mode & 07777) == (s->mode & 07777);
	if (a->owner_set)
		rc = l->prov->chown ? l->prov->chown(inst, s->path, a->uid, a->gid, err)
				    : fsc_unsupported(l, "change owners", err);
	if (!rc && a->mode_set && (!written || (a->owner_set && (a->mode & 06000))))
		rc = l->prov->chmod ? l->prov->chmod(inst, s->path, a->mode, err)
				    : fsc_unsupported(l, "change modes", err);
	if (!rc && a->times_set)
		rc = l->prov->utimens ? l->prov->utimens(inst, s->path, a->ts, err)
				      : fsc_unsupported(l, "set times", err);
	return rc;
}

/*
 * The attributes of a new file just written straight to its name, without
 * asking: what was sent, the mode it was created with (the provider gives
 * it), the owner the first such upload got (false until one was stat'ed),
 * and the local copy's times. A later stat (after the attribute TTL) tells
 * the sandbox's own mtime, a few milliseconds later; the stamp is loose
 * (by size), so the copy stays valid.
 */
static bool made_up_stat(struct sbx_cache *c, const struct sbx_cfile_state *s,
			 const struct stat *sys, struct sbx_stat *st)
{
	memset(st, 0, sizeof(*st));
	if (!sbx_cache_file_owner_known(c, &st->uid, &st->gid))
		return false;
	st->mode = S_IFREG | (s->mode ? s->mode & 07777 : 0644);
	st->nlink = 1;
	st->size = sys->st_size;
	st->mtime = sys->st_mtim;
	st->atime = sys->st_atim;
	st->ctime = sys->st_ctim;
	return true;
}

/* One upload in the making: begun (busy claim), sent, then ended. */
struct upl {
	struct sbx_cfile *cf;
	struct sbx_cfile_state s;
	struct stat sys;
	struct sbx_stat st;
	struct sbx_error *err;
	unsigned long gen;
	bool done, fresh, loose;
	int rc, src;
};

/*
 * Takes cf's busy claim and its state; true if there is data to send
 * (u->rc says why not when it failed).
 */
static bool upload_begin(struct sbx_lease *l, struct upl *u)
{
	u->src = -1;
	sbx_cache_file_begin_upload(l->cache, u->cf, &u->s);
	if (!u->s.dirty || !u->s.linked)
		return false;
	if (fstat(sbx_cfile_fd(u->cf), &u->sys)) {
		u->rc = sbx_error_set(u->err, errno, SBX_E_INTERNAL, "cache file of %s: %s",
				      u->s.path, strerror(errno));
		return false;
	}
	u->rc = l->prov->write ? 0 : fsc_unsupported(l, "write files", u->err);
	return !u->rc;
}

/*
 * The upload changed its directory's mtime in the sandbox: times the mount
 * set on that directory while it was queued are laid again (queued after
 * it, in the provider's next batch: no request of their own).
 */
static void dir_times_again(struct sbx_lease *l, struct sbx_instance *inst, struct upl *u)
{
	struct sbx_error e = SBX_ERROR_INIT;
	struct timespec ts[2];
	char *dir;
	int rc;
	if (!l->prov->utimens || !sbx_cache_dir_times_after(l->cache, u->s.path, u->cf, &dir, ts))
		return;
	if ((rc = l->prov->utimens(inst, dir, ts, &e)))
		fsc_record(l, "utimens", dir, rc, &e);
	free(dir);
}

/*
 * After the write slot answered rc (lease in use): one stat to stamp it
 * (none for a new file once the owner is known: made_up_stat), then the
 * attributes that waited for it (the stamp takes them).
 */
static void upload_after(struct sbx_lease *l, struct sbx_instance *inst, struct upl *u, int rc)
{
	struct sbx_cache *c = l->cache;
	struct sbx_error serr = SBX_ERROR_INIT;
	u->rc = rc;
	u->done = rc == 0;
	if (u->done && u->fresh && made_up_stat(c, &u->s, &u->sys, &u->st)) {
		u->src = 0;
		u->loose = true;
		u->gen = sbx_cache_gen(c);
	} else if (u->done && l->prov->stat) {
		u->gen = sbx_cache_gen(c);
		u->src = l->prov->stat(inst, u->s.path, &u->st, &serr);
		if (u->src == 0 && !u->s.remote)
			sbx_cache_file_owner_learn(c, u->st.uid, u->st.gid);
	}
	if (u->done) {
		/*
		 * After the stat: a provider's stat may flush what is queued for
		 * the path (daytona does, one command), which would put one
		 * metadata command per file on the workers; queued after it,
		 * tar's attributes go out in the provider's next batch.
		 */
		struct sbx_cfile_attrs a;
		sbx_cache_file_take_attrs(c, u->cf, &a);
		if (a.mode_set || a.owner_set || a.times_set)
			u->rc = apply_attrs(l, inst, &u->s, &a, u->err);
		if (u->rc) {
			sbx_cache_file_return_attrs(c, u->cf, &a);
			u->done = false;
		} else if (u->src == 0) {
			sbx_cfile_attrs_onto(&u->st, &a, true); /* what the stat after would say */
		}
	}
	if (u->done)
		dir_times_again(l, inst, u);
}

/*
 * A file of the sandbox open here since before a run (or a reported change)
 * may have been removed by it: `rm` in the sandbox, then a write and close
 * here uploaded it again, so it reappeared with everything written. A
 * local disk keeps it removed (the writes went to the unlinked file), and
 * so does this now: one stat, and if the name is gone the file is dropped
 * as unlinked, the reason said in `error`. True when so.
 */
static bool removed_outside(struct sbx_lease *l, struct sbx_instance *inst, struct upl *u)
{
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_stat st;
	int rc;
	if (!u->s.remote || !u->s.open_before_change || !l->prov->stat)
		return false;
	rc = l->prov->stat(inst, u->s.path, &st, &e);
	if (rc != -ENOENT) {
		if (!rc) /* a long-lived writer's next fsync need not ask again */
			sbx_cache_file_still_there(l->cache, u->cf);
		return false;
	}
	sbx_cache_file_gone(l->cache, u->cf);
	sbx_error_set(&e, ENOENT, SBX_E_EXECUTION_FAILED, /* not NOT_FOUND: no probe */
		      "%s was removed in the sandbox while it was open here: what was written to "
		      "it since is not uploaded (as to a removed file)",
		      u->s.path);
	sbx_lease_error(l, "upload", &e);
	return true;
}

/*
 * Sends u alone through the write slot: write_new for a new file; for one
 * with other hard links write_inplace, as a local disk writes it (a new
 * file moved over its name split it from them: `ln f g; echo x >> g` left
 * f without the x, in the sandbox and here), and then what is cached of
 * its other names is stale.
 */
static void upload_send(struct sbx_lease *l, struct sbx_instance *inst, struct upl *u)
{
	if (removed_outside(l, inst, u))
		return;
	bool linked = fsc_has_other_names(l, u->s.path);
	/*
	 * A file created here after a negative lookup and never uploaded
	 * (!remote) has no old content for a reader to see cut: it goes
	 * straight to its name (write_new).
	 */
	u->fresh = !u->s.remote && l->prov->write_new;
	upload_after(l, inst, u,
		     (u->fresh ? l->prov->write_new
		      : linked && l->prov->write_inplace
			  ? l->prov->write_inplace
			  : l->prov->write)(inst, u->s.path, sbx_cfile_fd(u->cf), u->sys.st_size,
					    u->s.mode ? u->s.mode : 0644, u->err));
	if (linked && u->done)
		fsc_other_names_changed(l, u->s.path);
}

/*
 * Ends u: the claim goes, the entry is clean and stamped if it went up,
 * else it stays dirty (with the attributes) and the failure is recorded.
 */
static int upload_end(struct sbx_lease *l, struct upl *u)
{
	sbx_cache_file_end_upload(l->cache, u->cf, u->s.wgen, u->done, u->src == 0 ? &u->st : NULL,
				  u->gen, u->done && u->loose ? u->sys.st_size : -1);
	if (u->rc) /* always said: written data is waiting */
		fsc_record(l, "upload", u->s.path, u->rc, u->err);
	free(u->s.path);
	return u->rc;
}

/* Uploads cf if it is dirty (upload_begin, upload_send, upload_end). */
static int upload(struct sbx_lease *l, struct sbx_cfile *cf, bool *sent, struct sbx_error *err)
{
	struct upl u = {.cf = cf, .err = err};
	struct sbx_instance *inst;
	if (upload_begin(l, &u) && !(u.rc = sbx_lease_use(l, &inst, err))) {
		upload_send(l, inst, &u);
		sbx_lease_unuse(l);
	}
	if (sent)
		*sent = u.done;
	return upload_end(l, &u);
}

/*
 * After a successful upload (the provider is reachable): retries a few
 * dirty files whose own handles are gone. Their failures are recorded,
 * not returned: this close did its own job.
 */
static void retry_orphans(struct sbx_lease *l)
{
	struct sbx_cfile *orphans[2];
	struct sbx_error err = SBX_ERROR_INIT;
	size_t n = sbx_cache_file_orphans(l->cache, orphans, 2);
	for (size_t i = 0; i < n; i++) {
		upload(l, orphans[i], NULL, &err);
		sbx_cache_file_put(l->cache, orphans[i]);
	}
}

/*
 * A failure that belongs to the file, not to the sandbox or the way to it:
 * a pass goes on with the other files after it, and stops after any other
 * (each would wait for the same timeouts, or hit the same outage).
 */
static bool file_failure(int rc)
{
	static const int own[] = {EACCES, EPERM,	EROFS, ENOTDIR, EISDIR, ENOENT,
				  EINVAL, ENAMETOOLONG, EFBIG, ENOSPC,	EDQUOT};
	for (size_t i = 0; i < sizeof(own) / sizeof(*own); i++)
		if (-rc == own[i])
			return true;
	return false;
}

/*
 * One pass over l's unsaved files of a kind (see sbx_fs_save_unsaved);
 * *stuck (may be NULL) gets the failure that stopped it, if one did.
 */
static size_t save_pass(struct sbx_lease *l, enum sbx_unsaved which, long long deadline_ms,
			struct sbx_error *stuck)
{
	struct sbx_cfile *cf[SBX_SAVE_UNSAVED_MAX];
	size_t n;
	bool failed = false, all = which == SBX_UNSAVED_ALL; /* failed: the sandbox's failure */
	if (!l->cache)
		return 0;
	if (atomic_exchange(&l->unsaved_due, false))
		sbx_cache_retry_now(l->cache);
	n = sbx_cache_file_unsaved(l->cache, cf, SBX_SAVE_UNSAVED_MAX, which);
	for (size_t i = 0; i < n; i++) {
		struct sbx_error err = SBX_ERROR_INIT;
		char why[SBX_ERR_MSG_MAX];
		int rc;
		bool late = sbx_now_ms() >= deadline_ms;
		if (!all && (failed || late)) { /* the rest wait for their next turn */
			sbx_cache_file_put(l->cache, cf[i]);
			continue;
		}
		rc = late ? sbx_error_set(&err, ETIMEDOUT, SBX_E_TIMEOUT,
					  "no time left before the daemon exits")
			  : upload(l, cf[i], NULL, &err);
		failed = rc && !file_failure(rc);
		if (rc) { /* named by the file's path: the reason may name a hidden temporary */
			char *path = sbx_cfile_path(l->cache, cf[i]);
			enum sbx_errcode code = err.code;
			snprintf(why, sizeof(why), "%s", err.msg);
			sbx_error_set(&err, rc, SBX_E_NONE,
				      "unsaved changes kept in %s, not uploaded yet: %s",
				      sbx_cfile_name(cf[i]), why);
			fsc_record(l, all ? "save before exit: upload" : "upload", path, rc, &err);
			if (failed && stuck)
				sbx_error_set(stuck, rc, code, "%s: %s", path, why);
			free(path);
		}
		sbx_cache_file_put(l->cache, cf[i]);
	}
	return sbx_cache_unsaved_count(l->cache);
}

size_t sbx_fs_save_unsaved(struct sbx_lease *l, bool all, long long deadline_ms)
{
	return save_pass(l, all ? SBX_UNSAVED_ALL : SBX_UNSAVED_ORPHANS, deadline_ms, NULL);
}

int sbx_fs_save_owed(struct sbx_lease *l, struct sbx_error *err)
{
	sbx_error_clear(err);
	if (l->cache && sbx_cache_unsaved_count(l->cache))
		save_pass(l, SBX_UNSAVED_OWED, sbx_now_ms() + SBX_UNSAVED_PASS_MS, err);
	return -err->err;
}

void fsc_upload_bg_many(struct sbx_lease *l, struct sbx_cfile **cf, size_t n, int *rcs)
{
	struct upl *u = sbx_xcalloc(n, sizeof(*u));
	struct sbx_error *errs = sbx_xcalloc(n, sizeof(*errs));
	struct sbx_new_file *nf = sbx_xcalloc(n, sizeof(*nf));
	size_t *of = sbx_xcalloc(n, sizeof(*of));
	struct sbx_instance *inst = NULL;
	bool *go = sbx_xcalloc(n, sizeof(*go)), any = false, used = false;
	size_t m = 0;

	/* Claims in queue order; a worker's batch never shares an entry with another's. */
	for (size_t i = 0; i < n; i++) {
		u[i].cf = cf[i];
		u[i].err = &errs[i];
		go[i] = upload_begin(l, &u[i]);
		any = any || go[i];
	}
	if (any) {
		struct sbx_error err = SBX_ERROR_INIT;
		int rc = sbx_lease_use(l, &inst, &err);
		used = rc == 0;
		for (size_t i = 0; rc && i < n; i++) {
			if (go[i]) {
				*u[i].err = err;
				u[i].rc = rc;
				go[i] = false;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		/* New files (no reader to protect) go together; the rest alone. */
		if (go[i] && !u[i].s.remote && l->prov->write_new_many) {
			u[i].fresh = true;
			nf[m] = (struct sbx_new_file){.path = u[i].s.path,
						      .fd = sbx_cfile_fd(u[i].cf),
						      .size = u[i].sys.st_size,
						      .mode = u[i].s.mode ? u[i].s.mode : 0644,
						      .err = SBX_ERROR_INIT};
			of[m++] = i;
		} else if (go[i]) {
			upload_send(l, inst, &u[i]);
		}
	}
	if (m == 1) {
		upload_send(l, inst, &u[of[0]]);
	} else if (m) {
		l->prov->write_new_many(inst, nf, m);
		for (size_t k = 0; k < m; k++) {
			*u[of[k]].err = nf[k].err;
			upload_after(l, inst, &u[of[k]], nf[k].rc);
		}
	}
	if (used)
		sbx_lease_unuse(l);
	any = false;
	for (size_t i = 0; i < n; i++) {
		any = any || u[i].done;
		rcs[i] = upload_end(l, &u[i]);
	}
	if (any)
		retry_orphans(l);
	free(go);
	free(of);
	free(nf);
	free(errs);
	free(u);
}

static int upload_handle(struct sbx_fs_file *f, struct sbx_error *err);

int fsc_upload_bg(struct sbx_lease *l, struct sbx_cfile *cf)
{
	struct sbx_error err = SBX_ERROR_INIT;
	bool sent = false;
	int rc = upload(l, cf, &sent, &err);
	if (sent)
		retry_orphans(l);
	return rc;
}

/*
 * Hands f's dirty data to the write-back queue (writeback.c), or uploads
 * it here: write-back off, the queue full (back-pressure), the last
 * background upload of f failed (this close retries it and says so), or
 * the file has other names (hard links: they show the new content once
 * close returns).
 */
static int upload_or_queue(struct sbx_fs_file *f, struct sbx_error *err)
{
	struct sbx_lease *l = f->lease;
	unsigned long wgen;
	struct stat sys;
	if (sbx_wb_failed_take(l->wb, f->priv) || fsc_has_other_names(l, f->path))
		return upload_handle(f, err);
	if (sbx_cache_file_dirty(l->cache, f->priv, &wgen) &&
	    fstat(sbx_cfile_fd(f->priv), &sys) == 0 &&
	    sbx_wb_queue(l->wb, f->priv, wgen, sys.st_size))
		return 0;
	return upload_handle(f, err);
}

/* Uploads f's data if dirty, then (if it went up) others' leftovers. */
static int upload_handle(struct sbx_fs_file *f, struct sbx_error *err)
{
	bool sent = false;
	int rc = upload(f->lease, f->priv, &sent, err);
	if (sent)
		retry_orphans(f->lease);
	return rc;
}

/* Uploads path's entry first if it holds local changes (before metadata calls). */
int fsc_settle(struct sbx_lease *l, const char *path, struct sbx_error *err)
{
	struct sbx_cfile *cf = sbx_cache_file_find_live(l->cache, path);
	int rc = 0;
	if (cf) {
		rc = upload(l, cf, NULL, err);
		sbx_cache_file_put(l->cache, cf);
	}
	return rc;
}

int fsc_settle_under(struct sbx_lease *l, const char *dir, struct sbx_error *err)
{
	struct sbx_cfile *cf[8];
	size_t n = sbx_cache_file_dirty_under(l->cache, dir, cf, 8);
	int rc = -1;
	for (size_t i = 0; i < n; i++) {
		if (rc) { /* until one is there */
			sbx_error_clear(err);
			rc = upload(l, cf[i], NULL, err);
		}
		sbx_cache_file_put(l->cache, cf[i]);
	}
	return n ? rc : 0;
}

/* ---- contents --------------------------------------------------------------------- */

struct fd_sink {
	int fd;
	off_t off;
	int failed; /* the cache file's errno, when writing it failed */
	unsigned long long avail_mib, reserve_mib; /* failed at the disk's reserve */
};

/*
 * Download sink: appends to the cache file (nothing held in memory). The
 * sandbox decides a file's size (`truncate -s 1T` costs it nothing), so a
 * download stops at the reserve of the cache's disk (sbx_disk_reserve_check)
 * rather than fill the host's: the reads past what it holds fail with
 * ENOSPC, the reason in `error`.
 */
static int sink_to_fd(void *ctx, const char *data, size_t len)
{
	struct fd_sink *s = ctx;
	if (sbx_disk_reserve_check(s->fd, (unsigned long long)s->off, len, &s->avail_mib,
				   &s->reserve_mib))
		return -(s->failed = ENOSPC);
	while (len) {
		ssize_t w = pwrite(s->fd, data, len, s->off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -(s->failed = errno);
		data += w;
		len -= (size_t)w;
		s->off += w;
	}
	return 0;
}

/* A streamed download's sink: the bytes, then how far the file holds them. */
struct stream_sink {
	struct fd_sink fd;
	struct sbx_cache *c;
	struct sbx_cfile *cf;
	bool dropped; /* every handle was closed: the rest is not wanted */
};

static int sink_streamed(void *ctx, const char *data, size_t len)
{
	struct stream_sink *s = ctx;
	int rc = sink_to_fd(&s->fd, data, len);
	if (!rc && !sbx_cache_file_stream_have(s->c, s->cf, s->fd.off)) {
		s->dropped = true; /* `head` of a big file: not the rest of it */
		rc = -ECANCELED;
	}
	return rc;
}

/*
 * Downloads path into fd (truncated first) from inst, which the caller
 * reached (fsc_reach) and ends (download_end); *got is the byte count; a
 * failure is recorded in `error` here. With cf, each arrival is told to
 * the readers waiting on it (a stream), and so is the end, before the
 * caller's download_end: that takes the lease lock, which a kernel
 * invalidation may hold while it waits for a page a reader of this stream
 * holds locked.
 */
static int download_from(struct sbx_lease *l, struct sbx_instance *inst, const char *path, int fd,
			 struct sbx_cfile *cf, off_t *got, bool *dropped, struct sbx_error *err)
{
	struct stream_sink sink = {{fd, 0, 0, 0, 0}, l->cache, cf, false};
	int rc;
	if (ftruncate(fd, 0)) {
		rc = sbx_error_set(err, errno, SBX_E_INTERNAL, "cache file of %s: %s", path,
				   strerror(errno));
	} else {
		rc = cf ? l->prov->read(inst, path, 0, -1, sink_streamed, &sink, err)
			: l->prov->read(inst, path, 0, -1, sink_to_fd, &sink.fd, err);
		rc = rc > 0 ? 0 : rc;
		if (rc && sink.fd.reserve_mib)
			rc = sbx_error_set(err, ENOSPC, SBX_E_INTERNAL,
					   "download of %s stopped after %lld bytes: the content "
					   "cache's disk is down to %llu MiB free, and a download "
					   "leaves %llu MiB (5 %% of it, at most 1 GiB)",
					   path, (long long)sink.fd.off, sink.fd.avail_mib,
					   sink.fd.reserve_mib);
		else if (rc && sink.fd.failed) /* the cause, not the transfer's "stopped" */
			rc = sbx_error_set(err, sink.fd.failed, SBX_E_INTERNAL,
					   "cache file of %s: %s (after %lld bytes)", path,
					   strerror(sink.fd.failed), (long long)sink.fd.off);
	}
	*got = sink.fd.off;
	*dropped = sink.dropped;
	/* In `error` before any reader hears of it (no lease lock needed). */
	if (rc && !sink.dropped)
		rc = fsc_fail(l, "download", path, rc, err);
	if (cf)
		sbx_cache_file_stream_end(l->cache, cf, sink.dropped ? -ECANCELED : rc);
	return rc;
}

/*
 * Ends a download begun with fsc_reach (download_from recorded a failure):
 * a dropped stream is the mount's own choice, not a failure.
 */
static int download_end(struct sbx_lease *l, int rc, bool dropped, struct sbx_error *err)
{
	sbx_lease_unuse(l);
	if (dropped) {
		sbx_error_clear(err);
		return -ECANCELED;
	}
	return rc;
}

/* Downloads path into fd whole (see download_from). */
static int download(struct sbx_lease *l, const char *path, int fd, off_t *got,
		    struct sbx_error *err)
{
	struct sbx_instance *inst;
	bool dropped;
	int rc = fsc_reach(l, l->prov->read, "read files", "download", path, &inst, err);
	if (rc)
		return rc;
	rc = download_from(l, inst, path, fd, NULL, got, &dropped, err);
	return download_end(l, rc, dropped, err);
}

/*
 * A file opened to read of at least this size is read as it arrives: the
 * open returns once the download has begun, and each read waits only for
 * its own bytes (`head` of a big file, the first page of `less`, and a
 * `cat` that reads while the rest comes). Smaller ones are downloaded
 * whole by the open, as before (one round trip either way). When every
 * handle is closed before the end, the download stops there, and the
 * next open downloads again.
 */
#define SBX_STREAM_MIN (1LL << 20)

/* The stream_main threads running (each holds a lease reference). */
static struct sbx_waitgroup streams = SBX_WAITGROUP_INIT;

/* How long the daemon's exit waits for them (each stops at its next chunk: no handle is left). */
#define SBX_STREAMS_EXIT_MS 30000

void sbx_fs_streams_wait(void)
{
	struct timespec ts;
	unsigned left;
	sbx_deadline_in(SBX_STREAMS_EXIT_MS, &ts);
	if ((left = sbx_wg_wait(&streams, &ts)))
		sbx_log(SBX_LOG_WARN, "%u streamed read(s) still running at exit", left);
}

struct stream {
	struct sbx_lease *l; /* a reference, and in use (fsc_reach) */
	struct sbx_instance *inst;
	struct sbx_cfile *cf; /* a reference and the open's busy claim */
	char *path;
	struct sbx_stat st;
};

/* The download of a streamed open, on its own thread: ends the open's claim. */
static void *stream_main(void *arg)
{
	struct stream *s = arg;
	struct sbx_cache *c = s->l->cache;
	struct sbx_error err = SBX_ERROR_INIT;
	off_t got;
	bool dropped;
	int rc =
	    download_from(s->l, s->inst, s->path, sbx_cfile_fd(s->cf), s->cf, &got, &dropped, &err);
	rc = download_end(s->l, rc, dropped, &err);
	/* Changed between stat and read: keep the bytes, not the stamp. */
	if (!rc && got != s->st.size)
		sbx_cache_note_changed(c, s->path);
	sbx_cache_file_ready(c, s->cf, rc ? SBX_CF_FAILED : SBX_CF_LOADED, 0,
			     !rc && got == s->st.size ? &s->st : NULL);
	sbx_cache_file_put(c, s->cf);
	free(s->path);
	sbx_lease_put(s->l);
	free(s);
	sbx_wg_done(&streams);
	return NULL;
}

/*
 * Starts stream_main for cf, which takes over the open's claim. The lease
 * is reached here, on the open's thread, so the stream needs no lease lock
 * before its readers have their bytes (download_from). Fails as that does.
 */
static int stream_start(struct sbx_lease *l, const char *path, struct sbx_cfile *cf,
			const struct sbx_stat *st, struct sbx_error *err)
{
	struct sbx_instance *inst;
	struct stream *s;
	int rc = fsc_reach(l, l->prov->read, "read files", "download", path, &inst, err);
	if (rc)
		return rc;
	s = sbx_xcalloc(1, sizeof(*s));
	s->inst = inst;
	s->l = l;
	s->cf = cf;
	s->path = sbx_xstrdup(path);
	s->st = *st;
	sbx_lease_hold(l);
	sbx_cache_file_hold(l->cache, cf);
	sbx_cache_file_stream_begin(l->cache, cf, inst);
	sbx_wg_add(&streams);
	rc = sbx_thread_detached(NULL, stream_main, s);
	if (rc) {
		sbx_log(SBX_LOG_WARN, "lease %s: no thread to read %s as it arrives (%s)", l->name,
			path, strerror(rc));
		stream_main(s); /* the open downloads it whole, as a small file */
	}
	return 0;
}

static bool stamp_matches(const struct sbx_cfile_state *s, const struct sbx_stat *st)
{
	return s->have_data && s->stamped && s->stamp_size == st->size &&
	       (s->stamp_loose || (s->stamp_mtime.tv_sec == st->mtime.tv_sec &&
				   s->stamp_mtime.tv_nsec == st->mtime.tv_nsec));
}

/* Decides how open finds its content (*how); may download. */
static int open_content(struct sbx_lease *l, const char *path, int flags,
			const struct sbx_cfile_state *s, int fd, enum sbx_cfile_how *how,
			struct sbx_stat *st, bool *stamp_ok, struct sbx_error *err)
{
	bool trunc = (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY;
	bool excl = (flags & O_CREAT) && (flags & O_EXCL);
	off_t got;
	int rc;

	if (s->streaming) { /* its download is arriving: read what it brings */
		if (excl)
			return sbx_error_set(err, EEXIST, SBX_E_NONE, "%s exists", path);
		*how = SBX_CF_JOIN;
		return 0;
	}
	if (s->have_data && (s->dirty || (s->refs > 1 && !s->remote))) {
		/*
		 * Local changes are the newest content there is (and a new file
		 * not uploaded yet, open elsewhere, has no other). A clean copy
		 * open elsewhere is checked as any other: a run that changed the
		 * file (appended to the log `tail -f` or `less` holds) is seen by
		 * the next open, whose download refreshes the one shared copy, as
		 * a local disk's other handles see a change; it was kept, so
		 * every open, `cat` after the run included, read the old bytes
		 * for as long as one handle stayed open.
		 */
		if (excl)
			return sbx_error_set(err, EEXIST, SBX_E_NONE, "%s exists", path);
		*how = trunc ? SBX_CF_TRUNC : SBX_CF_KEEP;
		return 0;
	}
	rc = fsc_lookup(l, path, st, err);
	if (rc == -ENOENT && (flags & O_CREAT)) {
		sbx_error_clear(err);
		*how = SBX_CF_NEW;
		return 0;
	}
	if (rc)
		return rc;
	if (excl)
		return sbx_error_set(err, EEXIST, SBX_E_NONE, "%s exists", path);
	if (S_ISDIR(st->mode))
		return sbx_error_set(err, EISDIR, SBX_E_NONE, "%s is a directory", path);
	if (trunc) {
		*how = SBX_CF_TRUNC;
	} else if (stamp_matches(s, st)) {
		*how = SBX_CF_KEEP;
	} else {
		/* Or with the directory's other small files, in one request (fs_prefetch.c). */
		if ((flags & O_ACCMODE) == O_RDONLY && st->size >= SBX_STREAM_MIN) {
			*how = SBX_CF_STREAM; /* fsc_open starts it */
			return 0;
		}
		rc =
		    sbx_prefetch_open(l, path, st, fd, &got) ? 0 : download(l, path, fd, &got, err);
		*how = rc ? SBX_CF_FAILED : SBX_CF_LOADED;
		/* Changed between stat and read: keep the bytes, not the stamp. */
		if (!rc && got != st->size) {
			*stamp_ok = false;
			sbx_cache_note_changed(l->cache, path);
		}
	}
	return rc;
}

/*
 * A new file shows the owner uploads give (made_up_stat, the cache's
 * overlay), learnt from the stat after the lease's first upload of a new
 * file; until then it showed the daemon's. rsync -a as root then saw its
 * own owner on its first files, skipped their chown, and the sandbox kept
 * them as its user's. So while the owner is unknown, a new file goes up
 * (empty) as it is created, and that upload's stat teaches the owner: two
 * requests, once per lease and mount. A failure is recorded as any
 * upload's, and the file stays dirty for its close.
 */
static void learn_owner(struct sbx_lease *l, struct sbx_cfile *cf)
{
	struct sbx_error err = SBX_ERROR_INIT;
	uid_t uid;
	gid_t gid;
	if (l->prov->write_new && l->prov->stat &&
	    !sbx_cache_file_owner_known(l->cache, &uid, &gid))
		upload(l, cf, NULL, &err);
}

int fsc_open(struct sbx_lease *l, const char *path, int flags, mode_t mode,
	     struct sbx_fs_file **out, struct sbx_error *err)
{
	struct sbx_cache *c = l->cache;
	struct sbx_cfile_state s;
	struct sbx_cfile *cf;
	struct sbx_stat st;
	enum sbx_cfile_how how = SBX_CF_KEEP;
	struct sbx_fs_file *f;
	bool stamp_ok = true;
	int rc;

	if (sbx_fs_is_pseudo(path)) {
		if (fsc_is_pseudo_root(path))
			return sbx_error_set(err, EISDIR, SBX_E_NONE, "%s is a directory", path);
		return (flags & O_CREAT) ? fsc_pseudo_refuse(path, err) : fsc_no_such(path, err);
	}
	if ((flags & O_CREAT) && (rc = fsc_name_check(l, "create", path, err)))
		return rc;
	rc = sbx_cache_file_open(c, path, (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC), &cf,
				 &s);
	if (rc) {
		sbx_error_set(err, rc, SBX_E_INTERNAL, "cache file for %s: %s", path,
			      strerror(-rc));
		return fsc_fail(l, "open", path, rc, err);
	}
	memset(&st, 0, sizeof(st));
	rc = open_content(l, path, flags, &s, sbx_cfile_fd(cf), &how, &st, &stamp_ok, err);
	if (rc && how != SBX_CF_FAILED)
		how = SBX_CF_KEEP;
	if (how == SBX_CF_STREAM && (rc = stream_start(l, path, cf, &st, err)))
		how = SBX_CF_FAILED;
	if (how != SBX_CF_STREAM)
		sbx_cache_file_ready(c, cf, how, mode,
				     how == SBX_CF_LOADED && stamp_ok ? &st : NULL);
	free(s.path);
	if (rc) {
		sbx_cache_file_put(c, cf);
		return rc;
	}
	if (how == SBX_CF_NEW) {
		sbx_cache_note_added(c, path, NULL);
		learn_owner(l, cf);
	}
	f = sbx_xcalloc(1, sizeof(*f));
	f->lease = l;
	f->path = sbx_xstrdup(path);
	f->flags = flags;
	f->priv = cf;
	*out = f;
	return 0;
}

/*
 * How far ahead of a file's download a read is served by a range of its
 * own (SBX_CAP_RANGE_READ) rather than wait: `tail` of a big log, a seek
 * into an archive or a database. Closer reads wait (the download is the
 * faster way to them: one range costs a round trip).
 */
#define SBX_STREAM_FAR (8LL << 20)

struct mem_sink {
	char *buf;
	size_t size, got;
};

static int sink_to_mem(void *ctx, const char *data, size_t len)
{
	struct mem_sink *m = ctx;
	if (len > m->size - m->got)
		len = m->size - m->got;
	memcpy(m->buf + m->got, data, len);
	m->got += len;
	return 0;
}

/*
 * Reads [off, off+size) into *n from the sandbox the download comes from
 * (lent by the stream, so no lease lock is taken: see download_from);
 * false when the read should wait for the download instead. Not kept in
 * the cache file, whose content is the download's prefix; the kernel
 * keeps its pages.
 */
static bool read_far(struct sbx_fs_file *f, char *buf, size_t size, off_t off, ssize_t *n,
		     struct sbx_error *err)
{
	struct sbx_lease *l = f->lease;
	struct mem_sink m = {buf, size, 0};
	struct sbx_instance *inst;
	int rc;
	if (!(l->prov->caps & SBX_CAP_RANGE_READ) ||
	    !(inst = sbx_cache_file_stream_lend(l->cache, f->priv, off, SBX_STREAM_FAR)))
		return false;
	rc = l->prov->read(inst, f->path, off, (off_t)size, sink_to_mem, &m, err);
	sbx_cache_file_stream_return(l->cache, f->priv);
	*n = rc < 0 ? fsc_fail(l, "read", f->path, rc, err) : (ssize_t)m.got;
	return true;
}

/*
 * A read that reached the end of a clean copy the sandbox has changed
 * since (a run appended to the log `tail -f` holds: its fstat learnt the
 * new size): the file is fetched again into the shared copy, by an open of
 * its own (open_content decides, as for any open), so the read gets the
 * new bytes, as it would on a local disk. No request when nothing says
 * the file changed: every `cat` ends with a short read.
 */
static bool refetched(struct sbx_fs_file *f, struct sbx_error *err)
{
	struct sbx_fs_file *again;
	if (!sbx_cache_file_outdated(f->lease->cache, f->priv) ||
	    fsc_open(f->lease, f->path, O_RDONLY, 0, &again, err))
		return false;
	fsc_release(again);
	return true;
}

ssize_t fsc_read(struct sbx_fs_file *f, char *buf, size_t size, off_t off, struct sbx_error *err)
{
	bool tried = false;
	ssize_t n;
again:
	if (read_far(f, buf, size, off, &n, err))
		return n;
	int rc = sbx_cache_file_stream_wait(f->lease->cache, f->priv, off + (off_t)size);
	if (rc)
		return sbx_error_set(err, -rc, SBX_E_INTERNAL,
				     "read %s: its download failed (the error file says why)",
				     f->path);
	do
		n = pread(sbx_cfile_fd(f->priv), buf, size, off);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return sbx_error_set(err, errno, SBX_E_INTERNAL, "cache file of %s: %s", f->path,
				     strerror(errno));
	if ((size_t)n < size && !tried && (f->flags & O_ACCMODE) == O_RDONLY) {
		tried = true;
		if (refetched(f, err))
			goto again;
		sbx_error_clear(err); /* the bytes there are the answer */
	}
	return n;
}

ssize_t fsc_write(struct sbx_fs_file *f, const char *buf, size_t size, off_t off,
		  struct sbx_error *err)
{
	int fd = sbx_cfile_fd(f->priv);
	struct stat sys;
	ssize_t n;
	if ((f->flags & O_APPEND) && fstat(fd, &sys) == 0)
		off = sys.st_size;
	do
		n = pwrite(fd, buf, size, off);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		int rc = sbx_error_set(err, errno, SBX_E_INTERNAL, "cache file of %s: %s", f->path,
				       strerror(errno));
		return fsc_fail(f->lease, "write", f->path, rc, err);
	}
	sbx_cache_file_changed(f->lease->cache, f->priv);
	return n;
}

/*
 * Called at every close() of a descriptor of f, and shells close one
 * before writing: `echo hi > f` opens f (O_TRUNC), dup2()s it onto
 * stdout and closes the original, then writes. Uploading the still
 * empty file then would cost a second upload for nothing, so an empty
 * file goes up at fsync or at the last release instead (a file left
 * empty that way reaches the sandbox right after close() returns, not
 * before; its failure is only recorded).
 */
/*
 * A handle that cannot have written a clean file: nothing of its own to
 * upload, so its close claims nothing (a claim would wait for a download
 * still arriving: `head` of a big file waited for all of it).
 */
static bool read_only_clean(struct sbx_fs_file *f)
{
	return (f->flags & O_ACCMODE) == O_RDONLY &&
	       !sbx_cache_file_dirty(f->lease->cache, f->priv, NULL);
}

int fsc_flush(struct sbx_fs_file *f, struct sbx_error *err)
{
	struct stat sys;
	if (read_only_clean(f) || (fstat(sbx_cfile_fd(f->priv), &sys) == 0 && sys.st_size == 0))
		return 0;
	return upload_or_queue(f, err);
}

int fsc_fsync(struct sbx_fs_file *f, int datasync, struct sbx_error *err)
{
	struct sbx_lease *l = f->lease;
	struct sbx_instance *inst;
	int rc;
	/* A queued upload is done here (or waited for, if in flight); a failed one retried. */
	sbx_wb_failed_take(l->wb, f->priv);
	rc = upload_handle(f, err);
	if (rc || (!l->prov->sync && !l->prov->take_failure))
		return rc;
	rc = fsc_use(l, &inst, "sync", f->path, err);
	if (rc)
		return rc;
	if (l->prov->sync)
		rc = l->prov->sync(inst, err);
	/* Only this file's own failures: a queued change of another path went to it and to `error`.
	 */
	if (!rc && l->prov->take_failure)
		rc = l->prov->take_failure(inst, f->path, err);
	return fsc_end(l, rc, "sync", f->path, err);
}

void fsc_release(struct sbx_fs_file *f)
{
	struct sbx_error err = SBX_ERROR_INIT;
	/* Late writes (mmap) after the last flush still go up; failures are recorded. */
	if (!read_only_clean(f))
		upload_or_queue(f, &err);
	sbx_cache_file_put(f->lease->cache, f->priv);
	free(f->path);
	free(f);
}

int fsc_fallocate(struct sbx_fs_file *f, int mode, off_t off, off_t len, struct sbx_error *err)
{
	if (fallocate(sbx_cfile_fd(f->priv), mode, off, len)) {
		int rc = sbx_error_set(err, errno, SBX_E_INTERNAL, "cache file of %s: %s", f->path,
				       strerror(errno));
		return fsc_fail(f->lease, "fallocate", f->path, rc, err);
	}
	if (mode != FALLOC_FL_KEEP_SIZE)
		sbx_cache_file_changed(f->lease->cache, f->priv);
	return 0;
}

int fsc_truncate(struct sbx_lease *l, const char *path, struct sbx_fs_file *f, off_t size,
		 struct sbx_error *err)
{
	struct sbx_cache *c = l->cache;
	struct sbx_cfile *cf = f ? f->priv : NULL;
	struct sbx_instance *inst;
	int rc = fsc_pseudo_refuse(path, err);
	if (rc)
		return rc;
	if (!cf)
		cf = sbx_cache_file_find_live(c, path);
	if (cf) {
		/* Local data is the truth: change it, upload now unless a handle will. */
		if (ftruncate(sbx_cfile_fd(cf), size))
			rc = sbx_error_set(err, errno, SBX_E_INTERNAL, "cache file of %s: %s", path,
					   strerror(errno));
		if (!rc)
			sbx_cache_file_changed(c, cf);
		if (!f) {
			if (!rc)
				rc = upload(l, cf, NULL, err);
			sbx_cache_file_put(c, cf);
		}
		return rc;
	}
	if (!l->prov->truncate) {
		/* Fallback through the content cache: download, cut, upload. */
		struct sbx_fs_file *h;
		rc = fsc_open(l, path, size ? O_RDWR : O_WRONLY | O_TRUNC, 0, &h, err);
		if (rc)
			return rc;
		rc = fsc_truncate(l, path, h, size, err);
		if (!rc)
			rc = fsc_flush(h, err);
		fsc_release(h);
		return rc;
	}
	rc = fsc_use(l, &inst, "truncate", path, err);
	if (!rc)
		rc = fsc_end(l, l->prov->truncate(inst, path, size, err), "truncate", path, err);
	if (rc)
		return rc;
	sbx_cache_file_stale(c, path);
	sbx_cache_note_changed(c, path);
	fsc_other_names_changed(l, path);
	return 0;
}
