#!/usr/bin/env python3
"""The page of `tagflow profile --html`, in a real browser.

    profile_page_browser_test.py --tagflow PATH --out DIR [--bench OPS] [--browser PATH]

Records a short training trace with two simulated GPUs, writes its page with
`tagflow profile`, opens it in Chromium's headless shell and drives it the
way a person would: a wheel zooms, a drag pans, keys zoom out, a click
selects an operation; then the page's figures are compared with the text
report, and a screenshot is written to DIR/profile_page.png. Every failure
says what was expected and what came; the exit status is 1 if any check
failed, 77 (ctest's skip) when no browser is installed, unless
TAGFLOW_REQUIRE_BROWSER=1, then 1.

With --bench OPS it writes a synthetic trace of OPS operations instead (the
format engine/profiler.cc writes), and prints the trace and page sizes, the
time to first paint and the time per zoom step, medians of three loads.

The browser is driven through the Chrome DevTools Protocol (tests/tools/browser.py):
only the Python standard library is used, and every read has a deadline, so the
test ends instead of hanging.
"""

import argparse
import base64
import json
import os
import pathlib
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

from browser import Cdp, Deadline, Page, find_browser, run  # tests/tools/browser.py

SKIP = 77
KINDS = ["compute", "copy", "communication", "wait", "allocation"]
FIGURES = ["devices", "breakdown", "idle", "operations", "critical-path", "critical-operations"]


AXIS = ("(() => { const a = document.querySelector('#axis-range');"
        " return a ? [Number(a.dataset.startNs), Number(a.dataset.endNs)] : null; })()")


class Checks:
    def __init__(self):
        self.failures = []

    def expect(self, ok, what, expected, got):
        if ok:
            print(f"ok: {what}")
        else:
            self.failures.append(what)
            print(f"FAILED: {what}\n  expected: {expected}\n  got:      {got}")
        return ok


def check_dom(page, checks):
    for selector in ("#timeline canvas", "#minimap", "#axis-range", "input#search, #search input",
                     "#details-name"):
        checks.expect(page.eval(f"document.querySelector({json.dumps(selector)}) !== null"),
                      f"the page has {selector}", "an element", "none")
    for kind in KINDS:
        selector = f'#legend label.legend-item[data-kind="{kind}"] input[type="checkbox"]'
        checks.expect(page.eval(f"document.querySelector({json.dumps(selector)}) !== null"),
                      f"the legend has a checkbox for {kind}", selector, "none")
    axis = page.eval(AXIS)
    checks.expect(axis is not None and all(map(is_finite, axis)) and axis[0] < axis[1],
                  "#axis-range has numeric data-start-ns < data-end-ns", "start < end", axis)
    figures = page.eval("[...document.querySelectorAll('#figures table[data-figure]')]"
                        ".map(t => t.dataset.figure)")
    for name in FIGURES:
        checks.expect(name in figures, f'#figures has table[data-figure="{name}"]', name,
                      figures)


def is_finite(x):
    return isinstance(x, (int, float)) and x == x and abs(x) != float("inf")


def range_of(page):
    axis = page.settled(AXIS)
    if axis is None or not all(map(is_finite, axis)):
        raise RuntimeError(f"#axis-range has no numeric range: {axis}")
    return axis


def check_navigation(page, checks):
    box = page.eval("(() => { const r = document.querySelector('#timeline canvas')"
                    ".getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()")
    x, y = box[0] + box[2] / 2, box[1] + box[3] / 2
    before = range_of(page)
    page.mouse("mouseWheel", x, y, deltaX=0, deltaY=-300)
    zoomed = range_of(page)
    checks.expect(zoomed[1] - zoomed[0] < before[1] - before[0] and before[0] <= zoomed[0]
                  and zoomed[1] <= before[1], "a wheel up zooms into the range",
                  f"a range narrower than and inside {before}", zoomed)

    steps = 8
    page.mouse("mouseMoved", x, y)
    page.mouse("mousePressed", x, y, button="left", buttons=1, clickCount=1)
    for k in range(1, steps + 1):
        page.mouse("mouseMoved", x - 200 * k / steps, y, button="left", buttons=1)
    page.mouse("mouseReleased", x - 200, y, button="left", buttons=0, clickCount=1)
    dragged = range_of(page)
    checks.expect(dragged[0] > zoomed[0] and dragged[1] > zoomed[1],
                  "a drag to the left moves the range to later times",
                  f"start and end after {zoomed}", dragged)

    page.key("s")
    wider = range_of(page)
    checks.expect(wider[1] - wider[0] > dragged[1] - dragged[0], 'the key "s" zooms out',
                  f"a range wider than {dragged[1] - dragged[0]} ns",
                  f"{wider} ({wider[1] - wider[0]} ns)")


def check_selection(page, checks):
    with_producers = page.eval("tagflowPage.opsWithProducers()")
    if not checks.expect(len(with_producers) > 0, "some operations have producers",
                         "at least one", with_producers):
        return
    i = with_producers[len(with_producers) // 2]
    page.eval(f"tagflowPage.zoomToOp({i})")
    page.settled(AXIS)
    rect = page.eval(f"tagflowPage.opScreenRect({i})")
    if not checks.expect(rect is not None and rect["width"] > 0 and rect["height"] > 0,
                         f"operation {i} is on screen after zoomToOp", "a rectangle", rect):
        return
    page.click(rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2)
    page.frames()
    name = page.eval(f"tagflowPage.opName({i})")
    checks.expect(page.eval("tagflowPage.selected()") == i, f"a click selects operation {i}",
                  i, page.eval("tagflowPage.selected()"))
    shown = page.eval("(document.querySelector('#details-name') || {}).textContent")
    checks.expect(shown is not None and name in shown, "#details-name names the operation",
                  f"text containing {name!r}", shown)
    producers = page.eval(f"tagflowPage.producers({i}).length")
    listed = page.eval("document.querySelectorAll('#details-producers li').length")
    checks.expect(producers > 0 and listed == producers, "#details-producers lists its producers",
                  f"{producers} items (more than 0)", listed)


def report_tables(report):
    """The text report's tables: title -> rows, each a list of cells (the
    header line after the title is left out)."""
    tables = {}
    blocks = [b for b in report.split("\n\n") if b.strip()]
    for block in blocks:
        lines = block.splitlines()
        if len(lines) >= 2 and not lines[0].startswith(" "):
            tables[lines[0].strip()] = [re.split(r"\s{2,}", line.strip()) for line in lines[2:]]
    return tables


def check_figures(page, report, checks):
    text = report_tables(report)
    tables = page.eval("[...document.querySelectorAll('#figures table[data-figure]')].map(t => "
                       "[t.dataset.figure, t.parentElement.querySelector('h3').textContent, "
                       "[...t.querySelectorAll('tbody tr')].map(r => "
                       "[...r.querySelectorAll('td')].map(d => d.textContent.trim()))])")
    for figure, title, rows in tables:
        if figure in FIGURES:
            checks.expect(len(rows) > 0, f'table "{figure}" has rows', "at least one", 0)
        expected = text.get(title)
        checks.expect(expected == rows, f'table "{figure}" matches the text report',
                      f"the rows under \"{title}\" in the report, in order: {expected}",
                      rows)


def check_critical_path(page, checks):
    box = page.eval("(() => { const t = document.querySelector('#critical-path-toggle');"
                    " if (!t) return null; t.scrollIntoView({block: 'center'});"
                    " const r = t.getBoundingClientRect();"
                    " return [r.left + r.width / 2, r.top + r.height / 2]; })()")
    if box is None:
        print("skipped: no #critical-path-toggle")
        return
    page.click(*box)
    page.frames()
    path = page.eval("tagflowPage.criticalPath().length")
    highlighted = page.eval("tagflowPage.highlighted().length")
    checks.expect(path > 0 and highlighted == path,
                  "the critical-path toggle highlights the critical path",
                  f"{path} operations highlighted (more than 0)", highlighted)


def check_errors(page, checks):
    checks.expect(not page.errors, "no JavaScript exception or console error", "none",
                  "\n    ".join([""] + page.errors))


def screenshot(page, path):
    page.eval("tagflowPage.resetView()")
    page.settled(AXIS)
    png = page.send("Page.captureScreenshot", {"format": "png"})["data"]
    path.write_bytes(base64.b64decode(png))
    print(f"screenshot: {path}")


def test(args, browser, out, deadline):
    trace = out / "trace.json"
    html = out / "profile_page.html"
    trace.unlink(missing_ok=True)
    env = dict(os.environ, TAGFLOW_SIM_GPUS="2")
    run([args.tagflow, "train", "--epochs", "1", "--limit", "2560", "--no-progress", "--devices",
         "gpu:0,gpu:1", "--profile", trace], deadline, env=env)
    if not trace.is_file():
        raise RuntimeError(f"tagflow train --profile wrote no {trace}")
    report = run([args.tagflow, "profile", trace, "--html", html], deadline)
    print(report)
    checks = Checks()
    cdp = Cdp(browser, out / "chromium-profile", out / "chromium.log", deadline)
    page = None
    try:
        page = Page(cdp)
        page.load(html.resolve().as_uri(), timeout=30)
        check_dom(page, checks)
        check_navigation(page, checks)
        check_selection(page, checks)
        check_figures(page, report, checks)
        check_critical_path(page, checks)
        screenshot(page, out / "profile_page.png")
        print(f"first paint: {page.eval('tagflowPage.firstPaintMs'):.1f} ms")
        print(f"page size: {html.stat().st_size} bytes")
    except (RuntimeError, TimeoutError, OSError) as e:  # the page could not be driven further
        checks.expect(False, "driving the page", "no error", e)
    finally:
        if page is not None:
            check_errors(page, checks)
        cdp.close()
    if checks.failures:
        print(f"\n{len(checks.failures)} checks failed:")
        for failure in checks.failures:
            print(f"  {failure}")
        print(f"(the page: {html}; the browser's output: {out / 'chromium.log'})")
        return 1
    print("\nall checks passed")
    return 0


def synthetic_trace(ops, seed=1):
    """A Chrome trace of `ops` operations as engine/profiler.cc writes it: cpu(0)
    with two workers, gpu(0) and gpu(1) with compute and copy queues (closures
    on workers, device work on streams), chains of dependencies, copies,
    communication, host waits, and allocation counters."""
    rng = random.Random(seed)
    pid = {"cpu(0)": 1, "gpu(0)": 2, "gpu(1)": 3}
    gpu_track = ["compute worker", "copy worker", "compute stream", "copy stream"]
    names = ["conv2d", "conv2d_backward_data", "conv2d_backward_weight", "dot", "relu", "sum",
             "broadcast_add", "broadcast_mul", "max_pool2d", "pool2d_backward", "sgd_update"]
    us = lambda ns: round(ns / 1000, 3)
    events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "host"}}]
    tracks = set()
    free = {}  # (pid, tid) -> ns when that worker or stream is free
    ended = {}  # seq -> (pid, tid of the closure, started ns, busy end ns)
    chains = [None] * 64
    allocated = {p: 0 for p in pid.values()}
    flows = []
    clock = 0
    seq0 = 1000
    for k in range(ops):
        seq = seq0 + k
        chain = rng.randrange(len(chains))
        device = ["cpu(0)", "gpu(0)", "gpu(1)"][chain % 3]
        p = pid[device]
        copy = rng.random() < 0.15
        name = "copy" if copy else rng.choice(names)
        priority = 100 if (not copy and rng.random() < 0.05) else 0
        reads = [chains[chain]] if chains[chain] is not None else []
        if rng.random() < 0.1:
            other = chains[rng.randrange(len(chains))]
            if other is not None and other not in reads:
                reads.append(other)
        clock += rng.randint(2000, 18000)  # each device about 70% busy
        pushed = clock
        ready = max([pushed] + [ended[r][3] for r in reads]) + rng.randint(100, 2000)
        queue = "copy" if copy else "compute"
        worker = (1 if copy else 0) if device != "cpu(0)" else rng.randrange(2)
        tid = worker if device == "cpu(0)" else (1 if copy else 0)
        start = max(ready, free.get((p, tid), 0)) + rng.randint(50, 500)
        if device == "cpu(0)":
            end = start + rng.randint(1000, 30000)
            busy_end = end
        else:
            end = start + rng.randint(1000, 5000)  # the launch
            stream = tid + 2
            device_start = max(end, free.get((p, stream), 0)) + rng.randint(100, 1000)
            busy_end = device_start + rng.randint(2000, 40000)
            free[(p, stream)] = busy_end
        free[(p, tid)] = end
        args = {"seq": seq, "priority": priority, "pushed_us": us(pushed), "ready_us": us(ready),
                "queued_us": us(start - ready)}
        if reads:
            args["reads_from"] = reads
        args["queue"] = queue
        args["worker"] = worker
        events.append({"ph": "X", "cat": "op", "name": name, "pid": p, "tid": tid,
                       "ts": us(start), "dur": us(end - start), "args": args})
        tracks.add((p, tid, gpu_track[tid] if device != "cpu(0)" else f"worker {worker}"))
        if device != "cpu(0)":
            events.append({"ph": "X", "cat": "device", "name": name, "pid": p, "tid": tid + 2,
                           "ts": us(device_start), "dur": us(busy_end - device_start),
                           "args": {"seq": seq}})
            tracks.add((p, tid + 2, gpu_track[tid + 2]))
        for r in reads:
            flows.append((ended[r][0], ended[r][1], ended[r][2], p, tid, start))
        ended[seq] = (p, tid, start, busy_end)
        chains[chain] = seq
        if k % 4 == 0:
            delta = rng.choice([1, 1, -1]) * rng.randrange(1, 64) * 4096
            allocated[p] = max(0, allocated[p] + delta)
            events.append({"ph": "C", "name": "allocated bytes", "pid": p, "ts": us(start),
                           "args": {"bytes": allocated[p]}})
        if k % 500 == 499:
            wait_for = seq
            events.append({"ph": "X", "cat": "wait", "name": "wait_to_read", "pid": 0, "tid": 0,
                           "ts": us(pushed), "dur": us(ended[seq][3] - pushed),
                           "args": {"waited_for": name, "seq": wait_for}})
    for device, p in pid.items():
        events.append({"ph": "M", "name": "process_name", "pid": p, "args": {"name": device}})
    for p, tid, name in sorted(tracks):
        events.append({"ph": "M", "name": "thread_name", "pid": p, "tid": tid,
                       "args": {"name": name}})
    for flow_id, (p0, t0, ts0, p1, t1, ts1) in enumerate(flows, 1):
        events.append({"ph": "s", "cat": "dependency", "name": "dependency", "id": flow_id,
                       "pid": p0, "tid": t0, "ts": us(ts0)})
        events.append({"ph": "f", "bp": "e", "cat": "dependency", "name": "dependency",
                       "id": flow_id, "pid": p1, "tid": t1, "ts": us(ts1)})
    events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": 0,
                   "args": {"name": "thread 0"}})
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, sort_keys=True,
                      separators=(",", ":"))


def bench(args, browser, out, deadline):
    trace = out / f"bench_{args.bench}.json"
    html = out / f"bench_{args.bench}.html"
    trace.write_text(synthetic_trace(args.bench))
    start = time.monotonic()
    run([args.tagflow, "profile", trace, "--html", html], deadline)
    profile_s = time.monotonic() - start
    cdp = Cdp(browser, out / "chromium-profile", out / "chromium.log", deadline)
    paints, walls, zooms = [], [], []
    try:
        page = Page(cdp)
        for load in range(3):
            page.send("Page.navigate", {"url": "about:blank"})
            walls.append(page.load(html.resolve().as_uri(), timeout=deadline.left()))
            paints.append(page.eval("tagflowPage.firstPaintMs"))
            if page.eval("typeof tagflowPage.benchZoom === 'function'"):
                frames = page.eval("tagflowPage.benchZoom(20)", timeout=deadline.left())
            else:  # a wheel event's round trip, to the next frame
                box = page.eval("(() => { const r = document.querySelector('#timeline canvas')"
                                ".getBoundingClientRect(); return [r.left + r.width / 2,"
                                " r.top + r.height / 2]; })()")
                frames = []
                for _ in range(20):
                    t = time.monotonic()
                    page.mouse("mouseWheel", *box, deltaX=0, deltaY=-100)
                    page.frames(1)
                    frames.append(1000 * (time.monotonic() - t))
            zooms.append(statistics.median(frames))
            print(f"load {load + 1}: first paint {paints[-1]:.0f} ms, navigation to ready "
                  f"{walls[-1]:.0f} ms, zoom step median {zooms[-1]:.2f} ms", flush=True)
        errors = list(page.errors)
    finally:
        cdp.close()
    print(f"operations:         {args.bench}")
    print(f"trace:              {trace.stat().st_size} bytes")
    print(f"page:               {html.stat().st_size} bytes")
    print(f"tagflow profile:    {profile_s:.1f} s")
    print(f"first paint:        {statistics.median(paints):.0f} ms (tagflowPage.firstPaintMs, "
          "median of 3 loads)")
    print(f"navigation, ready:  {statistics.median(walls):.0f} ms (wall, median of 3 loads)")
    print(f"zoom step:          {statistics.median(zooms):.2f} ms (median of 20 steps, "
          "median of 3 loads)")
    if errors:
        print("FAILED: JavaScript errors:\n  " + "\n  ".join(errors))
        return 1
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tagflow", required=True, help="the tagflow binary")
    parser.add_argument("--out", required=True, type=pathlib.Path, help="where files go")
    parser.add_argument("--bench", type=int, metavar="OPS",
                        help="time a synthetic trace of OPS operations instead of testing")
    parser.add_argument("--browser",
                        help="Chromium (default: chromium-headless-shell or chromium on PATH)")
    args = parser.parse_args()
    browser = find_browser(args.browser)
    if browser is None:
        print(f"no browser: {args.browser or 'chromium-headless-shell or chromium'} is not on "
              "PATH (Debian: apt-get install chromium-headless-shell)")
        if os.environ.get("TAGFLOW_REQUIRE_BROWSER") == "1":
            print("TAGFLOW_REQUIRE_BROWSER=1: failing instead of skipping")
            return 1
        return SKIP
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "chromium-profile", ignore_errors=True)
    (out / "chromium.log").unlink(missing_ok=True)
    print(f"browser: {browser}")
    deadline = Deadline(120 if args.bench is None else 600)
    try:
        return (test if args.bench is None else bench)(args, browser, out, deadline)
    except (RuntimeError, TimeoutError, OSError, subprocess.TimeoutExpired) as e:
        print(f"FAILED: {e}")
        log = out / "chromium.log"
        if log.is_file():
            print(f"(the browser's output: {log})")
        return 1


if __name__ == "__main__":
    sys.exit(main())
