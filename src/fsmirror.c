/*
 * fsmirror — what the rest of the mount calls about a lease's fs/, whichever
 * implementation serves it (fsmirror.h): the dispatch to fs_direct.c or
 * fs_cached.c, the invalidation after a run, the kernel's pseudo
 * filesystems. It is neither implementation: both call into it, it calls
 * neither's internals.
 */
#include "fsmirror.h"

#include <string.h>

#include "cache.h"
#include "kinval.h"

const struct sbx_fs_ops *sbx_fs_ops_for(struct sbx_lease *l)
{
	return (l->prov->caps & SBX_CAP_DIRECT_IO) ? &sbx_fs_direct_ops : &sbx_fs_cached_ops;
}

void sbx_fs_invalidate(struct sbx_lease *l)
{
	if (l->cache)
		sbx_cache_invalidate_all(l->cache);
	sbx_kinval_flush(l->kinval);
}

int sbx_fs_is_pseudo(const char *path)
{
	static const char *const pseudo[] = {"/proc", "/sys", "/dev", NULL};
	for (const char *const *p = pseudo; *p; p++) {
		size_t n = strlen(*p);
		if (!strncmp(path, *p, n) && (path[n] == '\0' || path[n] == '/'))
			return 1;
	}
	return 0;
}
