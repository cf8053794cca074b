#!/bin/bash
# The sbx client on the local provider: sbx run (streams, exit codes 124 and
# 125, the lease and the working directory taken from where it is called,
# SIGINT), sbx shell through tmux, and the tty/ files with their bad input.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-sbx.sh"
mount_sbxfs
L=$MNT/box
mkdir "$L"

"$SBX" --help >"$WORK/help"
ok "sbx --help names both commands" grep -q "sbx shell" "$WORK/help"
"$SBX" frob 2>"$WORK/frob"
eq "sbx with an unknown command exits 2" "$?" 2
ok "... naming it" grep -qx 'sbx: unknown command "frob"' "$WORK/frob"
"$SBX" run -- 2>"$WORK/nocmd"
eq "sbx run with no command exits 2" "$?" 2
ok "... saying so" grep -qx 'sbx run: no COMMAND to run' "$WORK/nocmd"
"$SBX" shell "$L" ls 2>"$WORK/shcmd"
eq "sbx shell with a command exits 2" "$?" 2
ok "... saying what it takes" grep -q 'sbx shell: one LEASE at most, and no command (use sbx run)' "$WORK/shcmd"

story_sbx_run_basics "$L"

# Output streams while the command runs, not at its end.
# (It ends only when told, so a loaded machine's slow start cannot end it first.)
go=/tmp/go-$$
"$SBX" run "$L" -- sh -c "echo first; while [ ! -e $go ]; do sleep 0.1; done; echo second" \
	>"$WORK/live" &
pid=$!
ok "sbx run: stdout shows before the command ends" wait_for 30 grep -q first "$WORK/live"
ok "sbx run: ... and the command was still running" kill -0 $pid
touch "$L/fs$go"
wait $pid
eq "sbx run: ... then all of it" "$(cat "$WORK/live")" "$(printf 'first\nsecond')"

# The lease, and the directory in the sandbox, from where sbx is called.
mkdir -p "$L/fs/tmp/sub dir"
eq "sbx run in fs/DIR: the command runs in DIR" \
	"$(cd "$L/fs/tmp/sub dir" && "$SBX" run -- pwd)" "/tmp/sub dir"
eq "sbx run in the lease dir: LEASE may be omitted" "$(cd "$L" && "$SBX" run hostname)" "box"
eq "sbx run NAME inside the mount" "$(cd "$MNT" && "$SBX" run box -- hostname)" "box"
eq "sbx run NAME with SBXFS_MOUNT" "$(cd / && SBXFS_MOUNT=$MNT "$SBX" run box -- hostname)" "box"

# A sandbox can make the mount root's files anywhere in its fs/: sbx called
# below them took that directory for the root and its "work" for a lease,
# wrote the command to work/exec (a file of the sandbox) and would show what
# the sandbox wrote as the output and exit code, nothing having run.
echo 'mkdir -p /tmp/trap/profiles /tmp/trap/work/sub && touch /tmp/trap/ctl /tmp/trap/status /tmp/trap/work/exec' >"$L/exec"
eq "sbx run below a sandbox's imitation of the mount root runs in the real lease" \
	"$(cd "$L/fs/tmp/trap/work/sub" && "$SBX" run -- sh -c 'echo real; pwd')" "$(printf 'real\n/tmp/trap/work/sub')"
eq "... and wrote nothing to the imitation's exec" "$(stat -c %s "$L/fs/tmp/trap/work/exec")" 0
"$SBX" run "$L/fs/tmp/trap/work" -- true 2>"$WORK/e"
eq "sbx run with the imitation lease's path: refused (125)" "$?" 125
ok "... saying why" grep -q "not a directory of an sbxfs mount's root" "$WORK/e"
eq "... and nothing written there either" "$(stat -c %s "$L/fs/tmp/trap/work/exec")" 0

# 125: an sbxfs failure, with the reason.
(cd / && "$SBX" run -- true) 2>"$WORK/e"
eq "sbx run outside a mount with no LEASE exits 125" "$?" 125
ok "... and says the directory is not in a mount" grep -q "not in an sbxfs mount" "$WORK/e"
mkdir "$L/fs/tmp/gone"
(cd "$L/fs/tmp/gone" && rmdir "$L/fs/tmp/gone" && "$SBX" run -- true) 2>"$WORK/e"
eq "sbx run in a directory that was removed exits 125" "$?" 125
ok "... saying so (it said: not in an sbxfs mount)" grep -q "the current directory cannot be resolved (No such file or directory: it was removed): give LEASE" "$WORK/e"
"$SBX" run "$MNT/nolease" -- true 2>"$WORK/e"
eq "sbx run on a missing lease exits 125" "$?" 125
echo "new man autoResume=false" >"$MNT/ctl"
"$SBX" run "$MNT/man" -- sh -c 'echo old-err >&2' 2>/dev/null
echo pause >"$MNT/man/state"
"$SBX" run "$MNT/man" -- echo hi >"$WORK/o" 2>"$WORK/e"
eq "sbx run on a paused autoResume-off lease exits 125" "$?" 125
ok "... with the reason on stderr" grep -q "autoResume is off" "$WORK/e"
eq "... and runs nothing" "$(cat "$WORK/o")" ""
ok "... nor shows an earlier run's stderr" sh -c "! grep -q old-err '$WORK/e'"
echo resume >"$MNT/man/state"

# 124: past the lease's runTimeout, like timeout(1).
echo "new quick runTimeout=1" >"$MNT/ctl"
t0=$(date +%s)
"$SBX" run "$MNT/quick" -- sh -c 'echo begun; sleep 8' >"$WORK/o" 2>"$WORK/e"
eq "sbx run past runTimeout exits 124" "$?" 124
ok "... well before the command's own end" test $(($(date +%s) - t0)) -lt 7
ok "... with the output it made" grep -q begun "$WORK/o"
ok "... and the reason on stderr" grep -q "runTimeout" "$WORK/e"

# SIGINT stops the run in the sandbox and sbx ends as killed by it.
s=9$$
"$SBX" run "$L" -- sh -c "echo started; sleep $s; echo never" >"$WORK/o" &
pid=$!
wait_for 10 grep -q started "$WORK/o"
kill -INT $pid
t0=$(date +%s)
wait $pid
eq "sbx run: SIGINT ends sbx with 130" "$?" 130
ok "... promptly" test $(($(date +%s) - t0)) -lt 8
ok "... and the command is gone from the sandbox" wait_for 10 sh -c "! '$SBX' run '$L' -- ps -eo args | grep -q '^sleep $s'"
ok "... and never printed more" sh -c "! grep -q never '$WORK/o'"

story_sbx_shell "$L"
story_sbx_shell_piped "$L"
story_tty_files "$L"

# A lease's shell starts in its fs/ position too.
tm new-session -d -s sbx -x 80 -y 24 "cd '$L/fs/tmp/sub dir' && '$SBX' shell; sleep 60"
wait_for 20 pane_ready
tm send-keys -t sbx 'pwd' Enter
ok "sbx shell in fs/DIR starts in DIR" wait_for 15 pane_has "/tmp/sub dir"
tm kill-session -t sbx

# rmdir of the lease ends a shell in it (and its jobs) and sbx says so.
mkdir "$MNT/brief"
rm -f "$WORK/shell.rc"
tm new-session -d -s sbx -x 80 -y 24 "'$SBX' shell '$MNT/brief' 2>'$WORK/shell.err'; echo sbx-exit=\$? >'$WORK/shell.rc'; sleep 60"
wait_for 20 pane_ready
tm send-keys -t sbx 'sleep 300 &' Enter
sleep 1
ok "rmdir of a lease with a shell open returns" timeout 20 rmdir "$MNT/brief"
ok "... sbx shell ends" wait_for 10 test -s "$WORK/shell.rc"
eq "... with 125" "$(cat "$WORK/shell.rc" 2>/dev/null)" "sbx-exit=125"
ok "... saying the session ended" grep -q "session ended" "$WORK/shell.err"
tm kill-session -t sbx

finish
