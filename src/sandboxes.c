/*
 * sandboxes — see sandboxes.h. Providers are started and shut down here
 * exactly as sbx_mount_open() and sbx_mount_close() do, so `--list` sees
 * the same settings and credentials a mount would.
 */
#include "sandboxes.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "base/spec.h"
#include "provider.h"

struct print_ctx {
	FILE *out;
	const char *provider;
};

/* One field of the line: "-" when unknown, blanks and control bytes as '?'. */
static void field(FILE *out, const char *s)
{
	fputc(' ', out);
	if (!s || !*s) {
		fputc('-', out);
		return;
	}
	for (; *s; s++)
		fputc((unsigned char)*s <= ' ' || *s == 0x7f ? '?' : *s, out);
}

static int print_one(void *ctx, const struct sbx_sandbox_entry *sb)
{
	struct print_ctx *pc = ctx;
	fputs(pc->provider, pc->out);
	field(pc->out, sb->id);
	field(pc->out, sb->state);
	field(pc->out, sb->lease);
	field(pc->out, sb->template_name);
	field(pc->out, sb->created_at);
	fputc('\n', pc->out);
	return 0;
}

static int list_one(const struct sbx_provider *p, const struct sbx_config *cfg,
		    const char *state_dir, bool named, FILE *out, FILE *errs)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct print_ctx pc = {out, p->name};
	int rc;

	if (!p->list_sandboxes) {
		if (named)
			fprintf(errs, "sbxfs: %s: cannot list its sandboxes\n", p->name);
		return named ? -ENOTSUP : 0;
	}
	rc = sbx_provider_init(p, cfg->providers, state_dir, &err);
	if (rc) {
		fprintf(errs, "sbxfs: %s: %s%s\n", p->name, err.msg, named ? "" : " (skipped)");
		return named ? rc : 0;
	}
	rc = p->list_sandboxes(print_one, &pc, &err);
	if (rc)
		fprintf(errs, "sbxfs: %s: %s\n", p->name, err.msg);
	if (p->shutdown)
		p->shutdown();
	return rc;
}

int sbx_sandboxes_print(const char *config_path, const char *state_dir, const char *provider,
			FILE *out, FILE *errs)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_config cfg;
	int rc = sbx_config_load(&cfg, config_path, &err), rc_bad = 0;

	if (rc) {
		fprintf(errs, "sbxfs: %s\n", err.msg);
		return rc;
	}
	if (provider && !sbx_provider_lookup(provider, &err)) {
		fprintf(errs, "sbxfs: %s\n", err.msg);
		rc = rc_bad = -EINVAL;
	}
	/* Every provider gets its turn: one failing is reported, not a reason to stop. */
	for (const struct sbx_provider *const *p = sbx_provider_all(); *p && !rc_bad; p++)
		if (!provider || !strcmp(provider, (*p)->name)) {
			int r = list_one(*p, &cfg, state_dir, provider != NULL, out, errs);
			if (r && !rc)
				rc = r;
		}
	sbx_config_free(&cfg);
	if (fflush(out) && !rc) {
		fprintf(errs, "sbxfs: writing the list: %s\n", strerror(errno));
		rc = -EIO;
	}
	return rc;
}
