/* ctl — control words (see ctl.h). */
#include "ctl.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

struct ctl_entry {
	const char *word;
	enum sbx_ctl_word id;
	enum sbx_ctl_file file;
	int min, max; /* argument counts */
	const char *usage;
};

static const struct ctl_entry ctl_table[] = {
    {"new", SBX_CTL_NEW, SBX_CTL_FILE_ROOT, 1, SBX_CTL_MAXARGS,
     "new NAME [profile=P] [key=value ...]"},
    {"attach", SBX_CTL_ATTACH, SBX_CTL_FILE_ROOT, 2, 3, "attach NAME SANDBOXID [provider=P]"},
    {"pause", SBX_CTL_PAUSE, SBX_CTL_FILE_STATE, 0, 0, "pause"},
    {"resume", SBX_CTL_RESUME, SBX_CTL_FILE_STATE, 0, 0, "resume"},
    {"kill", SBX_CTL_KILL, SBX_CTL_FILE_STATE, 0, 0, "kill"},
    {"restart", SBX_CTL_RESTART, SBX_CTL_FILE_STATE, 0, 1,
     "restart [python|javascript|typescript]"},
    {"forget", SBX_CTL_FORGET, SBX_CTL_FILE_STATE, 0, 0, "forget"},
    {"kill", SBX_CTL_KILL, SBX_CTL_FILE_RUN, 0, 0, "kill"},
    /* tty/N/ctl's words, for sbx_ctl_partial only: tty.c parses them (keep both alike). */
    {"size", SBX_CTL_TTY, SBX_CTL_FILE_TTY, 2, 2, "size COLS ROWS"},
    {"term", SBX_CTL_TTY, SBX_CTL_FILE_TTY, 1, 1, "term NAME"},
    {"cwd", SBX_CTL_TTY, SBX_CTL_FILE_TTY, 1, 1, "cwd PATH"},
    {"close", SBX_CTL_TTY, SBX_CTL_FILE_TTY, 0, 0, "close"},
};

int sbx_ctl_split(const char *line, char *storage, size_t size, char **argv, int max)
{
	size_t o = 0;
	int argc = 0;
	const char *p = line;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
			p++;
		if (!*p)
			break;
		if (argc == max)
			return -EINVAL;
		argv[argc++] = storage + o;
		int quoted = 0;
		while (*p && (quoted || !(*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))) {
			char c = *p++;
			if (c == '"') {
				quoted = !quoted;
				continue;
			}
			if (c == '\\' && *p)
				c = *p++;
			if (o + 1 >= size)
				return -EINVAL;
			storage[o++] = c;
		}
		if (quoted)
			return -EINVAL;
		if (o + 1 >= size)
			return -EINVAL;
		storage[o++] = '\0';
	}
	argv[argc] = NULL;
	return argc;
}

int sbx_ctl_parse(enum sbx_ctl_file file, const char *line, struct sbx_ctl_cmd *cmd,
		  struct sbx_error *err)
{
	char *words[SBX_CTL_MAXARGS + 2];
	int n = sbx_ctl_split(line, cmd->storage, sizeof(cmd->storage), words, SBX_CTL_MAXARGS + 1);
	if (n < 0)
		return sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED,
				     "cannot parse \"%.80s\": unbalanced quote or too long", line);
	if (n == 0 || words[0][0] == '#')
		return -ENODATA;
	for (size_t i = 0; i < sizeof(ctl_table) / sizeof(*ctl_table); i++) {
		const struct ctl_entry *e = &ctl_table[i];
		if (e->file != file || strcmp(e->word, words[0]))
			continue;
		if (n - 1 < e->min || n - 1 > e->max)
			return sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED, "usage: %s",
					     e->usage);
		cmd->word = e->id;
		cmd->argc = n - 1;
		for (int k = 1; k < n; k++)
			cmd->argv[k - 1] = words[k];
		cmd->argv[n - 1] = NULL;
		return 0;
	}
	if (file == SBX_CTL_FILE_ROOT)
		return sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED,
				     "unknown command \"%.40s\" (expected new or attach)",
				     words[0]);
	return sbx_error_set(
	    err, EINVAL, SBX_E_EXECUTION_FAILED, "unknown word \"%.40s\" (expected %s)", words[0],
	    file == SBX_CTL_FILE_RUN ? "kill" : "pause, resume, kill, restart or forget");
}

enum sbx_ctl_partial sbx_ctl_partial(enum sbx_ctl_file file, const char *text)
{
	const char *p = text + strspn(text, " \t\r");
	size_t n = strcspn(p, " \t\r");
	bool rest_blank = p[n + strspn(p + n, " \t\r")] == '\0';
	if (!n || *p == '#' || *p == '"' || *p == '\\')
		return SBX_CTL_MORE; /* blank, a comment, or quoting: the whole line decides */
	for (size_t i = 0; i < sizeof(ctl_table) / sizeof(*ctl_table); i++) {
		const struct ctl_entry *e = &ctl_table[i];
		size_t wl = strlen(e->word);
		if (e->file != file || wl < n || strncmp(e->word, p, n))
			continue;
		if (wl == n && e->max == 0) /* nothing may follow */
			return rest_blank ? SBX_CTL_DONE : SBX_CTL_BAD;
		if (wl == n || p[n] == '\0')
			return SBX_CTL_MORE;
	}
	return SBX_CTL_BAD;
}

const char *sbx_ctl_opt(const struct sbx_ctl_cmd *cmd, int from, const char *key)
{
	size_t kl = strlen(key);
	for (int i = from; i < cmd->argc; i++)
		if (!strncmp(cmd->argv[i], key, kl) && cmd->argv[i][kl] == '=')
			return cmd->argv[i] + kl + 1;
	return NULL;
}

int sbx_ctl_consume_lines(struct sbx_buf *b, int (*fn)(void *, const char *), void *ctx)
{
	char *nl;
	while ((nl = memchr(b->buf, '\n', b->len))) {
		*nl = '\0';
		int rc = fn(ctx, b->buf);
		sbx_buf_consume(b, (size_t)(nl - b->buf) + 1);
		if (rc)
			return rc;
	}
	return 0;
}

int sbx_ctl_partial_line(struct sbx_buf *b, enum sbx_ctl_file file, int (*fn)(void *, const char *),
			 void *ctx)
{
	int rc;
	if (!b->len || sbx_ctl_partial(file, b->buf) == SBX_CTL_MORE)
		return 0;
	rc = fn(ctx, b->buf);
	sbx_buf_reset(b);
	return rc;
}
