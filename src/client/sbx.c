/*
 * sbx — the command-line client of an sbxfs mount, for what plain files do
 * poorly: a command whose exit code, stdout and stderr reach the caller as
 * they would from a local command (`sbx run`), and an interactive shell on
 * a terminal (`sbx shell`).
 *
 * It talks only to the mount, through its files (exec, runs/N/, tty/), so
 * it works for every provider and over any path the mount is reachable
 * by. It is not a second control path: nothing here knows a provider.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/fsutil.h"
#include "base/xalloc.h"

/* timeout(1)'s status for a command stopped at its deadline. */
#define EXIT_TIMEOUT 124
/* An sbxfs failure: the command did not run, or its end is unknown. */
#define EXIT_SBXFS 125

static const char usage[] =
    "usage: sbx run [-i] [LEASE] -- COMMAND [ARG...]\n"
    "       sbx shell [LEASE]\n"
    "\n"
    "  run    runs COMMAND in the lease's sandbox through the mount: its stdout and\n"
    "         stderr stream to ours, SIGINT/SIGTERM stop it (so does a stdout that\n"
    "         cannot be written: SIGPIPE), and sbx exits with its exit code (124\n"
    "         when it ran past the lease's runTimeout, 125 when sbxfs failed or its\n"
    "         output could not be written: the reason is printed). Its stdin is\n"
    "         empty unless -i: then sbx reads its own stdin to the end first\n"
    "         (a pipe, a file, a heredoc: not interactive, use sbx shell), puts\n"
    "         it in the sandbox's /tmp and gives it to COMMAND, as ssh does.\n"
    "  shell  an interactive login shell on a terminal in the sandbox; sbx exits\n"
    "         with the shell's status.\n"
    "\n"
    "LEASE is a lease directory (/mnt/sbx/work) or a lease name. Without it, the\n"
    "lease is the one whose directory holds the current directory; inside its\n"
    "fs/ the command runs in the matching directory of the sandbox. A name is\n"
    "looked up in the mount that holds the current directory, else in\n"
    "$SBXFS_MOUNT.\n";

/* ---- finding the lease ---------------------------------------------------- */

static bool file_at(const char *dir, const char *name, mode_t type)
{
	char p[PATH_MAX + 64];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return stat(p, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

#define SBX_FUSE_SUPER_MAGIC 0x65735546

/*
 * The root of an sbxfs mount: a FUSE mount point (its device is not its
 * parent's) holding the root's files. The files alone were taken: a
 * sandbox can make ctl, status and profiles/ anywhere in its fs/, and sbx
 * called below them wrote the command to that directory's "exec", a file
 * of the sandbox, and showed what the sandbox wrote as its output and
 * exit code, nothing having run. A directory in fs/ has its mount's device.
 */
static bool is_mount_root(const char *dir)
{
	char up[PATH_MAX + 4];
	struct stat st, pst;
	struct statfs fs;
	snprintf(up, sizeof(up), "%s/..", dir);
	if (statfs(dir, &fs) || fs.f_type != SBX_FUSE_SUPER_MAGIC || stat(dir, &st) ||
	    stat(up, &pst) || st.st_dev == pst.st_dev)
		return false;
	return file_at(dir, "ctl", S_IFREG) && file_at(dir, "status", S_IFREG) &&
	       file_at(dir, "profiles", S_IFDIR);
}

/* The mount root at or above path (resolved), or NULL. Caller frees. */
static char *find_root(const char *path)
{
	char *p = realpath(path, NULL);
	while (p) {
		if (is_mount_root(p))
			return p;
		char *slash = strrchr(p, '/');
		if (!slash || slash == p) {
			free(p);
			return NULL;
		}
		*slash = '\0';
	}
	return NULL;
}

static __attribute__((format(printf, 1, 2), noreturn)) void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "sbx: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_SBXFS);
}

/*
 * Resolves the lease directory (caller frees) from the LEASE argument (may
 * be NULL) and the current directory; *sandbox_cwd gets the directory
 * inside the sandbox that the current directory is, when it is under this
 * lease's fs/ (else NULL).
 */
static char *find_lease(const char *arg, char **sandbox_cwd)
{
	char *cwd = realpath(".", NULL), *lease = NULL, *root = NULL;
	int cwd_errno = cwd ? 0 : errno;
	*sandbox_cwd = NULL;
	if (arg && (strchr(arg, '/') || !strcmp(arg, ".") || !strcmp(arg, "..")))
		lease = realpath(arg, NULL);
	if (!lease) {
		root = cwd ? find_root(cwd) : NULL;
		if (!root && arg && getenv("SBXFS_MOUNT"))
			root = realpath(getenv("SBXFS_MOUNT"), NULL);
		if (!root && !arg && cwd_errno)
			die("the current directory cannot be resolved (%s%s): give LEASE",
			    strerror(cwd_errno), cwd_errno == ENOENT ? ": it was removed" : "");
		if (!root)
			die(arg ? "%s: not a lease directory, and neither the current directory "
				  "nor $SBXFS_MOUNT is in an sbxfs mount"
				: "%sthe current directory is not in an sbxfs mount: give LEASE",
			    arg ? arg : "");
		struct sbx_buf b = SBX_BUF_INIT;
		if (arg) {
			sbx_buf_addf(&b, "%s/%s", root, arg);
		} else {
			const char *rest = cwd + strlen(root);
			size_t n = strcspn(rest + (*rest == '/'), "/");
			if (!n)
				die("%sthe current directory is the mount's root: give LEASE", "");
			sbx_buf_addf(&b, "%s/%.*s", root, (int)n, rest + 1);
		}
		lease = sbx_buf_detach(&b, NULL);
	}
	/* A lease is a directory of a mount's root, wherever its path came from. */
	char *parent = sbx_xstrndup(lease, (size_t)(strrchr(lease, '/') - lease));
	bool in_root = *parent && is_mount_root(parent);
	free(parent);
	if (!in_root || !file_at(lease, "exec", S_IFREG))
		die("%s: not a lease directory (%s)", lease,
		    in_root ? "no exec file" : "not a directory of an sbxfs mount's root");
	size_t ll = strlen(lease);
	if (cwd && !strncmp(cwd, lease, ll) && !strncmp(cwd + ll, "/fs", 3) &&
	    (cwd[ll + 3] == '\0' || cwd[ll + 3] == '/'))
		*sandbox_cwd = sbx_xstrdup(cwd[ll + 3] ? cwd + ll + 3 : "/");
	free(root);
	free(cwd);
	return lease;
}

/* ---- small file helpers ------------------------------------------------- */

static __attribute__((format(printf, 2, 3))) char *path_in(const char *dir, const char *fmt, ...)
{
	struct sbx_buf b = SBX_BUF_INIT;
	va_list ap;
	sbx_buf_addf(&b, "%s/", dir);
	va_start(ap, fmt);
	sbx_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	return sbx_buf_detach(&b, NULL);
}

/* The whole of a (small) file, NUL-terminated, or NULL with errno set. */
static char *slurp(const char *path)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char buf[8192];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
		if (n > 0)
			sbx_buf_add(&b, buf, (size_t)n);
	int e = errno;
	close(fd);
	if (n < 0) {
		sbx_buf_release(&b);
		errno = e;
		return NULL;
	}
	return sbx_buf_detach(&b, NULL);
}

/* Prints "sbx: WHAT: strerror: <the lease's error line>" and exits 125 (or status). */
static void fail(const char *lease, const char *what, int errnum, int status)
{
	char *p = path_in(lease, "%s", "error"), *why = slurp(p);
	if (why) {
		why[strcspn(why, "\n")] = '\0';
		/* The line is "TIME OP CODE: message": the message is what matters. */
		char *msg = strstr(why, ": ");
		fprintf(stderr, "sbx: %s: %s%s%s\n", what, strerror(errnum),
			msg && msg[2] ? ": " : "", msg && msg[2] ? msg + 2 : "");
	} else {
		fprintf(stderr, "sbx: %s: %s\n", what, strerror(errnum));
	}
	free(why);
	free(p);
	exit(status);
}

/* ---- sbx run ----------------------------------------------------------- */

struct pump {
	int in, out;	     /* copy in to out until EOF */
	int err;	     /* errno of a failed read, 0 */
	int werr;	     /* errno of a failed write to out, 0 */
	unsigned long moved; /* pieces copied so far (atomic: sbx shell watches it) */
	pthread_t thread;
	bool started;
};

static void *pump_main(void *arg)
{
	struct pump *p = arg;
	char buf[65536];
	for (;;) {
		/* Readers run with every signal blocked (start_thread), so EINTR is
		 * the mount's answer (the run was stopped), not a cue to retry. */
		ssize_t n = read(p->in, buf, sizeof(buf));
		if (n < 0)
			p->err = errno;
		if (n <= 0)
			return NULL;
		int e = sbx_write_all(p->out, buf, (size_t)n);
		if (e < 0) {
			p->werr = -e; /* cmd_run stops the run: its output has nowhere to go */
			return NULL;
		}
		__atomic_add_fetch(&p->moved, 1, __ATOMIC_RELAXED);
	}
}

/* Starts a thread with every signal blocked: signals are the main or the signal thread's. */
static void start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int e = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e)
		die("%scannot start a thread", "");
}

static void pump_start(struct pump *p, int in, int out)
{
	p->in = in;
	p->out = out;
	start_thread(&p->thread, pump_main, p);
	p->started = true;
}

/* The caller's own last run number from runs/mine ("" when there is none). */
static void read_mine(const char *lease, char *out, size_t size)
{
	char *p = path_in(lease, "%s", "runs/mine"), *s = slurp(p);
	snprintf(out, size, "%s", s ? s : "");
	out[strcspn(out, "\n")] = '\0';
	free(s);
	free(p);
}

/* Fills num from runs/mine when that run's cmd is text; else num is "". */
static bool is_ours(const char *lease, const char *text, char *num, size_t size)
{
	read_mine(lease, num, size);
	char *p = num[0] ? path_in(lease, "runs/%s/cmd", num) : NULL, *cmd = p ? slurp(p) : NULL;
	size_t a = cmd ? strlen(cmd) : 0, b = strlen(text);
	while (a && cmd[a - 1] == '\n')
		a--;
	while (b && text[b - 1] == '\n')
		b--;
	bool ours = cmd && a == b && !memcmp(cmd, text, a);
	free(cmd);
	free(p);
	if (!ours)
		num[0] = '\0';
	return ours;
}

static const char *run_lease; /* for the signal thread */
static char run_num[32];      /* runs/N of our run, "" until known (run_lock) */
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t run_signal;

/* Stops our run (runs/N/ctl's kill) once its number is known; false if it could not. */
static bool stop_run(void)
{
	pthread_mutex_lock(&run_lock);
	bool known = run_num[0] != '\0';
	char *ctl = known ? path_in(run_lease, "runs/%s/ctl", run_num) : NULL;
	pthread_mutex_unlock(&run_lock);
	int fd = ctl ? open(ctl, O_WRONLY | O_CLOEXEC) : -1;
	free(ctl);
	if (fd < 0)
		return false;
	bool ok = sbx_write_all(fd, "kill\n", 5) == 0;
	return close(fd) == 0 && ok;
}

/* Stops our run through runs/N/ctl; without one yet, dies of the signal (the
 * mount then stops the run its reader was waiting for). */
static void *signal_main(void *arg)
{
	sigset_t *set = arg;
	int sig;
	while (sigwait(set, &sig) == 0) {
		if (stop_run()) {
			run_signal = sig;
			continue;
		}
		signal(sig, SIG_DFL);
		pthread_sigmask(SIG_UNBLOCK, set, NULL);
		raise(sig);
	}
	return NULL;
}

/*
 * sbx run -i: our stdin, read to its end into a file of the sandbox's /tmp
 * (through fs/) before the run; the command opens it as its stdin and
 * removes it first thing. The host path, removed at exit if still there
 * (a run that never started).
 */
static char *stdin_host;

static void stdin_remove(void)
{
	if (stdin_host)
		unlink(stdin_host);
}

/* Stages stdin for lease; returns the sandbox path of the file (caller frees). */
static char *stdin_stage(const char *lease, const struct timespec *ts)
{
	char name[96];
	snprintf(name, sizeof(name), "/tmp/.sbx-stdin-%ld.%ld.%ld", (long)getpid(),
		 (long)ts->tv_sec, (long)ts->tv_nsec);
	stdin_host = path_in(lease, "fs%s", name);
	int fd = open(stdin_host, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;
		free(stdin_host);
		stdin_host = NULL;
		fail(lease, "-i: staging stdin in the sandbox's /tmp", e, EXIT_SBXFS);
	}
	atexit(stdin_remove);
	/* The output pump's copy, on this thread (no signal is caught yet: no EINTR). */
	struct pump in = {.in = STDIN_FILENO, .out = fd};
	pump_main(&in);
	if (in.err)
		fail(lease, "-i: reading stdin", in.err, EXIT_SBXFS);
	if (in.werr)
		fail(lease, "-i: staging stdin", in.werr, EXIT_SBXFS);
	if (close(fd) < 0)
		fail(lease, "-i: staging stdin", errno, EXIT_SBXFS);
	return sbx_xstrdup(name);
}

/* The shell text for argv: each word quoted, in dir when dir is set, stdin staged with -i. */
static char *command_text(char **argv, const char *dir, const char *lease, bool with_stdin)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct timespec ts;
	/*
	 * A first comment line makes the text ours alone: runs/mine answers a
	 * sibling's run until our own has started, and runs/N/cmd tells them apart.
	 */
	clock_gettime(CLOCK_REALTIME, &ts);
	sbx_buf_addf(&b, "# sbx run %ld.%ld.%ld\n", (long)getpid(), (long)ts.tv_sec,
		     (long)ts.tv_nsec);
	if (with_stdin) {
		char *in = stdin_stage(lease, &ts);
		sbx_buf_adds(&b, "exec < ");
		sbx_buf_add_shquoted(&b, in);
		sbx_buf_adds(&b, " && rm -f -- ");
		sbx_buf_add_shquoted(&b, in);
		sbx_buf_adds(&b, " && ");
		free(in);
	}
	if (dir) {
		sbx_buf_adds(&b, "cd -- ");
		sbx_buf_add_shquoted(&b, dir);
		sbx_buf_adds(&b, " && ");
	}
	for (int i = 0; argv[i]; i++) {
		if (i)
			sbx_buf_addch(&b, ' ');
		/* Words of plain characters stay readable in `cmd` and `log`. */
		if (argv[i][0] &&
		    strspn(argv[i], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "0123456789_-./=:,+@%") == strlen(argv[i]))
			sbx_buf_adds(&b, argv[i]);
		else
			sbx_buf_add_shquoted(&b, argv[i]);
	}
	sbx_buf_addch(&b, '\n');
	return sbx_buf_detach(&b, NULL);
}

static int cmd_run(char *lease_arg, char **argv, bool with_stdin)
{
	char *dir, *lease = find_lease(lease_arg, &dir),
		   *text = command_text(argv, dir, lease, with_stdin);
	/* runs/, not runs/mine: that one is missing until the lease's first run. */
	char *runs = path_in(lease, "%s", "runs"), *p;
	struct stat st;
	bool have_runs = stat(runs, &st) == 0;
	struct pump out = {0}, err = {0};
	sigset_t set;
	pthread_t sigthread;

	free(runs);
	run_lease = lease;
	/* Signals are taken by one thread, so the readers are never interrupted. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_create(&sigthread, NULL, signal_main, &set);

	p = path_in(lease, "%s", "exec");
	int fd = open(p, O_RDWR | O_CLOEXEC);
	free(p);
	if (fd < 0)
		fail(lease, "exec", errno, EXIT_SBXFS);
	int e = sbx_write_all(fd, text, strlen(text));
	if (e < 0)
		fail(lease, "starting the command", -e, EXIT_SBXFS);
	pump_start(&out, fd, STDOUT_FILENO);

	/*
	 * Which run is ours: the one runs/mine names once its cmd is our text
	 * (looked for until the output ends, or for 10 s after our stdout failed).
	 */
	char num[32] = "";
	for (int tries = 0, after = 0; have_runs && after < 200; tries++) {
		if (out.started && tries > 0 && pthread_tryjoin_np(out.thread, NULL) == 0)
			out.started = false;
		if (is_ours(lease, text, num, sizeof(num)) || (!out.started && !out.werr))
			break;
		after += !out.started;
		nanosleep(&(struct timespec){0, (tries < 100 ? 10 : 50) * 1000 * 1000}, NULL);
	}
	if (num[0]) {
		pthread_mutex_lock(&run_lock);
		snprintf(run_num, sizeof(run_num), "%s", num);
		pthread_mutex_unlock(&run_lock);
		p = path_in(lease, "runs/%s/stderr", num);
		int efd = open(p, O_RDONLY | O_CLOEXEC);
		free(p);
		if (efd >= 0)
			pump_start(&err, efd, STDERR_FILENO);
	}
	if (out.started)
		pthread_join(out.thread, NULL);
	/*
	 * Our stdout failed (`sbx run -- yes | head`: EPIPE; a full disk): the
	 * command's output has nowhere to go, so it is stopped, as a local
	 * command is by SIGPIPE or its write error (it went on, its output
	 * filling the state dir up to the run's limit, and sbx said 0 or 137).
	 * EPIPE ends sbx by SIGPIPE too; anything else is an error of sbx (125).
	 */
	if (out.werr) {
		bool stopped = stop_run();
		if (out.werr == EPIPE) {
			sigset_t pipe_set;
			signal(SIGPIPE, SIG_DFL);
			sigemptyset(&pipe_set);
			sigaddset(&pipe_set, SIGPIPE);
			pthread_sigmask(SIG_UNBLOCK, &pipe_set, NULL);
			raise(SIGPIPE);
			exit(128 + SIGPIPE);
		}
		die("writing the command's output: %s (%s)", strerror(out.werr),
		    stopped ? "the command was stopped" : "the command could not be stopped");
	}
	if (err.started) {
		pthread_join(err.thread, NULL);
		close(err.in);
	}
	if (run_signal)
		return 128 + run_signal;
	/* The run failed (it never started, or its provider was lost): the lease's
	 * last-run files would be someone else's. */
	if (out.err && out.err != ETIMEDOUT && !(out.err == EINTR && num[0]))
		fail(lease, "the command", out.err, EXIT_SBXFS);
	/* Before the runs/ files (sbxfs before 0.2): the lease's last-run files. */
	p = num[0] ? path_in(lease, "runs/%s/result", num) : path_in(lease, "%s", "result");
	char *rtext = slurp(p);
	free(p);
	if (!num[0]) {
		p = path_in(lease, "%s", "stderr");
		char *etext = slurp(p);
		free(p);
		if (etext && sbx_write_all(STDERR_FILENO, etext, strlen(etext)) < 0)
			etext[0] = '\0';
		free(etext);
	}
	json_t *res = rtext ? json_loads(rtext, 0, NULL) : NULL;
	free(rtext);
	bool timed_out = res && json_is_true(json_object_get(res, "timedOut"));
	bool interrupted = res && json_is_true(json_object_get(res, "interrupted"));
	json_t *code = res ? json_object_get(res, "exitCode") : NULL;
	int status = code ? (int)json_integer_value(code) : -1;
	json_decref(res);
	if (close(fd) < 0 && !out.err)
		out.err = errno;
	if (timed_out || out.err == ETIMEDOUT)
		fail(lease, "the command ran past the lease's runTimeout", ETIMEDOUT, EXIT_TIMEOUT);
	/* Stopped by someone else (kill on its ctl): as a local command killed
	 * from another terminal, its status (137) with the reason. */
	if (out.err == EINTR && interrupted && status >= 0)
		fail(lease, "the command was stopped", EINTR, status);
	if (out.err)
		fail(lease, "the command", out.err, EXIT_SBXFS);
	if (status < 0)
		fail(lease, "the command's result is missing", EIO, EXIT_SBXFS);
	free(text);
	free(dir);
	free(lease);
	return status;
}

/* ---- sbx shell ------------------------------------------------------------- */

static struct termios saved_tio;
static bool raw_mode;
static int wake_pipe[2] = {-1, -1};

static void restore_terminal(void)
{
	if (raw_mode)
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
	raw_mode = false;
}

static void on_signal(int sig)
{
	char c = (char)sig;
	if (write(wake_pipe[1], &c, 1) < 0) {
		/* the pipe is full: a wake-up is pending anyway */
	}
}

static void send_size(int ctl)
{
	struct winsize ws;
	char line[64];
	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_col || !ws.ws_row)
		return;
	snprintf(line, sizeof(line), "size %u %u\n", ws.ws_col, ws.ws_row);
	if (sbx_write_all(ctl, line, strlen(line)) < 0) {
		/* a resize refused is not worth ending the session for */
	}
}

static void *shell_out_main(void *arg)
{
	struct pump *p = arg;
	pump_main(p);
	if (write(wake_pipe[1], "", 1) < 0) {
		/* the main loop also sees the data file's end on its own */
	}
	return NULL;
}

static int cmd_shell(char *lease_arg)
{
	char *dir, *lease = find_lease(lease_arg, &dir), *p, *s, num[32];
	struct pump out = {0};
	int ctl, data, clone;

	p = path_in(lease, "%s", "tty/clone");
	clone = open(p, O_RDONLY | O_CLOEXEC);
	free(p);
	ssize_t n = clone >= 0 ? read(clone, num, sizeof(num) - 1) : -1;
	if (n <= 0)
		fail(lease, "opening a terminal session", n < 0 ? errno : EIO, EXIT_SBXFS);
	num[n] = '\0';
	num[strcspn(num, "\n")] = '\0';
	p = path_in(lease, "tty/%s/ctl", num);
	ctl = open(p, O_WRONLY | O_CLOEXEC);
	free(p);
	if (ctl < 0)
		fail(lease, "tty ctl", errno, EXIT_SBXFS);
	struct sbx_buf setup = SBX_BUF_INIT;
	if ((s = getenv("TERM")) && *s && !strpbrk(s, " \t\n"))
		sbx_buf_addf(&setup, "term %s\n", s);
	if (dir && !strchr(dir, '\n'))
		sbx_buf_addf(&setup, "cwd %s\n", dir);
	if (setup.len && sbx_write_all(ctl, setup.buf, setup.len) < 0)
		fail(lease, "tty ctl", errno, EXIT_SBXFS);
	sbx_buf_release(&setup);
	send_size(ctl);
	/*
	 * Two descriptors: the kernel serialises read() and write() on one open
	 * file (its position lock), so a read waiting for output would hold back
	 * every keystroke written on the same one.
	 */
	p = path_in(lease, "tty/%s/data", num);
	data = open(p, O_WRONLY | O_CLOEXEC);
	out.in = data < 0 ? -1 : open(p, O_RDONLY | O_CLOEXEC);
	free(p);
	if (data < 0 || out.in < 0)
		fail(lease, "starting the shell", errno, EXIT_SBXFS);
	close(clone);

	if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		die("%spipe failed", "");
	struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
	sigaction(SIGWINCH, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
		struct termios raw = saved_tio;
		cfmakeraw(&raw);
		if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0) {
			raw_mode = true;
			atexit(restore_terminal);
		}
	}
	out.out = STDOUT_FILENO;
	start_thread(&out.thread, shell_out_main, &out);

	/*
	 * Our input ended (a pipe, /dev/null): as ^D typed at the prompt. A ^D
	 * that reaches the terminal before the shell's line editor has set it
	 * up is lost (the line discipline turns it into an end-of-line the
	 * editor then reads as nothing), and `sbx shell </dev/null` or
	 * `printf 'ls\n' | sbx shell` waited for good. So after the input's end,
	 * each time the shell has printed something and then gone quiet for
	 * EOF_QUIET_MS (a prompt), ^D goes again, at most EOF_MAX times.
	 */
	enum { EOF_QUIET_MS = 300, EOF_MAX = 20 };
	unsigned long eof_at = 0;
	int killed = 0, eofs = 0;
	bool in_open = true;
	for (bool done = false; !done;) {
		struct pollfd pf[2] = {{in_open ? STDIN_FILENO : -1, POLLIN, 0},
				       {wake_pipe[0], POLLIN, 0}};
		int ready = poll(pf, 2, in_open ? -1 : EOF_QUIET_MS);
		if (ready < 0 && errno != EINTR)
			break;
		if (ready == 0) {
			unsigned long moved = __atomic_load_n(&out.moved, __ATOMIC_RELAXED);
			if (moved != eof_at && eofs < EOF_MAX) {
				eof_at = moved;
				eofs++;
				if (sbx_write_all(data, "\004", 1) < 0)
					break;
			}
			continue;
		}
		if (pf[1].revents) {
			char c[16];
			ssize_t k = read(wake_pipe[0], c, sizeof(c));
			for (ssize_t i = 0; i < k; i++) {
				if (c[i] == SIGWINCH)
					send_size(ctl);
				else if (c[i] == SIGTERM || c[i] == SIGHUP)
					killed = c[i], done = true;
				else if (c[i] == 0)
					done = true; /* the output ended: the shell is gone */
			}
		}
		if (pf[0].revents && !done) {
			char buf[4096];
			ssize_t k = read(STDIN_FILENO, buf, sizeof(buf));
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				in_open = false;
				eof_at = __atomic_load_n(&out.moved, __ATOMIC_RELAXED);
				eofs = 1;
				k = sbx_write_all(data, "\004", 1);
			} else if (sbx_write_all(data, buf, (size_t)k) < 0) {
				in_open = false;
			}
		}
	}
	restore_terminal();
	if (killed) {
		close(data);
		close(ctl);
		return 128 + killed; /* exit() ends the reader, and with it the session */
	}
	pthread_join(out.thread, NULL);
	p = path_in(lease, "tty/%s/status", num);
	s = slurp(p);
	free(p);
	close(out.in);
	close(data);
	close(ctl);
	int status = -1;
	if (s && sscanf(s, "exited %d", &status) != 1)
		fprintf(stderr, "sbx: the terminal session was %s", s);
	else if (!s) /* the lease itself went away (rmdir, reclaimed) */
		fprintf(stderr, "sbx: the terminal session ended and its status is gone: %s\n",
			strerror(errno));
	free(s);
	free(dir);
	free(lease);
	return status >= 0 ? status : EXIT_SBXFS;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "run")) {
		/* run [-i] [LEASE] -- CMD...: with no "--" in first or second place, all is CMD. */
		bool with_stdin = argc > 2 && !strcmp(argv[2], "-i");
		char *lease = NULL, **cmd = argv + 2 + with_stdin;
		argc -= with_stdin;
		argv += with_stdin;
		if (argc > 2 && !strcmp(argv[2], "--")) {
			cmd = argv + 3;
		} else if (argc > 3 && !strcmp(argv[3], "--")) {
			lease = argv[2];
			cmd = argv + 4;
		}
		if (!cmd[0]) {
			fprintf(stderr, "sbx run: no COMMAND to run\n%s", usage);
			return 2;
		}
		/* -i reads stdin to its end first: from a terminal, a silent wait for ^D. */
		if (with_stdin && isatty(STDIN_FILENO)) {
			fprintf(stderr, "sbx run -i: stdin is a terminal; -i reads it to its end "
					"before the command starts (type into a command with sbx "
					"shell)\n");
			return 2;
		}
		return cmd_run(lease, cmd, with_stdin);
	}
	if (!strcmp(argv[1], "shell") && argc <= 3)
		return cmd_shell(argc == 3 ? argv[2] : NULL);
	if (!strcmp(argv[1], "shell"))
		fprintf(stderr, "sbx shell: one LEASE at most, and no command (use sbx run)\n");
	else
		fprintf(stderr, "sbx: unknown command \"%s\"\n", argv[1]);
	fputs(usage, stderr);
	return 2;
}
