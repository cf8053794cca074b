/*
 * spawn — starting a lease's sbxfs-init, and telling whether it still runs.
 *
 * The caller is a multi-threaded FUSE daemon, so between fork and exec the
 * child makes only async-signal-safe calls: everything (paths, argv, the
 * cgroup.procs descriptors) is prepared before fork. The child joins the
 * lease's cgroups, unshares the namespaces and forks again, so that init is
 * PID 1 of the new pid namespace and, once the middle process exits, a
 * child of the host's init rather than of sbxfs: it outlives the daemon.
 * This module does not talk the run protocol (run.c does).
 */
#include "local.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/keyfile.h"
#include "base/log.h"
#include "proto.h"

#ifndef SBXFS_LIBEXECDIR
#define SBXFS_LIBEXECDIR "/usr/local/libexec"
#endif

/*
 * A program named by initPath or $SBXFS_INIT runs as the daemon's user
 * (root): refused, as the config is, when another user can change it.
 */
static int named_init(const char *what, const char *path, char *out, size_t size,
		      struct sbx_error *err)
{
	struct stat st;
	int rc;
	if (stat(path, &st))
		return sbx_error_set(err, errno, 0, "%s %s: %s", what, path, strerror(errno));
	if ((rc = sbx_trusted_check(what, path, &st, err)))
		return rc;
	if (snprintf(out, size, "%s", path) >= (int)size)
		return sbx_error_set(err, ENAMETOOLONG, 0, "%s %s: too long", what, path);
	return 0;
}

/* Where sbxfs-init is: settings, $SBXFS_INIT, next to our binary, libexecdir. */
static int find_init(char *out, size_t size, struct sbx_error *err)
{
	char exe[PATH_MAX];
	const char *env = getenv("SBXFS_INIT");
	ssize_t n;

	if (lcl_cfg.init_path && access(lcl_cfg.init_path, X_OK) == 0)
		return named_init("providers.local.initPath", lcl_cfg.init_path, out, size, err);
	if (env && *env && access(env, X_OK) == 0)
		return named_init("SBXFS_INIT", env, out, size, err);
	if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) > 0) {
		exe[n] = '\0';
		snprintf(out, size, "%s/sbxfs-init", dirname(exe));
		if (access(out, X_OK) == 0)
			return 0;
	}
	snprintf(out, size, "%s/sbxfs-init", SBXFS_LIBEXECDIR);
	if (access(out, X_OK))
		return sbx_error_set(err, ENOENT, 0, "sbxfs-init not found (set SBXFS_INIT)");
	return 0;
}

/* Field 3 (state) and 22 (start time) of /proc/pid/stat. */
static unsigned long long proc_stat(pid_t pid, char *state)
{
	char path[64], buf[1024];
	unsigned long long start = 0;
	int fd;
	ssize_t n;

	*state = '?';
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0; /* errno: ENOENT when gone, EMFILE... when we cannot look */
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	errno = ESRCH; /* gone between the open and the read */
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p || sscanf(p + 2,
			 "%c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
			 "%*s %*s %*s %llu",
			 state, &start) != 2)
		return 0;
	return start;
}

unsigned long long lcl_proc_start(pid_t pid)
{
	char state;
	return proc_stat(pid, &state);
}

/*
 * Dead only when /proc says so. The daemon out of descriptors (EMFILE: a
 * busy mount at its `ulimit -n`, clients held on a forwarded port) could
 * not open /proc/PID/stat, and that was taken for death: the next probe,
 * within 5 s, reclaimed the lease, its storage removed.
 */
bool lcl_init_alive(const struct local_inst *li)
{
	char state;
	unsigned long long start;
	if (li->init_pid <= 0 || !li->init_start)
		return false;
	start = proc_stat(li->init_pid, &state);
	if (!start)
		return errno != ENOENT && errno != ESRCH;
	return start == li->init_start && state != 'Z' && state != 'X';
}

/*
 * Whether init was sent SIGKILL while its cgroup was frozen: v1 keeps a
 * killed task frozen, so it looks alive (and the lease paused) until a
 * thaw lets it die. Killed on the host while paused and unmounted, the
 * lease then "resumed" at the next run and died under it.
 */
static bool kill_pending(pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	static const char *const keys[] = {"\nSigPnd:",
					   "\nShdPnd:"}; /* the thread's, the process's */
	for (size_t i = 0; i < 2; i++) {
		const char *p = strstr(buf, keys[i]);
		if (p && (strtoull(p + strlen(keys[i]), NULL, 16) & (1ULL << (SIGKILL - 1))))
			return true;
	}
	return false;
}

void lcl_init_reap_frozen(struct local_inst *li)
{
	if (!lcl_init_alive(li) || lcl_cg_frozen(&li->cg) <= 0 || !kill_pending(li->init_pid))
		return;
	lcl_cg_freeze(&li->cg, false, NULL);
	for (int i = 0; i < 200 && lcl_init_alive(li); i++)
		usleep(10000);
}

/* After the SIGKILL: v1 keeps killed tasks frozen. */
static void thaw_v1(struct local_inst *li)
{
	if (li->cg.kind == LCL_CG_V1 && lcl_cg_frozen(&li->cg) > 0)
		lcl_cg_freeze(&li->cg, false, NULL);
}

void lcl_init_kill(struct local_inst *li)
{
	int pfd = (int)syscall(SYS_pidfd_open, li->init_pid, 0);
	char state;

	if (pfd < 0 && errno == ENOSYS) {
		/* No pidfds (kernels before 5.3, valgrind 3.19): the start time is
		 * checked just before the kill, and the end is polled for. */
		if (!lcl_init_alive(li) || kill(li->init_pid, SIGKILL) < 0)
			return;
		thaw_v1(li);
		for (int ms = 0; ms < 10000 && lcl_init_alive(li); ms += 10)
			nanosleep(&(struct timespec){0, 10000000}, NULL);
		return;
	}
	if (pfd < 0)
		return;
	/* The pidfd pins the process: check it is still ours after opening it. */
	if (proc_stat(li->init_pid, &state) == li->init_start) {
		syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
		thaw_v1(li);
		struct pollfd p = {.fd = pfd, .events = POLLIN};
		poll(&p, 1, 10000);
	}
	close(pfd);
}

/* Reads the init's "ok PID" (or its reason for failing) within ms. */
static int wait_ready(int fd, long ms, char *msg, size_t size)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;
	int r;

	while ((r = poll(&p, 1, (int)ms)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return -ETIMEDOUT;
	while ((n = read(fd, msg, size - 1)) < 0 && errno == EINTR)
		;
	msg[n > 0 ? n : 0] = '\0';
	return n > 0 ? 0 : -ECHILD;
}

void lcl_log_drain(struct local_inst *li)
{
	char buf[4096];
	struct stat st;
	ssize_t n;
	int out;

	if (li->logfd < 0 || li->dirfd < 0)
		return;
	out = openat(li->dirfd, "init.log", O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
		     0600);
	while ((n = read(li->logfd, buf, sizeof(buf))) > 0) {
		if (out < 0 || fstat(out, &st) < 0 || st.st_size >= LCL_LOG_CAP)
			continue; /* read and dropped: the lease cannot grow the host's disk */
		size_t room = (size_t)(LCL_LOG_CAP - st.st_size);
		if (write(out, buf, (size_t)n < room ? (size_t)n : room) < 0)
			break;
	}
	if (out >= 0)
		close(out);
}

int lcl_spawn_init(struct local_inst *li, struct sbx_error *err)
{
	static char *const envp[] = {
	    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	char init[PATH_MAX], readyfd[16], logfd[16], msg[300];
	int cgfds[LCL_CG_MAX_DIRS], ncg, pidp[2], readyp[2], logp[2], exitp[2] = {-1, -1}, e, st;
	int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
		    (li->net_host ? 0 : CLONE_NEWNET);
	pid_t mid, pid = 0;

	if ((e = find_init(init, sizeof(init), err)))
		return e;
	if ((ncg = lcl_cg_open_procs(&li->cg, cgfds)) < 0)
		return sbx_error_set(err, ncg, 0, "opening cgroup.procs: %s", strerror(-ncg));
	if (pipe2(pidp, O_CLOEXEC) < 0) {
		e = sbx_error_set(err, errno, 0, "pipe: %s", strerror(errno));
		goto out_cg;
	}
	if (pipe2(readyp, O_CLOEXEC) < 0) {
		e = sbx_error_set(err, errno, 0, "pipe: %s", strerror(errno));
		goto out_pidp;
	}
	if (pipe2(logp, O_CLOEXEC) < 0) {
		e = sbx_error_set(err, errno, 0, "pipe: %s", strerror(errno));
		close(readyp[0]);
		close(readyp[1]);
		goto out_pidp;
	}
	fcntl(logp[0], F_SETFL, O_NONBLOCK);
	/* Isolated network: init holds this pipe's write end for life, so the
	 * stack (net.c, --exit-fd on the read end) ends when init does, with or
	 * without cgroups. */
	if (!li->net_host && !li->net_none && pipe2(exitp, O_CLOEXEC) < 0)
		exitp[0] = exitp[1] = -1;
	snprintf(readyfd, sizeof(readyfd), "%d", readyp[1]);
	snprintf(logfd, sizeof(logfd), "%d", logp[1]);
	char *argv[] = {"sbxfs-init", "-d",    li->dir, "-h",  li->lease,
			"-r",	      readyfd, "-l",	logfd, li->net_host ? NULL : "-n",
			NULL};

	mid = fork();
	if (mid == 0) {
		/* Async-signal-safe calls only from here to execve. */
		for (int i = 0; i < ncg; i++)
			if (write(cgfds[i], "0", 1) < 0)
				_exit(10);
		if (unshare(flags) < 0)
			_exit(11);
		pid_t p = _Fork();
		if (p < 0)
			_exit(12);
		if (p == 0) {
			setsid();
			syscall(SYS_close_range, 3, ~0u, CLOSE_RANGE_CLOEXEC);
			fcntl(readyp[1], F_SETFD, 0);
			fcntl(logp[1], F_SETFD, 0);
			if (exitp[1] >= 0)
				fcntl(exitp[1], F_SETFD, 0);
			execve(init, argv, envp);
			_exit(127);
		}
		_exit(write(pidp[1], &p, sizeof(p)) == sizeof(p) ? 0 : 13);
	}
	close(pidp[1]);
	close(readyp[1]);
	close(logp[1]);
	if (exitp[1] >= 0)
		close(exitp[1]);
	if (li->net_exit_fd >= 0)
		close(li->net_exit_fd);
	li->net_exit_fd = exitp[0];
	pidp[1] = readyp[1] = -1;
	if (li->logfd >= 0)
		close(li->logfd);
	li->logfd = logp[0];
	if (mid < 0) {
		e = sbx_error_set(err, errno, 0, "fork: %s", strerror(errno));
		goto out_readyp;
	}
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	/* The pid arriving is the success; the exit status only names a failure.
	 * (Under valgrind a forked child exits 99 with "leaks" of the threads it
	 * did not inherit, after doing its work.) */
	if (read(pidp[0], &pid, sizeof(pid)) != sizeof(pid)) {
		static const char *const what[] = {"joining the cgroup", "unshare", "fork"};
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
		e = sbx_error_set(err, EIO, 0, "starting sbxfs-init: %s failed",
				  code >= 10 && code <= 12 ? what[code - 10] : "the spawner");
		goto out_readyp;
	}
	if ((e = wait_ready(readyp[0], lcl_cfg.ready_ms, msg, sizeof(msg))) < 0 ||
	    strncmp(msg, "ok ", 3) != 0) {
		kill(pid, SIGKILL);
		e = e == -ETIMEDOUT
			? sbx_error_set(err, ETIMEDOUT, 0, "sbxfs-init did not start within %ld ms",
					lcl_cfg.ready_ms)
			: sbx_error_set(err, EIO, 0, "sbxfs-init %s: %s", init,
					e ? "exited at start-up (see init.log)" : msg);
		goto out_readyp;
	}
	li->init_pid = pid;
	li->init_start = lcl_proc_start(pid);
	e = 0;
out_readyp:
	lcl_log_drain(li); /* init's reason, when it failed */
	close(readyp[0]);
	if (readyp[1] >= 0)
		close(readyp[1]);
out_pidp:
	close(pidp[0]);
	if (pidp[1] >= 0)
		close(pidp[1]);
out_cg:
	for (int i = 0; i < ncg; i++)
		close(cgfds[i]);
	return e;
}
