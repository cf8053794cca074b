#!/bin/bash
# Output that is not UTF-8 on the local provider (lib-bytes.sh): a run's binary
# stdout and stderr byte for byte, code cells writing bytes that are not UTF-8.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-runs.sh"
. "$(dirname "$0")/lib-bytes.sh"
mount_sbxfs
L=$MNT/box
ok "mkdir creates a local lease" mkdir "$L"
story_bytes_exec
story_bytes_code
finish
