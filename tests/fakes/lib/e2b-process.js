'use strict';
/*
 * Fake envd, process half: the process.Process Connect service (Start,
 * Connect, List, SendSignal, SendInput, CloseStdin, Update) per e2b.md §2.7.
 * Commands run for real inside the sandbox root.  A process outlives the
 * stream that started it (unless its Connect-Timeout-Ms runs out, which
 * kills it) and can be re-attached with Connect; a finished one's end
 * event is kept a while for a late Connect.
 */
const { RpcError, ServerStream, parseEnvelope, deadlineMs, unary } = require('./connect');
const { absPath, rpcUser } = require('./e2b-envd');
const fs = require('fs');

const SIGNALS = { SIGNAL_SIGKILL: 'SIGKILL', SIGNAL_SIGTERM: 'SIGTERM', 9: 'SIGKILL', 15: 'SIGTERM' };
/* Go's ProcessState.String() words for the common signals. */
const SIGNAL_WORDS = {
	SIGKILL: 'killed', SIGTERM: 'terminated', SIGINT: 'interrupt', SIGHUP: 'hangup',
	SIGPIPE: 'broken pipe', SIGSEGV: 'segmentation fault', SIGABRT: 'aborted', SIGQUIT: 'quit',
};
const KEEP_ENDED_MS = 60000;

/*
 * A PTY the way envd gives one: the command runs on a pseudo terminal made
 * by this helper (python's pty module, run inside the sandbox root). Our
 * pipe is its stdin (keystrokes), its stdout carries the terminal's output,
 * fd 3 takes "COLS ROWS" lines (resizes); it exits with the shell's status.
 */
const PTY_HELPER = `
import fcntl, os, pty, select, signal, struct, sys, termios
cols, rows, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
def size(fd, c, r):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", r, c, 0, 0))
pid, m = pty.fork()
if pid == 0:
    size(0, cols, rows)
    os.execvp(argv[0], argv)
ctl, fds = b"", [0, 3, m]
while m in fds:
    for fd in select.select(fds, [], [])[0]:
        try:
            d = os.read(fd, 16384)
        except OSError:
            d = b""
        if fd == m:
            if not d:
                fds.remove(m)
            else:
                os.write(1, d)
        elif not d:
            fds.remove(fd)
        elif fd == 0:
            os.write(m, d)
        else:
            ctl += d
            while b"\\n" in ctl:
                line, ctl = ctl.split(b"\\n", 1)
                c, r = map(int, line.split())
                size(m, c, r)
st = os.waitpid(pid, 0)[1]
if os.WIFSIGNALED(st):
    signal.signal(os.WTERMSIG(st), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(st))
sys.exit(os.WEXITSTATUS(st))
`;

function endEvent(code, sig) {
	if (sig) {
		const s = `signal: ${SIGNAL_WORDS[sig] || sig}`;
		return { end: { exitCode: -1, status: s, error: s } };
	}
	const e = { end: { exited: true, status: `exit status ${code}` } };
	if (code) {
		e.end.exitCode = code;
		e.end.error = `exit status ${code}`;
	}
	return e;
}

function killGroup(pid, sig) {
	try {
		process.kill(-pid, sig);
	} catch (e) {
		try {
			process.kill(pid, sig);
		} catch (e2) { /* gone */ }
	}
}

/* Streams attached to a process get its events; the one that started it may own a deadline. */
function attach(proc, stream) {
	proc.streams.add(stream);
	stream.onClose = () => proc.streams.delete(stream);
}

function emit(proc, ev) {
	for (const s of proc.streams)
		s.send({ event: ev });
}

function launch(sb, req, u, cwd) {
	const cfg = req.process;
	const env = sb.root.baseEnv(u, Object.assign({}, sb.envVars, cfg.envs || {}));
	const size = req.pty ? (req.pty.size || {}) : null;
	const argv = size
		? ['/usr/bin/python3', '-c', PTY_HELPER, String(size.cols || 80), String(size.rows || 24), cfg.cmd, ...(cfg.args || [])]
		: [cfg.cmd, ...(cfg.args || [])];
	const child = sb.root.spawn(argv, {
		u, env, cwd, stdio: size ? ['pipe', 'pipe', 'pipe', 'pipe'] : [req.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
	});
	const proc = {
		pid: child.pid, tag: req.tag, child, streams: new Set(), ended: null, pty: !!size,
		config: { cmd: cfg.cmd, args: cfg.args || [], envs: cfg.envs || {}, cwd },
	};
	let open = 2;
	let exit = null;
	const finish = () => {
		if (proc.ended || !exit)
			return;
		proc.ended = endEvent(exit.code, exit.sig);
		emit(proc, proc.ended);
		for (const s of proc.streams)
			s.end();
		proc.streams.clear();
		child.stdout.destroy();
		child.stderr.destroy();
		sb.procs.delete(proc.pid);
		sb.endedProcs.set(proc.pid, proc);
		setTimeout(() => sb.endedProcs.delete(proc.pid), KEEP_ENDED_MS).unref();
	};
	for (const name of ['stdout', 'stderr']) {
		const key = proc.pty && name === 'stdout' ? 'pty' : name;
		child[name].on('data', (c) => emit(proc, { data: { [key]: c.toString('base64') } }));
		child[name].on('close', () => {
			if (--open === 0)
				finish();
		});
	}
	/* A background job may hold the pipes open: like Go's Wait, stop reading soon after the exit. */
	child.on('exit', (code, sig) => {
		exit = { code, sig };
		if (open === 0)
			finish();
		else
			setTimeout(finish, 100);
	});
	if (child.stdin)
		child.stdin.on('error', () => {});
	if (proc.pty)
		child.stdio[3].on('error', () => {});
	sb.procs.set(proc.pid, proc);
	return proc;
}

async function start(ctx) {
	const sb = ctx.sb;
	let req;
	let u;
	const stream = new ServerStream(ctx, { event: { keepalive: {} } });
	try {
		req = parseEnvelope(await ctx.body());
		u = rpcUser(ctx);
		if (!req.process || !req.process.cmd)
			throw new RpcError('invalid_argument', 'process.cmd is required');
	} catch (e) {
		return stream.end(e instanceof RpcError ? e : new RpcError('internal', e.message));
	}
	const cwd = req.process.cwd ? absPath(req.process.cwd, u) : u.home;
	let isDir = false;
	try {
		isDir = fs.statSync(sb.root.resolve(cwd).host).isDirectory();
	} catch (e) { /* missing */ }
	if (!isDir)
		return stream.end(new RpcError('invalid_argument', `cwd '${cwd}' does not exist`));
	const proc = launch(sb, req, u, cwd);
	stream.send({ event: { start: { pid: proc.pid } } });
	attach(proc, stream);
	const ms = deadlineMs(ctx.req);
	if (ms) {
		const t = setTimeout(() => {
			if (proc.ended)
				return;
			killGroup(proc.pid, 'SIGKILL');
			proc.streams.delete(stream);
			stream.end(new RpcError('deadline_exceeded', 'context deadline exceeded'));
		}, ms);
		proc.child.on('exit', () => clearTimeout(t));
	}
}

function findProc(sb, sel) {
	sel = sel || {};
	for (const table of [sb.procs, sb.endedProcs]) {
		for (const p of table.values()) {
			if ((sel.pid !== undefined && p.pid === Number(sel.pid)) || (sel.tag !== undefined && p.tag === sel.tag))
				return p;
		}
	}
	return null;
}

function notFound(sel) {
	sel = sel || {};
	return new RpcError('not_found', sel.tag !== undefined ? `process with tag ${sel.tag} not found` : `process with pid ${sel.pid} not found`);
}

async function connect(ctx) {
	const stream = new ServerStream(ctx, { event: { keepalive: {} } });
	let req;
	try {
		req = parseEnvelope(await ctx.body());
	} catch (e) {
		return stream.end(e);
	}
	const proc = findProc(ctx.sb, req.process);
	if (!proc)
		return stream.end(notFound(req.process));
	stream.send({ event: { start: { pid: proc.pid } } });
	if (proc.ended) {
		stream.send({ event: proc.ended });
		return stream.end();
	}
	attach(proc, stream);
	const ms = deadlineMs(ctx.req);
	if (ms) {
		setTimeout(() => {
			proc.streams.delete(stream);
			stream.end(new RpcError('deadline_exceeded', 'context deadline exceeded'));
		}, ms);
	}
}

function running(ctx, sel) {
	const p = findProc(ctx.sb, sel);
	if (!p || p.ended)
		throw notFound(sel);
	return p;
}

/* The sandbox is gone or frozen: cut every stream, as the proxy's connections die with the VM. */
function dropAll(sb) {
	for (const p of sb.procs.values()) {
		for (const s of p.streams)
			s.res.destroy();
		p.streams.clear();
	}
}

function register(server, svc) {
	server.route('POST', '/process.Process/Start', svc.gate('token', start));
	server.route('POST', '/process.Process/Connect', svc.gate('token', connect));
	const rpc = (name, fn) => server.route('POST', `/process.Process/${name}`, svc.gate('token', unary(fn)));
	rpc('List', (ctx) => ({
		processes: [...ctx.sb.procs.values()].map((p) => {
			const info = { config: p.config, pid: p.pid };
			if (p.tag !== undefined)
				info.tag = p.tag;
			return info;
		}),
	}));
	rpc('SendSignal', (ctx, b) => {
		const p = running(ctx, b.process);
		const sig = SIGNALS[b.signal];
		if (!sig)
			throw new RpcError('invalid_argument', `invalid signal: ${b.signal}`);
		killGroup(p.pid, sig);
		return {};
	});
	rpc('SendInput', (ctx, b) => {
		const p = running(ctx, b.process);
		const input = b.input || {};
		if ((input.pty !== undefined) !== p.pty)
			throw new RpcError('failed_precondition', p.pty ? 'the process has a PTY: send input.pty' : 'the process has no PTY');
		if (p.pty) {
			p.child.stdin.write(Buffer.from(input.pty || '', 'base64'));
			return {};
		}
		if (!p.child.stdin || p.child.stdin.writableEnded)
			throw new RpcError('failed_precondition', 'stdin not enabled or closed');
		p.child.stdin.write(Buffer.from(input.stdin || '', 'base64'));
		return {};
	});
	rpc('CloseStdin', (ctx, b) => {
		const p = running(ctx, b.process);
		if (p.child.stdin)
			p.child.stdin.end();
		return {};
	});
	rpc('Update', (ctx, b) => {
		const p = running(ctx, b.process);
		if (b.pty && !p.pty)
			throw new RpcError('failed_precondition', 'the process has no PTY');
		const sz = (b.pty && b.pty.size) || null;
		if (sz)
			p.child.stdio[3].write(`${Number(sz.cols) || 80} ${Number(sz.rows) || 24}\n`);
		return {};
	});
}

module.exports = { register, dropAll };
