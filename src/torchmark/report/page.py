"""The report as one self-contained HTML file: the data as JSON, plotly.js embedded once,
and a small script that draws each plot when it scrolls into view (so a store of
hundreds of cases opens at once). Nothing is fetched from the network."""

from __future__ import annotations

import html
import os
from importlib import resources
from pathlib import Path
from typing import Any

import orjson


def _asset(name: str) -> str:
    return resources.files("torchmark.report").joinpath(name).read_text(encoding="utf-8")


def page_json(data: Any) -> str:
    """`data` as compact JSON (orjson's: a case page's thousand points took json 2 ms):
    numpy's numbers as numbers, keys that are not strings as strings, what else JSON
    has no form for as its str()."""
    return orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS
                        | orjson.OPT_SERIALIZE_NUMPY).decode()


def script_json(data: Any) -> str:
    """JSON safe inside a <script> element (no '</' closes it early)."""
    return page_json(data).replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("&", "\\u0026")


def render(data: dict[str, Any], title: str = "torchmark report") -> str:
    """The page for `data` (report.data.gather's output)."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError as e:
        from torchmark.core.errors import ToolMissingError

        raise ToolMissingError("the report needs plotly: pip install 'torchmark[report]'") \
            from e
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title>"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
        "img-src data:; font-src data:\">"
        f"<style>{_asset('report.css')}</style></head><body>"
        f"<header><h1>{html.escape(title)}</h1><p class=\"where\">store: "
        f"{html.escape(str(data.get('store', '')))}</p>"
        "<nav><a href=\"#runs\">Runs</a><a href=\"#regressions\">Regressions</a>"
        "<a href=\"#why\">Why</a>"
        "<a href=\"#ab\">A/B</a><a href=\"#distributions\">Raw samples</a>"
        "<a href=\"#cases\">Cases</a></nav></header><main id=\"app\"></main>"
        f"<script>{get_plotlyjs()}</script><script>{_asset('history_plot.js')}</script>"
        f"<script>{_asset('samples_plot.js')}</script>"
        f"<script type=\"application/json\" id=\"report-data\">{script_json(data)}</script>"
        f"<script>{_asset('report.js')}</script></body></html>\n")


def write_report(store: Any, path: str | os.PathLike, **options: Any) -> Path:
    """Gather the store's history (report.data.gather's options) and write the page to
    `path` (replaced whole: core/atomic_files.py). The path written."""
    from torchmark.core.atomic_files import write_atomically
    from torchmark.report.data import gather

    path = Path(path)
    write_atomically(path, render(gather(store, **options)))
    return path
