'use strict';
/*
 * Fake code interpreter (port 49999, e2b.md §3): POST /execute streaming
 * NDJSON and the /contexts API, backed by a real persistent interpreter per
 * context: sbxfs's own kernel drivers (providers/kernel/pykernel.py and
 * jskernel.js, in their --stdio mode) running inside the sandbox, whose
 * events already have /execute's shapes.  A context's cells run one at a
 * time in arrival order.  Kernel sources are passed on the command line,
 * so nothing is copied into the sandbox.
 */
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const readline = require('readline');
const { HttpError, sendJson } = require('./common');

const KERNELS = path.join(__dirname, '..', '..', '..', 'providers', 'kernel');
const PY_SRC = fs.readFileSync(path.join(KERNELS, 'pykernel.py'), 'utf8');
const JS_SRC = fs.readFileSync(path.join(KERNELS, 'tsstrip.js'), 'utf8') + '\n' +
	fs.readFileSync(path.join(KERNELS, 'jskernel.js'), 'utf8');
const LANGS = { python: 'python', py: 'python', javascript: 'javascript', js: 'javascript', typescript: 'typescript', ts: 'typescript' };
const KEEPALIVE_MS = 5000;

/* One interpreter process; run() resolves when its cell is done (or the process died). */
class Kernel {
	constructor(sb, language, cwd) {
		const u = sb.root.user();
		const env = sb.root.baseEnv(u, Object.assign({ MPLBACKEND: 'Agg', PYTHONUNBUFFERED: '1' }, sb.envVars));
		const argv = language === 'python' ? ['/usr/bin/python3', '-u', '-c', PY_SRC, '--stdio']
			: ['/usr/bin/node', '-e', JS_SRC, '--', '--stdio', '--language', language];
		this.child = sb.root.spawn(argv, { u, env, cwd, stdio: ['pipe', 'pipe', 'pipe', 'pipe'] });
		this.language = language;
		this.current = null;
		this.dead = false;
		this.child.stdin.on('error', () => {});
		readline.createInterface({ input: this.child.stdio[3] }).on('line', (l) => this.onEvent(l));
		/* Output written straight to fd 1/2 (subprocesses, C code) belongs to the running cell. */
		for (const name of ['stdout', 'stderr']) {
			this.child[name].on('data', (c) => this.current && this.current.emit({ type: name, text: c.toString('utf8') }));
		}
		this.child.on('exit', (code, sig) => {
			this.dead = true;
			const cur = this.current;
			if (cur) {
				this.current = null;
				cur.emit({ type: 'error', name: 'UnexpectedEndOfExecution', value: `the kernel exited (${sig || code})`, traceback: '' });
				cur.done();
			}
		});
	}

	onEvent(line) {
		let ev;
		try {
			ev = JSON.parse(line);
		} catch (e) {
			return;
		}
		const cur = this.current;
		if (!cur)
			return;
		if (ev.type === 'end_of_execution') {
			this.current = null;
			cur.done();
		} else {
			cur.emit(ev);
		}
	}

	run(code, env, emit) {
		return new Promise((resolve) => {
			if (this.dead) {
				emit({ type: 'error', name: 'UnexpectedEndOfExecution', value: 'the kernel is not running', traceback: '' });
				return resolve();
			}
			this.current = { emit, done: resolve };
			this.child.stdin.write(JSON.stringify({ code, env }) + '\n');
		});
	}

	kill() {
		this.dead = true;
		try {
			process.kill(-this.child.pid, 'SIGKILL');
		} catch (e) { /* gone */ }
	}
}

function newContext(sb, language, cwd) {
	const c = { id: crypto.randomUUID(), language, cwd, queue: Promise.resolve(), kernel: null };
	sb.contexts.set(c.id, c);
	return c;
}

function contextJson(c) {
	return { id: c.id, language: c.language, cwd: c.cwd };
}

function kernelOf(sb, c) {
	if (!c.kernel || c.kernel.dead)
		c.kernel = new Kernel(sb, c.language, c.cwd);
	return c.kernel;
}

async function execute(ctx) {
	const sb = ctx.sb;
	const b = await ctx.json();
	if (b.language && b.context_id)
		throw new HttpError(400, 'Only one of context_id or language can be provided');
	let c;
	if (b.context_id) {
		c = sb.contexts.get(b.context_id);
		if (!c)
			throw new HttpError(404, `Context ${b.context_id} not found`);
	} else {
		const lang = LANGS[(b.language || 'python').toLowerCase()];
		if (!lang)
			throw new HttpError(400, `Unsupported language: ${b.language}`);
		sb.defaultContexts = sb.defaultContexts || {};
		c = sb.contexts.get(sb.defaultContexts[lang]) || newContext(sb, lang, sb.root.user().home);
		sb.defaultContexts[lang] = c.id;
	}
	const res = ctx.res;
	res.writeHead(200, {});
	let timer = null;
	const write = (obj) => {
		if (res.writableEnded || res.destroyed)
			return;
		res.write(JSON.stringify(obj) + '\n');
		clearTimeout(timer);
		timer = setTimeout(() => write({ type: 'keepalive' }), KEEPALIVE_MS);
	};
	const run = c.queue.then(async () => {
		/* number_of_executions comes from the kernel: it restarts with it, as Jupyter's does. */
		await kernelOf(sb, c).run(b.code || '', b.env_vars || {}, (ev) => {
			if (ev.type === 'stdout' || ev.type === 'stderr')
				ev.timestamp = new Date().toISOString();
			write(ev);
		});
		write({ type: 'end_of_execution' });
		clearTimeout(timer);
		res.end();
	});
	c.queue = run.catch(() => {});
	await run;
}

function dropAll(sb) {
	for (const c of sb.contexts.values()) {
		if (c.kernel)
			c.kernel.kill();
	}
	sb.contexts.clear();
}

function register(server, svc) {
	server.route('POST', '/execute', svc.gate('token', execute));
	server.route('POST', '/contexts', svc.gate('none', async (ctx) => {
		const b = await ctx.json();
		const lang = LANGS[(b.language || 'python').toLowerCase()];
		if (!lang)
			throw new HttpError(400, `Unsupported language: ${b.language}`);
		sendJson(ctx.res, 200, contextJson(newContext(ctx.sb, lang, b.cwd || ctx.sb.root.user().home)));
	}));
	server.route('GET', '/contexts', svc.gate('none', async (ctx) => {
		sendJson(ctx.res, 200, [...ctx.sb.contexts.values()].map(contextJson));
	}));
	const one = (fn) => svc.gate('none', async (ctx) => {
		const c = ctx.sb.contexts.get(ctx.params.cid);
		if (!c)
			throw new HttpError(404, `Context ${ctx.params.cid} not found`);
		await fn(ctx, c);
	});
	server.route('DELETE', '/contexts/:cid', one(async (ctx, c) => {
		if (c.kernel)
			c.kernel.kill();
		ctx.sb.contexts.delete(c.id);
		sendJson(ctx.res, 200, null);
	}));
	server.route('POST', '/contexts/:cid/restart', one(async (ctx, c) => {
		if (c.kernel)
			c.kernel.kill();
		c.kernel = null;
		sendJson(ctx.res, 200, null);
	}));
}

module.exports = { register, dropAll };
