"""The HTML reports as a person sees them: report.html and matrix.html of real runs against the
reference gateway, opened in headless Chromium (Playwright driving the machine's own Chromium,
never a downloaded one). Every link resolves, every picture renders, nothing is fetched from
outside the machine; a run with failures opens with what failed, its page a third as tall as it
was, its filter works and it reads without script; screenshots of the pages are kept for CI
(PARITY_SCREENSHOT_DIR, by default reports/latest/screenshots/)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

import psutil
import pytest
from click.testing import CliRunner
from report_pages import scenarios_for_reports

from responses_parity.harness.cli import main
from responses_parity.harness.scenario.loader import builtin_scenarios_dir

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the `test` extra has it)")
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (Debian: apt-get install chromium)")

REPOSITORY = Path(__file__).resolve().parents[2]
WITHOUT_SEARCH = Path(__file__).parent / "profiles" / "reference-process.yaml"
"""The reference gateway in a child process, set up with no web search provider: as a gateway
whose owner left out the `web_search` line, it fails the six runs of the three web search
scenarios (with its own message), and its profile says it lacks `background`."""
HEIGHT_BEFORE_PX = 66_426
"""report.html of the full catalogue against `WITHOUT_SEARCH` (6 failed, 94 passed, 34
unsupported) at commit 1891db4, before the report led with what failed: its height in this
test's Chromium window (1280 px wide; Chromium 156). The page is to be at most a third of it."""
SELECTION = ("-s", "text-misstated", "-s", "mcp-call", "-s", "text-basic", "-s", "error-missing-model")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")
LAUNCH_TIMEOUT_MS = 60_000
"""Playwright's own deadlines: Chromium's launch, and each wait on a page (generous for a loaded machine)."""
START_S = 90
TEST_S = 300
"""The watchdog's deadlines, past Playwright's own: the driver's start and a whole test."""


def screenshot_dir() -> Path:
    return Path(os.environ.get("PARITY_SCREENSHOT_DIR") or REPOSITORY / "reports" / "latest" / "screenshots")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run's report.html and a one-target matrix.html, written by the CLI into a tmp folder."""
    root = tmp_path_factory.mktemp("browser")
    paths = [str(builtin_scenarios_dir()), str(scenarios_for_reports(root / "scenarios"))]
    run = CliRunner().invoke(main, ["run", *paths, *SELECTION, "--report-dir", str(root / "run")],
                             catch_exceptions=False)
    assert run.exit_code == 1, run.output  # text-misstated fails on purpose: the pages show divergences
    matrix = CliRunner().invoke(main, ["matrix", *paths, "--targets", "reference", *SELECTION, "--output",
                                       str(root / "matrix.md"), "--report-dir", str(root / "matrix")],
                                catch_exceptions=False)
    assert matrix.exit_code == 0, matrix.output
    with pytest.MonkeyPatch.context() as patch:  # a gateway's run folder is in the cache: one per test worker
        patch.setenv("PARITY_CACHE_DIR", str(root / "cache"))
        failing = CliRunner().invoke(main, ["run", "--target", str(WITHOUT_SEARCH), "--report-dir",
                                            str(root / "six"), "-q"], catch_exceptions=False)
    assert failing.exit_code == 1, failing.output
    six = json.loads((root / "six" / "results.json").read_text())
    assert (six["summary"]["fail"], six["summary"]["could_not_run"]) == (6, 0), failing.output
    return {"report": root / "run" / "report.html", "matrix": root / "matrix.html",
            "document": json.loads((root / "run" / "results.json").read_text()),
            "six": root / "six" / "report.html", "six_document": six}


class Watchdog:
    """Ends the processes this test process started since the watchdog was made (Playwright's
    driver and Chromium) when a block outlives its deadline, and fails with what took too long.
    Playwright's timeouts cover a launch and each wait on a page, not the driver's start
    (playwright 1.41 on a uvloop loop waited for it forever); with the driver gone, every wait
    ends at once."""

    def __init__(self) -> None:
        self._me = psutil.Process()
        self._before = {child.pid for child in self._me.children(recursive=True)}

    def _end_new_processes(self) -> None:
        for child in self._me.children(recursive=True):
            if child.pid not in self._before:
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()

    @contextlib.contextmanager
    def within(self, seconds: float, what: str) -> Iterator[None]:
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            self._end_new_processes()

        timer = threading.Timer(seconds, expire)
        timer.daemon = True
        timer.start()
        message = f"{what} took longer than {seconds:g} s: Playwright's driver and Chromium were ended"
        try:
            yield
        except Exception:
            if expired.is_set():
                pytest.fail(message, pytrace=False)
            raise
        finally:
            timer.cancel()
        if expired.is_set():
            pytest.fail(message, pytrace=False)


class Browser:
    """One Chromium with a fresh profile; every request it makes is recorded, and any to an
    address other than a file or loopback is refused and kept in `outside`."""

    def __init__(self, context: Any, watchdog: Watchdog) -> None:
        self.context = context
        self.watchdog = watchdog
        self.requests: list[str] = []
        self.outside: list[str] = []
        context.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        url = route.request.url
        self.requests.append(url)
        parts = urlsplit(url)
        if parts.scheme == "file" or (parts.scheme in ("http", "https", "ws") and parts.hostname in LOOPBACK):
            route.continue_()
        else:
            self.outside.append(url)
            route.abort()

    def open(self, path: Path) -> Any:
        page = self.context.new_page()
        page.goto(path.as_uri(), wait_until="load")
        return page


@pytest.fixture(scope="module")
def browser(reports: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """Started after the reports are written: Playwright's sync API holds an event loop of its
    own, and the runs need theirs."""
    watchdog = Watchdog()
    with watchdog.within(START_S, "starting Playwright's driver and Chromium"):
        playwright = sync_api.sync_playwright().start()
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True, args=ARGS,
            viewport={"width": 1280, "height": 900}, timeout=LAUNCH_TIMEOUT_MS)
    context.set_default_timeout(LAUNCH_TIMEOUT_MS)
    try:
        yield Browser(context, watchdog)
    finally:
        with watchdog.within(START_S, "closing Chromium and Playwright's driver"):
            context.close()
            playwright.stop()


@pytest.fixture(autouse=True)
def bounded(browser: Browser) -> Iterator[None]:
    """Each test within `TEST_S`: a browser that stops answering fails it, never the suite."""
    with browser.watchdog.within(TEST_S, "the test"):
        yield


def _ids(page: Any) -> set[str]:
    return set(page.eval_on_selector_all("[id]", "elements => elements.map(e => e.id)"))


@pytest.mark.parametrize("name", ["report", "matrix"])
def test_every_link_resolves(browser: Browser, reports: dict[str, Any], name: str) -> None:
    page = browser.open(reports[name])
    links = page.eval_on_selector_all("a[href]", "anchors => anchors.map(a => a.href)")
    assert len(links) > 10
    opened: dict[str, set[str]] = {reports[name].as_uri(): _ids(page)}
    unresolved = []
    for link in links:
        address, _, fragment = link.partition("#")
        if address not in opened:
            path = Path(url2pathname(urlsplit(address).path))
            if not path.is_file():
                unresolved.append(link)
                continue
            other = browser.open(path)
            opened[address] = _ids(other) if path.suffix == ".html" else set()
            other.close()
        if fragment and fragment not in opened[address]:
            unresolved.append(link)
    assert unresolved == []
    assert len(opened) > 1  # it followed links into other files (exchanges, the target's report)


def _open_every_run(page: Any) -> None:
    page.eval_on_selector_all("details", "folds => folds.forEach(fold => { fold.open = true; })")


def test_the_pictures_render(browser: Browser, reports: dict[str, Any]) -> None:
    page = browser.open(reports["report"])
    _open_every_run(page)
    streamed = sum(bool(step["stream"]) for result in reports["document"]["results"] for step in result["steps"])
    timelines = page.locator("svg.timeline")
    assert streamed == 3 and timelines.count() == streamed
    for index in range(streamed):
        box = timelines.nth(index).bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100
    differences = page.locator("figure[data-scenario=text-misstated] g.row.extra, "
                               "figure[data-scenario=text-misstated] g.row.changed")
    assert differences.count() == 2 and all(differences.nth(i).is_visible() for i in range(2))
    marks = page.locator("figure[data-scenario=text-basic] line.mark")
    assert marks.count() >= 9 and (marks.first.bounding_box() or {}).get("height", 0) > 0
    matrix = browser.open(reports["matrix"])
    chart = matrix.locator("svg.latency-chart")
    box = chart.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 50
    bar = chart.locator("g[data-target=reference] rect.median").bounding_box()
    assert bar is not None and bar["width"] > 0


def test_nothing_is_fetched_from_outside_the_machine(browser: Browser, reports: dict[str, Any]) -> None:
    browser.requests.clear()
    for name in ("report", "matrix"):
        browser.open(reports[name]).wait_for_load_state("networkidle")
    assert reports["report"].as_uri() in browser.requests and reports["matrix"].as_uri() in browser.requests
    assert browser.outside == []


def _top(page: Any, selector: str) -> float:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return box["y"]


def test_a_run_with_failures_opens_with_what_failed(browser: Browser, reports: dict[str, Any]) -> None:
    page = browser.open(reports["six"])
    failures = page.locator("section.unit.failure")
    assert failures.count() == 6
    assert _top(page, "#summary") < _top(page, "#failed") < _top(page, "section.unit.failure") \
        < _top(page, "#parity-matrix") < _top(page, "details.unit") < _top(page, "#coverage")
    assert _top(page, "section.unit.failure") < page.viewport_size["height"]  # on the first screen
    cause = failures.first.locator("p.cause").inner_text()
    assert "This gateway has no web search provider configured" in cause, cause
    folded = failures.first.locator("details.steps")
    assert not folded.evaluate("fold => fold.open") and not folded.locator("ul.findings").first.is_visible()
    replay = page.locator("#unit-hosted-tools-replay-stream")
    assert replay.locator("p.skipped").inner_text() == \
        "Skipped, since they need what a failed step answered: follow_up."
    assert page.locator("details.unit").count() == 134 - 6
    assert page.locator("details.unit[open]").count() == 0  # passing runs collapsed


def test_the_page_of_a_run_with_six_failures_is_a_third_as_tall_as_it_was(browser: Browser,
                                                                          reports: dict[str, Any]) -> None:
    height = browser.open(reports["six"]).evaluate("document.documentElement.scrollHeight")
    assert height <= HEIGHT_BEFORE_PX / 3, height


def _shown(page: Any, selector: str) -> int:
    return page.eval_on_selector_all(selector, "elements => elements.filter(e => e.checkVisibility()).length")


def test_the_filter_shows_runs_by_outcome_tag_and_aspect(browser: Browser, reports: dict[str, Any]) -> None:
    page = browser.open(reports["six"])
    form = page.locator("form#filter")
    assert form.is_visible() and _shown(page, ".unit") == 134
    form.locator("select[name=tag]").select_option("web_search")
    assert _shown(page, "section.unit.failure") == 6 and _shown(page, "details.unit") == 0
    assert _shown(page, "#matrix tbody tr") == 3
    form.locator("select[name=tag]").select_option("")
    form.locator("input[value=pass]").uncheck()
    form.locator("input[value=unsupported]").uncheck()
    assert _shown(page, ".unit") == 6 and form.locator("output").inner_text() == "6 of 134 runs shown"
    form.locator("select[name=aspect]").select_option(label="what reaches the model and the MCP servers")
    upstream = {entry["scenario"] + entry["mode"] for entry in reports["six_document"]["results"]
                if entry["outcome"] == "fail" and any(finding["kind"] == "upstream_request"
                                                      for step in entry["steps"] for finding in step["findings"])}
    assert _shown(page, ".unit") == len(upstream) > 0


def test_the_report_reads_without_script(browser: Browser, reports: dict[str, Any]) -> None:
    page = browser.context.new_page()
    page.context.new_cdp_session(page).send("Emulation.setScriptExecutionDisabled", {"value": True})
    page.goto(reports["six"].as_uri(), wait_until="load")
    assert not page.locator("form#filter").is_visible()  # a filter that cannot work is not shown
    assert _shown(page, ".unit") == 134 and _shown(page, "#matrix tbody tr") > 60
    page.locator("a[href='#unit-text-basic-stream']").click()
    assert page.locator("#unit-text-basic-stream").evaluate("run => run.closest('details').open")  # by the browser


def test_screenshots_of_the_report_and_the_matrix_are_kept(browser: Browser, reports: dict[str, Any]) -> None:
    folder = screenshot_dir()
    folder.mkdir(parents=True, exist_ok=True)
    for name, full_page in (("report", True), ("matrix", True), ("six", False)):
        path = folder / f"{'report-with-failures' if name == 'six' else name}.png"
        browser.open(reports[name]).screenshot(path=str(path), full_page=full_page)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
