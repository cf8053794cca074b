// Reads one file of a sandbox with the official SDK and prints the seconds
// the read took (the reference for scripts/bench-remote's `cat`: what the
// service passes to its own SDK through the same delay proxy).
//   node sdk-read.mjs e2b|daytona API_URL SANDBOX_ID PATH
// API_URL is the proxy's base URL (daytona: with its /api); the key is the
// bench's, "bench-key".
import { Sandbox } from 'e2b';
import { Daytona } from '@daytonaio/sdk';

const [kind, url, id, path] = process.argv.slice(2);
let read;
if (kind === 'e2b') {
	const sbx = await Sandbox.connect(id, { apiKey: 'bench-key', apiUrl: url, sandboxUrl: url });
	read = () => sbx.files.read(path, { format: 'bytes' });
} else if (kind === 'daytona') {
	const daytona = new Daytona({ apiKey: 'bench-key', apiUrl: url, useDeprecatedPolling: true });
	const sbx = await daytona.get(id);
	read = () => sbx.fs.downloadFile(path);
} else {
	console.error('usage: node sdk-read.mjs e2b|daytona API_URL SANDBOX_ID PATH');
	process.exit(2);
}
const t0 = process.hrtime.bigint();
const data = await read();
const s = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(`${s.toFixed(3)} ${data.length}`);
