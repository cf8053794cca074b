#!/bin/bash
# Faults on an e2b lease, injected by the fake E2B's admin API: with each
# fault on (dropped connection, 5xx, 429 with Retry-After, a reply slower
# than the deadline, the sandbox vanished) the operation fails with its
# documented errno within its deadline, the mount stays up, the lease's
# `error` file says why; and a failed upload keeps the data: close and
# fsync fail, the mount still shows what was written, the sandbox keeps
# the old content, and the next fsync or close sends it once the fault is
# off. Deadlines are made short through providers.e2b.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
start_fake e2b
REQ_S=3 XFER_S=3
fake_settings "{\"requestTimeout\": $REQ_S, \"transferTimeout\": $XFER_S}"
# close() = uploaded (-o writeback=0): its failures are close's; the
# write-back contract's (close returns, error and the next fsync say it)
# is test-*-writeback.sh's. One download per read (-o prefetch=0): the
# reads below, of one directory in a row, would otherwise come in a batch
# the download's fault does not meet (a failed batch: test-*-prefetch.sh).
mount_sbxfs -o writeback=0 -o prefetch=0
L=$MNT/f
mkdir "$L"
F=$L/fs/home/user
FHOME=/home/user
ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandboxId"])' "$L/info")
run() { lease_run "$1" >/dev/null; }
REQ_MAX=$(((REQ_S + 2) * 1000)) XFER_MAX=$(((XFER_S + 2) * 1000)) FAST_MAX=2000
FS=POST\ /filesystem.Filesystem

# Files made in the sandbox: not cached here, so reading them takes requests.
# d/ is listed (its files' attributes are known), s/ is not (a stat each).
run 'mkdir -p d s e1 e2 e3 && for i in $(seq 1 20); do echo "content $i" > d/u$i; echo "s $i" > s/s$i; done'
eq "setup run" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["exitCode"])' "$L/result")" 0
ls "$F/d" >/dev/null
warm() { ls "$F" >/dev/null && stat "$F/s" >/dev/null; } # the path down to s/, fresh
# The same, made fresh in the daemon too and run right before the fault (lib-fake.sh).
fault_case_warm() { FAULT_WARM="os.listdir('$F'); os.stat('$F/s')" fault_case "$@"; }

# ---- reads (GET /files, streamed) ----
fault_case "read, connection dropped" '{"kind":"drop","key":"GET /files"}' \
	"open('$F/d/u1').read()" ENOTCONN $REQ_MAX "download $FHOME/d/u1"
ok "read, dropped: retried (idempotent) before giving up" test "$(counter "GET /files")" -ge 2
fault_case "read, 500" '{"kind":"5xx","status":500,"key":"GET /files"}' \
	"open('$F/d/u2').read()" EIO $FAST_MAX "500 injected fault"
fault_case "read, 429 Retry-After 1" '{"kind":"429","retryAfter":1,"key":"GET /files"}' \
	"open('$F/d/u3').read()" EAGAIN $REQ_MAX "429"
fault_case "read, slower than the deadline" '{"kind":"slow","delayMs":30000,"key":"GET /files"}' \
	"open('$F/d/u4').read()" ETIMEDOUT $XFER_MAX "download $FHOME/d/u4"
fault_case "read, sandbox vanished (proxy 502)" '{"kind":"vanish","key":"GET /files"}' \
	"open('$F/d/u5').read()" ENOTCONN $FAST_MAX "sandbox was not found"
eq "after the faults, the same files read fine" "$(cat "$F/d/u1" "$F/d/u4" "$F/d/u5")" \
	"$(printf 'content 1\ncontent 4\ncontent 5')"

# ---- metadata (Connect RPCs) ----
fault_case_warm "stat, connection dropped" "{\"kind\":\"drop\",\"key\":\"$FS/Stat\"}" \
	"os.stat('$F/s/s1')" ENOTCONN $REQ_MAX "stat $FHOME/s/s1"
warm
fault_case "list, 500" "{\"kind\":\"5xx\",\"status\":500,\"key\":\"$FS/ListDir\"}" \
	"os.listdir('$F/e1')" EIO $FAST_MAX "list $FHOME" # e1, or its parent listed again
warm
fault_case "list, 429 Retry-After 1" "{\"kind\":\"429\",\"retryAfter\":1,\"key\":\"$FS/ListDir\"}" \
	"os.listdir('$F/e2')" EAGAIN $REQ_MAX "429"
fault_case_warm "stat, slower than the deadline" "{\"kind\":\"slow\",\"delayMs\":30000,\"key\":\"$FS/Stat\"}" \
	"os.stat('$F/s/s2')" ETIMEDOUT $REQ_MAX "stat $FHOME/s/s2"
fault_case "mkdir, sandbox vanished (proxy 502)" "{\"kind\":\"vanish\",\"key\":\"$FS/MakeDir\"}" \
	"os.mkdir('$F/newdir')" ENOTCONN $FAST_MAX "mkdir $FHOME/newdir"
sleep 0.3 # a failed lookup is answered from memory for SBX_CACHE_FAIL_MS (250 ms)
eq "lookups after the faults work" "$(ls "$F/e3" | wc -l) $(stat -c %s "$F/s/s2")" "0 4"

# ---- runs and state ----
fault_case "exec, 500" '{"kind":"5xx","status":500,"key":"POST /process.Process/Start"}' \
	"$(write_close "$L/exec" 'echo hi')" EIO $FAST_MAX "500"
fault_case "exec, slower than the deadline" '{"kind":"slow","delayMs":30000,"key":"POST /process.Process/Start"}' \
	"$(write_close "$L/exec" 'echo hi')" ETIMEDOUT $XFER_MAX "exec"
fault_case "pause, 500" '{"kind":"5xx","status":500,"key":"POST /sandboxes/:id/pause"}' \
	"$(write_close "$L/state" pause)" EIO $FAST_MAX "pause"
eq "a failed pause leaves it running" "$(cat "$L/state")" "running"
fault_case "resume, 429 Retry-After 1" '{"kind":"429","retryAfter":1,"key":"POST /v2/sandboxes/:id/connect"}' \
	"$(write_close "$L/state" pause); $(write_close "$L/state" resume)" EAGAIN $REQ_MAX "resume"
ok "resume works once the fault is off" sh -c "echo resume > '$L/state'"
eq "running again" "$(cat "$L/state")" "running"
eq "exec works after the faults" "$(lease_run 'echo after-faults')" "after-faults"

# ---- a failed upload keeps the data ----
upload_case "upload, 500" '{"kind":"5xx","status":500,"key":"POST /files"}' EIO $FAST_MAX up1.txt
ok "upload, 500: fsync succeeds once the fault is off" fsync_ok "$F/up1.txt"
ok "upload, 500: ... and the content arrived" upload_arrived up1.txt
upload_case "upload, connection dropped" '{"kind":"drop","key":"POST /files"}' ENOTCONN $XFER_MAX up2.txt
ok "upload, dropped: the next close succeeds once the fault is off" close_ok "$F/up2.txt"
ok "upload, dropped: ... and the content arrived" upload_arrived up2.txt
upload_case "upload, slower than the deadline" '{"kind":"slow","delayMs":30000,"key":"POST /files"}' \
	ETIMEDOUT $XFER_MAX up3.txt
ok "upload, slow: fsync succeeds once the fault is off" fsync_ok "$F/up3.txt"
ok "upload, slow: ... and the content arrived" upload_arrived up3.txt
upload_case "upload, 429 Retry-After 1" '{"kind":"429","retryAfter":1,"key":"POST /files"}' \
	EAGAIN $REQ_MAX up4.txt
ok "upload, 429: the next close succeeds once the fault is off" close_ok "$F/up4.txt"
ok "upload, 429: ... and the content arrived" upload_arrived up4.txt
upload_case "upload's Move, 500" "{\"kind\":\"5xx\",\"status\":500,\"key\":\"$FS/Move\"}" EIO $FAST_MAX up5.txt
ok "upload's Move: fsync succeeds once the fault is off" fsync_ok "$F/up5.txt"
ok "upload's Move: ... and the content arrived" upload_arrived up5.txt
ok "no temporary upload names left behind" sh -c "! ls -a '$F' | grep -q '^\.sbxfs-'"

# ---- the sandbox vanishes behind the mount's back ----
fake_post "/_fake/sandboxes/$ID/vanish" '{}' >/dev/null
read -r got ms <<<"$(errno_ms_of "open('$F/d/u9').read()")"
ok "read after the sandbox vanished: ENOENT or ENOTCONN (got $got)" \
	sh -c "[ '$got' = ENOENT ] || [ '$got' = ENOTCONN ]"
ok "... within $FAST_MAX ms (took $ms ms)" test "$ms" -le $FAST_MAX
fault_row "read, sandbox deleted" "$got" "$ms"
ok "the lease becomes reclaimed" wait_for 10 grep -qx reclaimed "$L/state"
read -r got ms <<<"$(errno_ms_of "os.stat('$F/d/u10')")"
eq "fs/ of a reclaimed lease: ENOENT" "$got" ENOENT
ok "... at once (took $ms ms)" test "$ms" -le 500
ok "the error file says the sandbox is gone" error_says "not found"
ok "the mount is still up" test -f "$MNT/README"
ok "rmdir ends the reclaimed lease" rmdir "$L"

log "fault -> errno -> elapsed:$FAULT_TABLE"
fake_clear_faults
end_leases
unmount_sbxfs
stranded_story "{\"kind\":\"5xx\",\"status\":500,\"key\":\"POST /files\"}" "$FHOME"
unreachable_story "every request dropped" '{"kind":"drop","prefix":"/"}'
unreachable_story "the sandbox's requests dropped, its API answers" "{\"kind\":\"drop\",\"prefix\":\"/process\"},{\"kind\":\"drop\",\"prefix\":\"/filesystem\"},{\"kind\":\"drop\",\"prefix\":\"/files\"}"
alive_story "the sandbox's requests dropped, its API answers" "{\"kind\":\"drop\",\"prefix\":\"/process\"},{\"kind\":\"drop\",\"prefix\":\"/filesystem\"},{\"kind\":\"drop\",\"prefix\":\"/files\"}"
forget_story "{\"kind\":\"slow\",\"delayMs\":2000,\"complete\":true,\"count\":1,\"key\":\"POST /files\"}"
key_rotation_story
finish
