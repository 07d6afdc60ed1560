"""Debian's headless Chromium, driven over the DevTools protocol, for pages a person
looks at (``report.html``).

``HeadlessChromium(profile_dir)`` starts ``chromium`` with the flags this sandbox needs
(no GPU, no sandbox, no background networking, a fresh profile) and
``--remote-debugging-port=0`` (a free port; Chromium prints the WebSocket address), and
with ``--log-net-log`` so that every request it made is in Chromium's own network log
(``page_requests_in_net_log``, read after ``close``). ``open(url)`` loads a page in a new tab and
records every request the tab sent (``Page.requests``); ``evaluate`` runs an expression
there (awaiting a promise), ``screenshot`` saves the whole page as PNG.

The protocol is plain JSON over one WebSocket (websocket-client, a test dependency):
commands carry an id and get a result with that id; events in between are kept.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websocket

CHROMIUM = "chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)
"""What headless Chromium needs here: no GPU or sandbox in the container, and none of the
requests a browser makes by itself (updates, sync, QUIC probes) in the network log."""
START_TIMEOUT_S = 60.0  # a cold start of Chromium on a busy 2-core machine
COMMAND_TIMEOUT_S = 60.0
WINDOW = (1280, 900)
_LISTENING = "DevTools listening on "


class BrowserError(RuntimeError):
    """Chromium did not start, or a DevTools command failed."""


@dataclass
class Page:
    """One tab: its DevTools session and the requests it has sent so far."""

    browser: HeadlessChromium
    session: str
    requests: list[str] = field(default_factory=list)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session)

    def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` (a promise is awaited), as JSON."""
        answer = self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in answer:
            raise BrowserError(f"{expression!r} failed: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def screenshot(self, path: Path) -> None:
        """The whole page (not only the window) as a PNG at ``path``."""
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        width, height = WINDOW[0], max(int(size["height"]), WINDOW[1])
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)  # fmt: skip
        shot = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))


class HeadlessChromium:
    """A Chromium process and a DevTools connection to it (see the module docstring)."""

    def __init__(self, profile_dir: Path) -> None:
        self.profile_dir = profile_dir
        self.net_log = profile_dir.parent / f"{profile_dir.name}-netlog.json"
        self._ids = itertools.count(1)
        self._events: list[dict[str, Any]] = []
        self._pages: dict[str, Page] = {}
        self._stderr: list[str] = []
        self._process: subprocess.Popen[str] | None = None
        self._socket: websocket.WebSocket | None = None

    def __enter__(self) -> HeadlessChromium:
        executable = shutil.which(CHROMIUM)
        if executable is None:
            raise BrowserError("chromium not found: install Debian's chromium (scripts/test does)")
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile_dir}",
             f"--window-size={WINDOW[0]},{WINDOW[1]}", "--remote-debugging-port=0",
             f"--log-net-log={self.net_log}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        address = self._devtools_address()
        self._socket = websocket.create_connection(address, timeout=COMMAND_TIMEOUT_S)
        return self

    def _devtools_address(self) -> str:
        """The browser's WebSocket address from Chromium's stderr; then stderr is kept
        draining on a thread so Chromium never blocks on a full pipe."""
        assert self._process is not None and self._process.stderr is not None
        found: list[str] = []
        ready = threading.Event()

        def drain() -> None:
            assert self._process is not None and self._process.stderr is not None
            for line in self._process.stderr:
                self._stderr.append(line)
                if line.startswith(_LISTENING) and not found:
                    found.append(line[len(_LISTENING) :].strip())
                    ready.set()
            ready.set()  # exited without listening

        threading.Thread(target=drain, name="chromium-stderr", daemon=True).start()
        if not ready.wait(START_TIMEOUT_S) or not found:
            self.close()
            raise BrowserError("chromium did not start:\n" + "".join(self._stderr[-20:]))
        return found[0]

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str = "") -> Any:
        """Send one command and wait for its result, keeping the events that come first."""
        assert self._socket is not None
        command_id = next(self._ids)
        message: dict[str, Any] = {"id": command_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._socket.send(json.dumps(message))
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while time.monotonic() < deadline:
            answer = json.loads(self._socket.recv())
            if answer.get("id") == command_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self._event(answer)
        raise BrowserError(f"{method}: no answer in {COMMAND_TIMEOUT_S} s")

    def _event(self, event: dict[str, Any]) -> None:
        self._events.append(event)
        page = self._pages.get(event.get("sessionId", ""))
        if page is not None and event.get("method") == "Network.requestWillBeSent":
            page.requests.append(event["params"]["request"]["url"])

    def wait_for(self, method: str, session: str, timeout: float = COMMAND_TIMEOUT_S) -> None:
        """Until the event ``method`` of ``session`` has come (already or now)."""
        assert self._socket is not None
        deadline = time.monotonic() + timeout
        seen = len(self._events)
        for event in self._events:
            if event.get("method") == method and event.get("sessionId") == session:
                return
        while time.monotonic() < deadline:
            self._event(json.loads(self._socket.recv()))
            latest = self._events[seen:]
            seen = len(self._events)
            if any(e.get("method") == method and e.get("sessionId") == session for e in latest):
                return
        raise BrowserError(f"no {method} in {timeout} s")

    def open(self, url: str) -> Page:
        """A new tab that has loaded ``url`` (its load event fired)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self, session)
        self._pages[session] = page
        for domain in ("Page", "Network", "Runtime"):
            page.send(f"{domain}.enable")
        page.send("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired", session)
        return page

    def close(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(BrowserError, websocket.WebSocketException, OSError):
                self.send("Browser.close")  # Chromium may close the socket before answering
            self._socket.close()
            self._socket = None
        if self._process is not None:
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def __exit__(self, *exc: object) -> None:
        self.close()


BROWSER_INITIATOR = "not an origin"
"""What Chromium's network log gives as the initiator of a request the browser makes by
itself (component updates, account checks): none of a page's requests has it."""


def page_requests_in_net_log(net_log: Path) -> list[str]:
    """The URL of every request a page made (any scheme the network stack serves), from
    Chromium's network log, read after the browser closed. Requests Chromium sends for
    itself, which no flag turns off in this build, are told apart by their initiator."""
    data = json.loads(net_log.read_text(encoding="utf-8"))
    start = data["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in data.get("events", []):
        params = event.get("params") or {}
        if event.get("type") != start or "url" not in params:
            continue  # another event, or the end of one (it names no URL)
        if params.get("initiator") != BROWSER_INITIATOR:
            urls.append(params["url"])
    return urls
