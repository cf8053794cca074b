/*
 * ports — list_ports of the local provider: the listening TCP sockets of
 * the lease's own network namespace, read from /proc/INIT/net/tcp{,6} of
 * the lease's init (every process of the lease shares its namespace,
 * whether that is the host's or one of its own). Nothing runs in the
 * sandbox, so listing never disturbs a run.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/fsutil.h"
#include "local/local.h"

int lcl_list_ports(struct sbx_instance *inst, int *ports, size_t max, struct sbx_error *err)
{
	struct local_inst *li = lcl_inst(inst);
	struct sbx_buf text = SBX_BUF_INIT;
	static const char *const files[] = {"tcp", "tcp6"};
	int got = 0;

	if (!lcl_init_alive(li))
		return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "sandbox %s is not running",
				     inst->id);
	for (size_t i = 0; i < 2; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/net/%s", (int)li->init_pid, files[i]);
		if (!sbx_read_file(path, &text, 4 << 20))
			got++;
	}
	/* The init may have ended between the check and the reads (a kill). */
	if (!got || !lcl_init_alive(li)) {
		sbx_buf_release(&text);
		return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND,
				     "sandbox %s: cannot read its sockets", inst->id);
	}
	got = (int)sbx_ports_parse(text.buf, text.len, ports, max);
	sbx_buf_release(&text);
	return got;
}
