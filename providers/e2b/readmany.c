/*
 * e2b/readmany — read_many for E2B. envd's file API serves one file per
 * GET (a multipart GET is for uploads only), so the files come through one
 * process (Process.Start, as the sandbox's default user, the identity of
 * GET /files): a script that stats the readable regular files, sends their
 * bytes back to back, and stats them again (e2b_many_script). Names never
 * appear in the output, only indices, so no byte of a name or a file can
 * be taken for framing; the stat's sizes split the bytes, and the second
 * stat, which must equal the first, proves them right. The output is
 * captured whole (bounded), then checked; a cut or malformed output, or a
 * file changed during the command, yields nothing.
 */
#include "e2b/readmany.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "e2b/e2b.h"

/* The script stays below this (paths beyond it are left out of the batch). */
#define E2B_MANY_SCRIPT_MAX (256u << 10)

void e2b_many_script(struct sbx_buf *cmd, const char *const *paths, size_t n)
{
	/*
	 * Three processes whatever n (a fork per file cost the fake 1.6 s per
	 * batch of 24): the shell's own tests pick the readable regular files,
	 * one stat measures them, one cat sends their bytes, a second stat
	 * checks that none changed meanwhile (the parser then requires the
	 * two alike, so the sizes split the bytes right).
	 */
	sbx_buf_adds(cmd, "set --; i=0; ok=; for f in");
	for (size_t i = 0; i < n; i++) {
		sbx_buf_adds(cmd, " ");
		sbx_buf_add_shquoted(cmd, paths[i]);
	}
	sbx_buf_adds(cmd, "; do if [ -f \"$f\" ] && [ ! -h \"$f\" ] && [ -r \"$f\" ]; then "
			  "set -- \"$@\" \"$f\"; ok=\"$ok $i\"; fi; i=$((i+1)); done; "
			  "printf 'I%s\\n' \"$ok\"; "
			  "if [ $# -gt 0 ]; then stat -c '%s %Y %y' -- \"$@\" && printf 'C\\n' && "
			  "cat -- \"$@\" && printf 'S\\n' && stat -c '%s %Y %y' -- \"$@\"; fi; ");
	sbx_buf_addf(cmd, "printf 'E %%s\\n' %zu", n);
}

/* The line at *p (without its '\n'); NULL when no '\n' is left. */
static const char *line(const char **p, const char *end, size_t *len)
{
	const char *s = *p, *nl = s < end ? memchr(s, '\n', (size_t)(end - s)) : NULL;
	if (!nl)
		return NULL;
	*len = (size_t)(nl - s);
	*p = nl + 1;
	return s;
}

/* Decimal digits only, no sign, at most 18 of them. */
static bool number(const char **s, const char *end, long long *v)
{
	const char *p = *s;
	*v = 0;
	while (p < end && *p >= '0' && *p <= '9' && p - *s < 18)
		*v = *v * 10 + (*p++ - '0');
	if (p == *s || (p < end && *p >= '0' && *p <= '9'))
		return false;
	*s = p;
	return true;
}

/*
 * "<size> <sec> YYYY-MM-DD HH:MM:SS[.frac] +ZZZZ": the nanoseconds are
 * %y's fraction (%Y has none), padded or cut to nine digits.
 */
static bool stat_line(const char *s, const char *end, struct sbx_stat *st)
{
	long long size, sec;
	const char *dot, *sp;
	if (!number(&s, end, &size) || s >= end || *s++ != ' ' || !number(&s, end, &sec) ||
	    s >= end || *s++ != ' ')
		return false;
	memset(st, 0, sizeof(*st));
	st->mode = S_IFREG;
	st->size = (off_t)size;
	st->mtime.tv_sec = (time_t)sec;
	sp = memchr(s, ' ', (size_t)(end - s)); /* after the date */
	if (!sp)
		return false;
	dot = memchr(sp, '.', (size_t)(end - sp));
	if (dot) {
		long ns = 0;
		int d = 0;
		for (const char *q = dot + 1; q < end && *q >= '0' && *q <= '9'; q++, d++)
			ns = d < 9 ? ns * 10 + (*q - '0') : ns;
		for (; d < 9; d++)
			ns *= 10;
		st->mtime.tv_nsec = ns;
	}
	return true;
}

/* The next line is exactly want. */
static bool expect(const char **p, const char *end, const char *want)
{
	size_t ll;
	const char *l = line(p, end, &ll);
	return l && ll == strlen(want) && !memcmp(l, want, ll);
}

int e2b_many_parse(const char *out, size_t len, size_t n, size_t max,
		   int (*fn)(void *ctx, size_t index, const char *data, size_t len,
			     const struct sbx_stat *st),
		   void *ctx)
{
	const char *p = out, *end = out + len, *l, *s, *first, *data = NULL;
	size_t *idx = sbx_xcalloc(n ? n : 1, sizeof(*idx));
	struct sbx_stat *st = sbx_xcalloc(n ? n : 1, sizeof(*st));
	unsigned char *seen = sbx_xcalloc(n ? n : 1, 1);
	size_t k = 0, ll, total = 0, off = 0;
	char tail[48];
	long long i;
	int rc = -EIO;

	/* "I i1 i2 ...": the files that passed the shell's tests, in order. */
	if (!(l = line(&p, end, &ll)) || !ll || l[0] != 'I')
		goto out;
	for (s = l + 1; s < l + ll;) {
		if (*s++ != ' ' || !number(&s, l + ll, &i) || (size_t)i >= n || seen[i])
			goto out;
		seen[i] = 1;
		idx[k++] = (size_t)i;
	}
	first = p;
	if (k) {
		for (size_t j = 0; j < k; j++) {
			if (!(l = line(&p, end, &ll)) || !stat_line(l, l + ll, &st[j]))
				goto out;
			if ((unsigned long long)st[j].size > max - total) {
				rc = -EFBIG;
				goto out;
			}
			total += (size_t)st[j].size;
		}
		/* The second stat must say exactly what the first said. */
		size_t slen = (size_t)(p - first);
		if (!expect(&p, end, "C") || (size_t)(end - p) < total)
			goto out;
		data = p;
		p += total;
		if (!expect(&p, end, "S") || (size_t)(end - p) < slen || memcmp(p, first, slen))
			goto out;
		p += slen;
	}
	snprintf(tail, sizeof(tail), "E %zu", n);
	if (!expect(&p, end, tail) || p != end)
		goto out;
	rc = 0;
	for (size_t j = 0; !rc && j < k; j++) {
		rc = fn(ctx, idx[j], data + off, (size_t)st[j].size, &st[j]);
		off += (size_t)st[j].size;
	}
out:
	free(idx);
	free(st);
	free(seen);
	return rc;
}

/* Stdout, kept up to max bytes (more is cut: the parser then refuses it). */
struct capture {
	struct sbx_buf *out;
	size_t max;
};

static int capture(void *ctx, enum sbx_stream s, const char *data, size_t len)
{
	struct capture *c = ctx;
	if (s == SBX_STDOUT)
		sbx_buf_add_capped(c->out, data, len, c->max);
	return 0;
}

int e2b_read_many(struct sbx_instance *inst, const char *const *paths, size_t n, size_t max_bytes,
		  int (*fn)(void *ctx, size_t index, const char *data, size_t len,
			    const struct sbx_stat *st),
		  void *ctx, struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	struct sbx_buf cmd = SBX_BUF_INIT, out = SBX_BUF_INIT;
	/*
	 * /bin/sh, not the login bash a run gets: no profile to source (it
	 * took most of a batch's time on the fake) and none to print into
	 * the output.
	 */
	const char *argv[] = {"/bin/sh", "-c", NULL, NULL};
	struct sbx_run_req req = {.argv = argv, .cwd = "/", .timeout_ms = 60000};
	struct capture cap = {.out = &out};
	struct sbx_run_sink sink = {.ctx = &cap, .output = capture};
	struct sbx_run_result res;
	size_t m = 0;
	int rc = 0, code = 0;

	/* What is queued for these paths (a chmod, a link) goes first, as for read. */
	for (size_t i = 0; i < n; i++)
		sbx_rme_flush(&in->meta, paths[i], SBX_RMQ_NEED_CONTENT, SBX_RME_BOTH);
	/*
	 * The first m paths whose names JSON can carry (UTF-8) and that keep
	 * the script bounded; a later one stops the batch there (its own
	 * download says why).
	 */
	for (size_t est = 512; m < n; m++) {
		json_t *s = json_string(paths[m]);
		json_decref(s);
		est += strlen(paths[m]) * 4 + 16; /* a quote becomes 4 bytes */
		if (!s || est > E2B_MANY_SCRIPT_MAX)
			break;
	}
	if (!m)
		return sbx_error_set(err, EINVAL, SBX_E_NONE, "read %zu files: no path to send", n);
	e2b_many_script(&cmd, paths, m);
	argv[2] = cmd.buf;
	/* The bytes, two stat lines and an index per file, the rest: anything longer is cut. */
	cap.max = max_bytes + m * 140 + 64;
	rc = e2b_proc_start(in, &req, false, &sink, &res, err);
	if (!rc && res.timed_out)
		rc = sbx_error_set(err, ETIMEDOUT, SBX_E_TIMEOUT, "read %zu files: timed out", m);
	code = res.exit_code;
	if (!rc) {
		rc = e2b_many_parse(out.buf, out.len, m, max_bytes, fn, ctx);
		if (rc == -EIO || rc == -EFBIG)
			sbx_error_set(err, -rc, SBX_E_INTERNAL, "read %zu files: %s (exit %d)", m,
				      rc == -EIO ? "output cut short or malformed"
						 : "more bytes than asked for",
				      code);
	}
	sbx_buf_release(&cmd);
	sbx_buf_release(&out);
	return rc;
}
