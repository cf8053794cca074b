/*
 * idmap — `-o idmap=user`, as sshfs's: on a remote lease's fs/, the
 * sandbox user (whom the provider's uploads and runs act as) shows as the
 * mount's owner, and the owner's ids given to chown go back to the
 * sandbox user; every other id passes through. Host tools that want the
 * files they work on to be their user's (git's "dubious ownership", ssh's
 * key files) then work on what the sandbox user owns. Off by default: fs/ shows the sandbox's
 * numeric ids (doc/CONTRACT.md). A local lease's files are the host's own ids (its files are made
 * as the caller), so nothing is mapped there.
 *
 * The sandbox user's ids are learned once per lease and daemon: from the
 * owner uploads give, when the cache knows it already, else by running
 * `id` in the sandbox at the first fs/ lookup of a running lease (never
 * resuming a paused one for it). Until then ids pass
 * through; a failed probe is tried again 10 s later.
 */
#include "idmap.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/lockorder.h"
#include "base/log.h"
#include "base/sysutil.h"
#include "cache.h"
#include "lease.h"

#define IDMAP_RETRY_MS 10000
#define IDMAP_PROBE_MS 20000

static bool idmap_user;

void sbx_idmap_set_user(bool on)
{
	idmap_user = on;
}

/* Whether l's ids are mapped: the option, on a lease whose files are not the host's. */
static bool mapped(const struct sbx_lease *l)
{
	return idmap_user && l && !(l->prov->caps & SBX_CAP_AS_CALLER);
}

static bool known(struct sbx_lease *l, uid_t *uid, gid_t *gid)
{
	if (atomic_load_explicit(&l->ids.state, memory_order_acquire) != SBX_IDS_KNOWN)
		return false;
	*uid = l->ids.uid;
	*gid = l->ids.gid;
	return true;
}

static void learned(struct sbx_lease *l, uid_t uid, gid_t gid, const char *how)
{
	l->ids.uid = uid;
	l->ids.gid = gid;
	atomic_store_explicit(&l->ids.state, SBX_IDS_KNOWN, memory_order_release);
	sbx_log(SBX_LOG_INFO, "lease %s: idmap=user: the sandbox user %u:%u shows as %u:%u (%s)",
		l->name, (unsigned)uid, (unsigned)gid, (unsigned)getuid(), (unsigned)getgid(), how);
}

static int collect(void *ctx, enum sbx_stream s, const char *data, size_t len)
{
	if (s == SBX_STDOUT && ((struct sbx_buf *)ctx)->len < 4096)
		sbx_buf_add(ctx, data, len);
	return 0;
}

static bool lease_running(struct sbx_lease *l)
{
	sbx_lock(&l->lock, SBX_LOCK_LEASE);
	bool running = l->state == SBX_LS_RUNNING && !l->transition && l->inst;
	sbx_unlock(&l->lock, SBX_LOCK_LEASE);
	return running;
}

/* `id -u; id -g` in the sandbox: 0 with the ids, else -1 (logged). */
static int probe(struct sbx_lease *l, uid_t *uid, gid_t *gid)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_instance *inst;
	struct sbx_buf out = SBX_BUF_INIT;
	struct sbx_run_sink sink = {&out, collect, NULL};
	struct sbx_run_req req = {.shell = "echo sbxfs-ids $(id -u) $(id -g)",
				  .timeout_ms = IDMAP_PROBE_MS};
	struct sbx_run_result res = {0};
	const char *ids;
	unsigned u, g;
	int rc = -1;
	if (!l->prov->run || !lease_running(l) || sbx_lease_use(l, &inst, &err))
		return -1;
	/* The marker: a login shell's banner may come first. */
	if (l->prov->run(inst, &req, &sink, &res, &err) == 0 && res.exit_code == 0 && out.buf &&
	    (ids = strstr(out.buf, "sbxfs-ids ")) && sscanf(ids + 10, "%u %u", &u, &g) == 2) {
		*uid = u;
		*gid = g;
		rc = 0;
	} else {
		sbx_log(SBX_LOG_WARN, "lease %s: idmap=user: `id` in the sandbox: %s", l->name,
			err.err ? err.msg : "no ids in its output");
	}
	sbx_lease_unuse(l);
	sbx_buf_release(&out);
	return rc;
}

void sbx_idmap_learn(struct sbx_lease *l)
{
	int idle = SBX_IDS_UNKNOWN;
	uid_t uid;
	gid_t gid;
	if (!mapped(l) ||
	    atomic_load_explicit(&l->ids.state, memory_order_acquire) == SBX_IDS_KNOWN)
		return;
	if (l->cache && sbx_cache_file_owner_known(l->cache, &uid, &gid)) {
		if (atomic_compare_exchange_strong(&l->ids.state, &idle, SBX_IDS_PROBING))
			learned(l, uid, gid, "the owner its uploads give");
		return;
	}
	if (sbx_now_ms() < atomic_load(&l->ids.retry_at) ||
	    !atomic_compare_exchange_strong(&l->ids.state, &idle, SBX_IDS_PROBING))
		return; /* another thread probes: ids pass through meanwhile */
	if (probe(l, &uid, &gid) == 0) {
		learned(l, uid, gid, "id in the sandbox");
		return;
	}
	atomic_store(&l->ids.retry_at, sbx_now_ms() + IDMAP_RETRY_MS);
	atomic_store(&l->ids.state, SBX_IDS_UNKNOWN);
}

void sbx_idmap_out(struct sbx_lease *l, struct stat *st)
{
	uid_t uid;
	gid_t gid;
	if (!mapped(l) || !known(l, &uid, &gid))
		return;
	if (st->st_uid == uid)
		st->st_uid = getuid();
	if (st->st_gid == gid)
		st->st_gid = getgid();
}

uid_t sbx_idmap_uid_in(struct sbx_lease *l, uid_t uid)
{
	uid_t su;
	gid_t sg;
	return mapped(l) && known(l, &su, &sg) && uid == getuid() ? su : uid;
}

gid_t sbx_idmap_gid_in(struct sbx_lease *l, gid_t gid)
{
	uid_t su;
	gid_t sg;
	return mapped(l) && known(l, &su, &sg) && gid == getgid() ? sg : gid;
}
