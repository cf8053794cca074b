'use strict';
/*
 * multipart/form-data, both ways, for envd's POST /files and the Daytona
 * toolbox's bulk-upload / bulk-download.  Bodies are buffered whole: the
 * fakes serve tests, not gigabytes.  Filenames are taken raw from the
 * Content-Disposition header (E2B puts a whole path there).
 */

function boundaryOf(contentType) {
	const m = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType || '');
	return m ? (m[1] || m[2]).trim() : null;
}

function dispositionParam(disp, name) {
	const re = new RegExp(`(?:^|;)\\s*${name}="((?:[^"\\\\]|\\\\.)*)"`, 'i');
	const m = re.exec(disp);
	if (m)
		return m[1].replace(/\\(.)/g, '$1');
	const bare = new RegExp(`(?:^|;)\\s*${name}=([^;]*)`, 'i').exec(disp);
	return bare ? bare[1].trim() : undefined;
}

/*
 * Parses a body into [{name, filename, contentType, data}] in order.
 * Throws a plain Error on a malformed body.
 */
function parseMultipart(body, contentType) {
	const boundary = boundaryOf(contentType);
	if (!boundary)
		throw new Error('multipart body without a boundary');
	const delim = Buffer.from(`--${boundary}`);
	const parts = [];
	let pos = body.indexOf(delim);
	if (pos < 0)
		throw new Error('multipart boundary not found');
	for (;;) {
		pos += delim.length;
		if (body.subarray(pos, pos + 2).toString() === '--')
			break;
		if (body.subarray(pos, pos + 2).toString() === '\r\n')
			pos += 2;
		const headEnd = body.indexOf('\r\n\r\n', pos);
		if (headEnd < 0)
			throw new Error('multipart part without a header end');
		const headers = {};
		for (const line of body.subarray(pos, headEnd).toString('utf8').split('\r\n')) {
			const i = line.indexOf(':');
			if (i > 0)
				headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
		}
		const next = body.indexOf(Buffer.concat([Buffer.from('\r\n'), delim]), headEnd + 4);
		if (next < 0)
			throw new Error('multipart part without a closing boundary');
		const disp = headers['content-disposition'] || '';
		parts.push({
			name: dispositionParam(disp, 'name'),
			filename: dispositionParam(disp, 'filename'),
			contentType: headers['content-type'],
			data: body.subarray(headEnd + 4, next),
		});
		pos = next + 2;
	}
	return parts;
}

/* Builds a body from [{name, filename?, headers?: {..}, data}]; returns a Buffer. */
function buildMultipart(parts, boundary) {
	const out = [];
	for (const p of parts) {
		let head = `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"`;
		if (p.filename !== undefined) {
			head += `; filename="${p.filename.replace(/(["\\])/g, '\\$1')}"` +
				`; filename*=utf-8''${encodeURIComponent(p.filename)}`;
		}
		head += '\r\n';
		for (const [k, v] of Object.entries(p.headers || {}))
			head += `${k}: ${v}\r\n`;
		out.push(Buffer.from(`${head}\r\n`), Buffer.from(p.data), Buffer.from('\r\n'));
	}
	out.push(Buffer.from(`--${boundary}--\r\n`));
	return Buffer.concat(out);
}

module.exports = { parseMultipart, buildMultipart, boundaryOf };
