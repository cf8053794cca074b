#!/bin/bash
# Automatic lifecycle (idle pause, resume on access, reclaim) on the e2b provider.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
PROVIDER=e2b
. "$(dirname "$0")/lifecycle-body.sh"
