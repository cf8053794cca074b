#!/bin/sh
# Runs the official-SDK conformance suites against the fakes in tests/fakes.
#   tests/conformance/run.sh [--deps-only] [node --test options...] [FILES...]
# Installs the pinned SDKs with `npm ci` when node_modules is missing or was
# installed from another package-lock.json.  Exits 77 (skip) when the SDKs
# cannot be had, the node is too old for them, or we cannot mount (the fakes
# need root); otherwise exits with the test runner's status.
set -u
here=$(cd "$(dirname "$0")" && pwd)
export SBXFS_FAKES_DIR="$here/../fakes"
# A read-only source tree (VPATH, distcheck): run a copy in the build directory.
if [ -w "$here" ]; then
	cd "$here" || exit 1
else
	work="$(pwd)/conformance-work"
	mkdir -p "$work" && cp -R "$here"/*.mjs "$here"/lib "$here"/package.json "$here"/package-lock.json "$work"/ &&
		chmod -R u+w "$work" && cd "$work" || exit 1
fi

skip() {
	echo "conformance: SKIP: $*" >&2
	exit 77
}

stamp=node_modules/.sbxfs-lock-sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -d node_modules ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
	if npm ci --no-audit --no-fund --loglevel=error >&2; then
		echo "$want" >"$stamp"
	elif [ ! -d node_modules ]; then
		skip "npm ci failed and there is no node_modules (offline?)"
	else
		echo "conformance: npm ci failed; using the node_modules that is there" >&2
	fi
fi
[ "${1:-}" = "--deps-only" ] && exit 0

# e2b 2.51.0 declares engines ">=20.18.1 <21 || >=22".
node -e 'const [a,b,c]=process.versions.node.split(".").map(Number);
process.exit((a===20&&(b>18||(b===18&&c>=1)))||a>=22?0:1)' ||
	skip "node $(node --version) is older than the SDKs need (>= 20.18.1)"
[ "$(id -u)" = 0 ] || skip "the fakes mount overlays and must run as root"
unshare -m true 2>/dev/null || skip "cannot create a mount namespace (unshare -m)"

files=""
for a in "$@"; do
	case "$a" in *.test.mjs) files="$files $a" ;; esac
done
[ -n "$files" ] || set -- "$@" *.test.mjs
exec node --test --test-reporter=tap --test-concurrency=2 "$@"
