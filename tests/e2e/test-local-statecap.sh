#!/bin/bash
# The state dir's size policy past its bounds (issue 10, doc/CONTRACT.md
# "The state dir"): the journal `log` turns into `log.1` past 256 KiB,
# `error` holds the last error alone, results/ keeps the newest 1000 files
# (never the run being saved). Runs (the last 100) are test-local-runs'.
. "$(dirname "$0")/lib.sh"
mount_sbxfs
L=$MNT/cap
mkdir "$L"
LDIR=$STATE/leases/cap

# ---- log and error: 3000 refused control words, ~200 bytes of journal each ----
python3 - "$L" <<'PY'
import os, sys
l = sys.argv[1]
for i in range(3000):
    try:
        fd = os.open(l + "/state", os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, b"bogus-%d-%s\n" % (i, b"w" * 100))
        finally:
            os.close(fd)
    except OSError:
        pass
PY
size() { stat -c %s "$1" 2>/dev/null || echo 0; }
ok "3000 errors (about 600 KiB of journal): log stays at most 256 KiB ($(size "$LDIR/log") bytes)" \
	test "$(size "$LDIR/log")" -le 262144
ok "... the older part is log.1, at most 256 KiB ($(size "$LDIR/log.1") bytes)" \
	test "$(size "$LDIR/log.1")" -gt 0 -a "$(size "$LDIR/log.1")" -le 262144
ok "... the newest event is in log, read through the mount" grep -q 'bogus-2999-' "$L/log"
ok "... every line of log is whole JSON" python3 -c '
import json, sys
for line in open(sys.argv[1]):
    json.loads(line)' "$L/log"
eq "error holds the last error alone: one line" "$(wc -l <"$L/error")" 1
ok "... the last one" grep -q 'bogus-2999-' "$L/error"

# ---- results/: the newest 1000 files ----
svgs() { # svgs N: a code cell displaying N small SVGs
	printf 'class Pic:\n    def _repr_svg_(self):\n        return "<svg xmlns=\\"http://www.w3.org/2000/svg\\"/>"\nfor i in range(%d):\n    display(Pic())\n' "$1" >"$L/code.py"
}
svgs 600
eq "a cell of 600 outputs: 600 files in results/" "$(ls "$L/results" | wc -l)" 600
svgs 600
eq "another 600: results/ keeps the newest 1000" "$(ls "$L/results" | wc -l)" 1000
eq "... the oldest dropped first (lowest left: 201)" "$(ls "$L/results" | sort -n | head -1)" 201.svg
eq "... the newest kept (highest: 1200)" "$(ls "$L/results" | sort -n | tail -1)" 1200.svg
eq "... and the state dir holds as many" "$(ls "$LDIR/results" | wc -l)" 1000
svgs 1100
eq "a single cell of 1100 outputs keeps all of its own" "$(ls "$L/results" | wc -l)" 1100
eq "... and nothing older" "$(ls "$L/results" | sort -n | head -1)" 1201.svg
finish
