#!/bin/bash
# Runs on the daytona provider against its fake, as the caller sees them
# (lib-runs.sh): each caller its own run (${RUNS_ROUNDS:-8} rounds of 8
# callers: each remote round trip costs more than a local run), failures
# reaching $?, one shell, bytes kept exactly, stderr live, runs/N/.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-runs.sh"
start_fake daytona
mount_sbxfs
L=$MNT/box
ok "mkdir creates a daytona lease" mkdir "$L"

# Daytona's toolbox returns logs as JSON text (a byte that is not UTF-8
# arrives as U+FFFD): runs send their streams to files in the sandbox that
# sbxfs downloads, so bytes arrive exactly here too.
story_runs_all "${RUNS_ROUNDS:-8}"
finish
