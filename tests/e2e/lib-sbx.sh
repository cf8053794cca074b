# Stories of the sbx client, shared by the providers' tests (sourced after
# lib.sh). `sbx shell` is driven through tmux on a private server whose socket
# is in the test's directory; the cleanup kills that server, never by name.
: "${SBX:?SBX must point at the sbx binary}"
TMUX_SOCK=$WORK/tmux.sock
add_cleanup "tmux -S '$TMUX_SOCK' kill-server 2>/dev/null"

tm() { tmux -S "$TMUX_SOCK" "$@"; }
# pane_ready: the pane shows something (the shell's prompt, whatever it is).
pane_ready() { tm capture-pane -p -t sbx | grep -q '[^[:space:]]'; }
# pane_has TEXT: the tmux pane shows TEXT (scrollback included).
pane_has() { tm capture-pane -p -S -200 -t sbx | grep -qF -- "$1"; }

# story_sbx_run_basics LEASE-DIR: streams to the right fd, exit codes, quoting.
story_sbx_run_basics() {
	local L=$1 rc
	"$SBX" run "$L" -- sh -c 'echo out; echo err >&2; exit 7' >"$WORK/o" 2>"$WORK/e"
	rc=$?
	eq "sbx run: the command's exit code" "$rc" 7
	eq "sbx run: stdout to stdout" "$(cat "$WORK/o")" "out"
	eq "sbx run: stderr to stderr" "$(cat "$WORK/e")" "err"
	"$SBX" run "$L" -- printf '%s|' "a b" "it's" '$HOME' '*' >"$WORK/o"
	eq "sbx run: argv words arrive as they were given" "$(cat "$WORK/o")" "a b|it's|\$HOME|*|"
	"$SBX" run "$L" -- nosuchcmd-$$ 2>/dev/null
	eq "sbx run: a missing command is 127" "$?" 127
	# A command killed by a signal: 128+N, and its stderr is its own (on
	# daytona the session shell's "Killed" report printed the run's wrapper).
	"$SBX" run "$L" -- sh -c 'echo err >&2; kill -9 $$' >"$WORK/o" 2>"$WORK/e"
	eq "sbx run: a command killed by SIGKILL is 137" "$?" 137
	eq "... and its stderr is the command's alone" "$(cat "$WORK/o" "$WORK/e")" "err"
	echo "sh -c 'kill -TERM \$\$'" >"$L/exec"
	eq "exec: a command killed by SIGTERM leaves no shell report in stderr" \
		"$(cat "$L/stderr")" ""
	# stdin: not passed on without -i (as docker exec); with -i read to its
	# end and given to the command, as ssh does. Before, `sbx run -- python3 -
	# <<EOF` (an agent's usual heredoc) ran an empty program and said 0.
	eq "sbx run: without -i the command's stdin is empty" "$(echo x | "$SBX" run "$L" -- cat)" ""
	eq "sbx run -i: a heredoc reaches the command" \
		"$("$SBX" run -i "$L" -- python3 - <<'PY'
print(6 * 7)
PY
)" 42
	head -c 300000 /dev/urandom >"$WORK/stdin.bin"
	eq "sbx run -i: 300 kB of binary stdin arrive whole" \
		"$("$SBX" run -i "$L" -- sha256sum <"$WORK/stdin.bin" | cut -c1-64)" \
		"$(sha256sum <"$WORK/stdin.bin" | cut -c1-64)"
	"$SBX" run -i "$L" -- sh -c 'exit 5' </dev/null
	eq "sbx run -i: the exit code" "$?" 5
	script -qec "'$SBX' run -i '$L' -- cat" /dev/null >"$WORK/o" 2>&1 </dev/null
	eq "sbx run -i with a terminal for stdin: usage error, not a silent wait for ^D" "$?" 2
	ok "... saying why" grep -q 'stdin is a terminal' "$WORK/o"
	eq "sbx run -i: no staged stdin left in the sandbox's /tmp" \
		"$(ls -a "$L/fs/tmp" | grep -c '^\.sbx-stdin')" 0

	# Our stdout fails: the command is stopped, as a local one by SIGPIPE or
	# its write error. Before, `sbx run -- yes | head` went on writing into
	# the state dir until the run's 4 GiB limit killed it (7 s on local); an
	# endless slow writer went on for good. (Slow here: a `yes` fills the
	# fakes' memory-backed /tmp and their sandbox is OOM-killed.)
	local t0 st n
	t0=$(date +%s)
	timeout 30 "$SBX" run "$L" -- sh -c 'while :; do echo y; sleep 0.05; done' | head -c 4 >"$WORK/o"
	st=("${PIPESTATUS[@]}")
	eq "sbx run -- ENDLESS | head: sbx ends as a local writer does (SIGPIPE, 141)" "${st[0]}" 141
	ok "... at once" test $(($(date +%s) - t0)) -lt 10
	eq "... and head had its bytes" "$(cat "$WORK/o")" "$(printf 'y\ny\n')"
	n=$(cat "$L/runs/mine")
	ok "... and the run was stopped in the sandbox (its result says interrupted)" \
		grep -q '"interrupted": *true' "$L/runs/$n/result"
	"$SBX" run "$L" -- echo hi >/dev/full 2>"$WORK/e"
	eq "sbx run with stdout on a full disk exits 125" "$?" 125
	ok "... saying why" grep -q "writing the command's output: No space left on device" "$WORK/e"
}

# story_sbx_shell LEASE-DIR: an interactive shell in tmux types, reads, resizes, exits.
story_sbx_shell() {
	local L=$1
	tm new-session -d -s sbx -x 100 -y 30 \
		"cd '$L' && '$SBX' shell; echo sbx-exit=\$? >'$WORK/shell.rc'; sleep 60"
	ok "sbx shell: a prompt comes" wait_for 20 pane_ready
	tm send-keys -t sbx 'echo hi-$((6*7))' Enter
	ok "sbx shell: a typed command answers" wait_for 15 pane_has "hi-42"
	pane_has "hi-42" || { log "the pane:"; tm capture-pane -p -S -50 -t sbx; }
	tm send-keys -t sbx 'stty size' Enter
	ok "sbx shell: the terminal has the window's size" wait_for 15 pane_has "30 100"
	tm resize-window -t sbx -x 120 -y 40
	sleep 1
	tm send-keys -t sbx 'stty size' Enter
	ok "sbx shell: a window resize reaches the sandbox" wait_for 15 pane_has "40 120"
	tm send-keys -t sbx 'test -t 0 && echo is-a-tty' Enter
	ok "sbx shell: stdin is a terminal" wait_for 15 pane_has "is-a-tty"
	tm send-keys -t sbx 'sleep 100' Enter
	sleep 1
	tm send-keys -t sbx C-c
	tm send-keys -t sbx 'echo after-$((1+1))' Enter
	ok "sbx shell: ^C interrupts the foreground command" wait_for 15 pane_has "after-2"
	tm send-keys -t sbx 'exit 5' Enter
	ok "sbx shell: ends when the shell exits" wait_for 15 test -s "$WORK/shell.rc"
	eq "sbx shell: exits with the shell's status" "$(cat "$WORK/shell.rc" 2>/dev/null)" "sbx-exit=5"
	tm kill-session -t sbx 2>/dev/null
	ok "sbx shell: the session is gone once sbx is" wait_for 10 test "$(ls "$L/tty")" = clone
}

# story_sbx_shell_piped LEASE-DIR: input from a pipe or /dev/null ends the shell.
# The ^D sent at the input's end reached the terminal before the shell's
# line editor had set it up and was lost: both waited for good.
story_sbx_shell_piped() {
	local L=$1
	printf 'echo $((6*7))x\n' | timeout 30 "$SBX" shell "$L" >"$WORK/piped" 2>&1
	eq "sbx shell from a pipe: ends with the shell when the input does" "$?" 0
	ok "... having run the piped command" grep -q 42x "$WORK/piped"
	timeout 30 "$SBX" shell "$L" </dev/null >/dev/null 2>&1
	eq "sbx shell </dev/null: ends at once, status 0" "$?" 0
	# An env's PATH without sh in it: the shell is still found (local: it
	# was "sh: not found" and the session ended at once, 127).
	printf 'PATH=/nonexistent\n' >"$L/env"
	printf 'echo $((6*7))y; exit 3\n' | timeout 30 "$SBX" shell "$L" >"$WORK/piped" 2>&1
	eq "sbx shell with an env PATH that has no sh: the shell's status" "$?" 3
	ok "... having run the piped command" grep -q 42y "$WORK/piped"
	: >"$L/env"
}

# story_tty_files LEASE-DIR: the files themselves, and their bad input.
story_tty_files() {
	local L=$1 n
	exec 7<"$L/tty/clone"
	read -r n <&7
	ok "tty/clone answers a session number" test -n "$n"
	ok "tty/N exists while its clone handle is open" test -d "$L/tty/$n"
	eq "tty/N lists data ctl status" "$(ls "$L/tty/$n" | tr '\n' ' ')" "ctl data status "
	eq "a new session's status" "$(cat "$L/tty/$n/status")" "new"
	eq "ctl: unknown word is EINVAL" "$(errno_of_write "$L/tty/$n/ctl" "frobnicate 1")" EINVAL
	ok "error names the unknown tty ctl word" grep -q "unknown command 'frobnicate'" "$L/error"
	eq "... without a newline too, where the shell's \$? tells" \
		"$(bash -c "printf frob > '$L/tty/$n/ctl'" 2>/dev/null; echo $?)" 1
	eq "ctl: size with one number is EINVAL" "$(errno_of_write "$L/tty/$n/ctl" "size 80")" EINVAL
	ok "error says what size wants" grep -q "size wants COLS ROWS" "$L/error"
	eq "ctl: size 0 0 is EINVAL" "$(errno_of_write "$L/tty/$n/ctl" "size 0 0")" EINVAL
	eq "ctl: a relative cwd is EINVAL" "$(errno_of_write "$L/tty/$n/ctl" "cwd tmp")" EINVAL
	# e2b carries cwd as JSON text: such a cwd failed only at the data file's open.
	if [ "$(json_get "$L/info" '["provider"]')" != local ]; then
		eq "ctl: a cwd that is not UTF-8 is EILSEQ at the write" \
			"$(bash -c "printf 'cwd /tmp/\377\n' > '$L/tty/$n/ctl'" 2>&1 | grep -o 'Invalid or incomplete multibyte')" \
			"Invalid or incomplete multibyte"
	fi
	eq "ctl is write-only" "$(errno_of "open('$L/tty/$n/ctl').read()")" EACCES
	eq "status is read-only" "$(errno_of "open('$L/tty/$n/status','w')")" EACCES
	eq "clone is read-only" "$(errno_of "open('$L/tty/clone','w')")" EACCES
	eq "no session 999999" "$(errno_of "open('$L/tty/999999/data')")" ENOENT
	ok "ctl: a good size is taken" sh -c "echo 'size 90 20' >'$L/tty/$n/ctl'"
	exec 7<&-
	ok "tty/N is gone with its last handle" wait_for 5 test ! -e "$L/tty/$n"
	# A session driven by plain files: ctl, then data.
	python3 - "$L" >"$WORK/tty.out" <<'PY'
import os, sys
L = sys.argv[1]
c = os.open(L + "/tty/clone", os.O_RDONLY)
n = os.read(c, 64).decode().strip()
ctl = os.open(f"{L}/tty/{n}/ctl", os.O_WRONLY)
os.write(ctl, b"size 77 11\ncwd /tmp\n")
d = os.open(f"{L}/tty/{n}/data", os.O_RDWR)
os.close(c)
os.write(d, b"stty size; pwd; exit 4\n")
out = b""
while True:
    b = os.read(d, 4096)
    if not b:
        break
    out += b
sys.stdout.write(out.decode(errors="replace"))
print("STATUS=" + open(f"{L}/tty/{n}/status").read().strip())
try:
    os.write(ctl, b"cwd /\n")
    print("LATE-CWD=OK")
except OSError as e:
    print("LATE-CWD=" + os.strerror(e.errno))
PY
	ok "tty files: size set before the start is the terminal's" grep -q "11 77" "$WORK/tty.out"
	ok "tty files: cwd set before the start is the shell's" grep -qx "/tmp.\?" "$WORK/tty.out"
	ok "tty files: status after the end" grep -q "STATUS=exited 4" "$WORK/tty.out"
	ok "tty files: cwd after the start is EBUSY" grep -q "LATE-CWD=Device or resource busy" "$WORK/tty.out"
	# A reader far behind: past 4 MiB held, the oldest output was dropped;
	# a terminal holds the writer instead. 1,200,000 lines (8.8 MB), read
	# only after a pause: every line arrives, the first too.
	python3 - "$L" >"$WORK/tty-flow.out" <<'PY'
import os, re, sys, time
L = sys.argv[1]
c = os.open(L + "/tty/clone", os.O_RDONLY)
n = os.read(c, 64).decode().strip()
d = os.open(f"{L}/tty/{n}/data", os.O_RDWR)
os.close(c)
os.write(d, b"stty -echo; seq 1 1200000; exit 0\n")
time.sleep(4)
out = bytearray()
while True:
    b = os.read(d, 1 << 16)
    if not b:
        break
    out += b
text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", bytes(out))  # bash's bracketed-paste codes
nums = [x.strip(b"\r") for x in text.split(b"\n") if x.strip(b"\r").isdigit()]
print("lines=%d first=%s last=%s" % (len(nums), nums[0].decode() if nums else "-",
                                     nums[-1].decode() if nums else "-"))
PY
	eq "tty: output of a reader far behind is held, not dropped" \
		"$(cat "$WORK/tty-flow.out")" "lines=1200000 first=1 last=1200000"
}
