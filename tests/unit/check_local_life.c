/*
 * check_local_life — the local provider's tests that need a lease of their
 * own: kill, outliving the process that created a lease, a lease whose
 * init dies, disk kinds, create errors, packages and network "none",
 * pause under other cgroup modes, and list_sandboxes. Part of the check_local program.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "provider.h"

#include "local_check.h"

START_TEST(test_kill)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_error err = SBX_ERROR_INIT;
	long long t0 = sbx_now_ms();
	struct sbx_instance *in = create(&spec, &err), *again = NULL;
	enum sbx_remote_state st;
	json_t *info = NULL;
	ck_assert_msg(in, "create: %s", err.msg);
	fprintf(stderr, "create: %lld ms\n", sbx_now_ms() - t0);
	ck_assert_int_eq(run(in, "sleep 1000 >/dev/null 2>&1 &", &o), 0);
	ck_assert_int_eq(P->info(in, &info, &err), 0);
	pid_t init = (pid_t)json_integer_value(json_object_get(info, "init_pid"));
	char *root = strdup(json_string_value(json_object_get(info, "root")));
	json_decref(info);
	ck_assert_int_gt(init, 1);
	ck_assert_int_eq(kill(init, 0), 0);
	ck_assert(mounted(root));
	char host[32];
	ck_assert_int_eq(P->get_host(in, 8000, host, sizeof(host), &err), 0);
	ck_assert_str_eq(host, "http://127.0.0.1:8000");

	t0 = sbx_now_ms();
	ck_assert_int_eq(P->kill(in, &err), 0);
	fprintf(stderr, "kill: %lld ms\n", sbx_now_ms() - t0);
	ck_assert_int_eq(P->probe(in, &st, &err), 0);
	ck_assert_int_eq(st, SBX_REMOTE_GONE);
	ck_assert(proc_gone(init));
	ck_assert(!mounted(root));
	*strrchr(root, '/') = '\0';
	ck_assert_int_eq(access(root, F_OK), -1);
	ck_assert_int_eq(P->attach(&spec, in->id, NULL, &again, &err), -ENOENT);
	ck_assert_int_eq(P->kill(in, &err), -ENOENT);
	P->release(in);
	free(root);
}
END_TEST

/* SIGKILLs the lease's init behind the provider's back; its root (caller frees). */
static char *kill_init(struct sbx_instance *in)
{
	struct sbx_error err = SBX_ERROR_INIT;
	json_t *info = NULL;
	ck_assert_int_eq(P->info(in, &info, &err), 0);
	pid_t init = (pid_t)json_integer_value(json_object_get(info, "init_pid"));
	char *root = strdup(json_string_value(json_object_get(info, "root")));
	json_decref(info);
	ck_assert_int_eq(kill(init, SIGKILL), 0);
	for (int i = 0; i < 100 && !proc_gone(init); i++)
		msleep(20);
	return root;
}

START_TEST(test_outlives_creator)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_instance *in = NULL;
	enum sbx_remote_state st;
	char id[64] = "";
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		/* A "daemon" that creates a lease, starts a server and dies. */
		struct sbx_instance *c = create(&spec, &err);
		if (!c)
			_exit(1);
		run(c, "python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &", &o);
		run(c, "echo persisted > /root/p", &o);
		if (write(p[1], c->id, strlen(c->id)) < 0)
			_exit(2);
		_exit(0);
	}
	close(p[1]);
	ck_assert(read(p[0], id, sizeof(id) - 1) > 0);
	close(p[0]);
	waitpid(pid, NULL, 0);
	ck_assert_int_eq(P->attach(&spec, id, NULL, &in, &err), 0);
	ck_assert_int_eq(P->probe(in, &st, &err), 0);
	ck_assert_int_eq(st, SBX_REMOTE_RUNNING);
	ck_assert_int_eq(run(in,
			     "cat /root/p; sleep 0.5; python3 -c \"import urllib.request as u; "
			     "print(u.urlopen('http://127.0.0.1:8765/').status)\"",
			     &o),
			 0);
	ck_assert_str_eq(o.out.buf, "persisted\n200\n");
	/* The init dies behind the provider's back: probe says GONE and reclaims the rest. */
	char *root = kill_init(in);
	ck_assert_int_eq(P->probe(in, &st, &err), 0);
	ck_assert_int_eq(st, SBX_REMOTE_GONE);
	ck_assert(!mounted(root));
	ck_assert_int_eq(P->kill(in, &err), -ENOENT);
	P->release(in);
	free(root);
}
END_TEST

/* list_sandboxes: "ID STATE LEASE TEMPLATE;" into the buffer ctx. */
static int list_entry(void *ctx, const struct sbx_sandbox_entry *sb)
{
	ck_assert_ptr_nonnull(sb->created_at);
	sbx_buf_addf(ctx, "%s %s %s %s;", sb->id, sb->state, sb->lease, sb->template_name);
	return 0;
}

/* What list_sandboxes says of in, without the id ("" when it is not listed). */
static const char *listed_as(struct sbx_buf *b, const char *id)
{
	struct sbx_error err = SBX_ERROR_INIT;
	const char *at;
	sbx_buf_release(b);
	ck_assert_msg(P->list_sandboxes(list_entry, b, &err) == 0, "%s", err.msg);
	if (!(at = strstr(b->buf, id)))
		return "";
	*strchr(at, ';') = '\0';
	return at + strlen(id) + 1;
}

START_TEST(test_list_sandboxes)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_instance *a = NULL, *b = NULL;
	struct sbx_buf seen = SBX_BUF_INIT;
	enum sbx_remote_state st;
	char *root;
	ck_assert_msg(P->create(&spec, "list-a", &a, &err) == 0, "%s", err.msg);
	ck_assert_msg(P->create(&spec, "list-b", &b, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(P->pause(b, &err), 0);
	/* Ids copied: the instances are freed before the last listings. */
	char a_id[sizeof(a->id)], b_id[sizeof(b->id)];
	memcpy(a_id, a->id, sizeof(a_id));
	memcpy(b_id, b->id, sizeof(b_id));
	ck_assert_str_eq(listed_as(&seen, a_id), "running list-a host");
	ck_assert_str_eq(listed_as(&seen, b_id), "paused list-b host");
	/* a's init dies: listed as gone, and listing reclaims nothing (probe does) */
	root = kill_init(a);
	ck_assert_str_eq(listed_as(&seen, a_id), "gone list-a host");
	ck_assert(mounted(root));
	ck_assert_int_eq(P->probe(a, &st, &err), 0);
	ck_assert(!mounted(root));
	ck_assert_str_eq(listed_as(&seen, a_id), "");
	kill_release(b);
	ck_assert_str_eq(listed_as(&seen, b_id), "");
	P->release(a);
	sbx_buf_release(&seen);
	free(root);
}
END_TEST

/* In this forked test only: the provider with settings {key: value}. */
static void reinit(const char *key, const char *value)
{
	struct sbx_error err = SBX_ERROR_INIT;
	json_t *settings = json_pack("{s:s}", key, value);
	struct sbx_provider_env env = {settings, state_dir};
	ck_assert_int_eq(P->init(&env, &err), 0);
	json_decref(settings);
}

static void check_disk(const char *kind, long disk_mb, long write_mb, bool fits)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_spec s;
	json_t *info = NULL;
	char sh[128];
	reinit("disk", kind);
	sbx_spec_copy(&s, &spec);
	s.res.disk_mb = disk_mb;
	struct sbx_instance *in = create(&s, &err);
	ck_assert_msg(in, "create: %s", err.msg);
	ck_assert_int_eq(P->info(in, &info, &err), 0);
	ck_assert_str_eq(json_string_value(json_object_get(info, "disk")), kind);
	json_decref(info);
	snprintf(sh, sizeof(sh), "dd if=/dev/zero of=/root/big bs=1M count=%ld 2>&1; echo ok",
		 write_mb);
	int code = run(in, sh, &o);
	if (fits)
		ck_assert_msg(code == 0 && strstr(o.out.buf, "ok"), "%d %s", code, o.out.buf);
	else
		ck_assert_msg(strstr(o.out.buf, "No space left"), "%d %s", code, o.out.buf);
	kill_release(in);
	sbx_spec_free(&s);
	sbx_buf_release(&o.out);
	sbx_buf_release(&o.err);
}

START_TEST(test_disk_tmpfs)
{
	check_disk("tmpfs", 16, 32, false);
}
END_TEST

/* An ext4 disk is not RAM: 100 MB of files fit in a lease capped at 64 MB of memory. */
START_TEST(test_disk_ext4)
{
	if (access("/dev/loop-control", W_OK) == 0)
		check_disk("ext4", 128, 100, true);
}
END_TEST

START_TEST(test_create_errors)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_spec s;
	sbx_spec_copy(&s, &spec);
	free(s.template_name);
	s.template_name = strdup("no-such-template");
	ck_assert_ptr_null(create(&s, &err));
	ck_assert_int_eq(err.err, EINVAL);
	free(s.template_name);
	s.template_name = strdup("host");
	json_array_append_new(s.packages, json_string("pip:./no-such-package-dir"));
	ck_assert_ptr_null(create(&s, &err));
	ck_assert_int_eq(err.err, EIO);
	ck_assert_msg(strstr(err.msg, "no-such-package-dir"), "%s", err.msg);
	sbx_spec_free(&s);
}
END_TEST

/* Writes text to dir/name on the host. */
static void host_file(const char *dir, const char *name, const char *text, mode_t mode)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
}

static void host_rm(const char *dir, const char *const *names)
{
	char path[512];
	for (; *names; names++) {
		snprintf(path, sizeof(path), "%s/%s", dir, *names);
		unlink(path);
	}
	rmdir(dir);
}

/* Whether the host (the lease's template) has what a shell check needs, with the lease's PATH. */
static bool host_has(const char *sh)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd),
		 "env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "
		 "sh -c '%s' >/dev/null 2>&1",
		 sh);
	return system(cmd) == 0;
}

START_TEST(test_packages_and_network_none)
{
	static const char *const py_files[] = {"setup.py", "sbxdemo.py", NULL};
	static const char *const js_files[] = {"package.json", "cli.js", NULL};
	bool pip = host_has("python3 -m pip --version && python3 -c \"import setuptools\"");
	bool npm = host_has("command -v npm");
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_spec s;
	char pkg[256], js[256], entry[300];
	/* Local packages under the state dir, which the lease cannot see: they are copied in. */
	snprintf(pkg, sizeof(pkg), "%s/sbxdemo", state_dir);
	snprintf(js, sizeof(js), "%s/sbxnpm", state_dir);
	ck_assert_int_eq(mkdir(pkg, 0755), 0);
	ck_assert_int_eq(mkdir(js, 0755), 0);
	host_file(pkg, "setup.py",
		  "from setuptools import setup\n"
		  "setup(name='sbxdemo', version='0.1', py_modules=['sbxdemo'])\n",
		  0644);
	host_file(pkg, "sbxdemo.py", "ANSWER = 42\n", 0644);
	host_file(
	    js, "package.json",
	    "{\"name\": \"sbxnpm\", \"version\": \"1.0.0\", \"bin\": {\"sbxnpm\": \"cli.js\"}}\n",
	    0644);
	host_file(js, "cli.js", "#!/usr/bin/env node\nconsole.log('npm ok')\n", 0755);
	sbx_spec_copy(&s, &spec);
	s.res.disk_mb = 256;
	s.res.memory_mb = 512;
	free(s.network);
	s.network = strdup("none");
	free(s.working_dir);
	s.working_dir = strdup("/work/dir");
	snprintf(entry, sizeof(entry), "pip:%s", pkg);
	if (pip)
		json_array_append_new(s.packages, json_string(entry));
	snprintf(entry, sizeof(entry), "npm:%s", js);
	if (npm)
		json_array_append_new(s.packages, json_string(entry));
	if (!pip || !npm)
		fprintf(stderr, "check_local: no %s on this host: not installing that package\n",
			!pip ? "pip/setuptools" : "npm");
	long long t0 = sbx_now_ms();
	struct sbx_instance *in = create(&s, &err);
	fprintf(stderr, "create with %zu packages: %lld ms\n", json_array_size(s.packages),
		sbx_now_ms() - t0);
	host_rm(pkg, py_files);
	host_rm(js, js_files);
	ck_assert_msg(in, "create: %s", err.msg);
	ck_assert_int_eq(run(in, "pwd", &o), 0);
	ck_assert_str_eq(o.out.buf, "/work/dir\n");
	if (pip) {
		ck_assert_int_eq(run(in, "python3 -c 'import sbxdemo; print(sbxdemo.ANSWER)'", &o),
				 0);
		ck_assert_str_eq(o.out.buf, "42\n");
	}
	if (npm) {
		ck_assert_int_eq(run(in, "sbxnpm", &o), 0);
		ck_assert_str_eq(o.out.buf, "npm ok\n");
	}
	ck_assert_int_eq(run(in, "cat /sys/class/net/lo/operstate; ls /sys/class/net", &o), 0);
	ck_assert_msg(!strcmp(o.out.buf, "unknown\nlo\n"), "network none: %s", o.out.buf);
	char host[32];
	ck_assert_int_eq(P->get_host(in, 80, host, sizeof(host), &err), -ENOTSUP);
	kill_release(in);
	sbx_spec_free(&s);
}
END_TEST

/* Another cgroup mode in this forked test only: v2 where a cgroup2 mount exists, none else. */
static void pause_with_mode(const char *mode, const char *root)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_error err = SBX_ERROR_INIT;
	json_t *settings = json_pack("{s:s}", "cgroup", mode);
	if (root)
		json_object_set_new(settings, "cgroupRoot", json_string(root));
	struct sbx_provider_env env = {settings, state_dir};
	ck_assert_int_eq(P->init(&env, &err), 0);
	json_decref(settings);
	struct sbx_instance *in = create(&spec, &err);
	ck_assert_msg(in, "create: %s", err.msg);
	json_t *info = NULL;
	ck_assert_int_eq(P->info(in, &info, &err), 0);
	ck_assert_str_eq(json_string_value(json_object_get(info, "cgroup")),
			 !strcmp(mode, "none") ? "none" : mode);
	json_decref(info);
	check_pause(in);
	ck_assert_int_eq(run(in, "echo ok", &o), 0);
	/* Kill while paused must work too. */
	ck_assert_int_eq(P->pause(in, &err), 0);
	kill_release(in);
	sbx_buf_release(&o.out);
	sbx_buf_release(&o.err);
}

START_TEST(test_cgroup_v2_freeze)
{
	struct statfs sf;
	if (statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == 0x63677270)
		pause_with_mode("v2", NULL);
	else if (statfs("/sys/fs/cgroup/unified", &sf) == 0 && sf.f_type == 0x63677270)
		pause_with_mode("v2", "/sys/fs/cgroup/unified");
}
END_TEST

START_TEST(test_no_cgroup_sigstop)
{
	pause_with_mode("none", NULL);
}
END_TEST

TCase *check_local_life_tcase(void)
{
	TCase *own = tcase_create("own leases");
	tcase_set_timeout(own, 300);
	tcase_add_unchecked_fixture(own, NULL, kill_leftovers);
	tcase_add_test(own, test_kill);
	tcase_add_test(own, test_create_errors);
	tcase_add_test(own, test_disk_tmpfs);
	tcase_add_test(own, test_disk_ext4);
	tcase_add_test(own, test_outlives_creator);
	tcase_add_test(own, test_list_sandboxes);
	tcase_add_test(own, test_packages_and_network_none);
	tcase_add_test(own, test_cgroup_v2_freeze);
	tcase_add_test(own, test_no_cgroup_sigstop);
	return own;
}
