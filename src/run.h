/*
 * run — one command or code run on a lease, executed on its own thread so
 * that a read-write open of `exec` can stream the output while it runs.
 *
 * A run is numbered per lease (N = 1, 2, ...) and lives in the lease's
 * state directory as runs/N/ (see runs.h): its stdout and stderr stream
 * into files there as they arrive, so the daemon holds no output in
 * memory; when it ends it writes runs/N/result (JSON, always valid),
 * journals itself, and invalidates what is cached of the lease's fs/.
 * It is not a job system: nothing queues, every run starts at once.
 */
#ifndef SBX_RUN_H
#define SBX_RUN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "base/buf.h"
#include "lease.h"

enum sbx_run_kind { SBX_RUN_SHELL, SBX_RUN_CODE };

/* A command text longer than this runs from a file staged in the sandbox (execve's
 * one-argument limit is 128 KiB, and the shell's wrapper adds to it). */
#define SBX_RUN_ARG_MAX (64 * 1024)

/* How many ancestors of a run's writer are remembered (the per-caller rule). */
#define SBX_RUN_CHAIN 16

/*
 * Who started a run: the writer's process and its ancestors, nearest
 * first, each with its start time (a reused pid is another process).
 */
struct sbx_run_owner {
	pid_t chain[SBX_RUN_CHAIN];
	unsigned long long start[SBX_RUN_CHAIN]; /* clock ticks after boot (/proc/PID/stat) */
	int len;
};

struct sbx_run {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refs;		 /* protected by lock */
	struct sbx_lease *lease; /* holds a reference */
	unsigned long n;	 /* runs/N */
	char *dir;		 /* state_dir/leases/NAME/runs/N */
	struct sbx_run_owner owner;
	enum sbx_run_kind kind;
	char *language;		 /* code runs */
	char *text;		 /* freed when the run ends (it is in runs/N/cmd) */
	int out_fd, err_fd;	 /* the runs/N/stdout and stderr files, while it runs */
	size_t out_len, err_len; /* (lock) bytes in those files */
	int save_rc;		 /* (lock) first -errno of keeping the output, 0 */
	char save_why[192];	 /* (lock) its reason */
	bool done;		 /* (lock) */
	int rc;			 /* (lock) 0 or -errno: the run could not complete */
	atomic_int cancel;	 /* its waiter was killed, or `kill` on runs/N/ctl */
	atomic_bool killed_by_ctl;
	pthread_t thread;
};

/*
 * Set once by the FUSE layer: true when the process whose request the
 * calling thread serves is being killed. A waiter polls it, because the
 * kernel keeps such a process waiting for our answer however it is
 * signalled.
 */
void sbx_run_set_abandon_check(bool (*fn)(void));
/*
 * The daemon is stopping (SIGTERM, SIGINT, SIGHUP): every wait for a run
 * or a terminal ends as a killed waiter's does (the run is stopped, the
 * waiter gets EINTR), so the stop does not wait for the longest run.
 * Async-signal-safe.
 */
void sbx_run_stop_waits(void);
bool sbx_run_waits_stopped(void);

/*
 * Starts a run of text on l (takes its own lease reference): creates
 * runs/N/ with cmd, stdout and stderr, prunes old runs (runs.h). Fails with
 * the errno of the state dir when the run cannot be kept there.
 */
int sbx_run_start(struct sbx_lease *l, enum sbx_run_kind kind, const char *language,
		  const char *text, const struct sbx_run_owner *owner, struct sbx_run **out,
		  struct sbx_error *err);
/*
 * A run refused before it could start (the first write of `exec` or
 * `code.*` failed: the lease killed, unreachable, paused without
 * autoResume, files that could not go up): recorded as one that could not
 * complete, with rc and why in its result, so that the caller's `cat exec`
 * or `result` answers for it, not for the run before.
 */
void sbx_run_refused(struct sbx_lease *l, enum sbx_run_kind kind, const char *language,
		     const char *text, const struct sbx_run_owner *owner, int rc,
		     const struct sbx_error *why);
/*
 * Waits for the end (the run's writer); returns the run's rc (0 even for a
 * non-zero exit), or -EINTR when the waiting process is killed (the run is
 * then cancelled: the provider stops it).
 */
int sbx_run_wait(struct sbx_run *r);
void sbx_run_put(struct sbx_run *r);

/* The lease's `env` lines as a NULL-terminated "K=V" array (one allocation: free() it). */
char **sbx_run_envs(struct sbx_lease *l);

/* Languages accepted by code.* files: "py" -> "python" etc.; NULL if unknown. */
const char *sbx_run_language(const char *ext);

#endif
