/*
 * fs_prefetch — reads in bulk for a remote lease's fs/ (fs_prefetch.c):
 * the setting, and the hook fs_cached_file.c calls before a download.
 */
#ifndef SBX_FS_PREFETCH_H
#define SBX_FS_PREFETCH_H

#include <stdbool.h>
#include <sys/types.h>

#include "provider.h"

struct sbx_lease;

/* A second download from one directory within this window fetches the others. */
#define SBX_PREFETCH_WINDOW_MS 2000
/* Files larger than this are never prefetched. */
#define SBX_PREFETCH_FILE_MAX (256L << 10)
/* At most this many bytes of contents ... */
#define SBX_PREFETCH_BATCH_BYTES (8L << 20)
/* ... and files per request. */
#define SBX_PREFETCH_BATCH_FILES 512

/* Turns prefetching on (the default) or off (-o prefetch=0), for every lease. */
void sbx_prefetch_set(bool on);

/*
 * Called by an open that must download path (remote attributes st) into
 * the cache file fd: notes the download and, when a file of the same
 * directory was downloaded within SBX_PREFETCH_WINDOW_MS, fetches path and
 * the directory's other small regular files in one request (the provider's
 * read_many), with those of the sibling directories whose listings are
 * fresh in the cache (a walk's), seeding their content entries. True when
 * path's bytes are in fd (*got of them); false: download it as usual (prefetch off, not due,
 * unsupported, or the batch failed: the download then reports any fault).
 */
bool sbx_prefetch_open(struct sbx_lease *l, const char *path, const struct sbx_stat *st, int fd,
		       off_t *got);

#endif
