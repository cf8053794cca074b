/* log — stderr or syslog, and header redaction for debug dumps. */
#include "base/log.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>

static int log_syslog;
static enum sbx_log_level log_max = SBX_LOG_INFO;

void sbx_log_setup(int use_syslog, enum sbx_log_level max)
{
	log_syslog = use_syslog;
	log_max = max;
	if (use_syslog)
		openlog("sbxfs", LOG_PID, LOG_DAEMON);
}

enum sbx_log_level sbx_log_level(void)
{
	return log_max;
}

void sbx_log(enum sbx_log_level lvl, const char *fmt, ...)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	static const char *const name[] = {"error", "warning", "info", "debug"};
	va_list ap;
	if (lvl > log_max)
		return;
	va_start(ap, fmt);
	if (log_syslog) {
		vsyslog(prio[lvl], fmt, ap);
	} else {
		char line[2048];
		vsnprintf(line, sizeof(line), fmt, ap);
		fprintf(stderr, "sbxfs: %s: %s\n", name[lvl], line);
	}
	va_end(ap);
}

static const char *const secret_headers[] = {
	"x-api-key:", "x-access-token:", "authorization:", "e2b-traffic-access-token:",
	"x-daytona-preview-token:", "proxy-authorization:", NULL,
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
