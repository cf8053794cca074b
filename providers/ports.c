/*
 * ports — which TCP ports something listens on, from the text of
 * /proc/net/tcp and /proc/net/tcp6 (pure: no I/O). Shared by the local
 * provider (which reads the files of a process inside the lease's network
 * namespace) and the core's fallback for remote providers (which reads them
 * through a command run in the sandbox).
 */
#include "provider.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

size_t sbx_ports_parse(const char *text, size_t len, int *ports, size_t max)
{
	size_t n = 0;
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char line[512], addr[64], rem[64], st[8];
		unsigned port;
		int slot;

		if (ll < sizeof(line)) {
			memcpy(line, p, ll);
			line[ll] = '\0';
			/* "  0: 0100007F:1F90 00000000:0000 0A ..."; 0A is LISTEN. */
			if (sscanf(line, " %d: %63s %63s %7s", &slot, addr, rem, st) == 4 &&
			    !strcmp(st, "0A")) {
				const char *colon = strrchr(addr, ':');
				char *e;
				port = colon ? (unsigned)strtoul(colon + 1, &e, 16) : 0;
				if (colon && !*e && port > 0 && port < 65536) {
					bool dup = false;
					for (size_t i = 0; i < n; i++)
						dup = dup || ports[i] == (int)port;
					if (!dup && n < max)
						ports[n++] = (int)port;
				}
			}
		}
		p += ll + 1;
	}
	qsort(ports, n, sizeof(*ports), cmp_int);
	return n;
}
