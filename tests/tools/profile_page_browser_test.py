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

The browser is driven through the Chrome DevTools Protocol over
--remote-debugging-pipe: Chromium reads commands from file descriptor 3 and
writes replies and events to 4, each message JSON ended by a NUL byte. Only
the Python standard library is used; every read has a deadline, so the test
ends instead of hanging.
"""

import argparse
import base64
import fcntl
import json
import os
import pathlib
import random
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time

SKIP = 77
KINDS = ["compute", "copy", "communication", "wait", "allocation"]
FIGURES = ["devices", "breakdown", "idle", "operations", "critical-path", "critical-operations"]


class Deadline:
    """The time left of the whole run, so that no step can hang it."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self, at_most=None):
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the test ran out of time")
        return left if at_most is None else min(left, at_most)


class Cdp:
    """A Chrome DevTools Protocol client over Chromium's --remote-debugging-pipe."""

    def __init__(self, browser, profile_dir, log_path, deadline):
        self.deadline = deadline
        self.next_id = 0
        self.buffer = b""
        self.events = []  # (sessionId, method, params), not yet taken
        self.listeners = []  # called with (sessionId, method, params) for every event
        commands_read, self.commands = os.pipe()
        self.replies, replies_write = os.pipe()

        def child_fds():  # in the child, before exec: its fds 3 and 4
            # Copies above 4 first, so that neither dup2 overwrites the other's source.
            read = fcntl.fcntl(commands_read, fcntl.F_DUPFD, 10)
            write = fcntl.fcntl(replies_write, fcntl.F_DUPFD, 10)
            os.dup2(read, 3)  # inheritable, unlike the copies
            os.dup2(write, 4)
            os.close(read)
            os.close(write)

        args = [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--mute-audio",
            "--force-device-scale-factor=1", "--remote-debugging-pipe", "--window-size=1600,1000",
            f"--user-data-dir={profile_dir}", "about:blank"
        ]
        self.log = open(log_path, "wb")
        # close_fds would close 3 and 4 after child_fds ran; the other
        # descriptors of this process are not inheritable (PEP 446).
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                        stderr=subprocess.STDOUT, close_fds=False,
                                        preexec_fn=child_fds, start_new_session=True)
        os.close(commands_read)
        os.close(replies_write)
        os.set_blocking(self.commands, False)

    def close(self):
        """Asks the browser to quit, then ends its process group whatever it did."""
        try:
            if self.process.poll() is None:
                self._write({"id": 0, "method": "Browser.close"}, timeout=2)
                self.process.wait(timeout=5)
        except (OSError, TimeoutError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # its renderers too
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self.commands, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()

    def _write(self, message, timeout):
        data = json.dumps(message).encode() + b"\0"
        end = time.monotonic() + timeout
        while data:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the browser did not read {message.get('method')}")
            _, writable, _ = select.select([], [self.commands], [], left)
            if writable:
                data = data[os.write(self.commands, data):]

    def _read(self, timeout):
        """The next message, or None when `timeout` seconds pass without one."""
        end = time.monotonic() + timeout
        while b"\0" not in self.buffer:
            left = end - time.monotonic()
            if left <= 0:
                return None
            readable, _, _ = select.select([self.replies], [], [], left)
            if not readable:
                return None
            chunk = os.read(self.replies, 1 << 20)
            if not chunk:
                try:
                    status = self.process.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    status = "none yet"
                raise RuntimeError(f"the browser closed its pipe (exit status {status}; "
                                   f"its output: {self.log.name})")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def _dispatch(self, message):
        event = (message.get("sessionId"), message["method"], message.get("params", {}))
        for listener in self.listeners:
            listener(*event)
        self.events.append(event)

    def send(self, method, params=None, session=None, timeout=30):
        """The result of one command; events that arrive meanwhile are queued."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        timeout = self.deadline.left(timeout)
        end = time.monotonic() + timeout
        self._write(message, timeout)
        while True:
            reply = self._read(max(0.0, end - time.monotonic()))
            if reply is None:
                raise TimeoutError(f"{method}: no reply within {timeout:.0f} s")
            if "id" not in reply:
                self._dispatch(reply)
            elif reply["id"] == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def wait_event(self, method, session=None, timeout=30):
        """The params of the first queued or arriving event `method`."""
        end = time.monotonic() + self.deadline.left(timeout)
        while True:
            for k, (s, m, params) in enumerate(self.events):
                if m == method and (session is None or s == session):
                    del self.events[k]
                    return params
            reply = self._read(max(0.0, end - time.monotonic()))
            if reply is None:
                raise TimeoutError(f"no {method} event within {timeout} s")
            if "id" not in reply:
                self._dispatch(reply)


class Page:
    """One tab, attached with a flat session; JavaScript errors are recorded."""

    def __init__(self, cdp):
        self.cdp = cdp
        self.errors = []
        target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = cdp.send("Target.attachToTarget", {
            "targetId": target,
            "flatten": True
        })["sessionId"]
        cdp.listeners.append(self._record_error)
        for domain in ("Runtime", "Page", "Log"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setFocusEmulationEnabled", {"enabled": True})

    def _record_error(self, session, method, params):
        if session != self.session:
            return
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append(f"exception: {text} ({details.get('url', '')}:"
                               f"{details.get('lineNumber', 0) + 1})")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            self.errors.append(f"log error: {entry.get('text')} ({entry.get('url', '')})")
        elif method == "Runtime.consoleAPICalled" and params["type"] == "error":
            args = [a.get("value", a.get("description", "")) for a in params.get("args", [])]
            self.errors.append("console.error: " + " ".join(str(a) for a in args))

    def send(self, method, params=None, timeout=30):
        return self.cdp.send(method, params, self.session, timeout)

    def eval(self, expression, timeout=30):
        """The value of `expression` (awaited when it is a promise)."""
        result = self.send("Runtime.evaluate", {
            "expression": expression,
            "returnByValue": True,
            "awaitPromise": True
        }, timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise RuntimeError(f"evaluating {expression!r}: {text}")
        return result["result"].get("value")

    def load(self, url, timeout=60):
        """Navigates to `url` and waits for window.tagflowPage.ready; returns the wall ms."""
        start = time.monotonic()
        reply = self.send("Page.navigate", {"url": url})
        if reply.get("errorText"):
            raise RuntimeError(f"navigating to {url}: {reply['errorText']}")
        end = start + timeout
        ready = (f"location.href === {json.dumps(url)} &&"
                 " !!(window.tagflowPage && window.tagflowPage.ready)")
        while True:
            try:
                if self.eval(ready):
                    return 1000 * (time.monotonic() - start)
            except RuntimeError:  # evaluated while the old document went away
                pass
            if time.monotonic() > end:
                raise TimeoutError(f"{url}: window.tagflowPage.ready not true after {timeout} s")
            time.sleep(0.02)

    def frames(self, count=2):
        """Waits until the page has drawn `count` more frames."""
        self.eval("new Promise(done => { let n = %d; const next = () => --n < 0 ? done(true) : "
                  "requestAnimationFrame(next); next(); })" % count)

    def settled(self, expression, timeout=3):
        """The value of `expression` once two frames in a row leave it unchanged."""
        end = time.monotonic() + timeout
        value = self.eval(expression)
        while True:
            self.frames()
            now = self.eval(expression)
            if now == value or time.monotonic() > end:
                return now
            value = now

    def mouse(self, kind, x, y, **fields):
        self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, **fields})

    def click(self, x, y):
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, button="left", buttons=1, clickCount=1)
        self.mouse("mouseReleased", x, y, button="left", buttons=0, clickCount=1)

    def key(self, key):
        code = ord(key.upper())
        common = {"key": key, "code": f"Key{key.upper()}", "windowsVirtualKeyCode": code,
                  "nativeVirtualKeyCode": code}
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", "text": key, **common})
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", **common})


AXIS = ("(() => { const a = document.querySelector('#axis-range');"
        " return a ? [Number(a.dataset.startNs), Number(a.dataset.endNs)] : null; })()")


def find_browser(explicit):
    if explicit:
        return explicit if shutil.which(explicit) else None
    for name in ("chromium-headless-shell", "chromium"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run(command, deadline, **kwargs):
    print("$", " ".join(str(c) for c in command), flush=True)
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=deadline.left(), **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} exited with status {done.returncode}:\n"
                           f"{done.stdout}{done.stderr}")
    return done.stdout


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
