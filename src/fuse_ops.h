/* fuse_ops — the FUSE operations table (the only FUSE callbacks). */
#ifndef SBX_FUSE_OPS_H
#define SBX_FUSE_OPS_H

struct fuse_operations;
extern const struct fuse_operations sbx_fuse_ops;
/* Seconds the kernel may cache fs/ names and attributes (default 1; 0 = never). */
void sbx_fuse_set_cache_timeout(double seconds);
struct fuse;
/* After fuse_mount: the session's own read and writev, which give an OPENDIR
 * reply the cache flags older libfuse drops (fuse_ops.c). 0 or -errno. */
int sbx_fuse_install_io(struct fuse *f);
/* -o symlinks=raw: fs/ readlink answers the sandbox's own text (links not rewritten). */
void sbx_fuse_set_raw_symlinks(int raw);
/* -o xattr: serve extended attributes (else ENOSYS, which the kernel takes for the mount). */
void sbx_fuse_set_xattr(int on);

#endif
