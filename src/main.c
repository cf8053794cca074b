/*
 * main — options and start-up order of the sbxfs daemon.
 *
 * Order matters: the config is validated before daemonising (so a bad file
 * is reported on the terminal), the lease table is opened after it (threads
 * and connections do not survive fork), and the timer starts last.
 */
#include "config.h"
#include "base/xalloc.h"

#define FUSE_USE_VERSION 31
#include <fuse.h>
#include <fuse_lowlevel.h>

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access.h"
#include "base/buf.h"
#include "base/caller.h"
#include "base/fsutil.h"
#include "base/keyfile.h"
#include "base/log.h"
#include "fsmirror.h"
#include "fuse_ops.h"
#include "idmap.h"
#include "kinval.h"
#include "lease.h"
#include "notify.h"
#include "run.h"
#include "sandboxes.h"
#include "statedir.h"
#include "writeback.h"
#include "fs_prefetch.h"

struct sbx_options {
	char *profile;
	char *config;
	char *state_dir;
	char *cache_timeout;
	char *writeback;
	char *prefetch;	     /* -o prefetch=0|1 */
	char *alive_check;   /* -o alive_check=SECONDS */
	char *list_provider; /* --list=PROVIDER */
	char *symlinks;	     /* "rewrite" (default) or "raw" */
	char *idmap;	     /* "none" (default) or "user" */
	char *share_group;   /* the one group let in besides the owner */
	int share_fs;	     /* -o share_fs: fs/ open to every user, by its modes */
	int xattr;	     /* -o xattr: extended attributes on local leases' fs/ */
	char *log;	     /* -o log=PATH|syslog|stderr */
	char *log_level;     /* -o log_level=error|warn|info|debug */
	char *env_file;	     /* -o env_file=[-]PATH */
	char *nonopt[3];     /* [SOURCE] MOUNTPOINT, as mount.fuse3 passes them */
	int n_nonopt;
	int list; /* --list or --list=PROVIDER: print sandboxes, no mount */
	int show_help;
	int show_version;
};

#define OPT(t, p)                                                                                  \
	{                                                                                          \
		t, offsetof(struct sbx_options, p), 1                                              \
	}
static const struct fuse_opt option_spec[] = {
    OPT("profile=%s", profile),
    OPT("config=%s", config),
    OPT("state_dir=%s", state_dir),
    OPT("fs_cache_timeout=%s", cache_timeout),
    OPT("writeback=%s", writeback),
    OPT("prefetch=%s", prefetch),
    OPT("alive_check=%s", alive_check),
    OPT("symlinks=%s", symlinks),
    OPT("idmap=%s", idmap),
    OPT("share_group=%s", share_group),
    OPT("share_fs", share_fs),
    OPT("xattr", xattr),
    OPT("log=%s", log),
    OPT("log_level=%s", log_level),
    OPT("env_file=%s", env_file),
    OPT("--list", list),
    OPT("--list=%s", list_provider),
    OPT("-h", show_help),
    OPT("--help", show_help),
    OPT("-V", show_version),
    OPT("--version", show_version),
    FUSE_OPT_END,
};

/*
 * Options never passed to the kernel: mount(8)'s and systemd's (an fstab
 * line may carry them, and mount.fuse3 passes some of them through), and
 * `suid` and `dev`. What a sandbox wrote is never trusted by the host's
 * kernel: a file its root made setuid-root, or a node of the host's disk,
 * is only a name in fs/, so the mount is nosuid,nodev (libfuse's default)
 * whatever it is given. mount.fuse3 adds both to every mount by root
 * unless nosuid/nodev are written (`mount -t fuse.sbxfs`, fstab, systemd),
 * so they are dropped, not refused.
 */
static int ignored_mount_option(const char *o)
{
	static const char *const ign[] = {"defaults", "auto",  "noauto", "_netdev", "nofail",
					  "user",     "users", "nouser", "owner",   "comment",
					  "suid",     "dev",   NULL};
	if (!strncmp(o, "x-", 2) || !strncmp(o, "comment=", 8))
		return 1;
	for (const char *const *p = ign; *p; p++)
		if (!strcmp(o, *p))
			return 1;
	return 0;
}

/*
 * What the daemon reads once mounted must not lie behind its own mount:
 * the first read would wait for a reply only the daemon can give, before
 * its loop runs, and the mount would hang every process that touches it
 * (`sbxfs ~` with the default state dir, or a state_dir under the mount
 * point). The state dir, the config and each provider's key file are
 * refused, with the reason, before anything is mounted.
 */
static int behind_mount(const char *what, const char *path, const char *mountpoint)
{
	if (!path || !sbx_path_resolved_under(path, mountpoint))
		return 0;
	fprintf(stderr,
		"sbxfs: %s %s is inside the mount point %s, so the mount would hide it from "
		"sbxfs itself: put it outside %s\n",
		what, path, mountpoint, mountpoint);
	return 1;
}

/*
 * Each provider's keyFile: absolute (the daemon reads it again from "/",
 * where a relative name means another file than the one checked here) and
 * not behind the mount (behind_mount).
 */
static int key_files_refused(const struct sbx_config *cfg, const char *mountpoint)
{
	const char *name;
	json_t *settings;
	json_object_foreach(cfg->providers, name, settings)
	{
		const char *kf = json_string_value(json_object_get(settings, "keyFile"));
		char what[96];
		snprintf(what, sizeof(what), "providers.%s.keyFile", name);
		if (kf && kf[0] != '/') {
			fprintf(stderr, "sbxfs: %s \"%s\" must be an absolute path\n", what, kf);
			return 1;
		}
		if (behind_mount(what, kf, mountpoint))
			return 1;
	}
	return 0;
}

/*
 * A relative state_dir or config made absolute against the working
 * directory: the daemon works from "/" once mounted (as every daemon), and
 * took "s" as /s there while the checks before the mount (the lock
 * included) had used ./s.
 */
static void make_absolute(char **path)
{
	char *abs = *path ? sbx_path_absolute(*path) : NULL;
	if (abs) {
		free(*path);
		*path = abs;
	}
}

/*
 * fuse_daemonize's fork, except that the terminal's process waits until
 * the mount is ready (exit 0) or has failed (exit 1, the reason on its
 * stderr): libfuse's exits 0 as soon as it has forked, before the lease
 * table and the providers are opened, so a failure there was only in the
 * log while `sbxfs` and `mount` had said success. The daemon calls
 * daemon_ready once: NULL when mounted, or the reason once it has
 * unmounted (so the mount point is free when the starting process exits).
 */
static int ready_fd = -1;

static int daemonize(bool foreground)
{
	int p[2], null;
	if (foreground) {
		int rc = chdir("/"); /* as libfuse: no directory of the terminal held */
		(void)rc;
		return 0;
	}
	if (pipe2(p, O_CLOEXEC)) {
		perror("sbxfs: pipe");
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("sbxfs: fork");
		return -1;
	}
	if (pid > 0) {
		char msg[1024];
		size_t len = 0;
		ssize_t n;
		close(p[1]);
		while (len < sizeof(msg) - 1 &&
		       ((n = read(p[0], msg + len, sizeof(msg) - 1 - len)) > 0 ||
			(n < 0 && errno == EINTR)))
			len += n > 0 ? (size_t)n : 0;
		msg[len] = '\0';
		if (!strcmp(msg, "ready"))
			_exit(0);
		fprintf(stderr, "sbxfs: %s\n",
			len ? msg : "the daemon ended before the mount was ready (see its log)");
		_exit(1);
	}
	close(p[0]);
	ready_fd = p[1];
	if (setsid() < 0 || chdir("/"))
		return -1;
	if ((null = open("/dev/null", O_RDWR)) >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
	return 0;
}

static void daemon_ready(const char *failure)
{
	if (ready_fd < 0)
		return;
	const char *m = failure ? failure : "ready";
	int rc = sbx_write_all(ready_fd, m, strlen(m));
	if (rc)
		sbx_log(SBX_LOG_WARN, "cannot tell the starting process: %s", strerror(-rc));
	close(ready_fd);
	ready_fd = -1;
}

/* Collects the non-option arguments ourselves: mount.fuse3 passes "SOURCE MOUNTPOINT". */
static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct sbx_options *o = data;
	if (key == FUSE_OPT_KEY_OPT)
		return ignored_mount_option(arg) ? 0 : 1;
	if (key != FUSE_OPT_KEY_NONOPT)
		return 1;
	if (o->n_nonopt == 3)
		return 1; /* reported below */
	o->nonopt[o->n_nonopt++] = sbx_xstrdup(arg);
	return 0;
}

/* An option's whole value as a number 0..max (no sign, blank or unit): true with *out. */
static bool count_opt(const char *v, long max, long *out)
{
	char *end;
	long n = strtol(v, &end, 10);
	if (!*v || *end || n < 0 || n > max)
		return false;
	*out = n;
	return true;
}

static void usage(const char *prog)
{
	printf(
	    "usage: %s [-f] [-d] [-o opt,...] [sbxfs|PROFILE] MOUNTPOINT\n"
	    "       %s --list[=PROVIDER] [-o config=PATH,state_dir=PATH]\n"
	    "\n"
	    "sbxfs options:\n"
	    "    -o profile=NAME     profile for new leases (default: the config's default)\n"
	    "    -o config=PATH      profiles file (default $XDG_CONFIG_HOME/sbxfs/config.json)\n"
	    "    -o state_dir=PATH   lease table and caches (default $XDG_STATE_HOME/sbxfs)\n"
	    "    -o fs_cache_timeout=S  seconds the kernel keeps fs/ attributes (default 1)\n"
	    "    -o writeback=N      remote fs/: close() returns before the upload, at most N\n"
	    "                        files queued per lease (default 128; 0: close() uploads)\n"
	    "    -o prefetch=0       remote fs/: no bulk reads of a directory's small files\n"
	    "                        (default 1: on)\n"
	    "    -o alive_check=S    a run asks a sandbox not heard from for S seconds\n"
	    "                        whether it answers first, so an outage fails the\n"
	    "                        write of exec (default 30; 0: before every run)\n"
	    "    -o symlinks=raw     fs/ links show the sandbox's own text (default: rewritten\n"
	    "                        so the host follows them inside the sandbox)\n"
	    "    -o xattr            local fs/: extended attributes, as the lease's root has\n"
	    "                        them (default off: ENOTSUP; on, ls -l asks the daemon\n"
	    "                        for every file's, about 3x slower on local)\n"
	    "    -o idmap=user       remote fs/: the sandbox user's files show as the mount\n"
	    "                        owner's, as sshfs's idmap=user (default none: the\n"
	    "                        sandbox's own ids)\n"
	    "    -o share_group=GROUP  let GROUP's members in too (default: the owner only;\n"
	    "                        allow_other alone lets nobody else in)\n"
	    "    -o share_fs         with allow_other: every user reaches fs/, by its files'\n"
	    "                        modes (a shared disk); control files stay the owner's\n"
	    "    -o log=PATH|syslog|stderr  where log lines go (default: stderr with -f, the\n"
	    "                        journal under systemd, else syslog, else "
	    "STATE_DIR/sbxfs.log)\n"
	    "    -o log_level=error|warn|info|debug  (default info; -d: debug)\n"
	    "    -o env_file=[-]PATH KEY=VALUE credentials (mode 0600 checked; '-': optional)\n"
	    "\n"
	    "    --list[=PROVIDER]   print the sandboxes the providers know, one a line:\n"
	    "                        provider id state lease template created (no mount)\n"
	    "\n"
	    "The source argument mount(8) passes (fstab: sbxfs /mnt/sbx fuse.sbxfs ...) is\n"
	    "\"sbxfs\" (ignored) or a profile name.\n"
	    "Unmount with: umount MOUNTPOINT or fusermount3 -u MOUNTPOINT\n\n",
	    prog, prog);
}

/* $XDG_<var> or $HOME/<fallback>, then /sub. */
static char *xdg_path(const char *var, const char *fallback, const char *sub)
{
	struct sbx_buf b = SBX_BUF_INIT;
	const char *x = getenv(var), *home = getenv("HOME");
	struct passwd *pw;
	/* mount(8) runs helpers with no HOME: the user database still knows it. */
	if ((!home || !*home) && (pw = getpwuid(geteuid())))
		home = pw->pw_dir;
	if (x && *x == '/')
		sbx_buf_addf(&b, "%s/%s", x, sub);
	else
		sbx_buf_addf(&b, "%s/%s/%s", home && *home ? home : "/tmp", fallback, sub);
	return sbx_buf_detach(&b, NULL);
}

/*
 * SIGTERM, SIGINT and SIGHUP end the FUSE loop as libfuse's own handler
 * does, and also end the waits for runs (run.h): a writer waiting for a
 * run holds its request, and the loop ends only when every request has.
 */
static struct fuse_session *stop_se;
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
	sbx_run_stop_waits();
	fuse_session_exit(stop_se);
}

/* Installs on_stop_signal for se, or (se NULL) gives the signals back their defaults. */
static void stop_signals(struct fuse_session *se)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
	struct sigaction sa = {.sa_handler = se ? on_stop_signal : SIG_DFL};
	sigemptyset(&sa.sa_mask);
	if (se)
		stop_se = se; /* kept after: a signal may be on its way */
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

/* The mount whose root `error` hears that the log cannot be written. */
static struct sbx_mount *log_mount;

static void log_failed(int e, const char *where)
{
	struct sbx_error err = SBX_ERROR_INIT;
	sbx_error_set(&err, e, SBX_E_INTERNAL,
		      "the log (%s) cannot be written: %s; its lines are lost until it can", where,
		      strerror(e));
	sbx_mount_error(log_mount, "log", &err);
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct sbx_options opts = {0};
	struct fuse_cmdline_opts cmd = {0};
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_mount *m = NULL;
	struct fuse *fuse = NULL;
	struct sbx_config probe;
	json_t *table = NULL;
	int ret = 1, lock_fd = -1;
	enum sbx_log_level level = SBX_LOG_INFO;
	const char *log_to = NULL;
	const char *mountpoint, *not_ready = NULL;

	if (fuse_opt_parse(&args, &opts, option_spec, opt_proc) == -1)
		return 1;
	if (opts.show_version) {
		printf("sbxfs %s\n", PACKAGE_VERSION);
		return 0;
	}
	if (opts.show_help) {
		usage(argv[0]);
		fuse_opt_add_arg(&args, "--help");
		fuse_parse_cmdline(&args, &cmd);
		fuse_lib_help(&args);
		return 0;
	}
	/*
	 * `-o state_dir=$STATE` with STATE unset: an empty path was taken as
	 * the working directory (the lease table and caches landed there). No
	 * option means anything when empty, so each one given empty is refused.
	 */
	for (const struct fuse_opt *o = option_spec; o->templ; o++) {
		size_t len = strlen(o->templ);
		const char *v;
		if (len < 3 || strcmp(o->templ + len - 3, "=%s"))
			continue;
		v = *(char **)((char *)&opts + o->offset);
		if (v && !v[0]) {
			fprintf(stderr,
				"sbxfs: %s%.*s is empty (an unset variable?): give it a value or "
				"leave it out\n",
				o->templ[0] == '-' ? "" : "-o ", (int)(len - 2), o->templ);
			goto out_args;
		}
	}
	if (opts.env_file && sbx_envfile_load(opts.env_file, &err)) {
		fprintf(stderr, "sbxfs: env_file: %s\n", err.msg);
		goto out_args;
	}
	if (opts.env_file) { /* read again for a refused key, from "/" once daemonised */
		bool optional = opts.env_file[0] == '-';
		char *abs = sbx_path_absolute(opts.env_file + optional);
		char *kept = abs ? sbx_xasprintf("%s%s", optional ? "-" : "", abs) : NULL;
		sbx_provider_set_env_file(kept ? kept : opts.env_file);
		free(kept);
		free(abs);
	}
	/* A file named on purpose must exist, unless named "-PATH" (optional, as
	 * the systemd units do); only the default may be absent. */
	if (opts.config && opts.config[0] == '-')
		memmove(opts.config, opts.config + 1, strlen(opts.config));
	else if (opts.config && access(opts.config, F_OK)) {
		fprintf(stderr, "sbxfs: config file %s: %s\n", opts.config, strerror(errno));
		goto out_args;
	}
	if (!opts.config)
		opts.config = xdg_path("XDG_CONFIG_HOME", ".config", "sbxfs/config.json");
	if (!opts.state_dir)
		opts.state_dir = xdg_path("XDG_STATE_HOME", ".local/state", "sbxfs");
	make_absolute(&opts.config);
	make_absolute(&opts.state_dir);
	if (opts.list || opts.list_provider) {
		/* What a mount would see: the same config, state dir and credentials. */
		sbx_log_setup(0, SBX_LOG_WARN);
		ret = sbx_sandboxes_print(opts.config, opts.state_dir, opts.list_provider, stdout,
					  stderr);
		goto out_args;
	}
	if (opts.n_nonopt == 0 || opts.n_nonopt > 2) {
		if (opts.n_nonopt > 2)
			fprintf(stderr, "sbxfs: too many arguments (want [SOURCE] MOUNTPOINT)\n");
		else
			usage(argv[0]);
		goto out_args;
	}
	/*
	 * "sbxfs SOURCE MOUNTPOINT": SOURCE is "sbxfs" or a profile name. mount(8)
	 * turns a source that names a file in its working directory into a path,
	 * so anything with a '/' is ignored too.
	 */
	if (opts.n_nonopt == 2 && strcmp(opts.nonopt[0], "sbxfs") && !strchr(opts.nonopt[0], '/') &&
	    !opts.profile)
		opts.profile = sbx_xstrdup(opts.nonopt[0]);
	mountpoint = opts.nonopt[opts.n_nonopt - 1];
	fuse_opt_add_arg(&args, mountpoint);
	if (fuse_parse_cmdline(&args, &cmd) != 0)
		goto out_args;
	if (!cmd.mountpoint) {
		usage(argv[0]);
		goto out_args;
	}
	if (opts.log_level && sbx_log_level_parse(opts.log_level, &level)) {
		fprintf(stderr, "sbxfs: log_level must be error, warn, info or debug\n");
		goto out_args;
	}
	if (cmd.debug)
		level = SBX_LOG_DEBUG;
	/* libfuse mounts on a regular file too, where fs/'s root (a directory) fails EIO. */
	struct stat mst;
	if (!stat(cmd.mountpoint, &mst) && !S_ISDIR(mst.st_mode)) {
		fprintf(stderr, "sbxfs: mount point %s is not a directory\n", cmd.mountpoint);
		goto out_args;
	}
	if (behind_mount("state dir", opts.state_dir, cmd.mountpoint) ||
	    behind_mount("config file", opts.config, cmd.mountpoint))
		goto out_args;
	if (sbx_log_open(opts.log, !cmd.foreground, opts.state_dir, level, &log_to, &err)) {
		fprintf(stderr, "sbxfs: %s\n", err.msg);
		goto out_args;
	}
	if (opts.cache_timeout) {
		char *end;
		double t = strtod(opts.cache_timeout, &end);
		/* Not empty, and not NaN (which no comparison refuses). */
		if (!*opts.cache_timeout || *end || !(t >= 0 && t <= 3600)) {
			fprintf(stderr, "sbxfs: fs_cache_timeout must be 0..3600 seconds\n");
			goto out_args;
		}
		sbx_fuse_set_cache_timeout(t);
	}
	if (opts.writeback) {
		long n;
		if (!count_opt(opts.writeback, 4096, &n)) {
			fprintf(stderr, "sbxfs: writeback must be 0..4096 files (0: off)\n");
			goto out_args;
		}
		sbx_wb_set_max((unsigned)n);
	}
	if (opts.prefetch) {
		if (strcmp(opts.prefetch, "0") && strcmp(opts.prefetch, "1")) {
			fprintf(stderr, "sbxfs: prefetch must be 0 or 1\n");
			goto out_args;
		}
		sbx_prefetch_set(!strcmp(opts.prefetch, "1"));
	}
	if (opts.alive_check) {
		long n;
		if (!count_opt(opts.alive_check, 86400, &n)) {
			fprintf(stderr, "sbxfs: alive_check must be 0..86400 seconds\n");
			goto out_args;
		}
		sbx_lease_set_alive_check(n);
	}
	if (opts.symlinks) {
		if (strcmp(opts.symlinks, "raw") && strcmp(opts.symlinks, "rewrite")) {
			fprintf(stderr, "sbxfs: symlinks must be rewrite or raw\n");
			goto out_args;
		}
		sbx_fuse_set_raw_symlinks(!strcmp(opts.symlinks, "raw"));
	}
	if (opts.idmap) {
		if (strcmp(opts.idmap, "none") && strcmp(opts.idmap, "user")) {
			fprintf(stderr, "sbxfs: idmap must be none or user\n");
			goto out_args;
		}
		sbx_idmap_set_user(!strcmp(opts.idmap, "user"));
	}
	gid_t share = SBX_NO_GROUP;
	if (opts.share_group && sbx_access_group(opts.share_group, &share) < 0) {
		fprintf(stderr, "sbxfs: share_group: no group %s\n", opts.share_group);
		goto out_args;
	}
	sbx_access_set(getuid(), share);
	sbx_caller_set_uid_check(sbx_access_allows_uid);
	sbx_access_share_fs(opts.share_fs);
	sbx_fuse_set_xattr(opts.xattr);
	/* Other users let in by the kernel are checked by it against the modes, always. */
	for (int i = 1; i < args.argc; i++)
		if (strstr(args.argv[i], "allow_other") || strstr(args.argv[i], "allow_root")) {
			fuse_opt_add_arg(&args, "-odefault_permissions");
			break;
		}

	/* Validate before daemonising, so the terminal sees what is wrong. */
	if (sbx_statedir_make(opts.state_dir, &err) || sbx_config_load(&probe, opts.config, &err)) {
		fprintf(stderr, "sbxfs: %s\n", err.msg);
		goto out_args;
	}
	if (opts.profile && !sbx_config_profile(&probe, opts.profile)) {
		fprintf(stderr, "sbxfs: profile \"%s\" is not in %s\n", opts.profile, opts.config);
		sbx_config_free(&probe);
		goto out_args;
	}
	/* A profile on a provider this build lacks (a typo): said now, not at its first mkdir. */
	for (size_t i = 0; i < probe.n_profiles; i++) {
		const struct sbx_profile *pf = &probe.profiles[i];
		if (pf->spec.provider && !sbx_provider_lookup(pf->spec.provider, &err)) {
			fprintf(stderr, "sbxfs: config %s: profile \"%s\": %s\n", opts.config,
				pf->name, err.msg);
			sbx_config_free(&probe);
			goto out_args;
		}
	}
	if (key_files_refused(&probe, cmd.mountpoint)) {
		sbx_config_free(&probe);
		goto out_args;
	}
	/* And each provider's settings, the same way (initialised for real after the fork). */
	if (sbx_provider_init_all(probe.providers, opts.state_dir, false, &err)) {
		fprintf(stderr, "sbxfs: config %s: %s\n", opts.config, err.msg);
		sbx_config_free(&probe);
		goto out_args;
	}
	sbx_config_free(&probe);
	/*
	 * One daemon per state dir, and a lease table that can be read: both
	 * refused here, on the terminal, before anything is mounted. The lock
	 * fd stays open for the daemon's life (the fork keeps the flock).
	 */
	if (sbx_statedir_lock(opts.state_dir, cmd.mountpoint, &lock_fd, &err) ||
	    sbx_statedir_read_table(opts.state_dir, &table, &err)) {
		fprintf(stderr, "sbxfs: %s\n", err.msg);
		goto out_args;
	}
	json_decref(table);

	/* Re-add the FUSE options fuse_parse_cmdline consumed but fuse_new needs. */
	if (cmd.debug)
		fuse_opt_add_arg(&args, "-odebug");
	/* user_data is where the mount will be once opened (after daemonising). */
	fuse = fuse_new(&args, &sbx_fuse_ops, sizeof(sbx_fuse_ops), &m);
	if (!fuse)
		goto out_args;
	if (fuse_mount(fuse, cmd.mountpoint) != 0)
		goto out_destroy;
	if (sbx_fuse_install_io(fuse) != 0)
		goto out_unmount;
	if (daemonize(cmd.foreground) != 0)
		goto out_unmount;
	sbx_fs_cached_install(); /* the cache's pause and upload hooks */
	if (sbx_mount_open(&m, opts.state_dir, opts.config, opts.profile, &err)) {
		sbx_log(SBX_LOG_ERR, "%s", err.msg);
		not_ready = err.msg;
		goto out_unmount;
	}
	if (fuse_set_signal_handlers(fuse_get_session(fuse)) != 0) {
		not_ready = "cannot install the signal handlers";
		goto out_close;
	}
	stop_signals(fuse_get_session(fuse));
	log_mount = m;
	sbx_log_on_failure(log_failed);
	sbx_mount_start_timer(m);
	sbx_log(SBX_LOG_INFO, "mounted at %s (sbxfs %s, log: %s)", cmd.mountpoint, PACKAGE_VERSION,
		log_to);
	daemon_ready(NULL);
	if (sbx_notify_when_mounted(cmd.mountpoint))
		sbx_log(SBX_LOG_WARN, "systemd: cannot start the readiness probe");
	/* FUSE_USE_VERSION 31 keeps the 3.10-compatible loop signature. */
	ret = cmd.singlethread ? fuse_loop(fuse) : fuse_loop_mt(fuse, cmd.clone_fd);
	fuse_remove_signal_handlers(fuse_get_session(fuse));
	stop_signals(NULL);
	if (stop_signal)
		sbx_log(SBX_LOG_INFO, "stopping on %s: unmounting %s", strsignal(stop_signal),
			cmd.mountpoint);
	else
		sbx_log(SBX_LOG_INFO, "unmounted from %s: stopping", cmd.mountpoint);
out_close:
	sbx_log_on_failure(NULL);
	sbx_mount_close(m);
	sbx_kinval_wait_detached(SBX_GONE_INVAL_WAIT_MS); /* they call into fuse */
out_unmount:
	fuse_unmount(fuse);
	daemon_ready(not_ready ? not_ready
			       : "the mount failed (see the log)"); /* if not yet told */
out_destroy:
	fuse_destroy(fuse);
out_args:
	if (lock_fd >= 0)
		close(lock_fd);
	free(cmd.mountpoint);
	fuse_opt_free_args(&args);
	free(opts.profile);
	free(opts.config);
	free(opts.state_dir);
	free(opts.cache_timeout);
	free(opts.writeback);
	free(opts.prefetch);
	free(opts.alive_check);
	free(opts.list_provider);
	free(opts.symlinks);
	free(opts.idmap);
	free(opts.share_group);
	free(opts.log);
	free(opts.log_level);
	free(opts.env_file);
	for (int i = 0; i < opts.n_nonopt; i++)
		free(opts.nonopt[i]);
	return ret ? 1 : 0;
}
