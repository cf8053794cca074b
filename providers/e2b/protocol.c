/* protocol — see protocol.h. */
#include "e2b/protocol.h"
#include "base/xalloc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base64.h"

static char *xstrdup(const char *s)
{
	return s ? sbx_xstrdup(s) : NULL;
}

/* --- settings ------------------------------------------------------------ */

static const char *setting(json_t *cfg, const char *key, e2b_getenv_fn get, const char *env)
{
	const char *v = cfg ? json_string_value(json_object_get(cfg, key)) : NULL;
	if (v && *v)
		return v;
	v = get ? get(env) : NULL;
	return v && *v ? v : NULL;
}

static char *base_url(const char *v, struct sbx_error *e, const char *what, int *rc)
{
	size_t n;
	char *d;
	if (!v)
		return NULL;
	if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8)) {
		*rc = sbx_error_set(e, EINVAL, SBX_E_INTERNAL, "%s must be an http(s) URL", what);
		return NULL;
	}
	d = xstrdup(v);
	n = strlen(d);
	while (n && d[n - 1] == '/')
		d[--n] = '\0';
	return d;
}

/* A deadline setting in ms: seconds (fractions allowed) or a duration string. */
static int deadline(json_t *cfg, const char *key, long dflt, long *ms, struct sbx_error *e)
{
	json_t *v = cfg ? json_object_get(cfg, key) : NULL;
	double s = -1;
	*ms = dflt;
	if (!v)
		return 0;
	if (json_is_number(v))
		s = json_number_value(v);
	else if (json_is_string(v))
		s = (double)sbx_duration_parse(json_string_value(v));
	if (!(s > 0) || s > 86400)
		return sbx_error_set(
		    e, EINVAL, SBX_E_INTERNAL,
		    "providers.e2b.%s: not a duration (seconds, or \"90s\", \"2m\")", key);
	*ms = (long)(s * 1000 + 0.5);
	return 0;
}

int e2b_settings_load(struct e2b_settings *s, json_t *cfg, e2b_getenv_fn get, struct sbx_error *e)
{
	const char *key = get ? get("E2B_API_KEY") : NULL;
	const char *domain = setting(cfg, "domain", get, "E2B_DOMAIN");
	int rc = 0;
	memset(s, 0, sizeof(*s));
	if (!key || !*key)
		return sbx_error_set(
		    e, EACCES, SBX_E_AUTH,
		    "E2B_API_KEY is not set (the e2b provider needs it: "
		    "export it, or put it in an env_file or a providers.e2b.keyFile)");
	s->api_key = xstrdup(key);
	s->domain = xstrdup(domain ? domain : E2B_DEFAULT_DOMAIN);
	s->api_url = base_url(setting(cfg, "apiUrl", get, "E2B_API_URL"), e, "E2B_API_URL", &rc);
	if (!rc && !s->api_url) {
		struct sbx_buf b = SBX_BUF_INIT;
		sbx_buf_addf(&b, "https://api.%s", s->domain);
		s->api_url = sbx_buf_detach(&b, NULL);
	}
	if (!rc)
		s->sandbox_url = base_url(setting(cfg, "sandboxUrl", get, "E2B_SANDBOX_URL"), e,
					  "E2B_SANDBOX_URL", &rc);
	if (!rc)
		rc = deadline(cfg, "requestTimeout", E2B_REQUEST_TIMEOUT_MS, &s->request_ms, e);
	if (!rc)
		rc = deadline(cfg, "transferTimeout", E2B_TRANSFER_TIMEOUT_MS, &s->transfer_ms, e);
	if (!rc)
		rc = deadline(cfg, "connectTimeout", E2B_CONNECT_TIMEOUT_MS, &s->connect_ms, e);
	if (rc)
		e2b_settings_free(s);
	return rc;
}

void e2b_settings_free(struct e2b_settings *s)
{
	if (!s)
		return;
	if (s->api_key)
		memset(s->api_key, 0, strlen(s->api_key));
	free(s->api_key);
	free(s->api_url);
	free(s->sandbox_url);
	free(s->domain);
	memset(s, 0, sizeof(*s));
}

static bool shared_domain(const char *d)
{
	static const char *const own[] = {"e2b.app", "e2b.dev", "e2b.pro", "e2b-staging.dev", NULL};
	for (const char *const *p = own; *p; p++)
		if (!strcmp(*p, d))
			return true;
	return false;
}

void e2b_envd_base(struct sbx_buf *b, const struct e2b_settings *s, const char *id,
		   const char *domain)
{
	const char *d = domain && *domain ? domain : s->domain;
	if (s->sandbox_url)
		sbx_buf_adds(b, s->sandbox_url);
	else if (shared_domain(d))
		sbx_buf_addf(b, "https://sandbox.%s", d);
	else
		sbx_buf_addf(b, "https://%d-%s.%s", E2B_ENVD_PORT, id, d);
}

bool e2b_is_temp_name(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n = strlen(E2B_TEMP_PREFIX);
	base = base ? base + 1 : path;
	if (strncmp(base, E2B_TEMP_PREFIX, n) || strlen(base) < n + 9 || base[n + 8] != '~')
		return false;
	return strspn(base + n, "0123456789abcdef") == 8;
}

void e2b_host(struct sbx_buf *b, const struct e2b_settings *s, const char *id, const char *domain,
	      int port)
{
	sbx_buf_addf(b, "https://%d-%s.%s", port, id, domain && *domain ? domain : s->domain);
}

/* --- control plane ------------------------------------------------------- */

json_t *e2b_create_body(const struct sbx_spec *spec, const char *lease)
{
	json_t *b = json_object(), *meta = json_object();
	const char *tpl = spec->template_name && *spec->template_name ? spec->template_name
								      : E2B_DEFAULT_TEMPLATE;
	long timeout = spec->res.timeout_s > 0 ? spec->res.timeout_s : E2B_DEFAULT_TIMEOUT_S;
	json_object_set_new(b, "templateID", json_string(tpl));
	json_object_set_new(b, "timeout", json_integer(timeout));
	if (lease)
		json_object_set_new(meta, "sbxfs_lease", json_string(lease));
	json_object_set_new(b, "metadata", meta);
	if (spec->envs && json_object_size(spec->envs))
		json_object_set(b, "envVars", spec->envs);
	/* An expired sandbox pauses (files kept) instead of dying; the core
	 * decides when a lease is reclaimed. */
	json_object_set_new(b, "autoPause", json_true());
	if (spec->network && !strcmp(spec->network, "none"))
		json_object_set_new(b, "allow_internet_access", json_false());
	return b;
}

static char *jstr(json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v && *v ? xstrdup(v) : NULL;
}

int e2b_sandbox_parse(json_t *j, struct e2b_sandbox *sb, struct sbx_error *e)
{
	memset(sb, 0, sizeof(*sb));
	if (!json_is_object(j) || !json_string_value(json_object_get(j, "sandboxID")))
		return sbx_error_set(e, EPROTO, SBX_E_INTERNAL, "reply has no sandboxID");
	sb->id = jstr(j, "sandboxID");
	sb->template_id = jstr(j, "templateID");
	sb->envd_version = jstr(j, "envdVersion");
	sb->domain = jstr(j, "domain");
	sb->access_token = jstr(j, "envdAccessToken");
	sb->traffic_token = jstr(j, "trafficAccessToken");
	sb->state = jstr(j, "state");
	sb->started_at = jstr(j, "startedAt");
	sb->end_at = jstr(j, "endAt");
	sb->cpu_count = (long)json_integer_value(json_object_get(j, "cpuCount"));
	sb->memory_mb = (long)json_integer_value(json_object_get(j, "memoryMB"));
	sb->disk_mb = (long)json_integer_value(json_object_get(j, "diskSizeMB"));
	if (!sb->id || strlen(sb->id) >= sizeof(((struct sbx_instance *)0)->id)) {
		e2b_sandbox_free(sb);
		return sbx_error_set(e, EPROTO, SBX_E_INTERNAL, "reply has a bad sandboxID");
	}
	return 0;
}

static void free_secret(char *s)
{
	if (s)
		memset(s, 0, strlen(s));
	free(s);
}

void e2b_sandbox_free(struct e2b_sandbox *sb)
{
	if (!sb)
		return;
	free(sb->id);
	free(sb->template_id);
	free(sb->envd_version);
	free(sb->domain);
	free_secret(sb->access_token);
	free_secret(sb->traffic_token);
	free(sb->state);
	free(sb->started_at);
	free(sb->end_at);
	memset(sb, 0, sizeof(*sb));
}

int e2b_api_error(long status, const char *body, size_t len, const char *what, struct sbx_error *e)
{
	json_t *root = len ? json_loadb(body, len, 0, NULL) : NULL;
	const char *msg = json_string_value(json_object_get(root, "message"));
	enum sbx_errcode code = SBX_E_NONE;
	int err = sbx_errno_from_http(status);
	int ret;
	if (status == 503) {
		err = EAGAIN; /* "service temporarily unavailable, please retry" */
	} else if (status == 502) {
		code = SBX_E_CONNECTION_FAILED;
	} else if (status == 401 || status == 403) {
		/* What to fix, whatever the server's own words were. */
		ret = sbx_error_set(e, EACCES, SBX_E_AUTH,
				    "%s: E2B refused the API key (%ld)%s%s; check E2B_API_KEY",
				    what, status, msg ? ": " : "", msg ? msg : "");
		json_decref(root);
		return ret;
	}
	if (!err)
		err = EIO; /* a 2xx is no failure; callers never pass one */
	ret = sbx_error_set(e, err, code, "%s: %ld %s", what, status,
			    msg ? msg : (status == 429 ? "rate limited" : "request failed"));
	json_decref(root);
	return ret;
}

/* --- protobuf JSON ------------------------------------------------------- */

int e2b_parse_time(const char *s, struct timespec *ts)
{
	struct tm tm = {0};
	int n = 0, sign;
	long nsec = 0, scale = 100000000L, off = 0;
	const char *p;
	if (!s ||
	    sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
		   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
	    n != 19)
		return -EINVAL;
	p = s + n;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++) {
			nsec += (*p - '0') * scale;
			scale /= 10;
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int hh, mm;
		sign = *p == '-' ? -1 : 1;
		if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
			return -EINVAL;
		off = sign * (hh * 3600L + mm * 60L);
		p += 6;
	} else {
		return -EINVAL;
	}
	if (*p)
		return -EINVAL;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	ts->tv_sec = timegm(&tm) - off;
	ts->tv_nsec = nsec;
	return 0;
}

int e2b_json_int64(json_t *v, long long *out)
{
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	if (json_is_real(v)) {
		*out = (long long)json_real_value(v);
		return 0;
	}
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		char *end;
		errno = 0;
		*out = strtoll(s, &end, 10);
		return errno || end == s || *end ? -EINVAL : 0;
	}
	*out = 0;
	return v ? -EINVAL : 0;
}

/* FileType as a name or an enum number. */
static int file_type(json_t *v)
{
	static const char *const names[] = {"FILE_TYPE_UNSPECIFIED", "FILE_TYPE_FILE",
					    "FILE_TYPE_DIRECTORY", "FILE_TYPE_SYMLINK"};
	if (json_is_integer(v))
		return (int)json_integer_value(v);
	for (int i = 0; json_is_string(v) && i < 4; i++)
		if (!strcmp(json_string_value(v), names[i]))
			return i;
	return 0;
}

int e2b_entry_to_stat(json_t *entry, struct sbx_rmeta_ids *ids, struct sbx_stat *st)
{
	int type = file_type(json_object_get(entry, "type"));
	const char *target = json_string_value(json_object_get(entry, "symlinkTarget"));
	const char *perms = json_string_value(json_object_get(entry, "permissions"));
	json_t *mode = json_object_get(entry, "mode");
	long long size = 0;
	memset(st, 0, sizeof(*st));
	if (!json_is_object(entry))
		return -EINVAL;
	if (e2b_json_int64(json_object_get(entry, "size"), &size) || size < 0)
		size = 0;
	/*
	 * `permissions` (Go's FileMode.String() of lstat) has the entry's own
	 * type, fifos and devices included, and the setuid, setgid and sticky
	 * bits; `type` and `mode` describe a symlink's target and a fifo's type
	 * is UNSPECIFIED. So they are the fallback of an envd without it.
	 */
	if (!sbx_rmeta_gomode(perms, &st->mode)) {
		if (S_ISLNK(st->mode))
			st->mode = S_IFLNK | 0777;
	} else {
		st->mode = (mode_t)(json_integer_value(mode) & 07777);
		if (target || type == 3) {
			st->mode = S_IFLNK | 0777;
			size = target ? (long long)strlen(target) : 0;
		} else if (type == 1) {
			st->mode |= S_IFREG;
		} else if (type == 2) {
			st->mode |= S_IFDIR;
		} else {
			return -EINVAL;
		}
		if (!json_is_integer(mode) && !S_ISLNK(st->mode))
			st->mode |= S_ISDIR(st->mode) ? 0755 : 0644;
	}
	/* A symlink's size is its text's length (lstat), as envd sends it. */
	st->size = (off_t)size;
	st->nlink = S_ISDIR(st->mode) ? 2 : 1;
	st->uid = sbx_rmeta_id(ids, json_string_value(json_object_get(entry, "owner")), false);
	st->gid = sbx_rmeta_id(ids, json_string_value(json_object_get(entry, "group")), true);
	if (e2b_parse_time(json_string_value(json_object_get(entry, "modifiedTime")), &st->mtime))
		memset(&st->mtime, 0, sizeof(st->mtime));
	st->atime = st->mtime;
	st->ctime = st->mtime;
	return 0;
}

/* --- process ------------------------------------------------------------- */

/* json_string(s), noting in *bad a string JSON cannot carry (not UTF-8). */
static json_t *json_str_noting(const char *s, bool *bad)
{
	json_t *v = json_string(s);
	if (!v)
		*bad = true;
	return v;
}

json_t *e2b_start_body(const char *shell, const char *const *argv, const char *const *envs,
		       const char *cwd)
{
	json_t *proc = json_object(), *args = json_array(), *body = json_object();
	bool bad = false;
	if (shell) {
		json_object_set_new(proc, "cmd", json_string("/bin/bash"));
		json_array_append_new(args, json_string("-l"));
		json_array_append_new(args, json_string("-c"));
		json_array_append_new(args, json_str_noting(shell, &bad));
	} else {
		json_object_set_new(proc, "cmd", json_str_noting(argv[0], &bad));
		for (size_t i = 1; argv[i]; i++)
			json_array_append_new(args, json_str_noting(argv[i], &bad));
	}
	json_object_set_new(proc, "args", args);
	if (envs && envs[0]) {
		json_t *o = json_object();
		for (size_t i = 0; envs[i]; i++) {
			const char *eq = strchr(envs[i], '=');
			char key[256];
			if (!eq || eq == envs[i] || (size_t)(eq - envs[i]) >= sizeof(key))
				continue;
			memcpy(key, envs[i], (size_t)(eq - envs[i]));
			key[eq - envs[i]] = '\0';
			json_object_set_new(o, key, json_str_noting(eq + 1, &bad));
		}
		json_object_set_new(proc, "envs", o);
	}
	if (cwd)
		json_object_set_new(proc, "cwd", json_str_noting(cwd, &bad));
	json_object_set_new(body, "process", proc);
	json_object_set_new(body, "stdin", json_false());
	if (bad) { /* a command, argument, env value or cwd that is not UTF-8 */
		json_decref(body);
		return NULL;
	}
	return body;
}

void e2b_proc_event_init(struct e2b_proc_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	sbx_buf_init(&ev->data);
}

void e2b_proc_event_release(struct e2b_proc_event *ev)
{
	sbx_buf_release(&ev->data);
}

/* Go's signal names in ProcessState.String() ("signal: killed"). */
static int signal_number(const char *status)
{
	static const struct {
		const char *name;
		int sig;
	} sigs[] = {{"killed", SIGKILL},
		    {"terminated", SIGTERM},
		    {"interrupt", SIGINT},
		    {"hangup", SIGHUP},
		    {"aborted", SIGABRT},
		    {"quit", SIGQUIT},
		    {"segmentation fault", SIGSEGV},
		    {"broken pipe", SIGPIPE},
		    {"bus error", SIGBUS},
		    {"floating point exception", SIGFPE},
		    {"user defined signal 1", SIGUSR1},
		    {"user defined signal 2", SIGUSR2},
		    {"alarm clock", SIGALRM}};
	const char *p = strncmp(status, "signal: ", 8) ? NULL : status + 8;
	for (size_t i = 0; p && i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (!strncmp(p, sigs[i].name, strlen(sigs[i].name)))
			return sigs[i].sig;
	return p ? SIGKILL : 0;
}

static int parse_data(json_t *d, struct e2b_proc_event *ev, struct sbx_error *e)
{
	static const char *const keys[] = {"stdout", "stderr", "pty"};
	static const int streams[] = {SBX_STDOUT, SBX_STDERR, 0};
	for (int i = 0; i < 3; i++) {
		const char *s = json_string_value(json_object_get(d, keys[i]));
		if (!s)
			continue;
		ev->stream = streams[i];
		if (sbx_base64_decode(s, strlen(s), &ev->data))
			return sbx_error_set(e, EPROTO, SBX_E_INTERNAL, "bad base64 in %s",
					     keys[i]);
		return 0;
	}
	return 0;
}

int e2b_proc_event_parse(const char *json, size_t len, struct e2b_proc_event *ev,
			 struct sbx_error *e)
{
	json_t *root = json_loadb(json, len, 0, NULL), *evt, *v;
	int ret = 0;
	ev->kind = E2B_PROC_OTHER;
	sbx_buf_reset(&ev->data);
	evt = json_object_get(root, "event");
	if (!json_is_object(evt)) {
		json_decref(root);
		return sbx_error_set(e, EPROTO, SBX_E_INTERNAL, "process message without event");
	}
	if ((v = json_object_get(evt, "start"))) {
		ev->kind = E2B_PROC_START;
		ev->pid = (unsigned)json_integer_value(json_object_get(v, "pid"));
	} else if ((v = json_object_get(evt, "data"))) {
		ev->kind = E2B_PROC_DATA;
		ret = parse_data(v, ev, e);
	} else if ((v = json_object_get(evt, "end"))) {
		long long code = 0;
		const char *status = json_string_value(json_object_get(v, "status"));
		ev->kind = E2B_PROC_END;
		e2b_json_int64(json_object_get(v, "exitCode"), &code);
		if (!code)
			e2b_json_int64(json_object_get(v, "exit_code"), &code);
		ev->exited = json_is_true(json_object_get(v, "exited"));
		snprintf(ev->status, sizeof(ev->status), "%s", status ? status : "");
		ev->exit_code = (int)code;
		if (!ev->exited && signal_number(ev->status))
			ev->exit_code = 128 + signal_number(ev->status);
		else if (ev->exit_code < 0)
			ev->exit_code = 128 + SIGKILL;
	} else if (json_object_get(evt, "keepalive")) {
		ev->kind = E2B_PROC_KEEPALIVE;
	}
	json_decref(root);
	return ret;
}

int e2b_watch_event_parse(const char *json, size_t len, enum e2b_watch_kind *kind, char *name,
			  size_t size)
{
	json_t *root = json_loadb(json, len, 0, NULL), *fs;
	*kind = E2B_WATCH_OTHER;
	if (!json_is_object(root)) {
		json_decref(root);
		return -EPROTO;
	}
	if (json_object_get(root, "start")) {
		*kind = E2B_WATCH_START;
	} else if (json_object_get(root, "keepalive")) {
		*kind = E2B_WATCH_KEEPALIVE;
	} else if ((fs = json_object_get(root, "filesystem"))) {
		const char *n = json_string_value(json_object_get(fs, "name"));
		*kind = E2B_WATCH_EVENT;
		snprintf(name, size, "%s", n ? n : "");
	}
	json_decref(root);
	return 0;
}
