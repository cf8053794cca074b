#!/bin/bash
# Removals in batches on the daytona provider against its fake: see lib-rm.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-rm.sh"
rm_test_main daytona /home/daytona
