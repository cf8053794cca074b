/*
 * check_lockorder — the lock-order tracker of src/base/lockorder.h: the
 * order of lease.h and the remote metadata engine's passes, a wrong order, two leases' locks at
 * once and a provider call with a lock held abort. Built with SBX_LOCK_DEBUG here whatever the
 * build, so the plain `make check` runs the checks too.
 */
#define SBX_LOCK_DEBUG 1
#include "base/lockorder.h"

#include <check.h>
#include <signal.h>
#include <stdlib.h>

static pthread_mutex_t save = PTHREAD_MUTEX_INITIALIZER, mount = PTHREAD_MUTEX_INITIALIZER,
		       lease_a = PTHREAD_MUTEX_INITIALIZER, lease_b = PTHREAD_MUTEX_INITIALIZER,
		       errl = PTHREAD_MUTEX_INITIALIZER, rme_flush = PTHREAD_MUTEX_INITIALIZER,
		       rme = PTHREAD_MUTEX_INITIALIZER;

START_TEST(test_the_order_passes)
{
	sbx_lock(&save, SBX_LOCK_SAVE);
	sbx_lock(&mount, SBX_LOCK_MOUNT);
	sbx_lock(&lease_a, SBX_LOCK_LEASE);
	sbx_lock(&errl, SBX_LOCK_ERR);
	sbx_unlock(&errl, SBX_LOCK_ERR);
	sbx_unlock(&mount, SBX_LOCK_MOUNT); /* out of order: legal */
	sbx_unlock(&lease_a, SBX_LOCK_LEASE);
	sbx_lock(&lease_b, SBX_LOCK_LEASE); /* one lease after another */
	sbx_unlock(&lease_b, SBX_LOCK_LEASE);
	sbx_unlock(&save, SBX_LOCK_SAVE);
	sbx_lock_assert_none();
	/* the leaf under anything, and alone */
	sbx_lock(&errl, SBX_LOCK_ERR);
	sbx_unlock(&errl, SBX_LOCK_ERR);
}
END_TEST

/* sbx_lease_put() (mount.lock) with a lease's lock held: the classic inversion. */
START_TEST(test_mount_under_lease_aborts)
{
	sbx_lock(&lease_a, SBX_LOCK_LEASE);
	sbx_lock(&mount, SBX_LOCK_MOUNT);
}
END_TEST

START_TEST(test_save_under_mount_aborts)
{
	sbx_lock(&mount, SBX_LOCK_MOUNT);
	sbx_lock(&save, SBX_LOCK_SAVE);
}
END_TEST

START_TEST(test_two_leases_abort)
{
	sbx_lock(&lease_a, SBX_LOCK_LEASE);
	sbx_lock(&lease_b, SBX_LOCK_LEASE);
}
END_TEST

START_TEST(test_lock_under_the_leaf_aborts)
{
	sbx_lock(&errl, SBX_LOCK_ERR);
	sbx_lock(&lease_a, SBX_LOCK_LEASE);
}
END_TEST

START_TEST(test_provider_call_under_a_lock_aborts)
{
	sbx_lock(&lease_a, SBX_LOCK_LEASE);
	sbx_lock_assert_none();
}
END_TEST

/*
 * The remote metadata engine (providers/rmeta_engine.h): its flush lock,
 * then its queue lock; a batch applied under the flush lock reports a
 * failure to the lease (err_lock).
 */
START_TEST(test_engine_order_passes)
{
	sbx_lock(&rme_flush, SBX_LOCK_RME_FLUSH);
	sbx_lock(&rme, SBX_LOCK_RME);
	sbx_unlock(&rme, SBX_LOCK_RME);
	sbx_lock(&errl, SBX_LOCK_ERR);
	sbx_unlock(&errl, SBX_LOCK_ERR);
	sbx_unlock(&rme_flush, SBX_LOCK_RME_FLUSH);
	sbx_lock_assert_none();
}
END_TEST

/* A flush (sbx_rme_flush, sbx_rme_add) with the queue lock held. */
START_TEST(test_flush_under_queue_lock_aborts)
{
	sbx_lock(&rme, SBX_LOCK_RME);
	sbx_lock(&rme_flush, SBX_LOCK_RME_FLUSH);
}
END_TEST

/* The lease's lock taken while a batch is applied. */
START_TEST(test_lease_under_flush_aborts)
{
	sbx_lock(&rme_flush, SBX_LOCK_RME_FLUSH);
	sbx_lock(&lease_a, SBX_LOCK_LEASE);
}
END_TEST

/* Per thread: another thread's locks are not this one's. */
static void *take_mount(void *arg)
{
	(void)arg;
	sbx_lock(&mount, SBX_LOCK_MOUNT);
	sbx_unlock(&mount, SBX_LOCK_MOUNT);
	return NULL;
}

START_TEST(test_levels_are_per_thread)
{
	pthread_t t;
	sbx_lock(&lease_a, SBX_LOCK_LEASE);
	ck_assert_int_eq(pthread_create(&t, NULL, take_mount, NULL), 0);
	pthread_join(t, NULL);
	sbx_unlock(&lease_a, SBX_LOCK_LEASE);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lockorder");
	TCase *tc = tcase_create("order");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_the_order_passes);
	tcase_add_test_raise_signal(tc, test_mount_under_lease_aborts, SIGABRT);
	tcase_add_test_raise_signal(tc, test_save_under_mount_aborts, SIGABRT);
	tcase_add_test_raise_signal(tc, test_two_leases_abort, SIGABRT);
	tcase_add_test_raise_signal(tc, test_lock_under_the_leaf_aborts, SIGABRT);
	tcase_add_test_raise_signal(tc, test_provider_call_under_a_lock_aborts, SIGABRT);
	tcase_add_test(tc, test_levels_are_per_thread);
	tcase_add_test(tc, test_engine_order_passes);
	tcase_add_test_raise_signal(tc, test_flush_under_queue_lock_aborts, SIGABRT);
	tcase_add_test_raise_signal(tc, test_lease_under_flush_aborts, SIGABRT);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK); /* the aborts must not end the run */
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
