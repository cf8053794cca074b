#!/bin/bash
# Output that is not UTF-8 on the e2b provider (lib-bytes.sh): a run's binary
# stdout and stderr byte for byte, code cells writing bytes that are not UTF-8.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-runs.sh"
. "$(dirname "$0")/lib-bytes.sh"
. "$(dirname "$0")/lib-fake.sh"
start_fake e2b
mount_sbxfs
L=$MNT/box
ok "mkdir creates a e2b lease" mkdir "$L"
story_bytes_exec
story_bytes_code
finish
