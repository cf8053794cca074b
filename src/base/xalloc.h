/*
 * xalloc — the out-of-memory policy: allocation does not fail. Each
 * function is its libc namesake that, when the allocator says no, logs one
 * line naming the size and aborts (as git's xmalloc does). sbxfs holds no
 * state that a half-done error path could save when malloc fails —
 * the lease table and run output are on disk, written atomically — and
 * the unchecked strdup/realloc/json_pack results this replaces turned an
 * allocation failure into a crash elsewhere or silently lost data. So the
 * rule is: use these for every allocation in src/ and providers/, and never
 * test their result. Sizes from the remote side are bounded before they
 * get here (a bounded buffer), so an abort means the machine is out of
 * memory, not that a peer asked for a terabyte.
 *
 * jansson: sbx_xjson(v) checks a json_pack / json_object / json_dumps
 * result the same way (they return NULL also for a bad format or non-UTF-8
 * text; callers that pack untrusted text must escape it first).
 */
#ifndef SBX_XALLOC_H
#define SBX_XALLOC_H

#include <stddef.h>

void *sbx_xmalloc(size_t n);
void *sbx_xcalloc(size_t n, size_t size);
void *sbx_xrealloc(void *p, size_t n);
/* sbx_xrealloc of n * size, with the multiplication checked. */
void *sbx_xreallocarray(void *p, size_t n, size_t size);
char *sbx_xstrdup(const char *s);
/* Where the out-of-memory line goes besides stderr (log.c installs sbx_log). */
void sbx_xalloc_set_report(void (*fn)(const char *line));
char *sbx_xstrndup(const char *s, size_t n);
/* A malloc'd formatted string. */
char *sbx_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Aborts with what when v is NULL; returns v. */
void *sbx_xcheck(void *v, const char *what);
#define sbx_xjson(v) sbx_xcheck((v), __FILE__ ": " #v)

#endif
