#!/bin/bash
# sbxfs --list[=PROVIDER]: the sandboxes the providers know, printed without
# a mount. Two local leases and an e2b one (on the fake) are listed with the
# ids their info files name, their states and lease names; a provider that
# cannot start is an error on stderr with exit 1 when named, a note when not.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
start_fake e2b
printf '{"defaultProfile":"default","profiles":{"default":{"provider":"local"},%s}}\n' \
	'"remote":{"provider":"e2b"}' >"$CONFIG"
mount_sbxfs
json_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# sbx_list ARGS...: runs sbxfs with the mount's config and state dir; stdout
# into $WORK/out, stderr into $WORK/err, the exit status into $RC.
sbx_list() {
	env -u DAYTONA_API_KEY -u DAYTONA_JWT_TOKEN "$SBXFS" "$@" \
		-o "state_dir=$STATE,config=$CONFIG" >"$WORK/out" 2>"$WORK/err"
	RC=$?
}
listed() { grep -Eq "^$1 $2 $3 $4 $5 [0-9T:-]+Z?" "$WORK/out" || { cat "$WORK/out"; false; }; }

ok "mkdir makes local lease one" mkdir "$MNT/one"
ok "... and two" mkdir "$MNT/two"
ok "ctl makes e2b lease web" sh -c "echo 'new web profile=remote' >'$MNT/ctl'"
ONE=$(json_field "$MNT/one/info" sandboxId)
TWO=$(json_field "$MNT/two/info" sandboxId)
WEB=$(json_field "$MNT/web/info" sandboxId)
echo pause >"$MNT/two/state"

sbx_list --list=local
eq "--list=local exits 0" "$RC" 0
ok "... lists one by the id its info names, running" listed local "$ONE" running one host
ok "... lists two, paused" listed local "$TWO" paused two host
eq "... and only those two" "$(wc -l <"$WORK/out")" 2
eq "... with nothing on stderr" "$(cat "$WORK/err")" ""

sbx_list --list=e2b
eq "--list=e2b against the fake exits 0" "$RC" 0
ok "... lists web by its id, running" listed e2b "$WEB" running web '[^ ]+'
eq "... and the fake has it too" "$(fake_state "$WEB")" running

sbx_list --list
eq "--list (every provider) exits 0 without daytona credentials" "$RC" 0
ok "... lists the local leases" listed local "$ONE" running one host
ok "... and the e2b one" listed e2b "$WEB" running web '[^ ]+'
ok "... and notes daytona was skipped" grep -q "^sbxfs: daytona: .*(skipped)" "$WORK/err"

E2B_API_KEY= sbx_list --list=e2b
eq "a named provider without credentials: exit 1" "$RC" 1
ok "... says why on stderr, naming the variable" grep -q "^sbxfs: e2b: E2B_API_KEY is not set" "$WORK/err"
eq "... and prints no list" "$(cat "$WORK/out")" ""
# A provider whose listing fails (daytona, before e2b in the registry) is
# reported and the ones after it are still listed (issue 14).
DAYTONA_API_KEY=k DAYTONA_API_URL=http://127.0.0.1:9/api "$SBXFS" --list \
	-o "state_dir=$STATE,config=$CONFIG" >"$WORK/out" 2>"$WORK/err"
RC=$?
eq "--list with daytona unreachable exits 1" "$RC" 1
ok "... reports daytona on stderr" grep -q "^sbxfs: daytona: " "$WORK/err"
ok "... and still lists the e2b lease after it" listed e2b "$WEB" running web '[^ ]+'
ok "... and the local ones before it" listed local "$ONE" running one host
sbx_list --list=nosuch
eq "an unknown provider: exit 1" "$RC" 1
ok "... says so, and which there are" grep -q 'unknown provider "nosuch" (known: local, ' "$WORK/err"

ok "rmdir one ends it" rmdir "$MNT/one"
sbx_list --list=local
ok "... and --list=local no longer shows it" sh -c "! grep -q '$ONE' '$WORK/out'"
ok "... but still shows two" listed local "$TWO" paused two host
finish
