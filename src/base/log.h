/*
 * log — the one logging call. stderr while in the foreground, syslog once
 * daemonised. Callers must never pass secrets: sbx_log_redact() masks
 * anything that looks like a credential header in debug dumps.
 */
#ifndef SBX_LOG_H
#define SBX_LOG_H

#include <stddef.h>

enum sbx_log_level { SBX_LOG_ERR = 0, SBX_LOG_WARN, SBX_LOG_INFO, SBX_LOG_DEBUG };

void sbx_log_setup(int use_syslog, enum sbx_log_level max);
enum sbx_log_level sbx_log_level(void);
void sbx_log(enum sbx_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * Copies src to dst (size dstsz, always NUL-terminated) with the values of
 * credential-bearing headers (X-API-KEY, X-Access-Token, Authorization,
 * E2B-Traffic-Access-Token, X-Daytona-Preview-Token) replaced by "***".
 */
void sbx_log_redact(char *dst, size_t dstsz, const char *src, size_t srclen);

#endif
