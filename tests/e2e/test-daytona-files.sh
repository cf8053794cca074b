#!/bin/bash
# fs/ of a daytona lease against the fake Daytona, with ordinary tools:
# cp -r / tar / rsync round trips checked with diff -r, grep -r, find, git,
# vim -Es saving over an existing file (the daemon's move refuses an
# existing destination), sed -i and mv over a file, the POSIX corners, and
# the request counts the cache promises (from the fake's counters).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
start_fake daytona
mount_sbxfs
L=$MNT/files
ok "mkdir creates a daytona lease" mkdir "$L"
eq "it is a daytona lease" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["provider"])' "$L/info")" daytona
F=$L/fs/home/daytona
# What the sandbox itself sees (a run's stdout; the fake's roots live in its
# own mount namespace).
sb() { printf '%s\n' "$1" >"$L/exec" && cat "$L/stdout"; }

# A source tree of the project itself, plus a little binary data.
SRC=$WORK/src
mkdir -p "$SRC"
cp -r "$top_srcdir/src" "$top_srcdir/tests/unit" "$SRC/"
head -c 300000 /dev/urandom >"$SRC/blob.bin"
ln -s blob.bin "$SRC/link-to-blob"

ok "cp -r into fs/" cp -r "$SRC" "$F/cp"
ok "diff -r after cp" diff -r "$SRC" "$F/cp"
eq "the sandbox has the same tree" "$(sb 'cd /home/daytona/cp && find . -type f | sort | xargs md5sum | md5sum')" \
	"$(cd "$SRC" && find . -type f | sort | xargs md5sum | md5sum)"
ok "tar x into fs/" sh -c "tar -C '$WORK' -cf - src | tar -C '$F' -xf -"
ok "diff -r after tar" diff -r "$SRC" "$F/src"
ok "rsync -a into fs/" rsync -a "$SRC/" "$F/rsync/"
ok "diff -r after rsync" diff -r "$SRC" "$F/rsync"
eq "rsync -a again is a no-op" "$(rsync -ai "$SRC/" "$F/rsync/")" ""
ok "rsync back out" rsync -a "$F/rsync/" "$WORK/back/"
ok "diff -r of the round trip" diff -r "$SRC" "$WORK/back"
eq "symlink survives the round trip" "$(readlink "$WORK/back/link-to-blob")" blob.bin
ok "grep -r finds a symbol" sh -c "grep -rq sbx_lease_use '$F/src'"
eq "find counts the same files" "$(cd "$F/src" && find . -type f | sort | md5sum)" "$(cd "$SRC" && find . -type f | sort | md5sum)"
for d in proc sys dev; do
	eq "fs/$d is shown empty" "$(ls -A "$L/fs/$d")" ""
done
# rsync -a run by root asks for owner 0 and then sets times, which the
# sandbox's user may not do on root's files (the provider borrows them).
eq "rsync -a: owner, mode and mtime of a file in the sandbox" \
	"$(sb 'stat -c "%u %a %Y" /home/daytona/rsync/blob.bin')" "$(stat -c '%u %a %Y' "$SRC/blob.bin")"
eq "rsync -a: ... and of a directory (its times are set last)" \
	"$(sb 'stat -c "%u %a %Y" /home/daytona/rsync/src/base')" "$(stat -c '%u %a %Y' "$SRC/src/base")"

# git inside fs/ (run on the host through the mount). New files belong to
# the sandbox's user (daytona), so git run by another user wants the
# directory declared safe, as on any shared volume.
G=$F/repo
mkdir "$G"
git() { command git -c safe.directory='*' "$@"; }
ok "git init" git -C "$G" init -q
echo hello >"$G/a.txt"
ok "git add" git -C "$G" add a.txt
ok "git commit" git -C "$G" -c user.email=t@e -c user.name=t commit -qm first
echo again >>"$G/a.txt"
ok "git commit -a (rewrites index, refs, logs)" git -C "$G" -c user.email=t@e -c user.name=t commit -qam second
eq "git log" "$(git -C "$G" log --format=%s | tr '\n' ' ')" "second first "
ok "git fsck" git -C "$G" fsck --no-progress
echo 'cd /home/daytona/repo && git log --format=%s | tr "\n" " "' >"$L/exec"
eq "git log inside the sandbox" "$(cat "$L/stdout")" "second first "

# vim -Es saves over an existing file: the daemon's move answers 409 for an
# existing destination, the provider must still replace it.
printf 'one\ntwo\n' >"$F/edit.txt"
ok "vim -Es edits a file" vim -Es -u NONE -c '%s/two/TWO/' -c 'wq' "$F/edit.txt"
eq "vim saved" "$(cat "$F/edit.txt")" "$(printf 'one\nTWO')"
eq "... and the sandbox has the new text" "$(sb 'cat /home/daytona/edit.txt')" "$(printf 'one\nTWO')"
ok "vim -Es with backupcopy=no (rename the original away, write anew)" \
	vim -Es -u NONE -c 'set backupcopy=no writebackup' -c '%s/one/ONE/' -c 'wq' "$F/edit.txt"
eq "vim saved again" "$(cat "$F/edit.txt")" "$(printf 'ONE\nTWO')"
eq "no backup or temporary left behind" "$(ls -A "$F" | grep -c -e '~$' -e '^\.sbxfs-' -e '\.swp$')" 0
ok "sed -i (write a temporary, rename it over the file)" sed -i 's/ONE/uno/' "$F/edit.txt"
eq "sed -i result" "$(cat "$F/edit.txt")" "$(printf 'uno\nTWO')"
chmod 640 "$F/edit.txt"
ok "python os.replace over an existing file" python3 - "$F" <<'PY'
import os, sys
d = sys.argv[1]
with open(d + "/edit.tmp", "w") as f:
    f.write("replaced\n")
os.replace(d + "/edit.tmp", d + "/edit.txt")
assert open(d + "/edit.txt").read() == "replaced\n"
assert not os.path.exists(d + "/edit.tmp")
PY
eq "the sandbox has the replaced file" "$(sb 'cat /home/daytona/edit.txt')" "replaced"

# Request counts ("Must show"): ls -l of 1,000 files is one list call, an
# unchanged file read twice is downloaded once, a save over a file works.
echo 'mkdir -p /home/daytona/many && cd /home/daytona/many && for i in $(seq 1000); do echo $i > f$i; done' >"$L/exec"
# From inside the directory, so that only it and its entries are looked up.
(
	cd "$F/many" || exit 1
	ls .. >/dev/null # the parent's listing: many's own attributes come with it
	fake_reset_counters
	ls -l >"$WORK/many.txt"
	stat -c %s f1 f500 f1000 >"$WORK/many-stat.txt"
)
eq "ls -l of 1,000 files lists them all" "$(grep -c '^-' "$WORK/many.txt")" 1000
eq "... with one list call (GET /toolbox/:id/files)" "$(counter 'GET /toolbox/:id/files')" 1
eq "... and no stat (GET /toolbox/:id/files/info), stat of 3 of them included" \
	"$(counter 'GET /toolbox/:id/files/info')" 0
eq "stat is served from that listing" "$(tr '\n' ' ' <"$WORK/many-stat.txt")" "2 4 5 "

# A file the mount has never seen (made by a run), so the first open must download it.
sb 'head -c 100000 /dev/urandom > /home/daytona/read.bin' >/dev/null
fake_reset_counters
ok "first read" cp "$F/read.bin" "$WORK/read.bin"
eq "... is one download (POST /toolbox/:id/files/bulk-download)" "$(counter 'POST /toolbox/:id/files/bulk-download')" 1
eq "... has the sandbox's bytes" "$(md5sum <"$WORK/read.bin")" "$(sb 'md5sum < /home/daytona/read.bin')"
fake_reset_counters
ok "second read" cmp "$WORK/read.bin" "$F/read.bin"
ok "third read" cmp "$WORK/read.bin" "$F/read.bin"
sleep 2.5 # past the attribute TTL: this open revalidates by size+mtime
ok "fourth read after the TTL" cmp "$WORK/read.bin" "$F/read.bin"
eq "an unchanged file read again is not downloaded again" "$(counter 'POST /toolbox/:id/files/bulk-download')" 0
echo 'echo changed > /home/daytona/read.bin' >"$L/exec"
eq "a file changed by a run is read anew" "$(cat "$F/read.bin")" "changed"
eq "... with one more download" "$(counter 'POST /toolbox/:id/files/bulk-download')" 1

fake_reset_counters
printf 'a\nb\n' >"$F/save.txt"
ok "vim -Es saves over an existing file (counted)" vim -Es -u NONE -c '%s/b/B/' -c 'wq' "$F/save.txt"
eq "saved content" "$(sb 'cat /home/daytona/save.txt')" "$(printf 'a\nB')"
ok "the save met the daemon's 409 and still replaced the file" \
	test "$(counter 'POST /toolbox/:id/files/move')" -ge 2
log "counters of echo + vim -Es save: $(fake_get /_fake/counters)"

# POSIX semantics.
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
eq "the sandbox has the cut file" "$(sb 'stat -c %s /home/daytona/seek.bin')" 4
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
eq "the sandbox has the mmap write" "$(sb 'head -c 5 /home/daytona/mm.bin')" hello
ok "truncate" truncate -s 100 "$F/target.txt"
eq "truncated size" "$(stat -c %s "$F/target.txt")" 100
ok "symlink" ln -s target.txt "$F/sym"
eq "readlink" "$(readlink "$F/sym")" "target.txt"
eq "the sandbox has the link" "$(sb 'readlink /home/daytona/sym')" "target.txt"
ok "hard link" ln "$F/target.txt" "$F/hard"
eq "link count" "$(sb 'stat -c %h /home/daytona/target.txt')" 2
ok "chmod" chmod 600 "$F/target.txt"
eq "mode" "$(stat -c %a "$F/target.txt")" 600
eq "mode in the sandbox" "$(sb 'stat -c %a /home/daytona/target.txt')" 600
ok "touch -d" touch -d '2001-02-03 04:05:06 UTC' "$F/target.txt"
eq "mtime" "$(TZ=UTC stat -c %y "$F/target.txt" | cut -c1-19)" "2001-02-03 04:05:06"
ok "mkdir -p and rmdir" sh -c "mkdir -p '$F/a/b/c' && rmdir '$F/a/b/c'"
eq "rmdir of a non-empty directory" "$(errno_of "os.rmdir('$F/a')")" "ENOTEMPTY"
eq "unlink of a directory" "$(errno_of "os.unlink('$F/a')")" "EISDIR"
ok "df shows the lease's disk" sh -c "df -P '$L/fs' | tail -1 | awk '{exit !(\$2 > 0)}'"
ok "rm -r of a tree" rm -r "$F/cp"
ok "tree gone" test ! -e "$F/cp"
eq "tree gone in the sandbox" "$(sb 'ls -d /home/daytona/cp 2>&1 >/dev/null | wc -l')" 1
eq "no temporaries left anywhere" "$(sb "find /home/daytona -name '.sbxfs-*' | wc -l")" 0
ok "nothing recorded in error" sh -c "! grep -v -e 'ENOTEMPTY' -e 'EISDIR' '$L/error' | grep -q ."
finish
