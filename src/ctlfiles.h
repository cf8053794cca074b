/*
 * ctlfiles — the synthetic files and directories of the mount (everything
 * but fs/): their attributes, listings, and what opening, reading and
 * writing them does. Per-open state lives in struct sbx_open (fi->fh).
 *
 * Runner files (exec, code.*): a write-only open runs the written text at
 * flush (close waits for the run); a read-write open runs it at the first
 * read and streams the output; a read-only open gives the caller's run's
 * stdout (runs.h). What can be known before a run (a NUL, the lease's
 * state, the state dir) fails the write itself. Read-only files are
 * snapshotted at open, so a read never waits on a provider; a run's files
 * are read as they grow, until the run ends. Knows nothing of FUSE.
 */
#ifndef SBX_CTLFILES_H
#define SBX_CTLFILES_H

#include <stdbool.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "fsmirror.h"
#include "lease.h"
#include "nodes.h"
#include "run.h"
#include "runs.h"

struct sbx_tty;

struct sbx_open {
	enum sbx_node_kind kind;
	struct sbx_lease *lease; /* reference, or NULL for root files */
	int flags;		 /* open(2) flags */
	struct sbx_buf data;	 /* snapshot to read, or text written */
	bool ran;		 /* the written text was run (runner files) */
	bool refused;		 /* a write failed: flush must not commit (env) */
	bool wrote;		 /* something was written (env: commit at flush) */
	off_t end;		 /* the end of what was written (an ftruncate there: a no-op) */
	int utf8_tail;		 /* runner files: bytes of a UTF-8 sequence data ends in */
	size_t env_done;	 /* env: data's bytes checked (whole lines) ... */
	size_t env_vars;	 /* ... and the variables among them */
	struct sbx_run *run;	 /* the run started by this open */
	off_t rpos;		 /* stream position in the run's output */
	char language[16];	 /* code.* */
	struct sbx_fs_file *fsf; /* fs/ files */
	struct sbx_run_reader *reader; /* a run's stdout/stderr/result/cmd (runs.h) */
	struct sbx_run_owner owner;    /* runner files: who wrote (the per-caller rule) */
	unsigned long run_n;	       /* runs/N/ctl: N */
	struct sbx_tty *tty;	       /* tty/ files: the session (tty.c) */
	char *path;		       /* control files: the mount path opened (fstat, ftruncate) */
};

struct sbx_open *sbx_open_new(enum sbx_node_kind kind, struct sbx_lease *l, int flags);
/* Frees o, dropping its lease and run references. */
void sbx_open_free(struct sbx_open *o);

int sbx_ctl_getattr(struct sbx_mount *m, const struct sbx_node *n, struct sbx_lease *l,
		    struct stat *st);
int sbx_ctl_readdir(struct sbx_mount *m, const struct sbx_node *n, struct sbx_lease *l,
		    sbx_fs_fill_fn fill, void *ctx);
/* Opens a control file; on success *out owns the lease reference l. */
int sbx_ctl_open(struct sbx_mount *m, const struct sbx_node *n, struct sbx_lease *l, int flags,
		 struct sbx_open **out);
ssize_t sbx_ctl_read(struct sbx_open *o, char *buf, size_t size, off_t off);
ssize_t sbx_ctl_write(struct sbx_mount *m, struct sbx_open *o, const char *buf, size_t size,
		      off_t off);
/* Completes what the writes asked for (a run, a new env). */
int sbx_ctl_flush(struct sbx_mount *m, struct sbx_open *o);
/* The last close: a bare truncating open of env empties it. */
void sbx_ctl_release(struct sbx_mount *m, struct sbx_open *o);
/* truncate(2) of a control file: a no-op for the writable ones (the shell's `>`). */
int sbx_ctl_truncate(struct sbx_mount *m, const struct sbx_node *n, struct sbx_lease *l,
		     struct sbx_open *o, off_t size);

#endif
