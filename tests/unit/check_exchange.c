/*
 * check_exchange — RENAME_EXCHANGE as the remote providers emulate it
 * (sbx_rmeta_exchange: three moves through a temporary name), against a
 * table of names whose move refuses a missing source and a taken
 * destination, with one chosen move failing: what is swapped, what a
 * failure leaves, and what the error says when an undo fails too.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "rmeta.h"

#define NAMES 4

/* name -> entry ("" free); fail_at: the move (1-based) that fails, and every one after it
 * when fail_rest. */
struct table {
	struct sbx_rmeta_fails fails;
	const char *name[NAMES];
	char entry[NAMES][8];
	int moves, fail_at;
	bool fail_rest;
};

static int slot(struct table *t, const char *name)
{
	for (int i = 0; i < NAMES; i++)
		if (!strcmp(t->name[i], name))
			return i;
	ck_abort_msg("unknown name %s", name);
	return -1;
}

static int table_move(void *ctx, const char *from, const char *to, struct sbx_error *err)
{
	struct table *t = ctx;
	int f = slot(t, from), d = slot(t, to), n = ++t->moves;
	if (n == t->fail_at || (t->fail_rest && n > t->fail_at))
		return sbx_error_set(err, EIO, 0, "move %s %s: injected", from, to);
	if (!t->entry[f][0])
		return sbx_error_set(err, ENOENT, 0, "move %s: no such file", from);
	if (t->entry[d][0])
		return sbx_error_set(err, EEXIST, 0, "move %s: %s exists", from, to);
	memcpy(t->entry[d], t->entry[f], sizeof(t->entry[d]));
	t->entry[f][0] = 0;
	return 0;
}

static void table_init(struct table *t, const char *a, const char *b, int fail_at, bool rest)
{
	memset(t, 0, sizeof(*t));
	sbx_rmeta_fails_init(&t->fails);
	t->name[0] = "/d/a";
	t->name[1] = "/d/b";
	t->name[2] = "/d/.tmp";
	t->name[3] = "/d/c";
	snprintf(t->entry[0], sizeof(t->entry[0]), "%s", a);
	snprintf(t->entry[1], sizeof(t->entry[1]), "%s", b);
	t->fail_at = fail_at;
	t->fail_rest = rest;
}

static int exchange(struct table *t, struct sbx_error *e)
{
	return sbx_rmeta_exchange(table_move, t, &t->fails, "/d/a", "/d/b", "/d/.tmp", e);
}

START_TEST(test_swapped)
{
	struct table t;
	struct sbx_error e = SBX_ERROR_INIT;
	table_init(&t, "A", "B", 0, false);
	/* a queued change of a failed: after the swap it is not a's any more */
	sbx_rmeta_fail(&t.fails, NULL, "chmod", "/d/a", NULL, false);
	sbx_rmeta_fail(&t.fails, NULL, "chmod", "/d/c", NULL, false);
	ck_assert_int_eq(exchange(&t, &e), 0);
	ck_assert_str_eq(t.entry[0], "B");
	ck_assert_str_eq(t.entry[1], "A");
	ck_assert_str_eq(t.entry[2], "");
	ck_assert_int_eq(t.moves, 3);
	ck_assert_int_eq(sbx_rmeta_fail_take(&t.fails, "/d/a", &e), 0);
	ck_assert_int_eq(sbx_rmeta_fail_take(&t.fails, "/d/c", &e), -EIO); /* others stay */
	sbx_rmeta_fails_destroy(&t.fails);
}
END_TEST

/* Either name missing: ENOENT, and nothing moved (b missing: a is moved back). */
START_TEST(test_missing)
{
	struct table t;
	struct sbx_error e = SBX_ERROR_INIT;
	table_init(&t, "", "B", 0, false);
	ck_assert_int_eq(exchange(&t, &e), -ENOENT);
	ck_assert_int_eq(t.moves, 1);
	ck_assert_str_eq(t.entry[1], "B");
	table_init(&t, "A", "", 0, false);
	ck_assert_int_eq(exchange(&t, &e), -ENOENT);
	ck_assert_str_eq(t.entry[0], "A");
	ck_assert_str_eq(t.entry[1], "");
	ck_assert_str_eq(t.entry[2], "");
	ck_assert_int_eq(t.moves, 3);
}
END_TEST

/* A failed second or third move is undone: both names as before, the move's errno. */
START_TEST(test_undone)
{
	for (int at = 1; at <= 3; at++) {
		struct table t;
		struct sbx_error e = SBX_ERROR_INIT;
		table_init(&t, "A", "B", at, false);
		ck_assert_int_eq(exchange(&t, &e), -EIO);
		ck_assert_str_eq(t.entry[0], "A");
		ck_assert_str_eq(t.entry[1], "B");
		ck_assert_str_eq(t.entry[2], "");
		ck_assert_ptr_null(strstr(e.msg, "undo"));
	}
}
END_TEST

/* An undo that fails too: the error says where the entries are. */
START_TEST(test_undo_fails)
{
	struct table t;
	struct sbx_error e = SBX_ERROR_INIT;
	table_init(&t, "A", "B", 2, true); /* b -> a fails, then tmp -> a */
	ck_assert_int_eq(exchange(&t, &e), -EIO);
	ck_assert_str_eq(t.entry[2], "A");
	ck_assert_msg(strstr(e.msg, "move /d/b /d/a: injected; undo failed (move /d/.tmp /d/a: "
				    "injected): /d/a is at /d/.tmp"),
		      "%s", e.msg);

	sbx_error_clear(&e);
	table_init(&t, "A", "B", 3, true); /* tmp -> b fails, then a -> b */
	ck_assert_int_eq(exchange(&t, &e), -EIO);
	ck_assert_str_eq(t.entry[0], "B");
	ck_assert_str_eq(t.entry[2], "A");
	ck_assert_msg(strstr(e.msg, ": /d/b is at /d/a, /d/a at /d/.tmp"), "%s", e.msg);
	ck_assert_int_eq(e.err, EIO);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("exchange");
	TCase *tc = tcase_create("moves");
	SRunner *sr;
	int failed;
	tcase_add_test(tc, test_swapped);
	tcase_add_test(tc, test_missing);
	tcase_add_test(tc, test_undone);
	tcase_add_test(tc, test_undo_fails);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
