/* cachetest — see cachetest.h. */
#include "cachetest.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"

const struct sbx_fs_ops *F = &sbx_fs_cached_ops;
struct memprov *mp;
struct sbx_lease *L;
struct sbx_error E;
/* Only what a lease of a real mount uses from it here: the timer's condition. */
static struct sbx_mount M;

void cachetest_setup(void)
{
	char tmpl[] = "/tmp/check_cache.XXXXXX";
	struct sbx_buf b = SBX_BUF_INIT;
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	mp = memprov_new();
	L = calloc(1, sizeof(*L));
	snprintf(L->name, sizeof(L->name), "t");
	L->refs = 1;
	memset(&M, 0, sizeof(M));
	pthread_cond_init(&M.timer_cond, NULL);
	L->mount = &M;
	pthread_mutex_init(&L->lock, NULL);
	pthread_cond_init(&L->cond, NULL);
	sbx_spec_init(&L->spec);
	L->spec.auto_resume = true;
	L->prov = &mp->prov;
	L->inst = &mp->inst;
	L->state = SBX_LS_RUNNING;
	L->dir = strdup(tmpl);
	sbx_buf_addf(&b, "%s/cache", tmpl);
	L->cache = sbx_cache_new(b.buf);
	sbx_buf_release(&b);
	sbx_error_clear(&E);
}

void cachetest_teardown(void)
{
	sbx_cache_free(L->cache);
	sbx_rm_rf(L->dir);
	free(L->dir);
	sbx_spec_free(&L->spec);
	pthread_mutex_destroy(&L->lock);
	pthread_cond_destroy(&L->cond);
	pthread_cond_destroy(&M.timer_cond);
	free(L);
	memprov_free(mp);
}

/* ---- helpers ------------------------------------------------------------------ */

void put(const char *path, const char *text)
{
	memprov_put(mp, path, text, strlen(text), 0);
}

int gattr(const char *path, struct stat *st)
{
	sbx_error_clear(&E);
	return F->getattr(L, path, NULL, st, &E);
}

struct sbx_fs_file *xopen(const char *path, int flags, mode_t mode)
{
	struct sbx_fs_file *f = NULL;
	sbx_error_clear(&E);
	int rc = F->open(L, path, flags, mode, &f, &E);
	ck_assert_msg(rc == 0, "open %s: %d %s", path, rc, E.msg);
	return f;
}

void xwrite(struct sbx_fs_file *f, const char *text, off_t off)
{
	ck_assert_int_eq(F->write(f, text, strlen(text), off, &E), (ssize_t)strlen(text));
}

/* Reads a whole open file (caller frees). */
char *slurp(struct sbx_fs_file *f)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char chunk[65536];
	ssize_t n;
	while ((n = F->read(f, chunk, sizeof(chunk), (off_t)b.len, &E)) > 0)
		sbx_buf_add(&b, chunk, (size_t)n);
	ck_assert_int_ge(n, 0);
	return sbx_buf_detach(&b, NULL);
}

/* cat path: open, read, close (flush + release). */
char *cat(const char *path)
{
	struct sbx_fs_file *f = xopen(path, O_RDONLY, 0);
	char *s = slurp(f);
	ck_assert_int_eq(F->flush(f, &E), 0);
	F->release(f);
	return s;
}

void ck_remote(const char *path, const char *want)
{
	size_t len;
	char *got = memprov_get(mp, path, &len);
	ck_assert_msg(got != NULL, "%s missing remotely", path);
	ck_assert_str_eq(got, want);
	free(got);
}

void ck_cat(const char *path, const char *want)
{
	char *got = cat(path);
	ck_assert_str_eq(got, want);
	free(got);
}

/* The lease's `error` file ("" if none; caller frees). */
static char *error_text(void)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char *p = sbx_lease_path(L, "error");
	sbx_read_file(p, &b, 65536);
	free(p);
	return sbx_buf_detach(&b, NULL);
}

void ck_no_error(void)
{
	char *t = error_text();
	ck_assert_str_eq(t, "");
	free(t);
}

void ck_error_mentions(const char *what)
{
	char *t = error_text();
	ck_assert_msg(strstr(t, what) != NULL, "error file \"%s\" lacks \"%s\"", t, what);
	free(t);
}

int count_fill(void *ctx, const char *name, const struct stat *st)
{
	struct names *nm = ctx;
	nm->n++;
	nm->with_st += st != NULL;
	if (strlen(nm->seen) + strlen(name) + 2 < sizeof(nm->seen)) {
		strcat(nm->seen, name);
		strcat(nm->seen, " ");
	}
	return 0;
}

struct names ls(const char *path)
{
	struct names nm = {0};
	sbx_error_clear(&E);
	ck_assert_int_eq(F->readdir(L, path, count_fill, &nm, &E), 0);
	return nm;
}

bool listed(const char *dir, const char *name)
{
	struct names nm = ls(dir);
	char needle[300];
	snprintf(needle, sizeof(needle), "%s ", name);
	return strstr(nm.seen, needle) == nm.seen ||
	       (snprintf(needle, sizeof(needle), " %s ", name), strstr(nm.seen, needle) != NULL);
}
