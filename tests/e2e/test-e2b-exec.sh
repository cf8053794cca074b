#!/bin/bash
# exec and the lease's life on the e2b provider against the fake E2B:
# stdout, stderr and the exit code of runs, streaming, env; pause, resume
# and kill through `state` (checked on the fake's side too); a remount
# re-attaches to the same sandbox with its files.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-files.sh"
start_fake e2b
mount_sbxfs
L=$MNT/box
F=$L/fs/home/user
FHOME=/home/user

ok "mkdir creates an e2b lease" mkdir "$L"
eq "state is running" "$(cat "$L/state")" "running"
ID=$(json_get "$L/info" '["sandboxId"]')
ok "info names the sandbox" test -n "$ID"
eq "the fake has it running" "$(fake_state "$ID")" "running"
ok "status lists the lease" grep -q "^box e2b running" "$MNT/status"

# Runs: the shared stories (lib-files.sh), then what is e2b's own.
story_exec_basics box e2b
echo 'id -un; pwd' >"$L/exec"
eq "runs as the sandbox's user, in its home" "$(cat "$L/exec" | tr '\n' ' ')" "user /home/user "
head -c 3000000 /dev/urandom | base64 -w 100 >"$WORK/big.txt"
cp "$WORK/big.txt" "$F/big.txt"
echo 'cat /home/user/big.txt' >"$L/exec"
ok "3 MB of output arrive whole" cmp "$WORK/big.txt" "$L/stdout"
story_exec_files
story_exec_background
story_run_timeout
story_run_interrupt

# pause / resume / kill through state.
echo kept >"$F/kept.txt"
# The sandbox's change report of our own upload may come late on a loaded
# machine and drop the cached entry: let it come, then cache the file again.
sleep 1
eq "a file to keep" "$(cat "$F/kept.txt")" "kept"
fake_reset_counters
ok "pause" sh -c "echo pause > '$L/state'"
eq "state says paused" "$(cat "$L/state")" "paused"
eq "the fake has it paused" "$(fake_state "$ID")" "paused"
eq "one pause call" "$(counter "POST /sandboxes/:id/pause")" 1
eq "a cached file is read while paused" "$(cat "$F/kept.txt")" "kept"
eq "... without resuming" "$(counter "POST /v2/sandboxes/:id/connect")" 0
eq "still paused" "$(cat "$L/state")" "paused"
ok "resume" sh -c "echo resume > '$L/state'"
eq "state says running" "$(cat "$L/state")" "running"
eq "the fake has it running again" "$(fake_state "$ID")" "running"
eq "one connect call" "$(counter "POST /v2/sandboxes/:id/connect")" 1
echo 'ps -eo args' >"$L/exec"
ok "the background job survived the pause" grep -q "^sleep 1000" "$L/stdout"
echo pause >"$L/state"
echo 'echo awake' >"$L/exec"
eq "a run on a paused lease resumes it" "$(cat "$L/exec")" "awake"
eq "state after the run" "$(cat "$L/state")" "running"
eq "bad state word" "$(errno_of_write "$L/state" "sleep")" "EINVAL"
ok "error says why" grep -q "sleep" "$L/error"
ok "the journal has the transitions" grep -q '"to":"paused"' "$L/log"

# Remount: the lease re-attaches to the same sandbox, files and env intact.
echo 'echo from-exec > /home/user/remount.txt' >"$L/exec"
unmount_sbxfs
ok "daemon exited cleanly on unmount" test "${DAEMON_STATUS:-1}" = 0
eq "the sandbox outlives the mount" "$(fake_state "$ID")" "running"
fake_reset_counters
mount_sbxfs
eq "lease back after remount" "$(cat "$L/state")" "running"
eq "same sandbox" "$(json_get "$L/info" '["sandboxId"]')" "$ID"
eq "no new sandbox was made" "$(counter "POST /v2/sandboxes")" 0
eq "files kept across remount" "$(cat "$F/kept.txt") $(cat "$F/remount.txt")" "kept from-exec"
echo 'echo "$GREETING"' >"$L/exec"
eq "env kept across remount" "$(cat "$L/exec")" "hello"
echo 'ps -eo args' >"$L/exec"
ok "background job kept across remount" grep -q "^sleep 1000" "$L/stdout"

# kill: the sandbox is gone, the lease stays until rmdir.
ok "kill" sh -c "echo kill > '$L/state'"
eq "state says killed" "$(cat "$L/state")" "killed"
eq "the fake has no such sandbox" "$(fake_state "$ID")" "gone"
eq "fs/ of a killed lease" "$(errno_of "os.stat('$F')")" "ENOENT"
ok "rmdir a killed lease" rmdir "$L"
ok "gone from the root" test ! -e "$L"
ok "rmdir of a new lease kills its sandbox" sh -c "mkdir '$MNT/two' && rmdir '$MNT/two'"
eq "the fake has no sandbox left" "$(fake_get /_fake/sandboxes)" "[]"
finish
