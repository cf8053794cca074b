/*
 * code — run_code and code_reset of the local provider: one persistent
 * interpreter per language per lease, inside the lease.
 *
 * The drivers (providers/kernel: pykernel.py, jskernel.js, embedded in
 * the binary) are written to /run/sbxfs/ in the lease and started there
 * through the lease's init, as a background run (`--start`): each serves
 * a unix socket /run/sbxfs/LANG.sock. The socket lives in the lease's
 * overlay, which the host reaches through the lease root, so every
 * execution is one connection from sbxfs straight to the interpreter: the
 * request line out, NDJSON events (kernel/events.h) back as the code runs
 * (streamed into the sink), the server closing at end_of_execution.
 * Being processes of the lease, interpreters outlive a remount of sbxfs,
 * are frozen with the lease, and die with it.
 *
 * State lost: a socket that refuses connections is an interpreter that
 * died (killed by the memory cap, say); `--start` replaces it and says so
 * (state_lost), and that run's result carries it. code_reset kills the
 * interpreter and removes its socket, so the next run starts a fresh one
 * without calling it lost.
 *
 * Safety: the socket is opened with openat2(RESOLVE_IN_ROOT) as an O_PATH
 * descriptor and must be a socket (not a link), and the connection goes
 * through that descriptor, so nothing in the lease can point sbxfs at a
 * host socket; the pid a reset kills must live in the lease's pid
 * namespace.
 */
#include "local.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fsutil.h"
#include "base/sysutil.h"
#include "kernel/events.h"
#include "kernel/kernels.h"

#define RUN_DIR "/run/sbxfs"
#define START_TIMEOUT_MS 60000L
#define START_ERR_MAX 2048

/* Starts are rare: one lock for all leases keeps two runs from starting two kernels. */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct kernel {
	const char *language, *driver, *runtime;
	bool js; /* the driver is sbx_kernel_js, else sbx_kernel_py */
} kernels[] = {
    {"python", "pykernel.py", "python3", false},
    {"javascript", "jskernel.js", "node", true},
    {"typescript", "jskernel.js", "node", true},
};

/* kernels[] is in sbx_code_language_index() order. */
static const struct kernel *kernel_for(const char *language)
{
	int i = sbx_code_language_index(language);
	return i < 0 ? NULL : &kernels[i];
}

/* O_PATH descriptor of the lease's /run/sbxfs (made when create), or -errno. */
static int run_dir(const struct local_inst *li, bool create)
{
	int e;
	if (create && (e = lcl_mkdir_p(li, RUN_DIR, 0755)) < 0)
		return e;
	return lcl_open_in_root(li, RUN_DIR, O_PATH | O_DIRECTORY, 0);
}

/*
 * Connects to the kernel of k. Returns the socket, or -ENOENT (never
 * started, or reset), -ECONNREFUSED (its interpreter died), -errno.
 * *pid: the listener's pid in our (the host's) namespace.
 */
static int kernel_connect(int dfd, const struct kernel *k, pid_t *pid)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	struct stat st;
	char name[32];
	int sfd, fd, e;

	snprintf(name, sizeof(name), "%s.sock", k->language);
	if ((sfd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -errno;
	if (fstat(sfd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		close(sfd);
		return -ECONNREFUSED; /* not a socket: replaced by the next start */
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", sfd);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		e = -errno;
		close(sfd);
		return e;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		e = -errno;
		close(fd);
		close(sfd);
		return e;
	}
	close(sfd);
	*pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 ? cred.pid : 0;
	return fd;
}

/* Writes the driver into the lease's /run/sbxfs (through a temporary name). */
static int write_driver(int dfd, const struct kernel *k)
{
	char tmp[64];
	const char *src = k->js ? sbx_kernel_js : sbx_kernel_py;
	size_t len = k->js ? sbx_kernel_js_len : sbx_kernel_py_len;
	int fd, e = 0;

	snprintf(tmp, sizeof(tmp), ".%s.%d", k->driver, (int)getpid());
	if ((fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644)) <
	    0)
		return -errno;
	e = sbx_write_all(fd, src, len);
	if (close(fd) < 0 && !e)
		e = -errno;
	if (!e && renameat(dfd, tmp, dfd, k->driver) < 0)
		e = -errno;
	if (e)
		unlinkat(dfd, tmp, 0);
	return e;
}

struct start_out {
	struct sbx_buf out, err;
};

static int start_sink(void *ctx, enum sbx_stream s, const char *data, size_t len)
{
	struct start_out *so = ctx;
	struct sbx_buf *b = s == SBX_STDERR ? &so->err : &so->out;
	sbx_buf_add_capped(b, data, len, START_ERR_MAX);
	return 0;
}

/* Runs `DRIVER --start` in the lease (it replaces a dead interpreter); *lost if it did. */
static int kernel_start(struct local_inst *li, int dfd, const struct kernel *k,
			const char *const *envs, bool *lost, struct sbx_error *err)
{
	struct start_out so = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_run_sink sink = {&so, start_sink};
	struct sbx_run_result res;
	struct sbx_buf sh = SBX_BUF_INIT;
	int e;

	if ((e = write_driver(dfd, k)) < 0)
		return sbx_error_set(err, e, SBX_E_EXECUTION_FAILED,
				     "%s: writing its driver into the sandbox: %s", k->language,
				     strerror(-e));
	sbx_buf_adds(&sh, "cd -- ");
	sbx_buf_add_shquoted(&sh, li->workdir ? li->workdir : "/root");
	/*
	 * The runtime is looked for on the run's PATH, then in the usual
	 * places: the env file's PATH is the code's (os.environ), and one
	 * without python3 in it (`PATH=/opt/tools/bin`) must not stop the cell.
	 */
	sbx_buf_addf(&sh,
		     " 2>/dev/null || cd /\n"
		     "rt=$(PATH=\"$PATH:/usr/local/bin:/usr/bin:/bin\"; command -v %s)\n"
		     "if [ -z \"$rt\" ]; then\n",
		     k->runtime);
	if (!strcmp(k->language, "typescript"))
		sbx_buf_adds(
		    &sh, "  echo \"no TypeScript runtime in the sandbox: node is not on PATH "
			 "($PATH); sbxfs runs TypeScript in node (its own type stripping "
			 "from node 22.13, the typescript package, or sbxfs's stripper)\" >&2\n");
	else
		sbx_buf_addf(&sh, "  echo \"%s is not on PATH ($PATH)\" >&2\n", k->runtime);
	sbx_buf_addf(&sh,
		     "  exit 127\nfi\n"
		     "exec \"$rt\" %s" RUN_DIR "/%s --start " RUN_DIR "/%s.sock --language %s\n",
		     strcmp(k->runtime, "python3") ? "" : "-u ", k->driver, k->language,
		     k->language);
	/*
	 * The interpreter starts with the lease's own environment and, of the
	 * env file's, PATH alone (its runtime is looked for there). The env
	 * file's variables come with each cell, which the driver sets for that
	 * cell and takes back after, so one removed from env is gone from the
	 * next cell, as on e2b and daytona: a secret removed stayed in
	 * os.environ, and in what the cells started, for the interpreter's life.
	 */
	const char *start_envs[2] = {NULL, NULL};
	for (size_t i = 0; envs && envs[i]; i++)
		if (!strncmp(envs[i], "PATH=", 5))
			start_envs[0] = envs[i];
	struct sbx_run_req req = {
	    .shell = sh.buf, .envs = start_envs, .timeout_ms = START_TIMEOUT_MS};
	e = lcl_run(&li->base, &req, &sink, &res, err);
	if (!e && res.exit_code) {
		/* The last line of stderr says why. */
		while (so.err.len && so.err.buf[so.err.len - 1] == '\n')
			so.err.buf[--so.err.len] = '\0';
		const char *why = so.err.len ? so.err.buf : "no reason given";
		const char *nl = strrchr(why, '\n');
		e = sbx_error_set(err, res.exit_code == 127 ? ENOTSUP : EIO, SBX_E_EXECUTION_FAILED,
				  "%s: %s%s", k->language,
				  res.exit_code == 127 ? "" : "the interpreter did not start: ",
				  nl && res.exit_code == 127 ? nl + 1 : why);
	}
	*lost = !e && so.out.len && strstr(so.out.buf, "\"state_lost\"");
	sbx_buf_release(&so.out);
	sbx_buf_release(&so.err);
	sbx_buf_release(&sh);
	return e;
}

/*
 * A connection to k's interpreter, started first when none answers (a
 * start that replaced a dead one is noted in li->code_lost). -errno with
 * err set.
 */
static int kernel_open(struct local_inst *li, const struct kernel *k, const char *const *envs,
		       struct sbx_error *err)
{
	pid_t pid = 0;
	bool lost = false;
	int dfd, fd, e = 0;
	if ((dfd = run_dir(li, true)) < 0)
		return sbx_error_set(err, dfd, SBX_E_EXECUTION_FAILED, "%s: " RUN_DIR ": %s",
				     k->language, strerror(-dfd));
	fd = kernel_connect(dfd, k, &pid);
	if (fd < 0) {
		pthread_mutex_lock(&start_lock);
		/* Another run may have started it meanwhile. */
		if ((fd = kernel_connect(dfd, k, &pid)) < 0 &&
		    (e = kernel_start(li, dfd, k, envs, &lost, err)) == 0 &&
		    (fd = kernel_connect(dfd, k, &pid)) < 0)
			e = sbx_error_set(err, fd, SBX_E_EXECUTION_FAILED,
					  "%s: the interpreter started but does not answer: %s",
					  k->language, strerror(-fd));
		if (lost)
			li->code_lost |= 1u << (k - kernels);
		pthread_mutex_unlock(&start_lock);
	}
	close(dfd);
	return fd < 0 ? e : fd;
}

/* Whether a start replaced k's dead interpreter since the last run said so; clears it. */
static bool take_lost(struct local_inst *li, const struct kernel *k)
{
	unsigned bit = 1u << (k - kernels);
	pthread_mutex_lock(&start_lock);
	bool lost = li->code_lost & bit;
	li->code_lost &= ~bit;
	pthread_mutex_unlock(&start_lock);
	return lost;
}

/* Sends the request and feeds the events into ev until the server closes. */
static int execute(int fd, const struct sbx_code_req *req, const struct kernel *k,
		   const struct sbx_run_sink *sink, struct sbx_code_events *ev,
		   struct sbx_error *err)
{
	size_t len = 0;
	char *line = sbx_code_request_line(req, &len), buf[65536];
	long long deadline = req->timeout_ms > 0 ? sbx_now_ms() + req->timeout_ms : -1;
	int e;

	if (!line)
		return sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED,
				     "%s: the code or an env value is not valid UTF-8",
				     k->language);
	e = sbx_send_all(fd, line, len);
	free(line);
	if (e < 0 && e != -EPIPE && e != -ECONNRESET)
		return sbx_error_set(err, e, SBX_E_EXECUTION_FAILED, "%s: sending the code: %s",
				     k->language, strerror(-e));
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long wait = -1;
		if (deadline >= 0 && (wait = (long)(deadline - sbx_now_ms())) <= 0)
			return sbx_error_set(err, ETIMEDOUT, SBX_E_TIMEOUT,
					     "%s: the run outlived its timeout", k->language);
		if (sbx_run_cancelled(sink))
			return sbx_error_set(err, ECANCELED, 0, "%s: the run was cancelled",
					     k->language);
		if (sink && sink->cancel && (wait < 0 || wait > SBX_CANCEL_POLL_MS))
			wait = SBX_CANCEL_POLL_MS;
		if (poll(&p, 1, (int)wait) < 0) {
			if (errno == EINTR)
				continue;
			return sbx_error_set(err, errno, 0, "poll: %s", strerror(errno));
		}
		if (!p.revents)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* the server closed: after end_of_execution, or it died */
		if ((e = sbx_code_events_feed(ev, buf, (size_t)n, err)) < 0)
			return e;
	}
	return sbx_code_events_finish(ev, k->language, err);
}

int lcl_run_code(struct sbx_instance *inst, const struct sbx_code_req *req,
		 const struct sbx_run_sink *sink, struct sbx_code_result *result,
		 struct sbx_error *err)
{
	struct local_inst *li = lcl_inst(inst);
	const struct kernel *k = kernel_for(req->language);
	struct sbx_code_events ev;
	long long t0 = sbx_now_ms();
	int fd, e;

	sbx_code_events_init(&ev, sink, result);
	if (!k) {
		e = sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED, "no interpreter for %s",
				  req->language ? req->language : "(none)");
		goto out;
	}
	if ((e = fd = kernel_open(li, k, req->envs, err)) < 0)
		goto out;
	e = execute(fd, req, k, sink, &ev, err);
	close(fd);
	result->state_lost = result->state_lost || take_lost(li, k);
out:
	sbx_code_events_release(&ev);
	result->duration_ms = (long)(sbx_now_ms() - t0);
	return e;
}

int lcl_code_ready(struct sbx_instance *inst, const char *language, const char *const *envs,
		   struct sbx_error *err)
{
	const struct kernel *k = kernel_for(language);
	int fd = k ? kernel_open(lcl_inst(inst), k, envs, err) : 0; /* no k: run_code says */
	if (fd > 0)
		close(fd);
	return fd < 0 ? fd : 0;
}

/* Whether pid lives in the lease (its pid namespace is init's). */
static bool in_lease(const struct local_inst *li, pid_t pid)
{
	char a[64], b[64];
	struct stat sa, sb;
	snprintf(a, sizeof(a), "/proc/%d/ns/pid", (int)pid);
	snprintf(b, sizeof(b), "/proc/%d/ns/pid", (int)li->init_pid);
	return pid > 0 && pid != li->init_pid && stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
	       sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev;
}

static int reset_one(struct local_inst *li, int dfd, const struct kernel *k)
{
	char name[32];
	pid_t pid = 0;
	int fd = kernel_connect(dfd, k, &pid);
	if (fd >= 0) {
		if (in_lease(li, pid)) {
			kill(-pid, SIGKILL); /* its process group: it is a session leader */
			kill(pid, SIGKILL);
		}
		close(fd);
	}
	snprintf(name, sizeof(name), "%s.sock", k->language);
	if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int lcl_code_reset(struct sbx_instance *inst, const char *language, struct sbx_error *err)
{
	struct local_inst *li = lcl_inst(inst);
	const struct kernel *k = language ? kernel_for(language) : NULL;
	int dfd, e = 0;

	if (language && !k)
		return sbx_error_set(
		    err, EINVAL, SBX_E_EXECUTION_FAILED,
		    "restart: no interpreter for %s (python, javascript or typescript)", language);
	if ((dfd = run_dir(li, false)) == -ENOENT)
		return 0; /* no interpreter was ever started */
	if (dfd < 0)
		return sbx_error_set(err, dfd, SBX_E_EXECUTION_FAILED, "restart: " RUN_DIR ": %s",
				     strerror(-dfd));
	pthread_mutex_lock(&start_lock);
	for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]) && !e; i++)
		if (!k || k == &kernels[i]) {
			e = reset_one(li, dfd, &kernels[i]);
			li->code_lost &= ~(1u << i); /* a fresh one is not a lost state */
		}
	pthread_mutex_unlock(&start_lock);
	close(dfd);
	if (e)
		return sbx_error_set(err, e, SBX_E_EXECUTION_FAILED, "restart: %s", strerror(-e));
	return 0;
}
