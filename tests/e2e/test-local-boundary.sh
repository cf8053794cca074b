#!/bin/bash
# The sandbox boundary of a local lease, attacked (issue 9): links the
# sandbox makes never lead a host process out of fs/ (relative, absolute,
# /proc/self/root, a directory swapped for a link during copies); the
# sandbox sees no host secret (/etc/shadow, /etc/ssh, another mount's
# state dir under /var/lib, the host's working trees) and holds no host
# descriptor (the inherited-descriptor write through /proc/1/fd/2), the
# obvious escapes are refused (seccomp, capabilities, no_new_privs) while
# python3, node, git and ptrace inside the lease still work, and the
# host's kernel knobs a container runtime hides are hidden (read-only
# /proc/irq, /proc/bus, /proc/fs, /proc/sys; empty keys, timers, firmware).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-boundary.sh"
mount_sbxfs
L=$MNT/edge
mkdir "$L"
F=$L/fs/root
FHOME=/root
story_link_escapes
story_swap_race 4

# Another mount's state directory, where the issue found it (/var/lib).
OTHER=/var/lib/sbxfs-e2e-$$
mkdir -p "$OTHER/local/lcl-000000000000" && echo "other-mount-$$" >"$OTHER/local/lcl-000000000000/disk.img"
add_cleanup "rm -rf '$OTHER'"
seen() { lease_run "cat $1 >/dev/null 2>&1 && echo readable || echo hidden"; }
eq "the sandbox cannot read /etc/shadow" "$(seen /etc/shadow)" hidden
eq "... nor /etc/gshadow" "$(seen /etc/gshadow)" hidden
eq "... nor an ssh host key" "$(lease_run 'ls /etc/ssh 2>/dev/null | wc -l')" 0
eq "... nor another mount's state dir (its disk.img)" "$(seen "$OTHER/local/lcl-000000000000/disk.img")" hidden
eq "... nor /var/lib at all" "$(lease_run 'ls -A /var/lib | wc -l')" 0
eq "... nor this test's own tree on the host" "$(seen "$top_srcdir/README.md")" hidden
eq "the host's top level is an allowlist" "$(lease_run 'ls / | tr "\n" " "')" \
	"$(cd / && ls -d bin dev etc home lib lib32 lib64 libx32 media mnt proc root run sbin srv sys tmp usr var 2>/dev/null | tr '\n' ' ')"
eq "passwd and group are there" "$(lease_run 'getent passwd root | cut -d: -f1; getent group root | cut -d: -f1' | tr '\n' ' ')" "root root "
# init's descriptors: the issue grew init.log by 100 MiB through /proc/1/fd/2.
lease_run 'dd if=/dev/zero bs=1M count=100 >> /proc/1/fd/2 2>/dev/null; echo $? > /tmp/dd.rc' >/dev/null
ok "dd >> /proc/1/fd/2 fails in the lease" test "$(cat "$L/fs/tmp/dd.rc")" != 0
ok "... and init.log stays under 64 KiB" test "$(cat "$STATE"/local/*/init.log 2>/dev/null | wc -c)" -le 65536
eq "no process of the lease holds a host file of the state dir" \
	"$(lease_run 'ls -l /proc/[0-9]*/fd/ 2>/dev/null' | grep -c "$STATE")" 0
eq "init's descriptors are closed to the lease (non-dumpable, no SYS_PTRACE)" \
	"$(lease_run 'readlink /proc/1/fd/2 >/dev/null 2>&1 && echo open || echo closed')" closed
# The obvious escapes (seccomp, the bounding set, no_new_privs).
eq "no_new_privs and a seccomp filter" "$(lease_run 'grep -E "^(NoNewPrivs|Seccomp):" /proc/self/status | tr -s "\t " " " | tr "\n" " "')" \
	"NoNewPrivs: 1 Seccomp: 2 "
eq "a user namespace cannot be made (unshare -U)" "$(lease_run 'unshare -U true 2>/dev/null && echo made || echo refused')" refused
if [ "$(uname -m)" = x86_64 ]; then
	# keyctl 250, bpf 321, userfaultfd 323, init_module 175, mount 165, open_by_handle_at 304
	eq "keyctl, bpf, userfaultfd, init_module, mount, open_by_handle_at: EPERM" "$(lease_run 'python3 -c "
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
out = []
for nr in (250, 321, 323, 175, 165, 304):
    r = libc.syscall(nr, 0, 0, 0, 0, 0)
    out.append(os.strerror(ctypes.get_errno()) if r < 0 else \"ok\")
print(\",\".join(sorted(set(out))))"')" "Operation not permitted"
fi
eq "capabilities: a container's set (no SYS_ADMIN, SYS_PTRACE, NET_ADMIN, NET_RAW, MKNOD)" \
	"$(lease_run 'python3 -c "
b = int([l for l in open(\"/proc/self/status\") if l.startswith(\"CapBnd\")][0].split()[1], 16)
print([c for c in (21, 19, 12, 13, 27) if b >> c & 1])"')" "[]"
# Root in the lease is root on the host: kernel interfaces that check only
# a file's mode were writable (the host's IRQ affinity was changed from a
# lease, PCI config space opened for writing), and the host's keys, timers
# and firmware tables readable. Opened for appending, nothing is written.
eq "the host's IRQ affinity, PCI config space and /proc/fs are read-only in the lease" "$(lease_run '
for f in /proc/irq/default_smp_affinity /proc/irq/*/smp_affinity /proc/bus/pci/*/* /proc/sys/kernel/hostname; do
	[ -f "$f" ] && (exec 3>>"$f") 2>/dev/null && echo "$f opens for writing"
done; echo done')" done
eq "... and the host's keys, timers, interrupts and firmware tables are hidden" \
	"$(lease_run 'cat /proc/keys /proc/key-users /proc/timer_list /proc/interrupts 2>/dev/null | wc -c; ls -A /sys/firmware | wc -l' | tr '\n' ' ')" "0 0 "
eq "ptrace inside the lease still works (debuggers)" "$(lease_run 'python3 -c "
import ctypes, os, subprocess, time
libc = ctypes.CDLL(None, use_errno=True)
p = subprocess.Popen([\"sleep\", \"5\"]); time.sleep(0.2)
print(libc.ptrace(16, p.pid, 0, 0)); p.kill()"')" 0
eq "python3 runs" "$(lease_run 'python3 -c "import ssl, json; print(6*7)"')" 42
eq "node runs" "$(lease_run 'node -e "console.log(6*7)"')" 42
eq "git commits" "$(lease_run 'cd /tmp && git init -q g && cd g && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m m && git log --format=%s')" m
finish
