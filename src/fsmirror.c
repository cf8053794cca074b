/*
 * fsmirror — what is common to a lease's fs/ whichever implementation
 * serves it (fsmirror.h): the invalidation after a run, the kernel's
 * pseudo filesystems, the answer-or-fault rule. It is neither
 * implementation: both call into it and it calls neither (the dispatch,
 * sbx_fs_ops_for, is inline in fsmirror.h, so its callers name the two
 * tables, not this file: no cycle).
 */
#include "fsmirror.h"

#include <errno.h>
#include <string.h>

#include "base/pathutil.h"
#include "cache.h"
#include "kinval.h"

void sbx_fs_invalidate(struct sbx_lease *l)
{
	if (l->cache)
		sbx_cache_invalidate_all(l->cache);
	sbx_kinval_flush(l->kinval);
}

void sbx_fs_invalidate_gone(struct sbx_lease *l)
{
	if (l->cache)
		sbx_cache_invalidate_all(l->cache);
	sbx_kinval_flush_detached(l->kinval);
}

int sbx_fs_is_pseudo(const char *path)
{
	static const char *const pseudo[] = {"/proc", "/sys", "/dev", NULL};
	for (const char *const *p = pseudo; *p; p++)
		if (sbx_path_under(path, *p))
			return 1;
	return 0;
}

/*
 * The one rule of fs/ (both implementations): an answer is what a healthy
 * filesystem says about the names it was given, which the caller expects
 * and acts on (mkdir -p meets EEXIST, mv meets EXDEV and copies); anything
 * else, an errno nobody listed included, is a fault and explained in the
 * lease's `error` file. fs_direct.c used to list the faults instead (EIO,
 * ENOTCONN, ETIMEDOUT, EACCES, ENOSPC, EDQUOT, ENOTSUP, EAGAIN), so a fault
 * outside its list (EPROTO, EROFS, ENOMEM, EINVAL from a garbled reply...)
 * reached the caller unexplained; fs_cached.c listed the answers, which is
 * kept, with EXDEV added (a cue to copy, not a failure anyone sees).
 */
bool sbx_fs_is_fault(int rc)
{
	switch (-rc) {
	case 0:
	case ENOENT:
	case EEXIST:
	case ENOTEMPTY:
	case ENOTDIR:
	case EISDIR:
	case ENAMETOOLONG:
	case ELOOP:
	case EXDEV:
		return false;
	default:
		return true;
	}
}
