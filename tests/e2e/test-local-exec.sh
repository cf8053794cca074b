#!/bin/bash
# exec on the local provider: write-only runs at close, read-only gives the
# last stdout, read-write streams, exit codes in result, env, background
# processes surviving to the next run.
. "$(dirname "$0")/lib.sh"
mount_sbxfs
L=$MNT/box

ok "mkdir creates a lease" mkdir "$L"
eq "state is running" "$(cat "$L/state")" "running"
echo 'uname -a' >"$L/exec"
ok "cat exec gives uname output" grep -q Linux "$L/exec"
eq "stdout file equals exec" "$(cat "$L/stdout")" "$(cat "$L/exec")"
eq "exit code 0 in result" "$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["exitCode"])' "$L/result")" 0

echo 'echo out; echo err >&2; exit 3' >"$L/exec"
ok "a non-zero exit is not a filesystem error" test $? = 0
eq "stdout of a failing run" "$(cat "$L/stdout")" "out"
eq "stderr separated" "$(cat "$L/stderr")" "err"
eq "exit code 3 in result" "$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["exitCode"])' "$L/result")" 3

echo 'hostname' >"$L/exec"
eq "hostname is the lease name" "$(cat "$L/exec")" "box"

printf 'GREETING=hello\nOTHER=x y\n' >"$L/env"
echo 'echo "$GREETING/$OTHER"' >"$L/exec"
eq "env lines reach runs" "$(cat "$L/exec")" "hello/x y"
ok "env keeps its text" grep -q GREETING "$L/env"
echo 'BAD LINE' >"$L/env" 2>/dev/null
ok "a malformed env line is refused" test $? != 0
ok "error explains the env refusal" grep -q "KEY=VALUE" "$L/error"
eq "env unchanged after refusal" "$(head -1 "$L/env")" "GREETING=hello"

# A background process started by one run is alive in the next.
echo 'nohup sleep 1000 >/dev/null 2>&1 & echo started' >"$L/exec"
eq "background start returns" "$(cat "$L/exec")" "started"
echo 'ps -eo args' >"$L/exec"
ok "background sleep listed by ps in a later run" grep -q "^sleep 1000" "$L/exec"
# ... even when it keeps the output pipe open.
start=$(date +%s)
echo 'sleep 1000 & echo bg-with-pipe' >"$L/exec"
end=$(date +%s)
eq "a run returns when its shell exits" "$(cat "$L/exec")" "bg-with-pipe"
ok "... without waiting for the background job" test $((end - start)) -lt 5

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
ok "first line arrives before the run ends" test $(((t1 - t0) / 1000000)) -lt 1500
eq "rest of the stream" "$(echo $rest)" "line2 line3"
ok "the stream ends with the run" test $(((t2 - t0) / 1000000)) -ge 1900

# A file a run writes is visible in fs/ at once.
echo 'echo made-by-run > /root/from-run.txt' >"$L/exec"
eq "run output visible in fs/" "$(cat "$L/fs/root/from-run.txt")" "made-by-run"
# ... even a same-size rewrite of a file whose pages and attributes the kernel holds.
echo aaaa >"$L/fs/root/same.txt"
eq "read through fs/" "$(cat "$L/fs/root/same.txt")" "aaaa"
echo 'echo bbbb > /root/same.txt' >"$L/exec"
eq "a same-size rewrite by a run shows at once" "$(cat "$L/fs/root/same.txt")" "bbbb"
echo 'rm /root/from-run.txt' >"$L/exec"
ok "a file a run deletes is gone from fs/ at once" test ! -e "$L/fs/root/from-run.txt"

ok "log journals runs" grep -q '"event":"run"' "$L/log"
ok "info is JSON with the lease name" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["name"]=="box" and d["provider"]=="local" and d["sandboxId"]' "$L/info"
ok "status lists the lease" grep -q "^box local running" "$MNT/status"
ok "ports/PORT gives host:port" grep -q ":8080" "$L/ports/8080"
ok "rmdir ends the lease" rmdir "$L"
ok "lease gone from the root" test ! -e "$L"
finish
