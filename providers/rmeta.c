/* rmeta — see rmeta.h. */
#include "rmeta.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/caller.h"
#include "base/df.h"
#include "base/pathutil.h"
#include "base/sysutil.h"
#include "base/xalloc.h"
#include "rmeta_queue.h"

void sbx_rmeta_fails_init(struct sbx_rmeta_fails *f)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
}

static void drop_locked(struct sbx_rmeta_fails *f, size_t i)
{
	free(f->v[i].path);
	memmove(f->v + i, f->v + i + 1, (f->n - i - 1) * sizeof(*f->v));
	f->n--;
}

void sbx_rmeta_fail_clear(struct sbx_rmeta_fails *f)
{
	pthread_mutex_lock(&f->lock);
	while (f->n)
		drop_locked(f, f->n - 1);
	pthread_mutex_unlock(&f->lock);
}

void sbx_rmeta_fails_destroy(struct sbx_rmeta_fails *f)
{
	sbx_rmeta_fail_clear(f);
	free(f->v);
	pthread_mutex_destroy(&f->lock);
}

void sbx_rmeta_fail(struct sbx_rmeta_fails *f, struct sbx_instance *inst, const char *op,
		    const char *path, const struct sbx_error *e, bool report)
{
	struct sbx_rmeta_fail x = {sbx_xstrdup(path), SBX_ERROR_INIT};
	int err = e && e->err ? e->err : EIO;
	sbx_error_set(&x.e, err, e && e->code ? e->code : SBX_E_EXECUTION_FAILED,
		      "%s %s failed in the sandbox: %s", op, path,
		      e && e->msg[0] ? e->msg : strerror(err));
	pthread_mutex_lock(&f->lock);
	for (size_t i = f->n; i-- > 0;)
		if (!strcmp(f->v[i].path, path))
			drop_locked(f, i);
	if (f->n == SBX_RMETA_FAILS_MAX)
		drop_locked(f, 0);
	if (f->n == f->alloc) {
		f->alloc = f->alloc ? 2 * f->alloc : 8;
		f->v = sbx_xreallocarray(f->v, f->alloc, sizeof(*f->v));
	}
	f->v[f->n++] = x;
	pthread_mutex_unlock(&f->lock);
	if (report) {
		char *what = sbx_xasprintf("%s %s", op, path);
		sbx_instance_report(inst, what, &x.e);
		free(what);
	}
}

int sbx_rmeta_fail_take(struct sbx_rmeta_fails *f, const char *path, struct sbx_error *err)
{
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; !rc && i < f->n; i++) {
		if (strcmp(f->v[i].path, path))
			continue;
		rc = -f->v[i].e.err;
		if (err)
			*err = f->v[i].e;
		drop_locked(f, i);
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

bool sbx_rmeta_fail_has(struct sbx_rmeta_fails *f, const char *path)
{
	bool has = false;
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; !has && i < f->n; i++)
		has = !strcmp(f->v[i].path, path);
	pthread_mutex_unlock(&f->lock);
	return has;
}

void sbx_rmeta_fail_forget(struct sbx_rmeta_fails *f, const char *path)
{
	pthread_mutex_lock(&f->lock);
	for (size_t i = f->n; i-- > 0;)
		if (sbx_path_under(f->v[i].path, path))
			drop_locked(f, i);
	pthread_mutex_unlock(&f->lock);
}

void sbx_rmeta_add_marker(struct sbx_buf *b, bool to_stderr)
{
	sbx_buf_addf(b, SBX_RMETA_MARK_FN "() { echo " SBX_RMETA_FAILED "$1%s; }\n",
		     to_stderr ? " >&2" : "");
}

void sbx_rmeta_add_mark(struct sbx_buf *b, size_t i, size_t j)
{
	if (j == i + 1)
		sbx_buf_addf(b, " || " SBX_RMETA_MARK_FN " %zu\n", i);
	else
		sbx_buf_addf(b, " || " SBX_RMETA_MARK_FN " %zu-%zu\n", i, j);
}

/* Whether the message names path (GNU tools quote it: 'PATH'; others may not). */
static bool names(const char *msg, size_t len, const char *path)
{
	char *m = sbx_xstrndup(msg, len);
	size_t n = strlen(path);
	bool found = false;
	for (const char *p = strstr(m, path); p && !found; p = strstr(p + 1, path))
		found = p[n] == '\0' || strchr("'\": ", p[n]);
	free(m);
	return found;
}

int sbx_rmeta_msg_errno(const char *msg, size_t len)
{
	static const int known[] = {EPERM,  EACCES,	  EEXIST, ENOENT,    ENOTDIR,
				    EISDIR, ENOSPC,	  EDQUOT, ENOTEMPTY, EROFS,
				    ELOOP,  ENAMETOOLONG, EINVAL, EOPNOTSUPP};
	char *m = sbx_xstrndup(msg ? msg : "", msg ? len : 0);
	int err = EIO;
	for (size_t i = 0; err == EIO && i < sizeof(known) / sizeof(known[0]); i++)
		if (strcasestr(m, strerror(known[i])))
			err = known[i];
	free(m);
	return err;
}

/*
 * The last line of [from, to) that names path (NULL: none); its length in *len.
 * A merged command (rm -f of many names) prints a line per name it failed on.
 */
static const char *naming_line(const char *from, const char *to, const char *path, size_t *len)
{
	const char *hit = NULL;
	for (const char *l = from; l && l < to;) {
		size_t n = strcspn(l, "\n");
		if (l + n > to)
			n = (size_t)(to - l);
		if (n && names(l, n, path)) {
			hit = l;
			*len = n;
		}
		l += n + (l[n] == '\n');
	}
	return hit;
}

size_t sbx_rmeta_attribute(struct sbx_rmeta_fails *f, struct sbx_instance *inst, const char *out,
			   size_t first, size_t end, sbx_rmeta_op_fn op_of, void *ctx)
{
	const char *msg = NULL, *block = NULL, *mark = SBX_RMETA_FAILED;
	size_t msg_len = 0, failed = 0, ml = strlen(mark);
	for (const char *line = out ? out : ""; *line;) {
		size_t len = strcspn(line, "\n"), i, j, nl;
		const char *name, *path;
		int got =
		    len > ml && !strncmp(line, mark, ml) ? sscanf(line + ml, "%zu-%zu", &i, &j) : 0;
		if (got == 1)
			j = i + 1;
		if (got < 1 || i < first || j > end || i >= j) {
			if (!block)
				block = line;
			if (len) {
				msg = line;
				msg_len = len;
			}
			line += len + (line[len] == '\n');
			continue;
		}
		/* Who of [i, j) failed: those a line since the last mark names, else all. */
		bool any = false;
		for (size_t k = i; msg && k < j && !any; k++) {
			op_of(ctx, k, &name, &path);
			any = naming_line(block, line, path, &nl) != NULL;
		}
		bool reported = false;
		for (size_t k = i; k < j; k++) {
			struct sbx_error e = SBX_ERROR_INIT;
			const char *m = msg;
			size_t m_len = msg_len;
			op_of(ctx, k, &name, &path);
			if (any) {
				if (!(m = naming_line(block, line, path, &m_len)))
					continue;
				reported = false; /* each named failure is its own report */
			}
			sbx_error_set(&e, sbx_rmeta_msg_errno(m, m_len), SBX_E_EXECUTION_FAILED,
				      "%.*s", m ? (int)m_len : 0, m ? m : "");
			sbx_rmeta_fail(f, inst, name, path, &e, !reported);
			reported = true;
			failed++;
		}
		msg = block = NULL;
		line += len + (line[len] == '\n');
	}
	return failed;
}

struct as_list {
	sbx_list_fn fn;
	void *ctx;
};

static int as_list_fn(void *ctx, const char *dir, const char *name, const struct sbx_stat *st)
{
	struct as_list *a = ctx;
	(void)dir;
	return a->fn(a->ctx, name, st);
}

int sbx_rmeta_list(struct sbx_instance *inst, const char *path, sbx_list_fn fn, void *ctx,
		   struct sbx_error *err)
{
	struct as_list a = {fn, ctx};
	return inst->prov->list_tree(inst, path, 1, as_list_fn, &a, err);
}

void sbx_rmeta_fail_all(struct sbx_rmeta_fails *f, struct sbx_instance *inst, size_t first,
			size_t end, sbx_rmeta_op_fn op_of, void *ctx, const struct sbx_error *e)
{
	for (size_t k = first; k < end; k++) {
		const char *name, *path;
		op_of(ctx, k, &name, &path);
		sbx_rmeta_fail(f, inst, name, path, e, k == first);
	}
}

void sbx_rmeta_df_init(struct sbx_rmeta_df *d)
{
	memset(d, 0, sizeof(*d));
	pthread_mutex_init(&d->lock, NULL);
}

void sbx_rmeta_df_forget(struct sbx_rmeta_df *d)
{
	pthread_mutex_lock(&d->lock);
	d->at_ms = 0;
	pthread_mutex_unlock(&d->lock);
}

int sbx_rmeta_statfs(struct sbx_rmeta_df *d, sbx_rmeta_run_fn run, void *ctx, struct statvfs *st,
		     struct sbx_error *err)
{
	struct sbx_buf out = SBX_BUF_INIT;
	long long now = sbx_now_ms();
	int rc;

	pthread_mutex_lock(&d->lock);
	if (d->at_ms && now - d->at_ms < SBX_RMETA_DF_TTL_MS) {
		*st = d->st;
		pthread_mutex_unlock(&d->lock);
		return 0;
	}
	pthread_mutex_unlock(&d->lock);
	/* The inode table is optional (some df have no -i); the blocks are not. */
	rc = run(ctx, "df -kP / && { df -iP / 2>/dev/null; true; }", &out, err);
	if (!rc && sbx_df_parse(out.buf, st))
		rc = sbx_error_set(err, EIO, SBX_E_EXECUTION_FAILED, "statfs: `df` gave no answer");
	if (!rc) {
		pthread_mutex_lock(&d->lock);
		d->st = *st;
		d->at_ms = now;
		pthread_mutex_unlock(&d->lock);
	}
	sbx_buf_release(&out);
	return rc;
}

/* --- link texts of a directory --------------------------------------------------------- */

#define LINKS_MARK "\n@sbxfs-links@\n" /* a login shell's chatter may come before it */

/*
 * Per link "NAME-LEN TEXT-LEN\nNAMETEXT\n", lengths in bytes (LC_ALL=C);
 * $(readlink; echo .) keeps the text's own trailing newlines.
 */
static const char links_sh[] = " 2>/dev/null || exit 2\n"
			       "LC_ALL=C; export LC_ALL\n"
			       "printf '" LINKS_MARK "'\n"
			       "for f in .[!.]* ..?* *; do\n"
			       "  [ -L \"$f\" ] || continue\n"
			       "  t=$(readlink -- \"$f\" && echo .) || continue\n"
			       "  t=${t%??}\n"
			       "  printf '%s %s\\n%s%s\\n' \"${#f}\" \"${#t}\" \"$f\" \"$t\"\n"
			       "done\n";

/* Parses one "N T\nNAMETEXT\n" at *p (end: the output's end); the next record, or NULL. */
static const char *links_record(const char *p, const char *end, sbx_link_fn fn, void *fctx)
{
	char *q;
	unsigned long long nl, tl;
	errno = 0;
	nl = strtoull(p, &q, 10);
	if (errno || q == p || *q != ' ' || !nl || nl > NAME_MAX)
		return NULL;
	p = q + 1;
	tl = strtoull(p, &q, 10);
	if (errno || q == p || *q != '\n' || !tl || tl >= PATH_MAX)
		return NULL;
	p = q + 1;
	if ((unsigned long long)(end - p) < nl + tl + 1 || p[nl + tl] != '\n' ||
	    memchr(p, '/', nl) || memchr(p, '\0', nl + tl) || (p[0] == '.' && nl == 1) ||
	    (nl == 2 && p[0] == '.' && p[1] == '.'))
		return NULL; /* not a name in the directory (a sandbox may answer anything) */
	char *name = sbx_xstrndup(p, nl), *text = sbx_xstrndup(p + nl, tl);
	fn(fctx, name, text);
	free(name);
	free(text);
	return p + nl + tl + 1;
}

int sbx_rmeta_readlinks(sbx_rmeta_run_fn run, void *ctx, const char *dir, sbx_link_fn fn,
			void *fctx, struct sbx_error *err)
{
	struct sbx_buf cmd = SBX_BUF_INIT, out = SBX_BUF_INIT;
	const char *p, *end;
	int rc;

	sbx_buf_adds(&cmd, "cd -- ");
	sbx_buf_add_shquoted(&cmd, dir);
	sbx_buf_adds(&cmd, links_sh);
	rc = run(ctx, cmd.buf, &out, err);
	p = rc ? NULL : memmem(out.buf, out.len, LINKS_MARK, strlen(LINKS_MARK));
	if (!rc && !p)
		rc = sbx_error_set(err, EIO, SBX_E_EXECUTION_FAILED,
				   "list the links of %s: no answer", dir);
	for (end = out.buf + out.len, p = rc ? end : p + strlen(LINKS_MARK); p < end;) {
		if (!(p = links_record(p, end, fn, fctx))) {
			rc = sbx_error_set(err, EIO, SBX_E_EXECUTION_FAILED,
					   "list the links of %s: an answer that does not parse",
					   dir);
			break;
		}
	}
	sbx_buf_release(&cmd);
	sbx_buf_release(&out);
	return rc;
}

/* --- sockets ------------------------------------------------------------------------ */

/* argv: PATH MODE (octal). Errors as `mknod 'PATH': strerror` on stderr, exit 1. */
static const char mksock_py[] = "import errno,os,socket,sys\n"
				"p=sys.argv[1]\n"
				"d,n=os.path.split(p)\n"
				"try:\n"
				"    os.chdir(d or \"/\")\n"
				"    s=socket.socket(socket.AF_UNIX)\n"
				"    if len(os.fsencode(n))<100:\n"
				"        s.bind(n)\n"
				"    else:\n"
				"        t=\".sbxfs-sock-%d\"%os.getpid()\n"
				"        s.bind(t)\n"
				"        try:\n"
				"            os.link(t,n)\n"
				"        finally:\n"
				"            os.unlink(t)\n"
				"    os.chmod(n,int(sys.argv[2],8))\n"
				"except OSError as e:\n"
				"    c=errno.EEXIST if e.errno==errno.EADDRINUSE else e.errno\n"
				"    sys.stderr.write(\"mknod '%s': %s\\n\"%(p,os.strerror(c)))\n"
				"    sys.exit(1)\n";

static const char mksock_pl[] =
    "use Socket;use POSIX;\n"
    "my($p,$m)=@ARGV;\n"
    "my($d,$n)=$p=~m{^(.*)/([^/]*)$}s;\n"
    "sub f{printf STDERR \"mknod '%s': %s\\n\",$p,shift;exit 1}\n"
    "chdir(length $d?$d:\"/\") or f(\"$!\");\n"
    "socket(my $s,PF_UNIX,SOCK_STREAM,0) or f(\"$!\");\n"
    "if(length($n)<100){bind($s,pack_sockaddr_un($n)) or "
    "f($!==EADDRINUSE?strerror(EEXIST):\"$!\")}\n"
    "else{my $t=\".sbxfs-sock-$$\";bind($s,pack_sockaddr_un($t)) or f(\"$!\");"
    "my $ok=link($t,$n);my $e=\"$!\";unlink $t;$ok or f($e)}\n"
    "chmod(oct($m),$n) or f(\"$!\");\n";

void sbx_rmeta_add_mksock(struct sbx_buf *b, const char *path, mode_t perm)
{
	char m[16];
	snprintf(m, sizeof(m), " %04o", (unsigned)(perm & 07777));
	sbx_buf_adds(b, "if command -v python3 >/dev/null 2>&1; then python3 -c ");
	sbx_buf_add_shquoted(b, mksock_py);
	sbx_buf_addch(b, ' ');
	sbx_buf_add_shquoted(b, path);
	sbx_buf_adds(b, m);
	sbx_buf_adds(b, "; elif command -v perl >/dev/null 2>&1; then perl -e ");
	sbx_buf_add_shquoted(b, mksock_pl);
	sbx_buf_adds(b, " -- ");
	sbx_buf_add_shquoted(b, path);
	sbx_buf_adds(b, m);
	sbx_buf_adds(b, "; else printf \"mknod '%s': no python3 or perl in the sandbox to bind a "
			"socket with: Operation not supported\\n\" ");
	sbx_buf_add_shquoted(b, path);
	sbx_buf_adds(b, " >&2; false; fi");
}

int sbx_rmeta_sock_check(int *state, struct sbx_instance *inst, sbx_rmeta_run_fn run, void *ctx,
			 const char *path, struct sbx_error *err)
{
	struct sbx_buf out = SBX_BUF_INIT;
	int known = __atomic_load_n(state, __ATOMIC_ACQUIRE), rc = 0;
	if (!known) {
		/* Two first sockets may both ask: the same answer, kept twice. */
		if ((rc = run(ctx, SBX_RMETA_SOCK_PROBE, &out, err)))
			goto out;
		known = strstr(out.buf ? out.buf : "", "sbxfs-sock-yes") ? 1 : -1;
		__atomic_store_n(state, known, __ATOMIC_RELEASE);
	}
	if (known < 0) {
		char *what = sbx_xasprintf("mknod %s", path);
		rc = sbx_error_set(err, EOPNOTSUPP, SBX_E_EXECUTION_FAILED,
				   "%s: the sandbox has neither python3 nor perl to bind a unix "
				   "socket with",
				   what);
		sbx_instance_report(inst, what, err);
		free(what);
	}
out:
	sbx_buf_release(&out);
	return rc;
}

/* --- the gate ---------------------------------------------------------------------- */

void sbx_rmeta_gate_init(struct sbx_rmeta_gate *g)
{
	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
}

void sbx_rmeta_gate_destroy(struct sbx_rmeta_gate *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->paths[i]);
	free(g->paths);
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

static ssize_t gate_find(const struct sbx_rmeta_gate *g, const char *p)
{
	for (size_t i = 0; p && i < g->n; i++)
		if (!strcmp(g->paths[i], p))
			return (ssize_t)i;
	return -1;
}

static void gate_add(struct sbx_rmeta_gate *g, const char *p)
{
	if (!p)
		return;
	if (g->n == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 8;
		g->paths = sbx_xrealloc(g->paths, g->cap * sizeof(*g->paths));
	}
	g->paths[g->n++] = sbx_xstrdup(p);
}

static void gate_drop(struct sbx_rmeta_gate *g, const char *p)
{
	ssize_t i = gate_find(g, p);
	if (i < 0)
		return;
	free(g->paths[i]);
	g->paths[i] = g->paths[--g->n];
}

void sbx_rmeta_gate_enter(struct sbx_rmeta_gate *g, const char *a, const char *b)
{
	if (a && b && !strcmp(a, b))
		b = NULL;
	pthread_mutex_lock(&g->lock);
	while (gate_find(g, a) >= 0 || gate_find(g, b) >= 0)
		pthread_cond_wait(&g->cond, &g->lock);
	gate_add(g, a);
	gate_add(g, b);
	pthread_mutex_unlock(&g->lock);
}

void sbx_rmeta_gate_leave(struct sbx_rmeta_gate *g, const char *a, const char *b)
{
	if (a && b && !strcmp(a, b))
		b = NULL;
	pthread_mutex_lock(&g->lock);
	gate_drop(g, a);
	gate_drop(g, b);
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* --- Go's FileMode.String() ---------------------------------------------------------- */

int sbx_rmeta_gomode(const char *s, mode_t *out)
{
	static const char rwx[] = "rwxrwxrwx";
	size_t n = s ? strlen(s) : 0;
	mode_t m = 0, type = 0;
	bool dev = false, chr = false;

	if (n < 10)
		return -EINVAL;
	for (int i = 0; i < 9; i++) {
		char c = s[n - 9 + i];
		if (c == rwx[i])
			m |= 0400 >> i;
		else if (c != '-')
			return -EINVAL;
	}
	for (const char *c = s; c < s + n - 9; c++) {
		switch (*c) {
		case 'd':
			type = S_IFDIR;
			break;
		case 'L':
			type = S_IFLNK;
			break;
		case 'D':
			dev = true;
			break;
		case 'c':
			chr = true;
			break;
		case 'p':
			type = S_IFIFO;
			break;
		case 'S':
			type = S_IFSOCK;
			break;
		case 'u':
			m |= S_ISUID;
			break;
		case 'g':
			m |= S_ISGID;
			break;
		case 't':
			m |= S_ISVTX;
			break;
		case '-': /* only alone: no type letter */
			if (n != 10)
				return -EINVAL;
			break;
		case 'a': /* append-only, exclusive, temporary: Plan 9's, not types */
		case 'l':
		case 'T':
			break;
		default: /* '?' (irregular) or not Go's */
			return -EINVAL;
		}
	}
	if (dev)
		type = chr ? S_IFCHR : S_IFBLK;
	*out = (type ? type : S_IFREG) | m;
	return 0;
}

/* --- owner and group names ---------------------------------------------------------- */

void sbx_rmeta_ids_init(struct sbx_rmeta_ids *ids, sbx_rmeta_run_fn run, void *ctx)
{
	memset(ids, 0, sizeof(*ids));
	pthread_mutex_init(&ids->lock, NULL);
	pthread_mutex_init(&ids->load, NULL);
	ids->run = run;
	ids->ctx = ctx;
}

static void ids_free_locked(struct sbx_rmeta_ids *ids)
{
	for (int k = 0; k < 2; k++) {
		for (size_t i = 0; i < ids->n[k]; i++)
			free(ids->v[k][i].name);
		free(ids->v[k]);
		ids->v[k] = NULL;
		ids->n[k] = 0;
	}
}

void sbx_rmeta_ids_destroy(struct sbx_rmeta_ids *ids)
{
	sbx_rmeta_ids_wait(ids);
	ids_free_locked(ids);
	pthread_mutex_destroy(&ids->lock);
	pthread_mutex_destroy(&ids->load);
}

void sbx_rmeta_ids_parse(struct sbx_rmeta_ids *ids, const char *text)
{
	struct sbx_rmeta_name *v[2] = {NULL, NULL};
	size_t n[2] = {0, 0}, cap[2] = {0, 0};
	int k = 0;
	for (const char *line = text ? text : ""; *line;) {
		size_t len = strcspn(line, "\n");
		char *l = sbx_xstrndup(line, len), *c1, *c2, *end;
		unsigned long id;
		line += len + (line[len] == '\n');
		if (!strcmp(l, SBX_RMETA_IDS_SEP))
			k = 1;
		/* NAME:PASSWORD:ID:... */
		c1 = strchr(l, ':');
		c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c1 && c2 && c1 > l && c2[1] >= '0' && c2[1] <= '9') {
			errno = 0;
			id = strtoul(c2 + 1, &end, 10);
			if (!errno && (*end == ':' || !*end) && id <= UINT32_MAX) {
				if (n[k] == cap[k]) {
					cap[k] = cap[k] ? 2 * cap[k] : 32;
					v[k] = sbx_xreallocarray(v[k], cap[k], sizeof(*v[k]));
				}
				*c1 = '\0';
				v[k][n[k]].name = sbx_xstrdup(l);
				v[k][n[k]++].id = (unsigned)id;
			}
		}
		free(l);
	}
	pthread_mutex_lock(&ids->lock);
	ids_free_locked(ids);
	for (k = 0; k < 2; k++) {
		ids->v[k] = v[k];
		ids->n[k] = n[k];
	}
	pthread_mutex_unlock(&ids->lock);
}

/* Looks name up in table k: true with *id when found. */
static bool ids_find(struct sbx_rmeta_ids *ids, int k, const char *name, unsigned *id)
{
	bool found = false;
	pthread_mutex_lock(&ids->lock);
	for (size_t i = 0; !found && i < ids->n[k]; i++)
		if (!strcmp(ids->v[k][i].name, name)) {
			*id = ids->v[k][i].id;
			found = true;
		}
	pthread_mutex_unlock(&ids->lock);
	return found;
}

/* Reads the tables again unless they were read less than a retry ago. */
static void ids_reload(struct sbx_rmeta_ids *ids)
{
	struct sbx_buf out = SBX_BUF_INIT;
	struct sbx_error e = SBX_ERROR_INIT;
	long long at;
	pthread_mutex_lock(&ids->load);
	pthread_mutex_lock(&ids->lock);
	at = ids->at_ms;
	pthread_mutex_unlock(&ids->lock);
	if (ids->run && (!at || sbx_now_ms() - at >= SBX_RMETA_IDS_RETRY_MS)) {
		/* A failed read counts too: no command per entry while the sandbox refuses. */
		if (!ids->run(ids->ctx, SBX_RMETA_IDS_CMD, &out, &e))
			sbx_rmeta_ids_parse(ids, out.buf);
		pthread_mutex_lock(&ids->lock);
		ids->at_ms = sbx_now_ms();
		pthread_mutex_unlock(&ids->lock);
	}
	pthread_mutex_unlock(&ids->load);
	sbx_buf_release(&out);
}

static void *ids_prefetch_main(void *arg)
{
	ids_reload(arg);
	return NULL;
}

void sbx_rmeta_ids_prefetch(struct sbx_rmeta_ids *ids)
{
	pthread_mutex_lock(&ids->lock);
	if (ids->run && !ids->at_ms && !ids->pre_on && !ids->pre_done)
		ids->pre_on = !pthread_create(&ids->pre, NULL, ids_prefetch_main, ids);
	ids->pre_done = true; /* once: a failed start leaves it to the first lookup */
	pthread_mutex_unlock(&ids->lock);
}

void sbx_rmeta_ids_wait(struct sbx_rmeta_ids *ids)
{
	pthread_t t;
	bool on;
	pthread_mutex_lock(&ids->lock);
	on = ids->pre_on;
	t = ids->pre;
	ids->pre_on = false;
	pthread_mutex_unlock(&ids->lock);
	if (on)
		pthread_join(t, NULL);
}

unsigned sbx_rmeta_id(struct sbx_rmeta_ids *ids, const char *s, bool group)
{
	unsigned long v;
	unsigned id;
	char *end;
	if (!s || !*s)
		return 0;
	if (*s >= '0' && *s <= '9') {
		errno = 0;
		v = strtoul(s, &end, 10);
		if (!errno && !*end && v <= UINT32_MAX)
			return (unsigned)v;
	}
	if (!strcmp(s, "root")) /* uid and gid 0 everywhere: no read for it */
		return 0;
	if (ids && ids_find(ids, group, s, &id))
		return id;
	if (ids) {
		ids_reload(ids);
		if (ids_find(ids, group, s, &id))
			return id;
	}
	return 65534;
}

/* Adds to err's message that an undo failed too (u) and where the entries are (where: freed). */
static void exchange_left(struct sbx_error *err, const struct sbx_error *u, char *where)
{
	char msg[SBX_ERR_MSG_MAX];
	snprintf(msg, sizeof(msg), "%s", err->msg);
	sbx_error_set(err, err->err, err->code, "%s; undo failed (%s): %s", msg, u->msg, where);
	free(where);
}

int sbx_rmeta_exchange(sbx_rmeta_move_fn move, void *ctx, struct sbx_rmeta_fails *f, const char *a,
		       const char *b, const char *tmp, struct sbx_error *err)
{
	struct sbx_error u = SBX_ERROR_INIT;
	int rc = move(ctx, a, tmp, err);
	if (rc)
		return rc;
	if ((rc = move(ctx, b, a, err))) {
		if (move(ctx, tmp, a, &u))
			exchange_left(err, &u, sbx_xasprintf("%s is at %s", a, tmp));
		return rc;
	}
	if ((rc = move(ctx, tmp, b, err))) {
		if (move(ctx, a, b, &u))
			exchange_left(err, &u,
				      sbx_xasprintf("%s is at %s, %s at %s", b, a, a, tmp));
		else if (move(ctx, tmp, a, &u))
			exchange_left(err, &u, sbx_xasprintf("%s is at %s", a, tmp));
		return rc;
	}
	sbx_rmeta_fail_forget(f, a);
	sbx_rmeta_fail_forget(f, b);
	return 0;
}

const struct sbx_caller *sbx_rmeta_other_caller(void)
{
	const struct sbx_caller *c = sbx_caller_get();
	return c && c->known && c->uid != geteuid() ? c : NULL;
}

bool sbx_rmeta_creator_op(const char *path, bool root, struct sbx_rmq_op *op)
{
	const struct sbx_caller *c = sbx_rmeta_other_caller();
	if (!c)
		return false;
	*op = (struct sbx_rmq_op){.kind = SBX_RMQ_CHOWN,
				  .path = (char *)path,
				  .uid = c->uid,
				  .gid = c->gid,
				  .creator = true,
				  .root = root};
	return true;
}
