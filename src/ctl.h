/*
 * ctl — parsing of the words written to control files (the root `ctl`,
 * a lease's `state`). Pure: text in, a command out. Modelled on Plan 9's
 * ctl files: a small table of {word, min args, max args}.
 */
#ifndef SBX_CTL_H
#define SBX_CTL_H

#include "base/buf.h"
#include "base/err.h"

#define SBX_CTL_MAXARGS 32

enum sbx_ctl_word {
	SBX_CTL_NEW,	 /* new NAME [profile=P] [key=value ...] */
	SBX_CTL_ATTACH,	 /* attach NAME SANDBOXID [provider=P] */
	SBX_CTL_PAUSE,	 /* pause */
	SBX_CTL_RESUME,	 /* resume */
	SBX_CTL_KILL,	 /* kill */
	SBX_CTL_RESTART, /* restart [LANGUAGE] — a fresh code interpreter */
	SBX_CTL_FORGET,	 /* forget — drop the lease, leave its sandbox */
	SBX_CTL_TTY,	 /* a tty/N/ctl command (tty.c) */
};

struct sbx_ctl_cmd {
	enum sbx_ctl_word word;
	int argc;			 /* arguments after the word */
	char *argv[SBX_CTL_MAXARGS + 1]; /* point into `storage`; NULL-terminated */
	char storage[1024];
};

enum sbx_ctl_file {
	SBX_CTL_FILE_ROOT,
	SBX_CTL_FILE_STATE,
	SBX_CTL_FILE_RUN, /* runs/N/ctl */
	SBX_CTL_FILE_TTY, /* tty/N/ctl: its words only (tty.c parses their arguments) */
};

/*
 * Splits one line into words: blanks separate, "double quotes" group, \
 * escapes the next character. Returns the word count or -EINVAL
 * (unterminated quote, too many words, line too long).
 */
int sbx_ctl_split(const char *line, char *storage, size_t size, char **argv, int max);
/*
 * Parses one line written to a control file of kind `file`. Blank lines
 * and lines starting with # are -ENODATA (ignored by callers). Unknown
 * words and wrong argument counts are -EINVAL with the reason in err.
 */
int sbx_ctl_parse(enum sbx_ctl_file file, const char *line, struct sbx_ctl_cmd *cmd,
		  struct sbx_error *err);
/*
 * What an unterminated line written so far can still become (`printf
 * pause > state` has no newline, and a shell ignores close()'s errors):
 * MORE text may complete it (a prefix of a word, or a word whose
 * arguments may follow), it is DONE (a whole word that takes none), or
 * it is BAD (no word of this file begins so): the last two are handled
 * at the write, where the writer sees the errno.
 */
enum sbx_ctl_partial { SBX_CTL_MORE, SBX_CTL_DONE, SBX_CTL_BAD };
enum sbx_ctl_partial sbx_ctl_partial(enum sbx_ctl_file file, const char *text);
/* Runs every complete line buffered in b through fn; keeps the rest. */
int sbx_ctl_consume_lines(struct sbx_buf *b, int (*fn)(void *, const char *), void *ctx);
/*
 * The unterminated rest of b, when it cannot wait for more
 * (sbx_ctl_partial): handled now as a line, so a bad word or a failed
 * action fails this write rather than the close.
 */
int sbx_ctl_partial_line(struct sbx_buf *b, enum sbx_ctl_file file, int (*fn)(void *, const char *),
			 void *ctx);
/* Finds "key=VALUE" among argv[from..]; returns VALUE or NULL. */
const char *sbx_ctl_opt(const struct sbx_ctl_cmd *cmd, int from, const char *key);

#endif
