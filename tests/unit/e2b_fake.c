/*
 * e2b_fake — starts and stops the fake E2B server for the live tests
 * and talks to its admin API (counters, faults). Test support only.
 */
#include "e2b_fake.h"

#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/http.h"

#ifndef SBXFS_SRCDIR
#define SBXFS_SRCDIR "."
#endif

char fake_url[64];
static pid_t fake_pid;
static struct sbx_http_client *admin_http;

void fake_stop(void)
{
	sbx_http_client_free(admin_http);
	admin_http = NULL;
	if (fake_pid > 0) {
		kill(fake_pid, SIGTERM);
		waitpid(fake_pid, NULL, 0);
		fake_pid = 0;
	}
}

static void on_signal(int sig)
{
	fake_stop();
	_exit(128 + sig);
}

int fake_start(void)
{
	const char *src = getenv("top_srcdir") ? getenv("top_srcdir") : SBXFS_SRCDIR;
	char script[4096], line[128] = "";
	int pfd[2], port = 0;
	size_t n = 0;
	snprintf(script, sizeof(script), "%s/tests/fakes/run-fake.sh", src);
	if (geteuid() != 0 || access(script, R_OK) || system("command -v node >/dev/null 2>&1"))
		return -1;
	if (pipe(pfd))
		return -1;
	fake_pid = fork();
	if (fake_pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		execl("/bin/sh", "sh", script, "e2b", "--port", "0", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	atexit(fake_stop);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	while (n + 1 < sizeof(line)) {
		struct pollfd p = {pfd[0], POLLIN, 0};
		if (poll(&p, 1, 20000) <= 0 || read(pfd[0], line + n, 1) != 1)
			break;
		if (line[n++] == '\n')
			break;
	}
	line[n] = '\0';
	close(pfd[0]);
	if (sscanf(line, "LISTENING %d", &port) != 1) {
		fprintf(stderr, "fake did not start: %s\n", line);
		fake_stop();
		return -1;
	}
	snprintf(fake_url, sizeof(fake_url), "http://127.0.0.1:%d", port);
	admin_http = sbx_http_client_new(NULL);
	return 0;
}

/* An admin call; the reply body as JSON (or NULL). */
json_t *admin(const char *method, const char *path, const char *body)
{
	struct sbx_http_req req = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	struct sbx_error e = SBX_ERROR_INIT;
	char url[256];
	const char *hdrs[] = {"Content-Type: application/json", NULL};
	json_t *j = NULL;
	snprintf(url, sizeof(url), "%s%s", fake_url, path);
	req.method = method;
	req.url = url;
	req.headers = hdrs;
	if (body) {
		req.body = body;
		req.body_len = strlen(body);
		req.has_body = true;
	}
	sbx_http_resp_init(&resp);
	ck_assert_int_eq(sbx_http_perform(admin_http, &req, &resp, &e), 0);
	ck_assert_int_lt(resp.status, 300);
	if (resp.body.len)
		j = json_loadb(resp.body.buf, resp.body.len, 0, NULL);
	sbx_http_resp_release(&resp);
	return j;
}

void reset_counters(void)
{
	json_decref(admin("DELETE", "/_fake/counters", NULL));
}

/* The sum of the counters key selects (NULL: all), or of all others (but), from one reading. */
static long counter_sum(const char *key, bool but)
{
	json_t *c = admin("GET", "/_fake/counters", NULL), *v;
	const char *k;
	long n = 0;
	json_object_foreach(c, k, v) if (!key || !strcmp(k, key) == !but) n +=
	    (long)json_integer_value(v);
	json_decref(c);
	return n;
}

long counter(const char *key)
{
	return counter_sum(key, false);
}

long counter_but(const char *key)
{
	return counter_sum(key, true);
}
