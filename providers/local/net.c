/*
 * net — the network of a local lease whose spec does not say otherwise:
 * its own network namespace, with outbound access through slirp4netns
 * (Debian's package of it), a user-mode TCP/IP stack that turns the
 * lease's packets into ordinary sockets of the host.
 *
 * slirp4netns is started once init is up, in the lease's cgroups (pausing
 * freezes it), as a grandchild so that it outlives the daemon as init does;
 * it ends with init, which holds the write end of its --exit-fd pipe (so
 * also without cgroups: no pid of ours to keep). Options:
 *   --configure            eth0 10.0.2.100/24, gateway 10.0.2.2, DNS 10.0.2.3
 *                          (the lease's resolv.conf: the host's resolver);
 *   --disable-host-loopback  the gateway never leads to the host's 127.0.0.1:
 *                          host loopback services are out of reach;
 *   --enable-sandbox/-seccomp  the stack itself runs without capabilities,
 *                          in an empty mount namespace, under a filter;
 *   no IPv6                (no IPv6 link-local or metadata routes);
 *   --api-socket           dir/net.sock; nothing of ours calls it now:
 *                          ports/PORT is forwarded by the daemon itself
 *                          (forward.c: slirp's hostfwd reached only the
 *                          lease's eth0, not its loopback, and took the
 *                          host port equal to the lease's).
 * Link-local addresses (169.254.0.0/16, the clouds' metadata service) are
 * refused by a reject route init sets in the namespace (init.c). Spec
 * "network": "host" keeps the host's namespace; "none" a namespace with
 * loopback only. (pasta, the other candidate, was tried first: Debian 12's
 * version drops to nobody before it joins the namespace, and its automatic
 * port forwarding never saw the lease's listening sockets.)
 */
#include "local.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NET_WAIT_MS 10000

/* The lease's /etc/resolv.conf: pasta's DNS forwarder. */
static int write_resolv(struct local_inst *li)
{
	static const char text[] = "# sbxfs: the host's resolver, through slirp4netns\n"
				   "nameserver " LCL_NET_DNS "\n";
	int fd = lcl_resolve_open(li->rootfd, "/etc/resolv.conf",
				  O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return fd;
	ssize_t n = write(fd, text, sizeof(text) - 1);
	close(fd);
	return n == (ssize_t)sizeof(text) - 1 ? 0 : -EIO;
}

int lcl_net_start(struct local_inst *li, struct sbx_error *err)
{
	static char *const envp[] = {
	    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	char netns[64], api[4096], readyfd[16], exitfd[24], buf[8];
	int cgfds[LCL_CG_MAX_DIRS], ncg, st, e, readyp[2];
	pid_t pid;

	if (li->net_none || li->net_host)
		return 0;
	if (li->net_exit_fd < 0)
		return sbx_error_set(err, EIO, 0, "network: no exit pipe from init");
	if ((e = write_resolv(li)) < 0)
		return sbx_error_set(err, -e, 0, "writing the lease's resolv.conf: %s",
				     strerror(-e));
	snprintf(netns, sizeof(netns), "/proc/%d/ns/net", (int)li->init_pid);
	snprintf(api, sizeof(api), "%s/" LCL_NET_API, li->dir);
	if ((ncg = lcl_cg_open_procs(&li->cg, cgfds)) < 0)
		return sbx_error_set(err, -ncg, 0, "opening cgroup.procs: %s", strerror(-ncg));
	if (pipe2(readyp, O_CLOEXEC) < 0) {
		e = sbx_error_set(err, errno, 0, "pipe: %s", strerror(errno));
		goto out_cg;
	}
	snprintf(readyfd, sizeof(readyfd), "--ready-fd=%d", readyp[1]);
	snprintf(exitfd, sizeof(exitfd), "--exit-fd=%d", li->net_exit_fd);
	char *argv[] = {"slirp4netns",
			"--configure",
			"--mtu=65520",
			"--disable-host-loopback",
			"--enable-sandbox",
			"--enable-seccomp",
			"--cidr=" LCL_NET_CIDR,
			"--api-socket",
			api,
			readyfd,
			exitfd,
			"--netns-type=path",
			netns,
			"eth0",
			NULL};
	pid = fork();
	if (pid == 0) {
		/* Async-signal-safe calls only: join the lease's cgroups, detach, exec. */
		for (int i = 0; i < ncg; i++)
			if (write(cgfds[i], "0", 1) < 0)
				_exit(126);
		if (_Fork() != 0)
			_exit(0); /* the stack outlives the daemon, as init does */
		setsid();
		fcntl(readyp[1], F_SETFD, 0);
		fcntl(li->net_exit_fd, F_SETFD, 0);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		execve("/usr/bin/slirp4netns", argv, envp);
		execvpe("slirp4netns", argv, envp);
		_exit(127);
	}
	close(readyp[1]);
	if (pid < 0) {
		e = sbx_error_set(err, errno, 0, "fork: %s", strerror(errno));
		goto out_ready;
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	struct pollfd p = {.fd = readyp[0], .events = POLLIN};
	if (poll(&p, 1, NET_WAIT_MS) != 1 || read(readyp[0], buf, 1) != 1)
		e = sbx_error_set(err, EIO, 0,
				  "network: slirp4netns did not start (apt-get install "
				  "slirp4netns, or use \"network\": \"host\")");
	else
		e = 0;
out_ready:
	close(readyp[0]);
	close(li->net_exit_fd); /* init's end keeps the stack alive, ours must not */
	li->net_exit_fd = -1;
out_cg:
	for (int i = 0; i < ncg; i++)
		close(cgfds[i]);
	return e;
}
