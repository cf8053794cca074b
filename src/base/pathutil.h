/*
 * pathutil — the one test of "this sandbox path is that directory or lies
 * below it", and the one split of a path into its directory and name, on
 * absolute, normalised paths (no "//", no trailing '/' but the root's),
 * and the one way to put a child's name after its directory.
 * Header-only: the core, the providers and their unit tests use it
 * without a link dependency.
 */
#ifndef SBX_PATHUTIL_H
#define SBX_PATHUTIL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* path is the first n bytes of root, or lies below them; the root "/" holds everything. */
static inline bool sbx_path_within(const char *path, const char *root, size_t n)
{
	if (n == 1 && root[0] == '/')
		return path[0] == '/';
	return !strncmp(path, root, n) && (path[n] == '\0' || path[n] == '/');
}

/* path is root or lies below it (root "/": every absolute path). */
static inline bool sbx_path_under(const char *path, const char *root)
{
	return sbx_path_within(path, root, strlen(root));
}

/* dir as the part before "/NAME" of a child's path: "" for the root (no "//NAME"). */
static inline const char *sbx_path_prefix(const char *dir)
{
	return strcmp(dir, "/") ? dir : "";
}

/* The length of path's directory: "/a/b" -> 2 ("/a"), "/a" and "/" -> 1 ("/"); 0 without a '/'. */
static inline size_t sbx_path_dirlen(const char *path)
{
	const char *slash = strrchr(path, '/');
	return !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
}

/*
 * A name a listing from a sandbox may carry: not empty, not "." or "..",
 * no '/', at most NAME_MAX bytes. Anything else no lookup can reach (the
 * kernel refuses a longer name, resolves the dots itself, and fails a whole
 * listing on a '/'), and a server the sandbox controls can send it.
 */
static inline bool sbx_name_listable(const char *name)
{
	return name && *name && strcmp(name, ".") && strcmp(name, "..") && !strchr(name, '/') &&
	       strlen(name) <= NAME_MAX;
}

#endif
