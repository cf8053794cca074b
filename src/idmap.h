/*
 * idmap — `-o idmap=user`: a remote lease's sandbox user shown as the
 * mount's owner in fs/, and the owner's ids given to chown given back to
 * the sandbox user (idmap.c).
 */
#ifndef SBX_IDMAP_H
#define SBX_IDMAP_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

struct sbx_lease;

void sbx_idmap_set_user(bool on);
/* Learns l's sandbox user once (may run `id` in a running sandbox); call with no lock held. */
void sbx_idmap_learn(struct sbx_lease *l);
/* Attributes going to the kernel: the sandbox user's ids become the owner's. */
void sbx_idmap_out(struct sbx_lease *l, struct stat *st);
/* Ids a chown gives: the owner's become the sandbox user's. */
uid_t sbx_idmap_uid_in(struct sbx_lease *l, uid_t uid);
gid_t sbx_idmap_gid_in(struct sbx_lease *l, gid_t gid);

#endif
