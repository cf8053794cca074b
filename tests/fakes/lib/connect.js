'use strict';
/*
 * The Connect protocol as envd speaks it with the JSON codec (e2b.md §2.4):
 * unary errors, request envelopes, and a server-stream writer with the
 * mandatory end-stream frame and keepalives.  Used by the fake E2B only.
 */
const { HttpError } = require('./common');

const CODE_STATUS = {
	canceled: 499, unknown: 500, invalid_argument: 400, deadline_exceeded: 504,
	not_found: 404, already_exists: 409, permission_denied: 403, resource_exhausted: 429,
	failed_precondition: 400, aborted: 409, out_of_range: 400, unimplemented: 501,
	internal: 500, unavailable: 503, data_loss: 500, unauthenticated: 401,
};

/* A Connect error: thrown from a unary handler it becomes {"code","message"} with the mapped status. */
class RpcError extends Error {
	constructor(code, message) {
		super(message);
		this.code = code;
	}
}

function sendUnaryError(res, e) {
	const body = JSON.stringify({ code: e.code, message: e.message });
	res.writeHead(CODE_STATUS[e.code] || 500, {
		'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body),
	});
	res.end(body);
}

/* Decodes the single enveloped message of a server-stream request. */
function parseEnvelope(buf) {
	if (buf.length < 5)
		throw new RpcError('invalid_argument', 'missing request envelope');
	if (buf[0] & 0x01)
		throw new RpcError('unimplemented', 'compressed requests are not supported');
	const len = buf.readUInt32BE(1);
	if (buf.length < 5 + len)
		throw new RpcError('invalid_argument', 'truncated request envelope');
	const text = buf.subarray(5, 5 + len).toString('utf8');
	try {
		return text ? JSON.parse(text) : {};
	} catch (e) {
		throw new RpcError('invalid_argument', `bad JSON: ${e.message}`);
	}
}

function frame(flags, obj) {
	const payload = Buffer.from(JSON.stringify(obj));
	const head = Buffer.alloc(5);
	head[0] = flags;
	head.writeUInt32BE(payload.length, 1);
	return Buffer.concat([head, payload]);
}

/*
 * A server stream on res.  send() writes a data frame; end(err) writes the
 * end-stream frame once.  A keepalive message goes out after every
 * `Keepalive-Ping-Interval` seconds of silence, but only once the first
 * real message is out (the SDK wants "start" first).  onClose runs when the
 * client goes away before end().
 */
class ServerStream {
	constructor(ctx, keepaliveMsg) {
		this.res = ctx.res;
		this.keepaliveMsg = keepaliveMsg;
		const iv = Number(ctx.req.headers['keepalive-ping-interval']);
		this.keepaliveMs = (iv > 0 ? iv : 90) * 1000;
		this.ended = false;
		this.started = false;
		this.timer = null;
		this.onClose = null;
		this.res.writeHead(200, { 'Content-Type': 'application/connect+json' });
		this.res.on('close', () => {
			clearTimeout(this.timer);
			if (!this.ended) {
				this.ended = true;
				if (this.onClose)
					this.onClose();
			}
		});
	}

	arm() {
		clearTimeout(this.timer);
		this.timer = setTimeout(() => this.send(this.keepaliveMsg), this.keepaliveMs);
	}

	send(obj) {
		if (this.ended)
			return;
		this.started = true;
		this.res.write(frame(0, obj));
		this.arm();
	}

	end(err) {
		if (this.ended)
			return;
		this.ended = true;
		clearTimeout(this.timer);
		this.res.end(frame(2, err ? { error: { code: err.code, message: err.message } } : {}));
	}
}

/* Connect-Timeout-Ms as milliseconds, or 0 for none. */
function deadlineMs(req) {
	const v = Number(req.headers['connect-timeout-ms']);
	return v > 0 ? v : 0;
}

/* Wraps a unary handler: parse the JSON request, answer JSON, map RpcError. */
function unary(fn) {
	return async (ctx) => {
		let reply;
		try {
			reply = await fn(ctx, await ctx.json());
		} catch (e) {
			if (e instanceof RpcError)
				return sendUnaryError(ctx.res, e);
			if (e instanceof HttpError && e.status === 400)
				return sendUnaryError(ctx.res, new RpcError('invalid_argument', e.message));
			throw e;
		}
		const body = JSON.stringify(reply || {});
		ctx.res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
		ctx.res.end(body);
	};
}

module.exports = { RpcError, ServerStream, parseEnvelope, deadlineMs, unary, sendUnaryError };
