/*
 * tty — terminal sessions of a lease, as files (Plan 9 /net clone style):
 *
 *   L/tty/clone      opening it allocates session N; reading it answers "N\n"
 *   L/tty/N/data     write: keystrokes; read: terminal output (blocks for more;
 *                    EOF once the shell has exited and its output is read)
 *   L/tty/N/ctl      write: "size COLS ROWS", "term NAME", "cwd PATH" (before
 *                    the shell starts), "close"
 *   L/tty/N/status   "new", "running", "exited CODE" or "lost REASON"
 *
 * The shell starts at the first open of data, on the provider's tty_* slots,
 * and the session ends when the shell exits or the last handle on any of its
 * files closes (the shell is then killed). A live session counts as use of the
 * lease, so it is never paused for idleness. This module owns the session
 * table (one lock) and the per-open handlers of these files; it knows
 * nothing of FUSE. It is not a terminal emulator: bytes pass through as they are.
 */
#ifndef SBX_TTY_H
#define SBX_TTY_H

#include <stdbool.h>
#include <sys/types.h>

#include "fsmirror.h"
#include "lease.h"
#include "nodes.h"

struct sbx_open;
struct sbx_tty;

/* Set once by the FUSE layer (see sbx_run_set_abandon_check). */
void sbx_tty_set_abandon_check(bool (*fn)(void));

/* True for the kinds this module serves (tty/ and below). */
/* The number of a session of l whose shell is running; 0 if none. */
unsigned long sbx_tty_live(struct sbx_lease *l);
bool sbx_tty_node(enum sbx_node_kind kind);
/* getattr of tty/N and below: 0, or -ENOENT when no session N exists. */
int sbx_tty_exists(struct sbx_lease *l, const char *n);
/* Lists tty/ (clone and the sessions) or tty/N/. */
int sbx_tty_readdir(struct sbx_lease *l, const struct sbx_node *n, sbx_fs_fill_fn fill, void *ctx);
/* Attaches o (a fresh open of a tty node) to its session: allocates one for
 * clone, starts the shell for the first data open. 0 or -errno (reason in
 * the lease's error file). */
int sbx_tty_open(struct sbx_open *o, const struct sbx_node *n);
ssize_t sbx_tty_read(struct sbx_open *o, char *buf, size_t size, off_t off);
ssize_t sbx_tty_write(struct sbx_open *o, const char *buf, size_t size);
/* Acts on a last ctl line written without its newline. */
int sbx_tty_flush(struct sbx_open *o);
/* Drops o's hold on its session; the last one ends it. */
void sbx_tty_release(struct sbx_open *o);

#endif
