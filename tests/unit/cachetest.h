/*
 * cachetest — the fixture shared by the check_cache suites: a lease built
 * by hand (no mount, no FUSE) whose provider is a fresh memprov and whose
 * fs/ is sbx_fs_cached_ops, plus shell-like helpers (cat, ls) that fail
 * the running test on error.
 */
#ifndef SBX_CACHETEST_H
#define SBX_CACHETEST_H

#include <check.h>
#include <stdbool.h>

#include "cache.h"
#include "fsmirror.h"
#include "memprov.h"

extern const struct sbx_fs_ops *F;
extern struct memprov *mp;
extern struct sbx_lease *L;
extern struct sbx_error E;

void cachetest_setup(void);
void cachetest_teardown(void);

void put(const char *path, const char *text);
int gattr(const char *path, struct stat *st);
struct sbx_fs_file *xopen(const char *path, int flags, mode_t mode);
void xwrite(struct sbx_fs_file *f, const char *text, off_t off);
char *slurp(struct sbx_fs_file *f); /* a whole open file (caller frees) */
char *cat(const char *path);	    /* open, read, close (caller frees) */
void ck_remote(const char *path, const char *want);
void ck_cat(const char *path, const char *want);
void ck_no_error(void);
void ck_error_mentions(const char *what);

struct names {
	int n, with_st;
	char seen[4096];
};

int count_fill(void *ctx, const char *name, const struct stat *st);
struct names ls(const char *path);
bool listed(const char *dir, const char *name);

/* The contents suite (check_cache_files.c). */
TCase *cache_files_tcase(void);

#endif
