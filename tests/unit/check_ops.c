/*
 * check_ops — the pieces that make sbxfs behave like other mounts (issue
 * 14): the /proc/net/tcp parser behind ports/, key and env files with their
 * mode check, log targets with timestamps, the sd_notify datagram, and the
 * AUTH class for refused credentials; a run's stream read while the run is
 * still making its files (sbx run's stderr, lost under load); the bound
 * on one run's output.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/fsutil.h"
#include "base/keyfile.h"
#include "base/log.h"
#include "daytona/protocol.h"
#include "e2b/protocol.h"
#include "lease.h"
#include "notify.h"
#include "provider.h"
#include "runs.h"
#include "runs_int.h"

static char tmpdir[] = "/tmp/check_ops.XXXXXX";

static char *tmp_file(const char *name, const char *text, mode_t mode)
{
	static char path[256];
	int fd;
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	fchmod(fd, mode);
	close(fd);
	return path;
}

START_TEST(ports_from_proc_net)
{
	/* Two listeners (one twice: v4 and v6), one established socket, one header line. */
	const char *text =
	    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
	    "   0: 0100007F:1D56 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0\n"
	    "   1: 0100007F:8AE2 0100007F:1D56 01 00000000:00000000 00:00000000 00000000 0\n"
	    "   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0\n"
	    "  sl  local_address                         remote_address                        st\n"
	    "   0: 00000000000000000000000000000000:1D56 00000000000000000000000000000000:0000 0A "
	    "0\n"
	    "   1: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A "
	    "0";
	int ports[8];
	size_t n = sbx_ports_parse(text, strlen(text), ports, 8);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(ports[0], 22);
	ck_assert_int_eq(ports[1], 80);
	ck_assert_int_eq(ports[2], 7510);
	/* bounded */
	ck_assert_uint_eq(sbx_ports_parse(text, strlen(text), ports, 1), 1);
	ck_assert_uint_eq(sbx_ports_parse("", 0, ports, 8), 0);
	ck_assert_uint_eq(sbx_ports_parse("garbage\n0: x y 0A\n", 18, ports, 8), 0);
}
END_TEST

START_TEST(keyfile_mode_checked)
{
	struct sbx_error e = SBX_ERROR_INIT;
	char *key = NULL;
	char *p = tmp_file("key", "  sekrit-1 \nsecond line\n", 0644);
	ck_assert_int_eq(sbx_keyfile_read(p, &key, &e), -EACCES);
	ck_assert_ptr_nonnull(strstr(e.msg, "mode 0644: chmod 600"));
	ck_assert_ptr_null(key);
	chmod(p, 0600);
	ck_assert_int_eq(sbx_keyfile_read(p, &key, &e), 0);
	ck_assert_str_eq(key, "sekrit-1");
	free(key);
	p = tmp_file("empty", "\n", 0600);
	ck_assert_int_eq(sbx_keyfile_read(p, &key, &e), -EINVAL);
	ck_assert_int_eq(sbx_keyfile_read("/nonexistent/k", &key, &e), -ENOENT);
}
END_TEST

START_TEST(envfile_loaded)
{
	struct sbx_error e = SBX_ERROR_INIT;
	char *p = tmp_file("env",
			   "# comment\n\nCHECK_OPS_A=one\nexport CHECK_OPS_B=\"two words\"\n"
			   "CHECK_OPS_C='3'\n",
			   0640);
	char opt[300];
	ck_assert_int_eq(sbx_envfile_load(p, &e), -EACCES);
	ck_assert_ptr_null(getenv("CHECK_OPS_A"));
	chmod(p, 0600);
	ck_assert_int_eq(sbx_envfile_load(p, &e), 0);
	ck_assert_str_eq(getenv("CHECK_OPS_A"), "one");
	ck_assert_str_eq(getenv("CHECK_OPS_B"), "two words");
	ck_assert_str_eq(getenv("CHECK_OPS_C"), "3");
	p = tmp_file("bad", "NOEQUALS\n", 0600);
	ck_assert_int_eq(sbx_envfile_load(p, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, ":1: not KEY=VALUE"));
	p = tmp_file("bad2", "1X=y\n", 0600);
	ck_assert_int_eq(sbx_envfile_load(p, &e), -EINVAL);
	/* The line number counts blank lines too (strtok skipped them: ":2:" here). */
	p = tmp_file("bad3", "CHECK_OPS_F=1\n\n\nNOEQUALS\n", 0600);
	ck_assert_int_eq(sbx_envfile_load(p, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, ":4: not KEY=VALUE"));
	/* A NUL ended the file there, unseen: the rest was never loaded. */
	p = tmp_file("nul", "", 0600);
	int fd = open(p, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(write(fd, "CHECK_OPS_D=1\0CHECK_OPS_E=2\n", 29), 29);
	close(fd);
	ck_assert_int_eq(sbx_envfile_load(p, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "NUL byte"));
	ck_assert_ptr_null(getenv("CHECK_OPS_D"));
	/* '-': a missing file is fine, an unsafe one is not */
	ck_assert_int_eq(sbx_envfile_load("-/nonexistent/env", &e), 0);
	ck_assert_int_eq(sbx_envfile_load("/nonexistent/env", &e), -ENOENT);
	p = tmp_file("env2", "X=1\n", 0604);
	snprintf(opt, sizeof(opt), "-%s", p);
	ck_assert_int_eq(sbx_envfile_load(opt, &e), -EACCES);

	/* One value read again (a rotated key), the environment untouched; the last line wins. */
	char *v = NULL;
	p = tmp_file("env3", "CHECK_OPS_K=old\nexport CHECK_OPS_K='new key'\nOTHER=1\n", 0600);
	ck_assert_int_eq(sbx_envfile_value(p, "CHECK_OPS_K", &v, &e), 0);
	ck_assert_str_eq(v, "new key");
	ck_assert_ptr_null(getenv("CHECK_OPS_K"));
	sbx_wipe_free(v);
	ck_assert_int_eq(sbx_envfile_value(p, "CHECK_OPS_NONE", &v, &e), 0);
	ck_assert_ptr_null(v);
	ck_assert_int_eq(sbx_envfile_value("-/nonexistent/env", "X", &v, &e), 0);
	ck_assert_ptr_null(v);
	chmod(p, 0644); /* made readable by others since: refused, nothing returned */
	ck_assert_int_eq(sbx_envfile_value(p, "CHECK_OPS_K", &v, &e), -EACCES);
	ck_assert_ptr_null(v);
	p = tmp_file("env4", "CHECK_OPS_K=1\nBAD LINE\n", 0600);
	ck_assert_int_eq(sbx_envfile_value(p, "CHECK_OPS_K", &v, &e), -EINVAL);
	ck_assert_ptr_null(v);
}
END_TEST

START_TEST(log_file_has_timestamps)
{
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_buf b = SBX_BUF_INIT;
	enum sbx_log_level lv;
	const char *where = NULL;
	char path[256];
	regex_t re;

	snprintf(path, sizeof(path), "%s/state", tmpdir);
	/* Daemonised, no /dev/log in this test's view: the state dir's file. */
	if (access("/dev/log", F_OK) == 0) {
		snprintf(path, sizeof(path), "%s/given.log", tmpdir);
		ck_assert_int_eq(sbx_log_open(path, true, tmpdir, SBX_LOG_INFO, &where, &e), 0);
	} else {
		ck_assert_int_eq(sbx_log_open(NULL, true, path, SBX_LOG_INFO, &where, &e), 0);
		strcat(path, "/sbxfs.log");
	}
	ck_assert_str_eq(where, path);
	sbx_log(SBX_LOG_INFO, "hello %d\nsecond", 42);
	sbx_log(SBX_LOG_DEBUG, "not at info");
	sbx_log(SBX_LOG_ERR, "bad");
	ck_assert_int_eq(sbx_read_file(path, &b, 1 << 20), 0);
	ck_assert_int_eq(
	    regcomp(&re,
		    "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
		    "sbxfs\\[[0-9]+\\]: info: hello 42 second\n"
		    "[0-9]{4}-[^ ]+Z sbxfs\\[[0-9]+\\]: error: bad\n$",
		    REG_EXTENDED),
	    0);
	ck_assert_msg(regexec(&re, b.buf, 0, NULL, 0) == 0, "log text: [%s]", b.buf);
	regfree(&re);
	sbx_buf_release(&b);

	ck_assert_int_eq(sbx_log_open("", false, tmpdir, SBX_LOG_INFO, NULL, &e), -EINVAL);
	ck_assert_int_eq(
	    sbx_log_open("/nonexistent/dir/x.log", false, tmpdir, SBX_LOG_INFO, NULL, &e), -ENOENT);
	ck_assert_int_eq(sbx_log_level_parse("warn", &lv), 0);
	ck_assert_int_eq(lv, SBX_LOG_WARN);
	ck_assert_int_eq(sbx_log_level_parse("debug", &lv), 0);
	ck_assert_int_eq(lv, SBX_LOG_DEBUG);
	ck_assert_int_eq(sbx_log_level_parse("loud", &lv), -EINVAL);
	sbx_log_setup(0, SBX_LOG_WARN);
}
END_TEST

START_TEST(notify_datagram)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char buf[256];
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	ssize_t n;

	unsetenv("NOTIFY_SOCKET");
	ck_assert_int_eq(sbx_notify_send("READY=1"), 0); /* not under systemd: nothing */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", tmpdir);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	ck_assert_int_eq(sbx_notify_send("READY=1\nSTATUS=x"), 0);
	n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	ck_assert_int_eq(n, 16);
	buf[n] = '\0';
	ck_assert_str_eq(buf, "READY=1\nSTATUS=x");
	close(fd);

	/* abstract namespace: "@name" */
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	memset(sa.sun_path, 0, sizeof(sa.sun_path));
	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "check_ops-%d", (int)getpid());
	ck_assert_int_eq(
	    bind(fd, (struct sockaddr *)&sa,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sa.sun_path + 1))),
	    0);
	snprintf(buf, sizeof(buf), "@%s", sa.sun_path + 1);
	setenv("NOTIFY_SOCKET", buf, 1);
	ck_assert_int_eq(sbx_notify_send("READY=1"), 0);
	n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	ck_assert_int_eq(n, 7);
	close(fd);
	setenv("NOTIFY_SOCKET", "relative", 1);
	ck_assert_int_eq(sbx_notify_send("READY=1"), -EINVAL);
	unsetenv("NOTIFY_SOCKET");
}
END_TEST

START_TEST(refused_key_is_auth)
{
	struct sbx_error e = SBX_ERROR_INIT;
	const char *body = "{\"code\":401,\"message\":\"Invalid API key\"}";
	ck_assert_int_eq(e2b_api_error(401, body, strlen(body), "create sandbox", &e), -EACCES);
	ck_assert_int_eq(e.code, SBX_E_AUTH);
	ck_assert_str_eq(sbx_errcode_name(e.code), "AUTH");
	ck_assert_ptr_nonnull(strstr(e.msg, "E2B refused the API key (401)"));
	ck_assert_int_eq(e2b_api_error(403, NULL, 0, "list", &e), -EACCES);
	ck_assert_ptr_nonnull(strstr(e.msg, "E2B refused the API key (403)"));
	/* a 404 stays what it was */
	ck_assert_int_eq(e2b_api_error(404, NULL, 0, "get", &e), -ENOENT);
	ck_assert_int_ne(e.code, SBX_E_AUTH);

	body = "{\"statusCode\":401,\"message\":\"Unauthorized\"}";
	ck_assert_int_eq(dt_error_from_reply(401, body, strlen(body), "create", &e), -EACCES);
	ck_assert_int_eq(e.code, SBX_E_AUTH);
	ck_assert_ptr_nonnull(strstr(e.msg, "Daytona refused the API key (401)"));
	ck_assert_int_eq(sbx_errno_from_code(SBX_E_AUTH), EACCES);
}
END_TEST

/*
 * A run is in the lease's table (runs/mine names it) a moment before its
 * files are on disk. A reader of its stderr opened in that moment waits for
 * the bytes, as one opened later does: it failed with ENOENT, and sbx run
 * printed nothing of the command's stderr (8 concurrent runs on a loaded
 * machine, one in ~300).
 */
START_TEST(run_stream_before_its_files)
{
	struct sbx_lease l = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct sbx_run *r = calloc(1, sizeof(*r));
	struct sbx_run_reader *rd = NULL;
	char path[300], buf[64];
	snprintf(path, sizeof(path), "%s/lease", tmpdir);
	l.dir = path;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->refs = 1;
	r->lease = &l;
	r->out_fd = r->err_fd = -1;
	unsigned long n = sbx_runs_add(&l, r);
	ck_assert_uint_eq(n, 1);

	ck_assert_int_eq(sbx_run_reader_open(&l, n, "stderr", false, &rd), 0);
	ck_assert_int_eq(sbx_mkdir_p(r->dir, 0700), 0);
	char *p = sbx_runs_path(&l, n, "stderr");
	int fd = open(p, O_WRONLY | O_CREAT, 0600);
	free(p);
	ck_assert_int_eq(write(fd, "err1", 4), 4);
	close(fd);
	pthread_mutex_lock(&r->lock);
	r->err_len = 4;
	r->done = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	ck_assert_int_eq(sbx_run_reader_read(rd, buf, sizeof(buf), 0), 4);
	ck_assert_int_eq(memcmp(buf, "err1", 4), 0);
	ck_assert_int_eq(sbx_run_reader_read(rd, buf, sizeof(buf), 4), 0);
	sbx_run_reader_free(rd);
	/* a run that is not in the table has no files to wait for */
	ck_assert_int_eq(sbx_run_reader_open(&l, n + 1, "stderr", false, &rd), -ENOENT);
	sbx_run_put(r);
	l.runtab_free(&l);
}
END_TEST

/*
 * One run keeps at most SBX_RUNS_MAX_BYTES of output: `head -c 5G
 * /dev/zero` filled the state dir's disk (the reserve below it is shown by
 * test-*-output's story_output_runaway on a small tmpfs).
 */
START_TEST(run_output_bounded)
{
	char why[192] = "";
	int fd = open(tmp_file("out", "", 0600), O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(sbx_runs_room(fd, 0, 4096, why, sizeof(why)), 0);
	ck_assert_int_eq(sbx_runs_room(fd, SBX_RUNS_MAX_BYTES - 10, 5, why, sizeof(why)), 0);
	ck_assert_int_eq(sbx_runs_room(fd, SBX_RUNS_MAX_BYTES - 10, 11, why, sizeof(why)), -EFBIG);
	ck_assert_str_eq(why, "its output passed 4096 MiB, the most one run keeps");
	ck_assert_int_eq(sbx_runs_room(fd, SBX_RUNS_MAX_BYTES, 1, why, sizeof(why)), -EFBIG);
	close(fd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ops");
	TCase *tc = tcase_create("ops");
	int failed;
	SRunner *sr;

	if (!mkdtemp(tmpdir))
		return 1;
	tcase_add_test(tc, ports_from_proc_net);
	tcase_add_test(tc, keyfile_mode_checked);
	tcase_add_test(tc, envfile_loaded);
	tcase_add_test(tc, log_file_has_timestamps);
	tcase_add_test(tc, notify_datagram);
	tcase_add_test(tc, refused_key_is_auth);
	tcase_add_test(tc, run_stream_before_its_files);
	tcase_add_test(tc, run_output_bounded);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	sbx_rm_rf(tmpdir);
	return failed ? 1 : 0;
}
