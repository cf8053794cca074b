/*
 * sandboxes — `sbxfs --list[=PROVIDER]`: every sandbox the providers know
 * of (the list_sandboxes slot), one line each, without a mount. For the
 * user who lost a state dir and wants the ids to `attach` again.
 *
 * It is not the lease table: it reads no state_dir/leases.json and knows
 * no lease but the name a provider labelled its sandbox with.
 */
#ifndef SBX_SANDBOXES_H
#define SBX_SANDBOXES_H

#include <stdio.h>

/*
 * Loads the config at config_path as a mount does, initialises `provider`
 * (NULL: every provider) with state_dir, and writes one line per sandbox
 * to out: "PROVIDER ID STATE LEASE TEMPLATE CREATED" ("-" for what is not
 * known). Errors go to errs as "sbxfs: ..." lines. With every provider, one
 * that cannot start (no credentials) is only noted and skipped. Returns 0,
 * or -errno after the first failure (what came before it is printed).
 */
int sbx_sandboxes_print(const char *config_path, const char *state_dir, const char *provider,
			FILE *out, FILE *errs);

#endif
