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
finish
