/*
 * check_base — unit tests of the pure core modules: buf, err, log
 * redaction, durations and specs, the profiles file, control words, the
 * mount's path classification, base64, the df parser, the clock and
 * random bytes, the path set with expiry (pathttl).
 */
#include <check.h>
#include <jansson.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base64.h"
#include "base/buf.h"
#include "base/df.h"
#include "base/fsutil.h"
#include "base/err.h"
#include "base/log.h"
#include "base/pathttl.h"
#include "base/pathutil.h"
#include "base/spec.h"
#include "base/sysutil.h"
#include "ctl.h"
#include "nodes.h"

START_TEST(buf_invariants)
{
	struct sbx_buf b = SBX_BUF_INIT;
	ck_assert_ptr_nonnull(b.buf);
	ck_assert_str_eq(b.buf, "");
	sbx_buf_addf(&b, "%d-%s", 42, "x");
	sbx_buf_adds(&b, "yz");
	ck_assert_str_eq(b.buf, "42-xyz");
	ck_assert_uint_eq(b.len, 6);
	sbx_buf_consume(&b, 3);
	ck_assert_str_eq(b.buf, "xyz");
	size_t n;
	char *s = sbx_buf_detach(&b, &n);
	ck_assert_str_eq(s, "xyz");
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(b.buf, "");
	free(s);
	s = sbx_buf_detach(&b, NULL); /* detaching an empty buffer still allocates */
	ck_assert_str_eq(s, "");
	free(s);
	for (int i = 0; i < 10000; i++)
		sbx_buf_addch(&b, 'a');
	ck_assert_uint_eq(b.len, 10000);
	ck_assert_int_eq(b.buf[10000], '\0');
	sbx_buf_release(&b);
	ck_assert_uint_eq(b.len, 0);
}
END_TEST

START_TEST(buf_shell_quote)
{
	struct sbx_buf b = SBX_BUF_INIT;
	sbx_buf_add_shquoted(&b, "it's a $x");
	ck_assert_str_eq(b.buf, "'it'\\''s a $x'");
	sbx_buf_release(&b);
}
END_TEST

START_TEST(buf_utf8_escaped)
{
	struct sbx_buf b = SBX_BUF_INIT;
	/* valid 2-, 3- and 4-byte sequences kept; a lone 0xff, an overlong '/', a surrogate and a
	 * cut sequence escaped */
	sbx_buf_add_utf8_escaped(
	    &b, "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\xff|\xc0\xaf|\xed\xa0\x80|\xe2\x82");
	ck_assert_str_eq(
	    b.buf,
	    "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\\xff|\\xc0\\xaf|\\xed\\xa0\\x80|\\xe2\\x82");
	sbx_buf_release(&b);
	sbx_buf_add_capped(&b, "abcdef", 6, 4); /* what fits below the cap */
	sbx_buf_add_capped(&b, "gh", 2, 4);	/* nothing once it is reached */
	ck_assert_str_eq(b.buf, "abcd");
	sbx_buf_release(&b);
	sbx_buf_add_utf8_escaped(&b, "ok\xff");
	json_t *j = json_string(b.buf);
	ck_assert_ptr_nonnull(j); /* jansson takes it */
	json_decref(j);
	sbx_buf_release(&b);
}
END_TEST

/* Text written in pieces: a sequence cut at a piece's end is not an error, a bad byte is. */
START_TEST(utf8_check_pieces)
{
	ck_assert(sbx_utf8_valid("a\xc3\xa9\xf0\x9f\x98\x80"));
	ck_assert(!sbx_utf8_valid("a\xff"));
	ck_assert(!sbx_utf8_valid("\xc0\xaf")); /* overlong '/' */
	ck_assert_int_eq(sbx_utf8_check("echo \xc3\xa9", 7), 0);
	ck_assert_int_eq(sbx_utf8_check("echo \xc3", 6), 1);
	ck_assert_int_eq(sbx_utf8_check("\xf0\x9f\x98", 3), 3);
	ck_assert_int_eq(sbx_utf8_check("\xe0\xa0", 2), 2);
	ck_assert_int_eq(sbx_utf8_check("\xe0\x80", 2), -1);	  /* can only be overlong */
	ck_assert_int_eq(sbx_utf8_check("\xed\xa0", 2), -1);	  /* can only be a surrogate */
	ck_assert_int_eq(sbx_utf8_check("\xf4\x90", 2), -1);	  /* above U+10FFFF */
	ck_assert_int_eq(sbx_utf8_check("\xc3\xa9\xc3x", 4), -1); /* cut, then a letter */
	ck_assert_int_eq(sbx_utf8_check("a\xff"
					"b",
					3),
			 -1);
	ck_assert_int_eq(sbx_utf8_check("", 0), 0);
}
END_TEST

START_TEST(err_set_returns_negative)
{
	struct sbx_error e = SBX_ERROR_INIT;
	ck_assert_int_eq(sbx_error_set(&e, ENOENT, 0, "no %s\nhere", "file"), -ENOENT);
	ck_assert_int_eq(e.code, SBX_E_NOT_FOUND);
	ck_assert_str_eq(e.msg, "no file here");
	ck_assert_int_eq(sbx_error_set(&e, -ETIMEDOUT, 0, "slow"), -ETIMEDOUT);
	ck_assert_int_eq(e.code, SBX_E_TIMEOUT);
	ck_assert_int_eq(sbx_error_set(&e, 0, SBX_E_INTERNAL, "zero"), -EIO);
	sbx_error_prefix(&e, "op");
	ck_assert_str_eq(e.msg, "op: zero");
	ck_assert_int_eq(sbx_error_set(NULL, EINVAL, 0, "ignored"), -EINVAL);
	/* A sandbox's file name or message: no escape sequence reaches `cat error`'s terminal. */
	sbx_error_set(&e, EIO, 0, "upload of /tmp/%s failed: %s", "\x1b]0;pwned\x07x\tz\x7f",
		      "\xc2\x9b"
		      "31m red \xc3\xa9");
	ck_assert_str_eq(e.msg, "upload of /tmp/?]0;pwned?x z? failed: ??31m red \xc3\xa9");
	/* A bidirectional override (U+202E: the rest shows reversed) and U+2028; U+2030 stays. */
	sbx_error_set(&e, EINVAL, 0,
		      "bad name \"a\xe2\x80\xae"
		      "b\xe2\x81\xa6"
		      "c\xe2\x80\xa8"
		      "d\xe2\x80\xb0\"");
	ck_assert_str_eq(e.msg, "bad name \"a???b???c???d\xe2\x80\xb0\"");
	char tail[] = "x\xe2\x80"; /* cut short: left as it is */
	sbx_one_line(tail);
	ck_assert_str_eq(tail, "x\xe2\x80");
}
END_TEST

/* A path near PATH_MAX (twice, as `rename` or `upload PATH: write PATH` carry it): the reason
 * stays. */
START_TEST(err_long_path_keeps_reason)
{
	struct sbx_error e = SBX_ERROR_INIT;
	char path[4000], big[12000], fit[64];
	size_t n;
	memset(path, 'd', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	path[0] = '/';
	for (size_t i = 200; i < sizeof(path) - 1; i += 201)
		path[i] = '/';
	memcpy(path + sizeof(path) - 8, "/file.c", 8);
	sbx_error_set(&e, EIO, 0, "write /tmp%s: write /tmp%s: HTTP 500: disk on fire", path, path);
	n = strlen(e.msg);
	ck_assert_uint_lt(n, sizeof(e.msg));
	ck_assert_msg(strstr(e.msg, "/file.c: write /tmp/ddd") != NULL, "%s", e.msg);
	ck_assert_msg(n > 22 && !strcmp(e.msg + n - 22, "HTTP 500: disk on fire"), "%s", e.msg);
	ck_assert_msg(!strncmp(e.msg, "write /tmp/ddd", 14), "%s", e.msg);
	/* A prefix on a full message keeps the end too. */
	sbx_error_prefix(&e, "upload /tmp/dddd");
	n = strlen(e.msg);
	ck_assert_msg(!strcmp(e.msg + n - 22, "HTTP 500: disk on fire"), "%s", e.msg);
	ck_assert_msg(!strncmp(e.msg, "upload /tmp/dddd: ", 18), "%s", e.msg);
	/* Many long words: the middle of the whole goes; UTF-8 is never cut mid-character. */
	for (n = 0; n + 2 < sizeof(big) - 20; n += 2)
		memcpy(big + n, n % 300 == 298 ? " x" : "\xc3\xa9", 2);
	strcpy(big + n, " the end");
	ck_assert_uint_lt(sbx_fit(fit, sizeof(fit), big), sizeof(fit));
	ck_assert(sbx_utf8_valid(fit));
	ck_assert_msg(strstr(fit, "...") && !strcmp(fit + strlen(fit) - 8, " the end"), "%s", fit);
	/* A name of invalid bytes (legal in a name): cut where it is, never before its word. */
	memset(big, 0x80, 600);
	big[600] = '\0';
	sbx_error_set(&e, EIO, 0, "x %s y %s: the reason", big, big);
	n = strlen(e.msg);
	ck_assert_uint_lt(n, sizeof(e.msg));
	ck_assert_msg(!strncmp(e.msg, "x ", 2) && strstr(e.msg, " y "), "%s", e.msg);
	ck_assert_msg(!strcmp(e.msg + n - 10, "the reason"), "%s", e.msg);
	/* What fits is left alone. */
	ck_assert_uint_eq(sbx_fit(fit, sizeof(fit), "short one"), 9);
	ck_assert_str_eq(fit, "short one");
}
END_TEST

START_TEST(err_http_mapping)
{
	ck_assert_int_eq(sbx_errno_from_http(200), 0);
	ck_assert_int_eq(sbx_errno_from_http(401), EACCES);
	ck_assert_int_eq(sbx_errno_from_http(404), ENOENT);
	ck_assert_int_eq(sbx_errno_from_http(408), ETIMEDOUT);
	ck_assert_int_eq(sbx_errno_from_http(429), EAGAIN);
	ck_assert_int_eq(sbx_errno_from_http(502), ENOTCONN);
	ck_assert_int_eq(sbx_errno_from_http(507), ENOSPC);
	ck_assert_int_eq(sbx_errno_from_http(500), EIO);
	ck_assert_str_eq(sbx_errcode_name(SBX_E_CONNECTION_FAILED), "CONNECTION_FAILED");
}
END_TEST

START_TEST(log_redacts_secrets)
{
	const char *in = "POST /v2/sandboxes HTTP/1.1\r\nX-API-KEY: e2b_secret\r\n"
			 "authorization: Bearer dtn_secret\r\nAccept: */*\r\n";
	char out[512];
	sbx_log_redact(out, sizeof(out), in, strlen(in));
	ck_assert_ptr_null(strstr(out, "secret"));
	ck_assert_ptr_nonnull(strstr(out, "X-API-KEY: ***"));
	ck_assert_ptr_nonnull(strstr(out, "Accept: */*"));
}
END_TEST

START_TEST(durations)
{
	ck_assert_int_eq(sbx_duration_parse("90"), 90);
	ck_assert_int_eq(sbx_duration_parse("90s"), 90);
	ck_assert_int_eq(sbx_duration_parse("10m"), 600);
	ck_assert_int_eq(sbx_duration_parse("8h"), 28800);
	ck_assert_int_eq(sbx_duration_parse("1h30m"), 5400);
	ck_assert_int_eq(sbx_duration_parse("2d"), 172800);
	ck_assert_int_eq(sbx_duration_parse("1h30"), -1);
	ck_assert_int_eq(sbx_duration_parse("ten"), -1);
	ck_assert_int_eq(sbx_duration_parse(""), -1);
	ck_assert_int_eq(sbx_duration_parse("5x"), -1);
}
END_TEST

START_TEST(tid_dying)
{
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (!child)
		_exit(0);
	waitpid(child, NULL, 0);
	ck_assert(!sbx_tid_dying(getpid())); /* alive, nothing pending */
	ck_assert(sbx_tid_dying(child));     /* gone: nobody waits any more */
	ck_assert(!sbx_tid_dying(0));
}
END_TEST

START_TEST(spec_apply_and_roundtrip)
{
	struct sbx_spec s;
	struct sbx_error e = SBX_ERROR_INIT;
	json_error_t je;
	json_t *j = json_loads("{\"provider\":\"e2b\",\"template\":\"code-interpreter-v1\","
			       "\"resources\":{\"cpu\":500,\"memoryMB\":256,\"timeout\":\"8h\"},"
			       "\"idleTimeout\":\"10m\",\"envs\":{\"LANG\":\"C.UTF-8\"},"
			       "\"packages\":[\"pandas\"],\"workingDirectory\":\"/home/user\","
			       "\"autoResume\":false}",
			       0, &je);
	sbx_spec_init(&s);
	ck_assert_int_eq(sbx_spec_apply_json(&s, j, &e), 0);
	ck_assert_str_eq(s.provider, "e2b");
	ck_assert_int_eq(s.res.cpu, 500);
	ck_assert_int_eq(s.res.timeout_s, 28800);
	ck_assert_int_eq(s.idle_timeout_s, 600);
	ck_assert(!s.auto_resume);
	ck_assert_int_eq(sbx_spec_apply_kv(&s, "resources.memoryMB", "64", &e), 0);
	ck_assert_int_eq(s.res.memory_mb, 64);
	ck_assert_int_eq(sbx_spec_apply_kv(&s, "envs.FOO", "a b", &e), 0);
	ck_assert_str_eq(json_string_value(json_object_get(s.envs, "FOO")), "a b");
	ck_assert_str_eq(json_string_value(json_object_get(s.envs, "LANG")), "C.UTF-8");
	ck_assert_int_eq(sbx_spec_apply_kv(&s, "runTimeout", "2m", &e), 0);
	ck_assert_int_eq(s.run_timeout_s, 120);
	json_t *out = sbx_spec_to_json(&s);
	struct sbx_spec s2;
	sbx_spec_init(&s2);
	ck_assert_int_eq(sbx_spec_apply_json(&s2, out, &e), 0);
	ck_assert_str_eq(s2.template_name, "code-interpreter-v1");
	ck_assert_int_eq(s2.res.memory_mb, 64);
	ck_assert_int_eq(s2.run_timeout_s, 120);
	ck_assert_str_eq(s2.working_dir, "/home/user");
	json_decref(out);
	json_decref(j);
	sbx_spec_free(&s);
	sbx_spec_free(&s2);
}
END_TEST

static int spec_error(const char *text, const char *want)
{
	struct sbx_spec s;
	struct sbx_error e = SBX_ERROR_INIT;
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	sbx_spec_init(&s);
	int rc = sbx_spec_apply_json(&s, j, &e);
	ck_assert_msg(strstr(e.msg, want), "message \"%s\" lacks \"%s\"", e.msg, want);
	json_decref(j);
	sbx_spec_free(&s);
	return rc;
}

START_TEST(spec_rejects)
{
	ck_assert_int_eq(spec_error("{\"bogus\":1}", "bogus"), -EINVAL);
	ck_assert_int_eq(spec_error("{\"resources\":{\"cpu\":-1}}", "resources.cpu"), -EINVAL);
	ck_assert_int_eq(spec_error("{\"idleTimeout\":\"soon\"}", "idleTimeout"), -EINVAL);
	ck_assert_int_eq(spec_error("{\"runTimeout\":-5}", "runTimeout"), -EINVAL);
	ck_assert_int_eq(spec_error("{\"envs\":{\"A\":1}}", "envs.A"), -EINVAL);
	/* A name no shell takes was kept, and bash dropped it from every run. */
	ck_assert_int_eq(spec_error("{\"envs\":{\"A B\":\"x\"}}", "\"A B\""), -EINVAL);
	ck_assert_int_eq(spec_error("{\"envs\":{\"1A\":\"x\"}}", "\"1A\""), -EINVAL);
	ck_assert(sbx_env_name_valid("_a1", 3));
	ck_assert(!sbx_env_name_valid("a-b", 3));
	ck_assert_int_eq(spec_error("{\"workingDirectory\":\"rel\"}", "absolute"), -EINVAL);
	ck_assert_int_eq(spec_error("{\"network\":\"wifi\"}", "network"), -EINVAL);
	ck_assert_int_eq(spec_error("{\"packages\":[1]}", "packages[0]"), -EINVAL);
}
END_TEST

START_TEST(config_defaults_and_errors)
{
	struct sbx_config c;
	struct sbx_error e = SBX_ERROR_INIT;
	json_error_t je;
	json_t *empty = json_object();
	ck_assert_int_eq(sbx_config_parse(&c, empty, &e), 0);
	ck_assert_str_eq(c.default_profile, "default");
	ck_assert_str_eq(sbx_config_profile(&c, "default")->spec.provider, "local");
	sbx_config_free(&c);
	json_decref(empty);

	json_t *j = json_loads("{\"defaultProfile\":\"py\",\"profiles\":{\"py\":{\"provider\":"
			       "\"e2b\"}}}",
			       0, &je);
	ck_assert_int_eq(sbx_config_parse(&c, j, &e), 0);
	ck_assert_str_eq(sbx_config_profile(&c, "py")->spec.provider, "e2b");
	ck_assert_ptr_null(sbx_config_profile(&c, "nope"));
	sbx_config_free(&c);
	json_decref(j);

	j = json_loads("{\"defaultProfile\":\"missing\"}", 0, &je);
	ck_assert_int_eq(sbx_config_parse(&c, j, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "missing"));
	json_decref(j);
	j = json_loads("{\"profiles\":{\"x\":{\"resources\":{\"gpu\":1}}}}", 0, &je);
	ck_assert_int_eq(sbx_config_parse(&c, j, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "profile: x: spec: unknown key \"resources.gpu\""));
	json_decref(j);
}
END_TEST

START_TEST(ctl_words)
{
	struct sbx_ctl_cmd cmd;
	struct sbx_error e = SBX_ERROR_INIT;
	ck_assert_int_eq(
	    sbx_ctl_parse(SBX_CTL_FILE_ROOT, "new work profile=py envs.A=\"x y\"\n", &cmd, &e), 0);
	ck_assert_int_eq(cmd.word, SBX_CTL_NEW);
	ck_assert_int_eq(cmd.argc, 3);
	ck_assert_str_eq(cmd.argv[0], "work");
	ck_assert_str_eq(sbx_ctl_opt(&cmd, 1, "profile"), "py");
	ck_assert_str_eq(cmd.argv[2], "envs.A=x y");
	ck_assert_int_eq(sbx_ctl_parse(SBX_CTL_FILE_ROOT, "attach a ID provider=e2b", &cmd, &e), 0);
	ck_assert_int_eq(cmd.word, SBX_CTL_ATTACH);
	ck_assert_int_eq(sbx_ctl_parse(SBX_CTL_FILE_ROOT, "attach a", &cmd, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "usage: attach"));
	ck_assert_int_eq(sbx_ctl_parse(SBX_CTL_FILE_ROOT, "pause", &cmd, &e), -EINVAL);
	ck_assert_int_eq(sbx_ctl_parse(SBX_CTL_FILE_ROOT, "   ", &cmd, &e), -ENODATA);
	ck_assert_int_eq(sbx_ctl_parse(SBX_CTL_FILE_ROOT, "# note", &cmd, &e), -ENODATA);
	ck_assert_int_eq(sbx_ctl_parse(SBX_CTL_FILE_ROOT, "new \"open", &cmd, &e), -EINVAL);
	ck_assert_int_eq(sbx_ctl_parse(SBX_CTL_FILE_STATE, "pause\n", &cmd, &e), 0);
	ck_assert_int_eq(cmd.word, SBX_CTL_PAUSE);
	ck_assert_int_eq(sbx_ctl_parse(SBX_CTL_FILE_STATE, "restart python", &cmd, &e), 0);
	ck_assert_str_eq(cmd.argv[0], "python");
	ck_assert_int_eq(sbx_ctl_parse(SBX_CTL_FILE_STATE, "sleep", &cmd, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "unknown word \"sleep\""));
	ck_assert_int_eq(sbx_ctl_parse(SBX_CTL_FILE_STATE, "pause now", &cmd, &e), -EINVAL);
}
END_TEST

/* An unterminated line: act or refuse at the write when no more text can change it. */
START_TEST(ctl_partial_lines)
{
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_STATE, "pause"), SBX_CTL_DONE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_STATE, " kill \t"), SBX_CTL_DONE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_STATE, "pau"), SBX_CTL_MORE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_STATE, "restart"), SBX_CTL_MORE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_STATE, "restart py"), SBX_CTL_MORE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_STATE, ""), SBX_CTL_MORE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_STATE, "# a note"), SBX_CTL_MORE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_STATE, "\"pause\""), SBX_CTL_MORE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_STATE, "PAUSE"), SBX_CTL_BAD);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_STATE, "pauses"), SBX_CTL_BAD);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_STATE, "pau x"), SBX_CTL_BAD);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_STATE, "pause now"), SBX_CTL_BAD);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_STATE, "new"), SBX_CTL_BAD);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_ROOT, "new"), SBX_CTL_MORE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_ROOT, "new box profile=p"), SBX_CTL_MORE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_ROOT, "at"), SBX_CTL_MORE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_ROOT, "pause"), SBX_CTL_BAD);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_ROOT, "frobnicate now"), SBX_CTL_BAD);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_RUN, "kill"), SBX_CTL_DONE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_RUN, "stop"), SBX_CTL_BAD);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_TTY, "close"), SBX_CTL_DONE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_TTY, "closed"), SBX_CTL_BAD);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_TTY, "size 80"), SBX_CTL_MORE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_TTY, "cwd /my dir"), SBX_CTL_MORE);
	ck_assert_int_eq(sbx_ctl_partial(SBX_CTL_FILE_TTY, "term xterm"), SBX_CTL_MORE);
}
END_TEST

START_TEST(node_paths)
{
	struct sbx_node n;
	ck_assert_int_eq(sbx_node_parse("/", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_ROOT);
	ck_assert_int_eq(sbx_node_parse("/ctl", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_CTL);
	ck_assert_int_eq(sbx_node_parse("/profiles/py.json", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_PROFILE);
	ck_assert_str_eq(n.sub, "py");
	ck_assert_int_eq(sbx_node_parse("/profiles/py", &n), -ENOENT);
	ck_assert_int_eq(sbx_node_parse("/work", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_LEASE);
	ck_assert_str_eq(n.lease, "work");
	ck_assert_int_eq(sbx_node_parse("/work/fs", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_FS);
	ck_assert_str_eq(n.sub, "/");
	ck_assert_int_eq(sbx_node_parse("/work/fs/etc/hosts", &n), 0);
	ck_assert_str_eq(n.sub, "/etc/hosts");
	ck_assert_int_eq(sbx_node_parse("/work/code.ts", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_CODE);
	ck_assert_str_eq(n.sub, "ts");
	ck_assert_int_eq(sbx_node_parse("/work/ports/8080", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_PORT);
	ck_assert_int_eq(sbx_node_parse("/work/ports/0", &n), -ENOENT);
	ck_assert_int_eq(sbx_node_parse("/work/ports/70000", &n), -ENOENT);
	ck_assert_int_eq(sbx_node_parse("/work/results/3.png", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_RESULT_FILE);
	ck_assert_int_eq(sbx_node_parse("/work/exec/x", &n), -ENOENT);
	ck_assert_int_eq(sbx_node_parse("/work/nothing", &n), -ENOENT);
	ck_assert_int_eq(sbx_node_parse("/.hidden", &n), -ENOENT);
	ck_assert(sbx_node_is_runner(SBX_N_EXEC));
	ck_assert(!sbx_node_is_runner(SBX_N_STATE));
	ck_assert(sbx_node_is_dir(SBX_N_RESULTS));
}
END_TEST

START_TEST(node_tty_paths)
{
	struct sbx_node n;
	ck_assert_int_eq(sbx_node_parse("/work/tty", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_TTY);
	ck_assert(sbx_node_is_dir(SBX_N_TTY));
	ck_assert_int_eq(sbx_node_parse("/work/tty/clone", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_TTY_CLONE);
	ck_assert_int_eq(sbx_node_parse("/work/tty/12", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_TTY_SESSION);
	ck_assert_str_eq(n.sub, "12");
	ck_assert(sbx_node_is_dir(SBX_N_TTY_SESSION));
	ck_assert_int_eq(sbx_node_parse("/work/tty/12/data", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_TTY_DATA);
	ck_assert_str_eq(n.sub, "12");
	ck_assert_int_eq(sbx_node_parse("/work/tty/3/ctl", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_TTY_CTL);
	ck_assert_int_eq(sbx_node_mode(SBX_N_TTY_CTL), S_IFREG | 0222);
	ck_assert_int_eq(sbx_node_parse("/work/tty/3/status", &n), 0);
	ck_assert_int_eq(n.kind, SBX_N_TTY_STATUS);
	ck_assert_int_eq(sbx_node_parse("/work/tty/0", &n), -ENOENT);
	ck_assert_int_eq(sbx_node_parse("/work/tty/01", &n), -ENOENT);
	ck_assert_int_eq(sbx_node_parse("/work/tty/1x", &n), -ENOENT);
	ck_assert_int_eq(sbx_node_parse("/work/tty/1234567890", &n), -ENOENT);
	ck_assert_int_eq(sbx_node_parse("/work/tty/3/other", &n), -ENOENT);
	ck_assert_int_eq(sbx_node_parse("/work/tty/3/data/x", &n), -ENOENT);
	ck_assert_int_eq(sbx_node_parse("/work/tty/clone/x", &n), -ENOENT);
}
END_TEST

/* RFC 4648 section 10 vectors, each decoded back; every byte value round-trips. */
START_TEST(base64_vectors_and_round_trip)
{
	static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const coded[] = {"",		"Zg==",	    "Zm8=",    "Zm9v",
					    "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	struct sbx_buf b = SBX_BUF_INIT;
	for (int i = 0; i < 7; i++) {
		sbx_buf_reset(&b);
		sbx_base64_encode(plain[i], strlen(plain[i]), &b);
		ck_assert_str_eq(b.buf, coded[i]);
		sbx_buf_reset(&b);
		ck_assert_int_eq(sbx_base64_decode(coded[i], strlen(coded[i]), &b), 0);
		ck_assert_str_eq(b.buf, plain[i]);
	}
	sbx_buf_reset(&b);
	sbx_base64_encode("\0\xff\x10"
			  "ab",
			  5, &b);
	ck_assert_str_eq(b.buf, "AP8QYWI=");

	unsigned char all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)(255 - i);
	for (size_t n = 0; n <= sizeof(all); n += n < 8 ? 1 : 61) {
		struct sbx_buf enc = SBX_BUF_INIT;
		sbx_base64_encode(all, n, &enc);
		ck_assert_uint_eq(enc.len, (n + 2) / 3 * 4);
		sbx_buf_reset(&b);
		ck_assert_int_eq(sbx_base64_decode(enc.buf, enc.len, &b), 0);
		ck_assert_uint_eq(b.len, n);
		ck_assert_int_eq(memcmp(b.buf, all, n), 0);
		sbx_buf_release(&enc);
	}
	sbx_buf_release(&b);
}
END_TEST

/* What the providers send: unpadded (e2b), wrapped lines (kernel outputs); and what is refused. */
START_TEST(base64_lenient_and_bad_input)
{
	struct sbx_buf b = SBX_BUF_INIT;
	ck_assert_int_eq(sbx_base64_decode("aGVsbG8", 7, &b), 0); /* padding optional */
	ck_assert_str_eq(b.buf, "hello");
	sbx_buf_reset(&b);
	ck_assert_int_eq(sbx_base64_decode("YQ", 2, &b), 0);
	ck_assert_str_eq(b.buf, "a");
	sbx_buf_reset(&b);
	ck_assert_int_eq(sbx_base64_decode("aGVs\nbG8K\r\n cGFy\ndGlhbAo=\n", 25, &b), 0);
	ck_assert_str_eq(b.buf, "hello\npartial\n");
	sbx_buf_reset(&b);
	/* len bounds the input: the rest is not read */
	ck_assert_int_eq(sbx_base64_decode("Zm9vYmFy!!", 8, &b), 0);
	ck_assert_str_eq(b.buf, "foobar");

	ck_assert_int_eq(sbx_base64_decode("a$==", 4, &b), -EINVAL);	 /* outside the alphabet */
	ck_assert_int_eq(sbx_base64_decode("Zm9v-_8=", 8, &b), -EINVAL); /* base64url digits */
	ck_assert_int_eq(sbx_base64_decode("aGV=sbG8", 8, &b), -EINVAL); /* data after '=' */
	ck_assert_int_eq(sbx_base64_decode("Zg==Zg==", 8, &b), -EINVAL); /* two values glued */
	ck_assert_int_eq(sbx_base64_decode("Y", 1, &b), -EINVAL);	 /* no whole byte */
	ck_assert_int_eq(sbx_base64_decode("Zm9vY", 5, &b), -EINVAL);
	ck_assert_int_eq(sbx_base64_decode("Zm\0v", 4, &b), -EINVAL); /* NUL is not a digit */
	ck_assert_int_eq(sbx_base64_decode("Zm9\tv", 5, &b), -EINVAL);
	sbx_buf_release(&b);
}
END_TEST

START_TEST(clock_and_random)
{
	long long t0 = sbx_now_ms(), t1;
	usleep(30 * 1000);
	t1 = sbx_now_ms();
	ck_assert_int_ge(t1 - t0, 29); /* at least the sleep (a loaded machine only adds) */
	ck_assert_int_lt(t1 - t0, 60 * 1000);

	unsigned char a[64], z[64] = {0};
	ck_assert_int_eq(sbx_random_bytes(NULL, 0), 0);
	memset(a, 0, sizeof(a));
	ck_assert_int_eq(sbx_random_bytes(a, sizeof(a)), 0);
	ck_assert_int_ne(memcmp(a, z, sizeof(a)), 0); /* 2^-512 to fail by chance */
	memcpy(z, a, sizeof(a));
	ck_assert_int_eq(sbx_random_bytes(a, sizeof(a)), 0);
	ck_assert_int_ne(memcmp(a, z, sizeof(a)), 0);
}
END_TEST

/* A boot-clock time shows as one wall time, read after read, and back (leasetab's epochs). */
START_TEST(boot_clock_as_wall)
{
	time_t b = sbx_boot_s() - 5, first = sbx_boot_to_wall(b), now = time(NULL);
	ck_assert_int_le(first, now - 4);
	ck_assert_int_ge(first, now - 7);
	/* The two clocks tick apart: reading them in whole seconds, the answer moved
	 * by one within every second. Sampled over 1.2 s. */
	for (int i = 0; i < 60; i++) {
		ck_assert_int_eq(sbx_boot_to_wall(b), first);
		usleep(20 * 1000);
	}
	ck_assert_int_eq(sbx_wall_to_boot(sbx_boot_to_wall(b)), b);
	ck_assert_int_eq(sbx_boot_to_wall(0), 0); /* never stays never */
	ck_assert_int_eq(sbx_wall_to_boot(0), 0);
}
END_TEST

START_TEST(write_and_send_all)
{
	/* 1 MiB through a pipe (64 KiB buffer): short writes, all of it arrives in order. */
	size_t len = 1u << 20;
	char *data = malloc(len);
	int fds[2], st;
	ck_assert_ptr_nonnull(data);
	for (size_t i = 0; i < len; i++)
		data[i] = (char)(i * 7 + i / 251);
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		size_t got = 0;
		char buf[4096];
		ssize_t n;
		close(fds[1]);
		while ((n = read(fds[0], buf, sizeof(buf))) > 0) {
			if (got + (size_t)n > len || memcmp(buf, data + got, (size_t)n))
				_exit(2);
			got += (size_t)n;
		}
		_exit(got == len ? 0 : 1);
	}
	close(fds[0]);
	ck_assert_int_eq(sbx_write_all(fds[1], data, len), 0);
	close(fds[1]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	free(data);

	/* A closed peer: -EPIPE from send_all, and no SIGPIPE (default: it would kill us). */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
	close(fds[1]);
	ck_assert_int_eq(sbx_send_all(fds[0], "x", 1), -EPIPE);
	close(fds[0]);
	ck_assert_int_eq(sbx_write_all(-1, "x", 1), -EBADF);
	ck_assert_int_eq(sbx_write_all(-1, "", 0), 0);
}
END_TEST

START_TEST(df_parse)
{
	struct statvfs st;
	/* e2b's `df -kP / && df -iP /` */
	ck_assert_int_eq(
	    sbx_df_parse("Filesystem     1024-blocks    Used Available Capacity Mounted on\n"
			 "overlay           1048576   24576   1024000       3% /\n"
			 "Filesystem      Inodes IUsed  IFree IUse% Mounted on\n"
			 "overlay         262144   100 262044    1% /\n",
			 &st),
	    0);
	ck_assert_uint_eq(st.f_frsize, 1024);
	ck_assert_uint_eq(st.f_bsize, 1024);
	ck_assert_uint_eq(st.f_blocks, 1048576);
	ck_assert_uint_eq(st.f_bfree, 1048576 - 24576);
	ck_assert_uint_eq(st.f_bavail, 1024000);
	ck_assert_uint_eq(st.f_files, 262144);
	ck_assert_uint_eq(st.f_ffree, 262044);
	ck_assert_uint_eq(st.f_favail, 262044);
	ck_assert_uint_eq(st.f_namemax, 255);

	/* inodes first, a device name with spaces, no trailing newline: the block table still
	 * counts */
	ck_assert_int_eq(
	    sbx_df_parse("Filesystem      Inodes  IUsed   IFree IUse% Mounted on\n"
			 "my disk         640000  40000  600000    7% /\n"
			 "Filesystem     1024-blocks    Used Available Capacity Mounted on\n"
			 "my disk          10000000 2500000   7000000      27% /",
			 &st),
	    0);
	ck_assert_uint_eq(st.f_blocks, 10000000);
	ck_assert_uint_eq(st.f_bfree, 7500000);
	ck_assert_uint_eq(st.f_bavail, 7000000);
	ck_assert_uint_eq(st.f_files, 640000);
	ck_assert_uint_eq(st.f_ffree, 600000);

	/* used > total (a racing writer) gives no free blocks, not a wrapped count */
	ck_assert_int_eq(sbx_df_parse("Filesystem 1024-blocks Used Available Capacity Mounted on\n"
				      "x 100 150 0 100% /\n",
				      &st),
			 0);
	ck_assert_uint_eq(st.f_bfree, 0);

	/* a block table is required; an inode table alone, a bad number or a message is not one */
	ck_assert_int_eq(sbx_df_parse("Filesystem Inodes IUsed IFree IUse% Mounted on\n"
				      "overlay 10 1 9 10% /\n",
				      &st),
			 -EPROTO);
	ck_assert_int_eq(sbx_df_parse("Filesystem 1024-blocks Used Available Capacity Mounted on\n"
				      "overlay 10 1x 9 10% /\n",
				      &st),
			 -EPROTO);
	ck_assert_int_eq(
	    sbx_df_parse("Filesystem 1024-blocks Used Available Capacity Mounted on\n", &st),
	    -EPROTO);
	ck_assert_int_eq(sbx_df_parse("df: /x: No such file or directory\n", &st), -EPROTO);
	ck_assert_int_eq(sbx_df_parse("garbage", &st), -EPROTO);
	ck_assert_int_eq(sbx_df_parse("", &st), -EPROTO);
}
END_TEST

START_TEST(path_under)
{
	ck_assert(sbx_path_under("/a/b", "/a/b"));
	ck_assert(sbx_path_under("/a/b/c", "/a/b"));
	ck_assert(!sbx_path_under("/a/bc", "/a/b")); /* a longer name, not below */
	ck_assert(!sbx_path_under("/a", "/a/b"));
	ck_assert(sbx_path_under("/", "/"));
	ck_assert(sbx_path_under("/x/y", "/"));
	ck_assert(sbx_path_within("/a/b/c", "/a/bzz", 4)); /* the first n bytes */
	ck_assert(!sbx_path_within("/a/bc", "/a/bzz", 4));
	ck_assert_uint_eq(sbx_path_dirlen("/a/b/c"), 4); /* "/a/b" */
	ck_assert_uint_eq(sbx_path_dirlen("/a"), 1);	 /* "/" */
	ck_assert_uint_eq(sbx_path_dirlen("/"), 1);
	ck_assert_uint_eq(sbx_path_dirlen("a"), 0);
	/* what a listing from a sandbox may name */
	char longest[NAME_MAX + 2];
	memset(longest, 'x', NAME_MAX);
	longest[NAME_MAX] = '\0';
	ck_assert(sbx_name_listable("a") && sbx_name_listable("...") && sbx_name_listable(longest));
	longest[NAME_MAX] = 'x';
	longest[NAME_MAX + 1] = '\0';
	ck_assert(!sbx_name_listable(longest));
	ck_assert(!sbx_name_listable(NULL) && !sbx_name_listable("") && !sbx_name_listable("."));
	ck_assert(!sbx_name_listable("..") && !sbx_name_listable("a/b") && !sbx_name_listable("/"));
}
END_TEST

START_TEST(path_resolved_under)
{
	char d[] = "/tmp/check-under.XXXXXX", p[256], q[256];
	ck_assert_ptr_nonnull(mkdtemp(d));
	snprintf(p, sizeof(p), "%s/m", d);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(q, sizeof(q), "%s/link", d);
	ck_assert_int_eq(symlink("m", q), 0);
	snprintf(p, sizeof(p), "%s/m", d);
	ck_assert(sbx_path_resolved_under(p, p));    /* the mount point itself */
	snprintf(q, sizeof(q), "%s/m/a/b/state", d); /* does not exist yet */
	ck_assert(sbx_path_resolved_under(q, p));
	snprintf(q, sizeof(q), "%s/link//st/", d); /* through a symlink, doubled slashes */
	ck_assert(sbx_path_resolved_under(q, p));
	snprintf(q, sizeof(q), "%s/mm/st", d); /* a longer name beside it */
	ck_assert(!sbx_path_resolved_under(q, p));
	snprintf(q, sizeof(q), "%s/st", d);
	ck_assert(!sbx_path_resolved_under(q, p));
	ck_assert(sbx_path_resolved_under(q, "/")); /* "/" holds everything */
	char cwd[256];
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(chdir(p), 0);
	ck_assert(sbx_path_resolved_under("new/state", p)); /* relative, to the working dir */
	ck_assert(sbx_path_resolved_under("new", p));
	ck_assert(!sbx_path_resolved_under("../st", p));
	ck_assert_int_eq(chdir(cwd), 0);
	snprintf(q, sizeof(q), "%s/link", d);
	unlink(q);
	snprintf(q, sizeof(q), "%s/m", d);
	rmdir(q);
	rmdir(d);
}
END_TEST

START_TEST(pathttl_expiry_and_bound)
{
	struct sbx_pathttl s = {.max = 4};
	char name[16];
	sbx_pathttl_note(&s, "/a", 1000, 500);
	ck_assert(sbx_pathttl_live(&s, "/a", 1499));
	ck_assert(!sbx_pathttl_live(&s, "/a", 1500)); /* expired at its time */
	ck_assert(!sbx_pathttl_live(&s, "/b", 1000));
	sbx_pathttl_note(&s, "/a", 1400, 5000); /* a new note moves the time */
	ck_assert(sbx_pathttl_live(&s, "/a", 6399));

	/* full: the expired go first, then the oldest noted; never over max */
	sbx_pathttl_note(&s, "/old", 0, 10);
	sbx_pathttl_note(&s, "/b", 2000, 5000);
	sbx_pathttl_note(&s, "/c", 2000, 5000);
	sbx_pathttl_note(&s, "/d", 2000, 5000); /* drops /old (expired), keeps /a */
	ck_assert(sbx_pathttl_live(&s, "/a", 1800));
	ck_assert(sbx_pathttl_live(&s, "/b", 2000));
	ck_assert(sbx_pathttl_live(&s, "/d", 2000));
	sbx_pathttl_note(&s, "/a", 2000, 5000); /* /a becomes the newest */
	sbx_pathttl_note(&s, "/e", 2000, 5000); /* all live: drops the oldest, /b */
	ck_assert(!sbx_pathttl_live(&s, "/b", 2000));
	ck_assert(sbx_pathttl_live(&s, "/a", 2000));
	ck_assert(sbx_pathttl_live(&s, "/c", 2000));
	ck_assert(sbx_pathttl_live(&s, "/e", 2000));
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "/n%d", i);
		sbx_pathttl_note(&s, name, 3000, 5000);
	}
	ck_assert(sbx_pathttl_live(&s, "/n99", 3000));
	ck_assert(sbx_pathttl_live(&s, "/n96", 3000));
	ck_assert(!sbx_pathttl_live(&s, "/n95", 3000));
	sbx_pathttl_clear(&s);
	ck_assert(!sbx_pathttl_live(&s, "/n99", 3000));
	sbx_pathttl_note(&s, "/z", 0, 1); /* usable after clear */
	ck_assert(sbx_pathttl_live(&s, "/z", 0));
	sbx_pathttl_clear(&s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("base");
	TCase *tc = tcase_create("pure");
	tcase_add_test(tc, buf_invariants);
	tcase_add_test(tc, buf_shell_quote);
	tcase_add_test(tc, buf_utf8_escaped);
	tcase_add_test(tc, utf8_check_pieces);
	tcase_add_test(tc, err_set_returns_negative);
	tcase_add_test(tc, err_long_path_keeps_reason);
	tcase_add_test(tc, err_http_mapping);
	tcase_add_test(tc, log_redacts_secrets);
	tcase_add_test(tc, durations);
	tcase_add_test(tc, tid_dying);
	tcase_add_test(tc, boot_clock_as_wall);
	tcase_add_test(tc, spec_apply_and_roundtrip);
	tcase_add_test(tc, spec_rejects);
	tcase_add_test(tc, config_defaults_and_errors);
	tcase_add_test(tc, ctl_words);
	tcase_add_test(tc, ctl_partial_lines);
	tcase_add_test(tc, node_paths);
	tcase_add_test(tc, node_tty_paths);
	tcase_add_test(tc, base64_vectors_and_round_trip);
	tcase_add_test(tc, base64_lenient_and_bad_input);
	tcase_add_test(tc, clock_and_random);
	tcase_add_test(tc, df_parse);
	tcase_add_test(tc, write_and_send_all);
	tcase_add_test(tc, pathttl_expiry_and_bound);
	tcase_add_test(tc, path_under);
	tcase_add_test(tc, path_resolved_under);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
