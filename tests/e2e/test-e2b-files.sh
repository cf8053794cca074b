#!/bin/bash
# fs/ on the e2b provider against the fake E2B, with ordinary tools: cp -r,
# tar, rsync and diff -r round trips, grep -r, find, git, vim -Es; and what
# they cost, read from the fake's request counters: `ls -l` of 1,000 files
# is one ListDir, a second read of an unchanged file downloads nothing, a
# file written by exec is listed at once, `echo > file` is one upload (a new
# file straight to its name, an existing one beside it + Move), and `tar x`
# costs one upload per file: no Move, no Stat.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-files.sh"
. "$(dirname "$0")/lib-replace.sh"
start_fake e2b
mount_sbxfs
L=$MNT/files
ok "mkdir creates an e2b lease" mkdir "$L"
eq "state is running" "$(cat "$L/state")" "running"
F=$L/fs/home/user
FHOME=/home/user
run() { printf '%s\n' "$1" >"$L/exec"; }
count_files() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], 0))' "$1"; }
TTL_WAIT=2.5 # past the daemon's attribute TTL (SBX_CACHE_TTL_MS)

make_src_tree src
story_copy_roundtrip
story_rsync_metadata
eq "rsync -a: ... as the mount shows them" \
	"$(stat -c '%u %a %Y' "$F/rsync/blob.bin" "$F/rsync/src/base")" \
	"$(stat -c '%u %a %Y' "$SRC/blob.bin" "$SRC/src/base")"
story_git
story_vim_save
story_posix_corners
story_type_change_by_run
story_overwrite_private
story_dangling_link_by_run
story_many_links
story_run_link_read
story_pseudo_dirs_empty

# ---- what it costs (the fake's counters) ----

# The stories above ran with write-back (the default); the counts below are
# close()'s own upload, so this mount has it off (write-back's counts:
# test-e2b-writeback.sh, story_writeback_batch). The lease comes back.
unmount_sbxfs
mount_sbxfs -o writeback=0
ok "writeback=0: the lease is back" test -d "$F"

# The mount's first new file of the lease goes up empty as it is created
# (learn_owner: its stat teaches the owner new files show), then its
# content replaces it: an upload and a Move more, once.
fake_reset_counters
echo first >"$F/first.txt"
eq "the mount's first new file: two uploads, once" "$(counter "POST /files")" 2
eq "... and a Move" "$(counter "POST /filesystem.Filesystem/Move")" 1

# `echo > file`: the shell's dup2 closes the file once before writing.
fake_reset_counters
echo hi >"$F/one.txt"
eq "echo > new file: one upload" "$(counter "POST /files")" 1
eq "... straight to its name: no Move" "$(counter "POST /filesystem.Filesystem/Move")" 0
echo again >"$F/one.txt"
eq "echo > existing file: one upload" "$(counter "POST /files")" 2
eq "... beside it, then one Move over it (atomic replace)" \
	"$(counter "POST /filesystem.Filesystem/Move")" 1
run 'cat /home/user/one.txt'
eq "... and the sandbox has the last one" "$(cat "$L/stdout")" "again"
fake_reset_counters
: >"$F/one.txt"
uploaded_once() { [ "$(counter "POST /files")" = 1 ]; }
ok "an emptied file goes up once, right after close" wait_for 5 uploaded_once
run 'stat -c %s /home/user/one.txt'
eq "... empty there" "$(cat "$L/stdout")" 0
story_replace_atomic

# tar x of N files into a new directory: one upload per file, straight to
# its name (the names were looked up and found absent), and the lookups of
# the new names and the attributes after each upload are answered from what
# the daemon already knows.
N=200
mkdir -p "$WORK/many/t"
for i in $(seq 1 $N); do echo "file $i" >"$WORK/many/t/f$i"; done
tar -C "$WORK/many" -cf "$WORK/many.tar" t
sleep $TTL_WAIT
fake_reset_counters
t0=$(date +%s%N)
ok "tar x of $N files" tar -C "$F" -xf "$WORK/many.tar"
secs=$((($(date +%s%N) - t0) / 1000000000 + 1))
# Write-back: the last uploads may still be on their way when tar returns.
uploads_done() { [ "$(counter "POST /files")" -ge $N ]; }
wait_for 20 uploads_done
C=$(fake_get /_fake/counters)
log "tar x of $N files cost: $C in $secs s"
eq "tar x: one upload per file" "$(count_files "POST /files" <<<"$C")" $N
eq "tar x: no Move (new files go straight to their names)" "$(count_files "POST /filesystem.Filesystem/Move" <<<"$C")" 0
stats=$(count_files "POST /filesystem.Filesystem/Stat" <<<"$C")
lists=$(count_files "POST /filesystem.Filesystem/ListDir" <<<"$C")
# Per file: nothing. Per 2 s (SBX_CACHE_TTL_MS) the path down to t/ and its
# listing may be asked again (a slow, loaded run): 5 requests a period.
slack=$((5 * (secs / 2)))
ok "tar x: no Stat per file ($stats Stats, $lists ListDirs in $secs s)" test $((stats + lists)) -le $((N / 10 + slack))
all=$(python3 -c 'import json,sys; print(sum(json.load(sys.stdin).values()))' <<<"$C")
ok "tar x: at most 1.1 requests per file ($all for $N)" test "$all" -le $((N + N / 10 + slack))
ok "diff -r after tar x" diff -r "$WORK/many/t" "$F/t"

# Nanoseconds of a time set in the sandbox reach the mount (envd's Timestamp
# has them; the fake sent milliseconds).
run 'touch -d @1200000000.123456789 /home/user/ns.txt'
eq "mtime to the nanosecond from the sandbox" "$(stat -c %.9Y "$F/ns.txt")" "1200000000.123456789"
story_time_late_in_second

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
fake_reset_counters
ok "a new file uploaded from here" cmp "$WORK/r.bin" "$F/r.bin"
eq "... is not downloaded back" "$(counter "GET /files")" 0
run 'cp /home/user/r.bin /home/user/r2.bin'
sleep $TTL_WAIT
fake_reset_counters
ok "first read of a file" cmp "$WORK/r.bin" "$F/r2.bin"
eq "first read: one download" "$(counter "GET /files")" 1
ok "second read" cmp "$WORK/r.bin" "$F/r2.bin"
sleep $TTL_WAIT
ok "third read, past the TTL" cmp "$WORK/r.bin" "$F/r2.bin"
eq "re-reads of an unchanged file download nothing" "$(counter "GET /files")" 1
# Its copy was stamped by size only (no stat after a new file's upload):
# once a run may have changed the sandbox, it is read again, once.
ok "a new file uploaded from here, read after a run" cmp "$WORK/r.bin" "$F/r.bin"
eq "... is downloaded once (a loose stamp ends at a run)" "$(counter "GET /files")" 2
ok "... and not again" cmp "$WORK/r.bin" "$F/r.bin"
eq "... still two downloads" "$(counter "GET /files")" 2
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
story_names_not_utf8 e2b
finish
