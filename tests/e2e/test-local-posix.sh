#!/bin/bash
# POSIX semantics of fs/ on the local provider, against a plain directory of
# this machine (lib-posix.sh): device nodes, fifos and sockets; new files
# owned by the caller with its umask alone; numeric owners, chown -h, sticky
# and setgid directories; hard links with one inode number and a true link
# count under every name; rename flags. Then `rsync -aH` of a tree with hard
# links, a fifo and a device node into fs/ and back is exact, and `du -s`
# of fs/usr counts what the host counts.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-posix.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (owners, device nodes)"; exit 77; }
mount_sbxfs -o allow_other,default_permissions
L=$MNT/posix
mkdir "$L"
F=$L/fs/tmp

posix_compare "$F/cases"

# The lease's root is nodev: a node made through fs/ is only a name there.
eq "the lease's root is mounted nodev" \
	"$(awk -v r="$STATE" '$2 ~ "^" r && $2 ~ /\/root$/ {print ($4 ~ /(^|,)nodev(,|$)/) ? "nodev" : $4}' /proc/mounts)" \
	"nodev"

# rsync -aH there and back: hard links, a fifo, a device node, owners, modes.
T=$WORK/tree
mkdir -p "$T/d/e" && echo one >"$T/d/a" && ln "$T/d/a" "$T/d/e/a2" && ln "$T/d/a" "$T/a3"
mkfifo "$T/fifo" && mknod "$T/null" c 1 3 && mknod "$T/loop" b 7 200
ln -s d/a "$T/sym" && chown 1234:4321 "$T/d/e" && chmod 2751 "$T/d/e" && chmod 1777 "$T/d"
ok "rsync -aH into fs/" rsync -aH "$T/" "$F/tree/"
eq "rsync -ainH finds nothing to change in fs/" "$(rsync -ainH --delete "$T/" "$F/tree/")" ""
ok "rsync -aH back out of fs/" rsync -aH "$F/tree/" "$WORK/back/"
eq "rsync -ainH: the copy back is the original" "$(rsync -ainH --delete "$T/" "$WORK/back/")" ""
eq "hard links came back as one file" "$(stat -c %h "$WORK/back/a3")" 3

# du counts allocated blocks as the host does (the lease's /usr is the host's).
eq "du -s fs/usr equals du -s /usr" "$(du -s "$L/fs/usr" | cut -f1)" "$(du -s /usr | cut -f1)"
finish
