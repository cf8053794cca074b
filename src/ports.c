/* ports — see ports.h. */
#include "ports.h"

#include <errno.h>
#include <string.h>

#include "base/buf.h"

#define PORTS_RUN_TIMEOUT_MS 15000
#define PORTS_TEXT_MAX (4 << 20)

static int collect(void *ctx, enum sbx_stream s, const char *data, size_t len)
{
	struct sbx_buf *b = ctx;
	if (s != SBX_STDOUT)
		return 0;
	if (b->len + len > PORTS_TEXT_MAX)
		return -EFBIG;
	sbx_buf_add(b, data, len);
	return 0;
}

/* The fallback: the sandbox's own /proc/net files, through one run. */
static int ports_by_run(const struct sbx_provider *p, struct sbx_instance *inst, int *ports,
			size_t max, struct sbx_error *err)
{
	static const char *const argv[] = {
	    "/bin/sh", "-c", "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; exit 0", NULL};
	struct sbx_buf out = SBX_BUF_INIT;
	struct sbx_run_req req = {.argv = argv, .cwd = "/", .timeout_ms = PORTS_RUN_TIMEOUT_MS};
	struct sbx_run_sink sink = {.ctx = &out, .output = collect};
	struct sbx_run_result res = {0};
	int rc;

	if (!p->run)
		return sbx_error_set(err, ENOTSUP, 0, "%s cannot list ports", p->name);
	rc = p->run(inst, &req, &sink, &res, err);
	if (!rc && res.timed_out)
		rc = sbx_error_set(err, ETIMEDOUT, SBX_E_TIMEOUT, "listing ports timed out");
	if (!rc)
		rc = (int)sbx_ports_parse(out.buf, out.len, ports, max);
	sbx_buf_release(&out);
	return rc;
}

int sbx_lease_ports(struct sbx_lease *l, int *ports, size_t max, struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc = sbx_lease_use(l, &inst, err);
	if (rc)
		return rc;
	if (l->prov->list_ports)
		rc = l->prov->list_ports(inst, ports, max, err);
	else
		rc = ports_by_run(l->prov, inst, ports, max, err);
	sbx_lease_unuse(l);
	return rc;
}
