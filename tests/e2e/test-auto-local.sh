#!/bin/bash
# Automatic lifecycle (idle pause, resume on access, reclaim) on the local provider.
. "$(dirname "$0")/lib.sh"
PROVIDER=local
. "$(dirname "$0")/lifecycle-body.sh"
