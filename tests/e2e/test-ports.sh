#!/bin/bash
# ports/ (issue 14): `ls ports/` lists the ports something listens on inside
# the sandbox, and `cat ports/PORT` answers one format on every provider: a
# URL with its scheme on the first line, then the header lines a request
# needs. Local: from the lease's own network namespace (/proc/PID/net/tcp*
# of its init), http://127.0.0.1:PORT (forwarded by the daemon into the
# lease's namespace: a server on the lease's 127.0.0.1 is reached; another
# lease on the same port gets another host port), and the URL reaches the
# server; e2b
# (fake): from /proc/net/tcp* read by a run in the sandbox,
# https://PORT-ID.$E2B_DOMAIN; daytona (fake): the preview URL and its
# X-Daytona-Preview-Token line.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: the local provider needs root"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is needed for a server"; exit 77; }
. "$(dirname "$0")/lib-fake.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
listed() { ls "$1" | grep -qx "$2"; }
not() { ! "$@"; }

# --- local --------------------------------------------------------------------
mount_sbxfs
L=$MNT/web
ok "mkdir a local lease" mkdir "$L"
P=$(free_port)
ok "nothing listens on $P yet: ls ports/ does not list it" not listed "$L/ports" "$P"
# On every address of the lease: a local lease has its own network (slirp4netns)
# and ports/PORT's forward reaches the lease's address, not its loopback.
lease_run "nohup python3 -m http.server $P >/dev/null 2>&1 & echo started" >/dev/null
ok "a server started in the lease: ls ports/ lists $P" wait_for 20 listed "$L/ports" "$P"
eq "cat ports/$P is the URL with its scheme" "$(cat "$L/ports/$P")" "http://127.0.0.1:$P"
ok "... and the URL reaches the server" wait_for 10 curl -fsS -o /dev/null "$(head -n1 "$L/ports/$P")"
lease_run "pkill -f 'http.server $P' ; echo stopped" >/dev/null
ok "once it stops, ls ports/ no longer lists $P" wait_for 20 not listed "$L/ports" "$P"
lease_run_in() { printf '%s\n' "$2" >"$MNT/$1/exec" && cat "$MNT/$1/stdout"; }
# Two leases serving the same port (on their own 127.0.0.1): the first gets
# the host's same port, the second an ephemeral one; each URL reaches its own.
ok "mkdir a second local lease" mkdir "$MNT/web2"
Q=$(free_port)
for n in web web2; do
	lease_run_in $n "mkdir -p /tmp/s && echo served-by-$n >/tmp/s/index.html && cd /tmp/s && nohup python3 -m http.server $Q --bind 127.0.0.1 >/dev/null 2>&1 & echo started" >/dev/null
	ok "$n serves $Q: its ports/ lists it" wait_for 20 listed "$MNT/$n/ports" "$Q"
done
U1=$(head -n1 "$MNT/web/ports/$Q") U2=$(head -n1 "$MNT/web2/ports/$Q")
eq "the first lease's ports/$Q: the host's same port" "$U1" "http://127.0.0.1:$Q"
ok "the second's another port of the host's 127.0.0.1 ($U2)" sh -c "echo '$U2' | grep -Eq '^http://127\.0\.0\.1:[0-9]+$' && [ '$U2' != '$U1' ]"
eq "... reading it again names the same port" "$(head -n1 "$MNT/web2/ports/$Q")" "$U2"
eq "the first URL reaches the first lease's server" "$(curl -fsS "$U1/index.html")" served-by-web
eq "the second URL reaches the second lease's server" "$(curl -fsS "$U2/index.html")" served-by-web2
ok "rmdir the second lease" rmdir "$MNT/web2"
ok "... and its forwarder stops with it" not curl -fsS -o /dev/null "$U2/index.html"
eq "the first still answers" "$(curl -fsS "$U1/index.html")" served-by-web
# Out of descriptors, the forwarder's listener spun: poll said a client was
# queued, accept failed with EMFILE, and again at once, a core at 100 %
# until a descriptor came free. The daemon's limit is lowered to its
# lowest free descriptor, 12 clients wait 4 s, and the daemon's CPU time
# is read over 2 s.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
NOFILE=$(prlimit --pid "$SBXFS_PID" --nofile --output SOFT,HARD --noheadings | awk '{print $1 ":" $2}')
# the lowest descriptor number free: the limit bounds numbers, not a count
LOWEST_FREE=$(ls "/proc/$SBXFS_PID/fd" | sort -n | awk '$1 != NR - 1 {print NR - 1; f = 1; exit} END {if (!f) print NR}')
prlimit --pid "$SBXFS_PID" --nofile="$LOWEST_FREE:${NOFILE#*:}"
python3 - "$Q" <<'PY' &
import socket, sys, time
held = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(12)]
time.sleep(4)
PY
HOLDER=$!
sleep 1
T0=$(cpu_ticks "$SBXFS_PID")
sleep 2
T1=$(cpu_ticks "$SBXFS_PID")
ok "out of descriptors, the forwarder waits instead of spinning ($((T1 - T0)) ticks of CPU in 2 s)" \
	test $((T1 - T0)) -lt 50
wait "$HOLDER"
# Longer than a probe's interval (5 s): the probe could not open
# /proc/INIT/stat (EMFILE), took that for the init's death and reclaimed
# the lease, its storage removed (found by a red CI run: the forwarder's
# listener went with it).
sleep 3
prlimit --pid "$SBXFS_PID" --nofile="$NOFILE"
eq "out of descriptors for 7 s: the lease is not taken for dead" "$(cat "$L/state")" running
eq "... and serves again once it has descriptors" "$(curl -fsS "$U1/index.html")" served-by-web
ok "... the log says it waited" grep -q "ports: $Q: cannot accept (Too many open files): waiting" "$WORK/sbxfs.log"
# A thread per connection, without bound: 300 idle clients made 300
# threads (and 600 descriptors). At most 256 are copied at once; the
# others wait in the listener's backlog, as at a busy server.
threads() { ls "/proc/$SBXFS_PID/task" | wc -l; }
T0=$(threads)
python3 - "$Q" "$WORK/held" <<'PY' &
import socket, sys, time
held = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(300)]
open(sys.argv[2], "w").close()
time.sleep(3)
PY
HOLDER=$!
wait_for 10 test -e "$WORK/held"
sleep 1
T1=$(threads)
ok "300 clients at once: at most 256 connections copied ($((T1 - T0)) threads more)" test $((T1 - T0)) -le 260
wait "$HOLDER"
eq "... and it serves once they are gone" "$(curl -fsS "$U1/index.html")" served-by-web
# A lease in its own network namespace: the host's listeners are not its own.
H=$(free_port)
python3 -m http.server "$H" --bind 127.0.0.1 >/dev/null 2>&1 &
HOSTSRV=$!
add_cleanup "kill $HOSTSRV 2>/dev/null"
wait_for 10 sh -c "curl -fsS -o /dev/null http://127.0.0.1:$H"
ok "mkdir a lease with network=none" sh -c "echo 'new iso network=none' >'$MNT/ctl'"
ok "... its ports/ lists nothing of the host's (its own namespace)" not listed "$MNT/iso/ports" "$H"
lease_run_in iso "nohup python3 -m http.server $H --bind 127.0.0.1 >/dev/null 2>&1 & echo started" >/dev/null
ok "... but lists the same port once its own server listens on it" wait_for 20 listed "$MNT/iso/ports" "$H"
kill $HOSTSRV 2>/dev/null
end_leases
unmount_sbxfs

# --- e2b (fake) ---------------------------------------------------------------
start_fake e2b
export E2B_DOMAIN=example.test
mount_sbxfs
L=$MNT/box
ok "mkdir an e2b lease" mkdir "$L"
ID=$(json_get "$L/info" '["sandboxId"]')
P=$(free_port)
lease_run "nohup python3 -m http.server $P --bind 127.0.0.1 >/dev/null 2>&1 & echo started" >/dev/null
ok "a server started in the sandbox: ls ports/ lists $P" wait_for 20 listed "$L/ports" "$P"
eq "cat ports/$P is https://PORT-ID.\$E2B_DOMAIN" "$(cat "$L/ports/$P")" "https://$P-$ID.example.test"
ok "... and the last run's output is untouched by the listing" sh -c "! grep -q '0A' '$L/stdout'"
lease_run "pkill -f 'http.server $P' ; echo stopped" >/dev/null
ok "once it stops, ls ports/ no longer lists $P" wait_for 20 not listed "$L/ports" "$P"
end_leases
unmount_sbxfs
stop_fake
unset E2B_DOMAIN

# --- daytona (fake) -----------------------------------------------------------
start_fake daytona
mount_sbxfs
L=$MNT/dt
ok "mkdir a daytona lease" mkdir "$L"
eq "cat ports/8080: the preview URL, then one header line" "$(wc -l <"$L/ports/8080")" 2
ok "... the URL has its scheme" sh -c "head -n1 '$L/ports/8080' | grep -Eq '^https?://.*8080'"
ok "... the token is an X-Daytona-Preview-Token header line" \
	sh -c "sed -n 2p '$L/ports/8080' | grep -Eq '^X-Daytona-Preview-Token: [^ ]+$'"
ok "... and it is never logged" sh -c "! grep -q \"\$(sed -n 2p '$L/ports/8080' | cut -d' ' -f2)\" '$WORK/sbxfs.log'"
P=$(free_port)
lease_run "nohup python3 -m http.server $P --bind 127.0.0.1 >/dev/null 2>&1 & echo started" >/dev/null
ok "a server started in the sandbox: ls ports/ lists $P" wait_for 20 listed "$L/ports" "$P"
lease_run "pkill -f 'http.server $P' ; echo stopped" >/dev/null
finish
