/*
 * runs — the runs of a lease as files: runs/N/{cmd,stdout,stderr,result,ctl}
 * under the lease's state directory, the in-memory table of its recent
 * runs, which run a caller's `exec`, `stdout`, `stderr` and `result` answer
 * (the per-caller rule), readers that tail a run still going, and the
 * retention policy. Knows nothing of FUSE: the caller's pid comes from a
 * hook the FUSE layer sets.
 *
 * The per-caller rule: a run remembers its writer's process and up to
 * SBX_RUN_CHAIN - 1 ancestors (PPid links in /proc, taken at the first
 * write). A reader's own chain is taken the same way; the run whose
 * writer chain contains the reader's nearest ancestor (itself first) wins,
 * the most recent on ties; with no such run (nothing remembered, e.g.
 * after a remount) the lease's last run. So in `bash -c 'echo A > exec;
 * cat exec'` run twice in parallel each cat reads its own bash's run, also
 * when the writer was /bin/echo, a child gone by the time cat reads.
 *
 * Retention: the last SBX_RUNS_KEEP runs are kept, and older finished runs
 * are removed once the runs of a lease take more than SBX_RUNS_MAX_BYTES
 * (the newest run is always kept, whatever its size).
 *
 * One run's output is bounded as it comes (sbx_runs_room): its two
 * streams together at most SBX_RUNS_MAX_BYTES (EFBIG), and never taking
 * the state dir's disk below a reserve (ENOSPC), so a command nobody read
 * (`yes`) cannot fill the host's disk; the run is then stopped.
 */
#ifndef SBX_RUNS_H
#define SBX_RUNS_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "lease.h"
#include "run.h"

#define SBX_RUNS_KEEP 100
#define SBX_RUNS_MAX_BYTES (4ull << 30)
/* A result's stdout/stderr text fields hold the output only up to this size. */
#define SBX_RUN_TEXT_MAX (1u << 20)

/* Set once by the FUSE layer: the pid of the process whose request is served. */
void sbx_runs_set_caller(pid_t (*fn)(void));
/* The calling process and its ancestors (empty when there is no caller hook). */
void sbx_runs_caller(struct sbx_run_owner *o);

/*
 * What can be known before a run: the lease's state (killed, reclaimed,
 * provider unreachable: ENOENT/ENOTCONN; paused with autoResume off:
 * EAGAIN) and whether the state dir can keep its output (its errno, or
 * ENOSPC when nearly full). 0 or -errno with the reason in err.
 */
int sbx_runs_precheck(struct sbx_lease *l, struct sbx_error *err);

/* The run the calling process should see (the per-caller rule); 0 if none. */
unsigned long sbx_runs_pick(struct sbx_lease *l);
/* The lowest N of a run (or code cell) still in flight; 0 if none. */
unsigned long sbx_runs_in_flight(struct sbx_lease *l);
/* The run numbered n if still remembered (a reference), else NULL. */
struct sbx_run *sbx_runs_find(struct sbx_lease *l, unsigned long n);
/* Every N on disk, ascending, in a malloc'd array (caller frees). */
size_t sbx_runs_list(struct sbx_lease *l, unsigned long **out);
/* Drops the table of a lease (lease_free). */
void sbx_runs_free(struct sbx_lease *l);

/*
 * Whether a run whose streams hold `kept` bytes may write `more` to fd (a
 * file of runs/N/): 0, or -EFBIG past SBX_RUNS_MAX_BYTES, or -ENOSPC when
 * the state dir's disk reserve would be crossed (sbx_disk_reserve_check).
 * why gets the reason.
 */
int sbx_runs_room(int fd, unsigned long long kept, size_t more, char *why, size_t why_size);

/* stat of runs/N/file: size and times, following a run still going. */
int sbx_runs_stat(struct sbx_lease *l, unsigned long n, const char *file, struct stat *st);

/*
 * A reader of runs/N/file (stdout, stderr, result, cmd). Reading a stream
 * of a run still going returns what is there and then blocks for more
 * until the run ends (EOF then); result waits for the end. With
 * fail_at_end, EOF of a run that could not complete is its -errno instead
 * (`cat exec` then ends non-zero).
 */
struct sbx_run_reader;
int sbx_run_reader_open(struct sbx_lease *l, unsigned long n, const char *file, bool fail_at_end,
			struct sbx_run_reader **out);
/* A reader of r's stdout (a read-write open of exec streaming its own run): its
 * process's death stops the run, where a reader from sbx_run_reader_open only
 * stops watching. */
int sbx_run_reader_of(struct sbx_run *r, struct sbx_run_reader **out);
ssize_t sbx_run_reader_read(struct sbx_run_reader *rd, char *buf, size_t size, off_t off);
void sbx_run_reader_free(struct sbx_run_reader *rd);

/* A line written to runs/N/ctl: `kill` stops run N. */
int sbx_runs_ctl(struct sbx_lease *l, unsigned long n, const char *line, struct sbx_error *err);

#endif
