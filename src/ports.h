/*
 * ports — what `ls LEASE/ports/` shows: the TCP ports something listens on
 * inside the sandbox. The provider's list_ports when it has one (local:
 * its network namespace's /proc files); otherwise /proc/net/tcp and tcp6
 * read by a short command run in the sandbox (remote providers), outside
 * the lease's run files, so a listing never replaces the last run's output.
 */
#ifndef SBX_PORTS_H
#define SBX_PORTS_H

#include <stddef.h>

#include "lease.h"

/* Largest number of ports a listing shows. */
#define SBX_PORTS_MAX 1024

/* Fills ports (sorted) and returns how many, or -errno with err filled. Resumes a paused lease. */
int sbx_lease_ports(struct sbx_lease *l, int *ports, size_t max, struct sbx_error *err);

#endif
