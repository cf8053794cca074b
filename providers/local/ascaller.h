/*
 * ascaller.h — the local provider's file slots that change the tree, run
 * as the caller of the FUSE request (ascaller.c). Internal to
 * providers/local/: local.c puts these in the ops table instead of the
 * plain lcl_f_* functions of files.c they wrap.
 */
#ifndef SBX_LOCAL_ASCALLER_H
#define SBX_LOCAL_ASCALLER_H

#include "provider.h"

int lcl_c_truncate(struct sbx_instance *inst, const char *path, off_t size, struct sbx_error *err);
int lcl_c_mkdir(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err);
int lcl_c_unlink(struct sbx_instance *inst, const char *path, struct sbx_error *err);
int lcl_c_rmdir(struct sbx_instance *inst, const char *path, struct sbx_error *err);
int lcl_c_rename(struct sbx_instance *inst, const char *from, const char *to, unsigned flags,
		 struct sbx_error *err);
int lcl_c_chmod(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err);
int lcl_c_chown(struct sbx_instance *inst, const char *path, uid_t uid, gid_t gid,
		struct sbx_error *err);
int lcl_c_utimens(struct sbx_instance *inst, const char *path, const struct timespec ts[2],
		  struct sbx_error *err);
int lcl_c_symlink(struct sbx_instance *inst, const char *target, const char *path,
		  struct sbx_error *err);
int lcl_c_link(struct sbx_instance *inst, const char *from, const char *to, struct sbx_error *err);
int lcl_c_mknod(struct sbx_instance *inst, const char *path, mode_t mode, dev_t dev,
		struct sbx_error *err);
ssize_t lcl_c_xattr(struct sbx_instance *inst, const char *path, const struct sbx_xattr_req *rq,
		    struct sbx_error *err);
int lcl_c_open(struct sbx_instance *inst, const char *path, int flags, mode_t mode, uint64_t *fh,
	       struct sbx_error *err);

#endif
