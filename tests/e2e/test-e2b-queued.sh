#!/bin/bash
# A queued metadata change that fails on an e2b lease is the failure of
# its own path only (lib-queued.sh; issue 10 item 8).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-queued.sh"
start_fake e2b
mount_sbxfs
L=$MNT/q
mkdir "$L"
F=$L/fs/home/user
FHOME=/home/user
CHANGE_FAULT='{"kind":"5xx","status":500,"key":"POST /process.Process/Start"}'
story_queued_failure
CHANGE_DROP='{"kind":"drop","key":"POST /process.Process/Start"}'
story_queued_not_run
TIMER_KEY='POST /process.Process/Start'
story_queued_timer
SLOW_KEY='POST /process.Process/Start'
story_queued_inflight
story_queued_link_mode
story_queued_kill
finish
