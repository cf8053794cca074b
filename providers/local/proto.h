/*
 * proto — the wire format between the local provider (run.c) and the
 * per-lease init (init.c) on the lease's unix socket `<dir>/init.sock`.
 *
 * One SOCK_STREAM connection per request. The client sends one struct
 * lcl_req followed by `len` payload bytes; for LCL_OP_RUN the first
 * sendmsg carries SCM_RIGHTS with LCL_RUN_NFDS descriptors:
 *   [0] the child's stdin, [1] its stdout (write end), [2] its stderr
 *   (write end), [3] stdout read end, [4] stderr read end.
 * The read ends are kept (unused) by init while the client reads; once the
 * client hangs up, init drains and discards them until EOF, so processes
 * a run left in the background never die of SIGPIPE nor block on a full
 * pipe. The payload is NUL-terminated strings: cwd, then argc argv
 * strings, then envc "K=V" strings. With LCL_RUN_SHELL, argc is 1 and
 * argv[0] is shell text run by /bin/sh -c.
 *
 * Init answers with fixed-size struct lcl_reply messages:
 *   RUN:    STARTED{pid} then EXIT{status, timed_out}, or ERROR{err, msg}.
 *   PING:   PONG{pid = init's pid in the host namespace}.
 *   SIGNAL: DONE after kill(-1, flags) inside the lease (pause fallback).
 *   LOG:    DONE once the one descriptor the request carries (a new log
 *           pipe's write end) is init's stderr: a restarted daemon hands
 *           init a pipe it reads, the old one's reader being gone.
 * The client hanging up before EXIT kills the run's process group.
 *
 * Both ends run on the same host, so integers are in host byte order.
 * This header is not a library: it is included by init.c and run.c only.
 */
#ifndef SBX_LOCAL_PROTO_H
#define SBX_LOCAL_PROTO_H

#include <stdint.h>

#define LCL_MAGIC 0x5342584cu /* "SBXL" */
#define LCL_VERSION 1
#define LCL_RUN_NFDS 5
#define LCL_MAX_PAYLOAD (16u << 20)
#define LCL_SOCK_NAME "init.sock"

enum lcl_op {
	LCL_OP_RUN = 1,
	LCL_OP_PING = 2,
	LCL_OP_SIGNAL = 3,
	LCL_OP_LOG = 4,
};

enum lcl_run_flags {
	LCL_RUN_SHELL = 1u << 0,
};

struct lcl_req {
	uint32_t magic;
	uint16_t version;
	uint16_t op;
	int64_t timeout_ms; /* RUN: 0 = none */
	uint32_t flags;	    /* RUN: lcl_run_flags; SIGNAL: the signal number */
	uint32_t argc;
	uint32_t envc;
	uint32_t len; /* payload bytes that follow */
};

enum lcl_reply_kind {
	LCL_R_STARTED = 1,
	LCL_R_EXIT = 2,
	LCL_R_ERROR = 3,
	LCL_R_PONG = 4,
	LCL_R_DONE = 5,
};

struct lcl_reply {
	uint32_t magic;
	uint16_t kind;
	uint16_t timed_out;
	int32_t pid;
	int32_t status; /* EXIT: exit code, 128+N for signal N */
	int32_t err;	/* ERROR: positive errno */
	char msg[236];	/* ERROR: one line */
};

#endif
