#!/bin/bash
# fs/ on the local provider with ordinary tools: cp -r, tar, rsync, diff -r,
# grep -r, find, git, vim -Es, mv over a file, unlink of an open file,
# symlinks, hard links, fifos, chmod, touch -d, truncate, mmap, df (the
# stories: lib-files.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-files.sh"
mount_sbxfs
L=$MNT/files
mkdir "$L"
F=$L/fs/root
FHOME=/root

make_src_tree src tests/unit
story_copy_roundtrip
story_pseudo_dirs_empty
eq "nothing below fs/proc" "$(errno_of "os.stat('$L/fs/proc/self')")" "ENOENT"
story_rsync_metadata
story_git
story_vim_save
story_posix_corners
story_type_change_by_run
story_overwrite_private
story_dangling_link_by_run
story_many_links
story_run_link_read

# Extended attributes are off without -o xattr (test-local-posix mounts with
# it): ENOTSUP, which the kernel answers itself once told ENOSYS, so `ls -l`
# costs no request per file.
eq "no -o xattr: getxattr is ENOTSUP" "$(errno_of "os.getxattr('$F/target.txt', 'user.a')")" ENOTSUP
eq "no -o xattr: setxattr is ENOTSUP" "$(errno_of "os.setxattr('$F/target.txt', 'user.a', b'1')")" ENOTSUP

# Local only: the mount's own view of links and owners, fifos, absolute links.
eq "link count" "$(stat -c %h "$F/target.txt")" 2
echo in-sandbox >"$F/only-here.txt"
ok "absolute symlink" ln -s /root/only-here.txt "$F/abs"
eq "readlink shows it as the host must follow it (relative, inside fs/)" "$(readlink "$F/abs")" "only-here.txt"
eq "... and the mount reads the sandbox's file through it" "$(cat "$F/abs")" "in-sandbox"
eq "inside the sandbox it resolves to the sandbox's file" "$(lease_run 'cat /root/abs')" "in-sandbox"
ok "mkfifo" mkfifo "$F/fifo"
eq "fifo type" "$(stat -c %F "$F/fifo")" "fifo"
ok "chown" chown 1000:1000 "$F/target.txt"
eq "owner" "$(stat -c %u:%g "$F/target.txt")" "1000:1000"
story_names_not_utf8 local
finish
