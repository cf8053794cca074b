/*
 * daytona/api — the Daytona provider's ops table and control plane:
 * settings and credentials (init), create / attach / pause (= stop) /
 * unpause (= start) / kill (= delete) / probe / info / get_host /
 * list_sandboxes (GET /sandbox, cursor pages), the
 * state-change waits. See doc/protocols/daytona.md for the wire protocol.
 *
 * Not here: the request helpers (transport.c), file ops (files.c), runs
 * and sessions (run.c), helper commands and /files/permissions
 * (toolbox.c), the batched metadata commands (batch.c), wire formats
 * (protocol.c, multipart.c).
 *
 * Decisions (providers/daytona/README.md repeats them for users):
 *  - credentials come from the environment only (DAYTONA_API_KEY, or
 *    DAYTONA_JWT_TOKEN + DAYTONA_ORGANIZATION_ID); an apiKey/jwtToken in
 *    the config file is ignored with a warning, since that file is
 *    readable and copied around. apiUrl, target, organizationId may come
 *    from `providers.daytona` (the environment wins), and so do the
 *    deadlines timeout (state changes), requestTimeout, transferTimeout
 *    and connectTimeout.
 *  - autoStopInterval is a backstop behind sbxfs' own idle timer
 *    (dt_auto_stop_minutes), so Daytona stops a sandbox whose mount died.
 *  - get_host gives the preview URL, then the header line
 *    X-Daytona-Preview-Token: TOKEN that a private sandbox needs (issue 14:
 *    users need it to reach the port; it is never logged).
 *  - info answers from the last DTO seen (no request), so reading `info`
 *    never waits on Daytona.
 *  - a create that fails after the POST deletes the half-made sandbox, so
 *    nothing is left running (and billed) that no lease knows of.
 */
#include "daytona/daytona.h"
#include "daytona/readmany.h"
#include "base/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"

/* --- settings ---------------------------------------------------------------- */

/* A deadline from providers.daytona.KEY (seconds or "90s", "2m") into *ms. */
static int deadline(json_t *cfg, const char *key, long dflt, long *ms, struct sbx_error *err)
{
	json_t *v = json_object_get(cfg, key);
	long s = v ? sbx_duration_json(v) : 0;
	*ms = dflt;
	if (!v)
		return 0;
	if (s <= 0)
		return sbx_error_set(
		    err, EINVAL, SBX_E_INTERNAL,
		    "providers.daytona.%s: not a duration (seconds, \"90s\", \"2m\")", key);
	*ms = s * 1000;
	return 0;
}

/*
 * The config's string `key`, else the environment's value, else NULL: what
 * is set for this mount beats the environment, as in Daytona's SDKs (a
 * DaytonaConfig field beats DAYTONA_*) and for e2b (doc/CONTRACT.md §3).
 */
static const char *setting(json_t *cfg, const char *env, const char *key)
{
	const char *v = key ? json_string_value(json_object_get(cfg, key)) : NULL;
	if (v && *v)
		return v;
	v = env ? getenv(env) : NULL;
	return v && *v ? v : NULL;
}

static char *header_line(const char *name, const char *value)
{
	char *s;
	s = sbx_xasprintf("%s: %s", name, value);
	return s;
}

static void conf_clear(void)
{
	dt_auth_clear();
	free(dt_conf.org);
	free(dt_conf.api_url);
	free(dt_conf.target);
	sbx_http_client_free(dt_conf.http);
	memset(&dt_conf, 0, sizeof(dt_conf));
}

static int daytona_init(const struct sbx_provider_env *env, struct sbx_error *err)
{
	json_t *cfg = env && json_is_object(env->settings) ? env->settings : NULL;
	const char *key = env && env->api_key ? env->api_key : getenv("DAYTONA_API_KEY");
	const char *jwt = getenv("DAYTONA_JWT_TOKEN");
	const char *org = setting(cfg, "DAYTONA_ORGANIZATION_ID", "organizationId");
	const char *url = setting(cfg, "DAYTONA_API_URL", "apiUrl");
	const char *target = setting(cfg, "DAYTONA_TARGET", "target");
	struct sbx_http_settings hs = {0};
	size_t n;
	int rc;

	conf_clear();
	if (env && env->key_error) {
		rc = -env->key_error->err;
		if (err)
			*err = *env->key_error;
		goto fail;
	}
	if (json_object_get(cfg, "apiKey") || json_object_get(cfg, "jwtToken"))
		sbx_log(SBX_LOG_WARN, "daytona: ignoring the credential in the config file; "
				      "set DAYTONA_API_KEY in the environment");
	if (key && *key) {
		org = NULL; /* an API key names its organisation itself */
	} else if (jwt && *jwt) {
		if (!org) {
			rc = sbx_error_set(
			    err, EACCES, SBX_E_AUTH,
			    "DAYTONA_ORGANIZATION_ID is required with DAYTONA_JWT_TOKEN");
			goto fail;
		}
		key = jwt;
	} else {
		rc = sbx_error_set(
		    err, EACCES, SBX_E_AUTH,
		    "DAYTONA_API_KEY is not set (the daytona provider needs it: export "
		    "it, or put it in an env_file or a providers.daytona.keyFile)");
		goto fail;
	}
	dt_auth_start(env, key);
	if (org)
		dt_conf.org = header_line("X-Daytona-Organization-ID", org);
	dt_conf.api_url = sbx_xstrdup(url ? url : "https://app.daytona.io/api");
	n = strlen(dt_conf.api_url);
	while (n && dt_conf.api_url[n - 1] == '/')
		dt_conf.api_url[--n] = '\0';
	if (strncmp(dt_conf.api_url, "https://", 8) && strncmp(dt_conf.api_url, "http://", 7)) {
		rc = sbx_error_set(err, EINVAL, SBX_E_INTERNAL,
				   "DAYTONA_API_URL must be an http(s) URL");
		goto fail;
	}
	dt_conf.target = target ? sbx_xstrdup(target) : NULL;
	if ((rc = deadline(cfg, "timeout", DT_STATE_TIMEOUT_MS, &dt_conf.state_timeout_ms, err)) ||
	    (rc = deadline(cfg, "requestTimeout", DT_REQUEST_TIMEOUT_MS, &dt_conf.request_ms,
			   err)) ||
	    (rc = deadline(cfg, "transferTimeout", DT_TRANSFER_TIMEOUT_MS, &dt_conf.transfer_ms,
			   err)) ||
	    (rc = deadline(cfg, "connectTimeout", DT_CONNECT_TIMEOUT_MS, &dt_conf.connect_ms, err)))
		goto fail;
	hs.timeout_ms = dt_conf.request_ms;
	hs.idle_ms = dt_conf.transfer_ms;
	hs.connect_timeout_ms = dt_conf.connect_ms;
	dt_conf.http = sbx_http_client_new(&hs);
	if (!dt_conf.http) {
		rc = sbx_error_set(err, ENOMEM, SBX_E_INTERNAL, "out of memory");
		goto fail;
	}
	return 0;
fail:
	conf_clear();
	if (err)
		dt_conf.init_err = *err;
	else
		sbx_error_set(&dt_conf.init_err, rc, SBX_E_INTERNAL, "daytona: init failed");
	return rc;
}

static void daytona_shutdown(void)
{
	conf_clear();
}

/* --- instances ------------------------------------------------------------------ */

void dt_facts_set(struct dt_instance *di, const struct dt_sandbox *sb)
{
	pthread_mutex_lock(&di->lock);
	di->facts = *sb;
	di->facts_at = time(NULL);
	pthread_mutex_unlock(&di->lock);
}

static struct dt_instance *inst_new(const struct sbx_spec *spec, const struct dt_sandbox *sb)
{
	struct dt_instance *di = sbx_xcalloc(1, sizeof(*di));
	di->base.prov = &sbx_provider_daytona;
	snprintf(di->base.id, sizeof(di->base.id), "%s", sb->id);
	if (spec)
		sbx_spec_copy(&di->spec, spec); /* copy initialises dst itself */
	else
		sbx_spec_init(&di->spec);
	pthread_mutex_init(&di->lock, NULL);
	sbx_rme_init(&di->meta, &dt_meta_slots, di);
	sbx_rmeta_gate_init(&di->placing);
	sbx_rmeta_fails_init(&di->fails);
	sbx_rmeta_df_init(&di->df);
	di->facts = *sb;
	di->facts_at = time(NULL);
	di->user_uid = di->user_gid = -1;
	return di;
}

static void daytona_release(struct sbx_instance *inst)
{
	struct dt_instance *di = dt_inst(inst);
	if (!di)
		return;
	sbx_rme_stop_timer(&di->meta);
	inst->report = NULL; /* the lease is going: a last failure is only logged */
	/* Unmount: queued metadata changes still go in (a kill dropped them). */
	if (!di->toolbox)
		sbx_rme_drop(&di->meta);
	sbx_rme_stop(&di->meta); /* failures go to their paths (logged) */
	sbx_rme_destroy(&di->meta);
	dt_sessions_drop(di);
	dt_links_clear(di);
	sbx_rmeta_fails_destroy(&di->fails);
	sbx_spec_free(&di->spec);
	free(di->toolbox);
	pthread_mutex_destroy(&di->lock);
	sbx_rmeta_gate_destroy(&di->placing);
	free(di);
}

/* GET /sandbox/{id} into sb (and the instance's facts when di is set). */
static int get_sandbox(const char *id, struct dt_instance *di, struct dt_sandbox *sb,
		       struct sbx_error *err)
{
	struct sbx_buf url = SBX_BUF_INIT;
	char what[200];
	json_t *dto = NULL;
	int rc;
	snprintf(what, sizeof(what), "sandbox %s", id);
	dt_sandbox_url(&url, id, NULL);
	rc = dt_call(
	    &(struct dt_call){.url = url.buf, .reply = &dto, .what = what, .idempotent = true},
	    err);
	if (!rc)
		rc = dt_sandbox_parse(dto, sb, err);
	if (!rc && di)
		dt_facts_set(di, sb);
	json_decref(dto);
	sbx_buf_release(&url);
	return rc;
}

/* Sets di->toolbox from the DTO, or from /toolbox-proxy-url when it lacks one. */
static int toolbox_setup(struct dt_instance *di, const struct dt_sandbox *sb, struct sbx_error *err)
{
	struct sbx_buf url = SBX_BUF_INIT, base = SBX_BUF_INIT;
	json_t *j = NULL;
	int rc = 0;
	if (sb->toolbox_url[0]) {
		sbx_buf_adds(&base, sb->toolbox_url);
	} else {
		dt_sandbox_url(&url, sb->id, "/toolbox-proxy-url");
		rc = dt_call(&(struct dt_call){.url = url.buf,
					       .reply = &j,
					       .what = "toolbox-proxy-url",
					       .idempotent = true},
			     err);
		if (!rc && !json_is_string(json_object_get(j, "url")))
			rc = sbx_error_set(err, EIO, SBX_E_INTERNAL, "toolbox-proxy-url: no url");
		if (!rc)
			sbx_buf_adds(&base, json_string_value(json_object_get(j, "url")));
		while (base.len && base.buf[base.len - 1] == '/')
			base.buf[--base.len] = '\0';
	}
	if (!rc) {
		sbx_buf_addch(&base, '/');
		sbx_http_add_escaped(&base, sb->id);
		free(di->toolbox);
		di->toolbox = sbx_buf_detach(&base, NULL);
	}
	json_decref(j);
	sbx_buf_release(&url);
	sbx_buf_release(&base);
	return rc;
}

/*
 * Polls GET /sandbox/{id} until its phase is `want` (STARTED or STOPPED),
 * starting from the state in *sb. A 404 while stopping counts as gone.
 */
static int wait_phase(struct dt_instance *di, struct dt_sandbox *sb, enum dt_phase want,
		      struct sbx_error *err)
{
	long deadline = sbx_now_ms() + dt_conf.state_timeout_ms, delay = 100;
	for (;;) {
		enum dt_phase ph = dt_state_phase(sb->state);
		int rc;
		if (ph == want)
			return 0;
		if (ph == DT_PHASE_FAILED)
			return sbx_error_set(
			    err, EIO, SBX_E_EXECUTION_FAILED, "sandbox %s failed with state %s%s%s",
			    sb->id, sb->state, sb->error_reason[0] ? ": " : "", sb->error_reason);
		if (ph == DT_PHASE_GONE)
			return sbx_error_set(err, ENOENT, 0, "sandbox %s is %s", sb->id, sb->state);
		if (sbx_now_ms() + delay > deadline)
			return sbx_error_set(err, ETIMEDOUT, 0, "sandbox %s still %s after %ld s",
					     sb->id, sb->state[0] ? sb->state : "unknown",
					     dt_conf.state_timeout_ms / 1000);
		dt_sleep_ms(delay);
		delay = delay * 3 / 2 > 1000 ? 1000 : delay * 3 / 2;
		rc = get_sandbox(di->base.id, di, sb, err);
		if (rc == -ENOENT && want == DT_PHASE_STOPPED)
			return sbx_error_set(err, ENOENT, 0, "sandbox %s is gone", di->base.id);
		if (rc)
			return rc;
	}
}

/* Installs the spec's packages with pip (python) or npm (javascript, typescript). */
static int install_packages(struct dt_instance *di, struct sbx_error *err)
{
	const char *lang = di->spec.language ? di->spec.language : "python";
	bool py = !strcmp(lang, "python");
	struct sbx_buf cmd = SBX_BUF_INIT, out = SBX_BUF_INIT;
	size_t i;
	json_t *p;
	int rc, code = 0;

	if (!json_array_size(di->spec.packages))
		return 0;
	if (di->spec.working_dir && !py) {
		sbx_buf_adds(&cmd, "cd ");
		sbx_buf_add_shquoted(&cmd, di->spec.working_dir);
		sbx_buf_adds(&cmd, " && ");
	}
	sbx_buf_adds(&cmd, py ? "pip install -q --disable-pip-version-check --"
			      : "npm install --no-audit --no-fund --silent --");
	json_array_foreach(di->spec.packages, i, p)
	{
		sbx_buf_addch(&cmd, ' ');
		sbx_buf_add_shquoted(&cmd, json_string_value(p));
	}
	sbx_buf_adds(&cmd, " 2>&1 </dev/null");
	rc = dt_exec(di, cmd.buf, 600000, &out, &code, err);
	if (!rc && code) {
		/* The tail says why (pip and npm end with the error). */
		const char *tail = out.len > 200 ? out.buf + out.len - 200 : out.buf;
		rc = sbx_error_set(err, EIO, SBX_E_EXECUTION_FAILED,
				   "installing packages failed (exit %d): %s", code, tail);
	}
	sbx_buf_release(&cmd);
	sbx_buf_release(&out);
	return rc;
}

static void delete_quietly(const char *id)
{
	struct sbx_buf url = SBX_BUF_INIT;
	struct sbx_error e = SBX_ERROR_INIT;
	dt_sandbox_url(&url, id, NULL);
	if (dt_call(
		&(struct dt_call){
		    .method = "DELETE", .url = url.buf, .what = "delete", .idempotent = true},
		&e))
		sbx_log(SBX_LOG_WARN, "daytona: could not delete sandbox %s: %s", id, e.msg);
	sbx_buf_release(&url);
}

static int daytona_create(const struct sbx_spec *spec, const char *lease, struct sbx_instance **out,
			  struct sbx_error *err)
{
	struct sbx_buf url = SBX_BUF_INIT;
	struct dt_sandbox sb;
	struct dt_instance *di = NULL;
	json_t *body, *dto = NULL;
	int rc;

	*out = NULL;
	if ((rc = dt_ready(err)))
		return rc;
	body =
	    dt_create_body(spec, lease, dt_conf.target, dt_auto_stop_minutes(spec->idle_timeout_s));
	dt_sandbox_url(&url, NULL, NULL);
	/* Not idempotent: a retried POST could make a second sandbox. */
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .body = body,
				       .reply = &dto,
				       .what = "create sandbox",
				       .timeout_ms = dt_conf.state_timeout_ms},
		     err);
	json_decref(body);
	if (rc)
		goto out;
	if ((rc = dt_sandbox_parse(dto, &sb, err)))
		goto out;
	di = inst_new(spec, &sb);
	if ((rc = wait_phase(di, &sb, DT_PHASE_STARTED, err)) ||
	    (rc = toolbox_setup(di, &sb, err)) || (rc = install_packages(di, err))) {
		sbx_error_prefix(err, "create");
		delete_quietly(sb.id);
		daytona_release(&di->base);
		goto out;
	}
	*out = &di->base;
out:
	json_decref(dto);
	sbx_buf_release(&url);
	return rc;
}

static int daytona_attach(const struct sbx_spec *spec, const char *sandbox_id, json_t *saved,
			  struct sbx_instance **out, struct sbx_error *err)
{
	struct dt_sandbox sb;
	struct dt_instance *di;
	int rc;

	*out = NULL;
	if ((rc = dt_ready(err)) || (rc = get_sandbox(sandbox_id, NULL, &sb, err)))
		return rc;
	if (dt_state_phase(sb.state) == DT_PHASE_GONE)
		return sbx_error_set(err, ENOENT, 0, "sandbox %s is %s", sandbox_id, sb.state);
	di = inst_new(spec, &sb);
	if ((rc = toolbox_setup(di, &sb, err))) {
		daytona_release(&di->base);
		return rc;
	}
	*out = &di->base;
	return 0;
}

/* POST /sandbox/{id}/{verb} and waits for `want`. */
static int change_state(struct sbx_instance *inst, const char *verb, enum dt_phase want,
			struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct sbx_buf url = SBX_BUF_INIT;
	struct dt_sandbox sb;
	json_t *dto = NULL;
	char what[160];
	int rc;

	snprintf(what, sizeof(what), "%s %s", verb, inst->id);
	dt_sandbox_url(&url, inst->id, want == DT_PHASE_STOPPED ? "/stop?force=false" : "/start");
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .empty_post = true,
				       .reply = &dto,
				       .what = what,
				       .timeout_ms = dt_conf.state_timeout_ms,
				       .idempotent = true},
		     err);
	/* Already there is success (stop of a stopped sandbox is a 400). */
	if (rc == -EINVAL && !get_sandbox(inst->id, di, &sb, NULL) &&
	    dt_state_phase(sb.state) == want)
		rc = 0;
	else if (!rc && !(rc = dt_sandbox_parse(dto, &sb, err)))
		dt_facts_set(di, &sb);
	if (!rc)
		rc = wait_phase(di, &sb, want, err);
	/* Stopping or starting restarts the daemon: its sessions are gone. */
	dt_sessions_drop(di);
	json_decref(dto);
	sbx_buf_release(&url);
	return rc;
}

static int daytona_pause(struct sbx_instance *inst, struct sbx_error *err)
{
	return change_state(inst, "stop", DT_PHASE_STOPPED, err);
}

static int daytona_unpause(struct sbx_instance *inst, struct sbx_error *err)
{
	return change_state(inst, "start", DT_PHASE_STARTED, err);
}

static int daytona_kill(struct sbx_instance *inst, struct sbx_error *err)
{
	struct sbx_buf url = SBX_BUF_INIT;
	char what[160];
	int rc;
	sbx_rme_drop(&dt_inst(inst)->meta); /* nothing to apply to a deleted sandbox */
	snprintf(what, sizeof(what), "delete %s", inst->id);
	dt_sandbox_url(&url, inst->id, NULL);
	rc = dt_call(
	    &(struct dt_call){.method = "DELETE", .url = url.buf, .what = what, .idempotent = true},
	    err);
	sbx_buf_release(&url);
	return rc;
}

static int daytona_probe(struct sbx_instance *inst, enum sbx_remote_state *state,
			 struct sbx_error *err)
{
	struct dt_sandbox sb;
	int rc = get_sandbox(inst->id, dt_inst(inst), &sb, err);
	*state = SBX_REMOTE_UNKNOWN;
	if (rc == -ENOENT) {
		*state = SBX_REMOTE_GONE;
		sbx_error_clear(err);
		return 0;
	}
	if (rc)
		return rc;
	switch (dt_state_phase(sb.state)) {
	case DT_PHASE_STARTED:
		*state = SBX_REMOTE_RUNNING;
		break;
	case DT_PHASE_STOPPED:
		*state = SBX_REMOTE_PAUSED;
		break;
	case DT_PHASE_GONE:
		*state = SBX_REMOTE_GONE;
		break;
	default:
		break;
	}
	return 0;
}

/* GET /sandbox?limit=100&cursor=..., page after page (bounded: a looping server cannot hold us). */
static int daytona_list_sandboxes(sbx_sandbox_fn fn, void *ctx, struct sbx_error *err)
{
	char cursor[512] = "";
	int rc = dt_ready(err);
	for (int page = 0; page < 1000 && !rc; page++) {
		struct sbx_buf url = SBX_BUF_INIT;
		json_t *reply = NULL;
		dt_sandbox_url(&url, NULL, NULL);
		sbx_http_add_query(&url, "limit", "100");
		if (*cursor)
			sbx_http_add_query(&url, "cursor", cursor);
		rc = dt_call(&(struct dt_call){.url = url.buf,
					       .reply = &reply,
					       .what = "list sandboxes",
					       .idempotent = true},
			     err);
		if (!rc)
			rc = dt_sandbox_page(reply, fn, ctx, cursor, sizeof(cursor), err);
		json_decref(reply);
		sbx_buf_release(&url);
		if (!*cursor)
			break;
	}
	return rc;
}

static int daytona_info(struct sbx_instance *inst, json_t **out, struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	json_t *j = json_object();
	char when[32];
	struct tm tm;

	pthread_mutex_lock(&di->lock);
	json_object_set_new(j, "remoteState", json_string(di->facts.state));
	if (di->facts.snapshot[0])
		json_object_set_new(j, "snapshot", json_string(di->facts.snapshot));
	json_object_set_new(j, "cpu", json_real(di->facts.cpu));
	json_object_set_new(j, "gpu", json_real(di->facts.gpu));
	json_object_set_new(j, "memoryGiB", json_real(di->facts.memory_gib));
	json_object_set_new(j, "diskGiB", json_real(di->facts.disk_gib));
	if (di->facts.target[0])
		json_object_set_new(j, "target", json_string(di->facts.target));
	if (di->facts.language[0])
		json_object_set_new(j, "language", json_string(di->facts.language));
	if (di->facts.error_reason[0])
		json_object_set_new(j, "errorReason", json_string(di->facts.error_reason));
	gmtime_r(&di->facts_at, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_object_set_new(j, "remoteStateAt", json_string(when));
	pthread_mutex_unlock(&di->lock);
	if (di->toolbox)
		json_object_set_new(j, "toolbox", json_string(di->toolbox));
	*out = j;
	return 0;
}

static int daytona_get_host(struct sbx_instance *inst, int port, char *buf, size_t size,
			    struct sbx_error *err)
{
	struct sbx_buf url = SBX_BUF_INIT;
	char suffix[64], what[64];
	json_t *j = NULL;
	const char *u, *tok;
	int rc;

	if (port <= 0 || port > 65535)
		return sbx_error_set(err, EINVAL, 0, "port %d is out of range", port);
	snprintf(suffix, sizeof(suffix), "/ports/%d/preview-url", port);
	snprintf(what, sizeof(what), "preview url of port %d", port);
	dt_sandbox_url(&url, inst->id, suffix);
	rc = dt_call(
	    &(struct dt_call){.url = url.buf, .reply = &j, .what = what, .idempotent = true}, err);
	/* The token goes only into ports/PORT (a header line), never into a log. */
	if (!rc && !(u = json_string_value(json_object_get(j, "url"))))
		rc = sbx_error_set(err, EIO, SBX_E_INTERNAL, "%s: no url in the reply", what);
	tok = json_string_value(json_object_get(j, "token"));
	if (!rc &&
	    snprintf(buf, size, "%s%s%s", u, tok && *tok ? "\nX-Daytona-Preview-Token: " : "",
		     tok && *tok ? tok : "") >= (int)size)
		rc = sbx_error_set(err, ERANGE, 0, "%s: url too long", what);
	json_decref(j);
	sbx_buf_release(&url);
	return rc;
}

const struct sbx_provider sbx_provider_daytona = {
    .abi = SBX_PROVIDER_ABI,
    .name = "daytona",
    .caps = SBX_CAP_LIST_ATTRS | SBX_CAP_UTF8_TEXT | SBX_CAP_RANGE_READ,
    .init = daytona_init,
    .shutdown = daytona_shutdown,
    .key_var = "DAYTONA_API_KEY",
    .set_key = dt_set_key,
    .create = daytona_create,
    .attach = daytona_attach,
    .release = daytona_release,
    .pause = daytona_pause,
    .unpause = daytona_unpause,
    .kill = daytona_kill,
    .probe = daytona_probe,
    .info = daytona_info,
    .get_host = daytona_get_host,
    .run = dt_run,
    .run_code = dt_run_code,
    .code_reset = dt_code_reset,
    .stat = dt_stat,
    .list = sbx_rmeta_list,
    .read = dt_read,
    .read_many = dt_read_many,
    .write = dt_write,
    .write_new = dt_write_new,
    .write_inplace = dt_write_inplace,
    .write_new_many = dt_write_new_many,
    .truncate = dt_truncate,
    .mkdir = dt_mkdir,
    .unlink = dt_unlink,
    .rmdir = dt_rmdir,
    .rmdir_empty = dt_rmdir_empty,
    .mkdir_new = dt_mkdir_new,
    .list_tree = dt_list_tree,
    .rename = dt_rename,
    .chmod = dt_chmod,
    .chown = dt_chown,
    .utimens = dt_utimens,
    .symlink = dt_symlink,
    .readlink = dt_readlink,
    .readlinks = dt_readlinks,
    .link = dt_link,
    .mknod = dt_mknod,
    .statfs = dt_statfs,
    .sync = dt_sync,
    .take_failure = dt_take_failure,
    .list_sandboxes = daytona_list_sandboxes,
};
