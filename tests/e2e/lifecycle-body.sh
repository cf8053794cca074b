# The automatic lifecycle on one provider (sourced by test-auto-*.sh after
# lib.sh, with PROVIDER set; lib-fake.sh too for remote providers):
# idle pause, serving a paused lease, resume on access, autoResume off,
# lifetime reclaim, a sandbox deleted behind the mount's back, no provider
# call for root listings, timers surviving a remount, and timers that no step
# of the wall clock moves.
case $PROVIDER in
local)
	PAUSE_KEY= RESUME_KEY=
	printf '%s\n' '{"profiles":{
	  "default":{"provider":"local","idleTimeout":2},
	  "manual":{"provider":"local","idleTimeout":2,"autoResume":false},
	  "short":{"provider":"local","resources":{"timeout":4}},
	  "long":{"provider":"local","idleTimeout":5,"resources":{"timeout":600}}}}' >"$CONFIG"
	;;
e2b | daytona)
	if [ "$PROVIDER" = e2b ]; then
		PAUSE_KEY="POST /sandboxes/:id/pause" RESUME_KEY="POST /v2/sandboxes/:id/connect"
	else
		PAUSE_KEY="POST /api/sandbox/:idOrName/stop" RESUME_KEY="POST /api/sandbox/:idOrName/start"
	fi
	start_fake "$PROVIDER"
	printf '{"profiles":{
	  "default":{"provider":"%s","idleTimeout":2},
	  "manual":{"provider":"%s","idleTimeout":2,"autoResume":false},
	  "short":{"provider":"%s","resources":{"timeout":4}},
	  "long":{"provider":"%s","idleTimeout":5,"resources":{"timeout":600}}}}\n' \
		"$PROVIDER" "$PROVIDER" "$PROVIDER" "$PROVIDER" >"$CONFIG"
	;;
esac
total_calls() { # all provider requests counted by the fake (0 for local)
	[ "$PROVIDER" = local ] && { echo 0; return; }
	fake_get /_fake/counters | python3 -c 'import json,sys; print(sum(json.load(sys.stdin).values()))'
}
info_field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval("d"+sys.argv[2]))' "$1" "$2"; }

mount_sbxfs
L=$MNT/idle
mkdir "$L"
echo 'mkdir -p /tmp/w && echo cached-before > /tmp/w/a.txt && echo uncached > /tmp/w/b.txt' >"$L/exec"
eq "file readable while running" "$(cat "$L/fs/tmp/w/a.txt")" "cached-before"
if [ "$PROVIDER" = local ]; then
	echo 'nohup sh -c "i=0; while :; do i=\$((i+1)); printf %08d \$i > /tmp/w/counter; sleep 0.1; done" >/dev/null 2>&1 &' >"$L/exec"
fi
[ -n "$PAUSE_KEY" ] && fake_reset_counters

# 1. idle -> paused, by the timer, through the provider.
ok "idle lease pauses within idleTimeout + 3 s" wait_for 6 grep -qx paused "$L/state"
[ -n "$PAUSE_KEY" ] && eq "the provider got one pause call" "$(counter "$PAUSE_KEY")" 1
ok "the journal says why" grep -q '"to":"paused","cause":"idle"' "$L/log"
if [ "$PROVIDER" = local ]; then
	a=$(cat "$L/fs/tmp/w/counter"); sleep 1; b=$(cat "$L/fs/tmp/w/counter")
	eq "a paused local sandbox's spinning process stops" "$b" "$a"
fi

# 2. reading the root, status, info, state never reaches the provider.
[ "$PROVIDER" != local ] && fake_reset_counters
ls -l "$MNT" >/dev/null; cat "$MNT/status" "$L/info" "$L/state" >/dev/null; ls "$L" >/dev/null
eq "root listing, status, info, state: no provider call" "$(total_calls)" 0
ok "status shows the paused lease and its idle time" grep -Eq '^idle [a-z0-9]+ paused [0-9]+s ' "$MNT/status"
ok "info has lastActiveAt" grep -q lastActiveAt "$L/info"

# 3. what is cached is served without resuming; anything else resumes first.
eq "a file read before the pause is served" "$(cat "$L/fs/tmp/w/a.txt")" "cached-before"
eq "... without resuming" "$(cat "$L/state")" "paused"
if [ "$PROVIDER" = local ]; then
	# A local lease's files are on this machine: every read is served paused.
	eq "local: any file is served while paused" "$(cat "$L/fs/tmp/w/b.txt")" "uncached"
	eq "... still paused" "$(cat "$L/state")" "paused"
	t0=$(date +%s%N)
	got=$(echo 'echo back' >"$L/exec"; cat "$L/exec")
	t1=$(date +%s%N) st=$(cat "$L/state")
	eq "exec on a paused lease resumes it and runs" "$got" "back"
else
	t0=$(date +%s%N)
	got=$(cat "$L/fs/tmp/w/b.txt")
	t1=$(date +%s%N) st=$(cat "$L/state")
	eq "an uncached file resumes the lease and is served" "$got" "uncached"
	eq "one resume call" "$(counter "$RESUME_KEY")" 1
fi
# The state is read right after the access. Only if this shell was descheduled
# longer than idleTimeout (2 s) can the timer have paused the lease again; then
# the journal shows an idle pause after the access's resume, and says so.
running_again() {
	[ "$st" = running ] && return 0
	log "  state [$st] right after the access; the journal since the access's resume:"
	awk '/"to":"running","cause":"access"/ { n = NR } { l[NR] = $0 }
	     END { for (i = n + 1; i <= NR; i++) print l[i] }' "$L/log" >"$WORK/since"
	sed 's/^/    /' "$WORK/since"
	[ "$st" = paused ] && grep -q '"to":"paused","cause":"idle"' "$WORK/since"
}
ok "running again" running_again
ok "resume on access took < 10 s" test $(((t1 - t0) / 1000000)) -lt 10000
ok "the journal says the access resumed it" grep -q '"to":"running","cause":"access"' "$L/log"

# Concurrent accesses during a resume wait for the one resume.
echo 'for i in 1 2 3 4; do echo c$i > /tmp/w/c$i.txt; done' >"$L/exec"
echo pause >"$L/state"
[ "$PROVIDER" != local ] && fake_reset_counters
before=$(grep -c '"to":"running","cause":"access"' "$L/log")
pids=
for i in 1 2 3 4; do
	if [ "$PROVIDER" = local ]; then
		(echo "cat /tmp/w/c$i.txt" >"$L/exec") &
	else
		cat "$L/fs/tmp/w/c$i.txt" >"$WORK/c$i.out" &
	fi
	pids="$pids $!"
done
wait $pids # not a bare `wait`: the daemon and the fake are background jobs too
after=$(grep -c '"to":"running","cause":"access"' "$L/log")
eq "four concurrent accesses to a paused lease: one resume" "$((after - before))" 1
[ "$PROVIDER" != local ] && eq "... one resume call to the provider" "$(counter "$RESUME_KEY")" 1
[ "$PROVIDER" != local ] && eq "... and every access served" "$(cat "$WORK"/c?.out | tr -d '\n')" "c1c2c3c4"

# 4. autoResume false: EAGAIN and a reason.
echo "new man profile=manual" >"$MNT/ctl"
echo 'echo x > /tmp/m.txt' >"$MNT/man/exec"
echo pause >"$MNT/man/state"
eq "autoResume off: exec on a paused lease" "$(errno_of_write "$MNT/man/exec" "echo hi")" "EAGAIN"
ok "error says autoResume is off" grep -q "autoResume is off" "$MNT/man/error"
eq "still paused" "$(cat "$MNT/man/state")" "paused"
echo resume >"$MNT/man/state"
eq "explicit resume works" "$(cat "$MNT/man/state")" "running"
# A resume that fails fails the run's write: it resumed at the run's close,
# where a failure is seen by no shell (`$?` 0, no output).
if [ "$PROVIDER" != local ]; then
	echo pause >"$L/state"
	fault_only "{\"kind\":\"5xx\",\"status\":500,\"key\":\"$RESUME_KEY\"}"
	run_write_fails "$L" "a paused lease whose resume fails" "Input/output error" \
		"the paused lease could not be resumed for the run: .*injected fault"
	eq "... still paused" "$(cat "$L/state")" paused
	fake_clear_faults
	eq "the resume answers again: the run resumes it and runs" "$(echo 'echo hi' >"$L/exec" && cat "$L/exec")" hi
fi

# A pause while a run is in flight. local freezes the run with the rest, and
# it ends after the resume. e2b's pause cut the run's stream and daytona's
# stop ended it: the run failed ENOTCONN, its output lost, for a pause that
# went through; there the pause is refused while a run is in flight.
(echo 'sleep 2; echo done' >"$MNT/man/exec" && cat "$MNT/man/exec" >"$WORK/inflight.out" 2>&1) &
inflight=$!
sleep 0.7
if [ "$PROVIDER" = local ]; then
	ok "local: a pause while a run is in flight" sh -c "echo pause >'$MNT/man/state'"
	sleep 2
	eq "... the run waits, paused with the lease" "$(cat "$MNT/man/state"):$(cat "$WORK/inflight.out")" paused:
	echo resume >"$MNT/man/state"
else
	out=$(bash -c "echo pause >'$MNT/man/state'" 2>&1)
	eq "a pause while a run is in flight: \$? is 1" "$?" 1
	ok "... busy (write error: $out)" grep -q "write error: Device or resource busy" <<<"$out"
	ok "... the error file says which run and why" \
		grep -q "pause: runs/[0-9]* is still running, and pausing the $PROVIDER sandbox would cut it" "$MNT/man/error"
	eq "... the lease still running" "$(cat "$MNT/man/state")" running
fi
wait "$inflight"
eq "... the run completes with its output" "$(cat "$WORK/inflight.out")" done
ok "once it has ended, the pause is taken" sh -c "echo pause >'$MNT/man/state' && grep -qx paused '$MNT/man/state'"
echo resume >"$MNT/man/state"
# The same for a terminal's shell on e2b (daytona has no terminals).
if [ "$PROVIDER" = e2b ]; then
	python3 -c 'import os, sys, time
c = os.open(sys.argv[1] + "/tty/clone", os.O_RDONLY)
n = os.read(c, 16).decode().strip()
w = os.open(sys.argv[1] + "/tty/" + n + "/data", os.O_WRONLY)
open(sys.argv[2], "w").close()
time.sleep(2)' "$MNT/man" "$WORK/tty.up" &
	inflight=$!
	wait_for 5 test -e "$WORK/tty.up"
	out=$(bash -c "echo pause >'$MNT/man/state'" 2>&1)
	ok "a pause while a terminal's shell runs: busy (write error: $out)" grep -q "write error: Device or resource busy" <<<"$out"
	ok "... the error file names the terminal" grep -q "pause: the shell of tty/[0-9]* is running" "$MNT/man/error"
	wait "$inflight"
	ok "... once it is closed, the pause is taken" sh -c "echo pause >'$MNT/man/state' && grep -qx paused '$MNT/man/state'"
	echo resume >"$MNT/man/state"
fi

# 5. lifetime reached -> reclaimed; fs/ answers at once.
echo "new short profile=short" >"$MNT/ctl"
ok "a lease past resources.timeout is reclaimed" wait_for 8 grep -qx reclaimed "$MNT/short/state"
read -r r ms <<<"$(errno_ms_of "os.stat('$MNT/short/fs/tmp')")"
eq "fs/ of a reclaimed lease" "$r" "ENOENT"
ok "... answered at once ($ms ms)" test "$ms" -lt 1000
ok "the journal says lifetime" grep -q 'lifetime reached' "$MNT/short/log"

# 6. the sandbox deleted behind the mount's back -> reclaimed, no hang.
mkdir "$MNT/vic"
echo 'echo hi' >"$MNT/vic/exec"
id=$(info_field "$MNT/vic/info" '["sandboxId"]')
if [ "$PROVIDER" = local ]; then
	kill -9 "$(info_field "$MNT/vic/info" '["sandbox"]["init_pid"]')"
else
	fake_post "/_fake/sandboxes/$id/vanish" '{}' >/dev/null
fi
read -r r ms <<<"$(errno_ms_of "$(write_close "$MNT/vic/exec" "echo again")")"
ok "a run on a vanished sandbox fails ($r)" test "$r" = ENOENT -o "$r" = ENOTCONN
ok "... within 10 s ($ms ms)" test "$ms" -lt 10000
ok "the lease becomes reclaimed" wait_for 5 grep -qx reclaimed "$MNT/vic/state"
eq "fs/ then answers ENOENT" "$(errno_of "os.listdir('$MNT/vic/fs/')")" "ENOENT"
ok "rmdir of a reclaimed lease" rmdir "$MNT/vic"

# 7. timers and states survive a remount.
echo pause >"$L/state"
unmount_sbxfs
mount_sbxfs
eq "paused before unmount, paused after" "$(cat "$L/state")" "paused"
echo 'echo after-remount' >"$L/exec"
eq "and resumes on access" "$(cat "$L/exec")" "after-remount"
eq "reclaimed stays reclaimed" "$(cat "$MNT/short/state")" "reclaimed"

# 8. the host's wall clock stepped (NTP's first sync after a VM resume, an
# admin's date -s) while mounted: libfaketime moves the daemon's wall clock
# alone. Two hours forward killed every lease with a lifetime (here 600 s)
# at the next tick, "lifetime reached"; two hours back stopped every idle
# pause (and reclaim) for two hours. Timers count the boot clock now.
FAKETIME_LIB=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -n 1)
if [ -z "$FAKETIME_LIB" ]; then
	ok "libfaketime is installed (scripts/install-deps: faketime)" false
else
	unmount_sbxfs
	echo +0 >"$WORK/clock"
	# Under ASan the preloaded library comes before ASan's runtime: allowed here.
	SBXFS_WRAPPER="env LD_PRELOAD=$FAKETIME_LIB FAKETIME_TIMESTAMP_FILE=$WORK/clock
		FAKETIME_NO_CACHE=1 DONT_FAKE_MONOTONIC=1
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" mount_sbxfs
	echo "new clk profile=long" >"$MNT/ctl"
	echo 'echo tick' >"$MNT/clk/exec"
	eq "a lease with a 600 s lifetime runs" "$(cat "$MNT/clk/exec")" "tick"
	echo +2h >"$WORK/clock"
	sleep 2.5
	eq "the wall clock 2 h ahead: the lease still runs" "$(cat "$MNT/clk/state")" "running"
	ok "... and its journal says no lifetime" sh -c "! grep -q 'lifetime reached' '$MNT/clk/log'"
	echo 'echo tock' >"$MNT/clk/exec"
	eq "... and runs" "$(cat "$MNT/clk/exec")" "tock"
	echo -2h >"$WORK/clock"
	ok "the wall clock then 4 h back: idle still pauses (idleTimeout 5 s + 3 s)" \
		wait_for 9 grep -qx paused "$MNT/clk/state"
	ok "status shows no negative idle time" grep -Eq '^clk [a-z0-9]+ paused [0-9]+s ' "$MNT/status"
	echo +0 >"$WORK/clock"
	rmdir "$MNT/clk"
fi
finish
