/*
 * daytona/toolbox — the toolbox requests that both the file ops and the
 * metadata batch build on: POST /process/execute (helper commands, and a
 * run's fallback when the daemon has no sessions) and POST
 * /files/permissions. They are here, not in run.c and files.c, because
 * run.c and files.c call into batch.c (a run and a file op first apply
 * the queued changes they depend on) while batch.c needs these two: with
 * them in those files the four formed a cycle.
 */
#include "daytona/daytona.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/xalloc.h"

#define DT_EXEC_NO_LIMIT_MS (3600L * 1000) /* transport deadline of an unlimited execute */

int dt_execute(struct dt_instance *di, const char *command, long timeout_ms, struct sbx_buf *out,
	       int *exit_code, bool *timed_out, struct sbx_error *err)
{
	struct sbx_buf url = SBX_BUF_INIT;
	json_t *body = json_pack("{ss}", "command", command), *reply = NULL, *v;
	long status = 0;
	int rc;

	*timed_out = false;
	if ((rc = dt_check_body(body, "execute", err)))
		return rc;
	/* The daemon's own limit backs up the wrapper's (which fires first). */
	if (timeout_ms > 0)
		json_object_set_new(body, "timeout", json_integer((timeout_ms + 999) / 1000 + 5));
	dt_toolbox_url(di, &url, "/process/execute");
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .body = body,
				       .reply = &reply,
				       .what = "execute",
				       .timeout_ms = timeout_ms > 0 ? timeout_ms + dt_short_ms()
								    : DT_EXEC_NO_LIMIT_MS,
				       .max_body = DT_LOGS_MAX,
				       .status = &status},
		     err);
	if (rc == -ETIMEDOUT && status == 408 && timeout_ms > 0) {
		/* 408 from the daemon: it killed the process group. */
		*timed_out = true;
		*exit_code = 137;
		sbx_error_clear(err);
		rc = 0;
	} else if (!rc) {
		v = json_object_get(reply, "exitCode");
		if (!v)
			v = json_object_get(reply, "code");
		*exit_code = json_is_integer(v) ? (int)json_integer_value(v) : -1;
		v = json_object_get(reply, "result");
		if (json_is_string(v))
			sbx_buf_add(out, json_string_value(v), json_string_length(v));
	}
	json_decref(reply);
	json_decref(body);
	sbx_buf_release(&url);
	return rc;
}

int dt_exec(struct dt_instance *di, const char *cmd, long timeout_ms, struct sbx_buf *out,
	    int *exit_code, struct sbx_error *err)
{
	bool timed_out;
	int rc = dt_execute(di, cmd, timeout_ms, out, exit_code, &timed_out, err);
	if (!rc && timed_out)
		rc = sbx_error_set(err, ETIMEDOUT, 0, "command timed out after %ld s",
				   timeout_ms / 1000);
	return rc;
}

/*
 * The daemon sets the mode, then the owner (SetFilePermissions), and a
 * chown clears set-ID bits: a set-ID mode with an owner goes as two
 * calls, the owner first.
 */
int dt_perms(struct dt_instance *di, const char *path, long mode, const char *owner,
	     const char *group, struct sbx_error *err)
{
	struct sbx_buf url = SBX_BUF_INIT;
	char m[16], *w = sbx_xasprintf("chmod %s", path);
	bool split = mode >= 0 && (mode & 06000) && (owner || group);
	int rc;
	if (split && (rc = dt_perms(di, path, -1, owner, group, err)))
		goto out;
	dt_path_url(di, &url, "/files/permissions", path);
	if (!split) {
		sbx_http_add_query(&url, "owner", owner);
		sbx_http_add_query(&url, "group", group);
	}
	if (mode >= 0) {
		snprintf(m, sizeof(m), "%lo", (unsigned long)mode & 07777);
		sbx_http_add_query(&url, "mode", m);
	}
	rc = dt_call(
	    &(struct dt_call){.url = url.buf, .empty_post = true, .what = w, .idempotent = true},
	    err);
out:
	sbx_buf_release(&url);
	free(w);
	return rc;
}
