/*
 * check_local — the local provider driven through its ops table, no FUSE:
 * real namespaces, overlay, loop/tmpfs disks and cgroups on this machine.
 *
 * One lease (memoryMB 64, diskMB 16) is shared by the tests here through an
 * unchecked fixture; tests that need their own lease are in
 * check_local_life.c.
 * The teardown kills every lease left in the temporary state directory,
 * so a failing test leaves no mount, cgroup or process behind. Skips
 * (exit 77) when not root or when namespaces are not available.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/caller.h"
#include "base/buf.h"
#include "provider.h"

#include "local_check.h"
#include "openat2_off.h"

#ifndef SBXFS_INIT_BUILD
#define SBXFS_INIT_BUILD "sbxfs-init"
#endif

const struct sbx_provider *P;
char state_dir[] = "/var/tmp/check_local.XXXXXX";
char marker[128];
struct sbx_spec spec;
struct sbx_instance *lease;

static int collect(void *ctx, enum sbx_stream s, const char *data, size_t len)
{
	struct outs *o = ctx;
	sbx_buf_add(s == SBX_STDERR ? &o->err : &o->out, data, len);
	return 0;
}

/* Runs shell text; returns the exit code (fails the test on a call error). */
int run_ex(struct sbx_instance *in, const char *sh, const char *cwd, const char *const *envs,
	   long timeout_ms, struct outs *o, bool *timed_out)
{
	struct sbx_run_req req = {.shell = sh, .cwd = cwd, .envs = envs, .timeout_ms = timeout_ms};
	struct sbx_run_sink sink = {.ctx = o, .output = collect};
	struct sbx_run_result res;
	struct sbx_error err = SBX_ERROR_INIT;
	sbx_buf_reset(&o->out);
	sbx_buf_reset(&o->err);
	int e = P->run(in, &req, &sink, &res, &err);
	ck_assert_msg(e == 0, "run %s: %d %s", sh, e, err.msg);
	if (timed_out)
		*timed_out = res.timed_out;
	return res.exit_code;
}

int run(struct sbx_instance *in, const char *sh, struct outs *o)
{
	return run_ex(in, sh, NULL, NULL, 30000, o, NULL);
}

struct sbx_instance *create(struct sbx_spec *s, struct sbx_error *err)
{
	struct sbx_instance *in = NULL;
	int e = P->create(s, "check", &in, err);
	return e ? NULL : in;
}

void kill_release(struct sbx_instance *in)
{
	struct sbx_error err = SBX_ERROR_INIT;
	if (!in)
		return;
	int e = P->kill(in, &err);
	P->release(in);
	ck_assert_msg(e == 0, "kill: %s", err.msg);
}

/* Kills every lease still in the state dir (a failed test may have left one). */
void kill_leftovers(void)
{
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/local", state_dir);
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		struct sbx_instance *in = NULL;
		struct sbx_error err = SBX_ERROR_INIT;
		if (strncmp(de->d_name, "lcl-", 4))
			continue;
		if (P->attach(&spec, de->d_name, NULL, &in, &err) == 0) {
			P->kill(in, &err);
			P->release(in);
		}
	}
	if (d)
		closedir(d);
}

static void setup_lease(void)
{
	struct sbx_error err = SBX_ERROR_INIT;
	lease = create(&spec, &err);
	ck_assert_msg(lease != NULL, "create: %s", err.msg);
}

static void teardown_lease(void)
{
	struct sbx_error err = SBX_ERROR_INIT;
	if (lease)
		P->kill(lease, &err);
	P->release(lease);
	lease = NULL;
	kill_leftovers();
}

void msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int sink_buf(void *ctx, const char *data, size_t len)
{
	sbx_buf_add(ctx, data, len);
	return 0;
}

char *read_file(struct sbx_instance *in, const char *path, int *e)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct sbx_error err = SBX_ERROR_INIT;
	*e = P->read(in, path, 0, -1, sink_buf, &b, &err);
	return sbx_buf_detach(&b, NULL);
}

void write_file(struct sbx_instance *in, const char *path, const char *text)
{
	struct sbx_error err = SBX_ERROR_INIT;
	FILE *f = tmpfile();
	fputs(text, f);
	fflush(f);
	int e = P->write(in, path, fileno(f), (off_t)strlen(text), 0644, &err);
	fclose(f);
	ck_assert_msg(e == 0, "write %s: %s", path, err.msg);
}

/* ---- runs ---------------------------------------------------------------- */

START_TEST(test_echo)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	ck_assert_int_eq(run(lease, "echo hi", &o), 0);
	ck_assert_str_eq(o.out.buf, "hi\n");
	ck_assert_str_eq(o.err.buf, "");
	ck_assert_int_eq(run(lease, "exit 3", &o), 3);
	ck_assert_int_eq(run(lease, "echo out; echo err >&2; exit 1", &o), 1);
	ck_assert_str_eq(o.out.buf, "out\n");
	ck_assert_str_eq(o.err.buf, "err\n");
	ck_assert_int_eq(run(lease, "hostname; id -u; cat /proc/1/comm", &o), 0);
	ck_assert_str_eq(o.out.buf, "check\n0\nsbxfs-init\n"); /* the init is PID 1 */
}
END_TEST

START_TEST(test_envs_cwd_argv)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	const char *envs[] = {"FOO=bar", "SPEC_ENV=override", NULL};
	ck_assert_int_eq(run_ex(lease, "echo $FOO $SPEC_ENV $OTHER $HOME $LANG; pwd", "/tmp", envs,
				5000, &o, NULL),
			 0);
	ck_assert_str_eq(o.out.buf, "bar override keep /root C.UTF-8\n/tmp\n");
	ck_assert_int_eq(run(lease, "pwd", &o), 0);
	ck_assert_str_eq(o.out.buf, "/root\n"); /* the default working directory */

	const char *argv[] = {"printf", "[%s]", "a b", "c", NULL};
	struct sbx_run_req req = {.argv = argv};
	struct sbx_run_sink sink = {.ctx = &o, .output = collect};
	struct sbx_run_result res;
	struct sbx_error err = SBX_ERROR_INIT;
	sbx_buf_reset(&o.out);
	ck_assert_int_eq(P->run(lease, &req, &sink, &res, &err), 0);
	ck_assert_str_eq(o.out.buf, "[a b][c]");
	const char *bad[] = {"/no/such/program", NULL};
	req.argv = bad;
	ck_assert_int_eq(P->run(lease, &req, &sink, &res, &err), -ENOENT);
	req.argv = argv;
	req.cwd = "/no/such/dir";
	ck_assert_int_eq(P->run(lease, &req, &sink, &res, &err), -ENOENT);
}
END_TEST

START_TEST(test_background_and_timeout)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	bool timed_out = false;
	long long t0 = sbx_now_ms();
	/* Keeps the stdout pipe open: the run must still end promptly. */
	ck_assert_int_eq(run(lease, "nohup sleep 1000 & echo started", &o), 0);
	ck_assert_msg(sbx_now_ms() - t0 < 3000, "a background process held the run");
	ck_assert_str_eq(o.out.buf, "started\n");
	ck_assert_int_eq(run(lease, "ps -eo args", &o), 0);
	ck_assert_msg(strstr(o.out.buf, "sleep 1000"), "ps: %s", o.out.buf);

	t0 = sbx_now_ms();
	ck_assert_int_eq(run_ex(lease, "echo before; sleep 30", NULL, NULL, 300, &o, &timed_out),
			 128 + SIGKILL);
	ck_assert(timed_out);
	ck_assert_str_eq(o.out.buf, "before\n");
	ck_assert_msg(sbx_now_ms() - t0 < 5000, "timeout took %lld ms", sbx_now_ms() - t0);
	/* The background sleep of the first run survived all of this. */
	ck_assert_int_eq(run(lease, "ps -eo args | grep -c '^sleep 1000'", &o), 0);
	ck_assert_str_eq(o.out.buf, "1\n");
}
END_TEST

/*
 * Starts a busy counter in the lease, pauses it (the counter must stand
 * still, probe says PAUSED) and resumes it (the counter moves again).
 */
void check_pause(struct sbx_instance *in)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_error err = SBX_ERROR_INIT;
	enum sbx_remote_state st;
	int e;
	ck_assert_int_eq(run(in,
			     "(n=0; while :; do n=$((n+1)); echo $n > /tmp/cnt.new; "
			     "mv /tmp/cnt.new /tmp/cnt; done) >/dev/null 2>&1 & sleep 0.3",
			     &o),
			 0);
	ck_assert_int_eq(P->pause(in, &err), 0);
	ck_assert_int_eq(P->probe(in, &st, &err), 0);
	ck_assert_int_eq(st, SBX_REMOTE_PAUSED);
	char *a = read_file(in, "/tmp/cnt", &e);
	ck_assert_int_eq(e, 0);
	msleep(300);
	char *b = read_file(in, "/tmp/cnt", &e);
	ck_assert_str_eq(a, b);
	ck_assert_int_eq(P->unpause(in, &err), 0);
	ck_assert_int_eq(P->probe(in, &st, &err), 0);
	ck_assert_int_eq(st, SBX_REMOTE_RUNNING);
	msleep(300);
	char *c = read_file(in, "/tmp/cnt", &e);
	ck_assert_msg(atol(c) > atol(b), "counter stuck at %s after unpause", c);
	free(a);
	free(b);
	free(c);
	sbx_buf_release(&o.out);
	sbx_buf_release(&o.err);
}

START_TEST(test_pause)
{
	check_pause(lease);
}
END_TEST

START_TEST(test_memory_cap)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	int code = run(lease, "python3 -c \"s = b'x' * (256 << 20); print(len(s))\"", &o);
	ck_assert_msg(code == 128 + SIGKILL, "exit %d, stdout %s", code, o.out.buf);
	ck_assert_int_eq(run(lease, "echo alive", &o), 0);
	ck_assert_str_eq(o.out.buf, "alive\n");
}
END_TEST

START_TEST(test_disk_cap)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_error err = SBX_ERROR_INIT;
	struct statvfs sv;
	uint64_t fh;
	ck_assert_int_ne(run(lease, "dd if=/dev/zero of=/root/big bs=1M count=64", &o), 0);
	ck_assert_msg(strstr(o.err.buf, "No space left"), "dd: %s", o.err.buf);
	ck_assert_int_eq(run(lease, "rm /root/big", &o), 0);

	ck_assert_int_eq(P->statfs(lease, "/", &sv, &err), 0);
	long mb = (long)(sv.f_blocks * sv.f_frsize >> 20);
	ck_assert_msg(mb >= 12 && mb <= 16, "df says %ld MB", mb); /* ext4 keeps some for itself */

	char *chunk = calloc(1, 1 << 20);
	ssize_t n = 0;
	ck_assert_int_eq(P->open(lease, "/root/big2", O_WRONLY | O_CREAT, 0644, &fh, &err), 0);
	for (int i = 0; i < 64 && n >= 0; i++)
		n = P->pwrite(lease, fh, chunk, 1 << 20, (off_t)i << 20, &err);
	P->close(lease, fh);
	free(chunk);
	ck_assert_int_eq(n, -ENOSPC);
	ck_assert_int_eq(P->unlink(lease, "/root/big2", &err), 0);
}
END_TEST

/* ---- isolation ----------------------------------------------------------- */

START_TEST(test_host_masked)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_stat st;
	char sh[256], path[160];
	const char *name = strrchr(marker, '/');
	snprintf(path, sizeof(path), "/root%s", name);
	snprintf(sh, sizeof(sh), "test -e %s", path);
	ck_assert_int_eq(access(marker, F_OK), 0);
	ck_assert_int_eq(run(lease, sh, &o), 1);
	ck_assert_int_eq(P->stat(lease, path, &st, &err), -ENOENT);
	/* Nor the state directory (here under /var/tmp, which is not masked as a whole). */
	snprintf(path, sizeof(path), "%s/local", state_dir);
	ck_assert_int_eq(P->stat(lease, path, &st, &err), -ENOENT);
	snprintf(sh, sizeof(sh), "ls -A %s | wc -l", state_dir);
	ck_assert_int_eq(run(lease, sh, &o), 0);
	ck_assert_str_eq(o.out.buf, "0\n");
}
END_TEST

/* Links made in dir resolve inside the lease, whatever their text. */
static void symlinks_stay_inside(const char *dir)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_stat st;
	char buf[256], abs[64], rel[64], host[64], magic[64], loop[64];
	int e;
	snprintf(abs, sizeof(abs), "%s/abs", dir);
	snprintf(rel, sizeof(rel), "%s/rel", dir);
	snprintf(host, sizeof(host), "%s/host", dir);
	snprintf(magic, sizeof(magic), "%s/magic", dir);
	snprintf(loop, sizeof(loop), "%s/loop", dir);
	write_file(lease, "/etc/sbx-hostname", "inside\n");
	ck_assert_int_eq(P->symlink(lease, "/etc/sbx-hostname", abs, &err), 0);
	ck_assert_int_eq(P->symlink(lease, "../../../../../../etc/sbx-hostname", rel, &err), 0);
	char *a = read_file(lease, abs, &e);
	ck_assert_int_eq(e, 0);
	ck_assert_str_eq(a, "inside\n");
	free(a);
	a = read_file(lease, rel, &e);
	ck_assert_str_eq(a, "inside\n");
	free(a);
	ck_assert_int_eq(P->readlink(lease, abs, buf, sizeof(buf), &err), 0);
	ck_assert_str_eq(buf, "/etc/sbx-hostname");
	ck_assert_int_eq(P->stat(lease, abs, &st, &err), 0);
	ck_assert(S_ISLNK(st.mode));
	/* A link to the host's marker (masked) and to the state dir resolve to nothing. */
	ck_assert_int_eq(P->symlink(lease, marker, host, &err), 0);
	free(read_file(lease, host, &e));
	ck_assert_int_eq(e, -ENOENT);
	ck_assert_int_eq(P->symlink(lease, "/proc/self/root/etc/passwd", magic, &err), 0);
	free(read_file(lease, magic, &e));
	ck_assert_int_ne(e, 0);
	ck_assert_int_eq(P->symlink(lease, loop, loop, &err), 0);
	free(read_file(lease, loop, &e));
	ck_assert_int_eq(e, -ELOOP);
	/* chmod follows the link, inside */
	ck_assert_int_eq(P->chmod(lease, abs, 0604, &err), 0);
	ck_assert_int_eq(P->stat(lease, "/etc/sbx-hostname", &st, &err), 0);
	ck_assert_int_eq(st.mode & 07777, 0604);
	ck_assert_int_eq(P->stat(lease, "/../..", &st, &err), 0); /* still the lease's root */
	ck_assert(S_ISDIR(st.mode));
}

START_TEST(test_symlinks_stay_inside)
{
	symlinks_stay_inside("/root");
}
END_TEST

/* The same where openat2 is missing (valgrind 3.19, kernels before 5.6). */
START_TEST(test_symlinks_stay_inside_walk)
{
	if (!refuse_openat2(ENOSYS))
		return;
	symlinks_stay_inside("/tmp");
}
END_TEST

/* ---- files --------------------------------------------------------------- */

struct names {
	struct sbx_buf b;
	bool dir_seen;
};

static int list_cb(void *ctx, const char *name, const struct sbx_stat *st)
{
	struct names *n = ctx;
	sbx_buf_addf(&n->b, "%s:%lld ", name, (long long)st->size);
	if (!strcmp(name, "d"))
		n->dir_seen = S_ISDIR(st->mode);
	return 0;
}

START_TEST(test_files)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_stat st;
	struct names n = {SBX_BUF_INIT, false};
	int e;
	ck_assert_int_eq(P->mkdir(lease, "/srv/t", 0755, &err), 0);
	ck_assert_int_eq(P->mkdir(lease, "/srv/t", 0755, &err), -EEXIST);
	write_file(lease, "/srv/t/a", "AAA");
	write_file(lease, "/srv/t/b", "BB");
	ck_assert_int_eq(P->mkdir(lease, "/srv/t/d", 0700, &err), 0);
	ck_assert_int_eq(P->list(lease, "/srv/t", list_cb, &n, &err), 0);
	ck_assert_msg(strstr(n.b.buf, "a:3 ") && strstr(n.b.buf, "b:2 ") && n.dir_seen, "%s",
		      n.b.buf);
	/* rename over an existing file, then NOREPLACE refuses */
	ck_assert_int_eq(P->rename(lease, "/srv/t/a", "/srv/t/b", 0, &err), 0);
	char *s = read_file(lease, "/srv/t/b", &e);
	ck_assert_str_eq(s, "AAA");
	free(s);
	ck_assert_int_eq(P->stat(lease, "/srv/t/a", &st, &err), -ENOENT);
	write_file(lease, "/srv/t/c", "C");
	ck_assert_int_eq(P->rename(lease, "/srv/t/c", "/srv/t/b", RENAME_NOREPLACE, &err), -EEXIST);
	ck_assert_int_eq(P->rename(lease, "/srv/t/c", "/srv/t/b", RENAME_EXCHANGE, &err), 0);
	s = read_file(lease, "/srv/t/c", &e);
	ck_assert_str_eq(s, "AAA");
	free(s);
	/* metadata */
	ck_assert_int_eq(P->chmod(lease, "/srv/t/b", 0600, &err), 0);
	ck_assert_int_eq(P->chown(lease, "/srv/t/b", 12, 34, &err), 0);
	struct timespec ts[2] = {{1000000000, 0}, {1234567890, 5}};
	ck_assert_int_eq(P->utimens(lease, "/srv/t/b", ts, &err), 0);
	ck_assert_int_eq(P->stat(lease, "/srv/t/b", &st, &err), 0);
	ck_assert_int_eq(st.mode & 07777, 0600);
	ck_assert_int_eq(st.uid, 12);
	ck_assert_int_eq(st.gid, 34);
	ck_assert_int_eq(st.mtime.tv_sec, 1234567890);
	/* the whole-file write keeps mode and owner of what it replaces */
	write_file(lease, "/srv/t/b", "new");
	ck_assert_int_eq(P->stat(lease, "/srv/t/b", &st, &err), 0);
	ck_assert_int_eq(st.mode & 07777, 0600);
	ck_assert_int_eq(st.uid, 12);
	ck_assert_int_eq(st.size, 3);
	ck_assert_int_eq(P->truncate(lease, "/srv/t/b", 1, &err), 0);
	ck_assert_int_eq(P->link(lease, "/srv/t/b", "/srv/t/hard", &err), 0);
	ck_assert_int_eq(P->stat(lease, "/srv/t/hard", &st, &err), 0);
	ck_assert_int_eq(st.nlink, 2);
	ck_assert_int_eq(st.size, 1);
	ck_assert_int_eq(P->mknod(lease, "/srv/t/fifo", S_IFIFO | 0644, 0, &err), 0);
	/* Device nodes are names on a nodev root: made with their type and rdev, but a
	 * caller without CAP_MKNOD (acting as uid 65534) gets EPERM as on any disk. */
	ck_assert_int_eq(P->mknod(lease, "/srv/t/dev", S_IFCHR | 0644, makedev(1, 3), &err), 0);
	ck_assert_int_eq(P->stat(lease, "/srv/t/dev", &st, &err), 0);
	ck_assert(S_ISCHR(st.mode) && st.rdev == makedev(1, 3));
	struct sbx_caller nobody = {true, 65534, 65534, 027, gettid()};
	ck_assert_int_eq(P->mkdir(lease, "/srv/t/open", 0700, &err), 0);
	ck_assert_int_eq(P->chmod(lease, "/srv/t/open", 0777, &err), 0);
	sbx_caller_set(&nobody);
	ck_assert_int_eq(P->mknod(lease, "/srv/t/open/dev", S_IFCHR | 0644, makedev(1, 3), &err),
			 -EPERM);
	ck_assert_int_eq(P->mkdir(lease, "/srv/t/open/bynobody", 0777, &err), 0);
	sbx_caller_set(NULL);
	ck_assert_int_eq(P->stat(lease, "/srv/t/open/bynobody", &st, &err), 0);
	ck_assert_int_eq(st.uid, 65534);
	ck_assert_int_eq(st.gid, 65534);
	ck_assert_int_eq(st.mode & 07777, 0750); /* the caller's umask alone */
	ck_assert_int_eq(P->mknod(lease, "/srv/t/open/dev", S_IFCHR | 0644, makedev(1, 3), &err),
			 0); /* the daemon's own calls keep its rights */
	ck_assert_int_eq(P->stat(lease, "/srv/t/fifo", &st, &err), 0);
	ck_assert(S_ISFIFO(st.mode));
	/* handles */
	uint64_t fh;
	char buf[16] = "";
	ck_assert_int_eq(P->open(lease, "/srv/t/h",
				 O_RDWR | O_CREAT | O_EXCL | O_LARGEFILE | 0x20 /* FMODE_EXEC */,
				 S_IFREG | 0640, &fh, &err),
			 0);
	ck_assert_int_eq(P->pwrite(lease, fh, "hello", 5, 0, &err), 5);
	ck_assert_int_eq(P->ftruncate(lease, fh, 4, &err), 0);
	ck_assert_int_eq(P->fsync(lease, fh, 0, &err), 0);
	ck_assert_int_eq(P->pread(lease, fh, buf, sizeof(buf), 1, &err), 3);
	ck_assert_int_eq(P->fstat(lease, fh, &st, &err), 0);
	ck_assert_int_eq(st.size, 4);
	P->close(lease, fh);
	/* what the files ops did is what the sandbox sees */
	ck_assert_int_eq(
	    run(lease, "cat /srv/t/h; stat -c %a /srv/t/h; ls /srv/t | tr '\\n' ' '", &o), 0);
	ck_assert_str_eq(o.out.buf, "hell640\nb c d dev fifo h hard open ");
	ck_assert_int_eq(P->rmdir(lease, "/srv/t", &err), -ENOTEMPTY);
	ck_assert_int_eq(P->unlink(lease, "/srv/t/h", &err), 0);
	ck_assert_int_eq(P->rmdir(lease, "/srv/t/d", &err), 0);
	ck_assert_int_eq(P->stat(lease, "/", &st, &err), 0);
	ck_assert(S_ISDIR(st.mode));
	ck_assert_int_eq(P->stat(lease, "/../..", &st, &err), 0); /* still the lease's root */
	sbx_buf_release(&n.b);
}
END_TEST

/* ---- lifecycle ------------------------------------------------------------ */

START_TEST(test_attach)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_instance *again = NULL;
	char id[128];
	int e;
	ck_assert_int_eq(run(lease, "nohup sleep 999 & echo kept > /root/keep", &o), 0);
	snprintf(id, sizeof(id), "%s", lease->id);
	P->release(lease);
	lease = NULL; /* this forked test's copy only; the fixture still holds the lease */
	ck_assert_int_eq(P->attach(&spec, id, NULL, &again, &err), 0);
	char *s = read_file(again, "/root/keep", &e);
	ck_assert_str_eq(s, "kept\n");
	free(s);
	ck_assert_int_eq(run(again, "ps -eo args | grep -c '^sleep 999'", &o), 0);
	ck_assert_str_eq(o.out.buf, "1\n");
	P->release(again);
	ck_assert_int_eq(P->attach(&spec, "lcl-000000000000", NULL, &again, &err), -ENOENT);
	ck_assert_int_eq(P->attach(&spec, "../../etc", NULL, &again, &err), -ENOENT);
}
END_TEST

bool mounted(const char *dir)
{
	FILE *f = fopen("/proc/self/mounts", "r");
	char line[1024];
	bool found = false;
	while (f && fgets(line, sizeof(line), f))
		found |= strstr(line, dir) != NULL;
	if (f)
		fclose(f);
	return found;
}

/* The process does not exist or is a zombie its new parent has not reaped yet. */
bool proc_gone(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return true;
	bool gone =
	    !fgets(buf, sizeof(buf), f) || (strrchr(buf, ')') && strrchr(buf, ')')[2] == 'Z');
	fclose(f);
	return gone;
}

START_TEST(test_big_io_and_concurrency)
{
	struct outs o = {SBX_BUF_INIT, SBX_BUF_INIT};
	/* 5 MB of output streams through; a 200 KiB script (over one argument's cap) runs. */
	ck_assert_int_eq(run(lease, "head -c 5000000 /dev/zero | tr '\\0' x", &o), 0);
	ck_assert_uint_eq(o.out.len, 5000000);
	struct sbx_buf script = SBX_BUF_INIT;
	for (int i = 0; i < 20000; i++)
		sbx_buf_addf(&script, ": %05d\n", i);
	sbx_buf_adds(&script, "echo end");
	ck_assert_int_eq(run(lease, script.buf, &o), 0);
	ck_assert_str_eq(o.out.buf, "end\n");
	sbx_buf_release(&script);
	/* Runs on one lease do not wait for each other. */
	long long t0 = sbx_now_ms();
	pid_t kids[3];
	for (int i = 0; i < 3; i++) {
		if ((kids[i] = fork()) == 0) {
			struct outs k = {SBX_BUF_INIT, SBX_BUF_INIT};
			_exit(run(lease, "sleep 1; echo done", &k) == 0 &&
				      !strcmp(k.out.buf, "done\n")
				  ? 0
				  : 1);
		}
	}
	for (int i = 0; i < 3; i++) {
		int st;
		ck_assert_int_eq(waitpid(kids[i], &st, 0), kids[i]);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	ck_assert_msg(sbx_now_ms() - t0 < 2500, "3 parallel 1 s runs took %lld ms",
		      sbx_now_ms() - t0);
}
END_TEST

/* Whether this process may make the namespaces a lease needs. */
static bool namespaces_work(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS) ? 1 : 0);
	int st;
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st);
}

int main(void)
{
	struct sbx_error err = SBX_ERROR_INIT;
	if (geteuid() != 0 || !namespaces_work()) {
		fprintf(stderr, "check_local: needs root and namespaces; skipped\n");
		return 77;
	}
	if (!getenv("SBXFS_INIT"))
		setenv("SBXFS_INIT", SBXFS_INIT_BUILD, 1);
	P = sbx_provider_find("local");
	if (!P || !mkdtemp(state_dir))
		return 99;
	json_t *settings = json_object();
	struct sbx_provider_env env = {settings, state_dir};
	if (P->init(&env, &err) < 0) {
		fprintf(stderr, "init: %s\n", err.msg);
		return 99;
	}
	json_decref(settings);
	sbx_spec_init(&spec);
	spec.provider = strdup("local");
	spec.template_name = strdup("host");
	spec.res.memory_mb = 64;
	spec.res.disk_mb = 16;
	json_object_set_new(spec.envs, "SPEC_ENV", json_string("spec"));
	json_object_set_new(spec.envs, "OTHER", json_string("keep"));
	snprintf(marker, sizeof(marker), "/root/.check_local-marker-%d", (int)getpid());
	FILE *f = fopen(marker, "w");
	if (f)
		fclose(f);

	Suite *s = suite_create("local");
	TCase *tc = tcase_create("lease");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, setup_lease, teardown_lease);
	tcase_add_test(tc, test_echo);
	tcase_add_test(tc, test_envs_cwd_argv);
	tcase_add_test(tc, test_background_and_timeout);
	tcase_add_test(tc, test_pause);
	tcase_add_test(tc, test_memory_cap);
	tcase_add_test(tc, test_disk_cap);
	tcase_add_test(tc, test_host_masked);
	tcase_add_test(tc, test_symlinks_stay_inside);
	tcase_add_test(tc, test_symlinks_stay_inside_walk);
	tcase_add_test(tc, test_files);
	tcase_add_test(tc, test_attach);
	tcase_add_test(tc, test_big_io_and_concurrency);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, check_local_life_tcase());

	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	kill_leftovers();
	P->shutdown(); /* unmounts the host view (hostview.c) no lease uses any more */
	unlink(marker);
	char local[256];
	snprintf(local, sizeof(local), "%s/local", state_dir);
	rmdir(local);
	rmdir(state_dir); /* fails (kept for a look) if a test left files behind */
	for (const char *c = "freezer memory cpu pids"; *c;) {
		char ctrl[16], path[128];
		int n = 0;
		sscanf(c, "%15s%n", ctrl, &n);
		c += n;
		while (*c == ' ')
			c++;
		snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/sbxfs", ctrl);
		rmdir(path); /* the shared parent, when no other mount uses it */
	}
	rmdir("/sys/fs/cgroup/unified/sbxfs");
	rmdir("/sys/fs/cgroup/sbxfs");
	sbx_spec_free(&spec);
	return failed ? 1 : 0;
}
