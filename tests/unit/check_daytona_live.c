/*
 * check_daytona_live — drives the Daytona provider's ops directly against
 * the fake Daytona server (tests/fakes/daytona.js), counting requests with
 * its admin API. Started by tests/unit/daytona-live.sh, which launches the
 * fake and sets DAYTONA_API_URL, DAYTONA_API_KEY and FAKE_URL; run alone it
 * skips (77).
 *
 * One sandbox is shared by the tests in order (CK_NOFORK): create, runs,
 * files, metadata, faults, pause/unpause, kill.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/http.h"
#include "base/log.h"
#include "daytona/protocol.h"
#include "provider.h"

extern const struct sbx_provider sbx_provider_daytona;
static const struct sbx_provider *P = &sbx_provider_daytona;
static struct sbx_instance *inst;
static struct sbx_http_client *admin;
static const char *fake_url;

/* --- the fake's admin API -------------------------------------------------- */

static json_t *admin_call(const char *method, const char *path, const char *body)
{
	struct sbx_buf url = SBX_BUF_INIT;
	struct sbx_http_req req = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	struct sbx_error err = SBX_ERROR_INIT;
	const char *hdr[] = {"Content-Type: application/json", NULL};
	json_t *j = NULL;
	sbx_buf_addf(&url, "%s%s", fake_url, path);
	req.method = method;
	req.url = url.buf;
	req.headers = hdr;
	req.body = body;
	req.body_len = body ? strlen(body) : 0;
	req.has_body = body != NULL;
	sbx_http_resp_init(&resp);
	ck_assert_int_eq(sbx_http_perform(admin, &req, &resp, &err), 0);
	ck_assert_int_lt(resp.status, 300);
	if (resp.body.len)
		j = json_loadb(resp.body.buf, resp.body.len, 0, NULL);
	sbx_http_resp_release(&resp);
	sbx_buf_release(&url);
	return j;
}

static long counter(const char *key)
{
	json_t *j = admin_call("GET", "/_fake/counters", NULL);
	long n = (long)json_integer_value(json_object_get(j, key));
	json_decref(j);
	return n;
}

static long total_requests(void)
{
	json_t *j = admin_call("GET", "/_fake/counters", NULL), *v;
	const char *k;
	long n = 0;
	json_object_foreach(j, k, v) n += (long)json_integer_value(v);
	json_decref(j);
	return n;
}

static void counters_reset(void)
{
	json_decref(admin_call("DELETE", "/_fake/counters", NULL));
}

static void fault(const char *json)
{
	json_decref(admin_call("POST", "/_fake/faults", json));
}

static void faults_clear(void)
{
	json_decref(admin_call("DELETE", "/_fake/faults", NULL));
}

/* --- helpers ------------------------------------------------------------------ */

struct out {
	struct sbx_buf o, e;
	int calls;
};

static int out_fn(void *ctx, enum sbx_stream s, const char *p, size_t n)
{
	struct out *o = ctx;
	sbx_buf_add(s == SBX_STDOUT ? &o->o : &o->e, p, n);
	o->calls++;
	return 0;
}

static void out_release(struct out *o)
{
	sbx_buf_release(&o->o);
	sbx_buf_release(&o->e);
	o->calls = 0;
}

/* Runs shell text; asserts the call succeeded; returns the exit code. */
static int sh(const char *text, struct out *o, struct sbx_run_result *res)
{
	struct sbx_run_req req = {.shell = text};
	struct sbx_run_sink sink = {o, out_fn};
	struct sbx_error err = SBX_ERROR_INIT;
	P->sync(inst, &err); /* as the core does before every run (src/run.c) */
	int rc = P->run(inst, &req, &sink, res, &err);
	ck_assert_msg(rc == 0, "run %s: %s", text, err.msg);
	return res->exit_code;
}

static void sh_ok(const char *text)
{
	struct out o = {SBX_BUF_INIT, SBX_BUF_INIT, 0};
	struct sbx_run_result res;
	ck_assert_msg(sh(text, &o, &res) == 0, "%s: %s", text, o.e.buf);
	out_release(&o);
}

static int buf_sink(void *ctx, const char *p, size_t n)
{
	sbx_buf_add(ctx, p, n);
	return 0;
}

static int read_all(const char *path, off_t off, off_t len, struct sbx_buf *b,
		    struct sbx_error *err)
{
	sbx_buf_reset(b);
	return P->read(inst, path, off, len, buf_sink, b, err);
}

/* A local file holding data (the provider streams uploads from an fd). */
static int local_file(const char *data, size_t n)
{
	char tmpl[] = "/tmp/sbx-dt-live-XXXXXX";
	int fd = mkstemp(tmpl);
	ck_assert_int_ge(fd, 0);
	unlink(tmpl);
	ck_assert_int_eq(write(fd, data, n), (ssize_t)n);
	return fd;
}

static int count_fn(void *ctx, const char *name, const struct sbx_stat *st)
{
	(*(long *)ctx)++;
	return 0;
}

static int leftover_fn(void *ctx, const char *name, const struct sbx_stat *st)
{
	if (!strncmp(name, ".sbxfs-", 7))
		(*(long *)ctx)++;
	return 0;
}

/* --- tests ------------------------------------------------------------------------ */

/* Checked fixture of every test after test_init_and_create: without its sandbox they
 * fail with this line instead of dereferencing a NULL instance (the suite runs
 * CK_NOFORK, so a crash would take the whole run and its report down). */
static void need_sandbox(void)
{
	ck_assert_msg(inst != NULL, "no sandbox: test_init_and_create failed");
}

START_TEST(test_init_and_create)
{
	struct sbx_provider_env env = {json_object(), "/tmp"};
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_spec spec;
	char *key = strdup(getenv("DAYTONA_API_KEY"));

	/* No credential: the provider is disabled with a clear reason. */
	unsetenv("DAYTONA_API_KEY");
	ck_assert_int_eq(P->init(&env, &err), -EACCES);
	/* ... and says where a key can come from (one line, as in the lease's error file) */
	ck_assert_msg(!strncmp(err.msg, "DAYTONA_API_KEY is not set (", 28) &&
			  strstr(err.msg, "env_file") && strstr(err.msg, "keyFile") &&
			  !strchr(err.msg, '\n'),
		      "%s", err.msg);
	ck_assert_int_eq(err.code, SBX_E_AUTH);
	/* A JWT needs its organisation. */
	setenv("DAYTONA_JWT_TOKEN", "jwt", 1);
	ck_assert_int_eq(P->init(&env, &err), -EACCES);
	ck_assert_str_eq(err.msg, "DAYTONA_ORGANIZATION_ID is required with DAYTONA_JWT_TOKEN");
	unsetenv("DAYTONA_JWT_TOKEN");
	setenv("DAYTONA_API_KEY", key, 1);
	free(key);
	/* A key in the config file is not taken. */
	json_object_set_new(env.settings, "apiKey", json_string("from-config"));
	ck_assert_int_eq(P->init(&env, &err), 0);
	json_decref(env.settings);

	sbx_spec_init(&spec);
	spec.idle_timeout_s = 600;
	spec.working_dir = strdup("/home/daytona");
	json_object_set_new(spec.envs, "SPEC_ENV", json_string("from spec"));
	counters_reset();
	ck_assert_msg(P->create(&spec, "live", &inst, &err) == 0, "%s", err.msg);
	sbx_spec_free(&spec);
	ck_assert_int_eq(counter("POST /api/sandbox"), 1);
	printf("create: %ld requests\n", total_requests());
	ck_assert_int_gt(strlen(inst->id), 0);
}
END_TEST

START_TEST(test_run)
{
	struct out o = {SBX_BUF_INIT, SBX_BUF_INIT, 0};
	struct sbx_run_result res;
	struct sbx_error err = SBX_ERROR_INIT;

	counters_reset();
	ck_assert_int_eq(sh("echo out; echo err >&2; exit 3", &o, &res), 3);
	ck_assert_str_eq(o.o.buf, "out\n");
	ck_assert_str_eq(o.e.buf, "err\n");
	ck_assert(!res.timed_out);
	printf("run (short): %ld requests\n", total_requests());
	out_release(&o);

	/* spec envs, request envs, the spec's working directory, a given cwd */
	const char *envs[] = {"REQ_ENV=it's $set", NULL};
	struct sbx_run_req req = {.shell = "echo \"$SPEC_ENV|$REQ_ENV\"; pwd", .envs = envs};
	struct sbx_run_sink sink = {&o, out_fn};
	ck_assert_int_eq(P->run(inst, &req, &sink, &res, &err), 0);
	ck_assert_str_eq(o.o.buf, "from spec|it's $set\n/home/daytona\n");
	out_release(&o);
	req.cwd = "/tmp";
	req.shell = "pwd";
	ck_assert_int_eq(P->run(inst, &req, &sink, &res, &err), 0);
	ck_assert_str_eq(o.o.buf, "/tmp\n");
	out_release(&o);

	/* runs are independent: no cd or variable leaks into the next */
	sh_ok("cd /; export LEAK=1; LEAK2=2");
	ck_assert_int_eq(sh("pwd; echo \"[$LEAK$LEAK2]\"", &o, &res), 0);
	ck_assert_str_eq(o.o.buf, "/home/daytona\n[]\n");
	out_release(&o);

	/* argv form */
	const char *argv[] = {"printf", "%s|", "a b", "c'd", NULL};
	struct sbx_run_req areq = {.argv = argv};
	ck_assert_int_eq(P->run(inst, &areq, &sink, &res, &err), 0);
	ck_assert_str_eq(o.o.buf, "a b|c'd|");
	out_release(&o);

	/* a few MB of output arrive whole */
	ck_assert_int_eq(sh("i=0; while [ $i -lt 3 ]; do head -c 1000000 /dev/zero | tr '\\0' a; "
			    "sleep 0.3; i=$((i+1)); done; echo done >&2",
			    &o, &res),
			 0);
	ck_assert_int_eq(o.o.len, 3000000);
	ck_assert_str_eq(o.e.buf, "done\n");
	out_release(&o);

	/* output streams while the command runs */
	ck_assert_int_eq(sh("echo a; sleep 1.2; echo b >&2; sleep 0.3; echo c", &o, &res), 0);
	ck_assert_str_eq(o.o.buf, "a\nc\n");
	ck_assert_str_eq(o.e.buf, "b\n");
	ck_assert_int_ge(o.calls, 2);
	out_release(&o);
}
END_TEST

struct par {
	const char *text;
	struct out o;
	struct sbx_run_result res;
	int rc;
};

static void *par_run(void *arg)
{
	struct par *p = arg;
	struct sbx_run_req req = {.shell = p->text};
	struct sbx_run_sink sink = {&p->o, out_fn};
	struct sbx_error err = SBX_ERROR_INIT;
	p->rc = P->run(inst, &req, &sink, &p->res, &err);
	return NULL;
}

START_TEST(test_run_parallel)
{
	/* A session runs one command at a time: concurrent runs get their own. Proved by a
	 * rendezvous, not a stopwatch (a wall-clock bound failed at load 18): each run
	 * leaves its mark and waits up to 20 s for the other's, so run one after the
	 * other the first would give up and print nothing. */
	static const char fmt[] =
	    "touch /tmp/par.%d.%s; i=0; while [ $i -lt 200 ] && [ ! -e /tmp/par.%d.%s ]; do "
	    "sleep 0.1; i=$((i+1)); done; [ -e /tmp/par.%d.%s ] && echo %s%s";
	char ta_text[512], tb_text[512];
	int me = (int)getpid();
	struct par a = {ta_text}, b = {tb_text};
	pthread_t ta, tb;

	snprintf(ta_text, sizeof(ta_text), fmt, me, "a", me, "b", me, "b", "A", "");
	snprintf(tb_text, sizeof(tb_text), fmt, me, "b", me, "a", me, "a", "B", " >&2");
	ck_assert_int_eq(pthread_create(&ta, NULL, par_run, &a), 0);
	ck_assert_int_eq(pthread_create(&tb, NULL, par_run, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	ck_assert_int_eq(a.rc, 0);
	ck_assert_int_eq(b.rc, 0);
	ck_assert_str_eq(a.o.o.buf, "A\n");
	ck_assert_str_eq(b.o.e.buf, "B\n");
	out_release(&a.o);
	out_release(&b.o);
}
END_TEST

START_TEST(test_run_timeout)
{
	struct out o = {SBX_BUF_INIT, SBX_BUF_INIT, 0};
	struct sbx_run_result res;
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_run_req req = {.shell = "echo start; sleep 30; echo never", .timeout_ms = 700};
	struct sbx_run_sink sink = {&o, out_fn};
	ck_assert_int_eq(P->run(inst, &req, &sink, &res, &err), 0);
	ck_assert(res.timed_out);
	ck_assert_int_eq(res.exit_code, 137);
	ck_assert_int_lt(res.duration_ms, 5000);
	ck_assert_str_eq(o.o.buf, "start\n");
	out_release(&o);
	/* the session is fine afterwards */
	ck_assert_int_eq(sh("echo after", &o, &res), 0);
	ck_assert_str_eq(o.o.buf, "after\n");
	out_release(&o);
}
END_TEST

START_TEST(test_stat_list)
{
	struct sbx_stat st;
	struct sbx_error err = SBX_ERROR_INIT;
	long n = 0;

	ck_assert_int_eq(P->stat(inst, "/home/daytona", &st, &err), 0);
	ck_assert(S_ISDIR(st.mode));
	ck_assert_int_eq(P->stat(inst, "/nonexistent", &st, &err), -ENOENT);
	ck_assert_int_eq(err.code, SBX_E_NOT_FOUND);

	sh_ok("mkdir -p /tmp/many && cd /tmp/many && i=0; while [ $i -lt 1000 ]; do "
	      ": > f$i; i=$((i+1)); done; mkdir sub; ln -s f1 link");
	counters_reset();
	ck_assert_int_eq(P->list(inst, "/tmp/many", count_fn, &n, &err), 0);
	ck_assert_int_eq(n, 1002);
	ck_assert_int_eq(counter("GET /toolbox/:id/files"), 1);
	ck_assert_int_eq(total_requests(), 1);
	printf("list of 1002 entries: %ld request\n", total_requests());
	ck_assert_int_eq(P->list(inst, "/nonexistent", count_fn, &n, &err), -ENOENT);
}
END_TEST

START_TEST(test_read)
{
	struct sbx_buf b = SBX_BUF_INIT, want = SBX_BUF_INIT;
	struct sbx_error err = SBX_ERROR_INIT;

	sh_ok("printf 'hello\\r\\n--DAYTONA-FILE-BOUNDARY\\r\\nworld' > /tmp/r.txt; "
	      "i=0; while [ $i -lt 30000 ]; do echo \"line $i\"; i=$((i+1)); done > /tmp/big.txt");
	counters_reset();
	ck_assert_msg(read_all("/tmp/r.txt", 0, -1, &b, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(b.buf, "hello\r\n--DAYTONA-FILE-BOUNDARY\r\nworld");
	ck_assert_int_eq(read_all("/tmp/r.txt", 0, -1, &b, &err), 0);
	ck_assert_str_eq(b.buf, "hello\r\n--DAYTONA-FILE-BOUNDARY\r\nworld");
	ck_assert_int_eq(counter("POST /toolbox/:id/files/bulk-download"), 2);
	ck_assert_int_eq(total_requests(), 2);
	ck_assert_int_eq(read_all("/tmp/r.txt", 2, 3, &b, &err), 0);
	ck_assert_str_eq(b.buf, "llo");

	for (int i = 0; i < 30000; i++)
		sbx_buf_addf(&want, "line %d\n", i);
	ck_assert_int_eq(read_all("/tmp/big.txt", 0, -1, &b, &err), 0);
	ck_assert_int_eq(b.len, want.len);
	ck_assert(!memcmp(b.buf, want.buf, want.len));
	ck_assert_int_eq(read_all("/tmp/big.txt", 100000, 10, &b, &err), 0);
	ck_assert(!memcmp(b.buf, want.buf + 100000, 10));

	ck_assert_int_eq(read_all("/tmp/missing.txt", 0, -1, &b, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "file not found"), "%s", err.msg);
	ck_assert_int_eq(read_all("/tmp", 0, -1, &b, &err), -EINVAL);
	sbx_buf_release(&b);
	sbx_buf_release(&want);
}
END_TEST

START_TEST(test_write)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_stat st;
	long left = 0;
	int fd;

	/* a new file gets the mode asked for */
	fd = local_file("new\n", 4);
	counters_reset();
	ck_assert_msg(P->write(inst, "/tmp/w-new.txt", fd, 4, 0600, &err) == 0, "%s", err.msg);
	printf("write (new file): %ld requests\n", total_requests());
	close(fd);
	ck_assert_int_eq(P->stat(inst, "/tmp/w-new.txt", &st, &err), 0);
	ck_assert_int_eq(st.mode, S_IFREG | 0600);
	ck_assert_int_eq(st.size, 4);

	/* a new file others may read: upload and move; its mode waits in the queue */
	fd = local_file("pub\n", 4);
	counters_reset();
	ck_assert_msg(P->write(inst, "/tmp/w-pub.sh", fd, 4, 0755, &err) == 0, "%s", err.msg);
	printf("write (new file, mode queued): %ld requests\n", total_requests());
	ck_assert_int_eq(total_requests(), 2);
	close(fd);
	ck_assert_int_eq(P->stat(inst, "/tmp/w-pub.sh", &st, &err), 0);
	ck_assert_int_eq(st.mode, S_IFREG | 0755); /* the queued mode, laid over */
	ck_assert_int_eq(counter("POST /toolbox/:id/files/permissions"), 0);
	ck_assert_int_eq(P->sync(inst, &err), 0);
	ck_assert_int_eq(counter("POST /toolbox/:id/files/permissions"), 1);
	sh_ok("test \"$(stat -c %a /tmp/w-pub.sh)\" = 755");

	/* over an existing file: its mode survives, the content is replaced */
	sh_ok("printf old > /tmp/w.sh && chmod 755 /tmp/w.sh");
	fd = local_file("#!/bin/sh\necho replaced\n", 25);
	counters_reset();
	ck_assert_msg(P->write(inst, "/tmp/w.sh", fd, 25, 0644, &err) == 0, "%s", err.msg);
	printf("write (rename-over): %ld requests\n", total_requests());
	ck_assert_int_eq(counter("POST /toolbox/:id/files/bulk-upload"), 1);
	close(fd);
	ck_assert_int_eq(read_all("/tmp/w.sh", 0, -1, &b, &err), 0);
	ck_assert_str_eq(b.buf, "#!/bin/sh\necho replaced\n");
	ck_assert_int_eq(P->stat(inst, "/tmp/w.sh", &st, &err), 0);
	ck_assert_int_eq(st.mode, S_IFREG | 0755);
	ck_assert_int_eq(P->list(inst, "/tmp", leftover_fn, &left, &err), 0);
	ck_assert_int_eq(left, 0);

	/* an empty file, and a file in a directory that does not exist */
	fd = local_file("", 0);
	ck_assert_int_eq(P->write(inst, "/tmp/w.sh", fd, 0, 0644, &err), 0);
	ck_assert_int_eq(P->stat(inst, "/tmp/w.sh", &st, &err), 0);
	ck_assert_int_eq(st.size, 0);
	ck_assert_int_eq(P->write(inst, "/tmp", fd, 0, 0644, &err), -EISDIR);
	close(fd);

	/* a failed upload leaves the old content alone */
	sh_ok("printf keep > /tmp/keep.txt");
	fd = local_file("lost", 4);
	fault("{\"faults\":[{\"kind\":\"5xx\",\"status\":500,\"count\":1,"
	      "\"key\":\"POST /toolbox/:id/files/bulk-upload\"}]}");
	ck_assert_int_eq(P->write(inst, "/tmp/keep.txt", fd, 4, 0644, &err), -EIO);
	faults_clear();
	close(fd);
	ck_assert_int_eq(read_all("/tmp/keep.txt", 0, -1, &b, &err), 0);
	ck_assert_str_eq(b.buf, "keep");
	left = 0;
	ck_assert_int_eq(P->list(inst, "/tmp", leftover_fn, &left, &err), 0);
	ck_assert_int_eq(left, 0);
	sbx_buf_release(&b);
}
END_TEST

START_TEST(test_namespace)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_stat st;
	struct sbx_buf b = SBX_BUF_INIT;

	ck_assert_int_eq(P->mkdir(inst, "/tmp/d1", 0750, &err), 0);
	ck_assert_int_eq(P->stat(inst, "/tmp/d1", &st, &err), 0);
	ck_assert_int_eq(st.mode, S_IFDIR | 0750);
	sh_ok("echo a > /tmp/d1/a; echo b > /tmp/b; echo c > /tmp/c");
	ck_assert_int_eq(P->rmdir(inst, "/tmp/d1", &err), -ENOTEMPTY);
	/* unlink is queued (`rm -f`): a directory fails in the batch, against its path */
	ck_assert_int_eq(P->unlink(inst, "/tmp/d1", &err), 0);
	ck_assert_int_eq(P->stat(inst, "/tmp/d1", &st, &err), -ENOENT); /* gone for the mount */
	ck_assert_int_eq(P->sync(inst, &err), 0);
	ck_assert_int_eq(P->take_failure(inst, "/tmp/d1", &err), -EISDIR);
	ck_assert_int_eq(P->rmdir(inst, "/tmp/b", &err), -ENOTDIR);
	ck_assert_int_eq(P->unlink(inst, "/tmp/d1/a", &err), 0);
	ck_assert_int_eq(P->rmdir(inst, "/tmp/d1", &err), 0); /* applies the unlink first */
	ck_assert_int_eq(P->stat(inst, "/tmp/d1", &st, &err), -ENOENT);
	/* the kernel answers a name gone itself; queued, it is no failure */
	ck_assert_int_eq(P->unlink(inst, "/tmp/d1", &err), 0);
	ck_assert_int_eq(P->sync(inst, &err), 0);
	ck_assert_int_eq(P->take_failure(inst, "/tmp/d1", &err), 0);
	/* a directory the core knows empty: queued */
	ck_assert_int_eq(P->mkdir(inst, "/tmp/d2", 0755, &err), 0);
	counters_reset();
	ck_assert_int_eq(P->rmdir_empty(inst, "/tmp/d2", &err), 0);
	ck_assert_int_eq(P->stat(inst, "/tmp/d2", &st, &err), -ENOENT);
	ck_assert_int_eq(total_requests(), 0);
	ck_assert_int_eq(P->sync(inst, &err), 0);
	ck_assert_int_eq(P->take_failure(inst, "/tmp/d2", &err), 0);
	sh_ok("test ! -e /tmp/d2");

	/* rename: plain, over an existing file, NOREPLACE, EXCHANGE */
	ck_assert_int_eq(P->rename(inst, "/tmp/b", "/tmp/b2", 0, &err), 0);
	ck_assert_int_eq(P->rename(inst, "/tmp/b2", "/tmp/c", 1 /* NOREPLACE */, &err), -EEXIST);
	counters_reset();
	ck_assert_int_eq(P->rename(inst, "/tmp/b2", "/tmp/c", 0, &err), 0);
	printf("rename over an existing file: %ld requests\n", total_requests());
	ck_assert_int_eq(read_all("/tmp/c", 0, -1, &b, &err), 0);
	ck_assert_str_eq(b.buf, "b\n");
	ck_assert_int_eq(P->stat(inst, "/tmp/b2", &st, &err), -ENOENT);
	sh_ok("echo x > /tmp/x; echo y > /tmp/y");
	ck_assert_int_eq(P->rename(inst, "/tmp/x", "/tmp/y", 2 /* EXCHANGE */, &err), 0);
	ck_assert_int_eq(read_all("/tmp/x", 0, -1, &b, &err), 0);
	ck_assert_str_eq(b.buf, "y\n");
	/* directories: onto an empty one works, onto a full one does not */
	sh_ok("mkdir -p /tmp/da /tmp/db /tmp/dc && echo 1 > /tmp/da/f && echo 2 > /tmp/dc/f");
	ck_assert_int_eq(P->rename(inst, "/tmp/da", "/tmp/db", 0, &err), 0);
	ck_assert_int_eq(P->stat(inst, "/tmp/db/f", &st, &err), 0);
	ck_assert_int_eq(P->rename(inst, "/tmp/db", "/tmp/dc", 0, &err), -ENOTEMPTY);
	ck_assert_int_eq(P->rename(inst, "/tmp/c", "/tmp/dc", 0, &err), -EISDIR);

	/* chmod, chown */
	ck_assert_int_eq(P->chmod(inst, "/tmp/c", 0604, &err), 0);
	ck_assert_int_eq(P->stat(inst, "/tmp/c", &st, &err), 0);
	ck_assert_int_eq(st.mode & 07777, 0604);
	ck_assert_int_eq(P->chown(inst, "/tmp/c", 0, 0, &err), 0);
	ck_assert_int_eq(P->stat(inst, "/tmp/c", &st, &err), 0);
	ck_assert_int_eq(st.uid, 0);
	ck_assert_int_eq(st.gid, 0);
	sbx_buf_release(&b);
}
END_TEST

START_TEST(test_batched_metadata)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_stat st;
	struct statvfs sv;
	char target[256];
	struct timespec ts[2] = {{1000000000, 0}, {1200000000, 500}};

	sh_ok("echo 0123456789 > /tmp/t.txt");
	counters_reset();
	ck_assert_int_eq(P->symlink(inst, "t.txt", "/tmp/t.link", &err), 0);
	ck_assert_int_eq(P->truncate(inst, "/tmp/t.txt", 4, &err), 0);
	ck_assert_int_eq(P->utimens(inst, "/tmp/t.txt", ts, &err), 0);
	ck_assert_int_eq(P->link(inst, "/tmp/t.txt", "/tmp/t.hard", &err), 0);
	ck_assert_int_eq(P->mknod(inst, "/tmp/t.fifo", S_IFIFO | 0640, 0, &err), 0);
	ck_assert_int_eq(total_requests(), 0); /* queued */
	/* reading an affected path applies the whole queue in one command */
	ck_assert_int_eq(P->readlink(inst, "/tmp/t.link", target, sizeof(target), &err), 0);
	ck_assert_str_eq(target, "t.txt");
	ck_assert_int_eq(counter("POST /toolbox/:id/process/execute"), 1);
	/* the daemon's info follows links; the link we made is still shown as one */
	ck_assert_int_eq(P->stat(inst, "/tmp/t.link", &st, &err), 0);
	ck_assert(S_ISLNK(st.mode));
	ck_assert_int_eq(st.size, 5);
	ck_assert_int_eq(P->symlink(inst, "nowhere", "/tmp/dangling", &err), 0);
	ck_assert_int_eq(P->stat(inst, "/tmp/dangling", &st, &err), 0);
	ck_assert(S_ISLNK(st.mode));
	ck_assert_int_eq(P->rename(inst, "/tmp/dangling", "/tmp/dangling2", 0, &err), 0);
	ck_assert_int_eq(P->stat(inst, "/tmp/dangling2", &st, &err), 0);
	ck_assert(S_ISLNK(st.mode));
	ck_assert_int_eq(P->stat(inst, "/tmp/dangling", &st, &err), -ENOENT);
	ck_assert_int_eq(P->unlink(inst, "/tmp/dangling2", &err), 0);
	ck_assert_int_eq(P->stat(inst, "/tmp/dangling2", &st, &err), -ENOENT);
	ck_assert_int_eq(P->stat(inst, "/tmp/t.txt", &st, &err), 0);
	ck_assert_int_eq(st.size, 4);
	ck_assert_int_eq(st.mtime.tv_sec, 1200000000);
	ck_assert_int_eq(P->stat(inst, "/tmp/t.fifo", &st, &err), 0);
	ck_assert(S_ISFIFO(st.mode));
	ck_assert_int_eq(st.mode & 0777, 0640);
	ck_assert_int_eq(P->stat(inst, "/tmp/t.hard", &st, &err), 0);
	ck_assert_int_eq(P->readlink(inst, "/tmp/t.txt", target, sizeof(target), &err), -EINVAL);
	ck_assert_int_eq(P->readlink(inst, "/tmp/nope", target, sizeof(target), &err), -ENOENT);

	/* a failing queued change is its own path's failure (rmeta.h), once, not sync's */
	ck_assert_int_eq(P->symlink(inst, "x", "/tmp/t.txt", &err), 0);
	ck_assert_int_eq(P->sync(inst, &err), 0);
	ck_assert_int_eq(P->take_failure(inst, "/tmp/t.fifo", &err), 0);
	/* with the errno its message names (rmeta) */
	ck_assert_int_eq(P->take_failure(inst, "/tmp/t.txt", &err), -EEXIST);
	ck_assert_msg(strstr(err.msg, "File exists"), "%s", err.msg);
	ck_assert_int_eq(P->take_failure(inst, "/tmp/t.txt", &err), 0);

	ck_assert_int_eq(P->statfs(inst, "/", &sv, &err), 0);
	ck_assert_int_gt(sv.f_blocks, 0);
	counters_reset();
	ck_assert_int_eq(P->statfs(inst, "/tmp", &sv, &err), 0);
	ck_assert_int_eq(total_requests(), 0); /* cached */
}
END_TEST

START_TEST(test_faults_and_facts)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_stat st;
	char url[512];
	json_t *info;
	char *dump;

	/* 429 is retried; a dropped connection on a GET too */
	fault("{\"faults\":[{\"kind\":\"429\",\"retryAfter\":0,\"count\":1,"
	      "\"key\":\"GET /toolbox/:id/files/info\"}]}");
	ck_assert_int_eq(P->stat(inst, "/tmp", &st, &err), 0);
	fault("{\"faults\":[{\"kind\":\"drop\",\"count\":1,\"key\":\"GET "
	      "/toolbox/:id/files/info\"}]}");
	ck_assert_int_eq(P->stat(inst, "/tmp", &st, &err), 0);
	/* a 502 from the proxy is not retried: the sandbox is unreachable */
	fault("{\"faults\":[{\"kind\":\"5xx\",\"status\":502,\"count\":10,"
	      "\"key\":\"GET /toolbox/:id/files/info\"}]}");
	ck_assert_int_eq(P->stat(inst, "/tmp", &st, &err), -ENOTCONN);
	faults_clear();

	ck_assert_int_eq(P->get_host(inst, 3000, url, sizeof(url), &err), 0);
	ck_assert_msg(strstr(url, "3000-"), "%s", url);
	ck_assert_int_eq(P->info(inst, &info, &err), 0);
	dump = json_dumps(info, JSON_COMPACT);
	ck_assert_msg(!strstr(dump, getenv("DAYTONA_API_KEY")), "%s", dump);
	ck_assert_msg(strstr(dump, "\"remoteState\":\"started\""), "%s", dump);
	free(dump);
	json_decref(info);
}
END_TEST

START_TEST(test_run_without_sessions)
{
	struct out o = {SBX_BUF_INIT, SBX_BUF_INIT, 0};
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_run_result res;
	struct sbx_instance *other;
	struct sbx_run_sink sink = {&o, out_fn};
	struct sbx_run_req req = {.shell = "echo out; echo err >&2; exit 4", .cwd = "/tmp"};

	/* A daemon without the session API (404): /process/execute, combined. */
	ck_assert_int_eq(P->attach(NULL, inst->id, NULL, &other, &err), 0);
	fault("{\"faults\":[{\"kind\":\"5xx\",\"status\":404,\"count\":1,"
	      "\"key\":\"POST /toolbox/:id/process/session\"}]}");
	counters_reset();
	ck_assert_msg(P->run(other, &req, &sink, &res, &err) == 0, "%s", err.msg);
	faults_clear();
	ck_assert_int_eq(res.exit_code, 4);
	ck_assert_str_eq(o.o.buf, "out\nerr\n");
	ck_assert_int_eq(o.e.len, 0);
	out_release(&o);
	req.shell = "pwd";
	ck_assert_int_eq(P->run(other, &req, &sink, &res, &err), 0);
	ck_assert_str_eq(o.o.buf, "/tmp\n");
	ck_assert_int_eq(counter("POST /toolbox/:id/process/session"), 1); /* asked once */
	ck_assert_int_eq(counter("POST /toolbox/:id/process/execute"), 2);
	out_release(&o);
	req.shell = "sleep 30";
	req.timeout_ms = 700;
	ck_assert_int_eq(P->run(other, &req, &sink, &res, &err), 0);
	ck_assert(res.timed_out);
	ck_assert_int_eq(res.exit_code, 137);
	ck_assert_int_lt(res.duration_ms, 5000);
	out_release(&o);
	P->release(other);
}
END_TEST

START_TEST(test_pause_unpause)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct out o = {SBX_BUF_INIT, SBX_BUF_INIT, 0};
	struct sbx_run_result res;
	enum sbx_remote_state rs;
	struct sbx_stat st;

	counters_reset();
	ck_assert_msg(P->pause(inst, &err) == 0, "%s", err.msg);
	printf("pause: %ld requests\n", total_requests());
	ck_assert_int_eq(P->probe(inst, &rs, &err), 0);
	ck_assert_int_eq(rs, SBX_REMOTE_PAUSED);
	ck_assert_int_eq(P->stat(inst, "/tmp", &st, &err), -ENOTCONN);
	ck_assert_int_eq(P->pause(inst, &err), 0); /* already stopped: fine */
	counters_reset();
	ck_assert_msg(P->unpause(inst, &err) == 0, "%s", err.msg);
	printf("unpause: %ld requests\n", total_requests());
	ck_assert_int_eq(P->probe(inst, &rs, &err), 0);
	ck_assert_int_eq(rs, SBX_REMOTE_RUNNING);
	/* the old sessions died with the stop: a new one is made */
	ck_assert_int_eq(sh("cat /tmp/c", &o, &res), 0);
	ck_assert_str_eq(o.o.buf, "b\n");
	out_release(&o);
}
END_TEST

/* list_sandboxes: "ID STATE LEASE" lines into the buffer ctx. */
static int list_line(void *ctx, const struct sbx_sandbox_entry *sb)
{
	sbx_buf_addf(ctx, "%s %s %s\n", sb->id, sb->state, sb->lease ? sb->lease : "-");
	return 0;
}

static bool has_line(const struct sbx_buf *b, const char *id, const char *rest)
{
	char line[300];
	snprintf(line, sizeof(line), "%s %s\n", id, rest);
	return strstr(b->buf, line) != NULL;
}

/* The list_sandboxes slot over GET /sandbox: lease labels, states, a deleted one gone. */
START_TEST(test_list_sandboxes)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_instance *a = NULL, *b = NULL;
	struct sbx_buf seen = SBX_BUF_INIT;
	struct sbx_spec spec;

	sbx_spec_init(&spec);
	ck_assert_msg(P->create(&spec, "list-a", &a, &err) == 0, "%s", err.msg);
	ck_assert_msg(P->create(&spec, "list-b", &b, &err) == 0, "%s", err.msg);
	sbx_spec_free(&spec);
	ck_assert_msg(P->pause(b, &err) == 0, "%s", err.msg);
	counters_reset();
	ck_assert_msg(P->list_sandboxes(list_line, &seen, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(counter("GET /api/sandbox"), 1);
	ck_assert_msg(has_line(&seen, a->id, "running list-a"), "%s", seen.buf);
	ck_assert_msg(has_line(&seen, b->id, "paused list-b"), "%s", seen.buf);
	ck_assert_msg(has_line(&seen, inst->id, "running live"), "%s", seen.buf);
	ck_assert_int_eq(P->kill(b, &err), 0);
	sbx_buf_release(&seen);
	ck_assert_msg(P->list_sandboxes(list_line, &seen, &err) == 0, "%s", err.msg);
	ck_assert_msg(has_line(&seen, a->id, "running list-a"), "%s", seen.buf);
	ck_assert_msg(!strstr(seen.buf, b->id) || has_line(&seen, b->id, "gone list-b"), "%s",
		      seen.buf);
	ck_assert_int_eq(P->kill(a, &err), 0);
	P->release(a);
	P->release(b);
	sbx_buf_release(&seen);
}
END_TEST

START_TEST(test_kill)
{
	struct sbx_error err = SBX_ERROR_INIT;
	enum sbx_remote_state rs;
	struct sbx_instance *again;
	char id[128];

	snprintf(id, sizeof(id), "%s", inst->id);
	ck_assert_int_eq(P->attach(NULL, id, NULL, &again, &err), 0);
	P->release(again);
	ck_assert_int_eq(P->kill(inst, &err), 0);
	ck_assert_int_eq(P->probe(inst, &rs, &err), 0);
	ck_assert_int_eq(rs, SBX_REMOTE_GONE);
	ck_assert_int_eq(P->kill(inst, &err), -ENOENT);
	P->release(inst);
	inst = NULL;
	ck_assert_int_eq(P->attach(NULL, id, NULL, &again, &err), -ENOENT);
	P->shutdown();
	/* Nobody listening: the provider is unreachable, not failing. */
	struct sbx_provider_env env = {NULL, "/tmp"};
	char *url = strdup(getenv("DAYTONA_API_URL"));
	setenv("DAYTONA_API_URL", "http://127.0.0.1:1/api", 1);
	ck_assert_int_eq(P->init(&env, &err), 0);
	ck_assert_int_eq(P->attach(NULL, id, NULL, &again, &err), -ENOTCONN);
	ck_assert_int_eq(err.code, SBX_E_CONNECTION_FAILED);
	P->shutdown();
	setenv("DAYTONA_API_URL", url, 1);
	free(url);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;
	SRunner *sr;
	int failed;

	fake_url = getenv("FAKE_URL");
	if (!fake_url || !getenv("DAYTONA_API_URL") || !getenv("DAYTONA_API_KEY")) {
		fprintf(stderr, "check_daytona_live: run me through daytona-live.sh\n");
		return 77;
	}
	if (getenv("SBX_DEBUG"))
		sbx_log_setup(0, SBX_LOG_DEBUG);
	admin = sbx_http_client_new(NULL);
	s = suite_create("daytona-live");
	tc = tcase_create("fake");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_init_and_create);
	suite_add_tcase(s, tc);
	tc = tcase_create("sandbox");
	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, need_sandbox, NULL);
	tcase_add_test(tc, test_run);
	tcase_add_test(tc, test_run_parallel);
	tcase_add_test(tc, test_run_timeout);
	tcase_add_test(tc, test_stat_list);
	tcase_add_test(tc, test_read);
	tcase_add_test(tc, test_write);
	tcase_add_test(tc, test_namespace);
	tcase_add_test(tc, test_batched_metadata);
	tcase_add_test(tc, test_faults_and_facts);
	tcase_add_test(tc, test_run_without_sessions);
	tcase_add_test(tc, test_pause_unpause);
	tcase_add_test(tc, test_list_sandboxes);
	tcase_add_test(tc, test_kill);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	sbx_http_client_free(admin);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
