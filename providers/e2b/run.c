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

#define E2B_DF_TTL_MS 30000L

int e2b_run(struct sbx_instance *inst, const struct sbx_run_req *req,
	    const struct sbx_run_sink *sink, struct sbx_run_result *result,
	    struct sbx_error *err)
{
	/* Queued metadata: the core's sync() applied it before the run. */
	return e2b_proc_start(e2b_of(inst), req, false, sink, result, err);
}

int e2b_statfs(struct sbx_instance *inst, const char *path, struct statvfs *st,
	       struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	struct sbx_buf out = SBX_BUF_INIT, cmd = SBX_BUF_INIT;
	long now = sbx_now_ms();
	int code = 0, rc;

	pthread_mutex_lock(&in->lock);
	if (in->df_at_ms && now - in->df_at_ms < E2B_DF_TTL_MS) {
		*st = in->df;
		pthread_mutex_unlock(&in->lock);
		return 0;
	}
	pthread_mutex_unlock(&in->lock);
	/* Whole-sandbox figures: one root filesystem backs every path. */
	sbx_buf_adds(&cmd, "df -kP / && df -iP /");
	rc = e2b_run_capture(in, cmd.buf, false, 20000, 16384, &out, NULL, &code, err);
	if (!rc && (code || sbx_df_parse(out.buf, st)))
		rc = sbx_error_set(err, EIO, SBX_E_EXECUTION_FAILED, "statfs: df failed");
	if (!rc) {
		pthread_mutex_lock(&in->lock);
		in->df = *st;
		in->df_at_ms = now;
		pthread_mutex_unlock(&in->lock);
	}
	sbx_buf_release(&out);
	sbx_buf_release(&cmd);
	return rc;
}
