/*
 * local_check.h — what the two files of the check_local program share:
 * the provider under test, the temporary state directory, the spec of the
 * shared lease, and helpers that drive runs and files through the ops.
 */
#ifndef LOCAL_CHECK_H
#define LOCAL_CHECK_H

#include <check.h>
#include <stdbool.h>

#include "base/buf.h"
#include "base/sysutil.h"
#include "provider.h"

struct outs {
	struct sbx_buf out, err;
};

extern const struct sbx_provider *P;
extern char state_dir[];	   /* the mount's state dir (temporary) */
extern char marker[128];	   /* a file in the host's /root */
extern struct sbx_spec spec;	   /* memoryMB 64, diskMB 16, two envs */
extern struct sbx_instance *lease; /* the shared lease (case "lease") */

/* Runs shell text; the exit code (a failed call fails the test). */
int run_ex(struct sbx_instance *in, const char *sh, const char *cwd, const char *const *envs,
	   long timeout_ms, struct outs *o, bool *timed_out);
int run(struct sbx_instance *in, const char *sh, struct outs *o);
/* create() under the lease name "check"; NULL with err filled on failure. */
struct sbx_instance *create(struct sbx_spec *s, struct sbx_error *err);
/* kill() (asserted) and release(). */
void kill_release(struct sbx_instance *in);
/* Kills every lease still in the state dir. */
void kill_leftovers(void);
void msleep(long ms);
/* The whole file through read(); *e is its result. Caller frees. */
char *read_file(struct sbx_instance *in, const char *path, int *e);
void write_file(struct sbx_instance *in, const char *path, const char *text);
/* Pauses and resumes a busy counter in the lease, asserting it stops and goes on. */
void check_pause(struct sbx_instance *in);
/* Whether a mount whose line contains dir is in /proc/self/mounts. */
bool mounted(const char *dir);
/* The process does not exist (or is a zombie). */
bool proc_gone(pid_t pid);
/* The case of tests that make leases of their own (check_local_life.c). */
TCase *check_local_life_tcase(void);

#endif
