/*
 * check_kinval — what kinval remembers of the kernel's fs/ cache: noted
 * paths invalidated at a flush, then doubted with the type the kernel was
 * given, so that a path a run gave another type is told once (fuse_ops
 * answers ESTALE), a path the mount itself remade is not, and an
 * unchanged one costs nothing.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kinval.h"

static char invalidated[16][64];
static int n_invalidated;

static void record(void *ctx, const char *path)
{
	(void)ctx;
	if (n_invalidated < 16)
		strncpy(invalidated[n_invalidated++], path, 63);
}

static struct sbx_kinval *fresh(void)
{
	n_invalidated = 0;
	sbx_kinval_set_callback(record, NULL);
	return sbx_kinval_new();
}

START_TEST(flush_invalidates_what_was_noted_once)
{
	struct sbx_kinval *k = fresh();
	ck_assert(!sbx_kinval_note(k, "/l/fs/a", S_IFREG | 0644));
	ck_assert(!sbx_kinval_note(k, "/l/fs/a", S_IFREG | 0600)); /* once */
	sbx_kinval_flush(k);
	ck_assert_int_eq(n_invalidated, 1);
	ck_assert_str_eq(invalidated[0], "/l/fs/a");
	sbx_kinval_flush(k); /* doubted, not noted: nothing to drop again */
	ck_assert_int_eq(n_invalidated, 1);
	sbx_kinval_free(k);
}
END_TEST

START_TEST(a_changed_type_is_told_once)
{
	struct sbx_kinval *k = fresh();
	mode_t type;
	sbx_kinval_note(k, "/l/fs/f", S_IFREG | 0644);
	sbx_kinval_note(k, "/l/fs/d", S_IFDIR | 0755);
	ck_assert(!sbx_kinval_doubted(k, "/l/fs/f", &type));
	sbx_kinval_flush(k);
	ck_assert(sbx_kinval_doubted(k, "/l/fs/f", &type));
	ck_assert_uint_eq(type, S_IFREG);
	/* The run made f a directory: told once, then it is the kernel's type. */
	ck_assert(sbx_kinval_note(k, "/l/fs/f", S_IFDIR | 0755));
	ck_assert(!sbx_kinval_doubted(k, "/l/fs/f", &type));
	ck_assert(!sbx_kinval_note(k, "/l/fs/f", S_IFDIR | 0755));
	/* d kept its type (another mode is no type change). */
	ck_assert(!sbx_kinval_note(k, "/l/fs/d", S_IFDIR | 0700));
	/* Noted again, so the next run drops it again. */
	n_invalidated = 0;
	sbx_kinval_flush(k);
	ck_assert_int_eq(n_invalidated, 2);
	sbx_kinval_free(k);
}
END_TEST

/*
 * The attributes an fstat (a GETATTR with a handle) gives for a doubted
 * path: noted for the next flush, the doubt kept. Skipped, a run's new
 * size stayed unseen after the flush that was to drop the old one.
 */
START_TEST(an_open_file_s_attributes_are_dropped_at_the_next_flush)
{
	struct sbx_kinval *k = fresh();
	mode_t type;
	sbx_kinval_note(k, "/l/fs/f", S_IFREG | 0644);
	sbx_kinval_flush(k);
	ck_assert(sbx_kinval_doubted(k, "/l/fs/f", &type));
	n_invalidated = 0;
	sbx_kinval_note_kept(k, "/l/fs/f", S_IFREG | 0644);
	ck_assert(sbx_kinval_doubted(k, "/l/fs/f", &type)); /* the path's next stat still checks */
	sbx_kinval_flush(k);
	ck_assert_int_eq(n_invalidated, 1);
	ck_assert_str_eq(invalidated[0], "/l/fs/f");
	ck_assert(sbx_kinval_doubted(k, "/l/fs/f", &type));
	ck_assert_uint_eq(type, S_IFREG);
	/* a type change is still told to the path's stat, once */
	ck_assert(sbx_kinval_note(k, "/l/fs/f", S_IFDIR | 0755));
	sbx_kinval_free(k);
}
END_TEST

START_TEST(the_mount_s_own_changes_are_not_doubted)
{
	struct sbx_kinval *k = fresh();
	mode_t type;
	sbx_kinval_note(k, "/l/fs/x", S_IFREG | 0644);
	sbx_kinval_flush(k);
	sbx_kinval_forget(k, "/l/fs/x"); /* e.g. rm x; mkdir x through the mount */
	ck_assert(!sbx_kinval_doubted(k, "/l/fs/x", &type));
	ck_assert(!sbx_kinval_note(k, "/l/fs/x", S_IFDIR | 0755));
	sbx_kinval_forget(k, "/l/fs/never"); /* harmless */
	sbx_kinval_free(k);
}
END_TEST

START_TEST(a_change_report_doubts_one_path)
{
	struct sbx_kinval *k = fresh();
	mode_t type;
	sbx_kinval_note(k, "/l/fs/a", S_IFLNK | 0777);
	sbx_kinval_note(k, "/l/fs/b", S_IFREG | 0644);
	sbx_kinval_path(k, "/l/fs/a");
	sbx_kinval_path(k, "/l/fs/unknown"); /* never given: nothing to drop */
	ck_assert_int_eq(n_invalidated, 1);
	ck_assert(sbx_kinval_doubted(k, "/l/fs/a", &type));
	ck_assert_uint_eq(type, S_IFLNK);
	ck_assert(!sbx_kinval_doubted(k, "/l/fs/b", &type));
	ck_assert(sbx_kinval_note(k, "/l/fs/a", S_IFREG | 0644));
	sbx_kinval_free(k);
}
END_TEST

START_TEST(without_a_callback_nothing_is_kept)
{
	struct sbx_kinval *k = fresh();
	mode_t type;
	sbx_kinval_set_callback(NULL, NULL);
	ck_assert(!sbx_kinval_note(k, "/l/fs/a", S_IFREG));
	sbx_kinval_flush(k);
	ck_assert(!sbx_kinval_doubted(k, "/l/fs/a", &type));
	sbx_kinval_free(k);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("kinval");
	TCase *tc = tcase_create("kinval");
	tcase_add_test(tc, flush_invalidates_what_was_noted_once);
	tcase_add_test(tc, a_changed_type_is_told_once);
	tcase_add_test(tc, an_open_file_s_attributes_are_dropped_at_the_next_flush);
	tcase_add_test(tc, the_mount_s_own_changes_are_not_doubted);
	tcase_add_test(tc, a_change_report_doubts_one_path);
	tcase_add_test(tc, without_a_callback_nothing_is_kept);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
