#!/bin/bash
# The state dir's guards, reclaim and latency on the daytona provider: see statedir-body.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
PROVIDER=daytona
. "$(dirname "$0")/statedir-body.sh"
