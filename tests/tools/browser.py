"""Chromium driven over the Chrome DevTools Protocol, for the tests of pages tagflow writes.

The browser is started with --remote-debugging-pipe: it reads commands from file descriptor 3
and writes replies and events to 4, each message JSON ended by a NUL byte. Only the Python
standard library is used; every read has a deadline, so a test ends instead of hanging.
"""

import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import time


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
