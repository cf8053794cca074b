#!/bin/bash
# Removals in batches on the e2b provider against its fake: see lib-rm.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-rm.sh"
rm_test_main e2b /home/user
