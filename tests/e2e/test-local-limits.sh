#!/bin/bash
# Resource caps and isolation on the local provider: a process over
# memoryMB is killed inside the lease while the mount stays up, a write
# past diskMB gets ENOSPC, and the sandbox cannot see the host's /root.
. "$(dirname "$0")/lib.sh"
MARK=/root/sbxfs-host-marker-$$
echo TOPSECRET-CONTENT >"$MARK"
add_cleanup "rm -f $MARK"
mount_sbxfs
L=$MNT/lim
echo "new lim resources.memoryMB=64 resources.diskMB=32" >"$MNT/ctl"
ok "lease with caps created" test -d "$L"

echo 'python3 -c "b = bytearray(400 * 1024 * 1024); print(len(b))"; echo rc=$?' >"$L/exec"
ok "a process over memoryMB is killed" grep -q "rc=137" "$L/exec"
echo 'echo still-alive' >"$L/exec"
eq "the lease still runs things" "$(cat "$L/exec")" "still-alive"
ok "the mount is still up" test -f "$MNT/README"

echo 'dd if=/dev/zero of=/root/fill bs=1M count=64 2>&1; echo rc=$?' >"$L/exec"
ok "dd past diskMB fails with ENOSPC inside" grep -q "No space left on device" "$L/exec"
eq "write past diskMB through fs/" "$(errno_of "
f = open('$L/fs/root/fill2', 'wb')
for i in range(64): f.write(b'x' * 1048576)
f.close()")" "ENOSPC"
echo 'rm -f /root/fill /root/fill2' >"$L/exec"

echo "cat $MARK 2>&1; ls /home | wc -l" >"$L/exec"
ok "the sandbox cannot read the host's /root" sh -c "! grep -q TOPSECRET '$L/exec'"
ok "nor through fs/" test ! -e "$L/fs$MARK"
echo 'ls /proc | head -3; ps -e | wc -l' >"$L/exec"
ok "own pid namespace (few processes)" test "$(tail -1 "$L/stdout")" -lt 20

mkdir "$MNT/other"
echo 'echo mine > /root/private.txt' >"$L/exec"
ok "another lease cannot see this lease's files" test ! -e "$MNT/other/fs/root/private.txt"
finish
