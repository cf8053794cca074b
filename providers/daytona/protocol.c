/*
 * daytona/protocol — see protocol.h. Pure: bytes and JSON in, structs and
 * errno out. The multipart parser lives in multipart.c.
 */
#include "daytona/protocol.h"
#include "base/jsonutil.h"
#include "base/pathutil.h"
#include "base/xalloc.h"
#include "rmeta.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- sandboxes ----------------------------------------------------------- */

static const struct {
	const char *state;
	enum dt_phase phase;
} dt_states[] = {
    {"started", DT_PHASE_STARTED},	 {"stopped", DT_PHASE_STOPPED},
    {"archived", DT_PHASE_STOPPED},	 {"paused", DT_PHASE_STOPPED},
    {"destroyed", DT_PHASE_GONE},	 {"destroying", DT_PHASE_GONE},
    {"error", DT_PHASE_FAILED},		 {"build_failed", DT_PHASE_FAILED},
    {"creating", DT_PHASE_BUSY},	 {"restoring", DT_PHASE_BUSY},
    {"starting", DT_PHASE_BUSY},	 {"stopping", DT_PHASE_BUSY},
    {"pending_build", DT_PHASE_BUSY},	 {"building_snapshot", DT_PHASE_BUSY},
    {"pulling_snapshot", DT_PHASE_BUSY}, {"archiving", DT_PHASE_BUSY},
    {"resizing", DT_PHASE_BUSY},	 {"snapshotting", DT_PHASE_BUSY},
    {"forking", DT_PHASE_BUSY},		 {"pausing", DT_PHASE_BUSY},
    {"resuming", DT_PHASE_BUSY},
};

enum dt_phase dt_state_phase(const char *state)
{
	if (!state)
		return DT_PHASE_UNKNOWN;
	for (size_t i = 0; i < sizeof(dt_states) / sizeof(dt_states[0]); i++)
		if (!strcmp(dt_states[i].state, state))
			return dt_states[i].phase;
	return DT_PHASE_UNKNOWN;
}

static void copy_str(char *dst, size_t size, json_t *v)
{
	const char *s = json_is_string(v) ? json_string_value(v) : "";
	snprintf(dst, size, "%s", s);
}

static double num(json_t *v)
{
	return json_is_number(v) ? json_number_value(v) : 0;
}

int dt_sandbox_parse(json_t *dto, struct dt_sandbox *sb, struct sbx_error *err)
{
	size_t n;
	memset(sb, 0, sizeof(*sb));
	if (!json_is_object(dto) || !json_is_string(json_object_get(dto, "id")) ||
	    !*json_string_value(json_object_get(dto, "id")))
		return sbx_error_set(err, EIO, SBX_E_INTERNAL, "sandbox reply has no id");
	copy_str(sb->id, sizeof(sb->id), json_object_get(dto, "id"));
	copy_str(sb->name, sizeof(sb->name), json_object_get(dto, "name"));
	copy_str(sb->state, sizeof(sb->state), json_object_get(dto, "state"));
	copy_str(sb->snapshot, sizeof(sb->snapshot), json_object_get(dto, "snapshot"));
	copy_str(sb->target, sizeof(sb->target), json_object_get(dto, "target"));
	copy_str(sb->toolbox_url, sizeof(sb->toolbox_url), json_object_get(dto, "toolboxProxyUrl"));
	copy_str(sb->error_reason, sizeof(sb->error_reason), json_object_get(dto, "errorReason"));
	copy_str(sb->language, sizeof(sb->language),
		 json_object_get(json_object_get(dto, "labels"), "code-toolbox-language"));
	n = strlen(sb->toolbox_url);
	while (n && sb->toolbox_url[n - 1] == '/')
		sb->toolbox_url[--n] = '\0';
	sb->cpu = num(json_object_get(dto, "cpu"));
	sb->gpu = num(json_object_get(dto, "gpu"));
	sb->memory_gib = num(json_object_get(dto, "memory"));
	sb->disk_gib = num(json_object_get(dto, "disk"));
	return 0;
}

static const char *str(json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : NULL;
}

int dt_sandbox_page(json_t *reply, sbx_sandbox_fn fn, void *ctx, char *cursor, size_t size,
		    struct sbx_error *err)
{
	static const char *const words[] = {[DT_PHASE_STARTED] = "running",
					    [DT_PHASE_STOPPED] = "paused",
					    [DT_PHASE_GONE] = "gone"};
	json_t *items = json_object_get(reply, "items");
	json_t *next = json_object_get(reply, "nextCursor"), *dto;
	size_t i;
	int rc = 0;

	if (!json_is_array(items) || (next && !json_is_null(next) && !json_is_string(next)))
		return sbx_error_set(err, EIO, SBX_E_INTERNAL,
				     "list sandboxes: the reply is not {items, nextCursor}");
	json_array_foreach(items, i, dto)
	{
		const char *state = str(json_object_get(dto, "state"));
		enum dt_phase ph = dt_state_phase(state);
		struct sbx_sandbox_entry sb = {
		    .id = str(json_object_get(dto, "id")),
		    .state = ph < sizeof(words) / sizeof(words[0]) && words[ph] ? words[ph] : state,
		    .lease = str(json_object_get(json_object_get(dto, "labels"), "sbxfs-lease")),
		    .template_name = str(json_object_get(dto, "snapshot")),
		    .created_at = str(json_object_get(dto, "createdAt")),
		};
		if (sb.id && *sb.id && (rc = fn(ctx, &sb)))
			return rc;
	}
	snprintf(cursor, size, "%s", str(next) ? str(next) : "");
	return 0;
}

static long ceil_div(long a, long b)
{
	return (a + b - 1) / b;
}

json_t *dt_create_body(const struct sbx_spec *spec, const char *lease, const char *target,
		       long auto_stop_min)
{
	json_t *body = json_object(), *labels = json_object();
	const char *tmpl = spec->template_name;
	const char *lang = spec->language && *spec->language ? spec->language : "python";

	if (tmpl && *tmpl && (strchr(tmpl, ':') || strchr(tmpl, '/'))) {
		json_t *bi = json_object();
		char *df = NULL;
		df = sbx_xasprintf("FROM %s\n", tmpl);
		json_object_set_new(bi, "dockerfileContent", json_string(df));
		free(df);
		json_object_set_new(body, "buildInfo", bi);
		/* The server refuses resources with a snapshot: only with an image. */
		if (spec->res.cpu > 0)
			json_object_set_new(body, "cpu",
					    json_integer(ceil_div(spec->res.cpu, 1000)));
		if (spec->res.memory_mb > 0)
			json_object_set_new(body, "memory",
					    json_integer(ceil_div(spec->res.memory_mb, 1024)));
		if (spec->res.disk_mb > 0)
			json_object_set_new(body, "disk",
					    json_integer(ceil_div(spec->res.disk_mb, 1024)));
	} else if (tmpl && *tmpl) {
		json_object_set_new(body, "snapshot", json_string(tmpl));
	}
	json_object_set_new(body, "env", spec->envs ? json_deep_copy(spec->envs) : json_object());
	json_object_set_new(labels, "code-toolbox-language", json_string(lang));
	if (lease && *lease)
		json_object_set_new(labels, "sbxfs-lease", json_string(lease));
	json_object_set_new(body, "labels", labels);
	if (target && *target)
		json_object_set_new(body, "target", json_string(target));
	if (spec->network && !strcmp(spec->network, "none"))
		json_object_set_new(body, "networkBlockAll", json_true());
	if (auto_stop_min >= 0)
		json_object_set_new(body, "autoStopInterval", json_integer(auto_stop_min));
	return body;
}

long dt_auto_stop_minutes(long idle_s)
{
	if (idle_s <= 0)
		return 0;
	return ceil_div(idle_s, 60) + 15;
}

/* --- files ----------------------------------------------------------------- */

int dt_mode_parse(const char *mode, const char *perms, bool is_dir, mode_t *out)
{
	mode_t m = 0;
	bool have_bits = !sbx_rmeta_gomode(mode, &m);

	if (perms && *perms) {
		char *end;
		unsigned long v = strtoul(perms, &end, 8);
		if (!*end && v <= 07777) {
			/* The daemon writes Perm() here; a newer one may add 07000. */
			if (!have_bits)
				m = is_dir ? S_IFDIR : S_IFREG;
			m = (m & (S_IFMT | 07000u)) | (mode_t)v;
			have_bits = true;
		}
	}
	if (!have_bits)
		return -EINVAL;
	*out = m;
	return 0;
}

int dt_time_parse(const char *s, struct timespec *ts)
{
	struct tm tm;
	int y, mo, d, h, mi, sec, n = 0;
	long nsec = 0;
	const char *p;
	time_t t;

	if (!s ||
	    sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 ||
	    !n)
		return -EINVAL;
	p = s + n;
	if (*p == '.') {
		long scale = 100000000;
		for (p++; isdigit((unsigned char)*p); p++) {
			nsec += (*p - '0') * scale;
			scale /= 10;
		}
	}
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh, om;
		if (sscanf(p + 1, "%2d:%2d", &oh, &om) != 2)
			return -EINVAL;
		t -= (*p == '+' ? 1 : -1) * (time_t)(oh * 3600 + om * 60);
		p += 6;
	} else if (*p == ' ' && (p[1] == '+' || p[1] == '-')) {
		/* Go's time.String(): " +0000 UTC" (the zone's name is ignored). */
		int oh, om;
		if (sscanf(p + 2, "%2d%2d", &oh, &om) != 2)
			return -EINVAL;
		t -= (p[1] == '+' ? 1 : -1) * (time_t)(oh * 3600 + om * 60);
	} else if (*p) {
		return -EINVAL;
	}
	ts->tv_sec = t;
	ts->tv_nsec = nsec;
	return 0;
}

unsigned dt_owner_parse(const char *s)
{
	return sbx_rmeta_id(NULL, s, false);
}

int dt_fileinfo_parse(json_t *fi, struct sbx_stat *st, const char **name)
{
	struct timespec mt;
	json_t *v;
	mode_t mode;
	const char *nm = json_string_value(json_object_get(fi, "name"));

	memset(st, 0, sizeof(*st));
	if (name && !sbx_name_listable(nm))
		return -EIO;
	if (dt_mode_parse(json_string_value(json_object_get(fi, "mode")),
			  json_string_value(json_object_get(fi, "permissions")),
			  json_is_true(json_object_get(fi, "isDir")), &mode))
		return -EIO;
	st->mode = mode;
	st->nlink = S_ISDIR(mode) ? 2 : 1;
	v = json_object_get(fi, "size");
	if (json_is_integer(v) && json_integer_value(v) > 0)
		st->size = (off_t)json_integer_value(v);
	if (dt_time_parse(json_string_value(json_object_get(fi, "modifiedAt")), &st->mtime))
		st->mtime.tv_sec = 0;
	/*
	 * modifiedAt has whole seconds; the deprecated modTime (Go's
	 * time.String()) has the nanoseconds, which rsync and make compare.
	 * Taken when it names the same second.
	 */
	if (!dt_time_parse(json_string_value(json_object_get(fi, "modTime")), &mt) &&
	    (!st->mtime.tv_sec || mt.tv_sec == st->mtime.tv_sec))
		st->mtime = mt;
	st->atime = st->ctime = st->mtime;
	st->uid = dt_owner_parse(json_string_value(json_object_get(fi, "owner")));
	st->gid = dt_owner_parse(json_string_value(json_object_get(fi, "group")));
	if (name)
		*name = nm;
	return 0;
}

/* --- errors ---------------------------------------------------------------- */

/*
 * The daemon's specific codes. Generic ones (NOT_FOUND, BAD_REQUEST,
 * INTERNAL_SERVER_ERROR ...) only restate the status, which then decides
 * (so a 507 with INTERNAL_SERVER_ERROR is still ENOSPC).
 */
static const struct {
	const char *code;
	int err;
} dt_codes[] = {
    {"FILE_NOT_FOUND", ENOENT},
    {"PROCESS_NOT_FOUND", ENOENT},
    {"FILE_ACCESS_DENIED", EACCES},
    {"INVALID_FILE_PATH", EINVAL},
    {"FILE_READ_FAILED", EIO},
    {"REQUEST_TIMEOUT", ETIMEDOUT},
    {"PROCESS_EXECUTION_TIMEOUT", ETIMEDOUT},
    {"SESSION_ENDED", ESRCH},
    {"COMMAND_ALREADY_COMPLETED", ESRCH},
    {"SANDBOX_NOT_STARTED", ENOTCONN},
    {"SANDBOX_NOT_RUNNING", ENOTCONN},
};

/* One line of printable text from s (at most max bytes). */
static void one_line(char *dst, size_t size, const char *s, size_t len)
{
	size_t o = 0;
	while (len && isspace((unsigned char)*s))
		s++, len--;
	for (size_t i = 0; i < len && o + 1 < size; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\n' || c == '\r')
			break;
		dst[o++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
	}
	while (o && dst[o - 1] == ' ')
		o--;
	dst[o] = '\0';
}

static void body_message(json_t *j, char *msg, size_t size)
{
	json_t *m = json_object_get(j, "message");
	msg[0] = '\0';
	if (json_is_string(m)) {
		one_line(msg, size, json_string_value(m), json_string_length(m));
	} else if (json_is_array(m)) { /* NestJS validation: a list of complaints */
		struct sbx_buf b = SBX_BUF_INIT;
		sbx_json_join(m, "; ", &b);
		one_line(msg, size, b.buf, b.len);
		sbx_buf_release(&b);
	}
	if (!msg[0] && json_is_string(json_object_get(j, "error")))
		one_line(msg, size, json_string_value(json_object_get(j, "error")),
			 strlen(json_string_value(json_object_get(j, "error"))));
}

int dt_error_from_reply(long status, const char *body, size_t len, const char *what,
			struct sbx_error *err)
{
	char msg[300] = "";
	const char *code = NULL, *source = NULL;
	json_t *j = NULL;
	int e = 0;
	bool auth;
	enum sbx_errcode ec = SBX_E_NONE;

	if (len > DT_ERRBODY_MAX)
		len = DT_ERRBODY_MAX;
	if (body && len) {
		j = json_loadb(body, len, JSON_DISABLE_EOF_CHECK, NULL);
		if (json_is_object(j)) {
			body_message(j, msg, sizeof(msg));
			code = json_string_value(json_object_get(j, "code"));
			if (!code)
				code = json_string_value(json_object_get(j, "error_code"));
			source = json_string_value(json_object_get(j, "source"));
		} else {
			one_line(msg, sizeof(msg), body, len);
		}
	}
	for (size_t i = 0; code && !e && i < sizeof(dt_codes) / sizeof(dt_codes[0]); i++)
		if (!strcmp(code, dt_codes[i].code))
			e = dt_codes[i].err;
	/*
	 * The toolbox proxy knows no such sandbox (deleted behind our back):
	 * the file asked about may well exist, so not ENOENT (which callers
	 * take for an answer about the file, and cache) but "unreachable",
	 * with the NOT_FOUND code that makes the core check the sandbox.
	 */
	if (!e && ((code && !strcmp(code, "SANDBOX_NOT_FOUND")) ||
		   (status == 404 && source && !strcmp(source, "DAYTONA_PROXY")))) {
		e = ENOTCONN;
		ec = SBX_E_NOT_FOUND;
	}
	/* The proxy answering for a sandbox it cannot reach (not started). */
	if (!e && source && !strcmp(source, "DAYTONA_PROXY") && status >= 400 && status != 401 &&
	    status != 403 && status != 404 && status != 429)
		e = ENOTCONN;
	if (!e)
		e = sbx_errno_from_http(status);
	if (!e)
		e = EIO;
	if (e == EIO)
		ec = SBX_E_INTERNAL;
	if (!msg[0])
		snprintf(msg, sizeof(msg), "HTTP %ld", status);
	/* The control plane refusing the key (not a sandbox's preview proxy). */
	auth = (status == 401 || status == 403) && !(source && !strcmp(source, "DAYTONA_PROXY"));
	json_decref(j);
	if (auth)
		return sbx_error_set(
		    err, EACCES, SBX_E_AUTH,
		    "%s%sDaytona refused the API key (%ld): %s; check DAYTONA_API_KEY",
		    what && *what ? what : "", what && *what ? ": " : "", status, msg);
	if (what && *what)
		return sbx_error_set(err, e, ec, "%s: %s", what, msg);
	return sbx_error_set(err, e, ec, "%s", msg);
}

/* --- sessions ---------------------------------------------------------------- */

int dt_command_parse(const char *body, size_t len, bool *done, int *exit_code)
{
	json_t *j = json_loadb(body, len, 0, NULL), *v;
	*done = false;
	if (!json_is_object(j)) {
		json_decref(j);
		return -EPROTO;
	}
	v = json_object_get(j, "exitCode");
	if (!v)
		v = json_object_get(j, "code");
	if (json_is_integer(v)) {
		*done = true;
		*exit_code = (int)json_integer_value(v);
	}
	json_decref(j);
	return 0;
}

int dt_logs_parse(const char *body, size_t len, struct dt_logs *logs)
{
	json_t *o, *e;
	memset(logs, 0, sizeof(*logs));
	logs->root = json_loadb(body, len, JSON_ALLOW_NUL, NULL);
	if (!json_is_object(logs->root)) {
		/* A daemon answering in plain text: the combined output. */
		json_decref(logs->root);
		logs->root = NULL;
		logs->out = body;
		logs->out_len = len;
		logs->err = "";
		return 0;
	}
	o = json_object_get(logs->root, "stdout");
	e = json_object_get(logs->root, "stderr");
	if (!json_is_string(o) && !json_is_string(e))
		o = json_object_get(logs->root, "output");
	logs->out = json_is_string(o) ? json_string_value(o) : "";
	logs->out_len = json_is_string(o) ? json_string_length(o) : 0;
	logs->err = json_is_string(e) ? json_string_value(e) : "";
	logs->err_len = json_is_string(e) ? json_string_length(e) : 0;
	return 0;
}

void dt_logs_release(struct dt_logs *logs)
{
	json_decref(logs->root);
	memset(logs, 0, sizeof(*logs));
}

/* --- commands -------------------------------------------------------------- */

static bool shell_name(const char *s, size_t n)
{
	if (!n || isdigit((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return false;
	return true;
}

int dt_wrap_command(struct sbx_buf *out, const struct dt_wrap *w)
{
	size_t start = out->len;
	bool env = false;

	for (const char *const *e = w->envs; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq || !shell_name(*e, (size_t)(eq - *e))) {
			out->len = start;
			out->buf[start] = '\0';
			return -EINVAL;
		}
	}
	/*
	 * A subshell, so that cd and variables never leak into the session
	 * shell; stdin from /dev/null, so a command never eats the session's
	 * own input; `timeout` (when the image has it) kills the whole process
	 * group at the deadline. An outer subshell waits for it with its own
	 * stderr on /dev/null (fd 9 carries the run's in) and exits with its
	 * status: the shell that waits for a child killed by a signal reports
	 * it on its stderr (bash "line 3: 6232 Killed  ( set -- sh -c ... )
	 * </dev/null", dash "Killed", written when it exits), which put this
	 * wrapper's text into the run's stderr after every `kill -9 $$`.
	 * The `exit $?` keeps the shells from folding the two subshells.
	 */
	sbx_buf_adds(out, "(exec 9>&2 2>/dev/null; (exec 2>&9 9>&-; ");
	if (w->cwd && *w->cwd) {
		sbx_buf_adds(out, "cd ");
		sbx_buf_add_shquoted(out, w->cwd);
		sbx_buf_adds(out, " || exit 1; ");
	}
	sbx_buf_adds(out, "set --");
	for (const char *const *e = w->envs; e && *e; e++) {
		if (!env)
			sbx_buf_adds(out, " env");
		env = true;
		sbx_buf_addch(out, ' ');
		sbx_buf_add_shquoted(out, *e);
	}
	if (w->argv && w->argv[0]) {
		for (const char *const *a = w->argv; *a; a++) {
			sbx_buf_addch(out, ' ');
			sbx_buf_add_shquoted(out, *a);
		}
	} else {
		sbx_buf_adds(out, " /bin/sh -c "); /* env's PATH is the command's */
		sbx_buf_add_shquoted(out, w->shell ? w->shell : "");
	}
	sbx_buf_adds(out, "; ");
	if (w->timeout_ms > 0 || w->pidfile)
		sbx_buf_addf(out,
			     "command -v timeout >/dev/null 2>&1 && "
			     "set -- timeout -s KILL %ld.%03ld \"$@\"; ",
			     w->timeout_ms / 1000, w->timeout_ms % 1000);
	if (w->pidfile) {
		/* A child's $PPID is this subshell, which exec turns into the run. */
		sbx_buf_adds(out, "sh -c 'echo \"$PPID $1\"' _ ");
		sbx_buf_add_shquoted(out, w->token);
		sbx_buf_adds(out, " >");
		sbx_buf_add_shquoted(out, w->pidfile);
		sbx_buf_adds(out, " 2>/dev/null; ");
	}
	sbx_buf_adds(out, "exec \"$@\") </dev/null; exit $?)");
	return 0;
}

void dt_kill_command(struct sbx_buf *out, const char *pidfile, const char *token)
{
	sbx_buf_adds(out, "read p t <");
	sbx_buf_add_shquoted(out, pidfile);
	sbx_buf_adds(out, " && [ \"$t\" = ");
	sbx_buf_add_shquoted(out, token);
	sbx_buf_adds(out, " ] && { kill -s KILL -- -\"$p\" 2>/dev/null || kill -s KILL \"$p\"; }");
}
