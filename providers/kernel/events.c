/* kernel/events — the NDJSON event stream of a code execution (see events.h). */
#include "kernel/events.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base64.h"
#include "base/jsonutil.h"
#include "base/xalloc.h"

void sbx_code_events_init(struct sbx_code_events *ev, const struct sbx_run_sink *sink,
			  struct sbx_code_result *res)
{
	memset(ev, 0, sizeof(*ev));
	ev->sink = sink;
	ev->res = res;
	ev->execution_count = -1;
	sbx_buf_init(&ev->line);
	memset(res, 0, sizeof(*res));
	res->success = true;
}

void sbx_code_events_release(struct sbx_code_events *ev)
{
	sbx_buf_release(&ev->line);
}

const char *sbx_code_language(const char *name)
{
	static const char *const names[][2] = {
	    {"python", "python"},	  {"py", "python"},
	    {"javascript", "javascript"}, {"js", "javascript"},
	    {"typescript", "typescript"}, {"ts", "typescript"},
	};
	for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(name, names[i][0]))
			return names[i][1];
	return NULL;
}

json_t *sbx_code_env_json(const char *const *envs)
{
	json_t *env = json_object();
	for (const char *const *e = envs; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		if (eq)
			json_object_setn_new(env, *e, (size_t)(eq - *e), json_string(eq + 1));
	}
	return env;
}

char *sbx_code_request_line(const struct sbx_code_req *req, size_t *len)
{
	json_t *o = json_pack("{s:s, s:o}", "code", req->code ? req->code : "", "env",
			      sbx_code_env_json(req->envs));
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!s)
		return NULL;
	*len = strlen(s);
	s = sbx_xrealloc(s, *len + 2);
	s[(*len)++] = '\n';
	s[*len] = '\0';
	return s;
}

int sbx_code_language_index(const char *name)
{
	static const char *const order[] = {"python", "javascript", "typescript"};
	const char *lang = sbx_code_language(name);
	for (int i = 0; lang && i < 3; i++)
		if (!strcmp(lang, order[i]))
			return i;
	return -1;
}

void sbx_code_strip_ansi(char *s)
{
	char *w = s;
	for (char *r = s; *r;) {
		if (r[0] == '\x1b' && r[1] == '[') {
			r += 2;
			while (*r && !(*r >= '@' && *r <= '~'))
				r++;
			if (*r)
				r++;
			continue;
		}
		*w++ = *r++;
	}
	*w = '\0';
}

static char *dup_str(json_t *v)
{
	const char *s = json_string_value(v);
	return s ? sbx_xstrdup(s) : NULL;
}

/* A traceback is a string, or (Jupyter) a list of lines. */
static char *traceback_text(json_t *v)
{
	if (json_is_string(v))
		return dup_str(v);
	struct sbx_buf b = SBX_BUF_INIT;
	sbx_json_join(v, "\n", &b);
	return sbx_buf_detach(&b, NULL);
}

static void add_output(struct sbx_code_result *res, const char *mime, struct sbx_buf *data)
{
	struct sbx_code_output *o =
	    sbx_xrealloc(res->outputs, (res->n_outputs + 1) * sizeof(*res->outputs));
	res->outputs = o;
	o += res->n_outputs++;
	o->mime = sbx_xstrdup(mime);
	o->data = sbx_buf_detach(data, &o->len);
}

/* The rich formats of a result event, in the order they become files. */
static const struct {
	const char *key, *mime;
	bool base64;
} formats[] = {
    {"png", "image/png", true},	      {"jpeg", "image/jpeg", true},
    {"svg", "image/svg+xml", false},  {"html", "text/html", false},
    {"pdf", "application/pdf", true}, {"json", "application/json", false},
};

/* Whether a rich output of len bytes still fits the cell's budget (events.h). */
static int output_fits(const struct sbx_code_result *res, size_t len, struct sbx_error *err)
{
	size_t total = len;
	for (size_t i = 0; i < res->n_outputs; i++)
		total += res->outputs[i].len;
	if (res->n_outputs >= SBX_CODE_OUTPUTS_MAX || total > SBX_CODE_OUTPUTS_MAX_BYTES)
		return sbx_error_set(err, EFBIG, SBX_E_EXECUTION_FAILED,
				     "code: the cell's rich outputs are over %u files or %u MiB",
				     SBX_CODE_OUTPUTS_MAX, SBX_CODE_OUTPUTS_MAX_BYTES >> 20);
	return 0;
}

static int apply_result(struct sbx_code_events *ev, json_t *o, struct sbx_error *err)
{
	bool main_result = json_is_true(json_object_get(o, "is_main_result"));
	json_t *text = json_object_get(o, "text");
	if (main_result && json_is_string(text)) {
		free(ev->res->text);
		ev->res->text = dup_str(text);
	}
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		json_t *v = json_object_get(o, formats[i].key);
		struct sbx_buf data = SBX_BUF_INIT;
		if (!v || json_is_null(v))
			continue;
		if (!strcmp(formats[i].key, "json")) {
			if (main_result)
				continue; /* the value itself: `output` has it */
			char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_INDENT(2));
			if (s)
				sbx_buf_adds(&data, s);
			free(s);
		} else if (!json_is_string(v)) {
			continue;
		} else if (formats[i].base64) {
			if (sbx_base64_decode(json_string_value(v), json_string_length(v), &data)) {
				sbx_buf_release(&data);
				continue;
			}
		} else {
			sbx_buf_add(&data, json_string_value(v), json_string_length(v));
		}
		int rc = output_fits(ev->res, data.len, err);
		if (!rc)
			add_output(ev->res, formats[i].mime, &data);
		sbx_buf_release(&data);
		if (rc)
			return rc;
	}
	return 0;
}

static void apply_error(struct sbx_code_events *ev, json_t *o)
{
	struct sbx_code_result *r = ev->res;
	r->success = false;
	free(r->err_name);
	free(r->err_value);
	free(r->err_traceback);
	r->err_name = dup_str(json_object_get(o, "name"));
	r->err_value = dup_str(json_object_get(o, "value"));
	r->err_traceback = traceback_text(json_object_get(o, "traceback"));
	if (!r->err_name)
		r->err_name = sbx_xstrdup("Error");
	if (r->err_traceback)
		sbx_code_strip_ansi(r->err_traceback);
}

static int hex4(const char *p)
{
	int v = 0;
	for (int i = 0; i < 4; i++) {
		int c = (unsigned char)p[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if ((c | 32) >= 'a' && (c | 32) <= 'f')
			d = (c | 32) - 'a' + 10;
		else
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/*
 * line with every lone surrogate escape (a backslash-u escape of
 * D800..DFFF not in a pair, which jansson refuses: Python's json.dumps and
 * JavaScript's JSON.stringify write them for strings holding lone
 * surrogates) turned into the escape of U+FFFD, parsed. NULL if it is
 * still not JSON.
 */
static json_t *load_lone_surrogates(const char *line, size_t len)
{
	struct sbx_buf b = SBX_BUF_INIT;
	json_t *o;
	for (size_t i = 0; i < len; i++) {
		int v, w;
		if (line[i] != '\\' || i + 1 >= len) {
			sbx_buf_addch(&b, line[i]);
			continue;
		}
		if (line[i + 1] != 'u' || i + 6 > len || (v = hex4(line + i + 2)) < 0xd800 ||
		    v > 0xdfff) {
			sbx_buf_add(&b, line + i, 2); /* any other escape, kept whole */
			i++;
			continue;
		}
		if (v < 0xdc00 && i + 12 <= len && line[i + 6] == '\\' && line[i + 7] == 'u' &&
		    (w = hex4(line + i + 8)) >= 0xdc00 && w <= 0xdfff) {
			sbx_buf_add(&b, line + i, 12); /* a pair */
			i += 11;
			continue;
		}
		sbx_buf_adds(&b, "\\ufffd");
		i += 5;
	}
	o = json_loadb(b.buf ? b.buf : "", b.len, JSON_ALLOW_NUL, NULL);
	sbx_buf_release(&b);
	return o;
}

int sbx_code_events_line(struct sbx_code_events *ev, const char *line, size_t len,
			 struct sbx_error *err)
{
	json_error_t je;
	json_t *o;
	const char *type;
	int rc = 0;

	while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
		len--;
	if (!len)
		return 0;
	/* NUL is text like any other character ("\u0000" in the event). */
	o = json_loadb(line, len, JSON_ALLOW_NUL, &je);
	if (!o && memmem(line, len, "\\u", 2))
		o = load_lone_surrogates(line, len);
	type = json_string_value(json_object_get(o, "type"));
	if (!type) {
		ev->ignored++;
	} else if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
		json_t *t = json_object_get(o, "text");
		if (json_string_length(t) && ev->sink && ev->sink->output) {
			rc = ev->sink->output(ev->sink->ctx,
					      type[3] == 'o' ? SBX_STDOUT : SBX_STDERR,
					      json_string_value(t), json_string_length(t));
			if (rc)
				rc = sbx_error_set(err, rc < 0 ? -rc : rc, 0,
						   "code: the reader stopped the output");
		}
	} else if (!strcmp(type, "result")) {
		rc = apply_result(ev, o, err);
	} else if (!strcmp(type, "error")) {
		apply_error(ev, o);
	} else if (!strcmp(type, "number_of_executions")) {
		json_t *n = json_object_get(o, "execution_count");
		if (json_is_integer(n))
			ev->execution_count = (long)json_integer_value(n);
	} else if (!strcmp(type, "end_of_execution")) {
		ev->ended = true;
	} else if (!strcmp(type, "state_lost")) {
		ev->res->state_lost = true;
	}
	json_decref(o);
	return rc;
}

int sbx_code_events_feed(struct sbx_code_events *ev, const char *data, size_t len,
			 struct sbx_error *err)
{
	while (len) {
		const char *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) : len;
		if (ev->line.len + n > SBX_CODE_EVENT_MAX)
			return sbx_error_set(err, EFBIG, SBX_E_EXECUTION_FAILED,
					     "code: an output event is over %u MiB",
					     SBX_CODE_EVENT_MAX >> 20);
		if (!nl) {
			sbx_buf_add(&ev->line, data, n);
			return 0;
		}
		int rc;
		if (ev->line.len) {
			sbx_buf_add(&ev->line, data, n);
			rc = sbx_code_events_line(ev, ev->line.buf, ev->line.len, err);
			sbx_buf_reset(&ev->line);
		} else {
			rc = sbx_code_events_line(ev, data, n, err);
		}
		if (rc)
			return rc;
		data += n + 1;
		len -= n + 1;
	}
	return 0;
}

int sbx_code_events_finish(struct sbx_code_events *ev, const char *language, struct sbx_error *err)
{
	int rc = 0;
	if (ev->line.len) {
		rc = sbx_code_events_line(ev, ev->line.buf, ev->line.len, err);
		sbx_buf_reset(&ev->line);
	}
	if (!rc && !ev->ended && ev->res->success) {
		struct sbx_code_result *r = ev->res;
		struct sbx_buf msg = SBX_BUF_INIT;
		sbx_buf_addf(
		    &msg,
		    "the %s interpreter exited during the run; the next run starts a fresh one",
		    language ? language : "code");
		r->success = false;
		r->err_name = sbx_xstrdup("UnexpectedEndOfExecution");
		r->err_value = sbx_buf_detach(&msg, NULL);
		r->err_traceback = sbx_xstrdup("");
	}
	return rc;
}
