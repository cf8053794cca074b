#!/bin/bash
# What fs/ of a local lease shows of changes made in the sandbox without
# going through fs/: the staleness contract (doc/DESIGN.md, "Kernel
# caching"; sbxfs(1), fs_cache_timeout). The kernel keeps fs/ names,
# attributes and pages; each case first makes it hold the file.
#  * A run or a code cell: what it changed is seen at once when it ends
#    (a new line appended to a file whose pages the kernel holds, a file
#    removed), whatever fs_cache_timeout is. Attacked with 60 s, so only
#    the invalidation at the run's end can make it visible in time.
#  * A background process (started by a run, living on): seen within
#    fs_cache_timeout, or at once when the next run ends. New names are
#    seen at once by name (no negative entry is cached); in a listing at
#    once below 10 s, else (cached listings) within the timeout.
. "$(dirname "$0")/lib.sh"

# cached_file TIMEOUT LEASE FILE: mounts with that fs_cache_timeout, makes the
# lease, writes FILE in its /root through fs/ and reads it back (the kernel
# now holds its pages and attributes). Sets L and F (the lease's /root).
cached_file() {
	mount_sbxfs -o "fs_cache_timeout=$1"
	L=$MNT/$2
	mkdir "$L"
	F=$L/fs/root
	printf 'one\n' >"$F/$3"
	eq "read through fs/ (the kernel holds its pages and attributes)" "$(cat "$F/$3")" "one"
	stat "$F/$3" >/dev/null
}

# A long timeout: only the invalidation after a run shows a change.
cached_file 60 cache a.txt
lease_run "echo two >> /root/a.txt" >/dev/null
eq "a run's append is seen at once" "$(cat "$F/a.txt")" "one
two"
eq "... with its size" "$(stat -c %s "$F/a.txt")" 8
echo "open('/root/a.txt', 'a').write('three\\n')" >"$L/code.py"
eq "a code cell's append is seen at once" "$(cat "$F/a.txt")" "one
two
three"
touch "$F/gone.txt" && stat "$F/gone.txt" >/dev/null
ls -l "$F" >/dev/null && ls "$F" >/dev/null # the listing cached too (cache_readdir at >= 10 s)
lease_run "rm /root/gone.txt; touch /root/made.txt" >/dev/null
ok "a file a run removed is gone at once" test ! -e "$F/gone.txt"
eq "... and from the listing, where a file the run made is" "$(ls "$F" | grep -E '^(gone|made)\.txt$')" "made.txt"

# A background process changes a file fs/ holds, makes one and removes one;
# the test learns it is done from a file outside fs/ (the run's cwd is not
# shared: the process writes a marker the next run reads).
touch "$F/bg-gone.txt" && stat "$F/bg-gone.txt" >/dev/null
eq "read again" "$(cat "$F/a.txt" | wc -l)" 3
lease_run "nohup sh -c 'echo four >> /root/a.txt; echo new > /root/bg-new.txt; rm /root/bg-gone.txt; touch /tmp/bg-done' >/dev/null 2>&1 &" >/dev/null
ok "the background process ran" wait_for 20 test -e "$L/fs/tmp/bg-done"
eq "a name a background process made is seen at once" "$(cat "$F/bg-new.txt")" "new"
# The listing is the kernel's for the timeout (cache_readdir): libfuse 3.14
# dropped the flag and every `ls` listed again (READDIRPLUS per directory
# per walk). The kernel checks a cached listing against the directory's
# mtime when it next asks for its attributes (once after each uncached
# listing), so a name a background process adds later shows in a listing
# once the next run ends (or past fs_cache_timeout).
lease_run "nohup sh -c 'sleep 5; touch /root/bg-late.txt /tmp/bg2-done' >/dev/null 2>&1 &" >/dev/null
ls "$F" >/dev/null
ls "$F" >/dev/null
ok "the second background process ran" wait_for 20 test -e "$L/fs/tmp/bg2-done"
eq "a listed directory's listing is the kernel's until the next run" \
	"$(ls "$F" | grep -c '^bg-late\.txt$')" 0
lease_run true >/dev/null
eq "... then the name is in it" "$(ls "$F" | grep -c '^bg-late\.txt$')" 1
eq "its append is seen once the next run has ended" "$(cat "$F/a.txt" | wc -l)" 4
eq "... its new file in the listing" "$(ls "$F" | grep -c '^bg-new\.txt$')" 1
ok "... and its removal" test ! -e "$F/bg-gone.txt"
end_leases
unmount_sbxfs
eq "the daemon exits 0 after unmount" "$DAEMON_STATUS" 0

# The default-like short timeout: a background change shows by itself,
# within fs_cache_timeout (2 s here; 10 s allowed for a loaded machine).
cached_file 2 cache2 b.txt
lease_run "nohup sh -c 'sleep 1; echo two >> /root/b.txt' >/dev/null 2>&1 &" >/dev/null
t0=$(date +%s%N)
lines() { wc -l <"$1"; }
ok "a background append is seen without a run" wait_for 10 eval '[ "$(lines "$F/b.txt")" = 2 ]'
log "seen after $((($(date +%s%N) - t0) / 1000000)) ms (the write at about 1,000 ms; fs_cache_timeout 2 s)"
eq "... with its size" "$(stat -c %s "$F/b.txt")" 8
finish
