#!/bin/bash
# POSIX semantics of fs/ on the local provider, against a plain directory of
# this machine (lib-posix.sh): device nodes, fifos and sockets; new files
# owned by the caller with its umask alone; numeric owners, chown -h, sticky
# and setgid directories; hard links with one inode number and a true link
# count under every name; rename flags. Then `rsync -aH` of a tree with hard
# links, a fifo and a device node into fs/ and back is exact, and `du -s`
# of fs/usr/include counts what the host counts. Paths past PATH_MAX, reached
# relative to a deep directory (longpath-cases.py), work as on the plain
# directory, and symlinks down there stay inside the lease.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-posix.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (owners, device nodes)"; exit 77; }
mount_sbxfs -o allow_other,default_permissions,share_group=nogroup,xattr
L=$MNT/posix
mkdir "$L"
F=$L/fs/tmp

posix_compare "$F/cases"

# PATH_MAX-1 bytes relative to a directory 20 names of 255 bytes deep.
python3 "$top_srcdir/tests/e2e/longpath-cases.py" "$WORK/longpath" >"$WORK/longpath-ref.txt" 2>&1
python3 "$top_srcdir/tests/e2e/longpath-cases.py" "$F/longpath" "lp-$$" >"$WORK/longpath-got.txt" 2>&1
eq "longpath: every case ran on the reference" "$(grep -c '^longpath ' "$WORK/longpath-ref.txt")" 21
while IFS= read -r want; do
	eq "${want%%:*}" "$(grep -m1 -F "${want%%:*}:" "$WORK/longpath-got.txt")" "$want"
done <"$WORK/longpath-ref.txt"
eq "longpath: a link to / down there is the lease's /" \
	"$(grep -m1 'through a link to /:' "$WORK/longpath-got.txt"; ls "$F/lp-$$.abs")" \
	"longpath create through a link to /: ok
$F/lp-$$.abs"
eq "longpath: 30 .. down there stop at the lease's /" \
	"$(grep -m1 'through 30 \.\.:' "$WORK/longpath-got.txt"; ls "$F/lp-$$.dots")" \
	"longpath create through 30 ..: ok
$F/lp-$$.dots"
eq "longpath: nothing reached the host's /tmp" "$(compgen -G "/tmp/lp-$$.*" | wc -l)" 0

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

# du counts allocated blocks as the host does (the lease's /usr is the host's):
# /usr/include, 24,000 names (all of /usr, eight times as many, cost a
# minute of the suite for the same check). Within 0.5 %: another test of
# the suite (test-deb) may install a package into the host's /usr
# meanwhile; a FUSE layer that reported no blocks, or its own sizes, is off
# by far more.
du_fs=$(du -s "$L/fs/usr/include" | cut -f1)
du_host=$(du -s /usr/include | cut -f1)
ok "du -s fs/usr/include equals du -s /usr/include ($du_fs, host $du_host KiB)" \
	python3 -c "import sys; a, b = int(sys.argv[1]), int(sys.argv[2]); sys.exit(abs(a - b) > b * 0.005)" "$du_fs" "$du_host"
finish
