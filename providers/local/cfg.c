/*
 * cfg — the local provider's settings (local.h: struct lcl_config), with
 * their defaults; local.c's init fills them from the config. A file of its
 * own so that the modules reading them (spawn, storage, hostview) do not
 * call back into local.c.
 */
#include "local.h"

struct lcl_config lcl_cfg = {.disk_mb = 4096, .ready_ms = 10000, .cg = {.pids_max = 4096}};
