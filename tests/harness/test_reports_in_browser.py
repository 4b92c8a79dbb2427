"""The HTML reports as a person sees them: report.html and matrix.html of real runs against the
reference gateway, opened in headless Chromium (Playwright driving the machine's own Chromium,
never a downloaded one). Every link resolves, every picture renders, nothing is fetched from
outside the machine, and screenshots of both pages are kept for CI (PARITY_SCREENSHOT_DIR, by
default reports/latest/screenshots/)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

import pytest
from click.testing import CliRunner
from report_pages import misstated_scenarios

from responses_parity.harness.cli import main
from responses_parity.harness.scenario.loader import builtin_scenarios_dir

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the `test` extra has it)")
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (Debian: apt-get install chromium)")

REPOSITORY = Path(__file__).resolve().parents[2]
SELECTION = ("-s", "text-misstated", "-s", "mcp-call", "-s", "text-basic", "-s", "error-missing-model")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")


def screenshot_dir() -> Path:
    return Path(os.environ.get("PARITY_SCREENSHOT_DIR") or REPOSITORY / "reports" / "latest" / "screenshots")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run's report.html and a one-target matrix.html, written by the CLI into a tmp folder."""
    root = tmp_path_factory.mktemp("browser")
    paths = [str(builtin_scenarios_dir()), str(misstated_scenarios(root / "scenarios"))]
    run = CliRunner().invoke(main, ["run", *paths, *SELECTION, "--report-dir", str(root / "run")],
                             catch_exceptions=False)
    assert run.exit_code == 1, run.output  # text-misstated fails on purpose: the pages show divergences
    matrix = CliRunner().invoke(main, ["matrix", *paths, "--targets", "reference", *SELECTION, "--output",
                                       str(root / "matrix.md"), "--report-dir", str(root / "matrix")],
                                catch_exceptions=False)
    assert matrix.exit_code == 0, matrix.output
    return {"report": root / "run" / "report.html", "matrix": root / "matrix.html",
            "document": json.loads((root / "run" / "results.json").read_text())}


class Browser:
    """One Chromium with a fresh profile; every request it makes is recorded, and any to an
    address other than a file or loopback is refused and kept in `outside`."""

    def __init__(self, context: Any) -> None:
        self.context = context
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
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True, args=ARGS,
            viewport={"width": 1280, "height": 900})
        context.set_default_timeout(60_000)  # a deadline for each wait, generous for a loaded machine
        try:
            yield Browser(context)
        finally:
            context.close()


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


def test_the_pictures_render(browser: Browser, reports: dict[str, Any]) -> None:
    page = browser.open(reports["report"])
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


def test_screenshots_of_the_report_and_the_matrix_are_kept(browser: Browser, reports: dict[str, Any]) -> None:
    folder = screenshot_dir()
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("report", "matrix"):
        path = folder / f"{name}.png"
        browser.open(reports[name]).screenshot(path=str(path), full_page=True)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
