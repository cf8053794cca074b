'use strict';
/*
 * jskernel — sbxfs's persistent JavaScript / TypeScript interpreter, run
 * inside a sandbox; the twin of pykernel.py (same modes, same NDJSON
 * events: see the top of pykernel.py). Cells run in one persistent vm
 * context, so top-level declarations survive between runs; the completion
 * value of a cell is its result; top-level await works.
 *
 * TypeScript (--language typescript) goes through tsToJs() of tsstrip.js,
 * loaded before this file: the sandbox's `typescript` package, else
 * node's own type stripper, else tsstrip's crude one.
 *
 * Loaded as plain script text after tsstrip.js (one file in the sandbox,
 * or `node -e` in the test fakes), so it must stay self-contained.
 */
const vm = require('vm');
const fs = require('fs');
const net = require('net');
const util = require('util');
const path = require('path');
const readline = require('readline');
const childProcess = require('child_process');

const START_WAIT_MS = 30000;
let emit = null; /* where the running cell's events go, or null between cells */

const send = (obj) => {
	if (emit)
		emit(JSON.stringify(obj) + '\n');
};
/* Streams for the cells' console: every write is an event of the running cell. */
const sink = (name) => new (require('stream').Writable)({
	decodeStrings: false,
	write(chunk, enc, cb) {
		send({ type: name, text: Buffer.isBuffer(chunk) ? chunk.toString('utf8') : String(chunk) });
		cb();
	},
});
const cellConsole = new console.Console({ stdout: sink('stdout'), stderr: sink('stderr') });

const context = vm.createContext({
	console: cellConsole, require, process, Buffer, URL, URLSearchParams, TextEncoder, TextDecoder,
	setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate,
	queueMicrotask, structuredClone: global.structuredClone, fetch: global.fetch,
	module: { exports: {} }, __filename: '<cell>', __dirname: process.cwd(),
});
context.global = context;
context.globalThis = context;

function jsonable(v) {
	if (v === null || typeof v !== 'object')
		return false;
	/* Plain objects of the cells' realm (the vm context has its own Object). */
	const proto = Object.getPrototypeOf(v);
	if (!Array.isArray(v) && proto !== null && !(proto.constructor && proto.constructor.name === 'Object' &&
		Object.getPrototypeOf(proto) === null))
		return false;
	try {
		JSON.stringify(v);
		return true;
	} catch (e) {
		return false;
	}
}

async function runCell(code, language) {
	let value;
	try {
		if (language === 'typescript')
			code = tsToJs(code); // eslint-disable-line no-undef
		try {
			value = vm.runInContext(code, context, { filename: '<cell>' });
		} catch (e) {
			/* top-level await: run as an async function body (its declarations stay local) */
			if (!e || e.name !== 'SyntaxError' || !/await/.test(e.message))
				throw e;
			value = await vm.runInContext(`(async () => {\n${code}\n})()`, context, { filename: '<cell>' });
		}
		if (value && typeof value.then === 'function')
			value = await value;
		if (value !== undefined) {
			const r = { type: 'result', is_main_result: true, text: util.inspect(value) };
			if (jsonable(value))
				r.json = value;
			send(r);
		}
	} catch (e) {
		const isErr = e instanceof Error || (e && typeof e === 'object' && 'stack' in e);
		send({
			type: 'error',
			name: isErr ? e.name : 'Error',
			value: isErr ? e.message : util.inspect(e),
			traceback: isErr ? String(e.stack) : util.inspect(e),
		});
	}
}

/* Cells run one at a time, in arrival order. */
const queue = [];
let busy = false;
let count = 0;
async function pump(language) {
	if (busy)
		return;
	busy = true;
	while (queue.length) {
		const { req, write, done } = queue.shift();
		emit = write;
		send({ type: 'number_of_executions', execution_count: ++count });
		const saved = Object.assign({}, process.env);
		Object.assign(process.env, req.env || {});
		await runCell(req.code || '', req.language || language);
		for (const k of Object.keys(process.env)) {
			if (!(k in saved))
				delete process.env[k];
		}
		Object.assign(process.env, saved);
		send({ type: 'end_of_execution' });
		emit = null;
		done();
	}
	busy = false;
}

function submit(req, write, done, language) {
	queue.push({ req, write, done });
	pump(language);
}

/* Output written to process.stdout/stderr directly belongs to the running cell. */
function captureProcessStreams() {
	for (const name of ['stdout', 'stderr']) {
		process[name].write = (chunk, enc, cb) => {
			send({ type: name, text: Buffer.isBuffer(chunk) ? chunk.toString('utf8') : String(chunk) });
			if (typeof enc === 'function')
				enc();
			else if (typeof cb === 'function')
				cb();
			return true;
		};
	}
}

function serveSocket(sockPath, language) {
	captureProcessStreams();
	const tmp = sockPath + '.new';
	try {
		fs.unlinkSync(tmp);
	} catch (e) { /* none */ }
	const server = net.createServer((conn) => {
		let buf = '';
		let started = false;
		conn.on('error', () => {});
		conn.on('data', (d) => {
			if (started)
				return;
			buf += d.toString('utf8');
			const nl = buf.indexOf('\n');
			if (nl < 0)
				return;
			started = true;
			let req;
			try {
				req = JSON.parse(buf.slice(0, nl));
			} catch (e) {
				conn.end(JSON.stringify({ type: 'error', name: 'ProtocolError', value: e.message, traceback: '' }) + '\n');
				return;
			}
			const write = (s) => {
				if (!conn.destroyed)
					conn.write(s);
			};
			submit(req, write, () => conn.end(), language);
		});
	});
	server.listen(tmp, () => {
		fs.chmodSync(tmp, 0o600);
		fs.renameSync(tmp, sockPath); /* only a listening socket is ever at sockPath */
		fs.writeFileSync(sockPath + '.pid', `${process.pid}\n`); /* for a restart through a shell */
	});
}

function serveStdio(language) {
	captureProcessStreams();
	const write = (s) => fs.writeSync(3, s);
	const lines = readline.createInterface({ input: process.stdin });
	lines.on('line', (l) => {
		if (l.trim())
			submit(JSON.parse(l), write, () => {}, language);
	});
	lines.on('close', () => process.exit(0));
}

function tryConnect(sockPath) {
	return new Promise((resolve) => {
		const s = net.connect(sockPath);
		s.once('connect', () => resolve({ s }));
		s.once('error', (e) => resolve({ e }));
	});
}

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

/*
 * Holds sockPath's start lock (a directory: node has no flock) while fn
 * runs: one client starts the server, the others wait for it. Cells sent at
 * once each started a server, all but the last one unreachable, their state
 * lost. A lock older than a start may take is its dead holder's, and goes.
 */
async function withStartLock(sockPath, fn) {
	const lock = sockPath + '.lock.d';
	let held = false;
	for (const until = Date.now() + 2 * START_WAIT_MS; !held && Date.now() < until;) {
		try {
			fs.mkdirSync(lock);
			held = true;
		} catch (e) {
			if (e.code !== 'EEXIST')
				break; /* no lock to be had: start unlocked, as before */
			try {
				if (Date.now() - fs.statSync(lock).mtimeMs > START_WAIT_MS + 5000)
					fs.rmdirSync(lock);
			} catch (e2) { /* gone meanwhile */ }
			await sleep(20);
		}
	}
	try {
		return await fn();
	} finally {
		if (held)
			try {
				fs.rmdirSync(lock);
			} catch (e) { /* none */ }
	}
}

/* Makes sure a server listens on sockPath: {s, lost}. */
async function start(sockPath, language) {
	const r = await tryConnect(sockPath);
	if (r.s)
		return { s: r.s, lost: false };
	return withStartLock(sockPath, async () => {
		const again = await tryConnect(sockPath);
		if (again.s)
			return { s: again.s, lost: false };
		/* a socket without a server: it died */
		return spawnServer(sockPath, language, again.e.code === 'ECONNREFUSED');
	});
}

/* Starts a server on sockPath (lost: a dead one's socket was there) and connects: {s, lost}. */
async function spawnServer(sockPath, language, lost) {
	let r;
	const log = fs.openSync(sockPath + '.log', 'a');
	const self = path.resolve(process.argv[1]);
	const child = childProcess.spawn(process.execPath, [self, '--socket', sockPath, '--language', language], {
		detached: true, stdio: ['ignore', log, log],
	});
	let exited = false;
	child.on('exit', () => { exited = true; });
	child.unref();
	fs.closeSync(log);
	const deadline = Date.now() + START_WAIT_MS;
	while (Date.now() < deadline && !exited) {
		r = await tryConnect(sockPath);
		if (r.s)
			return { s: r.s, lost };
		await sleep(10);
	}
	let tail = '';
	try {
		tail = fs.readFileSync(sockPath + '.log', 'utf8').slice(-2000).trim();
	} catch (e) { /* none */ }
	/* thrown, so that the start lock is let go on the way out */
	throw new Error(`the ${language} interpreter did not start${tail ? ': ' + tail : ''}`);
}

async function client(mode, sockPath, language) {
	let req = '';
	if (mode === 'client')
		req = fs.readFileSync(0, 'utf8');
	let s, lost;
	try {
		({ s, lost } = await start(sockPath, language));
	} catch (e) {
		process.stderr.write(`${e.message}\n`);
		process.exit(1);
	}
	if (lost)
		process.stdout.write('{"type":"state_lost"}\n');
	if (mode === 'start') {
		s.end();
		return;
	}
	let tail = '';
	s.on('data', (d) => {
		process.stdout.write(d);
		tail = (tail + d.toString('utf8')).slice(-64);
	});
	s.on('close', () => {
		if (!tail.includes('"end_of_execution"')) {
			process.stdout.write(JSON.stringify({
				type: 'error', name: 'UnexpectedEndOfExecution',
				value: `the ${language} interpreter exited during the run; the next run starts a fresh one`, traceback: '',
			}) + '\n{"type":"end_of_execution"}\n');
		}
	});
	s.on('error', () => {});
	s.write(req.replace(/\n+$/, '') + '\n');
}

function main(argv) {
	let mode = null;
	let target = null;
	let language = 'javascript';
	for (let i = 0; i < argv.length; i++) {
		const a = argv[i];
		if (a === '--socket' || a === '--start' || a === '--client')
			[mode, target] = [a.slice(2), argv[++i]];
		else if (a === '--stdio')
			mode = 'stdio';
		else if (a === '--language')
			language = argv[++i];
	}
	if (mode === 'socket' || mode === 'stdio') {
		/* A cell's stray rejection or callback error must not end the kernel. */
		process.on('unhandledRejection', (e) => send({ type: 'stderr', text: `Unhandled rejection: ${util.inspect(e)}\n` }));
		process.on('uncaughtException', (e) => send({ type: 'stderr', text: `Uncaught exception: ${util.inspect(e)}\n` }));
	}
	if (mode === 'socket')
		serveSocket(target, language);
	else if (mode === 'stdio')
		serveStdio(language);
	else if (mode === 'start' || mode === 'client')
		client(mode, target, language);
	else {
		process.stderr.write('usage: jskernel.js --socket|--start|--client PATH | --stdio [--language L]\n');
		process.exit(2);
	}
}

main(process.argv.slice(1).filter((a, i) => i > 0 || a.startsWith('--')));
