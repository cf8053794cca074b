#!/bin/bash
# fs/ on the local provider with ordinary tools: cp -r, tar, rsync, diff -r,
# grep -r, find, git, vim -Es, mv over a file, unlink of an open file,
# symlinks, hard links, fifos, chmod, touch -d, truncate, mmap, df.
. "$(dirname "$0")/lib.sh"
mount_sbxfs
L=$MNT/files
mkdir "$L"
F=$L/fs/root

# A source tree of the project itself, plus a little binary data.
SRC=$WORK/src
mkdir -p "$SRC"
cp -r "$top_srcdir/src" "$top_srcdir/tests/unit" "$SRC/"
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
eq "find counts the same files" "$(cd "$F/src" && find . -type f | sort | md5sum)" "$(cd "$SRC" && find . -type f | sort | md5sum)"
for d in proc sys dev; do
	eq "fs/$d is shown empty" "$(ls -A "$L/fs/$d")" ""
done
eq "nothing below fs/proc" "$(errno_of "os.stat('$L/fs/proc/self')")" "ENOENT"

# The sandbox sees the same files.
echo 'md5sum /root/src/blob.bin' >"$L/exec"
eq "the sandbox sees the copied file" "$(cut -d' ' -f1 "$L/stdout")" "$(md5sum <"$SRC/blob.bin" | cut -d' ' -f1)"

# git inside fs/ (run on the host through the mount).
G=$F/repo
mkdir "$G"
ok "git init" git -C "$G" init -q
echo hello >"$G/a.txt"
ok "git add" git -C "$G" add a.txt
ok "git commit" git -C "$G" -c user.email=t@e -c user.name=t commit -qm first
eq "git log" "$(git -C "$G" log --format=%s)" "first"
echo 'cd /root/repo && git log --format=%s' >"$L/exec"
eq "git log inside the sandbox" "$(cat "$L/stdout")" "first"

# vim -Es edits and saves (swap file, rename-over or in-place write).
printf 'one\ntwo\n' >"$F/edit.txt"
ok "vim -Es edits a file" vim -Es -u NONE -c '%s/two/TWO/' -c 'wq' "$F/edit.txt"
eq "vim saved" "$(cat "$F/edit.txt")" "$(printf 'one\nTWO')"

# POSIX semantics.
echo new >"$F/new.txt"
echo old >"$F/target.txt"
ok "mv over an existing file" mv "$F/new.txt" "$F/target.txt"
eq "rename replaced the target" "$(cat "$F/target.txt")" "new"
eq "O_EXCL on an existing file" "$(errno_of "os.open('$F/target.txt', os.O_CREAT|os.O_EXCL|os.O_WRONLY)")" "EEXIST"
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
ok "truncate" truncate -s 100 "$F/target.txt"
eq "truncated size" "$(stat -c %s "$F/target.txt")" 100
ok "symlink" ln -s target.txt "$F/sym"
eq "readlink" "$(readlink "$F/sym")" "target.txt"
echo in-sandbox >"$F/only-here.txt"
ok "absolute symlink" ln -s /root/only-here.txt "$F/abs"
eq "readlink gives the raw target (rsync/git round trips stay exact)" "$(readlink "$F/abs")" "/root/only-here.txt"
echo 'cat /root/abs' >"$L/exec"
eq "inside the sandbox it resolves to the sandbox's file" "$(cat "$L/exec")" "in-sandbox"
ok "hard link" ln "$F/target.txt" "$F/hard"
eq "link count" "$(stat -c %h "$F/target.txt")" 2
ok "mkfifo" mkfifo "$F/fifo"
eq "fifo type" "$(stat -c %F "$F/fifo")" "fifo"
ok "chmod" chmod 600 "$F/target.txt"
eq "mode" "$(stat -c %a "$F/target.txt")" 600
ok "chown" chown 1000:1000 "$F/target.txt"
eq "owner" "$(stat -c %u:%g "$F/target.txt")" "1000:1000"
ok "touch -d" touch -d '2001-02-03 04:05:06 UTC' "$F/target.txt"
eq "mtime" "$(TZ=UTC stat -c %y "$F/target.txt" | cut -c1-19)" "2001-02-03 04:05:06"
ok "mkdir -p and rmdir" sh -c "mkdir -p '$F/a/b/c' && rmdir '$F/a/b/c'"
eq "rmdir of a non-empty directory" "$(errno_of "os.rmdir('$F/a')")" "ENOTEMPTY"
ok "df shows the lease's disk" sh -c "df -P '$L/fs' | tail -1 | awk '{exit !(\$2 > 0)}'"
ok "rm -r of a tree" rm -r "$F/cp"
ok "tree gone" test ! -e "$F/cp"
finish
