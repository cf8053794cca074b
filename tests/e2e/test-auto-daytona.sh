#!/bin/bash
# Automatic lifecycle (idle pause, resume on access, reclaim) on the daytona provider.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
PROVIDER=daytona
. "$(dirname "$0")/lifecycle-body.sh"
