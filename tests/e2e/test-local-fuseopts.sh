#!/bin/bash
# The usual FUSE options: allow_other with share_group lets that group's
# users in, and default_permissions (always on then) makes the kernel
# check fs/ modes against them. (allow_other alone: test-local-users.sh.)
. "$(dirname "$0")/lib.sh"
id nobody >/dev/null 2>&1 || { echo "SKIP: no user nobody"; exit 77; }
chmod 755 "$WORK"
mount_sbxfs -o allow_other,default_permissions,share_group=nogroup
L=$MNT/perm
mkdir "$L"
F=$L/fs/root
chmod 755 "$F"
echo secret >"$F/private.txt"
chmod 600 "$F/private.txt"
echo open >"$F/public.txt"
chmod 644 "$F/public.txt"
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
eq "a share_group user reads a 0644 file (allow_other)" "$(as_nobody cat "$F/public.txt")" "open"
ok "another user cannot read a 0600 file (default_permissions)" sh -c "! setpriv --reuid=nobody --regid=nogroup --clear-groups cat '$F/private.txt' 2>/dev/null"
ok "nor write into a root-owned 0755 directory" sh -c "! setpriv --reuid=nobody --regid=nogroup --clear-groups touch '$F/new' 2>/dev/null"
chmod 644 "$F/private.txt"
eq "after chmod 644 it can" "$(as_nobody cat "$F/private.txt")" "secret"
ok "the owner (root) still writes" sh -c "echo more >> '$F/private.txt'"
finish
