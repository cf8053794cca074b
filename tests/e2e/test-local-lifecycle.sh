#!/bin/bash
# Lifecycle on the local provider: pause freezes (a spinning counter stops
# advancing), resume thaws, kill ends it, rmdir forgets it, and an unmount
# plus mount re-attaches with files and processes intact.
. "$(dirname "$0")/lib.sh"
mount_sbxfs
L=$MNT/life
mkdir "$L"
# init's errors go through a pipe (no host file in the lease): the daemon,
# the one after a restart too, must be its reader, or what init writes is lost.
log_pipe_read() {
	local init p
	init=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["init_pid"])' "$STATE"/local/lcl-*/lease.json)
	p=$(readlink "/proc/$init/fd/2") && case $p in pipe:*) ;; *) return 1 ;; esac &&
		for f in /proc/"$SBXFS_PID"/fd/*; do [ "$(readlink "$f")" = "$p" ] && return 0; done
	return 1
}

echo 'nohup sh -c "i=0; while :; do i=\$((i+1)); printf %08d \$i > /root/counter; sleep 0.1; done" >/dev/null 2>&1 &' >"$L/exec"
sleep 1
ok "counter advances while running" test "$(cat "$L/fs/root/counter")" -gt 2
echo pause >"$L/state"
eq "state says paused" "$(cat "$L/state")" "paused"
a=$(cat "$L/fs/root/counter")
sleep 1.5
b=$(cat "$L/fs/root/counter")
eq "a paused sandbox's counter stops" "$b" "$a"
ok "status shows paused" grep -q "^life local paused" "$MNT/status"
ok "info says paused without touching the sandbox" grep -q '"state": "paused"' "$L/info"
echo resume >"$L/state"
eq "state says running" "$(cat "$L/state")" "running"
sleep 1
c=$(cat "$L/fs/root/counter")
ok "counter advances again after resume" test "$c" -gt "$b"

# Access to a paused lease resumes it first.
echo pause >"$L/state"
echo 'echo awake' >"$L/exec"
eq "a run on a paused lease resumes it" "$(cat "$L/exec")" "awake"
eq "state after auto-resume" "$(cat "$L/state")" "running"
ok "log journals the transitions" grep -q '"to":"paused"' "$L/log"

# Remount: the lease, its files and its background processes survive.
ok "init's log pipe is read by the daemon" log_pipe_read
echo 'echo keep > /root/keep.txt' >"$L/exec"
printf 'class H:\n    def _repr_html_(self): return "<b>before</b>"\nH()\n' >"$L/code.py"
eq "a rich output lands in results/" "$(ls "$L/results")" "1.html"
echo pause >"$L/state"
unmount_sbxfs
ok "daemon exited cleanly on unmount" test "${DAEMON_STATUS:-1}" = 0
mount_sbxfs
eq "lease back after remount" "$(cat "$L/state")" "paused"
eq "files kept across remount" "$(cat "$L/fs/root/keep.txt")" "keep"
printf 'class H:\n    def _repr_html_(self): return "<i>after</i>"\nH()\n' >"$L/code.py"
eq "results/ numbering goes on after a remount" "$(ls "$L/results")" "$(printf '1.html\n2.html')"
echo 'ps -eo args' >"$L/exec"
ok "background process kept across remount" grep -q "while :" "$L/exec"
eq "state running after use" "$(cat "$L/state")" "running"
ok "init's log pipe is read by the new daemon" log_pipe_read

# SIGTERM unmounts too, and leaves no mount behind.
kill -TERM "$SBXFS_PID"
wait_for 10 sh -c "! grep -q ' $MNT ' /proc/mounts"
ok "SIGTERM unmounts" sh -c "! grep -q ' $MNT ' /proc/mounts"
wait "$SBXFS_PID" 2>/dev/null
SBXFS_PID=
mount_sbxfs
eq "lease back after SIGTERM" "$(cat "$L/state")" "running"

echo kill >"$L/state"
eq "state says killed" "$(cat "$L/state")" "killed"
eq "fs/ of a killed lease" "$(errno_of "os.stat('$L/fs/root')")" "ENOENT"
ok "rmdir a killed lease" rmdir "$L"
ok "gone" test ! -e "$L"

# Killing or removing a lease while a file of it is being read: the kernel's
# invalidation of that file's pages waits for the page the read holds, and
# the read's request waited for the lease lock the kill held: the mount hung
# for good (in most tries; two files read at once make the race likely).
gone_while_read() { # gone_while_read NAME COMMAND: COMMAND ends the lease while two sparse 8 GiB files are read
	mkdir "$MNT/$1" && truncate -s 8G "$MNT/$1/fs/root/big" "$MNT/$1/fs/root/big2" || return 1
	cat "$MNT/$1/fs/root/big" >/dev/null 2>&1 &
	READER=$!
	cat "$MNT/$1/fs/root/big2" >/dev/null 2>&1 &
	READER="$READER $!"
	sleep 0.5
	# Not `timeout`: a process hung in the mount ignores SIGKILL, and so
	# does the wait for it. Hung: touch nothing more of the mount.
	sh -c "$2" &
	local p=$! i
	for i in $(seq 200); do kill -0 $p 2>/dev/null || break; sleep 0.1; done
	kill -0 $p 2>/dev/null && { HUNG=1 && return 1; }
	wait $p || return 1
	kill $READER 2>/dev/null
	wait $READER 2>/dev/null
	[ ! -d "$MNT/$1" ] || rmdir "$MNT/$1"
}
HUNG=
ok "rmdir of a lease while a file of it is read" gone_while_read r1 "rmdir '$MNT/r1'"
[ -n "$HUNG" ] || ok "kill of a lease while a file of it is read" gone_while_read r2 "echo kill >'$MNT/r2/state'"
if [ -z "$HUNG" ]; then
	ok "... the mount still answers" test -f "$MNT/README"
else
	ok "the mount did not hang" false
	# so the clean-up can go on: abort the connection (fusectl)
	mountpoint -q /sys/fs/fuse/connections || mount -t fusectl none /sys/fs/fuse/connections
	echo 1 >"/sys/fs/fuse/connections/$(awk -v m="$MNT" '$5 == m { split($3, d, ":"); print d[2] }' /proc/self/mountinfo)/abort"
	kill $READER 2>/dev/null
	wait $READER 2>/dev/null
fi
# kill while a run goes on: the writer's close said EIO "init hung up".
if [ -z "$HUNG" ]; then
	mkdir "$MNT/kr"
	errno_of "fd = os.open('$MNT/kr/exec', os.O_WRONLY); os.write(fd, b'sleep 5\n'); os.close(fd)" >"$WORK/kr.out" &
	KW=$!
	wait_for 10 test -d "$MNT/kr/runs/1"
	sleep 0.3
	echo kill >"$MNT/kr/state"
	wait $KW
	eq "kill of a lease while its run goes on: the writer's close is ENOENT" "$(cat "$WORK/kr.out")" ENOENT
	ok "... the run's result says the lease was killed" grep -q "lease kr was killed while the command ran" "$MNT/kr/runs/1/result"
	rmdir "$MNT/kr"
fi

# SIGTERM (systemctl stop) while a writer waits for a long run: the daemon
# stopped only when the run ended (libfuse ends its loop once every request
# has been answered, and the writer's close waited for the run).
if [ -z "$HUNG" ]; then
	mkdir "$MNT/st"
	(echo 'sleep 120' >"$MNT/st/exec") 2>/dev/null &
	W=$!
	run_started() { [ -d "$MNT/st/runs/1" ]; }
	wait_for 10 run_started
	sleep 0.5
	kill -TERM "$SBXFS_PID"
	daemon_gone() { ! kill -0 "$SBXFS_PID"; }
	ok "SIGTERM while a writer waits for a 120 s run: the daemon stops within 10 s" wait_for 10 daemon_gone
	ok "... the mount is gone" sh -c "! mountpoint -q '$MNT'"
	ok "... the log says why" grep -q "stopping on Terminated: unmounting" "$WORK/sbxfs.log"
	wait_for 10 sh -c "! kill -0 $W"
	wait $W 2>/dev/null
	wait "$SBXFS_PID" 2>/dev/null
	SBXFS_PID=
	mount_sbxfs
	ok "... the run was stopped, and its record says so" \
		grep -q "the command was stopped: sbxfs is stopping" "$MNT/st/runs/1/result"
	rmdir "$MNT/st"
fi
# The init of a lease dies without a kill of ours (killed on the host; a
# host restart, which the unmounted case stands for): before, the probe or
# the next mount's attach reclaimed its storage, disk image and all, and
# what the user had written in fs/ was deleted without a word. Now the disk
# image is kept in STATE/unsaved/ and the lease's error says where.
init_of() { json_get "$1/info" '["sandbox"]["init_pid"]'; }
image_has() { # image_has IMAGE PATH TEXT: PATH (in the lease) holds TEXT in the kept image
	[ "$(debugfs -R "cat /upper$2" "$1" 2>/dev/null)" = "$3" ]
}
kept_image() { sed -n 's/.*its disk is kept in \([^ ]*\.ext4\).*/\1/p' "$1/error"; }
mkdir "$MNT/dead"
echo 'my work' >"$MNT/dead/fs/root/work.txt"
if grep -q '"disk": "ext4"' "$MNT/dead/info"; then
	kill -9 "$(init_of "$MNT/dead")"
	ok "init killed on the host: the lease becomes reclaimed" wait_for 10 grep -qx reclaimed "$MNT/dead/state"
	ok "... its error file says the disk is kept" wait_for 5 grep -q "its init died.*its disk is kept in $STATE/unsaved/dead-" "$MNT/dead/error"
	img=$(kept_image "$MNT/dead")
	ok "... and the kept image holds what was written in fs/" image_has "$img" /root/work.txt 'my work'
	ok "rmdir ends the lease" rmdir "$MNT/dead"
	ok "... the image stays" test -f "$img"
	# Unmounted while its init died (the daemon restarted, its mounts still
	# there), then a host restart (nothing mounted, no cgroup): before, both
	# were reclaimed at the next mount, the disk set apart in unsaved/; now
	# a new init starts on the lease's own disk, as docker start does.
	# dies_unmounted NAME: the daemon unmounted, then lease NAME's init killed (sets init, id)
	dies_unmounted() {
		init=$(init_of "$MNT/$1")
		id=$(json_get "$MNT/$1/info" '["sandboxId"]')
		unmount_sbxfs
		kill -9 "$init"
		wait_for 5 sh -c "! kill -0 $init 2>/dev/null"
	}
	mkdir "$MNT/dead2"
	echo 'written before the restart' >"$MNT/dead2/fs/root/w2.txt"
	dies_unmounted dead2
	mount_sbxfs
	eq "init died while unmounted: running again at mount" "$(cat "$MNT/dead2/state")" running
	ok "... with a new init" test "$(init_of "$MNT/dead2")" != "$init"
	eq "... on its own disk: the file is there" "$(cat "$MNT/dead2/fs/root/w2.txt")" 'written before the restart'
	eq "... and a run sees it" "$(echo 'cat /root/w2.txt' >"$MNT/dead2/exec" && cat "$MNT/dead2/exec")" 'written before the restart'
	ok "... its error file says what was lost" grep -q "attach EXECUTION_FAILED: its init had died.*started again on its own disk; what was written is there, its processes are not" "$MNT/dead2/error"
	echo 'after' >"$MNT/dead2/fs/root/w3.txt"
	# a host restart: its init, its mounts (the loop device with them) and its cgroups gone
	dies_unmounted dead2
	umount "$STATE/local/$id/root" && umount "$STATE/local/$id/rw"
	ok "(a host restart: nothing of the lease mounted)" sh -c "! grep -q '$id' /proc/self/mountinfo"
	for d in /sys/fs/cgroup/*/sbxfs/"$id" /sys/fs/cgroup/sbxfs/"$id"; do [ -d "$d" ] && rmdir "$d"; done
	mount_sbxfs
	eq "after a host restart: running again at mount" "$(cat "$MNT/dead2/state")" running
	eq "... both files there" "$(cat "$MNT/dead2/fs/root/w2.txt" "$MNT/dead2/fs/root/w3.txt")" 'written before the restart
after'
	eq "... a run writes, fs/ reads" "$(echo 'echo new >/root/w4.txt' >"$MNT/dead2/exec"; cat "$MNT/dead2/fs/root/w4.txt")" new
	ok "... its disk is the image again, not tmpfs" grep -q '"disk": "ext4"' "$MNT/dead2/info"
	ok "rmdir ends it" rmdir "$MNT/dead2"
	ok "... and removes its storage (no image kept: a kill of ours)" test ! -e "$STATE/local/$id"
	# Paused (frozen), then its init killed while unmounted: v1 keeps a killed
	# task frozen, so the next mount found it alive and the lease paused, and
	# the first run's resume let it die under the run ($? 0, then reclaimed).
	mkdir "$MNT/dead6"
	echo 'six' >"$MNT/dead6/fs/root/w6.txt"
	echo pause >"$MNT/dead6/state"
	init=$(init_of "$MNT/dead6")
	unmount_sbxfs
	kill -9 "$init"
	mount_sbxfs
	eq "paused, its init killed while unmounted: running again at mount" "$(cat "$MNT/dead6/state")" running
	eq "... and a run sees its file" "$(echo 'cat /root/w6.txt' >"$MNT/dead6/exec" && cat "$MNT/dead6/exec")" six
	ok "rmdir it" rmdir "$MNT/dead6"
	# it cannot be started again (this mount's init exits at once): the disk is kept, as before
	mkdir "$MNT/dead5"
	echo 'fifth' >"$MNT/dead5/fs/root/w5.txt"
	dies_unmounted dead5
	cp "$CONFIG" "$WORK/config.saved"
	printf '{"providers": {"local": {"initPath": "/bin/false"}}}\n' >"$CONFIG"
	mount_sbxfs
	eq "init died while unmounted, and its new init fails: reclaimed at mount" "$(cat "$MNT/dead5/state")" reclaimed
	ok "... its error file says the disk is kept, and why it was not started" grep -q "its init died.*its disk is kept in $STATE/unsaved/dead5-.*(it could not be started again: sbxfs-init /bin/false: exited at start-up" "$MNT/dead5/error"
	ok "... and the image holds the file" image_has "$(kept_image "$MNT/dead5")" /root/w5.txt fifth
	ok "... nothing of it is left mounted" sh -c "! grep -q '$id' /proc/self/mountinfo"
	rmdir "$MNT/dead5"
	unmount_sbxfs
	cp "$WORK/config.saved" "$CONFIG"
	mount_sbxfs
	# STATE/unsaved cannot be used (a file there): the image stays beside the lease's directory
	mv "$STATE/unsaved" "$STATE/unsaved.away" && touch "$STATE/unsaved"
	mkdir "$MNT/dead3"
	echo 'third' >"$MNT/dead3/fs/root/w3.txt"
	id3=$(json_get "$MNT/dead3/info" '["sandboxId"]')
	kill -9 "$(init_of "$MNT/dead3")"
	ok "no STATE/unsaved to use: the disk is kept beside the lease's directory" \
		wait_for 10 grep -q "its disk is kept in $STATE/local/$id3.ext4" "$MNT/dead3/error"
	ok "... with the file" image_has "$STATE/local/$id3.ext4" /root/w3.txt third
	rmdir "$MNT/dead3"
	rm -f "$STATE/unsaved" && mv "$STATE/unsaved.away" "$STATE/unsaved"
else
	kill -9 "$(init_of "$MNT/dead")"
	ok "init killed on the host (tmpfs disk): reclaimed" wait_for 10 grep -qx reclaimed "$MNT/dead/state"
	ok "... its error file says the tmpfs disk is gone" wait_for 5 grep -q "its disk was tmpfs (memory) and is gone" "$MNT/dead/error"
	rmdir "$MNT/dead"
fi
finish
