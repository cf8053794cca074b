#!/bin/bash
# A queued metadata change that fails on a daytona lease is the failure of
# its own path only (lib-queued.sh; issue 10 item 8), also when the
# sandbox itself refuses it (a device node made by its unprivileged user
# without sudo).
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
CHANGE_DROP='{"kind":"drop","key":"POST /toolbox/:id/process/execute"}'
story_queued_not_run
TIMER_KEY='POST /toolbox/:id/files/permissions'
story_queued_timer
SLOW_KEY='POST /toolbox/:id/process/execute'
story_queued_inflight
story_queued_link_mode

# Refused by the sandbox: commands run as its user, who may not make devices
# once it may not sudo either (the fake, like Daytona's images, lets it: it
# gives that up here).
# chown of many files (tar x, rsync -a as root): one `sudo -n chown` for
# all, not a /files/permissions call each; without sudo, a call each.
chown_three() { # NAME: makes NAME1..3 as the user, chowns them to root; owners in the sandbox
	local i
	for i in 1 2 3; do echo x >"$F/$1$i"; done
	lease_run true >/dev/null
	fake_reset_counters
	chown 0:0 "$F/${1}1" "$F/${1}2" "$F/${1}3"
	lease_run "stat -c %u $FHOME/${1}1 $FHOME/${1}2 $FHOME/${1}3" | tr '\n' ' '
}
# git's objects: made 0444 under a temporary name, linked to their name,
# the temporary unlinked. The unlink applied the chmod waiting on the
# temporary first (a command and a permissions call per object): it
# follows the link to the new name instead (sbx_rme_follow_link).
mkdir "$F/objs"
lease_run true >/dev/null
fake_reset_counters
python3 - "$F/objs" <<'PY'
import os, sys
d = sys.argv[1]
for i in range(5):
    fd = os.open(f"{d}/tmp_obj_{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    os.write(fd, b"object %d" % i)
    os.close(fd)
    os.link(f"{d}/tmp_obj_{i}", f"{d}/obj{i}")
    os.unlink(f"{d}/tmp_obj_{i}")
PY
eq "five objects written as git does: no command" "$(counter 'POST /toolbox/:id/process/execute')" 0
eq "... and no permissions call" "$(counter 'POST /toolbox/:id/files/permissions')" 0
eq "... in the sandbox: modes 444, the temporaries gone" \
	"$(lease_run "cd $FHOME/objs && stat -c '%n %a' * | tr '\n' ' '")" "obj0 444 obj1 444 obj2 444 obj3 444 obj4 444 "
eq "chown of three files to root, with sudo: owners in the sandbox" "$(chown_three own)" "0 0 0 "
eq "... and no permissions call" "$(counter 'POST /toolbox/:id/files/permissions')" 0
lease_run 'sudo -n rm -f /etc/sudoers.d/91-daytona' >/dev/null
eq "chown of three files to root, without sudo: owners in the sandbox" "$(chown_three nos)" "0 0 0 "
eq "... through a permissions call each" "$(counter 'POST /toolbox/:id/files/permissions')" 3
ok "... and the log says why" grep -q "no sudo -n for the user" "$WORK/sbxfs.log"
# A batch where one op fails keeps the others' links: a symlink queued with
# a touch the user cannot do (in root's directory of mode 700, and without
# sudo no borrow gets it there) is still a link after the batch; every
# link of such a batch was forgotten before, and the next stat followed it
# (a regular file).
mkdir "$F/locked" && echo x >"$F/locked/f" && chown 0:0 "$F/locked" && chmod 700 "$F/locked" &&
	lease_run true >/dev/null
touch -d '2001-02-03 04:05:06' "$F/locked/f" && ln -s other "$F/qlink"
eq "a link queued beside a refused touch: stat after the batch" "$(stat -c %F "$F/qlink" 2>&1)" "symbolic link"
eq "... readlink" "$(readlink "$F/qlink")" other
eq "... and in the sandbox" "$(lease_run "stat -c %F $FHOME/qlink")" "symbolic link"
ok "... the touch's refusal is in error" error_says "$FHOME/locked/f failed in the sandbox: "
echo data >"$F/other"
# A device node is made by the mknod call itself, so mknod reports the
# refusal, with the errno the command's message names (mknod: Operation
# not permitted).
eq "mknod of a device fails with its own failure" "$(errno_of "os.mknod('$F/qdev', 0o20644, os.makedev(1, 3))")" EPERM
ok "the error file names the mknod" error_says "mknod $FHOME/qdev failed in the sandbox: "
ok "... and does not call it queued" sh -c "! grep -q queued '$L/error'"
eq "fsync of another file succeeds" "$(errno_of "$(fsync_write "$F/other" more False)")" OK
# Not in the sandbox, not listed, and the name is free: no failure is left
# for a later call on it.
ok "the device is not there" sh -c "! ls '$F' | grep -qx qdev"
eq "... stat says ENOENT" "$(errno_of "os.stat('$F/qdev')")" ENOENT
eq "... and the name can be made" "$(errno_of "open('$F/qdev', 'w').close()")" OK
story_queued_kill
finish
