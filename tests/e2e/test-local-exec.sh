#!/bin/bash
# exec on the local provider: write-only runs at close, read-only gives the
# last stdout, read-write streams, exit codes in result, env, background
# processes surviving to the next run (the stories: lib-files.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-files.sh"
mount_sbxfs
L=$MNT/box
F=$L/fs/root
FHOME=/root

ok "mkdir creates a lease" mkdir "$L"
eq "state is running" "$(cat "$L/state")" "running"
echo 'uname -a' >"$L/exec"
ok "cat exec gives uname output" grep -q Linux "$L/exec"
eq "stdout file equals exec" "$(cat "$L/stdout")" "$(cat "$L/exec")"
story_exec_basics box local

echo 'hostname' >"$L/exec"
eq "hostname is the lease name" "$(cat "$L/exec")" "box"
ok "env keeps its text" grep -q GREETING "$L/env"
echo 'BAD LINE' >"$L/env" 2>/dev/null
ok "a malformed env line is refused" test $? != 0
ok "error explains the env refusal" grep -q "KEY=VALUE" "$L/error"
eq "env unchanged after refusal" "$(head -1 "$L/env")" "GREETING=hello"

story_exec_background
story_run_timeout
story_run_interrupt
story_exec_files

ok "ports/PORT gives host:port" grep -q ":8080" "$L/ports/8080"
ok "rmdir ends the lease" rmdir "$L"
ok "lease gone from the root" test ! -e "$L"
finish
