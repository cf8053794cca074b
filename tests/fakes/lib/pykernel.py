# A tiny notebook-like Python kernel for the fake E2B code interpreter.
#
# It runs inside the sandbox, started by lib/e2b-interp.js as
# `python3 -u -c <this file>` so nothing has to be copied into the sandbox.
# Requests arrive on stdin, one JSON object a line: {"code", "env"}.
# Events leave on fd 3, one JSON object a line, as the /execute NDJSON
# wants them (stdout, stderr, result, error), then {"type": "done"}.
# Globals persist between cells; a cell whose last statement is an
# expression reports its value, as Jupyter does.  It is not IPython: no
# magics, no display hooks beyond _repr_*_ and matplotlib figures.
import ast
import base64
import builtins
import io
import json
import os
import sys
import traceback

os.environ.setdefault("MPLBACKEND", "Agg")
_proto = os.fdopen(3, "w", buffering=1, encoding="utf-8")
_requests = sys.stdin
sys.stdin = open(os.devnull)


def _send(obj):
    # Pending partial lines go out first, so events keep the order they happened in.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, _Stream):
            stream.flush()
    _proto.write(json.dumps(obj) + "\n")
    _proto.flush()


class _Stream(io.TextIOBase):
    # Jupyter sends whole lines, not each write() (print() writes the text
    # and its newline separately): keep the tail until a newline or a flush.
    def __init__(self, name):
        self._name = name
        self._buf = ""

    def write(self, s):
        self._buf += s
        i = self._buf.rfind("\n")
        if i >= 0:
            text, self._buf = self._buf[:i + 1], self._buf[i + 1:]
            _proto.write(json.dumps({"type": self._name, "text": text}) + "\n")
        return len(s)

    def flush(self):
        if self._buf:
            _proto.write(json.dumps({"type": self._name, "text": self._buf}) + "\n")
            self._buf = ""

    def isatty(self):
        return False

    @property
    def encoding(self):
        return "utf-8"


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
        _send(r)
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
        if callable(fn):
            try:
                out = fn()
            except Exception:
                continue
            if out is None:
                continue
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
        _send(_result(o, False))


_ns = {"__name__": "__main__", "__builtins__": builtins, "display": display}


def _report(e):
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    _send({"type": "error", "name": type(e).__name__, "value": str(e), "traceback": tb})


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
                _send(_result(value, True))
    except BaseException as e:  # SystemExit and KeyboardInterrupt are cell errors too
        _report(e)
    finally:
        _emit_figures()


def main():
    out, err = sys.stdout, sys.stderr
    for line in _requests:
        req = json.loads(line)
        saved = dict(os.environ)
        os.environ.update(req.get("env") or {})
        sys.stdout, sys.stderr = _Stream("stdout"), _Stream("stderr")
        try:
            _run(req.get("code", ""))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = out, err
            os.environ.clear()
            os.environ.update(saved)
            _send({"type": "done"})


main()
