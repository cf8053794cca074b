/*
 * run — one command or code run on a lease, executed on its own thread so
 * that a read-write open of `exec` can stream the output while it runs.
 *
 * A run collects stdout/stderr in memory as they arrive, and when it ends
 * writes the lease's `stdout`, `stderr`, `result` (and results/N.*) files,
 * journals itself, and invalidates what is cached of the lease's fs/.
 * It is not a job system: nothing queues, every run starts at once.
 */
#ifndef SBX_RUN_H
#define SBX_RUN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/buf.h"
#include "lease.h"

enum sbx_run_kind { SBX_RUN_SHELL, SBX_RUN_CODE };

struct sbx_run {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refs;                /* protected by lock */
	struct sbx_lease *lease; /* holds a reference */
	enum sbx_run_kind kind;
	char *language; /* code runs */
	char *text;
	struct sbx_buf out; /* (lock) what a streaming reader sees: stdout, then the value */
	struct sbx_buf err; /* (lock) stderr */
	bool done;          /* (lock) */
	int rc;             /* (lock) 0 or -errno of the provider call */
	atomic_int cancel;  /* its waiter was killed: the provider stops the run */
	pthread_t thread;
};

/*
 * Set once by the FUSE layer: true when the process whose request the
 * calling thread serves is being killed. A waiter polls it, because the
 * kernel keeps such a process waiting for our answer however it is
 * signalled.
 */
void sbx_run_set_abandon_check(bool (*fn)(void));

/* Starts a run of text on l (takes its own lease reference). */
int sbx_run_start(struct sbx_lease *l, enum sbx_run_kind kind, const char *language,
		  const char *text, struct sbx_run **out, struct sbx_error *err);
/*
 * Waits for the end; returns the run's rc (0 even for a non-zero exit), or
 * -EINTR at once when the waiting process is killed (the run is then
 * cancelled: the provider stops it).
 */
int sbx_run_wait(struct sbx_run *r);
/*
 * Copies output bytes at [off, off+size) into buf, waiting until they exist
 * or the run ends. Returns the byte count (0 = EOF after the end) or the
 * run's -errno when it failed and nothing is left to read.
 */
ssize_t sbx_run_read(struct sbx_run *r, char *buf, size_t size, off_t off); /* -EINTR too */
void sbx_run_put(struct sbx_run *r);

/* The lease's `env` lines as a NULL-terminated "K=V" array (one allocation: free() it). */
char **sbx_run_envs(struct sbx_lease *l);

/* Languages accepted by code.* files: "py" -> "python" etc.; NULL if unknown. */
const char *sbx_run_language(const char *ext);

#endif
