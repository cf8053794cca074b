# Sourced after lib.sh and lib-fake.sh by test-{e2b,daytona}-queued.sh:
# a queued metadata change (utimens, mknod...: applied later, as one script
# in the sandbox) that fails is the failure of the path it concerns only
# (issue 10 item 8): fsync, fdatasync and close of another file succeed;
# the lease's `error` names the change; the next fsync or stat of its own
# path fails with it, once.
# The caller sets L, F (a directory in fs/), FHOME (F in the sandbox) and
# CHANGE_FAULT (a fault JSON that fails the command a batch runs in), and
# CHANGE_DROP (one that drops its connection) for story_queued_not_run.

# fsync_write PATH TEXT DATASYNC: appends TEXT, then fsync (or fdatasync), then close.
fsync_write() {
	echo "fd = os.open('$1', os.O_WRONLY | os.O_APPEND); os.write(fd, b'$2'); (os.fdatasync if $3 else os.fsync)(fd); os.close(fd)"
}

story_queued_failure() {
	echo one >"$F/qa"
	echo two >"$F/qb"
	echo three >"$F/qc"
	lease_run true >/dev/null # uploaded (write-back): the changes below are queued ones
	cp "$L/error" "$WORK/q-before" 2>/dev/null || : >"$WORK/q-before"

	# The batch's command fails (the sandbox's process endpoint answers 500).
	fault_only "$CHANGE_FAULT"
	ok "utimens of qb is queued: returns 0" touch -m -d @1000000000 "$F/qb"
	eq "fsync of another file (qa) succeeds" "$(errno_of "$(fsync_write "$F/qa" more False)")" OK
	eq "fdatasync of another file (qc) succeeds" \
		"$(errno_of "$(fsync_write "$F/qc" more True)")" OK
	fake_clear_faults
	ok "the error file names the failed change" error_says "utimens $FHOME/qb"
	ok "... and is new" sh -c "! cmp -s '$WORK/q-before' '$L/error'"
	eq "fsync of qb itself fails with the change's failure" \
		"$(errno_of "fd = os.open('$F/qb', os.O_RDONLY); os.fsync(fd)")" EIO
	eq "... once: the next fsync of qb succeeds" \
		"$(errno_of "fd = os.open('$F/qb', os.O_RDONLY); os.fsync(fd)")" OK
	eq "qa's data arrived" "$(lease_run "cat $FHOME/qa")" "$(printf 'one\nmore')"

}

# A batch that could not run at all (the connection to the sandbox's process
# endpoint dropped: CHANGE_DROP) is EIO for each change it carried, on every
# remote provider (the change was not made; the transport's own errno,
# ENOTCONN, is the reason in the lease's `error`, not the next stat's answer;
# e2b said ENOTCONN there before the two providers shared the rule).
story_queued_not_run() {
	echo four >"$F/qd"
	echo five >"$F/qe"
	lease_run true >/dev/null # uploaded (write-back): the utimens below is a queued one
	fault_only "$CHANGE_DROP"
	ok "utimens of qd is queued: returns 0" touch -m -d @1000000000 "$F/qd"
	eq "fsync of another file (qe) succeeds" "$(errno_of "$(fsync_write "$F/qe" more False)")" OK
	fake_clear_faults
	ok "the error file names the change that did not run" error_says "utimens $FHOME/qd"
	eq "fsync of qd fails with EIO" "$(errno_of "fd = os.open('$F/qd', os.O_RDONLY); os.fsync(fd)")" EIO
	eq "... once" "$(errno_of "fd = os.open('$F/qd', os.O_RDONLY); os.fsync(fd)")" OK
}

# The queue is applied a second after its last change with no call asking
# for it (the flush engine's timer, providers/rmeta_engine.c; daytona had
# none, its changes waited for a sync or a run). A chmod is overlaid on
# every stat, so nothing else applies it. TIMER_KEY: the counter of the
# request that applies it (e2b: the batch's process; daytona: the
# permissions call).
story_queued_timer() {
	echo t >"$F/qt"
	lease_run true >/dev/null # applies whatever waits
	fake_reset_counters
	ok "chmod is queued: returns 0" chmod 600 "$F/qt"
	eq "... the mount shows it at once" "$(stat -c %a "$F/qt")" 600
	applied() { [ "$(counter "$TIMER_KEY")" -ge 1 ]; }
	ok "... and it is applied within 5 s with no sync, no run ($TIMER_KEY)" wait_for 5 applied
	eq "... the sandbox has it" "$(lease_run "stat -c %a $FHOME/qt")" 600
}

# rmdir of the lease with a change still queued: nothing is sent to the
# deleted sandbox (e2b's release applied the queue after the DELETE, a
# request answered 502). Last: the lease is gone after it.
story_queued_kill() {
	echo k >"$F/qk"
	lease_run true >/dev/null
	chmod 600 "$F/qk"
	fake_reset_counters
	ok "rmdir of the lease with a chmod queued" rmdir "$L"
	sleep 1.5 # past the queue's timer
	eq "... the change is not sent to the deleted sandbox ($TIMER_KEY)" "$(counter "$TIMER_KEY")" 0
}

# While a batch is applied (the fake holds its request 4 s: SLOW_KEY), a
# path it does not concern is read without waiting for it (the flush
# engine waits only for ops of the path; daytona waited for the whole
# flush before it).
story_queued_inflight() {
	mkdir -p "$F/qsub" "$F/qother"
	echo a >"$F/qsub/a"
	lease_run "echo fresh > $FHOME/qother/fresh" >/dev/null # not in the mount's cache
	fault_only "{\"kind\":\"slow\",\"complete\":true,\"delayMs\":4000,\"count\":1,\"key\":\"$SLOW_KEY\"}"
	(
		touch -m -d @1100000000 "$F/qsub/a"
		python3 -c "import os; fd = os.open('$F/qsub/a', os.O_RDONLY); os.fsync(fd)"
	) &
	local pid=$! t0 ms
	sleep 1.5 # the batch is in flight
	t0=$(date +%s%N)
	eq "a file elsewhere is read during the batch" "$(cat "$F/qother/fresh")" fresh
	ms=$((($(date +%s%N) - t0) / 1000000))
	ok "... without waiting for the batch ($ms ms < 2000)" test "$ms" -lt 2000
	wait "$pid"
	fake_clear_faults
	eq "the batch was applied" "$(lease_run "stat -c %Y $FHOME/qsub/a")" 1100000000
}

# A chmod through a hard link's new name, then the old name removed, all
# queued: the new name keeps that mode (pjdfstest link/00.t; on daytona the
# old name's earlier mode was moved after it, and won).
story_queued_link_mode() {
	mkdir -p "$F/qhard"
	touch "$F/qhard/a"
	ln "$F/qhard/a" "$F/qhard/b"
	chmod 201 "$F/qhard/b"
	rm "$F/qhard/a"
	eq "link, chmod through the new name, unlink the old: the mode in the sandbox" \
		"$(lease_run "stat -c '%a %h' $FHOME/qhard/b")" "201 1"
	eq "... and through the mount" "$(stat -c '%a %h' "$F/qhard/b")" "201 1"
}
