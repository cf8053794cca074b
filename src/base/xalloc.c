/* xalloc — allocations that abort with a message instead of failing (xalloc.h). */
#include "xalloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* log.c's sbx_log, installed by it (xalloc calls no other file: buf, fsutil
 * and log all allocate through here). */
static void (*report)(const char *line);

void sbx_xalloc_set_report(void (*fn)(const char *line))
{
	report = fn;
}

static void die(const char *what, size_t n)
{
	char line[96];
	snprintf(line, sizeof(line), "out of memory: %s of %zu bytes", what, n);
	if (report)
		report(line);
	fprintf(stderr, "sbxfs: %s\n", line);
	abort();
}

void *sbx_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		die("malloc", n);
	return p;
}

void *sbx_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		die("calloc", n * size);
	return p;
}

void *sbx_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		die("realloc", n);
	return q;
}

void *sbx_xreallocarray(void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		die("realloc (overflow)", SIZE_MAX);
	return sbx_xrealloc(p, n * size);
}

char *sbx_xstrdup(const char *s)
{
	char *d = strdup(s);
	if (!d)
		die("strdup", strlen(s) + 1);
	return d;
}

char *sbx_xstrndup(const char *s, size_t n)
{
	char *d = strndup(s, n);
	if (!d)
		die("strndup", n + 1);
	return d;
}

char *sbx_xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;
	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		die("asprintf", 0);
	return s;
}

void *sbx_xcheck(void *v, const char *what)
{
	if (!v)
		die(what, 0);
	return v;
}
