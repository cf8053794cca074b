/*
 * e2b/readmany — read_many as one command (e2b/readmany.c): the script,
 * and the parser of its output, pure and unit tested (check_readmany).
 */
#ifndef SBX_E2B_READMANY_H
#define SBX_E2B_READMANY_H

#include <stddef.h>

#include "base/buf.h"
#include "provider.h"

/*
 * Appends to cmd the sh script that prints "I" and the indices of the
 * paths that are readable regular files ("I 0 2 5\n"); for those, one
 * "<size> <mtime %Y> <mtime %y>" line each (measured before the bytes, so
 * a stamp is never newer than its bytes), "C\n", their bytes back to back,
 * "S\n" and the same stat lines again; then "E <n>\n".
 */
void e2b_many_script(struct sbx_buf *cmd, const char *const *paths, size_t n);
/*
 * Parses that output for n paths: fn(ctx, i, bytes, len, st with size and
 * mtime) for each file, after the whole output was checked. Anything
 * malformed or cut (no "E n" at the very end), an index out of range or
 * twice, the two stats unlike (a file changed meanwhile): -EIO and no
 * call; more than max bytes of contents: -EFBIG.
 */
int e2b_many_parse(const char *out, size_t len, size_t n, size_t max,
		   int (*fn)(void *ctx, size_t index, const char *data, size_t len,
			     const struct sbx_stat *st),
		   void *ctx);

int e2b_read_many(struct sbx_instance *inst, const char *const *paths, size_t n, size_t max_bytes,
		  int (*fn)(void *ctx, size_t index, const char *data, size_t len,
			    const struct sbx_stat *st),
		  void *ctx, struct sbx_error *err);

#endif
