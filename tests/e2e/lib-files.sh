# User stories shared by the per-provider e2e tests (sourced after lib.sh).
# Each story is a run of checks; the caller sets L (the lease directory),
# F (a directory in its fs/) and FHOME (F's path inside the sandbox), and
# keeps only what is specific to its provider (counters, quirks).
#   make_src_tree DIR...             $SRC: copies of DIRs (below top_srcdir),
#                                    300 kB of random bytes and a symlink
#   story_copy_roundtrip             cp -r / tar / rsync of $SRC into $F, diff -r
#   story_pseudo_dirs_empty          fs/proc, fs/sys, fs/dev are shown empty
#   story_rsync_metadata             rsync -a's owner, mode, mtime in the sandbox
#   story_time_late_in_second        a time .9997 s into its second, from the
#                                    sandbox and after rsync -a (past the TTL)
#   story_git                        git init/add/commit/commit -a/fsck in $F/repo
#   story_vim_save                   vim -Es saves over a file
#   story_posix_corners              mv over a file, O_EXCL, append, unlink of an
#                                    open file, truncate, links, chmod, touch -d...
#   story_exec_basics NAME PROVIDER  stdout, stderr, exit codes, env, streaming
#   story_exec_background            a background job lives on to the next run
#   story_exec_files                 files cross between fs/ and runs at once
#   story_names_not_utf8 PROVIDER    names and text that are not UTF-8: local
#                                    keeps them as bytes; e2b and daytona carry
#                                    UTF-8 only, so EILSEQ (a lookup ENOENT),
#                                    and the daemon lives on

make_src_tree() {
	SRC=$WORK/src
	mkdir -p "$SRC"
	local d
	for d in "$@"; do cp -r "$top_srcdir/$d" "$SRC/"; done
	head -c 300000 /dev/urandom >"$SRC/blob.bin"
	ln -s blob.bin "$SRC/link-to-blob"
}

story_copy_roundtrip() {
	ok "cp -r into fs/" cp -r "$SRC" "$F/cp"
	ok "diff -r after cp" diff -r "$SRC" "$F/cp"
	ok "tar x into fs/" sh -c "tar -C '$WORK' -cf - src | tar -C '$F' -xf -"
	ok "diff -r after tar" diff -r "$SRC" "$F/src"
	eq "readlink of a copied symlink" "$(readlink "$F/src/link-to-blob")" "blob.bin"
	# On a remote lease, requests per entry: rsync's fchmod of each
	# temporary it has just made waits for the upload at its close (write
	# once, to its name); it cost 14 requests a file on daytona (an empty
	# upload, then a replace of it) before.
	local remote=
	type fake_reset_counters >/dev/null 2>&1 && remote=1 && fake_reset_counters
	ok "rsync -a into fs/" rsync -a "$SRC/" "$F/rsync/"
	if [ -n "$remote" ]; then
		local n reqs
		n=$(find "$SRC" | wc -l)
		reqs=$(fake_get /_fake/counters | python3 -c 'import json, sys; print(sum(json.load(sys.stdin).values()))')
		ok "... in at most 6 requests an entry ($reqs for $n)" test "$reqs" -le $((6 * n))
		# The mode, owner and times of each temporary follow it to its name
		# (sbx_rme_rename_take): each rename applied them, a command a file.
		# Daytona's chown to root of each file (rsync as root keeps owners)
		# is one sudo command per batch, not a /files/permissions call each.
		reqs=$(fake_get /_fake/counters | python3 -c 'import json, sys; print(sum(v for k, v in json.load(sys.stdin).items() if "process" in k.lower() or "permissions" in k))')
		ok "... and at most a command or permissions call per 5 entries ($reqs for $n)" \
			test "$reqs" -le $((n / 5 + 2))
	fi
	ok "diff -r after rsync" diff -r "$SRC" "$F/rsync"
	eq "rsync -a again is a no-op" "$(rsync -ai "$SRC/" "$F/rsync/")" ""
	ok "rsync back out" rsync -a "$F/rsync/" "$WORK/back/"
	ok "diff -r of the round trip" diff -r "$SRC" "$WORK/back"
	eq "symlink survives the round trip" "$(readlink "$WORK/back/link-to-blob")" blob.bin
	ok "grep -r finds a symbol" sh -c "grep -rq sbx_lease_use '$F/src'"
	eq "find counts the same files" "$(cd "$F/src" && find . -type f | sort | md5sum)" \
		"$(cd "$SRC" && find . -type f | sort | md5sum)"
	eq "the sandbox sees the copied bytes" \
		"$(lease_run "md5sum $FHOME/src/blob.bin $FHOME/rsync/blob.bin" | cut -d' ' -f1 | sort -u)" \
		"$(md5sum <"$SRC/blob.bin" | cut -d' ' -f1)"
}

story_pseudo_dirs_empty() {
	local d
	for d in proc sys dev; do
		eq "fs/$d is shown empty" "$(ls -A "$L/fs/$d")" ""
	done
}

# rsync -a run by root asks for owner 0 and sets the times after the
# contents (a directory's last of all).
story_rsync_metadata() {
	eq "rsync -a: owner, mode and mtime of a file in the sandbox" \
		"$(lease_run "stat -c '%u %a %Y' $FHOME/rsync/blob.bin")" "$(stat -c '%u %a %Y' "$SRC/blob.bin")"
	eq "rsync -a: ... and of a directory (its times are set last)" \
		"$(lease_run "stat -c '%u %a %Y' $FHOME/rsync/src/base")" "$(stat -c '%u %a %Y' "$SRC/src/base")"
}

# A time late in its second reaches the mount as set, also once the cached
# attributes expired. The fakes took the second from Node's Date, which
# rounds to the millisecond: from .9995 s on the mount showed a second
# more, and a second `rsync -a` re-sent such a file (about one file in
# 2,000: the "rsync -a again" flake, seen when the machine was slow enough
# for the TTL to expire between the two runs).
story_time_late_in_second() {
	lease_run "touch -d @1200000000.999700000 $FHOME/late.txt" >/dev/null
	eq "a time late in its second, from the sandbox" "$(stat -c %.9Y "$F/late.txt")" \
		"1200000000.999700000"
	mkdir -p "$WORK/late"
	echo late >"$WORK/late/a"
	touch -d @1200000000.999700000 "$WORK/late/a"
	ok "rsync -a of a file whose time is late in its second" rsync -a "$WORK/late/" "$F/late/"
	sleep 2.5 # past the attribute TTL (SBX_CACHE_TTL_MS): the times come from the sandbox
	eq "... rsync -a again is a no-op past the attribute TTL" \
		"$(rsync -ai "$WORK/late/" "$F/late/")" ""
}

# git through the mount, then inside the sandbox. Files may belong to the
# sandbox's user, not the host's: git wants safe.directory for that, as
# for any repository another user owns.
story_git() {
	local G=$F/repo
	git() { command git -c safe.directory='*' "$@"; }
	mkdir "$G"
	ok "git init" git -C "$G" init -q
	echo hello >"$G/a.txt"
	ok "git add" git -C "$G" add a.txt
	ok "git commit" git -C "$G" -c user.email=t@e -c user.name=t commit -qm first
	eq "git log" "$(git -C "$G" log --format=%s)" "first"
	ok "git status is clean" test -z "$(git -C "$G" status --porcelain)"
	echo more >>"$G/a.txt"
	ok "git commit -a (rewrites index, refs, logs)" git -C "$G" -c user.email=t@e -c user.name=t commit -qam second
	eq "git log after two commits" "$(git -C "$G" log --format=%s | tr '\n' ' ')" "second first "
	ok "git fsck" git -C "$G" fsck --no-progress
	eq "git log inside the sandbox" \
		"$(lease_run "cd $FHOME/repo && git -c safe.directory='*' log --format=%s | tr '\n' ' '")" "second first "
	unset -f git
	# git's lock files: taken (O_EXCL), closed, rolled back, taken again. A
	# close's upload that ended just as the unlink ran left a ghost name in
	# the cache, and the next O_EXCL failed with EEXIST (a CI run under load).
	# 60 rounds: CI met the race with the few lock files of a git commit.
	ok "a lock file taken and rolled back 60 times" python3 -c '
import os, sys
p = sys.argv[1] + "/repo/.git/other.lock"
for i in range(60):
    fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.write(fd, b"x" * 100)
    os.close(fd)
    os.unlink(p)
' "$F"
}

story_vim_save() {
	printf 'one\ntwo\n' >"$F/edit.txt"
	# What vim said goes to the log when it fails (it failed now and then on
	# remote leases under load: the write-then-open race of doc/DESIGN.md).
	ok "vim -Es edits a file" sh -c 'vim -Es -u NONE -c "%s/two/TWO/" -c wq "$1" >"$2" 2>&1 ||
		{ echo "vim exited $?: $(cat "$2")"; ls -l "$1"; false; }' sh "$F/edit.txt" "$WORK/vim.out"
	eq "vim saved" "$(cat "$F/edit.txt")" "$(printf 'one\nTWO')"
	eq "the sandbox sees vim's save" "$(lease_run "cat $FHOME/edit.txt")" "$(printf 'one\nTWO')"
	eq "no backup or temporary left behind" "$(ls -A "$F" | grep -c -e '~$' -e 'sbxfs-' -e '\.swp$')" 0
}

# POSIX corners of fs/: rename over files and directories, O_EXCL, append, links...
story_posix_corners() {
	# Names are bytes: a newline and a non-ASCII letter, made in the
	# sandbox, read through fs/ (the download's reply names the file in a
	# header: the e2b fake answered 500 for a newline).
	lease_run "python3 -c 'open(\"$FHOME/nl\\nn\u00e9\", \"w\").write(\"odd\")'" >/dev/null
	eq "a file named with a newline and an é reads through fs/" "$(cat "$F/$(printf 'nl\nn\303\251')")" odd
	echo new >"$F/new.txt"
	echo old >"$F/target.txt"
	ok "mv over an existing file" mv "$F/new.txt" "$F/target.txt"
	eq "rename replaced the target" "$(cat "$F/target.txt")" "new"
	ok "the source name is gone" test ! -e "$F/new.txt"
	mkdir "$F/d1" "$F/d2"
	echo x >"$F/d1/x"
	ok "mv of a directory over an empty one" mv -T "$F/d1" "$F/d2"
	eq "the moved directory's file" "$(cat "$F/d2/x")" x
	mkdir "$F/d3"
	echo y >"$F/d3/y"
	eq "rename onto a non-empty directory" "$(errno_of "os.rename('$F/d3', '$F/d2')")" "ENOTEMPTY"
	eq "rename of a file onto a directory" "$(errno_of "os.rename('$F/target.txt', '$F/d3')")" "EISDIR"
	eq "O_EXCL on an existing file" "$(errno_of "os.open('$F/target.txt', os.O_CREAT|os.O_EXCL|os.O_WRONLY)")" "EEXIST"
	eq "open of a missing file" "$(errno_of "os.open('$F/nope.txt', os.O_RDONLY)")" "ENOENT"
	ok "append" sh -c "echo more >> '$F/target.txt'"
	eq "append result" "$(cat "$F/target.txt")" "$(printf 'new\nmore')"
	ok "unlink of an open file keeps it readable" python3 - "$F/open.txt" <<'PY'
import os, sys
p = sys.argv[1]
with open(p, "w") as f: f.write("still here")
fd = os.open(p, os.O_RDWR)
os.unlink(p)
assert not os.path.exists(p)
os.lseek(fd, 0, 0)
assert os.read(fd, 100) == b"still here"
os.write(fd, b"!")
os.close(fd)
assert not os.path.exists(p)
PY
	ok "seek and partial write" python3 - "$F/seek.bin" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
os.pwrite(fd, b"abc", 10)
assert os.fstat(fd).st_size == 13
assert os.pread(fd, 3, 10) == b"abc"
assert os.pread(fd, 2, 0) == b"\0\0"
os.ftruncate(fd, 4)
assert os.fstat(fd).st_size == 4
os.close(fd)
PY
	eq "the sandbox has the cut file" "$(lease_run "stat -c %s $FHOME/seek.bin")" 4
	ok "mmap read and write" python3 - "$F/mm.bin" <<'PY'
import mmap, os, sys
with open(sys.argv[1], "wb") as f: f.write(b"x" * 8192)
with open(sys.argv[1], "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    assert m[:4] == b"xxxx"
    m[0:5] = b"hello"
    m.flush(); m.close()
assert open(sys.argv[1], "rb").read(5) == b"hello"
PY
	eq "the sandbox has the mmap write" "$(lease_run "head -c 5 $FHOME/mm.bin")" hello
	# fallocate(1), as package managers, databases and journald use it: every
	# call was EOPNOTSUPP (no handler: libfuse's ENOSYS turned it off for the
	# whole mount), so `fallocate -l` failed and `-p` could not punch.
	printf '%4096s' '' | tr ' ' A >"$F/fa.bin"
	ok "fallocate -l grows a file" fallocate -l 8192 "$F/fa.bin"
	ok "fallocate -n -l reserves past the end" fallocate -n -o 8192 -l 65536 "$F/fa.bin"
	eq "... and keeps the size" "$(stat -c %s "$F/fa.bin")" 8192
	ok "fallocate -p punches a hole" fallocate -p -o 100 -l 200 "$F/fa.bin"
	ok "fallocate -z zeroes a range" fallocate -z -o 4000 -l 10 "$F/fa.bin"
	eq "the holes read as zeros here" "$(od -An -c -j 98 -N 4 "$F/fa.bin" | tr -s ' ')" " A A \\0 \\0"
	eq "... and in the sandbox" \
		"$(lease_run "od -An -c -j 98 -N 4 $FHOME/fa.bin | tr -s ' '; od -An -c -j 4009 -N 2 $FHOME/fa.bin | tr -s ' '; stat -c %s $FHOME/fa.bin")" \
		"$(printf ' A A \\0 \\0\n \\0 A\n8192')"
	ok "truncate" truncate -s 100 "$F/target.txt"
	eq "truncated size" "$(stat -c %s "$F/target.txt")" 100
	ok "symlink" ln -s target.txt "$F/sym"
	eq "readlink" "$(readlink "$F/sym")" "target.txt"
	eq "the sandbox has the link" "$(lease_run "readlink $FHOME/sym")" "target.txt"
	ok "hard link" ln "$F/target.txt" "$F/hard"
	eq "link count in the sandbox" "$(lease_run "stat -c %h $FHOME/target.txt")" 2
	ok "chmod" chmod 600 "$F/target.txt"
	eq "mode" "$(stat -c %a "$F/target.txt")" 600
	ok "touch -d" touch -d '2001-02-03 04:05:06 UTC' "$F/target.txt"
	eq "mtime" "$(TZ=UTC stat -c %y "$F/target.txt" | cut -c1-19)" "2001-02-03 04:05:06"
	eq "mode and mtime reach the sandbox" "$(lease_run "stat -c '%a %Y' $FHOME/target.txt")" "600 981173106"
	ok "mkdir -p and rmdir" sh -c "mkdir -p '$F/a/b/c' && rmdir '$F/a/b/c'"
	eq "rmdir of a non-empty directory" "$(errno_of "os.rmdir('$F/a')")" "ENOTEMPTY"
	eq "unlink of a directory" "$(errno_of "os.unlink('$F/a')")" "EISDIR"
	ok "df shows the lease's disk" sh -c "df -P '$L/fs' | tail -1 | awk '{exit !(\$2 > 0)}'"
	ok "rm -r of a tree" rm -r "$F/cp"
	ok "tree gone" test ! -e "$F/cp"
	eq "tree gone in the sandbox" "$(lease_run "ls -d $FHOME/cp 2>&1 >/dev/null | wc -l")" 1
}

# story_exec_basics NAME PROVIDER: the lease $L is named NAME.
story_exec_basics() {
	echo 'uname -s' >"$L/exec"
	eq "cat exec gives the run's output" "$(cat "$L/exec")" "Linux"
	eq "stdout file equals exec" "$(cat "$L/stdout")" "Linux"
	eq "exit code 0 in result" "$(json_get "$L/result" '["exitCode"]')" 0
	echo 'echo out; echo err >&2; echo out2; exit 3' >"$L/exec"
	ok "a non-zero exit is not a filesystem error" test $? = 0
	eq "stdout of a failing run (no stderr in it)" "$(cat "$L/stdout")" "$(printf 'out\nout2')"
	eq "stderr separated" "$(cat "$L/stderr")" "err"
	eq "exit code 3 in result" "$(json_get "$L/result" '["exitCode"]')" 3
	eq "result has the streams apart too" "$(json_get "$L/result" '["stdout"], d["stderr"]')" \
		"('out\\nout2\\n', 'err\\n')"
	echo 'no-such-command-here' >"$L/exec"
	eq "an unknown command exits 127" "$(json_get "$L/result" '["exitCode"]')" 127
	ok "... and says so on stderr" grep -q "not found" "$L/stderr"
	printf 'GREETING=hello\nOTHER=x y\n' >"$L/env"
	echo 'echo "$GREETING/$OTHER"' >"$L/exec"
	eq "env lines reach runs" "$(cat "$L/exec")" "hello/x y"
	# An env file saved with CRLF line ends (an editor on Windows, a
	# pasted .env): the CR was part of every value ("1\r").
	printf 'GREETING=hello\r\nOTHER=x\r\n' >"$L/env"
	echo 'printf "%s/%s" "$GREETING" "$OTHER" | od -An -c | tr -s " "' >"$L/exec"
	eq "env lines with CRLF ends: the CR is not in the value" "$(cat "$L/exec")" " h e l l o / x"
	eq "... and the file reads back as written" "$(cat -A "$L/env" | tr '\n' ' ')" \
		'GREETING=hello^M$ OTHER=x^M$ '
	# An env no process can carry: 200,000 variables were taken and every
	# later run failed (local: "malformed run request", EPROTO). E2BIG at
	# the write now, and the env before it stays.
	seq -f 'V%g=1' 200000 >"$WORK/env.big"
	eq "env of 200,000 variables: E2BIG at the write" "$(errno_of_write_from "$L/env" "$WORK/env.big")" E2BIG
	ok "... error says why" grep -q 'more than 16384 variables' "$L/error"
	printf 'A=%s\n' "$(head -c 131070 /dev/zero | tr '\0' x)" >"$WORK/env.big"
	eq "env with a line past 128 KiB: E2BIG" "$(errno_of_write_from "$L/env" "$WORK/env.big")" E2BIG
	# Text past what env can hold is refused at the write that passes the
	# limit (E2BIG, so the writer stops there): 1 MiB of lines, 128 KiB of
	# one line. It took up to 16 MiB (EFBIG) and said E2BIG at close, and
	# each write checked all of the text again: 16 MiB of one line kept a
	# daemon thread busy for half a minute.
	cat >"$WORK/env-writes.py" <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
done, n, limit = 0, 0, int(sys.argv[3])
try:
    while done < 4 << 20:
        chunk = b"x" * 65536 if sys.argv[2] == "line" else b"V%d=" % n + b"x" * 65530 + b"\n"
        n += 1
        done += os.write(fd, chunk)
    print("OK at", done)
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno), "after what fits:", limit - 131072 < done <= limit)
try:
    os.close(fd)
except OSError:
    pass
PY
	eq "env lines past 1 MiB: E2BIG at the write that passes it" \
		"$(python3 "$WORK/env-writes.py" "$L/env" lines $((1 << 20)))" "E2BIG after what fits: True"
	eq "one env line past 128 KiB: E2BIG at the write that passes it" \
		"$(python3 "$WORK/env-writes.py" "$L/env" line $((128 << 10)))" "E2BIG after what fits: True"
	echo 'printf "%s/" "$GREETING" "$OTHER"' >"$L/exec"
	eq "... runs still run, with the env before" "$(cat "$L/exec")" "hello/x/"
	printf 'A=%s\nB=1\n' "$(head -c 131069 /dev/zero | tr '\0' x)" >"$L/env"
	echo 'echo ${#A} $B' >"$L/exec"
	eq "... a line of 128 KiB less one is taken and reaches the run" "$(cat "$L/exec")" "131069 1"
	printf 'GREETING=hello\nOTHER=x y\n' >"$L/env"
	echo 'printf "%s|" "a b" '"'"'it'"'"'"'"'"'"'"'"'s'"'"'' >"$L/exec"
	eq "quoting survives the run's wrapper" "$(cat "$L/exec")" "a b|it's|"
	# An env's PATH is the command's, not the wrapper's: one without sh in
	# it (`PATH=/opt/venv/bin`) made every run "sh: not found", 127 (local,
	# daytona; e2b's login shell sets its own PATH).
	printf 'PATH=/nonexistent\n' >"$L/env"
	echo 'echo "builtin ran"' >"$L/exec"
	eq "env with a PATH that has no sh: the run still runs" \
		"$(cat "$L/exec"; json_get "$L/result" '["exitCode"]')" "builtin ran
0"
	printf 'GREETING=hello\nOTHER=x y\n' >"$L/env"

	# Read-write open streams the output while the run goes on.
	local t0 t1 t2 first rest
	exec 3<>"$L/exec"
	echo 'for i in 1 2 3; do echo line$i; sleep 1; done' >&3
	t0=$(date +%s%N)
	read -r first <&3
	t1=$(date +%s%N)
	rest=$(cat <&3)
	t2=$(date +%s%N)
	exec 3>&-
	eq "first streamed line" "$first" "line1"
	ok "first line arrives before the run ends ($(((t1 - t0) / 1000000)) ms)" test $(((t1 - t0) / 1000000)) -lt 1500
	eq "rest of the stream" "$(echo $rest)" "line2 line3"
	ok "the stream ends with the run" test $(((t2 - t0) / 1000000)) -ge 1900
	eq "a run's stdin is empty (cat ends at once)" \
		"$(timeout 30 sh -c "echo 'cat; echo done' > '$L/exec'; cat '$L/exec'")" done
	# More text after the run began was taken and dropped (write returned
	# its length): now EBUSY, and bash says so.
	eq "a write after the run began on a read-write open: EBUSY" "$(bash -c "exec 3<>'$L/exec'
		echo 'echo once' >&3; read -r x <&3; echo 'echo twice' >&3" 2>&1 | grep -o 'resource busy')" "resource busy"
	ok "... error says to open it again" grep -q "runs already: open the file again" "$L/error"
	eq "... as after a subshell's close began it" "$(bash -c "exec 3>'$L/exec'; (echo 'echo a') >&3
		echo 'echo b' >&3" 2>&1 | grep -o 'resource busy')" "resource busy"

	ok "log journals runs" grep -q '"event":"run"' "$L/log"
	ok "status lists the lease" grep -q "^$1 $2 running" "$MNT/status"
	eq "info names the lease and the provider" "$(json_get "$L/info" '["name"], d["provider"]')" "('$1', '$2')"
	ok "info names the sandbox" test -n "$(json_get "$L/info" '["sandboxId"]')"
}

# A background process started by one run is alive in the next (sleep
# BG_SLEEP, unique to this test as the fakes share the host's pid namespace:
# bg_alive looks for it), and a run returns when its shell exits.
BG_SLEEP="sleep 42$$"
bg_alive() { [ "$(lease_run "pgrep -fx '$BG_SLEEP' >/dev/null && echo alive")" = alive ]; }
story_exec_background() {
	local t0
	eq "background start returns" "$(lease_run "nohup $BG_SLEEP >/dev/null 2>&1 & echo started")" "started"
	ok "the background process is alive in a later run" bg_alive
	ok "ps in a later run lists it" sh -c "printf '%s\n' 'ps -eo args' >'$L/exec' && grep -q '^$BG_SLEEP' '$L/stdout'"
	t0=$(date +%s)
	echo 'sleep 1000 & echo bg-with-pipe' >"$L/exec"
	eq "a run returns when its shell exits" "$(cat "$L/exec")" "bg-with-pipe"
	ok "... without waiting for the background job" test $(($(date +%s) - t0)) -lt 5
}

# Files cross between fs/ and runs, both ways, at once.
# A lease whose runs have a runTimeout of 2 s: a longer command is killed,
# its close fails with ETIMEDOUT, what it printed and a result stay.
story_run_timeout() {
	local S=$MNT/slow t0 r
	echo "new slow runTimeout=2s" >"$MNT/ctl"
	t0=$(date +%s%N)
	r=$(errno_of_write "$S/exec" 'echo begun; sleep 60; echo never')
	eq "a command past runTimeout fails with ETIMEDOUT" "$r" ETIMEDOUT
	ok "... soon after the 2 s ($(((($(date +%s%N) - t0)) / 1000000)) ms)" \
		test $((($(date +%s%N) - t0) / 1000000)) -lt 15000
	ok "error says runTimeout" grep -q "exec.*runTimeout (2 s)" "$S/error"
	eq "what it printed is kept" "$(cat "$S/stdout")" "begun"
	eq "result says timedOut" "$(json_get "$S/result" '["timedOut"]')" "True"
	eq "the log has the run" "$(grep -c '"event":"run"' "$S/log")" 1
	eq "a quick command on the same lease" "$(printf 'echo quick\n' >"$S/exec"; cat "$S/exec")" "quick"
	eq "... is not timed out" "$(json_get "$S/result" '["timedOut"]')" "False"
	ok "rmdir the slow lease" rmdir "$S"
}

# The process waiting for a run is killed (a tool's timeout, Ctrl-C on
# cat): the run is stopped in the sandbox too, and the killed process is
# not kept waiting. A signal the waiter handles changes nothing.
story_run_interrupt() {
	# Durations unique to this test: the fakes' sandboxes share the host's
	# pid namespace, and other tests running at the same time sleep too.
	local t0 ms s1=6$$ s2=7$$
	t0=$(date +%s%N)
	timeout 2 sh -c "echo 'echo begun; sleep $s1; echo never' > '$L/exec'"
	ms=$((($(date +%s%N) - t0) / 1000000))
	ok "a killed writer is let go soon ($ms ms)" test "$ms" -lt 10000
	ok "error says the command was stopped" grep -q "exec.*stopped: the process waiting for it was killed" "$L/error"
	eq "result says interrupted" "$(json_get "$L/result" '["interrupted"]')" True
	eq "what it printed is kept" "$(cat "$L/stdout")" begun
	eq "the command is gone from the sandbox" "$(lease_run "pgrep -fx 'sleep $s1' || echo none")" none
	sh -c "exec 3<>'$L/exec'; echo 'echo s1; sleep $s2' >&3; timeout 2 cat <&3" >/dev/null
	eq "a killed streaming reader stops its run too" "$(lease_run "pgrep -fx 'sleep $s2' || echo none")" none
	# Any reader killed while it followed a run stopped the run: Ctrl-C on
	# `cat stdout`, or `timeout 1 cat runs/N/stdout` from another tool,
	# killed the make that a writer still waited for. Only the run's own
	# waiters stop it; a reader that watches only stops watching.
	(echo 'echo w3; sleep 3; echo end3' >"$L/exec") &
	local w=$!
	sleep 1
	timeout 1 cat "$L/stdout" >/dev/null
	timeout 1 cat "$L/runs/$(cat "$L/runs/mine")/stderr" >/dev/null
	timeout 1 cat "$L/exec" >/dev/null
	wait $w
	eq "killed readers of stdout, runs/N/stderr and exec leave the run alone" "$(cat "$L/stdout")" \
		"$(printf 'w3\nend3')"
	eq "... it was not interrupted" "$(json_get "$L/result" '["interrupted"]')" False
	eq "a signal the writer handles does not stop the run" \
		"$(bash -c "trap : USR1; (sleep 1; kill -USR1 \$\$) & echo 'sleep 2; echo done' > '$L/exec'; echo rc=\$?")" "rc=0"
	eq "... it ran to its end" "$(cat "$L/stdout")" done
}

story_exec_files() {
	echo 'from-mount' >"$F/m.txt"
	eq "a file written through the mount is in the sandbox at close" "$(lease_run "cat $FHOME/m.txt")" "from-mount"
	touch "$F/empty.txt"
	eq "an empty file made by touch is there too" "$(lease_run "ls $FHOME/empty.txt")" "$FHOME/empty.txt"
	chmod 750 "$F/m.txt"
	eq "a chmod through the mount is applied before a run" "$(lease_run "stat -c %a $FHOME/m.txt")" 750
	echo "echo made-by-run > $FHOME/from-run.txt" >"$L/exec"
	eq "a file a run writes is visible in fs/ at once" "$(cat "$F/from-run.txt")" "made-by-run"
	echo "echo changed-by-run > $FHOME/from-run.txt" >"$L/exec"
	eq "... and a change to it too" "$(cat "$F/from-run.txt")" "changed-by-run"
	# ... even a same-size rewrite of a file whose pages and attributes the kernel holds.
	echo aaaa >"$F/same.txt"
	eq "read through fs/" "$(cat "$F/same.txt")" "aaaa"
	echo "echo bbbb > $FHOME/same.txt" >"$L/exec"
	eq "a same-size rewrite by a run shows at once" "$(cat "$F/same.txt")" "bbbb"
	echo "rm $FHOME/from-run.txt" >"$L/exec"
	ok "a file a run deletes is gone from fs/ at once" test ! -e "$F/from-run.txt"
	# A size the kernel learnt through an open file (lseek to the end of a
	# file a run had changed) after a run: it was not noted for the next
	# run's flush, and stayed for the attribute timeout after a run grew
	# the file again (CI once read a run's new bytes cut at the old size).
	echo x >"$F/held.txt"
	eq "a size learnt through an open file is dropped at the next run" "$(python3 - "$F/held.txt" "$L/exec" "$FHOME/held.txt" <<'PY'
import os, sys
f, ex, home = sys.argv[1:]
def run(cmd):
    with open(ex, "w") as e:
        e.write(cmd + "\n")
fd = os.open(f, os.O_RDONLY)
run("true")  # the kernel's attributes of f dropped, f doubted
run("echo made-by-run > " + home)
os.lseek(fd, 0, os.SEEK_END)  # a GETATTR with the handle
run("echo changed-by-run > " + home)
print(os.fstat(fd).st_size)
PY
)" 15
	# A file held open (`tail -f` of a log, `less`) while a run appends to
	# it: on the remote providers every open read the old bytes for as long
	# as one handle stayed open, `cat` after the run included, and the
	# holder never saw the new ones.
	echo one >"$F/held.log"
	eq "a run's append to a file held open: the holder reads it, as tail -f polls" \
		"$(python3 - "$F/held.log" "$L/exec" "$FHOME/held.log" <<'PY'
import os, sys, time
f, ex, home = sys.argv[1:]
def run(cmd):
    with open(ex, "w") as e:
        e.write(cmd + "\n")
fd = os.open(f, os.O_RDONLY)
os.read(fd, 100)
run("echo two >> " + home)
got = b""
for _ in range(40):  # tail -f: fstat, then read what is new
    if os.fstat(fd).st_size > 4:
        got += os.read(fd, 100)
    if got:
        break
    time.sleep(0.25)
print(got.decode().strip())
run("echo three >> " + home)
with open(f) as g:  # a new open while the holder stays
    print(" ".join(g.read().split()))
# A background job appends, no run after it: no change report outside
# e2b's watched tree, none at all on daytona.
run("(sleep 1; echo four >> %s) >/dev/null 2>&1 &" % home)
got = b""
for _ in range(40):
    got += os.read(fd, 100)  # "three", then what the job adds
    if b"four" in got:
        break
    time.sleep(0.25)
print(" ".join(got.decode().split()))
os.close(fd)
PY
)" "two
one two three
three four"
}

# A run replaces names the kernel still holds (issue 12): a file by a
# directory, a directory by a file, a symlink by a file, a file by a
# symlink, and removes one. The kernel keeps the old inodes, whose type
# cannot change: the first stat of each gave EIO, `cat` of a directory
# turned file said "Is a directory", and `echo > f` of a removed file said
# ENOENT. Each is now what the run left, at the first try, and a file
# held open across the run does not spoil its name's next stat.
#   TC_RUN_LINK: what stat says of a link a run made (daytona's stat follows
#   links it did not make: "regular file", doc/DESIGN.md)
story_type_change_by_run() {
	local d=$F/tc
	mkdir "$d" && echo f >"$d/f2d" && mkdir "$d/d2f" && echo in >"$d/d2f/in" &&
		ln -s f2d "$d/l2f" && echo f >"$d/f2l" && echo f >"$d/gone" && echo f >"$d/held" &&
		echo f >"$d/held2"
	stat "$d"/* "$d/d2f/in" >/dev/null && cat "$d/gone" >/dev/null && ls "$d/d2f" >/dev/null
	exec 7<"$d/held"
	lease_run "cd $FHOME/tc && rm -r f2d d2f l2f f2l gone held && mkdir f2d && echo now-a-file >d2f &&
		echo file >l2f && ln -s d2f f2l && mkdir held && rm held2 && mkdir held2" >/dev/null
	eq "a run's type changes: cat of a directory made a file" "$(cat "$d/d2f" 2>&1)" now-a-file
	eq "... cat of a symlink made a file" "$(cat "$d/l2f" 2>&1)" file
	eq "... cat of a file made a symlink" "$(cat "$d/f2l" 2>&1)" now-a-file
	eq "... ls of a file made a directory" "$(ls -A "$d/f2d" 2>&1)" ""
	eq "... below a directory made a file" "$(errno_of "os.stat('$d/d2f/in')")" ENOTDIR
	eq "... stat of each" "$(stat -c %F "$d/f2d" "$d/d2f" "$d/l2f" "$d/f2l" 2>&1 | tr '\n' ,)" \
		"directory,regular file,regular file,${TC_RUN_LINK:-symbolic link},"
	ok "... echo > a file the run removed" sh -c "echo again >'$d/gone'"
	eq "... which then holds it" "$(lease_run "cat $FHOME/tc/gone")" again
	eq "... stat of a name held open across the run" "$(stat -c %F "$d/held" 2>&1)" directory
	exec 7<&-
	eq "... a file made a directory, first seen by its stat" "$(stat -c %F "$d/held2" 2>&1)" directory
}

# A file a run made private, written over through the mount (never read
# here, so its mode is the sandbox's alone): the mode stays, as on a local
# disk; the e2b upload arrived 0644, daytona's in-place write of a
# hard-linked file (linked here: links a run makes are not known until
# listed) set 0644 after it.
story_overwrite_private() {
	lease_run "cd $FHOME && printf old >priv && chmod 600 priv && printf old >privh &&
		chmod 600 privh" >/dev/null
	ln "$F/privh" "$F/privh2"
	echo new >"$F/priv" && echo new >"$F/privh"
	eq "a private file a run made, written over: still private" \
		"$(lease_run "cd $FHOME && stat -c '%a %s' priv privh privh2 && cat priv privh2" | tr '\n' ' ')" \
		"600 4 600 4 600 4 new new "
}

# A dangling symlink a run made: Daytona's file info follows links (a 404
# for it), so `ls` listed the name while stat, readlink and rm of it
# failed with ENOENT (`rm -rf` after fsstress: "Directory not empty").
story_dangling_link_by_run() {
	lease_run "ln -s /nowhere/at/all $FHOME/dangling" >/dev/null
	eq "a dangling link a run made: stat says a link" "$(stat -c %F "$F/dangling" 2>&1)" "symbolic link"
	ok "... readlink reads it" readlink "$F/dangling"
	ok "... rm removes it" rm "$F/dangling"
	eq "... gone in the sandbox" "$(lease_run "ls -A $FHOME | grep -c '^dangling\$'")" 0
}

# A link a run made to an existing file, once `ls -l` has shown it:
# Daytona's file info follows links, so after the next run its stat said
# "regular file" (its target's type). A link read once is known now.
story_run_link_read() {
	lease_run "cd $FHOME && echo t >rl-target && ln -s rl-target rl" >/dev/null
	eq "a link a run made: ls -l shows it" "$(ls -l "$F" | grep -o 'rl -> .*')" "rl -> rl-target"
	lease_run true >/dev/null # a run: every cache of fs/ dropped
	eq "... stat says a link after a run" "$(stat -c %F "$F/rl" 2>&1)" "symbolic link"
	eq "... of its text's size" "$(stat -c %s "$F/rl" 2>&1)" 9
	eq "... readlink reads it" "$(readlink "$F/rl" 2>&1)" rl-target
	rm -f "$F/rl" "$F/rl-target"
}

# Many links made through the mount (fsstress makes hundreds). Daytona's
# file info follows links, so the mount keeps a table of the links it
# made; it held 32, and an older link then showed as its target
# ("regular file") once a run had made the mount check what it knew, and
# a dangling one was ENOENT to rm while rm's removals waited: `rm -rf` of
# fsstress's tree said "Directory not empty".
story_many_links() {
	local d=$F/manylinks i
	mkdir "$d" && echo t >"$d/target" || return
	for i in $(seq 40); do
		ln -s "/nowhere/$i" "$d/dangling$i" && ln -s target "$d/to$i" || break
	done
	lease_run true >/dev/null # a run: what the mount knows is checked again
	eq "80 links made through the mount, after a run: stat says a link of each" \
		"$(cd "$d" && stat -c %F $(seq -f to%g 40) $(seq -f dangling%g 40) 2>&1 | sort | uniq -c | xargs)" \
		"80 symbolic link" # by name: a listing (a glob) would show them as links
	eq "... readlink reads their text" "$(cd "$d" && readlink $(seq -f to%g 40) | sort -u)" target
	ok "rm -rf of their directory (removals waiting meet dangling links)" rm -rf "$d"
	eq "... gone in the sandbox" "$(lease_run "ls -A $FHOME | grep -c '^manylinks\$'")" 0
}

# Names and text that are not UTF-8. The daemon died of one (its journal
# line took the path as JSON text: abort "out of memory"); on e2b and
# daytona a new file's upload failed only after close() had returned 0.
story_names_not_utf8() {
	local b=$'\xff\xfe'
	if [ "$1" = local ]; then
		ok "a name that is not UTF-8: created" touch "$F/n$b"
		ok "... listed" python3 -c 'import os, sys; sys.exit(b"n\xff\xfe" not in os.listdir(os.fsencode(sys.argv[1])))' "$F"
		echo bytes >"$F/n$b"
		eq "... read back" "$(cat "$F/n$b")" bytes
		eq "... the sandbox has it under the same bytes" \
			"$(lease_run "cat '$FHOME/n$b'")" bytes
		ok "... removed" rm "$F/n$b"
		eq "a command that is not UTF-8 runs" "$(lease_run "printf '%s' '$b' | od -An -tx1")" " ff fe"
	else
		eq "a name that is not UTF-8: touch is EILSEQ (JSON carries UTF-8 only)" \
			"$(errno_of "os.close(os.open(os.fsencode('$F') + b'/n\\xff\\xfe', os.O_CREAT | os.O_WRONLY))")" EILSEQ
		ok "... the daemon lives on" test -f "$MNT/README"
		ok "... the reason is in error" grep -q "not UTF-8, and $1 carries names as UTF-8" "$L/error"
		ok "... and the lease's log journals it (\\xNN for those bytes)" grep -q 'n\\\\xff\\\\xfe: not UTF-8' "$L/log"
		ok "... nothing of it was made" test ! -e "$F/n$b"
		eq "mkdir: EILSEQ" "$(mkdir "$F/d$b" 2>&1 | grep -o 'Invalid or incomplete multibyte')" \
			"Invalid or incomplete multibyte"
		eq "mkfifo: EILSEQ" "$(mkfifo "$F/p$b" 2>&1 | grep -o 'Invalid or incomplete multibyte')" \
			"Invalid or incomplete multibyte"
		eq "a link whose text is not UTF-8: EILSEQ" \
			"$(ln -s "t$b" "$F/s" 2>&1 | grep -o 'Invalid or incomplete multibyte')" \
			"Invalid or incomplete multibyte"
		echo x >"$F/u.txt"
		eq "mv onto such a name: EILSEQ" "$(mv "$F/u.txt" "$F/m$b" 2>&1 | grep -o 'Invalid or incomplete multibyte')" \
			"Invalid or incomplete multibyte"
		eq "... the file stays where it was" "$(cat "$F/u.txt")" x
		eq "a lookup of such a name: ENOENT (none can exist there)" \
			"$(errno_of "os.stat(os.fsencode('$F') + b'/n\\xff')")" ENOENT
		eq "a command that is not UTF-8: EILSEQ at the write (\$? 1)" \
			"$(bash -c "printf 'echo %s\n' '$b' > '$L/exec'" 2>&1 | grep -o 'Invalid or incomplete multibyte')" \
			"Invalid or incomplete multibyte"
		ok "... the reason is in error" grep -q "the command is not UTF-8 text, which $1 carries only" "$L/error"
	fi
	# A character cut across two writes is whole text.
	eq "a character split between two writes runs" "$(python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.write(fd, b"echo \xc3"); os.write(fd, b"\xa9t\xc3\xa9\n")
sys.stdout.write(os.read(fd, 100).decode()); os.close(fd)' "$L/exec")" "été"
	eq "code that is not UTF-8: EILSEQ at the write, on every provider" \
		"$(bash -c "printf 'print(1)#%s\n' '$b' > '$L/code.py'" 2>&1 | grep -o 'Invalid or incomplete multibyte')" \
		"Invalid or incomplete multibyte"
	eq "an env value that is not UTF-8: EILSEQ" \
		"$(bash -c "printf 'K=%s\n' '$b' > '$L/env'" 2>&1 | grep -o 'Invalid or incomplete multibyte')" \
		"Invalid or incomplete multibyte"
}
