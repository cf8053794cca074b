# Sourced by the test-*-bytes.sh tests after lib.sh: output that is not
# UTF-8 text, on every provider, through ordinary tools.
#   story_bytes_exec     binary stdout and stderr (over several polls) arrive byte for byte
#   story_bytes_code     a code cell writing bytes that are not UTF-8, and a lone surrogate

# sha_of CMD: the sha256 of what the shell text CMD prints here, on the host.
sha_of() { bash -c "$1" | sha256sum | cut -d' ' -f1; }

story_bytes_exec() {
	local out='seq 1 40000 | gzip -n; sleep 1.5; seq 40001 70000 | gzip -n'
	local err='seq 5 30000 | gzip -n'
	printf '%s\n' "{ $err; } >&2; $out" >"$L/exec"
	eq "cat exec: binary stdout over several polls, byte for byte" \
		"$(cat "$L/exec" | sha256sum | cut -d' ' -f1)" "$(sha_of "$out")"
	eq "stderr too" "$(sha256sum <"$L/stderr" | cut -d' ' -f1)" "$(sha_of "$err")"
	ok "result is valid JSON" valid_json "$L/result"
	eq "... stdout null, stdoutBinary, both sizes exact" \
		"$(json_get "$L/result" '["stdout"], d["stdoutBinary"], d["stdoutBytes"], d["stderrBytes"]')" \
		"(None, True, $(bash -c "$out" | wc -c), $(bash -c "$err" | wc -c))"
	printf '%s\n' 'printf "\377\376\000x"' >"$L/exec"
	eq "every byte value survives: ff fe 00 78" "$(od -An -tx1 "$L/stdout" | tr -d ' ')" "fffe0078"
}

story_bytes_code() {
	# The interpreters' protocol carries text (Jupyter's stream messages on
	# E2B, the same NDJSON events on local and Daytona): bytes that are not
	# UTF-8 written to fd 1 become U+FFFD, the same on every provider, and
	# nothing around them is lost.
	printf 'import os\nos.write(1, b"bad\\xff\\n")\nprint("ok")\n7\n' >"$L/code.py"
	eq "code.py writing a byte that is not UTF-8: U+FFFD in its place, the rest kept" \
		"$(cat "$L/code.py" | od -An -c | tr -s ' ')" " b a d 357 277 275 \n o k \n 7 \n"
	ok "result is valid JSON" valid_json "$L/result"
	eq "... success, the value" "$(json_get "$L/result" '["success"], d["output"]')" "(True, 7)"
	printf 'print("s\\udcff")\nprint("a\\0b")\nprint("after")\n' >"$L/code.py"
	eq "python: a lone surrogate becomes U+FFFD, a NUL stays, no line lost" \
		"$(cat "$L/code.py" | od -An -c | tr -s ' ')" " s 357 277 275 \n a \0 b \n a f t e r \n"
	ok "result is valid JSON" valid_json "$L/result"
	printf 'console.log("j\\udcff"); console.log("after")\n' >"$L/code.js"
	eq "javascript: a lone surrogate becomes U+FFFD, no line lost" \
		"$(cat "$L/code.js" | od -An -c | tr -s ' ')" " j 357 277 275 \n a f t e r \n"
}
