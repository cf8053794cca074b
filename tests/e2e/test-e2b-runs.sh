#!/bin/bash
# Runs on the e2b provider against its fake, as the caller sees them
# (lib-runs.sh): each caller its own run (${RUNS_ROUNDS:-20} rounds of 8
# callers: each remote round trip costs more than a local run), failures
# reaching $?, one shell, bytes kept exactly, stderr live, runs/N/; then a
# state dir (a small tmpfs) that fills up: the run that cannot be kept
# fails where the shell sees it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-runs.sh"
start_fake e2b
mkdir -p "$STATE"
mount -t tmpfs -o size=64m tmpfs "$STATE" || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
EXTRA_CLEANUP="$EXTRA_CLEANUP; umount '$STATE'"
mount_sbxfs
L=$MNT/box
ok "mkdir creates a e2b lease" mkdir "$L"

story_runs_all "${RUNS_ROUNDS:-20}"

# The state dir fills up.
fill_to() { # KB to leave free
	local free
	rm -f "$STATE/filler"
	free=$(df --output=avail -k "$STATE" | tail -1)
	head -c $(((free - $1) * 1024)) /dev/zero >"$STATE/filler" 2>/dev/null
}
fill_to 0
out=$(bash -c "echo 'echo marker' > '$L/exec'" 2>&1)
rc=$?
ok "with the state dir full, echo 'echo marker' > exec exits non-zero (rc $rc): $out" test "$rc" != 0
ok "... bash says no space" sh -c "echo '$out' | grep -q 'No space left'"
# The lease's error file is on the full disk too: the root's (memory) has it.
ok "... error says the state dir cannot keep a run" grep -q "lease box: the state dir cannot keep a run's output" "$MNT/error"
fill_to 3072
r=$(errno_of_write "$L/exec" 'echo begun; head -c 8000000 /dev/zero')
eq "a run whose output outgrows the state dir fails at close" "$r" ENOSPC
ok "... error says which run could not be kept" grep -q "could not keep the output of run" "$MNT/error"
ok "... cat exec after it exits non-zero" sh -c "! cat '$L/exec' >/dev/null 2>&1"
rm -f "$STATE/filler"
eq "with room again, runs are kept" "$(bash -c "echo 'echo marker' > '$L/exec'; cat '$L/exec'")" marker
finish
