/* log — see log.h: targets, timestamps, and header redaction for debug dumps. */
#include "base/log.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>

#include "base/fsutil.h"
#include "base/sysutil.h"
#include "base/xalloc.h"

enum target { TO_STDERR, TO_FILE, TO_SYSLOG, TO_JOURNAL };

static enum target log_target = TO_STDERR;
static int log_fd = 2;
static enum sbx_log_level log_max = SBX_LOG_INFO;
static char log_where[PATH_MAX];
/* TO_FILE: the file log_fd has open, to see it moved away (reopen_if_moved). */
static dev_t log_dev;
static ino_t log_ino;
static atomic_llong log_checked_ms;
static pthread_mutex_t reopen_lock = PTHREAD_MUTEX_INITIALIZER;
/* The errno of the last failed line write, 0 once one goes through again. */
static atomic_int log_failing;
typedef void (*log_failure_hook)(int err, const char *where);
static _Atomic(log_failure_hook) log_failure_fn;

/* xalloc's out-of-memory line, logged where every other line goes. */
static void oom_report(const char *line)
{
	sbx_log(SBX_LOG_ERR, "%s", line);
}

void sbx_log_setup(int use_syslog, enum sbx_log_level max)
{
	sbx_xalloc_set_report(oom_report);
	log_target = use_syslog ? TO_SYSLOG : TO_STDERR;
	log_fd = 2;
	log_max = max;
	if (use_syslog)
		openlog("sbxfs", LOG_PID, LOG_DAEMON);
}

int sbx_log_level_parse(const char *s, enum sbx_log_level *out)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	for (int i = 0; i < 4; i++)
		if (s && !strcmp(s, names[i])) {
			*out = (enum sbx_log_level)i;
			return 0;
		}
	if (s && !strcmp(s, "warning")) {
		*out = SBX_LOG_WARN;
		return 0;
	}
	return -EINVAL;
}

/* $JOURNAL_STREAM is "DEV:INODE" of the journal's stream, when stderr is it. */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(2, &st))
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static bool syslog_reachable(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX, .sun_path = "/dev/log"};
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool ok;
	if (fd < 0)
		return false;
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* How the log file is opened, at the mount and again after a move. */
#define LOG_OPEN_FLAGS (O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY)

static int open_file(const char *path, struct sbx_error *err)
{
	char *abs = sbx_path_absolute(path);
	int fd, rc = 0;
	if (!abs || strlen(abs) >= PATH_MAX) {
		free(abs);
		return sbx_error_set(err, ENAMETOOLONG, SBX_E_INTERNAL,
				     "log file %s: path too long", path);
	}
	fd = open(abs, LOG_OPEN_FLAGS, 0600);
	if (fd < 0) {
		rc = sbx_error_set(err, errno, SBX_E_INTERNAL, "log file %s: %s", abs,
				   strerror(errno));
	} else {
		struct stat st;
		snprintf(log_where, sizeof(log_where), "%s", abs);
		log_fd = fd;
		log_target = TO_FILE;
		if (!fstat(fd, &st)) {
			log_dev = st.st_dev;
			log_ino = st.st_ino;
		}
	}
	free(abs);
	return rc;
}

int sbx_log_open(const char *where, bool daemon, const char *state_dir, enum sbx_log_level max,
		 const char **chosen, struct sbx_error *err)
{
	int rc = 0;
	sbx_xalloc_set_report(oom_report);
	log_max = max;
	log_fd = 2;
	if (where && !*where)
		return sbx_error_set(err, EINVAL, SBX_E_INTERNAL,
				     "log= needs stderr, syslog or a file path");
	if (where && !strcmp(where, "stderr")) {
		log_target = TO_STDERR;
		snprintf(log_where, sizeof(log_where), "stderr");
	} else if (where && !strcmp(where, "syslog")) {
		log_target = TO_SYSLOG;
		snprintf(log_where, sizeof(log_where), "syslog");
	} else if (where) {
		rc = open_file(where, err);
	} else if (stderr_is_journal()) {
		log_target = TO_JOURNAL;
		snprintf(log_where, sizeof(log_where), "journal");
	} else if (!daemon) {
		log_target = TO_STDERR;
		snprintf(log_where, sizeof(log_where), "stderr");
	} else if (syslog_reachable()) {
		log_target = TO_SYSLOG;
		snprintf(log_where, sizeof(log_where), "syslog");
	} else {
		char path[PATH_MAX];
		if (sbx_mkdir_p(state_dir, 0700) ||
		    snprintf(path, sizeof(path), "%s/sbxfs.log", state_dir) >= (int)sizeof(path))
			return sbx_error_set(err, EIO, SBX_E_INTERNAL,
					     "no syslog (/dev/log) and no state dir %s for the log",
					     state_dir);
		rc = open_file(path, err);
	}
	if (rc)
		return rc;
	if (log_target == TO_SYSLOG)
		openlog("sbxfs", LOG_PID, LOG_DAEMON);
	if (chosen)
		*chosen = log_where;
	return 0;
}

enum sbx_log_level sbx_log_level(void)
{
	return log_max;
}

void sbx_log_timestamp(char *buf, size_t size)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

/*
 * A log file moved or removed under us (logrotate's default renames it and
 * expects a new one): at most once a second, the path is checked, and
 * opened anew when it no longer names the file being written. dup3 puts
 * the new file in place atomically, so a concurrent line goes to one or
 * the other, never to a closed descriptor. A path that cannot be opened
 * (its directory gone) leaves the old file in use, and so does one that is
 * now a symbolic link or another user's file or a link to one (whoever can
 * write the directory must not steer a root daemon's appends elsewhere).
 */
static void reopen_if_moved(void)
{
	long long now = sbx_now_ms(),
		  last = atomic_load_explicit(&log_checked_ms, memory_order_relaxed);
	struct stat st;
	int fd;
	if (now - last < 1000 || !atomic_compare_exchange_strong(&log_checked_ms, &last, now))
		return;
	if (!stat(log_where, &st) && st.st_dev == log_dev && st.st_ino == log_ino)
		return;
	if (pthread_mutex_trylock(&reopen_lock))
		return;
	/* O_NONBLOCK: a FIFO put there must not hold the thread (and its locks). */
	fd = open(log_where, LOG_OPEN_FLAGS | O_NOFOLLOW | O_NONBLOCK, 0600);
	if (fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    st.st_nlink == 1 && !fcntl(fd, F_SETFL, O_APPEND) && dup3(fd, log_fd, O_CLOEXEC) >= 0) {
		log_dev = st.st_dev;
		log_ino = st.st_ino;
	}
	if (fd >= 0)
		close(fd);
	pthread_mutex_unlock(&reopen_lock);
}

void sbx_log(enum sbx_log_level lvl, const char *fmt, ...)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	static const char *const name[] = {"error", "warning", "info", "debug"};
	char line[2048], out[2200], stamp[40], *all;
	va_list ap;
	int n;
	if (lvl > log_max)
		return;
	va_start(ap, fmt);
	n = vasprintf(&all, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	sbx_fit(line, sizeof(line), all); /* long paths shortened, the end kept */
	free(all);
	sbx_one_line(line); /* paths and messages a sandbox chose */
	switch (log_target) {
	case TO_SYSLOG:
		syslog(prio[lvl], "%s", line);
		return;
	case TO_JOURNAL:
		/* sd-daemon(3) prefixes: the journal keeps the priority. */
		n = snprintf(out, sizeof(out), "<%d>%s: %s\n", prio[lvl], name[lvl], line);
		break;
	case TO_FILE:
		reopen_if_moved();
		/* fall through */
	default:
		sbx_log_timestamp(stamp, sizeof(stamp));
		n = snprintf(out, sizeof(out), "%s sbxfs[%d]: %s: %s\n", stamp, (int)getpid(),
			     name[lvl], line);
		break;
	}
	if (n > (int)sizeof(out) - 1)
		n = (int)sizeof(out) - 1;
	/* One write per line: concurrent threads never interleave inside a line. */
	if (write(log_fd, out, (size_t)n) < 0) {
		/* Said once per spell (the hook may log: this write fails, it is not called again).
		 */
		int e = errno;
		log_failure_hook fn = atomic_load(&log_failure_fn);
		if (atomic_exchange(&log_failing, e) == 0 && fn)
			fn(e, log_where);
	} else if (atomic_load_explicit(&log_failing, memory_order_relaxed)) {
		atomic_store(&log_failing, 0);
	}
}

void sbx_log_on_failure(void (*fn)(int err, const char *where))
{
	int e = atomic_load(&log_failing);
	atomic_store(&log_failure_fn, fn);
	if (fn && e) /* a spell that began before anyone listened */
		fn(e, log_where);
}

static const char *const secret_headers[] = {
    "x-api-key:",
    "x-access-token:",
    "authorization:",
    "e2b-traffic-access-token:",
    "x-daytona-preview-token:",
    "proxy-authorization:",
    NULL,
};

void sbx_log_redact(char *dst, size_t dstsz, const char *src, size_t srclen)
{
	size_t o = 0, i = 0;
	if (!dstsz)
		return;
	while (i < srclen && o + 1 < dstsz) {
		int at_line = (i == 0 || src[i - 1] == '\n');
		const char *const *h;
		size_t hl = 0;
		for (h = secret_headers; at_line && *h; h++) {
			hl = strlen(*h);
			if (srclen - i >= hl && strncasecmp(src + i, *h, hl) == 0)
				break;
		}
		if (at_line && *h) {
			for (size_t k = 0; k < hl && o + 1 < dstsz; k++)
				dst[o++] = src[i + k];
			i += hl;
			for (const char *m = " ***"; *m && o + 1 < dstsz; m++)
				dst[o++] = *m;
			while (i < srclen && src[i] != '\r' && src[i] != '\n')
				i++;
			continue;
		}
		dst[o++] = src[i++];
	}
	dst[o] = '\0';
}
