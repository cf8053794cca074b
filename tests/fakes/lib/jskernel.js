'use strict';
/*
 * A tiny notebook-like JavaScript/TypeScript kernel for the fake E2B code
 * interpreter, the JS twin of pykernel.py (same stdin/fd 3 protocol).  It
 * runs inside the sandbox as `node -e <tsstrip.js + this file>`.  Cells run
 * in one persistent vm context, so top-level declarations survive between
 * runs; the completion value of a cell is its result.  TypeScript goes
 * through tsToJs() of tsstrip.js (defined before this file).
 */
const vm = require('vm');
const fs = require('fs');
const util = require('util');
const readline = require('readline');

const send = (obj) => fs.writeSync(3, JSON.stringify(obj) + '\n');
const sink = (name) => ({ write: (s) => { send({ type: name, text: String(s) }); return true; } });
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
	const proto = Object.getPrototypeOf(v);
	if (!Array.isArray(v) && proto !== Object.prototype && proto !== null)
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

const lines = readline.createInterface({ input: process.stdin });
const queue = [];
let busy = false;
async function pump() {
	if (busy)
		return;
	busy = true;
	while (queue.length) {
		const req = queue.shift();
		const saved = Object.assign({}, process.env);
		Object.assign(process.env, req.env || {});
		await runCell(req.code || '', req.language);
		for (const k of Object.keys(process.env)) {
			if (!(k in saved))
				delete process.env[k];
		}
		Object.assign(process.env, saved);
		send({ type: 'done' });
	}
	busy = false;
}
lines.on('line', (l) => {
	queue.push(JSON.parse(l));
	pump();
});
lines.on('close', () => process.exit(0));
process.on('unhandledRejection', (e) => send({ type: 'stderr', text: `Unhandled rejection: ${util.inspect(e)}\n` }));
