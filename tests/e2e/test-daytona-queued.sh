#!/bin/bash
# A queued metadata change that fails on a daytona lease is the failure of
# its own path only (lib-queued.sh; issue 10 item 8), also when the
# sandbox itself refuses it (a device node made by its unprivileged user).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-queued.sh"
start_fake daytona
mount_sbxfs
L=$MNT/q
mkdir "$L"
F=$L/fs/home/daytona
FHOME=/home/daytona
CHANGE_FAULT='{"kind":"5xx","status":500,"key":"POST /toolbox/:id/process/execute"}'
story_queued_failure

# Refused by the sandbox: commands run as its user, who may not make devices.
echo data >"$F/other"
# The kernel looks the new node up at once: that lookup applies the batch
# and takes the failure, so mknod itself reports it, with the errno the
# command's message names (mknod: Operation not permitted).
eq "mknod of a device fails with its own failure" "$(errno_of "os.mknod('$F/qdev', 0o20644, os.makedev(1, 3))")" EPERM
ok "the error file names the mknod" error_says "mknod $FHOME/qdev"
eq "fsync of another file succeeds" "$(errno_of "$(fsync_write "$F/other" more False)")" OK
# Not in the sandbox, and not listed. (Its first stat may still fail once with
# EPERM when the kernel's lookup inside mknod did not take the failure; any
# answer but success is right here.)
ok "the device is not there" sh -c "! ls '$F' | grep -qx qdev"
ok "... and stat does not find it" sh -c "! python3 -c \"import os; os.stat('$F/qdev')\" 2>/dev/null"
finish
