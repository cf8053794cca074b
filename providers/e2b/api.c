/*
 * api — the E2B provider's ops table and its lifecycle half: settings at
 * init, create (POST /v2/sandboxes, then packages), attach (GET
 * /sandboxes/{id}: never resumes), pause, unpause (POST
 * /v2/sandboxes/{id}/connect, which refreshes the access token and
 * domain), kill, probe, set_timeout, info, get_host, list_sandboxes
 * (GET /v2/sandboxes).
 *
 * Files are in files.c, runs in run.c, change notification in watch.c.
 * run_code/code_reset (the :49999 interpreter) are in code.c. Nothing here logs or returns a
 * credential: the API key lives in e2b_g.set, tokens in the instance.
 */
#include "e2b/e2b.h"
#include "e2b/readmany.h"
#include "base/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "config.h"

/* Why init failed (what to fix, e.g. "E2B_API_KEY is not set"), for every later call. */
static struct sbx_error e2b_init_err;

/* The key from providers.e2b.keyFile during e2b_init, else NULL. */
static const char *e2b_key_file_value;

static const char *env_get(const char *name)
{
	if (e2b_key_file_value && !strcmp(name, "E2B_API_KEY"))
		return e2b_key_file_value;
	return getenv(name);
}

static int e2b_init(const struct sbx_provider_env *env, struct sbx_error *err)
{
	struct sbx_http_settings hs = {.user_agent = "sbxfs/" PACKAGE_VERSION " (e2b)"};
	int rc;
	if (e2b_g.http)
		return 0;
	sbx_error_clear(&e2b_init_err);
	if (env && env->key_error) {
		e2b_init_err = *env->key_error;
		if (err)
			*err = e2b_init_err;
		return -e2b_init_err.err;
	}
	e2b_key_file_value = env ? env->api_key : NULL;
	rc = e2b_settings_load(&e2b_g.set, env ? env->settings : NULL, env_get, &e2b_init_err);
	e2b_key_file_value = NULL;
	if (rc) {
		if (err)
			*err = e2b_init_err;
		return rc;
	}
	e2b_key_start(env);
	hs.timeout_ms = e2b_g.set.request_ms;
	hs.idle_ms = e2b_g.set.transfer_ms;
	hs.connect_timeout_ms = e2b_g.set.connect_ms;
	e2b_g.http = sbx_http_client_new(&hs);
	if (!e2b_g.http) {
		e2b_settings_free(&e2b_g.set);
		return sbx_error_set(err, ENOMEM, SBX_E_INTERNAL, "e2b: out of memory");
	}
	return 0;
}

static void e2b_shutdown(void)
{
	sbx_http_client_free(e2b_g.http);
	e2b_key_clear();
	e2b_settings_free(&e2b_g.set);
	memset(&e2b_g, 0, sizeof(e2b_g));
}

/* Moves *src into *dst when dst is empty (frees nothing). */
static void steal_if_empty(char **dst, char **src)
{
	if (!*dst) {
		*dst = *src;
		*src = NULL;
	}
}

static int not_ready(struct sbx_error *err)
{
	if (e2b_init_err.err) {
		if (err)
			*err = e2b_init_err;
		return -e2b_init_err.err;
	}
	return sbx_error_set(err, EACCES, SBX_E_INTERNAL, "e2b: provider not initialised");
}

/* --- instances ------------------------------------------------------------ */

/* Takes over sb's strings. */
static struct e2b_inst *inst_new(struct e2b_sandbox *sb, const struct sbx_spec *spec)
{
	struct e2b_inst *in = sbx_xcalloc(1, sizeof(*in));
	in->base.prov = &sbx_provider_e2b;
	snprintf(in->base.id, sizeof(in->base.id), "%s", sb->id);
	in->sb = *sb;
	memset(sb, 0, sizeof(*sb));
	in->paused = in->sb.state && !strcmp(in->sb.state, "paused");
	in->workdir = spec && spec->working_dir ? sbx_xstrdup(spec->working_dir) : NULL;
	in->ttl_s = spec && spec->res.timeout_s > 0 ? spec->res.timeout_s : E2B_DEFAULT_TIMEOUT_S;
	pthread_mutex_init(&in->lock, NULL);
	pthread_mutex_init(&in->watch_lock, NULL);
	sbx_rme_init(&in->meta, &e2b_meta_slots, in);
	sbx_rmeta_fails_init(&in->fails);
	sbx_rmeta_df_init(&in->df);
	sbx_rmeta_ids_init(&in->ids, e2b_helper_run, in);
	return in;
}

static void e2b_release(struct sbx_instance *inst)
{
	struct e2b_inst *in = e2b_of(inst);
	size_t n;
	if (!in)
		return;
	e2b_watch_stop(in);
	sbx_rmeta_ids_wait(&in->ids);
	sbx_rme_stop_timer(&in->meta);
	inst->report = NULL; /* the lease is going: a last failure is only logged */
	if (in->paused && (n = sbx_rme_drop(&in->meta)))
		sbx_log(SBX_LOG_WARN, "e2b: %s: %zu metadata changes not applied (paused)",
			inst->id, n);
	sbx_rme_stop(&in->meta); /* failures go to their paths (logged) */
	sbx_rme_destroy(&in->meta);
	e2b_recent_clear(in);
	e2b_own_clear(in);
	sbx_rmeta_fails_destroy(&in->fails);
	sbx_rmeta_ids_destroy(&in->ids);
	e2b_code_free(in->code);
	e2b_sandbox_free(&in->sb);
	free(in->workdir);
	pthread_mutex_destroy(&in->watch_lock);
	pthread_mutex_destroy(&in->lock);
	free(in);
}

/* "/sandboxes/ID" + suffix, ID escaped. */
static void sandbox_path(struct sbx_buf *b, const char *prefix, const char *id, const char *suffix)
{
	sbx_buf_adds(b, prefix);
	sbx_http_add_escaped(b, id);
	sbx_buf_adds(b, suffix);
}

/* The shell text that installs spec's packages (pip, or npm for JS/TS). */
static void install_script(struct sbx_buf *b, const struct sbx_spec *spec)
{
	bool js = spec->language &&
		  (!strcmp(spec->language, "javascript") || !strcmp(spec->language, "typescript"));
	struct sbx_buf pip = SBX_BUF_INIT, npm = SBX_BUF_INIT;
	size_t i;
	json_t *v;
	json_array_foreach(spec->packages, i, v)
	{
		const char *p = json_string_value(v);
		bool to_npm = js;
		if (!p || !*p)
			continue;
		if (!strncmp(p, "npm:", 4) || !strncmp(p, "pip:", 4)) {
			to_npm = p[0] == 'n';
			p += 4;
		}
		sbx_buf_addch(to_npm ? &npm : &pip, ' ');
		sbx_buf_add_shquoted(to_npm ? &npm : &pip, p);
	}
	if (spec->working_dir) {
		sbx_buf_adds(b, "mkdir -p -- ");
		sbx_buf_add_shquoted(b, spec->working_dir);
		sbx_buf_adds(b, " && cd -- ");
		sbx_buf_add_shquoted(b, spec->working_dir);
		sbx_buf_adds(b, " && ");
	}
	sbx_buf_adds(b, "true");
	if (pip.len)
		sbx_buf_addf(b, " && { pip install -q --disable-pip-version-check --%s; }",
			     pip.buf);
	if (npm.len)
		sbx_buf_addf(b, " && { npm install --no-audit --no-fund --%s; }", npm.buf);
	sbx_buf_release(&pip);
	sbx_buf_release(&npm);
}

static int setup_sandbox(struct e2b_inst *in, const struct sbx_spec *spec, struct sbx_error *err)
{
	struct sbx_buf script = SBX_BUF_INIT, out = SBX_BUF_INIT, errout = SBX_BUF_INIT;
	int code = 0, rc;
	if (!json_array_size(spec->packages) && !spec->working_dir)
		return 0;
	install_script(&script, spec);
	rc = e2b_run_capture(in, script.buf, false, 900000, 4096, &out, &errout, &code, err);
	if (!rc && code) {
		/* keep the tail: pip and npm say what went wrong last */
		const char *tail = errout.len > 200 ? errout.buf + errout.len - 200 : errout.buf;
		rc = sbx_error_set(err, EIO, SBX_E_EXECUTION_FAILED,
				   "installing packages failed (exit %d): %s", code, tail);
	}
	sbx_buf_release(&script);
	sbx_buf_release(&out);
	sbx_buf_release(&errout);
	return rc;
}

static int e2b_kill(struct sbx_instance *inst, struct sbx_error *err);

/* A control-plane call whose reply is a Sandbox or SandboxDetail. */
static int sandbox_reply(const char *method, const char *path, json_t *body, bool idempotent,
			 struct e2b_sandbox *sb, long *status, const char *what,
			 struct sbx_error *err)
{
	json_t *reply = NULL;
	int rc = e2b_api(method, path, body, idempotent, &reply, status, what, err);
	if (!rc)
		rc = e2b_sandbox_parse(reply, sb, err);
	json_decref(reply);
	return rc;
}

static int e2b_create(const struct sbx_spec *spec, const char *lease, struct sbx_instance **out,
		      struct sbx_error *err)
{
	struct e2b_sandbox sb;
	struct e2b_inst *in;
	json_t *body;
	long status;
	int rc;

	*out = NULL;
	if (!e2b_g.http)
		return not_ready(err);
	body = e2b_create_body(spec, lease);
	rc = sandbox_reply("POST", "/v2/sandboxes", body, false, &sb, &status, "create", err);
	json_decref(body);
	if (rc)
		return rc;
	in = inst_new(&sb, spec);
	if (!in) {
		e2b_sandbox_free(&sb);
		return sbx_error_set(err, ENOMEM, SBX_E_INTERNAL, "create: out of memory");
	}
	rc = setup_sandbox(in, spec, err);
	if (rc) {
		struct sbx_error ignore = SBX_ERROR_INIT;
		e2b_kill(&in->base, &ignore); /* a half-made sandbox is not left running */
		e2b_release(&in->base);
		return rc;
	}
	sbx_log(SBX_LOG_INFO, "e2b: created %s (%s) for %s", in->base.id,
		in->sb.template_id ? in->sb.template_id : "?", lease ? lease : "?");
	*out = &in->base;
	return 0;
}

/* GET /sandboxes/{id}: the SandboxDetail. */
static int get_detail(const char *id, struct e2b_sandbox *sb, long *status, struct sbx_error *err)
{
	struct sbx_buf path = SBX_BUF_INIT;
	int rc;
	sandbox_path(&path, "/sandboxes/", id, "");
	rc = sandbox_reply("GET", path.buf, NULL, true, sb, status, "get sandbox", err);
	sbx_buf_release(&path);
	return rc;
}

static int e2b_attach(const struct sbx_spec *spec, const char *sandbox_id, json_t *saved,
		      struct sbx_instance **out, struct sbx_error *err)
{
	struct e2b_sandbox sb;
	struct e2b_inst *in;
	long status = 0;
	int rc;
	*out = NULL;
	if (!e2b_g.http)
		return not_ready(err);
	rc = get_detail(sandbox_id, &sb, &status, err);
	if (rc)
		return rc;
	in = inst_new(&sb, spec);
	if (!in) {
		e2b_sandbox_free(&sb);
		return sbx_error_set(err, ENOMEM, SBX_E_INTERNAL, "attach: out of memory");
	}
	*out = &in->base;
	return 0;
}

int e2b_sandbox_list(const char *lease, json_t **out, struct sbx_error *e)
{
	static const char *const keep[] = {"sandboxID", "templateID", "state", "startedAt",
					   "endAt",	"metadata",   NULL};
	char token[512] = "";
	int rc = 0;
	*out = json_array();
	if (!e2b_g.http)
		return not_ready(e);
	/* Pages follow X-Next-Token; bounded so a looping server cannot hold us. */
	for (int page = 0; page < 1000 && !rc; page++) {
		struct sbx_buf path = SBX_BUF_INIT, meta = SBX_BUF_INIT;
		json_t *reply = NULL, *item;
		long status;
		size_t i;
		sbx_buf_adds(&path, "/v2/sandboxes");
		if (lease) {
			/* metadata is itself a query string, escaped again (as the SDK) */
			sbx_buf_adds(&meta, "sbxfs_lease=");
			sbx_http_add_escaped(&meta, lease);
			sbx_http_add_query(&path, "metadata", meta.buf);
		}
		sbx_http_add_query(&path, "state", "running,paused");
		sbx_http_add_query(&path, "limit", "100");
		if (*token)
			sbx_http_add_query(&path, "nextToken", token);
		rc = e2b_api_ex("GET", path.buf, NULL, true, &reply, &status, "X-Next-Token", token,
				sizeof(token), "list sandboxes", e);
		if (!rc && !json_is_array(reply))
			rc = sbx_error_set(e, EPROTO, SBX_E_INTERNAL,
					   "list sandboxes: not an array");
		json_array_foreach(rc ? NULL : reply, i, item)
		{
			json_t *o = json_object();
			for (const char *const *k = keep; *k; k++)
				if (json_object_get(item, *k))
					json_object_set(o, *k, json_object_get(item, *k));
			json_array_append_new(*out, o);
		}
		json_decref(reply);
		sbx_buf_release(&path);
		sbx_buf_release(&meta);
		if (!*token)
			break;
	}
	if (rc) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}

static int e2b_list_sandboxes(sbx_sandbox_fn fn, void *ctx, struct sbx_error *err)
{
	json_t *all = NULL, *o;
	size_t i;
	int rc = e2b_sandbox_list(NULL, &all, err);
	json_array_foreach(rc ? NULL : all, i, o)
	{
		struct sbx_sandbox_entry sb = {
		    .id = json_string_value(json_object_get(o, "sandboxID")),
		    .state = json_string_value(json_object_get(o, "state")),
		    .lease = json_string_value(
			json_object_get(json_object_get(o, "metadata"), "sbxfs_lease")),
		    .template_name = json_string_value(json_object_get(o, "templateID")),
		    .created_at = json_string_value(json_object_get(o, "startedAt")),
		};
		if (sb.id && (rc = fn(ctx, &sb)))
			break;
	}
	json_decref(all);
	return rc;
}

static json_t *e2b_save(struct sbx_instance *inst)
{
	struct e2b_inst *in = e2b_of(inst);
	json_t *j = json_object();
	pthread_mutex_lock(&in->lock);
	if (in->sb.template_id)
		json_object_set_new(j, "templateID", json_string(in->sb.template_id));
	pthread_mutex_unlock(&in->lock);
	return j;
}

/* A control-plane POST/DELETE on /sandboxes/{id}...; *status for special cases. */
static int sandbox_call(struct e2b_inst *in, const char *method, const char *prefix,
			const char *suffix, json_t *body, long *status, const char *what,
			struct sbx_error *err)
{
	struct sbx_buf path = SBX_BUF_INIT;
	json_t *ignore = NULL;
	int rc;
	sandbox_path(&path, prefix, in->base.id, suffix);
	rc = e2b_api(method, path.buf, body, true, &ignore, status, what, err);
	json_decref(ignore);
	sbx_buf_release(&path);
	return rc;
}

static int e2b_pause(struct sbx_instance *inst, struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	json_t *body = json_object();
	long status = 0;
	int rc;
	sbx_rme_flush(&in->meta, NULL, SBX_RMQ_NEED_ALL, SBX_RME_BOTH); /* failures: their paths' */
	rc = sandbox_call(in, "POST", "/sandboxes/", "/pause", body, &status, "pause", err);
	json_decref(body);
	if (rc && status == 409)
		rc = 0; /* already paused */
	if (!rc) {
		pthread_mutex_lock(&in->lock);
		in->paused = true;
		pthread_mutex_unlock(&in->lock);
	}
	return rc;
}

static int e2b_unpause(struct sbx_instance *inst, struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	struct e2b_sandbox sb, old;
	struct sbx_buf path = SBX_BUF_INIT;
	json_t *body = sbx_xjson(json_pack("{s:I}", "timeout", (json_int_t)in->ttl_s));
	long status = 0;
	int rc;
	sandbox_path(&path, "/v2/sandboxes/", inst->id, "/connect");
	rc = sandbox_reply("POST", path.buf, body, true, &sb, &status, "resume", err);
	json_decref(body);
	sbx_buf_release(&path);
	if (rc)
		return rc;
	/* New token and domain for the data plane; keep facts the reply lacks. */
	pthread_mutex_lock(&in->lock);
	old = in->sb;
	in->sb = sb;
	steal_if_empty(&in->sb.started_at, &old.started_at);
	steal_if_empty(&in->sb.end_at, &old.end_at);
	in->paused = false;
	pthread_mutex_unlock(&in->lock);
	sbx_rmeta_df_forget(&in->df);
	e2b_sandbox_free(&old);
	return 0;
}

static int e2b_kill(struct sbx_instance *inst, struct sbx_error *err)
{
	long status = 0;
	/* nothing to apply to a deleted sandbox (the release sent it, to a 502) */
	sbx_rme_drop(&e2b_of(inst)->meta);
	return sandbox_call(e2b_of(inst), "DELETE", "/sandboxes/", "", NULL, &status, "kill", err);
}

static int e2b_probe(struct sbx_instance *inst, enum sbx_remote_state *state, struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	struct e2b_sandbox sb;
	long status = 0;
	int rc = get_detail(inst->id, &sb, &status, err);
	*state = SBX_REMOTE_UNKNOWN;
	if (rc == -ENOENT && status == 404) {
		*state = SBX_REMOTE_GONE;
		sbx_error_clear(err);
		return 0;
	}
	if (rc)
		return rc;
	*state = sb.state && !strcmp(sb.state, "paused") ? SBX_REMOTE_PAUSED : SBX_REMOTE_RUNNING;
	pthread_mutex_lock(&in->lock);
	in->paused = *state == SBX_REMOTE_PAUSED;
	/* Refresh the facts info() shows (times move with set_timeout). */
	free(in->sb.started_at);
	free(in->sb.end_at);
	in->sb.started_at = in->sb.end_at = NULL;
	steal_if_empty(&in->sb.started_at, &sb.started_at);
	steal_if_empty(&in->sb.end_at, &sb.end_at);
	in->sb.cpu_count = sb.cpu_count;
	in->sb.memory_mb = sb.memory_mb;
	in->sb.disk_mb = sb.disk_mb;
	pthread_mutex_unlock(&in->lock);
	e2b_sandbox_free(&sb);
	return 0;
}

static int e2b_set_timeout(struct sbx_instance *inst, long seconds, struct sbx_error *err)
{
	json_t *body =
	    sbx_xjson(json_pack("{s:I}", "timeout", (json_int_t)(seconds > 0 ? seconds : 1)));
	long status = 0;
	int rc = sandbox_call(e2b_of(inst), "POST", "/sandboxes/", "/timeout", body, &status,
			      "set timeout", err);
	json_decref(body);
	return rc;
}

static void set_str(json_t *o, const char *k, const char *v)
{
	if (v)
		json_object_set_new(o, k, json_string(v));
}

static int e2b_info(struct sbx_instance *inst, json_t **out, struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	json_t *j = json_object();
	pthread_mutex_lock(&in->lock);
	set_str(j, "template", in->sb.template_id);
	set_str(j, "envdVersion", in->sb.envd_version);
	set_str(j, "domain", in->sb.domain ? in->sb.domain : e2b_g.set.domain);
	set_str(j, "startedAt", in->sb.started_at);
	set_str(j, "endAt", in->sb.end_at);
	if (in->sb.cpu_count)
		json_object_set_new(j, "cpuCount", json_integer(in->sb.cpu_count));
	if (in->sb.memory_mb)
		json_object_set_new(j, "memoryMB", json_integer(in->sb.memory_mb));
	if (in->sb.disk_mb)
		json_object_set_new(j, "diskSizeMB", json_integer(in->sb.disk_mb));
	pthread_mutex_unlock(&in->lock);
	*out = j;
	return 0;
}

static int e2b_get_host(struct sbx_instance *inst, int port, char *buf, size_t size,
			struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	struct sbx_buf b = SBX_BUF_INIT;
	int rc = 0;
	if (port <= 0 || port > 65535)
		return sbx_error_set(err, EINVAL, SBX_E_INTERNAL, "bad port %d", port);
	pthread_mutex_lock(&in->lock);
	e2b_host(&b, &e2b_g.set, inst->id, in->sb.domain, port);
	/* A sandbox created with secure traffic wants its token on every request. */
	if (in->sb.traffic_token)
		sbx_buf_addf(&b, "\ne2b-traffic-access-token: %s", in->sb.traffic_token);
	pthread_mutex_unlock(&in->lock);
	if (b.len >= size)
		rc = sbx_error_set(err, ENAMETOOLONG, SBX_E_INTERNAL, "host name too long");
	else
		memcpy(buf, b.buf, b.len + 1);
	sbx_buf_release(&b);
	return rc;
}

const struct sbx_provider sbx_provider_e2b = {
    .abi = SBX_PROVIDER_ABI,
    .name = "e2b",
    .caps = SBX_CAP_LIST_ATTRS | SBX_CAP_PAUSE_MEMORY | SBX_CAP_UTF8_TEXT | SBX_CAP_RANGE_READ,
    .init = e2b_init,
    .shutdown = e2b_shutdown,
    .key_var = "E2B_API_KEY",
    .set_key = e2b_set_key,
    .create = e2b_create,
    .attach = e2b_attach,
    .save = e2b_save,
    .release = e2b_release,
    .pause = e2b_pause,
    .unpause = e2b_unpause,
    .kill = e2b_kill,
    .probe = e2b_probe,
    .set_timeout = e2b_set_timeout,
    .info = e2b_info,
    .get_host = e2b_get_host,
    .run = e2b_run,
    .run_code = e2b_run_code,
    .tty_open = e2b_tty_open,
    .tty_write = e2b_tty_write,
    .tty_resize = e2b_tty_resize,
    .tty_close = e2b_tty_close,
    .code_reset = e2b_code_reset,
    .stat = e2b_stat,
    .list = sbx_rmeta_list,
    .read = e2b_read,
    .read_many = e2b_read_many,
    .write = e2b_write,
    .write_new = e2b_write_new,
    .write_inplace = e2b_write_inplace,
    .write_new_many = e2b_write_new_many,
    .truncate = e2b_truncate,
    .mkdir = e2b_mkdir,
    .unlink = e2b_unlink,
    .rmdir = e2b_rmdir,
    .rmdir_empty = e2b_rmdir_empty,
    .mkdir_new = e2b_mkdir_new,
    .list_tree = e2b_list_tree,
    .rename = e2b_rename,
    .chmod = e2b_chmod,
    .chown = e2b_chown,
    .utimens = e2b_utimens,
    .symlink = e2b_symlink,
    .readlink = e2b_readlink,
    .readlinks = e2b_readlinks,
    .link = e2b_link,
    .mknod = e2b_mknod,
    .statfs = e2b_statfs,
    .sync = e2b_sync,
    .take_failure = e2b_take_failure,
    .set_notify = e2b_set_notify,
    .list_sandboxes = e2b_list_sandboxes,
};
