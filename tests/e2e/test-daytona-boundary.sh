#!/bin/bash
# Links a daytona sandbox makes (the fake daytona) never lead a host process out of
# fs/ (issue 9): relative, absolute, /proc/self/root, a link to a host
# directory. (No swap race here: the fake's file API resolves a path inside
# the root, then writes by host path, so a sandbox racing it reaches the
# fake's host; a real remote has no host files. The local test runs it.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-boundary.sh"
start_fake daytona
mount_sbxfs
L=$MNT/edge
mkdir "$L"
F=$L/fs/home/daytona
FHOME=/home/daytona
story_link_escapes
finish
