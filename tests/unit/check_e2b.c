/*
 * check_e2b — unit tests for the E2B provider's pure modules: Connect
 * framing (connect.c), protobuf JSON and E2B shapes (protocol.c), and the
 * metadata batch's shell text (meta.c). No network, no sandbox.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2b/connect.h"
#include "rmeta_queue.h"
#include "rmeta.h"
#include "e2b/protocol.h"
#include "e2b/e2b.h"

/* --- Connect framing ------------------------------------------------------ */

struct msgs {
	char got[8][128];
	int n;
	int fail_at; /* 1-based message index that returns -EPIPE, 0: none */
};

static int collect(void *ctx, const char *json, size_t len)
{
	struct msgs *m = ctx;
	if (m->n < 8)
		snprintf(m->got[m->n], sizeof(m->got[0]), "%.*s", (int)len, json);
	m->n++;
	return m->fail_at == m->n ? -EPIPE : 0;
}

static void frames(struct sbx_buf *b)
{
	e2b_connect_frame(b, 0, "{\"event\":{\"start\":{\"pid\":1}}}", 30);
	e2b_connect_frame(b, 0, "{\"a\":1}", 7);
	e2b_connect_frame(b, E2B_CONNECT_FLAG_END, "{}", 2);
}

START_TEST(test_frame_encode)
{
	struct sbx_buf b = SBX_BUF_INIT;
	e2b_connect_frame(&b, 0, "{\"a\":1}", 7);
	ck_assert_int_eq(b.len, 12);
	ck_assert_int_eq((unsigned char)b.buf[0], 0);
	ck_assert_int_eq((unsigned char)b.buf[4], 7);
	ck_assert_mem_eq(b.buf + 5, "{\"a\":1}", 7);
	sbx_buf_reset(&b);
	e2b_connect_frame(&b, 2, "", 0);
	ck_assert_mem_eq(b.buf, "\x02\0\0\0\0", 5);
	sbx_buf_release(&b);
}
END_TEST

/* Every split point of the byte stream, and the whole stream at once. */
START_TEST(test_decode_split_packed)
{
	struct sbx_buf b = SBX_BUF_INIT;
	frames(&b);
	for (size_t cut = 0; cut <= b.len; cut++) {
		struct msgs m = {0};
		struct e2b_connect_decoder d;
		struct sbx_error e = SBX_ERROR_INIT;
		e2b_connect_decoder_init(&d, collect, &m);
		ck_assert_int_eq(e2b_connect_feed(&d, b.buf, cut, &e), 0);
		ck_assert_int_eq(e2b_connect_feed(&d, b.buf + cut, b.len - cut, &e), 0);
		ck_assert_int_eq(e2b_connect_finish(&d, "t", &e), 0);
		ck_assert_int_eq(m.n, 2);
		ck_assert_str_eq(m.got[1], "{\"a\":1}");
		e2b_connect_decoder_release(&d);
	}
	/* byte by byte */
	{
		struct msgs m = {0};
		struct e2b_connect_decoder d;
		struct sbx_error e = SBX_ERROR_INIT;
		e2b_connect_decoder_init(&d, collect, &m);
		for (size_t i = 0; i < b.len; i++)
			ck_assert_int_eq(e2b_connect_feed(&d, b.buf + i, 1, &e), 0);
		ck_assert_int_eq(e2b_connect_finish(&d, "t", &e), 0);
		ck_assert_int_eq(m.n, 2);
		e2b_connect_decoder_release(&d);
	}
	sbx_buf_release(&b);
}
END_TEST

START_TEST(test_decode_end_error)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct msgs m = {0};
	struct e2b_connect_decoder d;
	struct sbx_error e = SBX_ERROR_INIT;
	const char *end =
	    "{\"error\":{\"code\":\"deadline_exceeded\",\"message\":\"context deadline "
	    "exceeded\"}}";
	e2b_connect_frame(&b, 0, "{\"event\":{\"start\":{\"pid\":3}}}", 30);
	e2b_connect_frame(&b, E2B_CONNECT_FLAG_END, end, strlen(end));
	e2b_connect_decoder_init(&d, collect, &m);
	ck_assert_int_eq(e2b_connect_feed(&d, b.buf, b.len, &e), 0);
	ck_assert_int_eq(e2b_connect_finish(&d, "run", &e), -ETIMEDOUT);
	ck_assert_int_eq(e.code, SBX_E_TIMEOUT);
	ck_assert_ptr_nonnull(strstr(e.msg, "[deadline_exceeded] context deadline exceeded"));
	e2b_connect_decoder_release(&d);

	/* an error as the only frame: invalid cwd */
	sbx_buf_reset(&b);
	end = "{\"error\":{\"code\":\"invalid_argument\",\"message\":\"cwd '/nope' does not "
	      "exist\"}}";
	e2b_connect_frame(&b, E2B_CONNECT_FLAG_END, end, strlen(end));
	e2b_connect_decoder_init(&d, collect, &m);
	ck_assert_int_eq(e2b_connect_feed(&d, b.buf, b.len, &e), 0);
	ck_assert_int_eq(e2b_connect_finish(&d, "run", &e), -EINVAL);
	e2b_connect_decoder_release(&d);
	sbx_buf_release(&b);
}
END_TEST

START_TEST(test_decode_bad)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct msgs m = {0};
	struct e2b_connect_decoder d;
	struct sbx_error e = SBX_ERROR_INIT;

	/* compressed flag */
	e2b_connect_frame(&b, E2B_CONNECT_FLAG_COMPRESSED, "xx", 2);
	e2b_connect_decoder_init(&d, collect, &m);
	ck_assert_int_eq(e2b_connect_feed(&d, b.buf, b.len, &e), -EPROTO);
	ck_assert_ptr_nonnull(strstr(e.msg, "compressed"));
	e2b_connect_decoder_release(&d);

	/* no end frame */
	sbx_buf_reset(&b);
	e2b_connect_frame(&b, 0, "{}", 2);
	e2b_connect_decoder_init(&d, collect, &m);
	ck_assert_int_eq(e2b_connect_feed(&d, b.buf, b.len, &e), 0);
	ck_assert_int_eq(e2b_connect_finish(&d, "run", &e), -EPROTO);
	ck_assert_ptr_nonnull(strstr(e.msg, "missing EndStreamResponse"));
	e2b_connect_decoder_release(&d);

	/* cut inside a frame */
	e2b_connect_decoder_init(&d, collect, &m);
	ck_assert_int_eq(e2b_connect_feed(&d, b.buf, 3, &e), 0);
	ck_assert_int_eq(e2b_connect_finish(&d, "run", &e), -EPROTO);
	e2b_connect_decoder_release(&d);

	/* oversized length */
	e2b_connect_decoder_init(&d, collect, &m);
	ck_assert_int_eq(e2b_connect_feed(&d, "\0\x7f\xff\xff\xff", 5, &e), -EPROTO);
	e2b_connect_decoder_release(&d);

	/* data after the end frame */
	sbx_buf_reset(&b);
	e2b_connect_frame(&b, E2B_CONNECT_FLAG_END, "{}", 2);
	e2b_connect_frame(&b, 0, "{}", 2);
	e2b_connect_decoder_init(&d, collect, &m);
	ck_assert_int_eq(e2b_connect_feed(&d, b.buf, b.len, &e), -EPROTO);
	e2b_connect_decoder_release(&d);

	/* the callback's error stops the stream */
	sbx_buf_reset(&b);
	frames(&b);
	m.n = 0;
	m.fail_at = 1;
	e2b_connect_decoder_init(&d, collect, &m);
	ck_assert_int_eq(e2b_connect_feed(&d, b.buf, b.len, &e), -EPIPE);
	ck_assert_int_eq(m.n, 1);
	e2b_connect_decoder_release(&d);
	sbx_buf_release(&b);
}
END_TEST

START_TEST(test_unary_errors)
{
	struct sbx_error e = SBX_ERROR_INIT;
	const char *nf = "{\"code\":\"not_found\",\"message\":\"file not found\"}";
	ck_assert_int_eq(
	    e2b_connect_unary_error(404, "application/json", nf, strlen(nf), "stat", &e), -ENOENT);
	ck_assert_str_eq(e.msg, "stat: [not_found] file not found");
	/* the body's code wins over the status */
	ck_assert_int_eq(e2b_connect_unary_error(500, "application/json; charset=utf-8", nf,
						 strlen(nf), "stat", &e),
			 -ENOENT);
	const char *ae = "{\"code\":\"already_exists\",\"message\":\"x\"}";
	ck_assert_int_eq(
	    e2b_connect_unary_error(409, "application/json", ae, strlen(ae), "mkdir", &e), -EEXIST);
	/* the proxy's 502: numeric code, the sandbox is gone */
	const char *gone = "{\"sandboxId\":\"abc\",\"message\":\"The sandbox was not found\","
			   "\"code\":502}";
	ck_assert_int_eq(e2b_connect_unary_error(502, "application/json; charset=utf-8", gone,
						 strlen(gone), "stat", &e),
			 -ENOTCONN);
	ck_assert_int_eq(e.code, SBX_E_NOT_FOUND);
	ck_assert_ptr_nonnull(strstr(e.msg, "The sandbox was not found"));
	/* non-JSON: from the status */
	ck_assert_int_eq(e2b_connect_unary_error(404, "text/plain", "nope", 4, "stat", &e),
			 -ENOTSUP);
	ck_assert_int_eq(e2b_connect_unary_error(401, "text/plain", "", 0, "stat", &e), -EACCES);
	ck_assert_int_eq(e2b_connect_unary_error(503, NULL, "", 0, "stat", &e), -ENOTCONN);
	/* rate-limited (the transport's retries are spent): EAGAIN, not "unavailable" */
	const char *rl = "{\"code\":429,\"message\":\"slow down\"}";
	ck_assert_int_eq(
	    e2b_connect_unary_error(429, "application/json", rl, strlen(rl), "stat", &e), -EAGAIN);
	ck_assert_str_eq(e.msg, "stat: HTTP 429 slow down");
	ck_assert_int_eq(e2b_connect_unary_error(507, NULL, "", 0, "write", &e), -ENOSPC);
	ck_assert_int_eq(e2b_connect_code_errno("unauthenticated"), EACCES);
	ck_assert_int_eq(e2b_connect_code_errno("resource_exhausted"), EAGAIN);
	ck_assert_int_eq(e2b_connect_code_errno("bogus"), EIO);
}
END_TEST

/* --- control plane ----------------------------------------------------------- */

START_TEST(test_api_errors)
{
	struct sbx_error e = SBX_ERROR_INIT;
	const char *b401 = "{\"code\":401,\"message\":\"Invalid API key\"}";
	ck_assert_int_eq(e2b_api_error(401, b401, strlen(b401), "create", &e), -EACCES);
	ck_assert_str_eq(
	    e.msg, "create: E2B refused the API key (401): Invalid API key; check E2B_API_KEY");
	ck_assert_int_eq(e.code, SBX_E_AUTH);
	ck_assert_int_eq(
	    e2b_api_error(404, "{\"code\":404,\"message\":\"sandbox not found\"}", 42, "kill", &e),
	    -ENOENT);
	ck_assert_int_eq(e.code, SBX_E_NOT_FOUND);
	ck_assert_int_eq(e2b_api_error(429, "", 0, "create", &e), -EAGAIN);
	ck_assert_int_eq(e2b_api_error(503, "", 0, "create", &e), -EAGAIN);
	ck_assert_int_eq(e2b_api_error(507, "", 0, "create", &e), -ENOSPC);
	ck_assert_int_eq(e2b_api_error(504, "", 0, "create", &e), -ETIMEDOUT);
	ck_assert_int_eq(e2b_api_error(502, "", 0, "create", &e), -ENOTCONN);
	ck_assert_int_eq(e2b_api_error(500, "not json", 8, "create", &e), -EIO);
	ck_assert_int_eq(e2b_api_error(400, "", 0, "create", &e), -EINVAL);
}
END_TEST

static const char *fake_env_key;
static const char *fake_getenv(const char *name)
{
	if (!strcmp(name, "E2B_API_KEY"))
		return fake_env_key;
	if (!strcmp(name, "E2B_SANDBOX_URL"))
		return "http://127.0.0.1:9/";
	if (!strcmp(name, "E2B_DOMAIN"))
		return "example.org";
	return NULL;
}

START_TEST(test_settings)
{
	struct e2b_settings s;
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_buf b = SBX_BUF_INIT;
	json_t *cfg;

	fake_env_key = NULL;
	ck_assert_int_eq(e2b_settings_load(&s, NULL, fake_getenv, &e), -EACCES);
	ck_assert_ptr_nonnull(strstr(e.msg, "E2B_API_KEY is not set"));
	ck_assert_int_eq(e.code, SBX_E_AUTH);

	fake_env_key = "e2b_secret";
	ck_assert_int_eq(e2b_settings_load(&s, NULL, fake_getenv, &e), 0);
	ck_assert_str_eq(s.api_url, "https://api.example.org");
	ck_assert_str_eq(s.sandbox_url, "http://127.0.0.1:9");
	e2b_envd_base(&b, &s, "abc", NULL);
	ck_assert_str_eq(b.buf, "http://127.0.0.1:9");
	sbx_buf_reset(&b);
	e2b_host(&b, &s, "abc", NULL, 3000);
	ck_assert_str_eq(b.buf, "https://3000-abc.example.org");
	e2b_settings_free(&s);

	cfg = json_pack("{s:s,s:s}", "apiUrl", "http://h:1", "domain", "e2b.app");
	ck_assert_int_eq(e2b_settings_load(&s, cfg, fake_getenv, &e), 0);
	ck_assert_str_eq(s.api_url, "http://h:1");
	free(s.sandbox_url);
	s.sandbox_url = NULL;
	sbx_buf_reset(&b);
	e2b_envd_base(&b, &s, "abc", NULL);
	ck_assert_str_eq(b.buf, "https://sandbox.e2b.app");
	sbx_buf_reset(&b);
	e2b_envd_base(&b, &s, "abc", "own.example");
	ck_assert_str_eq(b.buf, "https://49983-abc.own.example");
	sbx_buf_reset(&b);
	e2b_host(&b, &s, "abc", "own.example", 8080);
	ck_assert_str_eq(b.buf, "https://8080-abc.own.example");
	e2b_settings_free(&s);
	json_decref(cfg);

	cfg = json_pack("{s:s}", "apiUrl", "ftp://h");
	ck_assert_int_eq(e2b_settings_load(&s, cfg, fake_getenv, &e), -EINVAL);
	json_decref(cfg);

	/* deadlines: defaults, seconds (fractions too), duration strings */
	ck_assert_int_eq(e2b_settings_load(&s, NULL, fake_getenv, &e), 0);
	ck_assert_int_eq(s.request_ms, E2B_REQUEST_TIMEOUT_MS);
	ck_assert_int_eq(s.transfer_ms, E2B_TRANSFER_TIMEOUT_MS);
	ck_assert_int_eq(s.connect_ms, E2B_CONNECT_TIMEOUT_MS);
	e2b_settings_free(&s);
	cfg = json_pack("{s:i,s:f,s:s}", "requestTimeout", 3, "transferTimeout", 1.5,
			"connectTimeout", "2m");
	ck_assert_int_eq(e2b_settings_load(&s, cfg, fake_getenv, &e), 0);
	ck_assert_int_eq(s.request_ms, 3000);
	ck_assert_int_eq(s.transfer_ms, 1500);
	ck_assert_int_eq(s.connect_ms, 120000);
	e2b_settings_free(&s);
	json_decref(cfg);
	cfg = json_pack("{s:s}", "transferTimeout", "soon");
	ck_assert_int_eq(e2b_settings_load(&s, cfg, fake_getenv, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "providers.e2b.transferTimeout"));
	json_decref(cfg);
	cfg = json_pack("{s:i}", "requestTimeout", 0);
	ck_assert_int_eq(e2b_settings_load(&s, cfg, fake_getenv, &e), -EINVAL);
	json_decref(cfg);

	ck_assert(e2b_is_temp_name("/home/user/.sbxfs-0a1b2c3d~f.txt"));
	ck_assert(e2b_is_temp_name(".sbxfs-0a1b2c3d~x"));
	ck_assert(!e2b_is_temp_name("/home/user/.sbxfs-0a1b2c3d"));
	ck_assert(!e2b_is_temp_name("/home/user/.sbxfs-0a1b2c3x~f"));
	ck_assert(!e2b_is_temp_name("/home/.sbxfs-0a1b2c3d~f/g"));
	ck_assert(!e2b_is_temp_name("/home/user/f.txt"));
	sbx_buf_release(&b);
}
END_TEST

START_TEST(test_create_body)
{
	struct sbx_spec spec;
	json_t *b;
	char *s;
	sbx_spec_init(&spec);
	b = e2b_create_body(&spec, "work");
	s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	ck_assert_str_eq(s, "{\"autoPause\":true,\"metadata\":{\"sbxfs_lease\":\"work\"},"
			    "\"templateID\":\"base\",\"timeout\":3600}");
	free(s);
	json_decref(b);
	spec.template_name = strdup("code-interpreter-v1");
	spec.res.timeout_s = 120;
	json_object_set_new(spec.envs, "FOO", json_string("bar"));
	spec.network = strdup("none");
	b = e2b_create_body(&spec, "py");
	s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	ck_assert_str_eq(s, "{\"allow_internet_access\":false,\"autoPause\":true,"
			    "\"envVars\":{\"FOO\":\"bar\"},\"metadata\":{\"sbxfs_lease\":\"py\"},"
			    "\"templateID\":\"code-interpreter-v1\",\"timeout\":120}");
	free(s);
	json_decref(b);
	sbx_spec_free(&spec);
}
END_TEST

START_TEST(test_sandbox_parse)
{
	struct e2b_sandbox sb;
	struct sbx_error e = SBX_ERROR_INIT;
	json_t *j = json_loads("{\"sandboxID\":\"h9304dm05w1g1uh22rsh\",\"templateID\":\"base\","
			       "\"clientID\":\"x\",\"envdVersion\":\"0.6.13\","
			       "\"envdAccessToken\":\"tok\",\"trafficAccessToken\":null,"
			       "\"domain\":null,\"state\":\"paused\",\"cpuCount\":2}",
			       0, NULL);
	ck_assert_int_eq(e2b_sandbox_parse(j, &sb, &e), 0);
	ck_assert_str_eq(sb.id, "h9304dm05w1g1uh22rsh");
	ck_assert_str_eq(sb.access_token, "tok");
	ck_assert_ptr_null(sb.traffic_token);
	ck_assert_ptr_null(sb.domain);
	ck_assert_str_eq(sb.state, "paused");
	ck_assert_int_eq(sb.cpu_count, 2);
	e2b_sandbox_free(&sb);
	json_decref(j);
	j = json_loads("{\"templateID\":\"base\"}", 0, NULL);
	ck_assert_int_eq(e2b_sandbox_parse(j, &sb, &e), -EPROTO);
	json_decref(j);
}
END_TEST

/* --- protobuf JSON -------------------------------------------------------------- */

START_TEST(test_time)
{
	struct timespec ts;
	ck_assert_int_eq(e2b_parse_time("1970-01-01T00:00:10Z", &ts), 0);
	ck_assert_int_eq(ts.tv_sec, 10);
	ck_assert_int_eq(ts.tv_nsec, 0);
	ck_assert_int_eq(e2b_parse_time("2026-11-30T16:13:46.183Z", &ts), 0);
	ck_assert_int_eq(ts.tv_nsec, 183000000);
	ck_assert_int_eq(e2b_parse_time("2024-01-01T00:00:00.5Z", &ts), 0);
	ck_assert_int_eq(ts.tv_sec, 1704067200);
	ck_assert_int_eq(ts.tv_nsec, 500000000);
	ck_assert_int_eq(e2b_parse_time("2024-01-01T02:00:00+02:00", &ts), 0);
	ck_assert_int_eq(ts.tv_sec, 1704067200);
	ck_assert_int_eq(e2b_parse_time("2024-01-01 00:00:00", &ts), -EINVAL);
	ck_assert_int_eq(e2b_parse_time(NULL, &ts), -EINVAL);
}
END_TEST

START_TEST(test_entry_to_stat)
{
	struct sbx_stat st;
	struct sbx_rmeta_ids ids;
	json_t *j;

	sbx_rmeta_ids_init(&ids, NULL, NULL);
	sbx_rmeta_ids_parse(&ids,
			    "root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/bash\n"
			    "nobody:x:65534:65534:::\n\n" SBX_RMETA_IDS_SEP "\nroot:x:0:\n"
			    "user:x:1000:\nstaff:x:50:\n");
	j = json_loads("{\"name\":\"hello.txt\",\"type\":\"FILE_TYPE_FILE\","
		       "\"path\":\"/home/user/hello.txt\",\"size\":\"12\",\"mode\":420,"
		       "\"permissions\":\"-rw-r--r--\",\"owner\":\"user\",\"group\":\"user\","
		       "\"modifiedTime\":\"1970-01-01T00:01:00.25Z\"}",
		       0, NULL);
	ck_assert_int_eq(e2b_entry_to_stat(j, &ids, &st), 0);
	ck_assert_int_eq(st.mode, S_IFREG | 0644);
	ck_assert_int_eq(st.size, 12);
	ck_assert_int_eq(st.uid, 1000);
	ck_assert_int_eq(st.gid, 1000);
	ck_assert_int_eq(st.mtime.tv_sec, 60);
	ck_assert_int_eq(st.mtime.tv_nsec, 250000000);
	ck_assert_int_eq(st.nlink, 1);
	json_decref(j);

	/* size as a number, enum as a number, root owner */
	j = json_loads("{\"name\":\"d\",\"type\":2,\"size\":4096,\"mode\":493,\"owner\":\"root\","
		       "\"group\":\"0\"}",
		       0, NULL);
	ck_assert_int_eq(e2b_entry_to_stat(j, NULL, &st), 0);
	ck_assert_int_eq(st.mode, S_IFDIR | 0755);
	ck_assert_int_eq(st.size, 4096);
	ck_assert_int_eq(st.uid, 0);
	ck_assert_int_eq(st.nlink, 2);
	json_decref(j);

	/* a symlink: lstat view; missing size/mode are zero values */
	j = json_loads(
	    "{\"name\":\"l\",\"type\":\"FILE_TYPE_FILE\",\"symlinkTarget\":\"/etc/hosts\"}", 0,
	    NULL);
	ck_assert_int_eq(e2b_entry_to_stat(j, NULL, &st), 0);
	ck_assert_int_eq(st.mode, S_IFLNK | 0777);
	ck_assert_int_eq(st.size, 10);
	json_decref(j);

	j = json_loads("{\"name\":\"x\",\"type\":\"FILE_TYPE_UNSPECIFIED\"}", 0, NULL);
	ck_assert_int_eq(e2b_entry_to_stat(j, NULL, &st), -EINVAL);
	json_decref(j);

	/* permissions wins: a fifo (type UNSPECIFIED), owners by the sandbox's names */
	j = json_loads("{\"name\":\"p\",\"permissions\":\"prw-r-----\",\"mode\":416,"
		       "\"owner\":\"nobody\",\"group\":\"staff\"}",
		       0, NULL);
	ck_assert_int_eq(e2b_entry_to_stat(j, &ids, &st), 0);
	ck_assert_int_eq(st.mode, S_IFIFO | 0640);
	ck_assert_int_eq(st.uid, 65534);
	ck_assert_int_eq(st.gid, 50);
	json_decref(j);
	/* the sticky bit; a name the sandbox lacks is nobody, a number is itself */
	j = json_loads("{\"name\":\"tmp\",\"type\":2,\"permissions\":\"dtrwxrwxrwx\",\"mode\":511,"
		       "\"owner\":\"ghost\",\"group\":\"4321\"}",
		       0, NULL);
	ck_assert_int_eq(e2b_entry_to_stat(j, &ids, &st), 0);
	ck_assert_int_eq(st.mode, S_IFDIR | 01777);
	ck_assert_int_eq(st.uid, 65534);
	ck_assert_int_eq(st.gid, 4321);
	json_decref(j);
	/* a symlink as envd sends it: size is the text's length, type/mode the target's */
	j = json_loads("{\"name\":\"l\",\"type\":\"FILE_TYPE_FILE\",\"size\":\"3\",\"mode\":420,"
		       "\"permissions\":\"Lrwxrwxrwx\",\"symlinkTarget\":\"/home/user/abc\"}",
		       0, NULL);
	ck_assert_int_eq(e2b_entry_to_stat(j, &ids, &st), 0);
	ck_assert_int_eq(st.mode, S_IFLNK | 0777);
	ck_assert_int_eq(st.size, 3);
	json_decref(j);
	sbx_rmeta_ids_destroy(&ids);
}
END_TEST

/* The sandbox's name tables: read at the first name, not again within the retry time. */
static int ids_runs;
static int ids_run(void *ctx, const char *cmd, struct sbx_buf *out, struct sbx_error *err)
{
	(void)ctx;
	(void)err;
	ck_assert_str_eq(cmd, SBX_RMETA_IDS_CMD);
	ids_runs++;
	sbx_buf_adds(
	    out, "user:x:1001:1001::/home/user:/bin/sh\nbad line\nx::notanid:\n\n" SBX_RMETA_IDS_SEP
		 "\nuser:x:1001:\nwheel:x:10:user\n");
	return 0;
}

START_TEST(test_rmeta_ids)
{
	struct sbx_rmeta_ids ids;
	sbx_rmeta_ids_init(&ids, ids_run, NULL);
	ids_runs = 0;
	ck_assert_uint_eq(sbx_rmeta_id(&ids, "4321", false), 4321); /* a number: no command */
	ck_assert_uint_eq(sbx_rmeta_id(&ids, "root", false), 0);    /* nor root */
	ck_assert_uint_eq(sbx_rmeta_id(&ids, "root", true), 0);
	ck_assert_int_eq(ids_runs, 0);
	ck_assert_uint_eq(sbx_rmeta_id(&ids, "user", false), 1001);
	ck_assert_uint_eq(sbx_rmeta_id(&ids, "wheel", true), 10);
	ck_assert_uint_eq(sbx_rmeta_id(&ids, "wheel", false), 65534); /* a group, not a user */
	ck_assert_uint_eq(sbx_rmeta_id(&ids, "ghost", false), 65534);
	ck_assert_uint_eq(sbx_rmeta_id(&ids, "root", false), 0); /* not in the table: still 0 */
	ck_assert_int_eq(ids_runs, 1); /* unknown names within the retry time: no new read */
	sbx_rmeta_ids_destroy(&ids);
}
END_TEST

/* A prefetch reads the tables once, in the background; lookups then need no read. */
START_TEST(test_rmeta_ids_prefetch)
{
	struct sbx_rmeta_ids ids;
	sbx_rmeta_ids_init(&ids, ids_run, NULL);
	ids_runs = 0;
	sbx_rmeta_ids_prefetch(&ids);
	sbx_rmeta_ids_prefetch(&ids); /* once */
	sbx_rmeta_ids_wait(&ids);
	ck_assert_int_eq(ids_runs, 1);
	ck_assert_uint_eq(sbx_rmeta_id(&ids, "user", false), 1001);
	ck_assert_int_eq(ids_runs, 1);
	sbx_rmeta_ids_prefetch(&ids); /* read already: nothing */
	sbx_rmeta_ids_destroy(&ids);
	ck_assert_int_eq(ids_runs, 1);
}
END_TEST

/* Go's FileMode.String(): every type letter and the three special bits. */
START_TEST(test_gomode)
{
	static const struct {
		const char *s;
		mode_t m;
	} ok[] = {
	    {"-rw-r--r--", S_IFREG | 0644},    {"drwxr-xr-x", S_IFDIR | 0755},
	    {"dtrwxrwxrwx", S_IFDIR | 01777},  {"dgrwxr-xr-x", S_IFDIR | 02755},
	    {"Lrwxrwxrwx", S_IFLNK | 0777},    {"prw-r-----", S_IFIFO | 0640},
	    {"Srwxr-xr-x", S_IFSOCK | 0755},   {"Drw-rw----", S_IFBLK | 0660},
	    {"Dcrw-rw-rw-", S_IFCHR | 0666},   {"urwsr-xr-x", 0},
	    {"urwxr-xr-x", S_IFREG | 04755},   {"ugtrwxrwxrwx", S_IFREG | 07777},
	    {"Ducrw-------", S_IFCHR | 04600}, {"arw-------", S_IFREG | 0600},
	};
	mode_t m;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		if (!ok[i].m) { /* ls's letters are not Go's */
			ck_assert_int_eq(sbx_rmeta_gomode(ok[i].s, &m), -EINVAL);
			continue;
		}
		ck_assert_int_eq(sbx_rmeta_gomode(ok[i].s, &m), 0);
		ck_assert_msg(m == ok[i].m, "%s: %o", ok[i].s, (unsigned)m);
	}
	ck_assert_int_eq(sbx_rmeta_gomode("?rw-r--r--", &m), -EINVAL);
	ck_assert_int_eq(sbx_rmeta_gomode("rw-r--r--", &m), -EINVAL);
	ck_assert_int_eq(sbx_rmeta_gomode(NULL, &m), -EINVAL);
}
END_TEST

/* sbx_rmeta_run_fn: runs cmd with the shell ctx names, here; its stdout. */
static int shell_run(void *ctx, const char *cmd, struct sbx_buf *out, struct sbx_error *err)
{
	int fds[2];
	char b[4096];
	ssize_t n;
	(void)err;
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork();
	if (!pid) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl(ctx, ctx, "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	while ((n = read(fds[0], b, sizeof(b))) > 0)
		sbx_buf_add(out, b, (size_t)n);
	close(fds[0]);
	waitpid(pid, NULL, 0);
	return 0;
}

struct links_seen {
	char got[4096];
	int n;
};

static void link_seen(void *ctx, const char *name, const char *target)
{
	struct links_seen *s = ctx;
	size_t len = strlen(s->got);
	snprintf(s->got + len, sizeof(s->got) - len, "[%s>%s]", name, target);
	s->n++;
}

/* sbx_rmeta_run_fn: the answer ctx holds. */
static int canned_run(void *ctx, const char *cmd, struct sbx_buf *out, struct sbx_error *err)
{
	(void)cmd;
	(void)err;
	sbx_buf_adds(out, ctx);
	return 0;
}

/*
 * The readlinks command, run by dash and by bash on a real directory: every
 * link with its text (a newline in a name, a text that ends in newlines,
 * dot names, a dangling link, a link to a directory), nothing else (a file,
 * a directory); chatter before the answer is skipped; an answer that does
 * not parse, or none, is EIO, never a wrong text.
 */
START_TEST(test_rmeta_readlinks)
{
	char dir[] = "/tmp/sbx-links.XXXXXX", p[512];
	const char *shells[] = {"/bin/sh", "/bin/bash"};
	const char *links[][2] = {{"l", "abc"},
				  {"a\nb", "t\n\n"},
				  {".h", "/abs/x"},
				  {"..d", "y"},
				  {"d2", "sub"},
				  {"sp ace", "$(x) 'q'"},
				  {"n\xc3\xa4m\xc3\xa9", "tg\xc3\xa9\xe2\x86\x92x"}};
	const size_t nlinks = sizeof(links) / sizeof(links[0]);
	struct sbx_error err = SBX_ERROR_INIT;
	ck_assert_ptr_nonnull(mkdtemp(dir));
	for (size_t i = 0; i < nlinks; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, links[i][0]);
		ck_assert_int_eq(symlink(links[i][1], p), 0);
	}
	snprintf(p, sizeof(p), "%s/sub", dir);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/file", dir);
	fclose(fopen(p, "w"));
	/* A UTF-8 locale: lengths are still bytes (bash counts characters there). */
	setenv("LC_ALL", "C.UTF-8", 1);
	for (size_t i = 0; i < 2; i++) {
		struct links_seen seen = {{0}, 0};
		if (access(shells[i], X_OK))
			continue;
		ck_assert_int_eq(
		    sbx_rmeta_readlinks(shell_run, (void *)shells[i], dir, link_seen, &seen, &err),
		    0);
		ck_assert_msg(seen.n == (int)nlinks, "%s: %d links: %s", shells[i], seen.n,
			      seen.got);
		for (size_t j = 0; j < nlinks; j++) {
			snprintf(p, sizeof(p), "[%s>%s]", links[j][0], links[j][1]);
			ck_assert_msg(strstr(seen.got, p), "%s: %s not in %s", shells[i], p,
				      seen.got);
		}
	}
	/* A directory the shell cannot enter: no answer. */
	snprintf(p, sizeof(p), "%s/missing", dir);
	struct links_seen none = {{0}, 0};
	ck_assert_int_eq(sbx_rmeta_readlinks(shell_run, "/bin/sh", p, link_seen, &none, &err),
			 -EIO);
	/* Chatter first; then answers cut short or wrong (a '/' in a name, lengths past the end).
	 */
	struct links_seen one = {{0}, 0};
	ck_assert_int_eq(sbx_rmeta_readlinks(canned_run, "motd\n\n@sbxfs-links@\n1 2\nxab\n", "/d",
					     link_seen, &one, &err),
			 0);
	ck_assert_str_eq(one.got, "[x>ab]");
	const char *bad[] = {"\n@sbxfs-links@\n1 2\nxa",
			     "\n@sbxfs-links@\n1 1\n/a\n",
			     "\n@sbxfs-links@\n0 1\na\n",
			     "\n@sbxfs-links@\nx y\n",
			     "\n@sbxfs-links@\n1 99999999999999999999\nab\n",
			     "\n@sbxfs-links@\n2 1\n..x\n",
			     "\n@sbxfs-links@\n1 1\n.x\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct links_seen s = {{0}, 0};
		ck_assert_int_eq(
		    sbx_rmeta_readlinks(canned_run, (void *)bad[i], "/d", link_seen, &s, &err),
		    -EIO);
	}
	snprintf(p, sizeof(p), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(p), 0);
}
END_TEST

START_TEST(test_proc_events)
{
	struct e2b_proc_event ev;
	struct sbx_error e = SBX_ERROR_INIT;
	const char *s;
	e2b_proc_event_init(&ev);
	s = "{\"event\":{\"start\":{\"pid\":1002}}}";
	ck_assert_int_eq(e2b_proc_event_parse(s, strlen(s), &ev, &e), 0);
	ck_assert_int_eq(ev.kind, E2B_PROC_START);
	ck_assert_int_eq(ev.pid, 1002);
	s = "{\"event\":{\"data\":{\"stderr\":\"b29wcwo=\"}}}";
	ck_assert_int_eq(e2b_proc_event_parse(s, strlen(s), &ev, &e), 0);
	ck_assert_int_eq(ev.kind, E2B_PROC_DATA);
	ck_assert_int_eq(ev.stream, 2);
	ck_assert_str_eq(ev.data.buf, "oops\n");
	/* exitCode absent = 0 */
	s = "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}";
	ck_assert_int_eq(e2b_proc_event_parse(s, strlen(s), &ev, &e), 0);
	ck_assert_int_eq(ev.kind, E2B_PROC_END);
	ck_assert_int_eq(ev.exit_code, 0);
	s = "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 3\",\"exitCode\":3,"
	    "\"error\":\"exit status 3\"}}}";
	ck_assert_int_eq(e2b_proc_event_parse(s, strlen(s), &ev, &e), 0);
	ck_assert_int_eq(ev.exit_code, 3);
	s = "{\"event\":{\"end\":{\"exitCode\":-1,\"status\":\"signal: killed\"}}}";
	ck_assert_int_eq(e2b_proc_event_parse(s, strlen(s), &ev, &e), 0);
	ck_assert_int_eq(ev.exit_code, 137);
	s = "{\"event\":{\"end\":{\"exitCode\":-1,\"status\":\"signal: terminated\"}}}";
	ck_assert_int_eq(e2b_proc_event_parse(s, strlen(s), &ev, &e), 0);
	ck_assert_int_eq(ev.exit_code, 143);
	s = "{\"event\":{\"keepalive\":{}}}";
	ck_assert_int_eq(e2b_proc_event_parse(s, strlen(s), &ev, &e), 0);
	ck_assert_int_eq(ev.kind, E2B_PROC_KEEPALIVE);
	s = "{\"event\":{\"data\":{\"stdout\":\"!!\"}}}";
	ck_assert_int_eq(e2b_proc_event_parse(s, strlen(s), &ev, &e), -EPROTO);
	s = "{}";
	ck_assert_int_eq(e2b_proc_event_parse(s, strlen(s), &ev, &e), -EPROTO);
	e2b_proc_event_release(&ev);
}
END_TEST

START_TEST(test_start_body)
{
	const char *envs[] = {"A=1", "B=x=y", "bad", NULL};
	const char *argv[] = {"/usr/bin/env", "-0", NULL};
	json_t *b = e2b_start_body("echo 'hi'", NULL, envs, "/tmp");
	char *s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	ck_assert_str_eq(s, "{\"process\":{\"args\":[\"-l\",\"-c\",\"echo 'hi'\"],\"cmd\":\"/bin/"
			    "bash\",\"cwd\":\"/tmp\",\"envs\":{\"A\":\"1\",\"B\":\"x=y\"}},"
			    "\"stdin\":false}");
	free(s);
	json_decref(b);
	b = e2b_start_body(NULL, argv, NULL, NULL);
	s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	ck_assert_str_eq(s, "{\"process\":{\"args\":[\"-0\"],\"cmd\":\"/usr/bin/env\"},"
			    "\"stdin\":false}");
	free(s);
	json_decref(b);
}
END_TEST

START_TEST(test_watch_events)
{
	enum e2b_watch_kind k;
	char name[64];
	const char *s = "{\"start\":{}}";
	ck_assert_int_eq(e2b_watch_event_parse(s, strlen(s), &k, name, sizeof(name)), 0);
	ck_assert_int_eq(k, E2B_WATCH_START);
	s = "{\"filesystem\":{\"name\":\"sub/new.txt\",\"type\":\"EVENT_TYPE_CREATE\"}}";
	ck_assert_int_eq(e2b_watch_event_parse(s, strlen(s), &k, name, sizeof(name)), 0);
	ck_assert_int_eq(k, E2B_WATCH_EVENT);
	ck_assert_str_eq(name, "sub/new.txt");
	s = "{\"keepalive\":{}}";
	ck_assert_int_eq(e2b_watch_event_parse(s, strlen(s), &k, name, sizeof(name)), 0);
	ck_assert_int_eq(k, E2B_WATCH_KEEPALIVE);
	ck_assert_int_eq(e2b_watch_event_parse("[", 1, &k, name, sizeof(name)), -EPROTO);
}
END_TEST

/* --- metadata batch ---------------------------------------------------------- */

START_TEST(test_meta_render_times_before_1970)
{
	/* {-617716800, 250000000} is 1950-06-01 12:00:00.25: it was set as 11:59:59.75. */
	static const struct {
		struct timespec ts;
		const char *want;
	} cases[] = {
	    {{-617716800, 250000000}, "@-617716799.750000000"},
	    {{-1, 100000000}, "@-0.900000000"},
	    {{-1, 0}, "@-1.000000000"},
	    {{0, 5}, "@0.000000005"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sbx_rmq_queue q;
		struct sbx_buf b = SBX_BUF_INIT, want = SBX_BUF_INIT;
		struct sbx_rmq_op op = {.kind = SBX_RMQ_UTIMENS, .path = "/n"};
		op.ts[0] = op.ts[1] = cases[i].ts;
		sbx_rmq_init(&q);
		sbx_rmq_add(&q, &op);
		ck_assert_int_eq(sbx_rmq_render(&q, 0, &sbx_rmq_style_root, SBX_RMQ_SCRIPT_MAX, &b),
				 1);
		sbx_buf_addf(&want, "touch -h -c -d %s -- '/n' || sbx_f 0\n", cases[i].want);
		ck_assert_ptr_nonnull(strstr(b.buf, want.buf));
		sbx_rmq_clear(&q);
		sbx_buf_release(&b);
		sbx_buf_release(&want);
	}
}
END_TEST

START_TEST(test_meta_render)
{
	struct sbx_rmq_queue q;
	struct sbx_buf b = SBX_BUF_INIT;
	struct sbx_rmq_op op = {.kind = SBX_RMQ_CHMOD, .mode = 0100644};
	sbx_rmq_init(&q);
	op.path = "/a/it's";
	sbx_rmq_add(&q, &op);
	op.path = "/a/$(rm -rf ~)";
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_UTIMENS, .path = "/a/-x"};
	op.ts[0] = (struct timespec){1700000000, 5};
	op.ts[1] = (struct timespec){1700000000, 5};
	sbx_rmq_add(&q, &op);
	op.ts[0].tv_nsec = UTIME_OMIT;
	op.ts[1] = (struct timespec){12, 0};
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_SYMLINK, .path = "/a/l", .arg = "../t t"};
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_CHOWN, .path = "/a/f", .uid = 0, .gid = (gid_t)-1};
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_TRUNCATE, .path = "/a/f", .size = 5};
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_LINK, .path = "/a/h", .arg = "/a/f"};
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_MKNOD, .path = "/a/p", .mode = S_IFIFO | 0600};
	sbx_rmq_add(&q, &op);
	ck_assert_int_eq(sbx_rmq_render(&q, 0, &sbx_rmq_style_root, SBX_RMQ_SCRIPT_MAX, &b), 9);
	ck_assert_str_eq(
	    b.buf, "sbx_f() { echo @sbxfs-failed@$1 >&2; }\n"
		   "chmod 0644 -- '/a/it'\\''s' '/a/$(rm -rf ~)' || sbx_f 0-2\n"
		   "touch -h -c -d @1700000000.000000005 -- '/a/-x' || sbx_f 2\n"
		   "{ touch -h -c -m -d @12.000000000 -- '/a/-x'; } || sbx_f 3\n"
		   "{ { [ ! -e '/a/l' ] && [ ! -L '/a/l' ]; } || { echo '/a/l'': File exists' "
		   ">&2; false; }; } && ln -s -- '../t t' '/a/l' && chown -h user: -- '/a/l' "
		   "|| sbx_f 4\n"
		   "chown -h 0 -- '/a/f' || sbx_f 5\n"
		   "truncate -s 5 -- '/a/f' || sbx_f 6\n"
		   "{ { [ ! -e '/a/h' ] && [ ! -L '/a/h' ]; } || { echo '/a/h'': File exists' "
		   ">&2; false; }; } && ln -- '/a/f' '/a/h' || sbx_f 7\n"
		   "mkfifo -m 0600 -- '/a/p' && chown -h user: -- '/a/p' || sbx_f 8\n");
	ck_assert(sbx_rmq_touches(&q, "/a/f", false));
	ck_assert(sbx_rmq_touches(&q, "/a", false)); /* a listing of the parent */
	ck_assert(!sbx_rmq_touches(&q, "/", false));
	ck_assert(sbx_rmq_touches(&q, "/", true));
	ck_assert(!sbx_rmq_touches(&q, "/a/g", false));
	ck_assert(!sbx_rmq_touches(&q, "/a/ff", false));
	sbx_rmq_clear(&q);
	/* a new entry's owner for a caller who is not the mount's: the setgid dir's group */
	sbx_buf_reset(&b);
	op = (struct sbx_rmq_op){
	    .kind = SBX_RMQ_CHOWN, .path = "/d/n", .uid = 65534, .gid = 65533, .creator = true};
	sbx_rmq_add(&q, &op);
	sbx_rmq_add(&q, &op); /* never merged */
	ck_assert_int_eq(sbx_rmq_render(&q, 0, &sbx_rmq_style_root, SBX_RMQ_SCRIPT_MAX, &b), 2);
	ck_assert(strstr(b.buf, "chown -h 65534 -- '/d/n' && if [ -g '/d' ]; then chgrp -h "
				"\"$(stat -c %g -- '/d')\" -- '/d/n'; else chgrp -h 65533 -- "
				"'/d/n'; fi || sbx_f 0\n"));
	ck_assert(strstr(b.buf, "|| sbx_f 1\n"));
	ck_assert(!sbx_rmq_setgid_dir(&q, "/d/n"));
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_CHMOD, .path = "/d", .mode = 0755};
	sbx_rmq_add(&q, &op);
	ck_assert(!sbx_rmq_setgid_dir(&q, "/d/n"));
	op.mode = 02775;
	sbx_rmq_add(&q, &op);
	ck_assert(sbx_rmq_setgid_dir(&q, "/d/n"));
	ck_assert(!sbx_rmq_setgid_dir(&q, "/d"));
	ck_assert(!sbx_rmq_setgid_dir(&q, "/dd/n"));
	sbx_rmq_clear(&q);
	sbx_buf_release(&b);
}
END_TEST

/* tar x's chmod + utimens per file: one chmod per mode, one touch per time, each path's order kept.
 */
START_TEST(test_meta_gather)
{
	struct sbx_rmq_queue q;
	struct sbx_buf b = SBX_BUF_INIT;
	struct sbx_rmq_op op;
	static const char *const files[] = {"/t/a", "/t/b", "/t/c"};
	sbx_rmq_init(&q);
	for (int i = 0; i < 3; i++) {
		op = (struct sbx_rmq_op){
		    .kind = SBX_RMQ_CHMOD, .path = (char *)files[i], .mode = i == 1 ? 0755 : 0644};
		sbx_rmq_add(&q, &op);
		op = (struct sbx_rmq_op){.kind = SBX_RMQ_UTIMENS, .path = (char *)files[i]};
		op.ts[0] = op.ts[1] = (struct timespec){1700000000, 0};
		sbx_rmq_add(&q, &op);
	}
	/* /t/c's own chown after its times, then a chmod of /t/c that must stay after the chown */
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_CHOWN, .path = "/t/c", .uid = 0, .gid = 0};
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_CHMOD, .path = "/t/c", .mode = 04755};
	sbx_rmq_add(&q, &op);
	/* a time of the directory is not moved before an entry made in it */
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_SYMLINK, .path = "/t/l", .arg = "a"};
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_UTIMENS, .path = "/t"};
	op.ts[0] = op.ts[1] = (struct timespec){1700000000, 0};
	sbx_rmq_add(&q, &op);
	sbx_rmq_gather(&q);
	ck_assert_int_eq(q.n, 10);
	ck_assert_int_eq(sbx_rmq_render(&q, 0, &sbx_rmq_style_root, SBX_RMQ_SCRIPT_MAX, &b), 10);
	ck_assert_str_eq(
	    b.buf, "sbx_f() { echo @sbxfs-failed@$1 >&2; }\n"
		   "chmod 0644 -- '/t/a' '/t/c' || sbx_f 0-2\n"
		   "touch -h -c -d @1700000000.000000000 -- '/t/a' '/t/b' '/t/c' || sbx_f 2-5\n"
		   "chmod 0755 -- '/t/b' || sbx_f 5\n"
		   "chown -h 0:0 -- '/t/c' || sbx_f 6\n"
		   "chmod 4755 -- '/t/c' || sbx_f 7\n"
		   "{ { [ ! -e '/t/l' ] && [ ! -L '/t/l' ]; } || { echo '/t/l'': File exists' >&2; "
		   "false; }; } && ln -s -- 'a' '/t/l' && chown -h user: -- '/t/l' || sbx_f 8\n"
		   "touch -h -c -d @1700000000.000000000 -- '/t' || sbx_f 9\n");
	sbx_rmq_clear(&q);
	sbx_buf_release(&b);
}
END_TEST

START_TEST(test_meta_overlay)
{
	struct sbx_rmq_queue q;
	struct sbx_stat st = {.mode = S_IFREG | 0644, .uid = 1, .gid = 1, .size = 100};
	struct sbx_rmq_op op = {.kind = SBX_RMQ_CHMOD, .path = "/d/f", .mode = 0100700};
	sbx_rmq_init(&q);
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_CHOWN, .path = "/d/f", .uid = (uid_t)-1, .gid = 5};
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_UTIMENS, .path = "/d/f"};
	op.ts[0].tv_nsec = UTIME_OMIT;
	op.ts[1] = (struct timespec){77, 1};
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_TRUNCATE, .path = "/d/f", .size = 3};
	sbx_rmq_add(&q, &op);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_CHMOD, .path = "/d/g", .mode = 0};
	sbx_rmq_add(&q, &op);
	sbx_rmq_overlay(&q, "/d/f", &st);
	ck_assert_int_eq(st.mode, S_IFREG | 0700);
	ck_assert_int_eq(st.uid, 1);
	ck_assert_int_eq(st.gid, 5);
	ck_assert_int_eq(st.mtime.tv_sec, 77);
	ck_assert_int_eq(st.atime.tv_sec, 0);
	ck_assert_int_eq(st.size, 3);
	ck_assert(sbx_rmq_truncates(&q, "/d/f"));
	ck_assert(!sbx_rmq_creates(&q, "/d/f", false));
	ck_assert(!sbx_rmq_creates(&q, "/d", true));
	sbx_rmq_drop_truncates(&q, "/d/f");
	ck_assert(!sbx_rmq_truncates(&q, "/d/f"));
	ck_assert_int_eq(q.n, 4);
	op = (struct sbx_rmq_op){.kind = SBX_RMQ_SYMLINK, .path = "/d/l", .arg = "f"};
	sbx_rmq_add(&q, &op);
	ck_assert_str_eq(sbx_rmq_link_target(&q, "/d/l"), "f");
	ck_assert_ptr_null(sbx_rmq_link_target(&q, "/d/f"));
	ck_assert(sbx_rmq_creates(&q, "/d/l", false));
	ck_assert(sbx_rmq_creates(&q, "/d", true));
	ck_assert(!sbx_rmq_creates(&q, "/", true));
	sbx_rmq_clear(&q);
}
END_TEST

/* A batch's output: each mark blames the ops its command did that its message names. */
static const char *const attr_paths[] = {"/a/x", "/a/y", "/a/z", "/b/p"};
static void attr_op(void *ctx, size_t i, const char **name, const char **path)
{
	(void)ctx;
	*name = i < 3 ? "chmod" : "mknod";
	*path = attr_paths[i];
}

START_TEST(test_rmeta_attribute)
{
	struct sbx_rmeta_fails f;
	struct sbx_error e = SBX_ERROR_INIT;
	const char *out = "login chatter\n"
			  "chmod: cannot access '/a/y': No such file or directory\n"
			  "@sbxfs-failed@0-3\n"
			  "mknod: /b/p: Operation not permitted\n"
			  "@sbxfs-failed@3\n"
			  "@sbxfs-failed@9-10\n"; /* out of range: ignored */
	sbx_rmeta_fails_init(&f);
	ck_assert_int_eq(sbx_rmeta_attribute(&f, NULL, out, 0, 4, attr_op, NULL), 2);
	ck_assert_int_eq(sbx_rmeta_fail_take(&f, "/a/x", &e), 0); /* its chmod worked */
	/* the errno its message names */
	ck_assert_int_eq(sbx_rmeta_fail_take(&f, "/a/y", &e), -ENOENT);
	ck_assert(strstr(e.msg, "chmod /a/y failed in the sandbox: chmod: cannot access"));
	ck_assert_int_eq(sbx_rmeta_fail_take(&f, "/a/y", &e), 0); /* taken once */
	ck_assert_int_eq(sbx_rmeta_attribute(&f, NULL, out, 0, 4, attr_op, NULL), 2);
	ck_assert_int_eq(sbx_rmeta_fail_take(&f, "/b/p", &e), -EPERM);
	/* a removed path's failure concerns nobody */
	sbx_rmeta_fail_forget(&f, "/b");
	ck_assert_int_eq(sbx_rmeta_fail_take(&f, "/b/p", &e), 0);
	/* a mark whose message names none of its paths blames them all */
	ck_assert_int_eq(
	    sbx_rmeta_attribute(&f, NULL, "boom\n@sbxfs-failed@0-2\n", 0, 4, attr_op, NULL), 2);
	ck_assert_int_eq(sbx_rmeta_fail_take(&f, "/a/x", &e), -EIO);
	ck_assert(strstr(e.msg, "boom"));
	ck_assert_int_eq(sbx_rmeta_fail_take(&f, "/a/y", &e), -EIO);
	sbx_rmeta_fails_destroy(&f);
}
END_TEST

/*
 * A socket's command, run here by /bin/sh with PATH giving it python3,
 * only perl, or neither: a socket of the mode asked (a name too long for
 * sun_path too), a taken name EEXIST, no interpreter EOPNOTSUPP.
 */
static void mksock_op(void *ctx, size_t i, const char **name, const char **path)
{
	(void)i;
	*name = "mknod";
	*path = ctx;
}

/* Runs the socket command for path with PATH=dirs: the errno rmeta makes of its output. */
static int mksock_run(const char *dirs, const char *path, mode_t perm)
{
	struct sbx_buf b = SBX_BUF_INIT, cmd = SBX_BUF_INIT, out = SBX_BUF_INIT;
	struct sbx_rmeta_fails f;
	char chunk[4096];
	size_t n;
	int rc;
	FILE *p;
	sbx_rmeta_add_marker(&b, true);
	sbx_rmeta_add_mksock(&b, path, perm);
	sbx_rmeta_add_mark(&b, 0, 1);
	sbx_buf_addf(&cmd, "PATH=%s /bin/sh -c ", dirs);
	sbx_buf_add_shquoted(&cmd, b.buf);
	sbx_buf_adds(&cmd, " 2>&1");
	p = popen(cmd.buf, "r");
	ck_assert_ptr_nonnull(p);
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		sbx_buf_add(&out, chunk, n);
	pclose(p);
	sbx_rmeta_fails_init(&f);
	sbx_rmeta_attribute(&f, NULL, out.buf ? out.buf : "", 0, 1, mksock_op, (void *)path);
	rc = sbx_rmeta_fail_take(&f, path, NULL);
	sbx_rmeta_fails_destroy(&f);
	sbx_buf_release(&b);
	sbx_buf_release(&cmd);
	sbx_buf_release(&out);
	return rc;
}

START_TEST(test_rmeta_mksock)
{
	char dir[] = "/tmp/sbxfs-mksock-XXXXXX", path[700], bin[64], lng[200];
	struct stat st;
	const char *how[2] = {"/usr/bin:/bin", bin}; /* python3; perl alone */
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(bin, sizeof(bin), "%s/bin", dir);
	ck_assert_int_eq(mkdir(bin, 0755), 0);
	snprintf(path, sizeof(path), "%s/perl", bin);
	ck_assert_int_eq(symlink("/usr/bin/perl", path), 0);
	memset(lng, 'n', 150);
	lng[150] = '\0';
	for (int k = 0; k < 2; k++) {
		snprintf(path, sizeof(path), "%s/s%d", dir, k);
		ck_assert_int_eq(mksock_run(how[k], path, 0640), 0);
		ck_assert_int_eq(lstat(path, &st), 0);
		ck_assert(S_ISSOCK(st.st_mode));
		ck_assert_int_eq(st.st_mode & 07777, 0640);
		ck_assert_int_eq(mksock_run(how[k], path, 0640), -EEXIST);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s%d", dir, lng, k);
		ck_assert_int_eq(mksock_run(how[k], path, 0600), 0);
		ck_assert_int_eq(lstat(path, &st), 0);
		ck_assert(S_ISSOCK(st.st_mode));
		ck_assert_int_eq(st.st_mode & 07777, 0600);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/s", dir);
	ck_assert_int_eq(mksock_run("/nonexistent", path, 0644), -EOPNOTSUPP);
	ck_assert_int_eq(lstat(path, &st), -1);
	snprintf(path, sizeof(path), "%s/perl", bin);
	unlink(path);
	rmdir(bin);
	ck_assert_int_eq(rmdir(dir), 0); /* nothing left behind (no short-name socket) */
}
END_TEST

/* The gate: a second holder of a path waits for the first to leave. */
struct gate_arg {
	struct sbx_rmeta_gate *g;
	volatile int entered;
};
static void *gate_second(void *p)
{
	struct gate_arg *a = p;
	sbx_rmeta_gate_enter(a->g, "/x", NULL);
	a->entered = 1;
	sbx_rmeta_gate_leave(a->g, "/x", NULL);
	return NULL;
}

START_TEST(test_rmeta_gate)
{
	struct sbx_rmeta_gate g;
	struct gate_arg a = {.g = &g};
	pthread_t t;
	sbx_rmeta_gate_init(&g);
	sbx_rmeta_gate_enter(&g, "/y", "/x");
	ck_assert_int_eq(pthread_create(&t, NULL, gate_second, &a), 0);
	usleep(100 * 1000);
	ck_assert_int_eq(a.entered, 0);	      /* "/x" is held */
	sbx_rmeta_gate_enter(&g, "/z", "/z"); /* another path does not wait */
	sbx_rmeta_gate_leave(&g, "/z", "/z");
	sbx_rmeta_gate_leave(&g, "/y", "/x");
	pthread_join(t, NULL);
	ck_assert_int_eq(a.entered, 1);
	ck_assert_int_eq(g.n, 0);
	sbx_rmeta_gate_destroy(&g);
}
END_TEST

/* A thousand files' chmod + utimens: few scripts, none over the limit. */
START_TEST(test_meta_split)
{
	struct sbx_rmq_queue q, q2;
	struct sbx_buf b = SBX_BUF_INIT;
	char path[64];
	size_t first = 0, scripts = 0;
	sbx_rmq_init(&q);
	for (int i = 0; i < 1000; i++) {
		struct sbx_rmq_op op = {.kind = SBX_RMQ_CHMOD, .path = path, .mode = 0755};
		snprintf(path, sizeof(path), "/home/user/project/src/file-%04d.c", i);
		sbx_rmq_add(&q, &op);
		op.kind = SBX_RMQ_UTIMENS;
		op.ts[0] = op.ts[1] = (struct timespec){1700000000 + i, 0};
		sbx_rmq_add(&q, &op);
	}
	while (first < q.n) {
		sbx_buf_reset(&b);
		first = sbx_rmq_render(&q, first, &sbx_rmq_style_root, SBX_RMQ_SCRIPT_MAX, &b);
		ck_assert_int_le(b.len, SBX_RMQ_SCRIPT_MAX);
		scripts++;
	}
	ck_assert_int_eq(scripts, 2);
	/* take() moves everything */
	sbx_rmq_init(&q2);
	sbx_rmq_take(&q2, &q);
	ck_assert_int_eq(q2.n, 2000);
	ck_assert_int_eq(q.n, 0);
	sbx_rmq_clear(&q2);
	sbx_buf_release(&b);
}
END_TEST

/* --- several files per POST /files (bulkup.c) ------------------------------------ */

START_TEST(test_files_put_results)
{
	struct sbx_new_file f[3] = {{.path = "/home/user/a"},
				    {.path = "/home/user/d/\xc3\xbc"},
				    {.path = "/home/user/$(x)"}};
	struct sbx_new_file *pf[3] = {&f[0], &f[1], &f[2]};
	const char *all =
	    "[{\"name\":\"a\",\"type\":\"file\",\"path\":\"/home/user/a\"},"
	    "{\"name\":\"\xc3\xbc\",\"type\":\"file\",\"path\":\"/home/user/d/\xc3\xbc\"},"
	    "{\"name\":\"$(x)\",\"type\":\"file\",\"path\":\"/home/user/$(x)\"}]";
	e2b_files_put_results(all, strlen(all), pf, 3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(f[i].rc, 0);
	/* a reply listing fewer files than sent: the missing one failed, named */
	const char *few = "[{\"name\":\"$(x)\",\"type\":\"file\",\"path\":\"/home/user/$(x)\"},"
			  "{\"name\":\"a\",\"type\":\"file\",\"path\":\"/home/user/a\"}]";
	e2b_files_put_results(few, strlen(few), pf, 3);
	ck_assert_int_eq(f[0].rc, 0);
	ck_assert_int_eq(f[1].rc, -EIO);
	ck_assert_ptr_nonnull(strstr(f[1].err.msg, "/home/user/d/\xc3\xbc"));
	ck_assert_ptr_nonnull(strstr(f[1].err.msg, "not in the reply"));
	ck_assert_int_eq(f[2].rc, 0);
	/* not an array: nothing is known to be written */
	e2b_files_put_results("{\"path\":\"/home/user/a\"}", 23, pf, 3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(f[i].rc, -EIO);
	/* names a part's filename cannot carry as they are go alone */
	ck_assert(e2b_part_name_ok("/home/user/$(touch x) \xc3\xbc"));
	ck_assert(!e2b_part_name_ok("/home/user/q\"uote"));
	ck_assert(!e2b_part_name_ok("/home/user/new\nline"));
	ck_assert(!e2b_part_name_ok("/home/user/cr\r"));
	ck_assert(!e2b_part_name_ok("/home/user/back\\slash"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("e2b");
	TCase *tc = tcase_create("pure");
	SRunner *sr;
	int failed;
	tcase_add_test(tc, test_frame_encode);
	tcase_add_test(tc, test_files_put_results);
	tcase_add_test(tc, test_decode_split_packed);
	tcase_add_test(tc, test_decode_end_error);
	tcase_add_test(tc, test_decode_bad);
	tcase_add_test(tc, test_unary_errors);
	tcase_add_test(tc, test_api_errors);
	tcase_add_test(tc, test_settings);
	tcase_add_test(tc, test_create_body);
	tcase_add_test(tc, test_sandbox_parse);
	tcase_add_test(tc, test_time);
	tcase_add_test(tc, test_entry_to_stat);
	tcase_add_test(tc, test_gomode);
	tcase_add_test(tc, test_rmeta_readlinks);
	tcase_add_test(tc, test_rmeta_ids);
	tcase_add_test(tc, test_rmeta_ids_prefetch);
	tcase_add_test(tc, test_proc_events);
	tcase_add_test(tc, test_start_body);
	tcase_add_test(tc, test_watch_events);
	tcase_add_test(tc, test_meta_render);
	tcase_add_test(tc, test_meta_render_times_before_1970);
	tcase_add_test(tc, test_rmeta_attribute);
	tcase_add_test(tc, test_rmeta_gate);
	tcase_add_test(tc, test_meta_split);
	tcase_add_test(tc, test_meta_overlay);
	tcase_add_test(tc, test_meta_gather);
	suite_add_tcase(s, tc);
	tc = tcase_create("sh"); /* runs python3 and perl: slow on a loaded machine */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_rmeta_mksock);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
