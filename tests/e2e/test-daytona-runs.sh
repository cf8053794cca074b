#!/bin/bash
# Runs on the daytona provider against its fake, as the caller sees them
# (lib-runs.sh): each caller its own run (${RUNS_ROUNDS:-20} rounds of 8
# callers: each remote round trip costs more than a local run), failures
# reaching $?, one shell, bytes kept exactly, stderr live, runs/N/.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-runs.sh"
start_fake daytona
mount_sbxfs
L=$MNT/box
ok "mkdir creates a daytona lease" mkdir "$L"

story_runs_dir
story_runs_shell
# Daytona's toolbox returns logs as JSON text: a byte that is not UTF-8
# arrives as U+FFFD (the API's loss, before sbxfs sees it).
story_runs_binary lossy
story_runs_refused
story_runs_timeout
story_runs_live_stderr
story_runs_own_output "${RUNS_ROUNDS:-20}"
finish
