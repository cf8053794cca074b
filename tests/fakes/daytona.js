#!/usr/bin/env node
'use strict';
/*
 * Fake Daytona: the control plane under /api and the toolbox (the daemon
 * behind the Daytona proxy) under /toolbox/{id}, on one HTTP port, speaking
 * ../../doc/protocols/daytona.md so that the official SDK works with
 * apiUrl = http://127.0.0.1:PORT/api.  Sandboxes are real overlay roots
 * (lib/sandbox-root.js) with the user `daytona` (home /home/daytona).  This
 * file holds the control plane and the proxy's gate; lib/daytona-*.js the
 * toolbox.
 *
 * Extra flag: --create-polls N  answer create with state "creating" and keep
 * it for N-1 more GETs (exercises the SDK's polling); default 0 = "started".
 * Stop freezes the sandbox's processes (SIGSTOP), start thaws them; toolbox
 * calls on a sandbox that is not started fail as the proxy makes them fail.
 * Autostop is enforced from the last toolbox activity; autoDeleteInterval 0
 * deletes on stop.
 */
const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const path = require('path');
const common = require('./lib/common');
const toolbox = require('./lib/daytona-toolbox');
const dproc = require('./lib/daytona-process');

const { HttpError, sendJson } = common;
const HOME = '/home/daytona';

/* The daemon's DaemonErrorCode for a status when the handler gave none. */
const STATUS_CODES = {
	400: 'BAD_REQUEST', 401: 'UNAUTHORIZED', 403: 'FORBIDDEN', 404: 'NOT_FOUND', 408: 'REQUEST_TIMEOUT',
	409: 'CONFLICT', 410: 'GONE', 422: 'UNPROCESSABLE_ENTITY', 429: 'TOO_MANY_REQUESTS', 500: 'INTERNAL_SERVER_ERROR',
	502: 'BAD_GATEWAY', 503: 'SERVICE_UNAVAILABLE',
};

class DaytonaFake extends common.FakeService {
	constructor(opts) {
		super('daytona', opts);
		this.every(1000, () => this.autostop());
	}

	/* NestJS AllExceptionsFilter body on /api; common-go ErrorResponse on the toolbox. */
	errorReply(ctx, status, message, extra) {
		const p = ctx.url.pathname;
		const timestamp = new Date().toISOString();
		if (!p.startsWith('/toolbox/')) {
			return sendJson(ctx.res, status, {
				path: p, timestamp, statusCode: status, error: http.STATUS_CODES[status] || 'Error', message,
			});
		}
		extra = extra || {};
		sendJson(ctx.res, status, {
			statusCode: status, message, code: extra.code || STATUS_CODES[status] || 'INTERNAL_SERVER_ERROR',
			timestamp, path: p.replace(/^\/toolbox\/[^/]+/, '') || '/', method: ctx.req.method,
			source: extra.source || 'DAYTONA_DAEMON',
		});
	}

	vanishReply(ctx) {
		const id = ctx.params.id || ctx.params.idOrName || '';
		if (ctx.url.pathname.startsWith('/toolbox/'))
			return this.errorReply(ctx, 404, `sandbox ${id} not found`, { code: 'SANDBOX_NOT_FOUND', source: 'DAYTONA_PROXY' });
		this.errorReply(ctx, 404, `Sandbox with ID or name ${id} not found`);
	}

	listSandboxes() {
		return [...this.sandboxes.values()].map((s) => ({
			id: s.id, name: s.name, state: s.state, root: s.root.rootDir, pids: s.root.pids(), cgroups: s.root.cgroups,
		}));
	}

	find(idOrName) {
		const sb = this.sandboxes.get(idOrName) || [...this.sandboxes.values()].find((s) => s.name === idOrName);
		if (!sb)
			throw new HttpError(404, `Sandbox with ID or name ${idOrName} not found`);
		return sb;
	}

	/* ---- lifecycle ---- */

	async create(b) {
		const id = crypto.randomUUID();
		const name = b.name || id;
		if ([...this.sandboxes.values()].some((s) => s.name === name))
			throw new HttpError(409, `Sandbox with name ${name} already exists`);
		if (b.snapshot && (b.cpu || b.memory || b.disk))
			throw new HttpError(400, 'Cannot specify Sandbox resources when using a snapshot');
		const now = new Date().toISOString();
		const polls = this.opts.createPolls;
		const disk = b.disk > 0 ? b.disk : Math.max(1, Math.round(this.opts.diskMb / 1024));
		const sb = {
			id, name, organizationId: 'fake-organization', snapshot: b.snapshot || (b.buildInfo ? undefined : 'daytonaio/sandbox:fake'),
			user: b.user || 'daytona', env: b.env || {}, labels: b.labels || {}, public: !!b.public,
			networkBlockAll: !!b.networkBlockAll, target: b.target || 'us',
			cpu: b.cpu || 1, gpu: b.gpu || 0, memory: b.memory || 1, disk,
			autoStopInterval: b.autoStopInterval !== undefined ? b.autoStopInterval : 15,
			autoArchiveInterval: b.autoArchiveInterval !== undefined ? b.autoArchiveInterval : 10080,
			autoDeleteInterval: b.autoDeleteInterval !== undefined ? b.autoDeleteInterval : -1,
			buildInfo: b.buildInfo, volumes: b.volumes || [],
			state: polls > 0 ? 'creating' : 'started', pendingPolls: polls > 0 ? polls - 1 : 0,
			createdAt: now, updatedAt: now, lastActivity: Date.now(),
			previewToken: crypto.randomBytes(12).toString('hex'), sessions: new Map(),
		};
		await this.addSandbox(sb, {
			diskMb: disk * 1024, userName: 'daytona', home: HOME, memoryMb: sb.memory * 1024, cpuMillis: sb.cpu * 1000,
		});
		/* As Daytona's images: the user may run anything as root (`sudo -n`), in the sandbox's own /etc only. */
		if (!fs.existsSync(path.join(sb.root.rootDir, 'etc/sudoers.d')))
			throw new Error('this machine has no sudo (/etc/sudoers.d): the fake sandbox lends its user sudo as Daytona does; scripts/install-deps installs it');
		fs.writeFileSync(path.join(sb.root.rootDir, 'etc/sudoers.d/91-daytona'), 'daytona ALL=(ALL) NOPASSWD:ALL\n', { mode: 0o440 });
		fs.appendFileSync(path.join(sb.root.rootDir, 'etc/shadow'), 'daytona:*:20000:0:99999:7:::\n'); /* PAM's account check */
		return sb;
	}

	setState(sb, state) {
		sb.state = state;
		sb.updatedAt = new Date().toISOString();
	}

	async stop(sb) {
		sb.root.freeze();
		this.setState(sb, 'stopped');
		if (sb.autoDeleteInterval === 0)
			await this.remove(sb);
	}

	start(sb) {
		sb.root.thaw();
		sb.lastActivity = Date.now();
		sb.previewToken = crypto.randomBytes(12).toString('hex');
		this.setState(sb, 'started');
	}

	async remove(sb) {
		this.sandboxes.delete(sb.id);
		this.setState(sb, 'destroying');
		dproc.dropAll(sb);
		await sb.root.destroy();
	}

	/* Admin "expire": autostop fires now. */
	async expire(id) {
		const sb = this.sandboxes.get(id);
		if (!sb)
			return false;
		if (sb.state === 'started')
			await this.stop(sb);
		return true;
	}

	async autostop() {
		const now = Date.now();
		for (const sb of [...this.sandboxes.values()]) {
			if (sb.state === 'started' && sb.autoStopInterval > 0 && now - sb.lastActivity > sb.autoStopInterval * 60000)
				await this.stop(sb);
		}
	}

	/* --public-url: the address clients reach this fake by (a delay proxy in front). */
	toolboxUrl() {
		const base = this.opts.publicUrl || `http://${this.opts.host}:${this.server.port}`;
		return `${base.replace(/\/$/, '')}/toolbox`;
	}

	dto(sb) {
		return {
			id: sb.id, organizationId: sb.organizationId, name: sb.name, snapshot: sb.snapshot, user: sb.user,
			env: sb.env, labels: sb.labels, public: sb.public, networkBlockAll: sb.networkBlockAll,
			target: sb.target, cpu: sb.cpu, gpu: sb.gpu, memory: sb.memory, disk: sb.disk,
			state: sb.state, desiredState: sb.state === 'stopped' ? 'stopped' : sb.state === 'destroying' ? 'destroyed' : 'started',
			errorReason: null, recoverable: false, backupState: 'None',
			autoStopInterval: sb.autoStopInterval, autoArchiveInterval: sb.autoArchiveInterval,
			autoDeleteInterval: sb.autoDeleteInterval, volumes: sb.volumes, buildInfo: sb.buildInfo,
			createdAt: sb.createdAt, updatedAt: sb.updatedAt, lastActivityAt: new Date(sb.lastActivity).toISOString(),
			sandboxClass: 'container', daemonVersion: dproc.DAEMON_VERSION, runnerId: 'fake-runner',
			toolboxProxyUrl: this.toolboxUrl(),
		};
	}

	/* ---- gates ---- */

	authorized(req) {
		return req.headers.authorization === `Bearer ${this.opts.apiKey}`;
	}

	/* Control plane: bearer key, then the sandbox named by :idOrName. */
	api(fn) {
		return async (ctx) => {
			if (!this.authorized(ctx.req))
				throw new HttpError(401, 'Invalid credentials');
			if (ctx.params.idOrName !== undefined)
				ctx.sb = this.find(ctx.params.idOrName);
			return fn(ctx);
		};
	}

	/* The proxy in front of the toolbox: key, known sandbox, started. */
	gate(fn) {
		return async (ctx) => {
			const sb = this.sandboxes.get(ctx.params.id);
			if (!this.authorized(ctx.req))
				throw new HttpError(401, 'Unauthorized', { source: 'DAYTONA_PROXY', code: 'UNAUTHORIZED' });
			if (!sb)
				return this.vanishReply(ctx);
			if (sb.state !== 'started') {
				throw new HttpError(400, 'sandbox is not running — start the sandbox before accessing it',
					{ code: 'SANDBOX_NOT_STARTED', source: 'DAYTONA_PROXY' });
			}
			sb.lastActivity = Date.now();
			ctx.sb = sb;
			return fn(ctx);
		};
	}

	routes() {
		const s = this.server;
		const A = '/api/sandbox';
		const reply = (status, fn) => this.api(async (ctx) => sendJson(ctx.res, status, await fn(ctx)));
		s.route('POST', A, reply(200, async (ctx) => this.dto(await this.create(await ctx.json()))));
		s.route('GET', A, reply(200, (ctx) => this.list(ctx)));
		s.route('GET', `${A}/:idOrName`, reply(200, (ctx) => {
			const sb = ctx.sb;
			if (sb.state === 'creating' && sb.pendingPolls-- <= 0)
				this.setState(sb, 'started');
			return this.dto(sb);
		}));
		s.route('POST', `${A}/:idOrName/start`, reply(200, (ctx) => {
			if (['started', 'creating'].includes(ctx.sb.state))
				return this.dto(ctx.sb);
			this.start(ctx.sb);
			return this.dto(ctx.sb);
		}));
		s.route('POST', `${A}/:idOrName/stop`, reply(200, async (ctx) => {
			if (ctx.sb.state !== 'started')
				throw new HttpError(400, 'Sandbox is not in a stoppable state');
			await this.stop(ctx.sb);
			return this.dto(ctx.sb);
		}));
		s.route('POST', `${A}/:idOrName/archive`, reply(200, (ctx) => {
			if (ctx.sb.state !== 'stopped')
				throw new HttpError(400, 'Sandbox is not stopped');
			this.setState(ctx.sb, 'archived');
			return this.dto(ctx.sb);
		}));
		s.route('DELETE', `${A}/:idOrName`, reply(200, async (ctx) => {
			await this.remove(ctx.sb);
			return this.dto(ctx.sb);
		}));
		for (const what of ['autostop', 'autoarchive', 'autodelete']) {
			const field = { autostop: 'autoStopInterval', autoarchive: 'autoArchiveInterval', autodelete: 'autoDeleteInterval' }[what];
			s.route('POST', `${A}/:idOrName/${what}/:minutes`, reply(201, (ctx) => {
				const m = Number(ctx.params.minutes);
				if (!Number.isInteger(m) || m < -1)
					throw new HttpError(400, `invalid interval: ${ctx.params.minutes}`);
				ctx.sb[field] = m;
				ctx.sb.lastActivity = Date.now();
				return this.dto(ctx.sb);
			}));
		}
		s.route('PUT', `${A}/:idOrName/labels`, reply(200, async (ctx) => {
			ctx.sb.labels = (await ctx.json()).labels || {};
			return { labels: ctx.sb.labels };
		}));
		s.route('POST', `${A}/:idOrName/public/:isPublic`, reply(201, (ctx) => {
			ctx.sb.public = ctx.params.isPublic === 'true';
			return this.dto(ctx.sb);
		}));
		s.route('GET', `${A}/:idOrName/ports/:port/preview-url`, reply(200, (ctx) => ({
			sandboxId: ctx.sb.id, url: this.previewUrl(ctx.params.port, ctx.sb.id), token: ctx.sb.previewToken,
		})));
		s.route('GET', `${A}/:idOrName/ports/:port/signed-preview-url`, reply(200, (ctx) => {
			const token = crypto.randomBytes(12).toString('hex');
			return { sandboxId: ctx.sb.id, port: Number(ctx.params.port), token, url: this.previewUrl(ctx.params.port, token) };
		}));
		s.route('GET', `${A}/:idOrName/toolbox-proxy-url`, reply(200, () => ({ url: this.toolboxUrl() })));
		toolbox.register(s, this);
		dproc.register(s, this);
	}

	previewUrl(port, host) {
		return `http://${port}-${host}.preview.localhost:${this.server.port}`;
	}

	/* GET /api/sandbox, the 0.218 cursor form: labels (JSON), states, limit, cursor (an offset). */
	list(ctx) {
		const q = ctx.query;
		let labels = {};
		try {
			labels = q.get('labels') ? JSON.parse(q.get('labels')) : {};
		} catch (e) {
			throw new HttpError(400, 'labels must be a JSON object');
		}
		const states = q.getAll('states').flatMap((x) => x.split(','));
		const all = [...this.sandboxes.values()]
			.filter((sb) => Object.entries(labels).every(([k, v]) => sb.labels[k] === v))
			.filter((sb) => !states.length || states.includes(sb.state))
			.filter((sb) => !q.get('name') || sb.name === q.get('name'))
			.filter((sb) => !q.get('id') || sb.id === q.get('id'));
		const start = Number(q.get('cursor') || 0);
		const limit = Number(q.get('limit') || 100);
		return {
			items: all.slice(start, start + limit).map((sb) => this.dto(sb)),
			nextCursor: start + limit < all.length ? String(start + limit) : null,
		};
	}
}

common.runMain('daytona', DaytonaFake, { createPolls: 0 }, ' [--create-polls N]');
