/*
 * check_cache — the remote fs/ layer (fs_cached.c over cache.c) driven
 * against memprov, the in-memory provider that counts its calls. The tests
 * state the performance contract in request counts ("ls -l of 1,000 files
 * = 1 list call", "a second read of an unchanged file = 0 read calls") and
 * the durability contract ("a failed upload fails flush, the data stays,
 * the next flush succeeds"). The lease is built by hand: no mount, no FUSE.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "cache.h"
#include "fsmirror.h"
#include "memprov.h"

static const struct sbx_fs_ops *F = &sbx_fs_cached_ops;
static struct memprov *mp;
static struct sbx_lease *L;
static struct sbx_error E;

static void setup(void)
{
	char tmpl[] = "/tmp/check_cache.XXXXXX";
	struct sbx_buf b = SBX_BUF_INIT;
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	mp = memprov_new();
	L = calloc(1, sizeof(*L));
	snprintf(L->name, sizeof(L->name), "t");
	L->refs = 1;
	pthread_mutex_init(&L->lock, NULL);
	pthread_cond_init(&L->cond, NULL);
	sbx_spec_init(&L->spec);
	L->spec.auto_resume = true;
	L->prov = &mp->prov;
	L->inst = &mp->inst;
	L->state = SBX_LS_RUNNING;
	L->dir = strdup(tmpl);
	sbx_buf_addf(&b, "%s/cache", tmpl);
	L->cache = sbx_cache_new(b.buf);
	sbx_buf_release(&b);
	sbx_error_clear(&E);
}

static void teardown(void)
{
	sbx_cache_free(L->cache);
	sbx_rm_rf(L->dir);
	free(L->dir);
	sbx_spec_free(&L->spec);
	pthread_mutex_destroy(&L->lock);
	pthread_cond_destroy(&L->cond);
	free(L);
	memprov_free(mp);
}

/* ---- helpers ------------------------------------------------------------------ */

static void put(const char *path, const char *text)
{
	memprov_put(mp, path, text, strlen(text), 0);
}

static int gattr(const char *path, struct stat *st)
{
	sbx_error_clear(&E);
	return F->getattr(L, path, NULL, st, &E);
}

static struct sbx_fs_file *xopen(const char *path, int flags, mode_t mode)
{
	struct sbx_fs_file *f = NULL;
	sbx_error_clear(&E);
	int rc = F->open(L, path, flags, mode, &f, &E);
	ck_assert_msg(rc == 0, "open %s: %d %s", path, rc, E.msg);
	return f;
}

static void xwrite(struct sbx_fs_file *f, const char *text, off_t off)
{
	ck_assert_int_eq(F->write(f, text, strlen(text), off, &E), (ssize_t)strlen(text));
}

/* Reads a whole open file (caller frees). */
static char *slurp(struct sbx_fs_file *f)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char chunk[65536];
	ssize_t n;
	while ((n = F->read(f, chunk, sizeof(chunk), (off_t)b.len, &E)) > 0)
		sbx_buf_add(&b, chunk, (size_t)n);
	ck_assert_int_ge(n, 0);
	return sbx_buf_detach(&b, NULL);
}

/* cat path: open, read, close (flush + release). */
static char *cat(const char *path)
{
	struct sbx_fs_file *f = xopen(path, O_RDONLY, 0);
	char *s = slurp(f);
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	return s;
}

static void ck_remote(const char *path, const char *want)
{
	size_t len;
	char *got = memprov_get(mp, path, &len);
	ck_assert_msg(got != NULL, "%s missing remotely", path);
	ck_assert_str_eq(got, want);
	free(got);
}

static void ck_cat(const char *path, const char *want)
{
	char *got = cat(path);
	ck_assert_str_eq(got, want);
	free(got);
}

/* The lease's `error` file ("" if none; caller frees). */
static char *error_text(void)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char *p = sbx_lease_path(L, "error");
	sbx_read_file(p, &b, 65536);
	free(p);
	return sbx_buf_detach(&b, NULL);
}

static void ck_no_error(void)
{
	char *t = error_text();
	ck_assert_str_eq(t, "");
	free(t);
}

static void ck_error_mentions(const char *what)
{
	char *t = error_text();
	ck_assert_msg(strstr(t, what) != NULL, "error file \"%s\" lacks \"%s\"", t, what);
	free(t);
}

struct names {
	int n, with_st;
	char seen[4096];
};

static int count_fill(void *ctx, const char *name, const struct stat *st)
{
	struct names *nm = ctx;
	nm->n++;
	nm->with_st += st != NULL;
	if (strlen(nm->seen) + strlen(name) + 2 < sizeof(nm->seen)) {
		strcat(nm->seen, name);
		strcat(nm->seen, " ");
	}
	return 0;
}

static struct names ls(const char *path)
{
	struct names nm = {0};
	sbx_error_clear(&E);
	ck_assert_int_eq(F->readdir(L, path, count_fill, &nm, &E), 0);
	return nm;
}

static bool listed(const char *dir, const char *name)
{
	struct names nm = ls(dir);
	char needle[300];
	snprintf(needle, sizeof(needle), "%s ", name);
	return strstr(nm.seen, needle) == nm.seen ||
	       (snprintf(needle, sizeof(needle), " %s ", name), strstr(nm.seen, needle) != NULL);
}

/* ---- attributes and listings -------------------------------------------------------- */

START_TEST(test_ls_l_is_one_list_call)
{
	char path[64];
	struct stat st;
	for (int i = 0; i < 1000; i++) {
		snprintf(path, sizeof(path), "/d/f%04d", i);
		memprov_put(mp, path, path, strlen(path), 0);
	}
	memprov_reset_calls(mp);
	struct names nm = ls("/d");
	ck_assert_int_eq(nm.n, 1000);
	ck_assert_int_eq(nm.with_st, 1000);
	for (int i = 0; i < 1000; i++) {
		snprintf(path, sizeof(path), "/d/f%04d", i);
		ck_assert_int_eq(gattr(path, &st), 0);
		ck_assert_int_eq(st.st_size, (off_t)strlen(path));
		ck_assert(S_ISREG(st.st_mode));
	}
	/* A name the listing lacks is known absent too. */
	ck_assert_int_eq(gattr("/d/nope", &st), -ENOENT);
	ck_assert_int_eq(memprov_calls(mp, MP_LIST), 1);
	ck_assert_int_eq(memprov_file_calls(mp), 1);
}
END_TEST

START_TEST(test_list_without_attrs_stats_once)
{
	struct stat st;
	mp->prov.caps = 0;
	put("/d/a", "1");
	put("/d/b", "22");
	memprov_reset_calls(mp);
	struct names nm = ls("/d");
	ck_assert_int_eq(nm.n, 2);
	ck_assert_int_eq(nm.with_st, 0); /* partial attributes never reach the kernel */
	ck_assert_int_eq(gattr("/d/b", &st), 0);
	ck_assert_int_eq(st.st_size, 2);
	ck_assert_int_eq(gattr("/d/b", &st), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 1);
}
END_TEST

START_TEST(test_negative_entries_cached)
{
	struct stat st;
	ck_assert_int_eq(gattr("/nope", &st), -ENOENT);
	ck_assert_int_eq(gattr("/nope", &st), -ENOENT);
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 1);
	ck_no_error(); /* an answer, not a fault */
}
END_TEST

START_TEST(test_ttl_expires)
{
	struct stat st;
	sbx_cache_set_ttl(L->cache, 50, 50);
	put("/f", "x");
	ck_assert_int_eq(gattr("/f", &st), 0);
	ck_assert_int_eq(gattr("/f", &st), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 1);
	ls("/");
	ls("/");
	ck_assert_int_eq(memprov_calls(mp, MP_LIST), 1);
	usleep(120 * 1000);
	ck_assert_int_eq(gattr("/f", &st), 0);
	ls("/");
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 2);
	ck_assert_int_eq(memprov_calls(mp, MP_LIST), 2);
}
END_TEST

START_TEST(test_invalidation)
{
	struct stat st;
	put("/f", "x");
	ck_assert_int_eq(gattr("/f", &st), 0);
	put("/f", "longer"); /* changed behind our back */
	ck_assert_int_eq(gattr("/f", &st), 0);
	ck_assert_int_eq(st.st_size, 1); /* within the TTL: cached */
	sbx_cache_invalidate_path(L->cache, "/f");
	ck_assert_int_eq(gattr("/f", &st), 0);
	ck_assert_int_eq(st.st_size, 6);
	ls("/");
	sbx_cache_invalidate_all(L->cache); /* what a run does */
	ls("/");
	ck_assert_int_eq(gattr("/f", &st), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_LIST), 2);
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 2);
	/* The provider's change notifications go through the same door. */
	sbx_cache_notify(L->cache, "/f");
	ck_assert_int_eq(gattr("/f", &st), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_LIST) + memprov_calls(mp, MP_STAT), 5);
	sbx_cache_notify(L->cache, NULL);
	ls("/");
	ck_assert_int_eq(memprov_calls(mp, MP_LIST), 3);
}
END_TEST

START_TEST(test_pseudo_filesystems_stay_local)
{
	struct stat st;
	struct sbx_fs_file *f = NULL;
	ck_assert_int_eq(ls("/proc").n, 0);
	ck_assert_int_eq(ls("/sys/kernel").n, 0);
	ck_assert_int_eq(gattr("/proc", &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(gattr("/proc/1/status", &st), -ENOENT);
	ck_assert_int_eq(F->open(L, "/dev/null", O_RDONLY, 0, &f, &E), -ENOENT);
	ck_assert_int_eq(F->mkdir(L, "/sys/x", 0755, &E), -EACCES);
	ck_assert_int_eq(F->unlink(L, "/dev/sda", &E), -EACCES);
	ck_assert_int_eq(memprov_file_calls(mp), 0);
}
END_TEST

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
	F->release(r);
	F->release(w);
	ck_remote("/a", "01AB456789");
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 1);
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 1);
}
END_TEST

START_TEST(test_paused_sandbox_served_from_cache)
{
	struct stat st;
	char buf[64];
	put("/a", "cached");
	memprov_mkdirs(mp, "/sub");
	ck_assert_int_eq(F->symlink(L, "/a", "/l", &E), 0);
	sbx_cache_set_ttl(L->cache, 10, 10);
	ls("/");
	ck_cat("/a", "cached");
	ck_assert_int_eq(F->readlink(L, "/l", buf, sizeof(buf), &E), 0);
	L->state = SBX_LS_PAUSED;
	usleep(30 * 1000); /* past the TTL: a paused sandbox cannot change its files */
	memprov_reset_calls(mp);
	ck_assert_int_eq(gattr("/a", &st), 0);
	ck_assert_int_eq(ls("/").n, 3);
	ck_cat("/a", "cached");
	ck_assert_int_eq(F->readlink(L, "/l", buf, sizeof(buf), &E), 0);
	ck_assert_str_eq(buf, "/a");
	ck_assert_int_eq(gattr("/missing", &st), -ENOENT); /* absent from the listing */
	ck_assert_int_eq(memprov_file_calls(mp), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_UNPAUSE), 0);
	ck_assert_int_eq(L->state, SBX_LS_PAUSED);
	/* What is not cached needs the sandbox: it is resumed. */
	ck_assert_int_eq(ls("/sub").n, 0);
	ck_assert_int_eq(memprov_calls(mp, MP_UNPAUSE), 1);
	ck_assert_int_eq(L->state, SBX_LS_RUNNING);
}
END_TEST

START_TEST(test_paused_without_auto_resume_fails_clearly)
{
	struct stat st;
	L->state = SBX_LS_PAUSED;
	L->spec.auto_resume = false;
	ck_assert_int_eq(gattr("/x", &st), -EAGAIN);
	ck_error_mentions("stat /x");
	ck_assert_int_eq(memprov_file_calls(mp), 0);
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

/* ---- the tree ------------------------------------------------------------------------------ */

START_TEST(test_rename_moves_open_entry)
{
	struct stat st;
	struct sbx_fs_file *f = xopen("/a", O_CREAT | O_RDWR, 0644);
	xwrite(f, "data", 0);
	ck_assert_int_eq(F->rename(L, "/a", "/b", 0, &E), 0);
	xwrite(f, "more", 4);
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	ck_remote("/b", "datamore");
	ck_assert(!memprov_exists(mp, "/a"));
	ck_assert_int_eq(gattr("/a", &st), -ENOENT);
	ck_assert_int_eq(gattr("/b", &st), 0);
	ck_assert_int_eq(st.st_size, 8);
	ck_cat("/b", "datamore");
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 0);
	/* A directory rename moves what is cached below it. */
	put("/d/x", "x1");
	ck_cat("/d/x", "x1");
	ck_assert_int_eq(F->rename(L, "/d", "/e", 0, &E), 0);
	ck_assert_int_eq(gattr("/d/x", &st), -ENOENT);
	ck_cat("/e/x", "x1");
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 1);
}
END_TEST

START_TEST(test_unlink_open_file_is_not_resurrected)
{
	struct stat st;
	struct sbx_fs_file *f = xopen("/tmpfile", O_CREAT | O_RDWR, 0644);
	xwrite(f, "scratch", 0);
	ck_assert_int_eq(F->unlink(L, "/tmpfile", &E), 0); /* never uploaded: local only */
	ck_assert_int_eq(memprov_calls(mp, MP_UNLINK), 0);
	ck_assert_int_eq(F->getattr(L, "/tmpfile", f, &st, &E), 0);
	ck_assert_int_eq(st.st_size, 7);
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	ck_assert(!memprov_exists(mp, "/tmpfile"));
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 0);
	/* A remote file leaves the cached listing without a new list call. */
	put("/x", "1");
	sbx_cache_invalidate_all(L->cache);
	ck_assert(listed("/", "x"));
	ck_assert_int_eq(F->unlink(L, "/x", &E), 0);
	ck_assert(!listed("/", "x"));
	ck_assert_int_eq(gattr("/x", &st), -ENOENT);
	ck_assert_int_eq(memprov_calls(mp, MP_LIST), 1);
}
END_TEST

START_TEST(test_mkdir_rmdir_keep_listing)
{
	struct stat st;
	ls("/");
	memprov_reset_calls(mp);
	ck_assert_int_eq(F->mkdir(L, "/dnew", 0755, &E), 0);
	ck_assert(listed("/", "dnew"));
	ck_assert_int_eq(gattr("/dnew", &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(F->mkdir(L, "/dnew", 0755, &E), -EEXIST);
	ck_assert_int_eq(F->rmdir(L, "/dnew", &E), 0);
	ck_assert(!listed("/", "dnew"));
	ck_assert_int_eq(gattr("/dnew", &st), -ENOENT);
	ck_assert_int_eq(memprov_calls(mp, MP_LIST), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 1);
	ck_no_error(); /* EEXIST is an answer */
}
END_TEST

START_TEST(test_metadata_edits_cached_attrs)
{
	struct stat st;
	struct timespec ts[2] = {{1600000000, 0}, {1600000001, 500}};
	put("/a", "abc");
	ck_cat("/a", "abc");
	memprov_reset_calls(mp);
	ck_assert_int_eq(F->chmod(L, "/a", 0600, &E), 0);
	ck_assert_int_eq(F->chown(L, "/a", 1234, (gid_t)-1, &E), 0);
	ck_assert_int_eq(F->utimens(L, "/a", ts, &E), 0);
	ck_assert_int_eq(gattr("/a", &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(st.st_uid, 1234);
	ck_assert_int_eq(st.st_mtim.tv_sec, 1600000001);
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 0);
	/* Setting an mtime does not make the cached content look stale. */
	sbx_cache_invalidate_all(L->cache);
	ck_cat("/a", "abc");
	ck_assert_int_eq(memprov_calls(mp, MP_READ), 0);
	/* A file created here is uploaded before its mode is set. */
	struct sbx_fs_file *f = xopen("/n", O_CREAT | O_WRONLY, 0644);
	xwrite(f, "n", 0);
	ck_assert_int_eq(F->chmod(L, "/n", 0700, &E), 0);
	ck_assert_int_eq(memprov_mode(mp, "/n") & 07777, 0700);
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	ck_remote("/n", "n");
}
END_TEST

START_TEST(test_symlink_readlink_link)
{
	char buf[64];
	ck_assert_int_eq(F->symlink(L, "target/path", "/l", &E), 0);
	ck_assert_int_eq(F->readlink(L, "/l", buf, sizeof(buf), &E), 0);
	ck_assert_str_eq(buf, "target/path");
	ck_assert_int_eq(F->readlink(L, "/l", buf, sizeof(buf), &E), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_READLINK), 1);
	put("/a", "A");
	ck_assert_int_eq(F->link(L, "/a", "/b", &E), 0);
	ck_cat("/b", "A");
	ck_assert_int_eq(F->mknod(L, "/fifo", S_IFIFO | 0644, 0, &E), 0);
	ck_assert(S_ISFIFO(memprov_mode(mp, "/fifo")));
}
END_TEST

START_TEST(test_missing_slot_is_enotsup)
{
	struct statvfs sv;
	mp->prov.symlink = NULL;
	mp->prov.chown = NULL;
	ck_assert_int_eq(F->symlink(L, "t", "/l", &E), -ENOTSUP);
	ck_assert_msg(strstr(E.msg, "memprov cannot symlink") != NULL, "%s", E.msg);
	ck_error_mentions("symlink /l");
	put("/a", "1");
	ck_assert_int_eq(F->chown(L, "/a", 1, 1, &E), -ENOTSUP);
	ck_assert_int_eq(F->statfs(L, "/", &sv, &E), 0);
	ck_assert_int_eq(sv.f_blocks, 1000);
	mp->prov.statfs = NULL;
	ck_assert_int_eq(F->statfs(L, "/", &sv, &E), 0);
	ck_assert_int_eq(sv.f_namemax, 255);
}
END_TEST

START_TEST(test_provider_faults_recorded)
{
	struct stat st;
	memprov_fail(mp, MP_LIST, ETIMEDOUT, 1);
	struct names nm = {0};
	ck_assert_int_eq(F->readdir(L, "/", count_fill, &nm, &E), -ETIMEDOUT);
	ck_error_mentions("list /");
	ck_assert_int_eq(ls("/").n, 0); /* not cached: the next try reaches the provider */
	put("/a", "x");
	sbx_cache_invalidate_all(L->cache);
	memprov_fail(mp, MP_READ, ENOTCONN, 1);
	struct sbx_fs_file *f = NULL;
	ck_assert_int_eq(F->open(L, "/a", O_RDONLY, 0, &f, &E), -ENOTCONN);
	ck_error_mentions("download /a");
	ck_cat("/a", "x");
	memprov_fail(mp, MP_STAT, EIO, 1);
	ck_assert_int_eq(gattr("/zz", &st), -EIO);
	ck_error_mentions("stat /zz");
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
	snprintf(cmd, sizeof(cmd), "grep -q '^keep me$' %s/cache/c* && grep -qx /unsaved %s/cache/*.path",
		 L->dir, L->dir);
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

START_TEST(test_dirty_files_survive_remount)
{
	struct stat st;
	char *dir = sbx_lease_path(L, "cache");
	struct sbx_fs_file *f = xopen("/unsaved", O_CREAT | O_WRONLY, 0644);
	xwrite(f, "keep me", 0);
	memprov_fail(mp, MP_WRITE, ENOTCONN, -1);
	ck_assert_int_eq(F->flush(f, &E), -ENOTCONN);
	F->release(f);
	sbx_cache_free(L->cache); /* unmount */
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

/* ---- threads ------------------------------------------------------------------------------------ */

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
		if (F->write(f, text, strlen(text), 0, &e) != (ssize_t)strlen(text) || F->flush(f, &e))
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

int main(void)
{
	Suite *s = suite_create("cache");
	TCase *meta = tcase_create("metadata");
	TCase *data = tcase_create("contents");
	TCase *tree = tcase_create("tree");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(meta, setup, teardown);
	tcase_add_test(meta, test_ls_l_is_one_list_call);
	tcase_add_test(meta, test_list_without_attrs_stats_once);
	tcase_add_test(meta, test_negative_entries_cached);
	tcase_add_test(meta, test_ttl_expires);
	tcase_add_test(meta, test_invalidation);
	tcase_add_test(meta, test_pseudo_filesystems_stay_local);
	tcase_add_test(meta, test_paused_sandbox_served_from_cache);
	tcase_add_test(meta, test_paused_without_auto_resume_fails_clearly);
	suite_add_tcase(s, meta);

	tcase_add_checked_fixture(data, setup, teardown);
	tcase_add_test(data, test_second_read_downloads_nothing);
	tcase_add_test(data, test_big_file_streams_through);
	tcase_add_test(data, test_create_write_close_is_one_upload);
	tcase_add_test(data, test_failed_upload_keeps_data);
	tcase_add_test(data, test_failed_upload_survives_close);
	tcase_add_test(data, test_fsync_uploads_and_syncs);
	tcase_add_test(data, test_otrunc_needs_no_download);
	tcase_add_test(data, test_handles_share_one_entry);
	tcase_add_test(data, test_truncate_by_path);
	tcase_add_test(data, test_truncate_by_handle);
	tcase_add_test(data, test_cache_free_keeps_dirty_files);
	tcase_add_test(data, test_orphan_retried_by_another_close);
	tcase_add_test(data, test_dirty_files_survive_remount);
	tcase_add_test(data, test_threads);
	suite_add_tcase(s, data);

	tcase_add_checked_fixture(tree, setup, teardown);
	tcase_add_test(tree, test_rename_moves_open_entry);
	tcase_add_test(tree, test_unlink_open_file_is_not_resurrected);
	tcase_add_test(tree, test_mkdir_rmdir_keep_listing);
	tcase_add_test(tree, test_metadata_edits_cached_attrs);
	tcase_add_test(tree, test_symlink_readlink_link);
	tcase_add_test(tree, test_missing_slot_is_enotsup);
	tcase_add_test(tree, test_provider_faults_recorded);
	suite_add_tcase(s, tree);

	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
