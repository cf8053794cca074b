/* ctlfiles — the mount's synthetic files (see ctlfiles.h). */
#include "ctlfiles.h"
#include "base/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access.h"
#include "base/fsutil.h"
#include "base/jsonutil.h"
#include "ctl.h"
#include "kinval.h"
#include "ports.h"
#include "run.h"
#include "runs.h"
#include "tty.h"
#include "writeback.h"

/* Largest text accepted by a control file write (a script, a code cell). */
#define SBX_CTL_MAX_TEXT (16u << 20)
/* Largest last-run file served (stdout of a huge run is truncated at this). */
#define SBX_CTL_MAX_FILE (256u << 20)

struct sbx_open *sbx_open_new(enum sbx_node_kind kind, struct sbx_lease *l, int flags)
{
	struct sbx_open *o = sbx_xcalloc(1, sizeof(*o));
	o->kind = kind;
	o->lease = l;
	o->flags = flags;
	sbx_buf_init(&o->data);
	return o;
}

void sbx_open_free(struct sbx_open *o)
{
	if (!o)
		return;
	sbx_run_reader_free(o->reader);
	sbx_run_put(o->run);
	sbx_tty_release(o);
	sbx_lease_put(o->lease);
	sbx_buf_release(&o->data);
	free(o->path);
	free(o);
}

/* ---- attributes and listings ------------------------------------------ */

static void lease_file_size(struct sbx_lease *l, const char *file, struct stat *st)
{
	struct stat fst;
	char *p = sbx_lease_path(l, file);
	if (stat(p, &fst) == 0) {
		st->st_size = fst.st_size;
		st->st_mtim = fst.st_mtim;
		st->st_ctim = fst.st_mtim;
	}
	free(p);
}

int sbx_ctl_getattr(struct sbx_mount *m, const struct sbx_node *n, struct sbx_lease *l,
		    struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = sbx_access_mode(sbx_node_mode(n->kind));
	if (n->kind == SBX_N_ROOT || n->kind == SBX_N_LEASE)
		st->st_mode = sbx_access_dir_mode(st->st_mode);
	st->st_nlink = S_ISDIR(st->st_mode) ? 2 : 1;
	st->st_uid = getuid();
	st->st_gid = sbx_access_gid();
	st->st_mtim.tv_sec = st->st_ctim.tv_sec = st->st_atim.tv_sec =
	    l ? sbx_boot_to_wall(l->created_boot) : time(NULL);
	switch (n->kind) {
	case SBX_N_PROFILE:
		if (!sbx_config_profile(&m->config, n->sub))
			return -ENOENT;
		break;
	case SBX_N_README:
		st->st_size = (off_t)strlen(sbx_readme_text);
		break;
	case SBX_N_STDOUT:
	case SBX_N_EXEC:
		sbx_runs_stat(l, sbx_runs_pick(l), "stdout", st);
		break;
	case SBX_N_STDERR:
		sbx_runs_stat(l, sbx_runs_pick(l), "stderr", st);
		break;
	case SBX_N_RESULT:
		sbx_runs_stat(l, sbx_runs_pick(l), "result", st);
		break;
	case SBX_N_RUN_DIR:
	case SBX_N_RUN_FILE:
	case SBX_N_RUN_CTL: {
		const char *slash = strchr(n->sub, '/');
		return sbx_runs_stat(l, strtoul(n->sub, NULL, 10),
				     n->kind == SBX_N_RUN_FILE ? slash + 1 : NULL, st);
	}
	case SBX_N_RUN_MINE: {
		char line[32];
		unsigned long mine = sbx_runs_pick(l);
		if (!mine)
			return -ENOENT;
		st->st_size = snprintf(line, sizeof(line), "%lu\n", mine);
		break;
	}
	case SBX_N_LOG:
		lease_file_size(l, "log", st);
		break;
	case SBX_N_LEASE_ERROR:
		lease_file_size(l, "error", st);
		break;
	case SBX_N_TTY_SESSION:
	case SBX_N_TTY_DATA:
	case SBX_N_TTY_CTL:
	case SBX_N_TTY_STATUS:
		return sbx_tty_exists(l, n->sub);
	case SBX_N_RESULT_FILE: {
		struct stat fst;
		char *p = sbx_lease_path(l, "results"), full[4200];
		snprintf(full, sizeof(full), "%s/%.255s", p, n->sub /* one name */);
		free(p);
		if (stat(full, &fst) || !S_ISREG(fst.st_mode))
			return -ENOENT;
		st->st_size = fst.st_size;
		st->st_mtim = st->st_ctim = fst.st_mtim;
		break;
	}
	default:
		break;
	}
	return 0;
}

struct name_list {
	sbx_fs_fill_fn fill;
	void *ctx;
};

static void fill_lease_name(void *ctx, struct sbx_lease *l)
{
	struct name_list *nl = ctx;
	nl->fill(nl->ctx, l->name, NULL);
}

/* ports/: one file per listening port; a failure goes to the lease's error file. */
static int ports_readdir(struct sbx_mount *m, struct sbx_lease *l, sbx_fs_fill_fn fill, void *ctx)
{
	struct sbx_error e = SBX_ERROR_INIT;
	int *ports = sbx_xcalloc(SBX_PORTS_MAX, sizeof(*ports));
	int n;
	n = sbx_lease_ports(l, ports, SBX_PORTS_MAX, &e);
	if (n < 0)
		sbx_lease_error(l, "ports", &e);
	for (int i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof(name), "%d", ports[i]);
		fill(ctx, name, NULL);
	}
	free(ports);
	return n < 0 ? n : 0;
}

int sbx_ctl_readdir(struct sbx_mount *m, const struct sbx_node *n, struct sbx_lease *l,
		    sbx_fs_fill_fn fill, void *ctx)
{
	const struct sbx_node_entry *e = NULL;
	switch (n->kind) {
	case SBX_N_ROOT: {
		struct name_list nl = {fill, ctx};
		for (e = sbx_node_root_entries(); e->name; e++)
			fill(ctx, e->name, NULL);
		sbx_lease_foreach(m, fill_lease_name, &nl);
		return 0;
	}
	case SBX_N_LEASE:
		for (e = sbx_node_lease_entries(); e->name; e++)
			fill(ctx, e->name, NULL);
		return 0;
	case SBX_N_PROFILES:
		for (size_t i = 0; i < m->config.n_profiles; i++) {
			char name[80];
			snprintf(name, sizeof(name), "%s.json", m->config.profiles[i].name);
			fill(ctx, name, NULL);
		}
		return 0;
	case SBX_N_PORTS:
		return ports_readdir(m, l, fill, ctx);
	case SBX_N_RUNS: {
		unsigned long *ns;
		size_t k = sbx_runs_list(l, &ns);
		for (size_t i = 0; i < k; i++) {
			char name[32];
			snprintf(name, sizeof(name), "%lu", ns[i]);
			fill(ctx, name, NULL);
		}
		free(ns);
		if (sbx_runs_pick(l))
			fill(ctx, "mine", NULL);
		return 0;
	}
	case SBX_N_RUN_DIR: {
		static const char *const files[] = {"cmd", "stdout", "stderr", "result", "ctl"};
		struct stat st;
		if (sbx_runs_stat(l, strtoul(n->sub, NULL, 10), NULL, &st))
			return -ENOENT;
		for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++)
			fill(ctx, files[i], NULL);
		return 0;
	}
	case SBX_N_TTY:
	case SBX_N_TTY_SESSION:
		return sbx_tty_readdir(l, n, fill, ctx);
	case SBX_N_RESULTS: {
		char *p = sbx_lease_path(l, "results");
		DIR *d = opendir(p);
		free(p);
		if (!d)
			return 0;
		struct dirent *de;
		while ((de = readdir(d)))
			if (de->d_name[0] != '.')
				fill(ctx, de->d_name, NULL);
		closedir(d);
		return 0;
	}
	default:
		return -ENOTDIR;
	}
}

/* ---- open: snapshots ---------------------------------------------------- */

static void add_json(struct sbx_buf *b, json_t *j)
{
	/* ASCII only, as `log`: a C1 control in a provider's fact never reaches a terminal. */
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	/* NULL only for text that is not UTF-8 (its producers escape it) or no memory */
	sbx_buf_adds(b, s ? s : "{\"error\": \"not representable as JSON\"}");
	sbx_buf_addch(b, '\n');
	free(s);
	json_decref(j);
}

static void status_line(void *ctx, struct sbx_lease *l)
{
	sbx_lease_status_line(l, ctx);
	sbx_buf_addch(ctx, '\n');
}

static int add_lease_file(struct sbx_open *o, const char *file)
{
	char *p = sbx_lease_path(o->lease, file);
	int rc = sbx_read_file(p, &o->data, SBX_CTL_MAX_FILE);
	free(p);
	return rc == -ENOENT || rc == -EFBIG ? 0 : rc;
}

static int snapshot(struct sbx_mount *m, struct sbx_open *o, const struct sbx_node *n)
{
	struct sbx_lease *l = o->lease;
	switch (n->kind) {
	case SBX_N_README:
		sbx_buf_adds(&o->data, sbx_readme_text);
		return 0;
	case SBX_N_STATUS:
		sbx_lease_foreach(m, status_line, &o->data);
		return 0;
	case SBX_N_ERROR: {
		char *s = sbx_mount_error_text(m);
		sbx_buf_adds(&o->data, s);
		free(s);
		return 0;
	}
	case SBX_N_PROFILE: {
		const struct sbx_profile *p = sbx_config_profile(&m->config, n->sub);
		if (!p)
			return -ENOENT;
		add_json(&o->data, json_incref(p->raw));
		return 0;
	}
	case SBX_N_EXEC:
	case SBX_N_CODE:
	case SBX_N_STDOUT:
	case SBX_N_STDERR:
	case SBX_N_RESULT: {
		/* The caller's run (runs.h), read as it grows; nothing before the first run. */
		unsigned long run = sbx_runs_pick(l);
		const char *file = n->kind == SBX_N_STDERR   ? "stderr"
				   : n->kind == SBX_N_RESULT ? "result"
							     : "stdout";
		int rc = sbx_run_reader_open(l, run, file, sbx_node_is_runner(n->kind), &o->reader);
		return rc == -ENOENT ? 0 : rc;
	}
	case SBX_N_RUN_FILE: {
		const char *file = strchr(n->sub, '/') + 1;
		return sbx_run_reader_open(l, strtoul(n->sub, NULL, 10), file, false, &o->reader);
	}
	case SBX_N_RUN_MINE: {
		unsigned long mine = sbx_runs_pick(l);
		if (!mine)
			return -ENOENT;
		sbx_buf_addf(&o->data, "%lu\n", mine);
		return 0;
	}
	case SBX_N_LOG:
		return add_lease_file(o, "log");
	case SBX_N_LEASE_ERROR:
		return add_lease_file(o, "error");
	case SBX_N_RESULT_FILE: {
		char buf[4200];
		snprintf(buf, sizeof(buf), "results/%.255s", n->sub /* one name */);
		char *p = sbx_lease_path(l, buf);
		int rc = sbx_read_file(p, &o->data, SBX_CTL_MAX_FILE);
		free(p);
		return rc;
	}
	case SBX_N_STATE:
		pthread_mutex_lock(&l->lock);
		sbx_buf_addf(&o->data, "%s\n", sbx_lease_state_name(l->state));
		pthread_mutex_unlock(&l->lock);
		return 0;
	case SBX_N_SPEC:
		add_json(&o->data, sbx_spec_to_json(&l->spec));
		return 0;
	case SBX_N_INFO:
		add_json(&o->data, sbx_lease_info(l));
		return 0;
	case SBX_N_ENV:
		pthread_mutex_lock(&l->lock);
		sbx_buf_adds(&o->data, l->env_text);
		pthread_mutex_unlock(&l->lock);
		return 0;
	case SBX_N_PORT: {
		struct sbx_error e = SBX_ERROR_INIT;
		struct sbx_instance *inst;
		char host[512];
		int rc;
		if (!l->prov->get_host)
			return sbx_refuse(m, l, ENOTSUP, "ports", "provider cannot reach ports%s",
					  "");
		rc = sbx_lease_use(l, &inst, &e);
		if (!rc) {
			rc = l->prov->get_host(inst, atoi(n->sub), host, sizeof(host), &e);
			sbx_lease_unuse(l);
		}
		if (rc) {
			sbx_lease_error(l, "ports", &e);
			return rc;
		}
		sbx_buf_addf(&o->data, "%s\n", host); /* URL, then header lines */
		return 0;
	}
	default:
		return 0;
	}
}

static bool writable(enum sbx_node_kind k)
{
	return k == SBX_N_CTL || k == SBX_N_EXEC || k == SBX_N_CODE || k == SBX_N_ENV ||
	       k == SBX_N_STATE || k == SBX_N_RUN_CTL || k == SBX_N_TTY_DATA || k == SBX_N_TTY_CTL;
}

int sbx_ctl_open(struct sbx_mount *m, const struct sbx_node *n, struct sbx_lease *l, int flags,
		 struct sbx_open **out)
{
	int acc = flags & O_ACCMODE, rc;
	if (sbx_node_is_dir(n->kind)) {
		sbx_lease_put(l);
		return -EISDIR;
	}
	if (sbx_tty_node(n->kind)) {
		struct sbx_open *o = sbx_open_new(n->kind, l, flags);
		if ((rc = sbx_tty_open(o, n))) {
			sbx_open_free(o);
			return rc;
		}
		*out = o;
		return 0;
	}
	if (acc != O_RDONLY && !writable(n->kind)) {
		/* spec: EBUSY, the answer for "fixed once the lease is created". */
		rc = sbx_refuse(m, l, n->kind == SBX_N_SPEC ? EBUSY : EACCES, "open",
				"%s is read-only",
				n->kind == SBX_N_SPEC ? "spec (once the lease is created)"
						      : "this control file");
		sbx_lease_put(l);
		return rc;
	}
	if (acc != O_WRONLY && (n->kind == SBX_N_CTL || n->kind == SBX_N_RUN_CTL)) {
		sbx_lease_put(l);
		return -EACCES;
	}
	struct sbx_open *o = sbx_open_new(n->kind, l, flags);
	if (n->kind == SBX_N_RUN_CTL)
		o->run_n = strtoul(n->sub, NULL, 10); /* "N/ctl" */
	if (n->kind == SBX_N_CODE) {
		const char *lang = sbx_run_language(n->sub);
		snprintf(o->language, sizeof(o->language), "%s", lang ? lang : "python");
	}
	/* Writers of env start from its text unless they truncate (the shell's > vs >>). */
	if (acc == O_RDONLY || (n->kind == SBX_N_ENV && !(flags & O_TRUNC)) ||
	    n->kind == SBX_N_STATE) {
		if (!(sbx_node_is_runner(n->kind) && acc != O_RDONLY)) {
			rc = snapshot(m, o, n);
			if (rc) {
				sbx_open_free(o);
				return rc;
			}
		}
	}
	if (n->kind == SBX_N_STATE && acc != O_RDONLY)
		sbx_buf_reset(&o->data); /* a writer's buffer holds the words written */
	*out = o;
	return 0;
}

/* ---- read ---------------------------------------------------------------- */

static int start_run(struct sbx_open *o)
{
	struct sbx_error e = SBX_ERROR_INIT;
	int rc;
	o->ran = true;
	rc = sbx_run_start(o->lease, o->kind == SBX_N_EXEC ? SBX_RUN_SHELL : SBX_RUN_CODE,
			   o->kind == SBX_N_CODE ? o->language : NULL, o->data.buf, &o->owner,
			   &o->run, &e);
	if (!rc && (o->flags & O_ACCMODE) == O_RDWR)
		rc = sbx_run_reader_of(o->run, &o->reader);
	if (rc)
		sbx_lease_error(o->lease, "exec", &e);
	return rc;
}

ssize_t sbx_ctl_read(struct sbx_open *o, char *buf, size_t size, off_t off)
{
	if (o->tty)
		return sbx_tty_read(o, buf, size, off);
	if (sbx_node_is_runner(o->kind) && (o->flags & O_ACCMODE) == O_RDWR) {
		if (o->refused)
			return 0;
		if (!o->run && o->data.len && !o->ran) {
			int rc = start_run(o);
			if (rc)
				return rc;
		}
	}
	if (o->reader) {
		/* Runner files are streams: keep our own position, whatever offset comes in. */
		bool stream = sbx_node_is_runner(o->kind);
		ssize_t n = sbx_run_reader_read(o->reader, buf, size, stream ? o->rpos : off);
		if (n > 0)
			o->rpos += n;
		return n;
	}
	if ((size_t)off >= o->data.len)
		return 0;
	size_t n = o->data.len - (size_t)off;
	if (n > size)
		n = size;
	memcpy(buf, o->data.buf + off, n);
	return (ssize_t)n;
}

/* ---- write and flush ---------------------------------------------------- */

static int do_root_line(struct sbx_mount *m, const char *line)
{
	struct sbx_ctl_cmd cmd;
	struct sbx_error e = SBX_ERROR_INIT;
	int rc = sbx_ctl_parse(SBX_CTL_FILE_ROOT, line, &cmd, &e);
	if (rc == -ENODATA)
		return 0;
	if (!rc && cmd.word == SBX_CTL_NEW) {
		const char *kv[SBX_CTL_MAXARGS + 1];
		int k = 0, again = 0, times = 0;
		for (int i = 1; i < cmd.argc; i++)
			if (strncmp(cmd.argv[i], "profile=", 8))
				kv[k++] = cmd.argv[i];
		kv[k] = NULL;
		/*
		 * A key given twice (profile=a profile=b, envs.A=1 envs.A=2): one
		 * was dropped, silently (the first profile taken, the last of the
		 * others), where a JSON request refuses a duplicate key.
		 */
		for (int i = 1; i < cmd.argc && times < 2; i++) {
			size_t len = strcspn(cmd.argv[i], "=") + 1; /* "key=" */
			times = 1;
			for (int j = i + 1; j < cmd.argc; j++)
				times += !strncmp(cmd.argv[i], cmd.argv[j], len);
			again = i;
		}
		if (times > 1)
			rc = sbx_error_set(
			    &e, EINVAL, SBX_E_EXECUTION_FAILED, "%.*s is given %d times",
			    (int)strcspn(cmd.argv[again], "=") + 1, cmd.argv[again], times);
		else
			rc = sbx_lease_create(m, cmd.argv[0], sbx_ctl_opt(&cmd, 1, "profile"), kv,
					      NULL, &e);
	} else if (!rc && cmd.word == SBX_CTL_ATTACH) {
		/* A third word that is not provider=P (`provdier=e2b`) was ignored. */
		if (cmd.argc > 2 && strncmp(cmd.argv[2], "provider=", 9))
			rc = sbx_error_set(
			    &e, EINVAL, SBX_E_EXECUTION_FAILED,
			    "expected provider=P after the sandbox id, got \"%.40s\"", cmd.argv[2]);
		else
			rc = sbx_lease_attach(m, cmd.argv[0], cmd.argv[1],
					      sbx_ctl_opt(&cmd, 2, "provider"), &e);
	}
	if (rc)
		sbx_mount_error(m, "ctl", &e);
	return rc;
}

/* A JSON request written to ctl: {"name": N, "profile": P?, "spec": {...}?}. */
static int do_root_json(struct sbx_mount *m, const char *text)
{
	struct sbx_error e = SBX_ERROR_INIT;
	json_error_t je;
	int rc;
	json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	static const char *const keys[] = {"name", "profile", "spec", NULL};
	const char *name = json_string_value(json_object_get(j, "name"));
	json_t *spec = json_object_get(j, "spec"), *profile = json_object_get(j, "profile");
	/* A misspelt "profile" made a lease of the default profile, silently. */
	const char *unknown = sbx_json_unknown_key(j, keys);
	if (!j) {
		rc = sbx_error_set(&e, EINVAL, SBX_E_EXECUTION_FAILED,
				   "malformed spec JSON at line %d column %d: %s", je.line,
				   je.column, je.text);
	} else if (unknown) {
		rc = sbx_error_set(&e, EINVAL, SBX_E_EXECUTION_FAILED,
				   "unknown key \"%s\" (a request has name, profile and spec)",
				   unknown);
	} else if (profile && !json_is_string(profile)) {
		rc = sbx_error_set(&e, EINVAL, SBX_E_EXECUTION_FAILED,
				   "\"profile\" must be a string");
	} else if (!name) {
		rc = sbx_error_set(&e, EINVAL, SBX_E_EXECUTION_FAILED,
				   "spec request needs a \"name\" string");
	} else if (spec && !json_is_object(spec)) {
		rc =
		    sbx_error_set(&e, EINVAL, SBX_E_EXECUTION_FAILED, "\"spec\" must be an object");
	} else {
		rc = sbx_lease_create(m, name, json_string_value(profile), NULL, spec, &e);
	}
	json_decref(j);
	if (rc)
		sbx_mount_error(m, "ctl", &e);
	return rc;
}

/*
 * A JSON request is handled at the write that ends it, so a bad one fails
 * that write (`echo '{...}' > ctl`: a shell ignores close()'s errors).
 * Text that does not end with `}` yet, or that the parser finds cut short,
 * waits for more, and the close handles what is left.
 */
static int root_json_written(struct sbx_mount *m, struct sbx_open *o)
{
	json_error_t je;
	json_t *j;
	int rc;
	size_t n = o->data.len;
	while (n && strchr(" \t\r\n", o->data.buf[n - 1]))
		n--;
	if (!n || o->data.buf[n - 1] != '}')
		return 0;
	j = json_loadb(o->data.buf, o->data.len, 0, &je);
	if (!j && json_error_code(&je) == json_error_premature_end_of_input)
		return 0;
	json_decref(j);
	rc = do_root_json(m, o->data.buf);
	sbx_buf_reset(&o->data);
	return rc;
}

/*
 * A user's pause of a sandbox whose pause would cut a run, code cell or
 * terminal in flight (e2b's drops their streams, daytona's stop ends their
 * processes) is refused, EBUSY, rather than lose their output and result.
 */
static int pause_refused(struct sbx_mount *m, struct sbx_lease *l)
{
	unsigned long n;
	if (l->prov->caps & SBX_CAP_PAUSE_KEEPS_RUNS)
		return 0;
	if ((n = sbx_runs_in_flight(l)))
		return sbx_refuse(m, l, EBUSY, "state",
				  "pause: runs/%lu is still running, and pausing the %s sandbox "
				  "would cut it: wait for it, or stop it first (echo kill > "
				  "runs/%lu/ctl)",
				  n, l->prov->name, n);
	if ((n = sbx_tty_live(l)))
		return sbx_refuse(m, l, EBUSY, "state",
				  "pause: the shell of tty/%lu is running, and pausing the %s "
				  "sandbox would cut it: exit it, or close its files, first",
				  n, l->prov->name);
	return 0;
}

static int do_state_word(struct sbx_mount *m, struct sbx_lease *l, const char *line)
{
	struct sbx_ctl_cmd cmd;
	struct sbx_error e = SBX_ERROR_INIT;
	struct sbx_instance *inst;
	int rc = sbx_ctl_parse(SBX_CTL_FILE_STATE, line, &cmd, &e);
	if (rc == -ENODATA)
		return 0;
	if (rc) {
		sbx_lease_error(l, "state", &e);
		return rc;
	}
	switch (cmd.word) {
	case SBX_CTL_PAUSE:
		rc = pause_refused(m, l);
		return rc ? rc : sbx_lease_pause(l, "user", &e);
	case SBX_CTL_RESUME:
		return sbx_lease_resume(l, "user", &e);
	case SBX_CTL_KILL:
		return sbx_lease_kill(l, "user", &e);
	case SBX_CTL_FORGET:
		rc = sbx_lease_forget(m, l->name, &e);
		if (rc)
			sbx_mount_error(m, "forget", &e);
		else /* no rmdir told the kernel: its entry would stay for its timeout */
			sbx_kinval_root_name_gone(l->name);
		return rc;
	case SBX_CTL_RESTART:
		if (!l->prov->code_reset)
			return sbx_refuse(m, l, ENOTSUP, "state",
					  "provider %s has no code interpreter", l->prov->name);
		rc = sbx_lease_use(l, &inst, &e);
		if (!rc) {
			rc = l->prov->code_reset(inst, cmd.argc ? cmd.argv[0] : NULL, &e);
			sbx_lease_unuse(l);
		}
		if (rc)
			sbx_lease_error(l, "restart", &e);
		else
			sbx_lease_journal(l, json_pack("{s:s, s:s}", "event", "restart", "language",
						       cmd.argc ? cmd.argv[0] : "all"));
		return rc;
	default:
		return sbx_refuse(m, l, EINVAL, "state", "unexpected word %s", line);
	}
}

struct line_ctx {
	struct sbx_mount *m;
	struct sbx_lease *l;
	unsigned long n; /* runs/N/ctl */
};

static int root_line(void *ctx, const char *line)
{
	return do_root_line(((struct line_ctx *)ctx)->m, line);
}

static int state_line(void *ctx, const char *line)
{
	struct line_ctx *lc = ctx;
	return do_state_word(lc->m, lc->l, line);
}

/* The start of a line (no newline yet) cannot become KEY=VALUE any more. */
static bool env_key_bad(const char *line)
{
	return *line && *line != '#' && !sbx_env_name_valid(line, strcspn(line, "="));
}

static int env_too_big(struct sbx_mount *m, struct sbx_lease *l)
{
	return sbx_refuse(m, l, E2BIG, "env",
			  "more than %u bytes of text: no process's environment "
			  "holds it beside its command",
			  SBX_ENV_TEXT_MAX);
}

/*
 * Checks the lines of text (the env file's, or a part of it from a line's
 * start), counting its variables on from *vars.
 */
static int check_env_lines(struct sbx_mount *m, struct sbx_lease *l, const char *text, size_t *vars)
{
	const char *p = text;
	while (*p) {
		const char *e = strchr(p, '\n'), *end = e ? e : p + strlen(p);
		if (end > p && *p != '#') {
			if ((size_t)(end - p) > SBX_ENV_LINE_MAX)
				return sbx_refuse(m, l, E2BIG, "env",
						  "%.40s...: a line longer than %u bytes (the "
						  "longest string of a process's environment)",
						  p, SBX_ENV_LINE_MAX);
			if (++*vars > SBX_ENV_VARS_MAX)
				return sbx_refuse(m, l, E2BIG, "env", "more than %d variables",
						  SBX_ENV_VARS_MAX);
			const char *eq = memchr(p, '=', (size_t)(end - p));
			if (!eq || !sbx_env_name_valid(p, (size_t)(eq - p))) {
				char line[128];
				snprintf(line, sizeof(line), "%.*s",
					 (int)(end - p > 100 ? 100 : end - p), p);
				return sbx_refuse(m, l, EINVAL, "env",
						  "expected KEY=VALUE, got \"%s\"", line);
			}
			/* The lease table keeps env as JSON text: it must be UTF-8. */
			json_t *utf8 = json_stringn(p, (size_t)(end - p));
			if (!utf8) {
				char key[104];
				snprintf(key, sizeof(key), "%.*s",
					 (int)(eq - p > 100 ? 100 : eq - p), p);
				return sbx_refuse(
				    m, l, EILSEQ, "env",
				    "%s: the value is not UTF-8 text (the lease table could "
				    "not keep it)",
				    key);
			}
			json_decref(utf8);
		}
		p = e ? e + 1 : end;
	}
	return 0;
}

static int check_env(struct sbx_mount *m, struct sbx_lease *l, const char *text)
{
	size_t vars = 0;
	return strlen(text) > SBX_ENV_TEXT_MAX ? env_too_big(m, l)
					       : check_env_lines(m, l, text, &vars);
}

static void set_env(struct sbx_mount *m, struct sbx_lease *l, const char *text)
{
	pthread_mutex_lock(&l->lock);
	free(l->env_text);
	l->env_text = sbx_xstrdup(text);
	pthread_mutex_unlock(&l->lock);
	sbx_mount_save(m);
}

static int run_ctl_line(void *ctx, const char *line)
{
	struct line_ctx *lc = ctx;
	struct sbx_error e = SBX_ERROR_INIT;
	int rc = sbx_runs_ctl(lc->l, lc->n, line, &e);
	if (rc)
		sbx_lease_error(lc->l, "runs", &e);
	return rc;
}

/*
 * A cell's interpreter, made ready by the provider that can (local:
 * started) at the first write: a missing runtime (TypeScript without node)
 * was found at the close, which `echo CODE > code.ts` does not check.
 */
static int code_ready(struct sbx_lease *l, const char *language, struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc;
	if (!l->prov->code_ready)
		return 0;
	if ((rc = sbx_lease_use(l, &inst, err)))
		return rc;
	char **envs = sbx_run_envs(l);
	rc = l->prov->code_ready(inst, language, (const char *const *)envs, err);
	free(envs);
	sbx_lease_unuse(l);
	return rc;
}

/*
 * What can be known before a run fails the write itself (shells ignore
 * close errors on redirections): a NUL in the text, an empty command, the
 * lease's state, a state dir that cannot keep the output. The first write
 * also records who is writing (the per-caller rule).
 */
static int runner_write_check(struct sbx_mount *m, struct sbx_open *o, const char *buf, size_t size)
{
	struct sbx_error e = SBX_ERROR_INIT;
	int rc;
	/* More text after this open's run began (its first read, or a flush) would be lost. */
	if (o->ran)
		return sbx_refuse(m, o->lease, EBUSY, "exec",
				  "this open's %s runs already: open the file again to run more",
				  o->kind == SBX_N_EXEC ? "command" : "code");
	if (memchr(buf, '\0', size)) {
		o->refused = true;
		return sbx_refuse(m, o->lease, EINVAL, "exec",
				  "%s contains a NUL byte: nothing was run",
				  o->kind == SBX_N_EXEC ? "the command" : "the code");
	}
	if (o->data.len || o->wrote)
		return 0;
	size_t blank = 0; /* buf is not NUL-terminated */
	while (blank < size && buf[blank] && strchr(" \t\r\n", buf[blank]))
		blank++;
	if (size && buf[size - 1] == '\n' && blank == size) {
		o->refused = true;
		return sbx_refuse(m, o->lease, EINVAL, "exec", "%s is empty: nothing was run",
				  o->kind == SBX_N_EXEC ? "the command" : "the code");
	}
	sbx_runs_caller(&o->owner);
	rc = sbx_runs_precheck(o->lease, &e);
	if (!rc)
		rc = sbx_lease_alive_check(o->lease, &e);
	if (!rc)
		rc = sbx_fs_drain_for_run(o->lease, &e);
	if (!rc && o->kind == SBX_N_CODE)
		rc = code_ready(o->lease, o->language, &e);
	if (rc) {
		bool code = o->kind == SBX_N_CODE;
		char *text = sbx_xstrndup(buf, size);
		o->refused = true;
		sbx_lease_error(o->lease, code ? "code" : "exec", &e);
		/* the caller's next `cat exec` answers for this one, not the run before */
		sbx_run_refused(o->lease, code ? SBX_RUN_CODE : SBX_RUN_SHELL,
				code ? o->language : NULL, text, &o->owner, rc, &e);
		free(text);
	}
	return rc;
}

/*
 * The last size bytes of a runner's text, added: code is UTF-8 on every
 * provider, and a command where it travels as UTF-8 text (JSON). Text
 * that cannot be is refused at the write, not found by the run at close.
 */
static int runner_text_check(struct sbx_mount *m, struct sbx_open *o, size_t size)
{
	bool code = o->kind != SBX_N_EXEC;
	if (!code && !(o->lease->prov->caps & SBX_CAP_UTF8_TEXT))
		return 0;
	size_t from = o->data.len - size - (size_t)o->utf8_tail;
	int tail = sbx_utf8_check(o->data.buf + from, o->data.len - from);
	if (tail >= 0) {
		o->utf8_tail = tail;
		return 0;
	}
	o->refused = true;
	if (code)
		return sbx_refuse(m, o->lease, EILSEQ, "exec",
				  "the code is not UTF-8 text: nothing was run");
	return sbx_refuse(m, o->lease, EILSEQ, "exec",
			  "the command is not UTF-8 text, which %s carries only: nothing was run",
			  o->lease->prov->name);
}

void sbx_ctl_release(struct sbx_mount *m, struct sbx_open *o)
{
	if (o->kind == SBX_N_ENV && (o->flags & O_TRUNC) && !o->wrote && !o->refused)
		set_env(m, o->lease, "");
}

ssize_t sbx_ctl_write(struct sbx_mount *m, struct sbx_open *o, const char *buf, size_t size,
		      off_t off)
{
	struct line_ctx lc = {m, o->lease, o->run_n};
	int rc;
	if (o->tty)
		return sbx_tty_write(o, buf, size);
	if (o->data.len + size > SBX_CTL_MAX_TEXT)
		return sbx_refuse(m, o->lease, EFBIG, "write", "text larger than %s", "16 MiB");
	/* Commands and env lines are C strings: a NUL would cut off what follows it, unseen. */
	if (!sbx_node_is_runner(o->kind) && memchr(buf, '\0', size)) {
		o->refused = true;
		return sbx_refuse(m, o->lease, EINVAL, "write",
				  "the text contains a NUL byte: nothing of this write was done");
	}
	if (o->kind == SBX_N_ENV && !(o->flags & O_APPEND) && (size_t)off < o->data.len) {
		o->data.len = (size_t)off; /* rewriting from an offset: checked again */
		o->env_done = o->env_vars = 0;
	}
	if (sbx_node_is_runner(o->kind)) {
		rc = runner_write_check(m, o, buf, size);
		if (rc)
			return rc;
	}
	sbx_buf_add(&o->data, buf, size);
	if (sbx_node_is_runner(o->kind) && (rc = runner_text_check(m, o, size))) {
		o->data.len -= size; /* the refused text is not kept */
		o->data.buf[o->data.len] = '\0';
		return rc;
	}
	o->wrote = true;
	if (off + (off_t)size > o->end)
		o->end = off + (off_t)size;
	switch (o->kind) {
	case SBX_N_RUN_CTL:
		rc = sbx_ctl_consume_lines(&o->data, run_ctl_line, &lc);
		if (!rc)
			rc = sbx_ctl_partial_line(&o->data, SBX_CTL_FILE_RUN, run_ctl_line, &lc);
		return rc ? rc : (ssize_t)size;
	case SBX_N_CTL:
		/* JSON once whole (root_json_written); plain lines as they come. */
		if (o->data.buf[0] == '{') {
			rc = root_json_written(m, o);
			return rc ? rc : (ssize_t)size;
		}
		rc = sbx_ctl_consume_lines(&o->data, root_line, &lc);
		if (!rc)
			rc = sbx_ctl_partial_line(&o->data, SBX_CTL_FILE_ROOT, root_line, &lc);
		return rc ? rc : (ssize_t)size;
	case SBX_N_STATE:
		rc = sbx_ctl_consume_lines(&o->data, state_line, &lc);
		if (!rc)
			rc = sbx_ctl_partial_line(&o->data, SBX_CTL_FILE_STATE, state_line, &lc);
		return rc ? rc : (ssize_t)size;
	case SBX_N_ENV: {
		/*
		 * Refuse a bad complete line in the write itself, so the writer
		 * sees EINVAL; also a last line, newline or not, whose KEY is
		 * bad already (`printf 'MY VAR=1' > env`: no more text mends it),
		 * and text past what env can hold. The lines are checked once
		 * each, as they are completed: every write checked all of the
		 * text again, and 4 MiB took 2 s, 16 MiB half a minute.
		 */
		char *todo = o->data.buf + o->env_done;
		char *nl = memrchr(todo, '\n', o->data.len - o->env_done);
		rc = o->data.len > SBX_ENV_TEXT_MAX ? env_too_big(m, o->lease) : 0;
		if (!rc && nl) {
			char save = nl[1];
			nl[1] = '\0';
			rc = check_env_lines(m, o->lease, todo, &o->env_vars);
			nl[1] = save;
			o->env_done = (size_t)(nl + 1 - o->data.buf);
		}
		/* The last line: bad already, or longer than any line env holds. */
		if (!rc && (o->data.len - o->env_done > SBX_ENV_LINE_MAX ||
			    env_key_bad(o->data.buf + o->env_done))) {
			size_t vars = o->env_vars;
			rc = check_env_lines(m, o->lease, o->data.buf + o->env_done, &vars);
		}
		if (rc) {
			o->refused = true;
			return rc;
		}
		return (ssize_t)size;
	}
	default:
		return (ssize_t)size;
	}
}

int sbx_ctl_flush(struct sbx_mount *m, struct sbx_open *o)
{
	int acc = o->flags & O_ACCMODE, rc = 0;
	if (o->tty)
		return sbx_tty_flush(o);
	switch (o->kind) {
	case SBX_N_CTL:
		if (o->data.buf[0] == '{')
			rc = do_root_json(m, o->data.buf);
		else if (o->data.len)
			rc = do_root_line(m, o->data.buf);
		sbx_buf_reset(&o->data);
		return rc;
	case SBX_N_STATE:
		if (acc != O_RDONLY && o->data.len)
			rc = do_state_word(m, o->lease, o->data.buf);
		if (acc != O_RDONLY)
			sbx_buf_reset(&o->data);
		return rc;
	case SBX_N_ENV:
		/*
		 * Shells flush once before writing (dup2 closes the first fd), so
		 * only a flush after writes commits; a bare `: > env` commits the
		 * empty text at release. A refused text never replaces env.
		 */
		if (acc == O_RDONLY || o->refused || !o->wrote)
			return 0;
		rc = check_env(m, o->lease, o->data.buf);
		if (rc) {
			o->refused = true;
			return rc;
		}
		set_env(m, o->lease, o->data.buf);
		return 0;
	case SBX_N_RUN_CTL:
		if (o->data.len) {
			struct line_ctx lc = {m, o->lease, o->run_n};
			rc = run_ctl_line(&lc, o->data.buf);
		}
		sbx_buf_reset(&o->data);
		return rc;
	case SBX_N_EXEC:
	case SBX_N_CODE:
		/* Write-only: the run happens here, and close() waits for it. */
		if (acc != O_WRONLY || o->ran || !o->data.len || o->refused)
			return 0;
		rc = start_run(o);
		return rc ? rc : sbx_run_wait(o->run);
	default:
		return 0;
	}
}

int sbx_ctl_truncate(struct sbx_mount *m, const struct sbx_node *n, struct sbx_lease *l,
		     struct sbx_open *o, off_t size)
{
	/*
	 * With atomic O_TRUNC the shell's `>` never gets here; `: > env` empties
	 * it at flush. env is text: `truncate -s N` cuts an open writer's text
	 * (committed at flush), and a truncate by path to 0 empties it. The
	 * other writable files take no length: 0 is a no-op, and so is an
	 * open writer's cut at the end of what it wrote (`rsync --inplace FILE
	 * exec` sets the length it wrote, and failed with EINVAL); another is
	 * EINVAL (`truncate -s 5 state` returned 0 and did nothing).
	 */
	if (writable(n->kind) && n->kind != SBX_N_ENV && size && !(o && size == o->end))
		return sbx_refuse(m, l, EINVAL, "truncate", "%s",
				  "a control file takes what is written to it, not a length");
	if (n->kind == SBX_N_ENV && (o ? (size_t)size > o->data.len : size != 0))
		return sbx_refuse(m, l, EINVAL, "truncate", "%s",
				  "env can only be cut, not extended");
	if (n->kind == SBX_N_ENV && o) {
		o->data.len = (size_t)size;
		o->data.buf[size] = '\0';
		o->wrote = true;
	} else if (n->kind == SBX_N_ENV) {
		set_env(m, l, "");
	}
	if (writable(n->kind))
		return 0;
	return sbx_node_is_dir(n->kind)
		   ? -EISDIR
		   : sbx_refuse(m, l, EACCES, "truncate", "%s is read-only", "this control file");
}
