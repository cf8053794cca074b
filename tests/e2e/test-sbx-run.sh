#!/bin/bash
# sbx run on the per-run files (runs/N/, runs/mine; issue 11 items 1 and 5):
# stderr streams live from runs/N/stderr, SIGINT stops the run through
# runs/N/ctl, and concurrent callers each get their own streams and exit
# code. Needs the runs/ files: enable it (e2e.am) once they are merged.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-sbx.sh"
mount_sbxfs
L=$MNT/box
mkdir "$L"
ok "the lease has runs/" test -d "$L/runs"

# stderr streams while the command runs, the lease's first run too (sbx
# looked for runs/mine, which is missing until then, and fell back to the
# lease's stderr file, printed at the end).
# The command ends only when told (a file the test makes in fs/), so a loaded
# machine's slow start cannot end it before the first check.
go=/tmp/go-$$
"$SBX" run "$L" -- sh -c "echo e1 >&2; while [ ! -e $go ]; do sleep 0.1; done; echo e2 >&2" \
	2>"$WORK/live" &
pid=$!
ok "sbx run: stderr shows before the command ends" wait_for 30 grep -q e1 "$WORK/live"
ok "... and the command was still running" kill -0 $pid
touch "$L/fs$go"
wait $pid
eq "... then all of it" "$(cat "$WORK/live")" "$(printf 'e1\ne2')"

story_sbx_run_basics "$L"

# SIGINT: the run is stopped through runs/N/ctl, and its result says so.
s=8$$
"$SBX" run "$L" -- sh -c "echo started; sleep $s" >"$WORK/o" &
pid=$!
wait_for 10 grep -q started "$WORK/o"
n=$(cat "$L/runs/mine" 2>/dev/null) # the test shell's session runs sbx too
kill -INT $pid
wait $pid
eq "sbx run: SIGINT ends sbx with 130" "$?" 130
ok "... the run's result says interrupted" wait_for 10 grep -q '"interrupted": true' "$L/runs/$n/result"

# Eight callers at once: each its own output, error stream and exit code.
for i in 1 2 3 4 5 6 7 8; do
	"$SBX" run "$L" -- sh -c "sleep 0.$i; echo out$i; echo err$i >&2; exit $i" \
		>"$WORK/o$i" 2>"$WORK/e$i" &
	eval "p$i=\$!"
done
mix=0
for i in 1 2 3 4 5 6 7 8; do
	eval "wait \$p$i"
	rc=$?
	[ "$rc" = "$i" ] && [ "$(cat "$WORK/o$i")" = "out$i" ] && [ "$(cat "$WORK/e$i")" = "err$i" ] ||
		{ mix=$((mix + 1)); log "caller $i: rc=$rc out=[$(cat "$WORK/o$i")] err=[$(cat "$WORK/e$i")]"; }
done
eq "8 concurrent sbx runs: no mix-ups" "$mix" 0
finish
