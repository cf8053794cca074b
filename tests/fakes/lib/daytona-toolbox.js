'use strict';
/*
 * Fake Daytona toolbox, files half (daytona.md §2.1–2.3): listing with
 * depth, info, folder, delete, move, permissions, find / search / replace,
 * raw download with Range, bulk-download (the daemon's exact multipart
 * format), bulk-upload, upload and upload-v2, plus the info endpoints.
 * Paths are resolved inside the sandbox root; relative ones hang off the
 * work directory (the home).  Files are written as the sandbox user.
 */
const fs = require('fs');
const path = require('path');
const { HttpError, sendJson, sendEmpty, headerValue } = require('./common');
const { parseMultipart, buildMultipart } = require('./multipart');
const { goModeString, goTimeString, mtimeNs, rfc3339, walk, mkdirsAs, serveFile, lstatOrNull } = require('./fsinfo');

const BOUNDARY = 'DAYTONA-FILE-BOUNDARY';
const TYPES = {
	'.txt': 'text/plain; charset=utf-8', '.json': 'application/json', '.html': 'text/html; charset=utf-8',
	'.png': 'image/png', '.py': 'text/x-python; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
};

const notFound = (p) => new HttpError(404, `file not found: ${p}`, { code: 'FILE_NOT_FOUND' });

function abs(sb, p) {
	if (p === undefined || p === null || p === '')
		return sb.root.user().home;
	return path.posix.normalize(p.startsWith('/') ? p : path.posix.join(sb.root.user().home, p));
}

function need(ctx, name) {
	const v = ctx.query.get(name);
	if (!v)
		throw new HttpError(400, `${name} is required`, { code: 'BAD_REQUEST' });
	return v;
}

/* The daemon's FileInfo: owner/group as numeric strings, permissions as 4-digit octal. */
function fileInfo(p, st, ns) {
	return {
		name: path.posix.basename(p) || '/', path: p, size: st.size, mode: goModeString(st),
		permissions: (st.mode & 0o777).toString(8).padStart(4, '0'),
		modTime: goTimeString(st.mtime, ns), modifiedAt: rfc3339(st.mtime, ns), isDir: st.isDirectory(),
		owner: String(st.uid), group: String(st.gid),
	};
}

/* Throws the daemon's ENOSPC / EACCES answers; anything else is a 500. */
function osError(e, p) {
	if (e instanceof HttpError)
		return e;
	if (e.code === 'ENOENT')
		return notFound(p);
	if (e.code === 'EACCES' || e.code === 'EPERM')
		return new HttpError(403, `permission denied: ${p}`, { code: 'FILE_ACCESS_DENIED' });
	if (e.code === 'ENOSPC')
		return new HttpError(507, `no space left on device: ${p}`, { code: 'INTERNAL_SERVER_ERROR' });
	return new HttpError(500, `${e.message}`);
}

function writeFileAs(sb, p, data) {
	const u = sb.root.user();
	const r = sb.root.resolve(p);
	const st = lstatOrNull(r.host);
	if (st && st.isDirectory())
		throw new HttpError(400, `path is a directory: ${p}`, { code: 'INVALID_FILE_PATH' });
	try {
		mkdirsAs(path.dirname(r.host), u);
		fs.writeFileSync(r.host, data);
		/* The daemon's os.Create: a new file is 0666 &^ umask 022 and the
		 * daemon's user's; an existing one keeps its inode, mode and owner. */
		if (!st) {
			fs.chmodSync(r.host, 0o644);
			fs.chownSync(r.host, u.uid, u.gid);
		}
	} catch (e) {
		throw osError(e, p);
	}
	return data.length;
}

function list(ctx) {
	const sb = ctx.sb;
	const p = abs(sb, ctx.query.get('path'));
	const r = sb.root.resolve(p);
	const st = lstatOrNull(r.host);
	if (!st)
		throw notFound(p);
	if (!st.isDirectory())
		throw new HttpError(400, `not a directory: ${p}`, { code: 'BAD_REQUEST' });
	const depth = Math.max(1, Number(ctx.query.get('depth')) || 1);
	const out = [];
	walk(r.host, p, depth, (sp, hp, lst) => out.push(fileInfo(sp, lst, mtimeNs(hp, false))));
	sendJson(ctx.res, 200, out);
}

function info(ctx) {
	const p = abs(ctx.sb, need(ctx, 'path'));
	let st, host;
	try {
		host = ctx.sb.root.resolve(p).host;
		st = fs.statSync(host);
	} catch (e) {
		throw osError(e, p);
	}
	sendJson(ctx.res, 200, fileInfo(p, st, mtimeNs(host, true)));
}

function folder(ctx) {
	const sb = ctx.sb;
	const p = abs(sb, need(ctx, 'path'));
	const mode = parseInt(ctx.query.get('mode') || '755', 8);
	const r = sb.root.resolve(p);
	const st = lstatOrNull(r.host);
	if (st && !st.isDirectory())
		throw new HttpError(400, `path exists and is not a directory: ${p}`, { code: 'BAD_REQUEST' });
	try {
		if (!st) {
			mkdirsAs(r.host, sb.root.user());
			fs.chmodSync(r.host, mode);
		}
	} catch (e) {
		throw osError(e, p);
	}
	sendEmpty(ctx.res, 201);
}

function remove(ctx) {
	const p = abs(ctx.sb, need(ctx, 'path'));
	const r = ctx.sb.root.resolve(p, false);
	const st = lstatOrNull(r.host);
	if (!st)
		throw notFound(p);
	if (st.isDirectory() && ctx.query.get('recursive') !== 'true')
		throw new HttpError(400, 'cannot delete directory without recursive flag', { code: 'BAD_REQUEST' });
	if (r.path === '/')
		throw new HttpError(400, 'refusing to delete /', { code: 'BAD_REQUEST' });
	fs.rmSync(r.host, { recursive: true, force: true });
	sendEmpty(ctx.res, 204);
}

function move(ctx) {
	const sb = ctx.sb;
	const src = abs(sb, need(ctx, 'source'));
	const dst = abs(sb, need(ctx, 'destination'));
	const rs = sb.root.resolve(src, false);
	const rd = sb.root.resolve(dst, false);
	if (!lstatOrNull(rs.host))
		throw notFound(src);
	if (lstatOrNull(rd.host))
		throw new HttpError(409, `destination already exists: ${dst}`, { code: 'CONFLICT' });
	const parent = lstatOrNull(path.dirname(rd.host));
	if (!parent || !parent.isDirectory())
		throw new HttpError(404, `destination parent directory not found: ${path.posix.dirname(dst)}`, { code: 'NOT_FOUND' });
	try {
		fs.renameSync(rs.host, rd.host);
	} catch (e) {
		throw osError(e, src);
	}
	sendEmpty(ctx.res, 200);
}

function permissions(ctx) {
	const sb = ctx.sb;
	const p = abs(sb, need(ctx, 'path'));
	const r = sb.root.resolve(p);
	const st = lstatOrNull(r.host);
	if (!st)
		throw notFound(p);
	const id = (v, group) => { /* -1: not asked for, left as it is */
		if (!v)
			return -1;
		if (/^\d+$/.test(v))
			return Number(v);
		const n = sb.root.lookupId(v, group);
		if (n === null)
			throw new HttpError(400, `unknown ${group ? 'group' : 'user'}: ${v}`, { code: 'BAD_REQUEST' });
		return n;
	};
	/* As the daemon's SetFilePermissions: the mode first, then the owner, and
	 * only when one was asked for; so, as there, a chown after the chmod
	 * clears the set-ID bits the mode just set. */
	const owner = ctx.query.get('owner'), group = ctx.query.get('group');
	try {
		if (ctx.query.get('mode'))
			fs.chmodSync(r.host, parseInt(ctx.query.get('mode'), 8));
		if (owner || group)
			fs.chownSync(r.host, id(owner, false), id(group, true));
	} catch (e) {
		throw osError(e, p);
	}
	sendEmpty(ctx.res, 200);
}

function globRe(glob) {
	return new RegExp('^' + glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.') + '$');
}

/* Regular files under a directory (or the file itself), as [sandboxPath, hostPath]. */
function filesUnder(sb, p) {
	const r = sb.root.resolve(p);
	const st = lstatOrNull(r.host);
	if (!st)
		throw notFound(p);
	if (!st.isDirectory())
		return [[p, r.host]];
	const out = [];
	walk(r.host, p, Infinity, (sp, hp, lst) => lst.isFile() && out.push([sp, hp]));
	return out;
}

function find(ctx) {
	const pattern = need(ctx, 'pattern');
	const matches = [];
	for (const [sp, hp] of filesUnder(ctx.sb, abs(ctx.sb, ctx.query.get('path')))) {
		let text;
		try {
			text = fs.readFileSync(hp, 'utf8');
		} catch (e) {
			continue;
		}
		if (text.includes('\0'))
			continue;
		text.split('\n').forEach((line, i) => line.includes(pattern) && matches.push({ file: sp, line: i + 1, content: line }));
	}
	sendJson(ctx.res, 200, matches);
}

function search(ctx) {
	const re = globRe(need(ctx, 'pattern'));
	const sb = ctx.sb;
	const p = abs(sb, ctx.query.get('path'));
	const r = sb.root.resolve(p);
	if (!lstatOrNull(r.host))
		throw notFound(p);
	const files = [];
	walk(r.host, p, Infinity, (sp) => re.test(path.posix.basename(sp)) && files.push(sp));
	sendJson(ctx.res, 200, { files });
}

async function replace(ctx) {
	const b = await ctx.json();
	const out = (b.files || []).map((f) => {
		const p = abs(ctx.sb, f);
		try {
			const host = ctx.sb.root.resolve(p).host;
			fs.writeFileSync(host, fs.readFileSync(host, 'utf8').split(b.pattern).join(b.newValue ?? ''));
			return { file: f, success: true };
		} catch (e) {
			return { file: f, success: false, error: e.message };
		}
	});
	sendJson(ctx.res, 200, out);
}

function download(ctx) {
	const p = abs(ctx.sb, need(ctx, 'path'));
	const r = ctx.sb.root.resolve(p);
	let st;
	try {
		st = fs.statSync(r.host);
	} catch (e) {
		throw osError(e, p);
	}
	if (st.isDirectory())
		throw new HttpError(400, `path is a directory: ${p}`, { code: 'INVALID_FILE_PATH' });
	serveFile(ctx.req, ctx.res, r.host, st, {
		'Content-Type': 'application/octet-stream',
		'Content-Disposition': headerValue(`attachment; filename="${path.posix.basename(p)}"`),
	}, false);
}

/* One part per requested path, named "file" or "error", filename = the path exactly as asked. */
async function bulkDownload(ctx) {
	const b = await ctx.json();
	const parts = (b.paths || []).map((asked) => {
		const p = abs(ctx.sb, asked);
		let err;
		try {
			const host = ctx.sb.root.resolve(p).host;
			const st = fs.statSync(host);
			if (st.isDirectory())
				throw new HttpError(400, `path is a directory: ${p}`, { code: 'INVALID_FILE_PATH' });
			fs.accessSync(host, fs.constants.R_OK);
			return {
				name: 'file', filename: asked, host,
				headers: { 'Content-Length': st.size, 'Content-Type': TYPES[path.extname(p).toLowerCase()] || 'application/octet-stream' },
			};
		} catch (e) {
			err = osError(e, p);
			if (err.status === 500)
				err.extra.code = 'FILE_READ_FAILED';
		}
		const body = {
			statusCode: err.status, message: err.message, code: err.extra.code, timestamp: new Date().toISOString(),
			path: asked, method: 'POST',
		};
		return { name: 'error', filename: asked, data: JSON.stringify(body), headers: { 'Content-Type': 'application/json; charset=utf-8' } };
	});
	/* Streamed as the daemon does (Go's multipart writer over io.Copy): no
	 * Content-Length, each file's bytes as they are read. */
	const res = ctx.res;
	res.writeHead(200, { 'Content-Type': `multipart/form-data; boundary=${BOUNDARY}` });
	for (const part of parts) {
		const whole = buildMultipart([Object.assign({}, part, { data: part.host ? '' : part.data })], BOUNDARY);
		const tail = Buffer.from(`\r\n--${BOUNDARY}--\r\n`).length;
		res.write(whole.subarray(0, whole.length - tail)); /* the part's head (and a small part's data) */
		if (part.host && !(await streamFile(part.host, res)))
			return;
		res.write('\r\n');
	}
	res.end(`--${BOUNDARY}--\r\n`);
}

/* Writes the file at host into res, minding back-pressure; false if the client went away. */
function streamFile(host, res) {
	return new Promise((resolve) => {
		const rs = fs.createReadStream(host);
		const gone = () => { rs.destroy(); resolve(false); };
		res.once('close', gone);
		rs.on('data', (chunk) => {
			if (!res.write(chunk)) {
				rs.pause();
				res.once('drain', () => rs.resume());
			}
		});
		rs.on('end', () => { res.removeListener('close', gone); resolve(true); });
		rs.on('error', () => { res.removeListener('close', gone); res.destroy(); resolve(false); });
	});
}

async function formParts(ctx) {
	const ct = ctx.req.headers['content-type'] || '';
	if (!/^multipart\/form-data/i.test(ct))
		return null;
	try {
		return parseMultipart(await ctx.body(), ct);
	} catch (e) {
		throw new HttpError(400, `invalid multipart body: ${e.message}`, { code: 'INVALID_REQUEST_BODY' });
	}
}

/* files[i].path must come before files[i].file: the daemon reads the stream in order. */
async function bulkUpload(ctx) {
	const parts = await formParts(ctx);
	if (!parts)
		throw new HttpError(400, 'expected multipart/form-data', { code: 'INVALID_REQUEST_BODY' });
	const dest = new Map();
	const files = [];
	const errors = [];
	for (const part of parts) {
		const m = /^files\[(\d+)\]\.(path|file)$/.exec(part.name || '');
		if (!m)
			continue;
		if (m[2] === 'path') {
			dest.set(m[1], part.data.toString('utf8'));
			continue;
		}
		const p = dest.get(m[1]);
		if (p === undefined) {
			errors.push({ path: '', error: `files[${m[1]}].file arrived before files[${m[1]}].path` });
			continue;
		}
		try {
			files.push({ path: p, bytes: writeFileAs(ctx.sb, abs(ctx.sb, p), part.data) });
		} catch (e) {
			errors.push({ path: p, error: e.message });
		}
	}
	if (errors.length)
		return sendJson(ctx.res, 400, { errors, files });
	sendJson(ctx.res, 200, { files });
}

/* upload (legacy) and upload-v2: one file at ?path, as a multipart "file" part or (v2) a raw body. */
function upload(v2) {
	return async (ctx) => {
		const p = abs(ctx.sb, need(ctx, 'path'));
		const parts = await formParts(ctx);
		let data;
		if (parts) {
			const part = parts.find((x) => x.name === 'file');
			if (!part)
				throw new HttpError(400, 'file is required', { code: 'BAD_REQUEST' });
			data = part.data;
		} else if (v2) {
			data = await ctx.body();
		} else {
			throw new HttpError(400, 'expected multipart/form-data', { code: 'INVALID_REQUEST_BODY' });
		}
		writeFileAs(ctx.sb, p, data);
		if (v2)
			return sendJson(ctx.res, 200, { name: path.posix.basename(p), path: p, type: 'file' });
		sendEmpty(ctx.res, 200);
	};
}

function register(server, svc) {
	const T = '/toolbox/:id';
	const r = (method, p, fn) => server.route(method, T + p, svc.gate(fn));
	const home = (ctx) => sendJson(ctx.res, 200, { dir: ctx.sb.root.user().home });
	r('GET', '/user-home-dir', home);
	r('GET', '/project-dir', home);
	r('GET', '/work-dir', home);
	r('GET', '/files', list);
	r('GET', '/files/info', info);
	r('POST', '/files/folder', folder);
	r('DELETE', '/files', remove);
	r('POST', '/files/move', move);
	r('POST', '/files/permissions', permissions);
	r('GET', '/files/find', find);
	r('GET', '/files/search', search);
	r('POST', '/files/replace', replace);
	r('GET', '/files/download', download);
	r('POST', '/files/bulk-download', bulkDownload);
	r('POST', '/files/bulk-upload', bulkUpload);
	r('POST', '/files/upload', upload(false));
	r('POST', '/files/upload-v2', upload(true));
}

module.exports = { register };
