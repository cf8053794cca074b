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
eq "it is a daytona lease" "$(json_get "$L/info" '["provider"]')" daytona
F=$L/fs/home/daytona
FHOME=/home/daytona
. "$(dirname "$0")/lib-files.sh"
. "$(dirname "$0")/lib-replace.sh"

make_src_tree src tests/unit
story_copy_roundtrip
eq "the sandbox has the same tree" "$(lease_run 'cd /home/daytona/cp && find . -type f | sort | xargs md5sum | md5sum')" \
	"$(cd "$SRC" && find . -type f | sort | xargs md5sum | md5sum)"
story_pseudo_dirs_empty
# rsync -a asks for owner 0 and then sets times, which the sandbox's user
# may not do on root's files (the provider borrows them).
story_rsync_metadata
# New files belong to the sandbox's user (daytona).
story_git

# vim -Es saves over an existing file: the daemon's move answers 409 for an
# existing destination, the provider must still replace it.
story_vim_save
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
eq "the sandbox has the replaced file" "$(lease_run 'cat /home/daytona/edit.txt')" "replaced"

# Request counts ("Must show"): ls -l of 1,000 files is one list call, an
# unchanged file read twice is downloaded once, a save over a file works.
echo 'mkdir -p /home/daytona/many && cd /home/daytona/many && for i in $(seq 1000); do echo $i > f$i; done' >"$L/exec"
# From inside the directory, so that only it and its entries are looked up.
(
	cd "$F/many" || exit 1
	# From here: the parent's walk may list many too (fs_walk.c), which
	# starts the 2 s lifetime of its listing.
	t0=$(date +%s%N)
	ls .. >/dev/null # the parent's listing: many's own attributes come with it
	fake_reset_counters
	ls -l >"$WORK/many.txt"
	stat -c %s f1 f500 f1000 >"$WORK/many-stat.txt"
	echo $((($(date +%s%N) - t0) / 1000000)) >"$WORK/many-ms"
)
eq "ls -l of 1,000 files lists them all" "$(grep -c '^-' "$WORK/many.txt")" 1000
# One list call; on a machine so loaded that the walk outlived the
# listing's 2 s lifetime (SBX_CACHE_TTL_MS, counted from the parent's
# listing above), one more per 2 s.
lists=$(counter 'GET /toolbox/:id/files') ms=$(cat "$WORK/many-ms")
ok "... with one list call (GET /toolbox/:id/files: $lists in $ms ms)" test "$lists" -le $((1 + ms / 2000))
eq "... and no stat (GET /toolbox/:id/files/info), stat of 3 of them included" \
	"$(counter 'GET /toolbox/:id/files/info')" 0
eq "stat is served from that listing" "$(tr '\n' ' ' <"$WORK/many-stat.txt")" "2 4 5 "

# Nanoseconds of a time set in the sandbox reach the mount (Go's modTime has
# them; the fake sent milliseconds, so a second `rsync -a` re-sent files
# whose cached times had expired: a CI flake under load).
lease_run 'touch -d @1200000000.123456789 /home/daytona/ns.txt' >/dev/null
eq "mtime to the nanosecond from the sandbox" "$(stat -c %.9Y "$F/ns.txt")" "1200000000.123456789"
story_time_late_in_second

# A file the mount has never seen (made by a run), so the first open must download it.
lease_run 'head -c 100000 /dev/urandom > /home/daytona/read.bin' >/dev/null
fake_reset_counters
ok "first read" cp "$F/read.bin" "$WORK/read.bin"
eq "... is one download (POST /toolbox/:id/files/bulk-download)" "$(counter 'POST /toolbox/:id/files/bulk-download')" 1
eq "... has the sandbox's bytes" "$(md5sum <"$WORK/read.bin")" "$(lease_run 'md5sum < /home/daytona/read.bin')"
fake_reset_counters
ok "second read" cmp "$WORK/read.bin" "$F/read.bin"
ok "third read" cmp "$WORK/read.bin" "$F/read.bin"
sleep 2.5 # past the attribute TTL: this open revalidates by size+mtime
ok "fourth read after the TTL" cmp "$WORK/read.bin" "$F/read.bin"
eq "an unchanged file read again is not downloaded again" "$(counter 'POST /toolbox/:id/files/bulk-download')" 0
echo 'echo changed > /home/daytona/read.bin' >"$L/exec"
fake_reset_counters # a run's output comes by bulk-download too
eq "a file changed by a run is read anew" "$(cat "$F/read.bin")" "changed"
eq "... with one more download" "$(counter 'POST /toolbox/:id/files/bulk-download')" 1

# The counts below are close()'s own upload: this mount has write-back off
# (the default is on; its counts: test-daytona-writeback.sh). The lease
# comes back.
unmount_sbxfs
mount_sbxfs -o writeback=0
ok "writeback=0: the lease is back" test -d "$F"
# The mount's first new file of the lease goes up empty as it is created
# (learn_owner), then its content replaces it: an upload and moves more, once.
fake_reset_counters
echo first >"$F/first.txt"
eq "the mount's first new file: two uploads, once" "$(counter 'POST /toolbox/:id/files/bulk-upload')" 2
log "  (its moves: $(counter 'POST /toolbox/:id/files/move'))"
# A directory the mount's owner makes shows the attributes it was made
# with (the folder call returns none): no info lookup after each mkdir
# (tar x: one per directory, before), and they are the sandbox's. (After
# a listing, as tar's parent is new: the names' lookups ask nothing.)
ls "$F" >/dev/null
fake_reset_counters
ok "mkdir -m 750 of 3 directories" mkdir -m 750 "$F/nd1" "$F/nd2" "$F/nd3"
mine=$(stat -c '%F %a %u %g %h' "$F/nd1" "$F/nd2" "$F/nd3")
eq "... and their stat: no info lookup" "$(counter 'GET /toolbox/:id/files/info')" 0
eq "... what the sandbox has" "$mine" \
	"$(lease_run "cd $FHOME && stat -c '%F %a %u %g %h' nd1 nd2 nd3")"

# tar x of N files into a new directory: one bulk-upload per file, straight
# to its name (the names were looked up and found absent): no move, no info.
N=100
mkdir -p "$WORK/tarsrc/t"
for i in $(seq 1 $N); do echo "file $i" >"$WORK/tarsrc/t/f$i"; done
tar -C "$WORK/tarsrc" -cf "$WORK/tarsrc.tar" t
fake_reset_counters
t0=$(date +%s%N)
ok "tar x of $N files" tar -C "$F" -xf "$WORK/tarsrc.tar"
secs=$((($(date +%s%N) - t0) / 1000000000 + 1))
# Write-back: the last uploads may still be on their way when tar returns.
uploads_done() { [ "$(counter 'POST /toolbox/:id/files/bulk-upload')" -ge $N ]; }
wait_for 20 uploads_done
C=$(fake_get /_fake/counters)
log "tar x of $N files cost: $C"
cnt() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], 0))' "$1" <<<"$C"; }
eq "tar x: one upload per file" "$(cnt 'POST /toolbox/:id/files/bulk-upload')" $N
eq "tar x: no move (new files go straight to their names)" "$(cnt 'POST /toolbox/:id/files/move')" 0
# Per 2 s (SBX_CACHE_TTL_MS) the path down to t/ may be asked again: 5 a period.
ok "tar x: no info per file ($(cnt 'GET /toolbox/:id/files/info') in $secs s)" \
	test "$(cnt 'GET /toolbox/:id/files/info')" -le $((N / 10 + 5 * (secs / 2)))
ok "diff -r after tar x" diff -r "$WORK/tarsrc/t" "$F/t"
# cp -r makes them 0644, what an upload gives a new file: no permissions
# request, even once the queue is applied (the run below applies it).
chmod 755 "$WORK/tarsrc/t/f7"
# tar's last change, the directory's owner and mode, may still be queued:
# a run applies it first, so that it is not counted as cp's.
lease_run true >/dev/null
fake_reset_counters
ok "cp -r of $N files" cp -r "$WORK/tarsrc/t" "$F/t2"
eq "... the sandbox has the modes" "$(lease_run 'stat -c %a /home/daytona/t2/f1 /home/daytona/t2/f7' | tr '\n' ' ')" "644 755 "
C=$(fake_get /_fake/counters)
log "cp -r of $N files cost: $C"
eq "cp -r: one upload per file" "$(cnt 'POST /toolbox/:id/files/bulk-upload')" $N
eq "cp -r: a permissions request only for the file that is not 0644" "$(cnt 'POST /toolbox/:id/files/permissions')" 1
story_replace_atomic

fake_reset_counters
printf 'a\nb\n' >"$F/save.txt"
ok "vim -Es saves over an existing file (counted)" vim -Es -u NONE -c '%s/b/B/' -c 'wq' "$F/save.txt"
eq "saved content" "$(lease_run 'cat /home/daytona/save.txt')" "$(printf 'a\nB')"
ok "the save met the daemon's 409 and still replaced the file" \
	test "$(counter 'POST /toolbox/:id/files/move')" -ge 2
log "counters of echo + vim -Es save: $(fake_get /_fake/counters)"
# POSIX semantics (the story also checks the sandbox's side).
story_posix_corners
TC_RUN_LINK="regular file" story_type_change_by_run
story_overwrite_private
story_dangling_link_by_run
story_many_links
story_run_link_read
eq "the mode in the sandbox" "$(lease_run 'stat -c %a /home/daytona/target.txt')" 600
eq "no temporaries left anywhere" "$(lease_run "find /home/daytona -name '.sbxfs-*' | wc -l")" 0
ok "nothing recorded in error" sh -c "! grep -v -e 'ENOTEMPTY' -e 'EISDIR' '$L/error' | grep -q ."

# A symlink made through the mount is still one after a run: the daemon's
# info follows links, and the run voided the table of the links the mount
# made, so its inode turned into its target's (EIO, then a regular file).
# Now the run only puts them in doubt, and the directory's listing
# (lstat) settles each at its next stat. One the run replaced is what the
# run left at its first stat (it was EIO once: the kernel still held the
# link's inode; now that stat is answered ESTALE and the kernel looks the
# name up again, story_type_change_by_run).
mkdir "$F/lk" && echo t >"$F/lk/t" && ln -s t "$F/lk/l1" && ln -s t "$F/lk/l2"
stat "$F/lk/l1" "$F/lk/l2" >/dev/null
lease_run "cd $FHOME/lk && rm l2 && echo now-a-file >l2" >/dev/null
eq "a symlink made through the mount, after a run: stat" "$(stat -c %F "$F/lk/l1" 2>&1)" "symbolic link"
eq "... readlink" "$(readlink "$F/lk/l1")" t
eq "... and one the run made a file is the file" "$(stat -c %F "$F/lk/l2" 2>&1)" "regular file"
sleep 2.5 # past the attribute TTL: asked again
eq "... still, past the attribute TTL" "$(stat -c %F "$F/lk/l1" 2>&1)" "symbolic link"
eq "... ls -l shows it" "$(ls -l "$F/lk" | grep -c ' l1 -> t')" 1
story_names_not_utf8 daytona
finish
