# Chart capture for the fake Daytona toolbox's python code-run.
#
# lib/daytona-process.js puts this in front of code that imports matplotlib
# (as the real daemon wraps it): plt.show() then prints one line
#   dtn_artifact_k39fd2:{"type": "chart", "value": {...}}
# per open figure, which the toolbox strips from the output and returns in
# artifacts.charts.  The chart metadata is a small subset of the real one:
# type, title, labels, elements (line points, bar values, scatter points)
# and the figure as base64 png.
import base64 as _dtn_b64
import io as _dtn_io
import json as _dtn_json

import matplotlib as _dtn_mpl

_dtn_mpl.use("Agg")
import matplotlib.pyplot as _dtn_plt  # noqa: E402


def _dtn_axes(ax):
    d = {"title": ax.get_title() or None, "x_label": ax.get_xlabel() or None,
         "y_label": ax.get_ylabel() or None}
    bars = [p for p in ax.patches if type(p).__name__ == "Rectangle"]
    if bars:
        labels = [t.get_text() for t in ax.get_xticklabels()]
        d["type"] = "bar"
        d["elements"] = [{"label": labels[i] if i < len(labels) else str(i), "group": "",
                          "value": float(b.get_height())} for i, b in enumerate(bars)]
    elif ax.get_lines():
        d["type"] = "line"
        d["elements"] = [{"label": ln.get_label(),
                          "points": [[float(x), float(y)] for x, y in zip(ln.get_xdata(), ln.get_ydata())]}
                         for ln in ax.get_lines()]
    elif ax.collections:
        d["type"] = "scatter"
        d["elements"] = [{"label": c.get_label(), "points": [[float(x), float(y)] for x, y in c.get_offsets()]}
                         for c in ax.collections]
    else:
        d["type"] = "unknown"
    return d


def _dtn_show(*_args, **_kwargs):
    for num in _dtn_plt.get_fignums():
        fig = _dtn_plt.figure(num)
        subplots = [_dtn_axes(ax) for ax in fig.axes]
        if len(subplots) == 1:
            meta = subplots[0]
        else:
            meta = {"type": "composite_chart" if subplots else "unknown", "title": None, "elements": subplots}
        buf = _dtn_io.BytesIO()
        fig.savefig(buf, format="png")
        meta["png"] = _dtn_b64.b64encode(buf.getvalue()).decode()
        print("dtn_artifact_k39fd2:" + _dtn_json.dumps({"type": "chart", "value": meta}, default=str), flush=True)
    _dtn_plt.close("all")


_dtn_plt.show = _dtn_show
