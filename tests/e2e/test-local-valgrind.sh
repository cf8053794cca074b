#!/bin/bash
# The daemon under valgrind (memcheck) for a short local workload: every
# control file, fs/ traffic, a run, pause/resume, remove. Any invalid read
# or write, use of uninitialised memory or definite leak fails the test.
. "$(dirname "$0")/lib.sh"
command -v valgrind >/dev/null || { echo "SKIP: valgrind is not installed"; exit 77; }
if [ "${SBXFS_ASAN:-0}" = 1 ]; then echo "SKIP: valgrind does not run ASan binaries (covered by the normal run)"; exit 77; fi
VG_LOG=$WORK/valgrind.log
# --child-silent-after-fork: the local provider forks (no exec) to start a
# lease's init; a forked child of a threaded process "leaks" what its missing
# threads held. Under valgrind 3.19 openat2 is ENOSYS: the user-space
# resolver (providers/local/resolve.c) serves every fs/ path here.
SBXFS_WRAPPER="valgrind --quiet --child-silent-after-fork=yes --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite --track-fds=no --log-file=$VG_LOG"
MOUNT_WAIT=60 mount_sbxfs
UNMOUNT_WAIT=60 # the leak check at exit is slow on a loaded machine
L=$MNT/vg
ok "mkdir under valgrind" mkdir "$L"
echo 'echo hi; echo err >&2' >"$L/exec"
eq "exec" "$(cat "$L/exec")" "hi"
cat "$L/result" "$L/info" "$L/spec" "$L/state" "$L/log" "$MNT/status" "$MNT/README" >/dev/null
ok "cp into fs/" cp -r "$top_srcdir/src/base" "$L/fs/root/"
ok "diff" diff -r "$top_srcdir/src/base" "$L/fs/root/base"
echo pause >"$L/state"
echo resume >"$L/state"
echo bogus >"$MNT/ctl" 2>/dev/null
ok "rmdir" rmdir "$L"
unmount_sbxfs
eq "valgrind exit status (99 = errors found)" "$DAEMON_STATUS" 0
if [ -s "$VG_LOG" ]; then log "valgrind said:"; cat "$VG_LOG"; fi
finish
