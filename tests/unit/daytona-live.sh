#!/bin/sh
# Runs check_daytona_live against the fake Daytona server (tests/fakes).
# Skips (77) where the fake cannot run: no node, not root, no unshare.
# The fake is stopped by its pid on every exit path.
set -u
srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${top_builddir:-.}
command -v node >/dev/null 2>&1 || { echo "no node: skipped"; exit 77; }
command -v unshare >/dev/null 2>&1 || { echo "no unshare: skipped"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "not root (the fake mounts): skipped"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sbx-dt-live.XXXXXX") || exit 1
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

key=sbx-live-$$
"$srcdir/tests/fakes/run-fake.sh" daytona --port 0 --port-file "$tmp/port" \
	--api-key "$key" >"$tmp/fake.log" 2>&1 &
pid=$!
i=0
while [ ! -s "$tmp/port" ]; do
	if ! kill -0 "$pid" 2>/dev/null || [ $i -ge 100 ]; then
		echo "the fake did not start:" >&2
		cat "$tmp/fake.log" >&2
		exit 1
	fi
	sleep 0.1
	i=$((i + 1))
done
port=$(cat "$tmp/port")

env -u DAYTONA_JWT_TOKEN -u DAYTONA_ORGANIZATION_ID -u DAYTONA_TARGET \
	DAYTONA_API_URL="http://127.0.0.1:$port/api" DAYTONA_API_KEY="$key" \
	FAKE_URL="http://127.0.0.1:$port" \
	"$builddir/tests/unit/check_daytona_live"
rc=$?
[ $rc = 0 ] || { echo "--- fake log" >&2; tail -n 50 "$tmp/fake.log" >&2; }
exit $rc
