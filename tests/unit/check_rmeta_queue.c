/*
 * check_rmeta_queue — the remote metadata layer's queue as both remote
 * providers use it (providers/rmeta_queue.c): the scripts of its two
 * styles (as root, e2b; as the user with `sudo -n`, daytona) run by a
 * real /bin/sh, and what a run's outcome records against each op's path
 * (sbx_rmq_settle), the same for both.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/buf.h"
#include "rmeta.h"
#include "rmeta_queue.h"

/* The daytona style (providers/daytona/batch.c). */
static const struct sbx_rmq_style user_style = {.check_free = true, .merge_removals = true};

/* Runs script with /bin/sh, stdout and stderr into out; returns the exit status. */
static int run_sh(const char *script, struct sbx_buf *out)
{
	char path[] = "/tmp/check_rmq_XXXXXX", cmd[64], buf[512];
	int fd = mkstemp(path), status;
	size_t n;
	FILE *p;
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, script, strlen(script)), (ssize_t)strlen(script));
	close(fd);
	snprintf(cmd, sizeof(cmd), "sh %s 2>&1", path);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
		sbx_buf_add(out, buf, n);
	status = pclose(p);
	unlink(path);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/*
 * A name the sandbox has taken since the kernel's lookup (a directory made
 * there behind the mount's back): symlink and link onto it fail with
 * EEXIST against their own path, and make nothing inside that directory
 * (`ln` onto a directory would make the link inside it and succeed).
 * Both styles: it was daytona's behaviour only; e2b made d/x/t silently.
 */
START_TEST(test_taken_name)
{
	const struct sbx_rmq_style *styles[] = {&sbx_rmq_style_root, &user_style};
	const struct sbx_rmq_style *st = styles[_i];
	char dir[] = "/tmp/check_rmq_dXXXXXX", x[64], y[64], f[64], in[96];
	struct sbx_rmq_queue q;
	struct sbx_rmq_op op;
	struct sbx_buf script = SBX_BUF_INIT, out = SBX_BUF_INIT;
	struct sbx_rmeta_fails fails;
	struct sbx_error e = SBX_ERROR_INIT;
	struct stat sb;
	FILE *fp;
	int code;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(x, sizeof(x), "%s/x", dir);
	snprintf(y, sizeof(y), "%s/y", dir);
	snprintf(f, sizeof(f), "%s/f", dir);
	ck_assert_int_eq(mkdir(x, 0755), 0);
	ck_assert_int_eq(mkdir(y, 0755), 0);
	fp = fopen(f, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);

	sbx_rmq_init(&q);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_SYMLINK, .path = x, .arg = "t"};
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_LINK, .path = y, .arg = f};
	sbx_rmq_add(&q, &op);
	/* the entries the script makes go to "user" (root style): there may be none here */
	ck_assert_int_eq(sbx_rmq_render(&q, 0, st, SBX_RMQ_SCRIPT_MAX, &script), 2);
	code = run_sh(script.buf, &out);
	sbx_rmeta_fails_init(&fails);
	ck_assert_int_eq(sbx_rmq_settle(&q, 0, q.n, &fails, NULL, 0, NULL, out.buf, code, false),
			 2);
	ck_assert_int_eq(sbx_rmeta_fail_take(&fails, x, &e), -EEXIST);
	ck_assert_int_eq(sbx_rmeta_fail_take(&fails, y, &e), -EEXIST);
	snprintf(in, sizeof(in), "%s/t", x);
	ck_assert_int_ne(lstat(in, &sb), 0);
	snprintf(in, sizeof(in), "%s/f", y);
	ck_assert_int_ne(lstat(in, &sb), 0);

	sbx_rmeta_fails_destroy(&fails);
	sbx_rmq_clear(&q);
	sbx_buf_release(&script);
	sbx_buf_release(&out);
	unlink(f);
	rmdir(x);
	rmdir(y);
	rmdir(dir);
}
END_TEST

/* What a run's outcome records, whatever the provider. */
START_TEST(test_settle)
{
	struct sbx_rmq_queue q;
	struct sbx_rmq_op op = {.kind = SBX_RMQ_TRUNCATE, .path = "/a/1", .size = 1};
	struct sbx_rmeta_fails f;
	struct sbx_error e = SBX_ERROR_INIT, run = SBX_ERROR_INIT;

	sbx_rmq_init(&q);
	sbx_rmq_add(&q, &op);
	op.path = "/a/2";
	sbx_rmq_add(&q, &op);
	sbx_rmeta_fails_init(&f);

	/* the script did not run: every op, EIO with the run's message */
	sbx_error_set(&run, ETIMEDOUT, SBX_E_TIMEOUT, "exec: timed out");
	ck_assert_int_eq(sbx_rmq_settle(&q, 0, 2, &f, NULL, -ETIMEDOUT, &run, NULL, 0, false), 2);
	ck_assert_int_eq(sbx_rmeta_fail_take(&f, "/a/1", &e), -EIO);
	ck_assert_ptr_nonnull(strstr(e.msg, "exec: timed out"));
	ck_assert_int_eq(sbx_rmeta_fail_take(&f, "/a/2", &e), -EIO);

	/* it ran, and ended non-zero without a mark: the script as a whole */
	ck_assert_int_eq(sbx_rmq_settle(&q, 0, 2, &f, NULL, 0, NULL, "boom\nmore\n", 2, false), 2);
	ck_assert_int_eq(sbx_rmeta_fail_take(&f, "/a/2", &e), -EIO);
	ck_assert_ptr_nonnull(strstr(e.msg, "the script ended 2: boom"));
	ck_assert_ptr_null(strstr(e.msg, "more"));
	ck_assert_int_eq(sbx_rmeta_fail_take(&f, "/a/1", &e), -EIO);
	/* ... unless the caller knows why (daytona's borrow requests) */
	ck_assert_int_eq(sbx_rmq_settle(&q, 0, 2, &f, NULL, 0, NULL, "boom\n", 1, true), 0);
	/* a mark names its op only */
	ck_assert_int_eq(sbx_rmq_settle(&q, 0, 2, &f, NULL, 0, NULL,
					"truncate: '/a/2': Permission denied\n" SBX_RMETA_FAILED
					"1\n",
					1, false),
			 1);
	ck_assert_int_eq(sbx_rmeta_fail_take(&f, "/a/1", &e), 0);
	ck_assert_int_eq(sbx_rmeta_fail_take(&f, "/a/2", &e), -EACCES);

	sbx_rmeta_fails_destroy(&f);
	sbx_rmq_clear(&q);
}
END_TEST

/* The flush questions both providers ask before an op that depends on the queue. */
START_TEST(test_needs)
{
	struct sbx_rmq_queue q;
	struct sbx_rmq_op op = {.kind = SBX_RMQ_CHMOD, .path = "/d/f", .mode = 0600};
	sbx_rmq_init(&q);
	/* under: path itself, below it (deep), or directly in it */
	ck_assert(sbx_rmq_under("/d", "/d", false) && sbx_rmq_under("/d/f", "/d", false));
	ck_assert(!sbx_rmq_under("/d/f/g", "/d", false) && sbx_rmq_under("/d/f/g", "/d", true));
	ck_assert(!sbx_rmq_under("/df", "/d", true) && !sbx_rmq_under(NULL, "/d", true));
	ck_assert(sbx_rmq_under("/x", "/", false) && !sbx_rmq_under("/x/y", "/", false));
	ck_assert(sbx_rmq_under("/", "/", false) && sbx_rmq_under("/x/y", "/", true));
	ck_assert(!sbx_rmq_needs(&q, NULL, SBX_RMQ_NEED_ALL));
	sbx_rmq_add(&q, &op);
	ck_assert(sbx_rmq_needs(&q, NULL, SBX_RMQ_NEED_ALL));
	/* an attribute op: shown by the overlay, no flush for a stat or a list */
	ck_assert(!sbx_rmq_needs(&q, "/d/f", SBX_RMQ_NEED_ENTRY));
	ck_assert(!sbx_rmq_needs(&q, "/d", SBX_RMQ_NEED_CHILDREN));
	/* ... but daytona's rule (NEAR) and a rename or remove (TOUCH) wait for it */
	ck_assert(sbx_rmq_needs(&q, "/d/f", SBX_RMQ_NEED_NEAR));
	ck_assert(sbx_rmq_needs(&q, "/d", SBX_RMQ_NEED_NEAR));
	ck_assert(!sbx_rmq_needs(&q, "/", SBX_RMQ_NEED_NEAR));
	ck_assert(sbx_rmq_needs(&q, "/", SBX_RMQ_NEED_TOUCH));
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_LINK, .path = "/e/h", .arg = "/d/g"};
	sbx_rmq_add(&q, &op);
	ck_assert(sbx_rmq_needs(&q, "/e/h", SBX_RMQ_NEED_ENTRY));
	ck_assert(sbx_rmq_needs(&q, "/e", SBX_RMQ_NEED_CHILDREN));
	ck_assert(sbx_rmq_needs(&q, "/d/g", SBX_RMQ_NEED_NEAR)); /* its link count changes */
	ck_assert(!sbx_rmq_needs(&q, "/d/g", SBX_RMQ_NEED_CONTENT));
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_TRUNCATE, .path = "/d/g", .size = 0};
	sbx_rmq_add(&q, &op);
	ck_assert(sbx_rmq_needs(&q, "/d/g", SBX_RMQ_NEED_CONTENT));
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_CHMOD, .path = "/s", .mode = 02775};
	sbx_rmq_add(&q, &op);
	ck_assert(sbx_rmq_needs(&q, "/s/new", SBX_RMQ_NEED_NEW));
	ck_assert(!sbx_rmq_needs(&q, "/t/new", SBX_RMQ_NEED_NEW));
	sbx_rmq_clear(&q);
}
END_TEST

/* The user style: what only root may do is tried as the user, then through `sudo -n`. */
START_TEST(test_user_style)
{
	struct sbx_rmq_queue q;
	struct sbx_rmq_op op = {
	    .kind = SBX_RMQ_CHOWN, .path = "/l", .uid = 0, .gid = 0, .root = true, .soft = true};
	struct sbx_buf b = SBX_BUF_INIT;
	size_t next;

	sbx_rmq_init(&q);
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){
	    .kind = SBX_RMQ_MKNOD, .path = "/d", .mode = S_IFCHR | 0600, .dev = makedev(1, 3)};
	sbx_rmq_add(&q, &op);
	sbx_rmq_render_op(&q, 0, &user_style, SIZE_MAX, &b, &next);
	ck_assert_int_eq(next, 1);
	ck_assert_str_eq(b.buf,
			 "{ { m=$(chown -h 0:0 -- '/l' 2>&1) || sudo -n chown -h 0:0 -- '/l' "
			 "2>/dev/null || { printf '%s\\n' \"$m\"; false; }; }; } >/dev/null "
			 "2>&1 || :");
	sbx_buf_reset(&b);
	sbx_rmq_render_op(&q, 1, &user_style, SIZE_MAX, &b, &next);
	ck_assert_str_eq(b.buf,
			 "{ m=$(mknod -m 0600 -- '/d' c 1 3 2>&1) || sudo -n mknod -m 0600 "
			 "-- '/d' c 1 3 2>/dev/null || { printf '%s\\n' \"$m\"; false; }; }");
	/* as root, the same op is the command itself, its node given to the user */
	sbx_buf_reset(&b);
	sbx_rmq_render_op(&q, 1, &sbx_rmq_style_root, SIZE_MAX, &b, &next);
	ck_assert_str_eq(b.buf, "mknod -m 0600 -- '/d' c 1 3 && chown -h user: -- '/d'");
	sbx_buf_release(&b);
	sbx_rmq_clear(&q);
}
END_TEST

/* How many times needle is in hay. */
static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/*
 * Removals: `rm -f` and `rmdir` of many names are one command each (both
 * styles), run in order (a child before its parent); a directory met by
 * the unlink, a directory not empty and one already gone fail against
 * their own paths with their own errno, each from its own line of the
 * merged command's message, and nothing else fails or is lost.
 */
START_TEST(test_removals_run)
{
	const struct sbx_rmq_style *styles[] = {&sbx_rmq_style_root, &user_style};
	const struct sbx_rmq_style *st = styles[_i];
	char dir[] = "/tmp/check_rmq_rXXXXXX", p[9][96];
	const char *names[] = {"a", "a/1", "a/2", "d", "gone", "full", "full/x", "a/3", "d2"};
	struct sbx_buf script = SBX_BUF_INIT, out = SBX_BUF_INIT;
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_rmq_queue q;
	struct sbx_rmeta_fails fails;
	struct sbx_rmq_op op;
	struct stat sb;
	int code;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	for (int k = 0; k < 9; k++)
		snprintf(p[k], sizeof(p[k]), "%s/%s", dir, names[k]);
	ck_assert_int_eq(mkdir(p[8], 0755), 0);
	ck_assert_int_eq(mkdir(p[0], 0755), 0);
	ck_assert_int_eq(mkdir(p[3], 0755), 0);
	ck_assert_int_eq(mkdir(p[5], 0755), 0);
	for (int k = 1; k < 8; k++)
		if (k != 3 && k != 4 && k != 5)
			fclose(fopen(p[k], "w"));

	sbx_rmq_init(&q);
	/* unlink a/1 a/2 a/3, d and d2 (directories), gone (missing); rmdir a, full (not empty) */
	const struct {
		enum sbx_rmq_kind kind;
		int path;
	} ops[] = {{SBX_RMQ_UNLINK, 1}, {SBX_RMQ_UNLINK, 2}, {SBX_RMQ_UNLINK, 3},
		   {SBX_RMQ_UNLINK, 4}, {SBX_RMQ_UNLINK, 7}, {SBX_RMQ_UNLINK, 8},
		   {SBX_RMQ_RMDIR, 0},	{SBX_RMQ_RMDIR, 5}};
	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
		op = (struct sbx_rmq_op){.kind = ops[k].kind, .path = p[ops[k].path]};
		sbx_rmq_add(&q, &op);
	}
	sbx_rmq_gather(&q);
	ck_assert_int_eq(sbx_rmq_render(&q, 0, st, SBX_RMQ_SCRIPT_MAX, &script), q.n);
	/* one rm for the six names, one rmdir for both (the user style: twice, with sudo) */
	ck_assert_int_eq(count(script.buf, "rm -f -- "), st == &user_style ? 2 : 1);
	ck_assert_int_eq(count(script.buf, "rmdir -- "), st == &user_style ? 2 : 1);
	ck_assert_ptr_nonnull(strstr(script.buf, "|| sbx_f 0-6\n"));
	ck_assert_ptr_nonnull(strstr(script.buf, "|| sbx_f 6-8\n"));
	code = run_sh(script.buf, &out);
	sbx_rmeta_fails_init(&fails);
	ck_assert_int_eq(sbx_rmq_settle(&q, 0, q.n, &fails, NULL, 0, NULL, out.buf, code, false),
			 3);
	/* two lines of one rm's message: each directory its own failure */
	ck_assert_int_eq(sbx_rmeta_fail_take(&fails, p[3], &e), -EISDIR);
	ck_assert_int_eq(sbx_rmeta_fail_take(&fails, p[8], &e), -EISDIR);
	ck_assert_ptr_nonnull(strstr(e.msg, "d2"));
	ck_assert_int_eq(sbx_rmeta_fail_take(&fails, p[5], &e), -ENOTEMPTY);
	ck_assert_ptr_nonnull(strstr(e.msg, "full"));
	for (int k = 0; k < 9; k++)
		ck_assert_int_eq(sbx_rmeta_fail_take(&fails, p[k], &e), 0);
	/* what could go went, the rest stayed */
	ck_assert_int_ne(lstat(p[0], &sb), 0);
	ck_assert_int_eq(lstat(p[3], &sb), 0);
	ck_assert_int_eq(lstat(p[6], &sb), 0);

	sbx_rmeta_fails_destroy(&fails);
	sbx_rmq_clear(&q);
	sbx_buf_release(&script);
	sbx_buf_release(&out);
	unlink(p[6]);
	rmdir(p[5]);
	rmdir(p[3]);
	rmdir(p[8]);
	rmdir(dir);
}
END_TEST

/* The removals' rendering, exactly: as root, and as the user with `sudo -n`. */
START_TEST(test_removals_render)
{
	struct sbx_rmq_queue q;
	struct sbx_rmq_op op = {.kind = SBX_RMQ_UNLINK, .path = "/t/a b"};
	struct sbx_buf b = SBX_BUF_INIT;
	size_t next;

	sbx_rmq_init(&q);
	sbx_rmq_add(&q, &op);
	op.path = "/t/c";
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_RMDIR, .path = "/t"};
	sbx_rmq_add(&q, &op);
	sbx_rmq_render_op(&q, 0, &sbx_rmq_style_root, SIZE_MAX, &b, &next);
	ck_assert_int_eq(next, 2);
	ck_assert_str_eq(b.buf, "rm -f -- '/t/a b' '/t/c'");
	sbx_buf_reset(&b);
	sbx_rmq_render_op(&q, 2, &sbx_rmq_style_root, SIZE_MAX, &b, &next);
	ck_assert_str_eq(b.buf, "rmdir -- '/t'");
	sbx_buf_reset(&b);
	sbx_rmq_render_op(&q, 0, &user_style, SIZE_MAX, &b, &next);
	ck_assert_int_eq(next, 2);
	ck_assert_str_eq(b.buf, "{ m=$(rm -f -- '/t/a b' '/t/c' 2>&1) || sudo -n rm -f -- '/t/a b' "
				"'/t/c' 2>/dev/null || { printf '%s\\n' \"$m\"; false; }; }");
	/* without merge_removals each is its own command */
	sbx_buf_reset(&b);
	sbx_rmq_render_op(&q, 0, &(struct sbx_rmq_style){.check_free = true}, SIZE_MAX, &b, &next);
	ck_assert_int_eq(next, 1);
	sbx_buf_release(&b);
	sbx_rmq_clear(&q);
}
END_TEST

/* What waits for a queued removal, and what the queue answers itself. */
START_TEST(test_removals_needs)
{
	struct sbx_rmq_queue q;
	struct sbx_rmq_op op = {.kind = SBX_RMQ_UNLINK, .path = "/d/f"};
	sbx_rmq_init(&q);
	sbx_rmq_add(&q, &op);
	ck_assert_int_eq(sbx_rmq_fate(&q, "/d/f"), SBX_RMQ_GONE);
	ck_assert_int_eq(sbx_rmq_fate(&q, "/d/f/x"), SBX_RMQ_GONE);
	ck_assert_int_eq(sbx_rmq_fate(&q, "/d/fg"), SBX_RMQ_UNTOUCHED);
	ck_assert_int_eq(sbx_rmq_fate(&q, "/d"), SBX_RMQ_UNTOUCHED);
	/* a stat, read, upload or mkdir of the name waits; so does a rename or remove above it */
	ck_assert(sbx_rmq_needs(&q, "/d/f", SBX_RMQ_NEED_ENTRY));
	ck_assert(sbx_rmq_needs(&q, "/d/f", SBX_RMQ_NEED_CONTENT));
	ck_assert(sbx_rmq_needs(&q, "/d/f", SBX_RMQ_NEED_NEW));
	ck_assert(sbx_rmq_needs(&q, "/d/f/x", SBX_RMQ_NEED_NEW));
	ck_assert(sbx_rmq_needs(&q, "/d", SBX_RMQ_NEED_TOUCH));
	ck_assert(sbx_rmq_needs(&q, "/", SBX_RMQ_NEED_TOUCH));
	ck_assert(sbx_rmq_needs(&q, "/d", SBX_RMQ_NEED_NEAR));
	/* a listing of its directory: CHILDREN waits, LISTING leaves the name out itself */
	ck_assert(sbx_rmq_needs(&q, "/d", SBX_RMQ_NEED_CHILDREN));
	ck_assert(!sbx_rmq_needs(&q, "/d", SBX_RMQ_NEED_LISTING));
	/* other names do not wait */
	ck_assert(!sbx_rmq_needs(&q, "/d/g", SBX_RMQ_NEED_NEW));
	ck_assert(!sbx_rmq_needs(&q, "/e", SBX_RMQ_NEED_TOUCH));
	ck_assert(!sbx_rmq_needs(&q, "/", SBX_RMQ_NEED_CHILDREN));
	/* made again after: MADE, and a stat must see the new entry (flush) */
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_SYMLINK, .path = "/d/f", .arg = "t"};
	sbx_rmq_add(&q, &op);
	ck_assert_int_eq(sbx_rmq_fate(&q, "/d/f"), SBX_RMQ_MADE);
	ck_assert(sbx_rmq_needs(&q, "/d/f", SBX_RMQ_NEED_ENTRY));
	/* the directory removed after that: gone again, and so is all below it */
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_UNLINK, .path = "/d/f"};
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_RMDIR, .path = "/d"};
	sbx_rmq_add(&q, &op);
	ck_assert_int_eq(sbx_rmq_fate(&q, "/d/f"), SBX_RMQ_GONE);
	ck_assert_int_eq(sbx_rmq_fate(&q, "/d"), SBX_RMQ_GONE);
	ck_assert(sbx_rmq_needs(&q, "/d", SBX_RMQ_NEED_LISTING));
	ck_assert(!sbx_rmq_needs(&q, "/", SBX_RMQ_NEED_LISTING));
	/* gather keeps each removal after what it depends on: rm, ln, rm, rmdir */
	sbx_rmq_gather(&q);
	ck_assert_int_eq(q.ops[0].kind, SBX_RMQ_UNLINK);
	ck_assert_int_eq(q.ops[1].kind, SBX_RMQ_SYMLINK);
	ck_assert_int_eq(q.ops[2].kind, SBX_RMQ_UNLINK);
	ck_assert_int_eq(q.ops[3].kind, SBX_RMQ_RMDIR);
	sbx_rmq_clear(&q);
}
END_TEST

/*
 * A directory's times queued again after each upload into it, and a
 * file's set twice: one op each, the later times over the earlier but
 * for those omitted; never across an op that must stay between them.
 */
START_TEST(test_times_merge)
{
	struct sbx_rmq_queue q;
	struct sbx_rmq_op op;
	struct timespec t1[2] = {{10, 0}, {20, 0}}, t2[2] = {{0, UTIME_OMIT}, {30, 0}};
	sbx_rmq_init(&q);
	op = sbx_rmq_utimens_op("/d", t1);
	ck_assert(!sbx_rmq_add_merged(&q, &op));
	op = sbx_rmq_utimens_op("/d/f", t1); /* another path's times: passed over */
	ck_assert(!sbx_rmq_add_merged(&q, &op));
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_CHMOD, .path = "/d", .mode = 0700};
	ck_assert(!sbx_rmq_add_merged(&q, &op)); /* mode commutes with times */
	op = sbx_rmq_utimens_op("/d", t2);
	ck_assert(sbx_rmq_add_merged(&q, &op));
	ck_assert_uint_eq(q.n, 3);
	ck_assert_int_eq(q.ops[0].ts[0].tv_sec, 10); /* atime kept: the second omits it */
	ck_assert_int_eq(q.ops[0].ts[1].tv_sec, 30);
	/* an entry made in /d moves its mtime: the times after it are an op of their own */
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_SYMLINK, .path = "/d/l", .arg = "t"};
	ck_assert(!sbx_rmq_add_merged(&q, &op));
	op = sbx_rmq_utimens_op("/d", t1);
	ck_assert(!sbx_rmq_add_merged(&q, &op));
	ck_assert_uint_eq(q.n, 5);
	/* a link's (root) times and a file's do not merge */
	op = sbx_rmq_utimens_op("/d", t2);
	op.root = true;
	ck_assert(!sbx_rmq_add_merged(&q, &op));
	ck_assert_uint_eq(q.n, 6);
	sbx_rmq_clear(&q);
}
END_TEST

/*
 * A queued mkdir: made with its mode where nothing made it; where an
 * upload made it first (0755, the services' MkdirAll) only its mode is
 * set; a name taken by a file fails against its own path (EEXIST). And
 * what waits for it: all below it but an upload or a mkdir (NEW, PUT),
 * which make it alike.
 */
START_TEST(test_mkdir_queued)
{
	char dir[] = "/tmp/check_rmq_mXXXXXX", p[3][96], below[128];
	struct sbx_buf script = SBX_BUF_INIT, out = SBX_BUF_INIT;
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_rmeta_fails fails;
	struct sbx_rmq_queue q;
	struct sbx_rmq_op op;
	struct stat sb;
	int code;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	for (int k = 0; k < 3; k++)
		snprintf(p[k], sizeof(p[k]), "%s/d%d", dir, k);
	ck_assert_int_eq(mkdir(p[1], 0755), 0); /* an upload into it made it */
	fclose(fopen(p[2], "w"));		/* the sandbox took the name */
	sbx_rmq_init(&q);
	for (int k = 0; k < 3; k++) {
		op = (struct sbx_rmq_op){.kind = SBX_RMQ_MKDIR, .path = p[k], .mode = 0700};
		sbx_rmq_add(&q, &op);
	}
	ck_assert(sbx_rmq_needs(&q, p[0], SBX_RMQ_NEED_ENTRY));
	ck_assert(sbx_rmq_needs(&q, dir, SBX_RMQ_NEED_LISTING));
	ck_assert(!sbx_rmq_needs(&q, "/nowhere/x", SBX_RMQ_NEED_TOUCH));
	snprintf(below, sizeof(below), "%s/f", p[0]);
	ck_assert(sbx_rmq_needs(&q, below, SBX_RMQ_NEED_ENTRY));
	ck_assert(sbx_rmq_needs(&q, below, SBX_RMQ_NEED_TOUCH));
	ck_assert(!sbx_rmq_needs(&q, below, SBX_RMQ_NEED_NEW));
	ck_assert(!sbx_rmq_needs(&q, below, SBX_RMQ_NEED_PUT));

	ck_assert_int_eq(sbx_rmq_render(&q, 0, &user_style, SBX_RMQ_SCRIPT_MAX, &script), q.n);
	code = run_sh(script.buf, &out);
	sbx_rmeta_fails_init(&fails);
	ck_assert_int_eq(sbx_rmq_settle(&q, 0, q.n, &fails, NULL, 0, NULL, out.buf, code, false),
			 1);
	ck_assert_int_eq(sbx_rmeta_fail_take(&fails, p[2], &e), -EEXIST);
	ck_assert_int_eq(stat(p[0], &sb), 0);
	ck_assert(S_ISDIR(sb.st_mode));
	ck_assert_uint_eq(sb.st_mode & 07777, 0700);
	ck_assert_int_eq(stat(p[1], &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 07777, 0700);

	sbx_rmeta_fails_destroy(&fails);
	sbx_rmq_clear(&q);
	sbx_buf_release(&script);
	sbx_buf_release(&out);
	rmdir(p[0]);
	rmdir(p[1]);
	unlink(p[2]);
	rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rmeta_queue");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;
	tcase_add_loop_test(tc, test_taken_name, 0, 2);
	tcase_add_test(tc, test_settle);
	tcase_add_test(tc, test_needs);
	tcase_add_test(tc, test_user_style);
	tcase_add_loop_test(tc, test_removals_run, 0, 2);
	tcase_add_test(tc, test_removals_render);
	tcase_add_test(tc, test_removals_needs);
	tcase_add_test(tc, test_times_merge);
	tcase_add_test(tc, test_mkdir_queued);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
