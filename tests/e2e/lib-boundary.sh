# Attacks on the sandbox boundary from links the sandbox chose (sourced
# after lib.sh). The caller sets L (the lease), F (a directory in its fs/),
# FHOME (F's path in the sandbox) and SB_LINK (a command run with a link's
# target and its sandbox path, making the link as the sandbox would).
#   story_link_escapes   relative, absolute and /proc/self/root links: no
#                        host file is read or written through fs/
#   story_swap_race SECS a directory swapped for a link to a host directory
#                        while the host copies into it (SECS seconds, at
#                        least 5 rounds): no host file touched
#   story_hostile_listing KEY ARRAY  (remote; needs lib-fake.sh and hostile_entry
#                        NAME PATH, the provider's JSON of a listed file) a listing
#                        reply (the fake's endpoint KEY, its array ARRAY, "" for
#                        a bare array) carrying names no lookup can reach
HOSTDIR_DEPTH=../../../../../../../../../../../..
sb_link() { lease_run "ln -s '$1' '$2'" >/dev/null; }
# sb_race TARGET PATH SECS: swaps PATH until PATH.stop appears (at most
# 10 x SECS seconds), then writes "stopped|timeout SWAPS" to PATH.count.
sb_race() {
	lease_run "nohup sh -c 'end=\$((\$(date +%s) + 10 * $3)); n=0; why=timeout; : >$2.started
		while [ \$(date +%s) -lt \$end ]; do [ -e $2.stop ] && why=stopped && break
		rm -rf $2; mkdir $2; rm -rf $2; ln -s $1 $2; n=\$((n + 1)); done
		rm -rf $2; echo \$why \$n >$2.count' >/dev/null 2>&1 &" >/dev/null
}
: "${SB_LINK:=sb_link}" "${SB_RACE:=sb_race}"

story_link_escapes() {
	local V=$WORK/victim secret=host-secret-$$ t name
	echo "$secret" >"$V"
	mkdir -p "$WORK/hostdir"
	for t in "rel:$HOSTDIR_DEPTH$V" "abs:$V" "procroot:/proc/self/root$V" \
		"dotdot-abs:/..$V" "dir:$HOSTDIR_DEPTH$WORK/hostdir"; do
		name=${t%%:*}
		$SB_LINK "${t#*:}" "$FHOME/$name"
	done
	eq "the sandbox's links are there" "$(ls "$F" | grep -cE '^(rel|abs|procroot|dotdot-abs|dir)$')" 5
	for name in rel abs procroot dotdot-abs; do
		ok "reading fs/…/$name does not show the host's file" sh -c "! grep -qs '$secret' '$F/$name'"
		{ echo overwritten >"$F/$name"; } 2>/dev/null
		{ echo appended >>"$F/$name"; } 2>/dev/null
		truncate -s 0 "$F/$name" 2>/dev/null
		chmod 600 "$F/$name" 2>/dev/null
		eq "writing through fs/…/$name leaves the host's file alone" "$(cat "$V") $(stat -c %a "$V")" \
			"$secret $(stat -c %a "$V")"
		case $(realpath -m "$F/$name") in
		"$L/fs/"*) CHECKS=$((CHECKS + 1)); log "ok   $name leads inside fs/: $(readlink "$F/$name")" ;;
		*) FAILS=$((FAILS + 1)); log "FAIL $name leads out: $(realpath -m "$F/$name")" ;;
		esac
	done
	eq "an absolute link is the sandbox's path" "$(realpath -m "$F/abs")" "$L/fs$V"
	mkdir -p "$L/fs$WORK/hostdir"
	cp "$top_srcdir/README.md" "$F/dir/" 2>/dev/null
	mkdir "$F/dir/newdir" 2>/dev/null
	echo x >"$WORK/moved" && mv "$WORK/moved" "$F/dir/moved" 2>/dev/null
	tar -C "$top_srcdir" -cf - README.md | tar -C "$F/dir" -xf - 2>/dev/null
	# (rsync 3.5 may refuse a link owned by another user: then nothing is written at all)
	rsync -a "$top_srcdir/README.md" "$F/dir/rs.md" 2>/dev/null
	eq "cp, mkdir, mv, tar x, rsync into a link to a host directory: host dir untouched" \
		"$(ls -A "$WORK/hostdir")" ""
	eq "... the files are in the sandbox's directory of that name" \
		"$(lease_run "ls $WORK/hostdir" | grep -v '^rs.md$' | sort | tr '\n' ' ')" "README.md moved newdir "
}

# The sandbox flips $FHOME/race between a directory and a link to a host
# directory (SB_RACE: a command that runs that loop in the sandbox until
# race.stop appears, given the link target); the host copies files into
# race/ meanwhile, for SECS seconds and at least 5 rounds (a loaded machine
# is slow), then stops the loop, which must still have been running.
story_swap_race() {
	local secs=$1 i=0 end
	mkdir -p "$WORK/racehost" "$WORK/racesrc"
	for i in $(seq 1 20); do echo "$i" >"$WORK/racesrc/f$i"; done
	$SB_RACE "$HOSTDIR_DEPTH$WORK/racehost" "$FHOME/race" "$secs"
	wait_for 10 test -e "$F/race.started" || log "the swap loop did not start"
	end=$(($(date +%s) + secs))
	i=0
	while [ "$(date +%s)" -lt "$end" ] || [ "$i" -lt 5 ]; do
		cp "$WORK/racesrc/"* "$F/race/" 2>/dev/null
		mkdir "$F/race/d$i" 2>/dev/null
		{ echo x >"$F/race/e$i"; } 2>/dev/null
		i=$((i + 1))
	done
	: >"$F/race.stop"
	wait_for 20 test -s "$F/race.count"
	local swaps
	swaps=$(cat "$F/race.count" 2>/dev/null)
	log "swap race: $i rounds of cp/mkdir/echo in ${secs}s or more; the sandbox's loop: $swaps swaps"
	ok "the sandbox swapped all along the host's rounds ($swaps)" \
		sh -c "[ '${swaps% *}' = stopped ] && [ '${swaps#* }' -ge 5 ]"
	eq "swap race: zero files in the host directory" "$(ls -A "$WORK/racehost" | wc -l)" 0
}

# A server the sandbox controls (envd runs inside an e2b sandbox, and its
# root can replace it) lists ".", "..", a name with a '/', an empty one and
# one of 300 bytes. They were shown: "." and ".." twice in `ls -a` (e2b),
# and the 300-byte name, which no lookup can reach (ENAMETOOLONG to `ls
# -l`). Only names a lookup can reach are shown; a hostile "fake" name is
# one, and the mount goes on.
story_hostile_listing() {
	local d=$F/hostile n entries= long
	long=$(printf 'x%.0s' $(seq 300))
	lease_run "mkdir -p $FHOME/hostile && echo x >$FHOME/hostile/real" >/dev/null
	for n in . .. a/b "" "$long" fake; do
		entries+="${entries:+,}$(hostile_entry "$n" "$FHOME/hostile/$n")"
	done
	fault_only "{\"kind\":\"inject\",\"key\":\"$1\",\"append\":{\"$2\":[$entries]}}"
	eq "a hostile listing: only names a lookup can reach are shown" "$(ls -a "$d" | tr '\n' ' ')" ". .. fake real "
	fake_clear_faults
	eq "... and the mount goes on" "$(cat "$d/real")" x
}
