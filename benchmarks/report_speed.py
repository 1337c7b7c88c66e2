"""How fast `torchmark report` is on a large store (issue 25's targets).

A SQLite store of 200 cases x 100 runs (40 raw samples a result, one case in ten with a
25% step half-way) is built first (setup, not timed); then, each 3 times, medians shown:
- generating the report (`write_report`: reading the store, detecting changes in every
  series, writing the HTML) — target < 5 s;
- its file size;
- opening it in Chromium (playwright, /usr/bin/chromium) until the page is built and
  the plots in view are drawn — target < 3 s.

    python benchmarks/report_speed.py [--cases 200] [--runs 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "report"))

from store_builder import build_store  # noqa: E402  (the report tests' synthetic history)

from torchmark.report import write_report  # noqa: E402

CHROMIUM = "/usr/bin/chromium"


def open_times(path: Path, repeats: int) -> list[float]:
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for _ in range(repeats):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            start = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_selector("body[data-ready='1']", timeout=60_000)
            # the plots in view are drawn (the A/B view and the raw samples come first)
            page.wait_for_function(
                "[...document.querySelectorAll('.plot')].filter(d => {"
                " const r = d.getBoundingClientRect();"
                " return r.top < innerHeight && r.bottom > 0; })"
                ".every(d => d.querySelector('svg.main-svg'))", timeout=60_000)
            out.append(time.perf_counter() - start)
            page.close()
        browser.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="torchmark-report-speed-"))
    start = time.perf_counter()
    store = build_store(f"sqlite:///{folder / 'store.db'}", cases=args.cases, runs=args.runs,
                        step_case=-1, step_every=10, step_at=args.runs // 2)
    print(f"store: {args.cases} cases x {args.runs} runs built in "
          f"{time.perf_counter() - start:.1f} s (setup)")
    out = folder / "report.html"
    gen = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        write_report(store, out)
        gen.append(time.perf_counter() - start)
    size = out.stat().st_size
    print(f"generate: median {statistics.median(gen):.2f} s of {args.repeats} "
          f"(target < 5 s: {'met' if statistics.median(gen) < 5 else 'NOT met'})")
    from plotly.offline import get_plotlyjs

    print(f"file size: {size / 1e6:.1f} MB (plotly.js {len(get_plotlyjs()) / 1e6:.1f} MB "
          "of it)")
    if not Path(CHROMIUM).exists():
        print(f"open in Chromium: skipped, no browser at {CHROMIUM}")
        return
    opened = open_times(out, args.repeats)
    print(f"open in Chromium: median {statistics.median(opened):.2f} s of {args.repeats} "
          f"(target < 3 s: {'met' if statistics.median(opened) < 3 else 'NOT met'})")


if __name__ == "__main__":
    main()
