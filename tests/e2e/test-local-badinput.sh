#!/bin/bash
# Bad input gets a precise errno and a line in the right `error` file, and
# the mount keeps working afterwards.
. "$(dirname "$0")/lib.sh"
mount_sbxfs
L=$MNT/bad
mkdir "$L"

eq "ctl garbage" "$(errno_of_write "$MNT/ctl" "frobnicate now
")" "EINVAL"
ok "error names the bad command" grep -q 'unknown command "frobnicate"' "$MNT/error"
eq "malformed spec JSON" "$(errno_of_write "$MNT/ctl" "{\"name\": \"x\", \"spec\": {oops}")" "EINVAL"
ok "error explains the JSON" grep -q "malformed spec JSON" "$MNT/error"
eq "spec with an unknown key" "$(errno_of_write "$MNT/ctl" "{\"name\": \"x\", \"spec\": {\"resources\": {\"gpus\": 1}}}")" "EINVAL"
ok "error names the key" grep -q 'resources.gpus' "$MNT/error"
ok "no lease was created by bad specs" test ! -e "$MNT/x"
# A JSON request waited for close(), whose errors bash ignores ($? 0).
eq "echo BAD-JSON > ctl: bash sees the failure" \
	"$(bash -c "echo '{\"name\": \"x\", \"spec\": {oops}}' > '$MNT/ctl'" 2>/dev/null; echo $?)" 1
eq "echo JSON-WITH-UNKNOWN-KEY > ctl: the same" \
	"$(bash -c "echo '{\"name\": \"x\", \"spec\": {\"gpus\": 1}}' > '$MNT/ctl'" 2>/dev/null; echo $?)" 1
ok "... still no lease x" test ! -e "$MNT/x"
eq "new with a bad key=value" "$(errno_of_write "$MNT/ctl" "new y idleTimeout=soon
")" "EINVAL"
eq "new with an unknown profile" "$(errno_of_write "$MNT/ctl" "new y profile=nope
")" "EINVAL"
ok "error names the profile" grep -q 'no profile "nope"' "$MNT/error"
# Tools probe names that are no lease: git, run anywhere in fs/ outside a
# repository, looks for HEAD (then objects) in every parent directory up to
# the mount's root. Each miss replaced the root error, so the refusal above
# read "no lease HEAD" a moment later.
stat "$MNT/HEAD" >/dev/null 2>&1
ok "a name probed after it (git's HEAD) does not hide the refusal" grep -q 'no profile "nope"' "$MNT/error"
ok "... and is said above it" sh -c "head -1 '$MNT/error' | grep -q 'lookup NOT_FOUND: no lease HEAD'"
eq "mkdir of an existing lease" "$(errno_of "os.mkdir('$L')")" "EEXIST"
eq "rmdir of an unknown lease" "$(errno_of "os.rmdir('$MNT/ghost')")" "ENOENT"
ok "error says which lease" grep -q 'no lease ghost' "$MNT/error"
eq "unknown state word" "$(errno_of_write "$L/state" "hibernate
")" "EINVAL"
ok "lease error explains the word" grep -q 'unknown word "hibernate"' "$L/error"
eq "state unchanged" "$(cat "$L/state")" "running"
# Without a newline the word waited for close(), whose errors bash ignores:
# `printf PAUSE > state` said $? 0. A word that cannot become valid fails
# the write; a whole one acts there, so its failure is seen too.
eq "printf PAUSE > state (no newline): bash sees the failure" \
	"$(bash -c "printf PAUSE > '$L/state'" 2>/dev/null; echo $?)" 1
eq "printf 'pause now' > state: the same" "$(bash -c "printf 'pause now' > '$L/state'" 2>/dev/null; echo $?)" 1
ok "... error gives the usage" grep -q "usage: pause" "$L/error"
eq "printf frobnicate > ctl: the same" "$(bash -c "printf frobnicate > '$MNT/ctl'" 2>/dev/null; echo $?)" 1
eq "write to a read-only control file" "$(errno_of "open('$L/info','w')")" "EACCES"
ok "lease error explains" grep -q 'read-only' "$L/error"
eq "write to spec after creation" "$(errno_of "open('$L/spec','w')")" "EBUSY"
eq "... and the journal records the errno the caller got" \
	"$(tail -n 1 "$L/log" | python3 -c 'import json, sys; e = json.load(sys.stdin); print(e["op"], e["errno"])')" "open 16"
eq "reading ctl" "$(errno_of "open('$MNT/ctl').read()")" "EACCES"
eq "unknown file in a lease" "$(errno_of "open('$L/nothing')")" "ENOENT"
# A new name beside the control files is EACCES, as mkdir's, with a reason:
# it was ENOENT, which says the directory is missing (`sed -i env`:
# "couldn't open temporary file ...: No such file or directory").
eq "creating a file in a lease directory" "$(errno_of "open('$L/new', 'w')")" "EACCES"
ok "... lease error says where new names go" grep -q "/bad/new: only fs/ takes new names here" "$L/error"
for how in "os.symlink('exec', '$L/s')" "os.mknod('$L/p', 0o10644)" "os.link('$L/fs/etc/hostname', '$L/h')" \
	"os.rename('$L/fs/tmp', '$L/t')" "os.mkdir('$L/d')" "os.symlink('x', '$MNT/s')"; do
	eq "EACCES: $how" "$(errno_of "$how")" "EACCES"
done
ok "... the root's error says leases are made by mkdir" grep -q "s: the mount's root takes leases, by mkdir" "$MNT/error"
eq "sed -i of env (its temporary beside env)" "$(sed -i s/x/y/ "$L/env" 2>&1 | grep -o 'Permission denied')" "Permission denied"
# Changing sbxfs's own names (a lease, a control file, fs/ itself) is
# EPERM, with the reason in the lease's error: it had none anywhere.
for how in "os.rename('$L', '$MNT/moved')|rename|/bad is sbxfs's" \
	"os.rename('$L/exec', '$L/exec2')|rename|/bad/exec is sbxfs's" \
	"os.chmod('$L', 0o777)|chmod|/bad is sbxfs's" "os.unlink('$L/exec')|unlink|/bad/exec is sbxfs's" \
	"os.chown('$L/state', 1, 1)|chown|/bad/state is sbxfs's" \
	"os.rename('$L/fs', '$L/fs2')|rename|/bad/fs is the sandbox's root"; do
	IFS='|' read -r code op why <<<"$how"
	eq "EPERM: $code" "$(errno_of "$code")" "EPERM"
	ok "... with the reason in error" grep -q "$op EXECUTION_FAILED: $why" "$L/error"
done
# ... but a chmod or chown to what they have already changes nothing and
# succeeds, as on a disk: vim saving code.py sets its mode back after the
# write, which left a refusal in error for a change nobody asked for.
cp "$L/error" "$WORK/error-before"
for how in "os.chmod('$L/exec', 0o600)" "os.chmod('$L', 0o700)" "os.chown('$L/state', 0, 0)" \
	"os.chown('$L/code.py', -1, -1)"; do
	eq "to what it has: $how" "$(errno_of "$how")" "OK"
done
eq "to what it has: chmod of fs/ (the sandbox's root)" \
	"$(errno_of "os.chmod('$L/fs', os.stat('$L/fs').st_mode & 0o7777)")" "OK"
mkdir -p "$WORK/tree/sub" && echo x >"$WORK/tree/sub/f"
chmod "$(stat -c %a "$L/fs")" "$WORK/tree"
ok "cp -a DIR/. into fs/ (a root of the same mode: cp sets it again)" cp -a "$WORK/tree/." "$L/fs/"
eq "... copied" "$(cat "$L/fs/sub/f")" x
ok "vim saves code.py (scripts/install-deps installs vim)" sh -c 'cd "$2" && timeout 20 vim -Es -u DEFAULTS -i NONE -n -c "%d" -c "normal iprint(6*7)" -c wq "$1"' \
	sh "$L/code.py" "$WORK"
eq "... which ran the cell" "$(cat "$L/code.py")" 42
eq "... and error says nothing of either" "$(diff "$WORK/error-before" "$L/error")" ""
eq "a new name under a lease that does not exist: ENOENT" "$(errno_of "open('$MNT/ghost/new', 'w')")" "ENOENT"
eq "... mkdir there: ENOENT" "$(errno_of "os.mkdir('$MNT/ghost/d')")" "ENOENT"
eq "... fs/tmp was not moved" "$(test -d "$L/fs/tmp" && echo there)" there
eq "attach to an unknown sandbox" "$(errno_of_write "$MNT/ctl" "attach z lcl-doesnotexist
")" "ENOENT"
# A second lease on a sandbox a lease holds was taken: two caches and
# queues of one sandbox's files, and either's rmdir ends the other's.
id=$(json_get "$L/info" '["sandboxId"]')
eq "attach of a sandbox another lease holds: EEXIST" "$(errno_of_write "$MNT/ctl" "attach twin $id
")" "EEXIST"
ok "... error names the lease" grep -q "sandbox $id is lease bad's already" "$MNT/error"
ok "... and no lease twin was made" test ! -e "$MNT/twin"
# Words that were dropped unseen: a misspelt provider= after attach's id,
# and the second profile= of a new (the first was taken).
eq "attach with a misspelt provider=: EINVAL" "$(errno_of_write "$MNT/ctl" "attach twin2 lcl-doesnotexist provdier=local
")" "EINVAL"
ok "... error names the word" grep -q 'expected provider=P after the sandbox id, got "provdier=local"' "$MNT/error"
eq "new with profile= twice: EINVAL" "$(errno_of_write "$MNT/ctl" "new twice profile=default profile=nope
")" "EINVAL"
ok "... saying so" grep -q 'profile= is given 2 times' "$MNT/error"
ok "... and no lease twice was made" test ! -e "$MNT/twice"
eq "new with envs.A= twice: EINVAL (the last was taken, unseen)" \
	"$(errno_of_write "$MNT/ctl" "new twice idleTimeout=5 envs.A=1 envs.B=0 envs.A=2
")" "EINVAL"
ok "... saying which" grep -q 'envs.A= is given 2 times' "$MNT/error"
ok "... and no lease twice was made" test ! -e "$MNT/twice"
# A NUL byte cut a command or env line there, unseen: "new a\0b" made
# lease a, "pause\0resume" paused, "A=1\0B=2" set A alone (exec and code
# refused it already).
echo 'A=0' >"$L/env"
printf 'A=1\0B=2\n' >"$WORK/nul-env"
printf 'new nulx\0b\n' >"$WORK/nul-ctl"
printf 'pause\0resume\n' >"$WORK/nul-state"
eq "env with a NUL byte: EINVAL" "$(errno_of_write_from "$L/env" "$WORK/nul-env")" EINVAL
eq "... env as it was" "$(cat "$L/env")" "A=0"
ok "... error says why" grep -q 'the text contains a NUL byte' "$L/error"
eq "ctl with a NUL byte: EINVAL" "$(errno_of_write_from "$MNT/ctl" "$WORK/nul-ctl")" EINVAL
ok "... no lease nulx was made" test ! -e "$MNT/nulx"
eq "state with a NUL byte: EINVAL" "$(errno_of_write_from "$L/state" "$WORK/nul-state")" EINVAL
eq "... the lease still runs" "$(cat "$L/state")" running
eq "truncate of exec (the shell's >) is fine" "$(errno_of "open('$L/exec','w').close()")" "OK"
echo 'echo fine' >"$L/exec"
eq "the mount still works" "$(cat "$L/exec")" "fine"
# A refused lease name says which rule it breaks (it said the character rule for all).
for case in "ctl:one of the mount's own files" ".x:it begins with . or -" "a%b:only letters, digits"; do
	eq "new ${case%%:*}: EINVAL" "$(errno_of_write "$MNT/ctl" "new ${case%%:*}
")" EINVAL
	ok "... error says why: ${case#*:}" grep -qF "bad lease name \"${case%%:*}\": ${case#*:}" "$MNT/error"
done
# Resources past any machine were taken: memoryMB or diskMB of 2^63 MB
# overflowed the cgroup limit's and the disk image's byte count (the image's
# negative size then fell back to a tmpfs of no real size: `df /` said 16
# EiB), and a duration past a long wrapped. A local lease too small for its
# own init and slirp4netns failed saying slirp4netns was not installed.
for kv in resources.memoryMB=99999999999999999999 resources.diskMB=9223372036854775807 \
	resources.diskMB=16777217 resources.cpu=1000001 runTimeout=99999999999; do
	eq "new r $kv: EINVAL" "$(errno_of_write "$MNT/ctl" "new r $kv
")" EINVAL
	ok "... error says the range of ${kv%%=*}" grep -qE "\"${kv%%=*}\" (is out of range \(at most|must be seconds)" "$MNT/error"
done
# A JSON request took what it did not know: a misspelt "profile" (or one
# not a string) made a lease of the default profile, and of two equal
# keys the last won (the config refuses both already).
eq 'ctl {"profle": ...}: EINVAL' "$(errno_of_write "$MNT/ctl" '{"name": "k1", "profle": "x"}')" EINVAL
ok "... error names the key" grep -q 'unknown key "profle"' "$MNT/error"
eq 'ctl {"profile": 5}: EINVAL' "$(errno_of_write "$MNT/ctl" '{"name": "k2", "profile": 5}')" EINVAL
eq 'ctl with a key twice: EINVAL' \
	"$(errno_of_write "$MNT/ctl" '{"name": "k3", "spec": {"resources": {"memoryMB": 9, "memoryMB": 512}}}')" EINVAL
ok "... error says duplicate" grep -q 'duplicate object key' "$MNT/error"
ok "... and no lease k1, k2 or k3 was made" test ! -e "$MNT/k1" -a ! -e "$MNT/k2" -a ! -e "$MNT/k3"
eq "a JSON duration of 1e300 s: EINVAL" "$(errno_of_write "$MNT/ctl" '{"name": "r", "spec": {"idleTimeout": 1e300}}')" EINVAL
python3 -c 'import json; print(json.dumps({"name": "r", "spec": {"envs": {"V%d" % i: "1" for i in range(20000)}}}))' >"$WORK/envs.json"
eq "a spec of 20,000 envs (no run could carry them): E2BIG" "$(errno_of_write_from "$MNT/ctl" "$WORK/envs.json")" E2BIG
ok "... error says why" grep -q '"envs" has more than 16384 variables' "$MNT/error"
eq "new r resources.memoryMB=1: EINVAL" "$(errno_of_write "$MNT/ctl" "new r resources.memoryMB=1
")" EINVAL
ok "... error says the least a local lease needs" grep -q 'resources.memoryMB 1 is too small: a local sandbox needs at least 16' "$MNT/error"
ok "... no lease r was made" test ! -e "$MNT/r"
# A profile on a provider this build lacks was said only at its first mkdir.
printf '{"profiles": {"p": {"provider": "nope"}}}\n' >"$WORK/badprov.json"
mkdir -p "$WORK/m2"
out=$(timeout 20 "$SBXFS" -o "state_dir=$WORK/s2,config=$WORK/badprov.json" "$WORK/m2" 2>&1)
rc=$?
mountpoint -q "$WORK/m2" && fusermount3 -u "$WORK/m2"
eq "a profile naming an unknown provider: the mount is refused" "$rc" 1
eq "... saying which" "$(echo "$out" | grep -c 'profile "p": unknown provider "nope" (known: local')" 1
printf '{"providers": {"local": {"diskMB": 99999999999999}}}\n' >"$WORK/bigdisk.json"
out=$(timeout 20 "$SBXFS" -o "state_dir=$WORK/s2,config=$WORK/bigdisk.json" "$WORK/m2" 2>&1)
rc=$?
mountpoint -q "$WORK/m2" && fusermount3 -u "$WORK/m2"
eq "providers.local.diskMB past 16 TiB: the mount is refused, saying the bound" \
	"$rc:$(echo "$out" | grep -c 'providers.local.diskMB: at most 16777216')" 1:1
# fs_cache_timeout= (empty) and =nan were taken: as 0, and as NaN seconds.
# Any option given empty is refused as such (an unset variable), one rule for all.
for o in fs_cache_timeout= fs_cache_timeout=nan fs_cache_timeout=-1 writeback= writeback=x \
	prefetch= symlinks= log_level= idmap= idmap=users alive_check= alive_check=-1 alive_check=1h; do
	out=$(timeout 20 "$SBXFS" -o "state_dir=$WORK/s2,$o" "$WORK/m2" 2>&1)
	rc=$?
	mountpoint -q "$WORK/m2" && fusermount3 -u "$WORK/m2"
	case $o in
	*=) why="-o $o is empty (an unset variable?)" ;;
	idmap=*) why='idmap must be none or user' ;;
	*) why='must be 0..' ;;
	esac
	eq "-o $o: the mount is refused, saying why" "$rc:$(echo "$out" | grep -cF -e "$why")" 1:1
done
# A log that cannot be written lost every line without a word (a full
# disk under STATE_DIR/sbxfs.log, a closed pipe): the root's error says so.
timeout 20 "$SBXFS" -o "state_dir=$WORK/s2,log=/dev/full" "$WORK/m2"
ok "-o log=/dev/full: the root's error says the log cannot be written" \
	grep -q "log INTERNAL: the log (/dev/full) cannot be written: No space left on device; its lines are lost until it can" "$WORK/m2/error"
mountpoint -q "$WORK/m2" && fusermount3 -u "$WORK/m2"
# A log file moved away (logrotate's default: rename, then expect a new
# one): every later line went to the renamed file, the new one never made.
timeout 20 "$SBXFS" -o "state_dir=$WORK/s2,log=$WORK/rot.log" "$WORK/m2"
ok "-o log=FILE: the mount's first line is there" grep -q "info: mounted at $WORK/m2" "$WORK/rot.log"
mv "$WORK/rot.log" "$WORK/rot.log.1"
sleep 1.1 # the path is checked at most once a second
echo "frob" >"$WORK/m2/ctl" 2>/dev/null # a line: the refusal's warning
ok "... moved away: the next lines go to a new file at its path" \
	wait_for 5 grep -q 'warning: ctl: unknown command "frob"' "$WORK/rot.log"
eq "... made 0600" "$(stat -c %a "$WORK/rot.log" 2>&1)" 600
ok "... and not to the moved one" sh -c "! grep -q 'frob' '$WORK/rot.log.1'"
# ... but the daemon (root) follows no link put there in its stead: whoever
# can write that directory would steer its appends into any file.
mv "$WORK/rot.log" "$WORK/rot.log.2"
ln -s "$WORK/victim" "$WORK/rot.log"
sleep 1.1
echo "frob2" >"$WORK/m2/ctl" 2>/dev/null
mountpoint -q "$WORK/m2" && fusermount3 -u "$WORK/m2"
ok "a symbolic link in the moved log's place is not followed" wait_for 5 test ! -e "$WORK/victim"
ok "... the lines stay in the file open before" wait_for 5 grep -q 'frob2' "$WORK/rot.log.2"
# suid and dev were passed to the kernel: a file a sandbox's root made
# setuid-root, or a node of the host's disk, would then run or open as such.
for o in suid dev; do
	timeout 20 "$SBXFS" -o "state_dir=$WORK/s2,$o" "$WORK/m2" 2>/dev/null
	eq "-o $o: the mount is nosuid,nodev all the same" \
		"$(mount_options "$WORK/m2" | grep -cxE 'nosuid|nodev')" 2
	mountpoint -q "$WORK/m2" && fusermount3 -u "$WORK/m2"
done
# What the daemon reads once mounted lay behind its own mount: its first
# read waited for the daemon itself, before its loop ran, and every process
# that touched the mount hung (`sbxfs ~` with the default state dir).
# Each case runs in the foreground with a bound: a daemon still there after
# 10 s has mounted (or hangs), and is killed.
refused_mount() { # refused_mount WHAT PATTERN COMMAND... MOUNTPOINT: the mount is refused, saying PATTERN
	local what=$1 pat=$2 pid rc
	shift 2
	"$@" >"$WORK/behind.out" 2>&1 &
	pid=$!
	if wait_for 10 test ! -e "/proc/$pid"; then
		wait "$pid"
		rc=$?
	else
		kill -9 "$pid"
		wait "$pid" 2>/dev/null
		umount -l "${@: -1}" 2>/dev/null # the mount point, last
		rc=mounted
	fi
	eq "$what: the mount is refused" "$rc" 1
	ok "... saying why" grep -qE -e "$pat" "$WORK/behind.out"
}
mkdir -p "$WORK/m3"
ln -s m3 "$WORK/m3link"
inside="is inside the mount point $WORK/m3, so the mount would hide it from sbxfs itself"
refused_mount "state_dir under the mount point" "state dir $WORK/m3/st $inside" \
	"$SBXFS" -f -o "state_dir=$WORK/m3/st" "$WORK/m3"
refused_mount "... through a symlink" "state dir $WORK/m3link/st $inside" \
	"$SBXFS" -f -o "state_dir=$WORK/m3link/st" "$WORK/m3"
refused_mount "sbxfs ~ (the default state dir under it)" "state dir $WORK/m3/.local/state/sbxfs $inside" \
	env -u XDG_STATE_HOME -u XDG_CONFIG_HOME HOME="$WORK/m3" "$SBXFS" -f "$WORK/m3"
echo '{}' >"$WORK/m3/c.json"
refused_mount "the config file under the mount point" "config file $WORK/m3/c.json $inside" \
	"$SBXFS" -f -o "state_dir=$WORK/s3,config=$WORK/m3/c.json" "$WORK/m3"
printf '{"providers": {"e2b": {"keyFile": "%s"}}}\n' "$WORK/m3/key" >"$WORK/keyin.json"
refused_mount "a provider's keyFile under the mount point" "providers.e2b.keyFile $WORK/m3/key $inside" \
	"$SBXFS" -f -o "state_dir=$WORK/s3,config=$WORK/keyin.json" "$WORK/m3"
# A config that is not a regular file: a FIFO hung the start; a pipe
# (`config=<(...)`) was read by the checks, then empty once mounted, where
# the daemon failed after `sbxfs` had exited 0 (only the log said so).
mkfifo "$WORK/fifo.json"
refused_mount "a FIFO as the config" "config $WORK/fifo.json is not a regular file" \
	"$SBXFS" -f -o "state_dir=$WORK/s3,config=$WORK/fifo.json" "$WORK/m3"
refused_mount "a pipe as the config" "config /dev/fd/[0-9]+ is not a regular file" \
	bash -c '"$1" -o "state_dir=$2,config=$3" "$4"' _ "$SBXFS" "$WORK/s3" <(echo '{}') "$WORK/m3"
# `-o state_dir=$STATE` with STATE unset: the empty path was the working
# directory, where the lease table and caches went. (Run from a scratch
# directory, so that an old build's state lands there.)
mkdir -p "$WORK/cwd"
refused_mount "an empty state_dir= (an unset variable)" "-o state_dir= is empty" \
	bash -c 'cd "$1" && exec "$2" -f -o state_dir= "$3"' _ "$WORK/cwd" "$SBXFS" "$WORK/m3"
ok "... and no state was made in the working directory" test -z "$(ls -A "$WORK/cwd")"
refused_mount "an empty log=" "-o log= is empty" "$SBXFS" -f -o "state_dir=$WORK/s3,log=" "$WORK/m3"
# libfuse mounts on a regular file too, where fs/'s root (a directory) fails EIO.
: >"$WORK/file"
refused_mount "a regular file as the mount point" "mount point $WORK/file is not a directory" \
	"$SBXFS" -f -o "state_dir=$WORK/s3" "$WORK/file"
ok "... and nothing was left mounted there" test "$(mount_options "$WORK/m3" | wc -l)" = 0
ok "... nor on the file" test "$(mount_options "$WORK/file" | wc -l)" = 0
printf '{"providers": {"e2b": {"keyFile": "key"}}}\n' >"$WORK/keyrel.json"
refused_mount "a relative keyFile (the daemon reads it from /)" 'providers.e2b.keyFile "key" must be an absolute path' \
	"$SBXFS" -f -o "state_dir=$WORK/s3,config=$WORK/keyrel.json" "$WORK/m3"
# A config or a state dir another user can change was taken: the config's
# providers.local.initPath runs as the daemon's user (root here), the state
# dir's lease table says what to attach and which local disks to mount
# (uid 65534 stands for the other user; /tmp's sticky bit is fine).
echo '{}' >"$WORK/theirs.json" && chmod 644 "$WORK/theirs.json" && chown 65534 "$WORK/theirs.json"
refused_mount "a config another user owns" \
	"config $WORK/theirs.json \(uid 65534, mode 0644\) can be changed by another user than uid 0" \
	"$SBXFS" -f -o "state_dir=$WORK/s3,config=$WORK/theirs.json" "$WORK/m3"
echo '{}' >"$WORK/open.json" && chmod 666 "$WORK/open.json"
refused_mount "a config others may write" "config $WORK/open.json \(uid 0, mode 0666\) can be changed" \
	"$SBXFS" -f -o "state_dir=$WORK/s3,config=$WORK/open.json" "$WORK/m3"
mkdir -p "$WORK/shared/st" && chmod 777 "$WORK/shared" && echo '{}' >"$WORK/shared/c.json"
refused_mount "a config in a directory others may write" \
	"config $WORK/shared/c.json is in $WORK/shared \(uid 0, mode 0777\), where another user than uid 0 can replace it" \
	"$SBXFS" -f -o "state_dir=$WORK/s3,config=$WORK/shared/c.json" "$WORK/m3"
mkdir -m 755 "$WORK/theirstate" && chown 65534 "$WORK/theirstate"
refused_mount "a state dir another user owns" \
	"state dir $WORK/theirstate \(uid 65534, mode 0755\) can be changed by another user" \
	"$SBXFS" -f -o "state_dir=$WORK/theirstate" "$WORK/m3"
ok "... and nothing was written in it" test -z "$(ls -A "$WORK/theirstate")"
refused_mount "a state dir in a directory others may write" "state dir $WORK/shared/st is in $WORK/shared" \
	"$SBXFS" -f -o "state_dir=$WORK/shared/st" "$WORK/m3"
# ... and the init program a config or $SBXFS_INIT names, run as root.
cp "${SBXFS_INIT:-$(dirname "$SBXFS")/sbxfs-init}" "$WORK/theirinit" && chown 65534 "$WORK/theirinit"
echo "{\"providers\": {\"local\": {\"initPath\": \"$WORK/theirinit\"}}}" >"$WORK/init.json"
mkdir -p "$WORK/m4"
timeout 20 "$SBXFS" -o "state_dir=$WORK/s4,config=$WORK/init.json" "$WORK/m4"
add_cleanup "fusermount3 -u '$WORK/m4' 2>/dev/null"
eq "an initPath another user owns: the lease is refused" "$(errno_of "os.mkdir('$WORK/m4/x')")" EACCES
ok "... saying why" grep -q "providers.local.initPath $WORK/theirinit (uid 65534, mode 0755) can be changed by another user" "$WORK/m4/error"
fusermount3 -u "$WORK/m4"
# A relative state_dir was locked as ./NAME and used as /NAME once mounted
# (the daemon runs from /): the lease table went to /NAME, and two mounts
# from two directories shared it.
rel=rel-state-$$
(cd "$WORK" && timeout 20 "$SBXFS" -o "state_dir=$rel" "$WORK/m3")
eq "a relative state_dir: the mount comes up" "$(wait_for 10 test -f "$WORK/m3/README" && echo up)" up
mkdir "$WORK/m3/r1"
ok "... its lease table is where it was named, beside the lock" test -f "$WORK/$rel/leases.json" -a -f "$WORK/$rel/lock"
ok "... and nothing went to /$rel" test ! -e "/$rel"
timeout 30 rmdir "$WORK/m3/r1"
fusermount3 -u "$WORK/m3"
[ -e "/$rel" ] && rm -rf --one-file-system "/${rel:?}"
finish
