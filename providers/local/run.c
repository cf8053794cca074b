/*
 * run — the provider's side of proto.h: one connection to the lease's init
 * per run, the child's pipes passed with SCM_RIGHTS, output streamed to the
 * sink while the run goes on.
 *
 * Processes a run leaves in the background may keep its pipes open, so the
 * end of a run is the exit status from init, not EOF: after it, what is
 * already buffered is drained until DRAIN_QUIET_MS of silence (at most
 * DRAIN_MAX_MS), then the connection is closed and init takes over the
 * pipes (it discards what the background writes later). Not here: the
 * timeout itself (init enforces it) and any notion of "the last run".
 */
#include "local.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/sysutil.h"
#include "proto.h"

#define DRAIN_QUIET_MS 50
#define DRAIN_MAX_MS 1000
#define TRANSPORT_GRACE_MS 10000

static int gone(const struct local_inst *li, struct sbx_error *err)
{
	return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "sandbox %s is gone", li->base.id);
}

static int connect_init(const struct local_inst *li, struct sbx_error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	/* Through the directory's descriptor: a long state_dir never hits sun_path's limit. */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", li->dirfd, LCL_SOCK_NAME);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return sbx_error_set(err, errno, 0, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		if (!lcl_init_alive(li))
			return gone(li, err);
		return sbx_error_set(err, e == ECONNREFUSED ? ENOTCONN : e, SBX_E_CONNECTION_FAILED,
				     "sandbox %s: connecting to its init: %s", li->base.id,
				     strerror(e));
	}
	return fd;
}

/* Sends header + payload; the descriptors ride on the first chunk. */
static int send_req(int sock, const struct lcl_req *h, const char *payload, const int *fds,
		    int nfds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * LCL_RUN_NFDS)] = {0};
	struct iovec iov[2] = {{(void *)h, sizeof(*h)}, {(void *)payload, h->len}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};

	if (nfds) {
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	while (mh.msg_iovlen) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
		while (mh.msg_iovlen && (size_t)n >= mh.msg_iov->iov_len) {
			n -= mh.msg_iov->iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen) {
			mh.msg_iov->iov_base = (char *)mh.msg_iov->iov_base + n;
			mh.msg_iov->iov_len -= n;
		}
	}
	return 0;
}

/* Reads one whole reply, waiting at most ms (-1: no limit). 0, -ETIMEDOUT, -EPIPE (closed). */
static int read_reply(int sock, struct lcl_reply *r, long ms)
{
	size_t got = 0;
	long long deadline = ms < 0 ? -1 : sbx_now_ms() + ms;
	while (got < sizeof(*r)) {
		struct pollfd p = {.fd = sock, .events = POLLIN};
		long left = deadline < 0 ? -1 : (long)(deadline - sbx_now_ms());
		if (deadline >= 0 && left <= 0)
			return -ETIMEDOUT;
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		ssize_t n = read(sock, (char *)r + got, sizeof(*r) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EPIPE;
		got += n;
	}
	return r->magic == LCL_MAGIC ? 0 : -EPROTO;
}

static int request(const struct local_inst *li, int op, int arg, int fd, long timeout_ms,
		   pid_t *pid, struct sbx_error *err)
{
	struct lcl_req h = {.magic = LCL_MAGIC, .version = LCL_VERSION, .op = op, .flags = arg};
	struct lcl_reply r;
	int sock = connect_init(li, err), e;

	if (sock < 0)
		return sock;
	if ((e = send_req(sock, &h, "", &fd, fd >= 0)) == 0)
		e = read_reply(sock, &r, timeout_ms);
	close(sock);
	if (e == -ETIMEDOUT)
		return sbx_error_set(err, ETIMEDOUT, 0, "sandbox %s: its init did not answer",
				     li->base.id);
	if (e < 0)
		return lcl_init_alive(li) ? sbx_error_set(err, EIO, 0, "sandbox %s: init: %s",
							  li->base.id, strerror(-e))
					  : gone(li, err);
	if (r.kind == LCL_R_ERROR)
		return sbx_error_set(err, r.err, 0, "sandbox %s: %s", li->base.id, r.msg);
	if (pid)
		*pid = r.pid;
	return 0;
}

int lcl_request(const struct local_inst *li, int op, int arg, long timeout_ms, pid_t *pid,
		struct sbx_error *err)
{
	return request(li, op, arg, -1, timeout_ms, pid, err);
}

int lcl_request_fd(const struct local_inst *li, int op, int fd, long timeout_ms,
		   struct sbx_error *err)
{
	return request(li, op, 0, fd, timeout_ms, NULL, err);
}

static void build_payload(const struct local_inst *li, const struct sbx_run_req *req,
			  struct lcl_req *h, struct sbx_buf *b)
{
	const char *cwd = req->cwd ? req->cwd : li->workdir ? li->workdir : "/root";
	char **envs = sbx_envs_merge(&li->spec, req->envs);

	sbx_buf_add(b, cwd, strlen(cwd) + 1);
	if (req->shell) {
		sbx_buf_add(b, req->shell, strlen(req->shell) + 1);
		h->argc = 1;
		h->flags = LCL_RUN_SHELL;
	} else {
		for (h->argc = 0; req->argv[h->argc]; h->argc++)
			sbx_buf_add(b, req->argv[h->argc], strlen(req->argv[h->argc]) + 1);
	}
	for (h->envc = 0; envs[h->envc]; h->envc++)
		sbx_buf_add(b, envs[h->envc], strlen(envs[h->envc]) + 1);
	free(envs);
	h->len = b->len;
}

/* The poll loop of one run. Returns 0 with result filled, or -errno. */
static int pump(const struct local_inst *li, int sock, int out, int errfd, long timeout_ms,
		const struct sbx_run_sink *sink, struct sbx_run_result *result,
		struct sbx_error *err)
{
	int fds[2] = {out, errfd};
	struct lcl_reply r;
	size_t got = 0;
	bool exited = false;
	long long deadline = timeout_ms > 0 ? sbx_now_ms() + timeout_ms + TRANSPORT_GRACE_MS : -1;
	long long exit_at = 0, last_data = 0;
	char buf[65536];

	for (;;) {
		struct pollfd p[3] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}, {sock, POLLIN, 0}};
		long long now = sbx_now_ms();
		long wait = -1;
		if (exited) {
			if ((fds[0] < 0 && fds[1] < 0) || now - last_data >= DRAIN_QUIET_MS ||
			    now - exit_at >= DRAIN_MAX_MS)
				return 0;
			wait = DRAIN_QUIET_MS - (long)(now - last_data);
			p[2].fd = -1;
		} else {
			/* Hanging up before EXIT makes init kill the run's processes. */
			if (sbx_run_cancelled(sink))
				return sbx_error_set(err, ECANCELED, 0, "the run was cancelled");
			if (deadline >= 0 && now >= deadline)
				return sbx_error_set(err, ETIMEDOUT, 0,
						     "sandbox %s: the run outlived "
						     "its timeout and init did not end it",
						     li->base.id);
			if (deadline >= 0)
				wait = (long)(deadline - now);
			if (sink && sink->cancel && (wait < 0 || wait > SBX_CANCEL_POLL_MS))
				wait = SBX_CANCEL_POLL_MS;
		}
		if (poll(p, 3, (int)wait) < 0) {
			if (errno == EINTR)
				continue;
			return sbx_error_set(err, errno, 0, "poll: %s", strerror(errno));
		}
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			ssize_t n = read(fds[i], buf, sizeof(buf));
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0) {
				fds[i] = -1; /* EOF: the caller still owns (and closes) the fd */
				continue;
			}
			last_data = sbx_now_ms();
			int e = sink && sink->output
				    ? sink->output(sink->ctx, i ? SBX_STDERR : SBX_STDOUT, buf, n)
				    : 0;
			if (e < 0)
				return sbx_error_set(err, e, 0, "output sink: %s", strerror(-e));
		}
		if (!p[2].revents)
			continue;
		ssize_t n = read(sock, (char *)&r + got, sizeof(r) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return lcl_init_alive(li)
				   ? sbx_error_set(err, EIO, 0, "sandbox %s: init hung up",
						   li->base.id)
				   : gone(li, err);
		if ((got += n) < sizeof(r))
			continue;
		got = 0;
		if (r.magic != LCL_MAGIC)
			return sbx_error_set(err, EPROTO, 0, "sandbox %s: bad reply", li->base.id);
		if (r.kind == LCL_R_ERROR)
			return sbx_error_set(err, r.err, 0, "%s", r.msg);
		if (r.kind == LCL_R_EXIT) {
			result->exit_code = r.status;
			result->timed_out = r.timed_out != 0;
			exited = true;
			exit_at = last_data = sbx_now_ms();
		}
	}
}

int lcl_run(struct sbx_instance *inst, const struct sbx_run_req *req,
	    const struct sbx_run_sink *sink, struct sbx_run_result *result, struct sbx_error *err)
{
	struct local_inst *li = lcl_inst(inst);
	struct lcl_req h = {.magic = LCL_MAGIC,
			    .version = LCL_VERSION,
			    .op = LCL_OP_RUN,
			    .timeout_ms = req->timeout_ms};
	struct sbx_buf payload = SBX_BUF_INIT;
	int out[2] = {-1, -1}, errp[2] = {-1, -1}, devnull = -1, sock = -1, e;
	long long start = sbx_now_ms();

	memset(result, 0, sizeof(*result));
	if (!req->shell == !req->argv || (req->argv && !req->argv[0]))
		return sbx_error_set(err, EINVAL, 0, "run: give exactly one of shell text or argv");
	/* A frozen init would take the request and answer only after a resume. */
	if (lcl_cg_frozen(&li->cg) > 0 || faccessat(li->dirfd, "paused", F_OK, 0) == 0)
		return sbx_error_set(err, EBUSY, 0, "sandbox %s is paused", li->base.id);
	build_payload(li, req, &h, &payload);
	if (payload.len > LCL_MAX_PAYLOAD) {
		e = sbx_error_set(err, E2BIG, 0, "run: command and environment exceed %u bytes",
				  LCL_MAX_PAYLOAD);
		goto out;
	}
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
	    (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
		e = sbx_error_set(err, errno, 0, "run: %s", strerror(errno));
		goto out;
	}
	if ((sock = connect_init(li, err)) < 0) {
		e = sock;
		goto out;
	}
	int fds[LCL_RUN_NFDS] = {devnull, out[1], errp[1], out[0], errp[0]};
	if ((e = send_req(sock, &h, payload.buf, fds, LCL_RUN_NFDS)) < 0) {
		e = sbx_error_set(err, e, 0, "sandbox %s: sending the run: %s", li->base.id,
				  strerror(-e));
		goto out;
	}
	/* Our copies of the child's ends must go, or EOF would never come. */
	close(out[1]);
	close(errp[1]);
	out[1] = errp[1] = -1;
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(errp[0], F_SETFL, O_NONBLOCK);
	e = pump(li, sock, out[0], errp[0], req->timeout_ms, sink, result, err);
out:
	result->duration_ms = (long)(sbx_now_ms() - start);
	int all[] = {sock, devnull, out[0], out[1], errp[0], errp[1]};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i] >= 0)
			close(all[i]);
	sbx_buf_release(&payload);
	return e;
}

/* For tty.c, which starts its shell over the same protocol. */
int lcl_run_connect(const struct local_inst *li, struct sbx_error *err)
{
	return connect_init(li, err);
}

int lcl_run_send(const struct local_inst *li, const struct sbx_run_req *req, int sock,
		 const int fds[LCL_RUN_NFDS], struct sbx_error *err)
{
	struct lcl_req h = {.magic = LCL_MAGIC,
			    .version = LCL_VERSION,
			    .op = LCL_OP_RUN,
			    .timeout_ms = req->timeout_ms};
	struct sbx_buf payload = SBX_BUF_INIT;
	int e;

	build_payload(li, req, &h, &payload);
	if (payload.len > LCL_MAX_PAYLOAD)
		e = sbx_error_set(err, E2BIG, 0, "run: command and environment exceed %u bytes",
				  LCL_MAX_PAYLOAD);
	else if ((e = send_req(sock, &h, payload.buf, fds, LCL_RUN_NFDS)) < 0)
		e = sbx_error_set(err, e, 0, "sandbox %s: sending the run: %s", li->base.id,
				  strerror(-e));
	sbx_buf_release(&payload);
	return e;
}

void lcl_log_reopen(struct local_inst *li)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* a probe and a thaw at once */
	struct sbx_error ign = SBX_ERROR_INIT;
	int p[2];

	pthread_mutex_lock(&lock);
	if (li->logfd >= 0 || lcl_cg_frozen(&li->cg) > 0 || pipe2(p, O_CLOEXEC) < 0)
		goto out;
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	if (lcl_request_fd(li, LCL_OP_LOG, p[1], 3000, &ign) == 0) {
		li->logfd = p[0];
	} else {
		close(p[0]); /* an init older than LOG: its errors stay dropped */
		sbx_log(SBX_LOG_DEBUG, "local: %s: no new log pipe: %s", li->base.id, ign.msg);
	}
	close(p[1]);
out:
	pthread_mutex_unlock(&lock);
}
