/*
 * check_readmany — unit tests for the two read_many reply parsers: the
 * Daytona bulk-download collector (providers/daytona/readmany.c) and the
 * E2B script and its output parser (providers/e2b/readmany.c; the script
 * is run by /bin/sh over a temporary directory here, so quoting and the
 * stamps are proven on real files). Malformed, cut and oversized replies
 * must hand out nothing. And the cache's side of it (cache_prefetch.c):
 * the trigger, and what a seeded copy is to a later open. No network.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "cache.h"
#include "daytona/readmany.h"
#include "e2b/readmany.h"

/* What the parsers handed out. */
struct got {
	int calls;
	size_t index[16];
	char data[16][512];
	size_t len[16];
	bool has_st[16];
	struct sbx_stat st[16];
};

static int take(void *ctx, size_t i, const char *data, size_t len, const struct sbx_stat *st)
{
	struct got *g = ctx;
	int k = g->calls++;
	ck_assert_int_lt(k, 16);
	ck_assert_uint_lt(len, sizeof(g->data[k]));
	g->index[k] = i;
	memcpy(g->data[k], data, len);
	g->len[k] = len;
	g->has_st[k] = st != NULL;
	if (st)
		g->st[k] = *st;
	return 0;
}

/* --- Daytona ----------------------------------------------------------------- */

#define CT "multipart/form-data; boundary=DAYTONA-FILE-BOUNDARY"
#define B "--DAYTONA-FILE-BOUNDARY"
#define FILEPART(path, len, body)                                                                  \
	B "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" path "\"\r\n"           \
	  "Content-Length: " #len "\r\nContent-Type: application/octet-stream\r\n\r\n" body "\r\n"
#define ERRPART(path)                                                                              \
	B "\r\nContent-Disposition: form-data; name=\"error\"; filename=\"" path "\"\r\n"          \
	  "Content-Type: application/json\r\n\r\n{\"statusCode\":404,\"message\":\"no\"}\r\n"
#define END B "--\r\n"

static const char *const dt_paths[] = {"/a", "/b", "/c"};

/* Feeds body in chunks of step bytes; returns finish's result. */
static int dt_parse(const char *body, size_t len, size_t step, size_t max, struct got *g)
{
	struct dt_many m;
	int rc = dt_many_init(&m, CT, dt_paths, 3, max);
	for (size_t o = 0; !rc && o < len; o += step)
		rc = dt_many_feed(&m, body + o, len - o < step ? len - o : step);
	if (!rc)
		rc = dt_many_finish(&m, take, g);
	dt_many_release(&m);
	return rc;
}

START_TEST(test_dt_whole)
{
	/* c holds the boundary itself: counted by its Content-Length. */
	static const char body[] = FILEPART("/a", 5, "hello") ERRPART("/b")
	    FILEPART("/c", 27, "x\r\n--DAYTONA-FILE-BOUNDARY\r\n") END;
	for (size_t step = 1; step <= sizeof(body); step *= 3) {
		struct got g = {0};
		ck_assert_int_eq(dt_parse(body, sizeof(body) - 1, step, 1 << 20, &g), 0);
		ck_assert_int_eq(g.calls, 2);
		ck_assert_uint_eq(g.index[0], 0);
		ck_assert_uint_eq(g.len[0], 5);
		ck_assert(!memcmp(g.data[0], "hello", 5));
		ck_assert(!g.has_st[0]); /* the daemon measures no stamp */
		ck_assert_uint_eq(g.index[1], 2);
		ck_assert_uint_eq(g.len[1], 27);
		ck_assert(!memcmp(g.data[1], "x\r\n--DAYTONA-FILE-BOUNDARY\r\n", 27));
	}
}
END_TEST

START_TEST(test_dt_malformed)
{
	static const char good[] = FILEPART("/a", 5, "hello") FILEPART("/b", 2, "hi") END;
	struct got g = {0};
	/* Every cut of a good reply before its closing "--": nothing handed out. */
	for (size_t len = 0; len < sizeof(good) - 1 - strlen("--\r\n"); len++) {
		ck_assert_int_ne(dt_parse(good, len, 7, 1 << 20, &g), 0);
		ck_assert_int_eq(g.calls, 0);
	}
	/* A part for a path not asked for. */
	static const char other[] = FILEPART("/a", 5, "hello") FILEPART("/etc/passwd", 2, "hi") END;
	ck_assert_int_eq(dt_parse(other, sizeof(other) - 1, 64, 1 << 20, &g), -EIO);
	/* Two parts for one path. */
	static const char twice[] = FILEPART("/a", 5, "hello") FILEPART("/a", 2, "hi") END;
	ck_assert_int_eq(dt_parse(twice, sizeof(twice) - 1, 64, 1 << 20, &g), -EIO);
	/* Garbage after a delimiter. */
	static const char junk[] = FILEPART("/a", 5, "hello") B "xx\r\n" END;
	ck_assert_int_eq(dt_parse(junk, sizeof(junk) - 1, 64, 1 << 20, &g), -EIO);
	/* More bytes than asked for. */
	ck_assert_int_eq(dt_parse(good, sizeof(good) - 1, 64, 6, &g), -EFBIG);
	ck_assert_int_eq(g.calls, 0);
	/* Not multipart at all. */
	struct dt_many m;
	ck_assert_int_eq(dt_many_init(&m, "application/json", dt_paths, 3, 100), -EIO);
	dt_many_release(&m);
}
END_TEST

/* --- E2B --------------------------------------------------------------------- */

/* Runs the script for paths with /bin/sh in dir; the output into out. */
static void e2b_run(const char *dir, const char *const *paths, size_t n, struct sbx_buf *out)
{
	struct sbx_buf cmd = SBX_BUF_INIT;
	int fds[2];
	char buf[4096];
	ssize_t r;
	pid_t pid;
	e2b_many_script(&cmd, paths, n);
	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		if (chdir(dir))
			_exit(127);
		execl("/bin/sh", "sh", "-c", cmd.buf, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	while ((r = read(fds[0], buf, sizeof(buf))) > 0)
		sbx_buf_add(out, buf, (size_t)r);
	close(fds[0]);
	waitpid(pid, NULL, 0);
	sbx_buf_release(&cmd);
}

static void put(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static char tmpdir[64];
static char p_plain[128], p_weird[256], p_dash[128], p_missing[128], p_dir[128], p_link[128],
    p_bin[128];

static void e2b_tree(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_readmany.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(p_plain, sizeof(p_plain), "%s/plain.txt", tmpdir);
	snprintf(p_weird, sizeof(p_weird), "%s/we\"ird $(touch pwned) 'q'\nline `touch pwned`",
		 tmpdir);
	snprintf(p_dash, sizeof(p_dash), "%s/-n", tmpdir);
	snprintf(p_missing, sizeof(p_missing), "%s/missing", tmpdir);
	snprintf(p_dir, sizeof(p_dir), "%s/dir", tmpdir);
	snprintf(p_link, sizeof(p_link), "%s/link", tmpdir);
	snprintf(p_bin, sizeof(p_bin), "%s/bin", tmpdir);
	put(p_plain, "hello\n", 6);
	put(p_weird, "weird\n", 6);
	put(p_dash, "", 0);
	put(p_bin, "\0\xff\nE 7\n\0", 9); /* bytes like the framing's own */
	ck_assert_int_eq(mkdir(p_dir, 0755), 0);
	ck_assert_int_eq(symlink("plain.txt", p_link), 0);
}

static void e2b_tree_rm(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_e2b_script)
{
	const char *paths[] = {p_plain, p_missing, p_weird, p_dir, p_link, p_dash, p_bin};
	struct sbx_buf out = SBX_BUF_INIT;
	struct got g = {0};
	struct stat sys;
	char pwned[128];
	e2b_tree();
	e2b_run(tmpdir, paths, 7, &out);
	ck_assert_int_eq(e2b_many_parse(out.buf, out.len, 7, 1 << 20, take, &g), 0);
	/* The readable regular files, in order; no missing, directory or symlink. */
	ck_assert_int_eq(g.calls, 4);
	ck_assert_uint_eq(g.index[0], 0);
	ck_assert_uint_eq(g.index[1], 2);
	ck_assert_uint_eq(g.index[2], 5);
	ck_assert_uint_eq(g.index[3], 6);
	ck_assert(g.len[0] == 6 && !memcmp(g.data[0], "hello\n", 6));
	ck_assert(g.len[1] == 6 && !memcmp(g.data[1], "weird\n", 6));
	ck_assert_uint_eq(g.len[2], 0);
	ck_assert(g.len[3] == 9 && !memcmp(g.data[3], "\0\xff\nE 7\n\0", 9));
	/* The stamp is the file's own, to the nanosecond. */
	ck_assert_int_eq(stat(p_weird, &sys), 0);
	ck_assert(g.has_st[1]);
	ck_assert_int_eq(g.st[1].size, 6);
	ck_assert_int_eq(g.st[1].mtime.tv_sec, sys.st_mtim.tv_sec);
	ck_assert_int_eq(g.st[1].mtime.tv_nsec, sys.st_mtim.tv_nsec);
	/* The names ran nothing. */
	snprintf(pwned, sizeof(pwned), "%s/pwned", tmpdir);
	ck_assert_int_ne(access(pwned, F_OK), 0);
	snprintf(pwned, sizeof(pwned), "%s/pwned", getenv("HOME") ? getenv("HOME") : "/");
	ck_assert_int_ne(access(pwned, F_OK), 0);

	/* Every cut of that output hands out nothing. */
	for (size_t len = 0; len < out.len; len++) {
		struct got none = {0};
		ck_assert_int_eq(e2b_many_parse(out.buf, len, 7, 1 << 20, take, &none), -EIO);
		ck_assert_int_eq(none.calls, 0);
	}
	/* Trailing bytes, a wrong count, a budget too small. */
	sbx_buf_adds(&out, "x");
	ck_assert_int_eq(e2b_many_parse(out.buf, out.len, 7, 1 << 20, take, &g), -EIO);
	ck_assert_int_eq(e2b_many_parse(out.buf, out.len - 1, 8, 1 << 20, take, &g), -EIO);
	ck_assert_int_eq(e2b_many_parse(out.buf, out.len - 1, 7, 20, take, &g), -EFBIG);
	sbx_buf_release(&out);
	e2b_tree_rm();
}
END_TEST

static int e2b_parse_text(const char *text, size_t n, struct got *g)
{
	return e2b_many_parse(text, strlen(text), n, 1 << 20, take, g);
}

START_TEST(test_e2b_malformed)
{
	struct got g = {0};
	/* Well formed, to show the cases below differ from it by one thing. */
	ck_assert_int_eq(e2b_parse_text("I 1\n"
					"2 1700000000 2023-11-14 22:13:20.123456789 +0000\n"
					"C\nhiS\n"
					"2 1700000000 2023-11-14 22:13:20.123456789 +0000\n"
					"E 2\n",
					2, &g),
			 0);
	ck_assert_int_eq(g.calls, 1);
	ck_assert_uint_eq(g.index[0], 1);
	ck_assert_int_eq(g.st[0].mtime.tv_nsec, 123456789);
	g.calls = 0;
	/* The second stat differs (the file changed during the command). */
	ck_assert_int_eq(e2b_parse_text("I 1\n"
					"2 1700000000 2023-11-14 22:13:20.123456789 +0000\n"
					"C\nhiS\n"
					"2 1700000001 2023-11-14 22:13:21.000000000 +0000\n"
					"E 2\n",
					2, &g),
			 -EIO);
	/* An index out of range, twice, or signed. */
	ck_assert_int_eq(e2b_parse_text("I 2\nE 2\n", 2, &g), -EIO);
	ck_assert_int_eq(e2b_parse_text("I 0 0\nE 2\n", 2, &g), -EIO);
	ck_assert_int_eq(e2b_parse_text("I -1\nE 2\n", 2, &g), -EIO);
	/* A size that does not split the bytes right. */
	ck_assert_int_eq(e2b_parse_text("I 0\n"
					"3 1700000000 2023-11-14 22:13:20.1 +0000\n"
					"C\nhiS\n"
					"3 1700000000 2023-11-14 22:13:20.1 +0000\n"
					"E 1\n",
					1, &g),
			 -EIO);
	/* A huge size. */
	ck_assert_int_eq(e2b_parse_text("I 0\n"
					"99999999999999999999 1 2023-11-14 22:13:20 +0000\n"
					"C\nE 1\n",
					1, &g),
			 -EIO);
	/* No file: just the two lines. */
	ck_assert_int_eq(e2b_parse_text("I\nE 3\n", 3, &g), 0);
	ck_assert_int_eq(e2b_parse_text("", 3, &g), -EIO);
	ck_assert_int_eq(e2b_parse_text("garbage\n", 3, &g), -EIO);
	ck_assert_int_eq(g.calls, 0);
}
END_TEST

/* --- the cache's side ---------------------------------------------------------- */

static struct sbx_stat reg(off_t size, long sec, long nsec)
{
	struct sbx_stat st = {.mode = S_IFREG | 0644, .nlink = 1, .size = size};
	st.mtime.tv_sec = sec;
	st.mtime.tv_nsec = nsec;
	return st;
}

START_TEST(test_cache_seed)
{
	char dir[] = "/tmp/check_readmany_cache.XXXXXX", buf[16], cmd[64];
	struct sbx_cache *c;
	struct sbx_cfile *cf, *held;
	struct sbx_cfile_state s;
	struct sbx_stat st = reg(5, 100, 5), other = reg(5, 100, 6);
	unsigned long gen;
	ck_assert_ptr_nonnull(mkdtemp(dir));
	c = sbx_cache_new(dir);

	/* The second download from one directory within the window is due. */
	ck_assert(!sbx_cache_prefetch_due(c, "/d/x", 2000));
	ck_assert(sbx_cache_prefetch_due(c, "/d/y", 2000));
	ck_assert(!sbx_cache_prefetch_due(c, "/e/z", 2000));
	usleep(20000); /* past a 10 ms window: not due (sleeping never ends early) */
	ck_assert(!sbx_cache_prefetch_due(c, "/e/y", 10));

	/* Seeded, then opened: the copy and its stamp are a download's. */
	gen = sbx_cache_gen(c);
	ck_assert(sbx_cache_prefetch_wanted(c, "/d/a", &st));
	ck_assert_int_eq(sbx_cache_prefetch_seed(c, "/d/a", "hello", 5, &st, gen), 1);
	ck_assert(!sbx_cache_prefetch_wanted(c, "/d/a", &st));
	ck_assert(sbx_cache_prefetch_wanted(c, "/d/a", &other)); /* another mtime */
	ck_assert_int_eq(sbx_cache_file_open(c, "/d/a", false, &cf, &s), 0);
	ck_assert(s.have_data && s.stamped && !s.dirty && s.remote && !s.stamp_loose);
	ck_assert_int_eq(s.stamp_size, 5);
	ck_assert_int_eq(s.stamp_mtime.tv_sec, 100);
	ck_assert_int_eq(s.stamp_mtime.tv_nsec, 5);
	ck_assert_int_eq(pread(sbx_cfile_fd(cf), buf, sizeof(buf), 0), 5);
	ck_assert(!memcmp(buf, "hello", 5));
	free(s.path);
	sbx_cache_file_ready(c, cf, SBX_CF_KEEP, 0, NULL);

	/* An open entry is never replaced under its handle. */
	ck_assert(!sbx_cache_prefetch_wanted(c, "/d/a", &other));
	ck_assert_int_eq(sbx_cache_prefetch_seed(c, "/d/a", "HELLO", 5, &other, gen), 0);
	ck_assert_int_eq(pread(sbx_cfile_fd(cf), buf, sizeof(buf), 0), 5);
	ck_assert(!memcmp(buf, "hello", 5));
	sbx_cache_file_put(c, cf);

	/* Bytes that do not have the stamp's size are not seeded. */
	ck_assert_int_eq(sbx_cache_prefetch_seed(c, "/d/b", "hell", 4, &st, gen), 0);
	/* Nor anything after the cache changed (a run, a mutation) while the request was out. */
	sbx_cache_invalidate_path(c, "/d/zz");
	ck_assert_int_eq(sbx_cache_prefetch_seed(c, "/d/c", "hello", 5, &st, gen), 0);
	/* A dirty entry stays as it is. */
	ck_assert_int_eq(sbx_cache_file_open(c, "/d/n", true, &held, &s), 0);
	free(s.path);
	sbx_cache_file_ready(c, held, SBX_CF_NEW, 0644, NULL);
	ck_assert_int_eq(sbx_cache_prefetch_seed(c, "/d/n", "hello", 5, &st, sbx_cache_gen(c)), 0);
	for (const char *p = "bc"; *p; p++) {
		char path[8];
		snprintf(path, sizeof(path), "/d/%c", *p);
		ck_assert(sbx_cache_prefetch_wanted(c, path, &st));
	}
	sbx_cache_file_unlink(c, "/d/n"); /* not saved on free: the test leaves nothing behind */
	sbx_cache_file_put(c, held);
	sbx_cache_free(c);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("readmany");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_dt_whole);
	tcase_add_test(tc, test_dt_malformed);
	tcase_add_test(tc, test_e2b_script);
	tcase_add_test(tc, test_e2b_malformed);
	tcase_add_test(tc, test_cache_seed);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
