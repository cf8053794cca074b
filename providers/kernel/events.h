/*
 * kernel/events — the NDJSON event stream of one code execution, parsed
 * into a struct sbx_code_result while it arrives.
 *
 * The shapes are those of E2B's code interpreter (`POST /execute`,
 * doc/protocols/e2b.md §3), which sbxfs's own kernel drivers
 * (pykernel.py, jskernel.js) also speak, so one parser serves the local,
 * E2B and Daytona providers:
 *   stdout / stderr {text}        -> the run's sink, as they come
 *   result {is_main_result, text, png, jpeg, svg, html, pdf, json, ...}
 *                                 -> text of the main result; rich outputs
 *   error {name, value, traceback} -> success = false
 *   number_of_executions {execution_count}, end_of_execution
 *   state_lost (sbxfs's drivers: a dead interpreter was replaced)
 *   keepalive and anything unknown: ignored.
 * Rich outputs: every png/jpeg/pdf (base64, decoded), svg, html and json
 * (an object, stored as JSON text) of a result, except the json of the
 * main result (that is the value itself, which `output` already holds).
 *
 * Pure: no I/O, no provider, no curl; tests/unit/check_code_events.c.
 */
#ifndef SBX_KERNEL_EVENTS_H
#define SBX_KERNEL_EVENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"
#include "provider.h"

/* A line longer than this (a huge image, say) fails the run with EFBIG. */
#define SBX_CODE_EVENT_MAX (64u << 20)
/*
 * A cell's rich outputs are held in memory until it ends (then written to
 * results/): past this many, or this many bytes in all, the run fails with
 * EFBIG (`for i in range(10**6): display(img)` grew the daemon without
 * bound). The bytes results/ keeps (src/results.h), and ten times the
 * files (a cell's own are all kept while it is the newest).
 */
#define SBX_CODE_OUTPUTS_MAX 10000
#define SBX_CODE_OUTPUTS_MAX_BYTES (256u << 20)

struct sbx_code_events {
	const struct sbx_run_sink *sink; /* may be NULL */
	struct sbx_code_result *res;	 /* filled as events arrive (not owned) */
	struct sbx_buf line;		 /* a partial line */
	bool ended;			 /* end_of_execution seen */
	long execution_count;		 /* -1: none seen */
	size_t ignored;			 /* lines that were not JSON objects */
};

/* Starts a parse into res (zeroed here, success = true). */
void sbx_code_events_init(struct sbx_code_events *ev, const struct sbx_run_sink *sink,
			  struct sbx_code_result *res);
void sbx_code_events_release(struct sbx_code_events *ev);

/*
 * Feeds bytes of the stream (any split). Complete lines are applied at
 * once. 0, or -errno with err filled: EFBIG (a line over the bound), or
 * the sink's error (the reader went away).
 */
int sbx_code_events_feed(struct sbx_code_events *ev, const char *data, size_t len,
			 struct sbx_error *err);
/* Applies one event line (no newline needed). Same returns. */
int sbx_code_events_line(struct sbx_code_events *ev, const char *line, size_t len,
			 struct sbx_error *err);
/*
 * The stream ended: applies a last unterminated line, and when no
 * end_of_execution came, records the interpreter's death as the run's
 * error (UnexpectedEndOfExecution) naming language. 0 or -errno.
 */
int sbx_code_events_finish(struct sbx_code_events *ev, const char *language, struct sbx_error *err);

/* envs ("K=V" strings, NULL-terminated, may be NULL) as a JSON object (new reference). */
json_t *sbx_code_env_json(const char *const *envs);
/*
 * The request line sbxfs's drivers read: {"code", "env": {K: V}} and a
 * newline (malloc'd, length in *len). NULL when the code or an env value
 * is not valid UTF-8 (JSON cannot carry it).
 */
char *sbx_code_request_line(const struct sbx_code_req *req, size_t *len);

/* "python", "javascript" or "typescript" for those names or py/js/ts
 * (any case), else NULL. */
const char *sbx_code_language(const char *name);
/* The same as an index: 0 python, 1 javascript, 2 typescript, -1 none. */
int sbx_code_language_index(const char *name);

/* Removes ANSI escape sequences (tracebacks from Jupyter carry colours), in place. */
void sbx_code_strip_ansi(char *s);

#endif
