/*
 * statedir — the state dir's own guards: the one-daemon lock, and the lease
 * table file (leases.json) read and written safely.
 *
 * The lock is an flock on STATE_DIR/lock taken before the mount: a second
 * daemon on the same state dir fails at once, naming the mountpoint that
 * holds it (written into the lock file). A holder whose mountpoint is no
 * longer mounted is a daemon still exiting after its unmount: that one is
 * waited for (up to 30 s), so `fusermount3 -u M; sbxfs M` works. The table is written as
 * temp + fsync + rename, with the previous generation kept as
 * leases.json.prev (a hard link to the replaced file). A table that exists
 * but cannot be read (not a regular file, unreadable, not the table's JSON)
 * is an error naming the file and the way out, never an empty table.
 */
#ifndef SBX_STATEDIR_H
#define SBX_STATEDIR_H

#include <jansson.h>

#include "base/err.h"

/*
 * Creates state_dir if needed (0700), and refuses one another user than us
 * (or root) can change, or that lies where another can replace it
 * (sbx_trusted_check): its lease table says what the daemon attaches and
 * which local disks it mounts. Called before anything is written there.
 */
int sbx_statedir_make(const char *state_dir, struct sbx_error *err);
/*
 * Takes the lock of state_dir (made by sbx_statedir_make) for the life of the
 * process (the fd is kept open, close-on-exec; it survives the daemon's
 * fork). EBUSY when another daemon holds it; err names its mountpoint.
 */
int sbx_statedir_lock(const char *state_dir, const char *mountpoint, int *fd,
		      struct sbx_error *err);
/*
 * Reads STATE_DIR/leases.json: *root = the table (NULL when there is none
 * yet). EINVAL/EIO/... with a message naming the file and what to do when
 * it exists but cannot be used. Never opens a special file.
 */
int sbx_statedir_read_table(const char *state_dir, json_t **root, struct sbx_error *err);
/* Writes the table atomically, keeping the replaced file as leases.json.prev. */
int sbx_statedir_write_table(const char *state_dir, const char *text, struct sbx_error *err);

#endif
