/*
 * forward — ports/PORT of an isolated local lease: the daemon itself carries
 * TCP from the host's 127.0.0.1 into the lease's network namespace.
 *
 * Per forwarded port, a listener on the host's 127.0.0.1 (PORT itself when
 * free, else an ephemeral port: two leases serving 8000, or a host process on
 * 8000, do not collide) and an accept thread. Per accepted connection, a
 * thread setns(CLONE_NEWNET)s itself into the lease's namespace (namespaces
 * are per thread; the socket keeps the namespace it was made in), connects to
 * 127.0.0.1:PORT there — so a server bound to the lease's loopback, as most
 * dev servers are, is reached — and copies both ways until both ends are done.
 * slirp4netns's hostfwd reached the lease's eth0 only, and took the host port
 * equal to the lease's.
 *
 * A lease's forwarders share one struct lcl_fwd, refcounted by its threads;
 * lcl_fwd_stop (kill, release) closes the write end of a pipe every thread
 * polls, joins the accept threads and closes the listeners; copy threads end
 * at their next poll.
 */
#include "local.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/caller.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/xalloc.h"

#define FWD_BUF 65536
/*
 * Connections copied at once per lease (a thread and two descriptors
 * each); past it the listener waits, and new clients queue in its
 * backlog as at a busy server.
 */
#define FWD_CONNS_MAX 256
/* How long the listener waits, out of descriptors or at the cap, before it tries again. */
#define FWD_PAUSE_MS 100

struct fwd_port {
	int port;      /* in the lease */
	int host_port; /* on the host's 127.0.0.1 */
	int lfd;
	pthread_t thr;
	struct lcl_fwd *fwd;
	struct fwd_port *next;
};

struct lcl_fwd {
	atomic_int refs;  /* the lease's pointer, each thread */
	atomic_int conns; /* connections being copied (FWD_CONNS_MAX) */
	int nsfd;	  /* the lease's network namespace */
	int stop[2];	  /* stop[1] closed: every thread ends */
	struct fwd_port *ports;
};

struct fwd_conn {
	struct lcl_fwd *fwd;
	int cfd; /* the host's client */
	int port;
};

static pthread_mutex_t fwd_lock = PTHREAD_MUTEX_INITIALIZER; /* li->fwd and its ports list */

static void fwd_unref(struct lcl_fwd *f)
{
	if (atomic_fetch_sub(&f->refs, 1) != 1)
		return;
	close(f->stop[0]);
	if (f->stop[1] >= 0)
		close(f->stop[1]);
	close(f->nsfd);
	free(f);
}

/* A socket of the lease's namespace connected to its 127.0.0.1:port, or -errno. */
static int connect_inside(struct lcl_fwd *f, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd;

	if (setns(f->nsfd, CLONE_NEWNET) < 0) /* this thread only; it ends with the copy */
		return -errno;
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/* Copies both ways; an EOF is passed on as a half-close, an error ends both. */
static void *conn_main(void *arg)
{
	struct fwd_conn *c = arg;
	int fds[2] = {c->cfd, connect_inside(c->fwd, c->port)};
	bool open[2] = {true, true};
	char *buf = sbx_xmalloc(FWD_BUF);

	while (fds[1] >= 0 && (open[0] || open[1])) {
		struct pollfd p[3] = {{.fd = open[0] ? fds[0] : -1, .events = POLLIN},
				      {.fd = open[1] ? fds[1] : -1, .events = POLLIN},
				      {.fd = c->fwd->stop[0], .events = POLLIN}};
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[2].revents)
			break;
		int i;
		for (i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			ssize_t n = read(fds[i], buf, FWD_BUF);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 || (n > 0 && sbx_send_all(fds[!i], buf, (size_t)n) < 0))
				break;
			if (n == 0) {
				open[i] = false;
				shutdown(fds[!i], SHUT_WR);
			}
		}
		if (i < 2)
			break;
	}
	free(buf);
	close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	atomic_fetch_sub(&c->fwd->conns, 1);
	fwd_unref(c->fwd);
	free(c);
	return NULL;
}

/*
 * The owner of the host socket that connected to cfd, our listener on
 * 127.0.0.1:host_port: the line of the table (/proc/thread-self/net/tcp,
 * or tcp6 for a v4-mapped client) whose local end is the peer's address.
 * TCP carries no credentials, and the kernel records every socket's uid
 * there, but for TIME_WAIT: such a line, of an earlier connection on the
 * same ports (loopback reuses them at once), shows uid 0 and is passed
 * over. A client that half-closed already (FIN_WAIT) still counts. 0, or
 * -ENOENT when it is gone, or the tables' -errno when they cannot be read.
 */
static int peer_uid(int cfd, int host_port, uid_t *uid)
{
	static const char *const tables[] = {"/proc/thread-self/net/tcp",
					     "/proc/thread-self/net/tcp6"};
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	char want4[16], want6[48], line[512], local[48], rem[48];
	unsigned lport, rport, st, u;
	if (getpeername(cfd, (struct sockaddr *)&sa, &len) < 0 || sa.sin_family != AF_INET)
		return -ENOENT;
	/* The kernel prints an address's 32-bit words as %08X of their memory. */
	snprintf(want4, sizeof(want4), "%08X", (unsigned)sa.sin_addr.s_addr);
	snprintf(want6, sizeof(want6), "0000000000000000FFFF0000%s", want4);
	int e = -ENOENT;
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
		FILE *f = fopen(tables[t], "re");
		if (!f) {
			e = -errno; /* EMFILE: not "unknown" */
			continue;
		}
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line,
				   " %*s %47[0-9A-F]:%x %47[0-9A-F]:%x %x %*x:%*x %*x:%*x %*x %u",
				   local, &lport, rem, &rport, &st, &u) != 6)
				continue;
			if (st != 6 /* TCP_TIME_WAIT */ && lport == ntohs(sa.sin_port) &&
			    rport == (unsigned)host_port && !strcmp(local, t ? want6 : want4)) {
				fclose(f);
				*uid = (uid_t)u;
				return 0;
			}
		}
		fclose(f);
	}
	return e;
}

/* Whether the mount's rule lets the host user behind cfd in (access.h). */
static bool peer_allowed(int cfd, const struct fwd_port *fp)
{
	uid_t uid = (uid_t)-1;
	int rc = peer_uid(cfd, fp->host_port, &uid);
	if (rc) {
		sbx_log(SBX_LOG_WARN, "ports: %d: a connection whose owner %s, refused", fp->port,
			rc == -ENOENT ? "is unknown" : "cannot be read");
		return false;
	}
	if (sbx_caller_uid_allowed(uid))
		return true;
	sbx_log(SBX_LOG_WARN, "ports: %d: a connection from uid %u refused: not the mount's user",
		fp->port, (unsigned)uid);
	return false;
}

/* Waits ms on the stop pipe: true when the forwarder stops. */
static bool stopped_within(struct lcl_fwd *f, int ms)
{
	struct pollfd p = {.fd = f->stop[0], .events = POLLIN};
	return poll(&p, 1, ms) > 0;
}

/* Out of descriptors or memory: accept fails again at once while the client waits. */
static bool out_of_room(int e)
{
	return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

static void *accept_main(void *arg)
{
	struct fwd_port *fp = arg;
	struct lcl_fwd *f = fp->fwd;
	pthread_attr_t attr;
	bool short_of_room = false;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		struct pollfd p[2] = {{.fd = fp->lfd, .events = POLLIN},
				      {.fd = f->stop[0], .events = POLLIN}};
		if (atomic_load(&f->conns) >= FWD_CONNS_MAX) {
			if (stopped_within(f, FWD_PAUSE_MS))
				break;
			continue;
		}
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		int cfd = accept4(fp->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0 && out_of_room(errno)) {
			/* The client stays queued and poll says so at once: wait, not spin. */
			if (!short_of_room)
				sbx_log(SBX_LOG_WARN, "ports: %d: cannot accept (%s): waiting",
					fp->port, strerror(errno));
			short_of_room = true;
			if (stopped_within(f, FWD_PAUSE_MS))
				break;
			continue;
		}
		if (cfd < 0)
			continue; /* ECONNABORTED and the like */
		short_of_room = false;
		if (!peer_allowed(cfd, fp)) {
			close(cfd);
			continue;
		}
		struct fwd_conn *c = sbx_xmalloc(sizeof(*c));
		pthread_t t;
		*c = (struct fwd_conn){.fwd = f, .cfd = cfd, .port = fp->port};
		atomic_fetch_add(&f->refs, 1);
		atomic_fetch_add(&f->conns, 1);
		if (pthread_create(&t, &attr, conn_main, c) != 0) {
			close(cfd);
			atomic_fetch_sub(&f->conns, 1);
			fwd_unref(f);
			free(c);
		}
	}
	pthread_attr_destroy(&attr);
	return NULL;
}

/* A listener on the host's 127.0.0.1:port, else on an ephemeral port. */
static int listen_host(int port, int *host_port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), e;

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		sa.sin_port = 0;
		if (errno != EADDRINUSE || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			goto fail;
	}
	if (listen(fd, 64) < 0 || getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		goto fail;
	*host_port = ntohs(sa.sin_port);
	return fd;
fail:
	e = -errno;
	close(fd);
	return e;
}

int lcl_fwd_port(struct local_inst *li, int port, int *host_port, struct sbx_error *err)
{
	char ns[64];
	struct fwd_port *fp;
	int e = 0;

	pthread_mutex_lock(&fwd_lock);
	if (!li->fwd) {
		struct lcl_fwd *f = sbx_xcalloc(1, sizeof(*f));
		snprintf(ns, sizeof(ns), "/proc/%d/ns/net", (int)li->init_pid);
		if ((f->nsfd = open(ns, O_RDONLY | O_CLOEXEC)) < 0 ||
		    pipe2(f->stop, O_CLOEXEC) < 0) {
			e = sbx_error_set(err, errno, 0, "port %d: the lease's network: %s", port,
					  strerror(errno));
			if (f->nsfd >= 0)
				close(f->nsfd);
			free(f);
			goto out;
		}
		atomic_init(&f->refs, 1);
		atomic_init(&f->conns, 0);
		li->fwd = f;
	}
	struct lcl_fwd *fw = li->fwd; /* set above when it was NULL */
	for (fp = fw->ports; fp; fp = fp->next)
		if (fp->port == port)
			goto found;
	fp = sbx_xcalloc(1, sizeof(*fp));
	fp->port = port;
	fp->fwd = fw;
	if ((fp->lfd = listen_host(port, &fp->host_port)) < 0) {
		e = sbx_error_set(err, -fp->lfd, 0,
				  "port %d: listening on the host's 127.0.0.1: %s", port,
				  strerror(-fp->lfd));
		free(fp);
		goto out;
	}
	if ((e = pthread_create(&fp->thr, NULL, accept_main, fp)) != 0) {
		e = sbx_error_set(err, e, 0, "port %d: thread: %s", port, strerror(e));
		close(fp->lfd);
		free(fp);
		goto out;
	}
	fp->next = fw->ports;
	fw->ports = fp;
found:
	*host_port = fp->host_port;
out:
	pthread_mutex_unlock(&fwd_lock);
	return e;
}

void lcl_fwd_stop(struct local_inst *li)
{
	pthread_mutex_lock(&fwd_lock);
	struct lcl_fwd *f = li->fwd;
	li->fwd = NULL;
	pthread_mutex_unlock(&fwd_lock);
	if (!f)
		return;
	close(f->stop[1]); /* POLLHUP on stop[0] in every thread */
	f->stop[1] = -1;
	while (f->ports) {
		struct fwd_port *fp = f->ports;
		f->ports = fp->next;
		pthread_join(fp->thr, NULL);
		close(fp->lfd);
		free(fp);
	}
	fwd_unref(f);
}
