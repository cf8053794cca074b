#!/bin/bash
# Issue 10 on the daytona provider (lib-output.sh): a run's binary stdout and
# stderr byte for byte, code cells writing bytes that are not UTF-8, the
# daemon's memory bounded during a big run, env that is not UTF-8, a full
# state dir (a small tmpfs).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-runs.sh"
. "$(dirname "$0")/lib-output.sh"
. "$(dirname "$0")/lib-fake.sh"
start_fake daytona
output_mount daytona
story_output_bytes daytona
story_output_long_command
story_output_code
# Output goes through files in the sandbox, which each poll downloads whole:
# a run is bounded at 64 MiB there, and `yes` passes that (and fills the
# fake's 1 GiB disk) before the first poll. At 10 MB/s the state dir's
# reserve is what stops it.
story_output_runaway 'while :; do head -c 1000000 /dev/zero | tr "\0" y; sleep 0.1; done'
story_output_download_reserve
# Past 64 MiB the run is given up on, and killed: deleting its session left
# it running in its own process group (`timeout`'s), filling the sandbox's disk.
eq "a run printing 200 MB/s without end: EFBIG at the close" \
	"$(errno_of_write "$L/exec" 'while :; do head -c 10000000 /dev/zero; sleep 0.05; done')" EFBIG
ok "... error says why" grep -q "output over 64 MiB" "$L/error"
sleep 1
eq "... it was killed: the sandbox's /tmp holds under 100 MB a second later" \
	"$(lease_run 'df -k /tmp | tail -1 | awk "{print (\$3 < 100000)}"')" 1
story_output_memory 60
story_output_env
story_output_full

# A plain small run costs what it cost with the logs call: the exec, then
# per poll the command's state and one download of both files.
lease_run 'echo warm' >/dev/null
fake_reset_counters
eq "a plain small run" "$(lease_run 'echo hi')" hi
T=/toolbox/:id/process/session/:sid
polls=$(counter "GET $T/command/:cmd")
log "  counters of that run: $(fake_get /_fake/counters)"
eq "... one exec" "$(counter "POST $T/exec")" 1
eq "... no logs call" "$(counter "GET $T/command/:cmd/logs")" 0
eq "... one download per poll ($polls polls)" "$(counter 'POST /toolbox/:id/files/bulk-download')" "$polls"
# (The lease timer's state probe, GET /api/sandbox/ID, may fall in a slow run: not the run's.)
eq "... nothing else" "$(fake_get /_fake/counters | python3 -c 'import json,sys
print(sum(v for k, v in json.load(sys.stdin).items() if k != "GET /api/sandbox/:idOrName"))')" \
	$((1 + 2 * polls))
finish
