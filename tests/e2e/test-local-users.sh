#!/bin/bash
# The mount belongs to the user who mounted it (issue 9): under allow_other,
# an unprivileged host user (made here with useradd, removed at exit) gets
# EACCES reading env, running exec, writing ctl and state of another user's
# lease, and changes nothing; -o share_group=GROUP lets that group in.
. "$(dirname "$0")/lib.sh"
command -v useradd >/dev/null || { echo "SKIP: no useradd"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
U=sbxu$$
useradd -M -N -s /bin/sh "$U" || { echo "useradd failed"; exit 1; }
groupadd "${U}g" || { userdel "$U"; echo "groupadd failed"; exit 1; }
add_cleanup "userdel $U 2>/dev/null; groupdel ${U}g 2>/dev/null"
chmod 755 "$WORK"
as_u() { setpriv --reuid="$U" --regid="$(id -g "$U")" --clear-groups "$@"; }
as_u_shared() { setpriv --reuid="$U" --regid="$(id -g "$U")" --groups="${U}g" "$@"; }
# u_errno COMMAND...: prints EACCES (or what the shell said) for a command run as U.
u_errno() { as_u sh -c "$1" 2>&1 | grep -q 'Permission denied' && echo EACCES || echo "not refused"; }

mount_sbxfs -o allow_other
L=$MNT/mine
mkdir "$L"
echo 'TOKEN=s3cret' >"$L/env"
echo 'echo hi' >"$L/exec"
eq "the mount root is the owner's alone" "$(stat -c '%a %U' "$MNT")" "700 root"
eq "a lease directory is 0700" "$(stat -c %a "$L")" 700
eq "control files keep the owner's bits only" \
	"$(stat -c '%n %a' "$L/exec" "$L/env" "$L/state" "$L/stdout" "$MNT/ctl" | sed "s|$MNT/||" | tr '\n' ' ')" \
	"mine/exec 600 mine/env 600 mine/state 600 mine/stdout 400 ctl 200 "
eq "another user cannot read env" "$(u_errno "cat '$L/env'")" EACCES
eq "... nor run through exec" "$(u_errno "echo 'id > /root/pwned' > '$L/exec'")" EACCES
eq "... nor create a lease through ctl" "$(u_errno "echo 'new theirs' > '$MNT/ctl'")" EACCES
eq "... nor kill the lease through state" "$(u_errno "echo kill > '$L/state'")" EACCES
eq "... nor list the mount" "$(u_errno "ls '$MNT'")" EACCES
eq "... nor write into fs/" "$(u_errno "echo x > '$L/fs/tmp/theirs'")" EACCES
eq "... nor mkdir a lease" "$(u_errno "mkdir '$MNT/theirs'")" EACCES
eq "nothing changed: the lease runs" "$(cat "$L/state")" running
eq "... its env is the owner's" "$(cat "$L/env")" "TOKEN=s3cret"
eq "... no run happened" "$(lease_run 'test -e /root/pwned && echo yes || echo no')" no
eq "... no other lease exists" "$(ls "$MNT" | grep -c theirs)" 0
eq "... no file in fs/" "$(test -e "$L/fs/tmp/theirs" && echo yes || echo no)" no
# ports/PORT forwards the host's 127.0.0.1:PORT into the lease: any local
# user could connect and reach the lease's server (a notebook, a debug
# console: a way to drive the lease). The owner of each connection's host
# socket is checked against the mount's rule.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
serve() { # serve LEASE-DIR: a server in the lease, its URL through ports/ in $URL
	local p
	p=$(free_port)
	printf '%s\n' "nohup python3 -m http.server $p >/dev/null 2>&1 & echo started" >"$1/exec"
	cat "$1/exec" >/dev/null
	wait_for 20 sh -c "ls '$1/ports' | grep -qx $p" && URL=$(head -n1 "$1/ports/$p") && PORT=$p
}
serve "$L"
ok "the owner reaches the lease's server through ports/" wait_for 10 curl -fsS -o /dev/null "$URL"
eq "another user's connection to it is refused" "$(as_u curl -sS -o /dev/null -w '%{http_code}' "$URL" 2>/dev/null)" 000
ok "... the log says who" grep -q "ports: $PORT: a connection from uid $(id -u "$U") refused" "$WORK/sbxfs.log"
end_leases
unmount_sbxfs

# Opened to one group on purpose.
mount_sbxfs -o "allow_other,share_group=${U}g"
L=$MNT/shared
mkdir "$L"
eq "shared: the group gets the owner's bits" "$(stat -c '%a %G' "$L" "$L/exec" | tr '\n' ' ')" "770 ${U}g 660 ${U}g "
eq "shared: a member runs a command" "$(as_u_shared sh -c "echo 'echo from-member' > '$L/exec' && cat '$L/stdout'")" from-member
eq "shared: a user outside the group still cannot" "$(u_errno "cat '$L/env'")" EACCES
usermod -a -G "${U}g" "$U"
serve "$L"
eq "shared: a member (by the user database) reaches the lease's server" \
	"$(as_u curl -sS -o /dev/null -w '%{http_code}' "$URL" 2>/dev/null)" 200
end_leases
unmount_sbxfs

# fs/ shared on purpose (-o share_fs): a shared disk, the control files still the owner's.
mount_sbxfs -o allow_other,share_fs
L=$MNT/disk
mkdir "$L"
echo 'mkdir -p /srv/own && chmod 700 /srv/own && echo secret > /srv/own/f && echo pub > /srv/pub && chmod 644 /srv/pub' >"$L/exec"
eq "share_fs: the root and lease directories show o+x only" "$(stat -c %a "$MNT" "$L" | tr '\n' ' ')" "711 711 "
eq "share_fs: another user writes into fs/tmp" "$(as_u sh -c "echo theirs > '$L/fs/tmp/theirs' && cat '$L/fs/tmp/theirs'" 2>&1)" theirs
eq "... the file is theirs in the sandbox" "$(lease_run 'stat -c %u /tmp/theirs')" "$(id -u "$U")"
eq "... reads a 0644 file" "$(as_u cat "$L/fs/srv/pub" 2>&1)" pub
eq "... not a 0700 directory's file" "$(u_errno "cat '$L/fs/srv/own/f'")" EACCES
eq "... nor writes a root-owned 0644 file" "$(u_errno "echo x >> '$L/fs/srv/pub'")" EACCES
eq "... nor reads env" "$(u_errno "cat '$L/env'")" EACCES
eq "... nor runs through exec" "$(u_errno "echo 'id > /root/pwned' > '$L/exec'")" EACCES
eq "... nor reads info" "$(u_errno "cat '$L/info'")" EACCES
eq "... nor lists the mount or the lease" "$(u_errno "ls '$MNT'"; u_errno "ls '$L'")" "EACCES
EACCES"
eq "... nor creates or kills a lease" "$(u_errno "mkdir '$MNT/theirs'"; u_errno "rmdir '$L'"; u_errno "echo kill > '$L/state'")" "EACCES
EACCES
EACCES"
eq "... nothing changed: the lease runs, no run happened" "$(cat "$L/state") $(lease_run 'test -e /root/pwned && echo yes || echo no')" "running no"
finish
