/*
 * tty — terminal sessions of the local provider: a pseudo terminal made on
 * the host, its slave handed to the lease's init as the stdin, stdout and
 * stderr of a RUN (init makes it the shell's controlling terminal), and a
 * thread that copies the master's output to the core's sink until the
 * shell exits. Keystrokes are written to the master; a resize is
 * TIOCSWINSZ on it (the kernel sends SIGWINCH). Not here: job control or
 * terminal modes, which are the shell's and the kernel's business.
 */
#include "local.h"
#include "base/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "proto.h"

/* After the shell's exit, output still in the pty is read until this much silence. */
#define TTY_DRAIN_QUIET_MS 100
/* How long a keystroke write waits for a terminal whose input queue is full. */
#define TTY_WRITE_WAIT_MS 5000

/* bash where the sandbox has it, else sh; a login shell either way (in /bin when the
 * env's PATH has neither, as runs: src/run.c shell_text). */
static const char tty_shell[] =
    "if command -v bash >/dev/null 2>&1; then exec bash -l; "
    "elif [ -x /bin/bash ]; then exec /bin/bash -l; else exec /bin/sh -l; fi";

struct sbx_tty_session {
	struct local_inst *li;
	int master, sock, wake[2]; /* wake: tty_close interrupts the thread's poll */
	struct sbx_tty_sink sink;
	pthread_t thread;
};

/* Copies output until the shell's EXIT (then drains) or a close. */
static void *tty_main(void *arg)
{
	struct sbx_tty_session *s = arg;
	struct sbx_error err = SBX_ERROR_INIT;
	struct lcl_reply r;
	size_t got = 0;
	int status = 0;
	bool exited = false, eof = false;
	char buf[16384];

	for (;;) {
		struct pollfd p[3] = {{eof ? -1 : s->master, POLLIN, 0},
				      {exited ? -1 : s->sock, POLLIN, 0},
				      {s->wake[0], POLLIN, 0}};
		int n = poll(p, 3, exited ? TTY_DRAIN_QUIET_MS : -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (p[2].revents)
			return NULL; /* tty_close: no sink call after this */
		if (n == 0 || (exited && eof))
			break; /* drained after the exit */
		if (p[0].revents) {
			ssize_t k = read(s->master, buf, sizeof(buf));
			if (k > 0)
				s->sink.output(s->sink.ctx, buf, (size_t)k);
			else if (k == 0 || (errno != EINTR && errno != EAGAIN))
				eof = true; /* EIO: every holder of the slave is gone */
		}
		if (!p[1].revents)
			continue;
		ssize_t k = read(s->sock, (char *)&r + got, sizeof(r) - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			status =
			    sbx_error_set(&err, EIO, 0, "sandbox %s: init hung up on the terminal",
					  s->li->base.id);
			break;
		}
		if ((got += (size_t)k) < sizeof(r))
			continue;
		got = 0;
		if (r.magic != LCL_MAGIC) {
			status =
			    sbx_error_set(&err, EPROTO, 0, "sandbox %s: bad reply", s->li->base.id);
			break;
		}
		if (r.kind == LCL_R_ERROR) {
			status = sbx_error_set(&err, r.err, 0, "%s", r.msg);
			break;
		}
		if (r.kind == LCL_R_EXIT) {
			status = r.status;
			exited = true;
		}
	}
	s->sink.ended(s->sink.ctx, status, status < 0 ? &err : NULL);
	return NULL;
}

static void set_size(int fd, unsigned cols, unsigned rows)
{
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
	ioctl(fd, TIOCSWINSZ, &ws);
}

int lcl_tty_open(struct sbx_instance *inst, const struct sbx_tty_req *req,
		 const struct sbx_tty_sink *sink, struct sbx_tty_session **out,
		 struct sbx_error *err)
{
	struct local_inst *li = lcl_inst(inst);
	struct sbx_run_req run = {.shell = tty_shell, .cwd = req->cwd, .envs = req->envs};
	struct sbx_tty_session *s = sbx_xcalloc(1, sizeof(*s));
	int slave = -1, devnull = -1, e;
	char name[64];

	s->li = li;
	s->sink = *sink;
	s->sock = s->wake[0] = s->wake[1] = -1;
	if (lcl_cg_frozen(&li->cg) > 0 || faccessat(li->dirfd, "paused", F_OK, 0) == 0) {
		e = sbx_error_set(err, EBUSY, 0, "sandbox %s is paused", li->base.id);
		goto fail;
	}
	if ((s->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 || grantpt(s->master) ||
	    unlockpt(s->master) || ptsname_r(s->master, name, sizeof(name)) ||
	    (slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 ||
	    (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0 || pipe2(s->wake, O_CLOEXEC)) {
		e = sbx_error_set(err, errno, 0, "making a pseudo terminal: %s", strerror(errno));
		goto fail;
	}
	set_size(s->master, req->cols, req->rows);
	if ((s->sock = lcl_run_connect(li, err)) < 0) {
		e = s->sock;
		goto fail;
	}
	int fds[LCL_RUN_NFDS] = {slave, slave, slave, devnull, devnull};
	if ((e = lcl_run_send(li, &run, s->sock, fds, err)) < 0)
		goto fail;
	/* Only the shell may hold the slave: its exit then reads as EIO here. */
	close(slave);
	close(devnull);
	slave = devnull = -1;
	fcntl(s->master, F_SETFL, O_NONBLOCK);
	if (pthread_create(&s->thread, NULL, tty_main, s)) {
		e = sbx_error_set(err, EAGAIN, 0, "cannot start a terminal thread");
		goto fail;
	}
	*out = s;
	return 0;
fail:
	if (slave >= 0)
		close(slave);
	if (devnull >= 0)
		close(devnull);
	int all[] = {s->master, s->sock, s->wake[0], s->wake[1]};
	for (size_t i = 0; i < 4; i++)
		if (all[i] >= 0)
			close(all[i]);
	free(s);
	return e;
}

int lcl_tty_write(struct sbx_tty_session *s, const char *data, size_t len, struct sbx_error *err)
{
	while (len) {
		ssize_t n = write(s->master, data, len);
		if (n > 0) {
			data += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd p = {s->master, POLLOUT, 0};
			if (poll(&p, 1, TTY_WRITE_WAIT_MS) == 0)
				return sbx_error_set(err, ETIMEDOUT, 0,
						     "the terminal took no input for %d ms",
						     TTY_WRITE_WAIT_MS);
			continue;
		}
		return sbx_error_set(err, EIO, 0, "the shell has ended");
	}
	return 0;
}

int lcl_tty_resize(struct sbx_tty_session *s, unsigned cols, unsigned rows, struct sbx_error *err)
{
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
	if (ioctl(s->master, TIOCSWINSZ, &ws) < 0)
		return sbx_error_set(err, errno, 0, "resizing the terminal: %s", strerror(errno));
	return 0;
}

void lcl_tty_close(struct sbx_tty_session *s)
{
	if (!s)
		return;
	if (write(s->wake[1], "x", 1) < 0) {
		/* a pipe with room for one byte cannot fail; the join would hang if it did */
	}
	pthread_join(s->thread, NULL);
	/* The master first: the hang-up sends SIGHUP to the shell and its jobs. */
	close(s->master);
	/* Then init: hanging up before EXIT kills what is left of the run. */
	close(s->sock);
	close(s->wake[0]);
	close(s->wake[1]);
	free(s);
}
