"""Fixtures for the site tests: the built book served on 127.0.0.1, and headless
Chromium.

The tests read the site that `make book` built in _build/html (`make test` builds it
first). They need Debian's chromium and chromium-driver (`apt-get install chromium
chromium-driver`; .ci/run installs them). Other browsers can be named with
SITE_TEST_CHROMIUM and SITE_TEST_CHROMEDRIVER.
"""
from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
# Another build can be tested by naming its html folder (SITE_TEST_HTML).
SITE = Path(os.environ.get("SITE_TEST_HTML", ROOT / "_build" / "html"))
CHROMIUM = Path(os.environ.get("SITE_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("SITE_TEST_CHROMEDRIVER", "/usr/bin/chromedriver"))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    # ES modules (onnxruntime-web's .mjs) must be served as JavaScript, whatever the
    # system's MIME table says; GitHub Pages does the same.
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".mjs": "text/javascript",
        ".wasm": "application/wasm",
    }

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="session")
def site() -> Path:
    if not (SITE / "index.html").is_file():
        pytest.fail(
            f"No built site: {SITE / 'index.html'} is missing. Run `make book` first"
            " (`make test` does)."
        )
    return SITE


@pytest.fixture(scope="session")
def base_url(site):
    """The built site, served by http.server on a free port of 127.0.0.1."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """Headless Chromium driven by selenium, with the browser console log enabled."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.is_file()]
    if missing:
        pytest.fail(
            "The site tests need Chromium and its driver; missing:"
            f" {', '.join(missing)}. Install them with `sudo apt-get install chromium"
            " chromium-driver` (or set SITE_TEST_CHROMIUM / SITE_TEST_CHROMEDRIVER)."
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--no-first-run",
        "--disable-quic",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(
        options=options, service=Service(executable_path=str(CHROMEDRIVER))
    )
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def book_config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


@pytest.fixture
def narrow_window(browser):
    """The browser 400 px wide (a phone) for one test, then back to its usual size."""
    size = browser.get_window_size()
    browser.set_window_size(400, 900)
    yield browser
    browser.set_window_size(size["width"], size["height"])
