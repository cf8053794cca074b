/*
 * linkmap — what fs/ answers to readlink: a sandbox's symlink target
 * rewritten so that the host's kernel, following it from the link's place
 * in fs/, lands exactly where the sandbox would, and never outside fs/.
 * doc/DESIGN.md ("Symlinks seen from the host") says why.
 */
#ifndef SBX_LINKMAP_H
#define SBX_LINKMAP_H

#include <stddef.h>
#include <sys/types.h>

/* How the rewrite asks the sandbox: lstat's file type (0 or -errno) and a link's text. */
struct sbx_link_io {
	int (*lstat)(void *ctx, const char *path, mode_t *mode);
	int (*readlink)(void *ctx, const char *path, char *buf, size_t size);
	void *ctx;
};

/*
 * Rewrites target, the text of the symlink at link (a sandbox path such as
 * "/root/rel"), into out: "../" once per directory above the link up to
 * the sandbox's "/", then the target's absolute sandbox path with no "."
 * or ".." left (".." at "/" stays at "/"; a ".." after a symlink is walked
 * through that link, asking io). 0 or -ENAMETOOLONG.
 */
int sbx_link_rewrite(const char *link, const char *target, const struct sbx_link_io *io, char *out,
		     size_t size);

#endif
