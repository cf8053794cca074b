#!/bin/bash
# exec and the lease's life on a daytona lease against the fake Daytona:
# stdout and stderr apart, the exit code in result, env, cwd, streaming,
# files crossing between fs/ and runs both ways, background processes,
# ports/, pause / resume / kill through `state` (checked on the fake's
# side), remount re-attach, rmdir deleting the sandbox.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
start_fake daytona
mount_sbxfs
L=$MNT/box
F=$L/fs/home/daytona
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval("d"+sys.argv[2]))' "$1" "$2"; }

ok "mkdir creates a lease" mkdir "$L"
eq "state is running" "$(cat "$L/state")" "running"
SID=$(json "$L/info" '["sandboxId"]')
eq "the fake has the sandbox, started" "$(fake_state "$SID")" "started"
eq "one create call" "$(counter 'POST /api/sandbox')" 1
ok "info names the provider" test "$(json "$L/info" '["provider"]')" = daytona

echo 'uname -s' >"$L/exec"
eq "cat exec gives the run's output" "$(cat "$L/exec")" "Linux"
eq "stdout file equals exec" "$(cat "$L/stdout")" "Linux"
eq "exit code 0 in result" "$(json "$L/result" '["exitCode"]')" 0

echo 'echo out; echo err >&2; echo out2; exit 3' >"$L/exec"
ok "a non-zero exit is not a filesystem error" test $? = 0
eq "stdout of a failing run (no stderr in it)" "$(cat "$L/stdout")" "$(printf 'out\nout2')"
eq "stderr separated" "$(cat "$L/stderr")" "err"
eq "exit code 3 in result" "$(json "$L/result" '["exitCode"]')" 3
eq "result has the streams apart too" "$(json "$L/result" '["stdout"], d["stderr"]')" \
	"('out\\nout2\\n', 'err\\n')"

echo 'whoami; pwd' >"$L/exec"
eq "runs as the sandbox's user, in its home" "$(cat "$L/exec" | tr '\n' ' ')" "daytona /home/daytona "
printf 'GREETING=hello\nOTHER=x y\n' >"$L/env"
echo 'echo "$GREETING/$OTHER"' >"$L/exec"
eq "env lines reach runs" "$(cat "$L/exec")" "hello/x y"
: >"$L/env"
echo 'echo "[$GREETING]"' >"$L/exec"
eq "an emptied env reaches runs too" "$(cat "$L/exec")" "[]"
echo 'printf "%s|" "a b" "$HOME" '"'"'it'"'"'"'"'"'"'"'"'s'"'"'' >"$L/exec"
eq "quoting survives the session wrapper" "$(cat "$L/exec")" "a b|/home/daytona|it's|"

# Files cross between fs/ and runs, both ways, at once.
echo 'from-mount' >"$F/m.txt"
echo 'cat /home/daytona/m.txt' >"$L/exec"
eq "a file written through the mount is in the sandbox at close" "$(cat "$L/exec")" "from-mount"
touch "$F/empty.txt"
echo 'ls /home/daytona/empty.txt' >"$L/exec"
eq "an empty file made by touch is there too" "$(cat "$L/exec")" "/home/daytona/empty.txt"
chmod 750 "$F/m.txt"
echo 'stat -c %a /home/daytona/m.txt' >"$L/exec"
eq "a chmod through the mount is applied before a run" "$(cat "$L/exec")" 750
echo 'echo made-by-run > /home/daytona/from-run.txt' >"$L/exec"
eq "a file a run writes is visible in fs/ at once" "$(cat "$F/from-run.txt")" "made-by-run"
echo 'echo changed-by-run > /home/daytona/from-run.txt' >"$L/exec"
eq "... and a change to it too" "$(cat "$F/from-run.txt")" "changed-by-run"
echo 'rm /home/daytona/from-run.txt' >"$L/exec"
ok "a file a run deletes is gone from fs/ at once" test ! -e "$F/from-run.txt"

# Read-write open streams the output while the run goes on.
exec 3<>"$L/exec"
echo 'for i in 1 2 3; do echo line$i; sleep 1; done' >&3
t0=$(date +%s%N)
read -r first <&3
t1=$(date +%s%N)
rest=$(cat <&3)
t2=$(date +%s%N)
exec 3>&-
eq "first streamed line" "$first" "line1"
ok "first line arrives before the run ends ($(((t1 - t0) / 1000000)) ms)" test $(((t1 - t0) / 1000000)) -lt 1500
eq "rest of the stream" "$(echo $rest)" "line2 line3"
ok "the stream ends with the run" test $(((t2 - t0) / 1000000)) -ge 1900

# A background process started by one run is alive in the next.
echo 'nohup sleep 4242 >/dev/null 2>&1 & echo started' >"$L/exec"
eq "background start returns" "$(cat "$L/exec")" "started"
echo 'pgrep -fx "sleep 4242" >/dev/null && echo alive' >"$L/exec"
eq "the background process is alive in a later run" "$(cat "$L/exec")" "alive"
t0=$(date +%s)
echo 'sleep 1000 & echo bg-with-pipe' >"$L/exec"
eq "a run returns when its shell exits" "$(cat "$L/exec")" "bg-with-pipe"
ok "... without waiting for the background job" test $(($(date +%s) - t0)) -lt 5

ok "ports/PORT gives the preview URL" grep -q "^http://.*8080" "$L/ports/8080"
ok "log journals runs" grep -q '"event":"run"' "$L/log"
ok "status lists the lease" grep -q "^box daytona running" "$MNT/status"

# pause / resume / kill through state.
echo 'echo kept > /home/daytona/kept.txt' >"$L/exec"
eq "read before the pause" "$(cat "$F/kept.txt")" "kept"
fake_reset_counters
echo pause >"$L/state"
eq "state says paused" "$(cat "$L/state")" "paused"
eq "the fake's sandbox is stopped" "$(fake_state "$SID")" "stopped"
eq "one stop call" "$(counter 'POST /api/sandbox/:idOrName/stop')" 1
eq "a file read before the pause is served while paused" "$(cat "$F/kept.txt")" "kept"
eq "... without a start" "$(counter 'POST /api/sandbox/:idOrName/start') $(cat "$L/state")" "0 paused"
eq "pause again is a no-op" "$(errno_of_write "$L/state" "pause")" "OK"
echo resume >"$L/state"
eq "state says running" "$(cat "$L/state")" "running"
eq "the fake's sandbox is started" "$(fake_state "$SID")" "started"
eq "one start call" "$(counter 'POST /api/sandbox/:idOrName/start')" 1
echo 'pgrep -fx "sleep 4242" >/dev/null && echo alive' >"$L/exec"
eq "the background process lived through stop and start" "$(cat "$L/exec")" "alive"
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
OID=$(json "$MNT/other/info" '["sandboxId"]')
unmount_sbxfs
eq "the daemon exited cleanly on unmount" "${DAEMON_STATUS:-none}" 0
eq "unmount does not end the sandboxes" "$(fake_state "$SID") $(fake_state "$OID")" "stopped started"
fake_reset_counters
mount_sbxfs
eq "both leases back after remount" "$(ls "$MNT" | grep -cx -e box -e other)" 2
eq "no sandbox created at remount" "$(counter 'POST /api/sandbox')" 0
eq "the same sandbox" "$(json "$L/info" '["sandboxId"]')" "$SID"
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
