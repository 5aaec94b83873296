"""The built site, looked at in a real browser (issue 24 §3): headless Chromium (Debian's
`chromium` and `chromium-driver`, driven by Selenium) opens every page of `mkdocs build
--strict`'s site served on 127.0.0.1, and checks that each renders its article, that every
internal link on it leads to a page the server has (and to an anchor that page holds), that the
search finds "yield", and that a Mermaid diagram renders as SVG with no network. Screenshots of
three pages go to build/screenshots/ (SMLLM_SCREENSHOTS to choose another folder)."""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlparse

import pytest
from conftest import require_tool

ROOT = Path(__file__).resolve().parent.parent.parent
SHOTS = ("index.html", "stops/index.html", "clients/claude-code/index.html")
INSTALL = "apt-get install chromium chromium-driver (scripts/test installs them)"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """The site built strict into a temp folder, served on 127.0.0.1: (folder, base URL)."""
    folder = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = require_tool("chromium", INSTALL)
    driver_path = require_tool("chromedriver", INSTALL)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument("--window-size=1280,900")
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _pages(folder: Path) -> list[str]:
    """Every page of the site, as its path below the site's root ("" for the home page)."""
    pages = []
    for index in sorted(folder.rglob("index.html")):
        rel = index.relative_to(folder).parent.as_posix()
        if rel.startswith(("assets", "search")):
            continue
        pages.append("" if rel == "." else rel + "/")
    return pages


def _wait(what: Callable[[], Any], seconds: float = 20) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        found = what()
        if found:
            return found
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)


@functools.cache
def _served(url: str) -> tuple[int, frozenset[str]]:
    """The status of URL on the test server and the element ids of what it answered."""
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            parser = _Ids()
            if answer.headers.get_content_type() == "text/html":
                parser.feed(answer.read().decode("utf-8"))
            return answer.status, frozenset(parser.ids)
    except urllib.error.HTTPError as exc:
        return exc.code, frozenset()


def test_every_page_renders_and_its_links_resolve(site: tuple[Path, str], browser: Any) -> None:
    folder, base = site
    pages = _pages(folder)
    assert len(pages) >= 30 and "stops/" in pages and "reference/cli/" in pages
    broken = []
    for page in pages:
        browser.get(base + page)
        heading = browser.execute_script(
            "const h = document.querySelector('article.md-content__inner h1');"
            "return h ? h.textContent : null"
        )
        assert heading, f"{page}: no article heading"
        text = browser.execute_script("return document.querySelector('article').innerText")
        assert len(text) > 200, f"{page}: the article is nearly empty"
        links = browser.execute_script(
            "return [...document.querySelectorAll('a[href]')].map(a => a.href)"
        )
        for link in links:
            if urlparse(link).netloc != urlparse(base).netloc:
                continue  # another site (the theme's links, a repository): not ours to check
            target, anchor = urldefrag(link)
            status, ids = _served(target)
            if status != 200 or (anchor and anchor not in ids):
                broken.append(f"{page} → {link} ({status})")
    assert broken == []


def test_search_finds_yield(site: tuple[Path, str], browser: Any) -> None:
    _, base = site
    browser.get(base)
    browser.execute_script(
        "document.querySelector('label.md-header__button[for=__search]').click()"
    )
    box = _wait(lambda: browser.find_element("css selector", "input.md-search__input"))
    box.send_keys("yield")
    results = _wait(
        lambda: browser.execute_script(
            "return [...document.querySelectorAll('.md-search-result__item a')]"
            ".map(a => a.getAttribute('href'))"
        )
    )
    assert any("stops/" in href for href in results), results


def _svg_labels(browser: Any) -> list[str] | None:
    """The texts of the SVG inside the page's first `.mermaid` element, read through the
    DevTools protocol: Material draws a diagram in a closed shadow root, which page scripts
    can't open; None while there is none."""
    doc = browser.execute_cdp_cmd("DOM.getDocument", {"depth": -1, "pierce": True})

    def svgs(node: dict[str, Any], inside: bool) -> Iterator[dict[str, Any]]:
        attrs = node.get("attributes", [])
        classes = dict(zip(attrs[::2], attrs[1::2], strict=True)).get("class", "").split()
        inside = inside or (node.get("nodeName") == "DIV" and "mermaid" in classes)
        if inside and node.get("nodeName", "").lower() == "svg":
            yield node
        for child in [*node.get("children", []), *node.get("shadowRoots", [])]:
            yield from svgs(child, inside)

    def texts(node: dict[str, Any]) -> Iterator[str]:
        if node.get("nodeType") == 3 and node.get("nodeValue", "").strip():
            yield node["nodeValue"].strip()
        if node.get("nodeName", "").lower() == "style":
            return
        for child in [*node.get("children", []), *node.get("shadowRoots", [])]:
            yield from texts(child)

    found = next(svgs(doc["root"], False), None)
    return list(texts(found)) if found is not None else None


def test_a_mermaid_diagram_renders_as_svg(site: tuple[Path, str], browser: Any) -> None:
    """The home page's state diagram (`smllm graph dev --mermaid`) drawn by the Mermaid the
    site ships (scripts/docs_hooks.py), not fetched: the test machine has no network."""
    folder, base = site
    assert (folder / "javascripts" / "mermaid.min.js").is_file(), (
        "tests/mermaid's npm packages are missing: npm ci there (scripts/test does)"
    )
    browser.get(base)
    labels = _wait(lambda: _svg_labels(browser))
    assert {"PLAN [entry point]", "WORK", "DONE", "done"} <= set(labels), labels


def test_screenshots(site: tuple[Path, str], browser: Any) -> None:
    folder, base = site
    shots = Path(os.environ.get("SMLLM_SCREENSHOTS") or ROOT / "build" / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    for page in SHOTS:
        assert (folder / page).is_file(), page
        browser.get(urljoin(base, page))
        _wait(lambda: browser.execute_script("return document.readyState") == "complete")
        name = page.replace("/index.html", "").replace("/", "-").replace(".html", "")
        path = shots / f"{name}.png"
        assert browser.save_screenshot(str(path)), path
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
