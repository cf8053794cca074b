#!/bin/bash
# Issue 10 on the local provider (lib-output.sh): a run's binary stdout and
# stderr byte for byte, code cells writing bytes that are not UTF-8, env
# that is not UTF-8, a full state dir (a small tmpfs).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-runs.sh"
. "$(dirname "$0")/lib-output.sh"
output_mount local
story_output_bytes local
story_output_long_command
story_output_code
story_output_env
story_output_truncate
story_output_full
story_output_runaway
story_output_rich_bound
finish
