/* df — the `df -kP` / `df -iP` output parser shared by e2b and daytona. */
#include "base/df.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* total, used, avail of one data row [row, end), or -EPROTO. */
static int df_row(const char *row, const char *end, unsigned long long v[3])
{
	char line[512];
	size_t n = (size_t)(end - row) < sizeof(line) - 1 ? (size_t)(end - row) : sizeof(line) - 1;
	char *tok, *save = NULL, *toks[16];
	int nt = 0;

	memcpy(line, row, n);
	line[n] = '\0';
	for (tok = strtok_r(line, " \t", &save); tok && nt < 16; tok = strtok_r(NULL, " \t", &save))
		toks[nt++] = tok;
	/* Filesystem total used avail capacity% mountpoint */
	if (nt < 6)
		return -EPROTO;
	for (int i = 0; i < 3; i++) {
		char *e;
		v[i] = strtoull(toks[nt - 5 + i], &e, 10);
		if (*e || e == toks[nt - 5 + i])
			return -EPROTO;
	}
	return 0;
}

int sbx_df_parse(const char *text, struct statvfs *st)
{
	bool got = false;

	memset(st, 0, sizeof(*st));
	st->f_bsize = st->f_frsize = 1024;
	st->f_namemax = 255;
	for (const char *line = text; line && *line;) {
		const char *next = strchr(line, '\n'), *row, *end;
		unsigned long long v[3];
		bool inodes;

		if (strncmp(line, "Filesystem", 10) || !next) {
			line = next ? next + 1 : NULL;
			continue;
		}
		inodes = memmem(line, (size_t)(next - line), "Inodes", 6) != NULL;
		row = next + 1;
		end = strchr(row, '\n');
		if (!end)
			end = row + strlen(row);
		line = *end ? end + 1 : NULL;
		if (df_row(row, end, v))
			continue;
		if (inodes) {
			st->f_files = v[0];
			st->f_ffree = st->f_favail = v[2];
		} else {
			st->f_blocks = v[0];
			st->f_bfree = v[0] >= v[1] ? v[0] - v[1] : 0;
			st->f_bavail = v[2];
			got = true;
		}
	}
	return got ? 0 : -EPROTO;
}
