/*
 * results — the bound on a lease's results/ (rich outputs of code runs,
 * results/N.ext, N rising over the lease's life). Not here: writing them
 * (run.c) or showing them (ctlfiles.c).
 *
 * The newest SBX_RESULTS_KEEP files are kept, and fewer when they take
 * more than SBX_RESULTS_MAX_BYTES; the oldest (lowest N) go first, and the
 * outputs of the run being saved never.
 */
#ifndef SBX_RESULTS_H
#define SBX_RESULTS_H

#include "lease.h"

#define SBX_RESULTS_KEEP 1000
#define SBX_RESULTS_MAX_BYTES (256ull << 20)

/* Removes old files of l's results/ past the bound; those numbered >= first_new stay. */
void sbx_results_prune(struct sbx_lease *l, unsigned long first_new);

#endif
