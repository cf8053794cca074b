/*
 * lockorder — see lockorder.h. A thread-local stack of the levels held;
 * always compiled (the unit test drives it in any build), called only
 * when SBX_LOCK_DEBUG is defined.
 */
#include "base/lockorder.h"

#include <stdio.h>
#include <stdlib.h>

/* Deeper than any path of the core: SAVE > MOUNT > LEASE > ERR is four. */
#define SBX_LOCKORDER_MAX 16

static _Thread_local int held[SBX_LOCKORDER_MAX];
static _Thread_local int n_held;

static void die(const char *why, int level, const char *where)
{
	fprintf(stderr, "sbxfs: lock order violated at %s: %s (taking level %d, holding", where,
		why, level);
	for (int i = 0; i < n_held; i++)
		fprintf(stderr, " %d", held[i]);
	fprintf(stderr, "; order: save 1 > mount 2 > lease 3 > rme flush 4 > rme 5 > err 6, see "
			"lease.h and rmeta_engine.h)\n");
	abort();
}

void sbx_lockorder_take(int level, const char *where)
{
	if (n_held && held[n_held - 1] >= level)
		die("a lock no deeper than one held", level, where);
	if (n_held == SBX_LOCKORDER_MAX)
		die("too many locks held", level, where);
	held[n_held++] = level;
}

void sbx_lockorder_drop(int level)
{
	/* Usually the innermost; an out-of-order unlock is legal, so search. */
	for (int i = n_held - 1; i >= 0; i--)
		if (held[i] == level) {
			for (int j = i; j < n_held - 1; j++)
				held[j] = held[j + 1];
			n_held--;
			return;
		}
	die("dropping a lock not held", level, "unlock");
}

void sbx_lockorder_none(const char *where)
{
	if (n_held)
		die("a provider call with a lock held", 0, where);
}
