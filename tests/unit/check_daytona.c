/*
 * check_daytona — unit tests for providers/daytona/protocol.c and
 * multipart.c: FileInfo to sbx_stat, the bulk-download multipart reader,
 * DTO states, error bodies, the run wrapper (executed by /bin/sh here, so
 * the quoting is proven, not eyeballed), the create body and `df` output.
 * No network.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "daytona/protocol.h"
#include "daytona/daytona.h"

/* --- FileInfo ------------------------------------------------------------ */

static int fi(const char *json, struct sbx_stat *st, const char **name, json_t **keep)
{
	json_t *j = json_loads(json, 0, NULL);
	ck_assert_ptr_nonnull(j);
	int rc = dt_fileinfo_parse(j, st, name);
	*keep = j;
	return rc;
}

START_TEST(test_fileinfo_file)
{
	struct sbx_stat st;
	const char *name;
	json_t *j;
	ck_assert_int_eq(fi("{\"name\":\"hello.txt\",\"path\":\"/w/hello.txt\",\"size\":12,"
			    "\"mode\":\"-rw-r--r--\",\"permissions\":\"0644\","
			    "\"modTime\":\"2026-01-01 00:00:00 +0000 UTC\","
			    "\"modifiedAt\":\"2026-01-01T00:00:00Z\",\"isDir\":false,"
			    "\"owner\":\"1000\",\"group\":\"1001\"}",
			    &st, &name, &j),
			 0);
	ck_assert_str_eq(name, "hello.txt");
	ck_assert_int_eq(st.mode, S_IFREG | 0644);
	ck_assert_int_eq(st.size, 12);
	ck_assert_int_eq(st.nlink, 1);
	ck_assert_int_eq(st.uid, 1000);
	ck_assert_int_eq(st.gid, 1001);
	ck_assert_int_eq(st.mtime.tv_sec, 1767225600);
	ck_assert_int_eq(st.atime.tv_sec, 1767225600);
	json_decref(j);

	/* modTime's nanoseconds win when it names modifiedAt's second */
	ck_assert_int_eq(fi("{\"name\":\"a\",\"mode\":\"-rw-r--r--\","
			    "\"modTime\":\"2026-01-01 01:00:00.123456789 +0100 CET\","
			    "\"modifiedAt\":\"2026-01-01T00:00:00Z\"}",
			    &st, &name, &j),
			 0);
	ck_assert_int_eq(st.mtime.tv_sec, 1767225600);
	ck_assert_int_eq(st.mtime.tv_nsec, 123456789);
	json_decref(j);
	ck_assert_int_eq(fi("{\"name\":\"a\",\"mode\":\"-rw-r--r--\","
			    "\"modTime\":\"2026-01-01 00:00:07.5 +0000 UTC\","
			    "\"modifiedAt\":\"2026-01-01T00:00:00Z\"}",
			    &st, &name, &j),
			 0);
	ck_assert_int_eq(st.mtime.tv_sec, 1767225600);
	ck_assert_int_eq(st.mtime.tv_nsec, 0);
	json_decref(j);
}
END_TEST

START_TEST(test_fileinfo_dir_link_special)
{
	struct sbx_stat st;
	const char *name;
	json_t *j;
	ck_assert_int_eq(fi("{\"name\":\"src\",\"size\":4096,\"mode\":\"drwxr-xr-x\","
			    "\"permissions\":\"0755\",\"isDir\":true,\"owner\":\"root\","
			    "\"group\":\"daytona\",\"modifiedAt\":\"2026-01-01T02:00:00.5+02:00\"}",
			    &st, &name, &j),
			 0);
	ck_assert(S_ISDIR(st.mode));
	ck_assert_int_eq(st.mode & 07777, 0755);
	ck_assert_int_eq(st.nlink, 2);
	ck_assert_int_eq(st.uid, 0);
	ck_assert_int_eq(st.gid, 65534);
	ck_assert_int_eq(st.mtime.tv_sec, 1767225600);
	ck_assert_int_eq(st.mtime.tv_nsec, 500000000);
	json_decref(j);

	ck_assert_int_eq(fi("{\"name\":\"ln\",\"size\":7,\"mode\":\"Lrwxrwxrwx\","
			    "\"permissions\":\"0777\",\"isDir\":false}",
			    &st, &name, &j),
			 0);
	ck_assert(S_ISLNK(st.mode));
	ck_assert_int_eq(st.mode & 07777, 0777);
	json_decref(j);

	/* /tmp: directory + sticky; permissions only carries Perm(). */
	ck_assert_int_eq(fi("{\"name\":\"tmp\",\"mode\":\"dtrwxrwxrwx\",\"permissions\":\"0777\","
			    "\"isDir\":true}",
			    &st, &name, &j),
			 0);
	ck_assert_int_eq(st.mode, S_IFDIR | 01777);
	json_decref(j);

	ck_assert_int_eq(
	    fi("{\"name\":\"null\",\"mode\":\"Dcrw-rw-rw-\",\"isDir\":false}", &st, &name, &j), 0);
	ck_assert_int_eq(st.mode, S_IFCHR | 0666);
	json_decref(j);

	ck_assert_int_eq(fi("{\"name\":\"sda\",\"mode\":\"Drw-rw----\"}", &st, &name, &j), 0);
	ck_assert_int_eq(st.mode, S_IFBLK | 0660);
	json_decref(j);

	ck_assert_int_eq(fi("{\"name\":\"sudo\",\"mode\":\"urwxr-xr-x\",\"permissions\":\"0755\"}",
			    &st, &name, &j),
			 0);
	ck_assert_int_eq(st.mode, S_IFREG | 04755);
	json_decref(j);

	ck_assert_int_eq(fi("{\"name\":\"fifo\",\"mode\":\"prw-------\"}", &st, &name, &j), 0);
	ck_assert_int_eq(st.mode, S_IFIFO | 0600);
	json_decref(j);

	ck_assert_int_eq(fi("{\"name\":\"sock\",\"mode\":\"Srwxr-xr-x\"}", &st, &name, &j), 0);
	ck_assert_int_eq(st.mode, S_IFSOCK | 0755);
	json_decref(j);

	/* permissions alone (an old daemon without mode) */
	ck_assert_int_eq(
	    fi("{\"name\":\"d\",\"permissions\":\"0700\",\"isDir\":true}", &st, &name, &j), 0);
	ck_assert_int_eq(st.mode, S_IFDIR | 0700);
	json_decref(j);

	/* stat of "/" (name "/"): fine when the name is not wanted */
	j = json_loads("{\"name\":\"/\",\"mode\":\"drwxr-xr-x\",\"isDir\":true}", 0, NULL);
	ck_assert_int_eq(dt_fileinfo_parse(j, &st, NULL), 0);
	ck_assert_int_eq(st.mode, S_IFDIR | 0755);
	ck_assert_int_eq(dt_fileinfo_parse(j, &st, &name), -EIO);
	json_decref(j);

	/* unusable entries */
	ck_assert_int_eq(fi("{\"name\":\"x\"}", &st, &name, &j), -EIO);
	json_decref(j);
	ck_assert_int_eq(fi("{\"mode\":\"-rw-r--r--\"}", &st, &name, &j), -EIO);
	json_decref(j);
	ck_assert_int_eq(fi("{\"name\":\"a/b\",\"mode\":\"-rw-r--r--\"}", &st, &name, &j), -EIO);
	json_decref(j);
	ck_assert_int_eq(fi("{\"name\":\"x\",\"mode\":\"-rw-r--r-Q\"}", &st, &name, &j), -EIO);
	json_decref(j);
}
END_TEST

START_TEST(test_time_owner)
{
	struct timespec ts;
	ck_assert_int_eq(dt_time_parse("1970-01-01T00:00:10Z", &ts), 0);
	ck_assert_int_eq(ts.tv_sec, 10);
	ck_assert_int_eq(dt_time_parse("1970-01-01T01:00:10.123456789+01:00", &ts), 0);
	ck_assert_int_eq(ts.tv_sec, 10);
	ck_assert_int_eq(ts.tv_nsec, 123456789);
	ck_assert_int_eq(dt_time_parse("1970-01-01T00:00:10-00:30", &ts), 0);
	ck_assert_int_eq(ts.tv_sec, 1810);
	ck_assert_int_eq(dt_time_parse("1970-01-01 01:00:10.5 +0100 CET", &ts), 0);
	ck_assert_int_eq(ts.tv_sec, 10);
	ck_assert_int_eq(ts.tv_nsec, 500000000);
	ck_assert_int_eq(dt_time_parse("1970-01-01 00:00:10 +0000 UTC", &ts), 0);
	ck_assert_int_eq(ts.tv_sec, 10);
	ck_assert_int_eq(dt_time_parse("1970-01-01 00:00:10 UTC", &ts), -EINVAL);
	ck_assert_int_eq(dt_time_parse("yesterday", &ts), -EINVAL);
	ck_assert_int_eq(dt_time_parse(NULL, &ts), -EINVAL);
	ck_assert_uint_eq(dt_owner_parse("0"), 0);
	ck_assert_uint_eq(dt_owner_parse("1000"), 1000);
	ck_assert_uint_eq(dt_owner_parse("root"), 0);
	ck_assert_uint_eq(dt_owner_parse("daytona"), 65534);
	ck_assert_uint_eq(dt_owner_parse("12x"), 65534);
}
END_TEST

/* --- multipart ------------------------------------------------------------ */

struct sink {
	struct sbx_buf b;
	int fail_after; /* >0: fail once this many bytes were taken */
};

static int sink_fn(void *ctx, const char *p, size_t n)
{
	struct sink *s = ctx;
	sbx_buf_add(&s->b, p, n);
	if (s->fail_after && s->b.len >= (size_t)s->fail_after)
		return -ENOSPC;
	return 0;
}

#define CT "multipart/form-data; boundary=DAYTONA-FILE-BOUNDARY"

static const char one_file[] =
    "--DAYTONA-FILE-BOUNDARY\r\n"
    "Content-Disposition: form-data; name=\"file\"; filename=\"/home/daytona/a.txt\"; "
    "filename*=utf-8''%2Fhome%2Fdaytona%2Fa.txt\r\n"
    "Content-Length: 12\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "\r\n"
    "hello\nworld\n\r\n"
    "--DAYTONA-FILE-BOUNDARY--\r\n";

/* Feeds body in chunks of `chunk` bytes; returns finish's result. */
static int download(const char *ct, const char *path, const char *body, size_t len, size_t chunk,
		    long long off, long long want, struct sink *s, struct sbx_error *err)
{
	struct dt_download d;
	int rc = dt_download_init(&d, ct, path, off, want, sink_fn, s, err);
	for (size_t i = 0; !rc && i < len; i += chunk) {
		size_t n = len - i < chunk ? len - i : chunk;
		rc = dt_download_feed(&d, body + i, n);
	}
	if (rc == DT_DOWNLOAD_DONE || rc == 0)
		rc = dt_download_finish(&d);
	dt_download_release(&d);
	return rc;
}

START_TEST(test_multipart_one_file)
{
	struct sink s = {SBX_BUF_INIT, 0};
	struct sbx_error err = SBX_ERROR_INIT;
	ck_assert_int_eq(
	    download(CT, "/home/daytona/a.txt", one_file, strlen(one_file), 4096, 0, -1, &s, &err),
	    0);
	ck_assert_str_eq(s.b.buf, "hello\nworld\n");
	sbx_buf_release(&s.b);

	/* a quoted boundary, no preamble CRLF confusion, and a range */
	ck_assert_int_eq(download("multipart/form-data; boundary=\"DAYTONA-FILE-BOUNDARY\"",
				  "/home/daytona/a.txt", one_file, strlen(one_file), 4096, 2, 5, &s,
				  &err),
			 0);
	ck_assert_str_eq(s.b.buf, "llo\nw");
	sbx_buf_release(&s.b);

	/* empty range: nothing needed */
	ck_assert_int_eq(
	    download(CT, "/home/daytona/a.txt", one_file, strlen(one_file), 4096, 0, 0, &s, &err),
	    0);
	ck_assert_int_eq(s.b.len, 0);
}
END_TEST

START_TEST(test_multipart_split_everywhere)
{
	/* Every chunk size, so every split point of delimiter and headers. */
	for (size_t chunk = 1; chunk <= strlen(one_file); chunk++) {
		struct sink s = {SBX_BUF_INIT, 0};
		struct sbx_error err = SBX_ERROR_INIT;
		ck_assert_int_eq(download(CT, "/home/daytona/a.txt", one_file, strlen(one_file),
					  chunk, 0, -1, &s, &err),
				 0);
		ck_assert_str_eq(s.b.buf, "hello\nworld\n");
		sbx_buf_release(&s.b);
	}
}
END_TEST

START_TEST(test_multipart_error_part)
{
	static const char body[] =
	    "--DAYTONA-FILE-BOUNDARY\r\n"
	    "Content-Disposition: form-data; name=\"error\"; filename=\"/missing\"; "
	    "filename*=utf-8''%2Fmissing\r\n"
	    "Content-Type: application/json; charset=utf-8\r\n"
	    "\r\n"
	    "{\"statusCode\":404,\"message\":\"file not found: /missing\","
	    "\"code\":\"FILE_NOT_FOUND\",\"timestamp\":\"x\",\"path\":\"/missing\","
	    "\"method\":\"POST\"}\r\n"
	    "--DAYTONA-FILE-BOUNDARY--\r\n";
	for (size_t chunk = 1; chunk <= sizeof(body); chunk += 7) {
		struct sink s = {SBX_BUF_INIT, 0};
		struct sbx_error err = SBX_ERROR_INIT;
		ck_assert_int_eq(
		    download(CT, "/missing", body, strlen(body), chunk, 0, -1, &s, &err), -ENOENT);
		ck_assert_str_eq(err.msg, "read /missing: file not found: /missing");
		ck_assert_int_eq(s.b.len, 0);
	}
	/* a directory: INVALID_FILE_PATH */
	static const char dir[] = "--B\r\nContent-Disposition: form-data; name=\"error\"; "
				  "filename=\"/tmp\"\r\n\r\n"
				  "{\"statusCode\":400,\"message\":\"is a directory\","
				  "\"code\":\"INVALID_FILE_PATH\"}\r\n--B--\r\n";
	struct sink s = {SBX_BUF_INIT, 0};
	struct sbx_error err = SBX_ERROR_INIT;
	ck_assert_int_eq(download("multipart/form-data; boundary=B", "/tmp", dir, strlen(dir), 9, 0,
				  -1, &s, &err),
			 -EINVAL);
}
END_TEST

START_TEST(test_multipart_binary)
{
	/* Data full of CRLF, dashes and a near-miss of the delimiter. */
	static const char data[] = "\r\n--DAYTONA-FILE-BOUNDAR\r\n\r\n--\0\xff\r\n-\r";
	size_t dlen = sizeof(data) - 1;
	struct sbx_buf body = SBX_BUF_INIT;
	sbx_buf_adds(&body, "preamble to ignore\r\n--DAYTONA-FILE-BOUNDARY  \r\n"
			    "content-disposition: form-data; name=file; filename=\"/b\\\"in\"\r\n"
			    "\r\n");
	sbx_buf_add(&body, data, dlen);
	sbx_buf_adds(&body, "\r\n--DAYTONA-FILE-BOUNDARY--\r\nepilogue");
	for (size_t chunk = 1; chunk <= body.len; chunk++) {
		struct sink s = {SBX_BUF_INIT, 0};
		struct sbx_error err = SBX_ERROR_INIT;
		ck_assert_int_eq(download(CT, "/b\"in", body.buf, body.len, chunk, 0, -1, &s, &err),
				 0);
		ck_assert_int_eq(s.b.len, dlen);
		ck_assert(!memcmp(s.b.buf, data, dlen));
		sbx_buf_release(&s.b);
	}
	sbx_buf_release(&body);
}
END_TEST

START_TEST(test_multipart_counted)
{
	/* The file holds the daemon's own delimiter: only Content-Length saves it. */
	static const char data[] =
	    "a\r\n--DAYTONA-FILE-BOUNDARY\r\nb\r\n--DAYTONA-FILE-BOUNDARY--\r\n";
	size_t dlen = sizeof(data) - 1;
	struct sbx_buf body = SBX_BUF_INIT;
	sbx_buf_addf(&body,
		     "--DAYTONA-FILE-BOUNDARY\r\n"
		     "Content-Disposition: form-data; name=\"file\"; filename=\"/x\"\r\n"
		     "Content-Length: %zu\r\n\r\n",
		     dlen);
	sbx_buf_add(&body, data, dlen);
	sbx_buf_adds(&body, "\r\n--DAYTONA-FILE-BOUNDARY--\r\n");
	for (size_t chunk = 1; chunk <= body.len; chunk++) {
		struct sink s = {SBX_BUF_INIT, 0};
		struct sbx_error err = SBX_ERROR_INIT;
		ck_assert_int_eq(download(CT, "/x", body.buf, body.len, chunk, 0, -1, &s, &err), 0);
		ck_assert_int_eq(s.b.len, dlen);
		ck_assert(!memcmp(s.b.buf, data, dlen));
		sbx_buf_release(&s.b);
	}
	sbx_buf_release(&body);
}
END_TEST

START_TEST(test_multipart_bad)
{
	struct sink s = {SBX_BUF_INIT, 0};
	struct sbx_error err = SBX_ERROR_INIT;
	/* filename must equal the requested path */
	ck_assert_int_eq(
	    download(CT, "/home/daytona/b.txt", one_file, strlen(one_file), 100, 0, -1, &s, &err),
	    -EIO);
	ck_assert(strstr(err.msg, "another path"));
	/* cut short */
	ck_assert_int_eq(download(CT, "/home/daytona/a.txt", one_file, strlen(one_file) - 30, 100,
				  0, -1, &s, &err),
			 -EIO);
	sbx_buf_release(&s.b);
	/* not multipart */
	ck_assert_int_eq(download("application/json", "/a", "{}", 2, 2, 0, -1, &s, &err), -EIO);
	/* no part at all */
	ck_assert_int_eq(
	    download(CT, "/a", "--DAYTONA-FILE-BOUNDARY--\r\n", 27, 5, 0, -1, &s, &err), -EIO);
	ck_assert(strstr(err.msg, "no file part"));
	/* the sink refuses */
	s.fail_after = 3;
	ck_assert_int_eq(
	    download(CT, "/home/daytona/a.txt", one_file, strlen(one_file), 4096, 0, -1, &s, &err),
	    -ENOSPC);
	sbx_buf_release(&s.b);
	/* garbage after a delimiter */
	static const char junk[] = "--X\r\n\r\nab\r\n--Xjunk";
	ck_assert_int_eq(download("multipart/form-data; boundary=X", "/a", junk, strlen(junk), 3, 0,
				  -1, &s, &err),
			 -EIO);
	sbx_buf_release(&s.b);

	char b[8];
	ck_assert_int_eq(dt_boundary_parse("multipart/form-data", b, sizeof(b)), -EPROTO);
	ck_assert_int_eq(dt_boundary_parse("multipart/form-data; boundary=123456789", b, sizeof(b)),
			 -EPROTO);
	ck_assert_int_eq(dt_boundary_parse("multipart/form-data; boundary=abc; x=y", b, sizeof(b)),
			 0);
	ck_assert_str_eq(b, "abc");
}
END_TEST

/* --- DTO ------------------------------------------------------------------ */

START_TEST(test_dto)
{
	struct dt_sandbox sb;
	struct sbx_error err = SBX_ERROR_INIT;
	json_t *j = json_loads(
	    "{\"id\":\"sbx-1\",\"organizationId\":\"org\",\"name\":\"n\",\"user\":\"daytona\","
	    "\"env\":{},\"labels\":{\"code-toolbox-language\":\"typescript\"},\"public\":false,"
	    "\"target\":\"us\",\"cpu\":2,\"gpu\":0,\"memory\":4,\"disk\":8,\"snapshot\":\"snap\","
	    "\"state\":\"build_failed\",\"errorReason\":\"boom\","
	    "\"toolboxProxyUrl\":\"http://127.0.0.1:9/toolbox/\"}",
	    0, NULL);
	ck_assert_int_eq(dt_sandbox_parse(j, &sb, &err), 0);
	ck_assert_str_eq(sb.id, "sbx-1");
	ck_assert_str_eq(sb.state, "build_failed");
	ck_assert_str_eq(sb.error_reason, "boom");
	ck_assert_str_eq(sb.toolbox_url, "http://127.0.0.1:9/toolbox");
	ck_assert_str_eq(sb.language, "typescript");
	ck_assert_str_eq(sb.target, "us");
	ck_assert(sb.cpu == 2 && sb.memory_gib == 4 && sb.disk_gib == 8);
	ck_assert_int_eq(dt_state_phase(sb.state), DT_PHASE_FAILED);
	json_decref(j);

	j = json_loads("{\"state\":\"started\"}", 0, NULL);
	ck_assert_int_eq(dt_sandbox_parse(j, &sb, &err), -EIO);
	json_decref(j);

	ck_assert_int_eq(dt_state_phase("started"), DT_PHASE_STARTED);
	ck_assert_int_eq(dt_state_phase("stopped"), DT_PHASE_STOPPED);
	ck_assert_int_eq(dt_state_phase("archived"), DT_PHASE_STOPPED);
	ck_assert_int_eq(dt_state_phase("paused"), DT_PHASE_STOPPED);
	ck_assert_int_eq(dt_state_phase("destroyed"), DT_PHASE_GONE);
	ck_assert_int_eq(dt_state_phase("destroying"), DT_PHASE_GONE);
	ck_assert_int_eq(dt_state_phase("error"), DT_PHASE_FAILED);
	ck_assert_int_eq(dt_state_phase("creating"), DT_PHASE_BUSY);
	ck_assert_int_eq(dt_state_phase("pulling_snapshot"), DT_PHASE_BUSY);
	ck_assert_int_eq(dt_state_phase("stopping"), DT_PHASE_BUSY);
	ck_assert_int_eq(dt_state_phase("warping"), DT_PHASE_UNKNOWN);
	ck_assert_int_eq(dt_state_phase(NULL), DT_PHASE_UNKNOWN);
}
END_TEST

static int page_line(void *ctx, const struct sbx_sandbox_entry *sb)
{
	sbx_buf_addf(ctx, "%s %s %s %s %s;", sb->id, sb->state, sb->lease ? sb->lease : "-",
		     sb->template_name ? sb->template_name : "-",
		     sb->created_at ? sb->created_at : "-");
	return 0;
}

START_TEST(test_list_page)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_buf b = SBX_BUF_INIT;
	char cursor[16] = "old";
	json_t *j = json_loads(
	    "{\"items\":[{\"id\":\"s1\",\"state\":\"started\",\"snapshot\":\"snap\","
	    "\"labels\":{\"sbxfs-lease\":\"work\"},\"createdAt\":\"2025-01-02T03:04:05Z\"},"
	    "{\"id\":\"s2\",\"state\":\"archived\"},{\"state\":\"started\"},"
	    "{\"id\":\"s3\",\"state\":\"destroying\"},{\"id\":\"s4\",\"state\":\"creating\"}],"
	    "\"nextCursor\":\"100\"}",
	    0, NULL);
	ck_assert_int_eq(dt_sandbox_page(j, page_line, &b, cursor, sizeof(cursor), &err), 0);
	ck_assert_str_eq(b.buf, "s1 running work snap 2025-01-02T03:04:05Z;s2 paused - - -;"
				"s3 gone - - -;s4 creating - - -;");
	ck_assert_str_eq(cursor, "100");
	json_decref(j);
	/* the last page: a null cursor */
	j = json_loads("{\"items\":[],\"nextCursor\":null}", 0, NULL);
	ck_assert_int_eq(dt_sandbox_page(j, page_line, &b, cursor, sizeof(cursor), &err), 0);
	ck_assert_str_eq(cursor, "");
	json_decref(j);
	/* the OSS server's plain array is not the cursor form */
	j = json_loads("[{\"id\":\"s1\"}]", 0, NULL);
	ck_assert_int_eq(dt_sandbox_page(j, page_line, &b, cursor, sizeof(cursor), &err), -EIO);
	json_decref(j);
	sbx_buf_release(&b);
}
END_TEST

START_TEST(test_create_body)
{
	struct sbx_spec spec;
	char *s;
	json_t *b;
	sbx_spec_init(&spec);
	spec.template_name = strdup("python:3.12-slim");
	spec.res.cpu = 1500;
	spec.res.memory_mb = 1000;
	spec.res.disk_mb = 3072;
	spec.language = strdup("typescript");
	json_object_set_new(spec.envs, "FOO", json_string("bar"));
	b = dt_create_body(&spec, "work", "us", 25);
	s = json_dumps(b, JSON_SORT_KEYS | JSON_COMPACT);
	ck_assert_str_eq(s, "{\"autoStopInterval\":25,\"buildInfo\":{\"dockerfileContent\":"
			    "\"FROM python:3.12-slim\\n\"},\"cpu\":2,\"disk\":3,\"env\":{\"FOO\":"
			    "\"bar\"},\"labels\":{\"code-toolbox-language\":\"typescript\","
			    "\"sbxfs-lease\":\"work\"},\"memory\":1,\"target\":\"us\"}");
	free(s);
	json_decref(b);

	/* a snapshot: no resources, no target; no network */
	free(spec.template_name);
	spec.template_name = strdup("daytona-small");
	spec.network = strdup("none");
	b = dt_create_body(&spec, "w", NULL, -1);
	s = json_dumps(b, JSON_SORT_KEYS | JSON_COMPACT);
	ck_assert_str_eq(s, "{\"env\":{\"FOO\":\"bar\"},\"labels\":{\"code-toolbox-language\":"
			    "\"typescript\",\"sbxfs-lease\":\"w\"},\"networkBlockAll\":true,"
			    "\"snapshot\":\"daytona-small\"}");
	free(s);
	json_decref(b);
	sbx_spec_free(&spec);

	ck_assert_int_eq(dt_auto_stop_minutes(0), 0);
	ck_assert_int_eq(dt_auto_stop_minutes(600), 25);
	ck_assert_int_eq(dt_auto_stop_minutes(61), 17);
}
END_TEST

/* --- errors ---------------------------------------------------------------- */

static int map(long status, const char *body, struct sbx_error *err)
{
	return dt_error_from_reply(status, body, body ? strlen(body) : 0, "get sbx-1", err);
}

START_TEST(test_error_bodies)
{
	struct sbx_error err = SBX_ERROR_INIT;
	ck_assert_int_eq(
	    map(404,
		"{\"path\":\"/api/sandbox/nope\",\"timestamp\":\"2026-06-01T12:00:00.000Z\","
		"\"statusCode\":404,\"error\":\"Not Found\",\"message\":\"Sandbox with ID or "
		"name nope not found\"}",
		&err),
	    -ENOENT);
	ck_assert_str_eq(err.msg, "get sbx-1: Sandbox with ID or name nope not found");
	ck_assert_int_eq(err.code, SBX_E_NOT_FOUND);

	/* NestJS validation: message is an array */
	ck_assert_int_eq(map(400,
			     "{\"statusCode\":400,\"message\":[\"cpu must be an integer\","
			     "\"memory must not be less than 1\"],\"error\":\"Bad Request\"}",
			     &err),
			 -EINVAL);
	ck_assert_str_eq(err.msg,
			 "get sbx-1: cpu must be an integer; memory must not be less than 1");

	/* daemon ErrorResponse: the code decides, not the status */
	ck_assert_int_eq(map(400,
			     "{\"statusCode\":400,\"message\":\"nope\",\"code\":\"FILE_NOT_FOUND\","
			     "\"source\":\"DAYTONA_DAEMON\"}",
			     &err),
			 -ENOENT);
	ck_assert_int_eq(map(408,
			     "{\"statusCode\":408,\"message\":\"request timeout: command execution "
			     "timeout\",\"code\":\"REQUEST_TIMEOUT\"}",
			     &err),
			 -ETIMEDOUT);
	ck_assert_int_eq(err.code, SBX_E_TIMEOUT);
	ck_assert_int_eq(map(403, "{\"message\":\"denied\",\"code\":\"FILE_ACCESS_DENIED\"}", &err),
			 -EACCES);
	ck_assert_int_eq(map(409, "{\"message\":\"exists\"}", &err), -EEXIST);
	ck_assert_int_eq(map(401, "{\"message\":\"Unauthorized\",\"statusCode\":401}", &err),
			 -EACCES);
	ck_assert_int_eq(map(429, "{\"message\":\"ThrottlerException: Too Many Requests\"}", &err),
			 -EAGAIN);
	ck_assert_int_eq(map(500, "{\"message\":\"boom\"}", &err), -EIO);
	ck_assert_int_eq(err.code, SBX_E_INTERNAL);
	ck_assert_int_eq(map(502, NULL, &err), -ENOTCONN);
	ck_assert_int_eq(err.code, SBX_E_CONNECTION_FAILED);
	/* the proxy speaking for a sandbox that is not running */
	ck_assert_int_eq(
	    map(400, "{\"message\":\"sandbox is not started\",\"source\":\"DAYTONA_PROXY\"}", &err),
	    -ENOTCONN);

	/* the proxy knows no such sandbox: unreachable (not "no such file"), code NOT_FOUND */
	ck_assert_int_eq(map(404,
			     "{\"statusCode\":404,\"message\":\"sandbox x not found\","
			     "\"code\":\"SANDBOX_NOT_FOUND\",\"source\":\"DAYTONA_PROXY\"}",
			     &err),
			 -ENOTCONN);
	ck_assert_int_eq(err.code, SBX_E_NOT_FOUND);
	ck_assert_int_eq(
	    map(404, "{\"message\":\"no sandbox\",\"source\":\"DAYTONA_PROXY\"}", &err), -ENOTCONN);

	/* empty and non-JSON bodies */
	ck_assert_int_eq(map(404, "", &err), -ENOENT);
	ck_assert_str_eq(err.msg, "get sbx-1: HTTP 404");
	ck_assert_int_eq(map(404, NULL, &err), -ENOENT);
	ck_assert_int_eq(map(503, "<html>\n<body>Service Unavailable</body>", &err), -ENOTCONN);
	ck_assert_str_eq(err.msg, "get sbx-1: <html>");
	/* `error` when there is no message */
	ck_assert_int_eq(map(418, "{\"error\":\"teapot\"}", &err), -EIO);
	ck_assert_str_eq(err.msg, "get sbx-1: teapot");
	ck_assert_int_eq(dt_error_from_reply(404, "{\"message\":\"x\"}", 15, NULL, &err), -ENOENT);
	ck_assert_str_eq(err.msg, "x");
}
END_TEST

/* --- sessions ---------------------------------------------------------------- */

START_TEST(test_session_json)
{
	bool done;
	int code = -1;
	struct dt_logs l;
	const char *cmd = "{\"id\":\"c1\",\"command\":\"x\"}";
	ck_assert_int_eq(dt_command_parse(cmd, strlen(cmd), &done, &code), 0);
	ck_assert(!done);
	cmd = "{\"id\":\"c1\",\"command\":\"x\",\"exitCode\":3}";
	ck_assert_int_eq(dt_command_parse(cmd, strlen(cmd), &done, &code), 0);
	ck_assert(done);
	ck_assert_int_eq(code, 3);
	ck_assert_int_eq(dt_command_parse("<", 1, &done, &code), -EPROTO);

	const char *logs = "{\"output\":\"\\u0001\\u0001\\u0001a\\u0002\\u0002\\u0002b\","
			   "\"stdout\":\"a\\u0000z\",\"stderr\":\"b\"}";
	ck_assert_int_eq(dt_logs_parse(logs, strlen(logs), &l), 0);
	ck_assert_int_eq(l.out_len, 3);
	ck_assert(!memcmp(l.out, "a\0z", 3));
	ck_assert_int_eq(l.err_len, 1);
	dt_logs_release(&l);
	/* plain text from an old daemon: combined into stdout */
	ck_assert_int_eq(dt_logs_parse("plain\n", 6, &l), 0);
	ck_assert_int_eq(l.out_len, 6);
	ck_assert_int_eq(l.err_len, 0);
	dt_logs_release(&l);
}
END_TEST

/* --- the command wrapper, run by a real /bin/sh ------------------------------ */

/* Runs sh -c TEXT; returns the exit status, stdout in *out. */
static int sh(const char *text, struct sbx_buf *out)
{
	int pfd[2], status;
	char buf[512];
	ssize_t n;
	pid_t pid;
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0); /* no other thread's child holds it */
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (!pid) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		execl("/bin/sh", "sh", "-c", text, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while ((n = read(pfd[0], buf, sizeof(buf))) > 0)
		sbx_buf_add(out, buf, (size_t)n);
	close(pfd[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

START_TEST(test_wrap_quoting)
{
	struct sbx_buf cmd = SBX_BUF_INIT, out = SBX_BUF_INIT;
	char dir[] = "/tmp/sbx dt 'q' $x-XXXXXX";
	const char *envs[] = {"A=it's \"quoted\" $HOME `x`", "B=line1\nline2", "C=", NULL};
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct dt_wrap w = {.shell = "printf '%s|%s|%s|' \"$A\" \"$B\" \"$C\"; pwd; "
				     "read x && echo read-something; exit 7",
			    .cwd = dir,
			    .envs = envs};
	ck_assert_int_eq(dt_wrap_command(&cmd, &w), 0);
	/* A session shell's own state must not change: cd stays in the subshell. */
	sbx_buf_adds(&cmd, "; echo \"rc=$?\"; pwd");
	ck_assert_int_eq(sh(cmd.buf, &out), 0);
	struct sbx_buf want = SBX_BUF_INIT;
	char cwd[4096];
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	sbx_buf_addf(&want, "it's \"quoted\" $HOME `x`|line1\nline2||%s\nrc=7\n%s\n", dir, cwd);
	ck_assert_str_eq(out.buf, want.buf);
	rmdir(dir);

	/* argv form, no cwd, no envs */
	const char *argv[] = {"printf", "%s;", "a b", "it's", NULL};
	struct dt_wrap w2 = {.argv = argv};
	sbx_buf_reset(&cmd);
	sbx_buf_reset(&out);
	ck_assert_int_eq(dt_wrap_command(&cmd, &w2), 0);
	ck_assert_int_eq(sh(cmd.buf, &out), 0);
	ck_assert_str_eq(out.buf, "a b;it's;");

	/* a missing cwd fails the run, not the shell */
	struct dt_wrap w3 = {.shell = "echo never", .cwd = "/nonexistent/dir"};
	sbx_buf_reset(&cmd);
	sbx_buf_reset(&out);
	ck_assert_int_eq(dt_wrap_command(&cmd, &w3), 0);
	ck_assert_int_eq(sh(cmd.buf, &out), 1);
	ck_assert_str_eq(out.buf, "");

	/* bad env entries */
	const char *bad1[] = {"NOEQUALS", NULL}, *bad2[] = {"1X=y", NULL},
		   *bad3[] = {"A-B=y", NULL};
	struct dt_wrap wb = {.shell = "true", .envs = bad1};
	sbx_buf_reset(&cmd);
	ck_assert_int_eq(dt_wrap_command(&cmd, &wb), -EINVAL);
	ck_assert_int_eq(cmd.len, 0);
	wb.envs = bad2;
	ck_assert_int_eq(dt_wrap_command(&cmd, &wb), -EINVAL);
	wb.envs = bad3;
	ck_assert_int_eq(dt_wrap_command(&cmd, &wb), -EINVAL);
	sbx_buf_release(&cmd);
	sbx_buf_release(&out);
	sbx_buf_release(&want);
}
END_TEST

struct sh_job {
	const char *text;
	struct sbx_buf out;
	int status;
};

static void *sh_job_main(void *arg)
{
	struct sh_job *j = arg;
	j->status = sh(j->text, &j->out);
	return NULL;
}

START_TEST(test_wrap_pidfile_kill)
{
	/* A "session shell" with a background job, then a run that is killed. */
	char pidfile[] = "/tmp/sbx-dt-pid-XXXXXX", bgfile[] = "/tmp/sbx-dt-bg-XXXXXX";
	char mark[] = "/tmp/sbx-dt-mark-XXXXXX";
	struct sbx_buf cmd = SBX_BUF_INIT, text = SBX_BUF_INIT, out = SBX_BUF_INIT,
		       bg = SBX_BUF_INIT;
	struct sh_job job = {.out = SBX_BUF_INIT};
	struct stat st;
	pthread_t t;
	close(mkstemp(pidfile));
	close(mkstemp(bgfile));
	close(mkstemp(mark));
	unlink(mark);
	sbx_buf_addf(&text, "echo started > %s; sleep 30; echo never", mark);
	struct dt_wrap w = {.shell = text.buf, .pidfile = pidfile, .token = "0123abcd"};
	ck_assert_int_eq(dt_wrap_command(&cmd, &w), 0);
	sbx_buf_reset(&text);
	sbx_buf_addf(&text,
		     "exec 2>/dev/null; sleep 31 >/dev/null 2>&1 & echo $! > %s; %s; echo rc=$?",
		     bgfile, cmd.buf);
	job.text = text.buf;
	ck_assert_int_eq(pthread_create(&t, NULL, sh_job_main, &job), 0);
	for (int i = 0; i < 200 && stat(mark, &st) < 0; i++)
		usleep(25 * 1000);
	ck_assert_int_eq(stat(mark, &st), 0); /* the run is under way (its pid file written) */
	/* A wrong token (a pid file left by an earlier run) kills nothing. */
	sbx_buf_reset(&cmd);
	dt_kill_command(&cmd, pidfile, "ffff");
	ck_assert_int_ne(sh(cmd.buf, &out), 0);
	sbx_buf_reset(&cmd);
	dt_kill_command(&cmd, pidfile, "0123abcd");
	ck_assert_int_eq(sh(cmd.buf, &out), 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(job.status, 0);
	ck_assert_str_eq(job.out.buf, "rc=137\n"); /* the run's group died, "never" never came */
	/* The session's background job lives on. */
	ck_assert_int_eq(sbx_read_file(bgfile, &bg, 64), 0);
	pid_t bgpid = (pid_t)atoi(bg.buf);
	ck_assert_int_gt(bgpid, 0);
	ck_assert_int_eq(kill(bgpid, 0), 0);
	kill(bgpid, SIGKILL);
	unlink(pidfile);
	unlink(bgfile);
	unlink(mark);
	sbx_buf_release(&cmd);
	sbx_buf_release(&text);
	sbx_buf_release(&out);
	sbx_buf_release(&bg);
	sbx_buf_release(&job.out);
}
END_TEST

START_TEST(test_wrap_signal_death_quiet)
{
	/* The run's stderr is the run's: no shell's "Killed" report of the wrapper in it. */
	struct sbx_buf cmd = SBX_BUF_INIT, text = SBX_BUF_INIT, out = SBX_BUF_INIT;
	struct dt_wrap w = {.shell = "echo err >&2; kill -9 $$"};
	ck_assert_int_eq(dt_wrap_command(&cmd, &w), 0);
	sbx_buf_addf(&text, "exec 2>&1; %s; echo \"rc=$?\"", cmd.buf);
	ck_assert_int_eq(sh(text.buf, &out), 0);
	ck_assert_str_eq(out.buf, "err\nrc=137\n");
	sbx_buf_release(&cmd);
	sbx_buf_release(&text);
	sbx_buf_release(&out);
}
END_TEST

START_TEST(test_wrap_timeout)
{
	struct sbx_buf cmd = SBX_BUF_INIT, out = SBX_BUF_INIT;
	struct dt_wrap w = {.shell = "echo start; sleep 5 & sleep 5; echo never",
			    .timeout_ms = 300};
	if (system("command -v timeout >/dev/null 2>&1") != 0)
		return; /* the wrapper then runs without a limit: nothing to prove */
	ck_assert_int_eq(dt_wrap_command(&cmd, &w), 0);
	time_t t0 = time(NULL);
	ck_assert_int_eq(sh(cmd.buf, &out), 137);
	ck_assert_int_le(time(NULL) - t0, 3); /* the background sleep died too (pipe closed) */
	ck_assert_str_eq(out.buf, "start\n");
	sbx_buf_release(&cmd);
	sbx_buf_release(&out);
}
END_TEST

/* --- bulk-upload replies (dt_bulk_upload_results) ------------------------------- */

static void new_files(struct sbx_new_file *f, const char *const *paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		f[i] = (struct sbx_new_file){.path = paths[i], .fd = -1, .err = SBX_ERROR_INIT};
}

START_TEST(test_bulk_upload_results)
{
	static const char *const p[] = {"/w/a", "/w/d/b", "/w/c\"q\nx"};
	struct sbx_new_file f[3];
	/* 200: every file listed */
	const char *all =
	    "{\"files\":[{\"path\":\"/w/a\",\"bytes\":1},{\"path\":\"/w/d/b\",\"bytes\":2},"
	    "{\"path\":\"/w/c\\\"q\\nx\",\"bytes\":3}]}";
	new_files(f, p, 3);
	dt_bulk_upload_results(200, all, strlen(all), f, 3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(f[i].rc, 0);
	/* 400: one refused (the fake's {path, error}), the others written */
	const char *one =
	    "{\"errors\":[{\"path\":\"/w/d/b\",\"error\":\"mkdir /w/d: not a directory\"}],"
	    "\"files\":[{\"path\":\"/w/a\",\"bytes\":1},{\"path\":\"/w/c\\\"q\\nx\"}]}";
	new_files(f, p, 3);
	dt_bulk_upload_results(400, one, strlen(one), f, 3);
	ck_assert_int_eq(f[0].rc, 0);
	ck_assert_int_eq(f[1].rc, -ENOTDIR);
	ck_assert_ptr_nonnull(strstr(f[1].err.msg, "/w/d/b"));
	ck_assert_ptr_nonnull(strstr(f[1].err.msg, "not a directory"));
	ck_assert_int_eq(f[2].rc, 0);
	/* an error as a "PATH: why" string */
	const char *str = "{\"errors\":[\"/w/a: open /w/a: permission denied\"],"
			  "\"files\":[{\"path\":\"/w/d/b\"},{\"path\":\"/w/c\\\"q\\nx\"}]}";
	new_files(f, p, 3);
	dt_bulk_upload_results(400, str, strlen(str), f, 3);
	ck_assert_int_eq(f[0].rc, -EACCES);
	ck_assert_int_eq(f[1].rc, 0);
	ck_assert_int_eq(f[2].rc, 0);
	/* a reply listing fewer files than sent: the missing one failed */
	const char *few = "{\"files\":[{\"path\":\"/w/a\"},{\"path\":\"/w/c\\\"q\\nx\"}]}";
	new_files(f, p, 3);
	dt_bulk_upload_results(200, few, strlen(few), f, 3);
	ck_assert_int_eq(f[0].rc, 0);
	ck_assert_int_eq(f[1].rc, -EIO);
	ck_assert_ptr_nonnull(strstr(f[1].err.msg, "not in the reply"));
	ck_assert_int_eq(f[2].rc, 0);
	/* no JSON at all: every file failed */
	new_files(f, p, 3);
	dt_bulk_upload_results(400, "oops", 4, f, 3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(f[i].rc, -EIO);
}
END_TEST

/* --- the symlink table (batch.c) --------------------------------------------- */

static bool is_link(struct dt_instance *di, const char *path, const char *want_target)
{
	char t[64] = "";
	struct sbx_stat st = {0};
	if (!dt_link_lookup(di, path, &st, t, sizeof(t)))
		return false;
	ck_assert(S_ISLNK(st.mode));
	ck_assert_int_eq(st.size, (off_t)strlen(want_target));
	ck_assert_str_eq(t, want_target);
	return true;
}

/*
 * It held 32 links, dropping one (not the oldest) per new link past that:
 * fsstress's tree then had links the mount showed as their targets, and
 * dangling ones rm could not find. Now thousands, the oldest dropped
 * first, and renames of a directory carry every link below it.
 */
START_TEST(test_link_table)
{
	struct dt_instance di = {.user_uid = -1, .user_gid = -1};
	char p[64], t[64];
	pthread_mutex_init(&di.lock, NULL);
	for (int i = 0; i < 1000; i++) {
		snprintf(p, sizeof(p), "/a/d%d/l%d", i % 10, i);
		snprintf(t, sizeof(t), "t%d", i);
		dt_links_add(&di, p, t, false);
	}
	ck_assert(is_link(&di, "/a/d0/l0", "t0"));
	ck_assert(is_link(&di, "/a/d9/l999", "t999"));
	ck_assert(!dt_link_lookup(&di, "/a/d0", NULL, NULL, 0));
	/* a directory renamed: every link below it moves, the rest stay */
	dt_links_rename(&di, "/a/d1", "/b");
	ck_assert(!dt_link_lookup(&di, "/a/d1/l1", NULL, NULL, 0));
	ck_assert(is_link(&di, "/b/l1", "t1"));
	ck_assert(is_link(&di, "/b/l991", "t991"));
	ck_assert(is_link(&di, "/a/d2/l2", "t2"));
	/* exchanged: each side's links are the other's */
	dt_links_exchange(&di, "/b", "/a/d3");
	ck_assert(is_link(&di, "/a/d3/l1", "t1"));
	ck_assert(is_link(&di, "/b/l3", "t3"));
	ck_assert(!dt_link_lookup(&di, "/b/l1", NULL, NULL, 0));
	/* a name like a directory's but longer is not below it */
	dt_links_add(&di, "/a/d33", "x", false);
	dt_links_forget(&di, "/a/d3");
	ck_assert(!dt_link_lookup(&di, "/a/d3/l1", NULL, NULL, 0));
	ck_assert(is_link(&di, "/a/d33", "x"));
	/* the same path again: one entry, the new target */
	dt_links_add(&di, "/a/d33", "yy", false);
	ck_assert(is_link(&di, "/a/d33", "yy"));
	/* doubted after a run: not looked up until checked */
	dt_links_doubt(&di);
	ck_assert(!dt_link_lookup(&di, "/a/d33", NULL, NULL, 0));
	ck_assert(dt_link_doubted(&di, "/a/d33"));
	struct sbx_stat ls = {.mode = S_IFLNK | 0777, .size = 2, .uid = 7};
	dt_link_check(&di, "/a/d33", &ls);
	ck_assert(is_link(&di, "/a/d33", "yy"));
	ls.size = 5; /* another text: another link */
	dt_links_doubt(&di);
	dt_link_check(&di, "/a/d33", &ls);
	ck_assert(!dt_link_doubted(&di, "/a/d33"));
	ck_assert(!dt_link_lookup(&di, "/a/d33", NULL, NULL, 0));
	/* read by readlink while doubted (after a run): what lutimes noted stays */
	dt_links_add(&di, "/a/r", "old", false);
	struct timespec ts[2] = {{.tv_sec = 1000}, {.tv_sec = 2000}};
	dt_link_note(&di, "/a/r", -1, -1, ts);
	dt_links_doubt(&di);
	dt_links_add(&di, "/a/r", "new", true);
	ck_assert(dt_link_doubted(&di, "/a/r"));
	struct sbx_stat rs = {.mode = S_IFLNK | 0777, .size = 3, .mtime = {.tv_sec = 2000}};
	dt_link_check(&di, "/a/r", &rs);
	ck_assert(is_link(&di, "/a/r", "new"));
	struct sbx_stat got = {0};
	dt_link_lookup(&di, "/a/r", &got, NULL, 0);
	ck_assert_int_eq(got.atime.tv_sec, 1000);
	/* a link first met by readlink is doubted until its listing is seen */
	dt_links_add(&di, "/a/s", "t", true);
	ck_assert(!dt_link_lookup(&di, "/a/s", NULL, NULL, 0));
	ck_assert(dt_link_doubted(&di, "/a/s"));
	/* full: the oldest go first */
	dt_links_clear(&di);
	ck_assert(!dt_links_any(&di));
	for (int i = 0; i < DT_LINKS_MAX + 5; i++) {
		snprintf(p, sizeof(p), "/f/l%d", i);
		dt_links_add(&di, p, "t", false);
	}
	ck_assert_uint_eq(HASH_COUNT(di.links), DT_LINKS_MAX);
	ck_assert(!dt_link_lookup(&di, "/f/l4", NULL, NULL, 0));
	ck_assert(dt_link_lookup(&di, "/f/l5", NULL, NULL, 0));
	snprintf(p, sizeof(p), "/f/l%d", DT_LINKS_MAX + 4);
	ck_assert(dt_link_lookup(&di, p, NULL, NULL, 0));
	dt_links_clear(&di);
	ck_assert_uint_eq(di.links_bytes, 0);
	pthread_mutex_destroy(&di.lock);
}
END_TEST

static Suite *daytona_suite(void)
{
	Suite *s = suite_create("daytona");
	TCase *tc = tcase_create("protocol");
	tcase_add_test(tc, test_fileinfo_file);
	tcase_add_test(tc, test_bulk_upload_results);
	tcase_add_test(tc, test_fileinfo_dir_link_special);
	tcase_add_test(tc, test_time_owner);
	tcase_add_test(tc, test_multipart_one_file);
	tcase_add_test(tc, test_multipart_split_everywhere);
	tcase_add_test(tc, test_multipart_error_part);
	tcase_add_test(tc, test_multipart_binary);
	tcase_add_test(tc, test_multipart_counted);
	tcase_add_test(tc, test_multipart_bad);
	tcase_add_test(tc, test_dto);
	tcase_add_test(tc, test_list_page);
	tcase_add_test(tc, test_create_body);
	tcase_add_test(tc, test_error_bodies);
	tcase_add_test(tc, test_session_json);
	tcase_add_test(tc, test_wrap_quoting);
	tcase_add_test(tc, test_wrap_pidfile_kill);
	tcase_add_test(tc, test_wrap_signal_death_quiet);
	tcase_add_test(tc, test_wrap_timeout);
	tcase_add_test(tc, test_link_table);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(daytona_suite());
	int failed;
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
