// The official e2b and @e2b/code-interpreter SDKs against tests/fakes/e2b.js.
// What passes here is what the SDK accepts from the real service, so the
// fake is a fair stand-in for sbxfs's own E2B provider tests.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
	Sandbox, CommandExitError, TimeoutError, FileNotFoundError, SandboxNotFoundError,
	AuthenticationError, RateLimitError, ServiceBusyError, SandboxError, NotEnoughSpaceError,
} from 'e2b';
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter';
import { startFake, countDuring, rejectsWith, clearEnv } from './lib/harness.mjs';

clearEnv('E2B_');

let fake;
let opts;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

before(async () => {
	fake = await startFake('e2b', ['--disk-mb', '64']);
	opts = { apiKey: 'test-key', apiUrl: fake.url, sandboxUrl: fake.url };
});

after(async () => {
	if (fake)
		assert.equal(await fake.stop(), 0, 'the fake exits 0 on SIGTERM');
});

describe('control plane', () => {
	test('create, getInfo, list, getHost, kill', async () => {
		const sbx = await Sandbox.create({ ...opts, metadata: { purpose: 'conf' }, envs: { FOO: 'bar' }, timeoutMs: 120000 });
		assert.match(sbx.sandboxId, /^[a-z0-9]{20}$/);
		const info = await sbx.getInfo();
		assert.equal(info.sandboxId, sbx.sandboxId);
		assert.equal(info.state, 'running');
		assert.deepEqual(info.metadata, { purpose: 'conf' });
		const left = info.endAt.getTime() - Date.now();
		assert.ok(left > 100000 && left <= 120000, `endAt is about 120 s away (${left} ms)`);
		const page = await Sandbox.list({ ...opts, query: { metadata: { purpose: 'conf' } } }).nextItems();
		assert.deepEqual(page.map((s) => s.sandboxId), [sbx.sandboxId]);
		assert.equal(sbx.getHost(3000), `3000-${sbx.sandboxId}.e2b.app`);
		assert.equal(await Sandbox.kill(sbx.sandboxId, opts), true);
		assert.equal(await Sandbox.kill(sbx.sandboxId, opts), false);
		await rejectsWith(() => Sandbox.getInfo(sbx.sandboxId, opts), SandboxNotFoundError);
		assert.equal(await sbx.isRunning(), false);
	});

	test('a wrong API key is an AuthenticationError', async () => {
		await rejectsWith(() => Sandbox.create({ ...opts, apiKey: 'wrong' }), AuthenticationError,
			(e) => assert.match(e.message, /Invalid API key/));
	});

	test('setTimeout: the sandbox is killed when its time is up', async () => {
		const sbx = await Sandbox.create(opts);
		await sbx.setTimeout(1000);
		await sleep(1600);
		assert.equal(await sbx.isRunning(), false);
		await rejectsWith(() => Sandbox.getInfo(sbx.sandboxId, opts), SandboxNotFoundError);
	});

	test('onTimeout pause: the sandbox is paused, not killed, and connect resumes it', async () => {
		// A long first lifetime, so that the write lands before it ends on a loaded machine
		// (with timeoutMs 1000 the write itself met the paused sandbox at load 12); then the
		// lifetime is cut to 1 s and the state polled until it leaves 'running'.
		const sbx = await Sandbox.create({ ...opts, timeoutMs: 60000, lifecycle: { onTimeout: 'pause' } });
		await sbx.files.write('/home/user/keep.txt', 'kept');
		await sbx.setTimeout(1000);
		await sleep(1600);
		let state = (await sbx.getInfo()).state;
		for (let i = 0; state === 'running' && i < 40; i++) {
			await sleep(500);
			state = (await sbx.getInfo()).state;
		}
		assert.equal(state, 'paused');
		const again = await Sandbox.connect(sbx.sandboxId, opts);
		assert.equal(await again.files.read('/home/user/keep.txt'), 'kept');
		await again.kill();
	});
});

describe('sandbox', () => {
	let sbx;
	before(async () => {
		sbx = await Sandbox.create({ ...opts, envs: { FOO: 'bar' } });
	});
	after(async () => {
		if (sbx)
			await Sandbox.kill(sbx.sandboxId, opts);
	});

	test('files: write, read, exists, getInfo', async () => {
		const w = await sbx.files.write('/home/user/hello.txt', 'Hello, E2B!\n');
		assert.deepEqual({ name: w.name, path: w.path, type: w.type }, { name: 'hello.txt', path: '/home/user/hello.txt', type: 'file' });
		assert.equal(await sbx.files.read('/home/user/hello.txt'), 'Hello, E2B!\n');
		assert.equal(await sbx.files.read('hello.txt'), 'Hello, E2B!\n', 'relative paths are from the home');
		const bytes = await sbx.files.read('/home/user/hello.txt', { format: 'bytes' });
		assert.equal(Buffer.from(bytes).toString(), 'Hello, E2B!\n');
		assert.equal(await sbx.files.exists('/home/user/hello.txt'), true);
		assert.equal(await sbx.files.exists('/home/user/nothere'), false);
		const info = await sbx.files.getInfo('/home/user/hello.txt');
		assert.equal(info.type, 'file');
		assert.equal(info.size, 12);
		assert.equal(info.owner, 'user');
		assert.equal(info.permissions, '-rw-r--r--');
		await rejectsWith(() => sbx.files.read('/home/user/missing.txt'), FileNotFoundError);
	});

	test('files: binary, octet-stream and several files at once', async () => {
		const data = Uint8Array.from([0, 1, 2, 255, 254]);
		await sbx.files.write('/tmp/bin.dat', data.buffer, { useOctetStream: true });
		assert.deepEqual([...await sbx.files.read('/tmp/bin.dat', { format: 'bytes' })], [...data]);
		const out = await sbx.files.write([{ path: '/tmp/m/a.txt', data: 'A' }, { path: '/tmp/m/b.txt', data: 'B' }]);
		assert.deepEqual(out.map((x) => x.path).sort(), ['/tmp/m/a.txt', '/tmp/m/b.txt']);
		assert.equal(await sbx.files.read('/tmp/m/b.txt'), 'B');
	});

	test('files: makeDir, list with depth, rename, remove', async () => {
		assert.equal(await sbx.files.makeDir('/home/user/d/sub'), true);
		assert.equal(await sbx.files.makeDir('/home/user/d/sub'), false);
		await sbx.files.write('/home/user/d/sub/x.txt', 'x');
		await sbx.files.write('/home/user/d/top.txt', 'top');
		const one = await sbx.files.list('/home/user/d');
		assert.deepEqual(one.map((e) => [e.name, e.type]), [['sub', 'dir'], ['top.txt', 'file']]);
		const two = await sbx.files.list('/home/user/d', { depth: 2 });
		assert.deepEqual(two.map((e) => e.path), ['/home/user/d/sub', '/home/user/d/sub/x.txt', '/home/user/d/top.txt']);
		const moved = await sbx.files.rename('/home/user/d/top.txt', '/home/user/d/new/top2.txt');
		assert.equal(moved.path, '/home/user/d/new/top2.txt');
		assert.equal(await sbx.files.read('/home/user/d/new/top2.txt'), 'top');
		assert.equal(await sbx.files.exists('/home/user/d/top.txt'), false);
		await sbx.files.remove('/home/user/d');
		assert.equal(await sbx.files.exists('/home/user/d'), false);
		await rejectsWith(() => sbx.files.list('/home/user/d'), FileNotFoundError);
	});

	test('files: a symlink that points outside is resolved inside the sandbox', async () => {
		await sbx.commands.run('ln -sfn /etc /home/user/etclink');
		const info = await sbx.files.getInfo('/home/user/etclink');
		assert.equal(info.type, 'dir');
		assert.equal(info.symlinkTarget, '/etc');
		await sbx.files.write('/home/user/etclink/sbx-only.conf', 'inside');
		const r = await sbx.commands.run('cat /etc/sbx-only.conf');
		assert.equal(r.stdout, 'inside');
	});

	test('files: watchDir sees a file being created', async () => {
		await sbx.files.makeDir('/home/user/watched');
		const events = [];
		const handle = await sbx.files.watchDir('/home/user/watched', (e) => events.push(e));
		await sbx.commands.run('echo hi > /home/user/watched/new.txt');
		for (let i = 0; i < 40 && !events.some((e) => e.name === 'new.txt'); i++)
			await sleep(50);
		await handle.stop();
		assert.ok(events.some((e) => e.name === 'new.txt' && e.type === 'create'), JSON.stringify(events));
	});

	test('files: a full disk is NotEnoughSpaceError', async () => {
		await rejectsWith(() => sbx.files.write('/tmp/big.bin', new Uint8Array(80 << 20).buffer), NotEnoughSpaceError);
		await sbx.files.remove('/tmp/big.bin');
	});

	test('commands: output, sandbox and run envs, cwd, user', async () => {
		const r = await sbx.commands.run('echo $FOO $BAR; echo oops 1>&2', { envs: { BAR: 'baz' } });
		assert.equal(r.exitCode, 0);
		assert.equal(r.stdout, 'bar baz\n');
		assert.equal(r.stderr, 'oops\n');
		assert.equal((await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n');
		assert.equal((await sbx.commands.run('pwd')).stdout, '/home/user\n');
		assert.equal((await sbx.commands.run('whoami')).stdout, 'user\n');
		assert.equal((await sbx.commands.run('whoami', { user: 'root' })).stdout, 'root\n');
		await sbx.files.write('/home/user/seen.txt', 'from the API');
		assert.equal((await sbx.commands.run('cat seen.txt')).stdout, 'from the API');
	});

	test('commands: a host-only directory is not visible', async () => {
		const r = await sbx.commands.run('ls -A /root | wc -l; ls /home; test -e /work/main && echo visible || echo hidden');
		assert.equal(r.stdout, '0\nuser\nhidden\n');
	});

	test('commands: non-zero exit is CommandExitError', async () => {
		const e = await rejectsWith(() => sbx.commands.run('echo partial; exit 3'), CommandExitError);
		assert.equal(e.exitCode, 3);
		assert.equal(e.stdout, 'partial\n');
	});

	test('commands: timeout is TimeoutError and kills the command', async () => {
		const t0 = Date.now();
		await rejectsWith(() => sbx.commands.run('sleep 5; touch /tmp/survived', { timeoutMs: 800 }), TimeoutError);
		assert.ok(Date.now() - t0 < 4000);
		await sleep(5000);
		assert.equal(await sbx.files.exists('/tmp/survived'), false);
	});

	test('commands: connect re-attaches to a running command', async () => {
		const h = await sbx.commands.run('sleep 0.5; echo later', { background: true });
		await h.disconnect();
		const again = await sbx.commands.connect(h.pid);
		assert.equal((await again.wait()).stdout, 'later\n');
	});

	test('commands: background, list, stdin, kill', async () => {
		const h = await sbx.commands.run('cat', { background: true, stdin: true });
		assert.ok((await sbx.commands.list()).some((p) => p.pid === h.pid));
		await sbx.commands.sendStdin(h.pid, 'typed\n');
		await sbx.commands.closeStdin(h.pid);
		const r = await h.wait();
		assert.equal(r.stdout, 'typed\n');
		const h2 = await sbx.commands.run('sleep 30', { background: true });
		assert.equal(await sbx.commands.kill(h2.pid), true);
		await rejectsWith(() => h2.wait(), CommandExitError, (e) => assert.equal(e.exitCode, -1));
		assert.equal(await sbx.commands.kill(h2.pid), false);
		assert.ok(!(await sbx.commands.list()).some((p) => p.pid === h2.pid));
	});

	test('pty: create, sendInput, resize, exit status (what sbx shell uses)', async () => {
		let out = '';
		const dec = new TextDecoder();
		const seen = async (text) => {
			for (let i = 0; i < 100 && !out.includes(text); i++)
				await new Promise((r) => setTimeout(r, 100));
			assert.ok(out.includes(text), `pty output lacks ${text}: ${JSON.stringify(out)}`);
		};
		const h = await sbx.pty.create({ cols: 90, rows: 20, onData: (d) => { out += dec.decode(d); } });
		const enc = new TextEncoder();
		await sbx.pty.sendInput(h.pid, enc.encode('stty size; test -t 0 && echo tty-$((40+2))\n'));
		await seen('20 90');
		await seen('tty-42');
		await sbx.pty.resize(h.pid, { cols: 120, rows: 33 });
		await sbx.pty.sendInput(h.pid, enc.encode('stty size\n'));
		await seen('33 120');
		await sbx.pty.sendInput(h.pid, enc.encode('exit 3\n'));
		await rejectsWith(() => h.wait(), CommandExitError, (e) => assert.equal(e.exitCode, 3));
		const h2 = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} });
		assert.equal(await sbx.pty.kill(h2.pid), true);
		await rejectsWith(() => h2.wait(), CommandExitError, (e) => assert.equal(e.exitCode, -1));
	});
});

describe('code interpreter', () => {
	let sbx;
	before(async () => {
		sbx = await CodeSandbox.create(opts);
	});
	after(async () => {
		if (sbx)
			await sbx.kill();
	});

	test('stdout, results, state between runs', async () => {
		const ex = await sbx.runCode('print("hello")\n1+1');
		assert.deepEqual(ex.logs.stdout, ['hello\n']);
		assert.equal(ex.text, '2');
		assert.equal(ex.error, undefined);
		await sbx.runCode('x = 41');
		assert.equal((await sbx.runCode('x + 1')).text, '42');
		const d = await sbx.runCode('{"a": [1, 2]}');
		assert.deepEqual(d.results[0].json, { a: [1, 2] });
	});

	test('errors carry name, value, traceback', async () => {
		const ex = await sbx.runCode('raise ValueError("boom")');
		assert.equal(ex.error.name, 'ValueError');
		assert.equal(ex.error.value, 'boom');
		assert.match(ex.error.traceback, /ValueError: boom/);
		const ne = await sbx.runCode('undefined_name');
		assert.equal(ne.error.name, 'NameError');
	});

	test('run envs, javascript, typescript and contexts', async () => {
		assert.equal((await sbx.runCode('import os; os.environ["Q"]', { envs: { Q: 'v' } })).text, "'v'");
		assert.equal((await sbx.runCode('const a = 20; a * 2', { language: 'js' })).text, '40');
		assert.equal((await sbx.runCode('a + 2', { language: 'js' })).text, '22');
		const ts = await sbx.runCode('const n: number = 5;\nfunction sq(v: number): number { return v * v }\nsq(n)', { language: 'ts' });
		assert.equal(ts.text, '25');
		const ctx = await sbx.createCodeContext({ language: 'python', cwd: '/tmp' });
		assert.equal((await sbx.runCode('import os; os.getcwd()', { context: ctx })).text, "'/tmp'");
		assert.equal((await sbx.runCode('"x" in globals()', { context: ctx })).text, 'False');
	});

	test('matplotlib figures come back as png', async (t) => {
		const probe = await sbx.runCode('import importlib.util; importlib.util.find_spec("matplotlib") is not None');
		if (probe.text !== 'True')
			return t.skip('matplotlib is not installed');
		const ex = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()');
		const png = ex.results.find((r) => r.png);
		assert.ok(png, JSON.stringify(ex.results));
		assert.equal(Buffer.from(png.png, 'base64').subarray(1, 4).toString(), 'PNG');
	});
});

describe('pause and resume', () => {
	test('pause freezes, data plane refuses, connect resumes with processes alive', async () => {
		const sbx = await Sandbox.create(opts);
		const bg = await sbx.commands.run('sleep 300', { background: true });
		assert.equal(await sbx.pause(), true);
		assert.equal(await sbx.pause(), false, 'a second pause says already paused');
		assert.equal((await sbx.getInfo()).state, 'paused');
		await rejectsWith(() => sbx.files.read('/etc/hostname'), TimeoutError,
			(e) => assert.match(e.message, /sandbox was not found/));
		const again = await Sandbox.connect(sbx.sandboxId, opts);
		assert.equal((await again.getInfo()).state, 'running');
		assert.ok((await again.commands.list()).some((p) => p.pid === bg.pid), 'the background process survived');
		await again.kill();
	});
});

describe('fault switches', () => {
	after(() => fake.reset());

	test('429 with Retry-After is retried by the SDK, then RateLimitError', async () => {
		await fake.faults([{ kind: '429', count: 2, retryAfter: 0, key: 'POST /v2/sandboxes' }]);
		let sbx;
		assert.equal(await countDuring(fake, 'POST /v2/sandboxes', async () => {
			sbx = await Sandbox.create(opts);
		}), 3);
		await sbx.kill();
		await fake.faults([{ kind: '429', count: 10, retryAfter: 0, key: 'POST /v2/sandboxes' }]);
		assert.equal(await countDuring(fake, 'POST /v2/sandboxes', () =>
			rejectsWith(() => Sandbox.create(opts), RateLimitError)), 4);
	});

	test('5xx: 503 is ServiceBusyError, 500 a SandboxError with its status', async () => {
		await fake.faults([{ kind: '5xx', status: 503, count: 1, key: 'POST /v2/sandboxes' }]);
		await rejectsWith(() => Sandbox.create(opts), ServiceBusyError);
		await fake.faults([{ kind: '5xx', status: 500, count: 1, key: 'POST /v2/sandboxes' }]);
		await rejectsWith(() => Sandbox.create(opts), SandboxError, (e) => assert.match(e.message, /^500/));
	});

	describe('on a sandbox', () => {
		let sbx;
		before(async () => {
			await fake.reset();
			sbx = await Sandbox.create(opts);
		});
		after(async () => {
			await fake.reset();
			await Sandbox.kill(sbx.sandboxId, opts);
		});

		test('drop: the connection is cut without an answer', async () => {
			await fake.faults([{ kind: 'drop', count: 1, prefix: '/filesystem.Filesystem/ListDir' }]);
			await rejectsWith(() => sbx.files.list('/home/user'), SandboxError, (e) => assert.match(e.message, /fetch failed/));
			assert.ok(Array.isArray(await sbx.files.list('/home/user')), 'the next call works');
		});

		test('slow: a reply later than requestTimeoutMs is TimeoutError', async () => {
			await fake.faults([{ kind: 'slow', delayMs: 3000, count: 1, prefix: '/filesystem.Filesystem/Stat' }]);
			await rejectsWith(() => sbx.files.getInfo('/home/user', { requestTimeoutMs: 500 }), TimeoutError);
		});

		test('vanish fault: the proxy 502 is TimeoutError / SandboxNotFoundError', async () => {
			await fake.faults([{ kind: 'vanish', count: 1, prefix: '/files' }]);
			await rejectsWith(() => sbx.files.read('/etc/hostname'), TimeoutError);
			await fake.faults([{ kind: 'vanish', count: 1, prefix: '/process.Process/Start' }]);
			await rejectsWith(() => sbx.commands.run('true'), SandboxNotFoundError);
		});

		test('vanish fault on the control plane is a 404: SandboxNotFoundError', async () => {
			await fake.faults([{ kind: 'vanish', count: 1, key: 'GET /sandboxes/:id' }]);
			await rejectsWith(() => sbx.getInfo(), SandboxNotFoundError);
		});

		test('latency is added to every request', async () => {
			await fake.faults([], 300);
			const t0 = Date.now();
			await sbx.files.exists('/home/user');
			assert.ok(Date.now() - t0 >= 300);
			await fake.faults([], 0);
		});

		test('counters count each endpoint by normalised path', async () => {
			await fake.admin('DELETE', '/_fake/counters');
			await sbx.files.list('/home/user');
			await sbx.files.read('/etc/hostname');
			await sbx.getInfo();
			const c = await fake.counters();
			assert.equal(c['POST /filesystem.Filesystem/ListDir'], 1);
			assert.equal(c['GET /files'], 1);
			assert.equal(c['GET /sandboxes/:id'], 1);
		});
	});

	test('vanish admin: a sandbox deleted behind the SDK\'s back', async () => {
		const sbx = await Sandbox.create(opts);
		await fake.admin('POST', `/_fake/sandboxes/${sbx.sandboxId}/vanish`);
		await rejectsWith(() => sbx.commands.run('true'), SandboxNotFoundError);
		await rejectsWith(() => sbx.getInfo(), SandboxNotFoundError);
		assert.equal(await sbx.isRunning(), false);
	});
});

describe('envd HTTP details', () => {
	let sbx;
	let h;
	before(async () => {
		sbx = await Sandbox.create(opts);
		h = { 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '49983', 'x-access-token': sbx.envdAccessToken };
	});
	after(() => sbx.kill());

	test('GET /files honours Range', async () => {
		await sbx.files.write('/home/user/r.txt', '0123456789');
		const r = await fetch(`${fake.url}/files?path=%2Fhome%2Fuser%2Fr.txt`, { headers: { ...h, range: 'bytes=2-5' } });
		assert.equal(r.status, 206);
		assert.equal(r.headers.get('content-range'), 'bytes 2-5/10');
		assert.equal(await r.text(), '2345');
		const full = await fetch(`${fake.url}/files?path=%2Fhome%2Fuser%2Fr.txt`, { headers: h });
		assert.equal(full.headers.get('content-length'), '10');
		assert.ok(full.headers.get('last-modified'));
		await full.text();
	});

	test('Start frames: start first, keepalive after silence, data, end, end-stream', async () => {
		const msg = Buffer.from(JSON.stringify({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'sleep 1.4; echo x'] }, stdin: false }));
		const head = Buffer.alloc(5);
		head.writeUInt32BE(msg.length, 1);
		const r = await fetch(`${fake.url}/process.Process/Start`, {
			method: 'POST', body: Buffer.concat([head, msg]),
			headers: { ...h, 'content-type': 'application/connect+json', 'connect-protocol-version': '1', 'keepalive-ping-interval': '1' },
		});
		assert.equal(r.status, 200);
		assert.equal(r.headers.get('content-type'), 'application/connect+json');
		const buf = Buffer.from(await r.arrayBuffer());
		const frames = [];
		for (let i = 0; i < buf.length; i += 5 + buf.readUInt32BE(i + 1))
			frames.push([buf[i], JSON.parse(buf.subarray(i + 5, i + 5 + buf.readUInt32BE(i + 1)))]);
		assert.ok(frames[0][1].event.start.pid > 0);
		assert.deepEqual(frames[1], [0, { event: { keepalive: {} } }]);
		assert.deepEqual(frames[2], [0, { event: { data: { stdout: Buffer.from('x\n').toString('base64') } } }]);
		assert.deepEqual(frames[3], [0, { event: { end: { exited: true, status: 'exit status 0' } } }]);
		assert.deepEqual(frames[4], [2, {}]);
		assert.equal(frames.length, 5);
	});
});
