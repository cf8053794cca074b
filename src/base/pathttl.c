/*
 * pathttl — a bounded set of paths with an expiry time each (pathttl.h).
 * A uthash table: iteration is in insertion order, so "oldest first" is
 * the table's order.
 */
#include <stdlib.h>
#include <string.h>

#include "pathttl.h"
#include "uthash.h"
#include "xalloc.h"

#define SBX_PATHTTL_MAX 4096

struct sbx_pathttl_ent {
	UT_hash_handle hh;
	char *path;
	long long until;
};

static void ent_free(struct sbx_pathttl *s, struct sbx_pathttl_ent *e)
{
	HASH_DEL(s->h, e);
	free(e->path);
	free(e);
}

/* Makes room for one more entry: drops the expired ones, then the oldest. */
static void make_room(struct sbx_pathttl *s, long long now)
{
	size_t max = s->max ? s->max : SBX_PATHTTL_MAX;
	struct sbx_pathttl_ent *e, *tmp;
	if (HASH_COUNT(s->h) < max)
		return;
	HASH_ITER(hh, s->h, e, tmp)
	if (e->until <= now)
		ent_free(s, e);
	HASH_ITER(hh, s->h, e, tmp)
	{
		if (HASH_COUNT(s->h) < max)
			break;
		ent_free(s, e);
	}
}

void sbx_pathttl_note(struct sbx_pathttl *s, const char *path, long long now, long ttl_ms)
{
	struct sbx_pathttl_ent *e;
	HASH_FIND_STR(s->h, path, e);
	if (e) {
		/* moved to the end: it is the newest noted now */
		HASH_DEL(s->h, e);
	} else {
		make_room(s, now);
		e = sbx_xcalloc(1, sizeof(*e));
		e->path = sbx_xstrdup(path);
	}
	e->until = now + ttl_ms;
	HASH_ADD_KEYPTR(hh, s->h, e->path, strlen(e->path), e);
}

bool sbx_pathttl_live(const struct sbx_pathttl *s, const char *path, long long now)
{
	struct sbx_pathttl_ent *e;
	HASH_FIND_STR(s->h, path, e);
	return e && e->until > now;
}

void sbx_pathttl_clear(struct sbx_pathttl *s)
{
	struct sbx_pathttl_ent *e, *tmp;
	HASH_ITER(hh, s->h, e, tmp)
	ent_free(s, e);
}
