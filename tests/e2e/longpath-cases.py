#!/usr/bin/env python3
# Paths longer than PATH_MAX reached relative to a deep working directory
# (pjdfstest's */03.t and rename/02.t), run by test-local-posix.sh on fs/
# and on a plain directory: prints one "name: answer" line per case.
#   longpath-cases.py DIR [MARKER]
# From DIR it goes 20 directories of 255 bytes down (one name per call,
# so the absolute path passes PATH_MAX), then uses relative paths of
# PATH_MAX-1 bytes (must work) and PATH_MAX bytes (ENAMETOOLONG).
# With MARKER (fs/ only: the symlink boundary), it then creates /tmp/MARKER.abs
# and /tmp/MARKER.dots through a link to "/" and a link of 30 ".." made down
# there: inside a lease both must land in the lease's /tmp, never the host's.
import errno
import os
import sys

PATH_MAX = os.pathconf("/", "PC_PATH_MAX")


def answer(fn):
    try:
        r = fn()
        return "ok" if r is None else str(r)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def rel_path(length, last="f"):
    """A relative path of exactly length bytes: names of 255 bytes, then last."""
    parts, n = [], 0
    while length - n > 256 + len(last):
        parts.append("n" * 255)
        n += 256
    parts.append(last + "x" * (length - n - len(last)))
    return "/".join(parts)


def main():
    os.makedirs(sys.argv[1], exist_ok=True)
    os.chdir(sys.argv[1])
    name = "d" * 255
    for _ in range(20):
        os.makedirs(name, exist_ok=True)
        os.chdir(name)
    full = rel_path(PATH_MAX - 1)
    parent = full.rsplit("/", 1)[0]
    other = parent + "/" + "o" * len(full.rsplit("/", 1)[1])
    cases = [
        ("mkdir -p of the parents", lambda: os.makedirs(parent, exist_ok=True)),
        ("create PATH_MAX-1", lambda: os.close(os.open(full, os.O_CREAT | os.O_WRONLY, 0o640))),
        ("write", lambda: os.write(fd_w := os.open(full, os.O_WRONLY), b"long") and os.close(fd_w)),
        ("read", lambda: open(full, "rb").read().decode()),
        ("stat size and mode", lambda: "%d %o" % (os.lstat(full).st_size, os.lstat(full).st_mode & 0o777)),
        ("chmod", lambda: os.chmod(full, 0o600)),
        ("truncate", lambda: os.truncate(full, 2)),
        ("rename to a PATH_MAX-1 name", lambda: os.rename(full, other)),
        ("the old name is gone", lambda: os.lstat(full)),
        ("link back", lambda: os.link(other, full)),
        ("nlink", lambda: os.lstat(full).st_nlink),
        ("unlink", lambda: os.unlink(other)),
        ("symlink at PATH_MAX-1", lambda: os.symlink("target", other)),
        ("readlink", lambda: os.readlink(other)),
        ("unlink the link", lambda: os.unlink(other)),
        ("unlink the file", lambda: os.unlink(full)),
        ("mkdir PATH_MAX-1", lambda: os.mkdir(full, 0o755)),
        ("list the parent", lambda: len(os.listdir(parent))),
        ("rmdir", lambda: os.rmdir(full)),
        ("create PATH_MAX", lambda: os.open(full + "x", os.O_CREAT | os.O_WRONLY, 0o644)),
        ("mkdir PATH_MAX", lambda: os.mkdir(full + "x")),
    ]
    if len(sys.argv) > 2:
        m = sys.argv[2]
        os.symlink("/", "abs")
        os.symlink("../" * 30, "dots")
        cases += [
            ("create through a link to /", lambda: os.close(os.open(f"abs/tmp/{m}.abs", os.O_CREAT | os.O_WRONLY, 0o644))),
            ("create through 30 ..", lambda: os.close(os.open(f"dots/tmp/{m}.dots", os.O_CREAT | os.O_WRONLY, 0o644))),
        ]
    for name_, fn in cases:
        print(f"longpath {name_}: {answer(fn)}", flush=True)


main()
