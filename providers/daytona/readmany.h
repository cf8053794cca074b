/*
 * daytona/readmany — read_many over one POST /files/bulk-download
 * (doc/protocols/daytona.md §2.3): the reply collector, pure and unit
 * tested (check_readmany), and the provider slot.
 */
#ifndef SBX_DAYTONA_READMANY_H
#define SBX_DAYTONA_READMANY_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "daytona/protocol.h"
#include "provider.h"

/*
 * Collects a bulk-download reply for paths[0..n): a `file` part for a
 * requested path is kept whole (the parts' bytes at most max in all), an
 * `error` part (missing, unreadable) leaves that path out. A part for a
 * path not asked for, a second part for one path, or a malformed stream
 * is -EIO; more than max bytes -EFBIG. Nothing is handed out until
 * dt_many_finish() has seen the whole reply.
 */
struct dt_many {
	struct dt_multipart mp;
	const char *const *paths;
	size_t n, max, total;
	struct sbx_buf *data; /* per path */
	unsigned char *state; /* per path: 0 no part, 1 file part open, 2 file whole, 3 error */
	long cur;	      /* the path of the part being read, or -1 */
};

int dt_many_init(struct dt_many *m, const char *content_type, const char *const *paths, size_t n,
		 size_t max);
/* 0 or -errno (the first error sticks). */
int dt_many_feed(struct dt_many *m, const char *p, size_t len);
/* After the whole body: 0 and fn called for every whole file (st NULL), or -errno and none. */
int dt_many_finish(struct dt_many *m,
		   int (*fn)(void *ctx, size_t index, const char *data, size_t len,
			     const struct sbx_stat *st),
		   void *ctx);
void dt_many_release(struct dt_many *m);

int dt_read_many(struct sbx_instance *inst, const char *const *paths, size_t n, size_t max_bytes,
		 int (*fn)(void *ctx, size_t index, const char *data, size_t len,
			   const struct sbx_stat *st),
		 void *ctx, struct sbx_error *err);

#endif
