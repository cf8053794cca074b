# The POSIX conformance cases (posix-cases.py), sourced after lib.sh by
# test-*-posix.sh: each case runs on fs/ of a lease and on a plain
# directory of this machine, and the two answers must be the same line.
#   posix_compare DIR-IN-FS [KNOWN-GAP...]
# A known gap is a case the provider is known to answer differently (each
# explained in doc/DESIGN.md): it is shown, not counted as a pass, and it
# fails the test once it answers like the reference (then drop it here).
# A gap written ~NAME answers differently in some runs only: it is shown
# and never counted either way.
POSIX_CASES=$top_srcdir/tests/e2e/posix-cases.py

posix_compare() {
	local dir=$1 ref=$WORK/posix-ref name want got gap
	shift
	chmod 755 "$WORK" # the cases that act as uid 65534 reach both directories through it
	mkdir -p "$ref" "$dir"
	POSIX_REFERENCE=1 python3 "$POSIX_CASES" "$ref" >"$WORK/posix-ref.txt" 2>&1
	python3 "$POSIX_CASES" "$dir" >"$WORK/posix-got.txt" 2>&1
	while IFS= read -r want; do
		name=${want%%:*}
		got=$(grep -m1 "^$name:" "$WORK/posix-got.txt")
		gap=0
		for g in "$@"; do
			[ "$g" = "$name" ] && gap=1
			[ "$g" = "~$name" ] && gap=2
		done
		if [ $gap = 2 ]; then
			log "VARY posix $name (known to vary between runs, not counted): got [${got#*: }], reference [${want#*: }]"
			continue
		fi
		if [ $gap = 1 ]; then
			if [ "$got" = "$want" ]; then
				CHECKS=$((CHECKS + 1)) FAILS=$((FAILS + 1))
				log "FAIL posix $name answers like the reference now: not a known gap any more"
			else
				log "GAP  posix $name (known): got [${got#*: }], reference [${want#*: }]"
			fi
			continue
		fi
		eq "posix $name" "${got#*: }" "${want#*: }"
	done <"$WORK/posix-ref.txt"
	eq "every case ran on the reference" "$(wc -l <"$WORK/posix-ref.txt")" \
		"$(python3 -c 'import re,sys; print(len(re.findall(r"^def c_", open(sys.argv[1]).read(), re.M)))' "$POSIX_CASES")"
}

# posix_on_fake e2b|daytona [KNOWN-GAP...]: the cases on a lease of a remote
# provider served by its fake (lib-fake.sh sourced before).
posix_on_fake() {
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (owners, device nodes)"; exit 77; }
	start_fake "$1"
	shift
	mount_sbxfs -o allow_other,default_permissions,share_group=nogroup,xattr
	L=$MNT/posix
	mkdir "$L"
	posix_compare "$L/fs/tmp/cases" "$@"
}
