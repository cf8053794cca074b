#!/bin/bash
# The sbx client against the fake E2B: sbx run, and sbx shell on an envd
# PTY (process Start with pty, SendInput, Update), plus the tty/ files.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-sbx.sh"
start_fake e2b
mount_sbxfs
L=$MNT/box
mkdir "$L"

story_sbx_run_basics "$L"
story_sbx_shell "$L"
story_sbx_shell_piped "$L"
story_tty_files "$L"
ok "the fake saw a PTY resize (Update)" test "$(counter "POST /process.Process/Update")" -ge 1
finish
