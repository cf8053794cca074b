/* fs_cached — placeholder until the remote cache lands: every op ENOTSUP. */
#include "fsmirror.h"

const struct sbx_fs_ops sbx_fs_cached_ops = {0};
