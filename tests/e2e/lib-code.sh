# Sourced by the test-*-code.sh tests after lib.sh (and lib-fake.sh): the
# checks of code.py / code.js / code.ts that every provider must pass, run
# through ordinary tools. One copy, so the same runs give the same results
# on every provider (code_signature compares them to one expected text).

# rfield LEASE EXPR: EXPR over the lease's `result` JSON (as r), printed.
rfield() {
	python3 - "$1/result" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print(json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else v)
PY
}

# ms_since T0: milliseconds since the date +%s%N stamp T0.
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

code_state() { # LEASE
	local L=$1
	echo 'x = 41' >"$L/code.py"
	echo 'x + 1' >"$L/code.py"
	eq "x = 41 then x + 1 prints 42" "$(cat "$L/code.py")" "42"
	eq "result: success" "$(rfield "$L" 'r["success"]')" "true"
	eq "result: output is the value (parsed JSON)" "$(rfield "$L" 'r["output"]')" "42"
	eq "result: language" "$(rfield "$L" 'r["language"]')" "python"
	printf 'import math\ndef twice(v):\n    return v * 2\n' >"$L/code.py"
	echo 'twice(math.floor(2.5)) + x' >"$L/code.py"
	eq "imports and definitions survive between runs" "$(cat "$L/code.py")" "45"
	printf 'print("hi")\nprint("there")\n[x, "y"]\n' >"$L/code.py"
	eq "read gives stdout, then the value" "$(cat "$L/code.py")" "$(printf 'hi\nthere\n[41, %s]' "'y'")"
	eq "result: stdout alone" "$(rfield "$L" 'r["stdout"]')" "$(printf 'hi\nthere')"
	ok "stdout file has the printed lines" grep -qx there "$L/stdout"
}

code_errors() { # LEASE
	local L=$1
	echo 'raise ValueError("boom")' >"$L/code.py"
	eq "an exception is not a filesystem error" "$?" "0"
	eq "exception: success false" "$(rfield "$L" 'r["success"]')" "false"
	eq "exception: error.name" "$(rfield "$L" 'r["error"]["name"]')" "ValueError"
	eq "exception: error.message" "$(rfield "$L" 'r["error"]["message"]')" "boom"
	ok "exception: error.traceback names the cell and the error" \
		python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["error"]["traceback"]; assert "<cell>" in t and "ValueError: boom" in t and "pykernel" not in t, t' "$L/result"
	printf 'print("before")\n1/0\n' >"$L/code.py"
	eq "output before an exception is kept" "$(cat "$L/code.py")" "before"
	eq "ZeroDivisionError named" "$(rfield "$L" 'r["error"]["name"]')" "ZeroDivisionError"
	echo 'def broken(:' >"$L/code.py"
	eq "a syntax error is a failed run too" "$(rfield "$L" 'r["error"]["name"]')" "SyntaxError"
	echo 'x' >"$L/code.py"
	eq "state survives a failed run" "$(cat "$L/code.py")" "41"
}

code_rich() { # LEASE
	local L=$1 png
	printf 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.title("t")\nplt.show()\n' >"$L/code.py"
	png=$(rfield "$L" '[o["file"] for o in r["results"] if o["mime"] == "image/png"][0]')
	ok "a matplotlib figure is listed in result" test -n "$png"
	ok "... and lands in results/ as a PNG file" test -f "$L/results/$png"
	ok "... with the PNG magic bytes" python3 -c 'import sys; assert open(sys.argv[1], "rb").read(8) == b"\x89PNG\r\n\x1a\n"' "$L/results/$png"
	ok "... that file(1) calls PNG image data" sh -c "file '$L/results/$png' | grep -q 'PNG image data'"
	printf 'class Table:\n    def _repr_html_(self):\n        return "<table><tr><td>1</td></tr></table>"\nTable()\n' >"$L/code.py"
	local html
	html=$(rfield "$L" '[o["file"] for o in r["results"] if o["mime"] == "text/html"][0]')
	eq "an object's _repr_html_ lands in results/" "$(cat "$L/results/$html")" "<table><tr><td>1</td></tr></table>"
	printf 'class Pic:\n    def _repr_svg_(self):\n        return "<svg xmlns=\\"http://www.w3.org/2000/svg\\"/>"\ndisplay(Pic())\n' >"$L/code.py"
	ok "display() of an object with _repr_svg_ gives results/N.svg" \
		sh -c "ls '$L/results' | grep -q '\\.svg\$'"
}

code_stream() { # LEASE
	local L=$1 t0 first t_first rest t_all
	exec 3<>"$L/code.py"
	printf 'import time\nfor i in range(10):\n    print("tick", i)\n    time.sleep(1)\n' >&3
	t0=$(date +%s%N)
	read -r first <&3
	t_first=$(ms_since "$t0")
	rest=$(cat <&3)
	t_all=$(ms_since "$t0")
	exec 3>&-
	eq "a read-write open streams: first line" "$first" "tick 0"
	ok "... arrives long before the run ends (${t_first} ms)" test "$t_first" -lt 3000
	eq "... then the rest" "$(echo $rest)" "tick 1 tick 2 tick 3 tick 4 tick 5 tick 6 tick 7 tick 8 tick 9"
	ok "... and EOF comes with the end of the run (${t_all} ms)" test "$t_all" -ge 8500
}

code_js_ts() { # LEASE
	local L=$1
	echo 'const a = 20; a * 2' >"$L/code.js"
	eq "javascript value" "$(cat "$L/code.js")" "40"
	echo 'a + 2' >"$L/code.js"
	eq "javascript state survives" "$(cat "$L/code.js")" "22"
	echo 'console.log("js out"); ({k: [1, 2]})' >"$L/code.js"
	eq "javascript stdout then value" "$(cat "$L/code.js")" "$(printf 'js out\n{ k: [ 1, 2 ] }')"
	echo 'throw new TypeError("bad js")' >"$L/code.js"
	eq "javascript exception: name" "$(rfield "$L" 'r["error"]["name"]')" "TypeError"
	eq "javascript exception: message" "$(rfield "$L" 'r["error"]["message"]')" "bad js"
	echo 'typeof x' >"$L/code.js"
	eq "javascript and python are separate interpreters" "$(cat "$L/code.js")" "'undefined'"
	printf 'const n: number = 5;\nfunction sq(v: number): number { return v * v }\nsq(n)\n' >"$L/code.ts"
	eq "typescript runs" "$(cat "$L/code.ts")" "25"
	echo 'sq(n + 1)' >"$L/code.ts"
	eq "typescript state survives" "$(cat "$L/code.ts")" "36"
	eq "result: language typescript" "$(rfield "$L" 'r["language"]')" "typescript"
}

code_restart() { # LEASE
	local L=$1
	echo 'kept = "yes"' >"$L/code.py"
	echo 'kept' >"$L/code.py"
	eq "state before restart" "$(cat "$L/code.py")" "'yes'"
	ok "restart python is accepted" sh -c "echo 'restart python' > '$L/state'"
	echo 'kept' >"$L/code.py"
	eq "restart python loses state" "$(rfield "$L" 'r["error"]["name"]')" "NameError"
	eq "... and a restart is not a lost state" "$(rfield "$L" 'r["stateLost"]')" "false"
	echo 'a' >"$L/code.js"
	eq "restart python leaves javascript alone" "$(cat "$L/code.js")" "20"
	echo 'restart' >"$L/state"
	echo 'typeof a' >"$L/code.js"
	eq "restart (all) resets javascript" "$(cat "$L/code.js")" "'undefined'"
	ok "restart of an unknown language is refused" sh -c "! echo 'restart cobol' > '$L/state' 2>/dev/null"
	# restart is also how a runaway cell is stopped.
	(echo 'while True: pass' >"$L/code.py") &
	local bg=$!
	sleep 2
	ok "a runaway cell is still running" kill -0 "$bg"
	ok "restart python while it runs" sh -c "echo 'restart python' > '$L/state'"
	ok "... ends the runaway run" wait_for 20 sh -c "! kill -0 $bg"
	wait "$bg"
	eq "... whose result says the interpreter went away" "$(rfield "$L" 'r["error"]["name"]')" "UnexpectedEndOfExecution"
	echo '6 * 7' >"$L/code.py"
	eq "... and the next run is served" "$(cat "$L/code.py")" "42"
	eq "... by a fresh interpreter not reported as lost" "$(rfield "$L" 'r["stateLost"]')" "false"
	# The env file's PATH is the code's (os.environ); one without python3
	# in it left the cell unrun on local ("python3 is not on PATH").
	printf 'PATH=/nonexistent\n' >"$L/env"
	echo 'restart python' >"$L/state"
	printf 'import os\nos.environ["PATH"]\n' >"$L/code.py"
	eq "a fresh interpreter under an env PATH without python3 in it" "$(cat "$L/code.py")" \
		"'/nonexistent'"
	: >"$L/env"
	echo 'restart python' >"$L/state"
	# A variable taken out of env is gone from the next cell and from what
	# it starts: on local the interpreter had been started with the env
	# file's variables, so a secret removed from env stayed in os.environ
	# for the interpreter's life (e2b and daytona dropped it).
	printf 'SBX_SECRET=s3cret\nSBX_KEPT=k1\n' >"$L/env"
	printf 'import os\nos.environ.get("SBX_SECRET")\n' >"$L/code.py"
	eq "an env variable reaches the cell" "$(cat "$L/code.py")" "'s3cret'"
	printf 'SBX_KEPT=k2\n' >"$L/env"
	printf 'import os, subprocess\n(os.environ.get("SBX_SECRET"), os.environ.get("SBX_KEPT"), subprocess.run(["sh", "-c", "echo \\"[$SBX_SECRET]\\""], capture_output=True, text=True).stdout.strip())\n' >"$L/code.py"
	eq "... taken out of env, it is gone from the next cell and its children" \
		"$(cat "$L/code.py")" "(None, 'k2', '[]')"
	: >"$L/env"
}

# code_concurrent_start LEASE: cells sent at once to a fresh interpreter
# all land in one. On daytona each cell's client started a server of its
# own (four python servers on one socket path, the last one's rename
# winning): the others' variables were lost and their processes stayed.
code_concurrent_start() { # LEASE
	local L=$1
	echo 'restart python' >"$L/state"
	cells_at_once "$L/code.py" 'v_@ = @'
	echo 'sorted(k for k in globals() if k.startswith("v_"))' >"$L/code.py"
	eq "six cells sent at once to a fresh interpreter share it" "$(cat "$L/code.py")" \
		"['v_1', 'v_2', 'v_3', 'v_4', 'v_5', 'v_6']"
	echo 'restart javascript' >"$L/state"
	cells_at_once "$L/code.js" 'var w_@ = @'
	echo 'Object.keys(globalThis).filter((k) => k.startsWith("w_")).sort().join(" ")' >"$L/code.js"
	eq "... and six javascript cells too" "$(cat "$L/code.js")" "'w_1 w_2 w_3 w_4 w_5 w_6'"
}

# cells_at_once FILE TEXT: six writes of TEXT, its @ replaced by 1 to 6, to FILE at once.
cells_at_once() {
	local f=$1 text=$2 i pids=()
	for i in 1 2 3 4 5 6; do
		(echo "${text//@/$i}" >"$f") &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
}

# code_died LEASE VAR WHY: the python run just made on LEASE lost its
# interpreter (WHY); a run before it had set VAR. The result says so, and
# the next run is served by a fresh interpreter that reports stateLost.
code_died() {
	local L=$1 var=$2 why=$3
	eq "a run whose interpreter $why: success false" "$(rfield "$L" 'r["success"]')" "false"
	eq "... UnexpectedEndOfExecution" "$(rfield "$L" 'r["error"]["name"]')" "UnexpectedEndOfExecution"
	echo "\"$var\" in globals()" >"$L/code.py"
	eq "the next run gets a fresh interpreter" "$(cat "$L/code.py")" "False"
	eq "... and result says stateLost" "$(rfield "$L" 'r["stateLost"]')" "true"
}

code_death() { # LEASE: an interpreter that dies is replaced, and the next result says so
	local L=$1
	echo 'doomed = 1' >"$L/code.py"
	echo 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)' >"$L/code.py"
	code_died "$L" doomed "dies"
	echo '1' >"$L/code.py"
	eq "... once" "$(rfield "$L" 'r["stateLost"]')" "false"
}

code_timeout() { # LEASE: a second lease, LEASE-slow, whose runs have a runTimeout of 2 s
	local S=$1-slow t0 r
	echo "new ${S##*/} runTimeout=2" >"$MNT/ctl"
	echo 'y = 1' >"$S/code.py"
	t0=$(date +%s%N)
	r=$(errno_of_write "$S/code.py" 'while True: pass')
	eq "a cell past runTimeout fails with ETIMEDOUT" "$r" ETIMEDOUT
	ok "... soon after the 2 s ($(ms_since "$t0") ms)" test "$(ms_since "$t0")" -lt 15000
	ok "error says runTimeout and the restart" grep -q "runTimeout (2 s).*restarted" "$S/error"
	t0=$(date +%s%N)
	echo '"y" in globals()' >"$S/code.py"
	eq "the next cell runs in a restarted interpreter" "$(cat "$S/code.py")" "False"
	ok "... at once, not behind the runaway cell ($(ms_since "$t0") ms)" test "$(ms_since "$t0")" -lt 10000
	ok "the lease's spec shows runTimeout" grep -q '"runTimeout": 2' "$S/spec"
	ok "rmdir the slow lease" rmdir "$S"
}

code_interrupt() { # LEASE: the process waiting for a cell is killed
	local L=$1 t0
	t0=$(date +%s%N)
	timeout 2 sh -c "echo 'import time; time.sleep(60)' > '$L/code.py'"
	ok "a killed writer of a cell is let go soon ($(ms_since "$t0") ms)" test "$(ms_since "$t0")" -lt 10000
	ok "error says the cell was stopped and its interpreter restarted" \
		grep -q "stopped: the process waiting for it was killed; its python interpreter was restarted" "$L/error"
	t0=$(date +%s%N)
	echo '6 * 7' >"$L/code.py"
	eq "the next cell is served" "$(cat "$L/code.py")" 42
	ok "... at once ($(ms_since "$t0") ms)" test "$(ms_since "$t0")" -lt 10000
}

code_all() { # LEASE: every check above, in an order that builds on the state before
	code_state "$1"
	code_errors "$1"
	code_rich "$1"
	code_stream "$1"
	code_js_ts "$1"
	code_restart "$1"
	code_concurrent_start "$1"
	code_death "$1"
	code_timeout "$1"
	code_interrupt "$1"
	code_signature "$1"
}

# The same runs on every provider give the same results: success, output,
# stdout and error.name of each, as one line.
CODE_SIGNATURE='[true, 3, "a\n", null]|[false, null, "", "ZeroDivisionError"]|[true, "{'"'"'k'"'"': [1, 2]}", "", null]|[true, 10, "", null]|[false, null, "", "ReferenceError"]|[true, "'"'"'ab'"'"'", "x\n", null]'
code_signature() { # LEASE
	local L=$1 sig="" part
	run_sig() { # FILE CODE
		printf '%s\n' "$2" >"$L/$1"
		part=$(rfield "$L" '[r["success"], r["output"], r["stdout"], (r["error"] or {}).get("name")]')
		sig="${sig:+$sig|}$part"
	}
	run_sig code.py 'print("a"); 1 + 2'
	run_sig code.py '1/0'
	run_sig code.py '{"k": [1, 2]}'
	run_sig code.js '[1, 2, 3, 4].reduce((s, v) => s + v, 0)'
	run_sig code.js 'nope()'
	run_sig code.ts 'const s: string = "a"; console.log("x"); s + "b"'
	eq "the provider-independent signature of six runs" "$sig" "$CODE_SIGNATURE"
}
