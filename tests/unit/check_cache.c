/*
 * check_cache — the remote fs/ layer (fs_cached.c over cache.c and
 * cache_file.c) driven against memprov, the in-memory provider that counts
 * its calls. The tests state the performance contract in request counts
 * ("ls -l of 1,000 files = 1 list call", "a second read of an unchanged
 * file = 0 read calls") and the durability contract ("a failed upload
 * fails flush, the data stays, the next flush succeeds"). This file: the
 * metadata and the tree; check_cache_files.c: contents.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cachetest.h"

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
	/* Both expired: the lookup lists "/" again (one call answers every name). */
	ck_assert_int_eq(gattr("/f", &st), 0);
	ck_assert_int_eq(gattr("/missing", &st), -ENOENT);
	ls("/");
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 1);
	ck_assert_int_eq(memprov_calls(mp, MP_LIST), 2);
}
END_TEST

/*
 * A directory's links are asked in one request at most once a TTL and a
 * generation (a failed or cut answer is not asked again for each link);
 * another directory, a run (a new generation) or the TTL's end asks again.
 */
START_TEST(test_links_asked_once_a_ttl)
{
	struct sbx_cache *c = L->cache;
	sbx_cache_set_ttl(c, 80, 80);
	ck_assert(sbx_cache_links_try(c, "/d"));
	ck_assert(!sbx_cache_links_try(c, "/d"));
	ck_assert(sbx_cache_links_try(c, "/e"));
	ck_assert(sbx_cache_links_try(c, "/d"));
	ck_assert(!sbx_cache_links_try(c, "/d"));
	sbx_cache_invalidate_all(c); /* what a run does */
	ck_assert(sbx_cache_links_try(c, "/d"));
	ck_assert(!sbx_cache_links_try(c, "/d"));
	usleep(120 * 1000);
	ck_assert(sbx_cache_links_try(c, "/d"));
}
END_TEST

/* A lookup that failed with a fault: the kernel's immediate second ask costs no second deadline. */
START_TEST(test_failed_lookup_remembered_briefly)
{
	struct stat st;
	put("/f", "x");
	memprov_fail(mp, MP_STAT, ETIMEDOUT, 1);
	ck_assert_int_eq(gattr("/f", &st), -ETIMEDOUT);
	ck_assert_int_eq(gattr("/f", &st), -ETIMEDOUT);
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 1);
	usleep((SBX_CACHE_FAIL_MS + 50) * 1000);
	ck_assert_int_eq(gattr("/f", &st), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 2);
	/* answers (ENOENT) are cached as answers, not as faults */
	ck_assert_int_eq(gattr("/nope", &st), -ENOENT);
}
END_TEST

/*
 * A fault met across an invalidation (the lease found gone, a run's end)
 * is not remembered: it would answer for the path after the invalidation
 * that superseded it (test-e2b-faults saw ENOTCONN for fs/ of a lease
 * already reclaimed, where ENOENT was due).
 */
START_TEST(test_fault_across_invalidation_not_remembered)
{
	struct sbx_error e = SBX_ERROR_INIT;
	unsigned long gen = sbx_cache_gen(L->cache);
	sbx_error_set(&e, ENOTCONN, 0, "connection dropped");
	sbx_cache_invalidate_all(L->cache);
	sbx_cache_fail_put(L->cache, "/f", &e, gen);
	ck_assert(!sbx_cache_fail_get(L->cache, "/f", &e));
	sbx_cache_fail_put(L->cache, "/f", &e, sbx_cache_gen(L->cache));
	ck_assert(sbx_cache_fail_get(L->cache, "/f", &e));
	ck_assert_int_eq(e.err, ENOTCONN);
}
END_TEST

/*
 * A directory's times are pinned only over uploads waiting in it: with
 * none (a dirty file deeper down changes a subdirectory's mtime, not this
 * one's), a pin would never be used up, and a name written there hours
 * later would get the old times laid over its directory again.
 */
START_TEST(test_dir_times_pinned_only_over_uploads_in_it)
{
	struct timespec ts[2] = {{1000, 0}, {2000, 0}}, got[2];
	char *dir = NULL;
	sbx_cache_dir_times_pin(L->cache, "/d", ts);
	ck_assert(!sbx_cache_dir_times_after(L->cache, "/d/x", NULL, &dir, got));
	ck_assert_ptr_null(dir);
}
END_TEST

/*
 * A name the mount adds to (or removes from) a pinned directory after its
 * times were set moves its mtime past them, as on a local disk: the pin
 * goes. Kept, it was laid again over that newer mtime when the file still
 * waiting there went up.
 */
START_TEST(test_dir_times_pin_goes_with_a_later_name)
{
	struct timespec ts[2] = {{1000, 0}, {2000, 0}}, got[2];
	char *dir = NULL;
	ck_assert_int_eq(F->mkdir(L, "/d", 0755, &E), 0);
	struct sbx_fs_file *f = xopen("/d/f", O_CREAT | O_WRONLY | O_EXCL, 0644);
	xwrite(f, "x", 0); /* dirty: its upload waits */
	sbx_cache_dir_times_pin(L->cache, "/d", ts);
	ck_assert(sbx_cache_dir_times_after(L->cache, "/d/other", NULL, &dir, got));
	ck_assert_str_eq(dir, "/d");
	ck_assert_int_eq(got[1].tv_sec, 2000);
	free(dir);
	dir = NULL;
	sbx_cache_note_added(L->cache, "/d/later", NULL);
	ck_assert(!sbx_cache_dir_times_after(L->cache, "/d/other", NULL, &dir, got));
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
}
END_TEST

/* mkdir knows the new directory is empty; creating in it keeps the parent's attributes. */
START_TEST(test_new_directory_needs_no_lookup)
{
	struct stat st, before;
	sbx_cache_set_ttl(L->cache, 100000, 100000);
	ck_assert_int_eq(F->mkdir(L, "/d", 0755, &E), 0);
	ck_assert_int_eq(gattr("/d", &before), 0);
	memprov_reset_calls(mp);
	for (int i = 0; i < 20; i++) {
		char p[32];
		snprintf(p, sizeof(p), "/d/f%d", i);
		ck_assert_int_eq(gattr(p, &st), -ENOENT);
		struct sbx_fs_file *f = xopen(p, O_CREAT | O_WRONLY | O_EXCL, 0644);
		xwrite(f, "x", 0);
		ck_assert_int_eq(F->flush(f, &E), 0);
		F->release(f);
		ck_assert_int_eq(gattr("/d", &st), 0);
	}
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 20);
	/* one stat per upload (memprov has no cheaper way), none per lookup */
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 20);
	ck_assert_int_eq(memprov_calls(mp, MP_LIST), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_ge(st.st_mtime, before.st_mtime);
	ck_assert_int_eq(ls("/d").n, 20);
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
	/* Reports of our own changes are echoes: the cache already knows. */
	ck_assert_int_eq(F->chmod(L, "/f", 0600, &E), 0);
	sbx_cache_notify(L->cache, "/f");
	ck_assert_int_eq(gattr("/f", &st), 0);
	ck_assert_int_eq(ls("/").n, 1);
	ck_assert_int_eq(memprov_calls(mp, MP_LIST) + memprov_calls(mp, MP_STAT), 6);
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

START_TEST(test_pause_completes_the_cache)
{
	struct stat st;
	put("/d/e/f", "deep");
	put("/g", "read before a run");
	ck_cat("/g", "read before a run");
	sbx_cache_invalidate_all(L->cache); /* a run */
	/* The kernel still holds /d and /d/e: it asks only for the file. */
	ck_assert_int_eq(gattr("/d/e/f", &st), 0);
	ck_cat("/d/e/f", "deep");
	memprov_reset_calls(mp);
	memprov_fail(mp, MP_STAT, ETIMEDOUT, 1);
	sbx_fs_before_pause(L); /* a fault ends it: no request after the first */
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 1);
	memprov_reset_calls(mp);
	sbx_fs_before_pause(L); /* "/", "/d", "/d/e" and "/g": one stat each */
	ck_assert_int_eq(memprov_calls(mp, MP_STAT), 4);
	ck_assert_int_eq(memprov_file_calls(mp), 4);
	sbx_fs_before_pause(L); /* nothing lacks now */
	ck_assert_int_eq(memprov_file_calls(mp), 4);
	sbx_cache_set_ttl(L->cache, 10, 10);
	L->state = SBX_LS_PAUSED;
	usleep(30 * 1000);
	memprov_reset_calls(mp);
	ck_assert_int_eq(gattr("/", &st), 0);
	ck_assert_int_eq(gattr("/d", &st), 0);
	ck_assert_int_eq(gattr("/d/e", &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_cat("/d/e/f", "deep");
	ck_cat("/g", "read before a run"); /* its cached copy, revalidated at the pause */
	ck_assert_int_eq(memprov_file_calls(mp), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_UNPAUSE), 0);
	ck_assert_int_eq(L->state, SBX_LS_PAUSED);
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

/* The link count a listing gives name (0: none given). */
struct nlink_of {
	const char *name;
	nlink_t nlink;
};

static int nlink_fill(void *ctx, const char *name, const struct stat *st)
{
	struct nlink_of *o = ctx;
	if (!strcmp(name, o->name) && st)
		o->nlink = st->st_nlink;
	return 0;
}

/* A directory's nlink counts its subdirectories, which the remote listings do not say. */
START_TEST(test_dir_nlink_counts_subdirs)
{
	struct stat st;
	struct nlink_of o = {"p", 0};
	ck_assert_int_eq(F->mkdir(L, "/p", 0755, &E), 0);
	ck_assert_int_eq(F->mkdir(L, "/q", 0755, &E), 0);
	ck_assert_int_eq(F->mkdir(L, "/p/a", 0755, &E), 0);
	ck_assert_int_eq(F->mkdir(L, "/p/b", 0755, &E), 0);
	ck_assert_int_eq(F->mknod(L, "/p/f", S_IFREG | 0644, 0, &E), 0);
	/* The lookups the kernel makes of what it just made. */
	ck_assert_int_eq(gattr("/p/a", &st), 0);
	ck_assert_int_eq(gattr("/p/b", &st), 0);
	ck_assert_int_eq(gattr("/p/f", &st), 0);
	ck_assert_int_eq(gattr("/p", &st), 0);
	ck_assert_int_eq(st.st_nlink, 4);
	ck_assert_int_eq(F->rename(L, "/p/a", "/q/a", 0, &E), 0);
	ck_assert_int_eq(gattr("/q/a", &st), 0);
	ck_assert_int_eq(gattr("/p", &st), 0);
	ck_assert_int_eq(st.st_nlink, 3);
	ck_assert_int_eq(gattr("/q", &st), 0);
	ck_assert_int_eq(st.st_nlink, 3);
	ck_assert_int_eq(F->readdir(L, "/", nlink_fill, &o, &E), 0);
	ck_assert_int_eq(o.nlink, 3);
	/* Nothing known of /p's entries: the provider's count until it is listed. */
	sbx_cache_invalidate_all(L->cache);
	ck_assert_int_eq(gattr("/p", &st), 0);
	ck_assert_int_eq(st.st_nlink, 2);
	ls("/p");
	ck_assert_int_eq(gattr("/p", &st), 0);
	ck_assert_int_eq(st.st_nlink, 3);
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
	/*
	 * A file created here and still open takes its mode and times with
	 * its upload at close (rsync's fchmod of its temporary): nothing is
	 * sent before, one write after, no chmod of its own.
	 */
	memprov_reset_calls(mp);
	struct sbx_fs_file *f = xopen("/n", O_CREAT | O_WRONLY, 0644);
	xwrite(f, "n", 0);
	ck_assert_int_eq(F->chmod(L, "/n", 0700, &E), 0);
	ck_assert_int_eq(F->utimens(L, "/n", ts, &E), 0);
	ck_assert_int_eq(gattr("/n", &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE) + memprov_calls(mp, MP_CHMOD), 0);
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	ck_remote("/n", "n");
	ck_assert_int_eq(memprov_mode(mp, "/n") & 07777, 0700);
	ck_assert_int_eq(memprov_calls(mp, MP_WRITE), 1);
	ck_assert_int_eq(memprov_calls(mp, MP_CHMOD), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_UTIMENS), 1);
	/* Closed and clean: a chmod now goes out at once. */
	ck_assert_int_eq(F->chmod(L, "/n", 0600, &E), 0);
	ck_assert_int_eq(memprov_mode(mp, "/n") & 07777, 0600);
}
END_TEST

START_TEST(test_symlink_readlink_link)
{
	char buf[64];
	ck_assert_int_eq(F->symlink(L, "target/path", "/l", &E), 0);
	ck_assert_int_eq(F->readlink(L, "/l", buf, sizeof(buf), &E), 0);
	ck_assert_str_eq(buf, "target/path");
	ck_assert_int_eq(F->readlink(L, "/l", buf, sizeof(buf), &E), 0);
	/* a link made here: its target is known without asking */
	ck_assert_int_eq(memprov_calls(mp, MP_READLINK), 0);
	sbx_cache_invalidate_all(L->cache);
	ck_assert_int_eq(F->readlink(L, "/l", buf, sizeof(buf), &E), 0);
	ck_assert_str_eq(buf, "target/path");
	ck_assert_int_eq(F->readlink(L, "/l", buf, sizeof(buf), &E), 0);
	ck_assert_int_eq(memprov_calls(mp, MP_READLINK), 1);
	put("/a", "A");
	/* the new name's attributes are the file's, one link more: no stat */
	struct stat st;
	ck_assert_int_eq(gattr("/a", &st), 0);
	memprov_reset_calls(mp);
	ck_assert_int_eq(F->link(L, "/a", "/b", &E), 0);
	ck_assert_int_eq(gattr("/b", &st), 0);
	ck_assert_int_eq(st.st_nlink, 2);
	ck_assert_int_eq(gattr("/a", &st), 0);
	ck_assert_int_eq(st.st_nlink, 2);
	ck_assert_int_eq(memprov_calls(mp, MP_STAT) + memprov_calls(mp, MP_LIST), 0);
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

/*
 * One answer-or-fault rule for both implementations (sbx_fs_is_fault): a
 * fault outside fs_direct's old list is explained, an EXDEV (mv copies
 * instead) is not an error line in fs_cached any more.
 */
START_TEST(test_direct_records_unlisted_faults)
{
	memprov_fail(mp, MP_MKDIR, EPROTO, 1);
	ck_assert_int_eq(sbx_fs_direct_ops.mkdir(L, "/d", 0755, &E), -EPROTO);
	ck_error_mentions("mkdir /d");
}
END_TEST

START_TEST(test_exdev_is_an_answer)
{
	put("/a", "x");
	memprov_fail(mp, MP_RENAME, EXDEV, 1);
	ck_assert_int_eq(F->rename(L, "/a", "/b", 0, &E), -EXDEV);
	ck_assert_int_eq(sbx_fs_direct_ops.rename(L, "/a", "/b", 0, &E), 0);
	ck_no_error();
	memprov_fail(mp, MP_RENAME, EXDEV, 1);
	ck_assert_int_eq(sbx_fs_direct_ops.rename(L, "/b", "/c", 0, &E), -EXDEV);
	ck_no_error();
	ck_assert(!sbx_fs_is_fault(-ENOENT) && sbx_fs_is_fault(-EIO) && sbx_fs_is_fault(-EROFS));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cache");
	TCase *meta = tcase_create("metadata");
	TCase *tree = tcase_create("tree");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(meta, cachetest_setup, cachetest_teardown);
	tcase_add_test(meta, test_ls_l_is_one_list_call);
	tcase_add_test(meta, test_list_without_attrs_stats_once);
	tcase_add_test(meta, test_negative_entries_cached);
	tcase_add_test(meta, test_links_asked_once_a_ttl);
	tcase_add_test(meta, test_ttl_expires);
	tcase_add_test(meta, test_new_directory_needs_no_lookup);
	tcase_add_test(meta, test_failed_lookup_remembered_briefly);
	tcase_add_test(meta, test_fault_across_invalidation_not_remembered);
	tcase_add_test(meta, test_dir_times_pinned_only_over_uploads_in_it);
	tcase_add_test(meta, test_dir_times_pin_goes_with_a_later_name);
	tcase_add_test(meta, test_invalidation);
	tcase_add_test(meta, test_pseudo_filesystems_stay_local);
	tcase_add_test(meta, test_paused_sandbox_served_from_cache);
	tcase_add_test(meta, test_pause_completes_the_cache);
	tcase_add_test(meta, test_paused_without_auto_resume_fails_clearly);
	suite_add_tcase(s, meta);
	suite_add_tcase(s, cache_files_tcase());
	tcase_add_checked_fixture(tree, cachetest_setup, cachetest_teardown);
	tcase_add_test(tree, test_rename_moves_open_entry);
	tcase_add_test(tree, test_unlink_open_file_is_not_resurrected);
	tcase_add_test(tree, test_mkdir_rmdir_keep_listing);
	tcase_add_test(tree, test_dir_nlink_counts_subdirs);
	tcase_add_test(tree, test_metadata_edits_cached_attrs);
	tcase_add_test(tree, test_symlink_readlink_link);
	tcase_add_test(tree, test_missing_slot_is_enotsup);
	tcase_add_test(tree, test_provider_faults_recorded);
	tcase_add_test(tree, test_direct_records_unlisted_faults);
	tcase_add_test(tree, test_exdev_is_an_answer);
	suite_add_tcase(s, tree);

	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
