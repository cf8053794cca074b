#!/bin/bash
# exec and the lease's life on a daytona lease against the fake Daytona:
# stdout and stderr apart, the exit code in result, env, cwd, streaming,
# files crossing between fs/ and runs both ways, background processes,
# ports/, pause / resume / kill through `state` (checked on the fake's
# side), remount re-attach, rmdir deleting the sandbox.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-files.sh"
start_fake daytona
mount_sbxfs
L=$MNT/box
F=$L/fs/home/daytona
FHOME=/home/daytona

ok "mkdir creates a lease" mkdir "$L"
eq "state is running" "$(cat "$L/state")" "running"
SID=$(json_get "$L/info" '["sandboxId"]')
eq "the fake has the sandbox, started" "$(fake_state "$SID")" "started"
eq "one create call" "$(counter 'POST /api/sandbox')" 1
ok "info names the provider" test "$(json_get "$L/info" '["provider"]')" = daytona

story_exec_basics box daytona

echo 'whoami; pwd' >"$L/exec"
eq "runs as the sandbox's user, in its home" "$(cat "$L/exec" | tr '\n' ' ')" "daytona /home/daytona "
: >"$L/env"
echo 'echo "[$GREETING]"' >"$L/exec"
eq "an emptied env reaches runs too" "$(cat "$L/exec")" "[]"
echo 'printf "%s|" "$HOME"' >"$L/exec"
eq "the session's HOME" "$(cat "$L/exec")" "/home/daytona|"

story_exec_files
story_exec_background
story_run_timeout
story_run_interrupt

ok "ports/PORT gives the preview URL" grep -q "^http://.*8080" "$L/ports/8080"

# pause / resume / kill through state.
# The kernel still holds the directories (listed just before the run), so
# after the run it asks only for the file: the pause must fetch what the
# cache lacks of its directories, or the read once the kernel's entries
# expire (fs_cache_timeout, 1 s) would have to start the sandbox.
ls "$F" >/dev/null
echo 'echo kept > /home/daytona/kept.txt' >"$L/exec"
eq "read before the pause" "$(cat "$F/kept.txt")" "kept"
fake_reset_counters
echo pause >"$L/state"
eq "state says paused" "$(cat "$L/state")" "paused"
eq "the fake's sandbox is stopped" "$(fake_state "$SID")" "stopped"
eq "one stop call" "$(counter 'POST /api/sandbox/:idOrName/stop')" 1
sleep 1.2
eq "a file read before the pause is served while paused" "$(cat "$F/kept.txt")" "kept"
eq "... without a start" "$(counter 'POST /api/sandbox/:idOrName/start') $(cat "$L/state")" "0 paused"
eq "pause again is a no-op" "$(errno_of_write "$L/state" "pause")" "OK"
echo resume >"$L/state"
eq "state says running" "$(cat "$L/state")" "running"
eq "the fake's sandbox is started" "$(fake_state "$SID")" "started"
eq "one start call" "$(counter 'POST /api/sandbox/:idOrName/start')" 1
ok "the background process lived through stop and start" bg_alive
echo pause >"$L/state"
echo 'echo awake' >"$L/exec"
eq "a run on a paused lease resumes it" "$(cat "$L/exec")" "awake"
eq "state after auto-resume" "$(cat "$L/state")" "running"
eq "bad control word" "$(errno_of_write "$L/state" "nap")" "EINVAL"
ok "error says why" grep -qi "nap" "$L/error"

# Remount: the lease is re-attached (no new sandbox) with its files.
echo 'hello' >"$F/remount.txt"
echo pause >"$MNT/box/state"
mkdir "$MNT/other"
echo 'echo other > /home/daytona/o.txt' >"$MNT/other/exec"
OID=$(json_get "$MNT/other/info" '["sandboxId"]')
unmount_sbxfs
eq "the daemon exited cleanly on unmount" "${DAEMON_STATUS:-none}" 0
eq "unmount does not end the sandboxes" "$(fake_state "$SID") $(fake_state "$OID")" "stopped started"
fake_reset_counters
mount_sbxfs
eq "both leases back after remount" "$(ls "$MNT" | grep -cx -e box -e other)" 2
eq "no sandbox created at remount" "$(counter 'POST /api/sandbox')" 0
eq "the same sandbox" "$(json_get "$L/info" '["sandboxId"]')" "$SID"
eq "paused before unmount, paused after" "$(cat "$L/state")" "paused"
eq "running before unmount, running after" "$(cat "$MNT/other/state")" "running"
eq "files kept across remount" "$(cat "$F/remount.txt")" "hello"
eq "... in the other lease too" "$(cat "$MNT/other/fs/home/daytona/o.txt")" "other"
echo 'cat /home/daytona/kept.txt' >"$L/exec"
eq "exec after remount" "$(cat "$L/exec")" "kept"

# kill and rmdir.
echo kill >"$L/state"
eq "state says killed" "$(cat "$L/state")" "killed"
eq "the fake's sandbox is deleted" "$(fake_state "$SID")" "gone"
eq "fs/ of a killed lease" "$(errno_of "os.stat('$F')")" "ENOENT"
ok "rmdir a killed lease" rmdir "$L"
ok "gone from the mount" test ! -e "$L"
ok "rmdir ends a running lease" rmdir "$MNT/other"
eq "... and deletes its sandbox" "$(fake_state "$OID")" "gone"
finish
