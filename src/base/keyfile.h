/*
 * keyfile — credentials read from files rather than the environment of
 * whoever started sbxfs: an environment file (-o env_file=PATH, what the
 * systemd units pass: KEY=VALUE lines as systemd's EnvironmentFile=) and a
 * provider's key file (config "providers": {NAME: {"keyFile": PATH}}).
 *
 * Both must be regular files that only their owner can read or write (mode
 * 0600 or stricter, like ssh's private keys), owned by the user sbxfs runs
 * as (or root): a key file that others can read is refused with the reason,
 * not used. Nothing here logs a value.
 */
#ifndef SBX_KEYFILE_H
#define SBX_KEYFILE_H

#include <sys/stat.h>

#include "base/err.h"

/* 0 when path is a regular file, owned by us or root, with no group/other bits. */
int sbx_keyfile_check(const char *path, struct sbx_error *err);
/*
 * What the daemon takes orders from without holding secrets (the config,
 * whose initPath it runs; the state dir, whose lease table it attaches)
 * must be changeable by no other user, as ssh's StrictModes asks of its
 * files: st (path's stat) owned by us or root and writable by no other
 * user (a group write only for our own group), and every directory above
 * it the same, or sticky (/tmp: others cannot rename what is ours). 0, or
 * EACCES with err naming what, the owner and mode, and the way out.
 */
int sbx_trusted_check(const char *what, const char *path, const struct stat *st,
		      struct sbx_error *err);
/*
 * Reads a key file: its first line without surrounding blanks (*out is
 * malloc'd; the caller wipes and frees it). EINVAL when empty.
 */
int sbx_keyfile_read(const char *path, char **out, struct sbx_error *err);
/*
 * Loads KEY=VALUE lines into the environment (overriding it): blank lines
 * and #/; comments skipped, an optional "export " prefix, and values in
 * single or double quotes unquoted. A leading '-' on path means "ignore a
 * missing file" (as systemd's EnvironmentFile=-PATH). Call before any
 * thread starts (setenv).
 */
int sbx_envfile_load(const char *path, struct sbx_error *err);
/*
 * The value name has in the same file (path as above), re-read now: *out
 * is malloc'd, or NULL when no line names it (or the optional file is
 * missing). The caller wipes and frees it (sbx_wipe_free). Sets nothing.
 */
int sbx_envfile_value(const char *path, const char *name, char **out, struct sbx_error *err);
/* Wipes a secret string and frees it (NULL is fine). */
void sbx_wipe_free(char *secret);

#endif
