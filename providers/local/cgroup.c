/*
 * cgroup — see cgroup.h. Plain file writes under /sys/fs/cgroup; no
 * libcgroup, no systemd. Not thread-affine: every call works on paths.
 */
#include "cgroup.h"
#include "base/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 5000

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static char *path_join(const char *a, const char *b)
{
	char *p;
	p = sbx_xasprintf("%s/%s", a, b);
	return p;
}

static int write_at(const char *dir, const char *file, const char *val)
{
	char *p = path_join(dir, file);
	int fd = open(p, O_WRONLY | O_CLOEXEC), e = 0;
	free(p);
	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) < 0)
		e = -errno;
	close(fd);
	return e;
}

/* Reads the file into buf (NUL-terminated, trailing newline kept). */
static int read_at(const char *dir, const char *file, char *buf, size_t size)
{
	char *p = path_join(dir, file);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	free(p);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, size - 1);
	int e = n < 0 ? -errno : 0;
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return e;
}

static bool is_fs(const char *path, long magic)
{
	struct statfs sf;
	return statfs(path, &sf) == 0 && (long)sf.f_type == magic;
}

/* Our own group in the hierarchy named ctrl ("" for v2), from /proc/self/cgroup. */
static char *own_group(const char *ctrl)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[1024], *found = NULL;
	while (f && !found && fgets(line, sizeof(line), f)) {
		/* "ID:CONTROLLERS:PATH"; v2 is "0::PATH" */
		char *ctrls = strchr(line, ':'), *path = ctrls ? strchr(ctrls + 1, ':') : NULL;
		if (!path)
			continue;
		*ctrls++ = '\0';
		*path++ = '\0';
		path[strcspn(path, "\n")] = '\0';
		bool match = !*ctrl && !*ctrls;
		for (char *save, *tok = strtok_r(ctrls, ",", &save); *ctrl && tok;
		     tok = strtok_r(NULL, ",", &save))
			match |= !strcmp(tok, ctrl);
		if (match)
			found = sbx_xstrdup(path);
	}
	if (f)
		fclose(f);
	return found;
}

/* mkdir base/sbxfs (root, else our own group) and base/sbxfs/id; returns the new dir. */
static char *make_group(const char *mnt, const char *ctrl, const char *id, int *perr)
{
	char *parent = path_join(mnt, "sbxfs"), *dir;
	if (mkdir(parent, 0755) < 0 && errno != EEXIST) {
		char *own = own_group(ctrl);
		free(parent);
		if (!own) {
			*perr = -EACCES;
			return NULL;
		}
		parent = sbx_xasprintf("%s%s/sbxfs", mnt, own);
		free(own);
		if (mkdir(parent, 0755) < 0 && errno != EEXIST) {
			*perr = -errno;
			free(parent);
			return NULL;
		}
	}
	dir = path_join(parent, id);
	if (mkdir(dir, 0755) < 0) {
		*perr = -errno;
		free(dir);
		dir = NULL;
	}
	if (dir && !strcmp(ctrl, "")) {
		/* v2: enable what we can one by one; a refusal only loses that cap. */
		static const char *const ctl[] = {"+memory", "+cpu", "+pids"};
		char *top = sbx_xstrdup(parent);
		*strrchr(top, '/') = '\0';
		for (size_t i = 0; i < 3; i++) {
			write_at(top, "cgroup.subtree_control", ctl[i]);
			write_at(parent, "cgroup.subtree_control", ctl[i]);
		}
		free(top);
	}
	free(parent);
	return dir;
}

const char *lcl_cg_kind_name(enum lcl_cg_kind kind)
{
	return kind == LCL_CG_V1 ? "v1" : kind == LCL_CG_V2 ? "v2" : "none";
}

static enum lcl_cg_kind detect(const struct lcl_cg_config *cfg, const char *root)
{
	const char *mode = cfg->mode ? cfg->mode : "auto";
	char *fz = path_join(root, "freezer");
	bool v1 = is_fs(fz, CGROUP_SUPER_MAGIC);
	free(fz);
	if (!strcmp(mode, "none"))
		return LCL_CG_NONE;
	if (strcmp(mode, "v1") && is_fs(root, CGROUP2_SUPER_MAGIC))
		return LCL_CG_V2;
	if (strcmp(mode, "v2") && v1)
		return LCL_CG_V1;
	return LCL_CG_NONE;
}

static void set_caps_v1(struct lcl_cgroup *cg, const struct sbx_resources *res,
			const struct lcl_cg_config *cfg)
{
	char v[64];
	if (cg->memory && res->memory_mb > 0) {
		snprintf(v, sizeof(v), "%lld", (long long)res->memory_mb << 20);
		write_at(cg->memory, "memory.limit_in_bytes", v);
		write_at(cg->memory, "memory.memsw.limit_in_bytes", v);
		write_at(cg->memory, "memory.swappiness", "0");
	}
	if (cg->cpu && res->cpu > 0) {
		write_at(cg->cpu, "cpu.cfs_period_us", "100000");
		snprintf(v, sizeof(v), "%ld", res->cpu * 100);
		write_at(cg->cpu, "cpu.cfs_quota_us", v);
	}
	if (cg->pids && cfg->pids_max > 0) {
		snprintf(v, sizeof(v), "%ld", cfg->pids_max);
		write_at(cg->pids, "pids.max", v);
	}
}

static void set_caps_v2(struct lcl_cgroup *cg, const struct sbx_resources *res,
			const struct lcl_cg_config *cfg)
{
	char v[64];
	if (res->memory_mb > 0) {
		snprintf(v, sizeof(v), "%lld", (long long)res->memory_mb << 20);
		write_at(cg->freezer, "memory.max", v);
		write_at(cg->freezer, "memory.swap.max", "0");
	}
	if (res->cpu > 0) {
		snprintf(v, sizeof(v), "%ld 100000", res->cpu * 100);
		write_at(cg->freezer, "cpu.max", v);
	}
	if (cfg->pids_max > 0) {
		snprintf(v, sizeof(v), "%ld", cfg->pids_max);
		write_at(cg->freezer, "pids.max", v);
	}
}

int lcl_cg_create(struct lcl_cgroup *cg, const struct lcl_cg_config *cfg, const char *id,
		  const struct sbx_resources *res, struct sbx_error *err)
{
	const char *root = cfg->root ? cfg->root : "/sys/fs/cgroup";
	int e = 0;

	memset(cg, 0, sizeof(*cg));
	cg->kind = detect(cfg, root);
	if (cg->kind == LCL_CG_V2) {
		if (!(cg->freezer = make_group(root, "", id, &e)))
			return sbx_error_set(err, e, 0, "cgroup v2 under %s: %s", root,
					     strerror(-e));
		set_caps_v2(cg, res, cfg);
	} else if (cg->kind == LCL_CG_V1) {
		static const char *const ctrl[] = {"freezer", "memory", "cpu", "pids"};
		char **slot[] = {&cg->freezer, &cg->memory, &cg->cpu, &cg->pids};
		for (size_t i = 0; i < 4; i++) {
			char *mnt = path_join(root, ctrl[i]);
			if (is_fs(mnt, CGROUP_SUPER_MAGIC) &&
			    !(*slot[i] = make_group(mnt, ctrl[i], id, &e))) {
				free(mnt);
				lcl_cg_destroy(cg, NULL);
				lcl_cg_clear(cg);
				return sbx_error_set(err, e, 0, "cgroup v1 %s: %s", ctrl[i],
						     strerror(-e));
			}
			free(mnt);
		}
		set_caps_v1(cg, res, cfg);
	}
	return 0;
}

static int dirs_of(const struct lcl_cgroup *cg, const char *out[LCL_CG_MAX_DIRS])
{
	const char *all[] = {cg->freezer, cg->memory, cg->cpu, cg->pids};
	int n = 0;
	for (int i = 0; i < LCL_CG_MAX_DIRS; i++)
		if (all[i])
			out[n++] = all[i];
	return n;
}

int lcl_cg_open_procs(const struct lcl_cgroup *cg, int fds[LCL_CG_MAX_DIRS])
{
	const char *dirs[LCL_CG_MAX_DIRS];
	int n = dirs_of(cg, dirs);
	for (int i = 0; i < n; i++) {
		char *p = path_join(dirs[i], "cgroup.procs");
		fds[i] = open(p, O_WRONLY | O_CLOEXEC);
		free(p);
		if (fds[i] < 0) {
			int e = -errno;
			while (i-- > 0)
				close(fds[i]);
			return e;
		}
	}
	return n;
}

int lcl_cg_frozen(const struct lcl_cgroup *cg)
{
	char buf[64];
	int e;
	if (!cg->freezer)
		return -ENOTSUP;
	if (cg->kind == LCL_CG_V1) {
		if ((e = read_at(cg->freezer, "freezer.state", buf, sizeof(buf))) < 0)
			return e;
		return strncmp(buf, "THAWED", 6) != 0;
	}
	if ((e = read_at(cg->freezer, "cgroup.freeze", buf, sizeof(buf))) < 0)
		return e;
	return buf[0] == '1';
}

/* True once the kernel reports the freeze (or thaw) complete. */
static bool freeze_done(const struct lcl_cgroup *cg, bool on)
{
	char buf[512];
	if (cg->kind == LCL_CG_V1) {
		if (read_at(cg->freezer, "freezer.state", buf, sizeof(buf)) < 0)
			return false;
		return !strncmp(buf, on ? "FROZEN" : "THAWED", 6);
	}
	if (read_at(cg->freezer, "cgroup.events", buf, sizeof(buf)) < 0)
		return false;
	char *f = strstr(buf, "frozen ");
	return f && f[7] == (on ? '1' : '0');
}

int lcl_cg_freeze(const struct lcl_cgroup *cg, bool on, struct sbx_error *err)
{
	const char *file = cg->kind == LCL_CG_V1 ? "freezer.state" : "cgroup.freeze";
	const char *val = cg->kind == LCL_CG_V1 ? (on ? "FROZEN" : "THAWED") : (on ? "1" : "0");
	int e;

	if (!cg->freezer)
		return -ENOTSUP;
	if ((e = write_at(cg->freezer, file, val)) < 0)
		return sbx_error_set(err, e, 0, "%s %s: %s", on ? "freeze" : "thaw", cg->freezer,
				     strerror(-e));
	for (long waited = 0; waited < WAIT_MS; waited += 5) {
		if (freeze_done(cg, on))
			return 0;
		if (cg->kind == LCL_CG_V1 && on)
			write_at(cg->freezer, file, val); /* v1 retries a stuck FREEZING on write */
		sleep_ms(5);
	}
	if (on)
		write_at(cg->freezer, file, cg->kind == LCL_CG_V1 ? "THAWED" : "0");
	return sbx_error_set(err, EBUSY, 0, "the lease did not %s within %d s",
			     on ? "freeze" : "thaw", WAIT_MS / 1000);
}

/* Calls fn(pid) for every pid in dir/cgroup.procs; returns how many there were. */
static int each_proc(const char *dir, void (*fn)(pid_t))
{
	char *p = path_join(dir, "cgroup.procs");
	FILE *f = fopen(p, "re");
	long pid;
	int n = 0;
	free(p);
	while (f && fscanf(f, "%ld", &pid) == 1) {
		n++;
		if (fn)
			fn((pid_t)pid);
	}
	if (f)
		fclose(f);
	return n;
}

static void sigkill(pid_t pid)
{
	kill(pid, SIGKILL);
}

void lcl_cg_kill_all(const struct lcl_cgroup *cg)
{
	const char *dirs[LCL_CG_MAX_DIRS];
	int n = dirs_of(cg, dirs);
	if (cg->kind == LCL_CG_V2 && cg->freezer && write_at(cg->freezer, "cgroup.kill", "1") == 0)
		return;
	for (int i = 0; i < n; i++)
		each_proc(dirs[i], sigkill);
	if (cg->freezer && lcl_cg_frozen(cg) > 0)
		lcl_cg_freeze(cg, false, NULL);
}

int lcl_cg_destroy(const struct lcl_cgroup *cg, struct sbx_error *err)
{
	const char *dirs[LCL_CG_MAX_DIRS];
	int n = dirs_of(cg, dirs), first = 0;
	for (int i = 0; i < n; i++) {
		int e = 0;
		for (long waited = 0; waited < WAIT_MS; waited += 10) {
			if (rmdir(dirs[i]) == 0 || errno == ENOENT) {
				e = 0;
				break;
			}
			e = -errno;
			if (e != -EBUSY)
				break;
			if (each_proc(dirs[i], NULL) > 0)
				each_proc(dirs[i], sigkill);
			sleep_ms(10);
		}
		if (e && !first)
			first = sbx_error_set(err, e, 0, "rmdir %s: %s", dirs[i], strerror(-e));
	}
	return first;
}

json_t *lcl_cg_caps(const struct lcl_cgroup *cg)
{
	char buf[256];
	bool mem = false, cpu = false, pids = false;
	if (cg->kind == LCL_CG_V1) {
		mem = cg->memory != NULL;
		cpu = cg->cpu != NULL;
		pids = cg->pids != NULL;
	} else if (cg->kind == LCL_CG_V2 &&
		   read_at(cg->freezer, "cgroup.controllers", buf, sizeof(buf)) == 0) {
		mem = strstr(buf, "memory") != NULL;
		cpu = strstr(buf, "cpu") != NULL;
		pids = strstr(buf, "pids") != NULL;
	}
	return sbx_xjson(json_pack("{s:b,s:b,s:b,s:b}", "memory", mem, "cpu", cpu, "pids", pids,
				   "freezer", cg->freezer != NULL));
}

json_t *lcl_cg_to_json(const struct lcl_cgroup *cg)
{
	json_t *j = sbx_xjson(json_pack("{s:s}", "kind", lcl_cg_kind_name(cg->kind)));
	const char *names[] = {"freezer", "memory", "cpu", "pids"};
	const char *vals[] = {cg->freezer, cg->memory, cg->cpu, cg->pids};
	for (int i = 0; i < 4; i++)
		if (vals[i])
			json_object_set_new(j, names[i], json_string(vals[i]));
	return j;
}

int lcl_cg_from_json(struct lcl_cgroup *cg, json_t *j)
{
	const char *kind = json_string_value(json_object_get(j, "kind"));
	const char *names[] = {"freezer", "memory", "cpu", "pids"};
	char **slot[] = {&cg->freezer, &cg->memory, &cg->cpu, &cg->pids};

	memset(cg, 0, sizeof(*cg));
	if (!kind)
		return -EINVAL;
	cg->kind = !strcmp(kind, "v1") ? LCL_CG_V1 : !strcmp(kind, "v2") ? LCL_CG_V2 : LCL_CG_NONE;
	for (int i = 0; i < 4; i++) {
		const char *v = json_string_value(json_object_get(j, names[i]));
		if (v)
			*slot[i] = sbx_xstrdup(v);
	}
	return 0;
}

void lcl_cg_clear(struct lcl_cgroup *cg)
{
	if (!cg)
		return;
	free(cg->freezer);
	free(cg->memory);
	free(cg->cpu);
	free(cg->pids);
	memset(cg, 0, sizeof(*cg));
}
