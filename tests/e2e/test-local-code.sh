#!/bin/bash
# code.py / code.js / code.ts on the local provider: persistent interpreters
# inside the lease (the shared checks of lib-code.sh), plus what only the
# local provider shows: interpreters surviving a remount, an interpreter
# OOM-killed by the memory cap replaced on the next run (stateLost), and a
# precise ENOTSUP when the sandbox has no TypeScript runtime.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-code.sh"
mount_sbxfs
L=$MNT/nb
mkdir "$L"

code_all "$L"

ok "the interpreters run inside the lease" sh -c "echo 'ps -eo args' > '$L/exec'; grep -q 'pykernel.py --socket /run/sbxfs/python.sock' '$L/exec'"
ok "log journals code runs" grep -q '"kind":"python"' "$L/log"

# Interpreters are processes of the lease: they outlive a remount of sbxfs.
echo 'survivor = "still here"' >"$L/code.py"
echo 'const js_survivor = 7' >"$L/code.js"
unmount_sbxfs
mount_sbxfs
echo 'survivor' >"$L/code.py"
eq "python state survives a remount" "$(cat "$L/code.py")" "'still here'"
eq "... not marked lost" "$(rfield "$L" 'r["stateLost"]')" "false"
echo 'js_survivor * 6' >"$L/code.js"
eq "javascript state survives a remount" "$(cat "$L/code.js")" "42"

# Paused: a code run resumes the lease and finds its interpreter as it was.
echo pause >"$L/state"
eq "paused" "$(cat "$L/state")" "paused"
echo 'survivor.upper()' >"$L/code.py"
eq "a code run on a paused lease resumes it, state intact" "$(cat "$L/code.py")" "'STILL HERE'"

# The memory cap kills an interpreter that grows past it; the next run says so.
echo "new capped resources.memoryMB=128" >"$MNT/ctl"
C=$MNT/capped
echo 'small = 1' >"$C/code.py"
echo 'hog = bytearray(512 << 20)' >"$C/code.py"
code_died "$C" small "is killed by the memory cap"
rmdir "$C"

# No TypeScript runtime (no node in the sandbox: it is looked for on the
# run's PATH and in /usr/local/bin, /usr/bin and /bin, so the lease's own
# copy of the host's node is moved aside): ENOTSUP and the reason in `error`.
mkdir "$MNT/nonode"
HIDE='for d in $(echo "$PATH:/usr/local/bin:/usr/bin:/bin" | tr : " "); do'
echo "$HIDE [ -x \$d/node ] && mv \$d/node \$d/node.sbx-hidden; done; true" >"$MNT/nonode/exec"
eq "code.ts without node fails with ENOTSUP" \
	"$(errno_of_write "$MNT/nonode/code.ts" 'const a: number = 1; a')" "ENOTSUP"
ok "error names the missing runtime" grep -q "no TypeScript runtime in the sandbox: node is not on PATH" "$MNT/nonode/error"
# ... at the write, where a shell's $? sees it (it was the close, which
# shells do not check: `echo CODE > code.ts` said 0).
sh -c "echo 'console.log(1)' > '$MNT/nonode/code.js'" 2>/dev/null
eq "echo CODE > code.js without node: the shell's \$? is 1" "$?" 1
echo "$HIDE [ -x \$d/node.sbx-hidden ] && mv \$d/node.sbx-hidden \$d/node; done; true" >"$MNT/nonode/exec"
eq "... and works once node is reachable" "$(echo 'const a: number = 1; a + 1' >"$MNT/nonode/code.ts"; cat "$MNT/nonode/code.ts")" "2"
rmdir "$MNT/nonode"

ok "rmdir ends the lease and its interpreters" rmdir "$L"
finish
