'use strict';
/*
 * Shared machinery of the fake E2B and fake Daytona servers: command-line
 * options, the HTTP/1.1 server and its router, per-endpoint counters, the
 * fault and latency switches, the admin API, the sandbox table (FakeService)
 * and clean shutdown.  It knows nothing of either service's wire format:
 * each fake passes in how to write its own error bodies and what "the
 * sandbox vanished" looks like.
 *
 * Admin API (never counted, never faulted, needs no key):
 *   GET    /_fake/health                -> {"ok":true,"name":"e2b"}
 *   GET    /_fake/counters              -> {"POST /v2/sandboxes":1, ...}
 *   DELETE /_fake/counters              -> 204 (also POST /_fake/counters/reset; zeroes connections too)
 *   GET    /_fake/connections           -> {"connections":N}: TCP connections accepted since the
 *                                          last reset (curl's to this API included)
 *   GET    /_fake/faults                -> {"latencyMs":0,"faults":[...]}
 *   POST   /_fake/faults                <- {"latencyMs"?:N, "faults"?:[FAULT...], "replace"?:bool}
 *                                          appends (or replaces) and answers the new state
 *   DELETE /_fake/faults                -> 204, no faults and no latency
 *   POST   /_fake/reset                 <- {"sandboxes"?:bool} clears faults, latency and
 *                                          counters; with sandboxes:true also kills them all
 *   GET    /_fake/sandboxes             -> [{"id","state",...}]
 *   POST   /_fake/sandboxes/<id>/vanish -> 204 (404 if unknown): the sandbox is deleted
 *                                          behind the client's back
 *   POST   /_fake/sandboxes/<id>/expire -> 204: its lifetime runs out now (E2B)
 *   POST   /_fake/apikey                <- {"apiKey": "K"}: from now on only K is accepted
 *                                          (the old key revoked, as a rotation does)
 *
 * FAULT = {"kind": "drop"|"5xx"|"429"|"slow"|"vanish"|"cut"|"inject",
 *          "count"?: N         apply to the next N matching requests (default: until cleared)
 *          "prefix"?: "/files" only requests whose path starts with this
 *          "key"?: "GET /files" only requests whose counter key is exactly this
 *          "method"?: "POST"
 *          "range"?: false     only requests without (false) or with (true) a Range header
 *          "status"?: 500|503  for 5xx (default 500)
 *          "retryAfter"?: 1    for 429: the Retry-After header in seconds (default 1)
 *          "delayMs"?: 5000    for slow: wait this long, then answer normally (default 30000)
 *          "complete"?: true   for slow: carry the request out even if the client hung up
 *          "cutAfter"?: N      for cut: answer, but hang up after N bytes of the body
 *          "append"?: {K: [..]} for inject: arrays added to the JSON reply's arrays K
 *                              (K "": to a reply that is an array)
 *          "set"?: {K: V}      for inject: values that replace the JSON reply's K}
 * The first matching fault wins.  Start-up flags --latency-ms N and --fault JSON (repeatable)
 * set the same switches.
 *
 * Counter keys are "METHOD /normalised/path": the route pattern that matched, with
 * parameters left as ":name" (e.g. "POST /sandboxes/:id/pause"); an unrouted request
 * counts under its raw path.
 */
const http = require('http');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { SandboxRoot } = require('./sandbox-root');

/*
 * The inject fault: a JSON reply is changed before it goes out, as a hostile
 * server (envd runs inside the sandbox, whose code can replace it) would
 * answer: each array of `append` is added to the reply's array of that name
 * (name "": to a reply that is an array), each value of `set` replaces the reply's.
 */
function injectJson(res, append, set) {
	const writeHead = res.writeHead.bind(res);
	const end = res.end.bind(res);
	let head = null;
	res.writeHead = (status, headers) => {
		head = [status, Object.assign({}, headers)];
		return res;
	};
	res.end = (chunk, enc, cb) => {
		let body = chunk;
		try {
			let obj = JSON.parse(Buffer.isBuffer(chunk) ? chunk.toString() : chunk);
			for (const [k, v] of Object.entries(append)) {
				if (k === '' && Array.isArray(obj))
					obj = obj.concat(v); /* a reply that is a bare array */
				else
					obj[k] = (Array.isArray(obj[k]) ? obj[k] : []).concat(v);
			}
			Object.assign(obj, set);
			body = JSON.stringify(obj);
		} catch (e) {
			/* not JSON: as it was */
		}
		if (head) {
			for (const k of Object.keys(head[1]))
				if (k.toLowerCase() === 'content-length')
					head[1][k] = Buffer.byteLength(body);
			writeHead(head[0], head[1]);
		}
		return end(body, enc, cb);
	};
}

/* The cut fault: the reply goes out as usual until `left` bytes of its body, then the connection drops. */
function cutAfter(req, res, left) {
	const write = res.write.bind(res);
	const end = res.end.bind(res);
	const hangUp = () => setImmediate(() => req.socket.destroy());
	res.write = (chunk, enc, cb) => {
		if (typeof enc === 'function')
			[cb, enc] = [enc, undefined];
		const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk, enc);
		if (left <= 0) {
			hangUp();
			return false;
		}
		if (b.length < left) {
			left -= b.length;
			return write(b, cb);
		}
		write(b.subarray(0, left));
		left = 0;
		hangUp();
		return false;
	};
	res.end = (chunk, enc, cb) => {
		if (chunk && typeof chunk !== 'function')
			res.write(chunk, enc);
		if (left > 0)
			return end(typeof chunk === 'function' ? chunk : cb);
		hangUp();
		return res;
	};
}

class HttpError extends Error {
	constructor(status, message, extra) {
		super(message);
		this.status = status;
		this.extra = extra || {};
	}
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function parseArgs(argv, defaults) {
	const opts = Object.assign({
		host: '127.0.0.1', port: 0, portFile: null, dataDir: null,
		apiKey: 'test-key', latencyMs: 0, faults: [], diskMb: 1024, publicUrl: '',
	}, defaults);
	const camel = (s) => s.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
	for (let i = 0; i < argv.length; i++) {
		const a = argv[i];
		if (a === '-h' || a === '--help') {
			opts.help = true;
			continue;
		}
		const m = /^--([a-z-]+)(?:=(.*))?$/.exec(a);
		if (!m)
			throw new Error(`unknown argument: ${a}`);
		const key = camel(m[1]);
		const val = m[2] !== undefined ? m[2] : argv[++i];
		if (val === undefined)
			throw new Error(`--${m[1]} needs a value`);
		if (key === 'fault')
			opts.faults.push(JSON.parse(val));
		else if (!(key in opts))
			throw new Error(`unknown option --${m[1]}`);
		else
			opts[key] = typeof opts[key] === 'number' ? Number(val) : val;
	}
	return opts;
}

/*
 * Every mount a fake makes must die with it, which only holds inside a
 * mount namespace of its own.  pid 1's namespace may be unreadable in a
 * container, so the parent's (the caller of unshare) is the fallback.
 */
function requirePrivateMountNs() {
	const self = fs.readlinkSync('/proc/self/ns/mnt');
	let other = null;
	for (const pid of ['1', String(process.ppid)]) {
		try {
			other = fs.readlinkSync(`/proc/${pid}/ns/mnt`);
			break;
		} catch (e) { /* not ours to read: try the next */ }
	}
	if (other === null || other === self) {
		process.stderr.write('fake: refusing to start outside a private mount namespace ' +
			'(it mounts overlays); start it with tests/fakes/run-fake.sh, or ' +
			'`unshare -m --propagation private node ...`\n');
		process.exit(2);
	}
}

function compileRoute(method, pattern) {
	const names = [];
	const re = pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/:(\w+)(\*?)/g, (_, n, star) => {
		names.push(n);
		return star ? '(.*)' : '([^/]+)';
	});
	return { method, pattern, names, re: new RegExp(`^${re}/?$`), key: `${method} ${pattern}` };
}

function readBody(req, limit = 1 << 30) {
	return new Promise((resolve, reject) => {
		const chunks = [];
		let n = 0;
		req.on('data', (c) => {
			n += c.length;
			if (n > limit) {
				reject(new HttpError(413, 'request body too large'));
				req.destroy();
				return;
			}
			chunks.push(c);
		});
		req.on('end', () => resolve(Buffer.concat(chunks)));
		req.on('error', reject);
	});
}

/*
 * A header value as the services' Go servers write it: the name's bytes
 * as they are (Node would refuse characters past U+00FF), CR and LF as
 * spaces (net/http's headerNewlineToSpace).
 */
function headerValue(s) {
	return Buffer.from(s.replace(/[\r\n]/g, ' '), 'utf8').toString('latin1');
}

function sendJson(res, status, obj, headers) {
	const body = obj === undefined ? '' : JSON.stringify(obj);
	res.writeHead(status, Object.assign({
		'Content-Type': 'application/json',
		'Content-Length': Buffer.byteLength(body),
	}, headers || {}));
	res.end(body);
}

function sendEmpty(res, status, headers) {
	res.writeHead(status, Object.assign({ 'Content-Length': 0 }, headers || {}));
	res.end();
}

/*
 * service = {
 *   name, opts,
 *   errorReply(ctx, status, message, extra)   writes the service's error body
 *   vanishReply(ctx)                          what a vanished sandbox looks like
 *   listSandboxes(), vanish(id) -> bool, expire?(id) -> bool,
 *   shutdown() -> Promise                     kill and unmount every sandbox
 *   resetSandboxes() -> Promise
 * }
 */
class FakeServer {
	constructor(service) {
		this.service = service;
		this.opts = service.opts;
		this.routes = [];
		this.counters = Object.create(null);
		this.latencyMs = this.opts.latencyMs || 0;
		this.faults = (this.opts.faults || []).slice();
		this.server = http.createServer((req, res) => this.dispatch(req, res));
		this.server.keepAliveTimeout = 60000;
		this.server.headersTimeout = 65000;
		this.server.requestTimeout = 0;
		/* TCP connections accepted (the admin API's own included), apart from the request counters. */
		this.connections = 0;
		this.server.on('connection', () => this.connections++);
	}

	route(method, pattern, handler) {
		this.routes.push(Object.assign(compileRoute(method, pattern), { handler }));
	}

	match(method, pathname) {
		for (const r of this.routes) {
			if (r.method !== method && !(r.method === 'GET' && method === 'HEAD'))
				continue;
			const m = r.re.exec(pathname);
			if (!m)
				continue;
			const params = {};
			r.names.forEach((n, i) => { params[n] = decodeURIComponent(m[i + 1]); });
			return { route: r, params };
		}
		return null;
	}

	takeFault(req, pathname, key) {
		for (let i = 0; i < this.faults.length; i++) {
			const f = this.faults[i];
			if (f.prefix && !pathname.startsWith(f.prefix))
				continue;
			if (f.key && f.key !== key)
				continue;
			if (f.method && f.method.toUpperCase() !== req.method)
				continue;
			if (typeof f.range === 'boolean' && f.range !== !!req.headers.range)
				continue;
			if (typeof f.count === 'number') {
				f.count--;
				if (f.count <= 0)
					this.faults.splice(i, 1);
			}
			return f;
		}
		return null;
	}

	async dispatch(req, res) {
		const url = new URL(req.url, 'http://fake');
		const ctx = {
			req, res, url, query: url.searchParams, params: {}, server: this,
			body: () => (ctx._body = ctx._body || readBody(req)),
			json: async () => {
				const b = await ctx.body();
				if (!b.length)
					return {};
				try {
					return JSON.parse(b.toString('utf8'));
				} catch (e) {
					throw new HttpError(400, `invalid JSON body: ${e.message}`);
				}
			},
		};
		try {
			if (url.pathname.startsWith('/_fake/'))
				return await this.admin(ctx);
			const m = this.match(req.method, url.pathname);
			ctx.key = m ? m.route.key : `${req.method} ${url.pathname}`;
			this.counters[ctx.key] = (this.counters[ctx.key] || 0) + 1;
			if (process.env.FAKE_TRACE) { // a line per request, for reading a workload's requests
				const t0 = Date.now();
				res.on('close', () => fs.appendFileSync(process.env.FAKE_TRACE,
					`${t0} ${Date.now() - t0} ${req.method} ${url.pathname}${url.search}\n`));
			}
			if (m)
				ctx.params = m.params;
			if (this.latencyMs > 0)
				await sleep(this.latencyMs);
			const fault = this.takeFault(req, url.pathname, ctx.key);
			if (fault && await this.applyFault(ctx, fault))
				return;
			if (!m)
				throw new HttpError(404, `no route for ${req.method} ${url.pathname}`);
			await m.route.handler(ctx);
		} catch (e) {
			this.fail(ctx, e);
		}
	}

	/* Returns true when the fault answered (or dropped) the request. */
	async applyFault(ctx, f) {
		const { req, res } = ctx;
		switch (f.kind) {
		case 'drop':
			req.socket.destroy();
			return true;
		case '5xx':
			this.service.errorReply(ctx, f.status || 500, 'injected fault');
			return true;
		case '429':
			res.setHeader('Retry-After', String(f.retryAfter !== undefined ? f.retryAfter : 1));
			this.service.errorReply(ctx, 429, 'rate limit exceeded (injected fault)');
			return true;
		case 'slow':
			/* complete: the work is done even if the client hung up (an answer that came too late) */
			if (f.complete)
				ctx.body().catch(() => {});
			await sleep(f.delayMs !== undefined ? f.delayMs : 30000);
			return f.complete ? false : req.socket.destroyed;
		case 'vanish':
			this.service.vanishReply(ctx);
			return true;
		case 'cut':
			cutAfter(req, res, f.cutAfter || 0);
			return false;
		case 'inject':
			injectJson(res, f.append || {}, f.set || {});
			return false;
		default:
			throw new HttpError(500, `unknown fault kind ${f.kind}`);
		}
	}

	fail(ctx, e) {
		const { res } = ctx;
		if (!(e instanceof HttpError)) {
			process.stderr.write(`${this.service.name}: ${ctx.req.method} ${ctx.req.url}: ${e.stack}\n`);
			e = new HttpError(500, e.message);
		}
		if (res.headersSent) {
			res.destroy();
			return;
		}
		if (ctx.url.pathname.startsWith('/_fake/'))
			sendJson(res, e.status, { error: e.message });
		else
			this.service.errorReply(ctx, e.status, e.message, e.extra);
	}

	async admin(ctx) {
		const { req, res } = ctx;
		const p = ctx.url.pathname;
		const m = /^\/_fake\/sandboxes\/([^/]+)\/(vanish|expire)$/.exec(p);
		if (req.method === 'GET' && p === '/_fake/health')
			return sendJson(res, 200, { ok: true, name: this.service.name });
		if (req.method === 'GET' && p === '/_fake/counters')
			return sendJson(res, 200, this.counters);
		if (req.method === 'GET' && p === '/_fake/connections')
			return sendJson(res, 200, { connections: this.connections });
		if ((req.method === 'DELETE' && p === '/_fake/counters') ||
		    (req.method === 'POST' && p === '/_fake/counters/reset')) {
			this.counters = Object.create(null);
			this.connections = 0;
			return sendEmpty(res, 204);
		}
		if (p === '/_fake/faults') {
			if (req.method === 'POST') {
				const b = await ctx.json();
				if (b.replace)
					this.faults = [];
				if (typeof b.latencyMs === 'number')
					this.latencyMs = b.latencyMs;
				for (const f of b.faults || []) {
					if (!['drop', '5xx', '429', 'slow', 'vanish', 'cut', 'inject'].includes(f.kind))
						throw new HttpError(400, `unknown fault kind ${f.kind}`);
					this.faults.push(Object.assign({}, f));
				}
			} else if (req.method === 'DELETE') {
				this.faults = [];
				this.latencyMs = 0;
				return sendEmpty(res, 204);
			}
			return sendJson(res, 200, { latencyMs: this.latencyMs, faults: this.faults });
		}
		if (req.method === 'POST' && p === '/_fake/reset') {
			const b = await ctx.json();
			this.faults = [];
			this.latencyMs = 0;
			this.counters = Object.create(null);
			if (b.sandboxes)
				await this.service.resetSandboxes();
			return sendEmpty(res, 204);
		}
		if (req.method === 'POST' && p === '/_fake/apikey') {
			const b = await ctx.json();
			if (typeof b.apiKey !== 'string' || !b.apiKey)
				throw new HttpError(400, 'apiKey must be a non-empty string');
			this.opts.apiKey = b.apiKey;
			return sendEmpty(res, 204);
		}
		if (req.method === 'GET' && p === '/_fake/sandboxes')
			return sendJson(res, 200, this.service.listSandboxes());
		if (req.method === 'POST' && m) {
			const fn = m[2] === 'vanish' ? this.service.vanish : this.service.expire;
			const ok = fn ? await fn.call(this.service, decodeURIComponent(m[1])) : false;
			return sendEmpty(res, ok ? 204 : 404);
		}
		throw new HttpError(404, `no admin route ${req.method} ${p}`);
	}

	/* Listens, announces the port, and installs the signal handlers. */
	listen() {
		return new Promise((resolve, reject) => {
			this.server.once('error', reject);
			this.server.listen(this.opts.port, this.opts.host, () => {
				const port = this.server.address().port;
				this.port = port;
				process.stdout.write(`LISTENING ${port}\n`);
				if (this.opts.portFile)
					fs.writeFileSync(this.opts.portFile, `${port}\n`);
				for (const sig of ['SIGTERM', 'SIGINT'])
					process.on(sig, () => this.shutdown(0));
				process.on('uncaughtException', (e) => {
					process.stderr.write(`${this.service.name}: uncaught: ${e.stack}\n`);
					this.shutdown(1);
				});
				resolve(port);
			});
		});
	}

	async shutdown(code) {
		if (this.stopping)
			return;
		this.stopping = true;
		this.server.close();
		this.server.closeAllConnections && this.server.closeAllConnections();
		try {
			await this.service.shutdown();
		} catch (e) {
			process.stderr.write(`${this.service.name}: shutdown: ${e.stack}\n`);
			code = code || 1;
		}
		process.exit(code);
	}
}

/* The data directory: the given one, or a fresh temporary one removed at exit. */
function makeDataDir(opts, name) {
	if (opts.dataDir) {
		fs.mkdirSync(opts.dataDir, { recursive: true });
		return { dir: path.resolve(opts.dataDir), owned: false };
	}
	return { dir: fs.mkdtempSync(path.join(os.tmpdir(), `sbxfs-fake-${name}-`)), owned: true };
}

function randomId(n, alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789') {
	const bytes = require('crypto').randomBytes(n);
	let s = '';
	for (let i = 0; i < n; i++)
		s += alphabet[bytes[i] % alphabet.length];
	return s;
}

/*
 * What both fakes' services share: the sandbox table, the data directory,
 * the server, and the ways a sandbox ends.  A subclass provides remove(sb)
 * (kill and forget one sandbox) plus the FakeServer hooks (errorReply,
 * vanishReply, listSandboxes).
 */
class FakeService {
	constructor(name, opts) {
		this.name = name;
		this.opts = opts;
		this.sandboxes = new Map();
		this.timers = [];
		this.data = makeDataDir(opts, name);
		this.server = new FakeServer(this);
	}

	every(ms, fn) {
		this.timers.push(setInterval(fn, ms));
	}

	/* Registers sb and builds its root filesystem; on failure nothing is left behind. */
	async addSandbox(sb, rootOpts) {
		sb.root = new SandboxRoot(Object.assign({ dataDir: this.data.dir, id: sb.id }, rootOpts));
		this.sandboxes.set(sb.id, sb);
		try {
			sb.root.create();
		} catch (e) {
			this.sandboxes.delete(sb.id);
			await sb.root.destroy();
			throw e;
		}
		return sb;
	}

	async vanish(id) {
		const sb = this.sandboxes.get(id);
		if (!sb)
			return false;
		await this.remove(sb);
		return true;
	}

	async resetSandboxes() {
		for (const sb of [...this.sandboxes.values()])
			await this.remove(sb);
	}

	async shutdown() {
		this.timers.forEach(clearInterval);
		await this.resetSandboxes();
		if (this.data.owned)
			fs.rmSync(this.data.dir, { recursive: true, force: true });
	}
}

/* The body of e2b.js / daytona.js: options, the namespace check, routes, listen. */
function runMain(name, Service, defaults, extraUsage) {
	(async () => {
		const opts = parseArgs(process.argv.slice(2), defaults);
		if (opts.help) {
			process.stdout.write(usage(name, extraUsage));
			return;
		}
		requirePrivateMountNs();
		const svc = new Service(opts);
		svc.routes();
		await svc.server.listen();
	})().catch((e) => {
		process.stderr.write(`${name} fake: ${e.stack || e}\n`);
		process.exit(1);
	});
}

function usage(name, extra) {
	return `usage: tests/fakes/run-fake.sh ${name} [--port N] [--host ADDR] [--port-file FILE]
       [--data-dir DIR] [--api-key KEY] [--disk-mb N] [--latency-ms N] [--fault JSON]...
       [--public-url URL]${extra || ''}
Prints "LISTENING <port>" as its first line.  See tests/fakes/README.md.
`;
}

module.exports = {
	HttpError, FakeServer, FakeService, runMain, parseArgs, requirePrivateMountNs, readBody,
	sendJson, sendEmpty, sleep, randomId, headerValue,
};
