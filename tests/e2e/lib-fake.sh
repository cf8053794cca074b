# Sourced after lib.sh by e2e tests of remote providers: starts a fake
# server (tests/fakes), points the provider's environment at it, writes a
# config whose default profile uses that provider, and stops the fake by
# pid at exit (after the mount is gone).
#   start_fake e2b|daytona [fake flags...]
#   fake_get PATH / fake_post PATH JSON      the admin API (see tests/fakes/README.md)
#   counter KEY                              one request counter ("POST /filesystem.Filesystem/ListDir")
command -v node >/dev/null 2>&1 || { echo "SKIP: node is not installed"; exit 77; }
FAKE_PID=
FAKE_KEY=sbx-e2e-key-$$

stop_fake() {
	[ -n "$FAKE_PID" ] || return 0
	kill "$FAKE_PID" 2>/dev/null
	wait "$FAKE_PID" 2>/dev/null
	FAKE_PID=
}
EXTRA_CLEANUP="${EXTRA_CLEANUP:+$EXTRA_CLEANUP; }stop_fake"

start_fake() {
	local kind=$1
	shift
	"$top_srcdir/tests/fakes/run-fake.sh" "$kind" --port 0 --port-file "$WORK/fake.port" \
		--api-key "$FAKE_KEY" "$@" >"$WORK/fake.log" 2>&1 &
	FAKE_PID=$!
	if ! wait_for 20 test -s "$WORK/fake.port"; then
		log "the fake did not start"
		cat "$WORK/fake.log"
		exit 1
	fi
	FAKE_URL=http://127.0.0.1:$(cat "$WORK/fake.port")
	case $kind in
	e2b)
		export E2B_API_KEY=$FAKE_KEY E2B_API_URL=$FAKE_URL E2B_SANDBOX_URL=$FAKE_URL
		unset E2B_DOMAIN
		;;
	daytona)
		export DAYTONA_API_KEY=$FAKE_KEY DAYTONA_API_URL=$FAKE_URL/api
		unset DAYTONA_JWT_TOKEN DAYTONA_ORGANIZATION_ID DAYTONA_TARGET
		;;
	esac
	# The default profile uses the fake's provider; PROFILE_EXTRA adds JSON fields.
	printf '{"defaultProfile":"default","profiles":{"default":{"provider":"%s"%s}}}\n' \
		"$kind" "${PROFILE_EXTRA:+,$PROFILE_EXTRA}" >"$CONFIG"
}

fake_get() { curl -fsS "$FAKE_URL$1"; }
fake_post() { curl -fsS -X POST -H 'Content-Type: application/json' -d "$2" "$FAKE_URL$1"; }
fake_reset_counters() { curl -fsS -X DELETE "$FAKE_URL/_fake/counters" >/dev/null; }
fake_clear_faults() { curl -fsS -X DELETE "$FAKE_URL/_fake/faults" >/dev/null; }
counter() {
	fake_get /_fake/counters | python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], 0))' "$1"
}
