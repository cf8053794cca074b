/* run — runs on their own thread, and what they leave behind (see run.h). */
#include "run.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/fsutil.h"
#include "base/log.h"
#include "fsmirror.h"

static const struct {
	const char *ext, *language;
} languages[] = {
	{"py", "python"},
	{"js", "javascript"},
	{"ts", "typescript"},
};

const char *sbx_run_language(const char *ext)
{
	for (size_t i = 0; i < sizeof(languages) / sizeof(*languages); i++)
		if (!strcmp(ext, languages[i].ext))
			return languages[i].language;
	return NULL;
}

static int sink_output(void *ctx, enum sbx_stream s, const char *data, size_t len)
{
	struct sbx_run *r = ctx;
	pthread_mutex_lock(&r->lock);
	sbx_buf_add(s == SBX_STDERR ? &r->err : &r->out, data, len);
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

/* The lease's `env` file as a NULL-terminated "K=V" array (one allocation). */
static char **env_lines(struct sbx_lease *l)
{
	pthread_mutex_lock(&l->lock);
	char *text = strdup(l->env_text);
	pthread_mutex_unlock(&l->lock);
	size_t n = 1, len = strlen(text);
	for (char *p = text; *p; p++)
		n += *p == '\n';
	char **v = malloc((n + 1) * sizeof(char *) + len + 1);
	if (!v)
		abort();
	char *s = (char *)(v + n + 1), *save = NULL;
	memcpy(s, text, len + 1);
	free(text);
	size_t k = 0;
	for (char *t = strtok_r(s, "\n", &save); t; t = strtok_r(NULL, "\n", &save))
		if (*t != '#' && strchr(t, '=') && *t != '=')
			v[k++] = t;
	v[k] = NULL;
	return v;
}

static const char *ext_for_mime(const char *mime)
{
	if (!strcmp(mime, "image/png"))
		return "png";
	if (!strcmp(mime, "image/jpeg"))
		return "jpg";
	if (!strcmp(mime, "image/svg+xml"))
		return "svg";
	if (!strcmp(mime, "text/html"))
		return "html";
	if (!strcmp(mime, "application/json"))
		return "json";
	if (!strcmp(mime, "application/pdf"))
		return "pdf";
	return "bin";
}

/* Writes the rich outputs to results/N.ext; returns their names as JSON. */
static json_t *save_outputs(struct sbx_lease *l, const struct sbx_code_result *cr)
{
	json_t *names = json_array();
	char *dir = sbx_lease_path(l, "results");
	sbx_mkdir_p(dir, 0700);
	for (size_t i = 0; i < cr->n_outputs; i++) {
		char name[64], *path;
		pthread_mutex_lock(&l->lock);
		unsigned long n = ++l->results_seq;
		pthread_mutex_unlock(&l->lock);
		snprintf(name, sizeof(name), "%lu.%s", n, ext_for_mime(cr->outputs[i].mime));
		struct sbx_buf p = SBX_BUF_INIT;
		sbx_buf_addf(&p, "%s/%s", dir, name);
		path = sbx_buf_detach(&p, NULL);
		if (sbx_write_file_atomic(path, cr->outputs[i].data, cr->outputs[i].len) == 0)
			json_array_append_new(names, json_pack("{s:s, s:s}", "file", name, "mime",
							       cr->outputs[i].mime));
		free(path);
	}
	free(dir);
	return names;
}

static json_t *code_result_json(struct sbx_run *r, const struct sbx_code_result *cr,
				json_t *files)
{
	json_t *output = json_null();
	if (cr->text) {
		json_error_t je;
		json_t *parsed = json_loads(cr->text, JSON_DECODE_ANY, &je);
		output = parsed ? parsed : json_string(cr->text);
	}
	json_t *o = json_pack("{s:s, s:s, s:b, s:o, s:s%, s:s%, s:I, s:b, s:o}", "type", "code",
			      "language", r->language, "success", cr->success, "output", output,
			      "stdout", r->out.buf, r->out.len, "stderr", r->err.buf, r->err.len,
			      "durationMs", (json_int_t)cr->duration_ms, "stateLost",
			      cr->state_lost, "results", files);
	if (!cr->success)
		json_object_set_new(o, "error",
				    json_pack("{s:s, s:s, s:s}", "name",
					      cr->err_name ? cr->err_name : "Error", "message",
					      cr->err_value ? cr->err_value : "", "traceback",
					      cr->err_traceback ? cr->err_traceback : ""));
	else
		json_object_set_new(o, "error", json_null());
	return o;
}

/* Writes stdout/stderr/result files and the journal entry. */
static void finish(struct sbx_run *r, json_t *result, long duration_ms)
{
	struct sbx_lease *l = r->lease;
	char *p;
	p = sbx_lease_path(l, "stdout");
	sbx_write_file_atomic(p, r->out.buf, r->out.len);
	free(p);
	p = sbx_lease_path(l, "stderr");
	sbx_write_file_atomic(p, r->err.buf, r->err.len);
	free(p);
	char *s = json_dumps(result, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	size_t n = strlen(s);
	s = realloc(s, n + 2);
	s[n] = '\n';
	s[n + 1] = '\0';
	p = sbx_lease_path(l, "result");
	sbx_write_file_atomic(p, s, n + 1);
	free(p);
	free(s);
	json_t *ev = json_pack("{s:s, s:s, s:I, s:I, s:I}", "event", "run", "kind",
			       r->kind == SBX_RUN_SHELL ? "command" : r->language, "durationMs",
			       (json_int_t)duration_ms, "stdoutBytes", (json_int_t)r->out.len,
			       "stderrBytes", (json_int_t)r->err.len);
	json_t *ec = json_object_get(result, "exitCode");
	if (ec)
		json_object_set(ev, "exitCode", ec);
	if (json_object_get(result, "success"))
		json_object_set(ev, "success", json_object_get(result, "success"));
	json_object_set_new(ev, "text", json_stringn(r->text, strlen(r->text) > 200 ? 200 : strlen(r->text)));
	sbx_lease_journal(l, ev);
}

/*
 * A run stopped before its end: past the lease's runTimeout (ETIMEDOUT),
 * or cancelled because the process waiting for it was killed (EINTR). The
 * provider killed the command or gave up on the cell; a cell's interpreter
 * is restarted so the next cell does not queue behind the one still
 * running in it.
 */
static int stopped(struct sbx_run *r, struct sbx_instance *inst, bool cancelled,
		   struct sbx_error *err)
{
	struct sbx_lease *l = r->lease;
	struct sbx_error re = SBX_ERROR_INIT;
	int e = cancelled ? EINTR : ETIMEDOUT;
	enum sbx_errcode code = cancelled ? SBX_E_EXECUTION_FAILED : SBX_E_TIMEOUT;
	const char *what = r->kind == SBX_RUN_SHELL ? "command" : "cell";
	char why[96];
	if (cancelled)
		snprintf(why, sizeof(why), "the %s was stopped: the process waiting for it was killed",
			 what);
	else
		snprintf(why, sizeof(why), "the %s ran past runTimeout (%ld s)", what,
			 l->spec.run_timeout_s);
	if (r->kind == SBX_RUN_SHELL)
		return sbx_error_set(err, e, code, "%s; it was killed", why);
	if (!l->prov->code_reset || l->prov->code_reset(inst, r->language, &re))
		return sbx_error_set(err, e, code, "%s%s%s", why,
				     re.msg[0] ? "; restarting its interpreter failed: " : "",
				     re.msg);
	return sbx_error_set(err, e, code, "%s; its %s interpreter was restarted, its state is lost",
			     why, r->language);
}

static void *run_main(void *arg)
{
	struct sbx_run *r = arg;
	struct sbx_lease *l = r->lease;
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_instance *inst;
	struct sbx_run_sink sink = {r, sink_output, &r->cancel};
	long long t0 = sbx_now_ms();
	json_t *result = NULL;
	char **envs = env_lines(l);
	long timeout_ms = l->spec.run_timeout_s * 1000;
	int rc = sbx_lease_use(l, &inst, &err);
	if (!rc) {
		if (l->prov->sync)
			l->prov->sync(inst, &err);
		if (r->kind == SBX_RUN_SHELL) {
			struct sbx_run_req req = {.shell = r->text,
						  .envs = (const char *const *)envs,
						  .timeout_ms = timeout_ms};
			struct sbx_run_result res = {0};
			rc = l->prov->run(inst, &req, &sink, &res, &err);
			bool cancelled = rc == -ECANCELED && atomic_load(&r->cancel);
			if (cancelled)
				res.exit_code = 128 + SIGKILL;
			if (!rc || cancelled)
				result = json_pack("{s:s, s:s, s:i, s:s%, s:s%, s:I, s:b, s:b}",
						   "type", "command", "command", r->text,
						   "exitCode", res.exit_code, "stdout", r->out.buf,
						   r->out.len, "stderr", r->err.buf, r->err.len,
						   "durationMs", (json_int_t)(sbx_now_ms() - t0),
						   "timedOut", res.timed_out, "interrupted",
						   cancelled);
			if (cancelled || (!rc && res.timed_out))
				rc = stopped(r, inst, cancelled, &err);
		} else if (!l->prov->run_code) {
			rc = sbx_error_set(&err, ENOTSUP, SBX_E_EXECUTION_FAILED,
					   "provider %s cannot run code", l->prov->name);
		} else {
			struct sbx_code_req req = {.code = r->text,
						   .language = r->language,
						   .envs = (const char *const *)envs,
						   .timeout_ms = timeout_ms};
			struct sbx_code_result cr = {0};
			rc = l->prov->run_code(inst, &req, &sink, &cr, &err);
			if (rc == -ECANCELED && atomic_load(&r->cancel))
				rc = stopped(r, inst, true, &err);
			else if (rc == -ETIMEDOUT && timeout_ms && sbx_now_ms() - t0 >= timeout_ms)
				rc = stopped(r, inst, false, &err);
			if (!rc) {
				if (!cr.duration_ms)
					cr.duration_ms = (long)(sbx_now_ms() - t0);
				json_t *files = save_outputs(l, &cr);
				pthread_mutex_lock(&r->lock);
				result = code_result_json(r, &cr, files);
				/* A notebook shows the value after the printed output. */
				if (cr.text) {
					sbx_buf_adds(&r->out, cr.text);
					if (cr.text[0] && cr.text[strlen(cr.text) - 1] != '\n')
						sbx_buf_addch(&r->out, '\n');
				}
				pthread_mutex_unlock(&r->lock);
			}
			sbx_code_result_free(&cr);
		}
		sbx_lease_unuse(l);
	}
	free(envs);
	sbx_fs_invalidate(l);
	/* A killed command still leaves its output and result (timedOut). */
	if (result) {
		finish(r, result, (long)(sbx_now_ms() - t0));
		json_decref(result);
	}
	if (rc)
		sbx_lease_error(l, r->kind == SBX_RUN_SHELL ? "exec" : "code", &err);
	pthread_mutex_lock(&r->lock);
	r->rc = rc;
	r->done = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	sbx_run_put(r);
	return NULL;
}

int sbx_run_start(struct sbx_lease *l, enum sbx_run_kind kind, const char *language,
		  const char *text, struct sbx_run **out, struct sbx_error *err)
{
	struct sbx_run *r = calloc(1, sizeof(*r));
	pthread_attr_t attr;
	if (!r)
		abort();
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->refs = 2; /* the caller's and the thread's */
	r->lease = l;
	pthread_mutex_lock(&l->lock);
	l->runs++;
	pthread_mutex_unlock(&l->lock);
	r->kind = kind;
	r->language = language ? strdup(language) : NULL;
	r->text = strdup(text);
	sbx_buf_init(&r->out);
	sbx_buf_init(&r->err);
	pthread_mutex_lock(&l->mount->lock);
	l->refs++;
	pthread_mutex_unlock(&l->mount->lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&r->thread, &attr, run_main, r)) {
		pthread_attr_destroy(&attr);
		r->refs = 1;
		sbx_run_put(r);
		return sbx_error_set(err, EAGAIN, SBX_E_INTERNAL, "cannot start a run thread");
	}
	pthread_attr_destroy(&attr);
	*out = r;
	return 0;
}

/* How long a killed waiter's answer waits for the provider to stop the run. */
#define SBX_CANCEL_WAIT_MS 5000

static bool (*abandon_check)(void);

void sbx_run_set_abandon_check(bool (*fn)(void))
{
	abandon_check = fn;
}

/* Waits on r->cond (lock held) for at most ms. */
static void wait_ms_locked(struct sbx_run *r, long ms)
{
	struct timespec dl;
	sbx_deadline_in(CLOCK_REALTIME, ms, &dl);
	pthread_cond_timedwait(&r->cond, &r->lock, &dl);
}

/*
 * One wait on r->cond (lock held), at most SBX_CANCEL_POLL_MS when the
 * waiter can be checked. Once the process waiting is being killed, the run
 * is cancelled and -EINTR returned when the provider has stopped it (or
 * after SBX_CANCEL_WAIT_MS): whatever that process's killer runs next finds
 * the command gone.
 */
static int wait_locked(struct sbx_run *r)
{
	if (!abandon_check) {
		pthread_cond_wait(&r->cond, &r->lock);
		return 0;
	}
	wait_ms_locked(r, SBX_CANCEL_POLL_MS);
	if (r->done || !abandon_check())
		return 0;
	atomic_store(&r->cancel, 1);
	for (long long end = sbx_now_ms() + SBX_CANCEL_WAIT_MS; !r->done && sbx_now_ms() < end;)
		wait_ms_locked(r, SBX_CANCEL_POLL_MS);
	return -EINTR;
}

int sbx_run_wait(struct sbx_run *r)
{
	int rc = 0;
	pthread_mutex_lock(&r->lock);
	while (!r->done && !rc)
		rc = wait_locked(r);
	if (!rc)
		rc = r->rc;
	pthread_mutex_unlock(&r->lock);
	return rc;
}

ssize_t sbx_run_read(struct sbx_run *r, char *buf, size_t size, off_t off)
{
	ssize_t n;
	int rc = 0;
	pthread_mutex_lock(&r->lock);
	while (!r->done && (size_t)off >= r->out.len && !rc)
		rc = wait_locked(r);
	if ((size_t)off < r->out.len) {
		n = (ssize_t)(r->out.len - (size_t)off);
		if ((size_t)n > size)
			n = (ssize_t)size;
		memcpy(buf, r->out.buf + off, (size_t)n);
	} else {
		n = rc ? rc : r->rc;
	}
	pthread_mutex_unlock(&r->lock);
	return n;
}

void sbx_run_put(struct sbx_run *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	int last = --r->refs == 0;
	pthread_mutex_unlock(&r->lock);
	if (!last)
		return;
	sbx_lease_put(r->lease);
	sbx_buf_release(&r->out);
	sbx_buf_release(&r->err);
	free(r->language);
	free(r->text);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r);
}

char **sbx_run_envs(struct sbx_lease *l)
{
	return env_lines(l);
}
