#!/bin/bash
# The sandbox boundary of a local lease, attacked (issue 9): links the
# sandbox makes never lead a host process out of fs/ (relative, absolute,
# /proc/self/root, a directory swapped for a link during copies).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-boundary.sh"
mount_sbxfs
L=$MNT/edge
mkdir "$L"
F=$L/fs/root
FHOME=/root
story_link_escapes
story_swap_race 4
finish
