'use strict';
/*
 * Fake Daytona toolbox, process half (daytona.md §2.4–2.5): execute (the
 * command text piped to bash's stdin, stdout and stderr combined, 408 and
 * a SIGKILL of the process group on timeout), code-run with the daemon's
 * wrappers (matplotlib charts as dtn_artifact_k39fd2 lines, stripped into
 * artifacts.charts), and sessions: one long-lived bash per session whose
 * commands write their streams and exit code to files inside the sandbox.
 */
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const readline = require('readline');
const { HttpError, sendJson, sendEmpty } = require('./common');
const { mkdirsAs } = require('./fsinfo');
const { tsToJs } = require('../../../providers/kernel/tsstrip');

const DAEMON_VERSION = '0.218.0';
const ARTIFACT = 'dtn_artifact_k39fd2:';
const CHARTS_PY = fs.readFileSync(path.join(__dirname, 'dtn_charts.py'), 'utf8');
const MATPLOTLIB = [/^[^#\n]*import\s+matplotlib/m, /^[^#\n]*from\s+matplotlib/m, /__import__\(\s*['"]matplotlib['"]/];
const SESSION_DIR = '/tmp/.daytona/sessions';

const q = (s) => `'${String(s).replace(/'/g, "'\\''")}'`;
const b64 = (s) => Buffer.from(s).toString('base64');

function checkEnvs(envs) {
	for (const k of Object.keys(envs || {})) {
		if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k))
			throw new HttpError(400, `invalid environment variable name: ${k}`, { code: 'BAD_REQUEST' });
	}
}

function cwdOf(sb, cwd) {
	const home = sb.root.user().home;
	return cwd ? path.posix.normalize(cwd.startsWith('/') ? cwd : path.posix.join(home, cwd)) : home;
}

function isDir(sb, p) {
	try {
		return fs.statSync(sb.root.resolve(p).host).isDirectory();
	} catch (e) {
		return false;
	}
}

/*
 * Runs script through `bash` reading stdin, as the sandbox user, stdout and
 * stderr interleaved in one pipe (Go's CombinedOutput).  Resolves
 * {exitCode, output}; rejects with the 408 HttpError when timeoutS passes.
 */
function runShell(sb, script, { cwd, envs, timeoutS }) {
	const u = sb.root.user();
	const dir = cwdOf(sb, cwd);
	if (!isDir(sb, dir))
		return Promise.resolve({ exitCode: -1, output: `chdir ${dir}: no such file or directory` });
	const child = sb.root.spawn(['/bin/sh', '-c', 'exec /bin/bash 2>&1'], {
		u, cwd: dir, env: sb.root.baseEnv(u, Object.assign({}, sb.env, envs || {})), stdio: ['pipe', 'pipe', 'ignore'],
	});
	return new Promise((resolve, reject) => {
		const out = [];
		let timedOut = false;
		let timer = null;
		if (timeoutS > 0) {
			timer = setTimeout(() => {
				timedOut = true;
				try {
					process.kill(-child.pid, 'SIGKILL');
				} catch (e) { /* gone */ }
			}, timeoutS * 1000);
		}
		child.stdout.on('data', (c) => out.push(c));
		child.stdin.on('error', () => {});
		child.on('close', (code, sig) => {
			clearTimeout(timer);
			if (timedOut)
				return reject(new HttpError(408, 'request timeout: command execution timeout', { code: 'REQUEST_TIMEOUT' }));
			resolve({ exitCode: sig ? -1 : code, output: Buffer.concat(out).toString('utf8') });
		});
		child.stdin.end(script.endsWith('\n') ? script : `${script}\n`);
	});
}

async function execute(ctx) {
	const b = await ctx.json();
	if (!b.command || !String(b.command).trim())
		throw new HttpError(400, 'command is required', { code: 'BAD_REQUEST' });
	checkEnvs(b.envs);
	const r = await runShell(ctx.sb, String(b.command), { cwd: b.cwd, envs: b.envs, timeoutS: Number(b.timeout) || 0 });
	sendJson(ctx.res, 200, { exitCode: r.exitCode, result: r.output });
}

/* The daemon's per-language wrappers; TypeScript is transpiled here, since ts-node cannot be fetched offline. */
function codeScript(language, code, argv) {
	const args = (argv || []).map(q).join(' ');
	switch (language) {
	case 'python': {
		let src = code;
		if (MATPLOTLIB.some((re) => re.test(code))) {
			src = `${CHARTS_PY}\nimport base64 as _b\nexec(compile(_b.b64decode(${JSON.stringify(b64(code))}).decode(), "<stdin>", "exec"), {"__name__": "__main__"})\n`;
		}
		return `printf '%s' '${b64(src)}' | base64 -d | python3 -u - ${args}`;
	}
	case 'typescript':
		code = tsToJs(code);
		/* falls through */
	case 'javascript':
		return `printf '%s' '${b64(`process.argv.splice(1, 1);\n${code}`)}' | base64 -d | node - ${args}`;
	default:
		throw new HttpError(400, `unsupported language: ${language}`, { code: 'BAD_REQUEST' });
	}
}

/* Splits dtn_artifact lines out of the output. */
function parseArtifacts(output) {
	const charts = [];
	const kept = output.split('\n').filter((line) => {
		if (!line.startsWith(ARTIFACT))
			return true;
		try {
			const a = JSON.parse(line.slice(ARTIFACT.length));
			if (a.type === 'chart' && a.value)
				charts.push(a.value);
		} catch (e) { /* a malformed line is dropped like a good one */ }
		return false;
	});
	return { result: kept.join('\n'), charts };
}

async function codeRun(ctx) {
	const b = await ctx.json();
	checkEnvs(b.envs);
	const script = codeScript(b.language || 'python', String(b.code || ''), b.argv);
	const r = await runShell(ctx.sb, script, { envs: b.envs, timeoutS: Number(b.timeout) || 0 });
	const { result, charts } = parseArtifacts(r.output);
	const body = { exitCode: r.exitCode, result };
	if (charts.length)
		body.artifacts = { charts };
	sendJson(ctx.res, 200, body);
}

/* ---- sessions ---- */

function sdkAtLeast(req, want) {
	const v = String(req.headers['x-daytona-sdk-version'] || '').replace(/^v/, '').split('.').map(Number);
	if (v.length < 2 || v.some(isNaN))
		return false;
	const w = want.split('.').map(Number);
	for (let i = 0; i < 3; i++) {
		if ((v[i] || 0) !== w[i])
			return (v[i] || 0) > w[i];
	}
	return true;
}

function newSession(sb, id) {
	const u = sb.root.user();
	const child = sb.root.spawn(['/bin/bash'], {
		u, cwd: u.home, env: sb.root.baseEnv(u, sb.env), stdio: ['pipe', 'pipe', 'ignore'],
	});
	const s = { id, child, commands: new Map(), waiters: new Map(), ended: false };
	child.stdin.on('error', () => {});
	readline.createInterface({ input: child.stdout }).on('line', (line) => {
		const m = /^__DTN_DONE__ (\S+)$/.exec(line);
		if (m)
			finishCommand(sb, s, m[1]);
	});
	child.on('exit', () => {
		s.ended = true;
		for (const id2 of [...s.waiters.keys()])
			finishCommand(sb, s, id2);
	});
	return s;
}

function readLog(sb, file) {
	try {
		return fs.readFileSync(sb.root.resolve(file).host, 'utf8');
	} catch (e) {
		return '';
	}
}

function finishCommand(sb, s, cmdId) {
	const c = s.commands.get(cmdId);
	if (!c)
		return;
	const code = readLog(sb, `${c.dir}/exit_code`).trim();
	c.exitCode = code === '' ? -1 : Number(code);
	const w = s.waiters.get(cmdId);
	s.waiters.delete(cmdId);
	if (w)
		w();
}

/* {output, stdout, stderr}; output is the raw log, each stream's text behind its marker bytes. */
function logsOf(sb, c) {
	const stdout = readLog(sb, `${c.dir}/stdout`);
	const stderr = readLog(sb, `${c.dir}/stderr`);
	const output = (stdout ? `\x01\x01\x01${stdout}` : '') + (stderr ? `\x02\x02\x02${stderr}` : '');
	return { output, stdout, stderr };
}

function session(ctx) {
	const s = (ctx.sb.sessions || new Map()).get(ctx.params.sid);
	if (!s)
		throw new HttpError(404, `session ${ctx.params.sid} not found`, { code: 'NOT_FOUND' });
	return s;
}

function commandOf(ctx, s) {
	const c = s.commands.get(ctx.params.cmd);
	if (!c)
		throw new HttpError(404, `command ${ctx.params.cmd} not found`, { code: 'PROCESS_NOT_FOUND' });
	return c;
}

const commandJson = (c) => (c.exitCode === undefined ? { id: c.id, command: c.command } : { id: c.id, command: c.command, exitCode: c.exitCode });

async function sessionExec(ctx) {
	const sb = ctx.sb;
	const s = session(ctx);
	const b = await ctx.json();
	if (!b.command)
		throw new HttpError(400, 'command is required', { code: 'BAD_REQUEST' });
	if (s.ended)
		throw new HttpError(410, `session ${s.id} has ended`, { code: 'SESSION_ENDED' });
	const id = crypto.randomUUID();
	const dir = `${SESSION_DIR}/${s.id}/${id}`;
	const u = sb.root.user();
	mkdirsAs(sb.root.resolve(dir).host, u);
	const c = { id, command: b.command, dir };
	s.commands.set(id, c);
	const done = new Promise((resolve) => s.waiters.set(id, resolve));
	/* Separate lines, so that a syntax error in the command cannot swallow the end marker. */
	s.child.stdin.write(`{ ${b.command}\n} > ${q(dir + '/stdout')} 2> ${q(dir + '/stderr')} < /dev/null\n` +
		`echo $? > ${q(dir + '/exit_code')}\necho "__DTN_DONE__ ${id}"\n`);
	if (b.runAsync || b.async)
		return sendJson(ctx.res, 202, { cmdId: id });
	await done;
	const logs = logsOf(sb, c);
	const body = sdkAtLeast(ctx.req, '0.167.0') ? Object.assign({ cmdId: id }, logs, { exitCode: c.exitCode })
		: { cmdId: id, output: logs.stdout + logs.stderr, exitCode: c.exitCode };
	sendJson(ctx.res, 200, body);
}

function dropAll(sb) {
	for (const s of (sb.sessions || new Map()).values()) {
		try {
			process.kill(-s.child.pid, 'SIGKILL');
		} catch (e) { /* gone */ }
	}
	sb.sessions = new Map();
}

function register(server, svc) {
	const T = '/toolbox/:id';
	const r = (method, p, fn) => server.route(method, T + p, svc.gate(fn));
	r('GET', '/version', (ctx) => sendJson(ctx.res, 200, { version: DAEMON_VERSION }));
	r('POST', '/process/execute', execute);
	r('POST', '/process/code-run', codeRun);
	r('POST', '/process/session', async (ctx) => {
		const b = await ctx.json();
		if (!b.sessionId)
			throw new HttpError(400, 'sessionId is required', { code: 'BAD_REQUEST' });
		if (ctx.sb.sessions.has(b.sessionId))
			throw new HttpError(409, `session ${b.sessionId} already exists`, { code: 'CONFLICT' });
		ctx.sb.sessions.set(b.sessionId, newSession(ctx.sb, b.sessionId));
		sendEmpty(ctx.res, 201);
	});
	const sessionJson = (s) => ({ sessionId: s.id, commands: [...s.commands.values()].map(commandJson) });
	r('GET', '/process/session', (ctx) => sendJson(ctx.res, 200, [...ctx.sb.sessions.values()].map(sessionJson)));
	r('GET', '/process/session/:sid', (ctx) => sendJson(ctx.res, 200, sessionJson(session(ctx))));
	r('DELETE', '/process/session/:sid', (ctx) => {
		const s = session(ctx);
		try {
			process.kill(-s.child.pid, 'SIGKILL');
		} catch (e) { /* gone */ }
		ctx.sb.sessions.delete(s.id);
		sendEmpty(ctx.res, 204);
	});
	r('POST', '/process/session/:sid/exec', sessionExec);
	r('GET', '/process/session/:sid/command/:cmd', (ctx) => sendJson(ctx.res, 200, commandJson(commandOf(ctx, session(ctx)))));
	r('GET', '/process/session/:sid/command/:cmd/logs', (ctx) => {
		const c = commandOf(ctx, session(ctx));
		if (ctx.query.get('follow') === 'true')
			throw new HttpError(400, 'the fake toolbox cannot follow logs (no WebSocket)', { code: 'BAD_REQUEST' });
		const logs = logsOf(ctx.sb, c);
		if (sdkAtLeast(ctx.req, '0.167.0'))
			return sendJson(ctx.res, 200, logs);
		ctx.res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' });
		ctx.res.end(logs.stdout + logs.stderr);
	});
}

module.exports = { register, dropAll, DAEMON_VERSION };
