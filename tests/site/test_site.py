"""The built book, in a real browser: every page of _toc.yml loads cleanly and offline.

Run with `make test` (which builds the site first) or, after `make book`,
`.venv/bin/python -m pytest tests/site -q`. Each page is loaded once in headless Chromium; the
tests below check what that load saw: console errors, typeset mathematics, images, widgets,
the Colab/Binder launch links and the .ipynb download on notebook pages, and search.
"""
from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urljoin, urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def toc_docnames() -> list[str]:
    """Every page of _toc.yml in reading order, as a docname such as 'book/notation'."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    names: list[str] = []

    def walk(node):
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for key in ("root", "file"):
                if isinstance(node.get(key), str):
                    name = node[key]
                    names.append(name.rsplit(".", 1)[0] if name.endswith((".md", ".ipynb")) else name)
            for value in node.values():
                if isinstance(value, (list, dict)):
                    walk(value)

    walk(toc)
    return list(dict.fromkeys(names))


def is_notebook(docname: str) -> bool:
    return (ROOT / f"{docname}.ipynb").is_file()


pytestmark = pytest.mark.site

PAGES = toc_docnames()
NOTEBOOK_PAGES = [page for page in PAGES if is_notebook(page)]

# (word typed into the search box, docname of a page the results must list).
# Extend as chapters arrive: pick a word the page's text uses and few other pages do.
SEARCH_CASES = [
    ("broadcastable", "book/notation"),
    ("Tatoeba", "book/intro"),
    ("bottleneck", "chapters/01_seq2seq/index"),
    ("Nadaraya", "chapters/02_attention/01_queries_keys_values"),
    ("cuDNN", "chapters/03_bahdanau/01_attention_decoder"),
    ("bootstrap", "chapters/03_bahdanau/02_training_and_results"),
]

# Run in the page: what the load produced, once scripts have settled.
_INSPECT = """
const math = Array.from(document.querySelectorAll('.math'));
const untypeset = math.filter(el => !el.querySelector('mjx-container'))
                      .map(el => el.textContent.trim().slice(0, 80));
const errors = Array.from(document.querySelectorAll('mjx-merror, [data-mjx-error]'))
                    .map(el => el.getAttribute('data-mjx-error') || el.textContent.slice(0, 80));
const images = Array.from(document.images).map(img => ({
    src: img.currentSrc || img.src, complete: img.complete, width: img.naturalWidth}));
const links = Array.from(document.querySelectorAll('a[href]')).map(a => a.href);
const views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length;
const widgets = document.querySelectorAll('.jupyter-widgets').length;
const external = performance.getEntriesByType('resource').map(entry => entry.name)
                            .filter(name => !name.startsWith(location.origin));
return {math: math.length, untypeset, errors, images, links, views, widgets, external,
        title: document.title, mathjax: !!(window.MathJax && window.MathJax.version),
        mathjaxVersion: window.MathJax && window.MathJax.version || null};
"""


@dataclass
class PageLoad:
    url: str
    console: list[dict] = field(default_factory=list)
    mathjax_ready: bool | None = None  # None: the page has no mathematics
    widgets_ready: bool | None = None  # None: the page has no widgets
    info: dict = field(default_factory=dict)


def _wait(predicate, timeout: float, interval: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(interval)
    return False


def load(browser, url: str) -> PageLoad:
    """Open url, wait for MathJax, images and widgets, and collect what the page produced."""
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(url)
    page = PageLoad(url=url)
    _wait(lambda: browser.execute_script("return document.readyState") == "complete", 30)
    if browser.execute_script("return document.querySelector('.math') !== null"):
        started = _wait(
            lambda: browser.execute_script(
                "return !!(window.MathJax && MathJax.startup && MathJax.startup.promise)"
            ),
            20,
        )
        page.mathjax_ready = started and browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "MathJax.startup.promise.then(() => done(true), () => done(false));"
        )
    # Images: make lazy ones load now, then wait for every one to finish (loaded or failed).
    browser.execute_script("document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')")
    _wait(lambda: browser.execute_script("return Array.from(document.images).every(i => i.complete)"), 15)
    views = browser.execute_script(
        "return document.querySelectorAll('script[type=\"application/vnd.jupyter.widget-view+json\"]').length"
    )
    if views:
        page.widgets_ready = _wait(
            lambda: browser.execute_script("return document.querySelectorAll('.jupyter-widgets').length") >= views,
            20,
        )
    time.sleep(0.2)  # let late console messages arrive
    page.info = browser.execute_script(_INSPECT)
    page.console = browser.get_log("browser")
    return page


@pytest.fixture(scope="session")
def loaded(browser, base_url):
    """Each page is loaded once per session, whichever tests ask for it."""
    cache: dict[str, PageLoad] = {}

    def get(docname: str) -> PageLoad:
        if docname not in cache:
            cache[docname] = load(browser, urljoin(base_url, quote(f"{docname}.html")))
        return cache[docname]

    return get


def _http_get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - our own 127.0.0.1 server
        return response.status, response.read()


def test_toc_pages_were_built(site):
    missing = [page for page in PAGES if not (site / f"{page}.html").is_file()]
    assert PAGES, "_toc.yml lists no pages"
    assert not missing, f"pages listed in _toc.yml but not in _build/html: {missing}; rebuild with `make book`"


def test_index_redirects_to_the_landing_page(browser, base_url):
    browser.get(base_url)
    assert _wait(lambda: urlsplit(browser.current_url).path.endswith(f"/{PAGES[0]}.html"), 10), (
        f"index.html should lead to {PAGES[0]}.html, the toc's root; it is at {browser.current_url}"
    )


@pytest.mark.parametrize("page", PAGES)
def test_no_console_errors(loaded, page):
    result = loaded(page)
    severe = [entry["message"] for entry in result.console if entry.get("level") == "SEVERE"]
    assert not severe, f"{page}: console errors:\n" + "\n".join(severe)


@pytest.mark.parametrize("page", PAGES)
def test_no_requests_leave_the_site(loaded, page):
    """Everything a page loads (scripts, styles, fonts, images) comes from the site: it works offline."""
    external = loaded(page).info["external"]
    assert not external, f"{page}: loaded from outside the site (a CDN?): {external}"


@pytest.mark.parametrize("page", PAGES)
def test_math_is_typeset(loaded, page):
    result = loaded(page)
    info = result.info
    if info["math"] == 0:
        assert result.mathjax_ready is None
        return
    assert result.mathjax_ready, f"{page}: MathJax did not start (is _static/vendor/mathjax there?)"
    assert info["mathjaxVersion"] and info["mathjaxVersion"].startswith("3."), info["mathjaxVersion"]
    assert not info["untypeset"], f"{page}: mathematics left as TeX: {info['untypeset'][:5]}"
    assert not info["errors"], f"{page}: MathJax could not typeset: {info['errors'][:5]}"


def test_notation_page_has_typeset_math(loaded):
    """Guards the test above against passing vacuously: the notation page is mostly formulas."""
    info = loaded("book/notation").info
    assert info["math"] >= 5 and not info["untypeset"], info


@pytest.mark.parametrize("page", PAGES)
def test_images_load(loaded, page):
    images = loaded(page).info["images"]
    broken = [img["src"] for img in images if not (img["complete"] and img["width"] > 0)]
    assert not broken, f"{page}: images that did not load: {broken}"


@pytest.mark.parametrize("page", PAGES)
def test_saved_widgets_render(loaded, page):
    result = loaded(page)
    if result.widgets_ready is None:
        assert result.info["views"] == 0
        return
    assert result.widgets_ready, (
        f"{page}: {result.info['views']} saved widget views but only {result.info['widgets']} rendered"
    )


def _expected_launch_urls(config: dict, page: str) -> dict[str, str]:
    repo = config["repository"]
    owner_repo = urlsplit(repo["url"]).path.strip("/").removesuffix(".git")
    branch = repo.get("branch", "main")
    prefix = repo.get("path_to_book", "").strip("/")
    path = f"{prefix}/{page}.ipynb" if prefix else f"{page}.ipynb"
    colab = config["launch_buttons"]["colab_url"].rstrip("/")
    return {
        "colab": f"{colab}/github/{owner_repo}/blob/{branch}/{path}",
        "binder": f"{config['launch_buttons']['binderhub_url'].rstrip('/')}/v2/gh/{owner_repo}/{branch}",
    }


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_colab_and_binder_launch_links(loaded, book_config, page):
    links = loaded(page).info["links"]
    expected = _expected_launch_urls(book_config, page)
    assert expected["colab"] in links, (
        f"{page}: no Colab link to {expected['colab']}; launch links: "
        f"{[link for link in links if 'colab' in link or 'binder' in link]}"
    )
    assert any(link.startswith(expected["binder"]) for link in links), f"{page}: no Binder link"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_ipynb_download_offered(loaded, page):
    links = [link for link in loaded(page).info["links"] if urlsplit(link).path.endswith(".ipynb")]
    local = [link for link in links if link.startswith("http://127.0.0.1")]
    assert local, f"{page}: no .ipynb download link"
    status, body = _http_get(local[0])
    notebook = json.loads(body)
    assert status == 200 and notebook.get("nbformat") == 4 and notebook.get("cells"), local[0]
    assert urlsplit(local[0]).path.endswith(f"/{page}.ipynb"), local[0]


@pytest.mark.parametrize(("word", "page"), SEARCH_CASES, ids=[word for word, _ in SEARCH_CASES])
def test_search_finds_page(browser, base_url, word, page):
    if page not in PAGES:
        pytest.fail(f"search case ({word!r}, {page!r}): {page} is not in _toc.yml")
    browser.get(urljoin(base_url, f"search.html?q={quote(word)}"))
    finished = _wait(
        lambda: "match" in browser.execute_script(
            "const s = document.querySelector('#search-results .search-summary');"
            "return s ? s.textContent : ''"
        ),
        20,
    )
    hits = browser.execute_script(
        "return Array.from(document.querySelectorAll('#search-results ul.search li a')).map(a => a.href)"
    )
    paths = [urlsplit(hit).path for hit in hits]
    assert finished, f"search for {word!r} did not finish"
    assert f"/{page}.html" in paths, f"search for {word!r} should list {page}.html; it listed {paths}"
