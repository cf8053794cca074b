/*
 * cache_int — what cache.c (attributes, listings) and cache_file.c
 * (contents) share: the tables' structs and a few helpers. Private to
 * those two files; everyone else uses cache.h.
 */
#ifndef SBX_CACHE_INT_H
#define SBX_CACHE_INT_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "base/buf.h"
#include "base/pathttl.h"
#include "base/pathutil.h"
#include "base/xalloc.h"
#include "cache.h"

struct cattr {
	UT_hash_handle hh;
	char *path;
	bool has_st, neg;
	long long expires;
	unsigned long set_seq; /* c->seq when stored */
	struct sbx_stat st;
	char *link;
	long long link_expires;
};

struct cname {
	UT_hash_handle hh;
	char *name;
};

struct cdir {
	UT_hash_handle hh;
	char *path;
	long long expires;
	long long child_listed; /* when a listing of one of its entries was stored (a walk) */
	struct cname *names;
};

struct sbx_cfile {
	UT_hash_handle hh;
	char *path;	/* (T) key while linked */
	char *file;	/* the local cache file */
	int fd;		/* (T) open while refs > 0 or dirty; fixed while a reference is held */
	int refs;	/* (T) */
	bool linked;	/* (T) in c->files under path */
	bool busy;	/* (T) claimed by an open or an upload */
	bool uploading; /* (T) busy is an upload's claim */
	unsigned long uploads; /* (T) uploads begun (sbx_cache_wait_uploads tells them apart) */
	int shared_opens;      /* (T) opens of dirty data going on beside an upload's claim */
	bool have_data;	       /* (T) */
	bool dirty;	       /* (T) */
	bool remote;	       /* (T) */
	bool stamped;	       /* (T) */
	bool stamp_loose;      /* (T) mtime unknown: the size vouches until the epoch moves */
	off_t stamp_size;      /* (T) */
	struct timespec stamp_mtime; /* (T) */
	mode_t mode;		     /* (T) */
	unsigned long wgen;	     /* (T) */
	unsigned long stamp_epoch;   /* (T) c->epoch when stamped */
	unsigned long stamp_seq;     /* (T) c->seq when stamped (or restamped) */
	unsigned long open_epoch;    /* (T) c->epoch at its latest open */
	long long used_ms;	     /* (T) for eviction */
	off_t bytes;		     /* (T) size when last closed */
	long long retry_at;	     /* (T) no orphan retry before (a failed upload) */
	unsigned fails;		     /* (T) uploads failed in a row: the back-off doubles */
	bool bg_failed;		     /* (T) its last background upload failed */
	/* (T) chmod/chown/utimens waiting for the upload (cache_defer.c); mode is `mode` */
	bool pend_mode, pend_times, pend_owner;
	struct timespec pend_ts[2];
	uid_t pend_uid;
	gid_t pend_gid;
	bool attrs_closed;	    /* (T) the upload in flight took them: no more join it */
	bool streaming;		    /* (T) an open's download is still arriving (stream_*) */
	off_t stream_have;	    /* (T) bytes of it in the file so far */
	off_t stream_need;	    /* (T) the least a waiting read needs (0: none waits) */
	int stream_rc;		    /* (T) how the last one ended (-errno) */
	void *stream_src;	    /* (T) the sandbox it comes from, lent to far reads */
	unsigned stream_lent;	    /* (T) far reads using stream_src (stream_end waits) */
	bool stream_dropped;	    /* (T) no handle wanted the rest: no open joins it */
	struct sbx_cfile_attrs fly; /* (T) what it took: still shown until end_upload */
};

/* A lookup that failed lately (sbx_cache_fail_put). */
struct cfail {
	char *path;
	struct sbx_error err;
	long long until;
};

#define SBX_CACHE_FAILS 8

struct sbx_cache {
	pthread_mutex_t lock; /* protects everything below but dir */
	pthread_cond_t cond;  /* a busy claim was released */
	char *dir;
	unsigned long gen;
	unsigned long epoch; /* changes made outside (a run, a change report) seen so far */
	unsigned long seq;   /* orders attributes stored and copies stamped */
	long ttl_ms, neg_ttl_ms, retry_ms;
	unsigned sweep_at;   /* attribute count that triggers the next sweep */
	const void *watched; /* the instance asked for change notifications */
	struct cattr *attrs;
	struct cdir *dirs;
	struct sbx_cfile *files;
	struct sbx_pathttl echoes; /* paths we changed lately (their notifications are echoes) */
	struct cfail fails[SBX_CACHE_FAILS]; /* lookups that failed lately */
	unsigned fail_next;		     /* the slot the next one takes */
	bool up_owner; /* up_uid/up_gid: the owner a new file this mount uploads gets */
	uid_t up_uid;
	gid_t up_gid;
	char pf_dir[4096];    /* the directory of the last download (cache_prefetch.c) */
	char links_dir[4096]; /* the directory whose links were last asked (links_try) */
	unsigned long links_gen;
	long long links_at;
	long long pf_at;	/* when it began */
	struct cache_pin *pins; /* directory times set while uploads below were queued */
	size_t npins;
	unsigned streams; /* files whose download is arriving (stream_begin to stream_end) */
};

/* A directory's times the mount set, laid again after the uploads below it (cache_defer.c). */
struct cache_pin {
	char *dir;
	struct timespec ts[2];
};
#define CACHE_PINS_MAX 256
/*
 * The mount added or removed path: its directory's mtime moved past any
 * times pinned on it, which are dropped (lock held).
 */
void cache_dir_times_unpin_locked(struct sbx_cache *c, const char *path);

static inline void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n, sz);
	if (!p)
		abort();
	return p;
}

/* ---- paths --------------------------------------------------------------- */

/* Splits "/a/b" into parent "/a" (into buf) and returns "b"; NULL for "/". */
static inline const char *split(const char *path, char *parent, size_t size)
{
	size_t n = sbx_path_dirlen(path);
	const char *name = path + (n > 1 ? n + 1 : 1);
	if (!n || !*name || n >= size)
		return NULL;
	memcpy(parent, path, n);
	parent[n] = '\0';
	return name;
}

static inline char *join(const char *dir, const char *name)
{
	struct sbx_buf b = SBX_BUF_INIT;
	sbx_buf_addf(&b, "%s/%s", sbx_path_prefix(dir), name);
	return sbx_buf_detach(&b, NULL);
}

/* Sets path's attributes (st NULL: negative) fresh now (lock held). */
void cache_attr_set_locked(struct sbx_cache *c, const char *path, const struct sbx_stat *st);
/* sbx_cache_dir_nlink with the lock held. */
void cache_dir_nlink_locked(struct sbx_cache *c, const char *path, struct sbx_stat *st,
			    bool any_age);
/* Forgets path's attributes (lock held). */
void cache_attr_drop_locked(struct sbx_cache *c, const char *path);
/* Remembers that we changed path just now (lock held). */
void cache_echo_note_locked(struct sbx_cache *c, const char *path);
/* path's fresh attributes in the cache, if it holds them (no listing's: lock held). */
bool cache_attr_peek_locked(struct sbx_cache *c, const char *path, struct sbx_stat *st);
/* A new entry at path: its name joins a listed parent, st (or nothing) its attributes. */
void cache_note_added_locked(struct sbx_cache *c, const char *path, const struct sbx_stat *st);
/* A new content entry for path, in c->files, no reference, no file yet (lock held). */
struct sbx_cfile *cache_cfile_add_locked(struct sbx_cache *c, const char *path);
/* Gives cf a new, empty cache file (lock held; cache_file.c). */
int cache_cfile_create_locked(struct sbx_cache *c, struct sbx_cfile *cf);
/* Drops clean, unused entries beyond SBX_CACHE_KEEP_BYTES, oldest first (lock held). */
void cache_evict_locked(struct sbx_cache *c);
/* Frees every content entry, keeping dirty files on disk (cache_file.c). */
void cache_files_free(struct sbx_cache *c);
/* Takes back the dirty files a previous cache left in c->dir (cache_file.c). */
void cache_files_adopt(struct sbx_cache *c);
/* Writes cf's FILE.attr (its waiting chmod/chown/utimens), or removes it when none wait (lock
 * held). */
void cache_defer_side_locked(struct sbx_cfile *cf);
/* cf is clean or gone: forgets what waited and removes FILE.attr (lock held). */
void cache_defer_drop_locked(struct sbx_cfile *cf);
/* Reads FILE.attr of an entry taken back from a previous daemon. */
void cache_defer_adopt(struct sbx_cfile *cf);
/* Shows a waiting chmod in st (lock held). */
void cache_defer_overlay_locked(const struct sbx_cfile *cf, struct sbx_stat *st);

#endif
