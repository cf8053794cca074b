/*
 * check_code_events — unit tests of kernel/events: the NDJSON event
 * stream of a code execution (E2B /execute shapes) into an
 * sbx_code_result, with streams going to the sink as they come.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/events.h"

struct capture {
	struct sbx_buf out, err;
	int calls;
	int fail; /* return this from the sink when non-zero */
};

static int cap_output(void *ctx, enum sbx_stream s, const char *data, size_t len)
{
	struct capture *c = ctx;
	c->calls++;
	if (c->fail)
		return c->fail;
	sbx_buf_add(s == SBX_STDERR ? &c->err : &c->out, data, len);
	return 0;
}

/* A parse with its capture; fed whole by feed_all. */
struct fixture {
	struct capture cap;
	struct sbx_run_sink sink;
	struct sbx_code_result res;
	struct sbx_code_events ev;
	struct sbx_error err;
};

static void fx_init(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	sbx_buf_init(&f->cap.out);
	sbx_buf_init(&f->cap.err);
	f->sink = (struct sbx_run_sink){&f->cap, cap_output};
	f->err = (struct sbx_error)SBX_ERROR_INIT;
	sbx_code_events_init(&f->ev, &f->sink, &f->res);
}

static void fx_free(struct fixture *f)
{
	sbx_code_events_release(&f->ev);
	sbx_code_result_free(&f->res);
	sbx_buf_release(&f->cap.out);
	sbx_buf_release(&f->cap.err);
}

/* Feeds text in pieces of `step` bytes (0: whole). */
static int feed(struct fixture *f, const char *text, size_t step)
{
	size_t len = strlen(text);
	if (!step)
		step = len ? len : 1;
	for (size_t off = 0; off < len; off += step) {
		size_t n = len - off < step ? len - off : step;
		int rc = sbx_code_events_feed(&f->ev, text + off, n, &f->err);
		if (rc)
			return rc;
	}
	return 0;
}

static const char captured[] =
    "{\"type\":\"number_of_executions\",\"execution_count\":3}\n"
    "{\"type\":\"stdout\",\"text\":\"hello\\n\",\"timestamp\":\"2026-11-30T16:13:47.668Z\"}\n"
    "{\"type\":\"stderr\",\"text\":\"warn\\n\"}\n"
    "{\"type\":\"keepalive\"}\n"
    "{\"type\":\"result\",\"text\":\"2\",\"html\":\"<b>2</b>\",\"is_main_result\":true,"
    "\"json\":{\"a\":1},\"extra\":{}}\n"
    "{\"type\":\"end_of_execution\"}\n";

START_TEST(captured_stream_any_split)
{
	/* The same stream, cut at every size from 1 byte to whole. */
	for (size_t step = 0; step <= 9; step++) {
		struct fixture f;
		fx_init(&f);
		ck_assert_int_eq(feed(&f, captured, step), 0);
		ck_assert_int_eq(sbx_code_events_finish(&f.ev, "python", &f.err), 0);
		ck_assert(f.ev.ended);
		ck_assert_int_eq(f.ev.execution_count, 3);
		ck_assert(f.res.success);
		ck_assert(!f.res.state_lost);
		ck_assert_str_eq(f.cap.out.buf, "hello\n");
		ck_assert_str_eq(f.cap.err.buf, "warn\n");
		ck_assert_str_eq(f.res.text, "2");
		/* html of the main result is a rich output; its json is the value itself */
		ck_assert_uint_eq(f.res.n_outputs, 1);
		ck_assert_str_eq(f.res.outputs[0].mime, "text/html");
		ck_assert_str_eq(f.res.outputs[0].data, "<b>2</b>");
		ck_assert_uint_eq(f.ev.ignored, 0);
		fx_free(&f);
	}
}
END_TEST

START_TEST(rich_outputs_decoded)
{
	struct fixture f;
	fx_init(&f);
	/* "iVBORw0KGgo=" is the PNG signature's first 8 bytes */
	ck_assert_int_eq(
	    feed(&f,
		 "{\"type\":\"result\",\"is_main_result\":false,\"text\":\"<Figure>\","
		 "\"png\":\"iVBORw0K\\nGgo=\",\"svg\":\"<svg/>\"}\n"
		 "{\"type\":\"result\",\"is_main_result\":false,\"json\":{\"k\":[1,2]}}\n"
		 "{\"type\":\"result\",\"is_main_result\":false,\"jpeg\":\"not base64!\"}\n"
		 "{\"type\":\"end_of_execution\"}\n",
		 0),
	    0);
	ck_assert_int_eq(sbx_code_events_finish(&f.ev, "python", &f.err), 0);
	ck_assert_ptr_null(f.res.text); /* no main result */
	ck_assert_uint_eq(f.res.n_outputs, 3);
	ck_assert_str_eq(f.res.outputs[0].mime, "image/png");
	ck_assert_uint_eq(f.res.outputs[0].len, 8);
	ck_assert_int_eq(memcmp(f.res.outputs[0].data, "\x89PNG\r\n\x1a\n", 8), 0);
	ck_assert_str_eq(f.res.outputs[1].mime, "image/svg+xml");
	ck_assert_str_eq(f.res.outputs[2].mime, "application/json");
	ck_assert_ptr_nonnull(strstr(f.res.outputs[2].data, "\"k\""));
	fx_free(&f);
}
END_TEST

START_TEST(error_event)
{
	struct fixture f;
	fx_init(&f);
	ck_assert_int_eq(
	    feed(&f,
		 "{\"type\":\"error\",\"name\":\"NameError\",\"value\":\"name 'x' is not defined\","
		 "\"traceback\":\"\\u001b[0;31mNameError\\u001b[0m: boom\"}\n"
		 "{\"type\":\"end_of_execution\"}",
		 0),
	    0);
	/* the last line has no newline: finish applies it */
	ck_assert(!f.ev.ended);
	ck_assert_int_eq(sbx_code_events_finish(&f.ev, "python", &f.err), 0);
	ck_assert(f.ev.ended);
	ck_assert(!f.res.success);
	ck_assert_str_eq(f.res.err_name, "NameError");
	ck_assert_str_eq(f.res.err_value, "name 'x' is not defined");
	ck_assert_str_eq(f.res.err_traceback, "NameError: boom"); /* ANSI colours gone */
	fx_free(&f);

	/* Jupyter's list form of a traceback; a nameless error is an Error */
	fx_init(&f);
	ck_assert_int_eq(feed(&f, "{\"type\":\"error\",\"traceback\":[\"a\",\"b\"]}\n", 0), 0);
	ck_assert_str_eq(f.res.err_name, "Error");
	ck_assert_str_eq(f.res.err_traceback, "a\nb");
	fx_free(&f);
}
END_TEST

START_TEST(died_without_end)
{
	struct fixture f;
	fx_init(&f);
	ck_assert_int_eq(feed(&f, "{\"type\":\"stdout\",\"text\":\"before\\n\"}\n", 0), 0);
	ck_assert_int_eq(sbx_code_events_finish(&f.ev, "javascript", &f.err), 0);
	ck_assert(!f.res.success);
	ck_assert_str_eq(f.res.err_name, "UnexpectedEndOfExecution");
	ck_assert_ptr_nonnull(strstr(f.res.err_value, "javascript interpreter exited"));
	ck_assert_str_eq(f.cap.out.buf, "before\n");
	fx_free(&f);

	/* an error already reported is kept as it is */
	fx_init(&f);
	ck_assert_int_eq(
	    feed(&f, "{\"type\":\"error\",\"name\":\"MemoryError\",\"value\":\"\"}\n", 0), 0);
	ck_assert_int_eq(sbx_code_events_finish(&f.ev, "python", &f.err), 0);
	ck_assert_str_eq(f.res.err_name, "MemoryError");
	fx_free(&f);
}
END_TEST

START_TEST(state_lost_and_junk)
{
	struct fixture f;
	fx_init(&f);
	ck_assert_int_eq(feed(&f,
			      "{\"type\":\"state_lost\"}\n"
			      "bash: warning: something\n"
			      "\n"
			      "[1,2]\n"
			      "{\"type\":\"brand_new_event\",\"x\":1}\r\n"
			      "{\"type\":\"end_of_execution\"}\n",
			      3),
			 0);
	ck_assert_int_eq(sbx_code_events_finish(&f.ev, "python", &f.err), 0);
	ck_assert(f.res.state_lost);
	ck_assert(f.res.success);
	ck_assert_uint_eq(f.ev.ignored,
			  2); /* the shell's line and the array; empty lines skipped */
	fx_free(&f);
}
END_TEST

START_TEST(lone_surrogates_and_nul)
{
	/*
	 * Python's json.dumps and JavaScript's JSON.stringify write lone
	 * surrogates as escapes, which jansson refuses: the line is kept with
	 * U+FFFD in their place; a pair, an escaped backslash before "udcff"
	 * and a NUL are kept as they are.
	 */
	struct fixture f;
	fx_init(&f);
	ck_assert_int_eq(
	    feed(&f,
		 "{\"type\":\"stdout\",\"text\":\"a\\udcffb\\ud800\\n\"}\n"
		 "{\"type\":\"stdout\",\"text\":\"\\ud83d\\ude00 \\\\udcff \\ud83d\\u0041\\n\"}\n"
		 "{\"type\":\"stderr\",\"text\":\"x\\u0000y\"}\n"
		 "{\"type\":\"end_of_execution\"}\n",
		 0),
	    0);
	ck_assert_int_eq(sbx_code_events_finish(&f.ev, "python", &f.err), 0);
	ck_assert_str_eq(f.cap.out.buf, "a\xef\xbf\xbd"
					"b\xef\xbf\xbd\n"
					"\xf0\x9f\x98\x80 \\udcff \xef\xbf\xbd"
					"A\n");
	ck_assert_uint_eq(f.cap.err.len, 3);
	ck_assert_int_eq(memcmp(f.cap.err.buf, "x\0y", 3), 0);
	ck_assert_uint_eq(f.ev.ignored, 0);
	fx_free(&f);
}
END_TEST

START_TEST(sink_refusal_and_bounds)
{
	struct fixture f;
	fx_init(&f);
	f.cap.fail = -EPIPE;
	ck_assert_int_eq(feed(&f, "{\"type\":\"stdout\",\"text\":\"x\"}\n", 0), -EPIPE);
	ck_assert_int_eq(f.err.err, EPIPE);
	fx_free(&f);

	/* an endless line fails with EFBIG instead of growing without bound */
	fx_init(&f);
	size_t chunk = 1u << 20;
	char *big = malloc(chunk);
	memset(big, 'a', chunk);
	int rc = 0;
	for (size_t sent = 0; !rc && sent <= SBX_CODE_EVENT_MAX; sent += chunk)
		rc = sbx_code_events_feed(&f.ev, big, chunk, &f.err);
	ck_assert_int_eq(rc, -EFBIG);
	free(big);
	fx_free(&f);
}
END_TEST

/*
 * A cell's rich outputs are held until it ends: past SBX_CODE_OUTPUTS_MAX
 * of them, or SBX_CODE_OUTPUTS_MAX_BYTES in all, EFBIG (a display loop
 * grew the daemon without bound: 300 MB of HTML took it to 378 MB). The
 * bytes bound: test-local-output's story_output_rich_bound.
 */
START_TEST(rich_outputs_bounded)
{
	static const char small[] = "{\"type\":\"result\",\"html\":\"<i>x</i>\"}\n";
	struct fixture f;
	fx_init(&f);
	for (int i = 0; i < SBX_CODE_OUTPUTS_MAX; i++)
		ck_assert_int_eq(feed(&f, small, 0), 0);
	ck_assert_int_eq(feed(&f, small, 0), -EFBIG);
	ck_assert_ptr_nonnull(strstr(f.err.msg, "rich outputs are over 10000 files or 256 MiB"));
	ck_assert_uint_eq(f.res.n_outputs, SBX_CODE_OUTPUTS_MAX);
	fx_free(&f);
}
END_TEST

START_TEST(languages_and_helpers)
{
	ck_assert_str_eq(sbx_code_language("py"), "python");
	ck_assert_str_eq(sbx_code_language("Python"), "python");
	ck_assert_str_eq(sbx_code_language("js"), "javascript");
	ck_assert_str_eq(sbx_code_language("TS"), "typescript");
	ck_assert_ptr_null(sbx_code_language("ruby"));
	ck_assert_ptr_null(sbx_code_language(NULL));
	ck_assert_int_eq(sbx_code_language_index("py"), 0);
	ck_assert_int_eq(sbx_code_language_index("javascript"), 1);
	ck_assert_int_eq(sbx_code_language_index("ts"), 2);
	ck_assert_int_eq(sbx_code_language_index("r"), -1);

	char s[] = "\x1b[1;31mred\x1b[0m plain \x1b[Kend";
	sbx_code_strip_ansi(s);
	ck_assert_str_eq(s, "red plain end");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("code_events");
	TCase *tc = tcase_create("events");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, captured_stream_any_split);
	tcase_add_test(tc, rich_outputs_decoded);
	tcase_add_test(tc, error_event);
	tcase_add_test(tc, died_without_end);
	tcase_add_test(tc, state_lost_and_junk);
	tcase_add_test(tc, lone_surrogates_and_nul);
	tcase_add_test(tc, sink_refusal_and_bounds);
	tcase_add_test(tc, rich_outputs_bounded);
	tcase_add_test(tc, languages_and_helpers);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
