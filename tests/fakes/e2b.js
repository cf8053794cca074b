#!/usr/bin/env node
'use strict';
/*
 * Fake E2B: the control plane, envd (port 49983) and the code interpreter
 * (port 49999) on one HTTP port, speaking the wire protocol of
 * ../../doc/protocols/e2b.md so that the official SDK works against it
 * with apiUrl = sandboxUrl = http://127.0.0.1:PORT.  Data-plane requests are
 * routed by the E2b-Sandbox-Id / E2b-Sandbox-Port headers (or a Host of the
 * form PORT-ID.domain), as the edge proxy does.  Sandboxes are real
 * overlay roots (lib/sandbox-root.js); this file holds the control plane
 * and the proxy's gate, lib/e2b-*.js the data plane.
 *
 * Start it with tests/fakes/run-fake.sh e2b [flags]; README.md lists flags
 * and the admin API.
 */
const crypto = require('crypto');
const common = require('./lib/common');
const envd = require('./lib/e2b-envd');
const processRpc = require('./lib/e2b-process');
const interp = require('./lib/e2b-interp');

const { HttpError, sendJson, sendEmpty } = common;
const ENVD_VERSION = '0.6.13';
const DEFAULT_TIMEOUT_S = 300;
const MAX_TIMEOUT_S = 86400;
const DATA_PLANE = /^\/(health|files|execute|contexts)(\/|$)|^\/(filesystem\.Filesystem|process\.Process)\//;

class E2bFake extends common.FakeService {
	constructor(opts) {
		super('e2b', opts);
		this.every(250, () => this.expire());
	}

	/* Control plane and envd HTTP errors share {"code": status, "message"}; the interpreter answers plain text. */
	errorReply(ctx, status, message) {
		if (/^\/(execute|contexts)/.test(ctx.url.pathname)) {
			ctx.res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
			ctx.res.end(message);
			return;
		}
		sendJson(ctx.res, status, { code: status, message });
	}

	/* A vanished sandbox: the edge proxy's 502 on the data plane, the API's 404 on the control plane. */
	vanishReply(ctx) {
		const id = ctx.params.id || this.routedId(ctx.req) || '';
		if (!DATA_PLANE.test(ctx.url.pathname))
			return sendJson(ctx.res, 404, { code: 404, message: `sandbox "${id}" not found` });
		sendJson(ctx.res, 502, { sandboxId: id, message: 'The sandbox was not found', code: 502 },
			{ 'Content-Type': 'application/json; charset=utf-8' });
	}

	routedId(req) {
		if (req.headers['e2b-sandbox-id'])
			return String(req.headers['e2b-sandbox-id']);
		const m = /^(\d+)-([a-z0-9_]+)\./.exec(req.headers.host || '');
		return m ? m[2] : null;
	}

	routedPort(req) {
		if (req.headers['e2b-sandbox-port'])
			return Number(req.headers['e2b-sandbox-port']);
		const m = /^(\d+)-/.exec(req.headers.host || '');
		return m ? Number(m[1]) : 49983;
	}

	listSandboxes() {
		return [...this.sandboxes.values()].map((s) => ({
			id: s.id, state: s.state, templateID: s.templateID, root: s.root.rootDir,
			endAt: s.endAt.toISOString(), pids: s.root.pids(),
		}));
	}

	/* ---- lifecycle ---- */

	async createSandbox(body) {
		let id;
		do
			id = common.randomId(20);
		while (this.sandboxes.has(id));
		const timeout = Math.min(body.timeout > 0 ? body.timeout : DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S);
		const now = new Date();
		const sb = {
			id, templateID: body.templateID || 'base', alias: body.templateID || 'base',
			token: crypto.randomBytes(16).toString('hex'),
			envVars: body.envVars || {}, metadata: body.metadata || {},
			autoPause: !!body.autoPause, autoResume: !!(body.autoResume && body.autoResume.enabled),
			allowInternetAccess: body.allow_internet_access === undefined ? null : body.allow_internet_access,
			startedAt: now, endAt: new Date(now.getTime() + timeout * 1000), state: 'running',
			procs: new Map(), endedProcs: new Map(), contexts: new Map(), watchers: new Map(),
		};
		return this.addSandbox(sb, { diskMb: this.opts.diskMb, userName: 'user', home: '/home/user' });
	}

	pause(sb) {
		sb.state = 'paused';
		sb.root.freeze();
		envd.stopWatchers(sb);
		processRpc.dropAll(sb);
	}

	resume(sb, timeoutS) {
		sb.state = 'running';
		sb.root.thaw();
		sb.endAt = new Date(Date.now() + (timeoutS || DEFAULT_TIMEOUT_S) * 1000);
	}

	async remove(sb) {
		this.sandboxes.delete(sb.id);
		sb.state = 'killed';
		envd.stopWatchers(sb);
		processRpc.dropAll(sb);
		interp.dropAll(sb);
		await sb.root.destroy();
	}

	/* Admin "expire": the lifetime ends now; with no id, the periodic check. */
	async expire(id) {
		if (id !== undefined) {
			const sb = this.sandboxes.get(id);
			if (!sb)
				return false;
			sb.endAt = new Date(0);
		}
		const now = Date.now();
		for (const sb of [...this.sandboxes.values()]) {
			if (sb.state !== 'running' || sb.endAt.getTime() > now)
				continue;
			if (sb.autoPause)
				this.pause(sb);
			else
				await this.remove(sb);
		}
		return true;
	}

	/* ---- JSON shapes (e2b.md §1.5) ---- */

	sandboxJson(sb) {
		return {
			sandboxID: sb.id, templateID: sb.templateID, alias: sb.alias, clientID: '6532622b',
			envdVersion: ENVD_VERSION, envdAccessToken: sb.token, trafficAccessToken: null, domain: null,
		};
	}

	listedJson(sb) {
		return {
			sandboxID: sb.id, templateID: sb.templateID, alias: sb.alias, clientID: '6532622b',
			startedAt: sb.startedAt.toISOString(), endAt: sb.endAt.toISOString(), state: sb.state,
			cpuCount: 2, memoryMB: 512, diskSizeMB: this.opts.diskMb, envdVersion: ENVD_VERSION,
			metadata: sb.metadata,
		};
	}

	detailJson(sb) {
		return Object.assign(this.listedJson(sb), {
			envdAccessToken: sb.token, domain: null, allowInternetAccess: sb.allowInternetAccess,
			lifecycle: { onTimeout: sb.autoPause ? 'pause' : 'kill', autoResume: sb.autoResume },
		});
	}

	/* ---- gates ---- */

	/* Control-plane handler wrapper: X-API-KEY, then the sandbox from :id if the route has one. */
	api(fn) {
		return async (ctx) => {
			if (ctx.req.headers['x-api-key'] !== this.opts.apiKey)
				throw new HttpError(401, 'Invalid API key');
			if (ctx.params.id !== undefined) {
				ctx.sb = this.sandboxes.get(ctx.params.id);
				if (!ctx.sb)
					throw new HttpError(404, `sandbox "${ctx.params.id}" not found`);
			}
			return fn(ctx);
		};
	}

	/*
	 * Data-plane wrapper, as the edge proxy and envd's auth middleware do it:
	 * 502 for an unknown, killed or paused sandbox (auto-resume aside), then
	 * the access token.  auth: 'token' | 'files' (token or URL signature) | 'none'.
	 */
	gate(auth, fn) {
		return async (ctx) => {
			const sb = this.sandboxes.get(this.routedId(ctx.req));
			if (!sb)
				return this.vanishReply(ctx);
			if (sb.state === 'paused') {
				if (!sb.autoResume)
					return this.vanishReply(ctx);
				this.resume(sb);
			}
			ctx.sb = sb;
			const tok = ctx.req.headers['x-access-token'];
			const ok = auth === 'none' || tok === sb.token ||
				(auth === 'files' && tok === undefined && envd.signatureOk(ctx, sb));
			if (!ok) {
				return sendJson(ctx.res, 401, { code: 401, message: 'unauthorized access, please provide a valid access token or method signing if supported' },
					{ 'Content-Type': 'application/json; charset=utf-8' });
			}
			return fn(ctx);
		};
	}

	routes() {
		const s = this.server;
		s.route('POST', '/v2/sandboxes', this.api(async (ctx) => {
			const sb = await this.createSandbox(await ctx.json());
			sendJson(ctx.res, 201, this.sandboxJson(sb));
		}));
		s.route('POST', '/sandboxes', this.api(async (ctx) => {
			const sb = await this.createSandbox(Object.assign({ timeout: 15 }, await ctx.json()));
			sendJson(ctx.res, 201, this.sandboxJson(sb));
		}));
		const connect = this.api(async (ctx) => {
			const b = await ctx.json();
			const sb = ctx.sb;
			if (sb.state === 'paused') {
				this.resume(sb, b.timeout);
				return sendJson(ctx.res, 201, this.sandboxJson(sb));
			}
			const want = Date.now() + (b.timeout || DEFAULT_TIMEOUT_S) * 1000;
			if (want > sb.endAt.getTime())
				sb.endAt = new Date(want);
			sendJson(ctx.res, 200, this.sandboxJson(sb));
		});
		s.route('POST', '/v2/sandboxes/:id/connect', connect);
		s.route('POST', '/sandboxes/:id/connect', connect);
		s.route('POST', '/sandboxes/:id/resume', this.api(async (ctx) => {
			const b = await ctx.json();
			if (ctx.sb.state !== 'paused')
				throw new HttpError(409, `sandbox "${ctx.sb.id}" is already running`);
			if (b.autoPause !== undefined)
				ctx.sb.autoPause = !!b.autoPause;
			this.resume(ctx.sb, b.timeout);
			sendJson(ctx.res, 201, this.sandboxJson(ctx.sb));
		}));
		s.route('POST', '/sandboxes/:id/pause', this.api(async (ctx) => {
			if (ctx.sb.state === 'paused')
				throw new HttpError(409, `sandbox "${ctx.sb.id}" is already paused`);
			this.pause(ctx.sb);
			sendEmpty(ctx.res, 204);
		}));
		s.route('DELETE', '/sandboxes/:id', this.api(async (ctx) => {
			await this.remove(ctx.sb);
			sendEmpty(ctx.res, 204);
		}));
		s.route('POST', '/sandboxes/:id/timeout', this.api(async (ctx) => {
			const b = await ctx.json();
			if (!(b.timeout >= 0))
				throw new HttpError(400, 'timeout must be a non-negative number of seconds');
			ctx.sb.endAt = new Date(Date.now() + Math.min(b.timeout, MAX_TIMEOUT_S) * 1000);
			sendEmpty(ctx.res, 204);
		}));
		s.route('POST', '/sandboxes/:id/refreshes', this.api(async (ctx) => {
			const b = await ctx.json();
			ctx.sb.endAt = new Date(Date.now() + (b.duration || DEFAULT_TIMEOUT_S) * 1000);
			sendEmpty(ctx.res, 204);
		}));
		s.route('GET', '/sandboxes/:id', this.api(async (ctx) => sendJson(ctx.res, 200, this.detailJson(ctx.sb))));
		s.route('GET', '/v2/sandboxes', this.api(async (ctx) => this.list(ctx, null)));
		s.route('GET', '/sandboxes', this.api(async (ctx) => this.list(ctx, ['running'])));
		envd.register(s, this);
		processRpc.register(s, this);
		interp.register(s, this);
	}

	/* GET /v2/sandboxes: state and metadata filters, limit + X-Next-Token paging. */
	list(ctx, states) {
		const q = ctx.query;
		states = states || (q.get('state') ? q.get('state').split(',') : ['running', 'paused']);
		const meta = new URLSearchParams(q.get('metadata') || '');
		let all = [...this.sandboxes.values()]
			.filter((sb) => states.includes(sb.state))
			.filter((sb) => [...meta].every(([k, v]) => sb.metadata[k] === v))
			.sort((a, b) => a.startedAt - b.startedAt || (a.id < b.id ? -1 : 1));
		const start = Number(q.get('nextToken') || 0);
		const limit = Number(q.get('limit') || 100);
		const page = all.slice(start, start + limit);
		const headers = { 'X-Total-Running': String(all.filter((sb) => sb.state === 'running').length) };
		if (start + limit < all.length)
			headers['X-Next-Token'] = String(start + limit);
		sendJson(ctx.res, 200, page.map((sb) => this.listedJson(sb)), headers);
	}
}

common.runMain('e2b', E2bFake);
