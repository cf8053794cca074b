#!/bin/bash
# The network of a local lease (issue 9): by default its own namespace with
# egress through slirp4netns. A server of this test on a host address is
# reached; one bound to the host's 127.0.0.1 is not (neither as 127.0.0.1
# nor through the gateway), nor the link-local metadata address; ports/PORT
# forwards the host's 127.0.0.1:PORT to a server in the lease; the stack
# stops with the lease. "network": "host" opts into the host's namespace,
# "none" has loopback only. No outside host is contacted.
. "$(dirname "$0")/lib.sh"
command -v slirp4netns >/dev/null || { echo "SKIP: slirp4netns is not installed"; exit 77; }
HOSTADDR=$(ip -4 -o addr show scope global 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
P_LO=$(free_port) P_PUB=$(free_port) P_IN=$(free_port)
mkdir -p "$WORK/www" && echo host-served >"$WORK/www/index.html"
SERVERS=
serve() { (cd "$WORK/www" && exec python3 -m http.server "$2" --bind "$1" >/dev/null 2>&1) & SERVERS="$SERVERS $!"; }
serve 127.0.0.1 "$P_LO"
[ -n "$HOSTADDR" ] && serve "$HOSTADDR" "$P_PUB"
add_cleanup '[ -n "$SERVERS" ] && kill $SERVERS 2>/dev/null'
wait_for 10 curl -sf -o /dev/null "http://127.0.0.1:$P_LO/" || { log "the host server did not start"; exit 1; }
# get URL: what a lease's python3 fetches ("ERR <errno name>" on failure).
get() { lease_run "python3 -c \"
import urllib.request, sys
try: print(urllib.request.urlopen('$1', timeout=4).read().decode().strip())
except Exception as e: r = getattr(e, 'reason', e); print('ERR', type(r).__name__)\""; }

mount_sbxfs
L=$MNT/net
mkdir "$L"
eq "info says isolated" "$(json_get "$L/info" '["sandbox"]["network"]')" isolated
if [ -n "$HOSTADDR" ]; then
	wait_for 10 curl -sf -o /dev/null "http://$HOSTADDR:$P_PUB/"
	eq "outbound through the user-mode stack: a server on the host's $HOSTADDR" \
		"$(get "http://$HOSTADDR:$P_PUB/index.html")" host-served
else
	log "(no global host address: the outbound check is not run)"
fi
eq "a server on the host's 127.0.0.1 is out of reach as 127.0.0.1" "$(get "http://127.0.0.1:$P_LO/index.html" | cut -c1-3)" ERR
eq "... and through the gateway (10.0.2.2)" "$(get "http://10.0.2.2:$P_LO/index.html" | cut -c1-3)" ERR
eq "the metadata address is unreachable" "$(lease_run "python3 -c \"
import socket, errno
s = socket.socket(); s.settimeout(4)
print(errno.errorcode.get(s.connect_ex(('169.254.169.254', 80)), 'connected'))\"" | sed 's/^E\(NET\|HOST\)UNREACH$/unreachable/')" unreachable
eq "resolv.conf points at the stack's DNS" "$(lease_run 'grep ^nameserver /etc/resolv.conf')" "nameserver 10.0.2.3"
lease_run "cd /tmp && echo lease-served > i.html && nohup python3 -m http.server $P_IN >/dev/null 2>&1 & sleep 0.5" >/dev/null
# (ports/PORT: the URL on its first line; remote providers add header lines)
URL=$(head -n 1 "$L/ports/$P_IN")
eq "ports/PORT names the host's end" "$URL" "http://127.0.0.1:$P_IN"
ok "... which reaches the server in the lease" wait_for 10 sh -c "curl -sf '$URL/i.html' | grep -q lease-served"
eq "... reading ports/PORT again is fine" "$(head -n 1 "$L/ports/$P_IN")" "http://127.0.0.1:$P_IN"
ID=$(json_get "$L/info" '["sandbox"]["dir"]')
# ([s]: the pattern does not match the sh -c that carries it)
ok "the stack runs while the lease does" sh -c "pgrep -f '[s]lirp4netns.*$ID/net.sock' >/dev/null"
rmdir "$L"
ok "... and stops with it" wait_for 10 sh -c "! pgrep -f '[s]lirp4netns.*$ID/net.sock' >/dev/null"

echo "new hostnet network=host" >"$MNT/ctl"
L=$MNT/hostnet
eq "network=host: info says host" "$(json_get "$L/info" '["sandbox"]["network"]')" host
eq "network=host: the host's loopback, on purpose" "$(get "http://127.0.0.1:$P_LO/index.html")" host-served
echo "new nonet network=none" >"$MNT/ctl"
L=$MNT/nonet
eq "network=none: no interface but loopback" "$(lease_run 'ls /sys/class/net | tr "\n" " "')" "lo "
[ -n "$HOSTADDR" ] && eq "network=none: nothing outside" "$(get "http://$HOSTADDR:$P_PUB/index.html" | cut -c1-3)" ERR
finish
