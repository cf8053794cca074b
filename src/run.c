/* run — runs on their own thread, and what they leave behind (see run.h). */
#include "run.h"
#include "base/xalloc.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include "base/fsutil.h"
#include "base/log.h"
#include "base/sysutil.h"
#include "fsmirror.h"
#include "results.h"
#include "runs.h"
#include "runs_int.h"
#include "writeback.h"

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

/*
 * The provider's stream goes straight to runs/N/stdout or stderr: the
 * daemon keeps no output in memory. Output the state dir cannot keep (a
 * write error, or past sbx_runs_room's bounds) is remembered (the first
 * failure) and stops the run as a cancel does; its errno is the run's.
 */
static int sink_output(void *ctx, enum sbx_stream s, const char *data, size_t len)
{
	struct sbx_run *r = ctx;
	int fd = s == SBX_STDERR ? r->err_fd : r->out_fd;
	size_t done = 0;
	pthread_mutex_lock(&r->lock);
	if (!r->save_rc)
		r->save_rc = sbx_runs_room(fd, (unsigned long long)r->out_len + r->err_len, len,
					   r->save_why, sizeof(r->save_why));
	while (!r->save_rc && done < len) {
		ssize_t n = write(fd, data + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r->save_rc = n < 0 ? -errno : -EIO;
			snprintf(r->save_why, sizeof(r->save_why), "%s", strerror(-r->save_rc));
		} else {
			done += (size_t)n;
		}
	}
	if (r->save_rc)
		atomic_store(&r->cancel, 1);
	if (s == SBX_STDERR)
		r->err_len += done;
	else
		r->out_len += done;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

/* The lease's `env` file as a NULL-terminated "K=V" array (one allocation). */
static char **env_lines(struct sbx_lease *l)
{
	pthread_mutex_lock(&l->lock);
	char *text = sbx_xstrdup(l->env_text);
	pthread_mutex_unlock(&l->lock);
	size_t n = 1, len = strlen(text);
	for (char *p = text; *p; p++)
		n += *p == '\n';
	char **v = sbx_xmalloc((n + 1) * sizeof(char *) + len + 1);
	char *s = (char *)(v + n + 1), *save = NULL;
	memcpy(s, text, len + 1);
	free(text);
	size_t k = 0;
	for (char *t = strtok_r(s, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
		size_t tl = strlen(t);
		if (tl && t[tl - 1] == '\r') /* a file saved with CRLF ends: not the value's */
			t[tl - 1] = '\0';
		if (*t != '#' && strchr(t, '=') && *t != '=')
			v[k++] = t;
	}
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
	unsigned long first = 0;
	sbx_mkdir_p(dir, 0700);
	for (size_t i = 0; i < cr->n_outputs; i++) {
		char name[64], *path;
		pthread_mutex_lock(&l->lock);
		unsigned long n = ++l->results_seq;
		pthread_mutex_unlock(&l->lock);
		if (!first)
			first = n;
		snprintf(name, sizeof(name), "%lu.%s", n, ext_for_mime(cr->outputs[i].mime));
		struct sbx_buf p = SBX_BUF_INIT;
		sbx_buf_addf(&p, "%s/%s", dir, name);
		path = sbx_buf_detach(&p, NULL);
		if (sbx_write_file_atomic(path, cr->outputs[i].data, cr->outputs[i].len) == 0)
			json_array_append_new(names,
					      sbx_xjson(json_pack("{s:s, s:s}", "file", name,
								  "mime", cr->outputs[i].mime)));
		free(path);
	}
	free(dir);
	if (first)
		sbx_results_prune(l, first);
	return names;
}

/* A JSON string of s, or null when it is not valid UTF-8 (never NULL). */
static json_t *text_or_null(const char *s, size_t len)
{
	json_t *j = json_stringn(s, len);
	return j ? j : json_null();
}

/*
 * The result's fields for one stream: NAME holds the text when the output
 * is valid UTF-8 and at most SBX_RUN_TEXT_MAX bytes, else null;
 * NAMEBytes its exact size; NAMETruncated (too big to hold) and NAMEBinary
 * (not UTF-8) say why it is null. The file itself has every byte.
 */
static void add_stream(json_t *o, struct sbx_run *r, const char *name, size_t len)
{
	json_t *text = NULL;
	bool big = len > SBX_RUN_TEXT_MAX, binary = false;
	char key[32];
	if (!big) {
		struct sbx_buf b = SBX_BUF_INIT;
		char *p = sbx_runs_path(r->lease, r->n, name);
		if (!sbx_read_file(p, &b, SBX_RUN_TEXT_MAX)) {
			text = json_stringn(b.buf, b.len < len ? b.len : len);
			binary = !text;
		}
		free(p);
		sbx_buf_release(&b);
	}
	json_object_set_new(o, name, text ? text : json_null());
	snprintf(key, sizeof(key), "%sBytes", name);
	json_object_set_new(o, key, json_integer((json_int_t)len));
	snprintf(key, sizeof(key), "%sTruncated", name);
	json_object_set_new(o, key, json_boolean(big));
	snprintf(key, sizeof(key), "%sBinary", name);
	json_object_set_new(o, key, json_boolean(binary));
}

/* runError: null, or what stopped the run from completing. */
static json_t *run_error_json(int rc, const struct sbx_error *err)
{
	if (!rc)
		return json_null();
	const char *name = strerrorname_np(-rc);
	json_t *o = json_object();
	json_object_set_new(o, "errno", json_string(name ? name : "EIO"));
	json_object_set_new(o, "message", text_or_null(err->msg, strlen(err->msg)));
	return o;
}

static json_t *code_result_json(struct sbx_run *r, const struct sbx_code_result *cr, json_t *files)
{
	json_t *output = json_null(), *o = json_object();
	if (cr->text) {
		json_error_t je;
		json_t *parsed = json_loads(cr->text, JSON_DECODE_ANY, &je);
		output = parsed ? parsed : text_or_null(cr->text, strlen(cr->text));
	}
	json_object_set_new(o, "type", json_string("code"));
	json_object_set_new(o, "language", json_string(r->language));
	json_object_set_new(o, "success", json_boolean(cr->success));
	json_object_set_new(o, "output", output);
	json_object_set_new(o, "durationMs", json_integer((json_int_t)cr->duration_ms));
	json_object_set_new(o, "stateLost", json_boolean(cr->state_lost));
	json_object_set_new(o, "results", files);
	if (!cr->success) {
		json_t *e = json_object();
		const char *name = cr->err_name ? cr->err_name : "Error";
		const char *msg = cr->err_value ? cr->err_value : "";
		const char *tb = cr->err_traceback ? cr->err_traceback : "";
		json_object_set_new(e, "name", text_or_null(name, strlen(name)));
		json_object_set_new(e, "message", text_or_null(msg, strlen(msg)));
		json_object_set_new(e, "traceback", text_or_null(tb, strlen(tb)));
		json_object_set_new(o, "error", e);
	} else {
		json_object_set_new(o, "error", json_null());
	}
	return o;
}

/*
 * Completes result (streams, runError) and writes it to runs/N/result,
 * then the journal entry. A code run's result holds the first `printed`
 * bytes of stdout (what it printed, not the value shown after it).
 * Returns 0 or the -errno of keeping the run.
 */
static int finish(struct sbx_run *r, json_t *result, size_t printed, int rc,
		  const struct sbx_error *err, long duration_ms)
{
	struct sbx_lease *l = r->lease;
	size_t out_len, err_len;
	int save_rc;
	pthread_mutex_lock(&r->lock);
	out_len = r->out_len;
	err_len = r->err_len;
	save_rc = r->save_rc;
	pthread_mutex_unlock(&r->lock);
	json_object_set_new(result, "run", json_integer((json_int_t)r->n));
	add_stream(result, r, "stdout", printed < out_len ? printed : out_len);
	add_stream(result, r, "stderr", err_len);
	json_object_set_new(result, "runError", run_error_json(rc, err));
	char *s = json_dumps(result, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!s) /* only when out of memory: still a valid result */
		s = sbx_xstrdup("{\"runError\": {\"errno\": \"ENOMEM\", \"message\": "
				"\"the result could not be encoded\"}}");
	size_t n = strlen(s);
	s = sbx_xrealloc(s, n + 2);
	s[n] = '\n';
	s[n + 1] = '\0';
	char *p = sbx_runs_path(l, r->n, "result");
	int wrc = sbx_write_file_atomic(p, s, n + 1);
	free(p);
	free(s);
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("run"));
	json_object_set_new(ev, "run", json_integer((json_int_t)r->n));
	json_object_set_new(ev, "kind",
			    json_string(r->kind == SBX_RUN_SHELL ? "command" : r->language));
	json_object_set_new(ev, "durationMs", json_integer((json_int_t)duration_ms));
	json_object_set_new(ev, "stdoutBytes", json_integer((json_int_t)out_len));
	json_object_set_new(ev, "stderrBytes", json_integer((json_int_t)err_len));
	json_t *ec = json_object_get(result, "exitCode");
	if (ec)
		json_object_set(ev, "exitCode", ec);
	if (json_object_get(result, "success"))
		json_object_set(ev, "success", json_object_get(result, "success"));
	size_t tl = strlen(r->text) > 200 ? 200 : strlen(r->text);
	while (tl && ((unsigned char)r->text[tl] & 0xC0) == 0x80)
		tl--; /* never cut a UTF-8 sequence */
	json_object_set_new(ev, "text", text_or_null(r->text, tl));
	sbx_lease_journal(l, ev);
	return save_rc ? save_rc : wrc;
}

/*
 * A run stopped before its end: past the lease's runTimeout (ETIMEDOUT),
 * or cancelled because the process waiting for it was killed or `kill`
 * was written to runs/N/ctl (EINTR). The provider killed the command or
 * gave up on the cell; a cell's interpreter is restarted so the next cell
 * does not queue behind the one still running in it.
 */
static int stopped(struct sbx_run *r, struct sbx_instance *inst, bool cancelled,
		   struct sbx_error *err)
{
	struct sbx_lease *l = r->lease;
	struct sbx_error re = SBX_ERROR_INIT;
	int e = cancelled ? EINTR : ETIMEDOUT;
	enum sbx_errcode code = cancelled ? SBX_E_EXECUTION_FAILED : SBX_E_TIMEOUT;
	const char *what = r->kind == SBX_RUN_SHELL ? "command" : "cell";
	char why[320];
	pthread_mutex_lock(&r->lock);
	int save_rc = r->save_rc;
	if (save_rc)
		snprintf(why, sizeof(why), "could not keep the output of run %lu: %s", r->n,
			 r->save_why);
	pthread_mutex_unlock(&r->lock);
	if (cancelled && save_rc) {
		e = -save_rc;
		code = SBX_E_INTERNAL;
	} else if (cancelled && atomic_load(&r->killed_by_ctl))
		snprintf(why, sizeof(why), "the %s (run %lu) was stopped by `kill` on its ctl",
			 what, r->n);
	else if (cancelled && sbx_run_waits_stopped())
		snprintf(why, sizeof(why), "the %s was stopped: sbxfs is stopping", what);
	else if (cancelled)
		snprintf(why, sizeof(why),
			 "the %s was stopped: the process waiting for it was killed", what);
	else
		snprintf(why, sizeof(why), "the %s ran past runTimeout (%ld s)", what,
			 l->spec.run_timeout_s);
	if (r->kind == SBX_RUN_SHELL)
		return sbx_error_set(err, e, code, "%s; it was killed", why);
	if (!l->prov->code_reset || l->prov->code_reset(inst, r->language, &re))
		return sbx_error_set(err, e, code, "%s%s%s", why,
				     re.msg[0] ? "; restarting its interpreter failed: " : "",
				     re.msg);
	return sbx_error_set(err, e, code,
			     "%s; its %s interpreter was restarted, its state is lost", why,
			     r->language);
}

/*
 * One shell everywhere: the text runs under bash where the sandbox has it,
 * sh otherwise, or under the spec's `shell`. The provider's own shell only
 * execs that one, so the run keeps its pid (Daytona's pidfile, E2B's
 * signals and local's process group stay right). The search uses the run's
 * PATH (a bash the env's PATH names first wins), then /bin: an env file's
 * PATH without sh in it (`PATH=/opt/venv/bin`) is the command's, and made
 * every run "sh: not found", 127.
 */
static char *shell_text(struct sbx_lease *l, const char *text, const char *script)
{
	struct sbx_buf b = SBX_BUF_INIT;
	if (l->spec.shell) {
		sbx_buf_adds(&b, "exec ");
		sbx_buf_add_shquoted(&b, l->spec.shell);
	} else {
		/* `command -v` is a builtin: no subshell, no fork before the exec */
		sbx_buf_adds(&b, "if command -v bash >/dev/null 2>&1; then set -- bash; "
				 "elif [ -x /bin/bash ]; then set -- /bin/bash; "
				 "else set -- /bin/sh; fi; exec \"$1\"");
	}
	if (script) {
		sbx_buf_addch(&b, ' ');
		sbx_buf_add_shquoted(&b, script);
	} else {
		sbx_buf_adds(&b, " -c ");
		sbx_buf_add_shquoted(&b, text);
	}
	return sbx_buf_detach(&b, NULL);
}

/*
 * *shell, shell_text's `-c TEXT` form, too long for one argument of execve
 * (MAX_ARG_STRLEN, 128 KiB: it failed with E2BIG, or an empty reply from
 * envd; quoting makes it up to four times the text): the text goes to a
 * file in the sandbox's /tmp first, through the provider's write slot,
 * and *shell becomes the form that runs that file; it is removed after
 * the run. *script is its path (caller frees), NULL when *shell is short.
 */
#define SBX_STAGED_PREFIX "rm -f -- \"$0\"; "

static int stage_text(struct sbx_lease *l, struct sbx_instance *inst, const char *text,
		      char **shell, char **script, struct sbx_error *err)
{
	unsigned char rnd[8];
	/*
	 * The default shells remove the copy as they start reading it (on
	 * its first line: line numbers stay the text's), so a daemon killed
	 * during the run leaves none; the removal after the run stays for a
	 * run that never started, and for a lease's own shell.
	 */
	const char *prefix = l->spec.shell ? "" : SBX_STAGED_PREFIX;
	size_t len = strlen(prefix) + strlen(text);
	int fd, rc;
	*script = NULL;
	if (strlen(*shell) <= SBX_RUN_ARG_MAX)
		return 0;
	if (!l->prov->write)
		return sbx_error_set(
		    err, E2BIG, SBX_E_EXECUTION_FAILED,
		    "a command over %d bytes (quoted) needs the provider's write slot",
		    SBX_RUN_ARG_MAX);
	if ((fd = memfd_create("sbxfs-run", MFD_CLOEXEC)) < 0)
		return sbx_error_set(err, errno, SBX_E_INTERNAL, "staging the command: %s",
				     strerror(errno));
	if ((rc = sbx_write_all(fd, prefix, strlen(prefix))) ||
	    (rc = sbx_write_all(fd, text, strlen(text))))
		sbx_error_set(err, -rc, SBX_E_INTERNAL, "staging the command: %s", strerror(-rc));
	sbx_random_bytes(rnd, sizeof(rnd));
	*script = sbx_xasprintf("/tmp/.sbxfs-run-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
				rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	if (!rc && (rc = l->prov->write(inst, *script, fd, (off_t)len, 0600, err)))
		sbx_error_prefix(err, "staging the command (over 64 KiB quoted) in the sandbox");
	close(fd);
	/* Its mode now, not with the next batch (e2b's upload makes files 0644, a chmod queued). */
	struct sbx_error ignore = SBX_ERROR_INIT;
	if (!rc && l->prov->sync)
		l->prov->sync(inst, &ignore);
	if (rc) {
		free(*script);
		*script = NULL;
		return rc;
	}
	free(*shell);
	*shell = shell_text(l, text, *script);
	return 0;
}

static void unstage_text(struct sbx_lease *l, struct sbx_instance *inst, char *script)
{
	struct sbx_error e = SBX_ERROR_INIT;
	if (!script)
		return;
	if (l->prov->unlink && l->prov->unlink(inst, script, &e) && e.err != ENOENT)
		sbx_log(SBX_LOG_WARN, "lease %s: removing %s: %s", l->name, script, e.msg);
	free(script);
}

/* A run's result before its end: what it is, nothing known yet. */
static json_t *result_new(const struct sbx_run *r)
{
	json_t *result = json_object();
	if (r->kind == SBX_RUN_SHELL) {
		json_object_set_new(result, "type", json_string("command"));
		json_object_set_new(result, "command", text_or_null(r->text, strlen(r->text)));
		json_object_set_new(result, "exitCode", json_null());
	} else {
		json_object_set_new(result, "type", json_string("code"));
		json_object_set_new(result, "language", json_string(r->language));
		json_object_set_new(result, "success", json_false());
	}
	return result;
}

/* The end of run r with rc (its result written): its waiters and readers let go. */
static void run_done(struct sbx_run *r, int rc)
{
	pthread_mutex_lock(&r->lock);
	if (r->out_fd >= 0)
		close(r->out_fd);
	if (r->err_fd >= 0)
		close(r->err_fd);
	r->out_fd = r->err_fd = -1;
	free(r->text);
	r->text = NULL;
	r->rc = rc;
	r->done = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	/* A finished run no longer holds its lease (the lease's table holds it). */
	sbx_lease_put(r->lease);
	sbx_run_put(r);
}

static void *run_main(void *arg)
{
	struct sbx_run *r = arg;
	struct sbx_lease *l = r->lease;
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_instance *inst;
	struct sbx_run_sink sink = {r, sink_output, &r->cancel};
	long long t0 = sbx_now_ms();
	size_t printed = SIZE_MAX;
	char **envs = env_lines(l);
	long timeout_ms = l->spec.run_timeout_s * 1000;
	/* what close returned for goes up first (the uploads resume a paused lease) */
	int rc = sbx_fs_drain_for_run(l, &err);
	bool used = !rc && !(rc = sbx_lease_use(l, &inst, &err));
	json_t *result = result_new(r);
	if (!rc) {
		if (l->prov->sync)
			l->prov->sync(inst, &err);
		char *script = NULL, *shell = NULL;
		if (r->kind == SBX_RUN_SHELL)
			shell = shell_text(l, r->text, NULL);
		if (shell && !(rc = stage_text(l, inst, r->text, &shell, &script, &err))) {
			struct sbx_run_req req = {.shell = shell,
						  .envs = (const char *const *)envs,
						  .timeout_ms = timeout_ms};
			struct sbx_run_result res = {0};
			rc = l->prov->run(inst, &req, &sink, &res, &err);
			free(shell);
			unstage_text(l, inst, script);
			bool cancelled = rc == -ECANCELED && atomic_load(&r->cancel);
			if (cancelled)
				res.exit_code = 128 + SIGKILL;
			if (!rc || cancelled) {
				json_object_set_new(result, "exitCode",
						    json_integer(res.exit_code));
				json_object_set_new(result, "durationMs",
						    json_integer((json_int_t)(sbx_now_ms() - t0)));
				json_object_set_new(result, "timedOut",
						    json_boolean(res.timed_out));
				json_object_set_new(result, "interrupted", json_boolean(cancelled));
			}
			if (cancelled || (!rc && res.timed_out))
				rc = stopped(r, inst, cancelled, &err);
		} else if (shell) {
			free(shell); /* staging failed: rc and err say why */
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
				json_decref(result);
				result = code_result_json(r, &cr, files);
				/* A notebook shows the value after the printed output. */
				pthread_mutex_lock(&r->lock);
				printed = r->out_len;
				pthread_mutex_unlock(&r->lock);
				if (cr.text) {
					sink_output(r, SBX_STDOUT, cr.text, strlen(cr.text));
					if (cr.text[0] && cr.text[strlen(cr.text) - 1] != '\n')
						sink_output(r, SBX_STDOUT, "\n", 1);
				}
			}
			sbx_code_result_free(&cr);
		}
		if (!rc)
			sbx_lease_heard(l);
		sbx_lease_unuse(l);
	}
	free(envs);
	/* The lease killed under the run ("init hung up", "is gone" was all it said). */
	struct sbx_error gone = SBX_ERROR_INIT;
	if (rc && used && !atomic_load(&r->cancel) && sbx_lease_ended(l, &gone))
		rc = sbx_error_set(&err, ENOENT, SBX_E_NOT_FOUND, "%s while the %s ran", gone.msg,
				   r->kind == SBX_RUN_SHELL ? "command" : "cell");
	sbx_fs_invalidate(l);
	/* Every run leaves a result, also one that could not complete. */
	int frc = finish(r, result, printed, rc, &err, (long)(sbx_now_ms() - t0));
	json_decref(result);
	if (frc && !rc) {
		char *dir = sbx_runs_path(l, r->n, NULL);
		rc = sbx_error_set(&err, -frc, SBX_E_INTERNAL,
				   "could not keep the output of run %lu in %s: %s", r->n, dir,
				   strerror(-frc));
		free(dir);
	}
	if (frc) /* The lease's error file is on that same disk: the root's is memory. */
		sbx_mount_error(l->mount, "exec", &err);
	if (rc)
		sbx_lease_error(l, r->kind == SBX_RUN_SHELL ? "exec" : "code", &err);
	run_done(r, rc);
	return NULL;
}

/*
 * Creates runs/N/ with the empty stream files, then cmd: a caller that
 * finds its text in cmd (sbx run) finds the streams there too. 0 or -errno
 * with err.
 */
static int create_files(struct sbx_run *r, struct sbx_error *err)
{
	const char *what = "create";
	int rc = sbx_mkdir_p(r->dir, 0700);
	for (int i = 0; !rc && i < 2; i++) {
		char *p = sbx_runs_path(r->lease, r->n, i ? "stderr" : "stdout");
		int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		free(p);
		what = "create the output files in";
		if (fd < 0)
			rc = -errno;
		else if (i)
			r->err_fd = fd;
		else
			r->out_fd = fd;
	}
	if (!rc) {
		what = "write cmd in";
		char *p = sbx_runs_path(r->lease, r->n, "cmd");
		rc = sbx_write_file_atomic(p, r->text, strlen(r->text));
		free(p);
	}
	if (rc)
		sbx_error_set(err, -rc, SBX_E_INTERNAL, "cannot %s %s (run %lu not started): %s",
			      what, r->dir, r->n, strerror(-rc));
	return rc;
}

/* Run N of l, in its table, holding l; refs: the caller's and the thread's. */
static struct sbx_run *run_new(struct sbx_lease *l, enum sbx_run_kind kind, const char *language,
			       const char *text, const struct sbx_run_owner *owner)
{
	struct sbx_run *r = sbx_xcalloc(1, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->refs = 2; /* the caller's and the thread's; the lease's table takes its own */
	r->lease = l;
	r->out_fd = r->err_fd = -1;
	if (owner)
		r->owner = *owner;
	pthread_mutex_lock(&l->lock);
	l->runs++;
	pthread_mutex_unlock(&l->lock);
	r->kind = kind;
	r->language = language ? sbx_xstrdup(language) : NULL;
	r->text = sbx_xstrdup(text);
	pthread_mutex_lock(&l->mount->lock);
	l->refs++;
	pthread_mutex_unlock(&l->mount->lock);
	sbx_runs_add(l, r);
	return r;
}

int sbx_run_start(struct sbx_lease *l, enum sbx_run_kind kind, const char *language,
		  const char *text, const struct sbx_run_owner *owner, struct sbx_run **out,
		  struct sbx_error *err)
{
	struct sbx_run *r = run_new(l, kind, language, text, owner);
	int rc = create_files(r, err);
	if (!rc) {
		sbx_runs_prune(l);
		if (sbx_thread_detached(&r->thread, run_main, r))
			rc =
			    sbx_error_set(err, EAGAIN, SBX_E_INTERNAL, "cannot start a run thread");
	}
	if (rc) {
		sbx_run_put(r); /* the thread's */
		run_done(r, rc);
		return rc;
	}
	*out = r;
	return 0;
}

void sbx_run_refused(struct sbx_lease *l, enum sbx_run_kind kind, const char *language,
		     const char *text, const struct sbx_run_owner *owner, int rc,
		     const struct sbx_error *why)
{
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_run *r = run_new(l, kind, language, text, owner);
	if (!create_files(r, &e)) {
		sbx_runs_prune(l);
		json_t *result = result_new(r);
		finish(r, result, SIZE_MAX, rc, why, 0);
		json_decref(result);
	}
	sbx_run_put(r); /* no thread */
	run_done(r, rc);
}

/* How long a killed waiter's answer waits for the provider to stop the run. */
#define SBX_CANCEL_WAIT_MS 5000

static bool (*abandon_check)(void);
static atomic_bool waits_stopped;

void sbx_run_stop_waits(void)
{
	atomic_store(&waits_stopped, true);
}

bool sbx_run_waits_stopped(void)
{
	return atomic_load(&waits_stopped);
}

void sbx_run_set_abandon_check(bool (*fn)(void))
{
	abandon_check = fn;
}

/* Waits on r->cond (lock held) for at most ms. */
static void wait_ms_locked(struct sbx_run *r, long ms)
{
	struct timespec dl;
	sbx_deadline_in(ms, &dl);
	sbx_cond_wait_until(&r->cond, &r->lock, &dl);
}

/*
 * One wait on r->cond (lock held), at most SBX_CANCEL_POLL_MS when the
 * waiter can be checked. Once the process waiting is being killed, -EINTR;
 * when that process is the run's own (stops: its writer, or the read-write
 * open that wrote it), the run is cancelled first and the answer waits
 * until the provider has stopped it (or SBX_CANCEL_WAIT_MS): whatever that
 * process's killer runs next finds the command gone. Another reader (of
 * stdout, runs/N/..., a read-only exec) only watches: its death lets it go
 * and the run goes on.
 */
static int wait_locked(struct sbx_run *r, bool stops)
{
	if (!abandon_check) {
		pthread_cond_wait(&r->cond, &r->lock);
		return 0;
	}
	wait_ms_locked(r, SBX_CANCEL_POLL_MS);
	if (r->done || !abandon_check())
		return 0;
	if (!stops)
		return -EINTR;
	atomic_store(&r->cancel, 1);
	for (long long end = sbx_now_ms() + SBX_CANCEL_WAIT_MS; !r->done && sbx_now_ms() < end;)
		wait_ms_locked(r, SBX_CANCEL_POLL_MS);
	return -EINTR;
}

int sbx_run_wait_locked(struct sbx_run *r, bool stops, bool (*pred)(struct sbx_run *, void *),
			void *ctx)
{
	int rc = 0;
	while (!r->done && !(pred && pred(r, ctx)) && !rc)
		rc = wait_locked(r, stops);
	return rc;
}

int sbx_run_wait(struct sbx_run *r)
{
	pthread_mutex_lock(&r->lock);
	int rc = sbx_run_wait_locked(r, true, NULL, NULL);
	if (!rc)
		rc = r->rc;
	pthread_mutex_unlock(&r->lock);
	return rc;
}

struct sbx_run *sbx_run_get(struct sbx_run *r)
{
	pthread_mutex_lock(&r->lock);
	r->refs++;
	pthread_mutex_unlock(&r->lock);
	return r;
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
	if (r->out_fd >= 0)
		close(r->out_fd);
	if (r->err_fd >= 0)
		close(r->err_fd);
	free(r->language);
	free(r->text);
	free(r->dir);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r);
}

char **sbx_run_envs(struct sbx_lease *l)
{
	return env_lines(l);
}
