#!/bin/bash
# fs/ on the e2b provider against the fake E2B, with ordinary tools: cp -r,
# tar, rsync and diff -r round trips, grep -r, find, git, vim -Es; and what
# they cost, read from the fake's request counters: `ls -l` of 1,000 files
# is one ListDir, a second read of an unchanged file downloads nothing, a
# file written by exec is listed at once, `echo > file` is one upload, and
# `tar x` costs no Stat per file.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
start_fake e2b
mount_sbxfs
L=$MNT/files
ok "mkdir creates an e2b lease" mkdir "$L"
eq "state is running" "$(cat "$L/state")" "running"
F=$L/fs/home/user
run() { printf '%s\n' "$1" >"$L/exec"; }
count_files() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], 0))' "$1"; }
TTL_WAIT=2.5 # past the daemon's attribute TTL (SBX_CACHE_TTL_MS)

# A source tree of the project itself, plus binary data and a symlink.
SRC=$WORK/src
mkdir -p "$SRC"
cp -r "$top_srcdir/src" "$SRC/"
head -c 300000 /dev/urandom >"$SRC/blob.bin"
ln -s blob.bin "$SRC/link-to-blob"

ok "cp -r into fs/" cp -r "$SRC" "$F/cp"
ok "diff -r after cp" diff -r "$SRC" "$F/cp"
ok "tar x into fs/" sh -c "tar -C '$WORK' -cf - src | tar -C '$F' -xf -"
ok "diff -r after tar" diff -r "$SRC" "$F/src"
ok "rsync -a into fs/" rsync -a "$SRC/" "$F/rsync/"
ok "diff -r after rsync" diff -r "$SRC" "$F/rsync"
ok "rsync -a again is a no-op" sh -c "[ -z \"\$(rsync -ai '$SRC/' '$F/rsync/')\" ]"
ok "rsync back out" rsync -a "$F/rsync/" "$WORK/back/"
ok "diff -r of the round trip" diff -r "$SRC" "$WORK/back"
ok "grep -r finds a symbol" sh -c "grep -rq sbx_lease_use '$F/src'"
eq "find counts the same files" "$(cd "$F/src" && find . -type f | sort | md5sum)" \
	"$(cd "$SRC" && find . -type f | sort | md5sum)"
eq "readlink of a copied symlink" "$(readlink "$F/src/link-to-blob")" "blob.bin"

# rsync -a run by root asks for owner 0 (the metadata batch runs as root)
# and sets the times after the contents (a directory's last of all).
sb_stat() { run "stat -c '%u %a %Y' $1"; cat "$L/stdout"; }
eq "rsync -a: owner, mode and mtime of a file in the sandbox" \
	"$(sb_stat /home/user/rsync/blob.bin)" "$(stat -c '%u %a %Y' "$SRC/blob.bin")"
eq "rsync -a: ... and of a directory" \
	"$(sb_stat /home/user/rsync/src/base)" "$(stat -c '%u %a %Y' "$SRC/src/base")"
eq "rsync -a: ... as the mount shows them" \
	"$(stat -c '%u %a %Y' "$F/rsync/blob.bin" "$F/rsync/src/base")" \
	"$(stat -c '%u %a %Y' "$SRC/blob.bin" "$SRC/src/base")"

# The sandbox sees the same bytes.
run 'md5sum /home/user/src/blob.bin /home/user/rsync/blob.bin'
eq "the sandbox sees the uploaded files" "$(cut -d' ' -f1 "$L/stdout" | sort -u)" \
	"$(md5sum <"$SRC/blob.bin" | cut -d' ' -f1)"

# git inside fs/ (run on the host through the mount), then inside the sandbox.
# The files belong to the sandbox's user, not to the host's: git wants
# safe.directory for that, as for any repository another user owns.
G=$F/repo
git() { command git -c safe.directory='*' "$@"; }
mkdir "$G"
ok "git init" git -C "$G" init -q
echo hello >"$G/a.txt"
ok "git add" git -C "$G" add a.txt
ok "git commit" git -C "$G" -c user.email=t@e -c user.name=t commit -qm first
eq "git log" "$(git -C "$G" log --format=%s)" "first"
ok "git status is clean" test -z "$(git -C "$G" status --porcelain)"
echo more >>"$G/a.txt"
ok "git commit -a" git -C "$G" -c user.email=t@e -c user.name=t commit -qam second
eq "git log after two commits" "$(git -C "$G" log --format=%s | tr '\n' ' ')" "second first "
run 'cd /home/user/repo && git -c safe.directory="*" log --format=%s'
eq "git log inside the sandbox" "$(cat "$L/stdout" | tr '\n' ' ')" "second first "

# vim -Es saves over an existing file.
printf 'one\ntwo\n' >"$F/edit.txt"
ok "vim -Es edits a file" vim -Es -u NONE -c '%s/two/TWO/' -c 'wq' "$F/edit.txt"
eq "vim saved" "$(cat "$F/edit.txt")" "$(printf 'one\nTWO')"
run 'cat /home/user/edit.txt'
eq "the sandbox sees vim's save" "$(cat "$L/stdout")" "$(printf 'one\nTWO')"
ok "no temporary upload name left behind" sh -c "! ls -a '$F' | grep -q sbxfs-"

# POSIX basics that editors and build tools rely on.
echo new >"$F/new.txt"
echo old >"$F/target.txt"
ok "mv over an existing file" mv "$F/new.txt" "$F/target.txt"
eq "rename replaced the target" "$(cat "$F/target.txt")" "new"
eq "O_EXCL on an existing file" "$(errno_of "os.open('$F/target.txt', os.O_CREAT|os.O_EXCL|os.O_WRONLY)")" "EEXIST"
ok "append" sh -c "echo more >> '$F/target.txt'"
eq "append result" "$(cat "$F/target.txt")" "$(printf 'new\nmore')"
ok "chmod" chmod 600 "$F/target.txt"
eq "mode" "$(stat -c %a "$F/target.txt")" 600
ok "touch -d" touch -d '2001-02-03 04:05:06 UTC' "$F/target.txt"
eq "mtime" "$(TZ=UTC stat -c %y "$F/target.txt" | cut -c1-19)" "2001-02-03 04:05:06"
run 'stat -c "%a %Y" /home/user/target.txt'
eq "mode and mtime reach the sandbox" "$(cat "$L/stdout")" "600 981173106"
eq "rmdir of a non-empty directory" "$(errno_of "os.rmdir('$F/repo')")" "ENOTEMPTY"
ok "rm -r of a tree" rm -r "$F/cp"
ok "tree gone" test ! -e "$F/cp"
for d in proc sys dev; do
	eq "fs/$d is shown empty" "$(ls -A "$L/fs/$d")" ""
done

# ---- what it costs (the fake's counters) ----

# `echo > file`: the shell's dup2 closes the file once before writing.
fake_reset_counters
echo hi >"$F/one.txt"
eq "echo > new file: one upload" "$(counter "POST /files")" 1
echo again >"$F/one.txt"
eq "echo > existing file: one upload" "$(counter "POST /files")" 2
run 'cat /home/user/one.txt'
eq "... and the sandbox has the last one" "$(cat "$L/stdout")" "again"
fake_reset_counters
: >"$F/one.txt"
uploaded_once() { [ "$(counter "POST /files")" = 1 ]; }
ok "an emptied file goes up once, right after close" wait_for 5 uploaded_once
run 'stat -c %s /home/user/one.txt'
eq "... empty there" "$(cat "$L/stdout")" 0

# tar x of N files into a new directory: one upload (+ Move) per file, and
# the lookups of the new names and the attributes after each upload are
# answered from what the daemon already knows.
N=200
mkdir -p "$WORK/many/t"
for i in $(seq 1 $N); do echo "file $i" >"$WORK/many/t/f$i"; done
tar -C "$WORK/many" -cf "$WORK/many.tar" t
sleep $TTL_WAIT
fake_reset_counters
ok "tar x of $N files" tar -C "$F" -xf "$WORK/many.tar"
C=$(fake_get /_fake/counters)
log "tar x of $N files cost: $C"
eq "tar x: one upload per file" "$(count_files "POST /files" <<<"$C")" $N
eq "tar x: one Move per file (atomic replace)" "$(count_files "POST /filesystem.Filesystem/Move" <<<"$C")" $N
stats=$(count_files "POST /filesystem.Filesystem/Stat" <<<"$C")
lists=$(count_files "POST /filesystem.Filesystem/ListDir" <<<"$C")
ok "tar x: no Stat per file ($stats Stats, $lists ListDirs)" test $((stats + lists)) -le $((N / 10))
ok "diff -r after tar x" diff -r "$WORK/many/t" "$F/t"

# ls -l of a 1,000-file directory made in the sandbox: one ListDir, no Stat per file.
run 'mkdir -p /home/user/big && cd /home/user/big && for i in $(seq 1 1000); do echo $i > f$i; done'
sleep $TTL_WAIT
fake_reset_counters
eq "ls -l lists 1,000 files" "$(ls -l "$F/big" | grep -c '^-')" 1000
C=$(fake_get /_fake/counters)
log "ls -l of 1,000 files cost: $C"
eq "ls -l of 1,000 files: one ListDir" "$(count_files "POST /filesystem.Filesystem/ListDir" <<<"$C")" 1
stats=$(count_files "POST /filesystem.Filesystem/Stat" <<<"$C")
ok "ls -l of 1,000 files: no Stat per file ($stats: one per path component at most)" test "$stats" -le 4
eq "ls -l of 1,000 files: no download" "$(count_files "GET /files" <<<"$C")" 0

# A second read of an unchanged file downloads nothing, even past the TTL.
head -c 200000 /dev/urandom >"$WORK/r.bin"
cp "$WORK/r.bin" "$F/r.bin"
run 'cp /home/user/r.bin /home/user/r2.bin'
sleep $TTL_WAIT
fake_reset_counters
ok "first read of a file" cmp "$WORK/r.bin" "$F/r2.bin"
eq "first read: one download" "$(counter "GET /files")" 1
ok "second read" cmp "$WORK/r.bin" "$F/r2.bin"
sleep $TTL_WAIT
ok "third read, past the TTL" cmp "$WORK/r.bin" "$F/r2.bin"
eq "re-reads of an unchanged file download nothing" "$(counter "GET /files")" 1
ok "a file uploaded from here is not downloaded back" cmp "$WORK/r.bin" "$F/r.bin"
eq "... still one download" "$(counter "GET /files")" 1
run 'echo changed > /home/user/r2.bin'
eq "a file changed by exec reads the new content" "$(cat "$F/r2.bin")" "changed"

# A file written by exec is listed by the next ls at once.
ls "$F" >/dev/null
run 'echo fresh > /home/user/from-exec.txt'
ok "ls shows the file exec wrote, at once" sh -c "ls '$F' | grep -qx from-exec.txt"
eq "... with its content" "$(cat "$F/from-exec.txt")" "fresh"
run 'rm /home/user/from-exec.txt'
ok "a file exec removed is gone at once" test ! -e "$F/from-exec.txt"

ok "the mount is still up" test -f "$MNT/README"
finish
