/*
 * runs_int — private to the runs module: run.c (one run) and runs.c (a
 * lease's table of runs, runs/N on disk). A run registers itself in the
 * table and the table holds references to runs, so the two call each
 * other; what only they use of each other is declared here, the rest of
 * the mount uses run.h and runs.h.
 */
#ifndef SBX_RUNS_INT_H
#define SBX_RUNS_INT_H

#include "run.h"
#include "runs.h"

/* Allocates the next N (continuing after a remount), sets r->n and r->dir, and remembers r under
 * it. */
unsigned long sbx_runs_add(struct sbx_lease *l, struct sbx_run *r);
/* Removes runs past the retention policy (never a run still going, never newest). */
void sbx_runs_prune(struct sbx_lease *l);
/* Path of runs/N[/file] (caller frees); file may be NULL. */
char *sbx_runs_path(struct sbx_lease *l, unsigned long n, const char *file);
/*
 * Waits (lock held) until pred(r, ctx) or the run ends; -EINTR when the
 * waiting process was killed, else 0. stops: that process is the run's own
 * (its writer, or the read-write open that wrote it), whose death cancels
 * the run; another reader's only ends its wait.
 */
int sbx_run_wait_locked(struct sbx_run *r, bool stops, bool (*pred)(struct sbx_run *, void *),
			void *ctx);
struct sbx_run *sbx_run_get(struct sbx_run *r);

#endif
