/*
 * check_local_resolve — the local provider's path resolution (resolve.c):
 * the user-space walk that stands in for openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS) where the kernel (before 5.6) or valgrind lacks
 * it. No lease and no root needed: a tree of files and symlinks in a
 * temporary directory plays the lease's root.
 *
 * The walk is checked against what it promises (nothing resolves outside
 * the root, ".." clamps, loops give ELOOP, O_CREAT|O_EXCL...) and against
 * openat2 itself, on two identical trees, for a table of paths and flags.
 * The tests that need openat2 to fail make it fail with a seccomp filter
 * in their forked process (with CK_FORK=no they do nothing: the filter,
 * and the fallback remembered process-wide, would outlive them).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/pathmax.h"
#include "local/local.h"
#include "openat2_off.h"

static char base[] = "/tmp/check_local_resolve.XXXXXX";
static char outside[128]; /* a host file outside both trees */
static char tree_a[128], tree_b[128];

#define WHERE_MAX (PATH_MAX + 16) /* what where() writes */

static void put(const char *root, const char *rel, const char *text)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

static void dir(const char *root, const char *rel)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	ck_assert_msg(mkdir(path, 0755) == 0, "%s: %s", path, strerror(errno));
}

static void ln(const char *root, const char *target, const char *rel)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	ck_assert_msg(symlink(target, path) == 0, "%s: %s", path, strerror(errno));
}

/* The lease-like tree every test works on. */
static void make_tree(const char *root)
{
	char name[32], target[32];
	dir(root, "");
	dir(root, "etc");
	dir(root, "dir");
	dir(root, "dir/sub");
	put(root, "etc/hostname", "inside\n");
	put(root, "etc/passwd", "inside-passwd\n");
	put(root, "dir/file", "file\n");
	put(root, "notdir", "x");
	ln(root, "/etc/hostname", "abs");
	ln(root, "../../../../etc/hostname", "dir/sub/up");
	ln(root, "../../..", "dotdot");
	ln(root, "/dir", "dirlink");
	ln(root, "dir", "reldirlink");
	ln(root, "sub/../file", "dir/relfile");
	ln(root, "loop2", "loop1");
	ln(root, "loop1", "loop2");
	ln(root, "self", "self");
	ln(root, "/dir/created", "dangling");
	ln(root, "/etc/passwd", "passwd");
	ln(root, outside, "host");
	ln(root, "/", "rootlink");
	/* chain0 -> chain1 -> ... -> chain40 -> /etc/hostname: 41 links from chain0 */
	for (int i = 0; i <= 40; i++) {
		snprintf(name, sizeof(name), "chain%d", i);
		snprintf(target, sizeof(target), i == 40 ? "/etc/hostname" : "chain%d", i + 1);
		ln(root, target, name);
	}
}

static int root_fd(const char *root)
{
	int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "%s: %s", root, strerror(errno));
	return fd;
}

/* The contents of an open file (up to 255 bytes), or "" when unreadable. */
static const char *slurp(int fd)
{
	static char buf[256];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* Where fd is, relative to root ("/" for the root itself). */
static void where(int fd, const char *root, char *out, size_t size)
{
	char proc[64], path[PATH_MAX];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(proc, path, sizeof(path) - 1);
	ck_assert_int_gt(n, 0);
	path[n] = '\0';
	char *tmp = strstr(path, "/#"); /* an O_TMPFILE: "dir/#12345 (deleted)" */
	if (tmp && strstr(tmp, " (deleted)"))
		strcpy(tmp, "/#tmpfile");
	size_t rl = strlen(root);
	if (!strncmp(path, root, rl) && (path[rl] == '/' || !path[rl]))
		snprintf(out, size, "%s", path[rl] ? path + rl : "/");
	else
		snprintf(out, size, "OUTSIDE:%s", path);
}

static void rm_tree(const char *root)
{
	char cmd[PATH_MAX + 32];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", root);
}

/* Fresh trees (a failed test does not run its teardown). */
static void setup_trees(void)
{
	rm_tree(tree_a);
	rm_tree(tree_b);
	make_tree(tree_a);
	make_tree(tree_b);
}

static void teardown_trees(void)
{
	rm_tree(tree_a);
	rm_tree(tree_b);
}

/* ---- what the walk promises ------------------------------------------------ */

/* Opens path in tree A with the walk and asserts it reads text. */
static void walk_reads(const char *path, const char *text)
{
	int rootfd = root_fd(tree_a);
	int fd = lcl_resolve_walk(rootfd, path, O_RDONLY, 0);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(-fd));
	ck_assert_str_eq(slurp(fd), text);
	close(fd);
	close(rootfd);
}

static int walk_errno(const char *path, int flags)
{
	int rootfd = root_fd(tree_a);
	int fd = lcl_resolve_walk(rootfd, path, flags, 0644);
	if (fd >= 0)
		close(fd);
	close(rootfd);
	return fd >= 0 ? 0 : fd;
}

START_TEST(test_absolute_link_stays_inside)
{
	walk_reads("/abs", "inside\n");
	walk_reads("abs", "inside\n");
	walk_reads("/dirlink/file", "file\n");
	walk_reads("/rootlink/rootlink/etc/hostname", "inside\n");
	walk_reads("/dir/relfile", "file\n");
}
END_TEST

START_TEST(test_dotdot_clamps)
{
	char at[WHERE_MAX];
	int rootfd = root_fd(tree_a);
	const char *paths[] = {"/../../..", "..", "/dotdot", "/dir/sub/../../../..", "/dotdot/.."};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		int fd = lcl_resolve_walk(rootfd, paths[i], O_PATH | O_DIRECTORY, 0);
		ck_assert_msg(fd >= 0, "%s: %s", paths[i], strerror(-fd));
		where(fd, tree_a, at, sizeof(at));
		ck_assert_msg(!strcmp(at, "/"), "%s is at %s", paths[i], at);
		close(fd);
	}
	close(rootfd);
	walk_reads("/../../../etc/hostname", "inside\n");
	walk_reads("/dir/sub/up", "inside\n"); /* ../../../../etc/hostname from /dir/sub */
	walk_reads("/dotdot/etc/passwd", "inside-passwd\n");
}
END_TEST

START_TEST(test_loops)
{
	ck_assert_int_eq(walk_errno("/loop1", O_RDONLY), -ELOOP);
	ck_assert_int_eq(walk_errno("/self", O_RDONLY), -ELOOP);
	ck_assert_int_eq(walk_errno("/self/x", O_PATH), -ELOOP);
	ck_assert_int_eq(walk_errno("/loop1", O_WRONLY | O_CREAT), -ELOOP);
	/* 40 links are followed, the 41st is one too many (the kernel's MAXSYMLINKS) */
	walk_reads("/chain1", "inside\n");
	ck_assert_int_eq(walk_errno("/chain0", O_RDONLY), -ELOOP);
	/* not following the last link is no loop */
	ck_assert_int_eq(walk_errno("/loop1", O_PATH | O_NOFOLLOW), 0);
	ck_assert_int_eq(walk_errno("/loop1", O_RDONLY | O_NOFOLLOW), -ELOOP);
}
END_TEST

START_TEST(test_host_paths_resolve_inside)
{
	/* The host's /etc/passwd and a host file outside the tree: never reached. */
	walk_reads("/passwd", "inside-passwd\n");
	ck_assert_int_eq(access(outside, R_OK), 0);
	ck_assert_int_eq(walk_errno("/host", O_RDONLY), -ENOENT);
	ck_assert_int_eq(walk_errno(outside, O_RDONLY), -ENOENT);
	/* Creating through a link to a host path creates inside, or fails. */
	ck_assert_int_eq(walk_errno("/host", O_WRONLY | O_CREAT), -ENOENT);
	ck_assert_int_eq(walk_errno("/dangling", O_WRONLY | O_CREAT), 0);
	char in[PATH_MAX];
	snprintf(in, sizeof(in), "%s/dir/created", tree_a);
	ck_assert_int_eq(access(in, F_OK), 0);
}
END_TEST

START_TEST(test_create_flags)
{
	ck_assert_int_eq(walk_errno("/etc/hostname", O_WRONLY | O_CREAT | O_EXCL), -EEXIST);
	ck_assert_int_eq(walk_errno("/abs", O_WRONLY | O_CREAT | O_EXCL), -EEXIST);
	ck_assert_int_eq(walk_errno("/dangling", O_WRONLY | O_CREAT | O_EXCL), -EEXIST);
	ck_assert_int_eq(walk_errno("/dir/new", O_WRONLY | O_CREAT | O_EXCL), 0);
	ck_assert_int_eq(walk_errno("/dir/new", O_WRONLY | O_CREAT | O_EXCL), -EEXIST);
	ck_assert_int_eq(walk_errno("/newdir/", O_WRONLY | O_CREAT), -EISDIR);
	ck_assert_int_eq(walk_errno("/notdir/x", O_RDONLY), -ENOTDIR);
	ck_assert_int_eq(walk_errno("/notdir", O_RDONLY | O_DIRECTORY), -ENOTDIR);
	ck_assert_int_eq(walk_errno("/etc/hostname/", O_RDONLY), -ENOTDIR);
	ck_assert_int_eq(walk_errno("/nosuch/x", O_WRONLY | O_CREAT), -ENOENT);
	ck_assert_int_eq(walk_errno("", O_RDONLY), -ENOENT);
	/* the mode reaches the new file; O_TMPFILE makes a nameless one in a directory */
	int rootfd = root_fd(tree_a);
	int fd = lcl_resolve_walk(rootfd, "/dirlink/m", O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	close(fd);
	fd = lcl_resolve_walk(rootfd, "/reldirlink", O_TMPFILE | O_RDWR, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	close(rootfd);
}
END_TEST

/* ---- the same answers as openat2 ------------------------------------------ */

struct resolve_case {
	const char *path;
	int flags;
};

static const char *const paths[] = {
    "/",
    "",
    ".",
    "..",
    "/..",
    "/../../..",
    "//etc//hostname",
    "etc/hostname",
    "/etc/hostname/",
    "/abs",
    "/abs/",
    "/dir/sub/up",
    "/dir/relfile",
    "/dirlink",
    "/dirlink/",
    "/dirlink/file",
    "/reldirlink/../etc/hostname",
    "/dotdot",
    "/dotdot/etc/hostname",
    "/dotdot/..",
    "/loop1",
    "/loop1/",
    "/self/x",
    "/chain0",
    /*
     * Not "/chain1" (exactly 40 links, the limit): under load this kernel
     * once answered ELOOP for it (a path walk restarted out of RCU mode
     * seems to count links again); test_loops checks the walk reads it.
     */
    "/dangling",
    "/dangling/",
    "/passwd",
    "/host",
    "/nosuch",
    "/nosuch/x",
    "/notdir/x",
    "/notdir/..",
    "/dir/./sub/../sub/.",
    "/rootlink",
    "/rootlink/..",
    "/etc/hostname/.",
    "/dir/sub/../../abs",
};

static const int flag_sets[] = {
    O_RDONLY,
    O_PATH,
    O_PATH | O_NOFOLLOW,
    O_RDONLY | O_NOFOLLOW,
    O_RDONLY | O_DIRECTORY,
    O_PATH | O_DIRECTORY,
    O_PATH | O_DIRECTORY | O_NOFOLLOW,
    O_WRONLY,
    O_WRONLY | O_CREAT,
    O_RDWR | O_CREAT | O_EXCL,
    O_WRONLY | O_CREAT | O_NOFOLLOW,
    O_WRONLY | O_CREAT | O_TRUNC,
    O_TMPFILE | O_RDWR,
};

/* "ok <where>" or "errno <name>" for one open in root. */
static void outcome(int fd, const char *root, char *out, size_t size)
{
	char at[WHERE_MAX];
	if (fd < 0) {
		snprintf(out, size, "error %s", strerrorname_np(-fd));
		return;
	}
	where(fd, root, at, sizeof(at));
	snprintf(out, size, "ok %s flags %o", at, fcntl(fd, F_GETFL) & (O_ACCMODE | O_PATH));
	close(fd);
}

START_TEST(test_same_as_openat2)
{
	int a = root_fd(tree_a), b = root_fd(tree_b);
	char want[WHERE_MAX + 32], got[WHERE_MAX + 32];
	int n = 0;
	if (kernel_open_in_root(a, "/", O_PATH, 0) == -ENOSYS) {
		fprintf(stderr, "check_local_resolve: no openat2 here; comparison skipped\n");
		return;
	}
	/* Creating cases change the trees alike: A with the kernel, B with the walk. */
	for (size_t f = 0; f < sizeof(flag_sets) / sizeof(flag_sets[0]); f++)
		for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++, n++) {
			int fl = flag_sets[f];
			outcome(kernel_open_in_root(a, paths[p], fl, 0640), tree_a, want,
				sizeof(want));
			outcome(lcl_resolve_walk(b, paths[p], fl, 0640), tree_b, got, sizeof(got));
			ck_assert_msg(!strcmp(want, got), "%s flags %#o: openat2 %s, walk %s",
				      paths[p], fl, want, got);
		}
	/* The host's own root: procfs links ("self" is ordinary, fd/N is magic). */
	const char *procs[] = {"/proc/self/status", "/proc/mounts",    "/proc/self/fd/0",
			       "/proc/self/exe",    "/proc/self/cwd/", "/proc/self/root/etc"};
	int root = root_fd("/");
	for (size_t p = 0; p < sizeof(procs) / sizeof(procs[0]); p++, n++) {
		outcome(kernel_open_in_root(root, procs[p], O_RDONLY, 0), "", want, sizeof(want));
		outcome(lcl_resolve_walk(root, procs[p], O_RDONLY, 0), "", got, sizeof(got));
		ck_assert_msg(!strcmp(want, got), "%s: openat2 %s, walk %s", procs[p], want, got);
	}
	fprintf(stderr, "check_local_resolve: %d cases as openat2\n", n);
	close(root);
	close(a);
	close(b);
}
END_TEST

/* ---- when openat2 is missing ----------------------------------------------- */

START_TEST(test_enosys_falls_back)
{
	if (!refuse_openat2(ENOSYS))
		return;
	int rootfd = root_fd(tree_a);
	for (int i = 0; i < 2; i++) { /* the second call goes straight to the walk */
		int fd = lcl_resolve_open(rootfd, "/abs", O_RDONLY, 0);
		ck_assert_msg(fd >= 0, "%s", strerror(-fd));
		ck_assert_str_eq(slurp(fd), "inside\n");
		close(fd);
	}
	ck_assert_int_eq(lcl_resolve_open(rootfd, "/host", O_RDONLY, 0), -ENOENT);
	ck_assert_int_eq(lcl_resolve_open(rootfd, "/loop1", O_RDONLY, 0), -ELOOP);
	close(rootfd);
}
END_TEST

START_TEST(test_other_errors_do_not_fall_back)
{
	if (!refuse_openat2(EPERM))
		return;
	int rootfd = root_fd(tree_a);
	ck_assert_int_eq(lcl_resolve_open(rootfd, "/abs", O_RDONLY, 0), -EPERM);
	close(rootfd);
}
END_TEST

START_TEST(test_env_forces_walk)
{
	if (!refuse_openat2(EPERM)) /* would fail every call that tried openat2 */
		return;
	int rootfd = root_fd(tree_a);
	setenv("SBXFS_NO_OPENAT2", "1", 1);
	int fd = lcl_resolve_open(rootfd, "/dirlink/file", O_RDONLY, 0);
	ck_assert_msg(fd >= 0, "%s", strerror(-fd));
	ck_assert_str_eq(slurp(fd), "file\n");
	close(fd);
	close(rootfd);
}
END_TEST

/*
 * Paths past PATH_MAX (fs/ reaches them relative to a deep directory):
 * openat2 refuses them whole, so lcl_resolve_open walks them, and the
 * boundary holds there too. 20 directories of 255 bytes are made one
 * name at a time; at the bottom, links to "/etc/hostname", to 40 ".."
 * and to the host file.
 */
START_TEST(test_long_paths)
{
	char name[256], *path = malloc(SBX_FS_PATH_MAX + 64), *p = path;
	int rootfd = root_fd(tree_a), dfd = dup(rootfd), fd;
	memset(name, 'd', 255);
	name[255] = '\0';
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(mkdirat(dfd, name, 0755), 0);
		int next = openat(dfd, name, O_PATH | O_DIRECTORY);
		ck_assert_int_ge(next, 0);
		close(dfd);
		dfd = next;
		p += sprintf(p, "/%s", name);
	}
	ck_assert_int_eq(symlinkat("/etc/hostname", dfd, "abs"), 0);
	ck_assert_int_eq(symlinkat("../../../../../../../../../../../../../../../../../../../../"
				   "../../../../../../../../../../../../../../../../../../../../"
				   "etc/passwd",
				   dfd, "up"),
			 0);
	ck_assert_int_eq(symlinkat(outside, dfd, "host"), 0);
	close(dfd);
	ck_assert_int_gt(strlen(path), PATH_MAX);

	strcpy(p, "/abs");
	fd = lcl_resolve_open(rootfd, path, O_RDONLY, 0);
	ck_assert_msg(fd >= 0, "long path through a link to /etc/hostname: %s", strerror(-fd));
	ck_assert_str_eq(slurp(fd), "inside\n");
	close(fd);
	strcpy(p, "/up");
	fd = lcl_resolve_open(rootfd, path, O_RDONLY, 0);
	ck_assert_msg(fd >= 0, "long path through 40 ..: %s", strerror(-fd));
	ck_assert_str_eq(slurp(fd), "inside-passwd\n");
	close(fd);
	strcpy(p, "/host");
	ck_assert_int_eq(lcl_resolve_open(rootfd, path, O_RDONLY, 0), -ENOENT);
	strcpy(p, "/new");
	fd = lcl_resolve_open(rootfd, path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_msg(fd >= 0, "create at a long path: %s", strerror(-fd));
	close(fd);
	/* Past SBX_FS_PATH_MAX: refused whole. */
	memset(path, '/', SBX_FS_PATH_MAX);
	path[SBX_FS_PATH_MAX] = '\0';
	ck_assert_int_eq(lcl_resolve_open(rootfd, path, O_RDONLY, 0), -ENAMETOOLONG);
	close(rootfd);
	free(path);
}
END_TEST

int main(void)
{
	if (!mkdtemp(base))
		return 99;
	snprintf(outside, sizeof(outside), "%s/outside", base);
	snprintf(tree_a, sizeof(tree_a), "%s/a", base);
	snprintf(tree_b, sizeof(tree_b), "%s/b", base);
	FILE *f = fopen(outside, "w");
	if (!f)
		return 99;
	fputs("host secret\n", f);
	fclose(f);
	unsetenv("SBXFS_NO_OPENAT2");

	Suite *s = suite_create("local_resolve");
	TCase *tc = tcase_create("walk");
	tcase_add_checked_fixture(tc, setup_trees, teardown_trees);
	tcase_add_test(tc, test_absolute_link_stays_inside);
	tcase_add_test(tc, test_dotdot_clamps);
	tcase_add_test(tc, test_loops);
	tcase_add_test(tc, test_host_paths_resolve_inside);
	tcase_add_test(tc, test_create_flags);
	tcase_add_test(tc, test_same_as_openat2);
	tcase_add_test(tc, test_enosys_falls_back);
	tcase_add_test(tc, test_other_errors_do_not_fall_back);
	tcase_add_test(tc, test_env_forces_walk);
	tcase_add_test(tc, test_long_paths);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	rm_tree(tree_a);
	rm_tree(tree_b);
	unlink(outside);
	rmdir(base);
	return failed ? 1 : 0;
}
