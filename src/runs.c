/* runs — a lease's runs as runs/N/ directories, and which run a caller sees (see runs.h). */
#include "runs.h"
#include "ctl.h"
#include "runs_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/xalloc.h"

/* The state dir must have this much room for a run to start (else ENOSPC). */
#define SBX_RUNS_MIN_FREE (1ull << 20)

/* The recent runs of one lease: run N sits at N % SBX_RUNS_KEEP (a reference). */
struct sbx_runs {
	pthread_mutex_t lock;
	unsigned long last;		       /* (lock) highest N handed out */
	struct sbx_run *recent[SBX_RUNS_KEEP]; /* (lock) */
};

static pid_t (*caller_pid)(void);

void sbx_runs_set_caller(pid_t (*fn)(void))
{
	caller_pid = fn;
}

/* The process (Tgid) a thread id belongs to; 0 if unknown. */
static pid_t proc_tgid(pid_t tid)
{
	char path[64], line[256];
	pid_t tgid = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Tgid:", 5)) {
			tgid = (pid_t)atoi(line + 5);
			break;
		}
	fclose(f);
	return tgid;
}

/* PPid and start time of pid from /proc/PID/stat; 0 or -1. */
static int proc_stat(pid_t pid, pid_t *ppid, unsigned long long *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: fields follow the last ')' */
	char *p = strrchr(buf, ')');
	int ppid_i;
	if (!p || sscanf(p + 1,
			 " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			 "%*d %*d %*d %llu",
			 &ppid_i, start) != 2)
		return -1;
	*ppid = (pid_t)ppid_i;
	return 0;
}

void sbx_runs_caller(struct sbx_run_owner *o)
{
	pid_t pid = caller_pid ? proc_tgid(caller_pid()) : 0, ppid;
	o->len = 0;
	while (pid > 0 && o->len < SBX_RUN_CHAIN && !proc_stat(pid, &ppid, &o->start[o->len])) {
		o->chain[o->len++] = pid;
		if (pid == 1)
			break;
		pid = ppid;
	}
}

char *sbx_runs_path(struct sbx_lease *l, unsigned long n, const char *file)
{
	struct sbx_buf b = SBX_BUF_INIT;
	sbx_buf_addf(&b, "%s/runs", l->dir);
	if (n)
		sbx_buf_addf(&b, "/%lu", n);
	if (n && file)
		sbx_buf_addf(&b, "/%s", file);
	return sbx_buf_detach(&b, NULL);
}

static int cmp_ulong(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
	return x < y ? -1 : x > y;
}

size_t sbx_runs_list(struct sbx_lease *l, unsigned long **out)
{
	char *p = sbx_runs_path(l, 0, NULL);
	DIR *d = opendir(p);
	size_t n = 0, cap = 0;
	*out = NULL;
	free(p);
	if (!d)
		return 0;
	for (struct dirent *de; (de = readdir(d));) {
		char *end;
		unsigned long v = strtoul(de->d_name, &end, 10);
		if (!v || *end || de->d_name[0] == '0')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			*out = sbx_xreallocarray(*out, cap, sizeof(**out));
		}
		(*out)[n++] = v;
	}
	closedir(d);
	if (n)
		qsort(*out, n, sizeof(**out), cmp_ulong);
	return n;
}

/* The lease's table, made at first use (N continues from what is on disk). */
static struct sbx_runs *table(struct sbx_lease *l)
{
	pthread_mutex_lock(&l->lock);
	struct sbx_runs *t = l->runtab;
	pthread_mutex_unlock(&l->lock);
	if (t)
		return t;
	unsigned long *ns;
	size_t n = sbx_runs_list(l, &ns);
	t = sbx_xcalloc(1, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	t->last = n ? ns[n - 1] : 0;
	free(ns);
	pthread_mutex_lock(&l->lock);
	if (l->runtab) { /* another thread made it first */
		pthread_mutex_destroy(&t->lock);
		free(t);
	} else {
		l->runtab = t;
		l->runtab_free = sbx_runs_free;
	}
	t = l->runtab;
	pthread_mutex_unlock(&l->lock);
	return t;
}

void sbx_runs_free(struct sbx_lease *l)
{
	struct sbx_runs *t = l->runtab;
	if (!t)
		return;
	for (int i = 0; i < SBX_RUNS_KEEP; i++)
		sbx_run_put(t->recent[i]);
	pthread_mutex_destroy(&t->lock);
	free(t);
	l->runtab = NULL;
}

unsigned long sbx_runs_add(struct sbx_lease *l, struct sbx_run *r)
{
	struct sbx_runs *t = table(l);
	pthread_mutex_lock(&t->lock);
	unsigned long n = ++t->last;
	struct sbx_run **slot = &t->recent[n % SBX_RUNS_KEEP], *old = *slot;
	/* Set before the run is in the table: finders read them under t->lock only. */
	r->n = n;
	r->dir = sbx_runs_path(l, n, NULL);
	*slot = sbx_run_get(r);
	pthread_mutex_unlock(&t->lock);
	sbx_run_put(old);
	return n;
}

unsigned long sbx_runs_in_flight(struct sbx_lease *l)
{
	struct sbx_runs *t = table(l);
	unsigned long n = 0;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < SBX_RUNS_KEEP; i++) {
		struct sbx_run *r = t->recent[i];
		if (!r)
			continue;
		pthread_mutex_lock(&r->lock);
		if (!r->done && (!n || r->n < n))
			n = r->n;
		pthread_mutex_unlock(&r->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

struct sbx_run *sbx_runs_find(struct sbx_lease *l, unsigned long n)
{
	struct sbx_runs *t = table(l);
	struct sbx_run *r = NULL;
	pthread_mutex_lock(&t->lock);
	struct sbx_run *c = t->recent[n % SBX_RUNS_KEEP];
	if (c && c->n == n)
		r = sbx_run_get(c);
	pthread_mutex_unlock(&t->lock);
	return r;
}

/* Index in the reader's chain of its nearest ancestor that is in w; INT_MAX if none. */
static int nearest_common(const struct sbx_run_owner *me, const struct sbx_run_owner *w)
{
	for (int i = 0; i < me->len; i++)
		for (int j = 0; j < w->len; j++)
			if (me->chain[i] == w->chain[j] && me->start[i] == w->start[j])
				return i;
	return INT_MAX;
}

unsigned long sbx_runs_pick(struct sbx_lease *l)
{
	struct sbx_runs *t = table(l);
	struct sbx_run_owner me;
	unsigned long best = 0;
	int best_score = INT_MAX;
	sbx_runs_caller(&me);
	pthread_mutex_lock(&t->lock);
	for (unsigned long n = t->last; n > 0 && n + SBX_RUNS_KEEP > t->last; n--) {
		struct sbx_run *r = t->recent[n % SBX_RUNS_KEEP];
		if (!r || r->n != n)
			continue;
		int s = nearest_common(&me, &r->owner);
		if (s < best_score) {
			best_score = s;
			best = n;
		}
	}
	if (!best)
		best = t->last;
	pthread_mutex_unlock(&t->lock);
	return best;
}

/* Bytes of the files of runs/N. */
static unsigned long long run_bytes(struct sbx_lease *l, unsigned long n)
{
	static const char *const files[] = {"cmd", "stdout", "stderr", "result"};
	unsigned long long sum = 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++) {
		struct stat st;
		char *p = sbx_runs_path(l, n, files[i]);
		if (!stat(p, &st))
			sum += (unsigned long long)st.st_size;
		free(p);
	}
	return sum;
}

static bool run_going(struct sbx_lease *l, unsigned long n)
{
	struct sbx_run *r = sbx_runs_find(l, n);
	bool going = false;
	if (r) {
		pthread_mutex_lock(&r->lock);
		going = !r->done;
		pthread_mutex_unlock(&r->lock);
		sbx_run_put(r);
	}
	return going;
}

void sbx_runs_prune(struct sbx_lease *l)
{
	unsigned long *ns;
	size_t n = sbx_runs_list(l, &ns);
	unsigned long long total = 0;
	for (size_t i = n; i-- > 0;) {
		bool newest = i == n - 1;
		if (!newest)
			total += run_bytes(l, ns[i]);
		bool old = n - i > SBX_RUNS_KEEP;
		bool big = total > SBX_RUNS_MAX_BYTES;
		if (newest || !(old || big) || run_going(l, ns[i]))
			continue;
		char *p = sbx_runs_path(l, ns[i], NULL);
		sbx_rm_rf(p);
		free(p);
	}
	free(ns);
}

int sbx_runs_room(int fd, unsigned long long kept, size_t more, char *why, size_t why_size)
{
	unsigned long long avail, reserve;
	if (kept + more > SBX_RUNS_MAX_BYTES) {
		snprintf(why, why_size, "its output passed %llu MiB, the most one run keeps",
			 SBX_RUNS_MAX_BYTES >> 20);
		return -EFBIG;
	}
	if (!sbx_disk_reserve_check(fd, kept, more, &avail, &reserve))
		return 0;
	snprintf(why, why_size,
		 "the state dir's disk is down to %llu MiB free, and a run's output leaves "
		 "%llu MiB (5 %% of it, at most 1 GiB)",
		 avail, reserve);
	return -ENOSPC;
}

int sbx_runs_precheck(struct sbx_lease *l, struct sbx_error *err)
{
	int rc = 0;
	pthread_mutex_lock(&l->lock);
	switch (l->state) {
	case SBX_LS_KILLED:
		rc = sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "lease %s was killed", l->name);
		break;
	case SBX_LS_RECLAIMED:
		rc =
		    sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND,
				  "lease %s was reclaimed (its sandbox no longer exists)", l->name);
		break;
	case SBX_LS_ERROR:
		rc = sbx_error_set(err, ENOTCONN, SBX_E_CONNECTION_FAILED,
				   "lease %s: its provider is unreachable", l->name);
		break;
	case SBX_LS_PAUSED:
	case SBX_LS_PAUSING:
		if (!l->spec.auto_resume)
			rc = sbx_error_set(err, EAGAIN, SBX_E_EXECUTION_FAILED,
					   "lease %s is paused and autoResume is off: write "
					   "\"resume\" to its state file",
					   l->name);
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&l->lock);
	if (rc)
		return rc;
	char *p = sbx_runs_path(l, 0, NULL);
	struct statvfs vfs;
	rc = sbx_mkdir_p(p, 0700);
	if (!rc && access(p, W_OK))
		rc = -errno;
	if (!rc && !statvfs(p, &vfs) && !(vfs.f_flag & ST_RDONLY) &&
	    (unsigned long long)vfs.f_bavail * vfs.f_frsize < SBX_RUNS_MIN_FREE)
		rc = -ENOSPC;
	if (!rc && !statvfs(p, &vfs) && (vfs.f_flag & ST_RDONLY))
		rc = -EROFS;
	if (rc) {
		sbx_error_set(err, -rc, SBX_E_INTERNAL,
			      "lease %s: the state dir cannot keep a run's output: %s: %s", l->name,
			      p, strerror(-rc));
		/* The lease's error file is on that same disk: the root's is memory. */
		sbx_mount_error(l->mount, "exec", err);
	}
	free(p);
	return rc;
}

int sbx_runs_stat(struct sbx_lease *l, unsigned long n, const char *file, struct stat *st)
{
	struct stat fst;
	char *p = sbx_runs_path(l, n, file);
	int rc = n && !stat(p, &fst) ? 0 : -ENOENT;
	if (!rc) {
		st->st_size = S_ISREG(fst.st_mode) ? fst.st_size : 0;
		st->st_mtim = st->st_ctim = fst.st_mtim;
	} else if (n && file) {
		/* result of a run still going: the file comes at the end */
		char *d = sbx_runs_path(l, n, NULL);
		rc = stat(d, &fst) ? -ENOENT : 0;
		free(d);
	}
	free(p);
	return rc;
}

/* ---- readers ------------------------------------------------------------ */

enum which { W_STDOUT, W_STDERR, W_RESULT, W_OTHER };

struct sbx_run_reader {
	int fd; /* -1 until the file exists (a run going: result, or files not made yet) */
	char *path;
	struct sbx_run *run; /* while the run goes (a reference) */
	enum which which;
	bool fail_at_end;
	bool owns; /* the read-write open that wrote the run: its death stops it */
	int fail;  /* the run's -errno once it ended */
};

static enum which which_of(const char *file)
{
	return !strcmp(file, "stdout")	 ? W_STDOUT
	       : !strcmp(file, "stderr") ? W_STDERR
	       : !strcmp(file, "result") ? W_RESULT
					 : W_OTHER;
}

/* Takes over r (a reference, may be NULL). */
static int reader_new(char *path, struct sbx_run *r, enum which w, bool fail_at_end,
		      struct sbx_run_reader **out)
{
	struct sbx_run_reader *rd = sbx_xcalloc(1, sizeof(*rd));
	rd->path = path;
	rd->which = w;
	rd->fail_at_end = fail_at_end;
	rd->fd = -1;
	if (r && w == W_OTHER) { /* cmd is whole from the start */
		sbx_run_put(r);
		r = NULL;
	}
	if (r) {
		pthread_mutex_lock(&r->lock);
		if (r->done) {
			rd->fail = r->rc;
			pthread_mutex_unlock(&r->lock);
			sbx_run_put(r);
			r = NULL;
		} else {
			pthread_mutex_unlock(&r->lock);
		}
	}
	rd->run = r;
	/* A run going makes its files as it starts (result at its end): the
	 * first read opens what is not there yet. */
	if (!(r && w == W_RESULT)) {
		rd->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (rd->fd < 0 && !(r && errno == ENOENT)) {
			int e = errno;
			sbx_run_reader_free(rd);
			return -e;
		}
	}
	*out = rd;
	return 0;
}

int sbx_run_reader_open(struct sbx_lease *l, unsigned long n, const char *file, bool fail_at_end,
			struct sbx_run_reader **out)
{
	if (!n)
		return -ENOENT;
	return reader_new(sbx_runs_path(l, n, file), sbx_runs_find(l, n), which_of(file),
			  fail_at_end, out);
}

int sbx_run_reader_of(struct sbx_run *r, struct sbx_run_reader **out)
{
	int rc = reader_new(sbx_runs_path(r->lease, r->n, "stdout"), sbx_run_get(r), W_STDOUT, true,
			    out);
	if (!rc)
		(*out)->owns = true;
	return rc;
}

void sbx_run_reader_free(struct sbx_run_reader *rd)
{
	if (!rd)
		return;
	if (rd->fd >= 0)
		close(rd->fd);
	sbx_run_put(rd->run);
	free(rd->path);
	free(rd);
}

struct want {
	enum which which;
	off_t off;
};

static bool have_bytes(struct sbx_run *r, void *ctx)
{
	struct want *w = ctx;
	size_t len = w->which == W_STDOUT ? r->out_len : w->which == W_STDERR ? r->err_len : 0;
	return w->which != W_RESULT && (size_t)w->off < len;
}

ssize_t sbx_run_reader_read(struct sbx_run_reader *rd, char *buf, size_t size, off_t off)
{
	struct sbx_run *r = rd->run;
	if (r) {
		struct want w = {rd->which, off};
		pthread_mutex_lock(&r->lock);
		int rc = sbx_run_wait_locked(r, rd->owns, have_bytes, &w);
		size_t len = rd->which == W_STDERR ? r->err_len : r->out_len;
		bool done = r->done;
		rd->fail = r->rc;
		pthread_mutex_unlock(&r->lock);
		if (rc)
			return rc;
		if (!done) {
			if (size > len - (size_t)off)
				size = len - (size_t)off;
		} else {
			sbx_run_put(r);
			rd->run = NULL;
		}
	}
	if (rd->fd < 0) {
		rd->fd = open(rd->path, O_RDONLY | O_CLOEXEC);
		if (rd->fd < 0)
			return -errno;
	}
	ssize_t n = pread(rd->fd, buf, size, off);
	if (n < 0)
		return -errno;
	if (n == 0 && size && rd->fail_at_end && rd->fail)
		return rd->fail;
	return n;
}

int sbx_runs_ctl(struct sbx_lease *l, unsigned long n, const char *line, struct sbx_error *err)
{
	struct sbx_ctl_cmd cmd;
	int rc = sbx_ctl_parse(SBX_CTL_FILE_RUN, line, &cmd, err);
	if (rc == -ENODATA)
		return 0;
	if (rc) {
		char what[48];
		snprintf(what, sizeof(what), "runs/%lu/ctl", n);
		sbx_error_prefix(err, what);
		return rc;
	}
	struct sbx_run *r = sbx_runs_find(l, n);
	bool going = false;
	if (r) {
		pthread_mutex_lock(&r->lock);
		going = !r->done;
		if (going) {
			atomic_store(&r->killed_by_ctl, true);
			atomic_store(&r->cancel, 1);
		}
		pthread_mutex_unlock(&r->lock);
		sbx_run_put(r);
	}
	if (!going)
		return sbx_error_set(err, ESRCH, SBX_E_EXECUTION_FAILED,
				     "runs/%lu/ctl: kill: the run is not going", n);
	return 0;
}
