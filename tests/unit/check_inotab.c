/*
 * check_inotab — the inode numbers and link counts inotab keeps for
 * providers that report none: renames (a directory's names below it
 * too), hard links and their counts, fresh numbers for names left
 * behind, the bound, and numbers a provider gave left alone.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "inotab.h"

/* st for path as a remote provider answers (no st_ino, nlink 1 or 2). */
static struct stat look(struct sbx_inotab *t, const char *path, mode_t type)
{
	struct stat st;
	memset(&st, 0, sizeof(st));
	st.st_mode = type | 0644;
	st.st_nlink = S_ISDIR(type) ? 2 : 1;
	sbx_inotab_stat(t, path, &st);
	return st;
}

static ino_t ino(struct sbx_inotab *t, const char *path)
{
	return look(t, path, S_IFREG).st_ino;
}

/* A table of a provider that reports no numbers (it has shown one name). */
static struct sbx_inotab *remote_tab(size_t max)
{
	struct sbx_inotab *t = sbx_inotab_new(max);
	(void)ino(t, "/l/fs");
	return t;
}

static nlink_t nlink(struct sbx_inotab *t, const char *path)
{
	return look(t, path, S_IFREG).st_nlink;
}

START_TEST(unseen_names_keep_the_path_hash)
{
	struct sbx_inotab *t = remote_tab(0);
	ck_assert_uint_eq(ino(t, "/l/fs/a"), sbx_inotab_hash("/l/fs/a"));
	ck_assert_uint_eq(ino(NULL, "/l/fs/a"), sbx_inotab_hash("/l/fs/a"));
	ck_assert_uint_ne(ino(t, "/l/fs/a"), ino(t, "/l/fs/b"));
	ck_assert(ino(t, "/l/fs/a") & (1ULL << 63));
	/* A provider's own number (local) and link count are left alone. */
	struct stat st;
	memset(&st, 0, sizeof(st));
	st.st_mode = S_IFREG | 0644;
	st.st_ino = 42;
	st.st_nlink = 3;
	sbx_inotab_link(t, "/l/fs/a", "/l/fs/b");
	sbx_inotab_stat(t, "/l/fs/a", &st);
	ck_assert_uint_eq(st.st_ino, 42);
	ck_assert_uint_eq(st.st_nlink, 3);
	ck_assert_uint_eq(sbx_inotab_count(t), 2);
	sbx_inotab_free(t);
	sbx_inotab_free(NULL);
	/* A provider with its own numbers (local): the table keeps nothing. */
	t = sbx_inotab_new(0);
	sbx_inotab_stat(t, "/l/fs/a", &st);
	sbx_inotab_rename(t, "/l/fs/a", "/l/fs/b", 0);
	sbx_inotab_link(t, "/l/fs/b", "/l/fs/c");
	ck_assert_uint_eq(sbx_inotab_count(t), 0);
	sbx_inotab_free(t);
}
END_TEST

START_TEST(rename_keeps_the_number)
{
	struct sbx_inotab *t = remote_tab(0);
	ino_t a = ino(t, "/l/fs/a"), b = ino(t, "/l/fs/b");
	sbx_inotab_rename(t, "/l/fs/a", "/l/fs/b", 0); /* b replaced */
	ck_assert_uint_eq(ino(t, "/l/fs/b"), a);
	/* A file made at a later is not the one that left, nor the replaced one. */
	ck_assert_uint_ne(ino(t, "/l/fs/a"), a);
	ck_assert_uint_ne(ino(t, "/l/fs/a"), b);
	/* Back and forth: the number follows, and a third name leaves none behind twice. */
	sbx_inotab_rename(t, "/l/fs/b", "/l/fs/c", 0);
	sbx_inotab_rename(t, "/l/fs/c", "/l/fs/a", 0);
	ck_assert_uint_eq(ino(t, "/l/fs/a"), a);
	ck_assert_uint_ne(ino(t, "/l/fs/b"), a);
	ck_assert_uint_ne(ino(t, "/l/fs/c"), a);
	ck_assert_uint_ne(ino(t, "/l/fs/b"), ino(t, "/l/fs/c"));
	/* After an unlink of the sole name, a new file there may take the number again. */
	sbx_inotab_unlink(t, "/l/fs/a");
	ck_assert_uint_eq(ino(t, "/l/fs/a"), a);
	sbx_inotab_free(t);
}
END_TEST

START_TEST(rename_of_a_directory_prefix)
{
	struct sbx_inotab *t = remote_tab(0);
	ino_t d = look(t, "/l/fs/d", S_IFDIR).st_ino;
	ino_t x = ino(t, "/l/fs/d/x"), y = ino(t, "/l/fs/d/sub/y");
	ino_t dx = ino(t, "/l/fs/dx"); /* shares the prefix's bytes, not its directory */
	sbx_inotab_rename(t, "/l/fs/d/x", "/l/fs/d/x2", 0);
	ino_t x2 = ino(t, "/l/fs/d/x2");
	ck_assert_uint_eq(x2, x);
	sbx_inotab_rename(t, "/l/fs/d", "/l/fs/e", 0);
	ck_assert_uint_eq(look(t, "/l/fs/e", S_IFDIR).st_ino, d);
	ck_assert_uint_eq(ino(t, "/l/fs/e/x2"), x);    /* an entry the table held, moved */
	ck_assert_uint_eq(ino(t, "/l/fs/e/sub/y"), y); /* a name it never held, derived */
	ck_assert_uint_eq(ino(t, "/l/fs/dx"), dx);
	/* A new d and what is made in it share nothing with e's. */
	ck_assert_uint_ne(look(t, "/l/fs/d", S_IFDIR).st_ino, d);
	ck_assert_uint_ne(ino(t, "/l/fs/d/x"), x);
	ck_assert_uint_ne(ino(t, "/l/fs/d/sub/y"), y);
	ck_assert_uint_ne(ino(t, "/l/fs/d/x2"), x);
	/* Into another directory, deeper. */
	sbx_inotab_rename(t, "/l/fs/e", "/l/fs/p/q/e", 0);
	ck_assert_uint_eq(ino(t, "/l/fs/p/q/e/x2"), x);
	ck_assert_uint_eq(ino(t, "/l/fs/p/q/e/sub/y"), y);
	/* Exchange: each side takes the other's numbers, subtrees too. */
	ino_t f = look(t, "/l/fs/f", S_IFDIR).st_ino, fz = ino(t, "/l/fs/f/z");
	sbx_inotab_rename(t, "/l/fs/p/q/e", "/l/fs/f", 1);
	ck_assert_uint_eq(look(t, "/l/fs/f", S_IFDIR).st_ino, d);
	ck_assert_uint_eq(ino(t, "/l/fs/f/x2"), x);
	ck_assert_uint_eq(look(t, "/l/fs/p/q/e", S_IFDIR).st_ino, f);
	ck_assert_uint_eq(ino(t, "/l/fs/p/q/e/z"), fz);
	sbx_inotab_free(t);
}
END_TEST

START_TEST(link_and_unlink_counts)
{
	struct sbx_inotab *t = remote_tab(0);
	ino_t a = ino(t, "/l/fs/a");
	sbx_inotab_link(t, "/l/fs/a", "/l/fs/b");
	ck_assert_uint_eq(ino(t, "/l/fs/b"), a);
	ck_assert_uint_eq(nlink(t, "/l/fs/a"), 2);
	ck_assert_uint_eq(nlink(t, "/l/fs/b"), 2);
	sbx_inotab_link(t, "/l/fs/b", "/l/fs/sub/c");
	ck_assert_uint_eq(ino(t, "/l/fs/sub/c"), a);
	ck_assert_uint_eq(nlink(t, "/l/fs/a"), 3);
	/* A provider that counts more than the mount made wins. */
	struct stat st = look(t, "/l/fs/a", S_IFREG);
	st.st_ino = 0;
	st.st_nlink = 5;
	sbx_inotab_stat(t, "/l/fs/a", &st);
	ck_assert_uint_eq(st.st_nlink, 5);
	/* The other names, for a change through one of them. */
	char **others;
	ck_assert_uint_eq(sbx_inotab_others(t, "/l/fs/b", &others), 2);
	ck_assert_str_eq(others[0], "/l/fs/a");
	ck_assert_str_eq(others[1], "/l/fs/sub/c");
	free(others[0]);
	free(others[1]);
	free(others);
	ck_assert_uint_eq(sbx_inotab_others(t, "/l/fs/zzz", &others), 0);
	ck_assert_ptr_null(others);
	/* Renaming one name keeps the share. */
	sbx_inotab_rename(t, "/l/fs/sub/c", "/l/fs/c", 0);
	ck_assert_uint_eq(ino(t, "/l/fs/c"), a);
	ck_assert_uint_eq(nlink(t, "/l/fs/b"), 3);
	ck_assert_uint_ne(ino(t, "/l/fs/sub/c"), a);
	/* unlink: the count drops, the number of the name left is its own. */
	sbx_inotab_unlink(t, "/l/fs/a");
	ck_assert_uint_eq(nlink(t, "/l/fs/b"), 2);
	ck_assert_uint_eq(nlink(t, "/l/fs/c"), 2);
	ck_assert_uint_ne(ino(t, "/l/fs/a"), a);
	ck_assert_uint_eq(nlink(t, "/l/fs/a"), 1);
	/* A rename over a name of the link drops one as well. */
	sbx_inotab_rename(t, "/l/fs/x", "/l/fs/c", 0);
	ck_assert_uint_eq(nlink(t, "/l/fs/b"), 1);
	ck_assert_uint_eq(ino(t, "/l/fs/b"), a);
	ck_assert_uint_ne(ino(t, "/l/fs/c"), a);
	ck_assert_uint_eq(sbx_inotab_others(t, "/l/fs/b", &others), 0);
	/* A directory where a linked name was (a run replaced it): it drops its share. */
	sbx_inotab_link(t, "/l/fs/b", "/l/fs/g");
	ck_assert_uint_eq(nlink(t, "/l/fs/b"), 2);
	ck_assert_uint_ne(look(t, "/l/fs/g", S_IFDIR).st_ino, a);
	ck_assert_uint_eq(look(t, "/l/fs/g", S_IFDIR).st_nlink, 2);
	ck_assert_uint_eq(nlink(t, "/l/fs/b"), 1);
	sbx_inotab_free(t);
}
END_TEST

START_TEST(bounded_size)
{
	struct sbx_inotab *t = remote_tab(8);
	char from[64], to[64];
	for (int i = 0; i < 100; i++) {
		snprintf(from, sizeof(from), "/l/fs/f%d", i);
		snprintf(to, sizeof(to), "/l/fs/t%d", i);
		sbx_inotab_rename(t, from, to, 0);
		ck_assert_uint_le(sbx_inotab_count(t), 8);
	}
	/* The newest are kept. */
	ck_assert_uint_eq(ino(t, "/l/fs/t99"), sbx_inotab_hash("/l/fs/f99"));
	/* The oldest fell back to their path hash. */
	ck_assert_uint_eq(ino(t, "/l/fs/t0"), sbx_inotab_hash("/l/fs/t0"));
	sbx_inotab_free(t);
	/* A link whose first name ages out: both names still show one number, the count drops. */
	t = remote_tab(3);
	ino_t a = ino(t, "/l/fs/a");
	sbx_inotab_link(t, "/l/fs/a", "/l/fs/b");
	sbx_inotab_link(t, "/l/fs/c", "/l/fs/d");
	ck_assert_uint_eq(sbx_inotab_count(t), 3);
	ck_assert_uint_eq(ino(t, "/l/fs/a"), a);
	ck_assert_uint_eq(ino(t, "/l/fs/b"), a);
	ck_assert_uint_eq(nlink(t, "/l/fs/b"), 1);
	ck_assert_uint_eq(nlink(t, "/l/fs/d"), 2);
	sbx_inotab_free(t);
}
END_TEST

/* An rsync of a big tree renames every file once (its temporary name away): a full table
 * must not be walked per rename (65,536 names x 200,000 renames would take minutes), and
 * the one directory rename that carries it all must not copy its list per name (under
 * ASan, where realloc always copies, that took 95 s and timed CI out). */
#define RENAMES 200000
START_TEST(file_renames_do_not_walk_the_table)
{
	struct sbx_inotab *t = remote_tab(0);
	char from[64], to[64];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < RENAMES; i++) {
		snprintf(from, sizeof(from), "/l/fs/tree/d%d/.f%d.tmp", i % 100, i);
		snprintf(to, sizeof(to), "/l/fs/tree/d%d/f%d", i % 100, i);
		sbx_inotab_rename(t, from, to, 0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_uint_eq(sbx_inotab_count(t), SBX_INOTAB_MAX);
	snprintf(from, sizeof(from), "/l/fs/tree/d%d/.f%d.tmp", (RENAMES - 1) % 100, RENAMES - 1);
	snprintf(to, sizeof(to), "/l/fs/tree/d%d/f%d", (RENAMES - 1) % 100, RENAMES - 1);
	ck_assert_uint_eq(ino(t, to), sbx_inotab_hash(from));
	/* A directory rename above them all still carries them (the one walk). */
	sbx_inotab_rename(t, "/l/fs/tree", "/l/fs/moved", 0);
	snprintf(to, sizeof(to), "/l/fs/moved/d%d/f%d", (RENAMES - 1) % 100, RENAMES - 1);
	ck_assert_uint_eq(ino(t, to), sbx_inotab_hash(from));
	double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	ck_assert_msg(s < 30, "%d renames took %.1f s", RENAMES, s);
	sbx_inotab_free(t);
}
END_TEST

static void *hammer(void *arg)
{
	struct sbx_inotab *t = arg;
	char a[64], b[64];
	for (int i = 0; i < 2000; i++) {
		snprintf(a, sizeof(a), "/l/fs/d%d/x", i % 13);
		snprintf(b, sizeof(b), "/l/fs/d%d/x", (i + 1) % 13);
		if (i % 3 == 0)
			sbx_inotab_link(t, a, b);
		else if (i % 3 == 1)
			sbx_inotab_rename(t, a, b, 0);
		else
			sbx_inotab_unlink(t, a);
		(void)ino(t, b);
	}
	return NULL;
}

START_TEST(threads_share_a_table)
{
	struct sbx_inotab *t = remote_tab(50);
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, hammer, t);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	ck_assert_uint_le(sbx_inotab_count(t), 50);
	sbx_inotab_free(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("inotab");
	TCase *tc = tcase_create("inotab");
	tcase_add_test(tc, unseen_names_keep_the_path_hash);
	tcase_add_test(tc, rename_keeps_the_number);
	tcase_add_test(tc, rename_of_a_directory_prefix);
	tcase_add_test(tc, link_and_unlink_counts);
	tcase_add_test(tc, bounded_size);
	tcase_add_test(tc, file_renames_do_not_walk_the_table);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, threads_share_a_table);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
