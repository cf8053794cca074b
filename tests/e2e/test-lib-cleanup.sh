#!/bin/bash
# The tests' own exit trap (lib.sh): every cleanup step runs, whatever the
# steps before it were — EXTRA_CLEANUP text that starts with ';' (appended
# with no fake having set one), a step that fails, one with a syntax error —
# and the test's directory goes. An inner script sources lib.sh, registers
# steps that leave marks in a directory of this test, and exits.
. "$(dirname "$0")/lib.sh"
MARKS=$WORK/marks
mkdir -p "$MARKS"
inner() { # inner BODY: runs BODY in a bash that sourced lib.sh; prints its WORK
	bash -c '. "$1/tests/e2e/lib.sh"; echo "$WORK"; eval "$2"' inner "$top_srcdir" "$1" 2>"$WORK/inner.err"
}
w=$(inner "EXTRA_CLEANUP=\"\$EXTRA_CLEANUP; touch $MARKS/semi\"")
ok "EXTRA_CLEANUP starting with ';': its step runs" test -e "$MARKS/semi"
ok "... and the inner test's directory is removed" test ! -e "$w"
w=$(inner "EXTRA_CLEANUP=\"false; touch $MARKS/after-false\"
add_cleanup 'false'
add_cleanup 'if then fi'
add_cleanup 'touch $MARKS/after-broken'
exit 3")
ok "a failing step does not stop the next" test -e "$MARKS/after-false"
ok "a step with a syntax error does not stop the next (add_cleanup)" test -e "$MARKS/after-broken"
ok "... and the directory is removed" test ! -e "$w"
w=$(inner "add_cleanup 'echo one >>$MARKS/order'
EXTRA_CLEANUP=\"\${EXTRA_CLEANUP:+\$EXTRA_CLEANUP; }echo two >>$MARKS/order\"
add_cleanup 'echo three >>$MARKS/order'")
eq "steps run in the order they were added" "$(tr '\n' ' ' <"$MARKS/order")" "one two three "
# A test that stops with its mount down (here: after its unmount) left its
# local lease running on the host (init, loop device, mounts, cgroups).
inner "mount_sbxfs; mkdir \"\$MNT/lt\" && cat \"\$STATE\"/local/lcl-*/lease.json >$MARKS/lease.json
unmount_sbxfs; exit 1" >"$MARKS/inner.out"
w=$(head -n 1 "$MARKS/inner.out")
init=$(json_get "$MARKS/lease.json" "['init_pid']")
ok "a test ended with its mount down: its local lease's init ($init) is ended" \
	wait_for 5 sh -c "! kill -0 $init 2>/dev/null"
ok "... nothing of it is left mounted" sh -c "! grep -qF '$w/' /proc/self/mountinfo"
ok "... and the directory is removed" test ! -e "$w"
finish
