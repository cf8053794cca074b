# Shared stories about runs as the caller sees them (issues 10 and 11),
# sourced by test-{local,e2b,daytona}-runs.sh after lib.sh, with $L the
# lease and $MNT the mount:
#   story_runs_own_output ROUNDS  8 concurrent callers each get their own output and result
#   story_runs_refused            what is known before a run fails the write (paused, NUL, empty)
#   story_runs_timeout            a run past runTimeout: `cat exec` after it exits non-zero
#   story_runs_shell              bash where present, spec `shell` overrides
#   story_runs_binary [lossy]     non-UTF-8 output kept byte for byte, result still valid
#   story_runs_live_stderr        runs/N/stderr is readable while the run goes
#   story_runs_all ROUNDS [lossy]  all of them
#   story_runs_dir                runs/N/{cmd,stdout,stderr,result,ctl}, runs/mine, kill

# The newest N under runs/.
last_run() { ls "$L/runs" | grep -v mine | sort -n | tail -1; }
# valid_json FILE: the file parses as JSON.
# rss_kb: the daemon's peak RSS (VmHWM) in kB.
rss_kb() { awk '/^VmHWM/ {print $2}' "/proc/$SBXFS_PID/status"; }
valid_json() { python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$1"; }

# One caller of the agent kind: its own bash writes a command and reads
# exec and result back; half of them write with /bin/echo (a child that is
# gone by the time cat reads). Prints MIX lines for every mix-up (another
# caller's run answered) and LOST lines for a run of its own whose output
# never arrived (the provider's fault, not the per-caller rule's).
one_caller() { # ID
	local id=$1 w=echo
	[ $((RANDOM % 2)) = 0 ] && w=/bin/echo
	bash -c "$w 'sleep 0.\$((RANDOM % 3)); echo $id' > '$L/exec'
		out=\$(cat '$L/exec' 2>&1) || echo \"FAILED $id: \$out; \$(grep -A3 runError '$L/result' | tr -s ' \n' ' ')\"
		res=\$(tr -s ' \n' ' ' < '$L/result')
		case \$res in
		*'\"stdout\": \"$id\\n\"'*) ;;
		*'echo $id\\n\"'*'\"stdout\": \"\"'*) echo \"LOST $id: own run, no output: \$res\" ;;
		*) echo \"MIX $id: result of another run: \$res\" ;;
		esac
		case \$out/\$res in
		$id/*) ;;
		/*'echo $id\\n\"'*'\"stdout\": \"\"'*) echo \"LOST $id: exec gave nothing\" ;;
		*) echo \"MIX $id: exec gave [\$out]\" ;;
		esac"
}

story_runs_own_output() {
	local rounds=$1 r k pid pids mix=$WORK/mix t0=$(date +%s)
	: >"$mix"
	for r in $(seq "$rounds"); do
		pids=
		for k in 1 2 3 4 5 6 7 8; do
			one_caller "c$k-r$r" >>"$mix" &
			pids="$pids $!"
		done
		wait $pids
	done
	eq "8 concurrent callers x $rounds rounds: 0 mix-ups ($(($(date +%s) - t0)) s)" \
		"$(grep -c MIX "$mix")" 0
	eq "... and no run failed" "$(grep -c FAILED "$mix")" 0
	eq "... and no run lost its output" "$(grep -c LOST "$mix")" 0
	head -5 "$mix"
	# The rule in its plainest form: A writes, B writes later, A reads its own.
	bash -c "echo 'sleep 1; echo A' > '$L/exec'; sleep 1.5; cat '$L/exec'" >"$WORK/a" &
	pid=$!
	sleep 0.3
	bash -c "echo 'echo B' > '$L/exec'; cat '$L/exec'" >"$WORK/b"
	wait $pid
	eq "A, who wrote first, reads A after B's run" "$(cat "$WORK/a")" A
	eq "B reads B" "$(cat "$WORK/b")" B
}

story_runs_refused() {
	local P=$MNT/${L##*/}-p out rc n
	echo "new ${P##*/} autoResume=false" >"$MNT/ctl"
	echo 'echo before' >"$P/exec"
	ok "pause the autoResume-off lease" sh -c "echo pause > '$P/state'"
	out=$(bash -c "echo true > '$P/exec'" 2>&1)
	rc=$?
	ok "bash -c 'echo true > exec' on it exits non-zero (rc $rc)" test "$rc" != 0
	ok "... bash prints the reason: $out" sh -c "echo '$out' | grep -q 'Resource temporarily unavailable'"
	ok "... error says autoResume is off" grep -q "paused and autoResume is off" "$P/error"
	# It leaves a record of a run that could not start: the caller's `cat
	# exec` answered for the run before it (its output, exit 0).
	eq "... nothing ran: its record says why" "$(json_get "$P/runs/2/result" '["command"], d["exitCode"], d["runError"]["errno"]')" \
		"('true\n', None, 'EAGAIN')"
	out=$(bash -c "cat '$P/exec'" 2>&1)
	eq "... and the caller's cat exec fails with it, printing nothing else" "$?:$out" \
		"1:cat: $P/exec: Resource temporarily unavailable"
	echo resume >"$P/state"
	eq "after resume it runs" "$(bash -c "echo 'echo up' > '$P/exec'; cat '$P/exec'")" up
	ok "rmdir it" rmdir "$P"

	n=$(last_run)
	out=$(bash -c "printf 'echo A\\0; echo B' > '$L/exec'" 2>&1)
	rc=$?
	ok "a NUL in a command fails the write (rc $rc): $out" sh -c "[ $rc != 0 ] && echo '$out' | grep -q 'Invalid argument'"
	eq "... with EINVAL" "$(errno_of "fd = os.open('$L/exec', os.O_WRONLY | os.O_TRUNC)
try:
    os.write(fd, b'echo A\\0; echo B')
finally:
    os.close(fd)")" EINVAL
	ok "... error says NUL" grep -q "NUL byte" "$L/error"
	eq "... nothing ran" "$(last_run)" "$n"
	out=$(bash -c "printf 'x = 1\\0' > '$L/code.py'" 2>&1)
	ok "a NUL in a code cell fails the write too" test $? != 0
	ok "an empty command fails the write" sh -c "! bash -c \"echo > '$L/exec'\" 2>/dev/null"
	ok "... error says empty" grep -q "empty" "$L/error"
	eq "... nothing ran" "$(last_run)" "$n"
}

story_runs_timeout() {
	local T=$MNT/${L##*/}-t rc
	echo "new ${T##*/} runTimeout=1" >"$MNT/ctl"
	bash -c "echo 'echo begun; sleep 5' > '$T/exec'; cat '$T/exec' >'$WORK/t.out'"
	rc=$?
	ok "echo 'sleep 5' > exec; cat exec with a 1 s runTimeout exits non-zero (rc $rc)" test "$rc" != 0
	eq "... after printing what the run printed" "$(cat "$WORK/t.out")" begun
	ok "... cat says why" sh -c "cat '$T/exec' 2>&1 >/dev/null | grep -q 'timed out'"
	eq "result says ETIMEDOUT" "$(json_get "$T/result" '["runError"]["errno"]')" ETIMEDOUT
	eq "... and timedOut" "$(json_get "$T/result" '["timedOut"]')" True
	eq "stdout is still readable without an error" "$(cat "$T/stdout")" begun
	eq "the next quick run reads clean" "$(bash -c "echo 'echo quick' > '$T/exec'; cat '$T/exec'"; echo rc=$?)" "quick
rc=0"
	ok "rmdir it" rmdir "$T"
}

story_runs_shell() {
	eq "[[ ]] and brace expansion work (bash where present)" \
		"$(bash -c "echo '[[ 1 == 1 ]] && echo {a,b}' > '$L/exec'; cat '$L/exec'")" "a b"
	local S=$MNT/${L##*/}-s
	echo "new ${S##*/} shell=sh" >"$MNT/ctl"
	echo 'echo {a,b}; [ -n "$BASH_VERSION" ] && echo bash || echo notbash' >"$S/exec"
	eq "spec shell=sh runs under sh" "$(cat "$S/exec")" "{a,b}
notbash"
	eq "spec shows the shell" "$(json_get "$S/spec" '["shell"]')" sh
	ok "rmdir it" rmdir "$S"
}

story_runs_binary() { # [lossy]: the provider's transport turns bytes that are not UTF-8 into U+FFFD
	printf '%s\n' 'printf "bad\377\n"; echo ok; printf "\000\001" >&2' >"$L/exec"
	if [ "${1:-}" = lossy ]; then
		eq "cat exec gives what arrived: U+FFFD for the byte that is not UTF-8" \
			"$(cat "$L/exec" | od -An -c | tr -s ' ')" " b a d 357 277 275 \n o k \n"
		ok "result is valid JSON" valid_json "$L/result"
		eq "... with the text and its exact size" \
			"$(json_get "$L/result" '["stdout"], d["stdoutBinary"], d["stdoutBytes"]')" \
			"('bad�\nok\n', False, 10)"
	else
		eq "cat exec gives the exact bytes" "$(cat "$L/exec" | od -An -c | tr -s ' ')" " b a d 377 \n o k \n"
		ok "result is valid JSON" valid_json "$L/result"
		eq "... stdout null, stdoutBinary, exact size" \
			"$(json_get "$L/result" '["stdout"], d["stdoutBinary"], d["stdoutBytes"], d["stderrBytes"]')" \
			"(None, True, 8, 2)"
		eq "stderr kept byte for byte" "$(od -An -c "$L/stderr" | tr -s ' ')" " \0 001"
	fi
	printf '%s\n' 'printf "h\303\251\n"' >"$L/exec"
	eq "UTF-8 output is text in result" "$(json_get "$L/result" '["stdout"], d["stdoutBinary"]')" "('hé\n', False)"
}

story_runs_live_stderr() {
	local n t0 first ms pid
	n=$(($(last_run) + 1))
	(echo 'for i in 1 2 3 4; do echo e$i >&2; sleep 1; done' >"$L/exec") &
	pid=$!
	wait_for 10 test -e "$L/runs/$n/stderr"
	t0=$(date +%s%N)
	first=$(head -1 "$L/runs/$n/stderr")
	ms=$((($(date +%s%N) - t0) / 1000000))
	eq "the first stderr line of a run still going" "$first" e1
	ok "... arrives before the run ends ($ms ms)" test "$ms" -lt 2500
	eq "cat runs/N/stderr follows it to its end" "$(cat "$L/runs/$n/stderr" | tr '\n' ' ')" "e1 e2 e3 e4 "
	wait $pid
	ok "the run had ended when cat ended" test -s "$L/runs/$n/result"
}

story_runs_dir() {
	local n k pid t0
	echo 'echo o; echo e >&2; exit 3' >"$L/exec"
	n=$(cat "$L/runs/mine")
	eq "runs/N lists its files" "$(ls "$L/runs/$n" | tr '\n' ' ')" "cmd ctl result stderr stdout "
	eq "cmd is the text run" "$(cat "$L/runs/$n/cmd")" 'echo o; echo e >&2; exit 3'
	eq "stdout, stderr apart" "$(cat "$L/runs/$n/stdout")/$(cat "$L/runs/$n/stderr")" "o/e"
	eq "result has the exit code and its run number" \
		"$(json_get "$L/runs/$n/result" '["exitCode"], d["run"]')" "(3, $n)"
	ok "the last run is the newest under runs/" test "$(last_run)" = "$n"
	(echo 'echo begun; sleep 30' >"$L/exec") &
	pid=$!
	k=$((n + 1))
	wait_for 10 test -e "$L/runs/$k/stdout"
	wait_for 10 test -s "$L/runs/$k/stdout"
	t0=$(date +%s)
	ok "kill on runs/N/ctl" sh -c "echo kill > '$L/runs/$k/ctl'"
	wait $pid
	ok "... stops the run soon ($(($(date +%s) - t0)) s)" test $(($(date +%s) - t0)) -lt 15
	eq "... result says interrupted, EINTR" \
		"$(json_get "$L/runs/$k/result" '["interrupted"], d["runError"]["errno"]')" "(True, 'EINTR')"
	
	eq "... ESRCH" "$(errno_of_write "$L/runs/$k/ctl" kill)" ESRCH
	eq "an unknown word is EINVAL" "$(errno_of_write "$L/runs/$k/ctl" stop)" EINVAL
	eq "printf kill (no newline) of an ended run: the shell's \$? tells" \
		"$(bash -c "printf kill > '$L/runs/$k/ctl'" 2>/dev/null; echo $?)" 1
	eq "runs/N/stdout is read-only" "$(errno_of "open('$L/runs/$k/stdout', 'w')")" EACCES
}

story_runs_all() { # ROUNDS [lossy]: every story above, the same on every provider
	story_runs_dir
	story_runs_shell
	story_runs_binary "${2:-}"
	story_runs_refused
	story_runs_timeout
	story_runs_live_stderr
	story_runs_own_output "$1"
}
