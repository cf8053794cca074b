#!/usr/bin/env python3
"""posix-cases DIR [CASE...]: runs sbxfs's POSIX conformance cases in fresh
subdirectories of DIR and prints one line per case, "name: answer", where
the answer is what the file system said (types, modes, owners, link counts,
errno names) and nothing that differs between two correct file systems
(inode numbers, times). The e2e tests run it on fs/ of a lease and on a
plain directory of the same machine and compare the lines: the plain
directory's answers are the reference. Run as root; the cases that act as
another user fork and drop to uid/gid 65534 (the mount needs allow_other).
"""
import ctypes
import errno
import os
import socket
import stat
import sys
import time

NOBODY = 65534
libc = ctypes.CDLL(None, use_errno=True)
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def en(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def kind(mode):
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "dir"), (stat.S_ISLNK, "link"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "chr"), (stat.S_ISBLK, "blk"),
                       (stat.S_ISSOCK, "sock")):
        if test(mode):
            return name
    return "?"


def desc(path, owner=True):
    """What lstat says of path; owner=False leaves out the owner (a case about something
    else on an entry root made: who owns a new entry is owner_create's question)."""
    st = os.lstat(path)
    s = "%s %o" % (kind(st.st_mode), stat.S_IMODE(st.st_mode))
    if owner:
        s += " %d:%d" % (st.st_uid, st.st_gid)
    s += " nlink=%d" % st.st_nlink
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        s += " rdev=%d,%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
    if stat.S_ISLNK(st.st_mode) or stat.S_ISREG(st.st_mode):
        s += " size=%d" % st.st_size
    return s


def as_user(fn, uid=NOBODY, gid=NOBODY, umask=None):
    """Runs fn() in a child as uid:gid (no supplementary groups); returns its answer."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            if umask is not None:
                os.umask(umask)
            out = str(fn())
        except OSError as e:
            out = en(e)
        except Exception as e:  # a bug in a case, not an answer
            out = "BUG " + repr(e)
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    out = b""
    while True:
        b = os.read(r, 4096)
        if not b:
            break
        out += b
    os.close(r)
    os.waitpid(pid, 0)
    return out.decode()


def rename2(a, b, flags):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), flags) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def wait_caches(seconds):
    """Sleeps past fs/'s caches, so that the provider is asked again. The reference run
    (POSIX_REFERENCE=1, a plain directory: nothing to expire) skips it: the answers are
    the same, and the suite is a minute shorter."""
    if os.environ.get("POSIX_REFERENCE") != "1":
        time.sleep(seconds)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def read(path):
    with open(path) as f:
        return f.read()


# --- the cases: each gets a fresh empty directory d (mode 0777) -----------

def c_mkfifo(d):
    os.mkfifo(d + "/p", 0o640)
    return desc(d + "/p", False) + " listed=" + kind(next(e for e in os.scandir(d)).stat(
        follow_symlinks=False).st_mode)


def c_mknod_chr(d):
    os.mknod(d + "/c", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    return desc(d + "/c", False)


def c_mknod_blk(d):
    os.mknod(d + "/b", 0o600 | stat.S_IFBLK, os.makedev(7, 200))
    return desc(d + "/b", False)


def c_mknod_no_ghost(d):
    """Whether or not a device node may be made here (mknod_chr's question), once it is
    not there the name is free: lstat says ENOENT and each other type can take it."""
    out = []
    for t in ("file", "fifo", "link", "dir"):
        n = d + "/n" + t
        try:
            os.mknod(n, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
            os.unlink(n)
        except OSError:
            pass
        try:
            os.lstat(n)
            r = "exists"
        except OSError as e:
            r = en(e)
        try:
            {"file": lambda: write(n, "x"), "fifo": lambda: os.mkfifo(n),
             "link": lambda: os.symlink("x", n), "dir": lambda: os.mkdir(n)}[t]()
            r += " " + desc(n, False)
        except OSError as e:
            r += " " + en(e)
        out.append(t + ": " + r)
    return " | ".join(out)


def bind(path):
    """Binds a unix socket at path and closes it: the socket file stays."""
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(path)
    finally:
        s.close()


def c_socket(d):
    """A socket file outlives its socket; a second bind of the name finds it taken; it lists
    as a socket (who owns it is owner_create's question)."""
    bind(d + "/s")
    try:
        bind(d + "/s")
        again = "ok"
    except OSError as e:
        again = en(e)
    return "%s again=%s listed=%s" % (desc(d + "/s", False), again, kind(next(
        e for e in os.scandir(d)).stat(follow_symlinks=False).st_mode))


def c_owner_create(d):
    def body():
        write(d + "/f", "x")
        os.mkdir(d + "/sub")
        os.symlink("f", d + "/l")
        os.mkfifo(d + "/p")
        return "ok"
    r = as_user(body, umask=0o022)
    return r + " | " + " | ".join(desc(d + "/" + n) for n in ("f", "sub", "l", "p"))


def c_owner_create_own_dir(d):
    """Another user makes entries in a directory of its own (0755: the sandbox's user may
    not write there), on a name it just removed too: each is the creator's, and its own."""
    o = d + "/own"
    os.mkdir(o, 0o755)
    os.chown(o, NOBODY, NOBODY)

    def body():
        write(o + "/f", "x")
        os.unlink(o + "/f")
        os.mkfifo(o + "/f")
        os.chmod(o + "/f", 0o600)
        os.symlink("f", o + "/l")
        os.mkfifo(o + "/p")
        return "ok"
    r = as_user(body, umask=0o022)
    return r + " | " + " | ".join(desc(o + "/" + n) for n in ("f", "l", "p"))


def c_owner_write_keeps(d):
    """Another user's write keeps a file's owner (who owns what it makes: owner_create)."""
    write(d + "/f", "x")
    os.chmod(d + "/f", 0o666)
    os.chown(d + "/f", 4321, 4322)
    r = as_user(lambda: write(d + "/f", "yy") or "ok")
    return r + " | " + desc(d + "/f")


def c_owner_changes_own(d):
    """The creator may chmod and utime what it made (it is the owner)."""
    def body():
        write(d + "/f", "x")
        os.chmod(d + "/f", 0o600)
        os.utime(d + "/f", (1000000000, 1000000000))
        return "%o %d" % (stat.S_IMODE(os.stat(d + "/f").st_mode), os.stat(d + "/f").st_mtime)
    return as_user(body)


def c_setid_write(d):
    """A write by someone else (no CAP_FSETID) clears set-user-ID and set-group-ID."""
    write(d + "/f", "")
    os.chmod(d + "/f", 0o6777)

    def body():
        fd = os.open(d + "/f", os.O_WRONLY)
        os.write(fd, b"x")
        os.close(fd)
        return "ok"
    return as_user(body) + " %o" % stat.S_IMODE(os.stat(d + "/f").st_mode)


def c_overwrite_keeps(d):
    """Writing a file over (O_TRUNC, and an append to a hard-linked one) keeps its mode,
    set-ID bits and owner; a set-user-ID bit set after a chown survives; read once every
    cache has expired (a remote provider then reads them back from the sandbox)."""
    for n in ("f", "h"):
        write(d + "/" + n, "old")
        os.chmod(d + "/" + n, 0o640)
        os.chown(d + "/" + n, 1234, 5678)
    os.link(d + "/h", d + "/h2")
    write(d + "/s", "x")  # its chown and chmod may wait for its upload
    os.chown(d + "/s", 0, 0)
    os.chmod(d + "/s", 0o4755)
    for n in ("t", "u"):
        write(d + "/" + n, "x")
    os.chown(d + "/u", 0, 0)
    os.chmod(d + "/u", 0o4755)
    wait_caches(3.5)
    os.chown(d + "/t", 0, 0)  # the file is there: they go to the sandbox as they come
    os.chmod(d + "/t", 0o6755)
    write(d + "/f", "new text")
    write(d + "/u", "new")
    with open(d + "/h", "a") as f:
        f.write(" more")
    wait_caches(3.5)
    return " | ".join(n + " " + desc(d + "/" + n) for n in ("f", "h", "h2", "s", "t", "u"))


def c_chown_numeric(d):
    write(d + "/f", "x")
    os.chown(d + "/f", 1234, 5678)
    os.mkdir(d + "/g")
    os.chown(d + "/g", NOBODY, NOBODY)
    return desc(d + "/f") + " | " + desc(d + "/g")


def c_umask(d):
    out = []
    for m in (0o002, 0o022, 0o077):
        def body(m=m):
            write(d + "/f%o" % m, "")
            os.mkdir(d + "/d%o" % m)
            os.mkfifo(d + "/p%o" % m)
            return "%o %o %o" % tuple(stat.S_IMODE(os.lstat(d + "/%s%o" % (k, m)).st_mode)
                                      for k in "fdp")
        out.append(as_user(body, uid=0, gid=0, umask=m))
    return " | ".join(out)


def c_hardlink(d):
    write(d + "/a", "data")
    os.link(d + "/a", d + "/b")
    a, b = os.stat(d + "/a"), os.stat(d + "/b")
    s = "nlink %d %d same-ino=%s" % (a.st_nlink, b.st_nlink, a.st_ino == b.st_ino)
    os.chmod(d + "/b", 0o600)
    s += " mode-through-other=%o" % stat.S_IMODE(os.stat(d + "/a").st_mode)
    os.unlink(d + "/b")
    s += " after-unlink=%d" % os.stat(d + "/a").st_nlink
    # a rename over one name of a linked file: the other has one link less
    os.link(d + "/a", d + "/c")
    os.stat(d + "/c")
    write(d + "/x", "other")
    os.rename(d + "/x", d + "/c")
    return s + " after-rename-over=%d" % os.stat(d + "/a").st_nlink


def c_rename_ino(d):
    """A renamed file, directory and the names below it keep their inode numbers; a name
    made where one left is another file; a link shares its number with every name."""
    write(d + "/a", "data")
    os.makedirs(d + "/dir/sub")
    write(d + "/dir/sub/f", "x")
    ia, idir, isub, i_f = (os.stat(d + p).st_ino for p in ("/a", "/dir", "/dir/sub", "/dir/sub/f"))
    os.rename(d + "/a", d + "/b")
    write(d + "/a", "new")
    os.rename(d + "/dir", d + "/moved")
    os.mkdir(d + "/dir")
    wait_caches(1.5)  # past fs/'s attribute timeout: the numbers are asked for again
    s = "file-kept=%s new-differs=%s" % (os.stat(d + "/b").st_ino == ia, os.stat(d + "/a").st_ino != ia)
    s += " dir-kept=%s below-kept=%s,%s new-dir-differs=%s" % (
        os.stat(d + "/moved").st_ino == idir, os.stat(d + "/moved/sub").st_ino == isub,
        os.stat(d + "/moved/sub/f").st_ino == i_f, os.stat(d + "/dir").st_ino != idir)
    os.link(d + "/b", d + "/moved/sub/l")
    os.link(d + "/b", d + "/c")
    wait_caches(1.5)
    st = [os.stat(d + p) for p in ("/b", "/moved/sub/l", "/c")]
    s += " link-ino=%s nlink=%s" % (len({x.st_ino for x in st}) == 1, [x.st_nlink for x in st])
    os.rename(d + "/c", d + "/c2")
    os.unlink(d + "/moved/sub/l")
    wait_caches(1.5)
    st = [os.stat(d + p) for p in ("/b", "/c2")]
    s += " after-unlink=%s same=%s" % ([x.st_nlink for x in st], st[0].st_ino == st[1].st_ino == ia)
    names, dino_ok, todo = {}, True, [d]
    while todo:  # readdir's d_ino says the same as lstat
        with os.scandir(todo.pop()) as it:
            for e in it:
                ino = os.lstat(e.path).st_ino
                dino_ok = dino_ok and e.inode() == ino
                names.setdefault(ino, []).append(e.name)
                if e.is_dir(follow_symlinks=False):
                    todo.append(e.path)
    s += " shared-numbers=%s d_ino=%s" % (sorted(sorted(v) for v in names.values() if len(v) > 1),
                                           dino_ok)
    return s


def c_rsync_hardlinks(d):
    """rsync -aH of a tree with hard links (three names of one file, a pair across
    directories) and a fifo into the file system and back: the copy back is the same tree
    (`rsync -ainH --delete` itemizes nothing)."""
    import shutil
    import subprocess
    import tempfile
    host = tempfile.mkdtemp(prefix="posix-rsync-")
    try:
        src, back = host + "/src", host + "/back"
        os.makedirs(src + "/sub/deep")
        write(src + "/f1", "one")
        os.link(src + "/f1", src + "/f2")
        os.link(src + "/f1", src + "/sub/f3")
        write(src + "/sub/g", "two")
        os.link(src + "/sub/g", src + "/sub/deep/g2")
        write(src + "/plain", "three")
        os.mkfifo(src + "/sub/p", 0o640)

        def rsync(*args):
            r = subprocess.run(["rsync"] + list(args), capture_output=True, text=True)
            return r.returncode, (r.stdout + r.stderr).strip().replace("\n", "; ")
        into = rsync("-aH", src + "/", d + "/tree/")
        out = rsync("-aH", d + "/tree/", back + "/")
        diff = rsync("-ainH", "--delete", src + "/", back + "/")
        return "in=%d out=%d diff=%d [%s]" % (into[0], out[0], diff[0], diff[1])
    finally:
        shutil.rmtree(host)


def c_link_others(d):
    """root may hard-link a file it neither owns nor may write (fs.protected_hardlinks
    binds only other users), and a device node."""
    write(d + "/f", "x")
    os.chown(d + "/f", 4321, 4321)
    out = []
    try:
        os.mknod(d + "/c", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        made = "ok"
    except OSError as e:
        made = en(e)
    for a, b in (("f", "g"), ("c", "c2")):
        try:
            os.link(d + "/" + a, d + "/" + b)
            out.append("%s>%s=ok %s" % (a, b, kind(os.lstat(d + "/" + b).st_mode)))
        except OSError as e:
            out.append("%s>%s=%s" % (a, b, en(e)))
    return "mknod=" + made + " " + " ".join(out)


def c_hardlink_write(d):
    """A write or truncate through one name of a hard-linked file shows through the
    other, at once and once the attribute timeout has passed (the file was uploaded under
    a new name moved over its own, which split it from its other names in the sandbox);
    a rename over one name still splits them, as everywhere."""
    write(d + "/a", "one\n")
    os.link(d + "/a", d + "/b")  # at once: a's upload may still wait
    with open(d + "/b", "a") as f:
        f.write("two\n")
    s = "a=%r" % read(d + "/a")
    wait_caches(1.5)
    s += " later=%r nlink=%d,%d" % (read(d + "/a"), os.stat(d + "/a").st_nlink,
                                   os.stat(d + "/b").st_nlink)
    os.truncate(d + "/a", 2)
    s += " b-after-truncate=%r" % read(d + "/b")
    with open(d + "/a", "a") as f:
        f.write("x")
    wait_caches(1.5)
    s += " b-later=%r" % read(d + "/b")
    write(d + "/n", "new")
    os.rename(d + "/n", d + "/a")
    wait_caches(1.5)
    return s + " after-rename-over: a=%r b=%r nlink=%d" % (read(d + "/a"), read(d + "/b"),
                                                           os.stat(d + "/b").st_nlink)


def c_hardlink_futimens(d):
    """Times set on an open file (futimens) show through its other name at once."""
    write(d + "/a", "data")
    os.link(d + "/a", d + "/b")
    os.stat(d + "/b")  # the kernel now holds b's attributes
    fd = os.open(d + "/a", os.O_RDWR)
    try:
        os.utime(fd, (1000000000, 1200000000))
        b = os.stat(d + "/b")
        s = "b-after-futimens atime=%d mtime=%d" % (b.st_atime, b.st_mtime)
        os.fchmod(fd, 0o640)
        s += " b-mode-after-fchmod=%o" % stat.S_IMODE(os.stat(d + "/b").st_mode)
    finally:
        os.close(fd)
    return s


def c_symlink_size(d):
    """A link's st_size is the length of what readlink answers (POSIX; libarchive sizes its
    buffer by it): through fs/ an absolute or climbing target is shown rewritten (linkmap.c),
    so the size follows the text shown, whether the kernel had it from lstat or a listing."""
    os.symlink("abc", d + "/l")
    os.symlink("/nowhere/at/all", d + "/m")
    os.symlink("../" * 9 + "usr/./lib/x", d + "/u")
    os.mkdir(d + "/sub")
    os.symlink("/usr/bin/python3", d + "/sub/p")
    fresh = sorted(os.listdir(d + "/sub"))  # the listing's attributes come first
    sizes = " ".join("%s:%s" % (n, os.lstat(d + "/" + n).st_size == len(os.readlink(d + "/" + n)))
                     for n in ("l", "m", "u", "sub/p"))
    return "%s readlink=%s | %s | size is readlink's length: %s" % (
        desc(d + "/l", False), os.readlink(d + "/l"), fresh, sizes)


def c_symlink_times(d):
    """A link's own times (lutimes, as rsync -a and tar set them) once every cache has
    expired, and its target's left as they were."""
    write(d + "/t", "x")
    os.utime(d + "/t", (1500000000, 1500000000))
    os.symlink("t", d + "/l")
    os.utime(d + "/l", (1400000000, 1400000000), follow_symlinks=False)

    def show():
        return "link mtime=%d target mtime=%d" % (os.lstat(d + "/l").st_mtime,
                                                  os.stat(d + "/t").st_mtime)
    first = show()
    wait_caches(3.5)
    second = show()
    return second + (" (same at once)" if first == second else " (at once: %s)" % first)


def c_symlink_new_times(d):
    """A new link's times are its own, not its target's (daytona's file info follows
    links), at once and once every cache has expired."""
    write(d + "/t", "x")
    os.utime(d + "/t", (1500000000, 1500000000))
    fd = os.open(d + "/t", os.O_RDONLY)
    os.fsync(fd)  # the target in the sandbox, old, before the link is made
    os.close(fd)
    start = time.time()
    os.symlink("t", d + "/l")

    def show():
        m = os.lstat(d + "/l").st_mtime
        return "link mtime %s" % ("new" if abs(m - start) < 30 else "old (%d)" % m)
    first = show()
    wait_caches(3.5)
    return show() + " | at once: " + first


def c_times_before_1970(d):
    """Times before 1970 with a fraction of a second (utimensat with a negative tv_sec and
    a positive tv_nsec), read back once every cache has expired."""
    write(d + "/f", "x")
    t = -617716800 * 10**9 + 250000000  # 1950-06-01 12:00:00.25
    os.utime(d + "/f", ns=(t, t))
    wait_caches(3.5)
    return "mtime_ns=%d" % os.stat(d + "/f").st_mtime_ns


def c_symlink_atime(d):
    """A link's own atime set apart from its mtime (utimensat AT_SYMLINK_NOFOLLOW, as
    pjdfstest's utimensat/05.t does), once every cache has expired."""
    write(d + "/t", "x")
    os.symlink("t", d + "/l")
    os.utime(d + "/l", (1300000000, 1400000000), follow_symlinks=False)
    wait_caches(3.5)
    return "link atime=%d mtime=%d" % (os.lstat(d + "/l").st_atime, os.lstat(d + "/l").st_mtime)


def c_lchown(d):
    write(d + "/t", "x")
    os.symlink("t", d + "/l")
    os.lchown(d + "/l", 1234, 1234)
    return "link %d:%d target %d:%d" % (os.lstat(d + "/l").st_uid, os.lstat(d + "/l").st_gid,
                                        os.stat(d + "/t").st_uid, os.stat(d + "/t").st_gid)


def c_sticky(d):
    os.mkdir(d + "/t")
    os.chmod(d + "/t", 0o1777)
    write(d + "/t/rootfile", "x")
    os.chmod(d + "/t/rootfile", 0o666)
    r = as_user(lambda: os.unlink(d + "/t/rootfile"))
    r2 = as_user(lambda: os.rename(d + "/t/rootfile", d + "/t/moved"))
    return desc(d + "/t", False) + " unlink-by-other=" + r + " rename-by-other=" + r2


def c_rmdir_others_dir(d):
    """Root removes a directory only root may (in another user's directory of mode 0755)
    and one anyone may, one after the other; that user then makes the first again
    (pjdfstest rename/10.t: on daytona the retry through sudo failed on the name
    the user had removed, and the failure stayed on the other: EACCES)."""
    os.mkdir(d + "/n0", 0o755)
    os.chown(d + "/n0", NOBODY, NOBODY)
    os.mkdir(d + "/n1", 0o755)
    as_user(lambda: os.mkdir(d + "/n0/n2", 0o755))
    os.mkdir(d + "/n1/n3", 0o755)
    os.rmdir(d + "/n0/n2")
    os.rmdir(d + "/n1/n3")
    r = as_user(lambda: os.mkdir(d + "/n0/n2", 0o755) or "ok")
    return r + " " + " ".join(str(os.path.exists(d + n)) for n in ("/n0/n2", "/n1/n3"))


def c_setgid_dir(d):
    os.mkdir(d + "/g")
    os.chown(d + "/g", 0, 4321)
    os.chmod(d + "/g", 0o2777)
    write(d + "/g/f", "x")
    os.mkdir(d + "/g/sub")
    r = as_user(lambda: write(d + "/g/nf", "y") or "ok")
    return " | ".join(desc(d + "/g/" + n) for n in ("", "f", "sub", "nf")) + " " + r


def c_rename_noreplace(d):
    write(d + "/a", "A")
    write(d + "/b", "B")
    try:
        rename2(d + "/a", d + "/b", RENAME_NOREPLACE)
        r = "OK"
    except OSError as e:
        r = en(e)
    rename2(d + "/a", d + "/c", RENAME_NOREPLACE)
    return "onto-existing=%s b=%s c=%s a-exists=%s" % (r, read(d + "/b"), read(d + "/c"),
                                                       os.path.exists(d + "/a"))


def c_rename_links(d):
    """rename(2) onto and of symbolic links acts on the links, never on their targets: onto a
    dangling link, onto a link to a directory, a dangling link onto a file."""
    def step(a, b):
        try:
            os.rename(d + "/" + a, d + "/" + b)
            return "ok"
        except OSError as e:
            return en(e)
    os.mkdir(d + "/dir")
    for n in "abc":
        write(d + "/" + n, n)
    os.symlink("nowhere", d + "/l")
    os.symlink("dir", d + "/ld")
    os.symlink("nowhere", d + "/m")
    r = ["a>l=" + step("a", "l"), "b>ld=" + step("b", "ld"), "m>c=" + step("m", "c")]
    r.append(" ".join(sorted(os.listdir(d))))
    return " ".join(r) + " | " + " | ".join(
        n + " " + desc(d + "/" + n, False) for n in ("l", "ld", "c"))


def c_rename_exchange(d):
    """RENAME_EXCHANGE swaps two existing names of any types (a file and a directory, its
    entries going with it; two files), inode numbers follow the entries; a missing name on
    either side is ENOENT and changes nothing."""
    write(d + "/a", "A")
    os.mkdir(d + "/b")
    write(d + "/b/x", "X")
    ino = os.lstat(d + "/a").st_ino
    rename2(d + "/a", d + "/b", RENAME_EXCHANGE)
    r = "a=%s:%s b=%s ino-follows=%s" % (kind(os.lstat(d + "/a").st_mode),
                                          ",".join(sorted(os.listdir(d + "/a"))), read(d + "/b"),
                                          os.lstat(d + "/b").st_ino == ino)
    write(d + "/c", "C")
    write(d + "/e", "E")
    rename2(d + "/c", d + "/e", RENAME_EXCHANGE)
    r += " c=%s e=%s" % (read(d + "/c"), read(d + "/e"))
    for src, dst in (("b", "none"), ("none", "b")):
        try:
            rename2(d + "/" + src, d + "/" + dst, RENAME_EXCHANGE)
            r += " %s<>%s=OK" % (src, dst)
        except OSError as e:
            r += " %s<>%s=%s" % (src, dst, en(e))
    return r + " | " + " ".join(sorted(os.listdir(d))) + " b=" + read(d + "/b")


def c_rename_exchange_links(d):
    """Symlinks inside two directories swapped by RENAME_EXCHANGE stay symlinks with their
    texts once every cache has expired (daytona's info follows links: a link to a file
    showed as the file, a dangling one was ENOENT while listed)."""
    os.mkdir(d + "/j")
    os.mkdir(d + "/k")
    write(d + "/j/f", "F")
    os.symlink("f", d + "/j/to-f")
    os.symlink("nowhere", d + "/j/dangling")
    os.symlink("../j", d + "/k/up")
    rename2(d + "/j", d + "/k", RENAME_EXCHANGE)
    wait_caches(3.5)  # past fs/'s caches: the provider is asked again
    return " ".join("%s=%s:%s" % (n, kind(os.lstat(d + "/" + n).st_mode), os.readlink(d + "/" + n))
                    for n in ("k/to-f", "k/dangling", "j/up")) + " " + ",".join(sorted(os.listdir(d + "/k")))


def c_hardlink_symlink_moved(d):
    """A second name of a dangling symlink (ln without -L), its directory then renamed: both
    names stay links of two names once every cache has expired (daytona: the second was
    ENOENT)."""
    os.mkdir(d + "/j")
    os.symlink("nowhere", d + "/j/l")
    os.link(d + "/j/l", d + "/j/l2", follow_symlinks=False)
    os.rename(d + "/j", d + "/k")
    wait_caches(3.5)  # past fs/'s caches: the provider is asked again
    return " ".join("%s=%s:%d:%s" % (n, kind(os.lstat(d + "/k/" + n).st_mode),
                                     os.lstat(d + "/k/" + n).st_nlink, os.readlink(d + "/k/" + n))
                    for n in ("l", "l2"))


def c_symlink_loop(d):
    os.mkdir(d + "/x")
    os.symlink("b", d + "/x/a")
    os.symlink("a", d + "/x/b")
    write(d + "/x/f", "")
    names = sorted(os.listdir(d + "/x"))
    return " ".join(names) + " " + desc(d + "/x/a", False)


def c_dir_nlink(d):
    """A directory's link count: 2 and one per subdirectory, after mkdir, rename of a
    directory out of it and into another, rmdir (pjdfstest rename/24.t; ls -la)."""
    out = []
    for p in ("p", "q", "p/a", "p/b"):
        os.mkdir(d + "/" + p)
    write(d + "/p/f", "")

    def n():
        return "p=%d q=%d" % (os.lstat(d + "/p").st_nlink, os.lstat(d + "/q").st_nlink)
    out.append("made " + n())
    os.rename(d + "/p/a", d + "/q/a")
    out.append("moved " + n())
    os.rmdir(d + "/q/a")
    out.append("removed " + n())
    out.append("listed " + " ".join("%s=%d" % (e.name, e.stat(follow_symlinks=False).st_nlink)
                                    for e in sorted(os.scandir(d), key=lambda e: e.name)))
    return " ".join(out)


def c_fallocate(d):
    """fallocate(2)'s modes FUSE carries: a plain allocation grows the file, KEEP_SIZE
    reserves past the end, PUNCH_HOLE and ZERO_RANGE read back as zeros; a descriptor
    open for reading alone is EBADF."""
    p = d + "/f"
    write(p, "A" * 4096)

    def fa(fd, mode, off, ln):
        if libc.fallocate(fd, ctypes.c_int(mode), ctypes.c_long(off), ctypes.c_long(ln)):
            return errno.errorcode.get(ctypes.get_errno(), "?")
        return "ok"
    out = []
    fd = os.open(p, os.O_RDONLY)
    out.append("rdonly=" + fa(fd, 0, 0, 8192))
    os.close(fd)
    fd = os.open(p, os.O_RDWR)
    try:
        out.append("grow=%s size=%d" % (fa(fd, 0, 0, 8192), os.fstat(fd).st_size))
        out.append("keep=%s size=%d" % (fa(fd, 1, 8192, 65536), os.fstat(fd).st_size))
        out.append("punch=%s %r" % (fa(fd, 3, 100, 200), os.pread(fd, 4, 98)))
        out.append("zero=%s %r" % (fa(fd, 0x10, 4000, 10), os.pread(fd, 2, 4009)))
    finally:
        os.close(fd)
    with open(p, "rb") as f:
        data = f.read()
    out.append("reopened zeros=%d size=%d" % (data.count(b"\0"), len(data)))
    return " ".join(out)


def c_xattr(d):
    """Extended attributes as a local disk keeps them (rsync -X, tar --xattrs, cp -a): set,
    read, list, XATTR_CREATE on an existing name, remove; the kernel's rules for another
    user (read of a readable file, no write to another's, no file capability or trusted.*
    name without privilege, trusted.* names not listed); none on a fifo or a symlink."""
    f, own = d + "/f", d + "/own"
    write(f, "x")
    os.chmod(f, 0o644)
    out = []

    def tryit(fn):
        try:
            r = fn()
            return "ok" if r is None else repr(r)
        except OSError as e:
            return en(e)
    out.append("set=" + tryit(lambda: os.setxattr(f, "user.a", b"1")))
    out.append("get=" + tryit(lambda: os.getxattr(f, "user.a")))
    out.append("create=" + tryit(lambda: os.setxattr(f, "user.a", b"2", os.XATTR_CREATE)))
    out.append("replace=" + tryit(lambda: os.setxattr(f, "user.a", b"3", os.XATTR_REPLACE)))
    os.setxattr(f, "user.b", b"")
    out.append("list=" + tryit(lambda: sorted(n for n in os.listxattr(f) if n.startswith("user."))))
    out.append("remove=" + tryit(lambda: os.removexattr(f, "user.b")))
    out.append("gone=" + tryit(lambda: os.getxattr(f, "user.b")))
    out.append("root_trusted=" + tryit(lambda: os.setxattr(f, "trusted.t", b"1")))

    def other():
        write(own, "y")
        return " ".join([
            "read=" + tryit(lambda: os.getxattr(f, "user.a")),
            "write_others=" + tryit(lambda: os.setxattr(f, "user.c", b"1")),
            "write_own=" + tryit(lambda: os.setxattr(own, "user.c", b"1")),
            "fcap=" + tryit(lambda: os.setxattr(own, "security.capability",
                                                b"\1\0\0\2\0\x20" + b"\0" * 14)),
            "trusted_get=" + tryit(lambda: os.getxattr(f, "trusted.t")),
            "trusted_listed=%s" % any(n.startswith("trusted.") for n in os.listxattr(f))])
    out.append(as_user(other))
    os.mkfifo(d + "/p")
    out.append("fifo=" + tryit(lambda: os.setxattr(d + "/p", "user.a", b"1")))
    os.symlink("f", d + "/l")
    out.append("link=" + tryit(lambda: os.setxattr(d + "/l", "user.a", b"1",
                                                   follow_symlinks=False)))
    out.append("link_get=" + tryit(lambda: os.getxattr(d + "/l", "user.a",
                                                       follow_symlinks=False)))
    return " ".join(out)


def c_seek_data(d):
    """lseek SEEK_DATA / SEEK_HOLE over a sparse file, as cp and tar -S ask to step over
    its holes instead of reading them as zeros."""
    fd = os.open(d + "/s", os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, b"x" * 4096, 1 << 20)
    os.ftruncate(fd, 4 << 20)
    out = []
    for wh, name in ((os.SEEK_DATA, "data"), (os.SEEK_HOLE, "hole")):
        for off in (0, 1 << 20, 3 << 20, 4 << 20):
            try:
                out.append("%s@%d=%d" % (name, off, os.lseek(fd, off, wh)))
            except OSError as e:
                out.append("%s@%d=%s" % (name, off, en(e)))
    os.close(fd)
    return " ".join(out)


def c_settled(d):
    """Types, special bits, owners by number and a symlink's size as they are once every
    cache has expired (a remote provider then reads them back from the sandbox)."""
    try:  # a refused fifo is mkfifo's case: the rest still says something
        os.mkfifo(d + "/p", 0o640)
        made = "ok"
    except OSError as e:
        made = en(e)
    try:  # a refused socket likewise
        bind(d + "/s")
        made += " bind=ok"
    except OSError as e:
        made += " bind=" + en(e)
    os.mkdir(d + "/t")
    os.chmod(d + "/t", 0o1777)
    os.mkdir(d + "/g")
    os.chmod(d + "/g", 0o2755)
    write(d + "/u", "")
    os.chmod(d + "/u", 0o4755)
    os.symlink("abc", d + "/l")
    for n, ids in (("o0", (0, 0)), ("on", (NOBODY, NOBODY)), ("ox", (4321, 4322))):
        write(d + "/" + n, "")
        os.chown(d + "/" + n, *ids)

    def show():
        out = []
        for n in sorted(os.listdir(d)):
            st = os.lstat(d + "/" + n)
            s = "%s %s %o" % (n, kind(st.st_mode), stat.S_IMODE(st.st_mode))
            if n.startswith("o"):  # the others are made by root: who owns them differs
                s += " %d:%d" % (st.st_uid, st.st_gid)
            if stat.S_ISLNK(st.st_mode):
                s += " size=%d readlink=%s" % (st.st_size, os.readlink(d + "/" + n))
            out.append(s)
        out.append("listed " + " ".join("%s=%s" % (e.name, kind(e.stat(follow_symlinks=False).st_mode))
                                         for e in sorted(os.scandir(d), key=lambda e: e.name)))
        return " | ".join(out)
    first = show()
    wait_caches(3.5)
    second = show()
    return "mkfifo=%s | %s%s" % (made, second, " (same at once)" if first == second
                                 else " (at once: %s)" % first)


CASES = [(n[2:], f) for n, f in sorted(globals().items()) if n.startswith("c_")]


def main():
    top = sys.argv[1]
    only = set(sys.argv[2:])
    os.umask(0o022)
    for name, fn in CASES:
        if only and name not in only:
            continue
        d = os.path.join(top, "case-" + name)
        os.mkdir(d)
        os.chmod(d, 0o777)
        try:
            ans = fn(d)
        except OSError as e:
            ans = "%s (%s)" % (en(e), e.filename and os.path.basename(e.filename))
        print("%s: %s" % (name, ans), flush=True)


main()
