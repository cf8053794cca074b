#!/bin/bash
# The sbx client against the fake Daytona: sbx run works; terminal sessions
# are refused with ENOTSUP and a precise reason (Daytona's PTY is
# WebSocket-only, which the mount's HTTP layer does not speak).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-sbx.sh"
start_fake daytona
mount_sbxfs
L=$MNT/box
mkdir "$L"

story_sbx_run_basics "$L"
eq "tty/clone on daytona is ENOTSUP" "$(errno_of "open('$L/tty/clone').read()")" ENOTSUP
ok "error says terminal sessions are not supported" \
	grep -q "daytona: terminal sessions are not supported" "$L/error"
"$SBX" shell "$L" </dev/null >/dev/null 2>"$WORK/e"
eq "sbx shell on daytona exits 125" "$?" 125
ok "... and says why" grep -q "daytona: terminal sessions are not supported" "$WORK/e"
eq "tty/ still lists only clone" "$(ls "$L/tty")" "clone"
finish
