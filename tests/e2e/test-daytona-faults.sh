#!/bin/bash
# Faults on a daytona lease, injected by the fake Daytona's admin API: with
# each fault on (dropped connection, 5xx, 429 with Retry-After, a reply
# slower than the deadline, the sandbox vanished) the operation fails with
# its documented errno within its deadline, the mount stays up, the lease's
# `error` file says why; and a failed upload keeps the data: close and
# fsync fail, the mount still shows what was written, the sandbox keeps
# the old content, and the next fsync or close sends it once the fault is
# off. Deadlines are made short through providers.daytona.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
start_fake daytona
REQ_S=3 XFER_S=3 STATE_S=4
fake_settings "{\"requestTimeout\": $REQ_S, \"transferTimeout\": $XFER_S, \"timeout\": $STATE_S}"
# close() = uploaded (-o writeback=0): its failures are close's; the
# write-back contract's (close returns, error and the next fsync say it)
# is test-*-writeback.sh's. One download per read (-o prefetch=0): the
# reads below, of one directory in a row, would otherwise come in a batch
# the download's fault does not meet (a failed batch: test-*-prefetch.sh).
mount_sbxfs -o writeback=0 -o prefetch=0
L=$MNT/f
mkdir "$L"
F=$L/fs/home/daytona
ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandboxId"])' "$L/info")
FHOME=/home/daytona
run() { lease_run "$1" >/dev/null; }
TB="/toolbox/:id"
REQ_MAX=$(((REQ_S + 2) * 1000)) XFER_MAX=$(((XFER_S + 3) * 1000)) FAST_MAX=2000

# Files made in the sandbox: not cached here, so reading them takes requests.
run 'mkdir -p d s e1 e2 e3 e4 && for i in $(seq 1 20); do echo "content $i" > d/u$i; echo "s $i" > s/s$i; done'
eq "setup run" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["exitCode"])' "$L/result")" 0
ls "$F/d" >/dev/null
warm() { ls "$F" >/dev/null && stat "$F/s" >/dev/null; } # the path down to s/, fresh
# The same, made fresh in the daemon too and run right before the fault (lib-fake.sh).
fault_case_warm() { FAULT_WARM="os.listdir('$F'); os.stat('$F/s')" fault_case "$@"; }

# ---- reads (POST /files/bulk-download, streamed) ----
K="POST $TB/files/bulk-download"
fault_case "read, connection dropped" "{\"kind\":\"drop\",\"key\":\"$K\"}" \
	"open('$F/d/u1').read()" ENOTCONN $REQ_MAX "read /home/daytona/d/u1"
ok "read, dropped: retried (idempotent) before giving up" test "$(counter "$K")" -ge 2
fault_case "read, 500" "{\"kind\":\"5xx\",\"status\":500,\"key\":\"$K\"}" \
	"open('$F/d/u2').read()" EIO $FAST_MAX "injected fault"
fault_case "read, 429 Retry-After 1" "{\"kind\":\"429\",\"retryAfter\":1,\"key\":\"$K\"}" \
	"open('$F/d/u3').read()" EAGAIN $REQ_MAX "rate limit"
fault_case "read, slower than the deadline" "{\"kind\":\"slow\",\"delayMs\":30000,\"key\":\"$K\"}" \
	"open('$F/d/u4').read()" ETIMEDOUT $XFER_MAX "read /home/daytona/d/u4"
fault_case "read, sandbox vanished (proxy 404)" "{\"kind\":\"vanish\",\"key\":\"$K\"}" \
	"open('$F/d/u5').read()" ENOTCONN $FAST_MAX "not found"
eq "after the faults, the same files read fine" "$(cat "$F/d/u1" "$F/d/u4" "$F/d/u5")" \
	"$(printf 'content 1\ncontent 4\ncontent 5')"

# ---- metadata ----
# (A list fault hits every list: when the listing of /home/daytona expired
# meanwhile, the lookup of e1 lists it again and that is what fails.)
fault_case_warm "stat, connection dropped" "{\"kind\":\"drop\",\"key\":\"GET $TB/files/info\"}" \
	"os.stat('$F/s/s1')" ENOTCONN $REQ_MAX "stat /home/daytona/s/s1"
warm
fault_case "list, 500" "{\"kind\":\"5xx\",\"status\":500,\"key\":\"GET $TB/files\"}" \
	"os.listdir('$F/e1')" EIO $FAST_MAX "list /home/daytona"
warm
fault_case "list, 503" "{\"kind\":\"5xx\",\"status\":503,\"key\":\"GET $TB/files\"}" \
	"os.listdir('$F/e2')" ENOTCONN $REQ_MAX "list /home/daytona"
warm
fault_case "list, 429 Retry-After 1" "{\"kind\":\"429\",\"retryAfter\":1,\"key\":\"GET $TB/files\"}" \
	"os.listdir('$F/e3')" EAGAIN $REQ_MAX "rate limit"
fault_case_warm "stat, slower than the deadline" "{\"kind\":\"slow\",\"delayMs\":30000,\"key\":\"GET $TB/files/info\"}" \
	"os.stat('$F/s/s2')" ETIMEDOUT $REQ_MAX "stat /home/daytona/s/s2"
warm
fault_case "mkdir, sandbox vanished (proxy 404)" "{\"kind\":\"vanish\",\"key\":\"POST $TB/files/folder\"}" \
	"os.mkdir('$F/newdir')" ENOTCONN $FAST_MAX "mkdir /home/daytona/newdir"
warm
fault_case "rename, 500" "{\"kind\":\"5xx\",\"status\":500,\"key\":\"POST $TB/files/move\"}" \
	"os.rename('$F/s/s3', '$F/s/s3.moved')" EIO $FAST_MAX "rename /home/daytona/s/s3"
sleep 1.1 # past the negative-entry TTL of the failed lookups
eq "lookups after the faults work" "$(ls "$F/e4" | wc -l) $(stat -c %s "$F/s/s2") $(cat "$F/s/s3")" "0 4 s 3"
ok "the failed rename left the file where it was" test ! -e "$F/s/s3.moved"

# ---- runs and state ----
fault_case "exec, 500" "{\"kind\":\"5xx\",\"status\":500,\"prefix\":\"/toolbox/$ID/process/session\",\"method\":\"POST\"}" \
	"$(write_close "$L/exec" 'echo hi')" EIO $FAST_MAX "injected fault"
fault_case "exec, connection dropped" "{\"kind\":\"drop\",\"prefix\":\"/toolbox/$ID/process/session\",\"method\":\"POST\"}" \
	"$(write_close "$L/exec" 'echo hi')" ENOTCONN $REQ_MAX "session"
fault_case "exec, slower than the deadline" "{\"kind\":\"slow\",\"delayMs\":30000,\"prefix\":\"/toolbox/$ID/process/session\"}" \
	"$(write_close "$L/exec" 'echo hi')" ETIMEDOUT $REQ_MAX "session"
# A command that ends with no exit status (the toolbox's -1: its session's
# shell was killed, as an OOM kill does): an error with the reason, not the
# exit code -1 (which `sbx run` called "result missing").
fault_case "exec, no exit status" "{\"kind\":\"inject\",\"count\":1,\"key\":\"GET $TB/process/session/:sid/command/:cmd\",\"set\":{\"exitCode\":-1}}" \
	"$(write_close "$L/exec" 'sleep 1')" EIO $FAST_MAX "ended without an exit status"
fault_case "pause, 500" "{\"kind\":\"5xx\",\"status\":500,\"key\":\"POST /api/sandbox/:idOrName/stop\"}" \
	"$(write_close "$L/state" pause)" EIO $FAST_MAX "pause"
eq "a failed pause leaves it running" "$(cat "$L/state")" "running"
echo pause >"$L/state"
fault_case "resume, slower than the deadline" "{\"kind\":\"slow\",\"delayMs\":30000,\"key\":\"POST /api/sandbox/:idOrName/start\"}" \
	"$(write_close "$L/state" resume)" ETIMEDOUT $(((STATE_S + 2) * 1000)) "resume"
ok "a resume that timed out can be retried" sh -c "echo resume > '$L/state'"
ok "... and the lease runs again" wait_for 5 grep -qx running "$L/state"
run 'echo after-faults'
eq "exec works after the faults" "$(cat "$L/stdout")" "after-faults"

# ---- a failed upload keeps the data (upload_case: lib-fake.sh) ----
K="POST $TB/files/bulk-upload"
upload_case "upload, 500" "{\"kind\":\"5xx\",\"status\":500,\"key\":\"$K\"}" EIO $FAST_MAX up1.txt
ok "upload, 500: fsync succeeds once the fault is off" fsync_ok "$F/up1.txt"
ok "upload, 500: the content arrived" upload_arrived up1.txt

upload_case "upload, connection dropped" "{\"kind\":\"drop\",\"key\":\"$K\"}" ENOTCONN $REQ_MAX up2.txt
ok "upload, dropped: the next close succeeds once the fault is off" close_ok "$F/up2.txt"
ok "upload, dropped: the content arrived" upload_arrived up2.txt

upload_case "upload, slower than the deadline" "{\"kind\":\"slow\",\"delayMs\":30000,\"key\":\"$K\"}" \
	ETIMEDOUT $XFER_MAX up3.txt
ok "upload, slow: fsync succeeds once the fault is off" fsync_ok "$F/up3.txt"
ok "upload, slow: the content arrived" upload_arrived up3.txt

upload_case "upload, 429 Retry-After 1" "{\"kind\":\"429\",\"retryAfter\":1,\"key\":\"$K\"}" \
	EAGAIN $REQ_MAX up4.txt
ok "upload, 429: the next close succeeds once the fault is off" close_ok "$F/up4.txt"
ok "upload, 429: the content arrived" upload_arrived up4.txt

# The upload succeeds but the move over the old file (the daemon's move
# refuses an existing target, so replacing is a swap) fails.
upload_case "upload, the swap's move fails (500)" \
	"{\"kind\":\"5xx\",\"status\":500,\"key\":\"POST $TB/files/move\"}" EIO $FAST_MAX up5.txt
ok "upload, move failed: fsync succeeds once the fault is off" fsync_ok "$F/up5.txt"
ok "upload, move failed: the content arrived" upload_arrived up5.txt
run 'ls -A /home/daytona | grep -c "^\.sbxfs-"'
eq "no temporary upload or backup names left in the sandbox" "$(cat "$L/stdout")" 0

# ---- the sandbox vanishes behind the mount's back ----
cat "$F/d/u8" >/dev/null
echo dirty >"$F/d/late.txt" 2>/dev/null
fake_post "/_fake/sandboxes/$ID/vanish" '{}' >/dev/null
read -r got ms <<<"$(errno_ms_of "open('$F/d/u9').read()")"
ok "read after the sandbox vanished: ENOENT or ENOTCONN (got $got)" \
	sh -c "[ '$got' = ENOENT ] || [ '$got' = ENOTCONN ]"
ok "... within $FAST_MAX ms (took $ms ms)" test "$ms" -le $FAST_MAX
fault_row "read, sandbox deleted" "$got" "$ms"
read -r got ms <<<"$(errno_ms_of "$(write_close "$F/d/u10" "lost")")"
ok "a write to a vanished sandbox fails at close (got $got)" \
	sh -c "[ '$got' = ENOENT ] || [ '$got' = ENOTCONN ]"
ok "the lease becomes reclaimed" wait_for 10 grep -qx reclaimed "$L/state"
read -r got ms <<<"$(errno_ms_of "os.stat('$F/d/u11')")"
eq "fs/ of a reclaimed lease: ENOENT" "$got" ENOENT
ok "... at once (took $ms ms)" test "$ms" -le 500
ok "the mount is still up" test -f "$MNT/README"
ok "rmdir ends the reclaimed lease" rmdir "$L"

log "fault -> errno -> elapsed:$FAULT_TABLE"
fake_clear_faults
end_leases
unmount_sbxfs
stranded_story "{\"kind\":\"5xx\",\"status\":500,\"key\":\"POST $TB/files/bulk-upload\"}" "$FHOME"
unreachable_story "every request dropped" '{"kind":"drop","prefix":"/"}'
unreachable_story "the sandbox's requests dropped, its API answers" "{\"kind\":\"drop\",\"prefix\":\"/toolbox\"}"
alive_story "the sandbox's requests dropped, its API answers" "{\"kind\":\"drop\",\"prefix\":\"/toolbox\"}"
forget_story "{\"kind\":\"slow\",\"delayMs\":2000,\"complete\":true,\"count\":1,\"key\":\"POST $TB/files/bulk-upload\"}"
key_rotation_story
finish
