/*
 * sbxfs-init — PID 1 of one local-provider lease.
 *
 * The provider (spawn.c) forks, unshares the mount, pid, ipc, uts (and,
 * unless the spec says network "host", net: -n) namespaces, joins the lease's cgroups and execs
 *
 *     sbxfs-init -d LEASE_DIR -h HOSTNAME -r READY_FD [-l LOG_FD] [-n]
 *
 * as the first process of the new pid namespace. Init then
 *  1. makes every mount private and binds LEASE_DIR/init.sock (before the
 *     host tree disappears),
 *  2. mounts a fresh /proc (with /proc/sys read-only), a read-only /sys and
 *     a minimal /dev (null zero full random urandom tty, pts, shm, fd links)
 *     inside LEASE_DIR/root (the lease's overlay, mounted by the provider
 *     in the host namespace), and pivot_roots into it,
 *  3. sets the hostname, its oom_score_adj to -1000 (a run over the memory
 *     cap is OOM-killed, init never), keeps only a container's capability
 *     set in the bounding set, makes itself non-dumpable (the lease cannot
 *     open /proc/1/fd), sets no_new_privs and installs the seccomp filter
 *     (init_seccomp.c) that every process of the lease inherits,
 *  4. writes "ok HOSTPID" (or the reason it failed) to READY_FD, serves run
 *     requests forever (proto.h describes the protocol), reaping every
 *     zombie of the namespace.
 *
 * Its own errors go to LOG_FD, a pipe the daemon reads into LEASE_DIR/init.log
 * and caps (no host file is ever open in the lease). It is not a shell, not a
 * supervisor (nothing is restarted); the boundary it sets is a default
 * container's (doc/DESIGN.md, "Threat model": kernel exploits are out of
 * scope). It uses libc only, so it can be copied
 * anywhere.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <net/route.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/sysutil.h" /* libc only: linked into sbxfs-init too */
#include "init_seccomp.h"
#include "proto.h"

/* Shell text longer than this goes through a memfd (an argument is capped at 128 KiB). */
#define SCRIPT_ARG_MAX (64 * 1024)

extern char **environ;

struct run {
	int conn;	    /* the client connection */
	pid_t pid;	    /* the child (its process group), 0 once reaped */
	int rd[2];	    /* stdout/stderr read ends, drained once the client goes */
	long long deadline; /* monotonic ms, 0 = none */
	bool timed_out;
};

static struct run *runs;
static size_t n_runs, cap_runs;
static int *drains; /* read ends of finished runs, read and discarded until EOF */
static size_t n_drains, cap_drains;
static pid_t host_pid;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(2, line, n) < 0)
		return;
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return p;
	size_t n = *cap ? *cap * 2 : 8;
	while (n < need)
		n *= 2;
	p = realloc(p, n * elem);
	if (!p)
		abort();
	*cap = n;
	return p;
}

/* ---- setting up the root ------------------------------------------ */

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	int e = n < 0 ? -errno : 0;
	close(fd);
	return e;
}

static pid_t read_host_pid(void)
{
	/* Still the host's /proc: NSpid lists the host pid first. */
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	long pid = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "NSpid: %ld", &pid) == 1)
			break;
	if (f)
		fclose(f);
	return (pid_t)pid;
}

static int bind_socket(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, LCL_SOCK_NAME); /* relative to the lease dir (cwd) */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	unlink(LCL_SOCK_NAME);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
	    chmod(LCL_SOCK_NAME, 0600) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int mount_dev(void)
{
	static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
	static const char *const links[][2] = {
	    {"/proc/self/fd", "root/dev/fd"},	    {"/proc/self/fd/0", "root/dev/stdin"},
	    {"/proc/self/fd/1", "root/dev/stdout"}, {"/proc/self/fd/2", "root/dev/stderr"},
	    {"pts/ptmx", "root/dev/ptmx"},
	};
	char host[64], path[64];

	mkdir("root/dev", 0755);
	if (mount("tmpfs", "root/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=1m") < 0)
		return -errno;
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		snprintf(host, sizeof(host), "/dev/%s", nodes[i]);
		snprintf(path, sizeof(path), "root/dev/%s", nodes[i]);
		int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
		if (fd < 0)
			return -errno;
		close(fd);
		if (mount(host, path, NULL, MS_BIND, NULL) < 0)
			logf_("bind %s: %s", host, strerror(errno));
	}
	mkdir("root/dev/pts", 0755);
	if (mount("devpts", "root/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=620") < 0)
		logf_("devpts: %s", strerror(errno));
	mkdir("root/dev/shm", 01777);
	if (mount("shm", "root/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0)
		logf_("shm: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (symlink(links[i][0], links[i][1]) < 0)
			return -errno;
	return 0;
}

#define NSE (MS_NOSUID | MS_NODEV | MS_NOEXEC)

/*
 * Root inside the lease is root on the host, so what a container runtime
 * hides (runc's default readonlyPaths and maskedPaths) is hidden here too:
 * kernel interfaces whose writes check only the file's mode (IRQ affinity
 * under /proc/irq, PCI config space under /proc/bus/pci, /proc/fs's
 * settings, the sysctls) are read-only, and what shows the host's state
 * (its keys, timers, interrupts, physical pages, firmware tables, power
 * meters) is empty. A name this kernel lacks is skipped; any other failure
 * fails the lease's start rather than leaving it open.
 */
static int hide_host_knobs(void)
{
	static const char *const ro[] = {"proc/bus", "proc/fs", "proc/irq", "proc/sys",
					 "proc/sysrq-trigger"};
	static const char *const masked[] = {
	    "proc/acpi",	  "proc/asound",
	    "proc/interrupts",	  "proc/kcore",
	    "proc/keys",	  "proc/key-users",
	    "proc/latency_stats", "proc/timer_list",
	    "proc/timer_stats",	  "proc/sched_debug",
	    "proc/scsi",	  "proc/kpagecount",
	    "proc/kpageflags",	  "proc/kpagecgroup",
	    "sys/firmware",	  "sys/devices/virtual/powercap",
	};
	char path[64];
	struct stat st;

	for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++) {
		snprintf(path, sizeof(path), "root/%s", ro[i]);
		if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0 ||
		    mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | NSE, NULL) < 0) {
			int e = errno;
			if (e == ENOENT)
				continue;
			logf_("read-only /%s: %s", ro[i], strerror(e));
			return -e;
		}
	}
	for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++) {
		snprintf(path, sizeof(path), "root/%s", masked[i]);
		if (lstat(path, &st) < 0)
			continue; /* not in this kernel */
		if (S_ISDIR(st.st_mode)
			? mount("tmpfs", path, "tmpfs", MS_RDONLY | NSE, "mode=555") < 0
			: mount("/dev/null", path, NULL, MS_BIND, NULL) < 0) {
			int e = errno;
			logf_("hiding /%s: %s", masked[i], strerror(e));
			return -e;
		}
	}
	return 0;
}

static int setup_root(void)
{
	int e;

	mkdir("root/proc", 0555);
	mkdir("root/sys", 0555);
	mkdir("root/tmp", 01777);
	if (mount("proc", "root/proc", "proc", NSE, NULL) < 0)
		return -errno;
	if (mount("sysfs", "root/sys", "sysfs", MS_RDONLY | NSE, NULL) < 0)
		logf_("sysfs: %s", strerror(errno));
	if ((e = hide_host_knobs()) < 0 || (e = mount_dev()) < 0)
		return e;
	if (chdir("root") < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return -errno;
	return 0;
}

/* The lease's own network namespace: loopback up, and link-local addresses
 * (169.254.0.0/16: the clouds' metadata services) refused by a reject
 * route that the lease, without CAP_NET_ADMIN, cannot remove. */
static void own_net_setup(void)
{
	struct ifreq ifr = {0};
	struct rtentry rt = {0};
	struct sockaddr_in *dst = (struct sockaddr_in *)&rt.rt_dst;
	struct sockaddr_in *mask = (struct sockaddr_in *)&rt.rt_genmask;
	char lo[] = "lo";
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
			logf_("lo up: %s", strerror(errno));
	}
	dst->sin_family = mask->sin_family = AF_INET;
	dst->sin_addr.s_addr = htonl(0xa9fe0000);
	mask->sin_addr.s_addr = htonl(0xffff0000);
	rt.rt_flags = RTF_UP | RTF_REJECT;
	rt.rt_dev = lo;
	if (ioctl(fd, SIOCADDRT, &rt) < 0)
		logf_("link-local reject route: %s", strerror(errno));
	close(fd);
}

/*
 * What a default container keeps (Docker's set without NET_RAW, MKNOD or
 * AUDIT_WRITE, like Podman's): every other capability leaves the bounding
 * set, so no process of the lease (all root, all started by init) ever
 * holds it. SYS_PTRACE is gone too: with init non-dumpable, /proc/1/fd is
 * closed to the lease.
 */
static void drop_caps(void)
{
	static const int keep[] = {
	    CAP_CHOWN,	 CAP_DAC_OVERRIDE, CAP_FOWNER,	CAP_FSETID,	      CAP_KILL,
	    CAP_SETGID,	 CAP_SETUID,	   CAP_SETPCAP, CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT,
	    CAP_SETFCAP,
	};
	for (int c = 0; c <= CAP_LAST_CAP || prctl(PR_CAPBSET_READ, c, 0, 0, 0) >= 0; c++) {
		bool kept = false;
		for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
			kept |= keep[i] == c;
		if (!kept && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			logf_("dropping capability %d: %s", c, strerror(errno));
	}
}

/* ---- serving ------------------------------------------------------- */

static void reply(int conn, int kind, pid_t pid, int status, int err, const char *msg)
{
	struct lcl_reply r = {
	    .magic = LCL_MAGIC, .kind = kind, .pid = pid, .status = status, .err = err};
	if (msg)
		snprintf(r.msg, sizeof(r.msg), "%s", msg);
	if (send(conn, &r, sizeof(r), MSG_NOSIGNAL) < 0)
		return; /* the client went away: noticed on its next poll */
}

static void add_drain(int fd)
{
	if (fd < 0)
		return;
	drains = grow(drains, &cap_drains, n_drains + 1, sizeof(*drains));
	drains[n_drains++] = fd;
}

/* Receives the header (and the descriptors passed with it) and the payload. */
static int recv_req(int conn, struct lcl_req *req, char **payload, int *fds, int *nfds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * LCL_RUN_NFDS)];
	struct iovec iov = {.iov_base = req, .iov_len = sizeof(*req)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	size_t got = 0;

	*nfds = 0;
	*payload = NULL;
	while (got < sizeof(*req)) {
		ssize_t n = recvmsg(conn, &mh, MSG_CMSG_CLOEXEC);
		if (n <= 0)
			return n < 0 ? -errno : -EPROTO;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (int i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (*nfds < LCL_RUN_NFDS)
					fds[(*nfds)++] = fd;
				else
					close(fd);
			}
		}
		got += n;
		iov.iov_base = (char *)req + got;
		iov.iov_len = sizeof(*req) - got;
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
	}
	if (req->magic != LCL_MAGIC || req->version != LCL_VERSION || req->len > LCL_MAX_PAYLOAD)
		return -EPROTO;
	*payload = malloc(req->len + 1);
	if (!*payload)
		return -ENOMEM;
	for (got = 0; got < req->len;) {
		ssize_t n = read(conn, *payload + got, req->len - got);
		if (n <= 0)
			return n < 0 ? -errno : -EPROTO;
		got += n;
	}
	(*payload)[req->len] = '\0';
	return 0;
}

/* Splits the payload into cwd, argv and envp (base environment first, so requests win). */
static int parse_run(const struct lcl_req *req, char *p, const char **cwd, char ***argv,
		     char ***envp)
{
	static char *const base[] = {
	    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
	    "LANG=C.UTF-8", "TERM=dumb"};
	const size_t nbase = sizeof(base) / sizeof(base[0]);
	char *end = p + req->len;
	size_t nstr = 1 + (size_t)req->argc + req->envc;

	if (!req->argc || req->argc > 65536 || req->envc > 65536)
		return -EPROTO;
	char **strs = calloc(nstr, sizeof(char *));
	*argv = calloc(req->argc + 1, sizeof(char *));
	*envp = calloc(req->envc + nbase + 1, sizeof(char *));
	if (!strs || !*argv || !*envp)
		abort();
	for (size_t i = 0; i < nstr; i++) {
		if (p >= end) {
			free(strs);
			return -EPROTO;
		}
		strs[i] = p;
		p += strlen(p) + 1;
	}
	*cwd = strs[0];
	memcpy(*argv, strs + 1, req->argc * sizeof(char *));
	size_t n = 0;
	for (size_t b = 0; b < nbase; b++) {
		size_t klen = strchr(base[b], '=') - base[b] + 1;
		bool overridden = false;
		for (size_t i = 0; i < req->envc; i++)
			overridden |= !strncmp(strs[1 + req->argc + i], base[b], klen);
		if (!overridden)
			(*envp)[n++] = base[b];
	}
	memcpy(*envp + n, strs + 1 + req->argc, req->envc * sizeof(char *));
	free(strs);
	return 0;
}

/* The forked child: never returns. Failures go to errpipe as (stage, errno). */
static void child_exec(const struct lcl_req *req, const char *cwd, char **argv, char **envp,
		       const int *fds, int errpipe)
{
	int report[2] = {0, 0};
	sigset_t all;

	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGPIPE, SIG_DFL);
	/* A daemon started in the background by a script ignores these, and
	 * ignored signals survive exec: ^C in a terminal session must work. */
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	setsid();
	for (int i = 0; i < 3; i++)
		if (dup2(fds[i], i) < 0)
			goto fail;
	/* A terminal session (the provider's tty.c): the pty becomes its controlling tty. */
	if (isatty(0))
		ioctl(0, TIOCSCTTY, 0);
	close_range(3, ~0u, CLOSE_RANGE_CLOEXEC);
	umask(022);
	report[0] = 1;
	if (chdir(cwd) < 0)
		goto fail;
	report[0] = 2;
	environ = envp;
	if (req->flags & LCL_RUN_SHELL) {
		char *sh[] = {"sh", "-c", argv[0], NULL};
		char path[64];
		if (strlen(argv[0]) > SCRIPT_ARG_MAX) {
			int mfd = memfd_create("sbxfs-run", 0);
			size_t len = strlen(argv[0]), off = 0;
			while (mfd >= 0 && off < len) {
				ssize_t n = write(mfd, argv[0] + off, len - off);
				if (n <= 0)
					goto fail;
				off += n;
			}
			snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
			sh[1] = path;
			sh[2] = NULL;
		}
		execv("/bin/sh", sh);
	} else {
		execvp(argv[0], argv);
	}
fail:
	report[1] = errno;
	if (write(errpipe, report, sizeof(report)) < 0)
		_exit(127);
	_exit(127);
}

static void start_run(int conn, const struct lcl_req *req, char *payload, int *fds, int nfds)
{
	const char *cwd;
	char **argv = NULL, **envp = NULL, msg[200];
	int ep[2] = {-1, -1}, report[2];

	if (nfds != LCL_RUN_NFDS || parse_run(req, payload, &cwd, &argv, &envp) < 0) {
		reply(conn, LCL_R_ERROR, 0, 0, EPROTO, "malformed run request");
		goto out_close;
	}
	if (pipe2(ep, O_CLOEXEC) < 0) {
		reply(conn, LCL_R_ERROR, 0, 0, errno, "pipe failed");
		goto out_close;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(ep[0]);
		child_exec(req, cwd, argv, envp, fds, ep[1]);
	}
	close(ep[1]);
	if (pid < 0) {
		reply(conn, LCL_R_ERROR, 0, 0, errno, "fork failed");
		goto out_close;
	}
	/* Waits for exec (EOF) or the child's failure report. */
	ssize_t n;
	while ((n = read(ep[0], report, sizeof(report))) < 0 && errno == EINTR)
		;
	if (n == (ssize_t)sizeof(report)) {
		snprintf(msg, sizeof(msg), "%s %s: %s",
			 report[0] == 1 ? "working directory" : "cannot run",
			 report[0] == 1 ? cwd : argv[0], strerror(report[1]));
		reply(conn, LCL_R_ERROR, 0, 0, report[1], msg);
		goto out_close; /* the child is reaped by the SIGCHLD loop */
	}
	runs = grow(runs, &cap_runs, n_runs + 1, sizeof(*runs));
	runs[n_runs++] =
	    (struct run){.conn = conn,
			 .pid = pid,
			 .rd = {fds[3], fds[4]},
			 .deadline = req->timeout_ms > 0 ? sbx_now_ms() + req->timeout_ms : 0};
	reply(conn, LCL_R_STARTED, pid, 0, 0, NULL);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	conn = -1;
	goto out;
out_close:
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
out:
	if (conn >= 0)
		close(conn);
	if (ep[0] >= 0)
		close(ep[0]);
	free(argv);
	free(envp);
}

/*
 * After kill(-1, SIGSTOP) (a pause without a freezer): kill returns once the
 * signal is queued, and a process in a system call finishes it before it
 * stops, so the pause answered while the sandbox still wrote (a counter's
 * `mv` landed after it, seen under load). Waits, up to 2 s, until every
 * other process of the namespace is stopped or gone.
 */
static void wait_stopped(void)
{
	for (int tries = 0; tries < 200; tries++) {
		DIR *d = opendir("/proc");
		struct dirent *de;
		bool all = true;
		if (!d)
			return;
		while (all && (de = readdir(d))) {
			char path[64], buf[512], *end, *p;
			long pid = strtol(de->d_name, &end, 10);
			if (*end || pid <= 1)
				continue;
			snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
			if (fd >= 0)
				close(fd);
			if (n <= 0)
				continue;
			buf[n] = '\0';
			p = strrchr(buf,
				    ')'); /* the name may hold anything: the state follows ") " */
			if (p && p[1] == ' ' && p[2] && !strchr("TtZX", p[2]))
				all = false;
		}
		closedir(d);
		if (all)
			return;
		usleep(10000);
	}
}

static void accept_one(int lfd)
{
	struct timeval tv = {.tv_sec = 5};
	struct lcl_req req;
	char *payload = NULL;
	int fds[LCL_RUN_NFDS], nfds = 0;
	int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

	if (conn < 0)
		return;
	setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (recv_req(conn, &req, &payload, fds, &nfds) < 0) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		close(conn);
		free(payload);
		return;
	}
	switch (req.op) {
	case LCL_OP_RUN:
		start_run(conn, &req, payload, fds, nfds);
		conn = -1;
		nfds = 0;
		break;
	case LCL_OP_PING:
		reply(conn, LCL_R_PONG, host_pid, 0, 0, NULL);
		break;
	case LCL_OP_SIGNAL:
		/* From PID 1, kill(-1) reaches every process of the namespace but init. */
		if (kill(-1, (int)req.flags) < 0 && errno != ESRCH) {
			reply(conn, LCL_R_ERROR, 0, 0, errno, "kill failed");
		} else {
			if (req.flags == SIGSTOP)
				wait_stopped();
			reply(conn, LCL_R_DONE, 0, 0, 0, NULL);
		}
		break;
	case LCL_OP_LOG:
		if (nfds != 1 || dup2(fds[0], 2) < 0)
			reply(conn, LCL_R_ERROR, 0, 0, nfds != 1 ? EPROTO : errno,
			      "log: one descriptor expected");
		else
			reply(conn, LCL_R_DONE, 0, 0, 0, NULL);
		break;
	default:
		reply(conn, LCL_R_ERROR, 0, 0, EPROTO, "unknown request");
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	if (conn >= 0)
		close(conn);
	free(payload);
}

static void reap(void)
{
	int st;
	pid_t pid;
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (size_t i = 0; i < n_runs; i++) {
			if (runs[i].pid != pid)
				continue;
			int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			struct lcl_reply r = {.magic = LCL_MAGIC,
					      .kind = LCL_R_EXIT,
					      .pid = pid,
					      .status = code,
					      .timed_out = runs[i].timed_out};
			if (send(runs[i].conn, &r, sizeof(r), MSG_NOSIGNAL) < 0)
				logf_("exit reply: %s", strerror(errno));
			runs[i].pid = 0;
		}
	}
}

/* The client hung up: its run (if still going) is killed, its pipes drained. */
static void finish_run(size_t i)
{
	if (runs[i].pid > 0)
		kill(-runs[i].pid, SIGKILL);
	close(runs[i].conn);
	add_drain(runs[i].rd[0]);
	add_drain(runs[i].rd[1]);
	runs[i] = runs[--n_runs];
}

static int serve(int lfd, int sfd)
{
	struct pollfd *pfd = NULL;
	size_t cap_pfd = 0;
	char buf[4096];

	for (;;) {
		long long now = sbx_now_ms(), next = -1;
		for (size_t i = 0; i < n_runs; i++) {
			if (runs[i].pid > 0 && runs[i].deadline && runs[i].deadline <= now) {
				kill(-runs[i].pid, SIGKILL);
				runs[i].timed_out = true;
				runs[i].deadline = 0;
			}
			if (runs[i].pid > 0 && runs[i].deadline &&
			    (next < 0 || runs[i].deadline - now < next))
				next = runs[i].deadline - now;
		}
		size_t n = 2 + n_runs + n_drains;
		pfd = grow(pfd, &cap_pfd, n, sizeof(*pfd));
		pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = sfd, .events = POLLIN};
		for (size_t i = 0; i < n_runs; i++)
			pfd[2 + i] = (struct pollfd){.fd = runs[i].conn, .events = POLLIN};
		for (size_t i = 0; i < n_drains; i++)
			pfd[2 + n_runs + i] = (struct pollfd){.fd = drains[i], .events = POLLIN};
		if (poll(pfd, n, next < 0 ? -1 : (int)next + 1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pfd[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) > 0)
				;
			reap();
		}
		/* Back to front, so that removals do not disturb what is left to see. */
		for (size_t i = n_drains; i-- > 0;) {
			short re = pfd[2 + n_runs + i].revents;
			if (re && (!(re & POLLIN) || read(drains[i], buf, sizeof(buf)) <= 0)) {
				close(drains[i]);
				drains[i] = drains[--n_drains];
			}
		}
		for (size_t i = n_runs; i-- > 0;) {
			if (pfd[2 + i].revents && (!(pfd[2 + i].revents & POLLIN) ||
						   read(runs[i].conn, buf, sizeof(buf)) <= 0))
				finish_run(i);
		}
		if (pfd[0].revents & POLLIN)
			accept_one(lfd);
	}
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *hostname = "sandbox";
	int ready = -1, logfd = -1, opt, lfd, sfd, e;
	bool own_net = false;
	struct rlimit rl = {65536, 65536};
	sigset_t mask;

	while ((opt = getopt(argc, argv, "d:h:r:l:n")) != -1) {
		switch (opt) {
		case 'd':
			dir = optarg;
			break;
		case 'h':
			hostname = optarg;
			break;
		case 'r':
			ready = atoi(optarg);
			break;
		case 'l':
			logfd = atoi(optarg);
			break;
		case 'n':
			own_net = true;
			break;
		default:
			return 2;
		}
	}
	if (!dir || ready < 0) {
		fprintf(
		    stderr,
		    "usage: sbxfs-init -d LEASE_DIR -h HOSTNAME -r READY_FD [-l LOG_FD] [-n]\n");
		return 2;
	}
	const char *why = "not PID 1 of a pid namespace";
	if (getpid() != 1)
		goto fail;
	why = "lease directory";
	if (chdir(dir) < 0)
		goto fail;
	/* Our errors go into the daemon's pipe (it reads and caps them), never a
	 * host file; a full pipe drops them rather than block. */
	int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nullfd < 0 || dup2(nullfd, 0) < 0 || dup2(nullfd, 1) < 0 ||
	    dup2(logfd >= 0 ? logfd : nullfd, 2) < 0)
		goto fail;
	fcntl(2, F_SETFL, O_WRONLY | O_NONBLOCK);
	if (logfd >= 0 && logfd != 2)
		close(logfd);
	close(nullfd);
	host_pid = read_host_pid();
	setrlimit(RLIMIT_NOFILE, &rl);
	why = "making mounts private";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		goto fail;
	why = "binding init.sock";
	if ((lfd = bind_socket()) < 0)
		goto fail;
	why = "setting up the root";
	if ((e = setup_root()) < 0) {
		errno = -e;
		goto fail;
	}
	if (sethostname(hostname, strlen(hostname)) < 0)
		logf_("sethostname: %s", strerror(errno));
	if (write_file("/proc/self/oom_score_adj", "-1000") < 0)
		logf_("oom_score_adj: %s", strerror(errno));
	if (own_net)
		own_net_setup();
	drop_caps();
	/* The lease cannot open init's descriptors through /proc/1/fd. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	why = "installing the seccomp filter";
	if ((e = lcl_seccomp_install()) < 0) {
		errno = -e;
		goto fail;
	}
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	why = "signalfd";
	if ((sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
		goto fail;
	char ok[32];
	int okn = snprintf(ok, sizeof(ok), "ok %d", (int)host_pid);
	if (write(ready, ok, okn) < 0)
		return 1;
	close(ready);
	e = serve(lfd, sfd);
	logf_("serve: %s", strerror(-e));
	return 1;
fail:;
	char msg[256];
	int n = snprintf(msg, sizeof(msg), "%s: %s", why, strerror(errno));
	logf_("%s", msg);
	if (write(ready, msg, n) < 0)
		return 1;
	return 1;
}
