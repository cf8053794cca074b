/*
 * check_registry — the provider registry refuses what breaks the contract:
 * a provider built for another contract version, one whose capability bits
 * promise slots it leaves empty, one without the slots every lease needs,
 * and a second provider of the same name. The compiled-in ones pass. A
 * provider whose init failed is not used (sbx_provider_ready repeats why),
 * and a setting one cannot use fails sbx_provider_init_all. A key the
 * service refused is read again from its keyFile or env_file.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/keyfile.h"
#include "base/log.h"
#include "provider.h"
#include "rmeta.h"

static int fake_create(const struct sbx_spec *spec, const char *lease, struct sbx_instance **out,
		       struct sbx_error *err)
{
	(void)spec, (void)lease, (void)out;
	return sbx_error_set(err, ENOSYS, SBX_E_INTERNAL, "test provider");
}

static int fake_kill(struct sbx_instance *inst, struct sbx_error *err)
{
	(void)inst, (void)err;
	return 0;
}

static void fake_release(struct sbx_instance *inst)
{
	(void)inst;
}

#define SLOTS .create = fake_create, .release = fake_release
static int fake_tty_open(struct sbx_instance *inst, const struct sbx_tty_req *req,
			 const struct sbx_tty_sink *sink, struct sbx_tty_session **out,
			 struct sbx_error *err)
{
	(void)inst, (void)req, (void)sink, (void)out;
	return sbx_error_set(err, ENOTSUP, SBX_E_INTERNAL, "not here");
}

#define GOOD(nm) .name = nm, .abi = SBX_PROVIDER_ABI, SLOTS, .kill = fake_kill

START_TEST(builtins_pass)
{
	struct sbx_error err = SBX_ERROR_INIT;
	size_t n = 0;
	for (const struct sbx_provider *const *p = sbx_provider_all(); *p; p++, n++)
		ck_assert_msg(sbx_provider_check(*p, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 3);
	ck_assert_ptr_nonnull(sbx_provider_find("local"));
	ck_assert_ptr_nonnull(sbx_provider_find("e2b"));
	ck_assert_ptr_nonnull(sbx_provider_find("daytona"));
}
END_TEST

START_TEST(broken_ones_refused)
{
	static const struct sbx_provider old_abi = {
	    .name = "oldabi", .abi = SBX_PROVIDER_ABI + 1, SLOTS, .kill = fake_kill};
	static const struct sbx_provider no_io = {GOOD("noio"), .caps = SBX_CAP_DIRECT_IO};
	static const struct sbx_provider no_list = {GOOD("nolist"), .caps = SBX_CAP_LIST_ATTRS};
	static const struct sbx_provider no_pause = {GOOD("nopause"), .caps = SBX_CAP_PAUSE_MEMORY};
	static const struct sbx_provider no_tree = {GOOD("notree"), .list = sbx_rmeta_list};
	static const struct sbx_provider no_kill = {
	    .name = "nokill", .abi = SBX_PROVIDER_ABI, SLOTS};
	static const struct sbx_provider half_tty = {GOOD("halftty"), .tty_open = fake_tty_open};
	static const struct sbx_provider no_name = {GOOD("")};
	static const struct sbx_provider good = {GOOD("good")};
	static const struct sbx_provider dup = {GOOD("good")};
	struct sbx_error err = SBX_ERROR_INIT;

	sbx_log_setup(0, SBX_LOG_ERR);
	ck_assert_int_eq(sbx_provider_register(&old_abi, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "contract version"));
	ck_assert_int_eq(sbx_provider_register(&no_io, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "SBX_CAP_DIRECT_IO"));
	ck_assert_int_eq(sbx_provider_register(&no_list, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "list"));
	ck_assert_int_eq(sbx_provider_register(&no_tree, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "list_tree"));
	ck_assert_int_eq(sbx_provider_register(&no_pause, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "pause"));
	ck_assert_int_eq(sbx_provider_register(&no_kill, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "kill"));
	ck_assert_int_eq(sbx_provider_register(&half_tty, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "tty_write"));
	ck_assert_int_eq(sbx_provider_register(&no_name, &err), -EINVAL);
	ck_assert_ptr_null(sbx_provider_find("oldabi"));
	ck_assert_ptr_null(sbx_provider_find("noio"));
	ck_assert_ptr_null(sbx_provider_find("nokill"));

	ck_assert_int_eq(sbx_provider_register(&good, &err), 0);
	ck_assert_ptr_eq(sbx_provider_find("good"), &good);
	ck_assert_int_eq(sbx_provider_register(&dup, &err), -EEXIST);
	ck_assert_int_eq(sbx_provider_register(sbx_provider_find("e2b"), &err), -EEXIST);
}
END_TEST

static int flaky_shutdowns;

/* Fails as its settings say: {"fail": ERRNO}. */
static int flaky_init(const struct sbx_provider_env *env, struct sbx_error *err)
{
	json_t *f = json_object_get(env->settings, "fail");
	if (!f)
		return 0;
	return sbx_error_set(err, (int)json_integer_value(f), SBX_E_INTERNAL, "flaky says no (%d)",
			     (int)json_integer_value(f));
}

static void flaky_shutdown(void)
{
	flaky_shutdowns++;
}

START_TEST(a_provider_whose_init_failed_is_not_used)
{
	static const struct sbx_provider flaky = {GOOD("flaky"), .init = flaky_init,
						  .shutdown = flaky_shutdown};
	struct sbx_error err = SBX_ERROR_INIT;
	char dir[] = "/tmp/check_registry.XXXXXX";
	json_t *no_key = json_pack("{s:{s:i}}", "flaky", "fail", EACCES);
	json_t *bad_value = json_pack("{s:{s:i}}", "flaky", "fail", EINVAL);

	ck_assert_ptr_nonnull(mkdtemp(dir));
	sbx_log_setup(0, SBX_LOG_ERR);
	sbx_provider_register(&flaky, &err);
	ck_assert_ptr_eq(sbx_provider_find("flaky"), &flaky);
	ck_assert_int_eq(sbx_provider_ready(&flaky, &err), 0); /* never initialised */

	ck_assert_int_eq(sbx_provider_init(&flaky, no_key, dir, &err), -EACCES);
	sbx_error_clear(&err);
	ck_assert_int_eq(sbx_provider_ready(&flaky, &err), -EACCES);
	ck_assert_str_eq(err.msg, "provider flaky is unavailable: flaky says no (13)");
	ck_assert_int_eq(sbx_provider_init(&flaky, NULL, dir, &err), 0);
	ck_assert_int_eq(sbx_provider_ready(&flaky, &err), 0);

	/* Without credentials: only unavailable. A value it cannot use: refused. */
	flaky_shutdowns = 0;
	ck_assert_int_eq(sbx_provider_init_all(no_key, dir, false, &err), 0);
	ck_assert_int_eq(flaky_shutdowns, 1); /* a check: shut down again */
	ck_assert_int_eq(sbx_provider_init_all(bad_value, dir, true, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "flaky says no (22)");
	ck_assert_int_eq(flaky_shutdowns, 2); /* refused: shut down */
	ck_assert_int_eq(sbx_provider_ready(&flaky, &err), -EINVAL);

	json_decref(no_key);
	json_decref(bad_value);
	for (const struct sbx_provider *const *p = sbx_provider_all(); *p; p++)
		if ((*p)->shutdown)
			(*p)->shutdown();
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static struct sbx_keyhdr rotor_hdr = SBX_KEYHDR_INIT;

static int rotor_init(const struct sbx_provider_env *env, struct sbx_error *err)
{
	if (env->key_error) {
		*err = *env->key_error;
		return -err->err;
	}
	sbx_keyhdr_start(&rotor_hdr, env, "Key: ", env->api_key ? env->api_key : "(environment)");
	return 0;
}

static bool rotor_set_key(const char *key)
{
	return sbx_keyhdr_set(&rotor_hdr, key);
}

static void put(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
}

/* A key refused by the service is read again from its file: keyFile, else env_file. */
START_TEST(a_refused_key_is_read_again)
{
	static const struct sbx_provider rotor = {GOOD("rotor"), .init = rotor_init,
						  .key_var = "ROTOR_KEY", .set_key = rotor_set_key};
	struct sbx_error err = SBX_ERROR_INIT;
	char dir[] = "/tmp/check_registry.XXXXXX", key[64], env[64], *line, *other;
	unsigned gen, old_gen;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(key, sizeof(key), "%s/key", dir);
	snprintf(env, sizeof(env), "%s/env", dir);
	sbx_log_setup(0, SBX_LOG_ERR);
	sbx_provider_register(&rotor, &err);
	put(key, "k1\n", 0600);
	json_t *cfg = json_pack("{s:{s:s}}", "rotor", "keyFile", key);
	ck_assert_int_eq(sbx_provider_init_all(cfg, dir, true, &err), 0);
	line = sbx_keyhdr_get(&rotor_hdr, &gen);
	ck_assert_str_eq(line, "Key: k1");
	old_gen = gen;
	other = sbx_keyhdr_get(&rotor_hdr, &old_gen);
	/* Refused, the file unchanged: nothing new, no retry. */
	ck_assert(!sbx_keyhdr_renewed(&rotor_hdr, &line, &gen));
	ck_assert_str_eq(line, "Key: k1");
	/* Rotated in the file: the next refusal takes it. */
	put(key, "  k2  \n", 0600);
	ck_assert(sbx_keyhdr_renewed(&rotor_hdr, &line, &gen));
	ck_assert_str_eq(line, "Key: k2");
	/* A call that was refused with k1 meanwhile retries with k2 (no re-read needed). */
	ck_assert(sbx_keyhdr_renewed(&rotor_hdr, &other, &old_gen));
	ck_assert_str_eq(other, "Key: k2");
	ck_assert_uint_eq(old_gen, gen);
	/* A file others can read is not taken (logged): the key in use stays. */
	put(key, "k3\n", 0644);
	ck_assert(!sbx_keyhdr_renewed(&rotor_hdr, &line, &gen));
	ck_assert_str_eq(line, "Key: k2");
	json_decref(cfg);

	/* No keyFile: the provider's variable in the env_file, at init and after. */
	put(env, "ROTOR_KEY=e1\n", 0600);
	sbx_provider_set_env_file(env);
	cfg = json_object();
	ck_assert_int_eq(sbx_provider_init_all(cfg, dir, true, &err), 0);
	sbx_wipe_free(line);
	line = sbx_keyhdr_get(&rotor_hdr, &gen);
	ck_assert_str_eq(line, "Key: e1");
	put(env, "OTHER=1\nexport ROTOR_KEY=\"e2\"\n", 0600);
	ck_assert(sbx_keyhdr_renewed(&rotor_hdr, &line, &gen));
	ck_assert_str_eq(line, "Key: e2");
	sbx_provider_set_env_file(NULL);

	sbx_wipe_free(line);
	sbx_wipe_free(other);
	json_decref(cfg);
	sbx_provider_shutdown_all();
	sbx_keyhdr_clear(&rotor_hdr);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("registry");
	TCase *tc = tcase_create("check");
	tcase_add_test(tc, builtins_pass);
	tcase_add_test(tc, broken_ones_refused);
	tcase_add_test(tc, a_provider_whose_init_failed_is_not_used);
	tcase_add_test(tc, a_refused_key_is_read_again);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
