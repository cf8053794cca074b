#!/bin/bash
# A full state dir on the local provider: a refused create leaves nothing
# behind (no lease directory, no sandbox directory), the same name can be
# made once there is room again, and a lease's disk never quietly becomes
# RAM (a state dir too full for the ext4 image fails the create with ENOSPC
# and a reason). The state dir is a small tmpfs filled by a file.
. "$(dirname "$0")/lib.sh"
mkdir -p "$STATE"
mount -t tmpfs -o size=8m,mode=0700 sbxfs-e2e-fullstate "$STATE"
add_cleanup "umount -l '$STATE' 2>/dev/null"
mount_sbxfs
mkdir "$MNT/s1"
L=$MNT/s1
eq "a lease before the state dir fills runs" "$(lease_run 'echo one')" one
fill() { dd if=/dev/zero of="$STATE/filler" bs=16k 2>/dev/null; }
fill
eq "the state dir is full" "$(df --output=avail "$STATE" | tail -1 | tr -d ' ')" 0
sandboxes() { ls "$STATE/local" | grep -c '^lcl-'; }
BEFORE=$(sandboxes)

# ---- nothing of a refused create stays ----
eq "mkdir of a lease in a full state dir fails with ENOSPC" "$(errno_of "os.mkdir('$MNT/s2')")" ENOSPC
ok "... no s2 in the listing" sh -c "! ls '$MNT' | grep -qx s2"
ok "... no leases/s2 directory in the state dir" test ! -e "$STATE/leases/s2"
eq "... no sandbox directory of it under local/" "$(sandboxes)" "$BEFORE"
rm "$STATE/filler"
eq "room again: mkdir of the same name works" "$(errno_of "os.mkdir('$MNT/s2')")" OK
eq "... and the lease runs" "$(L=$MNT/s2 lease_run 'echo two')" two

# ---- a state dir too full for the disk image: ENOSPC, not a disk in RAM ----
# Room for the lease's records (a few KB) but not for mkfs.ext4's (about 2 MB).
leave_kb() { # leave_kb N: fills the state dir up to N KB left
	local avail
	avail=$(df --output=avail "$STATE" | tail -1 | tr -d ' ')
	dd if=/dev/zero of="$STATE/filler" bs=1k count=$((avail - $1)) 2>/dev/null
}
leave_kb 768
BEFORE=$(sandboxes)
eq "a state dir with no room for the ext4 image: mkdir fails with ENOSPC" \
	"$(errno_of "os.mkdir('$MNT/s3')")" ENOSPC
ok "... the error file says the disk image has no room in the state dir" \
	grep -q "no room for the lease's disk image .*state dir's file system is full" "$MNT/error"
ok "... no s3 in the listing" sh -c "! ls '$MNT' | grep -qx s3"
ok "... no leases/s3 directory" test ! -e "$STATE/leases/s3"
eq "... no sandbox directory of it" "$(sandboxes)" "$BEFORE"
rm "$STATE/filler"
eq "room again: s3 is made" "$(errno_of "os.mkdir('$MNT/s3')")" OK
eq "... on an ext4 disk" "$(json_get "$MNT/s3/info" '["sandbox"]["disk"]')" ext4
finish
