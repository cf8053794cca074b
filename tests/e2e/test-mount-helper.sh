#!/bin/bash
# sbxfs mounted as sshfs and rclone are (issue 14): through `mount -t
# fuse.sbxfs` and through an /etc/fstab line, both unmounted with `umount`.
# The whole test runs in a private mount namespace (unshare -m) where a
# private copy of /etc/fstab is bind-mounted over the real one and the
# built sbxfs is bind-mounted into /usr/local/sbin (mount(8) runs helpers
# with a fixed PATH), so the host's fstab and PATH are untouched. Also: the
# daemon's log file with ISO-8601 timestamps (-o log=PATH, and the state
# dir's sbxfs.log when daemonised with no syslog), the source argument used
# as a profile, and a named config file that does not exist.
if [ -z "${SBXFS_IN_NS:-}" ]; then
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (mount, unshare)"; exit 77; }
	command -v unshare >/dev/null || { echo "SKIP: no unshare"; exit 77; }
	[ -x /sbin/mount.fuse3 ] || [ -x /usr/sbin/mount.fuse3 ] || { echo "SKIP: no mount.fuse3"; exit 77; }
	SBXFS_IN_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
detach_foreign_fuse_mounts

# The daemon forks away from mount(8): its pid comes from its log lines.
DAEMON_PIDS=
daemon_pid() { sed -n 's/.* sbxfs\[\([0-9]*\)\]: .*/\1/p' "$1" | tail -n 1; }
kill_daemons() {
	for p in $DAEMON_PIDS; do
		umount -l "$MNT" 2>/dev/null
		kill "$p" 2>/dev/null
	done
}
add_cleanup kill_daemons

SBIN=$WORK/sbin
mkdir -p "$SBIN"
ln -s "$SBXFS" "$SBIN/sbxfs"
mount --bind "$SBIN" /usr/local/sbin || { log "cannot bind /usr/local/sbin"; exit 1; }
TS='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z sbxfs\[[0-9]+\]: (error|warning|info|debug): '
printf '{"defaultProfile":"default","profiles":{"default":{"provider":"local"},%s}}\n' \
	'"py":{"provider":"e2b"}' >"$CONFIG"
unset E2B_API_KEY DAYTONA_API_KEY
# From the build dir, mount(8) would turn the source "sbxfs" into ./sbxfs's
# path (it canonicalises sources naming files); sbxfs ignores such a path,
# but run from elsewhere so that the plain word is what arrives.
cd "$WORK" || exit 1

# mounted? (mount's own view), gone? (the daemon left after umount)
mounted() { grep -q " $MNT fuse.sbxfs " /proc/self/mounts; }
gone() { ! kill -0 "$1" 2>/dev/null; }
not() { ! "$@"; }

# --- mount -t fuse.sbxfs ----------------------------------------------------
ok "mount -t fuse.sbxfs sbxfs MNT -o ...,_netdev,noauto,x-systemd.automount,allow_other" \
	mount -t fuse.sbxfs sbxfs "$MNT" \
	-o "config=$CONFIG,state_dir=$STATE,log=$WORK/d1.log,_netdev,noauto,x-systemd.automount,allow_other"
P=$(daemon_pid "$WORK/d1.log")
DAEMON_PIDS="$P"
ok "... it is mounted as fuse.sbxfs" mounted || { finish; exit 1; }
# mount.fuse3 adds suid and dev to a mount by root unless told nosuid/nodev:
# they were passed on, so a file a sandbox made setuid-root ran as root here.
eq "... nosuid,nodev although mount.fuse3 passed suid,dev" \
	"$(mount_options "$MNT" | grep -cxE 'nosuid|nodev')" 2
ok "... and answers (README)" wait_for 10 test -f "$MNT/README"
ok "... ls shows the root files" sh -c "ls '$MNT' | grep -qx ctl"
ok "... the log file has ISO-8601 timestamps on every line" \
	sh -c "[ -s '$WORK/d1.log' ] && ! grep -Evq '$TS' '$WORK/d1.log'"
ok "... and says where it mounted" grep -q "mounted at $MNT " "$WORK/d1.log"
ok "umount MNT works" umount "$MNT"
ok "... the daemon exits" wait_for 10 gone "$P"
ok "... nothing left mounted" sh -c "! grep -q ' $MNT ' /proc/self/mounts"

# --- an fstab line ----------------------------------------------------------
cp /etc/fstab "$WORK/fstab" 2>/dev/null || : >"$WORK/fstab"
printf 'sbxfs %s fuse.sbxfs noauto,_netdev,x-systemd.automount,allow_other,config=%s,state_dir=%s 0 0\n' \
	"$MNT" "$CONFIG" "$STATE" >>"$WORK/fstab"
mount --bind "$WORK/fstab" /etc/fstab || { log "cannot bind /etc/fstab"; exit 1; }
rm -f "$STATE/sbxfs.log"
ok "mount MNT (from the fstab line)" mount "$MNT"
ok "... answers" wait_for 10 test -f "$MNT/README" || { finish; exit 1; }
if [ -e /dev/log ]; then
	log "note: /dev/log exists: the daemon logs to syslog (no state-dir log file to check)"
else
	ok "... daemonised with no syslog: the log is STATE_DIR/sbxfs.log" test -s "$STATE/sbxfs.log"
	ok "... with timestamps on every line" sh -c "! grep -Evq '$TS' '$STATE/sbxfs.log'"
	P=$(daemon_pid "$STATE/sbxfs.log")
	DAEMON_PIDS="$DAEMON_PIDS $P"
fi
ok "... a lease works through it" mkdir "$MNT/w"
ok "... and runs" sh -c "echo 'echo fstab-ok' >'$MNT/w/exec'"
eq "... its output" "$(cat "$MNT/w/stdout")" "fstab-ok"
ok "... rmdir ends it" rmdir "$MNT/w"
ok "umount MNT (fstab mount)" umount "$MNT"
[ -n "${P:-}" ] && ok "... the daemon exits" wait_for 10 gone "$P"

# --- the source names the profile -------------------------------------------
ok "mount -t fuse.sbxfs py MNT: the source is the profile" \
	mount -t fuse.sbxfs py "$MNT" -o "config=$CONFIG,state_dir=$STATE,log=$WORK/d3.log"
P=$(daemon_pid "$WORK/d3.log")
DAEMON_PIDS="$DAEMON_PIDS $P"
wait_for 10 test -f "$MNT/README"
eq "... mkdir makes an e2b lease: EACCES without a key" "$(errno_of "os.mkdir('$MNT/x')")" EACCES
ok "... the error file names the missing variable" grep -q "E2B_API_KEY is not set" "$MNT/error"
ok "... so does the daemon log" grep -q "E2B_API_KEY is not set" "$WORK/d3.log"
ok "umount" umount "$MNT"
ok "... the daemon exits" wait_for 10 gone "$P"

# --- a missing named config, an unknown source ------------------------------
OUT=$(mount -t fuse.sbxfs sbxfs "$MNT" -o "config=$WORK/nonexistent.json,state_dir=$STATE" 2>&1)
ok "a missing -o config file fails the mount" not mounted
ok "... naming the file" sh -c "printf '%s' '$OUT' | grep -q 'config file $WORK/nonexistent.json: No such file'"
OUT=$(mount -t fuse.sbxfs nosuch "$MNT" -o "config=$CONFIG,state_dir=$STATE" 2>&1)
ok "an unknown profile as the source fails the mount" not mounted
ok "... saying so" sh -c "printf '%s' '$OUT' | grep -q 'profile \"nosuch\" is not in'"
finish
