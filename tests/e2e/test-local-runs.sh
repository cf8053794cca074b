#!/bin/bash
# Runs on the local provider as the caller sees them (lib-runs.sh): each
# caller its own run, failures reaching $?, one shell, bytes kept exactly,
# stderr live, runs/N/; then what only local can show quickly: a few
# hundred MB of output with the daemon's memory bounded, and run numbers
# continuing after a remount.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-runs.sh"
mount_sbxfs
L=$MNT/box
ok "mkdir creates a lease" mkdir "$L"

story_runs_all "${RUNS_ROUNDS:-15}" # 100 by hand: RUNS_ROUNDS=100 (8 min)

# 300 MB through a run: every byte on disk, the daemon's memory bounded.
before=$(rss_kb)
echo 'head -c 300000000 /dev/zero | tr "\0" a' >"$L/exec"
after=$(rss_kb)
log "daemon peak RSS: $before kB before, $after kB after a 300 MB run"
# The bound is the plain build's: under ASan every freed buffer sits in its
# quarantine (up to 256 MB) and the shadow memory doubles the rest, so there
# the figure is only logged (151 MB seen), as the valgrind test's are.
if [ "${SBXFS_ASAN:-0}" != 1 ]; then
	ok "the daemon's peak RSS stays under 64 MB ($after kB)" test "$after" -lt 65536
fi
eq "cat exec gives all 300 MB" "$(cat "$L/exec" | wc -c)" 300000000
eq "... all of them 'a'" "$(tr -d a <"$L/exec" | wc -c)" 0
eq "result: no text, the exact size, truncated" \
	"$(json_get "$L/result" '["stdout"], d["stdoutBytes"], d["stdoutTruncated"]')" "(None, 300000000, True)"
ok "the result is small" test "$(stat -c %s "$L/result")" -lt 4096

n=$(last_run)
unmount_sbxfs
mount_sbxfs
echo 'echo again' >"$L/exec"
eq "run numbers continue after a remount" "$(cat "$L/runs/mine")" $((n + 1))
eq "... exec answers the new run" "$(cat "$L/exec")" again
ok "the run before the remount is still there" test -s "$L/runs/$n/result"
finish
