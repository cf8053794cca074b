// The official @daytonaio/sdk against tests/fakes/daytona.js.  What passes
// here is what the SDK accepts from the real service, so the fake is a fair
// stand-in for sbxfs's own Daytona provider tests.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import {
	Daytona, DaytonaNotFoundError, DaytonaTimeoutError, DaytonaAuthenticationError, DaytonaRateLimitError,
	DaytonaServiceUnavailableError, DaytonaInternalServerError, DaytonaConnectionError, DaytonaValidationError,
	DaytonaError, DaytonaConflictError, DaytonaFileNotFoundError,
} from '@daytonaio/sdk';
import { startFake, countDuring, rejectsWith, clearEnv } from './lib/harness.mjs';

clearEnv('DAYTONA_');

let fake;
let daytona;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

before(async () => {
	fake = await startFake('daytona', ['--create-polls', '2']);
	daytona = new Daytona({ apiKey: 'test-key', apiUrl: `${fake.url}/api`, useDeprecatedPolling: true });
});

after(async () => {
	if (fake)
		assert.equal(await fake.stop(), 0, 'the fake exits 0 on SIGTERM');
});

describe('control plane', () => {
	test('create polls until started, echoes labels and env; get, list, delete', async () => {
		const n = await countDuring(fake, 'GET /api/sandbox/:idOrName', async () => {
			const sbx = await daytona.create({ envVars: { FOO: 'bar' }, labels: { app: 'conf' }, autoStopInterval: 0 });
			assert.equal(sbx.state, 'started');
			assert.equal(sbx.labels.app, 'conf');
			assert.equal(sbx.labels['code-toolbox-language'], 'python');
			assert.deepEqual(sbx.env, { FOO: 'bar' });
			assert.equal(sbx.autoStopInterval, 0);
			const got = await daytona.get(sbx.id);
			assert.equal(got.id, sbx.id);
			const listed = [];
			for await (const s of daytona.list({ labels: { app: 'conf' } }))
				listed.push(s.id);
			assert.deepEqual(listed, [sbx.id]);
			await sbx.delete();
			await rejectsWith(() => daytona.get(sbx.id), DaytonaNotFoundError,
				(e) => assert.match(e.message, /not found/));
		});
		assert.ok(n >= 3, `create polled GET /api/sandbox/:id (${n} GETs)`);
	});

	test('resources: disk is the filesystem size, cpu and memory cgroup limits', async () => {
		const sbx = await daytona.create({ image: 'debian:12', resources: { cpu: 2, memory: 2, disk: 1 } });
		assert.equal(sbx.cpu, 2);
		assert.equal(sbx.memory, 2);
		assert.equal(sbx.disk, 1);
		const r = await sbx.process.executeCommand("df -m / | awk 'NR==2 {print $2}'");
		assert.equal(r.result, '1024\n');
		const { cgroups } = (await fake.sandboxes()).find((s) => s.id === sbx.id);
		if (cgroups.length) {
			const own = (await sbx.process.executeCommand('cat /proc/self/cgroup')).result;
			assert.match(own, new RegExp(`:memory:/sbxfs-fake-${sbx.id}\n`));
			assert.equal(readFileSync(`/sys/fs/cgroup/memory/sbxfs-fake-${sbx.id}/memory.limit_in_bytes`, 'utf8'), `${2 * 1024 ** 3}\n`);
			assert.equal(readFileSync(`/sys/fs/cgroup/cpu/sbxfs-fake-${sbx.id}/cpu.cfs_quota_us`, 'utf8'), '200000\n');
		}
		await sbx.delete();
		assert.ok(cgroups.every((d) => !existsSync(d)), 'the cgroups are removed with the sandbox');
	});

	test('a wrong API key is DaytonaAuthenticationError', async () => {
		const bad = new Daytona({ apiKey: 'nope', apiUrl: `${fake.url}/api`, useDeprecatedPolling: true });
		await rejectsWith(() => bad.create(), DaytonaAuthenticationError);
	});
});

describe('sandbox', () => {
	let sbx;
	before(async () => {
		sbx = await daytona.create({ envVars: { FOO: 'bar' } });
	});
	after(async () => {
		if (sbx)
			await sbx.delete();
	});

	test('home and work dir', async () => {
		assert.equal(await sbx.getUserHomeDir(), '/home/daytona');
		assert.equal(await sbx.getWorkDir(), '/home/daytona');
	});

	test('fs: upload, download, list, details', async () => {
		await sbx.fs.createFolder('/home/daytona/work', '755');
		await sbx.fs.uploadFile(Buffer.from('hello\nworld\n'), '/home/daytona/work/hello.txt');
		assert.equal((await sbx.fs.downloadFile('/home/daytona/work/hello.txt')).toString(), 'hello\nworld\n');
		await sbx.fs.uploadFiles([
			{ source: Buffer.from([0, 1, 2, 255]), destination: '/home/daytona/work/bin.dat' },
			{ source: Buffer.from('deep'), destination: '/home/daytona/work/a/b/deep.txt' },
		]);
		const files = await sbx.fs.listFiles('/home/daytona/work');
		assert.deepEqual(files.map((f) => [f.name, f.isDir]), [['a', true], ['bin.dat', false], ['hello.txt', false]]);
		const deep = await sbx.fs.listFiles('/home/daytona/work', { depth: 3 });
		assert.ok(deep.some((f) => f.path === '/home/daytona/work/a/b/deep.txt'));
		const d = await sbx.fs.getFileDetails('/home/daytona/work/hello.txt');
		assert.equal(d.size, 12);
		assert.equal(d.isDir, false);
		assert.equal(d.mode, '-rw-r--r--');
		assert.equal(d.permissions, '0644');
		assert.match(d.modifiedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
		const many = await sbx.fs.downloadFiles([{ source: '/home/daytona/work/bin.dat' }, { source: '/home/daytona/work/nope.txt' }]);
		assert.deepEqual([...many[0].result], [0, 1, 2, 255]);
		assert.equal(many[1].errorDetails.statusCode, 404);
		await rejectsWith(() => sbx.fs.downloadFile('/home/daytona/work/nope.txt'), DaytonaNotFoundError);
		await rejectsWith(() => sbx.fs.getFileDetails('/home/daytona/work/nope.txt'), DaytonaFileNotFoundError);
	});

	test('fs: move, permissions, delete', async () => {
		await sbx.fs.uploadFile(Buffer.from('m'), '/home/daytona/mv/src.txt');
		await sbx.fs.moveFiles('/home/daytona/mv/src.txt', '/home/daytona/mv/dst.txt');
		assert.equal((await sbx.fs.downloadFile('/home/daytona/mv/dst.txt')).toString(), 'm');
		await sbx.fs.uploadFile(Buffer.from('x'), '/home/daytona/mv/other.txt');
		await rejectsWith(() => sbx.fs.moveFiles('/home/daytona/mv/other.txt', '/home/daytona/mv/dst.txt'), DaytonaConflictError);
		await rejectsWith(() => sbx.fs.moveFiles('/home/daytona/mv/other.txt', '/home/daytona/nodir/x.txt'), DaytonaNotFoundError);
		await sbx.fs.setFilePermissions('/home/daytona/mv/dst.txt', { mode: '600', owner: 'root', group: 'root' });
		const d = await sbx.fs.getFileDetails('/home/daytona/mv/dst.txt');
		assert.equal(d.permissions, '0600');
		assert.equal(d.owner, '0');
		// The daemon sets the mode, then the owner; the chown clears set-ID bits
		// (`permissions` is Go's Perm(), without them; `mode` shows them).
		const mode = async () => (await sbx.fs.getFileDetails('/home/daytona/mv/dst.txt')).mode;
		await sbx.fs.setFilePermissions('/home/daytona/mv/dst.txt', { mode: '4755', owner: '0' });
		assert.equal(await mode(), '-rwxr-xr-x');
		await sbx.fs.setFilePermissions('/home/daytona/mv/dst.txt', { mode: '4755' });
		assert.equal(await mode(), 'urwxr-xr-x');
		// An upload over an existing file keeps its mode and owner (os.Create).
		await sbx.fs.uploadFile(Buffer.from('again'), '/home/daytona/mv/dst.txt');
		const kept = await sbx.fs.getFileDetails('/home/daytona/mv/dst.txt');
		assert.deepEqual([kept.mode, kept.owner, kept.size], ['urwxr-xr-x', '0', 5]);
		await rejectsWith(() => sbx.fs.deleteFile('/home/daytona/mv'), DaytonaValidationError);
		await sbx.fs.deleteFile('/home/daytona/mv', true);
		await rejectsWith(() => sbx.fs.getFileDetails('/home/daytona/mv'), DaytonaNotFoundError);
	});

	test('fs: find, search, replace', async () => {
		await sbx.fs.uploadFile(Buffer.from('alpha\nneedle here\n'), '/home/daytona/s/one.py');
		await sbx.fs.uploadFile(Buffer.from('beta\n'), '/home/daytona/s/two.txt');
		const found = await sbx.fs.findFiles('/home/daytona/s', 'needle');
		assert.deepEqual(found.map((m) => [m.file, m.line]), [['/home/daytona/s/one.py', 2]]);
		assert.deepEqual((await sbx.fs.searchFiles('/home/daytona/s', '*.py')).files, ['/home/daytona/s/one.py']);
		await sbx.fs.replaceInFiles(['/home/daytona/s/two.txt'], 'beta', 'gamma');
		assert.equal((await sbx.fs.downloadFile('/home/daytona/s/two.txt')).toString(), 'gamma\n');
	});

	test('process: output, cwd, envs, exit codes', async () => {
		const r = await sbx.process.executeCommand('echo "hi $FOO $BAR" && echo err >&2; exit 3', '/tmp', { BAR: 'baz' });
		assert.equal(r.exitCode, 3);
		assert.equal(r.result, 'hi bar baz\nerr\n');
		assert.equal((await sbx.process.executeCommand('pwd', '/tmp')).result, '/tmp\n');
		assert.equal((await sbx.process.executeCommand('pwd; whoami')).result, '/home/daytona\ndaytona\n');
		await sbx.fs.uploadFile(Buffer.from('seen'), '/home/daytona/seen.txt');
		assert.equal((await sbx.process.executeCommand('cat seen.txt')).result, 'seen');
	});

	test('process: timeout is DaytonaTimeoutError and kills the command', async () => {
		const t0 = Date.now();
		await rejectsWith(() => sbx.process.executeCommand('sleep 5; touch /tmp/survived', undefined, undefined, 1), DaytonaTimeoutError,
			(e) => assert.equal(e.statusCode, 408));
		assert.ok(Date.now() - t0 < 4000);
		await sleep(5000);
		assert.equal((await sbx.process.executeCommand('test -e /tmp/survived; echo $?')).result, '1\n');
	});

	test('process: codeRun python with argv and env, javascript, charts', async () => {
		const r = await sbx.process.codeRun('import sys, os\nprint("py", sys.argv[1:], os.environ["A"])', { argv: ['x', 'y'], env: { A: '1' } });
		assert.equal(r.exitCode, 0);
		assert.equal(r.result, "py ['x', 'y'] 1\n");
		const bad = await sbx.process.codeRun('raise SystemExit(4)');
		assert.equal(bad.exitCode, 4);
		const chart = await sbx.process.codeRun('import matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4])\nplt.title("t")\nplt.show()\nprint("done")');
		assert.equal(chart.result, 'done\n');
		assert.equal(chart.artifacts.charts.length, 1);
		assert.equal(chart.artifacts.charts[0].type, 'line');
		assert.equal(chart.artifacts.charts[0].title, 't');
		assert.equal(Buffer.from(chart.artifacts.charts[0].png, 'base64').subarray(1, 4).toString(), 'PNG');
		const js = await daytona.create({ language: 'typescript' });
		// the daemon's wrapper drops node's "-", so the arguments start at argv[1]
		const t = await js.process.codeRun('const n: number = 6;\nconsole.log(n * 7, process.argv.slice(1));', { argv: ['q'] });
		assert.equal(t.result, "42 [ 'q' ]\n");
		await js.delete();
	});

	test('sessions keep state; sync and async commands; logs', async () => {
		await sbx.process.createSession('s1');
		await sbx.process.executeSessionCommand('s1', { command: 'cd /tmp && export X=kept' });
		const r = await sbx.process.executeSessionCommand('s1', { command: 'echo $PWD $X; echo e >&2; false' });
		assert.equal(r.exitCode, 1);
		assert.equal(r.stdout, '/tmp kept\n');
		assert.equal(r.stderr, 'e\n');
		// 2 s of sleep and a polled end: the margins of a loaded 2-core machine.
		const a = await sbx.process.executeSessionCommand('s1', { command: 'sleep 2; echo bg', runAsync: true });
		assert.ok(a.cmdId);
		assert.equal((await sbx.process.getSessionCommand('s1', a.cmdId)).exitCode, undefined);
		let code;
		for (let i = 0; code === undefined && i < 100; i++) {
			await sleep(200);
			code = (await sbx.process.getSessionCommand('s1', a.cmdId)).exitCode;
		}
		assert.equal(code, 0);
		const logs = await sbx.process.getSessionCommandLogs('s1', a.cmdId);
		assert.equal(logs.stdout, 'bg\n');
		await sbx.process.deleteSession('s1');
		await rejectsWith(() => sbx.process.getSession('s1'), DaytonaNotFoundError);
	});

	test('preview link and autostop interval', async () => {
		const link = await sbx.getPreviewLink(3000);
		assert.equal(link.sandboxId, sbx.id);
		assert.match(link.url, new RegExp(`^http://3000-${sbx.id}\\.`));
		assert.ok(link.token.length > 8);
		await sbx.setAutostopInterval(30);
		assert.equal(sbx.autoStopInterval, 30);
		assert.equal((await daytona.get(sbx.id)).autoStopInterval, 30);
	});

	test('stop freezes, the toolbox refuses, start resumes with processes alive', async () => {
		await sbx.process.executeCommand('nohup sleep 300 >/dev/null 2>&1 & echo $! > /tmp/bg.pid');
		await sbx.stop();
		assert.equal(sbx.state, 'stopped');
		await rejectsWith(() => sbx.process.executeCommand('true'), DaytonaError, (e) => assert.equal(e.statusCode, 400));
		await sbx.start();
		assert.equal(sbx.state, 'started');
		const r = await sbx.process.executeCommand('kill -0 $(cat /tmp/bg.pid) && echo alive');
		assert.equal(r.result, 'alive\n');
	});
});

describe('fault switches', () => {
	let sbx;
	before(async () => {
		sbx = await daytona.create();
	});
	after(async () => {
		await fake.reset();
		await sbx.delete();
	});

	test('429 is DaytonaRateLimitError (the SDK does not retry statuses)', async () => {
		await fake.faults([{ kind: '429', count: 1, prefix: '/toolbox/' }]);
		assert.equal(await countDuring(fake, 'POST /toolbox/:id/process/execute', () =>
			rejectsWith(() => sbx.process.executeCommand('true'), DaytonaRateLimitError)), 1);
	});

	test('5xx: 500 and 503 map to their classes', async () => {
		await fake.faults([{ kind: '5xx', status: 500, count: 1, key: 'GET /api/sandbox/:idOrName' }]);
		await rejectsWith(() => daytona.get(sbx.id), DaytonaInternalServerError);
		await fake.faults([{ kind: '5xx', status: 503, count: 1, key: 'GET /api/sandbox/:idOrName' }]);
		await rejectsWith(() => daytona.get(sbx.id), DaytonaServiceUnavailableError);
	});

	test('drop: idempotent GETs are retried, a POST fails with DaytonaConnectionError', async () => {
		await fake.faults([{ kind: 'drop', count: 1, key: 'GET /api/sandbox/:idOrName' }]);
		assert.equal(await countDuring(fake, 'GET /api/sandbox/:idOrName', () => daytona.get(sbx.id)), 2);
		await fake.faults([{ kind: 'drop', count: 1, key: 'POST /toolbox/:id/process/execute' }]);
		await rejectsWith(() => sbx.process.executeCommand('true'), DaytonaConnectionError);
	});

	test('slow: a reply later than the request timeout is DaytonaTimeoutError', async () => {
		const impatient = new Daytona({ apiKey: 'test-key', apiUrl: `${fake.url}/api`, useDeprecatedPolling: true, requestTimeoutMs: 500 });
		await fake.faults([{ kind: 'slow', delayMs: 3000, count: 1, key: 'GET /api/sandbox/:idOrName' }]);
		await rejectsWith(() => impatient.get(sbx.id), DaytonaTimeoutError);
	});

	test('vanish fault: API and toolbox answer 404', async () => {
		await fake.faults([{ kind: 'vanish', count: 1, prefix: '/toolbox/' }]);
		await rejectsWith(() => sbx.fs.listFiles('/'), DaytonaNotFoundError);
		await fake.faults([{ kind: 'vanish', count: 1, prefix: '/api/' }]);
		await rejectsWith(() => sbx.refreshData(), DaytonaNotFoundError);
	});

	test('vanish admin: a sandbox deleted behind the SDK\'s back', async () => {
		const gone = await daytona.create();
		await fake.admin('POST', `/_fake/sandboxes/${gone.id}/vanish`);
		await rejectsWith(() => gone.process.executeCommand('true'), DaytonaNotFoundError);
		await rejectsWith(() => daytona.get(gone.id), DaytonaNotFoundError);
	});

	test('latency and counters', async () => {
		await fake.admin('DELETE', '/_fake/counters');
		await fake.faults([], 300);
		const t0 = Date.now();
		await sbx.fs.listFiles('/home/daytona');
		assert.ok(Date.now() - t0 >= 300);
		await fake.faults([], 0);
		await sbx.fs.downloadFile('/etc/hostname');
		const c = await fake.counters();
		assert.equal(c['GET /toolbox/:id/files'], 1);
		assert.equal(c['POST /toolbox/:id/files/bulk-download'], 1);
	});
});

describe('toolbox HTTP details', () => {
	test('download honours Range; bulk-download uses the daemon\'s boundary', async () => {
		const sbx = await daytona.create();
		await sbx.fs.uploadFile(Buffer.from('0123456789'), '/home/daytona/r.txt');
		const h = { authorization: 'Bearer test-key' };
		const base = `${fake.url}/toolbox/${sbx.id}`;
		const r = await fetch(`${base}/files/download?path=%2Fhome%2Fdaytona%2Fr.txt`, { headers: { ...h, range: 'bytes=-3' } });
		assert.equal(r.status, 206);
		assert.equal(r.headers.get('content-range'), 'bytes 7-9/10');
		assert.equal(await r.text(), '789');
		const b = await fetch(`${base}/files/bulk-download`, {
			method: 'POST', headers: { ...h, 'content-type': 'application/json' }, body: JSON.stringify({ paths: ['/home/daytona/r.txt'] }),
		});
		assert.equal(b.headers.get('content-type'), 'multipart/form-data; boundary=DAYTONA-FILE-BOUNDARY');
		assert.match(await b.text(), /^--DAYTONA-FILE-BOUNDARY\r\nContent-Disposition: form-data; name="file"; filename="\/home\/daytona\/r.txt"/);
		await sbx.delete();
	});
});
