/*
 * files.h — the file slots of the local provider (files.c), one function
 * per slot of struct sbx_provider with the same contract. Internal to
 * providers/local/: local.c puts them in the ops table.
 */
#ifndef SBX_LOCAL_FILES_H
#define SBX_LOCAL_FILES_H

#include "provider.h"

int lcl_f_stat(struct sbx_instance *inst, const char *path, struct sbx_stat *st,
	       struct sbx_error *err);
int lcl_f_list(struct sbx_instance *inst, const char *path, sbx_list_fn fn, void *ctx,
	       struct sbx_error *err);
int lcl_f_read(struct sbx_instance *inst, const char *path, off_t off, off_t len, sbx_sink_fn sink,
	       void *ctx, struct sbx_error *err);
int lcl_f_write(struct sbx_instance *inst, const char *path, int src, off_t size, mode_t mode,
		struct sbx_error *err);
int lcl_f_truncate(struct sbx_instance *inst, const char *path, off_t size, struct sbx_error *err);
int lcl_f_mkdir(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err);
int lcl_f_unlink(struct sbx_instance *inst, const char *path, struct sbx_error *err);
int lcl_f_rmdir(struct sbx_instance *inst, const char *path, struct sbx_error *err);
int lcl_f_rename(struct sbx_instance *inst, const char *from, const char *to, unsigned flags,
		 struct sbx_error *err);
int lcl_f_chmod(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err);
int lcl_f_chown(struct sbx_instance *inst, const char *path, uid_t uid, gid_t gid,
		struct sbx_error *err);
int lcl_f_utimens(struct sbx_instance *inst, const char *path, const struct timespec ts[2],
		  struct sbx_error *err);
int lcl_f_symlink(struct sbx_instance *inst, const char *target, const char *path,
		  struct sbx_error *err);
int lcl_f_readlink(struct sbx_instance *inst, const char *path, char *buf, size_t size,
		   struct sbx_error *err);
int lcl_f_link(struct sbx_instance *inst, const char *from, const char *to, struct sbx_error *err);
int lcl_f_mknod(struct sbx_instance *inst, const char *path, mode_t mode, dev_t dev,
		struct sbx_error *err);
int lcl_f_statfs(struct sbx_instance *inst, const char *path, struct statvfs *st,
		 struct sbx_error *err);
int lcl_f_open(struct sbx_instance *inst, const char *path, int flags, mode_t mode, uint64_t *fh,
	       struct sbx_error *err);
ssize_t lcl_f_pread(struct sbx_instance *inst, uint64_t fh, char *buf, size_t size, off_t off,
		    struct sbx_error *err);
ssize_t lcl_f_pwrite(struct sbx_instance *inst, uint64_t fh, const char *buf, size_t size,
		     off_t off, struct sbx_error *err);
int lcl_f_ftruncate(struct sbx_instance *inst, uint64_t fh, off_t size, struct sbx_error *err);
ssize_t lcl_f_xattr(struct sbx_instance *inst, const char *path, const struct sbx_xattr_req *rq,
		    struct sbx_error *err);
int lcl_f_fallocate(struct sbx_instance *inst, uint64_t fh, int mode, off_t off, off_t len,
		    struct sbx_error *err);
off_t lcl_f_seek_data(struct sbx_instance *inst, uint64_t fh, off_t off, int whence,
		      struct sbx_error *err);
int lcl_f_fsync(struct sbx_instance *inst, uint64_t fh, int datasync, struct sbx_error *err);
int lcl_f_fstat(struct sbx_instance *inst, uint64_t fh, struct sbx_stat *st, struct sbx_error *err);
void lcl_f_close(struct sbx_instance *inst, uint64_t fh);

#endif
