/*
 * local.h — what the files of the local provider share. Internal to
 * providers/local/; the core only sees the ops table sbx_provider_local.
 *
 *   local.c    ops table, settings, lifecycle (create/attach/kill/pause...)
 *   storage.c  per-lease overlay root, masking, teardown
 *   disk.c     the disk under the overlay: ext4 image on a loop device, or tmpfs
 *   spawn.c    starting sbxfs-init in fresh namespaces; liveness checks
 *   run.c      run(): the client side of proto.h
 *   code.c     run_code/code_reset: the persistent interpreters (kernel/)
 *   files.c    every file slot (files.h), resolved inside the root
 *   resolve.c  opening a path inside the root (openat2, or a user-space walk)
 *   packages.c pip/npm installs at create
 *   cgroup.c   caps and freezing (cgroup.h)
 *   forward.c  ports/PORT: host 127.0.0.1 listeners into the lease's namespace
 *   init.c     the sbxfs-init program (a separate binary)
 */
#ifndef SBX_LOCAL_H
#define SBX_LOCAL_H

#include <stdbool.h>
#include <sys/types.h>

#include "cgroup.h"
#include "provider.h"

/* What backs a lease's writable layer (disk.c). */
enum lcl_disk { LCL_DISK_AUTO = 0, LCL_DISK_TMPFS, LCL_DISK_EXT4 };

/* Provider-wide settings (set by init(), read-only afterwards). */
struct lcl_config {
	char *state_dir;    /* <mount state dir>/local */
	long disk_mb;	    /* disk size when resources.diskMB is 0 */
	enum lcl_disk disk; /* settings "disk" */
	long ready_ms;	    /* how long create waits for sbxfs-init */
	char *init_path;    /* settings "initPath" (else found at run time) */
	struct lcl_cg_config cg;
};

extern struct lcl_config lcl_cfg;
extern const struct sbx_provider sbx_provider_local;

/* One lease. Every field is set by create/attach and read-only after, so
 * threads share an instance without a lock; what changes (paused or not)
 * lives in the kernel (the freezer) or in the file dir/paused. */
struct local_inst {
	struct sbx_instance base; /* first: the core casts */
	char *dir;		  /* <state>/local/<id> */
	int dirfd;		  /* O_PATH of dir (the socket is reached through it) */
	int rootfd;		  /* O_PATH of dir/root: every file op resolves from here */
	int peekfd;	/* the same root in a noatime clone of its mount (readlink), or rootfd */
	pid_t init_pid; /* in the host pid namespace */
	unsigned long long init_start; /* its start time, against pid reuse */
	char *lease;
	char *template_name;
	bool net_none; /* spec "network": "none": a namespace with loopback only */
	bool net_host; /* "host": the host's namespace; neither: isolated (net.c) */
	char *workdir;
	enum lcl_disk disk;   /* tmpfs or ext4 (never auto) */
	struct sbx_spec spec; /* a copy: envs for every run */
	struct lcl_cgroup cg;
	int logfd;	     /* read end of init's stderr pipe (-1 after a re-attach) */
	int net_exit_fd;     /* until the stack starts: the read end of a pipe init holds open */
	struct lcl_fwd *fwd; /* ports/PORT forwarders (forward.c), NULL until one */
	unsigned code_lost;  /* code.c: per language, a start replaced a dead interpreter
			      * that no run has reported yet (under its start_lock) */
};

static inline struct local_inst *lcl_inst(struct sbx_instance *i)
{
	return (struct local_inst *)i;
}

/* storage.c ----------------------------------------------------------- */
/* Makes dir/{rw,root}: a disk of disk_mb at rw (*disk: what was asked for,
 * then what was used), the overlay of lower at root, host paths masked.
 * 0 or -errno; on failure nothing is mounted. */
int lcl_storage_create(const char *dir, const char *lower, long disk_mb, enum lcl_disk *disk,
		       struct sbx_error *err);
/* Mounts again what of an existing dir/{rw,root} is not mounted (a host
 * restart unmounted both): the ext4 image's disk at rw (a tmpfs disk that
 * is not mounted is gone: ENOENT), the overlay at root. What is still
 * mounted is kept, never mounted twice. 0 or -errno. */
int lcl_storage_reopen(const char *dir, const char *lower, enum lcl_disk disk,
		       struct sbx_error *err);
/* Unmounts root and rw (lazily if busy) and removes dir recursively without
 * crossing mounts. 0 or -errno (the first failure). */
int lcl_storage_destroy(const char *dir, struct sbx_error *err);
/* Makes upper/rel an empty opaque directory of mode (it hides the lower's). */
int lcl_make_opaque(int upper, const char *rel, mode_t mode);
/* The directory to use as lowerdir for a template name, or NULL (EINVAL). */
const char *lcl_template_lower(const char *template_name);

/* The least resources.memoryMB a local lease may ask (local.c, local_create). */
#define LCL_MEMORY_MIN_MB 16

/* net.c --------------------------------------------------------------- */
#define LCL_NET_CIDR "10.0.2.0/24"
#define LCL_NET_DNS "10.0.2.3"
#define LCL_NET_API "net.sock" /* in the lease dir: slirp4netns's API */
/* For an isolated lease (init running): points its resolv.conf at the stack's
 * DNS and starts slirp4netns in its cgroups. 0 or -errno. */
int lcl_net_start(struct local_inst *li, struct sbx_error *err);

/* forward.c ----------------------------------------------------------- */
/* Forwards a port of the host's 127.0.0.1 (*host_port: port when it was
 * free, else an ephemeral one; the same on every later call) to the lease's
 * 127.0.0.1:port, from inside its network namespace. 0 or -errno. */
int lcl_fwd_port(struct local_inst *li, int port, int *host_port, struct sbx_error *err);
/* Stops the lease's forwarders (kill, release); idempotent. */
void lcl_fwd_stop(struct local_inst *li);

/* hostview.c ---------------------------------------------------------- */
/* The host template's allowlist as a directory to lay over the host's "/"
 * (every other top-level entry whited out, /etc and /var built): made once
 * per daemon. NULL with err set. */
const char *lcl_hostview_dir(struct sbx_error *err);
/* At shutdown: unmounts every view no mounted lease uses (ours too). */
void lcl_hostview_release(void);

/* disk.c -------------------------------------------------------------- */
/* Mounts a disk of disk_mb at rw (ext4 image dir/disk.img or tmpfs, see
 * disk.c); *used says which. 0 or -errno. */
int lcl_disk_mount(const char *dir, const char *rw, long disk_mb, enum lcl_disk want,
		   enum lcl_disk *used, struct sbx_error *err);
/* Mounts the existing image dir/disk.img at rw. 0 or -errno. */
int lcl_disk_remount(const char *dir, const char *rw, struct sbx_error *err);
/* "tmpfs", "ext4" or "auto". */
const char *lcl_disk_name(enum lcl_disk kind);

/* spawn.c ------------------------------------------------------------- */
/* Starts sbxfs-init for inst (dir, cg, lease, net_none set) and waits until
 * it serves; fills init_pid/init_start. 0 or -errno. */
int lcl_spawn_init(struct local_inst *li, struct sbx_error *err);
/* list_ports: the listening TCP ports of the lease's network namespace (ports.c). */
int lcl_list_ports(struct sbx_instance *inst, int *ports, size_t max, struct sbx_error *err);
/* Moves what init wrote to its pipe into dir/init.log, which never grows past
 * LCL_LOG_CAP bytes (the rest is read and dropped). */
void lcl_log_drain(struct local_inst *li);
/* An attached init (a restarted daemon) writes to a pipe nobody reads: when
 * li has no log pipe and init is not frozen, hands it a new one (LOG). */
void lcl_log_reopen(struct local_inst *li);
#define LCL_LOG_CAP (64 * 1024)
/* Start time of pid (field 22 of /proc/pid/stat), 0 when it does not exist. */
unsigned long long lcl_proc_start(pid_t pid);
/* Whether the lease's init is still the process we started. */
bool lcl_init_alive(const struct local_inst *li);
/* An init killed while its cgroup was frozen (v1 keeps it frozen, alive to
 * /proc): thawed, so that it dies now, waited for up to 2 s. */
void lcl_init_reap_frozen(struct local_inst *li);
/* SIGKILLs the init (ends the whole pid namespace) and waits for it to go. */
void lcl_init_kill(struct local_inst *li);

/* run.c --------------------------------------------------------------- */
int lcl_run(struct sbx_instance *inst, const struct sbx_run_req *req,
	    const struct sbx_run_sink *sink, struct sbx_run_result *result, struct sbx_error *err);
/* A PING (pong pid in *pid) or SIGNAL request, answered within timeout_ms. 0 or -errno. */
int lcl_request(const struct local_inst *li, int op, int arg, long timeout_ms, pid_t *pid,
		struct sbx_error *err);
/* The same for a request carrying one descriptor (LOG). */
int lcl_request_fd(const struct local_inst *li, int op, int fd, long timeout_ms,
		   struct sbx_error *err);

/* The first steps of lcl_run, for tty.c: a connection to the lease's init
 * (fd or -errno), and sending a RUN request of req with the child's
 * descriptors (proto.h: stdin, stdout, stderr, and two read ends). */
int lcl_run_connect(const struct local_inst *li, struct sbx_error *err);
int lcl_run_send(const struct local_inst *li, const struct sbx_run_req *req, int sock,
		 const int fds[5], struct sbx_error *err);

/* tty.c --------------------------------------------------------------- */
int lcl_tty_open(struct sbx_instance *inst, const struct sbx_tty_req *req,
		 const struct sbx_tty_sink *sink, struct sbx_tty_session **out,
		 struct sbx_error *err);
int lcl_tty_write(struct sbx_tty_session *s, const char *data, size_t len, struct sbx_error *err);
int lcl_tty_resize(struct sbx_tty_session *s, unsigned cols, unsigned rows, struct sbx_error *err);
void lcl_tty_close(struct sbx_tty_session *s);

/* code.c -------------------------------------------------------------- */
int lcl_run_code(struct sbx_instance *inst, const struct sbx_code_req *req,
		 const struct sbx_run_sink *sink, struct sbx_code_result *result,
		 struct sbx_error *err);
int lcl_code_reset(struct sbx_instance *inst, const char *language, struct sbx_error *err);
int lcl_code_ready(struct sbx_instance *inst, const char *language, const char *const *envs,
		   struct sbx_error *err);

/* packages.c ---------------------------------------------------------- */
/* Installs spec->packages inside the lease. -EIO with the installer's last
 * stderr line in err when one fails. */
int lcl_install_packages(struct local_inst *li, const struct sbx_spec *spec, struct sbx_error *err);

/* resolve.c ----------------------------------------------------------- */
/*
 * Opens path (absolute or relative) inside the directory rootfd as if it
 * were "/", with open(2) flags and mode: openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS), or lcl_resolve_walk() once openat2 has answered
 * ENOSYS (remembered process-wide) or when SBXFS_NO_OPENAT2 is set (read
 * at the first call). The fd (O_CLOEXEC; the caller closes it) or -errno.
 */
int lcl_resolve_open(int rootfd, const char *path, int flags, mode_t mode);
/* The same resolution done in user space, one component at a time (exposed
 * for the tests that compare it with openat2). fd or -errno. */
int lcl_resolve_walk(int rootfd, const char *path, int flags, mode_t mode);

/* files.c ------------------------------------------------------------- */
/* Opens path inside the lease root (lcl_resolve_open). fd or -errno. */
int lcl_open_in_root(const struct local_inst *li, const char *path, int flags, mode_t mode);
/* mkdir -p of path inside the root. 0 or -errno. */
int lcl_mkdir_p(const struct local_inst *li, const char *path, mode_t mode);

#endif
