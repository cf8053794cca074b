/*
 * watch — change notification for an E2B instance: one background thread
 * keeps a filesystem.Filesystem/WatchDir stream (recursive) open on the
 * lease's working tree and calls the core's callback with the absolute
 * path of every change, so that what a background job or an agent does
 * inside the sandbox reaches the mount's caches at once. After a
 * reconnect (events may have been missed) it calls back with NULL:
 * "anything may have changed".
 *
 * Not a cache and not a poller: it only forwards envd's events. Paths
 * outside the watched tree are not reported (watching "/" would put
 * inotify watches on the whole sandbox, /proc included).
 */
#include "e2b/e2b.h"
#include "base/xalloc.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/pathutil.h"

#define E2B_WATCH_ROOT "/home/user"
#define E2B_WATCH_BACKOFF_MAX_MS 5000L

struct e2b_watch {
	struct e2b_inst *in;
	pthread_t th;
	atomic_int stop;
	void (*cb)(void *ctx, const char *path);
	void *ctx;
	char root[PATH_MAX];
	bool had_stream; /* a stream was up before: a new one means a resync */
	bool up;	 /* the current stream started */
};

static void nap(struct e2b_watch *w, long ms)
{
	for (; ms > 0 && !atomic_load(&w->stop); ms -= 50) {
		struct timespec ts = {0, (ms > 50 ? 50 : ms) * 1000000L};
		nanosleep(&ts, NULL);
	}
}

static int watch_message(void *ctx, const char *json, size_t len)
{
	struct e2b_watch *w = ctx;
	enum e2b_watch_kind kind;
	char name[PATH_MAX], path[PATH_MAX * 2];
	if (e2b_watch_event_parse(json, len, &kind, name, sizeof(name)))
		return 0; /* a message we do not know: ignore, like the SDK */
	switch (kind) {
	case E2B_WATCH_START:
		w->up = true;
		if (w->had_stream)
			w->cb(w->ctx, NULL);
		w->had_stream = true;
		break;
	case E2B_WATCH_EVENT:
		if (!*name)
			break;
		snprintf(path, sizeof(path), "%s/%s", sbx_path_prefix(w->root), name);
		/*
		 * Our own uploads pass through a temporary name: its events say
		 * nothing the cache needs (the Move's destination is reported
		 * too), and taking them as changes would drop the directory's
		 * listing for every file a `tar x` writes. Nor do the events of
		 * our own metadata batches (e2b_own_echo).
		 */
		if (!e2b_is_temp_name(path) && !e2b_own_echo(w->in, path))
			w->cb(w->ctx, path);
		break;
	default:
		break;
	}
	return 0;
}

static void *watch_main(void *arg)
{
	struct e2b_watch *w = arg;
	struct e2b_stream_opts o = {.cancel = &w->stop};
	long backoff = 250;
	while (!atomic_load(&w->stop)) {
		struct sbx_error e = SBX_ERROR_INIT;
		json_t *req;
		bool paused;
		int rc;
		pthread_mutex_lock(&w->in->lock);
		paused = w->in->paused;
		pthread_mutex_unlock(&w->in->lock);
		if (paused) {
			/* A paused sandbox changes nothing; reconnect soon after resume. */
			nap(w, 200);
			continue;
		}
		req = sbx_xjson(json_pack("{s:s,s:b}", "path", w->root, "recursive", 1));
		w->up = false;
		rc = e2b_rpc_stream(w->in, "filesystem.Filesystem/WatchDir", req, &o, watch_message,
				    w, "watch", &e);
		json_decref(req);
		if (atomic_load(&w->stop))
			break;
		if (w->up)
			backoff = 250;
		if (rc)
			sbx_log(SBX_LOG_DEBUG, "e2b: %s: %s", w->in->base.id, e.msg);
		nap(w, backoff);
		backoff =
		    backoff * 2 > E2B_WATCH_BACKOFF_MAX_MS ? E2B_WATCH_BACKOFF_MAX_MS : backoff * 2;
	}
	return NULL;
}

static void watch_free(struct e2b_watch *w)
{
	if (!w)
		return;
	atomic_store(&w->stop, 1);
	pthread_join(w->th, NULL);
	free(w);
}

void e2b_watch_stop(struct e2b_inst *in)
{
	pthread_mutex_lock(&in->watch_lock);
	watch_free(in->watch);
	in->watch = NULL;
	pthread_mutex_unlock(&in->watch_lock);
}

void e2b_set_notify(struct sbx_instance *inst, void (*cb)(void *ctx, const char *path), void *ctx)
{
	struct e2b_inst *in = e2b_of(inst);
	struct e2b_watch *w;
	bool paused;
	pthread_mutex_lock(&in->watch_lock);
	watch_free(in->watch);
	in->watch = NULL;
	if (cb && (w = sbx_xcalloc(1, sizeof(*w)))) {
		w->in = in;
		w->cb = cb;
		w->ctx = ctx;
		snprintf(w->root, sizeof(w->root), "%s",
			 in->workdir ? in->workdir : E2B_WATCH_ROOT);
		if (pthread_create(&w->th, NULL, watch_main, w))
			free(w);
		else
			in->watch = w;
		/*
		 * fs/'s first use: the owner tables load beside its first lookups
		 * (not from a paused sandbox: a failed read would hold for 5 s).
		 */
		pthread_mutex_lock(&in->lock);
		paused = in->paused;
		pthread_mutex_unlock(&in->lock);
		if (!paused)
			sbx_rmeta_ids_prefetch(&in->ids);
	}
	pthread_mutex_unlock(&in->watch_lock);
}
