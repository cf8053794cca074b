# Sourced after lib.sh by e2e tests of remote providers: starts a fake
# server (tests/fakes), points the provider's environment at it, writes a
# config whose default profile uses that provider, and stops the fake by
# pid at exit (after the mount is gone).
#   start_fake e2b|daytona [fake flags...]
#   fake_settings JSON                       the config's providers.KIND object
#   fake_get PATH / fake_post PATH JSON      the admin API (see tests/fakes/README.md)
#   counter KEY                              one request counter ("POST /filesystem.Filesystem/ListDir")
#   fake_state SANDBOX-ID                    the fake's view of it: running, paused... or gone
command -v node >/dev/null 2>&1 || { echo "SKIP: node is not installed"; exit 77; }
FAKE_PID=
FAKE_KEY=sbx-e2e-key-$$

stop_fake() {
	[ -n "$FAKE_PID" ] || return 0
	kill "$FAKE_PID" 2>/dev/null
	wait "$FAKE_PID" 2>/dev/null
	FAKE_PID=
}
add_cleanup stop_fake

start_fake() {
	local kind=$1
	rm -f "$WORK/fake.port" # a previous fake's port must not be taken for this one's
	shift
	"$top_srcdir/tests/fakes/run-fake.sh" "$kind" --port 0 --port-file "$WORK/fake.port" \
		--api-key "$FAKE_KEY" "$@" >"$WORK/fake.log" 2>&1 &
	FAKE_PID=$!
	if ! wait_for 20 test -s "$WORK/fake.port"; then
		log "the fake did not start"
		cat "$WORK/fake.log"
		exit 1
	fi
	FAKE_URL=http://127.0.0.1:$(cat "$WORK/fake.port")
	FAKE_KIND=$kind
	case $kind in
	e2b)
		export E2B_API_KEY=$FAKE_KEY E2B_API_URL=$FAKE_URL E2B_SANDBOX_URL=$FAKE_URL
		unset E2B_DOMAIN
		;;
	daytona)
		export DAYTONA_API_KEY=$FAKE_KEY DAYTONA_API_URL=$FAKE_URL/api
		unset DAYTONA_JWT_TOKEN DAYTONA_ORGANIZATION_ID DAYTONA_TARGET
		;;
	esac
	# The default profile uses the fake's provider; PROFILE_EXTRA adds JSON fields.
	printf '{"defaultProfile":"default","profiles":{"default":{"provider":"%s"%s}}}\n' \
		"$kind" "${PROFILE_EXTRA:+,$PROFILE_EXTRA}" >"$CONFIG"
}

# fake_settings JSON-OBJECT: the config's providers.KIND settings (deadlines...).
fake_settings() {
	python3 - "$CONFIG" "$FAKE_KIND" "$1" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.setdefault("providers", {})[sys.argv[2]] = json.loads(sys.argv[3])
json.dump(c, open(sys.argv[1], "w"))
PY
}
fake_get() { curl -fsS "$FAKE_URL$1"; }
fake_post() { curl -fsS -X POST -H 'Content-Type: application/json' -d "$2" "$FAKE_URL$1"; }
fake_reset_counters() { curl -fsS -X DELETE "$FAKE_URL/_fake/counters" >/dev/null; }
fake_clear_faults() { curl -fsS -X DELETE "$FAKE_URL/_fake/faults" >/dev/null; }
counter() {
	fake_get /_fake/counters | python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], 0))' "$1"
}
# fake_state ID: the fake's own view of a sandbox: its state, or "gone".
fake_state() {
	fake_get /_fake/sandboxes | python3 -c '
import json, sys
s = [x for x in json.load(sys.stdin) if x["id"] == sys.argv[1]]
print(s[0]["state"] if s else "gone")' "$1"
}

# Fault tests (tests/e2e/test-*-faults.sh). The caller sets L (the lease
# directory), F (a directory in its fs/) and FHOME (F's path in the sandbox).
#   fault_only JSON-FAULT[,JSON-FAULT]   replaces the fake's faults with these
#   errno_ms_of, write_close             (lib.sh)
#   lease_run SHELL-TEXT                 (lib.sh) runs it through exec, prints its stdout
#   fault_case / upload_case             see below; FAULT_TABLE collects the rows
fault_only() { fake_post /_fake/faults "{\"replace\":true,\"faults\":[$1]}" >/dev/null; }
error_says() { grep -q -- "$1" "$L/error" || { log "  the error file says: $(cat "$L/error")"; false; }; }
fsync_ok() { python3 -c "import os; fd = os.open('$1', os.O_RDONLY); os.fsync(fd); os.close(fd)"; }
close_ok() { python3 -c "import os; fd = os.open('$1', os.O_RDWR); os.close(fd)"; }
FAULT_TABLE=
fault_row() { FAULT_TABLE="$FAULT_TABLE$(printf '\n  %-40s %-10s %6s ms' "$1" "$2" "$3")"; }

# fault_case NAME FAULT STATEMENT ERRNO MAX_MS ERROR_TEXT: with FAULT on, the
# statement fails with ERRNO within MAX_MS, the lease's error file is
# rewritten and names ERROR_TEXT, and the mount still answers.
# With FAULT_WARM (python code) set, the ancestors of the statement's path
# are made fresh first: past the daemon's attribute TTL (2 s), FAULT_WARM
# walks them again (so the daemon stats each: fresh there for 2 s, in the
# kernel for fs_cache_timeout, 1 s), and the same python process turns the
# fault on and runs the statement at once. Otherwise, on a loaded machine,
# the kernel's entry for an ancestor (fs/ itself: "stat /") could expire
# between a warm-up and the statement, and that stat would meet the fault.
fault_case() {
	local name=$1 f=$2 stmt=$3 want=$4 max=$5 text=$6 got ms
	cp "$L/error" "$WORK/before-error" 2>/dev/null || : >"$WORK/before-error"
	if [ -n "${FAULT_WARM:-}" ]; then
		sleep 2.2
		read -r got ms <<<"$(FAULT_URL=$FAKE_URL/_fake/faults FAULT_JSON="{\"replace\":true,\"faults\":[$f]}" \
			errno_ms_of "$stmt" "$FAULT_WARM
import urllib.request
urllib.request.urlopen(urllib.request.Request(os.environ['FAULT_URL'], os.environ['FAULT_JSON'].encode(),
    {'Content-Type': 'application/json'})).read()")"
	else
		fault_only "$f"
		read -r got ms <<<"$(errno_ms_of "$stmt")"
	fi
	fake_clear_faults
	eq "$name: $want" "$got" "$want"
	ok "$name: within $max ms (took $ms ms)" test "$ms" -le "$max"
	ok "$name: the error file says why" error_says "$text"
	ok "$name: ... and is new" sh -c "! cmp -s '$WORK/before-error' '$L/error'"
	ok "$name: the mount is still up" test -f "$MNT/README"
	fault_row "$name" "$got" "$ms"
}

# root_file PATH: the file's content as the fake's sandbox root holds it (no
# request to the mount), read through the fake's mount namespace (run-fake.sh).
root_file() {
	local root
	root=$(fake_get /_fake/sandboxes | python3 -c '
import json, sys
s = [x for x in json.load(sys.stdin) if x["id"] == sys.argv[1]]
print(s[0]["root"] if s else "/nonexistent")' "$ID")
	cat "/proc/$FAKE_PID/root$root$1" 2>/dev/null || echo "(absent)"
}
# root_has ID PATH TEXT: sandbox ID's root holds TEXT at PATH.
root_has() { [ "$(ID=$1 root_file "$2")" = "$3" ]; }

# upload_case NAME FAULT ERRNO MAX_MS FILE: with FAULT on, the close of a
# write to F/FILE fails with ERRNO within MAX_MS and says why; the mount
# still shows the new content, fsync fails too, the sandbox keeps the old
# content (asked while the fault is on). The fault is then cleared; the caller checks that the next fsync
# or close sends the data (upload_arrived FILE).
upload_case() {
	local name=$1 f=$2 want=$3 max=$4 file=$5 got ms
	local p=$F/$file
	echo v1 >"$p"
	fault_only "$f"
	read -r got ms <<<"$(errno_ms_of "$(write_close "$p" "v2 $file")")"
	eq "$name: close fails with $want" "$got" "$want"
	ok "$name: within $max ms (took $ms ms)" test "$ms" -le "$max"
	ok "$name: the error file says why" error_says "upload $FHOME/$file"
	ok "$name: the mount is still up" test -f "$MNT/README"
	eq "$name: the mount shows what was written" "$(cat "$p" 2>/dev/null)" "v2 $file"
	eq "$name: fsync fails too while the fault is on" \
		"$(errno_of "fd = os.open('$p', os.O_RDONLY); os.fsync(fd)")" "$want"
	# Asked while the fault is still on, of the fake's own copy (a run is
	# not started while a file cannot go up): a retry of the upload may be
	# under way (FUSE's release comes after close() returns), and it may
	# rightly succeed as soon as the fault is off.
	eq "$name: the sandbox still has the old content" "$(root_file "$FHOME/$file")" "v1"
	fake_clear_faults
	fault_row "$name (close)" "$got" "$ms"
}
upload_arrived() { [ "$(lease_run "cat $FHOME/$1")" = "v2 $1" ]; }

# key_rotation_story: the service revokes the key in use and the user writes
# the new one where it came from (the provider's keyFile, then an env_file):
# the next refused call reads it again and goes through, leases running on,
# no remount (each refusal stayed EACCES until a remount). A key still
# refused after the re-read is EACCES, once, not a loop. Mounts and
# unmounts itself: call it with nothing mounted.
key_rotation_story() {
	local var n=0
	case $FAKE_KIND in e2b) var=E2B_API_KEY ;; daytona) var=DAYTONA_API_KEY ;; esac
	rotate() { n=$((n + 1)) && KEY_NOW=rotated-$$-$n && fake_post /_fake/apikey "{\"apiKey\": \"$KEY_NOW\"}" >/dev/null; }
	printf '%s\n' "$FAKE_KEY" >"$WORK/rot.key"
	chmod 600 "$WORK/rot.key"
	fake_settings "{\"keyFile\": \"$WORK/rot.key\"}"
	mount_sbxfs
	ok "keyFile: a lease" mkdir "$MNT/kr"
	rotate
	eq "the key revoked, its file unchanged: mkdir fails EACCES" "$(errno_of "os.mkdir('$MNT/kx')")" EACCES
	ok "... the error file says the key was refused" grep -q "refused the API key (401)" "$MNT/error"
	printf '%s\n' "$KEY_NOW" >"$WORK/rot.key"
	ok "the new key written to the keyFile: taken at the next call, no remount (mkdir)" mkdir "$MNT/kr2"
	ok "... the earlier lease pauses and resumes" sh -c "echo pause >'$MNT/kr/state' && echo resume >'$MNT/kr/state'"
	ok "... and runs" sh -c "echo 'echo rot-ok' >'$MNT/kr/exec' && grep -qx rot-ok '$MNT/kr/stdout'"
	ok "... the log says why" grep -q "provider $FAKE_KIND: its key was refused; its file has a new one" "$WORK/sbxfs.log"
	end_leases
	unmount_sbxfs
	fake_settings '{}'
	printf '%s=%s\n' "$var" "$KEY_NOW" >"$WORK/rot.env"
	chmod 600 "$WORK/rot.env"
	mount_sbxfs -o "env_file=$WORK/rot.env"
	ok "env_file: a lease" mkdir "$MNT/ke"
	rotate
	printf '# rotated\nexport %s="%s"\n' "$var" "$KEY_NOW" >"$WORK/rot.env"
	ok "the new key written to the env_file: taken at the next call (mkdir)" mkdir "$MNT/ke2"
	ok "... and the earlier lease pauses" sh -c "echo pause >'$MNT/ke/state'"
	end_leases
	unmount_sbxfs
}

# A sandbox that vanishes behind the mount's back with files written through
# fs/ that never reached it (their uploads failing with UPLOAD_FAULT, a
# JSON fault): the lease's `error` says how many once it is reclaimed, they
# survive an unmount (the daemon's exit) and a mount, and the rmdir that ends
# the lease moves them to STATE/unsaved/, named by their sandbox paths, with
# the root `error` saying where (before: the rmdir deleted them, only the
# first failed upload was ever reported). Mounts and unmounts itself: call
# it with nothing mounted. HOME: the sandbox user's home.
stranded_story() { # stranded_story UPLOAD_FAULT HOME
	local fault=$1 home=$2 sl=$MNT/strand id kept
	mount_sbxfs
	ok "stranded: a lease" mkdir "$sl"
	local sf=$sl/fs$home
	id=$(json_get "$sl/info" '["sandboxId"]')
	mkdir "$sf/sub" && echo x >"$sl/exec"
	fault_only "$fault"
	ok "stranded: three files written, each close returns 0 (write-back)" sh -c \
		"echo 'only copy 1' >'$sf/s1.txt' && echo 'only copy 2' >'$sf/s2.txt' && echo 'only copy 3' >'$sf/sub/s3.txt'"
	ok "... their first uploads fail" wait_for 10 grep -q "upload" "$sl/error"
	fake_post "/_fake/sandboxes/$id/vanish" '{}' >/dev/null
	fake_clear_faults
	ls "$sf" >/dev/null 2>&1
	ok "the sandbox vanished: the lease becomes reclaimed" wait_for 40 grep -qx reclaimed "$sl/state"
	ok "... its error log says three files never reached it, and where they are" \
		wait_for 5 grep -q "3 files written here never reached the sandbox, which is gone.*kept in $STATE/leases/strand/cache" "$sl/log"
	unmount_sbxfs
	mount_sbxfs
	eq "after a remount the lease is still reclaimed" "$(cat "$sl/state")" reclaimed
	ok "rmdir ends it" rmdir "$sl"
	kept=$(find "$STATE/unsaved" -mindepth 1 -maxdepth 1 -name 'strand-*' 2>/dev/null)
	ok "... and keeps what never reached the sandbox in $STATE/unsaved/" test -d "$kept"
	eq "... each under its sandbox path, whole" \
		"$(cat "$kept$home/s1.txt" "$kept$home/s2.txt" "$kept$home/sub/s3.txt" 2>&1)" \
		"$(printf 'only copy 1\nonly copy 2\nonly copy 3')"
	ok "... the root error file says where" grep -q "lease strand: 3 files written here never reached its sandbox, which is gone: kept in $kept" "$MNT/error"
	ok "... the lease's directory is gone" test ! -e "$STATE/leases/strand"
	unmount_sbxfs
}

# unreachable_story WHAT FAULTS: the sandbox stops answering under a
# running lease (FAULTS drop its requests: every one, or only the sandbox's
# while the provider's API still says it runs): the first run that meets it
# fails its close (ENOTCONN), the probe that failure asks for makes the
# lease `error`, so the next `echo CMD > exec` fails its write(2) and a
# shell's `$?` is 1 (before: the lease stayed `running` and every run failed
# at its close only, `$?` 0 each time); once it answers again the lease is
# `running` and runs work. Mounts and unmounts itself: call it with nothing
# mounted.
unreachable_story() {
	local ul=$MNT/unreach
	log "--- $1"
	mount_sbxfs
	ok "unreachable: a lease" mkdir "$ul"
	eq "... it runs" "$(printf 'echo up\n' >"$ul/exec" && cat "$ul/stdout")" up
	fault_only "$2"
	eq "a run that meets it fails its close ENOTCONN" \
		"$(errno_of "$(write_close "$ul/exec" 'echo hi')")" ENOTCONN
	ok "... and the lease becomes error" wait_for 10 grep -qx error "$ul/state"
	run_write_fails "$ul" "then a shell's" "Transport endpoint is not connected" \
		"unreachable\|connect"
	fake_clear_faults
	ok "the provider answers again: the lease is running" wait_for 20 grep -qx running "$ul/state"
	eq "... and runs" "$(printf 'echo back\n' >"$ul/exec" && cat "$ul/stdout")" back
	ok "... its journal has running -> error -> running" python3 -c "
import json, sys
t = [(e['from'], e['to']) for e in map(json.loads, open('$ul/log')) if e['event'] == 'state']
sys.exit(not (('running', 'error') in t and ('error', 'running') in t))"
	end_leases
	unmount_sbxfs
}

# A run on a sandbox not heard from for the -o alive_check time asks it
# first (a stat of /): with alive_check=0, every run. The first run of an
# outage then fails its write, `$?` 1; before, it failed only its close(),
# which bash ignores: `$?` 0, no output. Mounts and unmounts itself.
alive_story() {
	local al=$MNT/alive
	log "--- alive_check: $1"
	mount_sbxfs -o alive_check=0
	ok "alive_check: a lease" mkdir "$al"
	eq "... it runs (one stat more)" "$(printf 'echo up\n' >"$al/exec" && cat "$al/stdout")" up
	fault_only "$2"
	run_write_fails "$al" "the first run of an outage" "Transport endpoint is not connected" \
		"its sandbox does not answer"
	eq "... and the lease is error" "$(cat "$al/state")" error
	fake_clear_faults
	ok "the sandbox answers again: running" wait_for 20 grep -qx running "$al/state"
	eq "... and runs" "$(printf 'echo back\n' >"$al/exec" && cat "$al/stdout")" back
	end_leases
	unmount_sbxfs
}

# A lease whose provider stops answering cannot be removed (rmdir must kill
# its sandbox first, and a sandbox left running costs money): rmdir fails
# ENOTCONN and says how out; `forget` on `state` drops the lease and leaves
# its sandbox (before: the word did not exist, and the directory stayed
# until the provider came back); the root error names the sandbox, which
# `attach` takes back once the provider answers; forget of a running lease
# uploads what was written first (UPLOAD_SLOW, a JSON fault, holds an upload
# 2 s). Mounts and unmounts itself.
forget_story() {
	local fl=$MNT/forg id
	mount_sbxfs
	ok "forget: a lease" mkdir "$fl"
	echo 'mine' >"$fl/fs$FHOME/f.txt"
	printf 'echo x\n' >"$fl/exec"
	id=$(json_get "$fl/info" '["sandboxId"]')
	fault_only '{"kind":"drop","prefix":"/"}'
	printf 'echo x\n' >"$fl/exec" 2>/dev/null
	ok "the provider stops answering: the lease becomes error" wait_for 10 grep -qx error "$fl/state"
	eq "rmdir fails ENOTCONN" "$(errno_of "os.rmdir('$fl')")" ENOTCONN
	ok "... and says how out" grep -q "echo forget > forg/state. drops the lease and leaves the sandbox" "$MNT/error"
	ok "echo forget > state: \$? 0" sh -c "echo forget >'$fl/state'"
	ok "... the lease is gone from the mount" test ! -e "$fl"
	ok "... the root error names its sandbox, left as it is" grep -q "lease forg forgotten; its sandbox $id ($FAKE_KIND) was left as it is" "$MNT/error"
	fake_clear_faults
	ok "... which still runs" test "$(fake_state "$id")" != gone
	ok "attach takes it back" sh -c "echo 'attach forg2 $id' >'$MNT/ctl'"
	eq "... with its files" "$(cat "$MNT/forg2/fs$FHOME/f.txt")" mine
	ok "rmdir ends it" rmdir "$MNT/forg2"
	eq "... and kills the sandbox" "$(fake_state "$id")" gone
	# forget of a running lease: what close returned for goes up first
	mkdir "$MNT/forg3"
	id=$(json_get "$MNT/forg3/info" '["sandboxId"]')
	echo 'first' >"$MNT/forg3/fs$FHOME/first.txt" # a lease's first new file waits for its upload
	fault_only "$1"
	echo 'queued' >"$MNT/forg3/fs$FHOME/q.txt"
	ok "forget while a write's upload is on its way (2 s)" sh -c "echo forget >'$MNT/forg3/state'"
	fake_clear_faults
	echo "attach forg4 $id" >"$MNT/ctl"
	eq "... the sandbox has the file" "$(printf 'cat %s/q.txt\n' "$FHOME" >"$MNT/forg4/exec" && cat "$MNT/forg4/stdout")" queued
	ok "... and nothing was set apart" test -z "$(ls "$STATE/unsaved" 2>/dev/null | grep '^forg3-')"
	rmdir "$MNT/forg4"
	# rmdir and two forgets at once (no VFS lock orders a write to `state`
	# with an rmdir): exactly one ends the lease (before: two could, each
	# dropping the table's reference to it)
	mkdir "$MNT/forg5"
	local r1 r2 r3
	(echo forget >"$MNT/forg5/state") 2>/dev/null &
	r1=$!
	(echo forget >"$MNT/forg5/state") 2>/dev/null &
	r2=$!
	rmdir "$MNT/forg5" 2>/dev/null &
	r3=$!
	local won=0
	for p in $r1 $r2 $r3; do wait "$p" && won=$((won + 1)); done
	eq "rmdir and two forgets at once: exactly one ends the lease" "$won" 1
	ok "... the daemon is alive and answers" test -f "$MNT/README"
	unmount_sbxfs
}
