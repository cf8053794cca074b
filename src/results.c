/* results — the bound on a lease's results/ (see results.h). */
#include "results.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/xalloc.h"

struct result_file {
	unsigned long n;
	char name[64];
};

static int by_number_desc(const void *a, const void *b)
{
	unsigned long x = ((const struct result_file *)a)->n,
		      y = ((const struct result_file *)b)->n;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* The files N.ext of dir, newest first; *count set. Caller frees. */
static struct result_file *list_results(const char *dir, size_t *count)
{
	struct result_file *v = NULL;
	size_t n = 0, cap = 0;
	DIR *d = opendir(dir);
	*count = 0;
	if (!d)
		return NULL;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		unsigned long num = strtoul(de->d_name, &end, 10);
		if (end == de->d_name || *end != '.' || strlen(de->d_name) >= sizeof(v->name))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			v = sbx_xrealloc(v, cap * sizeof(*v));
		}
		v[n].n = num;
		memcpy(v[n].name, de->d_name, strlen(de->d_name) + 1); /* length checked above */
		n++;
	}
	closedir(d);
	qsort(v, n, sizeof(*v), by_number_desc);
	*count = n;
	return v;
}

void sbx_results_prune(struct sbx_lease *l, unsigned long first_new)
{
	char *dir = sbx_lease_path(l, "results");
	size_t n;
	struct result_file *v = list_results(dir, &n);
	unsigned long long total = 0;
	for (size_t i = 0; i < n; i++) {
		char path[4200];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, v[i].name);
		if (lstat(path, &st) == 0)
			total += (unsigned long long)st.st_size;
		if (v[i].n >= first_new)
			continue;
		if (i >= SBX_RESULTS_KEEP || total > SBX_RESULTS_MAX_BYTES)
			unlink(path);
	}
	free(v);
	free(dir);
}
