/*
 * run — the run slot of an E2B sandbox (the queued metadata applied
 * first, then a process through proc.c) and statfs through `df`. Not the
 * code interpreter (code.c), not the process stream itself (proc.c).
 */
#include "e2b/e2b.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/df.h"
#include "base/log.h"

int e2b_run(struct sbx_instance *inst, const struct sbx_run_req *req,
	    const struct sbx_run_sink *sink, struct sbx_run_result *result, struct sbx_error *err)
{
	/* Queued metadata: the core's sync() applied it before the run. */
	return e2b_proc_start(e2b_of(inst), req, false, sink, result, err);
}

int e2b_statfs(struct sbx_instance *inst, const char *path, struct statvfs *st,
	       struct sbx_error *err)
{
	(void)path; /* whole-sandbox figures: one root filesystem backs every path */
	return sbx_rmeta_statfs(&e2b_of(inst)->df, e2b_helper_run, e2b_of(inst), st, err);
}
