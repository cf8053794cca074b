/*
 * local — the `local` provider: sandboxes on this machine made of Linux
 * namespaces, an overlay root over a template (the host's / by default), a
 * capped disk (ext4 image or tmpfs) for its writes, and cgroups that cap
 * memory and cpu and freeze the lease.
 *
 * A lease lives in <state_dir>/local/<id>/:
 *   rw/         the disk (diskMB; ext4 on disk.img, or tmpfs): overlay upper/ + work/
 *   disk.img    the sparse ext4 image behind rw/ (when the disk is ext4)
 *   root/       the lease's / (overlay), mounted in the host namespace
 *   init.sock   the lease's sbxfs-init serves runs here (proto.h)
 *   init.log    init's own errors (through a pipe, capped: spawn.c)
 *   lease.json  what attach needs: init pid + start time, cgroups, template
 *   paused      present while paused by SIGSTOP (no freezer available)
 *   net.sock    the API of the lease's slirp4netns (net.c), isolated network only
 * and <state_dir>/local/hostview-*: the host template's allowlist (hostview.c).
 * The init and the mounts outlive the sbxfs daemon, so a remount attaches
 * to the same files and processes. This file is the ops table and the
 * lifecycle; see local.h for the other pieces. It keeps no lease names,
 * timers or lifetimes: those are the core's.
 */
#include "local.h"
#include "base/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/mount.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/sysutil.h"
#include "ascaller.h"
#include "files.h"
#include "proto.h"

static char *cg_mode, *cg_root, *disk_kind; /* owned copies of the settings strings */

static int setting_str(json_t *s, const char *key, char **out, struct sbx_error *err)
{
	json_t *v = json_object_get(s, key);
	if (!v)
		return 0;
	if (!json_is_string(v))
		return sbx_error_set(err, EINVAL, 0, "providers.local.%s: not a string", key);
	free(*out);
	*out = sbx_xstrdup(json_string_value(v));
	return 0;
}

static int setting_long(json_t *s, const char *key, long max, long *out, struct sbx_error *err)
{
	json_t *v = json_object_get(s, key);
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return sbx_error_set(err, EINVAL, 0, "providers.local.%s: not a count", key);
	if (json_integer_value(v) > max)
		return sbx_error_set(err, EINVAL, 0, "providers.local.%s: at most %ld", key, max);
	*out = (long)json_integer_value(v);
	return 0;
}

static void local_shutdown(void)
{
	lcl_hostview_release();
	free(lcl_cfg.state_dir);
	free(lcl_cfg.init_path);
	free(cg_mode);
	free(cg_root);
	free(disk_kind);
	lcl_cfg.state_dir = lcl_cfg.init_path = cg_mode = cg_root = disk_kind = NULL;
	lcl_cfg.cg.mode = lcl_cfg.cg.root = NULL;
}

/* Settings (all optional): diskMB (4096), disk ("auto"|"ext4"|"tmpfs"), cgroup
 * ("auto"|"v1"|"v2"|"none"), cgroupRoot, pidsMax (4096), initPath, readyTimeoutMs. */
static int local_init(const struct sbx_provider_env *env, struct sbx_error *err)
{
	json_t *s = env && env->settings ? env->settings : NULL;
	struct sbx_buf dir = SBX_BUF_INIT;
	int e = 0;

	local_shutdown();
	/* Bounds: the spec's (base/spec.h), the kernel's PID_MAX_LIMIT, an hour. */
	if (s && ((e = setting_long(s, "diskMB", SBX_SPEC_MB_MAX, &lcl_cfg.disk_mb, err)) < 0 ||
		  (e = setting_long(s, "pidsMax", 4194304, &lcl_cfg.cg.pids_max, err)) < 0 ||
		  (e = setting_long(s, "readyTimeoutMs", 3600000, &lcl_cfg.ready_ms, err)) < 0 ||
		  (e = setting_str(s, "cgroup", &cg_mode, err)) < 0 ||
		  (e = setting_str(s, "cgroupRoot", &cg_root, err)) < 0 ||
		  (e = setting_str(s, "disk", &disk_kind, err)) < 0 ||
		  (e = setting_str(s, "initPath", &lcl_cfg.init_path, err)) < 0))
		return e;
	if (cg_mode && strcmp(cg_mode, "auto") && strcmp(cg_mode, "v1") && strcmp(cg_mode, "v2") &&
	    strcmp(cg_mode, "none"))
		return sbx_error_set(err, EINVAL, 0,
				     "providers.local.cgroup: auto, v1, v2 or none");
	if (disk_kind && strcmp(disk_kind, "auto") && strcmp(disk_kind, "ext4") &&
	    strcmp(disk_kind, "tmpfs"))
		return sbx_error_set(err, EINVAL, 0, "providers.local.disk: auto, ext4 or tmpfs");
	lcl_cfg.disk = !disk_kind || !strcmp(disk_kind, "auto") ? LCL_DISK_AUTO
		       : !strcmp(disk_kind, "ext4")		? LCL_DISK_EXT4
								: LCL_DISK_TMPFS;
	lcl_cfg.cg.mode = cg_mode;
	lcl_cfg.cg.root = cg_root;
	if (lcl_cfg.disk_mb <= 0)
		lcl_cfg.disk_mb = 4096;
	sbx_buf_addf(&dir, "%s/local", env && env->state_dir ? env->state_dir : "/var/lib/sbxfs");
	lcl_cfg.state_dir = sbx_buf_detach(&dir, NULL);
	if ((e = sbx_mkdir_p(lcl_cfg.state_dir, 0700)) < 0)
		return sbx_error_set(err, e, 0, "local provider: %s: %s", lcl_cfg.state_dir,
				     strerror(-e));
	return 0;
}

static void local_release(struct sbx_instance *inst)
{
	struct local_inst *li = lcl_inst(inst);
	if (!li)
		return;
	lcl_fwd_stop(li);
	if (li->dirfd >= 0)
		close(li->dirfd);
	if (li->peekfd >= 0 && li->peekfd != li->rootfd)
		close(li->peekfd);
	if (li->rootfd >= 0)
		close(li->rootfd);
	if (li->logfd >= 0)
		close(li->logfd);
	if (li->net_exit_fd >= 0)
		close(li->net_exit_fd);
	free(li->dir);
	free(li->lease);
	free(li->template_name);
	free(li->workdir);
	sbx_spec_free(&li->spec);
	lcl_cg_clear(&li->cg);
	free(li);
}

static struct local_inst *inst_new(const struct sbx_spec *spec, const char *id)
{
	struct local_inst *li = sbx_xcalloc(1, sizeof(*li));
	li->dirfd = li->rootfd = li->peekfd = li->logfd = li->net_exit_fd = -1;
	li->base.prov = &sbx_provider_local;
	snprintf(li->base.id, sizeof(li->base.id), "%s", id);
	li->dir = sbx_xasprintf("%s/%s", lcl_cfg.state_dir, id);
	sbx_spec_init(&li->spec);
	if (spec) {
		sbx_spec_free(&li->spec);
		sbx_spec_copy(&li->spec, spec);
	}
	return li;
}

/*
 * A detached clone of the mount whose root is rootfd, mounted noatime: a
 * link's stat through fs/ reads its text (its st_size is the length of
 * what readlink shows, fuse_ops.c), and that read must not move the
 * link's atime, which lstat on a disk never does. rootfd itself where the
 * kernel refuses (no open_tree, no CAP_SYS_ADMIN): the atime then moves.
 * It pins the overlay as rootfd does, and is closed with it.
 */
static int noatime_clone(int rootfd)
{
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOATIME, .attr_clr = MOUNT_ATTR__ATIME};
	int fd = (int)syscall(SYS_open_tree, rootfd, "",
			      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (fd < 0)
		return rootfd;
	if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		close(fd);
		return rootfd;
	}
	return fd;
}

static int open_dirs(struct local_inst *li, struct sbx_error *err)
{
	struct statfs sf;
	if ((li->dirfd = open(li->dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (li->rootfd = openat(li->dirfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return sbx_error_set(err, errno, 0, "%s: %s", li->dir, strerror(errno));
	if (fstatfs(li->rootfd, &sf) < 0 || sf.f_type != OVERLAYFS_SUPER_MAGIC)
		return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND,
				     "sandbox %s: its root is not mounted", li->base.id);
	li->peekfd = noatime_clone(li->rootfd);
	return 0;
}

static int save_lease(struct local_inst *li, struct sbx_error *err)
{
	struct sbx_buf path = SBX_BUF_INIT;
	char *text = NULL;
	json_t *j = json_pack("{s:s,s:s,s:s,s:I,s:I,s:b,s:s,s:s,s:o}", "id", li->base.id, "lease",
			      li->lease, "template", li->template_name, "init_pid",
			      (json_int_t)li->init_pid, "init_start", (json_int_t)li->init_start,
			      "network_none", li->net_none, "workdir", li->workdir, "disk",
			      lcl_disk_name(li->disk), "cgroup", lcl_cg_to_json(&li->cg));
	int e = 0;
	sbx_buf_addf(&path, "%s/lease.json", li->dir);
	if (j)
		json_object_set_new(j, "network_host", json_boolean(li->net_host));
	if (!j || !(text = json_dumps(j, JSON_COMPACT)))
		e = sbx_error_set(err, EINVAL, 0, "writing %s: a field is not UTF-8", path.buf);
	else if ((e = sbx_write_file_atomic(path.buf, text, strlen(text))))
		/* ENOSPC stays ENOSPC: the caller's mkdir fails with it. */
		e = sbx_error_set(err, -e, 0, "writing %s: %s", path.buf, strerror(-e));
	free(text);
	json_decref(j);
	sbx_buf_release(&path);
	return e;
}

static int load_lease(struct local_inst *li)
{
	struct sbx_buf path = SBX_BUF_INIT;
	json_int_t pid = 0, start = 0;
	int none = 0;
	const char *lease = NULL, *tmpl = NULL, *wd = NULL, *disk = "tmpfs";
	json_t *cg = NULL;

	sbx_buf_addf(&path, "%s/lease.json", li->dir);
	json_t *j = json_load_file(path.buf, 0, NULL);
	sbx_buf_release(&path);
	if (!j ||
	    json_unpack(j, "{s:s,s:s,s:I,s:I,s:b,s:s,s?s,s:o}", "lease", &lease, "template", &tmpl,
			"init_pid", &pid, "init_start", &start, "network_none", &none, "workdir",
			&wd, "disk", &disk, "cgroup", &cg) < 0 ||
	    lcl_cg_from_json(&li->cg, cg) < 0) {
		json_decref(j);
		return -ENOENT;
	}
	li->lease = sbx_xstrdup(lease);
	li->template_name = sbx_xstrdup(tmpl);
	li->workdir = sbx_xstrdup(wd);
	li->init_pid = (pid_t)pid;
	li->init_start = (unsigned long long)start;
	li->net_none = none;
	/* leases saved before isolation was the default had the host's network */
	li->net_host = !none && (!json_object_get(j, "network_host") ||
				 json_is_true(json_object_get(j, "network_host")));
	li->disk = !strcmp(disk, "ext4") ? LCL_DISK_EXT4 : LCL_DISK_TMPFS;
	json_decref(j);
	return 0;
}

/* Ends whatever of the lease exists (processes, cgroups, mounts, directory);
 * the first error wins. */
static int teardown(struct local_inst *li, struct sbx_error *err)
{
	struct sbx_error ign = SBX_ERROR_INIT;
	int e;

	lcl_fwd_stop(li);
	if (li->init_pid > 0)
		lcl_init_kill(li);
	lcl_cg_kill_all(&li->cg);
	e = lcl_cg_destroy(&li->cg, err);
	/* rootfd stays open until release() (another thread may be using it), so the
	 * root is detached lazily and its tmpfs freed when the instance is released. */
	int e2 = lcl_storage_destroy(li->dir, e ? &ign : err);
	return e ? e : e2;
}

static int local_create(const struct sbx_spec *spec, const char *lease, struct sbx_instance **out,
			struct sbx_error *err)
{
	unsigned char rnd[6];
	char id[32];
	const char *lower = lcl_template_lower(spec->template_name);
	struct sbx_error ign = SBX_ERROR_INIT;
	struct local_inst *li;
	int e;

	if (!lower)
		return sbx_error_set(err, EINVAL, 0,
				     "unknown template %s (use \"host\" or the "
				     "absolute path of a root file system)",
				     spec->template_name);
	if (!lcl_cfg.state_dir && (e = local_init(NULL, err)) < 0)
		return e;
	/* Mount, pid and cgroup namespaces, overlayfs and loop disks: not rootless (yet). */
	if (geteuid() != 0)
		return sbx_error_set(
		    err, EPERM, 0,
		    "the local provider needs root (or user namespaces: see "
		    "ROOTLESS in sbxfs(1)); as uid %u use the e2b or daytona provider",
		    (unsigned)geteuid());
	/* Its init and slirp4netns count in the lease's memory cgroup: below
	 * this they are killed at start, which looked like a missing slirp4netns. */
	if (spec->res.memory_mb > 0 && spec->res.memory_mb < LCL_MEMORY_MIN_MB)
		return sbx_error_set(err, EINVAL, 0,
				     "resources.memoryMB %ld is too small: a local sandbox needs "
				     "at least %d (its init and network helper count in it)",
				     spec->res.memory_mb, LCL_MEMORY_MIN_MB);
	if ((e = sbx_random_bytes(rnd, sizeof(rnd))) < 0)
		return sbx_error_set(err, -e, 0, "getrandom failed");
	snprintf(id, sizeof(id), "lcl-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3],
		 rnd[4], rnd[5]);
	li = inst_new(spec, id);
	li->lease = sbx_xstrndup(lease && *lease ? lease : id, 63); /* a hostname's length */
	li->template_name = sbx_xstrdup(spec->template_name ? spec->template_name : "host");
	li->workdir = sbx_xstrdup(spec->working_dir ? spec->working_dir : "/root");
	li->net_none = spec->network && !strcmp(spec->network, "none");
	li->net_host = spec->network && !strcmp(spec->network, "host");
	long disk = spec->res.disk_mb > 0 ? spec->res.disk_mb : lcl_cfg.disk_mb;

	li->disk = lcl_cfg.disk;
	if ((e = lcl_storage_create(li->dir, lower, disk, &li->disk, err)) < 0) {
		local_release(&li->base);
		return e;
	}
	if ((e = open_dirs(li, err)) < 0 ||
	    (e = lcl_cg_create(&li->cg, &lcl_cfg.cg, id, &spec->res, err)) < 0)
		goto fail;
	if ((e = lcl_mkdir_p(li, li->workdir, 0755)) < 0) {
		e = sbx_error_set(err, e, 0, "workingDirectory %s: %s", li->workdir, strerror(-e));
		goto fail;
	}
	if ((e = lcl_spawn_init(li, err)) < 0 || (e = lcl_net_start(li, err)) < 0 ||
	    (e = save_lease(li, err)) < 0 || (e = lcl_install_packages(li, spec, err)) < 0)
		goto fail;
	sbx_log(SBX_LOG_INFO, "local: created %s (lease %s, init %d, cgroup %s)", id, li->lease,
		(int)li->init_pid, lcl_cg_kind_name(li->cg.kind));
	*out = &li->base;
	return 0;
fail:
	teardown(li, &ign);
	local_release(&li->base);
	return e;
}

static bool valid_id(const char *id)
{
	if (strncmp(id, "lcl-", 4) || strlen(id) != 16)
		return false;
	for (const char *p = id + 4; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/*
 * The init of a lease died without a kill of ours (the host restarted, or
 * someone killed it): its processes are gone for good, but its disk holds
 * what the user wrote in fs/. An ext4 disk's image is moved to
 * <mount state dir>/unsaved/LEASE-TIME-ID.ext4 (or, when that cannot be,
 * beside the lease's directory as <state>/local/ID.ext4) before the
 * storage is reclaimed (a rename: the same disk, and a loop device still
 * on it keeps working until the unmount); a tmpfs disk is memory and goes
 * with it.
 * Returns the sentence for the lease's `error` (caller frees).
 */
static char *keep_disk(struct local_inst *li)
{
	char stamp[32], *to;
	char *img = sbx_xasprintf("%s/disk.img", li->dir);
	if (li->disk != LCL_DISK_EXT4 || access(img, F_OK)) {
		free(img);
		return sbx_xasprintf(
		    "its init died (the host restarted, or it was killed)%s",
		    li->disk == LCL_DISK_TMPFS ? "; its disk was tmpfs (memory) and is gone" : "");
	}
	char *rw = sbx_xasprintf("%s/rw", li->dir);
	int fd = open(rw, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) { /* still mounted (the host did not restart): all on the image first */
		syncfs(fd);
		close(fd);
	}
	free(rw);
	sbx_file_time(time(NULL), stamp, sizeof(stamp));
	char *dir = sbx_xasprintf("%.*s/unsaved",
				  (int)(strrchr(lcl_cfg.state_dir, '/') - lcl_cfg.state_dir),
				  lcl_cfg.state_dir);
	to = sbx_xasprintf("%s/%s-%s-%s.ext4", dir, li->lease, stamp, li->base.id);
	int e = sbx_mkdir_p(dir, 0700);
	if (!e && rename(img, to))
		e = -errno;
	if (e) { /* unsaved/ on another disk, or none to be made: beside the lease's directory */
		free(to);
		to = sbx_xasprintf("%s.ext4", li->dir);
		e = rename(img, to) ? -errno : 0;
	}
	char *why = e ? sbx_xasprintf("its init died (the host restarted, or it was killed); "
				      "its disk could not be kept (%s to %s: %s) and is gone",
				      img, to, strerror(-e))
		      : sbx_xasprintf("its init died (the host restarted, or it was killed); its "
				      "disk is kept in %s (mount -o loop,ro it: the files written "
				      "are under upper/)",
				      to);
	sbx_log(e ? SBX_LOG_ERR : SBX_LOG_WARN, "local: %s: %s", li->base.id, why);
	free(img);
	free(to);
	free(dir);
	return why;
}

/*
 * A new init for a lease whose init died while sbxfs was not watching (a
 * host restart, most often): what docker start does for a stopped
 * container. Its disk is mounted again where the restart unmounted it
 * (never twice), its old cgroup (empty: the pid namespace died with its
 * init) replaced, then init and the network as at create. The processes,
 * and what they held in memory, are not brought back. 0 or -errno; on
 * failure the caller keeps the disk and reclaims the rest.
 */
static int restart(struct local_inst *li, struct sbx_error *err)
{
	const char *lower = lcl_template_lower(li->template_name);
	int e;
	if (!lower)
		return sbx_error_set(err, ENOENT, 0, "its template %s is gone", li->template_name);
	lcl_cg_kill_all(&li->cg);
	if ((e = lcl_cg_destroy(&li->cg, err)) < 0)
		return e;
	lcl_cg_clear(&li->cg);
	if ((e = lcl_storage_reopen(li->dir, lower, li->disk, err)) < 0 ||
	    (e = open_dirs(li, err)) < 0)
		return e;
	/* What the dead init and its network left in the lease's directory. */
	unlinkat(li->dirfd, "paused", 0);
	unlinkat(li->dirfd, LCL_NET_API, 0);
	if ((e = lcl_cg_create(&li->cg, &lcl_cfg.cg, li->base.id, &li->spec.res, err)) < 0 ||
	    (e = lcl_spawn_init(li, err)) < 0 || (e = lcl_net_start(li, err)) < 0 ||
	    (e = save_lease(li, err)) < 0)
		return e;
	return 0;
}

static int local_attach(const struct sbx_spec *spec, const char *sandbox_id, json_t *saved,
			struct sbx_instance **out, struct sbx_error *err)
{
	struct sbx_error ign = SBX_ERROR_INIT;
	struct local_inst *li;
	pid_t pong = 0;
	int e;

	if (!lcl_cfg.state_dir && (e = local_init(NULL, err)) < 0)
		return e;
	if (!valid_id(sandbox_id))
		return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "no local sandbox %s",
				     sandbox_id);
	li = inst_new(spec, sandbox_id);
	if (load_lease(li) < 0) {
		local_release(&li->base);
		return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "sandbox %s is gone",
				     sandbox_id);
	}
	lcl_init_reap_frozen(li);
	if (!lcl_init_alive(li)) {
		/* Its processes are gone for good; its disk is not: a new init on it. */
		struct sbx_error why = SBX_ERROR_INIT;
		li->init_pid = 0;
		if (restart(li, &why) == 0) {
			snprintf(li->base.attach_note, sizeof(li->base.attach_note),
				 "its init had died (the host restarted, or it was killed): "
				 "started again on its own disk; what was written is there, "
				 "its processes are not");
			sbx_log(SBX_LOG_WARN, "local: %s: %s", sandbox_id, li->base.attach_note);
			*out = &li->base;
			return 0;
		}
		sbx_log(SBX_LOG_WARN, "local: %s: cannot start it again on its disk: %s",
			sandbox_id, why.msg);
		char *kept = keep_disk(li);
		teardown(li, &ign);
		local_release(&li->base);
		e = sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND,
				  "sandbox %s is gone: %s (it could not be started again: %s)",
				  sandbox_id, kept, why.msg);
		free(kept);
		return e;
	}
	if ((e = open_dirs(li, err)) < 0)
		goto fail;
	/* A frozen init cannot answer; its pid and start time have identified it already. */
	if (lcl_cg_frozen(&li->cg) <= 0 &&
	    (e = lcl_request(li, LCL_OP_PING, 0, 3000, &pong, err)) < 0)
		goto fail;
	if (pong && pong != li->init_pid) {
		e = sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND,
				  "sandbox %s: init.sock answers for "
				  "another process",
				  sandbox_id);
		goto fail;
	}
	lcl_log_reopen(li);
	*out = &li->base;
	return 0;
fail:
	local_release(&li->base);
	return e;
}

static bool paused_by_signal(const struct local_inst *li)
{
	return faccessat(li->dirfd, "paused", F_OK, 0) == 0;
}

static int local_pause(struct sbx_instance *inst, struct sbx_error *err)
{
	struct local_inst *li = lcl_inst(inst);
	int e = lcl_cg_freeze(&li->cg, true, err), fd;
	if (e != -ENOTSUP)
		return e;
	/* No freezer: stop every process but init (which then still answers pings). */
	if ((e = lcl_request(li, LCL_OP_SIGNAL, SIGSTOP, 5000, NULL, err)) < 0)
		return e;
	if ((fd = openat(li->dirfd, "paused", O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) >= 0)
		close(fd);
	return 0;
}

static int local_unpause(struct sbx_instance *inst, struct sbx_error *err)
{
	struct local_inst *li = lcl_inst(inst);
	int e = lcl_cg_freeze(&li->cg, false, err);
	if (e == 0)
		lcl_log_reopen(li); /* attached while frozen */
	if (e != -ENOTSUP)
		return e;
	if ((e = lcl_request(li, LCL_OP_SIGNAL, SIGCONT, 5000, NULL, err)) < 0)
		return e;
	unlinkat(li->dirfd, "paused", 0);
	return 0;
}

static int local_kill(struct sbx_instance *inst, struct sbx_error *err)
{
	struct local_inst *li = lcl_inst(inst);
	struct stat st;
	if (!lcl_init_alive(li) && stat(li->dir, &st) < 0)
		return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "sandbox %s is gone", inst->id);
	int e = teardown(li, err);
	if (!e)
		sbx_log(SBX_LOG_INFO, "local: killed %s", inst->id);
	return e;
}

static int local_probe(struct sbx_instance *inst, enum sbx_remote_state *state,
		       struct sbx_error *err)
{
	struct local_inst *li = lcl_inst(inst);
	struct sbx_error ign = SBX_ERROR_INIT;
	lcl_log_reopen(li); /* attached while frozen */
	lcl_log_drain(li);
	if (!lcl_init_alive(li)) {
		*state = SBX_REMOTE_GONE;
		/* Died behind our back (killed on the host, say): reclaim what it left. */
		if (faccessat(li->dirfd, "lease.json", F_OK, 0) == 0) {
			sbx_log(SBX_LOG_WARN, "local: %s: init %d died; reclaiming its storage",
				inst->id, (int)li->init_pid);
			char *why = keep_disk(li);
			teardown(li, &ign);
			sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "sandbox %s is gone: %s",
				      inst->id, why);
			free(why);
		}
	} else if (lcl_cg_frozen(&li->cg) > 0 || paused_by_signal(li))
		*state = SBX_REMOTE_PAUSED;
	else
		*state = SBX_REMOTE_RUNNING;
	return 0;
}

/* Reports one lease directory as it is: a dead init is "gone", its storage left alone. */
static int list_one(const char *id, sbx_sandbox_fn fn, void *ctx)
{
	struct local_inst *li = inst_new(NULL, id);
	struct sbx_sandbox_entry sb = {.id = id};
	struct stat st;
	struct tm tm;
	char when[32] = "";
	int rc = 0;

	li->dirfd = open(li->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (li->dirfd >= 0 && load_lease(li) == 0) { /* no lease.json yet: still being made */
		sb.lease = li->lease;
		sb.template_name = li->template_name;
		if (!lcl_init_alive(li))
			sb.state = "gone";
		else if (lcl_cg_frozen(&li->cg) > 0 || paused_by_signal(li))
			sb.state = "paused";
		else
			sb.state = "running";
		if (fstatat(li->dirfd, "lease.json", &st, 0) == 0 && gmtime_r(&st.st_mtime, &tm) &&
		    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm))
			sb.created_at = when;
		rc = fn(ctx, &sb);
	}
	local_release(&li->base);
	return rc;
}

static int local_list_sandboxes(sbx_sandbox_fn fn, void *ctx, struct sbx_error *err)
{
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (!lcl_cfg.state_dir && (rc = local_init(NULL, err)) < 0)
		return rc;
	if (!(d = opendir(lcl_cfg.state_dir)))
		return sbx_error_set(err, errno, 0, "%s: %s", lcl_cfg.state_dir, strerror(errno));
	while (!rc && (de = readdir(d)))
		if (valid_id(de->d_name))
			rc = list_one(de->d_name, fn, ctx);
	closedir(d);
	return rc;
}

static int local_info(struct sbx_instance *inst, json_t **out, struct sbx_error *err)
{
	struct local_inst *li = lcl_inst(inst);
	struct statvfs sv;
	json_t *j = json_pack("{s:s+,s:s,s:i,s:s,s:s,s:o,s:s,s:s}", "root", li->dir, "/root", "dir",
			      li->dir, "init_pid", (int)li->init_pid, "cgroup",
			      lcl_cg_kind_name(li->cg.kind), "template", li->template_name, "caps",
			      lcl_cg_caps(&li->cg), "network",
			      li->net_none   ? "none"
			      : li->net_host ? "host"
					     : "isolated",
			      "disk", lcl_disk_name(li->disk));
	if (!j)
		return sbx_error_set(err, ENOMEM, 0, "info: out of memory");
	if (fstatvfs(li->rootfd, &sv) == 0)
		json_object_set_new(j, "diskMB",
				    json_integer((json_int_t)(sv.f_blocks * sv.f_frsize >> 20)));
	*out = j;
	return 0;
}

static int local_get_host(struct sbx_instance *inst, int port, char *buf, size_t size,
			  struct sbx_error *err)
{
	if (lcl_inst(inst)->net_none)
		return sbx_error_set(err, ENOTSUP, 0, "sandbox %s has network none", inst->id);
	if (port <= 0 || port > 65535)
		return sbx_error_set(err, EINVAL, 0, "bad port %d", port);
	int e, host_port = port; /* network host: the lease's ports are the host's */
	if (!lcl_inst(inst)->net_host &&
	    (e = lcl_fwd_port(lcl_inst(inst), port, &host_port, err)) < 0)
		return e;
	snprintf(buf, size, "http://127.0.0.1:%d", host_port);
	return 0;
}

const struct sbx_provider sbx_provider_local = {
    .abi = SBX_PROVIDER_ABI,
    .name = "local",
    .caps = SBX_CAP_DIRECT_IO | SBX_CAP_LIST_ATTRS | SBX_CAP_PAUSE_MEMORY | SBX_CAP_AS_CALLER |
	    SBX_CAP_PAUSE_KEEPS_RUNS,
    .init = local_init,
    .shutdown = local_shutdown,
    .create = local_create,
    .attach = local_attach,
    .release = local_release,
    .pause = local_pause,
    .unpause = local_unpause,
    .kill = local_kill,
    .probe = local_probe,
    .info = local_info,
    .get_host = local_get_host,
    .list_ports = lcl_list_ports,
    .run = lcl_run,
    .run_code = lcl_run_code,
    .code_reset = lcl_code_reset,
    .code_ready = lcl_code_ready,
    .stat = lcl_f_stat,
    .list = lcl_f_list,
    .read = lcl_f_read,
    .write = lcl_f_write,
    .truncate = lcl_c_truncate,
    .mkdir = lcl_c_mkdir,
    .unlink = lcl_c_unlink,
    .rmdir = lcl_c_rmdir,
    .rename = lcl_c_rename,
    .chmod = lcl_c_chmod,
    .chown = lcl_c_chown,
    .utimens = lcl_c_utimens,
    .symlink = lcl_c_symlink,
    .readlink = lcl_f_readlink,
    .link = lcl_c_link,
    .mknod = lcl_c_mknod,
    .statfs = lcl_f_statfs,
    .open = lcl_c_open,
    .pread = lcl_f_pread,
    .pwrite = lcl_f_pwrite,
    .ftruncate = lcl_f_ftruncate,
    .fallocate = lcl_f_fallocate,
    .seek_data = lcl_f_seek_data,
    .xattr = lcl_c_xattr,
    .fsync = lcl_f_fsync,
    .fstat = lcl_f_fstat,
    .close = lcl_f_close,
    .list_sandboxes = local_list_sandboxes,
    .tty_open = lcl_tty_open,
    .tty_write = lcl_tty_write,
    .tty_resize = lcl_tty_resize,
    .tty_close = lcl_tty_close,
};
