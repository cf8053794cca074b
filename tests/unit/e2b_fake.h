/*
 * e2b_fake — the fake E2B server (tests/fakes/run-fake.sh e2b) for
 * the live tests: start, stop (by pid, also at exit and on SIGINT/SIGTERM),
 * and its admin API. Test support only; needs root and node.
 */
#ifndef SBX_E2B_FAKE_H
#define SBX_E2B_FAKE_H

#include <jansson.h>

extern char fake_url[64]; /* http://127.0.0.1:PORT once started */

/* Starts the fake; 0, or -1 when it cannot run here (no root, node or script). */
int fake_start(void);
void fake_stop(void);
/* An admin call (asserts a 2xx); the reply body as JSON or NULL (caller owns). */
json_t *admin(const char *method, const char *path, const char *body);
void reset_counters(void);
/* A counter's value; key NULL: the sum of all of them. */
long counter(const char *key);
/* The sum of every counter but key's, from one reading. */
long counter_but(const char *key);

#endif
