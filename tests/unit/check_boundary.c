/*
 * check_boundary — the symlink rewrite fs/ shows the host (src/linkmap.c),
 * against a small in-memory tree: every answer climbs no higher than fs/
 * and lands where the sandbox's own resolution would; and who may use the
 * mount (src/access.c).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "access.h"
#include "linkmap.h"

/* The sandbox: directories and links (path, target); anything else is missing. */
static const char *const dirs[] = {"/root", "/root/sub", "/x", "/x/y", "/x/y/z", "/tmp", NULL};
static const char *const links[][2] = {
    {"/root/up", "/"},	    {"/root/deep", "/x/y/z"}, {"/root/rel", "sub"},
    {"/root/loop", "loop"}, {"/x/y/back", "../.."},   {NULL, NULL},
};

static int t_lstat(void *ctx, const char *path, mode_t *mode)
{
	(void)ctx;
	for (int i = 0; dirs[i]; i++)
		if (!strcmp(dirs[i], path)) {
			*mode = S_IFDIR | 0755;
			return 0;
		}
	for (int i = 0; links[i][0]; i++)
		if (!strcmp(links[i][0], path)) {
			*mode = S_IFLNK | 0777;
			return 0;
		}
	return -ENOENT;
}

static int t_readlink(void *ctx, const char *path, char *buf, size_t size)
{
	(void)ctx;
	for (int i = 0; links[i][0]; i++)
		if (!strcmp(links[i][0], path)) {
			snprintf(buf, size, "%s", links[i][1]);
			return 0;
		}
	return -EINVAL;
}

static const struct sbx_link_io io = {t_lstat, t_readlink, NULL};

static const char *rw(const char *link, const char *target)
{
	static char out[4096];
	ck_assert_int_eq(sbx_link_rewrite(link, target, &io, out, sizeof(out)), 0);
	return out;
}

START_TEST(relative_escape_stays_at_root)
{
	ck_assert_str_eq(rw("/root/rel", "../../../../../../tmp/victim"), "../tmp/victim");
	ck_assert_str_eq(rw("/a", "../../etc/passwd"), "etc/passwd");
	ck_assert_str_eq(rw("/root/x", "../.."), "..");
	ck_assert_str_eq(rw("/top", ".."), ".");
}
END_TEST

START_TEST(absolute_is_the_sandboxs)
{
	ck_assert_str_eq(rw("/root/abs", "/etc/passwd"), "../etc/passwd");
	ck_assert_str_eq(rw("/a/b/c/l", "/"), "../../..");
	ck_assert_str_eq(rw("/l", "/usr/lib"), "usr/lib");
	ck_assert_str_eq(rw("/root/p", "/proc/self/root/etc/shadow"),
			 "../proc/self/root/etc/shadow");
}
END_TEST

START_TEST(safe_ones_kept_others_shortest)
{
	/* what the host follows exactly as the sandbox does is left byte for byte */
	ck_assert_str_eq(rw("/root/l", "sub/file"), "sub/file");
	ck_assert_str_eq(rw("/root/l", "./sub/./file"), "./sub/./file");
	ck_assert_str_eq(rw("/usr/bin/l", "../lib/x"), "../lib/x");
	ck_assert_str_eq(rw("/usr/bin/l", "../../x"), "../../x");
	/* the rest is the shortest path from the link's directory */
	ck_assert_str_eq(rw("/root/l", "sub/../file"), "file");
	ck_assert_str_eq(rw("/usr/bin/l", "/usr/lib/x"), "../lib/x");
	ck_assert_str_eq(rw("/usr/bin/l", "/usr/bin"), ".");
	ck_assert_str_eq(rw("/usr/bin/l", "/usr/binx/y"), "../binx/y");
}
END_TEST

START_TEST(dotdot_after_a_link_is_walked)
{
	/* /root/up -> "/": the sandbox sees /root/up/.. as "/" (not /root) */
	ck_assert_str_eq(rw("/root/l", "up/../x"), "../x");
	ck_assert_str_eq(rw("/root/l", "up/../../../x"), "../x");
	/* /root/deep -> /x/y/z: deep/../.. is /x */
	ck_assert_str_eq(rw("/root/l", "deep/../../q"), "../x/q");
	/* a relative link, and a link in the middle of a link's target */
	ck_assert_str_eq(rw("/root/l", "rel/../f"), "f");
	ck_assert_str_eq(rw("/root/l", "/x/y/back/../tmp"), "../tmp");
}
END_TEST

START_TEST(loops_and_limits)
{
	char out[8];
	ck_assert_int_eq(sbx_link_rewrite("/root/l", "loop/..", &io, out, 64), -ELOOP);
	ck_assert_int_eq(sbx_link_rewrite("/a/b/c/d/l", "/etc/passwd", &io, out, sizeof(out)),
			 -ENAMETOOLONG);
}
END_TEST

START_TEST(owner_only_unless_shared)
{
	gid_t groups[] = {5, 77};
	sbx_access_set(1000, SBX_NO_GROUP);
	ck_assert(sbx_access_allows(1000, 1000, NULL, 0));
	ck_assert(sbx_access_allows(0, 0, NULL, 0));
	ck_assert(!sbx_access_allows(1001, 1000, groups, 2));
	ck_assert_uint_eq(sbx_access_mode(S_IFREG | 0666), S_IFREG | 0600);
	ck_assert_uint_eq(sbx_access_mode(S_IFDIR | 0755), S_IFDIR | 0700);
	ck_assert_uint_eq(sbx_access_mode(S_IFREG | 0222), S_IFREG | 0200);
	sbx_access_set(1000, 77);
	ck_assert(sbx_access_allows(1001, 1001, groups, 2));
	ck_assert(sbx_access_allows(1001, 77, NULL, 0));
	ck_assert(!sbx_access_allows(1001, 1001, groups, 1));
	ck_assert_uint_eq(sbx_access_mode(S_IFREG | 0644), S_IFREG | 0660);
	ck_assert_uint_eq(sbx_access_gid(), 77);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("boundary");
	TCase *tc = tcase_create("rewrite");
	tcase_add_test(tc, relative_escape_stays_at_root);
	tcase_add_test(tc, absolute_is_the_sandboxs);
	tcase_add_test(tc, safe_ones_kept_others_shortest);
	tcase_add_test(tc, dotdot_after_a_link_is_walked);
	tcase_add_test(tc, loops_and_limits);
	suite_add_tcase(s, tc);
	tc = tcase_create("access");
	tcase_add_test(tc, owner_only_unless_shared);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
