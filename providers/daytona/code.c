/*
 * daytona/code — run_code and code_reset of the Daytona provider:
 * persistent interpreters without WebSockets.
 *
 * sbxfs's kernel drivers (providers/kernel) run inside the sandbox as
 * long-lived processes, one per language, each serving a unix socket in
 * /tmp/.sbxfs-code. A run is an ordinary command (dt_run: a toolbox
 * session, polled): the driver in --client mode, which starts the
 * interpreter when it is not there (and says state_lost when it had
 * died), sends the request it reads on stdin and prints the execution's
 * NDJSON events on stdout. Those arrive through the session's logs while
 * the code runs and are parsed as they come (kernel/events.h), so stdout
 * streams and matplotlib figures come back as PNG results like on the
 * other providers. The interpreter is a session leader of its own: the
 * command's end, or a session's deletion, leaves it running.
 *
 * The driver file (named by a hash of its text, so a new sbxfs brings its
 * own) is written by the first run of an instance, inside that command;
 * later commands only check that it is there (exit 125: write it again).
 * code_reset kills the interpreter (its pid file) and removes its socket.
 * Where the persistent interpreter cannot run at all, a cell runs alone
 * through POST /process/code-run (no state; its chart artifacts become
 * PNG results). The interpreter WebSocket is not used.
 */
#include "daytona/daytona.h"
#include "base/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/base64.h"
#include "base/log.h"
#include "kernel/events.h"
#include "kernel/kernels.h"

#define CODE_DIR "/tmp/.sbxfs-code"
#define EXIT_NO_DRIVER 125
#define EXIT_NO_RUNTIME 127
#define STDERR_MAX 4096
#define REQUEST_INLINE_MAX (48u << 10) /* base64 of it + the driver's stay under 128 KiB */

static const struct kernel {
	const char *language, *runtime, *ext;
	unsigned bit; /* in dt_instance.code_installed */
	bool js;
} kernels[] = {
    {"python", "python3", "py", 1u << 0, false},
    {"javascript", "node", "js", 1u << 1, true},
    {"typescript", "node", "js", 1u << 1, true},
};

/* kernels[] is in sbx_code_language_index() order. */
static const struct kernel *kernel_for(const char *language)
{
	int i = sbx_code_language_index(language);
	return i < 0 ? NULL : &kernels[i];
}

/* "CODE_DIR/pykernel-<fnv1a of the text>.py": a new driver gets a new name. */
static void driver_path(struct sbx_buf *b, const struct kernel *k)
{
	const char *src = k->js ? sbx_kernel_js : sbx_kernel_py;
	size_t len = k->js ? sbx_kernel_js_len : sbx_kernel_py_len;
	unsigned h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)src[i]) * 16777619u;
	sbx_buf_addf(b, CODE_DIR "/%skernel-%08x.%s", k->js ? "js" : "py", h, k->ext);
}

/*
 * The shell text of one run: (install the driver,) check the runtime, run
 * the client on the request (inline, or the file `reqfile` when it is big).
 */
static void command(struct sbx_buf *sh, const struct kernel *k, bool install, const char *request,
		    const char *reqfile)
{
	struct sbx_buf path = SBX_BUF_INIT;
	driver_path(&path, k);
	sbx_buf_addf(sh, "f=%s\n", path.buf);
	if (install) {
		const char *src = k->js ? sbx_kernel_js : sbx_kernel_py;
		size_t len = k->js ? sbx_kernel_js_len : sbx_kernel_py_len;
		sbx_buf_adds(sh, "[ -f \"$f\" ] || { mkdir -p " CODE_DIR " && printf '%s' '");
		sbx_base64_encode(src, len, sh);
		sbx_buf_adds(sh,
			     "' | base64 -d > \"$f.$$\" && mv -f \"$f.$$\" \"$f\"; } || exit 1\n");
	} else {
		sbx_buf_addf(sh, "[ -f \"$f\" ] || exit %d\n", EXIT_NO_DRIVER);
	}
	sbx_buf_addf(sh, "command -v %s >/dev/null 2>&1 || { echo \"", k->runtime);
	if (!strcmp(k->language, "typescript"))
		sbx_buf_adds(sh,
			     "no TypeScript runtime in the sandbox: node is not on PATH ($PATH)");
	else
		sbx_buf_addf(sh, "%s is not on PATH ($PATH)", k->runtime);
	sbx_buf_addf(sh, "\" >&2; exit %d; }\n", EXIT_NO_RUNTIME);
	if (reqfile) {
		sbx_buf_addf(sh,
			     "trap 'rm -f %s' EXIT\n%s %s\"$f\" --client " CODE_DIR
			     "/%s.sock --language %s < %s\n",
			     reqfile, k->runtime, k->js ? "" : "-u ", k->language, k->language,
			     reqfile);
	} else {
		sbx_buf_adds(sh, "printf '%s' '");
		sbx_base64_encode(request, strlen(request), sh);
		sbx_buf_addf(
		    sh, "' | base64 -d | %s %s\"$f\" --client " CODE_DIR "/%s.sock --language %s\n",
		    k->runtime, k->js ? "" : "-u ", k->language, k->language);
	}
	sbx_buf_release(&path);
}

/*
 * A request too big to ride in the command (one argument of `sh -c` is
 * bounded at 128 KiB) goes up as a file first; its path into reqfile.
 */
static int upload_request(struct dt_instance *di, const char *request, char *reqfile, size_t size,
			  struct sbx_error *err)
{
	char hex[17];
	size_t len = strlen(request), off = 0;
	int fd = memfd_create("sbxfs-code-request", MFD_CLOEXEC), rc;
	if (fd < 0)
		return sbx_error_set(err, errno, 0, "code: memfd: %s", strerror(errno));
	while (off < len) {
		ssize_t n = write(fd, request + off, len - off);
		if (n <= 0) {
			close(fd);
			return sbx_error_set(err, errno ? errno : EIO, 0, "code: memfd write");
		}
		off += (size_t)n;
	}
	dt_random_hex(hex, 8);
	snprintf(reqfile, size, "/tmp/.sbxfs-request-%s.json", hex);
	rc = dt_write(&di->base, reqfile, fd, (off_t)len, 0600, err);
	close(fd);
	return rc;
}

struct code_run {
	struct sbx_code_events ev;
	struct sbx_buf err; /* the client's stderr (bounded): why it failed */
	struct sbx_error fail;
};

static int code_output(void *ctx, enum sbx_stream s, const char *data, size_t len)
{
	struct code_run *cr = ctx;
	if (s == SBX_STDERR) {
		sbx_buf_add_capped(&cr->err, data, len, STDERR_MAX);
		return 0;
	}
	return sbx_code_events_feed(&cr->ev, data, len, &cr->fail);
}

static bool installed(struct dt_instance *di, const struct kernel *k)
{
	pthread_mutex_lock(&di->lock);
	bool yes = di->code_installed & k->bit;
	pthread_mutex_unlock(&di->lock);
	return yes;
}

static void set_installed(struct dt_instance *di, const struct kernel *k, bool yes)
{
	pthread_mutex_lock(&di->lock);
	di->code_installed = yes ? di->code_installed | k->bit : di->code_installed & ~k->bit;
	pthread_mutex_unlock(&di->lock);
}

/* The last line of the client's stderr, for the error file. */
static const char *last_line(struct sbx_buf *b)
{
	while (b->len && b->buf[b->len - 1] == '\n')
		b->buf[--b->len] = '\0';
	const char *nl = strrchr(b->buf, '\n');
	return b->len ? (nl ? nl + 1 : b->buf) : "no reason given";
}

/*
 * The error of a one-shot run from its output: the last line that looks
 * like "Name: message" (Python's last traceback line, node's first line).
 */
static void one_shot_error(struct sbx_code_result *r, const char *out, int exit_code)
{
	const char *best = NULL, *p = out;
	size_t best_len = 0;
	while (*p) {
		const char *e = strchr(p, '\n'), *end = e ? e : p + strlen(p), *c = p;
		while (c < end && (isalnum((unsigned char)*c) || *c == '_' || *c == '.'))
			c++;
		if (c > p && c + 1 < end && c[0] == ':' && c[1] == ' ' &&
		    isupper((unsigned char)*p)) {
			best = p;
			best_len = (size_t)(end - p);
		}
		p = e ? e + 1 : end;
	}
	r->success = false;
	if (best) {
		const char *colon = memchr(best, ':', best_len);
		r->err_name = sbx_xstrndup(best, (size_t)(colon - best));
		r->err_value = sbx_xstrndup(colon + 2, best_len - (size_t)(colon - best) - 2);
	} else {
		r->err_name = sbx_xstrdup("Error");
		if (asprintf(&r->err_value, "exit status %d", exit_code) < 0)
			r->err_value = NULL;
	}
	r->err_traceback = sbx_xstrdup(out);
}

/*
 * POST /process/code-run: the cell alone, in a fresh interpreter (no
 * state, no value of the last expression), when the persistent one cannot
 * run in this sandbox. Its output goes to stdout; matplotlib charts
 * (artifacts.charts, which the daemon cut out of the output as
 * dtn_artifact_k39fd2 lines) become PNG results.
 */
static int one_shot(struct dt_instance *di, const struct kernel *k, const struct sbx_code_req *req,
		    struct sbx_code_events *ev, struct sbx_error *err)
{
	const struct sbx_run_sink *sink = ev->sink;
	struct sbx_buf url = SBX_BUF_INIT;
	json_t *body = json_pack("{s:s, s:s}", "code", req->code ? req->code : "", "language",
				 k->language),
	       *reply = NULL, *envs = sbx_code_env_json(req->envs), *chart;
	size_t i;
	int rc;

	if (!body) {
		json_decref(envs);
		return sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED,
				     "%s: the code is not valid UTF-8", k->language);
	}
	if (json_object_size(envs))
		json_object_set(body, "envs", envs);
	json_decref(envs);
	if (req->timeout_ms > 0)
		json_object_set_new(body, "timeout", json_integer((req->timeout_ms + 999) / 1000));
	dt_toolbox_url(di, &url, "/process/code-run");
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .body = body,
				       .reply = &reply,
				       .what = "code-run",
				       .timeout_ms = req->timeout_ms > 0 ? req->timeout_ms + 30000
									 : 3600L * 1000,
				       .max_body = DT_LOGS_MAX},
		     err);
	json_decref(body);
	sbx_buf_release(&url);
	if (rc)
		return rc;
	json_t *code = json_object_get(reply, "exitCode");
	const char *out = json_string_value(json_object_get(reply, "result"));
	int exit_code = json_is_integer(code) ? (int)json_integer_value(code) : 0;
	if (out && *out && sink && sink->output &&
	    (rc = sink->output(sink->ctx, SBX_STDOUT, out, strlen(out))))
		rc = sbx_error_set(err, rc, 0, "code-run: the reader stopped the output");
	json_array_foreach(json_object_get(json_object_get(reply, "artifacts"), "charts"), i, chart)
	{
		/* A chart is a display of its figure: a result event with its png. */
		const char *png = json_string_value(json_object_get(chart, "png"));
		json_t *r = png ? json_pack("{s:s, s:b, s:s}", "type", "result", "is_main_result",
					    0, "png", png)
				: NULL;
		char *text = r ? json_dumps(r, JSON_COMPACT) : NULL;
		if (!rc && text)
			rc = sbx_code_events_line(ev, text, strlen(text), err);
		free(text);
		json_decref(r);
	}
	ev->ended = true;
	if (!rc && exit_code)
		one_shot_error(ev->res, out ? out : "", exit_code);
	json_decref(reply);
	return rc;
}

int dt_run_code(struct sbx_instance *inst, const struct sbx_code_req *req,
		const struct sbx_run_sink *sink, struct sbx_code_result *result,
		struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	const struct kernel *k = kernel_for(req->language);
	struct code_run cr = {.err = SBX_BUF_INIT, .fail = SBX_ERROR_INIT};
	struct sbx_run_sink mine = {&cr, code_output, sink ? sink->cancel : NULL};
	long t0 = sbx_now_ms();
	char *request = NULL;
	int rc = 0;

	sbx_code_events_init(&cr.ev, sink, result);
	if (!k) {
		rc = sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED, "no interpreter for %s",
				   req->language ? req->language : "(none)");
		goto out;
	}
	size_t len;
	if (!(request = sbx_code_request_line(req, &len))) {
		rc = sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED,
				   "%s: the code or an env value is not valid UTF-8", k->language);
		goto out;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		struct sbx_buf sh = SBX_BUF_INIT;
		struct sbx_run_result res;
		bool install = !installed(di, k);
		char reqfile[64];
		if (strlen(request) > REQUEST_INLINE_MAX &&
		    (rc = upload_request(di, request, reqfile, sizeof(reqfile), err)))
			break;
		command(&sh, k, install, request,
			strlen(request) > REQUEST_INLINE_MAX ? reqfile : NULL);
		struct sbx_run_req rreq = {.shell = sh.buf, .timeout_ms = req->timeout_ms};
		sbx_code_events_release(&cr.ev);
		sbx_code_result_free(result);
		sbx_code_events_init(&cr.ev, sink, result);
		sbx_buf_reset(&cr.err);
		rc = dt_run(inst, &rreq, &mine, &res, err);
		sbx_buf_release(&sh);
		if (rc && cr.fail.err)
			*err = cr.fail;
		if (rc)
			break;
		if (res.exit_code == EXIT_NO_DRIVER && !install) {
			set_installed(di, k, false); /* the sandbox lost it (/tmp cleaned) */
			continue;
		}
		if (install && res.exit_code != 1)
			set_installed(di, k, true);
		if (res.timed_out) {
			rc = sbx_error_set(err, ETIMEDOUT, SBX_E_TIMEOUT, "%s: the run timed out",
					   k->language);
		} else if (res.exit_code == EXIT_NO_RUNTIME) {
			rc = sbx_error_set(err, ENOTSUP, SBX_E_EXECUTION_FAILED, "%s: %s",
					   k->language, last_line(&cr.err));
		} else if (res.exit_code && !cr.ev.ended && cr.ev.execution_count < 0) {
			/* The persistent interpreter cannot run here: a one-shot run. */
			sbx_log(SBX_LOG_WARN,
				"daytona: %s: no persistent %s interpreter (exit %d: %s); "
				"running the cell alone through code-run",
				inst->id, k->language, res.exit_code, last_line(&cr.err));
			sbx_code_events_release(&cr.ev);
			sbx_code_result_free(result);
			sbx_code_events_init(&cr.ev, sink, result);
			rc = one_shot(di, k, req, &cr.ev, err);
		} else if (res.exit_code && !cr.ev.ended) {
			rc = sbx_error_set(
			    err, EIO, SBX_E_EXECUTION_FAILED,
			    "%s: the interpreter did not finish the run (exit %d): %s", k->language,
			    res.exit_code, last_line(&cr.err));
		} else {
			rc = sbx_code_events_finish(&cr.ev, k->language, err);
		}
		break;
	}
out:
	free(request);
	sbx_code_events_release(&cr.ev);
	sbx_buf_release(&cr.err);
	result->duration_ms = sbx_now_ms() - t0;
	return rc;
}

int dt_code_reset(struct sbx_instance *inst, const char *language, struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	const struct kernel *k = language ? kernel_for(language) : NULL;
	struct sbx_buf sh = SBX_BUF_INIT, out = SBX_BUF_INIT;
	int code = 0, rc;

	if (language && !k)
		return sbx_error_set(
		    err, EINVAL, SBX_E_EXECUTION_FAILED,
		    "restart: no interpreter for %s (python, javascript or typescript)", language);
	/* Only a pid whose command line names its socket is killed (pid files go stale). */
	for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++) {
		if (k && k != &kernels[i])
			continue;
		sbx_buf_addf(&sh,
			     "s=" CODE_DIR "/%s.sock; p=$(cat \"$s.pid\" 2>/dev/null); "
			     "if [ -n \"$p\" ] && tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null | "
			     "grep -q -- \"--socket $s\"; then kill -9 -- -$p $p 2>/dev/null; fi; "
			     "rm -f \"$s\" \"$s.pid\"\n",
			     kernels[i].language);
	}
	sbx_buf_adds(&sh, "true\n");
	rc = dt_exec(di, sh.buf, 30000, &out, &code, err);
	if (!rc && code)
		rc = sbx_error_set(err, EIO, SBX_E_EXECUTION_FAILED,
				   "restart failed (exit %d): %.200s", code, out.buf);
	sbx_buf_release(&sh);
	sbx_buf_release(&out);
	return rc;
}
