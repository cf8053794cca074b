#!/bin/bash
# Issue 10 on the e2b provider (lib-output.sh): a run's binary stdout and
# stderr byte for byte, code cells writing bytes that are not UTF-8, the
# daemon's memory bounded during a big run, env that is not UTF-8, a full
# state dir (a small tmpfs).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-runs.sh"
. "$(dirname "$0")/lib-output.sh"
. "$(dirname "$0")/lib-fake.sh"
start_fake e2b
output_mount e2b
story_output_bytes e2b
story_output_long_command
story_output_code
# before the 100 MB run, whose output stays in the 256 MB state dir (with
# the 28 MB of the runaway run and the download story's 64 MiB cached file)
story_output_runaway
story_output_download_reserve
story_output_memory 100
story_output_env
story_output_full
finish
