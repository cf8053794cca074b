# pykernel — sbxfs's persistent Python interpreter, run inside a sandbox.
#
# A notebook-like kernel: globals persist between cells; a cell whose last
# statement is an expression reports its value, as Jupyter does; matplotlib
# figures (Agg backend) and objects with _repr_html_/_repr_svg_/_repr_png_/
# _repr_json_... become rich results; exceptions are error events. It is
# not IPython: no magics, no display hooks beyond these.
#
# Every execution is a stream of NDJSON events in the shapes of E2B's
# /execute (doc/protocols/e2b.md §3), so one parser serves every
# provider (providers/kernel/events.c):
#   {"type":"number_of_executions","execution_count":N}
#   {"type":"stdout"|"stderr","text":...}
#   {"type":"result","is_main_result":bool,"text":...,"png"|"svg"|"html"|"json"...}
#   {"type":"error","name":...,"value":...,"traceback":...}
#   {"type":"end_of_execution"}
# plus, from --start/--client only, {"type":"state_lost"} when a kernel
# had died and a fresh one was started.
#
# Modes (one of):
#   --socket PATH   serve: bind a unix socket; each connection sends one
#                   request line {"code","env"?} and reads the events
#                   until the server closes it. Cells run one at a time.
#   --start PATH    make sure a server listens on PATH (started detached,
#                   log in PATH.log); prints {"type":"state_lost"} when a
#                   dead one was replaced; exit 0 when it is up.
#   --client PATH   --start, then forward one request (stdin) and print
#                   its events on stdout (for sandboxes reached only
#                   through commands: Daytona).
#   --stdio         requests on stdin, one a line; events on fd 3 (the
#                   test fakes' code interpreter).
# The process's own fds 1 and 2 are captured too, so output of
# subprocesses and C code belongs to the running cell.
import ast
import base64
import builtins
import codecs
import fcntl
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
import traceback

os.environ.setdefault("MPLBACKEND", "Agg")

START_WAIT_S = 30


class _Out:
    """Where the running cell's events go (a socket, fd 3, or nowhere)."""

    def __init__(self):
        self.lock = threading.RLock()
        self.write = None  # callable(bytes) or None between cells
        self.fd_readers = []

    def send(self, obj):
        with self.lock:
            self._drain_fds()
            for stream in (sys.stdout, sys.stderr):
                if isinstance(stream, _Stream):
                    stream.flush_now()
            self.raw(obj)

    def raw(self, obj):
        with self.lock:
            if self.write is None:
                return
            try:
                self.write((json.dumps(obj) + "\n").encode("utf-8", "replace"))
            except OSError:
                self.write = None  # the client went away: the cell runs on

    def _drain_fds(self):
        for r in self.fd_readers:
            r.drain(block=False)


OUT = _Out()


class _Stream(io.TextIOBase):
    # Jupyter sends whole lines, not each write() (print() writes the text
    # and its newline separately): keep the tail until a newline or a flush.
    def __init__(self, name):
        self._name = name
        self._buf = ""

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        self._buf += s
        i = self._buf.rfind("\n")
        if i >= 0:
            text, self._buf = self._buf[:i + 1], self._buf[i + 1:]
            OUT.send({"type": self._name, "text": text})
        return len(s)

    def flush_now(self):
        if self._buf:
            text, self._buf = self._buf, ""
            OUT.raw({"type": self._name, "text": text})

    def flush(self):
        with OUT.lock:
            OUT._drain_fds()
            self.flush_now()

    def isatty(self):
        return False

    def fileno(self):
        return 1 if self._name == "stdout" else 2

    @property
    def encoding(self):
        return "utf-8"


class _FdReader:
    """fd 1 or 2 of this process, turned into events of the running cell."""

    def __init__(self, fd, name):
        r, w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        os.set_blocking(r, False)
        self.r, self.name = r, name
        self.dec = codecs.getincrementaldecoder("utf-8")("replace")
        threading.Thread(target=self._loop, daemon=True).start()

    def drain(self, block):
        import select
        while True:
            ready, _, _ = select.select([self.r], [], [], 0.2 if block else 0)
            if not ready:
                return
            try:
                data = os.read(self.r, 65536)
            except BlockingIOError:
                return
            if not data:
                return
            text = self.dec.decode(data)
            if text:
                OUT.raw({"type": self.name, "text": text})
            block = False

    def _loop(self):
        while True:
            with OUT.lock:
                self.drain(block=False)
            time.sleep(0.05)


def _figure_result(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return {"png": base64.b64encode(buf.getvalue()).decode(), "text": repr(fig)}


def _emit_figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in plt.get_fignums():
        r = _figure_result(plt.figure(num))
        r.update(type="result", is_main_result=False)
        OUT.send(r)
    plt.close("all")


_patched = False
_orig_import = builtins.__import__


def _import(name, *args, **kwargs):
    # plt.show() must emit the figure, so patch pyplot as soon as it is imported.
    global _patched
    mod = _orig_import(name, *args, **kwargs)
    if not _patched and "matplotlib.pyplot" in sys.modules:
        _patched = True
        sys.modules["matplotlib.pyplot"].show = lambda *a, **k: _emit_figures()
    return mod


builtins.__import__ = _import

_REPRS = [("html", "_repr_html_"), ("markdown", "_repr_markdown_"), ("svg", "_repr_svg_"),
          ("png", "_repr_png_"), ("jpeg", "_repr_jpeg_"), ("latex", "_repr_latex_"),
          ("json", "_repr_json_"), ("javascript", "_repr_javascript_")]


def _result(value, main):
    r = {"type": "result", "is_main_result": main, "text": repr(value)}
    if type(value).__name__ == "Figure" and hasattr(value, "savefig"):
        r.update(_figure_result(value))
    for key, meth in _REPRS:
        fn = getattr(value, meth, None)
        if callable(fn) and not isinstance(value, type):
            try:
                out = fn()
            except Exception:
                continue
            if out is None:
                continue
            if isinstance(out, tuple):  # (data, metadata)
                out = out[0]
            if isinstance(out, bytes):
                out = base64.b64encode(out).decode()
            r[key] = out
    if isinstance(value, (dict, list)) and "json" not in r:
        try:
            json.dumps(value)
            r["json"] = value
        except (TypeError, ValueError):
            pass
    return r


def display(*objs, **_):
    for o in objs:
        OUT.send(_result(o, False))


_ns = {"__name__": "__main__", "__builtins__": builtins, "display": display}
_count = 0


def _report(e):
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_globals is globals():
        tb = tb.tb_next  # the driver's own frames are not the user's
    tb = "".join(traceback.format_exception(type(e), e, tb))
    OUT.send({"type": "error", "name": type(e).__name__, "value": str(e), "traceback": tb})


def _run(code):
    try:
        tree = ast.parse(code, "<cell>", "exec")
    except SyntaxError as e:
        _report(e)
        return
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    try:
        exec(compile(tree, "<cell>", "exec"), _ns)
        if last is not None:
            value = eval(compile(last, "<cell>", "eval"), _ns)
            if value is not None:
                _ns["_"] = value
                OUT.send(_result(value, True))
    except BaseException as e:  # SystemExit and KeyboardInterrupt are cell errors too
        _report(e)
    finally:
        try:
            _emit_figures()
        except Exception as e:
            _report(e)


def _execute(req, write):
    """Runs one request, its events going to write(bytes)."""
    global _count
    out, err = sys.stdout, sys.stderr
    saved = dict(os.environ)
    with OUT.lock:
        OUT.write = write
    _count += 1
    OUT.raw({"type": "number_of_executions", "execution_count": _count})
    os.environ.update({str(k): str(v) for k, v in (req.get("env") or {}).items()})
    sys.stdout, sys.stderr = _Stream("stdout"), _Stream("stderr")
    try:
        _run(req.get("code", ""))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        with OUT.lock:
            for r in OUT.fd_readers:
                r.drain(block=False)
        sys.stdout, sys.stderr = out, err
        os.environ.clear()
        os.environ.update(saved)
        OUT.raw({"type": "end_of_execution"})
        with OUT.lock:
            OUT.write = None


def _capture_fds():
    sys.stdout.flush()
    sys.stderr.flush()
    OUT.fd_readers = [_FdReader(1, "stdout"), _FdReader(2, "stderr")]
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), encoding="utf-8",
                                  line_buffering=True, write_through=True)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0), encoding="utf-8",
                                  line_buffering=True, write_through=True)


def _read_line(conn):
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def serve_socket(path):
    try:
        os.setsid()
    except OSError:
        pass
    try:
        os.unlink(path + ".new")
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path + ".new")
    os.chmod(path + ".new", 0o600)
    srv.listen(64)
    os.rename(path + ".new", path)  # only a listening socket is ever at PATH
    with open(path + ".pid", "w") as f:  # for a restart through a shell (Daytona)
        f.write("%d\n" % os.getpid())
    sys.stdin = open(os.devnull)
    _capture_fds()
    while True:
        conn, _ = srv.accept()
        try:
            line = _read_line(conn)
            if not line.strip():
                continue
            try:
                req = json.loads(line)
            except ValueError as e:
                conn.sendall((json.dumps({"type": "error", "name": "ProtocolError",
                                          "value": str(e), "traceback": ""}) + "\n").encode())
                continue
            _execute(req, conn.sendall)
        except OSError:
            pass
        finally:
            conn.close()


def serve_stdio():
    proto = os.fdopen(3, "wb", buffering=0)
    requests = sys.stdin
    sys.stdin = open(os.devnull)
    _capture_fds()
    for line in requests:
        if line.strip():
            _execute(json.loads(line), proto.write)


def _try_connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return s, None
    except OSError as e:
        s.close()
        return None, e


def start(path, language):
    """Makes sure a server listens on path; returns (socket, state_lost)."""
    s, e = _try_connect(path)
    if s:
        return s, False
    # One client starts it, the others wait for that one (PATH.lock): cells sent at
    # once each started a server, all but the last one unreachable, their state lost.
    with open(path + ".lock", "ab") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        s, e = _try_connect(path)
        if s:
            return s, False
        return _spawn(path, language, isinstance(e, ConnectionRefusedError))


def _spawn(path, language, lost):
    """Starts a server on path (lost: a dead one's socket was there) and connects."""
    log = open(path + ".log", "ab")
    proc = subprocess.Popen([sys.executable, "-u", os.path.abspath(__file__), "--socket", path,
                             "--language", language], stdin=subprocess.DEVNULL, stdout=log,
                            stderr=log, start_new_session=True, close_fds=True)
    log.close()
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        s, e = _try_connect(path)
        if s:
            return s, lost
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    try:
        with open(path + ".log", "rb") as f:
            tail = f.read()[-2000:].decode("utf-8", "replace").strip()
    except OSError:
        tail = ""
    sys.stderr.write("the python interpreter did not start%s\n" % (": " + tail if tail else ""))
    sys.exit(1)


def main(argv):
    mode, path, language = None, None, "python"
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--socket", "--start", "--client"):
            mode, path = a[2:], argv[i + 1]
            i += 1
        elif a == "--stdio":
            mode = "stdio"
        elif a == "--language":
            language = argv[i + 1]
            i += 1
        i += 1
    if mode == "socket":
        serve_socket(path)
    elif mode == "stdio":
        serve_stdio()
    elif mode in ("start", "client"):
        req = sys.stdin.buffer.read() if mode == "client" else None
        s, lost = start(path, language)
        out = sys.stdout.buffer
        if lost:
            out.write(b'{"type":"state_lost"}\n')
            out.flush()
        if mode == "start":
            s.close()
            return
        s.sendall(req.rstrip(b"\n") + b"\n")
        ended = False
        tail = b""
        while True:
            data = s.recv(65536)
            if not data:
                break
            out.write(data)
            out.flush()
            tail = (tail + data)[-64:]
            ended = b'"end_of_execution"' in tail
        if not ended:
            out.write((json.dumps({"type": "error", "name": "UnexpectedEndOfExecution",
                                   "value": "the python interpreter exited during the run; "
                                            "the next run starts a fresh one",
                                   "traceback": ""}) + "\n").encode())
            out.write(b'{"type":"end_of_execution"}\n')
    else:
        sys.stderr.write("usage: pykernel.py --socket|--start|--client PATH | --stdio\n")
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
