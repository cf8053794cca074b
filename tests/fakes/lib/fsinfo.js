'use strict';
/*
 * File facts in the shapes both daemons print, shared by the two fakes:
 * Go's FileMode.String() and time.String(), and the directory walk behind
 * "list with depth".  The JSON objects themselves are built by each fake.
 */
const fs = require('fs');
const path = require('path');

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

/* Go's time.Time.String() in UTC: "2006-01-02 15:04:05.999999999 +0000 UTC". */
function goTimeString(d) {
	const iso = d.toISOString();
	let frac = iso.slice(20, 23).replace(/0+$/, '');
	frac = frac ? `.${frac}` : '';
	return `${iso.slice(0, 10)} ${iso.slice(11, 19)}${frac} +0000 UTC`;
}

/* RFC 3339 without fractional seconds, as Go's time.RFC3339 layout prints. */
function rfc3339(d) {
	return d.toISOString().replace(/\.\d+Z$/, 'Z');
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

module.exports = { goModeString, goTimeString, rfc3339, walk };
