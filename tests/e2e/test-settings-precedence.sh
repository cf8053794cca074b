#!/bin/bash
# One precedence rule for provider settings, as the providers' own SDKs have
# it (settings given explicitly beat the environment, which beats the
# default): providers.NAME in the config file wins over E2B_DOMAIN /
# E2B_API_URL and DAYTONA_API_URL / DAYTONA_TARGET / DAYTONA_ORGANIZATION_ID;
# the environment is used where the config says nothing. Each provider is
# served by its fake; a wrong URL is a closed port.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
WRONG=http://127.0.0.1:1
made() { # made NAME: mkdir of a lease works (prints OK or the errno)
	errno_of "os.mkdir('$MNT/$1')"
}
for kind in e2b daytona; do
	start_fake "$kind"
	case $kind in
	e2b) URL_ENV=E2B_API_URL RIGHT=$FAKE_URL BAD=$WRONG ;;
	daytona) URL_ENV=DAYTONA_API_URL RIGHT=$FAKE_URL/api BAD=$WRONG/api ;;
	esac
	# The config names the right URL, the environment a wrong one.
	export "$URL_ENV=$BAD"
	fake_settings "{\"apiUrl\": \"$RIGHT\"}"
	mount_sbxfs
	eq "$kind: config apiUrl right, $URL_ENV wrong: the config wins (mkdir works)" "$(made a)" OK
	end_leases
	unmount_sbxfs
	# The reverse: the config wrong, the environment right.
	export "$URL_ENV=$RIGHT"
	fake_settings "{\"apiUrl\": \"$BAD\"}"
	mount_sbxfs
	ok "$kind: config apiUrl wrong, $URL_ENV right: the config still wins (mkdir fails)" \
		test "$(made b)" != OK
	unmount_sbxfs
	# The config silent: the environment is used.
	fake_settings '{}'
	mount_sbxfs
	eq "$kind: no apiUrl in the config: $URL_ENV is used (mkdir works)" "$(made c)" OK
	if [ "$kind" = daytona ]; then
		target() { # the target of lease $1's sandbox, as the fake has it
			curl -fsS -H "Authorization: Bearer $FAKE_KEY" \
				"$FAKE_URL/api/sandbox/$(json_get "$MNT/$1/info" '["sandboxId"]')" |
				python3 -c 'import json,sys; print(json.load(sys.stdin)["target"])'
		}
		end_leases
		unmount_sbxfs
		export DAYTONA_TARGET=env-region
		fake_settings '{"target": "cfg-region"}'
		mount_sbxfs
		eq "daytona: config target and DAYTONA_TARGET: the config's is used" \
			"$([ "$(made t1)" = OK ] && target t1)" cfg-region
		end_leases
		unmount_sbxfs
		fake_settings '{}'
		mount_sbxfs
		eq "daytona: no target in the config: DAYTONA_TARGET is used" \
			"$([ "$(made t2)" = OK ] && target t2)" env-region
		unset DAYTONA_TARGET
	fi
	end_leases
	unmount_sbxfs
	stop_fake
done
finish
