# Reads in bulk (fs_prefetch.c) on a remote provider, against a fake
# (sourced after lib.sh, lib-fake.sh and start_fake). The tree is written
# straight into the fake's sandbox root (no request, no run), under /tmp
# (outside e2b's watched home: a change there reaches the mount only
# through its own stat). Each check fails without the prefetch (a
# download per file) or with a prefetch that serves stale or wrong bytes.
# The caller sets DOWNLOAD_KEYS: the fake's counter keys of content
# requests (a download, a batch), and BATCH_KEY: the batch's.
#   story_prefetch [-o OPTION...]
PF_DIRS=6   # grep -r over 6 directories ...
PF_FILES=30 # ... of 30 files each (and a big one)

# sandbox_root: the fake's sandbox root, as this test's namespace reaches it.
sandbox_root() {
	local root
	root=$(fake_get /_fake/sandboxes | python3 -c '
import json, sys
s = [x for x in json.load(sys.stdin) if x["id"] == sys.argv[1]]
print(s[0]["root"] if s else "/nonexistent")' "$ID")
	echo "/proc/$FAKE_PID/root$root"
}
# requests: every request the fake counted since the last reset.
requests() { fake_get /_fake/counters | python3 -c 'import json,sys; print(sum(json.load(sys.stdin).values()))'; }
# downloads: the content requests (DOWNLOAD_KEYS) since the last reset.
downloads() {
	fake_get /_fake/counters | python3 -c 'import json,sys; c = json.load(sys.stdin); print(sum(c.get(k, 0) for k in sys.argv[1:]))' "${DOWNLOAD_KEYS[@]}"
}
# per_file N FILES: "yes" when N requests are at most 0.2 per file.
per_file() { python3 -c "import sys; print('yes' if $1 <= 0.2 * $2 else 'no: %.2f per file' % ($1 / $2))"; }
WEIRD=$'we"ird $(cd;touch pwned) \'q\'\nline `touch pwned`.txt'

# make_tree DIR: the test tree under DIR (host paths), owned by root, 0644.
make_tree() {
	python3 - "$1" "$PF_DIRS" "$PF_FILES" "$WEIRD" <<'PY'
import os, random, sys
top, ndirs, nfiles, weird = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
random.seed(13)
def put(p, data):
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data)
for d in range(ndirs):
    for i in range(nfiles):
        put(f"{top}/g/d{d}/f{i:02}.txt", ("line %d of g/d%d needle%d\n" % (i, d, i % 3)).encode() * random.randint(20, 200))
put(f"{top}/g/d0/big.bin", os.urandom(300 * 1024)) # over the 256 KiB cap
for sub in ("b", "c", "m", "w"):
    for i in range(nfiles):
        put(f"{top}/{sub}/f{i:02}.txt", ("%s file %d\n" % (sub, i)).encode() * random.randint(20, 200))
put(f"{top}/w/{weird}", b"the weird one\n\x00\xff binary too\n")
put(f"{top}/w/-n", b"dash\n")
PY
}

story_prefetch() {
	local n root t
	mount_sbxfs "$@"
	L=$MNT/pf
	ok "mkdir creates a lease" mkdir "$L"
	ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandboxId"])' "$L/info")
	root=$(sandbox_root)
	make_tree "$WORK/pf"
	ok "the tree is put into the sandbox" cp -r "$WORK/pf" "$root/tmp/pf"
	chmod -R a+rwX "$root/tmp/pf" # the sandbox user changes a file by exec
	F=$L/fs/tmp/pf

	# grep -r: a download for the first file of a directory, one request for the rest.
	fake_reset_counters
	eq "grep -r over $((PF_DIRS * PF_FILES + 1)) files finds what grep finds on the host" \
		"$(cd "$F/g" && grep -r needle1 . | sort | md5sum)" "$(cd "$WORK/pf/g" && grep -r needle1 . | sort | md5sum)"
	n=$(requests)
	log "requests of grep -r: $(fake_get /_fake/counters)"
	eq "... with at most 0.2 request per file ($n requests)" "$(per_file "$n" $((PF_DIRS * PF_FILES + 1)))" yes
	eq "the file over the 256 KiB cap reads right (downloaded on its own)" \
		"$(md5sum <"$F/g/d0/big.bin")" "$(md5sum <"$WORK/pf/g/d0/big.bin")"
	fake_reset_counters
	eq "diff -r of the tree as prefetched" "$(diff -r "$WORK/pf/g" "$F/g" && echo same)" same
	eq "... and reading it again downloads nothing" "$(downloads)" 0

	# A walk over many small directories (grep -r of a source tree): the
	# directories beside the one being read come in its batch once the walk
	# listed them, not one batch (and a download) per directory (before: 20
	# content requests for these 10 directories, after: 4).
	for n in $(seq -w 0 9); do
		mkdir -p "$root/tmp/pf/t/d$n"
		for i in 0 1 2; do echo "walk $n $i needle" >"$root/tmp/pf/t/d$n/f$i"; done
	done
	chmod -R a+rwX "$root/tmp/pf/t"
	fake_reset_counters
	eq "grep -r over 10 directories of 3 files finds every file" \
		"$(grep -rl needle "$F/t" | wc -l)" 30
	n=$(downloads)
	log "  (requests: $(fake_get /_fake/counters))"
	ok "... in few content requests ($n: the first two directories' download and batch)" \
		test "$n" -le 4

	# A name with a newline, quotes, $(...) and backquotes; one like an option.
	cat "$F"/w/f0[01].txt >/dev/null # the glob lists w/; the second file fetches the rest
	fake_reset_counters
	eq "the weird name was prefetched right" "$(cmp "$F/w/$WEIRD" "$WORK/pf/w/$WEIRD" && echo same)" same
	eq "... and so was -n" "$(cat "$F/w/-n")" dash
	eq "... without a download" "$(downloads)" 0
	eq "... and the name ran nothing in the sandbox" \
		"$(ls -d "$root/pwned" "$root"/home/*/pwned "$root/root/pwned" "$root/tmp/pf/w/pwned" 2>/dev/null)" ""
	eq "... nor left a file beside the others" "$(ls "$WORK/pf/w" | wc -l)" "$(ls "$F/w" | wc -l)"

	# A directory of links a run made (a venv's bin/, /usr/lib's .so
	# names): `ls -l` reads every link's text, and a link's stat needs it
	# too (its size is the length readlink gives, which is rewritten for an
	# absolute target). All of them come in one request (before: one
	# command per link, 41 here), an odd name and text among them.
	mkdir -p "$root/tmp/pf/k"
	for n in $(seq 1 20); do
		ln -s "f$n" "$root/tmp/pf/k/r$n" && ln -s "/usr/bin/f$n" "$root/tmp/pf/k/a$n"
	done
	ln -s "$WEIRD" "$root/tmp/pf/k/$WEIRD"
	ls "$F/k" >/dev/null
	fake_reset_counters
	eq "ls -l of 41 links: each size is its text's length, each relative text as made" \
		"$(python3 - "$F/k" "$root/tmp/pf/k" <<'PY'
import os, sys
m, h = sys.argv[1:]
bad = []
for n in sorted(os.listdir(m)):
    t = os.readlink(os.path.join(m, n))
    if os.lstat(os.path.join(m, n)).st_size != len(os.fsencode(t)):
        bad.append(n + ": size")
    made = os.readlink(os.path.join(h, n))
    if not made.startswith("/") and t != made:
        bad.append(n + ": text")
print(len(os.listdir(m)), bad)
PY
)" "41 []"
	n=$(counter "$LINKS_KEY")
	log "  (requests: $(fake_get /_fake/counters))"
	ok "... their texts in one request ($n)" test "$n" -le 1
	eq "... and the odd text ran nothing in the sandbox" \
		"$(ls -d "$root/pwned" "$root"/home/*/pwned "$root/root/pwned" "$root/tmp/pf/k/pwned" 2>/dev/null)" ""

	# That request failing, a link is read alone, its text as exact (e2b
	# cut it at its first newline), and the error file says nothing.
	mkdir "$root/tmp/pf/k2" && ln -s "$WEIRD" "$root/tmp/pf/k2/w"
	ls "$F/k2" >/dev/null
	cp "$L/error" "$WORK/error-before" 2>/dev/null || : >"$WORK/error-before"
	fault_only "{\"kind\":\"5xx\",\"status\":500,\"count\":1,\"key\":\"$LINKS_KEY\"}"
	eq "the links' request failing, a link read alone has its exact text" \
		"$(readlink "$F/k2/w")" "$WEIRD"
	fake_clear_faults
	eq "... and the error file says nothing of it" "$(cmp "$WORK/error-before" "$L/error" && echo same)" same

	# Changed after the prefetch: behind the mount's back (the same size, no
	# run in between to drop the copy), then through exec.
	cat "$F"/c/f0[01].txt >/dev/null
	python3 -c "import sys; p = sys.argv[1]; d = open(p, 'rb').read(); open(p, 'wb').write(d.replace(b'c file', b'X FILE'))" \
		"$root/tmp/pf/c/f07.txt"
	touch -d '2001-01-01 00:00:00' "$root/tmp/pf/c/f07.txt" # another mtime, the same size
	sleep 3 # past the cache's and the kernel's attribute timeouts
	eq "a file changed behind the mount's back after the prefetch reads its new content" \
		"$(head -c 8 "$F/c/f07.txt")" "X FILE 7"
	lease_run "sed -i 's/c file/C FILE/' /tmp/pf/c/f05.txt" >/dev/null
	eq "a file changed through exec after the prefetch reads its new content" \
		"$(head -c 8 "$F/c/f05.txt")" "C FILE 5"

	# Lookups across sibling directories whose listings expired (git's
	# object directories, each revisited later): once a second one needs
	# its listing again, the parent's subtree comes in one request, not a
	# listing per directory (before: 21 requests for the 16, now 7).
	for n in $(seq -w 0 15); do
		mkdir -p "$root/tmp/pf/s/o$n" && echo "$n" >"$root/tmp/pf/s/o$n/a" && echo "$n" >"$root/tmp/pf/s/o$n/b"
	done
	chmod -R a+rwX "$root/tmp/pf/s"
	ls -R "$F/s" >/dev/null
	sleep 3 # past the cache's and the kernel's attribute timeouts
	fake_reset_counters
	eq "stat of a file in each of 16 directories whose listings expired" \
		"$(cd "$F/s" && stat -c %s o*/b | sort -u)" 3
	n=$(requests)
	log "  (requests: $(fake_get /_fake/counters))"
	ok "... in few requests ($n: the parents' listings, one directory's, then its parent's subtree)" \
		test "$n" -le 8

	# A failed batch: the open downloads its file as before, and the
	# lease's error file is not written (the batch was the mount's idea).
	cat "$F"/b/f0[0].txt >/dev/null # the glob lists b/
	cp "$L/error" "$WORK/error-before" 2>/dev/null || : >"$WORK/error-before"
	fault_only "{\"kind\":\"5xx\",\"status\":500,\"count\":1,\"key\":\"$BATCH_KEY\"}"
	eq "a failed batch: the file still reads right" "$(cmp "$F/b/f01.txt" "$WORK/pf/b/f01.txt" && echo same)" same
	eq "... the batch was tried (the fault was met)" "$(fake_get /_fake/faults | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["faults"]))')" 0
	fake_clear_faults
	eq "... and the error file says nothing of it" "$(cmp "$WORK/error-before" "$L/error" && echo same)" same

	# A file removed between the listing and the fetch does not fail the others.
	ls "$F/m" >/dev/null
	rm "$root/tmp/pf/m/f03.txt"
	cat "$F/m/f00.txt" "$F/m/f01.txt" >/dev/null
	fake_reset_counters
	t=0
	for n in $(seq -w 4 $((PF_FILES - 1))); do
		cmp -s "$F/m/f$n.txt" "$WORK/pf/m/f$n.txt" || t=$((t + 1))
	done
	eq "a file removed before the batch: the others arrive right" "$t" 0
	eq "... in that batch (no download to read them)" "$(downloads)" 0
	unmount_sbxfs
}

# A provider with ranged reads (SBX_CAP_RANGE_READ): a read far ahead of
# the download (tail of a big log) has a range of its own instead of
# waiting for the download to get there (it waited for the whole file: 10
# GB for `tail` of a 10 GB log). The fake holds every whole download 4 s,
# not the ranges: tail answers at once, also beside another reader; the
# download still completes the file. (story_stream_big's helper; root:
# the sandbox's root.)
far_reads() {
	local root=$1 far='import hashlib,sys
f = open(sys.argv[1], "rb")
f.seek(-64, 2); f.read()
f.seek(3000 * 4096); print(hashlib.md5(f.read(4096)).hexdigest())'
	{ head -c $((24 << 20)) /dev/urandom; seq 1 100; } >"$WORK/big24"
	cp "$WORK/big24" "$root/tmp/pf/big24" && chmod 644 "$root/tmp/pf/big24"
	cp "$WORK/big24" "$root/tmp/pf/big24b" && chmod 644 "$root/tmp/pf/big24b"
	stat "$F/big24" "$F/big24b" >/dev/null
	fault_only "{\"kind\":\"slow\",\"delayMs\":4000,\"complete\":true,\"key\":\"$STREAM_KEY\",\"range\":false}"
	eq "tail of a big file while its download is held back: at once" \
		"$(timeout 2 tail -n 2 "$F/big24" | tr '\n' ' ')" "99 100 "
	eq "... reads far apart on one handle: the end, then the middle" \
		"$(timeout 2 python3 -c "$far" "$F/big24b")" "$(python3 -c "$far" "$WORK/big24")"
	# A second reader while the first holds the download: its open waited
	# for the whole download (the first's claim); it reads beside it now.
	cp "$WORK/big24" "$root/tmp/pf/big24c" && chmod 644 "$root/tmp/pf/big24c"
	stat "$F/big24c" >/dev/null
	exec 5<"$F/big24c"
	head -c 1 <&5 >/dev/null &
	local first=$!
	sleep 0.3
	eq "... a second reader of a file another reads as it arrives: at once too" \
		"$(timeout 2 tail -n 2 "$F/big24c" | tr '\n' ' ')" "99 100 "
	wait $first
	exec 5<&-
	eq "... and the whole file reads right" "$(md5sum <"$F/big24")" "$(md5sum <"$WORK/big24")"
	eq "... the other too" "$(md5sum <"$F/big24c")" "$(md5sum <"$WORK/big24")"
	ok "... nothing in the error file" sh -c "! grep -q big24 '$L/error'"
	fake_clear_faults
}

# A big file is read as it arrives (fs_cached_file.c, SBX_STREAM_MIN): its
# first bytes are there while the rest still comes. The fake hangs up
# after 2 MiB of the download (the cut fault): `head -c 4` has its bytes
# (before, the open downloaded the whole file first and failed with EIO),
# a `cat` of the whole file fails with EIO instead of passing a truncated
# file on, the error file says which download failed, and once the fault
# is gone the file reads whole. Mounts itself (after story_prefetch).
#   STREAM_KEY: the fake's counter key of the download
story_stream_big() {
	local root
	mount_sbxfs
	L=$MNT/big
	ok "mkdir creates a lease" mkdir "$L"
	ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandboxId"])' "$L/info")
	root=$(sandbox_root)
	mkdir -p "$root/tmp/pf"
	F=$L/fs/tmp/pf
	head -c $((8 << 20)) /dev/urandom >"$WORK/big8"
	cp "$WORK/big8" "$root/tmp/pf/big8" && chmod 644 "$root/tmp/pf/big8"
	local cut="{\"kind\":\"cut\",\"cutAfter\":$((2 << 20)),\"key\":\"$STREAM_KEY\"}"
	fault_only "$cut"
	eq "the first bytes of a big file while the rest is coming (cut at 2 MiB)" \
		"$(head -c 4 "$F/big8" | od -An -tx1 | tr -d ' ')" "$(head -c 4 "$WORK/big8" | od -An -tx1 | tr -d ' ')"
	ok "... a cat of it fails, not passing on part of it" sh -c "! cat '$F/big8' >/dev/null 2>&1"
	ok "... the error file names its download" error_says "download /tmp/pf/big8"
	fake_clear_faults
	eq "... which reads whole once the fault is gone" "$(md5sum <"$F/big8")" "$(md5sum <"$WORK/big8")"
	# A head closes before the end: the download stops there (nothing
	# reported), and the next reader has the whole file.
	cp "$WORK/big8" "$root/tmp/pf/big8b" && chmod 644 "$root/tmp/pf/big8b"
	eq "head of another" "$(head -c 4 "$F/big8b" | od -An -tx1 | tr -d ' ')" \
		"$(head -c 4 "$WORK/big8" | od -An -tx1 | tr -d ' ')"
	eq "... then all of it" "$(md5sum <"$F/big8b")" "$(md5sum <"$WORK/big8")"
	ok "... and the error file names no stopped download" sh -c "! grep -q big8b '$L/error'"
	# The cache's disk fills mid-download: the download stops at its reserve
	# (1 MiB here), the reads past it fail with ENOSPC, and the error file
	# says so (it said "stopped by the receiver").
	local cache=$STATE/leases/big/cache
	cp "$WORK/big8" "$root/tmp/pf/big8d" && chmod 644 "$root/tmp/pf/big8d"
	mount -t tmpfs -o size=4m sbxfs-e2e-smallcache "$cache"
	add_cleanup "umount -l '$cache' 2>/dev/null"
	eq "a cache disk too small: the first bytes still read" \
		"$(head -c 4 "$F/big8d" | od -An -tx1 | tr -d ' ')" "$(head -c 4 "$WORK/big8" | od -An -tx1 | tr -d ' ')"
	eq "... a cat fails with ENOSPC" "$(errno_of "open('$F/big8d','rb').read()")" ENOSPC
	ok "... the error file says the cache file had no room" \
		error_says "download of /tmp/pf/big8d stopped after [0-9]* bytes: the content cache's disk is down to"
	umount "$cache"
	eq "... room again: it reads whole" "$(md5sum <"$F/big8d")" "$(md5sum <"$WORK/big8")"
	# A pause while a big file is read as it arrives waits for its download
	# (the read failed half-way with "sandbox not found": the paused sandbox
	# sent no more).
	cp "$WORK/big8" "$root/tmp/pf/big8e" && chmod 644 "$root/tmp/pf/big8e"
	stat "$F/big8e" >/dev/null
	fault_only "{\"kind\":\"slow\",\"delayMs\":1500,\"complete\":true,\"key\":\"$STREAM_KEY\"}"
	md5sum <"$F/big8e" >"$WORK/md5e" 2>&1 &
	local reader=$!
	sleep 0.5
	ok "pause while a big file is read as it arrives" sh -c "echo pause >'$L/state'"
	eq "... the lease is paused" "$(cat "$L/state")" paused
	wait $reader
	eq "... and the reader had all of it" "$(cat "$WORK/md5e")" "$(md5sum <"$WORK/big8")"
	fake_clear_faults
	echo resume >"$L/state"
	if [ -n "${STREAM_RANGE:-}" ]; then far_reads "$root"; fi
	# A reader killed while its read waits for a slow download leaves a page
	# locked until the read is answered; removing the lease then invalidates
	# the kernel's pages with the lease lock held. The stream must answer
	# its readers without that lock (it hung for good: the lease lock, the
	# page, the read, the stream).
	cp "$WORK/big8" "$root/tmp/pf/big8c" && chmod 644 "$root/tmp/pf/big8c"
	stat "$F/big8c" >/dev/null
	fault_only "{\"kind\":\"slow\",\"delayMs\":2500,\"complete\":true,\"key\":\"$STREAM_KEY\"}"
	timeout 0.5 head -c 1 "$F/big8c" >/dev/null
	rmdir "$L" &
	local p=$! i
	for i in $(seq 200); do kill -0 $p 2>/dev/null || break; sleep 0.1; done
	if kill -0 $p 2>/dev/null; then
		ok "rmdir of the lease while a killed reader's read waits for its download" false
		# so the clean-up can go on: abort the connection (fusectl)
		mountpoint -q /sys/fs/fuse/connections || mount -t fusectl none /sys/fs/fuse/connections
		echo 1 >"/sys/fs/fuse/connections/$(stat -c %d "$MNT")/abort"
	else
		ok "rmdir of the lease while a killed reader's read waits for its download" wait $p
	fi
	fake_clear_faults
	unmount_sbxfs
}
