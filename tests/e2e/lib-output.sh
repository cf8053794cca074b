# Sourced by the test-*-output.sh tests after lib.sh and lib-runs.sh (with
# $STATE on a small tmpfs): issue 10's promises about output and the state
# dir, the same on every provider, through ordinary tools.
#   story_output_bytes PROV binary stdout and stderr (over several polls) arrive byte for byte
#   story_output_code       a code cell writing bytes that are not UTF-8, a lone surrogate, a NUL
#   story_output_memory MB  a run printing MB megabytes: the daemon's peak RSS under 64 MB
#   story_output_env        env that is not UTF-8: EILSEQ, the lease table still saved
#   story_output_full       a full state dir: exec and mkdir fail where the caller sees it
#   story_output_runaway    `yes` (output without end): stopped before the state dir's disk is full
#   story_output_download_reserve  a big remote file read: its download stops at the same reserve
#   story_output_rich_bound a cell displaying 300 MB: EFBIG, the daemon's memory bounded
#   story_output_long_command  a 2 MB command (a heredoc writing a file) runs

# output_mount PROVIDER: the state dir on a 256 MB tmpfs (a full disk is
# quick to make), the mount, and a lease $L of PROVIDER.
output_mount() {
	mkdir -p "$STATE"
	mount -t tmpfs -o size=256m,mode=0700 tmpfs "$STATE" || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
	add_cleanup "umount '$STATE'"
	mount_sbxfs
	L=$MNT/box
	ok "mkdir creates a $1 lease" mkdir "$L"
}

# sha_of CMD: the sha256 of what the shell text CMD prints here, on the host.
sha_of() { bash -c "$1" | sha256sum | cut -d' ' -f1; }

story_output_bytes() {
	local out='seq 1 40000 | gzip -n; sleep 1.5; seq 40001 70000 | gzip -n'
	local err='seq 5 30000 | gzip -n'
	printf '%s\n' "{ $err; } >&2; $out" >"$L/exec"
	eq "cat exec: binary stdout over several polls, byte for byte" \
		"$(cat "$L/exec" | sha256sum | cut -d' ' -f1)" "$(sha_of "$out")"
	eq "stderr too" "$(sha256sum <"$L/stderr" | cut -d' ' -f1)" "$(sha_of "$err")"
	ok "result is valid JSON" valid_json "$L/result"
	eq "... stdout null, stdoutBinary, both sizes exact" \
		"$(json_get "$L/result" '["stdout"], d["stdoutBinary"], d["stdoutBytes"], d["stderrBytes"]')" \
		"(None, True, $(bash -c "$out" | wc -c), $(bash -c "$err" | wc -c))"
	printf '%s\n' 'printf "\377\376\000x"' >"$L/exec"
	eq "every byte value survives: ff fe 00 78" "$(od -An -tx1 "$L/stdout" | tr -d ' ')" "fffe0078"
	# The command text itself: local passes bytes; E2B's and Daytona's APIs carry
	# it in JSON (UTF-8 only): refused at the write with EILSEQ and the reason
	# (it was refused only when the run began, after the shell's write had
	# returned), never sent cut.
	if [ "${1:-}" = local ]; then
		printf 'echo \377 ok\n' >"$L/exec"
		eq "a command that is not UTF-8 runs, its bytes kept" "$(od -An -tx1 "$L/stdout" | tr -d ' ')" "ff206f6b0a"
	else
		eq "a command that is not UTF-8: the write fails with EILSEQ" \
			"$(errno_of "$(write_close "$L/exec" 'echo \377 ok\n')")" EILSEQ
		ok "... the reason is in error" grep -q "not UTF-8 text" "$L/error"
	fi
}

story_output_code() {
	# The interpreters' protocol carries text (Jupyter's stream messages on
	# E2B, the same NDJSON events on local and Daytona): bytes that are not
	# UTF-8 written to fd 1 become U+FFFD, the same on every provider, and
	# nothing around them is lost.
	printf 'import os\nos.write(1, b"bad\\xff\\n")\nprint("ok")\n7\n' >"$L/code.py"
	eq "code.py writing a byte that is not UTF-8: U+FFFD in its place, the rest kept" \
		"$(cat "$L/code.py" | od -An -c | tr -s ' ')" " b a d 357 277 275 \n o k \n 7 \n"
	ok "result is valid JSON" valid_json "$L/result"
	eq "... success, the value" "$(json_get "$L/result" '["success"], d["output"]')" "(True, 7)"
	printf 'print("s\\udcff")\nprint("a\\0b")\nprint("after")\n' >"$L/code.py"
	eq "python: a lone surrogate becomes U+FFFD, a NUL stays, no line lost" \
		"$(cat "$L/code.py" | od -An -c | tr -s ' ')" " s 357 277 275 \n a \0 b \n a f t e r \n"
	ok "result is valid JSON" valid_json "$L/result"
	printf 'console.log("j\\udcff"); console.log("after")\n' >"$L/code.js"
	eq "javascript: a lone surrogate becomes U+FFFD, no line lost" \
		"$(cat "$L/code.js" | od -An -c | tr -s ' ')" " j 357 277 275 \n a f t e r \n"
}

story_output_memory() { # MB
	local before after
	before=$(rss_kb)
	printf '%s\n' "head -c $(($1 * 1000000)) /dev/zero | tr '\\0' a" >"$L/exec"
	after=$(rss_kb)
	log "daemon peak RSS: $before kB before, $after kB after a $1 MB run"
	# The bound is the plain build's (ASan's quarantine holds freed buffers).
	if [ "${SBXFS_ASAN:-0}" != 1 ]; then
		ok "a $1 MB run: the daemon's peak RSS stays under 64 MB ($after kB)" test "$after" -lt 65536
	fi
	eq "... cat exec gives all of it" "$(cat "$L/exec" | wc -c)" $(($1 * 1000000))
	eq "... all 'a'" "$(tr -d a <"$L/exec" | wc -c)" 0
}

story_output_env() {
	eq "env with a value that is not UTF-8: EILSEQ" "$(errno_of "$(write_close "$L/env" 'A=\377x\n')")" EILSEQ
	ok "... error names the key and why" grep -q "A: the value is not UTF-8" "$L/error"
	ok "... env keeps what it had" sh -c "! grep -q '^A=' '$L/env'"
	eq "printf 'MY VAR=1' > env (no newline): bash sees the EINVAL" \
		"$(bash -c "printf 'MY VAR=1' > '$L/env'" 2>/dev/null; echo $?)" 1
	ok "... env keeps what it had" sh -c "! grep -q 'MY VAR' '$L/env'"
	printf 'B=caf\303\251\n' >"$L/env"
	eq "UTF-8 env is kept" "$(lease_run 'echo $B')" "café"
	ok "... and saved in the lease table" grep -q '"env": "B=caf' "$STATE/leases.json"
	ok "mkdir of another lease still saves the table" mkdir "$L-2"
	ok "... rmdir it" rmdir "$L-2"
	: >"$L/env"
}

# ftruncate(2) on an open control file comes with no path (nullpath_ok):
# it answered ENOENT, so `truncate -s 0 exec` failed and env could not be
# cut. Writable files take it as the shell's `>` (a no-op); env is cut.
story_output_truncate() {
	echo 'echo kept' >"$L/exec"
	ok "truncate -s 0 exec succeeds (a no-op, as the shell's >)" truncate -s 0 "$L/exec"
	eq "... it ran nothing: exec still gives the last run" "$(cat "$L/exec")" kept
	eq "fstat, futimens and ftruncate of an open exec" "$(errno_of "fd = os.open('$L/exec', os.O_WRONLY)
assert os.fstat(fd).st_mode == 0o100600, oct(os.fstat(fd).st_mode)
os.utime(fd); os.ftruncate(fd, 0); os.close(fd)")" OK
	printf 'A=1\nB=2\n' >"$L/env"
	ok "truncate -s 4 env cuts its text" truncate -s 4 "$L/env"
	eq "... env is its first line" "$(cat "$L/env")" "A=1"
	eq "truncate -s 99 env: EINVAL (env is cut, never extended)" \
		"$(errno_of "fd = os.open('$L/env', os.O_WRONLY); os.ftruncate(fd, 99)")" EINVAL
	ok "... error says why" grep -q "env can only be cut" "$L/error"
	eq "... env keeps its text" "$(cat "$L/env")" "A=1"
	eq "truncate(2) of env by path to 0 empties it" "$(errno_of "os.truncate('$L/env', 0)"; cat "$L/env")" OK
	eq "truncate -s 0 info: EACCES (read-only)" "$(errno_of "os.truncate('$L/info', 0)")" EACCES
	# It returned 0 and did nothing.
	eq "truncate -s 5 state: EINVAL (a control file takes no length)" \
		"$(errno_of "os.truncate('$L/state', 5)")" EINVAL
	ok "... error says why" grep -q "takes what is written to it, not a length" "$L/error"
	# rsync --inplace writes, then sets the length it wrote: EINVAL before.
	printf 'echo from-rsync\n' >"$WORK/run.sh"
	ok "rsync --inplace FILE exec (its ftruncate to what it wrote: a no-op)" \
		rsync --inplace "$WORK/run.sh" "$L/exec"
	eq "... and ran it" "$(cat "$L/exec")" from-rsync
	eq "... a cut elsewhere in an open writer's text: EINVAL" "$(errno_of "fd = os.open('$L/exec', os.O_WRONLY)
os.write(fd, b'echo x'); os.ftruncate(fd, 3)")" EINVAL
}

# fill_to KB: a file fills the state dir up to KB free (fails when it has less).
fill_to() {
	local free
	rm -f "$STATE/filler"
	free=$(df --output=avail -k "$STATE" | tail -1)
	[ "$free" -ge "$1" ] || { log "fill_to $1: only $free KB free"; return 1; }
	head -c $(((free - $1) * 1024)) /dev/zero >"$STATE/filler" 2>/dev/null
	return 0
}

story_output_full() {
	local out rc r
	# The state dir fills up.
	fill_to 0
	out=$(bash -c "echo 'echo marker' > '$L/exec'" 2>&1)
	rc=$?
	ok "with the state dir full, echo 'echo marker' > exec exits non-zero (rc $rc): $out" test "$rc" != 0
	ok "... bash says no space" sh -c "echo '$out' | grep -q 'No space left'"
	# The lease's error file is on the full disk too: the root's (memory) has it.
	ok "... error says the state dir cannot keep a run" grep -q "lease ${L##*/}: the state dir cannot keep a run's output" "$MNT/error"
	fill_to 3072
	r=$(errno_of_write "$L/exec" 'echo begun; head -c 8000000 /dev/zero')
	eq "a run whose output outgrows the state dir fails at close" "$r" ENOSPC
	ok "... error says which run could not be kept" grep -q "could not keep the output of run" "$MNT/error"
	ok "... cat exec after it exits non-zero" sh -c "! cat '$L/exec' >/dev/null 2>&1"
	rm -f "$STATE/filler"
	eq "with room again, runs are kept" "$(bash -c "echo 'echo marker' > '$L/exec'; cat '$L/exec'")" marker
	fill_to 0
	eq "mkdir of a lease with the state dir full fails with ENOSPC" "$(errno_of "os.mkdir('$L-full')")" ENOSPC
	ok "... no such lease listed" sh -c "! ls '$MNT' | grep -qx '${L##*/}-full'"
	rm -f "$STATE/filler"
}

# A command nobody read printing without end (runTimeout is 0 by default):
# it wrote until the state dir's disk was full, and then ran on, output
# dropped, for ever. Now the run is stopped when its output would take the
# disk below its reserve (5 % of the 256 MB tmpfs, 13 MiB).
# story_output_runaway [CMD]: CMD prints without end (default `yes`).
story_output_runaway() {
	local free cmd=${1:-yes sbxfs-output-without-end}
	ok "the state dir is filled up to 40 MB free" fill_to 40960
	eq "${cmd%% *} > exec: stopped, ENOSPC at the close" "$(timeout 120 python3 -c '
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
os.write(fd, sys.argv[2].encode() + b"\n")
try:
    os.close(fd); print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])' "$L/exec" "$cmd")" ENOSPC
	free=$(df --output=avail -k "$STATE" | tail -1)
	ok "... the state dir's disk keeps its reserve ($free KB free)" test "$free" -gt 8192
	ok "... error says why" grep -q "could not keep the output of run .*a run's output leaves 13 MiB" "$L/error"
	eq "... result: ENOSPC, interrupted, its output kept until then" \
		"$(json_get "$L/result" '["runError"]["errno"], d["interrupted"], 20000000 < d["stdoutBytes"] < 40000000')" \
		"('ENOSPC', True, True)"
	rm -f "$STATE/filler"
	eq "... the next run runs" "$(lease_run 'echo after')" after
}

# A remote file's size is the sandbox's to decide (`truncate -s 1T` costs it
# nothing), and a read downloads it into the content cache in the state dir:
# `cat` (or an agent's `grep -r`) of it filled the host's disk. The download
# stops at the same reserve; the reads past it fail, the reason in error.
story_output_download_reserve() {
	local free
	lease_run 'truncate -s 64M /tmp/sbxfs-sparse' >/dev/null
	ok "the state dir is filled up to 40 MB free" fill_to 40960
	ok "cat of a 64 MiB file with 40 MB free fails" sh -c "! cat '$L/fs/tmp/sbxfs-sparse' >/dev/null 2>&1"
	free=$(df --output=avail -k "$STATE" | tail -1)
	ok "... the state dir's disk keeps its reserve ($free KB free)" test "$free" -gt 8192
	ok "... error says why" grep -q "download of /tmp/sbxfs-sparse stopped after .*a download leaves 13 MiB" "$L/error"
	rm -f "$STATE/filler"
	eq "... with room again, it reads whole" "$(wc -c <"$L/fs/tmp/sbxfs-sparse")" 67108864
	lease_run 'rm /tmp/sbxfs-sparse' >/dev/null
}

# A cell's rich outputs are held in memory until it ends: a display loop
# grew the daemon without bound (15 x 20 MiB of HTML: 378 MB peak). Past
# 256 MiB (or 10,000 outputs) the cell fails with EFBIG; the next one runs.
story_output_rich_bound() {
	local before after
	before=$(rss_kb)
	eq "a cell displaying 25 x 20 MiB of HTML: EFBIG" "$(errno_of_write "$L/code.py" 'class H:
    def _repr_html_(self): return "x" * (20 << 20)
for i in range(25): display(H())
')" EFBIG
	after=$(rss_kb)
	log "daemon peak RSS: $before kB before, $after kB after"
	ok "... error says why" grep -q "rich outputs are over 10000 files or 256 MiB" "$L/error"
	if [ "${SBXFS_ASAN:-0}" != 1 ]; then
		ok "... the daemon's peak RSS stays under 420 MB ($after kB)" test "$after" -lt 430080
	fi
	eq "... the next cell runs" "$(printf 'print(2)\n' >"$L/code.py"; cat "$L/code.py")" 2
}

# A command text past execve's one-argument limit (128 KiB): an agent writing
# a file through a heredoc. `bash -c TEXT` failed with "Argument list too
# long" (local, daytona: exit 126) or an empty reply (the e2b fake), though
# the contract takes texts up to 16 MiB. It runs from a staged file now,
# removed after the run.
story_output_long_command() {
	python3 - "$WORK/long-cmd.txt" <<'PY'
import sys
body = "".join("line %06d of a file written through a heredoc\n" % i for i in range(40000))
with open(sys.argv[1], "w") as f:
    f.write("cat > /tmp/heredoc.txt <<'SBXFS_TEST_EOF'\n" + body + "SBXFS_TEST_EOF\n")
    f.write("wc -l < /tmp/heredoc.txt; tail -n 1 /tmp/heredoc.txt; echo \"$# args\"\n")
    # the staged copy: the sandbox's other users cannot read it (bash reads it on fd 255);
    # it is gone once the shell has it open (a daemon killed now leaves nothing)
    f.write("stat -L -c %a /proc/$$/fd/255; test -e \"$0\" && echo present || echo gone\n")
PY
	eq "a 2 MB command: the write and the close succeed" "$(errno_of "
src = open('$WORK/long-cmd.txt', 'rb').read()
fd = os.open('$L/exec', os.O_WRONLY | os.O_TRUNC)
while src:
    src = src[os.write(fd, src):]
os.close(fd)")" OK
	eq "... and it ran whole, from a file of mode 600" "$(cat "$L/stdout")" \
		"$(printf '40000\nline 039999 of a file written through a heredoc\n0 args\n600\ngone')"
	eq "... exit 0" "$(json_get "$L/result" '["exitCode"]')" 0
	# 40 KB of single quotes: short as a text, 160 KB once quoted for `bash -c`.
	eq "a 40 KB command of single quotes (four times that quoted) runs" \
		"$(lease_run "x=\"$(printf "'%.0s" $(seq 40000))\"; echo \${#x}")" 40000
	eq "... its staged copy is gone after the run" \
		"$(lease_run 'ls -a /tmp | grep -c "^[.]sbxfs-run-"')" 0
}
