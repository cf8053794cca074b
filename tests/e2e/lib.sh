# Shared helpers for the end-to-end tests (sourced). Each test mounts its own
# sbxfs in a fresh temp dir, and a trap unmounts it and stops the daemon by
# pid even when the test fails. Tests use only ordinary tools.
set -u

: "${SBXFS:?SBXFS must point at the sbxfs binary}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
E2E_NAME=$(basename "$0" .sh)
FAILS=0
CHECKS=0

[ -c /dev/fuse ] || { echo "SKIP: /dev/fuse is missing"; exit 77; }

WORK=$(mktemp -d "/tmp/sbxfs-$E2E_NAME.XXXXXX")
MNT=$WORK/mnt
STATE=$WORK/state
CONFIG=$WORK/config.json
mkdir -p "$MNT"
# The tests call python3 hundreds of times; a version manager's shim in
# front of it (pyenv's is a chain of bash scripts) costs more than the
# check itself on a loaded machine, so the system's python3 goes first.
if [ -x /usr/bin/python3 ]; then
	mkdir -p "$WORK/bin"
	ln -sf /usr/bin/python3 "$WORK/bin/python3"
	PATH=$WORK/bin:$PATH
fi
SBXFS_PID=
EXTRA_CLEANUP=

# Each line carries the seconds since the test began, to show where its time goes.
log() { printf '%s: [%ss] %s\n' "$E2E_NAME" "$SECONDS" "$*"; }

# ok DESCRIPTION COMMAND...: runs the command, counts a pass or a failure.
ok() {
	local what=$1
	shift
	CHECKS=$((CHECKS + 1))
	if "$@"; then
		log "ok   $what"
	else
		FAILS=$((FAILS + 1))
		log "FAIL $what"
	fi
}

# eq DESCRIPTION ACTUAL EXPECTED
eq() {
	CHECKS=$((CHECKS + 1))
	if [ "$2" = "$3" ]; then
		log "ok   $1"
	else
		FAILS=$((FAILS + 1))
		log "FAIL $1: got [$2], want [$3]"
	fi
}

# errno_of PYTHON-STATEMENT: prints the errno name the statement fails with, or OK.
errno_of() {
	python3 - "$@" <<'PY'
import errno, os, sys
try:
    exec(sys.argv[1])
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}

# errno_ms_of PYTHON-STATEMENT [PRE]: PRE runs first in the same process, untimed; prints "ERRNO-NAME|OK MILLISECONDS", the time of
# the statement alone (not python's start, which a loaded machine makes slow).
# write_close PATH TEXT: a statement for it: open O_TRUNC, write, close.
errno_ms_of() {
	python3 - "$1" "${2:-}" <<'PY'
import errno, os, sys, time
exec(sys.argv[2])
t = time.monotonic()
try:
    exec(sys.argv[1])
    r = "OK"
except OSError as e:
    r = errno.errorcode.get(e.errno, str(e.errno))
print(r, int((time.monotonic() - t) * 1000))
PY
}
write_close() { echo "fd = os.open('$1', os.O_WRONLY | os.O_TRUNC); os.write(fd, b'$2'); os.close(fd)"; }
# errno_of_write_from PATH SRC: the same with SRC's bytes (more than argv carries).
errno_of_write_from() {
	python3 - "$1" "$2" <<'PY'
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, open(sys.argv[2], "rb").read())
    finally:
        os.close(fd)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}
# errno_of_write PATH TEXT: writes TEXT unbuffered and closes; prints the errno name or OK.
errno_of_write() {
	python3 - "$1" "$2" <<'PY'
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, sys.argv[2].encode())
    finally:
        os.close(fd)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}

# lease_run SHELL-TEXT: runs it in the lease $L through exec, prints its stdout.
lease_run() { printf '%s\n' "$1" >"$L/exec" && cat "$L/stdout"; }
# json_get FILE PYTHON-SUBSCRIPT: prints d<SUBSCRIPT> of the JSON file, e.g. '["exitCode"]'.
json_get() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval("d"+sys.argv[2]))' "$1" "$2"; }

wait_for() { # wait_for SECONDS COMMAND...
	local t=$(($1 * 10))
	shift
	while [ $t -gt 0 ]; do
		"$@" 2>/dev/null && return 0
		sleep 0.1
		t=$((t - 1))
	done
	return 1
}

mount_sbxfs() { # mount_sbxfs [-o extra]...
	[ -f "$CONFIG" ] || echo '{}' >"$CONFIG"
	# Under ASan the daemon's leaks count (finish checks its exit status).
	[ "${SBXFS_ASAN:-0}" = 1 ] && local ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 && export ASAN_OPTIONS
	${SBXFS_WRAPPER:-} "$SBXFS" -f -o "state_dir=$STATE,config=$CONFIG" "$@" "$MNT" \
		>>"$WORK/sbxfs.log" 2>&1 &
	SBXFS_PID=$!
	if ! wait_for "${MOUNT_WAIT:-10}" test -f "$MNT/README"; then
		log "mount did not come up"
		cat "$WORK/sbxfs.log"
		exit 1
	fi
}

unmount_sbxfs() {
	[ -n "$SBXFS_PID" ] || return 0
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	local t=$((${UNMOUNT_WAIT:-10} * 10)) # then SIGKILL (a slow daemon, e.g. under valgrind, sets more)
	while kill -0 "$SBXFS_PID" 2>/dev/null && [ $t -gt 0 ]; do
		sleep 0.1
		t=$((t - 1))
	done
	kill -0 "$SBXFS_PID" 2>/dev/null && kill -9 "$SBXFS_PID" 2>/dev/null
	wait "$SBXFS_PID" 2>/dev/null
	DAEMON_STATUS=$?
	SBXFS_PID=
}

# Ends the leases (their sandboxes) of the current mount; bounded in time.
end_leases() {
	[ -n "$SBXFS_PID" ] && [ -d "$MNT" ] || return 0
	for d in "$MNT"/*/; do
		[ -d "$d" ] && [ -f "$d/state" ] && timeout 30 rmdir "$d" 2>/dev/null
	done
}

# mount_options DIR: the options of the mount at DIR, one a line.
mount_options() { awk -v m="$1" '$5 == m {print $6}' /proc/self/mountinfo | tr ',' '\n'; }

# For a test in its own mount namespace (unshare -m): the copies of other
# tests' FUSE mounts would hold their connections open after those tests
# unmount them, so their daemons would not exit until this test ends (a
# slow test-mount-helper made two others' "daemon exits" fail). Detaches
# them, in this namespace only.
detach_foreign_fuse_mounts() {
	local m
	[ -n "${SBXFS_IN_NS:-}" ] || return 0 # never in the host's namespace
	awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) ~ /^fuse/) print $5; break } }' \
		/proc/self/mountinfo | while read -r m; do
		umount -l "$(printf '%b' "$m")" 2>/dev/null
	done
}

# add_cleanup SHELL-TEXT: one step (one line) for the exit trap. Steps run
# in the order added (EXTRA_CLEANUP holds them, a line each), each eval'ed on
# its own: one that fails or does not parse never stops the next.
add_cleanup() { EXTRA_CLEANUP+="${EXTRA_CLEANUP:+$'\n'}$1"; }

run_cleanup_steps() {
	local step
	local -a steps
	mapfile -t steps <<<"$EXTRA_CLEANUP"
	for step in "${steps[@]}"; do
		# Text once appended as "${X:+$X; }..." to nothing begins with ';'.
		step=${step#"${step%%[![:space:];]*}"}
		[ -n "$step" ] && eval "$step"
	done
	return 0
}

# A test that stopped with its mount down (a failed mount, a check after
# an unmount) left its local leases: their init, loop device, mounts and
# cgroups outlive the daemon, on the host. One more mount ends them.
reap_local_leases() {
	[ -z "$SBXFS_PID" ] && compgen -G "$STATE/local/lcl-*" >/dev/null || return 0
	log "cleanup: a mount to end the local leases left in $STATE"
	mkdir -p "$MNT"
	[ -f "$CONFIG" ] || echo '{}' >"$CONFIG"
	"$SBXFS" -f -o "state_dir=$STATE,config=$CONFIG" "$MNT" >>"$WORK/sbxfs.log" 2>&1 &
	SBXFS_PID=$!
	wait_for 10 sh -c "test -f '$MNT/README' || ! kill -0 $SBXFS_PID 2>/dev/null"
	[ -f "$MNT/README" ] && end_leases
	unmount_sbxfs
}

cleanup() {
	local rc=$?
	end_leases
	unmount_sbxfs
	reap_local_leases
	run_cleanup_steps
	if [ "$rc" != 0 ] || [ "$FAILS" != 0 ]; then
		echo "--- daemon log (tail) ---"
		tail -n 40 "$WORK/sbxfs.log" 2>/dev/null
	fi
	rm -rf --one-file-system "$WORK" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# run_write_fails LEASE WHAT REASON ERROR_RE: bash's `echo CMD > LEASE/exec`
# fails its write (what a shell sees: $? 1, "write error: REASON"), and
# LEASE/error matches ERROR_RE.
run_write_fails() {
	local out
	out=$(bash -c "echo 'echo hi' >'$1/exec'" 2>&1)
	eq "$2: echo CMD > exec, \$? is 1" "$?" 1
	ok "... with the reason (write error: $3)" grep -q "write error: $3" <<<"$out"
	ok "... the error file says why" grep -q "$4" "$1/error"
}

finish() {
	# A clean unmount ends the daemon with status 0 (under ASan: no leak, no error).
	if [ -n "$SBXFS_PID" ]; then
		end_leases
		unmount_sbxfs
		eq "the daemon exits 0 after unmount" "$DAEMON_STATUS" 0
	fi
	log "$CHECKS checks, $FAILS failed ($SECONDS s)"
	[ "$FAILS" = 0 ]
}
