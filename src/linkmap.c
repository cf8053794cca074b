/*
 * linkmap — rewriting a sandbox's symlink target for the host (linkmap.h).
 *
 * The host's kernel follows an fs/ link itself: ".." climbs its own dentry
 * tree, so ".." at fs/ would leave the sandbox, and an absolute target
 * would be the host's. The rewrite keeps every step inside fs/: it climbs
 * exactly as many directories as the link has above it (to fs/ and no
 * further) and then only descends, by the target's resolved sandbox path.
 * Any link met on the way down is rewritten the same way when the kernel
 * reads it, so by induction nothing the sandbox writes, or swaps in at any
 * moment, leads the host out of fs/. A ".." in the middle of a target is
 * resolved here (the component before it is asked for: a symlink there is
 * walked, as the sandbox's kernel would), so the text shown holds no "..".
 */
#include "linkmap.h"
#include "base/xalloc.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/pathmax.h"

#define MAX_LINKS 40 /* the kernel's MAXSYMLINKS */
/* A link deep below a long path (pathmax.h) is followed too. */
#define CUR_MAX (SBX_FS_PATH_MAX + PATH_MAX)

/* Appends "/name" (nlen bytes) to cur, a canonical path ("" is "/"). */
static int push(char *cur, const char *name, size_t nlen)
{
	size_t len = strlen(cur);
	if (len + 1 + nlen >= CUR_MAX)
		return -ENAMETOOLONG;
	cur[len] = '/';
	memcpy(cur + len + 1, name, nlen);
	cur[len + 1 + nlen] = '\0';
	return 0;
}

/* Drops cur's last component ("" stays ""). */
static void pop(char *cur)
{
	char *s = strrchr(cur, '/');
	if (s)
		*s = '\0';
}

/*
 * Checks cur's components from byte *verified on. At the first symlink among
 * them, *more becomes its target + the components of cur after it + "/" +
 * rest (the walk still to do, from the ".." that asked), and cur is cut
 * back to the link's directory. 0 (*more NULL when cur is all directories)
 * or -errno.
 */
static int expand(char *cur, size_t *verified, const char *rest, const struct sbx_link_io *io,
		  int *links, char **more)
{
	char target[PATH_MAX];
	mode_t mode;

	*more = NULL;
	while (*verified < strlen(cur)) {
		char *end = strchr(cur + *verified + 1, '/');
		size_t e = end ? (size_t)(end - cur) : strlen(cur);
		char saved = cur[e];
		cur[e] = '\0';
		int r = io->lstat(io->ctx, cur, &mode);
		int n = r == 0 && S_ISLNK(mode) ? io->readlink(io->ctx, cur, target, sizeof(target))
						: -EINVAL;
		cur[e] = saved;
		if (n < 0) { /* a directory, or what the sandbox could not walk either */
			*verified = e;
			continue;
		}
		if (++*links > MAX_LINKS)
			return -ELOOP;
		size_t tl = strlen(target), al = strlen(cur + e), rl = strlen(rest);
		*more = sbx_xmalloc(tl + al + 1 + rl + 1);
		memcpy(*more, target, tl);
		memcpy(*more + tl, cur + e, al);
		(*more)[tl + al] = '/';
		memcpy(*more + tl + al + 1, rest, rl + 1);
		cur[*verified] = '\0'; /* the link's directory: where a relative target starts */
		return 0;
	}
	return 0;
}

/* Resolves target from the link's directory into cur (canonical, "" for "/"). */
static int resolve(const char *link, const char *target, const struct sbx_link_io *io, char *cur)
{
	char *rest = sbx_xstrdup(target), *p, *more;
	size_t verified;
	int links = 0, e = 0;

	/* The link's own directory is canonical: the kernel walked to it. */
	snprintf(cur, CUR_MAX, "%s", link);
	pop(cur);
	p = rest;
	if (*p == '/')
		cur[0] = '\0';
	verified = strlen(cur);
	while (*p) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (!n)
			break;
		if (n == 1 && p[0] == '.') {
			p += n;
		} else if (n == 2 && p[0] == '.' && p[1] == '.') {
			/* Only a canonical path may be cut: walk any link in it first. */
			if (io && (e = expand(cur, &verified, p, io, &links, &more)) < 0)
				break;
			if (io && more) {
				free(rest);
				rest = p = more;
				if (*p == '/') /* an absolute target starts at "/" */
					cur[0] = '\0';
				verified = strlen(cur);
				continue;
			}
			p += n;
			pop(cur);
			if (verified > strlen(cur))
				verified = strlen(cur);
		} else {
			if ((e = push(cur, p, n)) < 0)
				break;
			p += n;
		}
	}
	free(rest);
	return e;
}

/* The number of components of a canonical path ("" has none). */
static size_t depth_of(const char *p)
{
	size_t n = 0;
	for (; (p = strchr(p, '/')); p++)
		n++;
	return n;
}

/*
 * True when the host follows target from the link's directory (depth
 * components below "/") exactly as the sandbox does: relative, its ".."
 * all leading and no more of them than the directory has above it.
 */
static bool safe_as_is(const char *target, size_t depth)
{
	size_t ups = 0;
	bool down = false;
	if (*target == '/')
		return false;
	for (const char *p = target; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (down || ++ups > depth)
				return false;
		} else if (n && !(n == 1 && p[0] == '.')) {
			down = true;
		}
		p += n;
		p += strspn(p, "/");
	}
	return true;
}

int sbx_link_rewrite(const char *link, const char *target, const struct sbx_link_io *io, char *out,
		     size_t size)
{
	char dir[SBX_FS_PATH_MAX], *cur;
	size_t len = 0, common = 0, i;

	int e;

	if (snprintf(dir, sizeof(dir), "%s", link) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	pop(dir);
	size_t depth = depth_of(dir);
	if (safe_as_is(target, depth)) {
		if (strlen(target) >= size)
			return -ENAMETOOLONG;
		strcpy(out, target);
		return 0;
	}
	cur = sbx_xmalloc(CUR_MAX);
	if ((e = resolve(link, target, io, cur)) < 0) {
		free(cur);
		return e;
	}
	/* j: where the directories dir and cur share from "/" down end. */
	for (i = 0; dir[i] && dir[i] == cur[i]; i++)
		;
	size_t j = i;
	if (!((!dir[i] && (!cur[i] || cur[i] == '/')) || (!cur[i] && dir[i] == '/')))
		while (j && dir[j] != '/')
			j--;
	for (i = 0; i < j; i++)
		common += dir[i] == '/';
	for (size_t k = common; k < depth; k++) {
		if (len + 4 >= size)
			goto toolong;
		memcpy(out + len, k > common ? "/.." : "..", k > common ? 3 : 2);
		len += k > common ? 3 : 2;
	}
	out[len] = '\0';
	const char *tail = cur + j;
	if (!len && *tail == '/')
		tail++; /* below the link's directory: relative to it */
	size_t tl = strlen(tail);
	if (len + tl + 2 >= size)
		goto toolong;
	memcpy(out + len, tail, tl + 1);
	len += tl;
	if (!len)
		strcpy(out, ".");
	free(cur);
	return 0;
toolong:
	free(cur);
	return -ENAMETOOLONG;
}
