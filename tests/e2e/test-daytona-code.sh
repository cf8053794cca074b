#!/bin/bash
# code.py / code.js / code.ts on the daytona provider against the fake
# Daytona: persistent interpreters without WebSockets (sbxfs's kernel
# drivers running in the sandbox, each run a session command; the shared
# checks of lib-code.sh), state kept across a remount and a stop/start of
# the sandbox, and a code cell bigger than a command can carry.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-code.sh"
start_fake daytona
mount_sbxfs
L=$MNT/nb
mkdir "$L"

code_all "$L"
ok "no WebSocket, no one-shot code-run: runs are session commands" \
	test "$(counter 'POST /toolbox/:id/process/code-run')" = 0

# A cell over what a command carries goes up as a file first.
python3 -c 'print("big = [" + ",".join(str(i) for i in range(30000)) + "]")' >"$WORK/big.py"
cp "$WORK/big.py" "$L/code.py"
echo 'len(big), sum(big)' >"$L/code.py"
eq "a 170 KB cell runs" "$(cat "$L/code.py")" "(30000, 449985000)"

# The interpreters are processes of the sandbox: a remount finds them.
echo 'survivor = "still here"' >"$L/code.py"
unmount_sbxfs
mount_sbxfs
echo 'survivor' >"$L/code.py"
eq "python state survives a remount" "$(cat "$L/code.py")" "'still here'"
eq "... not marked lost" "$(rfield "$L" 'r["stateLost"]')" "false"

# Stop (pause) and start: the fake keeps processes (SIGSTOP/SIGCONT).
echo pause >"$L/state"
eq "paused" "$(cat "$L/state")" "paused"
echo 'survivor.upper()' >"$L/code.py"
eq "a code run resumes the sandbox, state intact" "$(cat "$L/code.py")" "'STILL HERE'"
ok "rmdir ends the lease" rmdir "$L"

# Where no persistent interpreter can run (here: a file is in the way of
# its directory), each cell runs alone through /process/code-run; charts
# still come back as PNG files.
O=$MNT/oneshot
mkdir "$O"
echo blocked >"$O/fs/tmp/.sbxfs-code"
fake_reset_counters
printf 'import matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4])\nplt.show()\nprint("done")\n' >"$O/code.py"
eq "one-shot fallback: the cell's output" "$(cat "$O/code.py")" "done"
ok "... ran through code-run" test "$(counter 'POST /toolbox/:id/process/code-run')" = 1
png=$(rfield "$O" '[o["file"] for o in r["results"] if o["mime"] == "image/png"][0]')
ok "... its chart artifact is a PNG in results/" sh -c "file '$O/results/$png' | grep -q 'PNG image data'"
echo 'raise ValueError("one-shot boom")' >"$O/code.py"
eq "... an exception: success false" "$(rfield "$O" 'r["success"]')" "false"
eq "... with its name" "$(rfield "$O" 'r["error"]["name"]')" "ValueError"
eq "... and message" "$(rfield "$O" 'r["error"]["message"]')" "one-shot boom"
rmdir "$O"
finish
