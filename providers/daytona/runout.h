/*
 * daytona/runout — a session run's stdout and stderr kept byte for byte:
 * redirected to files in the sandbox, fetched with the file download
 * endpoint (runout.c).
 */
#ifndef SBX_DAYTONA_RUNOUT_H
#define SBX_DAYTONA_RUNOUT_H

#include "daytona/daytona.h"

struct dt_runout {
	char path[2][128]; /* stdout, stderr files in the sandbox */
	char glob[280];	   /* every run file of the session */
	long long sent[2]; /* bytes of each already delivered */
	bool missing[2];   /* the last fetch found no such file */
};

/* sid and token: [a-z0-9-], short (session ids are "sbxfs-" + 12 hex). */
void dt_runout_init(struct dt_runout *ro, const char *sid, const char *token);
/*
 * Appends what goes before the wrapped run: removing the session's older
 * run files, then opening a subshell whose streams are the two files.
 */
void dt_runout_prefix(struct sbx_buf *cmd, const struct dt_runout *ro);
/* Appends what goes after the wrapped run: the subshell's end. */
void dt_runout_suffix(struct sbx_buf *cmd);
/* One poll: new bytes of both files to sink (NULL: counted only). 0 or -errno. */
int dt_runout_fetch(struct dt_instance *di, struct dt_runout *ro, const struct sbx_run_sink *sink,
		    struct sbx_error *err);
/* Removes the run's two files (one execute request; failures are logged). */
void dt_runout_remove(struct dt_instance *di, const struct dt_runout *ro);

#endif
