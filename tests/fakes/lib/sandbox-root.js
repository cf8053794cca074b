'use strict';
/*
 * One sandbox's root filesystem and the processes that run in it, shared by
 * both fakes.  The root is an overlay of the host's "/" with a writable
 * upper layer on a tmpfs of the sandbox's disk size (so a full disk really
 * gives ENOSPC), with the host's private places (/root, /home, /tmp, /work,
 * ...) masked by opaque directories, and /proc and /dev bound in.  Commands
 * run for real under chroot.  Processes are found by their root directory
 * (/proc/PID/root), so background jobs that left their process group are
 * still frozen on pause and killed on delete.
 *
 * With memoryMb / cpuMillis it also gets cgroup (v1) limits, best effort:
 * where the hierarchies are missing or read-only the sandbox runs without.
 *
 * It is not a security boundary: the fake runs as root on a test machine,
 * and paths are resolved inside the root only so that a sandbox's symlink
 * never makes the fake touch the host's files.
 */
const fs = require('fs');
const path = require('path');
const cp = require('child_process');

const MASKS = ['/root', '/home', '/tmp', '/var/tmp', '/work', '/mnt', '/run/user'];
const STICKY = new Set(['/tmp', '/var/tmp']);
const BASE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

function run(cmd, args) {
	const r = cp.spawnSync(cmd, args, { encoding: 'utf8' });
	if (r.status !== 0)
		throw new Error(`${cmd} ${args.join(' ')}: ${(r.stderr || r.error || '').toString().trim()}`);
}

function parseColonFile(file) {
	try {
		return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => l.split(':'));
	} catch (e) {
		return [];
	}
}

/* The sandbox's own user gets the first uid the host leaves free, so that it owns nothing of the host. */
let freeUid = null;
function pickFreeUid() {
	if (freeUid === null) {
		const used = new Set(parseColonFile('/etc/passwd').map((f) => Number(f[2])));
		for (const f of parseColonFile('/etc/group'))
			used.add(Number(f[2]));
		freeUid = 1000;
		while (used.has(freeUid))
			freeUid++;
	}
	return freeUid;
}

class SandboxRoot {
	/* opts: {dataDir, id, diskMb, userName, home, memoryMb?, cpuMillis?} */
	constructor(opts) {
		this.id = opts.id;
		this.dir = path.join(opts.dataDir, opts.id);
		this.rootDir = path.join(this.dir, 'root');
		this.diskMb = opts.diskMb;
		this.userName = opts.userName;
		this.home = opts.home;
		this.frozen = false;
		this.limits = { memory: opts.memoryMb ? [['memory.limit_in_bytes', opts.memoryMb * 1024 * 1024]] : null,
			cpu: opts.cpuMillis ? [['cpu.cfs_period_us', 100000], ['cpu.cfs_quota_us', opts.cpuMillis * 100]] : null };
		this.cgroups = [];
	}

	/* One cgroup per limited controller; its directory is remembered only once it is set up. */
	makeCgroups() {
		for (const [ctl, settings] of Object.entries(this.limits)) {
			if (!settings)
				continue;
			const dir = `/sys/fs/cgroup/${ctl}/sbxfs-fake-${this.id}`;
			try {
				fs.mkdirSync(dir);
				for (const [file, value] of settings)
					fs.writeFileSync(path.join(dir, file), String(value));
				this.cgroups.push(dir);
			} catch (e) {
				try {
					fs.rmdirSync(dir);
				} catch (e2) { /* never made */ }
			}
		}
	}

	create() {
		const { dir } = this;
		fs.mkdirSync(dir, { recursive: true });
		run('mount', ['-t', 'tmpfs', '-o', `size=${this.diskMb}m,mode=0755`, 'tmpfs', dir]);
		this.mounted = true;
		for (const d of ['upper', 'work', 'root'])
			fs.mkdirSync(path.join(dir, d));
		const masks = MASKS.filter((m) => fs.existsSync(m)).map((m) => path.join(dir, 'upper', m));
		for (const m of masks) {
			fs.mkdirSync(m, { recursive: true });
			fs.chmodSync(m, STICKY.has(m.slice(dir.length + 6)) ? 0o1777 : 0o755);
		}
		/* Node has no setxattr; python3 is required by the kernels anyway. */
		run('/usr/bin/python3', ['-c', 'import os,sys\nfor p in sys.argv[1:]: os.setxattr(p, "trusted.overlay.opaque", b"y")', ...masks]);
		run('mount', ['-t', 'overlay', 'overlay', '-o',
			`lowerdir=/,upperdir=${dir}/upper,workdir=${dir}/work`, this.rootDir]);
		run('mount', ['--bind', '/proc', path.join(this.rootDir, 'proc')]);
		run('mount', ['--rbind', '/dev', path.join(this.rootDir, 'dev')]);
		this.addUser();
		this.makeCgroups();
	}

	addUser() {
		const uid = pickFreeUid();
		const name = this.userName;
		fs.appendFileSync(path.join(this.rootDir, 'etc/passwd'), `${name}:x:${uid}:${uid}::${this.home}:/bin/bash\n`);
		fs.appendFileSync(path.join(this.rootDir, 'etc/group'), `${name}:x:${uid}:\n`);
		const home = path.join(this.rootDir, this.home);
		fs.mkdirSync(home, { recursive: true });
		fs.chownSync(home, uid, uid);
	}

	/* {name, uid, gid, home} for a user of the sandbox's own /etc/passwd, or null. */
	user(name) {
		name = name || this.userName;
		const f = parseColonFile(path.join(this.rootDir, 'etc/passwd')).find((x) => x[0] === name);
		return f ? { name, uid: Number(f[2]), gid: Number(f[3]), home: f[5] || '/' } : null;
	}

	/* Name of a uid/gid as the sandbox knows it, else the number as a string. */
	idName(id, group) {
		const file = path.join(this.rootDir, group ? 'etc/group' : 'etc/passwd');
		const f = parseColonFile(file).find((x) => Number(x[2]) === id);
		return f ? f[0] : String(id);
	}

	/* uid (or gid) of a sandbox user (or group) name, or null. */
	lookupId(name, group) {
		const file = path.join(this.rootDir, group ? 'etc/group' : 'etc/passwd');
		const f = parseColonFile(file).find((x) => x[0] === name);
		return f ? Number(f[2]) : null;
	}

	/*
	 * Maps an absolute sandbox path to a host path under the root, resolving
	 * symlinks relative to the root (like openat2's RESOLVE_IN_ROOT).  With
	 * follow=false a symlink in the last component is left alone.  Missing
	 * components are kept literally.  Returns {host, path}; throws ELOOP.
	 */
	resolve(p, follow = true) {
		const todo = String(p).split('/').filter(Boolean);
		let cur = [];
		let hops = 0;
		while (todo.length) {
			const c = todo.shift();
			if (c === '.')
				continue;
			if (c === '..') {
				cur.pop();
				continue;
			}
			const host = path.join(this.rootDir, ...cur, c);
			let st = null;
			try {
				st = fs.lstatSync(host);
			} catch (e) { /* missing: kept literally */ }
			if (st && st.isSymbolicLink() && (todo.length || follow)) {
				if (++hops > 40) {
					const e = new Error(`too many levels of symbolic links: ${p}`);
					e.code = 'ELOOP';
					throw e;
				}
				const t = fs.readlinkSync(host);
				if (t.startsWith('/'))
					cur = [];
				todo.unshift(...t.split('/').filter(Boolean));
				continue;
			}
			cur.push(c);
		}
		return { host: path.join(this.rootDir, ...cur), path: '/' + cur.join('/') };
	}

	/* A clean environment for a process of user u: the fake's own environment never leaks in. */
	baseEnv(u, extra) {
		return Object.assign({
			PATH: BASE_PATH, HOME: u.home, USER: u.name, LOGNAME: u.name,
			SHELL: '/bin/bash', LANG: 'C.UTF-8', PWD: u.home,
		}, extra || {});
	}

	/*
	 * Runs argv inside the root as user u, in the sandbox directory cwd, as
	 * the leader of a new session (so its process group can be signalled).
	 * chroot(8) always changes to "/", hence the small sh that cd's first.
	 * With cgroups, an outer sh joins them before anything can fork.
	 */
	spawn(argv, { u, env, cwd, stdio }) {
		let args = ['/usr/sbin/chroot', `--userspec=${u.uid}:${u.gid}`, this.rootDir,
			'/bin/sh', '-c', 'cd "$1" || exit 126; shift; exec "$@"', 'sh', cwd || u.home, ...argv];
		if (this.cgroups.length) {
			args = ['/bin/sh', '-c', 'while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 126; shift; done; shift; exec "$@"',
				'sh', ...this.cgroups, '--', ...args];
		}
		const env2 = Object.assign({}, env, { PWD: cwd || u.home });
		return cp.spawn(args[0], args.slice(1), { env: env2, stdio: stdio || 'pipe', detached: true });
	}

	pids() {
		const out = [];
		for (const name of fs.readdirSync('/proc')) {
			if (!/^\d+$/.test(name))
				continue;
			try {
				if (fs.readlinkSync(`/proc/${name}/root`) === this.rootDir)
					out.push(Number(name));
			} catch (e) { /* gone, or a kernel thread */ }
		}
		return out;
	}

	signalAll(sig) {
		for (const pid of this.pids()) {
			try {
				process.kill(pid, sig);
			} catch (e) { /* already gone */ }
		}
	}

	freeze() {
		this.frozen = true;
		this.signalAll('SIGSTOP');
	}

	thaw() {
		this.frozen = false;
		this.signalAll('SIGCONT');
	}

	/* Kills every process, unmounts everything and deletes the data.  Idempotent. */
	async destroy() {
		if (this.destroyed)
			return;
		this.destroyed = true;
		for (let i = 0; i < 50; i++) {
			const left = this.pids();
			if (!left.length)
				break;
			for (const pid of left) {
				try {
					process.kill(pid, 'SIGKILL');
					process.kill(pid, 'SIGCONT');
				} catch (e) { /* gone */ }
			}
			await new Promise((r) => setTimeout(r, 20));
		}
		/* cgroups outlive mount namespaces: an exiting task may hold one a moment longer, so retry. */
		for (const dir of this.cgroups) {
			for (let i = 0; i < 50; i++) {
				try {
					fs.rmdirSync(dir);
					break;
				} catch (e) {
					if (e.code === 'ENOENT')
						break;
					await new Promise((r) => setTimeout(r, 20));
				}
			}
		}
		this.cgroups = [];
		if (this.mounted) {
			cp.spawnSync('umount', ['-R', '-l', this.rootDir]);
			cp.spawnSync('umount', ['-l', this.dir]);
			this.mounted = false;
		}
		fs.rmSync(this.dir, { recursive: true, force: true });
	}
}

module.exports = { SandboxRoot, BASE_PATH };
