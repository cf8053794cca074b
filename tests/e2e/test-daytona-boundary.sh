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
hostile_entry() { printf '{"name":"%s","path":"%s","size":3,"mode":"-rw-r--r--","permissions":"0644","modifiedAt":"2026-12-04T10:00:00Z","isDir":false,"owner":"0","group":"0"}' "$1" "$2"; }
story_hostile_listing 'GET /toolbox/:id/files' ''
finish
