#!/bin/bash
# The state dir's guards on the local provider: see statedir-body.sh.
. "$(dirname "$0")/lib.sh"
PROVIDER=local
. "$(dirname "$0")/statedir-body.sh"
