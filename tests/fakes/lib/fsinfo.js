'use strict';
/*
 * File facts and file plumbing shared by the two fakes: Go's
 * FileMode.String() and time.String(), the directory walk behind "list with
 * depth", mkdir -p as a sandbox user, and serving a file with Range support
 * (envd's GET /files and the toolbox's /files/download).  The JSON objects
 * themselves are built by each fake.
 */
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

/* Go's FileMode.String(): type letters in the order of "dalTLDpSugct?", then rwx bits. */
function goModeString(st) {
	let t = '';
	if (st.isDirectory())
		t += 'd';
	if (st.isSymbolicLink())
		t += 'L';
	if (st.isBlockDevice() || st.isCharacterDevice())
		t += 'D';
	if (st.isFIFO())
		t += 'p';
	if (st.isSocket())
		t += 'S';
	if (st.mode & 0o4000)
		t += 'u';
	if (st.mode & 0o2000)
		t += 'g';
	if (st.isCharacterDevice())
		t += 'c';
	if (st.mode & 0o1000)
		t += 't';
	if (!t)
		t = '-';
	const rwx = 'rwxrwxrwx';
	for (let i = 0; i < 9; i++)
		t += st.mode & (1 << (8 - i)) ? rwx[i] : '-';
	return t;
}

/*
 * The Date of a time given to the nanosecond (a BigInt), cut to the
 * millisecond as Go cuts; d when ns is not known. Node's own Stats dates
 * round to the nearest millisecond, so a time late in its second
 * (.9995 s or more) names the next second, and a time built from such a
 * Date's seconds and the ns's fraction was a second late.
 */
function nsDate(d, ns) {
	if (ns === undefined)
		return d;
	let ms = ns / 1000000n;
	if (ms * 1000000n > ns) /* BigInt division rounds towards zero: floor before 1970 */
		ms -= 1n;
	return new Date(Number(ms));
}

/*
 * Go's time.Time.String() in UTC: "2006-01-02 15:04:05.999999999 +0000 UTC",
 * to the nanosecond as Go prints it when ns (a BigInt, from a bigint stat)
 * is given; a JS Date alone has only milliseconds.
 */
function goTimeString(d, ns) {
	const iso = nsDate(d, ns).toISOString();
	let frac = ns === undefined ? iso.slice(20, 23)
		: String(((ns % 1000000000n) + 1000000000n) % 1000000000n).padStart(9, '0');
	frac = frac.replace(/0+$/, '');
	frac = frac ? `.${frac}` : '';
	return `${iso.slice(0, 10)} ${iso.slice(11, 19)}${frac} +0000 UTC`;
}

/*
 * A protobuf JSON Timestamp (what envd's connect-go sends): RFC 3339 in UTC
 * with 0, 3, 6 or 9 fractional digits, to the nanosecond when ns is given.
 */
function protoTime(d, ns) {
	if (ns === undefined)
		return d.toISOString();
	const sec = nsDate(d, ns).toISOString().slice(0, 19);
	const n = ((ns % 1000000000n) + 1000000000n) % 1000000000n;
	let frac = String(n).padStart(9, '0');
	if (n === 0n)
		frac = '';
	else if (n % 1000000n === 0n)
		frac = '.' + frac.slice(0, 3);
	else if (n % 1000n === 0n)
		frac = '.' + frac.slice(0, 6);
	else
		frac = '.' + frac;
	return `${sec}${frac}Z`;
}

/* The nanoseconds of a host path's mtime (lstat), or undefined. */
function mtimeNs(host, follow) {
	try {
		return (follow ? fs.statSync : fs.lstatSync)(host, { bigint: true }).mtimeNs;
	} catch (e) {
		return undefined;
	}
}

/* RFC 3339 without fractional seconds, as Go's time.RFC3339 layout prints (ns as for goTimeString). */
function rfc3339(d, ns) {
	return nsDate(d, ns).toISOString().replace(/\.\d+Z$/, 'Z');
}

/*
 * Pre-order walk of a directory in the sandbox down to `depth` levels (1 =
 * direct children), names sorted as Go's ReadDir sorts them; symlinked
 * directories are not descended.  visit(sandboxPath, hostPath, lstat) is
 * called for each entry; paths are built from the requested path.
 */
function walk(hostDir, sandboxDir, depth, visit) {
	const rec = (h, s, level) => {
		let names;
		try {
			names = fs.readdirSync(h).sort();
		} catch (e) {
			return;
		}
		for (const n of names) {
			const hp = path.join(h, n);
			const sp = path.posix.join(s, n);
			let lst;
			try {
				lst = fs.lstatSync(hp);
			} catch (e) {
				continue;
			}
			visit(sp, hp, lst);
			if (level < depth && lst.isDirectory())
				rec(hp, sp, level + 1);
		}
	};
	rec(hostDir, sandboxDir, 1);
}

function lstatOrNull(host) {
	try {
		return fs.lstatSync(host);
	} catch (e) {
		return null;
	}
}

/* mkdir -p as user u: new directories get the user as owner, as both daemons create them. */
function mkdirsAs(host, u) {
	const missing = [];
	let d = host;
	while (!fs.existsSync(d)) {
		missing.unshift(d);
		d = path.dirname(d);
	}
	for (const m of missing) {
		fs.mkdirSync(m);
		fs.chownSync(m, u.uid, u.gid);
	}
}

/*
 * Answers a GET for the file at host (stat st) roughly as Go's
 * http.ServeContent does: Last-Modified, If-Modified-Since, a single
 * Range (206 + Content-Range, 416 when unsatisfiable), HEAD.  With gzip
 * the whole file is sent compressed, without a length.
 */
function serveFile(req, res, host, st, headers, gzip) {
	headers = Object.assign({ 'Last-Modified': st.mtime.toUTCString(), 'Accept-Ranges': 'bytes' }, headers);
	const ims = Date.parse(req.headers['if-modified-since'] || '');
	if (!req.headers.range && ims && Math.floor(st.mtimeMs / 1000) * 1000 <= ims) {
		res.writeHead(304, headers);
		return res.end();
	}
	let start = 0;
	let end = st.size - 1;
	let status = 200;
	const m = /^bytes=(\d*)-(\d*)$/.exec(req.headers.range || '');
	if (m && (m[1] || m[2])) {
		if (m[1]) {
			start = Number(m[1]);
			end = m[2] ? Math.min(Number(m[2]), st.size - 1) : st.size - 1;
		} else {
			start = Math.max(0, st.size - Number(m[2]));
		}
		if (start >= st.size || start > end) {
			res.writeHead(416, { 'Content-Range': `bytes */${st.size}`, 'Content-Length': 0 });
			return res.end();
		}
		status = 206;
		headers['Content-Range'] = `bytes ${start}-${end}/${st.size}`;
	}
	gzip = gzip && status === 200;
	if (gzip)
		headers['Content-Encoding'] = 'gzip';
	else
		headers['Content-Length'] = st.size ? end - start + 1 : 0;
	res.writeHead(status, headers);
	if (req.method === 'HEAD' || st.size === 0)
		return res.end();
	const src = fs.createReadStream(host, { start, end });
	(gzip ? src.pipe(zlib.createGzip()) : src).pipe(res);
}

module.exports = { goModeString, goTimeString, mtimeNs, protoTime, rfc3339, walk, mkdirsAs, serveFile, lstatOrNull };
