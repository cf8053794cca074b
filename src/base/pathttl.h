/*
 * pathttl — a bounded set of paths, each kept until a time: "we changed
 * this path lately", so that the sandbox's report of the change is known
 * as our own echo (the cache's echoes, e2b's metadata batches).
 *
 * No lock: the owner locks. Times are sbx_now_ms() milliseconds.
 */
#ifndef SBX_PATHTTL_H
#define SBX_PATHTTL_H

#include <stdbool.h>
#include <stddef.h>

struct sbx_pathttl_ent;

struct sbx_pathttl {
	struct sbx_pathttl_ent *h;
	size_t max; /* entries kept at most (0: 4096) */
};

/*
 * Keeps path for ttl_ms from now (a later note of it moves the time). At
 * max, the expired entries go first, then the oldest noted ones.
 */
void sbx_pathttl_note(struct sbx_pathttl *s, const char *path, long long now, long ttl_ms);
/* Whether path was noted and its time is after now. */
bool sbx_pathttl_live(const struct sbx_pathttl *s, const char *path, long long now);
/* Drops every entry; s stays usable. */
void sbx_pathttl_clear(struct sbx_pathttl *s);

#endif
