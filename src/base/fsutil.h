/*
 * fsutil — small file helpers for the daemon's own state files (not for
 * sandbox files). All return 0 or -errno.
 */
#ifndef SBX_FSUTIL_H
#define SBX_FSUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/sysutil.h" /* sbx_now_ms, which lived here */

/* mkdir -p with mode for created directories. */
int sbx_mkdir_p(const char *path, mode_t mode);
/* sbx_mkdir_p of path's directory (path is cut at its last '/' meanwhile). */
int sbx_mkdir_parent(char *path, mode_t mode);
/* Writes data to path via path.tmp + fsync + rename. */
int sbx_write_file_atomic(const char *path, const void *data, size_t len);
/* Appends to path (created 0600 if missing). */
int sbx_append_file(const char *path, const void *data, size_t len);
/*
 * The same for a file kept under cap bytes: when data would take path past
 * cap, path first becomes path.1 (replacing the older one), so path and
 * path.1 hold at most about 2 * cap. Serialised by one lock of its own.
 */
int sbx_append_file_capped(const char *path, const void *data, size_t len, off_t cap);
/* Reads the whole file into out (appending); ENOENT if missing. max bounds the size. */
int sbx_read_file(const char *path, struct sbx_buf *out, size_t max);
/* All of data to fd: retried on EINTR and short writes; -EIO if a write moves nothing. */
int sbx_write_all(int fd, const void *data, size_t len);
/* The same through send(MSG_NOSIGNAL): a closed peer is -EPIPE, never SIGPIPE. */
int sbx_send_all(int fd, const void *data, size_t len);
/*
 * The state dir's disk reserve: what bytes the sandbox decides the size of
 * (a run's output, a download into the content cache) may not take the
 * disk below 5 % of its size free, at most 1 GiB, at least 1 MiB. Whether
 * `more` bytes may follow the `written` ones in fd: looked at (fstatvfs)
 * only when they cross a MiB, so a writer of less never fails on it. 0, or
 * -ENOSPC with *avail_mib and *reserve_mib set.
 */
int sbx_disk_reserve_check(int fd, unsigned long long written, size_t more,
			   unsigned long long *avail_mib, unsigned long long *reserve_mib);
/* path made absolute against the working directory (malloc'd; a copy if it is already), NULL if
 * the working directory cannot be known. */
char *sbx_path_absolute(const char *path);
/*
 * Whether path is dir or lies beneath it, both resolved (symlinks, "..",
 * relative to the working directory) as far as they exist: a path that does
 * not exist yet is judged by its nearest existing ancestor. dir "/" holds
 * every path.
 */
bool sbx_path_resolved_under(const char *path, const char *dir);
/* rm -rf without following symlinks and without crossing mount points. */
int sbx_rm_rf(const char *path);
/* "2026-11-30T17:22:28Z" for t (UTC) into buf (>= 21 bytes). */
void sbx_iso_time(time_t t, char *buf, size_t size);
/* "20261130T172228Z" (ISO 8601's basic form, for file names) into buf (>= 17 bytes). */
void sbx_file_time(time_t t, char *buf, size_t size);
/*
 * True when thread tid is gone or being killed: a fatal signal shows as
 * SIGKILL pending in /proc/TID/status, even while the thread sleeps where
 * no signal can wake it (waiting for a FUSE answer). False when unknown.
 */
bool sbx_tid_dying(pid_t tid);

#endif
