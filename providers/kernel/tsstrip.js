'use strict';
/*
 * A crude TypeScript-to-JavaScript stripper for sbxfs's JavaScript kernel
 * (jskernel.js) and the test fakes, used only when the sandbox has neither
 * the `typescript` package nor a node that strips types itself.  It removes what
 * notebook-sized snippets use: annotations on variables, parameters,
 * return types and class fields, optional-parameter marks, `as` casts,
 * generic parameters of declarations, interface / type / declare
 * statements, `import type`, access modifiers and `implements` clauses.
 * It is a token walk, not a parser: enums, namespaces, decorators and
 * call-site generics are left alone (and then fail as JavaScript).
 * Loaded by `node -e` as plain script text, so it must stay self-contained.
 * tsToJs() prefers the real compiler, then node's own stripper.
 */
function stripTypes(src) {
	const toks = [];
	const re = /(\s+|\/\/[^\n]*|\/\*[\s\S]*?\*\/)|('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\]|\\[\s\S])*`)|([A-Za-z_$][\w$]*)|(\d[\w.]*)|(=>|\?\.|\.\.\.|[=!]==?|[<>]=|&&|\|\||\?\?|[^\s])/g;
	let m;
	while ((m = re.exec(src)))
		toks.push({ t: m[0], trivia: !!m[1], id: !!m[3], drop: false });
	const sig = toks.map((x, i) => i).filter((i) => !toks[i].trivia);
	const T = (k) => (k >= 0 && k < sig.length ? toks[sig[k]].t : '');
	const isId = (k) => k >= 0 && k < sig.length && toks[sig[k]].id;
	const drop = (a, b) => { for (let k = a; k <= b; k++) toks[sig[k]].drop = true; };
	const OPEN = { '(': ')', '[': ']', '{': '}', '<': '>' };
	const newlineBefore = (k) => {
		for (let i = sig[k - 1] + 1; i < sig[k]; i++) {
			if (toks[i].t.includes('\n'))
				return true;
		}
		return false;
	};
	/* End (inclusive) of a type starting at k: stops before a stop token at depth 0. */
	const typeEnd = (k, stops, stopAtNewline) => {
		let depth = 0;
		let j = k;
		for (; j < sig.length; j++) {
			const t = T(j);
			if (depth === 0 && j > k && (stops.includes(t) || (stopAtNewline && newlineBefore(j))))
				break;
			if (OPEN[t])
				depth++;
			else if ([')', ']', '}', '>'].includes(t))
				depth--;
			if (depth < 0)
				break;
		}
		return j - 1;
	};
	const match = (k) => {
		let depth = 0;
		for (let j = k; j < sig.length; j++) {
			if (T(j) === T(k))
				depth++;
			else if (T(j) === OPEN[T(k)] && --depth === 0)
				return j;
		}
		return sig.length - 1;
	};
	const stmtStart = (k) => {
		while (k > 0 && toks[sig[k - 1]].drop)
			k--;
		return k === 0 || [';', '}', '{'].includes(T(k - 1)) || newlineBefore(k);
	};
	const params = new Set();
	const classBodies = new Set();
	for (let k = 0; k < sig.length; k++) {
		const t = T(k);
		if (t === '(') {
			const j = match(k);
			const fn = T(k - 1) === 'function' || T(k - 2) === 'function' || T(k - 1) === '>' ||
				T(j + 1) === '=>' || (T(j + 1) === ':' && T(typeEnd(j + 2, ['=>', '{', ';'], false) + 1) === '=>') ||
				(isId(k - 1) && T(j + 1) === ':' && T(typeEnd(j + 2, ['{', ';', '=>'], false) + 1) === '{') ||
				(isId(k - 1) && T(j + 1) === '{' && ![
					'if', 'for', 'while', 'switch', 'catch', 'with'].includes(T(k - 1)));
			if (fn)
				params.add(k);
		}
		if (t === 'class') {
			let j = k + 1;
			while (j < sig.length && T(j) !== '{')
				j++;
			classBodies.add(j);
		}
	}
	const stack = [];
	for (let k = 0; k < sig.length; k++) {
		const t = T(k);
		if (toks[sig[k]].drop)
			continue;
		const top = stack[stack.length - 1];
		if (t === '(' || t === '{' || t === '[') {
			stack.push({ k, params: t === '(' && params.has(k), cls: t === '{' && classBodies.has(k) });
			continue;
		}
		if (t === ')' || t === '}' || t === ']') {
			const open = stack.pop();
			if (t === ')' && open && open.params && T(k + 1) === ':')
				drop(k + 1, typeEnd(k + 2, ['{', '=>'], false));
			continue;
		}
		if ((t === 'interface' || t === 'type' || t === 'declare') && isId(k + 1) && stmtStart(k)) {
			const start = T(k - 1) === 'export' ? k - 1 : k;
			const end = t === 'interface' ? match(typeEnd(k, ['{'], false) + 1) : typeEnd(k, [';'], true);
			drop(start, T(end + 1) === ';' ? end + 1 : end);
			continue;
		}
		if (t === 'import' && T(k + 1) === 'type') {
			drop(k, typeEnd(k, [';'], true) + 1);
			continue;
		}
		if (['public', 'private', 'protected', 'readonly', 'abstract'].includes(t) && (isId(k + 1) || T(k + 1) === '[')) {
			drop(k, k);
			continue;
		}
		if (t === 'implements') {
			drop(k, typeEnd(k, ['{'], false));
			continue;
		}
		if (t === '<' && (T(k - 2) === 'function' || T(k - 2) === 'class') && isId(k - 1)) {
			drop(k, match(k));
			continue;
		}
		if (t === '<' && isId(k - 1) && T(match(k) + 1) === '(' && sig.slice(k + 1, match(k)).every((i) =>
			toks[i].id || [',', '[', ']', '|', '.', '<', '>'].includes(toks[i].t))) {
			drop(k, match(k));
			continue;
		}
		if (t === 'as' && (isId(k - 1) || [')', ']', '}'].includes(T(k - 1)) || /^['"`\d]/.test(T(k - 1)))) {
			drop(k, typeEnd(k + 1, [')', ',', ';', ']', '}', '=', '+', '-', '*', '/', '?', ':', '&&', '||', '??'], true));
			continue;
		}
		if (t === '!' && (isId(k - 1) || T(k - 1) === ')') && ['.', ')', ';', ',', '['].includes(T(k + 1)) && !newlineBefore(k)) {
			drop(k, k);
			continue;
		}
		const inParams = top && top.params;
		const inClass = top && top.cls;
		if ((t === '?' && T(k + 1) === ':' && isId(k - 1) && (inParams || inClass))) {
			drop(k, k);
			continue;
		}
		if (t !== ':' || !(isId(k - 1) || (T(k - 1) === '?' && toks[sig[k - 1]].drop) || [']', '}'].includes(T(k - 1))))
			continue;
		const decl = ['let', 'const', 'var'].includes(T(k - 2)) || (T(k - 2) === ',' && stack.length === 0 && !inParams);
		if (inParams)
			drop(k, typeEnd(k + 1, [',', ')', '='], false));
		else if (decl)
			drop(k, typeEnd(k + 1, ['=', ';', ','], true));
		else if (inClass && stmtStart(k - 1))
			drop(k, typeEnd(k + 1, ['=', ';'], true));
	}
	return toks.filter((x) => !x.drop).map((x) => x.t).join('');
}

/*
 * TypeScript to JavaScript by the first that the sandbox has: the
 * `typescript` package (the real compiler, as ts-node uses it), node's own
 * type stripper (module.stripTypeScriptTypes, node >= 22.13), else
 * stripTypes above. Chosen once.
 */
let tsTranspile = null;
function tsToJs(code) {
	if (!tsTranspile) {
		for (const dir of [process.cwd(), '/usr/local/lib/node_modules', '/usr/lib/node_modules', '/usr/share/nodejs']) {
			try {
				const ts = require(require.resolve('typescript', { paths: [dir] }));
				tsTranspile = (c) => ts.transpileModule(c, {
					compilerOptions: { target: ts.ScriptTarget.ES2020, module: ts.ModuleKind.None },
				}).outputText;
				break;
			} catch (e) { /* not there */ }
		}
		const mod = require('module');
		if (!tsTranspile && typeof mod.stripTypeScriptTypes === 'function')
			tsTranspile = (c) => mod.stripTypeScriptTypes(c, { mode: 'transform' });
		if (!tsTranspile)
			tsTranspile = stripTypes;
	}
	return tsTranspile(code);
}

if (typeof module === 'object' && module && module.exports)
	Object.assign(module.exports, { stripTypes, tsToJs });
