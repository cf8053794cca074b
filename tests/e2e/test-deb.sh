#!/bin/bash
# The Debian package (issue 14): scripts/build-deb runs dpkg-buildpackage
# -us -uc -b on a clean clone of HEAD and lintian (no errors allowed); the
# .deb holds the daemon, the init helper, the man page, both units and the
# README; installed on this machine (and purged in the trap) it mounts
# through `mount -t fuse.sbxfs` with the installed files only, runs a local
# lease through the installed init helper and the installed sbx client, and
# `umount` ends it. The package build compiles everything again (its own
# tests are skipped: DEB_BUILD_OPTIONS=nocheck in scripts/build-deb).
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: installing a package needs root"; exit 77; }
# The package is built from the sources with its own flags: the ASan pass
# would only build the same package again.
[ "${SBXFS_ASAN:-0}" = 1 ] && { echo "SKIP: the package build is not instrumented (the plain pass runs it)"; exit 77; }
for t in dpkg-buildpackage dh lintian git; do
	command -v $t >/dev/null || { echo "SKIP: $t is missing (scripts/package-deps installs it)"; exit 77; }
done
if dpkg -s sbxfs >/dev/null 2>&1 || [ -e /usr/bin/sbxfs ]; then
	echo "SKIP: an sbxfs package or /usr/bin/sbxfs is installed already; not touching it"
	exit 77
fi
INSTALLED=
purge() { [ -n "$INSTALLED" ] && dpkg_locked dpkg --purge sbxfs >/dev/null 2>&1; INSTALLED=; }
# dpkg_locked CMD...: retries while another dpkg holds the lock.
dpkg_locked() {
	local t=60
	while [ $t -gt 0 ]; do
		"$@" 2>"$WORK/dpkg.err" && return 0
		grep -qi "lock" "$WORK/dpkg.err" || { cat "$WORK/dpkg.err"; return 1; }
		sleep 2
		t=$((t - 1))
	done
	return 1
}
DPID=
add_cleanup "[ -n \"\$DPID\" ] && { umount -l '$MNT' 2>/dev/null; kill \$DPID 2>/dev/null; }; purge"

ok "scripts/build-deb builds the package (dpkg-buildpackage -us -uc -b, lintian without errors)" \
	sh -c "'$top_srcdir/scripts/build-deb' '$WORK/deb' >'$WORK/build-deb.out' 2>&1" ||
	{ tail -n 30 "$WORK/build-deb.out"; finish; exit 1; }
DEB=$(ls "$WORK"/deb/sbxfs_*.deb)
dpkg -c "$DEB" | awk '{print $6}' >"$WORK/contents"
for f in ./usr/bin/sbxfs ./usr/libexec/sbxfs-init ./usr/share/man/man1/sbxfs.1.gz \
	./usr/bin/sbx ./usr/share/man/man1/sbx.1.gz ./usr/share/man/man8/sbxfs-init.8.gz \
	./usr/lib/systemd/system/sbxfs@.service ./usr/lib/systemd/user/sbxfs@.service \
	./usr/share/doc/sbxfs/README.md.gz; do
	ok "... the .deb has $f" grep -qx "$f" "$WORK/contents"
done
ok "... and its unit runs /usr/bin/sbxfs" sh -c "dpkg --fsys-tarfile '$DEB' | tar -xOf - ./usr/lib/systemd/system/sbxfs@.service | grep -q '^ExecStart=/usr/bin/sbxfs -f '"

ok "dpkg -i installs it" dpkg_locked dpkg -i "$DEB" && INSTALLED=1
ok "... /usr/bin/sbxfs --version" sh -c "/usr/bin/sbxfs --version | grep -q '^sbxfs '"
ok "... man sbxfs finds the page" sh -c "man -w sbxfs | grep -q /usr/share/man/man1/sbxfs.1"
echo '{}' >"$CONFIG"
cd "$WORK" || exit 1
ok "mount -t fuse.sbxfs with the installed files" \
	env -u SBXFS mount -t fuse.sbxfs sbxfs "$MNT" -o "config=$CONFIG,state_dir=$STATE,log=$WORK/d.log"
DPID=$(sed -n 's/.* sbxfs\[\([0-9]*\)\]: .*/\1/p' "$WORK/d.log" | tail -n 1)
ok "... it is /usr/bin/sbxfs that runs" sh -c "[ \"\$(readlink /proc/$DPID/exe)\" = /usr/bin/sbxfs ]"
ok "... answers" wait_for 10 test -f "$MNT/README"
ok "... a local lease through the installed init helper" mkdir "$MNT/w"
ok "... runs" sh -c "echo 'echo deb-ok' >'$MNT/w/exec'"
eq "... its output" "$(cat "$MNT/w/stdout")" "deb-ok"
eq "... the installed sbx client runs a command in it" "$(/usr/bin/sbx run "$MNT/w" -- echo sbx-ok)" "sbx-ok"
ok "... rmdir" rmdir "$MNT/w"
ok "umount" umount "$MNT"
ok "... the daemon exits" wait_for 10 sh -c "! kill -0 $DPID 2>/dev/null"
DPID=
ok "dpkg --purge removes it" dpkg_locked dpkg --purge sbxfs && INSTALLED=
ok "... /usr/bin/sbxfs is gone" test ! -e /usr/bin/sbxfs
finish
