/*
 * log — the one logging call, and where its lines go.
 *
 * Targets: stderr (foreground), a file (-o log=PATH, or the state dir's
 * sbxfs.log when daemonised with no reachable syslog), syslog, and the
 * systemd journal (stderr with "<N>" priority prefixes, chosen when
 * $JOURNAL_STREAM names our stderr). Every line that goes to stderr or a
 * file starts with an ISO-8601 UTC timestamp; the journal and syslog stamp
 * lines themselves. Callers must never pass secrets: sbx_log_redact()
 * masks anything that looks like a credential header in debug dumps.
 */
#ifndef SBX_LOG_H
#define SBX_LOG_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

enum sbx_log_level { SBX_LOG_ERR = 0, SBX_LOG_WARN, SBX_LOG_INFO, SBX_LOG_DEBUG };

/* Old-style setup: syslog (use_syslog) or stderr with timestamps. */
void sbx_log_setup(int use_syslog, enum sbx_log_level max);
/*
 * Chooses the target before daemonising. where: NULL (automatic: the
 * journal under systemd, else stderr in the foreground, else syslog when
 * /dev/log answers, else STATE_DIR/sbxfs.log), "stderr", "syslog", or a
 * file path (made absolute against the current directory; opened for
 * append, created 0600). On success *chosen (if not NULL) points at a
 * static description ("journal", "stderr", "syslog" or the file's path).
 * 0 or -errno with the reason in err.
 */
int sbx_log_open(const char *where, bool daemon, const char *state_dir, enum sbx_log_level max,
		 const char **chosen, struct sbx_error *err);
/* "error", "warn", "info", "debug" -> level; -EINVAL otherwise. */
int sbx_log_level_parse(const char *s, enum sbx_log_level *out);
enum sbx_log_level sbx_log_level(void);
void sbx_log(enum sbx_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * fn (NULL: none) hears when log lines stop reaching the log (a full
 * disk, a closed pipe): once per spell of failed writes, at once if one
 * is going on. It may log (those lines are lost, and do not call it).
 */
void sbx_log_on_failure(void (*fn)(int err, const char *where));
/*
 * Writes "YYYY-MM-DDTHH:MM:SS.mmmZ" (UTC) for the current time into buf
 * (at least 32 bytes).
 */
void sbx_log_timestamp(char *buf, size_t size);
/*
 * Copies src to dst (size dstsz, always NUL-terminated) with the values of
 * credential-bearing headers (X-API-KEY, X-Access-Token, Authorization,
 * E2B-Traffic-Access-Token, X-Daytona-Preview-Token) replaced by "***".
 */
void sbx_log_redact(char *dst, size_t dstsz, const char *src, size_t srclen);

#endif
