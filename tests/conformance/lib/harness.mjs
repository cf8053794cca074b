// Starts a fake server (tests/fakes/run-fake.sh) for a conformance suite,
// talks to its admin API, and stops it by pid.  One fake per test file.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
export const RUN_FAKE = path.resolve(process.env.SBXFS_FAKES_DIR || path.join(here, '../../fakes'), 'run-fake.sh');

/*
 * Resolves {url, port, pid, admin(), counters(), faults(), reset(), stop()}
 * once the fake printed "LISTENING <port>".  Its stderr goes to ours.
 */
export async function startFake(name, args = []) {
	const child = spawn(RUN_FAKE, [name, '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
	child.stderr.on('data', (c) => process.stderr.write(`[fake ${name}] ${c}`));
	const port = await new Promise((resolve, reject) => {
		let buf = '';
		const onData = (c) => {
			buf += c;
			const m = /^LISTENING (\d+)\n/.exec(buf);
			if (m) {
				child.stdout.off('data', onData);
				child.stdout.resume();
				resolve(Number(m[1]));
			}
		};
		child.stdout.on('data', onData);
		child.once('exit', (code) => reject(new Error(`fake ${name} exited with ${code} before listening`)));
		setTimeout(() => reject(new Error(`fake ${name} did not start in 20 s`)), 20000).unref();
	});
	const url = `http://127.0.0.1:${port}`;
	const admin = async (method, p, body) => {
		const r = await fetch(url + p, {
			method, body: body === undefined ? undefined : JSON.stringify(body),
			headers: body === undefined ? {} : { 'content-type': 'application/json' },
		});
		if (r.status >= 400)
			throw new Error(`admin ${method} ${p}: ${r.status} ${await r.text()}`);
		return r.status === 204 ? null : r.json();
	};
	return {
		url, port, pid: child.pid, admin,
		counters: () => admin('GET', '/_fake/counters'),
		faults: (faults, latencyMs) => admin('POST', '/_fake/faults', { faults, latencyMs, replace: true }),
		reset: () => admin('POST', '/_fake/reset', {}),
		sandboxes: () => admin('GET', '/_fake/sandboxes'),
		async stop() {
			if (child.exitCode !== null || child.signalCode !== null)
				return child.exitCode;
			process.kill(child.pid, 'SIGTERM');
			const timer = setTimeout(() => process.kill(child.pid, 'SIGKILL'), 15000);
			const [code] = await once(child, 'exit');
			clearTimeout(timer);
			return code;
		},
	};
}

/* Counter difference helper: how often `key` was hit while fn ran. */
export async function countDuring(fake, key, fn) {
	const before = (await fake.counters())[key] || 0;
	await fn();
	return ((await fake.counters())[key] || 0) - before;
}

/* Asserts that fn rejects with an instance of cls; returns the error. */
export async function rejectsWith(fn, cls, check) {
	try {
		await fn();
	} catch (e) {
		if (!(e instanceof cls))
			throw new Error(`expected ${cls.name}, got ${e && e.constructor && e.constructor.name}: ${e && e.message}`);
		if (check)
			check(e);
		return e;
	}
	throw new Error(`expected ${cls.name}, but it resolved`);
}

/* The SDKs read their settings from the environment too: the suites pass everything explicitly. */
export function clearEnv(prefix) {
	for (const k of Object.keys(process.env)) {
		if (k.startsWith(prefix))
			delete process.env[k];
	}
}
