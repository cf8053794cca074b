/*
 * check_cache_files — the content half of the remote fs/ cache: downloads
 * once, reads and writes on the local cache file, uploads on flush/fsync,
 * and nothing written lost when an upload fails (see check_cache.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/sysutil.h"
#include "base/xalloc.h"
#include "cachetest.h"

/* ---- contents ------------------------------------------------------------------------- */

START_TEST(test_second_read_downloads_nothing)
{
	put("/a", "hello");
	ck_cat("/a", "hello");
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 1);
	ck_cat("/a", "hello");
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 1);
	/* After the TTL (or a run) one stat revalidates, still no download. */
	sbx_cache_invalidate_all(L->cache);
	memprov_reset_calls(mp);
	ck_cat("/a", "hello");
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 1);
	/* Changed remotely: downloaded again. */
	put("/a", "HELLO, world");
	sbx_cache_invalidate_all(L->cache);
	ck_cat("/a", "HELLO, world");
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 1);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 0);
}
END_TEST

START_TEST(test_open_copy_of_an_older_version)
{
	/*
	 * FUSE sends a release after close() returns, so the stat of the `cat`
	 * after a run may find the previous `cat`'s copy still open: its size
	 * must not hide the run's change.
	 */
	struct stat st;
	put("/r", "made-by-run\n");
	struct sbx_fs_file *f = xopen("/r", O_RDONLY, 0);
	free(slurp(f));
	ck_assert_int_eq(gattr("/r", &st), 0);
	ck_assert_int_eq(st.st_size, 12);
	put("/r", "changed-by-run\n"); /* a run rewrites it */
	sbx_cache_invalidate_all(L->cache);
	ck_assert_int_eq(gattr("/r", &st), 0);
	ck_assert_int_eq(st.st_size, 15); /* not the open copy's 12 */
	F->release(f);
	ck_cat("/r", "changed-by-run\n");
	ck_assert_int_eq(gattr("/r", &st), 0);
	ck_assert_int_eq(st.st_size, 15);

	/* `tail -f`: the holder reads past its copy's end once the file grew (a run's append). */
	char buf[64];
	f = xopen("/r", O_RDONLY, 0);
	memprov_reset_calls(mp);
	ck_assert_int_eq(F->read(f, buf, sizeof(buf), 15, &E), 0); /* the end: no request */
	ck_assert_int_eq(memprov_calls(mp, MP_READ) + memprov_calls(mp, MP_STAT), 0);
	put("/r", "changed-by-run\nappended\n");
	sbx_cache_invalidate_all(L->cache);
	ck_assert_int_eq(gattr("/r", &st), 0); /* its fstat */
	ck_assert_int_eq(st.st_size, 24);
	ck_assert_int_eq(F->read(f, buf, sizeof(buf), 15, &E), 9);
	ck_assert(!memcmp(buf, "appended\n", 9));
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 1);

	/*
	 * A background job appends, and nothing reports it (no run, no watch):
	 * the holder's fstat after the attributes expire shows the new size, and
	 * its read past the copy's end gets the bytes (attributes learnt after
	 * the copy was stamped count, not only a run's).
	 */
	put("/r", "changed-by-run\nappended\nmore\n");
	sbx_cache_invalidate_path(L->cache, "/r"); /* its attributes expire: no epoch moves */
	ck_assert_int_eq(gattr("/r", &st), 0);
	ck_assert_int_eq(st.st_size, 29);
	ck_assert_int_eq(F->read(f, buf, sizeof(buf), 24, &E), 5);
	ck_assert(!memcmp(buf, "more\n", 5));
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 2);
	F->release(f);
}
END_TEST

START_TEST(test_big_file_streams_through)
{
	size_t n = (1 << 20) + 17, len;
	char *data = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		data[i] = (char)('a' + (i * 7919) % 26);
	data[n] = '\0';
	memprov_put(mp, "/big", data, n, 0);
	char *got = cat("/big");
	ck_assert_uint_eq(strlen(got), n);
	ck_assert(memcmp(got, data, n) == 0);
	free(got);
	/* And back up, rewritten in the middle. */
	struct sbx_fs_file *f = xopen("/big", O_RDWR, 0);
	xwrite(f, "XYZ", 500000);
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	memcpy(data + 500000, "XYZ", 3);
	got = memprov_get(mp, "/big", &len);
	ck_assert_uint_eq(len, n);
	ck_assert(memcmp(got, data, n) == 0);
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 1);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 1);
	free(got);
	free(data);
}
END_TEST

START_TEST(test_create_write_close_is_one_upload)
{
	struct stat st;
	struct sbx_fs_file *f = xopen("/new", O_CREAT | O_WRONLY | O_EXCL, 0600);
	xwrite(f, "abc", 0);
	/* Before close, the mount already shows the new file and its size. */
	ck_assert_int_eq(gattr("/new", &st), 0);
	ck_assert_int_eq(st.st_size, 3);
	ck_assert(listed("/", "new"));
	ck_assert(!memprov_exists(mp, "/new"));
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	ck_remote("/new", "abc");
	ck_assert_int_eq(memprov_mode(mp, "/new") & 07777, 0600);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 1);
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 0);
	/* Reading it back costs nothing: the upload stamped the cache. */
	memprov_reset_calls(mp);
	ck_cat("/new", "abc");
	ck_assert_int_eq(memprov_file_calls(mp), 0);
	ck_assert_int_eq(gattr("/new", &st), 0);
	ck_assert_int_eq(st.st_size, 3);
	ck_assert_int_eq(memprov_file_calls(mp), 0);
}
END_TEST

START_TEST(test_failed_upload_keeps_data)
{
	struct sbx_fs_file *f = xopen("/new", O_CREAT | O_RDWR, 0644);
	xwrite(f, "precious", 0);
	memprov_fail(mp, MP_WRITE, EIO, 1);
	ck_assert_int_eq(F->flush(f, &E), -EIO);
	ck_assert(!memprov_exists(mp, "/new"));
	ck_error_mentions("upload /new");
	char *s = slurp(f);
	ck_assert_str_eq(s, "precious");
	free(s);
	ck_assert_int_eq(F->flush(f, &E), 0);
	ck_remote("/new", "precious");
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 2);
	F->release(f);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 2);
}
END_TEST

START_TEST(test_failed_upload_survives_close)
{
	struct stat st;
	put("/doc", "old");
	struct sbx_fs_file *f = xopen("/doc", O_WRONLY | O_TRUNC, 0);
	xwrite(f, "new text", 0);
	memprov_fail(mp, MP_WRITE, ENOTCONN, -1);
	ck_assert_int_eq(F->flush(f, &E), -ENOTCONN);
	F->release(f); /* tries once more, fails, keeps the data */
	ck_error_mentions("upload /doc");
	ck_remote("/doc", "old");
	ck_assert_int_eq(gattr("/doc", &st), 0);
	ck_assert_int_eq(st.st_size, 8); /* the mount shows what was written */
	memprov_fail(mp, MP_WRITE, 0, 0);
	/* The next close of any handle on it uploads; nothing is downloaded. */
	memprov_reset_calls(mp);
	ck_cat("/doc", "new text");
	ck_remote("/doc", "new text");
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 1);
}
END_TEST

/* `echo hi > f`: the shell closes a dup of the still empty file first; one upload in all. */
START_TEST(test_shell_redirect_uploads_once)
{
	put("/e", "old");
	struct sbx_fs_file *f = xopen("/e", O_WRONLY | O_TRUNC, 0);
	ck_assert_int_eq(F->flush(f, &E), 0); /* the dup2'd descriptor's close */
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 0);
	xwrite(f, "hi\n", 0);
	ck_assert_int_eq(F->flush(f, &E), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 1);
	F->release(f);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 1);
	ck_remote("/e", "hi\n");
	/* left empty (`: > f`): it goes up at the last release */
	f = xopen("/e", O_WRONLY | O_TRUNC, 0);
	ck_assert_int_eq(F->flush(f, &E), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 1);
	F->release(f);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 2);
	ck_remote("/e", "");
}
END_TEST

START_TEST(test_fsync_uploads_and_syncs)
{
	struct sbx_fs_file *f = xopen("/s", O_CREAT | O_WRONLY, 0644);
	xwrite(f, "1", 0);
	memprov_fail(mp, MP_WRITE, ETIMEDOUT, 1);
	ck_assert_int_eq(F->fsync(f, 0, &E), -ETIMEDOUT);
	ck_assert_int_eq(F->fsync(f, 0, &E), 0);
	ck_remote("/s", "1");
	ck_assert_int_eq(memprov_calls(mp, MP_SYNC), 1);
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 2);
}
END_TEST

START_TEST(test_otrunc_needs_no_download)
{
	put("/a", "a long old content");
	struct sbx_fs_file *f = xopen("/a", O_WRONLY | O_TRUNC, 0);
	xwrite(f, "x", 0);
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	ck_remote("/a", "x");
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 0);
	/* O_APPEND writes at the end. */
	f = xopen("/a", O_WRONLY | O_APPEND, 0);
	xwrite(f, "yz", 0);
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	ck_remote("/a", "xyz");
}
END_TEST

START_TEST(test_handles_share_one_entry)
{
	put("/a", "0123456789");
	struct sbx_fs_file *w = xopen("/a", O_RDWR, 0);
	struct sbx_fs_file *r = xopen("/a", O_RDONLY, 0);
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 1);
	xwrite(w, "AB", 2);
	char *s = slurp(r);
	ck_assert_str_eq(s, "01AB456789");
	free(s);
	ck_assert_int_eq(F->flush(r, &E), 0); /* any close uploads the shared dirty data */
	ck_assert_int_eq(F->flush(w, &E), 0);
	/*
	 * Changed remotely (a run) while open here, clean: the next open sees
	 * the change, as on a local disk, and so do the open handles, which
	 * share the copy it refreshed (it kept the old bytes for every open
	 * until the last close).
	 */
	put("/a", "remote!");
	sbx_cache_invalidate_all(L->cache);
	char *t = cat("/a");
	ck_assert_str_eq(t, "remote!");
	free(t);
	t = slurp(r);
	ck_assert_str_eq(t, "remote!");
	free(t);
	F->release(r);
	F->release(w);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 1);
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 2);
	/* ... and an open after the last close, the copy's stamp matching, reads nothing again. */
	ck_cat("/a", "remote!");
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 2);
}
END_TEST

/* ---- truncate ----------------------------------------------------------------------------- */

START_TEST(test_truncate_by_path)
{
	struct stat st;
	put("/a", "hello");
	ck_assert_int_eq(gattr("/a", &st), 0);
	ck_assert_int_eq(F->truncate(L, "/a", NULL, 2, &E), 0);
	ck_remote("/a", "he");
	ck_assert_int_eq(memprov_calls(mp, MP_TRUNCATE), 1);
	ck_assert_int_eq(gattr("/a", &st), 0);
	ck_assert_int_eq(st.st_size, 2);
	/* With the file open, the cache file is cut and uploaded. */
	struct sbx_fs_file *f = xopen("/a", O_RDWR, 0);
	ck_assert_int_eq(F->truncate(L, "/a", NULL, 1, &E), 0);
	ck_remote("/a", "h");
	char *s = slurp(f);
	ck_assert_str_eq(s, "h");
	free(s);
	F->release(f);
	ck_assert_int_eq(memprov_calls(mp, MP_TRUNCATE), 1);
	/* No truncate slot: download, cut, upload. */
	mp->prov.truncate = NULL;
	put("/b", "abcdef");
	ck_assert_int_eq(F->truncate(L, "/b", NULL, 3, &E), 0);
	ck_remote("/b", "abc");
	ck_assert_int_eq(F->truncate(L, "/b", NULL, 0, &E), 0);
	ck_remote("/b", "");
}
END_TEST

START_TEST(test_truncate_by_handle)
{
	struct stat st;
	put("/a", "hello");
	struct sbx_fs_file *f = xopen("/a", O_RDWR, 0);
	ck_assert_int_eq(F->truncate(L, "/a", f, 0, &E), 0);
	ck_assert_int_eq(F->getattr(L, "/a", f, &st, &E), 0);
	ck_assert_int_eq(st.st_size, 0);
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	ck_remote("/a", "");
	ck_assert_int_eq(memprov_calls(mp, MP_TRUNCATE), 0);
}
END_TEST

START_TEST(test_cache_free_keeps_dirty_files)
{
	struct sbx_fs_file *f = xopen("/unsaved", O_CREAT | O_WRONLY, 0644);
	xwrite(f, "keep me", 0);
	memprov_fail(mp, MP_WRITE, EIO, -1);
	ck_assert_int_eq(F->flush(f, &E), -EIO);
	F->release(f);
	sbx_cache_free(L->cache);
	L->cache = NULL;
	/* The cache directory holds the data and a note naming its path. */
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
		 "grep -q '^keep me$' %s/cache/c* && grep -qx /unsaved %s/cache/*.path", L->dir,
		 L->dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_orphan_retried_by_another_close)
{
	struct sbx_fs_file *f = xopen("/a", O_CREAT | O_WRONLY, 0644);
	xwrite(f, "left behind", 0);
	memprov_fail(mp, MP_WRITE, EIO, 2);
	sbx_cache_set_retry(L->cache, 0);
	ck_assert_int_eq(F->flush(f, &E), -EIO);
	F->release(f);
	ck_assert(!memprov_exists(mp, "/a"));
	f = xopen("/b", O_CREAT | O_WRONLY, 0644);
	xwrite(f, "b", 0);
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	ck_remote("/b", "b");
	ck_remote("/a", "left behind");
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 4);
}
END_TEST

/* Two files whose uploads failed (at close and at release): nobody opens them again. */
static void two_orphans(int err)
{
	const char *paths[] = {"/o1", "/o2"};
	memprov_fail(mp, MP_WRITE, err, -1);
	for (int i = 0; i < 2; i++) {
		struct sbx_fs_file *f = xopen(paths[i], O_CREAT | O_WRONLY, 0644);
		xwrite(f, paths[i], 0);
		ck_assert_int_eq(F->flush(f, &E), -err);
		F->release(f);
	}
	memprov_reset_calls(mp);
}

/*
 * A failed upload nobody retries went up only at the unmount: a run after
 * the cause had passed saw the old data. Now a run (sbx_fs_save_owed) and
 * the timer (sbx_fs_save_unsaved, by its back-off) retry it; a failure
 * of the sandbox's stops the pass and is returned (the run is not started),
 * one of the file's own does not.
 */
START_TEST(test_orphans_owed_to_a_run)
{
	sbx_cache_set_retry(L->cache, 600000);
	two_orphans(ENOTCONN);
	ck_assert_int_eq(sbx_fs_save_unsaved(L, false, sbx_now_ms() + 10000), 2);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 0); /* the back-off */
	/* the sandbox's failure: stop, and say it (a run is not started on the old data) */
	ck_assert_int_eq(sbx_fs_save_owed(L, &E), -ENOTCONN);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 1);
	ck_assert_ptr_nonnull(strstr(E.msg, "/o"));
	memprov_fail(mp, MP_WRITE, EACCES, -1);
	memprov_reset_calls(mp);
	/* the file's own: go on, and the run may start (it is said in `error`) */
	ck_assert_int_eq(sbx_fs_save_owed(L, &E), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 2);
	memprov_fail(mp, MP_WRITE, 0, 0);
	memprov_reset_calls(mp);
	ck_assert_int_eq(sbx_fs_save_unsaved(L, false, sbx_now_ms() + 10000), 2);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 0);
	/* A resume makes them due for the timer's pass. */
	atomic_store(&L->unsaved_due, true);
	ck_assert_int_eq(sbx_fs_save_unsaved(L, false, sbx_now_ms() + 10000), 0);
	ck_remote("/o1", "/o1");
	ck_remote("/o2", "/o2");
}
END_TEST

/* The timer's back-off doubles with each failure in a row. */
START_TEST(test_orphan_backoff_doubles)
{
	sbx_cache_set_retry(L->cache, 500);
	two_orphans(EIO); /* the close and the release failed: due in 1 s */
	usleep(1200 * 1000);
	sbx_fs_save_unsaved(L, false, sbx_now_ms() + 10000);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 1); /* then due in 2 s; the other waits */
	memprov_reset_calls(mp);
	sbx_fs_save_unsaved(L, false, sbx_now_ms() + 10000);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 1); /* the other, then due in 2 s */
	memprov_reset_calls(mp);
	usleep(1200 * 1000);
	sbx_fs_save_unsaved(L, false, sbx_now_ms() + 10000);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 0);
	usleep(1000 * 1000);
	memprov_fail(mp, MP_WRITE, 0, 0);
	ck_assert_int_eq(sbx_fs_save_unsaved(L, false, sbx_now_ms() + 10000), 0);
	ck_remote("/o1", "/o1");
	ck_remote("/o2", "/o2");
}
END_TEST

/*
 * A lease whose sandbox is gone: its unsaved files are linked out under
 * their sandbox paths before its directory goes (lease.c, keep_unsaved); a
 * name that cannot be made (two files for one path) keeps the cache file's
 * own name with its note beside it; a destination that cannot be made is
 * an error naming the file, so the rmdir keeps the lease.
 */
START_TEST(test_unsaved_kept_apart)
{
	char *dir = sbx_lease_path(L, "cache"), *first = NULL;
	char *dest = sbx_xasprintf("%s/../unsaved/w-XXXXXX", L->dir);
	char cmd[1024];
	memprov_mkdirs(mp, "/d/e");
	for (int i = 0; i < 2; i++) {
		struct sbx_fs_file *f = xopen(i ? "/d/e/two" : "/one", O_CREAT | O_WRONLY, 0644);
		xwrite(f, i ? "second" : "first", 0);
		memprov_fail(mp, MP_WRITE, EIO, -1);
		ck_assert_int_eq(F->flush(f, &E), -EIO);
		F->release(f);
	}
	sbx_cache_free(L->cache);
	L->cache = NULL;
	/* A second leftover for /one (cache_files_adopt leaves such a file on disk). */
	snprintf(cmd, sizeof(cmd), "cd %s && echo third >cZZZ && printf /one >cZZZ.path", dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(sbx_cache_keep_unsaved(dir, dest, &first, &E), 3);
	ck_assert_ptr_nonnull(first);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && grep -qx second d/e/two && grep -qxE 'first|third' one && "
		 "test \"$(cat c*)\" != \"$(cat one)\" && grep -qxE 'first|third' c* && "
		 "grep -qx /one c*.path",
		 dest);
	ck_assert_int_eq(system(cmd), 0);
	/* Nowhere to put them: an error naming the file, nothing made. */
	char *bad = sbx_xasprintf("%s/one/x-XXXXXX", dest);
	ck_assert_int_eq(sbx_cache_keep_unsaved(dir, bad, NULL, &E), -ENOTDIR);
	ck_assert_ptr_nonnull(strstr(E.msg, "cannot keep the unsaved changes to /"));
	/* Nothing unsaved: 0, and no directory made. */
	snprintf(cmd, sizeof(cmd), "rm -f %s/*.path", dir);
	ck_assert_int_eq(system(cmd), 0);
	free(bad);
	bad = sbx_xasprintf("%s/none/x-XXXXXX", dest);
	ck_assert_int_eq(sbx_cache_keep_unsaved(dir, bad, NULL, &E), 0);
	*strrchr(bad, '/') = '\0';
	ck_assert_int_ne(access(bad, F_OK), 0);
	free(bad);
	free(first);
	free(dest);
	free(dir);
}
END_TEST

START_TEST(test_dirty_files_survive_remount)
{
	struct stat st;
	char *dir = sbx_lease_path(L, "cache");
	struct sbx_fs_file *f = xopen("/unsaved", O_CREAT | O_WRONLY, 0644);
	xwrite(f, "keep me", 0);
	memprov_fail(mp, MP_WRITE, ENOTCONN, -1);
	ck_assert_int_eq(F->flush(f, &E), -ENOTCONN);
	F->release(f);
	sbx_cache_free(L->cache);      /* unmount */
	L->cache = sbx_cache_new(dir); /* mount again */
	ck_assert_int_eq(gattr("/unsaved", &st), 0);
	ck_assert_int_eq(st.st_size, 7);
	memprov_fail(mp, MP_WRITE, 0, 0);
	ck_assert(listed("/", "unsaved"));
	ck_cat("/unsaved", "keep me");
	ck_remote("/unsaved", "keep me");
	free(dir);
}
END_TEST

/*
 * Write-back keeps a chmod and a utimens with the dirty entry (cache_defer.c):
 * stat shows them at once, a remount (kill -9) still has them, and the
 * upload that finally goes hands them to the provider, then forgets them.
 */
START_TEST(test_deferred_attrs_go_with_the_upload)
{
	struct stat st;
	char *dir = sbx_lease_path(L, "cache");
	const mode_t mode = 0750;
	const struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 1200000000}};
	struct sbx_fs_file *f = xopen("/t", O_CREAT | O_WRONLY, 0644);
	xwrite(f, "tar", 0);
	ck_assert(sbx_cache_file_defer_attrs(L->cache, "/t", false, &mode, NULL));
	ck_assert(sbx_cache_file_defer_attrs(L->cache, "/t", false, NULL, ts));
	ck_assert(sbx_cache_file_defer_owner(L->cache, "/t", false, (uid_t)-1, getgid()));
	ck_assert(!sbx_cache_file_defer_attrs(L->cache, "/nothing", false, &mode, NULL));
	ck_assert_int_eq(gattr("/t", &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0750);
	ck_assert_int_eq(st.st_mtime, 1200000000);
	memprov_fail(mp, MP_WRITE, ENOTCONN, -1);
	ck_assert_int_eq(F->flush(f, &E), -ENOTCONN);
	F->release(f);
	ck_assert_int_eq(memprov_calls(mp, MP_CHMOD) + memprov_calls(mp, MP_UTIMENS), 0);
	sbx_cache_free(L->cache);      /* kill -9, or an unmount that could not upload */
	L->cache = sbx_cache_new(dir); /* the next mount */
	ck_assert_int_eq(gattr("/t", &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0750);
	ck_assert_int_eq(st.st_mtime, 1200000000);
	memprov_fail(mp, MP_WRITE, 0, 0);
	memprov_reset_calls(mp);
	ck_assert_int_eq(sbx_fs_save_unsaved(L, false, sbx_now_ms() + 10000), 0);
	ck_remote("/t", "tar");
	ck_assert_int_eq(memprov_calls(mp, MP_CHMOD), 1);
	ck_assert_int_eq(memprov_calls(mp, MP_CHOWN), 1);
	ck_assert_int_eq(memprov_calls(mp, MP_UTIMENS), 1);
	ck_assert_int_eq(memprov_mode(mp, "/t") & 07777, 0750);
	/* Clean now: nothing waits, no FILE.attr is left, stat is the sandbox's. */
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "ls %s/*.attr >/dev/null 2>&1", dir);
	ck_assert_int_ne(system(cmd), 0);
	ck_assert(!sbx_cache_file_defer_attrs(L->cache, "/t", false, &mode, NULL));
	free(dir);
}
END_TEST

/*
 * The owner an upload takes with it shows while the upload is out: the
 * provider's chown (queued there) comes before the stat that ends the
 * upload is stored, and a getattr in between showed the old owner (the
 * kernel then kept it for its TTL: test-e2b-posix settled, under load).
 */
static int (*real_chown)(struct sbx_instance *, const char *, uid_t, gid_t, struct sbx_error *);
static long owner_seen = -1;

static int chown_and_look(struct sbx_instance *inst, const char *path, uid_t uid, gid_t gid,
			  struct sbx_error *err)
{
	struct stat st;
	owner_seen = gattr(path, &st) ? -2 : (long)st.st_uid;
	return real_chown(inst, path, uid, gid, err);
}

START_TEST(test_deferred_owner_shows_during_upload)
{
	struct stat st;
	struct sbx_fs_file *f = xopen("/o", O_CREAT | O_WRONLY, 0644);
	real_chown = mp->prov.chown;
	mp->prov.chown = chown_and_look;
	xwrite(f, "x", 0);
	ck_assert(sbx_cache_file_defer_owner(L->cache, "/o", true, 4321, 4322));
	ck_assert_int_eq(gattr("/o", &st), 0);
	ck_assert_int_eq(st.st_uid, 4321);
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	ck_assert_int_eq(memprov_calls(mp, MP_CHOWN), 1);
	ck_assert_int_eq(owner_seen, 4321);
	ck_assert_int_eq(gattr("/o", &st), 0);
	ck_assert_int_eq(st.st_uid, 4321);
	ck_assert_int_eq(st.st_gid, 4322);
}
END_TEST

/* ---- threads ------------------------------------------------------------------------------------
 */

static void *worker(void *arg)
{
	long id = (long)arg;
	char path[64], text[64];
	struct stat st;
	for (int i = 0; i < 30; i++) {
		snprintf(path, sizeof(path), "/w/t%ld-%d", id, i % 5);
		snprintf(text, sizeof(text), "thread %ld round %d", id, i);
		struct sbx_fs_file *f = NULL;
		struct sbx_error e = SBX_ERROR_INIT;
		if (F->open(L, path, O_CREAT | O_WRONLY | O_TRUNC, 0644, &f, &e))
			return (void *)1;
		if (F->write(f, text, strlen(text), 0, &e) != (ssize_t)strlen(text) ||
		    F->flush(f, &e))
			return (void *)2;
		F->release(f);
		if (F->getattr(L, path, NULL, &st, &e) || st.st_size != (off_t)strlen(text))
			return (void *)3;
		struct names nm = {0};
		if (F->readdir(L, "/w", count_fill, &nm, &e))
			return (void *)4;
		if (i % 7 == 0)
			sbx_cache_invalidate_all(L->cache);
	}
	return NULL;
}

START_TEST(test_threads)
{
	pthread_t t[8];
	size_t len;
	memprov_mkdirs(mp, "/w");
	for (long i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < 8; i++) {
		void *r;
		pthread_join(t[i], &r);
		ck_assert_ptr_null(r);
	}
	for (int i = 0; i < 8; i++) {
		char path[64], want[64];
		snprintf(path, sizeof(path), "/w/t%d-4", i);
		snprintf(want, sizeof(want), "thread %d round 29", i);
		char *got = memprov_get(mp, path, &len);
		ck_assert_str_eq(got, want);
		free(got);
	}
	ck_assert_int_eq(ls("/w").n, 40);
}
END_TEST

TCase *cache_files_tcase(void)
{
	TCase *tc = tcase_create("contents");
	tcase_add_checked_fixture(tc, cachetest_setup, cachetest_teardown);
	tcase_add_test(tc, test_second_read_downloads_nothing);
	tcase_add_test(tc, test_open_copy_of_an_older_version);
	tcase_add_test(tc, test_big_file_streams_through);
	tcase_add_test(tc, test_create_write_close_is_one_upload);
	tcase_add_test(tc, test_failed_upload_keeps_data);
	tcase_add_test(tc, test_failed_upload_survives_close);
	tcase_add_test(tc, test_shell_redirect_uploads_once);
	tcase_add_test(tc, test_fsync_uploads_and_syncs);
	tcase_add_test(tc, test_otrunc_needs_no_download);
	tcase_add_test(tc, test_handles_share_one_entry);
	tcase_add_test(tc, test_truncate_by_path);
	tcase_add_test(tc, test_truncate_by_handle);
	tcase_add_test(tc, test_cache_free_keeps_dirty_files);
	tcase_add_test(tc, test_orphan_retried_by_another_close);
	tcase_add_test(tc, test_orphans_owed_to_a_run);
	tcase_add_test(tc, test_orphan_backoff_doubles);
	tcase_add_test(tc, test_dirty_files_survive_remount);
	tcase_add_test(tc, test_unsaved_kept_apart);
	tcase_add_test(tc, test_deferred_attrs_go_with_the_upload);
	tcase_add_test(tc, test_deferred_owner_shows_during_upload);
	tcase_add_test(tc, test_threads);
	return tc;
}
