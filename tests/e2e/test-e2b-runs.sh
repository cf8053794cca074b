#!/bin/bash
# Runs on the e2b provider against its fake, as the caller sees them
# (lib-runs.sh): each caller its own run (${RUNS_ROUNDS:-8} rounds of 8
# callers: each remote round trip costs more than a local run), failures
# reaching $?, one shell, bytes kept exactly, stderr live, runs/N/ (a full
# state dir: test-*-output.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-runs.sh"
start_fake e2b
mount_sbxfs
L=$MNT/box
ok "mkdir creates a e2b lease" mkdir "$L"

story_runs_all "${RUNS_ROUNDS:-8}"
finish
