/* tty — terminal sessions as files (see tty.h). */
#include "tty.h"
#include "ctl.h"
#include "base/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/fsutil.h"
#include "ctlfiles.h"
#include "run.h"
#include "writeback.h"

/*
 * Terminal output held for its reader: past this the output waits (the
 * provider's thread stops reading it, and the shell blocks on its
 * terminal, as on a real one) until the reader catches up or the session
 * is closed. Until 2026-12-05 the oldest output was dropped instead.
 */
#define SBX_TTY_MAX_BUFFER (4u << 20)
/* Largest terminal accepted by `size`. */
#define SBX_TTY_MAX_DIM 10000

struct sbx_tty {
	struct sbx_tty *next;	 /* (table lock) */
	struct sbx_lease *lease; /* holds a reference */
	unsigned n;
	int handles; /* (table lock) opens of its files; the last release ends it */

	pthread_mutex_t lock; /* protects the fields marked (S) */
	pthread_cond_t cond;
	struct sbx_buf out;  /* (S) output not read yet */
	bool started, ended; /* (S) */
	bool closing;	     /* (S) being stopped: output no longer waits for the reader */
	int status;	     /* (S) exit status, or -errno when lost */
	char why[520];	     /* (S) the reason it was lost */
	unsigned cols, rows; /* (S) */
	char term[64];	     /* (S) TERM for the shell */
	char *cwd;	     /* (S) NULL: the lease's default */

	/* Serialises the provider calls on sess, so close never races a write. */
	pthread_mutex_t io;
	struct sbx_tty_session *sess; /* (io) NULL before the start and after close */
	bool in_use;		      /* (io) sbx_lease_use() held for the session */
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sbx_tty *table;  /* (table_lock) every session of every lease */
static unsigned long next_num; /* (table_lock) session numbers are unique in the mount */

static bool (*abandon_check)(void);

void sbx_tty_set_abandon_check(bool (*fn)(void))
{
	abandon_check = fn;
}

unsigned long sbx_tty_live(struct sbx_lease *l)
{
	unsigned long n = 0;
	pthread_mutex_lock(&table_lock);
	for (struct sbx_tty *t = table; t && !n; t = t->next) {
		if (t->lease != l)
			continue;
		pthread_mutex_lock(&t->lock);
		if (t->started && !t->ended)
			n = t->n;
		pthread_mutex_unlock(&t->lock);
	}
	pthread_mutex_unlock(&table_lock);
	return n;
}

bool sbx_tty_node(enum sbx_node_kind k)
{
	return k == SBX_N_TTY || k == SBX_N_TTY_CLONE || k == SBX_N_TTY_SESSION ||
	       k == SBX_N_TTY_DATA || k == SBX_N_TTY_CTL || k == SBX_N_TTY_STATUS;
}

/* Finds session n of l and, with hold, counts one more handle on it. */
static struct sbx_tty *find(struct sbx_lease *l, const char *n, bool hold)
{
	char *end;
	unsigned long num = strtoul(n, &end, 10);
	struct sbx_tty *t;
	if (!*n || *end)
		return NULL;
	pthread_mutex_lock(&table_lock);
	for (t = table; t; t = t->next)
		if (t->lease == l && t->n == num)
			break;
	if (t && hold)
		t->handles++;
	pthread_mutex_unlock(&table_lock);
	return t;
}

int sbx_tty_exists(struct sbx_lease *l, const char *n)
{
	return find(l, n, false) ? 0 : -ENOENT;
}

int sbx_tty_readdir(struct sbx_lease *l, const struct sbx_node *n, sbx_fs_fill_fn fill, void *ctx)
{
	if (n->kind == SBX_N_TTY_SESSION) {
		if (!find(l, n->sub, false))
			return -ENOENT;
		fill(ctx, "data", NULL);
		fill(ctx, "ctl", NULL);
		fill(ctx, "status", NULL);
		return 0;
	}
	fill(ctx, "clone", NULL);
	/* Names are collected first: fill must not run under the table lock. */
	unsigned nums[256];
	size_t k = 0;
	pthread_mutex_lock(&table_lock);
	for (struct sbx_tty *t = table; t && k < 256; t = t->next)
		if (t->lease == l)
			nums[k++] = t->n;
	pthread_mutex_unlock(&table_lock);
	for (size_t i = 0; i < k; i++) {
		char name[16];
		snprintf(name, sizeof(name), "%u", nums[i]);
		fill(ctx, name, NULL);
	}
	return 0;
}

static int not_supported(struct sbx_lease *l)
{
	return sbx_refuse(l->mount, l, ENOTSUP, "tty", "%s: terminal sessions are not supported",
			  l->prov->name);
}

/* ---- the provider's side ------------------------------------------------ */

static void sink_output(void *ctx, const char *data, size_t len)
{
	struct sbx_tty *t = ctx;
	pthread_mutex_lock(&t->lock);
	while (t->out.len >= SBX_TTY_MAX_BUFFER && !t->closing)
		pthread_cond_wait(&t->cond, &t->lock);
	if (!t->closing)
		sbx_buf_add(&t->out, data, len);
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

static void sink_ended(void *ctx, int status, const struct sbx_error *err)
{
	struct sbx_tty *t = ctx;
	pthread_mutex_lock(&t->lock);
	if (!t->ended) {
		t->ended = true;
		t->status = status;
		if (status < 0)
			snprintf(t->why, sizeof(t->why), "%s",
				 err && err->msg[0] ? err->msg : strerror(-status));
	}
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

/* Starts the shell (first data open). Caller holds t->io. */
static int start_locked(struct sbx_tty *t)
{
	struct sbx_lease *l = t->lease;
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_instance *inst;
	struct sbx_tty_sink sink = {t, sink_output, sink_ended};
	char **lines = sbx_run_envs(l);
	size_t n = 0;
	int rc;

	while (lines[n])
		n++;
	const char **envs = sbx_xcalloc(n + 2, sizeof(char *));
	char termvar[80];
	pthread_mutex_lock(&t->lock);
	snprintf(termvar, sizeof(termvar), "TERM=%s", t->term);
	char *cwd = t->cwd ? sbx_xstrdup(t->cwd) : NULL; /* a ctl write may replace it meanwhile */
	struct sbx_tty_req req = {.cwd = cwd, .cols = t->cols, .rows = t->rows};
	pthread_mutex_unlock(&t->lock);
	envs[0] = termvar;
	memcpy(envs + 1, lines, n * sizeof(char *));
	req.envs = envs;
	rc = sbx_lease_use(l, &inst, &err);
	if (!rc) {
		/* Queued uploads and chmod/utimens first, as before a run: the shell sees them. */
		sbx_fs_drain(l, &err); /* a failure is in `error` already: the shell starts */
		if (l->prov->sync)
			l->prov->sync(inst, &err);
		sbx_error_clear(&err);
		rc = l->prov->tty_open(inst, &req, &sink, &t->sess, &err);
		if (rc)
			sbx_lease_unuse(l);
		else
			t->in_use = true;
	}
	free(envs);
	free(lines);
	free(cwd);
	if (rc) {
		sbx_lease_error(l, "tty", &err);
		return rc;
	}
	pthread_mutex_lock(&t->lock);
	t->started = true;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/* Ends the provider's session (the shell killed if it still runs). Caller holds t->io. */
static void stop_locked(struct sbx_tty *t, int status)
{
	pthread_mutex_lock(&t->lock);
	t->closing = true; /* a provider thread waiting to deliver output lets go */
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	if (t->sess) {
		t->lease->prov->tty_close(t->sess);
		t->sess = NULL;
	}
	if (t->in_use) {
		sbx_lease_unuse(t->lease);
		t->in_use = false;
	}
	sink_ended(t, status, NULL);
}

/* ---- opens --------------------------------------------------------------- */

static struct sbx_tty *tty_new(struct sbx_lease *l)
{
	struct sbx_tty *t = sbx_xcalloc(1, sizeof(*t));
	pthread_mutex_lock(&l->mount->lock);
	l->refs++; /* as a run does: the lease object, even if removed meanwhile */
	pthread_mutex_unlock(&l->mount->lock);
	t->lease = l;
	t->handles = 1;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	pthread_mutex_init(&t->io, NULL);
	sbx_buf_init(&t->out);
	t->cols = 80;
	t->rows = 24;
	snprintf(t->term, sizeof(t->term), "xterm-256color");
	pthread_mutex_lock(&table_lock);
	t->n = (unsigned)++next_num;
	t->next = table;
	table = t;
	pthread_mutex_unlock(&table_lock);
	return t;
}

static void status_text(struct sbx_tty *t, struct sbx_buf *b)
{
	pthread_mutex_lock(&t->lock);
	if (t->ended && t->status < 0)
		sbx_buf_addf(b, "lost %s\n", t->why);
	else if (t->ended)
		sbx_buf_addf(b, "exited %d\n", t->status);
	else
		sbx_buf_adds(b, t->started ? "running\n" : "new\n");
	pthread_mutex_unlock(&t->lock);
}

int sbx_tty_open(struct sbx_open *o, const struct sbx_node *n)
{
	struct sbx_lease *l = o->lease;
	int acc = o->flags & O_ACCMODE, rc = 0;
	struct sbx_tty *t;

	if (n->kind == SBX_N_TTY || n->kind == SBX_N_TTY_SESSION)
		return -EISDIR;
	if (!l->prov->tty_open)
		return not_supported(l);
	if (n->kind == SBX_N_TTY_CLONE) {
		if (acc != O_RDONLY)
			return sbx_refuse(l->mount, l, EACCES, "tty", "tty/clone is read-only: %s",
					  "read it for a session");
		o->tty = tty_new(l);
		sbx_buf_addf(&o->data, "%u\n", o->tty->n);
		return 0;
	}
	if ((n->kind == SBX_N_TTY_STATUS && acc != O_RDONLY) ||
	    (n->kind == SBX_N_TTY_CTL && acc == O_RDONLY))
		return sbx_refuse(l->mount, l, EACCES, "tty", "tty/N/%s",
				  n->kind == SBX_N_TTY_CTL ? "ctl is write-only"
							   : "status is read-only");
	if (!(t = find(l, n->sub, true)))
		return -ENOENT;
	o->tty = t;
	if (n->kind == SBX_N_TTY_STATUS)
		status_text(t, &o->data);
	if (n->kind == SBX_N_TTY_DATA) {
		pthread_mutex_lock(&t->io);
		pthread_mutex_lock(&t->lock);
		bool fresh = !t->started && !t->ended;
		pthread_mutex_unlock(&t->lock);
		if (fresh)
			rc = start_locked(t);
		pthread_mutex_unlock(&t->io);
	}
	return rc; /* on failure the caller's release drops the handle */
}

/* ---- data ---------------------------------------------------------------- */

static void wait_ms_locked(struct sbx_tty *t, long ms)
{
	struct timespec dl;
	sbx_deadline_in(ms, &dl);
	sbx_cond_wait_until(&t->cond, &t->lock, &dl);
}

ssize_t sbx_tty_read(struct sbx_open *o, char *buf, size_t size, off_t off)
{
	struct sbx_tty *t = o->tty;
	ssize_t n;
	if (o->kind != SBX_N_TTY_DATA) {
		if ((size_t)off >= o->data.len)
			return 0;
		n = (ssize_t)(o->data.len - (size_t)off);
		n = (size_t)n > size ? (ssize_t)size : n;
		memcpy(buf, o->data.buf + off, (size_t)n);
		return n;
	}
	pthread_mutex_lock(&t->lock);
	while (!t->out.len && !t->ended) {
		if (!abandon_check) {
			pthread_cond_wait(&t->cond, &t->lock);
			continue;
		}
		wait_ms_locked(t, SBX_CANCEL_POLL_MS);
		if (!t->out.len && !t->ended && abandon_check()) {
			pthread_mutex_unlock(&t->lock);
			return -EINTR;
		}
	}
	if (t->out.len) {
		n = (ssize_t)(t->out.len < size ? t->out.len : size);
		memcpy(buf, t->out.buf, (size_t)n);
		sbx_buf_consume(&t->out, (size_t)n);
		pthread_cond_broadcast(&t->cond); /* output waiting for room */
	} else {
		n = t->status < 0 ? t->status : 0;
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* ---- ctl ----------------------------------------------------------------- */

/*
 * One command of tty/N/ctl. Its words are also in ctl.c's table
 * (SBX_CTL_FILE_TTY), which decides a line written without its newline:
 * a word added here must be added there.
 */
static int ctl_line(void *ctx, const char *line)
{
	struct sbx_tty *t = ctx;
	struct sbx_lease *l = t->lease;
	struct sbx_error err = SBX_ERROR_INIT;
	char word[16] = "", arg[4096] = "", extra;
	unsigned cols, rows;
	int rc = 0;

	if (sscanf(line, "%15s", word) != 1)
		return 0; /* a blank line */
	if (!strcmp(word, "size")) {
		if (sscanf(line, "size %u %u %c", &cols, &rows, &extra) != 2 || !cols || !rows ||
		    cols > SBX_TTY_MAX_DIM || rows > SBX_TTY_MAX_DIM)
			return sbx_refuse(l->mount, l, EINVAL, "tty", "tty ctl: %s",
					  "size wants COLS ROWS (1 to 10000)");
		pthread_mutex_lock(&t->io);
		pthread_mutex_lock(&t->lock);
		t->cols = cols;
		t->rows = rows;
		pthread_mutex_unlock(&t->lock);
		if (t->sess && (rc = l->prov->tty_resize(t->sess, cols, rows, &err)))
			sbx_lease_error(l, "tty", &err);
		pthread_mutex_unlock(&t->io);
		return rc;
	}
	if (!strcmp(word, "term") || !strcmp(word, "cwd")) {
		bool is_term = word[0] == 't';
		if (is_term ? sscanf(line, "term %63s %c", arg, &extra) != 1
			    : sscanf(line, "cwd %4095[^\n]", arg) != 1 || arg[0] != '/')
			return sbx_refuse(l->mount, l, EINVAL, "tty", "tty ctl: %s",
					  is_term ? "term wants one NAME"
						  : "cwd wants an absolute PATH");
		/* Refused here, not at the data file's open, where the start failed. */
		if (!sbx_provider_carries(l->prov, arg))
			return sbx_refuse(l->mount, l, EILSEQ, "tty",
					  "tty ctl: %s is not UTF-8, which %s carries only",
					  is_term ? "term" : "cwd", l->prov->name);
		pthread_mutex_lock(&t->lock);
		if (t->started || t->ended)
			rc = sbx_refuse(l->mount, l, EBUSY, "tty",
					"tty ctl: %s is set before the shell starts",
					is_term ? "term" : "cwd");
		else if (is_term) {
			size_t n = strnlen(arg, sizeof(t->term) - 1); /* %63s bounded it */
			memcpy(t->term, arg, n);
			t->term[n] = '\0';
		} else {
			free(t->cwd);
			t->cwd = sbx_xstrdup(arg);
		}
		pthread_mutex_unlock(&t->lock);
		return rc;
	}
	if (!strcmp(word, "close")) {
		pthread_mutex_lock(&t->io);
		stop_locked(t, 128 + 1 /* SIGHUP, as a terminal hang-up */);
		pthread_mutex_unlock(&t->io);
		return 0;
	}
	return sbx_refuse(l->mount, l, EINVAL, "tty",
			  "tty ctl: unknown command '%s' (size COLS ROWS, term NAME, "
			  "cwd PATH, close)",
			  word);
}

ssize_t sbx_tty_write(struct sbx_open *o, const char *buf, size_t size)
{
	struct sbx_tty *t = o->tty;
	struct sbx_error err = SBX_ERROR_INIT;
	int rc = 0;

	if (o->kind == SBX_N_TTY_DATA) {
		pthread_mutex_lock(&t->io);
		if (!t->sess)
			rc = sbx_refuse(t->lease->mount, t->lease, EIO, "tty",
					"tty %s: the shell has ended", "data");
		else if ((rc = t->lease->prov->tty_write(t->sess, buf, size, &err)))
			sbx_lease_error(t->lease, "tty", &err);
		pthread_mutex_unlock(&t->io);
		return rc ? rc : (ssize_t)size;
	}
	/* ctl: complete lines are acted on as they come (as state's words, ctlfiles.c). */
	sbx_buf_add(&o->data, buf, size);
	rc = sbx_ctl_consume_lines(&o->data, ctl_line, t);
	if (!rc && o->data.len > 4200)
		rc = sbx_refuse(t->lease->mount, t->lease, EINVAL, "tty", "tty ctl: %s",
				"line too long");
	if (!rc) /* no newline yet: `close`, or no command begins so */
		rc = sbx_ctl_partial_line(&o->data, SBX_CTL_FILE_TTY, ctl_line, t);
	if (rc)
		sbx_buf_reset(&o->data);
	return rc ? rc : (ssize_t)size;
}

int sbx_tty_flush(struct sbx_open *o)
{
	/* A last line without its newline (`printf close > ctl`). */
	if (o->kind != SBX_N_TTY_CTL || !o->data.len)
		return 0;
	sbx_buf_addch(&o->data, '\0');
	int rc = ctl_line(o->tty, o->data.buf);
	sbx_buf_reset(&o->data);
	return rc;
}

void sbx_tty_release(struct sbx_open *o)
{
	struct sbx_tty *t = o->tty, **pp;
	bool last;
	if (!t)
		return;
	o->tty = NULL;
	pthread_mutex_lock(&table_lock);
	last = --t->handles == 0;
	if (last)
		for (pp = &table; *pp; pp = &(*pp)->next)
			if (*pp == t) {
				*pp = t->next;
				break;
			}
	pthread_mutex_unlock(&table_lock);
	if (!last)
		return;
	pthread_mutex_lock(&t->io);
	stop_locked(t, 128 + 1);
	pthread_mutex_unlock(&t->io);
	sbx_lease_put(t->lease);
	sbx_buf_release(&t->out);
	free(t->cwd);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->io);
	free(t);
}
