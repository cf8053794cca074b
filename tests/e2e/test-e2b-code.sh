#!/bin/bash
# code.py / code.js / code.ts on the e2b provider against the fake E2B: the
# code interpreter's /execute with one context per language per lease (the
# shared checks of lib-code.sh), contexts adopted again after a remount, a
# context the server forgot replaced (stateLost), and the requests made.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-code.sh"
start_fake e2b
mount_sbxfs
L=$MNT/nb
mkdir "$L"

fake_reset_counters
code_state "$L"
eq "one context for python, made once" "$(counter 'POST /contexts')" "1"
code_errors "$L"
code_rich "$L"
code_stream "$L"
code_js_ts "$L"
eq "one context per language" "$(counter 'POST /contexts')" "3"
code_restart "$L"
ok "restart goes through the contexts API" test "$(counter 'POST /contexts/:cid/restart')" -ge 1
code_concurrent_start "$L"
code_death "$L"
code_timeout "$L"
code_interrupt "$L"
code_signature "$L"

# A remount adopts the lease's contexts again (GET /contexts): state kept.
echo 'survivor = "still here"' >"$L/code.py"
unmount_sbxfs
mount_sbxfs
fake_reset_counters
echo 'survivor' >"$L/code.py"
eq "python state survives a remount" "$(cat "$L/code.py")" "'still here'"
eq "... through the same context (no new one)" "$(counter 'POST /contexts')" "0"

# The server forgets every context (its interpreter restarted): the next run
# makes a new one and says the state was lost.
sid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandboxId"])' "$L/info")
H=(-H "E2b-Sandbox-Id: $sid" -H "E2b-Sandbox-Port: 49999")
ids=$(curl -fsS "${H[@]}" "$FAKE_URL/contexts" | python3 -c 'import json,sys; print(" ".join(c["id"] for c in json.load(sys.stdin)))')
ok "the fake lists the lease's contexts" test -n "$ids"
for c in $ids; do
	curl -fsS -X DELETE "${H[@]}" "$FAKE_URL/contexts/$c" >/dev/null
done
echo 'survivor' >"$L/code.py"
eq "a forgotten context: the run goes on in a new one" "$(rfield "$L" 'r["error"]["name"]')" "NameError"
eq "... with stateLost" "$(rfield "$L" 'r["stateLost"]')" "true"
ok "rmdir ends the lease" rmdir "$L"
finish
