#!/bin/bash
# The state dir's guards, reclaim and latency on the e2b provider: see statedir-body.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
PROVIDER=e2b
. "$(dirname "$0")/statedir-body.sh"
