#!/bin/bash
# An ordinary user mounts sbxfs (issue 14): through fusermount3, no root,
# with the e2b provider (the fake): leases, runs, ports/, and umount by
# fusermount3 -u. The local provider as that user refuses with the reason
# (it needs root); -o idmap=user lets the user's git work in fs/. The
# user is created here and removed in the trap.
# Distributions make /dev/fuse 0666 so that users can mount; where it is
# not (some containers), the test runs in a private mount namespace with a
# 0666 node bind-mounted over it, leaving the host's /dev alone.
if [ -z "${SBXFS_IN_NS:-}" ] && [ "$(id -u)" = 0 ] && [ "$(stat -c %a /dev/fuse 2>/dev/null)" != 666 ]; then
	command -v unshare >/dev/null || { echo "SKIP: /dev/fuse is not 0666 and there is no unshare"; exit 77; }
	SBXFS_IN_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
detach_foreign_fuse_mounts
if [ -n "${SBXFS_IN_NS:-}" ]; then
	mknod -m 666 "$WORK/fuse" c 10 229 && mount --bind "$WORK/fuse" /dev/fuse ||
		{ log "cannot give /dev/fuse mode 0666 here"; exit 1; }
fi
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to create a user"; exit 77; }
command -v useradd >/dev/null && command -v setpriv >/dev/null || { echo "SKIP: no useradd/setpriv"; exit 77; }
[ -u "$(command -v fusermount3)" ] || { echo "SKIP: fusermount3 is not setuid"; exit 77; }
. "$(dirname "$0")/lib-fake.sh"

U=sbxe2e$$
# Its uid and gid from 50000 up: the fakes give their sandbox user the first
# uid >= 1000 the host leaves free, and a user of ours there (this test run
# alongside the conformance suite) made `whoami` in their sandboxes answer
# sbxe2e... instead of user.
useradd -K UID_MIN=50000 -K UID_MAX=59999 -K GID_MIN=50000 -K GID_MAX=59999 \
	--no-create-home --home-dir "$WORK/home" --shell /bin/sh "$U" || { log "useradd failed"; exit 1; }
add_cleanup "userdel $U 2>/dev/null"
UID_=$(id -u "$U")
GID_=$(id -g "$U")
# The user's own tree: home (config, state), the mount point, and a copy of
# the binary (the build tree may not be reachable by others).
chmod 711 "$WORK"
mkdir -p "$WORK/home/.config/sbxfs" "$WORK/home/bin" "$WORK/home/mnt"
cp "$SBXFS" "$WORK/home/bin/sbxfs"
chown -R "$U:" "$WORK/home"
MNT=$WORK/home/mnt
STATE=$WORK/home/state
CONFIG=$WORK/home/.config/sbxfs/config.json
as_user() { setpriv --reuid="$UID_" --regid="$GID_" --init-groups env -i HOME="$WORK/home" PATH=/usr/bin:/bin "$@"; }
# The daemon as the user (setpriv execs it: $! is its pid); lib.sh's trap
# unmounts $MNT and stops it by pid.
mount_as_user() { # [-o OPTIONS]
	setpriv --reuid="$UID_" --regid="$GID_" --init-groups env -i HOME="$WORK/home" PATH=/usr/bin:/bin \
		E2B_API_KEY="${E2B_API_KEY:-}" E2B_API_URL="${E2B_API_URL:-}" \
		E2B_SANDBOX_URL="${E2B_SANDBOX_URL:-}" "$WORK/home/bin/sbxfs" -f \
		-o "state_dir=$STATE,config=$CONFIG" "$@" "$MNT" >>"$WORK/sbxfs.log" 2>&1 &
	SBXFS_PID=$!
	wait_for 15 as_user test -f "$MNT/README"
}
end_user_leases() { as_user sh -c "for d in '$MNT'/*/; do [ -f \"\$d/state\" ] && rmdir \"\$d\"; done"; }

start_fake e2b
chown "$U:" "$CONFIG"
ok "a user mounts sbxfs with the e2b provider (fusermount3, no root)" mount_as_user
ok "... the kernel has it as the user's mount" grep -q " $MNT fuse.sbxfs .*user_id=$UID_," /proc/mounts
ok "... the daemon runs as the user" sh -c "[ \"\$(ps -o uid= -p $SBXFS_PID | tr -d ' ')\" = $UID_ ]"
ok "... the user makes a lease" as_user mkdir "$MNT/w"
ok "... runs a command in it" as_user sh -c "echo 'echo hello-from-user' >'$MNT/w/exec'"
eq "... and reads its output" "$(as_user cat "$MNT/w/stdout")" "hello-from-user"
ok "... copies a file into its fs/" as_user sh -c "echo data >'$MNT/w/fs/home/user/u.txt'"
eq "... and reads it back" "$(as_user cat "$MNT/w/fs/home/user/u.txt")" "data"
G=$MNT/w/fs/home/user/repo
git_as_user() { as_user git -c user.name=u -c user.email=u@e -C "$G" "$@"; }
refused() { ! "$@" >/dev/null 2>&1; }
# fs/ shows the sandbox's own ids: its user's files are not the host
# user's, and git refuses a repository another user owns.
ok "... git init in its fs/" as_user git init -q "$G"
eq "... the repository is the sandbox user's, not the host user's" \
	"$(as_user stat -c %u "$G/.git")" "$(as_user sh -c "echo 'id -u' >'$MNT/w/exec'; cat '$MNT/w/stdout'")"
ok "... git then refuses it (dubious ownership)" refused git_as_user status
ok "... rmdir ends the lease" as_user rmdir "$MNT/w"
ok "fusermount3 -u by the user unmounts" as_user fusermount3 -u "$MNT"
ok "... the daemon exits" wait_for 10 sh -c "! kill -0 $SBXFS_PID 2>/dev/null"
wait "$SBXFS_PID"
eq "... with status 0" "$?" 0
SBXFS_PID=

# -o idmap=user (as sshfs's): the sandbox user's files show as the mount
# owner's, so the host user's git works on them; a chown to the owner
# gives the file to the sandbox user; other ids pass through.
ok "the user mounts with -o idmap=user" mount_as_user -o idmap=user
ok "... makes a lease" as_user mkdir "$MNT/w"
SBUID=$(as_user sh -c "echo 'id -u' >'$MNT/w/exec'; cat '$MNT/w/stdout'")
ok "... git init in its fs/" as_user git init -q "$G"
ok "... a file" as_user sh -c "echo a >'$G/a'"
ok "... git add" git_as_user add a
ok "... git commit" git_as_user commit -qm one
eq "... git log" "$(git_as_user log --format=%s)" one
eq "... the files show as the host user's" "$(as_user stat -c %u:%g "$G/a" "$G/.git")" "$UID_:$GID_
$UID_:$GID_"
eq "... and are the sandbox user's in the sandbox" \
	"$(as_user sh -c "echo 'stat -c %u /home/user/repo/a' >'$MNT/w/exec'; cat '$MNT/w/stdout'")" "$SBUID"
ok "... chown to the host user (a no-op for the sandbox)" as_user chown "$UID_:$GID_" "$G/a"
eq "... leaves it the sandbox user's" \
	"$(as_user sh -c "echo 'stat -c %u /home/user/repo/a' >'$MNT/w/exec'; cat '$MNT/w/stdout'")" "$SBUID"
eq "... a root-owned sandbox file still shows 0" "$(as_user stat -c %u "$MNT/w/fs/tmp")" 0
ok "... rmdir ends the lease" as_user rmdir "$MNT/w"
ok "fusermount3 -u" as_user fusermount3 -u "$MNT"
ok "... the daemon exits" wait_for 10 sh -c "! kill -0 $SBXFS_PID 2>/dev/null"
SBXFS_PID=

# The local provider as the same user: refused with the reason.
printf '{"defaultProfile":"default","profiles":{"default":{"provider":"local"}}}\n' >"$CONFIG"
ok "the user mounts with the local provider" mount_as_user
eq "... mkdir is refused: EPERM" "$(as_user python3 -c "
import errno, os
try:
    os.mkdir('$MNT/loc'); print('OK')
except OSError as e:
    print(errno.errorcode[e.errno])")" EPERM
ok "... the error file says the local provider needs root" as_user grep -q "the local provider needs root (or user namespaces" "$MNT/error"
ok "... and so does the daemon log" grep -q "the local provider needs root" "$WORK/sbxfs.log"
end_user_leases
ok "fusermount3 -u" as_user fusermount3 -u "$MNT"
wait_for 10 sh -c "! kill -0 $SBXFS_PID 2>/dev/null"
SBXFS_PID=
finish
