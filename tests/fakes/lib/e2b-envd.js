'use strict';
/*
 * Fake envd, files half: GET /health, GET/POST /files and the
 * filesystem.Filesystem Connect service (Stat, ListDir, MakeDir, Move,
 * Remove, WatchDir and the polling watchers), per e2b.md §2.3 and §2.6.
 * Paths are sandbox paths, resolved inside the sandbox root; relative ones
 * and "~" are taken from the acting user's home as envd does.
 */
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const crypto = require('crypto');
const { HttpError, sendJson, sendEmpty, headerValue } = require('./common');
const { RpcError, ServerStream, parseEnvelope, deadlineMs, unary } = require('./connect');
const { parseMultipart } = require('./multipart');
const { goModeString, mtimeNs, protoTime, walk, mkdirsAs, serveFile, lstatOrNull } = require('./fsinfo');

const MIME = {
	'.txt': 'text/plain; charset=utf-8', '.json': 'application/json', '.html': 'text/html; charset=utf-8',
	'.png': 'image/png', '.svg': 'image/svg+xml', '.js': 'text/javascript; charset=utf-8',
	'.py': 'text/x-python; charset=utf-8', '.csv': 'text/csv; charset=utf-8',
};

/* The acting user of an RPC: HTTP Basic username, else the template user. */
function rpcUser(ctx) {
	const h = ctx.req.headers.authorization || '';
	let name = null;
	if (/^basic /i.test(h))
		name = Buffer.from(h.slice(6), 'base64').toString('utf8').split(':')[0];
	const u = ctx.sb.root.user(name || undefined);
	if (!u)
		throw new RpcError('unauthenticated', `invalid username: '${name}'`);
	return u;
}

/* envd's path rule: "~" and "~/x" expand, relative paths hang off the user's home. */
function absPath(p, u) {
	p = p || '';
	if (p === '~' || p.startsWith('~/'))
		p = u.home + p.slice(1);
	else if (p.startsWith('~'))
		throw new RpcError('invalid_argument', `path '${p}' is invalid: only the current user's home can be referenced`);
	if (!p.startsWith('/'))
		p = path.posix.join(u.home, p);
	return path.posix.normalize(p);
}

const TYPES = { file: 'FILE_TYPE_FILE', dir: 'FILE_TYPE_DIRECTORY', symlink: 'FILE_TYPE_SYMLINK' };

/*
 * The FileType of a stat: envd's getEntryType has no value for a fifo, a
 * device or a socket (UNSPECIFIED, which protobuf JSON leaves out).
 */
function entryType(st) {
	if (st.isDirectory())
		return TYPES.dir;
	if (st.isFile())
		return TYPES.file;
	return st.isSymbolicLink() ? TYPES.symlink : undefined;
}

/*
 * EntryInfo (e2b.md §2.6) as envd builds it from an lstat: `size`,
 * `permissions` (Go's FileMode.String()) and `modifiedTime` are the entry's
 * own (a symlink's size is its text's length, its time the link's, as
 * envd's entryInfo takes ModTime() of its lstat), owner and group names; for a symlink,
 * `type` and `mode` describe the target and symlinkTarget is the
 * resolved path (a loop or dangling link: a symlink, no error).
 */
function entryInfo(sb, sandboxPath, host, lst) {
	lst = lst || fs.lstatSync(host);
	let st = lst;
	let symlinkTarget;
	if (lst.isSymbolicLink()) {
		let r = null;
		try {
			r = sb.root.resolve(sandboxPath, true);
		} catch (e) {
			/* a loop: envd lists the entry as a symlink, without an error */
			if (e.code !== 'ELOOP')
				throw e;
		}
		st = null;
		if (r) {
			symlinkTarget = r.path;
			try {
				st = fs.statSync(r.host);
			} catch (e) {
				st = null;
			}
		}
	}
	const e = {
		name: path.posix.basename(sandboxPath),
		type: st ? entryType(st) : TYPES.symlink,
		path: sandboxPath,
		size: String(lst.size),
		mode: (st || lst).mode & 0o777,
		permissions: goModeString(lst),
		owner: sb.root.idName(lst.uid, false),
		group: sb.root.idName(lst.gid, true),
		modifiedTime: protoTime(lst.mtime, mtimeNs(host, false)),
	};
	if (symlinkTarget !== undefined)
		e.symlinkTarget = symlinkTarget;
	return e;
}

/* "v1_" + base64(sha256("path:operation:username:token[:expiration]")), '=' stripped (e2b.md §2.3). */
function signatureOk(ctx, sb) {
	const q = ctx.query;
	const sig = q.get('signature');
	if (!sig)
		return false;
	const exp = q.get('signature_expiration');
	if (exp && Number(exp) * 1000 < Date.now())
		return false;
	const op = ctx.req.method === 'GET' ? 'read' : 'write';
	let s = `${q.get('path')}:${op}:${q.get('username') || ''}:${sb.token}`;
	if (exp)
		s += `:${exp}`;
	return sig === 'v1_' + crypto.createHash('sha256').update(s).digest('base64').replace(/=+$/, '');
}

function filesUser(ctx) {
	const name = ctx.query.get('username');
	const u = ctx.sb.root.user(name || undefined);
	if (!u)
		throw new HttpError(401, `error looking up user '${name}': user: unknown user ${name}`);
	return u;
}

/* GET /files: served like Go's http.ServeContent; gzip only when asked for exactly that, as the SDK does. */
async function getFile(ctx) {
	const u = filesUser(ctx);
	const p = absPath(ctx.query.get('path'), u);
	const r = ctx.sb.root.resolve(p);
	let st;
	try {
		st = fs.statSync(r.host);
	} catch (e) {
		throw new HttpError(404, `path '${p}' does not exist`);
	}
	if (st.isDirectory())
		throw new HttpError(400, `path '${p}' is a directory`);
	serveFile(ctx.req, ctx.res, r.host, st, {
		'Content-Type': MIME[path.extname(p).toLowerCase()] || 'application/octet-stream',
		'Content-Disposition': headerValue(`inline; filename=${path.posix.basename(p)}`), Vary: 'Accept-Encoding',
	}, ctx.req.headers['accept-encoding'] === 'gzip');
}

function writeAs(sb, p, data, u) {
	const r = sb.root.resolve(p);
	const st = lstatOrNull(r.host);
	if (st && st.isDirectory())
		throw new HttpError(400, `path '${p}' is a directory`);
	try {
		mkdirsAs(path.dirname(r.host), u);
		fs.writeFileSync(r.host, data);
		fs.chownSync(r.host, u.uid, u.gid);
	} catch (e) {
		if (e.code === 'ENOSPC' || e.code === 'EDQUOT')
			throw new HttpError(507, 'not enough disk space available');
		if (e.code === 'ENOTDIR' || e.code === 'EEXIST')
			throw new HttpError(400, `path '${p}' is invalid: ${e.message}`);
		throw e;
	}
	return { name: path.posix.basename(p), type: 'file', path: p };
}

/* POST /files: multipart (part "file", target = path param or the part's filename) or raw octet-stream. */
async function postFile(ctx) {
	const u = filesUser(ctx);
	const ct = (ctx.req.headers['content-type'] || '').toLowerCase();
	let body = await ctx.body();
	const qpath = ctx.query.get('path');
	const out = [];
	if (ct.startsWith('multipart/form-data')) {
		let parts;
		try {
			parts = parseMultipart(body, ctx.req.headers['content-type']).filter((x) => x.name === 'file');
		} catch (e) {
			throw new HttpError(400, `error parsing multipart form: ${e.message}`);
		}
		if (qpath && parts.length > 1)
			throw new HttpError(400, 'cannot upload several files to one path');
		const seen = new Set();
		for (const part of parts) {
			const p = absPath(qpath || part.filename, u);
			if (seen.has(p))
				throw new HttpError(400, `cannot upload two files to the same path '${p}'`);
			seen.add(p);
			out.push(writeAs(ctx.sb, p, part.data, u));
		}
	} else if (ct.startsWith('application/octet-stream')) {
		if (!qpath)
			throw new HttpError(400, 'path is required for an octet-stream upload');
		if ((ctx.req.headers['content-encoding'] || '').toLowerCase() === 'gzip')
			body = zlib.gunzipSync(body);
		out.push(writeAs(ctx.sb, absPath(qpath, u), body, u));
	} else {
		throw new HttpError(400, `unsupported content type: ${ct}`);
	}
	if (!out.length)
		throw new HttpError(400, 'no file in the request');
	sendJson(ctx.res, 200, out);
}

/* ---- filesystem.Filesystem ---- */

function rpcPath(ctx, p) {
	return absPath(p, rpcUser(ctx));
}

function osRpcError(e, what) {
	if (e instanceof RpcError)
		return e;
	if (e.code === 'ELOOP')
		return new RpcError('failed_precondition', e.message);
	if (e.code === 'ENOSPC')
		return new RpcError('resource_exhausted', `not enough disk space: ${what}`);
	return new RpcError('internal', `${what}: ${e.message}`);
}

function stat(ctx, b) {
	const p = rpcPath(ctx, b.path);
	const r = ctx.sb.root.resolve(p, false);
	const lst = lstatOrNull(r.host);
	if (!lst)
		throw new RpcError('not_found', `file not found: lstat ${p}: no such file or directory`);
	return { entry: entryInfo(ctx.sb, p, r.host, lst) };
}

function listDir(ctx, b) {
	const p = rpcPath(ctx, b.path);
	const r = ctx.sb.root.resolve(p, true);
	const st = lstatOrNull(r.host);
	if (!st)
		throw new RpcError('not_found', `path not found: ${p}`);
	if (!st.isDirectory())
		throw new RpcError('invalid_argument', `path is not a directory: ${p}`);
	const entries = [];
	walk(r.host, p, Number(b.depth) > 0 ? Number(b.depth) : 1, (sp, hp, lst) => {
		entries.push(entryInfo(ctx.sb, sp, hp, lst));
	});
	return { entries };
}

function makeDir(ctx, b) {
	const u = rpcUser(ctx);
	const p = absPath(b.path, u);
	const r = ctx.sb.root.resolve(p, true);
	const st = lstatOrNull(r.host);
	if (st && st.isDirectory())
		throw new RpcError('already_exists', `directory already exists: ${p}`);
	if (st)
		throw new RpcError('invalid_argument', `path already exists but it is not a directory: ${p}`);
	try {
		mkdirsAs(r.host, u);
	} catch (e) {
		if (e.code === 'ENOTDIR' || e.code === 'EEXIST')
			throw new RpcError('invalid_argument', `a parent of ${p} is not a directory`);
		throw osRpcError(e, `error creating directory ${p}`);
	}
	return { entry: entryInfo(ctx.sb, p, r.host) };
}

function move(ctx, b) {
	const u = rpcUser(ctx);
	const src = absPath(b.source, u);
	const dst = absPath(b.destination, u);
	const rs = ctx.sb.root.resolve(src, false);
	const rd = ctx.sb.root.resolve(dst, false);
	if (!lstatOrNull(rs.host))
		throw new RpcError('not_found', `source file not found: ${src}`);
	try {
		mkdirsAs(path.dirname(rd.host), u);
		fs.renameSync(rs.host, rd.host);
	} catch (e) {
		throw osRpcError(e, `error renaming ${src} to ${dst}`);
	}
	return { entry: entryInfo(ctx.sb, dst, rd.host) };
}

function remove(ctx, b) {
	const p = rpcPath(ctx, b.path);
	const r = ctx.sb.root.resolve(p, false);
	if (r.path === '/')
		throw new RpcError('invalid_argument', 'refusing to remove /');
	try {
		fs.rmSync(r.host, { recursive: true, force: true });
	} catch (e) {
		throw osRpcError(e, `error removing ${p}`);
	}
	return {};
}

/*
 * Watching by polling: fs.watch cannot recurse on Node 18, and a poll also
 * sees what the sandbox's own processes did.  A snapshot maps a relative
 * name to {ino, mtimeMs, size, mode}; a vanished name whose inode turns up
 * under a new name is a RENAME of the old name plus a CREATE of the new.
 */
function snapshot(host, recursive) {
	const snap = new Map();
	walk(host, '', recursive ? Infinity : 1, (rel, hp, lst) => {
		snap.set(rel.replace(/^\//, ''), { ino: lst.ino, mtimeMs: lst.mtimeMs, size: lst.size, mode: lst.mode });
	});
	return snap;
}

function diff(before, after) {
	const ev = [];
	const created = [...after.keys()].filter((n) => !before.has(n));
	const createdIno = new Map(created.map((n) => [after.get(n).ino, n]));
	for (const [n, o] of before) {
		const a = after.get(n);
		if (!a)
			ev.push({ name: n, type: createdIno.has(o.ino) ? 'EVENT_TYPE_RENAME' : 'EVENT_TYPE_REMOVE' });
		else if (a.ino !== o.ino)
			ev.push({ name: n, type: 'EVENT_TYPE_CREATE' });
		else if (a.mtimeMs !== o.mtimeMs || a.size !== o.size)
			ev.push({ name: n, type: 'EVENT_TYPE_WRITE' });
		else if (a.mode !== o.mode)
			ev.push({ name: n, type: 'EVENT_TYPE_CHMOD' });
	}
	for (const n of created)
		ev.push({ name: n, type: 'EVENT_TYPE_CREATE' });
	return ev;
}

/* Starts a poller; emit(events[]) is called with each non-empty batch. Returns stop(). */
function startWatch(ctx, b, emit) {
	const p = rpcPath(ctx, b.path);
	const r = ctx.sb.root.resolve(p, true);
	const st = lstatOrNull(r.host);
	if (!st)
		throw new RpcError('not_found', `path ${p} not found`);
	if (!st.isDirectory())
		throw new RpcError('invalid_argument', `path ${p} not a directory`);
	let snap = snapshot(r.host, b.recursive);
	const timer = setInterval(() => {
		const next = snapshot(r.host, b.recursive);
		const ev = diff(snap, next);
		snap = next;
		if (b.includeEntry) {
			for (const e of ev) {
				if (e.type !== 'EVENT_TYPE_REMOVE' && e.type !== 'EVENT_TYPE_RENAME') {
					try {
						e.entry = entryInfo(ctx.sb, path.posix.join(p, e.name), path.join(r.host, e.name));
					} catch (err) { /* gone again */ }
				}
			}
		}
		if (ev.length)
			emit(ev);
	}, 150);
	return () => clearInterval(timer);
}

async function watchDir(ctx) {
	const req = parseEnvelope(await ctx.body());
	const stream = new ServerStream(ctx, { keepalive: {} });
	let stop = () => {};
	let deadline = null;
	const finish = (err) => {
		stop();
		clearTimeout(deadline);
		ctx.sb.watchers.delete(stream);
		stream.end(err);
	};
	try {
		stop = startWatch(ctx, req, (evs) => evs.forEach((e) => stream.send({ filesystem: e })));
	} catch (e) {
		return finish(e instanceof RpcError ? e : osRpcError(e, 'watch'));
	}
	stream.send({ start: {} });
	ctx.sb.watchers.set(stream, finish);
	stream.onClose = () => finish();
	const ms = deadlineMs(ctx.req);
	if (ms)
		deadline = setTimeout(() => finish(new RpcError('deadline_exceeded', 'context deadline exceeded')), ms);
}

function stopWatchers(sb) {
	for (const finish of [...sb.watchers.values()])
		finish(new RpcError('unavailable', 'sandbox is not running'));
	sb.watchers.clear();
	for (const w of (sb.pollWatchers || new Map()).values())
		w.stop();
}

function register(server, svc) {
	server.route('GET', '/health', svc.gate('none', async (ctx) => {
		if (svc.routedPort(ctx.req) === 49999)
			return sendJson(ctx.res, 200, 'OK');
		sendEmpty(ctx.res, 204);
	}));
	server.route('GET', '/files', svc.gate('files', getFile));
	server.route('POST', '/files', svc.gate('files', postFile));
	const rpc = (name, fn) => server.route('POST', `/filesystem.Filesystem/${name}`, svc.gate('token', unary(fn)));
	rpc('Stat', stat);
	rpc('ListDir', listDir);
	rpc('MakeDir', makeDir);
	rpc('Move', move);
	rpc('Remove', remove);
	rpc('CreateWatcher', (ctx, b) => {
		const sb = ctx.sb;
		sb.pollWatchers = sb.pollWatchers || new Map();
		const id = crypto.randomUUID();
		const w = { events: [] };
		w.stop = startWatch(ctx, b, (evs) => w.events.push(...evs));
		sb.pollWatchers.set(id, w);
		return { watcherId: id };
	});
	const watcher = (ctx, b) => {
		const w = (ctx.sb.pollWatchers || new Map()).get(b.watcherId);
		if (!w)
			throw new RpcError('not_found', `watcher with id ${b.watcherId} not found`);
		return w;
	};
	rpc('GetWatcherEvents', (ctx, b) => {
		const w = watcher(ctx, b);
		return { events: w.events.splice(0) };
	});
	rpc('RemoveWatcher', (ctx, b) => {
		watcher(ctx, b).stop();
		ctx.sb.pollWatchers.delete(b.watcherId);
		return {};
	});
	server.route('POST', '/filesystem.Filesystem/WatchDir', svc.gate('token', watchDir));
}

module.exports = { register, signatureOk, stopWatchers, absPath, rpcUser };
