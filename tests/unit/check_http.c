/*
 * check_http — unit tests for the pure parts of src/base/http.c: URL
 * escaping, query strings, header parsing, Retry-After, Content-Range,
 * retry delays and curl-error mapping. No network.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/http.h"

#include <curl/curl.h>

START_TEST(test_escape)
{
	struct sbx_buf b = SBX_BUF_INIT;
	sbx_http_add_escaped(&b, "/home/user/a b+c&d=é~._-");
	ck_assert_str_eq(b.buf, "%2Fhome%2Fuser%2Fa%20b%2Bc%26d%3D%C3%A9~._-");
	sbx_buf_release(&b);
}
END_TEST

START_TEST(test_query)
{
	struct sbx_buf b = SBX_BUF_INIT;
	sbx_buf_adds(&b, "http://h/files");
	sbx_http_add_query(&b, "path", "/tmp/a.txt");
	sbx_http_add_query(&b, "username", NULL);
	sbx_http_add_query(&b, "metadata", "k1=v1&k2=v 2");
	ck_assert_str_eq(b.buf, "http://h/files?path=%2Ftmp%2Fa.txt&metadata=k1%3Dv1%26k2%3Dv%202");
	sbx_buf_release(&b);
}
END_TEST

START_TEST(test_header_find)
{
	const char *blk = "Content-Type: application/json; charset=utf-8\r\n"
			  "x-next-token:   abc  \r\n"
			  "Retry-After: 3\r\n"
			  "Content-Typo: no\r\n";
	char out[64];
	ck_assert_int_eq(sbx_http_header_find(blk, strlen(blk), "content-type", out, sizeof(out)),
			 31);
	ck_assert_str_eq(out, "application/json; charset=utf-8");
	ck_assert_int_eq(sbx_http_header_find(blk, strlen(blk), "X-Next-Token", out, sizeof(out)),
			 3);
	ck_assert_str_eq(out, "abc");
	ck_assert_int_eq(sbx_http_header_find(blk, strlen(blk), "Content", out, sizeof(out)), -1);
	ck_assert_int_eq(sbx_http_header_find(blk, strlen(blk), "X-Missing", out, sizeof(out)), -1);
	/* truncated copy, full length returned */
	ck_assert_int_eq(sbx_http_header_find(blk, strlen(blk), "Content-Type", out, 5), 31);
	ck_assert_str_eq(out, "appl");
	/* last line without newline */
	ck_assert_int_eq(sbx_http_header_find("A: 1\r\nB: 22", 11, "b", out, sizeof(out)), 2);
	ck_assert_str_eq(out, "22");
}
END_TEST

START_TEST(test_status_line)
{
	ck_assert_int_eq(sbx_http_parse_status_line("HTTP/1.1 206 Partial Content\r\n", 30), 206);
	ck_assert_int_eq(sbx_http_parse_status_line("HTTP/2 200\r\n", 12), 200);
	ck_assert_int_eq(sbx_http_parse_status_line("HTTP/1.1 100 Continue\r\n", 23), 100);
	ck_assert_int_eq(sbx_http_parse_status_line("Content-Type: x\r\n", 17), -1);
	ck_assert_int_eq(sbx_http_parse_status_line("HTTP/1.1 20\r\n", 13), -1);
	ck_assert_int_eq(sbx_http_parse_status_line("HTTP/1.1 2000\r\n", 15), -1);
}
END_TEST

START_TEST(test_retry_after)
{
	ck_assert_int_eq(sbx_http_parse_retry_after("3"), 3);
	ck_assert_int_eq(sbx_http_parse_retry_after(" 120 "), 120);
	ck_assert_int_eq(sbx_http_parse_retry_after("0"), 0);
	ck_assert_int_eq(sbx_http_parse_retry_after("-1"), -1);
	ck_assert_int_eq(sbx_http_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), -1);
	ck_assert_int_eq(sbx_http_parse_retry_after("3x"), -1);
	ck_assert_int_eq(sbx_http_parse_retry_after(NULL), -1);
}
END_TEST

START_TEST(test_content_range)
{
	off_t a, b, t;
	ck_assert_int_eq(sbx_http_parse_content_range("bytes 0-99/1000", &a, &b, &t), 0);
	ck_assert_int_eq(a, 0);
	ck_assert_int_eq(b, 99);
	ck_assert_int_eq(t, 1000);
	ck_assert_int_eq(sbx_http_parse_content_range("bytes 5-9/*", &a, &b, &t), 0);
	ck_assert_int_eq(t, -1);
	ck_assert_int_eq(sbx_http_parse_content_range("bytes */1000", &a, &b, &t), -EINVAL);
	ck_assert_int_eq(sbx_http_parse_content_range("bytes 9-5/10", &a, &b, &t), -EINVAL);
	ck_assert_int_eq(sbx_http_parse_content_range("bytes 0-10/10", &a, &b, &t), -EINVAL);
	ck_assert_int_eq(sbx_http_parse_content_range("items 0-1/2", &a, &b, &t), -EINVAL);
}
END_TEST

/* A ranged GET's reply as the server sends it (206, or a 200 that ignored the Range). */
static int range_collect(void *ctx, const char *data, size_t len)
{
	sbx_buf_add((struct sbx_buf *)ctx, data, len);
	return 0;
}

static int range_feed(long status, off_t off, off_t len, const char *body, struct sbx_buf *out)
{
	struct sbx_http_range r;
	struct sbx_http_resp resp = {.status = status};
	int rc = 0;
	sbx_buf_reset(out);
	sbx_http_range_init(&r, off, len, range_collect, out);
	sbx_http_range_response(&r, &resp);
	for (const char *p = body; *p && !rc; p++) /* a byte at a time: pieces split anywhere */
		rc = sbx_http_range_write(&r, p, 1);
	ck_assert(!rc || (rc == -ECANCELED && r.done));
	return rc;
}

START_TEST(test_range)
{
	struct sbx_buf out = SBX_BUF_INIT;
	char hdr[96];
	ck_assert_ptr_null(sbx_http_range_header(hdr, sizeof(hdr), 0, -1));
	ck_assert_str_eq(sbx_http_range_header(hdr, sizeof(hdr), 5, 3), "Range: bytes=5-7");
	ck_assert_str_eq(sbx_http_range_header(hdr, sizeof(hdr), 5, -1), "Range: bytes=5-");
	/* 206: the server sliced */
	ck_assert_int_eq(range_feed(206, 5, 3, "fgh", &out), 0);
	ck_assert_str_eq(out.buf, "fgh");
	/* 200: the whole file; skipped to 5, stopped after 3 */
	ck_assert_int_eq(range_feed(200, 5, 3, "abcdefghijkl", &out), -ECANCELED);
	ck_assert_str_eq(out.buf, "fgh");
	ck_assert_int_eq(range_feed(200, 5, -1, "abcdefghijkl", &out), 0);
	ck_assert_str_eq(out.buf, "fghijkl");
	/* 200 shorter than the range: what there is */
	ck_assert_int_eq(range_feed(200, 10, 8, "abcdefghijkl", &out), 0);
	ck_assert_str_eq(out.buf, "kl");
	sbx_buf_release(&out);
}
END_TEST

START_TEST(test_content_type)
{
	ck_assert(sbx_http_content_type_is("application/json", "application/json"));
	ck_assert(sbx_http_content_type_is("Application/JSON; charset=utf-8", "application/json"));
	ck_assert(!sbx_http_content_type_is("application/connect+json", "application/json"));
	ck_assert(!sbx_http_content_type_is("application/jsonx", "application/json"));
	ck_assert(!sbx_http_content_type_is(NULL, "application/json"));
}
END_TEST

START_TEST(test_retry_delay)
{
	/* Retry-After wins and must fit the deadline. */
	ck_assert_int_eq(sbx_http_retry_delay_ms(0, 2, 10000, 0), 2000);
	ck_assert_int_eq(sbx_http_retry_delay_ms(0, 2, 1500, 0), -1);
	ck_assert_int_eq(sbx_http_retry_delay_ms(0, 0, 1500, 0), 0);
	ck_assert_int_eq(sbx_http_retry_delay_ms(0, SBX_HTTP_RETRY_AFTER_MAX_S + 1, -1, 0), -1);
	ck_assert_int_eq(sbx_http_retry_delay_ms(0, 5, -1, 0), 5000);
	/* Backoff: [base/2, base], base 250 doubling to 4000. */
	for (unsigned r = 0; r < 1000; r += 7) {
		for (int a = 0; a < 8; a++) {
			long base = 250L << a;
			long d = sbx_http_retry_delay_ms(a, -1, -1, r);
			if (base > 4000)
				base = 4000;
			ck_assert_int_ge(d, base / 2);
			ck_assert_int_le(d, base);
		}
	}
	ck_assert_int_eq(sbx_http_retry_delay_ms(0, -1, 100, 0), -1);
	ck_assert_int_eq(sbx_http_retry_delay_ms(0, -1, 1000, 0), 125);
	ck_assert_int_eq(sbx_http_retry_delay_ms(3, -1, 500, 0), -1);
}
END_TEST

START_TEST(test_curl_errors)
{
	struct sbx_error e = SBX_ERROR_INIT;
	ck_assert_int_eq(sbx_http_error_from_curl(CURLE_OPERATION_TIMEDOUT, "GET x", &e),
			 -ETIMEDOUT);
	ck_assert_int_eq(e.code, SBX_E_TIMEOUT);
	ck_assert_ptr_nonnull(strstr(e.msg, "GET x: "));
	ck_assert_int_eq(sbx_http_error_from_curl(CURLE_COULDNT_CONNECT, NULL, &e), -ENOTCONN);
	ck_assert_int_eq(e.code, SBX_E_CONNECTION_FAILED);
	ck_assert_int_eq(sbx_http_error_from_curl(CURLE_COULDNT_RESOLVE_HOST, NULL, &e), -ENOTCONN);
	ck_assert_int_eq(sbx_http_error_from_curl(CURLE_RECV_ERROR, NULL, &e), -ENOTCONN);
	ck_assert_int_eq(sbx_http_error_from_curl(CURLE_PEER_FAILED_VERIFICATION, NULL, &e),
			 -ECONNREFUSED);
	ck_assert_int_eq(e.code, SBX_E_CONNECTION_FAILED);
	ck_assert_int_eq(sbx_http_error_from_curl(CURLE_URL_MALFORMAT, NULL, &e), -EINVAL);
	ck_assert_int_eq(sbx_http_error_from_curl(CURLE_BAD_FUNCTION_ARGUMENT, NULL, &e), -EIO);
	ck_assert_int_eq(sbx_http_curl_retryable(CURLE_COULDNT_CONNECT), 1);
	ck_assert_int_eq(sbx_http_curl_retryable(CURLE_GOT_NOTHING), 2);
	ck_assert_int_eq(sbx_http_curl_retryable(CURLE_OPERATION_TIMEDOUT), 0);
}
END_TEST

/* A transport error path end to end: nothing listens on port 1. */
START_TEST(test_perform_refused)
{
	struct sbx_http_settings s = {.connect_timeout_ms = 2000, .max_attempts = 2};
	struct sbx_http_client *c = sbx_http_client_new(&s);
	struct sbx_http_req req = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	struct sbx_error e = SBX_ERROR_INIT;
	ck_assert_ptr_nonnull(c);
	sbx_http_resp_init(&resp);
	req.url = "http://127.0.0.1:1/x";
	req.timeout_ms = 5000;
	ck_assert_int_eq(sbx_http_perform(c, &req, &resp, &e), -ENOTCONN);
	ck_assert_int_eq(resp.attempts, 2);
	ck_assert_int_eq(resp.status, 0);
	req.url = "ftp://127.0.0.1/x";
	ck_assert_int_eq(sbx_http_perform(c, &req, &resp, &e), -EINVAL);
	sbx_http_resp_release(&resp);
	sbx_http_client_free(c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("http");
	TCase *tc = tcase_create("pure");
	SRunner *sr;
	int failed;
	tcase_add_test(tc, test_escape);
	tcase_add_test(tc, test_query);
	tcase_add_test(tc, test_header_find);
	tcase_add_test(tc, test_status_line);
	tcase_add_test(tc, test_retry_after);
	tcase_add_test(tc, test_content_range);
	tcase_add_test(tc, test_range);
	tcase_add_test(tc, test_content_type);
	tcase_add_test(tc, test_retry_delay);
	tcase_add_test(tc, test_curl_errors);
	tcase_add_test(tc, test_perform_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
