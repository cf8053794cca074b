# Sourced by test-{e2b,daytona}-rm.sh (after lib.sh and lib-fake.sh): removals
# in batches on the remote providers (issue 13, item 2). unlink, and rmdir
# of a directory the mount knows empty, are queued (`rm -f`, `rmdir` in the
# provider's metadata batch), so `rm -rf` of a tree costs a listing per
# directory and a command per batch, not a request per entry. rm_test_main
# (at the end) runs the stories on one provider; they use L (the lease), F
# (a directory in its fs/) and FHOME (F in the sandbox), on a mount with
# fs_cache_timeout=60 (the race story needs the kernel to keep a name it
# looked up while the sandbox changes it).

# Every request the fake counted since the last reset.
requests_total() { fake_get /_fake/counters | python3 -c 'import json,sys; print(sum(json.load(sys.stdin).values()))'; }
# ... but the commands (the queue's timer applies what waits a second after
# the last op: on a loaded machine, while the test still counts)
# (and but the lease timer's extension of the sandbox's lifetime, e2b's
# POST /sandboxes/:id/timeout, which may fall in any window: a flake)
requests_but_commands() {
	fake_get /_fake/counters | python3 -c 'import json,sys; print(sum(v for k, v in json.load(sys.stdin).items() if "process" not in k.lower() and not k.endswith("/timeout")))'
}

# rm_cost PATH SANDBOX-PATH: the requests of `rm -rf PATH` and of the fsync
# after it, which applies the queue (daytona has no timer); then whether
# the sandbox still has it (into $WORK/rm-left).
rm_cost() {
	echo anchor >"$F/.rm-anchor"
	python3 - "$FAKE_URL" "$1" "$F/.rm-anchor" <<'PY'
import json, os, subprocess, sys, urllib.request
url, path, anchor = sys.argv[1:]
fd = os.open(anchor, os.O_RDONLY)
urllib.request.urlopen(urllib.request.Request(url + "/_fake/counters", method="DELETE")).read()
subprocess.run(["rm", "-rf", path], check=True)
os.fsync(fd)
c = json.load(urllib.request.urlopen(url + "/_fake/counters"))
print("rm -rf %s and an fsync: %s" % (path, json.dumps(c)), file=sys.stderr)
print(sum(c.values()))
PY
	lease_run "test -e $2 && echo left || echo gone" >"$WORK/rm-left"
}

story_rm_batch() {
	local n reqs dirs
	ls -l "$F" >/dev/null # the lease's first access: its watch, the owner names

	# A tree of 4 directories of 40 files, each with a subdirectory of 10.
	lease_run "mkdir -p $FHOME/rmt && cd $FHOME/rmt && for d in 1 2 3 4; do mkdir -p d\$d/sub;
		for f in \$(seq 1 40); do echo \$f >d\$d/f\$f; done;
		for f in \$(seq 1 10); do echo \$f >d\$d/sub/s\$f; done; done; find . | wc -l" >"$WORK/n"
	n=$(cat "$WORK/n")
	eq "the tree has 209 entries" "$n" 209
	reqs=$(rm_cost "$F/rmt" "$FHOME/rmt")
	log "rm -rf of $n entries: $reqs requests"
	ok "rm -rf of $n entries: at most 0.1 request per entry ($reqs)" test "$((reqs * 10))" -le "$n"
	ok "... gone from the mount" test ! -e "$F/rmt"
	eq "... and from the sandbox" "$(cat "$WORK/rm-left")" gone
	ok "... nothing in the error file" sh -c "! grep -q rmt '$L/error'"

	# A .git: many small directories (objects/XX, two or three entries each):
	# a listing per directory would be 0.45 request per entry; the walk's
	# listings come in bulk (fs_walk.c).
	lease_run "rm -rf $FHOME/rmg && mkdir -p $FHOME/rmg && cd $FHOME/rmg &&
		for d in 1 2 3 4 5; do mkdir d\$d; for f in \$(seq 1 20); do echo \$d.\$f >d\$d/f\$f; done; done &&
		git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm x &&
		echo \$(find .git | wc -l) \$(find .git -type d | wc -l)" >"$WORK/n"
	read -r n dirs <"$WORK/n"
	reqs=$(rm_cost "$F/rmg/.git" "$FHOME/rmg/.git")
	log "rm -rf .git: $n entries in $dirs directories: $reqs requests ($((reqs * 100 / n))/100 per entry)"
	ok "rm -rf .git of $n entries in $dirs directories: at most 0.1 request per entry ($reqs)" \
		test "$((reqs * 10))" -le "$n"
	eq "... gone from the sandbox" "$(cat "$WORK/rm-left")" gone
}

# rmdir: ENOTEMPTY at once where a name is left; queued where every name
# was just unlinked, and then: not listed, made again by mkdir, gone for a run.
story_rmdir_queued() {
	mkdir "$F/rd" "$F/re"
	echo a >"$F/rd/a"
	echo b >"$F/rd/b"
	echo x >"$F/re/x"
	ls "$F/rd" "$F/re" >/dev/null
	rm "$F/rd/a"
	eq "rmdir with one file left: ENOTEMPTY at once" "$(errno_of "os.rmdir('$F/rd')")" ENOTEMPTY
	rm "$F/rd/b" "$F/re/x"
	# Fresh attributes for the two (a loaded machine's seconds since the
	# mkdir would let the kernel's lookup ask again: not the rmdir's cost).
	stat "$F/rd" "$F/re" >/dev/null
	fake_reset_counters
	ok "rmdir of a directory whose files were all just unlinked" rmdir "$F/rd"
	ok "... and of another" rmdir "$F/re"
	local got
	got=$(requests_but_commands)
	[ "$got" = 0 ] || log "  (requests: $(fake_get /_fake/counters))"
	eq "... queued: no request (a command may be the timer's)" "$got" 0
	ok "... ls of the parent does not show them" sh -c "! ls -a '$F' | grep -qx 'r[de]'"
	ok "... stat says ENOENT" sh -c "! stat '$F/rd' 2>/dev/null"
	ok "... mkdir of the same name works" mkdir "$F/re"
	ok "... and a file in it" sh -c "echo new >'$F/re/y'"
	eq "... a run sees the first gone, the second new (no x)" \
		"$(lease_run "test -e $FHOME/rd && echo rd; ls -A $FHOME/re")" y
	eq "... and nothing in the error file about them" "$(grep -c "/r[de]" "$L/error" 2>/dev/null || :)" 0
	rm -rf "$F/re"
}

# Ordering: what comes after a queued removal of the same name waits for it.
story_rm_ordering() {
	local i
	echo one >"$F/same"
	cat "$F/same" >/dev/null
	rm "$F/same"
	echo two >"$F/same"
	eq "unlink, then create the same name at once: the new content" "$(cat "$F/same")" two
	eq "... in the sandbox too" "$(lease_run "cat $FHOME/same")" two
	# rm -rf, then tar x of the same tree, at once, three times
	mkdir -p "$WORK/tt/tr/a/b"
	for i in 1 2 3; do echo "$i" >"$WORK/tt/tr/a/f$i" && echo "$i" >"$WORK/tt/tr/a/b/g$i"; done
	tar -C "$WORK/tt" -cf "$WORK/tr.tar" tr
	tar -C "$F" -xf "$WORK/tr.tar"
	for i in 1 2 3; do
		rm -rf "$F/tr" && tar -C "$F" -xf "$WORK/tr.tar" || break
	done
	eq "rm -rf, then tar x of the same tree: all there" \
		"$(lease_run "cd $FHOME && find tr | sort | tr '\n' ' '")" \
		"$(cd "$WORK/tt" && find tr | sort | tr '\n' ' ')"
	rm -rf "$F/tr"
	mkdir -p "$F/md/sub"
	ls "$F/md" >/dev/null
	rm -rf "$F/md"
	ok "rm -rf, then mkdir -p of the same tree" mkdir -p "$F/md/sub"
	eq "... the sandbox has it" "$(lease_run "test -d $FHOME/md/sub && echo yes")" yes
	rm -rf "$F/md"
}

# A removal that meets a sandbox-side change: a file made a directory by a
# process of the sandbox after the kernel looked it up. The queued `rm -f`
# refuses it, the failure is reported against its path in `error`, and the
# other removals of the same batch are done.
story_rm_race() {
	echo x >"$F/race"
	echo y >"$F/other"
	lease_run "nohup sh -c 'sleep 3; rm -f $FHOME/race; mkdir $FHOME/race; touch $FHOME/race/keep' >/dev/null 2>&1 &" >/dev/null
	stat "$F/race" "$F/other" >/dev/null # the kernel keeps both names (fs_cache_timeout=60)
	sleep 6
	eq "unlink of a name the sandbox made a directory meanwhile: 0 (queued)" \
		"$(errno_of "os.unlink('$F/race'); os.unlink('$F/other')")" OK
	eq "... a run: the other is gone, the directory stays" \
		"$(lease_run "ls -d $FHOME/other $FHOME/race/keep 2>/dev/null")" "$FHOME/race/keep"
	ok "... the error file names the path and why" grep -q "unlink $FHOME/race.*Is a directory" "$L/error"
	ok "... not the other" sh -c "! grep -q 'unlink $FHOME/other' '$L/error'"
	lease_run "rm -rf $FHOME/race" >/dev/null
}

# rm_test_main e2b|daytona SANDBOX-HOME: the whole test on that provider's fake.
rm_test_main() {
	start_fake "$1"
	mount_sbxfs -o fs_cache_timeout=60
	L=$MNT/rm
	ok "mkdir creates a $1 lease" mkdir "$L"
	F=$L/fs$2
	FHOME=$2
	story_rm_batch
	story_rmdir_queued
	story_rm_ordering
	story_rm_race
	finish
}
