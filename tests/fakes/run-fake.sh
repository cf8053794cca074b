#!/bin/sh
# Starts a fake server (e2b or daytona) in a mount namespace of its own, so
# that every overlay it mounts for its sandboxes dies with it.  The node
# process replaces this shell: the caller's pid is the fake's pid.
#   tests/fakes/run-fake.sh e2b --port 0 --port-file /tmp/port
set -e
here=$(cd "$(dirname "$0")" && pwd)
case "$1" in
e2b|daytona) name=$1; shift ;;
*) echo "usage: $0 e2b|daytona [--port N] [--port-file F] [--api-key K] [...]" >&2; exit 2 ;;
esac
node=${NODE:-node}
# The new namespace starts with a copy of every mount of this machine,
# FUSE mounts of other tests included, and a copy held here would keep
# their daemons alive past their unmount: they are detached in here first
# (this namespace only; mount paths escape blanks as \040).
exec unshare -m --propagation private sh -c '
	awk "\$3 ~ /^fuse/ { print \$2 }" /proc/self/mounts | while read -r m; do
		umount -l "$(printf "%b" "$m")" 2>/dev/null || :
	done
	exec "$0" "$@"' "$node" "$here/$name.js" "$@"
