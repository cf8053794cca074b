#!/bin/bash
# Links a e2b sandbox makes (the fake e2b) never lead a host process out of
# fs/ (issue 9): relative, absolute, /proc/self/root, a link to a host
# directory. (No swap race here: the fake's file API resolves a path inside
# the root, then writes by host path, so a sandbox racing it reaches the
# fake's host; a real remote has no host files. The local test runs it.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-boundary.sh"
start_fake e2b
mount_sbxfs
L=$MNT/edge
mkdir "$L"
F=$L/fs/home/user
FHOME=/home/user
story_link_escapes
hostile_entry() { printf '{"type":"FILE_TYPE_FILE","size":"3","mode":420,"permissions":"-rw-r--r--","owner":"user","group":"user","modifiedTime":"2026-12-04T10:00:00Z","name":"%s","path":"%s"}' "$1" "$2"; }
story_hostile_listing 'POST /filesystem.Filesystem/ListDir' 'entries'
finish
