"""Tool-belt speed: runner overhead, the document-parsing workers, visit_page over loopback.

Run: ``python -m kgot.benchmarks.perf_tools [--quick] [--json]``.

* runner overhead: :meth:`ToolRunner.run` around a tool that returns at once (validation,
  cache bookkeeping, the LangChain tool call, output cap) — target p50 ≤ 1 ms;
* cache hit: an identical second call answered from the run's cache;
* parser worker start: the first conversion of a fresh pool, i.e. a sandbox worker starting and
  importing the parsers (paid once per pool, in the background when tools are built);
* warm parses (p50): a 2-page PDF, a 2,000-row CSV, a 2,000-row XLSX, a ~150 KB HTML article,
  each a sandbox job on a warm worker;
* large document (p50): a 25 MB file (the default download cap) handed to a warm worker and
  not parsed, i.e. what staging a document into the sandbox costs;
* visit_page (p50): first visit of a ~150 KB page over loopback (fetch + parse + page 1), and
  page 2 of it (served from the run's converted-document store);
* ``kgot tools list`` (p50): a fresh process listing the tools, as a user types it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kgot.benchmarks.figures import Figure, print_figures
from kgot.config import ToolsSettings
from kgot.documents import ConverterPool
from kgot.tools import ToolContext, ToolRunner, build_tools

RUNNER_TARGET_MS = 1.0
PARAGRAPH = "The heron stands in the shallows and waits for fish to come close. " * 4


def _p50(values: list[float]) -> float:
    return statistics.median(values)


def _article(paragraphs: int) -> bytes:
    body = "".join(f"<h2>Part {i}</h2><p>{PARAGRAPH}</p>" for i in range(paragraphs))
    page = f"<html><head><title>Bench</title></head><body><article>{body}</article></body></html>"
    return page.encode()


def _samples(root: Path) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import openpyxl
    from matplotlib.backends.backend_pdf import PdfPages

    pdf = root / "doc.pdf"
    with PdfPages(pdf) as pages:
        for number in (1, 2):
            figure = plt.figure(figsize=(8.5, 11))
            figure.text(0.1, 0.9, f"Page {number}: {PARAGRAPH[:80]}")
            pages.savefig(figure)
            plt.close(figure)
    csv = root / "rows.csv"
    csv.write_text("id,name,value\n" + "".join(f"{i},item {i},{i * 3}\n" for i in range(2000)))
    xlsx = root / "book.xlsx"
    workbook = openpyxl.Workbook()
    for i in range(2000):
        workbook.active.append((i, f"item {i}", i * 1.5))
    workbook.save(xlsx)
    html = root / "page.html"
    html.write_bytes(_article(400))
    return {"pdf": pdf, "csv": csv, "xlsx": xlsx, "html": html}


def _large_document(root: Path) -> Path:
    path = root / "large.bin"
    path.write_bytes(PARAGRAPH.encode() * (25 * 1024 * 1024 // len(PARAGRAPH)))
    return path


def _runner_overhead(count: int) -> tuple[float, float]:
    from langchain_core.tools import StructuredTool

    def echo(text: str) -> str:
        return text

    runner = ToolRunner(
        [StructuredTool.from_function(func=echo, name="echo", description="echo")],
        timeout=10,
        max_output_chars=10_000,
    )

    async def measure() -> tuple[list[float], list[float]]:
        misses, hits = [], []
        for i in range(count):
            started = time.perf_counter()
            await runner.run("echo", {"text": f"call {i}"})
            misses.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await runner.run("echo", {"text": f"call {i}"})
            hits.append((time.perf_counter() - started) * 1000)
        return misses, hits

    misses, hits = asyncio.run(measure())
    return _p50(misses), _p50(hits)


def _parses(samples: dict[str, Path], large: Path, count: int) -> tuple[float, dict[str, float]]:
    pool = ConverterPool(max_workers=1)
    try:
        started = time.perf_counter()
        pool.convert("probe", samples["csv"], {}, timeout=60)
        cold = (time.perf_counter() - started) * 1000
        figures = {}
        for fmt, path in samples.items():
            times = []
            for _ in range(count):
                started = time.perf_counter()
                pool.convert(fmt, path, {"name": path.name}, timeout=60)
                times.append((time.perf_counter() - started) * 1000)
            figures[fmt] = _p50(times)
        times = []
        for _ in range(count):
            started = time.perf_counter()
            pool.convert("probe", large, {}, timeout=60)
            times.append((time.perf_counter() - started) * 1000)
        figures["large"] = _p50(times)
        return cold, figures
    finally:
        pool.close()


def _visit_page(count: int) -> tuple[float, float]:
    body = _article(400)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    settings = ToolsSettings(allow_private_urls=True)
    pool = ConverterPool(max_workers=1)
    pool.convert("probe", Path(__file__), {}, timeout=60)  # warm, as in a real run
    try:
        firsts, seconds = [], []
        for i in range(count):
            runner = ToolRunner(
                build_tools(ToolContext(settings=settings, converter=pool)),
                timeout=30,
                max_output_chars=settings.max_output_chars,
            )
            url = f"http://127.0.0.1:{server.server_address[1]}/page{i}"
            started = time.perf_counter()
            first = asyncio.run(runner.run("visit_page", {"url": url}))
            firsts.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            second = asyncio.run(runner.run("visit_page", {"url": url, "page": 2}))
            seconds.append((time.perf_counter() - started) * 1000)
            if not (first.ok and second.ok):
                raise RuntimeError(f"visit_page failed: {first.output[:200]}")
        return _p50(firsts), _p50(seconds)
    finally:
        server.shutdown()
        server.server_close()
        pool.close()


def _list_command(count: int) -> float:
    command = [sys.executable, "-m", "kgot.cli.main", "tools", "list", "--json"]
    times = []
    for _ in range(count):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, timeout=120)
        times.append((time.perf_counter() - started) * 1000)
    return _p50(times)


def run(quick: bool = False) -> list[Figure]:
    """Measure; fewer repetitions with ``quick``."""
    overhead, hit = _runner_overhead(200 if quick else 2000)
    with tempfile.TemporaryDirectory(prefix="kgot-perf-tools-") as scratch:
        root = Path(scratch)
        cold, parses = _parses(_samples(root), _large_document(root), 5 if quick else 20)
    first, second = _visit_page(5 if quick else 20)
    listing = _list_command(3 if quick else 7)
    return [
        Figure("tools", "runner overhead p50", overhead, "ms", RUNNER_TARGET_MS),
        Figure("tools", "cache hit p50", hit, "ms"),
        Figure("tools", "parser worker start", cold, "ms"),
        Figure("tools", "warm parse PDF (2 pages) p50", parses["pdf"], "ms"),
        Figure("tools", "warm parse CSV (2,000 rows) p50", parses["csv"], "ms"),
        Figure("tools", "warm parse XLSX (2,000 rows) p50", parses["xlsx"], "ms"),
        Figure("tools", "warm parse HTML (150 KB) p50", parses["html"], "ms"),
        Figure("tools", "large document (25 MB) staged, not parsed p50", parses["large"], "ms"),
        Figure("tools", "visit_page first visit (150 KB, loopback) p50", first, "ms"),
        Figure("tools", "visit_page next page p50", second, "ms"),
        Figure("tools", "kgot tools list, fresh process p50", listing, "ms"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    args = parser.parse_args()
    print_figures(run(quick=args.quick), as_json=args.json)


if __name__ == "__main__":
    main()
