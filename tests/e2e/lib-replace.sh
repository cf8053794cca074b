# Sourced by test-{e2b,daytona}-files.sh: a reader in the sandbox never sees
# a partial file while the mount replaces an existing one (issue 13: only a
# file that did not exist is written straight to its name; an existing one
# still goes up beside it and is moved over it).
#   story_replace_atomic    needs L, F, FHOME, WORK and lease_run (lib.sh)

story_replace_atomic() {
	local size=8000000 i res
	head -c $size /dev/zero | tr '\0' a >"$WORK/atomic-a"
	head -c $size /dev/zero | tr '\0' b >"$WORK/atomic-b"
	cp "$WORK/atomic-a" "$F/atomic.bin"
	# A reader started by a run keeps reading after the run returned; it
	# stops when atomic.stop appears (or after 120 s) and writes what it saw.
	lease_run "cd $FHOME && rm -f atomic.stop atomic.res && nohup python3 -c '
import os, time
A, B = b\"a\" * $size, b\"b\" * $size
n = partial = missing = 0
end = time.time() + 120
while not os.path.exists(\"atomic.stop\") and time.time() < end:
    try:
        with open(\"atomic.bin\", \"rb\") as f:
            d = f.read()
    except FileNotFoundError:
        missing += 1
        continue
    n += 1
    if d != A and d != B:
        partial += 1
open(\"atomic.res.tmp\", \"w\").write(\"%d %d %d\" % (n, partial, missing))
os.rename(\"atomic.res.tmp\", \"atomic.res\")
' </dev/null >/dev/null 2>&1 &" >/dev/null
	sleep 1
	for i in $(seq 1 6); do
		cp "$WORK/atomic-b" "$F/atomic.bin"
		cp "$WORK/atomic-a" "$F/atomic.bin"
	done
	: >"$F/atomic.stop"
	res_there() { res=$(lease_run "cat $FHOME/atomic.res 2>/dev/null") && [ -n "$res" ]; }
	ok "the sandbox's reader ran and reported" wait_for 30 res_there
	log "reader in the sandbox during 12 replaces: reads, partial, missing = $res"
	set -- $res
	ok "the reader read while the file was replaced ($1 reads)" test "${1:-0}" -ge 12
	eq "a reader of the old file never sees a partial file" "${2:-x}" 0
	eq "the sandbox has the last version" "$(lease_run "md5sum < $FHOME/atomic.bin")" \
		"$(md5sum <"$WORK/atomic-a")"
	rm -f "$F/atomic.bin" "$F/atomic.stop" "$WORK/atomic-a" "$WORK/atomic-b"
}
