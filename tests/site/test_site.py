"""The built book, in a real browser: every page of _toc.yml loads cleanly and offline.

Run with `make test` (which builds the site first) or, after `make book`,
`.venv/bin/python -m pytest tests/site -q`. Each page is loaded once in headless
Chromium; the tests below check what that load saw: console errors, typeset mathematics,
images, widgets, the Colab/Binder launch links and the .ipynb download on notebook
pages, and search. The explorers are tried as a reader would: every control of every
static explorer must change the figure, the figure must fit a 400 px screen, and no dead
ipywidgets control may show.
"""
from __future__ import annotations

import json
import re
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
                    names.append(
                        name.rsplit(".", 1)[0]
                        if name.endswith((".md", ".ipynb"))
                        else name
                    )
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
    ("注意力", "book/glossary"),  # the glossary: either language finds it
    ("自注意力", "book/glossary"),
    ("多头", "book/glossary"),  # words inside Chinese text (book/_ext/search_zh.py)
    ("注意", "book/glossary"),
    ("掩码", "book/glossary"),
    ("perplexity", "book/glossary"),
    ("unfounded", "book/notes"),
    ("Tatoeba", "book/intro"),
    ("bottleneck", "chapters/01_seq2seq/index"),
    ("Nadaraya", "chapters/02_attention/01_queries_keys_values"),
    ("cuDNN", "chapters/03_bahdanau/01_attention_decoder"),
    ("bootstrap", "chapters/03_bahdanau/02_training_and_results"),
    ("onnxruntime", "chapters/05_transformer/06_translate_in_browser"),
]

# What ipywidgets' HTML manager renders for a control (a slider, a list, a text box...).
DEAD_CONTROLS = (
    ".widget-slider, .widget-hslider, .widget-vslider, .widget-dropdown, "
    ".widget-select, .widget-text, .widget-textarea, .widget-checkbox, "
    ".widget-toggle-button, .widget-button, .widget-radio, .widget-play, "
    ".widget-colorpicker, .widget-datepicker"
)

# Run in the page: what the load produced, once scripts have settled.
_INSPECT = f"const DEAD_CONTROLS = {json.dumps(DEAD_CONTROLS)};" + """
const math = Array.from(document.querySelectorAll('.math'));
const untypeset = math.filter(el => !el.querySelector('mjx-container'))
                      .map(el => el.textContent.trim().slice(0, 80));
const errors = Array.from(document.querySelectorAll('mjx-merror, [data-mjx-error]'))
                    .map(el => el.getAttribute('data-mjx-error')
                               || el.textContent.slice(0, 80));
const images = Array.from(document.images).map(img => ({
    src: img.currentSrc || img.src, complete: img.complete, width: img.naturalWidth}));
const links = Array.from(document.querySelectorAll('a[href]')).map(a => a.href);
const views = document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]').length;
const widgets = document.querySelectorAll('.jupyter-widgets').length;
const external = performance.getEntriesByType('resource').map(entry => entry.name)
                            .filter(name => !name.startsWith(location.origin));
const deadControls = Array.from(document.querySelectorAll(DEAD_CONTROLS)).map(
    el => el.className.split(' ').filter(name => name.startsWith('widget-')).join(' '));
// What a reader sees of the article: its text (scripts and styles left out, folded
// code included), its figures, inline icons, tables that scroll, clipped widget labels.
const article = document.querySelector('.bd-article') || document.body;
const copy = article.cloneNode(true);
copy.querySelectorAll('script, style').forEach(el => el.remove());
const text = copy.textContent;
const figures = Array.from(article.querySelectorAll('.cell_output img'))
    .filter(img => !img.hasAttribute('data-state'))  // static explorers: own readouts
    .map(img => {
        const figure = img.closest('figure');
        const caption = figure && figure.querySelector('figcaption');
        return {src: (img.getAttribute('src') || '').slice(0, 60), alt: img.alt,
                caption: caption ? caption.textContent.trim() : ''};
    });
const icons = Array.from(article.querySelectorAll(
    'svg:not(mjx-container svg, figure svg), img:not(figure img)'))
    .map(el => Math.round(el.getBoundingClientRect().height));
const notesLinks = Array.from(article.querySelectorAll('a[href]'))
    .filter(a => new URL(a.href).pathname.endsWith('/book/notes.html')).length;
const scrollingTables = Array.from(
    article.querySelectorAll('.pst-scrollable-table-container, table'))
    .filter(el => el.scrollWidth > el.clientWidth + 1).length;
const clippedLabels = Array.from(document.querySelectorAll('.widget-html-content'))
    .filter(el => el.scrollWidth > el.clientWidth + 1
                  || el.scrollHeight > el.clientHeight + 1)
    .map(el => el.textContent.trim().slice(0, 40));
const codeBlocks = Array.from(document.querySelectorAll('div.cell_input pre')).map(
  pre => ({
    longest: Math.max(...pre.textContent.split('\\n').map(line => line.length)),
    scrolls: pre.scrollWidth > pre.clientWidth,
    start: pre.textContent.slice(0, 60)}));
const width = window.outerWidth;
// One printed output arriving as several boxes: consecutive stream blocks in one cell.
const splitOutputs = Array.from(document.querySelectorAll('div.cell_output'))
    .filter(out => Array.from(out.children).some(
        (el, i, all) => i > 0 && el.matches('.output.stream')
                        && all[i - 1].matches('.output.stream')))
    .map(out => out.textContent.trim().slice(0, 40));
return {math: math.length, untypeset, errors, images, links, views, widgets, external,
        deadControls, text, figures, icons, notesLinks, scrollingTables, clippedLabels,
        codeBlocks, width, splitOutputs,
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
    """Open url, wait for MathJax, images and widgets, and collect what the page
    produced."""
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(url)
    page = PageLoad(url=url)
    _wait(
        lambda: browser.execute_script("return document.readyState") == "complete", 30
    )
    if browser.execute_script("return document.querySelector('.math') !== null"):
        started = _wait(
            lambda: browser.execute_script(
                "return !!(window.MathJax && MathJax.startup &&"
                " MathJax.startup.promise)"
            ),
            20,
        )
        page.mathjax_ready = started and browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "MathJax.startup.promise.then(() => done(true), () => done(false));"
        )
    # Images: make lazy ones load now, then wait for every one to finish (loaded or
    # failed).
    browser.execute_script(
        "document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading ="
        " 'eager')"
    )
    _wait(
        lambda: browser.execute_script(
            "return Array.from(document.images).every(i => i.complete)"
        ),
        15,
    )
    views = browser.execute_script(
        "return document.querySelectorAll("
        "'script[type=\"application/vnd.jupyter.widget-view+json\"]').length"
    )
    if views:
        page.widgets_ready = _wait(
            lambda: browser.execute_script(
                "return document.querySelectorAll('.jupyter-widgets').length"
            )
            >= views,
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
    # noqa: S310 - our own 127.0.0.1 server
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read()


def test_toc_pages_were_built(site):
    missing = [page for page in PAGES if not (site / f"{page}.html").is_file()]
    assert PAGES, "_toc.yml lists no pages"
    assert not missing, (
        f"pages listed in _toc.yml but not in _build/html: {missing}; rebuild with"
        " `make book`"
    )


def test_index_redirects_to_the_landing_page(browser, base_url):
    browser.get(base_url)
    assert _wait(
        lambda: urlsplit(browser.current_url).path.endswith(f"/{PAGES[0]}.html"), 10
    ), (
        f"index.html should lead to {PAGES[0]}.html, the toc's root; it is at"
        f" {browser.current_url}"
    )


@pytest.mark.parametrize("page", PAGES)
def test_no_console_errors(loaded, page):
    result = loaded(page)
    severe = [
        entry["message"] for entry in result.console if entry.get("level") == "SEVERE"
    ]
    assert not severe, f"{page}: console errors:\n" + "\n".join(severe)


@pytest.mark.parametrize("page", PAGES)
def test_no_requests_leave_the_site(loaded, page):
    """Everything a page loads (scripts, styles, fonts, images) comes from the site: it
    works offline."""
    external = loaded(page).info["external"]
    assert not external, f"{page}: loaded from outside the site (a CDN?): {external}"


@pytest.mark.parametrize("page", PAGES)
def test_math_is_typeset(loaded, page):
    result = loaded(page)
    info = result.info
    if info["math"] == 0:
        assert result.mathjax_ready is None
        return
    assert (
        result.mathjax_ready
    ), f"{page}: MathJax did not start (is _static/vendor/mathjax there?)"
    assert info["mathjaxVersion"] and info["mathjaxVersion"].startswith("3."), info[
        "mathjaxVersion"
    ]
    assert not info[
        "untypeset"
    ], f"{page}: mathematics left as TeX: {info['untypeset'][:5]}"
    assert not info[
        "errors"
    ], f"{page}: MathJax could not typeset: {info['errors'][:5]}"


def test_notation_page_has_typeset_math(loaded):
    """Guards the test above against passing vacuously: the notation page is mostly
    formulas."""
    info = loaded("book/notation").info
    assert info["math"] >= 5 and not info["untypeset"], info


@pytest.mark.parametrize("page", PAGES)
def test_images_load(loaded, page):
    images = loaded(page).info["images"]
    broken = [
        img["src"] for img in images if not (img["complete"] and img["width"] > 0)
    ]
    assert not broken, f"{page}: images that did not load: {broken}"


@pytest.mark.parametrize("page", PAGES)
def test_saved_widgets_render(loaded, page):
    result = loaded(page)
    if result.widgets_ready is None:
        assert result.info["views"] == 0
        return
    assert result.widgets_ready, (
        f"{page}: {result.info['views']} saved widget views but only"
        f" {result.info['widgets']} rendered"
    )


def _expected_launch_urls(config: dict, page: str) -> dict[str, str]:
    repo = config["repository"]
    owner_repo = urlsplit(repo["url"]).path.strip("/").removesuffix(".git")
    branch = repo.get("branch", "main")
    prefix = repo.get("path_to_book", "").strip("/")
    path = f"{prefix}/{page}.ipynb" if prefix else f"{page}.ipynb"
    colab = config["launch_buttons"]["colab_url"].rstrip("/")
    binder = config["launch_buttons"]["binderhub_url"].rstrip("/")
    return {
        "colab": f"{colab}/github/{owner_repo}/blob/{branch}/{path}",
        "binder": f"{binder}/v2/gh/{owner_repo}/{branch}",
    }


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_colab_and_binder_launch_links(loaded, book_config, page):
    links = loaded(page).info["links"]
    expected = _expected_launch_urls(book_config, page)
    assert expected["colab"] in links, (
        f"{page}: no Colab link to {expected['colab']}; launch links: "
        f"{[link for link in links if 'colab' in link or 'binder' in link]}"
    )
    assert any(
        link.startswith(expected["binder"]) for link in links
    ), f"{page}: no Binder link"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_ipynb_download_offered(loaded, page):
    links = [
        link
        for link in loaded(page).info["links"]
        if urlsplit(link).path.endswith(".ipynb")
    ]
    local = [link for link in links if link.startswith("http://127.0.0.1")]
    assert local, f"{page}: no .ipynb download link"
    status, body = _http_get(local[0])
    notebook = json.loads(body)
    assert (
        status == 200 and notebook.get("nbformat") == 4 and notebook.get("cells")
    ), local[0]
    assert urlsplit(local[0]).path.endswith(f"/{page}.ipynb"), local[0]


@pytest.mark.parametrize(
    ("word", "page"), SEARCH_CASES, ids=[word for word, _ in SEARCH_CASES]
)
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
        "return Array.from(document.querySelectorAll('#search-results ul.search li"
        " a')).map(a => a.href)"
    )
    paths = [urlsplit(hit).path for hit in hits]
    assert finished, f"search for {word!r} did not finish"
    assert (
        f"/{page}.html" in paths
    ), f"search for {word!r} should list {page}.html; it listed {paths}"


# --- Presentation: what the website shows of a notebook, and pages on a narrow screen
# ---

# The first element wider than the window that no scrolling box holds: what makes a page
# scroll.
_OVERFLOW = """
const width = document.documentElement.clientWidth;
function inScrollBox(el) {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
        if (getComputedStyle(a).overflowX !== 'visible') return true;
    }
    return false;
}
const culprits = [];
for (const el of document.querySelectorAll('body *')) {
    const box = el.getBoundingClientRect();
    if (box.width > 0 && box.right > width + 1 && !inScrollBox(el)) {
        const name = `${el.tagName.toLowerCase()}.${el.className}`;
        const text = (el.textContent || '').trim().slice(0, 60);
        culprits.push(`${name} (right edge ${Math.round(box.right)}px): ${text}`);
    }
}
return {scrollWidth: document.documentElement.scrollWidth,
        innerWidth: window.innerWidth, culprits: culprits.slice(0, 5)};
"""


# Page JavaScript that opens everything folded: details, toggled cells, dropdowns.
OPEN_FOLDED = """
document.querySelectorAll('details').forEach(d => { d.open = true; });
document.querySelectorAll('.toggle-hidden').forEach(
    el => el.classList.remove('toggle-hidden'));
document.querySelectorAll('.dropdown:not(.toggle-shown)').forEach(
    el => el.classList.add('toggle-shown'));
"""


@pytest.mark.parametrize("page", PAGES)
def test_page_does_not_scroll_sideways_400px_wide(narrow_window, base_url, page):
    """Figures scale, and wide tables, equations and code scroll inside their own
    box."""
    load(narrow_window, urljoin(base_url, quote(f"{page}.html")))
    found = narrow_window.execute_script(_OVERFLOW)
    assert found["innerWidth"] == 400, found
    assert found["scrollWidth"] <= found["innerWidth"] + 1, (
        f"{page} is {found['scrollWidth']} px wide in a 400 px window; too wide:\n"
        + "\n".join(found["culprits"])
    )


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_code_cells_show_88_characters_without_scrolling(loaded, page):
    """At 1280 px (a laptop) a code line of up to 88 characters shows whole, not cut.
    (Each code cell's source block: its longest line, and whether it has to scroll.)"""
    info = loaded(page).info
    assert info["width"] == 1280, info["width"]
    blocks = info["codeBlocks"]
    assert blocks, f"{page}: no code cells found (selector div.cell_input pre)"
    cut = [b["start"] for b in blocks if b["scrolls"] and b["longest"] <= 88]
    assert (
        not cut
    ), f"{page}: code blocks cut although no line passes 88 characters: {cut}"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_setup_cell_and_colab_form_titles_stay_off_the_website(site, page):
    """The Colab setup cell (tag remove-cell) and `#@title` lines are for Colab only."""
    html = (site / f"{page}.html").read_text(encoding="utf-8")
    assert "google.colab" not in html, f"{page}: the Colab setup cell is shown"
    assert "#@title" not in html, f"{page}: a Colab form's #@title line is shown"


# Explorers. A notebook explorer is live in Jupyter and Colab (ipywidgets) and hidden on
# the site (`remove-cell`); the site shows its twin drawn in advance by
# attention_lib.static_explorer, whose controls work without a kernel. A rendered
# ipywidgets control on the site is dead: it cannot change anything.
def _explorer_pages() -> list[str]:
    explorer = re.compile(r"^\s*(import|from) ipywidgets|static_explorer\(", re.M)
    pages = []
    for page in NOTEBOOK_PAGES:
        notebook = json.loads((ROOT / f"{page}.ipynb").read_text(encoding="utf-8"))
        code = [c["source"] for c in notebook["cells"] if c["cell_type"] == "code"]
        if any(explorer.search("".join(source)) for source in code):
            pages.append(page)
    return pages


EXPLORER_PAGES = _explorer_pages()

_EXPLORER_STATE = """
const root = document.getElementById(arguments[0]);
const image = root.querySelector('img');
return {state: image.getAttribute('data-state'), src: image.src, alt: image.alt,
        loaded: image.complete && image.naturalWidth > 0,
        readouts: Array.from(root.querySelectorAll('output')).map(o => o.textContent)};
"""


def test_explorer_pages_found():
    """Guards the explorer tests against passing vacuously."""
    page = "chapters/02_attention/04_vectorised_attention"
    assert page in EXPLORER_PAGES, EXPLORER_PAGES


@pytest.mark.parametrize("page", PAGES)
def test_no_dead_widget_controls(loaded, page):
    """Saved widgets render without a kernel, so their controls would do nothing: none
    may show (tag the live explorer's cell `remove-cell`, show a static_explorer)."""
    dead = loaded(page).info["deadControls"]
    assert not dead, f"{page}: ipywidgets controls that need a kernel: {dead}"


def _open(browser, base_url, page):
    browser.get(urljoin(base_url, quote(f"{page}.html")))
    _wait(
        lambda: browser.execute_script("return document.readyState") == "complete", 30
    )


@pytest.mark.parametrize("page", EXPLORER_PAGES)
def test_static_explorer_controls_change_the_figure(browser, base_url, page):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    _open(browser, base_url, page)
    ids = browser.execute_script(
        "return Array.from(document.querySelectorAll('.static-explorer'))"
        ".map(e => e.id)"
    )
    assert ids, f"{page}: an explorer in the notebook, but none that works on the site"
    assert len(set(ids)) == len(ids), f"{page}: explorers share an id: {ids}"
    for explorer_id in ids:
        root = browser.find_element(By.ID, explorer_id)
        controls = root.find_elements(By.CSS_SELECTOR, "[data-control]")
        assert controls, f"{page}: explorer {explorer_id} has no controls"
        for control in controls:
            name = control.get_attribute("id")
            browser.execute_script(
                "arguments[0].scrollIntoView({block: 'center'})", control
            )
            before = browser.execute_script(_EXPLORER_STATE, explorer_id)
            if control.tag_name == "select":  # pick another entry, as a reader does
                first = control.get_attribute("value") == "0"
                Select(control).select_by_index(1 if first else 0)
            else:  # a range: the arrow keys move it one stop, as a reader does
                at_end = control.get_attribute("value") == control.get_attribute("max")
                control.send_keys(Keys.ARROW_LEFT if at_end else Keys.ARROW_RIGHT)

            def state():
                return browser.execute_script(_EXPLORER_STATE, explorer_id)

            _wait(lambda: state()["state"] != before["state"] and state()["loaded"], 5)
            after = state()
            assert after["state"] != before["state"], f"{page}: {name} changed nothing"
            assert after["src"] != before["src"], f"{page}: {name}: the same figure"
            assert after["alt"] != before["alt"], f"{page}: {name}: the same alt text"
            assert after["loaded"], f"{page}: {name}: the new figure did not load"
            if control.tag_name == "input":
                readouts = after["readouts"], before["readouts"]
                assert readouts[0] != readouts[1], f"{page}: {name}: the same readout"


@pytest.mark.parametrize("page", EXPLORER_PAGES)
def test_static_explorers_fit_a_narrow_screen(narrow_window, base_url, page):
    """At 400 px the explorer's figure scales to the column and its controls stay on
    screen."""
    _open(narrow_window, base_url, page)
    overflow = narrow_window.execute_script(
        "const width = document.documentElement.clientWidth;"
        "const parts = '.static-explorer img, .static-explorer [data-control]';"
        "return Array.from(document.querySelectorAll(parts))"
        ".map(el => [el.id, Math.round(el.getBoundingClientRect().right), width])"
        ".filter(([id, right, w]) => right > w + 1);"
    )
    count = narrow_window.execute_script(
        "return document.querySelectorAll('.static-explorer').length"
    )
    assert count, f"{page}: no explorer"
    assert not overflow, f"{page}: off screen at 400 px (id, right, width): {overflow}"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_exercise_feedback_uses_marks_that_ordinary_fonts_draw(site, page):
    """✓/✗, not the emoji ✅/❌ (empty boxes in a browser without an emoji font), and a
    neutral "Your turn" note, not a red "Not implemented yet" box, before an answer."""
    html = (site / f"{page}.html").read_text(encoding="utf-8")
    for emoji in ("\u2705", "\u274c"):
        assert emoji not in html, f"{page}: emoji {emoji} in the page; re-execute it"
    assert "Not implemented yet" not in html, f"{page}: old placeholder; re-execute it"


# --- What a reader meets: no test machinery, captioned figures, the notes introduced
# ---

# Words of the machinery that checks the pages, and MyST roles left unrendered.
PLUMBING = ["nbval", "noqa", "glue(", "{cite", "{doc}", "{ref}", "{numref}", "{glue",
            "do not edit", "pytest"]


@pytest.mark.parametrize("page", PAGES)
def test_no_test_plumbing_in_the_rendered_text(loaded, page):
    text = loaded(page).info["text"].lower()
    found = [word for word in PLUMBING if word in text]
    assert not found, f"{page}: the reader sees {found}"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_every_figure_has_a_caption_and_words_for_alt_text(loaded, page):
    figures = loaded(page).info["figures"]
    bare = [f["src"] for f in figures if not f["caption"]]
    assert not bare, f"{page}: figures without a caption: {bare}"
    pathlike = re.compile(r"(\.(png|svg|jpe?g)$)|/|^\s*$")
    alts = [f["alt"] for f in figures if pathlike.search(f["alt"])]
    assert not alts, f"{page}: alt text that is not words: {alts}"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_a_printed_output_is_one_box(loaded, page):
    """A cell that prints a table row by row shows one block, not one box per row."""
    split = loaded(page).info["splitOutputs"]
    assert not split, f"{page}: outputs split into several boxes: {split}"


def test_figures_are_found():
    """Guards the caption test against passing vacuously: 5.2 draws figures."""
    notebook = json.loads(
        (ROOT / "chapters/05_transformer/02_training.ipynb").read_text(encoding="utf-8")
    )
    images = [o for c in notebook["cells"] for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) >= 3


@pytest.mark.parametrize("page", PAGES)
def test_a_page_that_mentions_the_notes_links_to_them(loaded, page):
    info = loaded(page).info
    mentions = re.search(r"\bthe( course)? notes\b", info["text"], re.I)
    if page == "book/notes" or not mentions:
        return
    assert info["notesLinks"], f"{page} mentions the notes without linking to them"


def test_front_page_icons_are_icon_sized(loaded):
    icons = loaded(PAGES[0]).info["icons"]
    assert all(height <= 48 for height in icons), f"icons {icons} px tall"


@pytest.mark.parametrize("page", ["book/checks", "book/glossary", "book/notes"])
def test_reference_tables_fit_a_laptop_screen(loaded, page):
    scrolling = loaded(page).info["scrollingTables"]
    assert scrolling == 0, f"{page}: {scrolling} tables scroll at 1280 px"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_progress_bar_labels_are_not_clipped(loaded, page):
    clipped = loaded(page).info["clippedLabels"]
    assert not clipped, f"{page}: widget labels cut off: {clipped}"


def test_search_snippets_show_mathematics_as_text(browser, base_url):
    browser.get(urljoin(base_url, "search.html?q=softmax"))
    assert _wait(lambda: browser.execute_script(
        "return document.querySelectorAll('#search-results p.context').length > 3"), 30)
    time.sleep(1)  # the remaining snippets
    snippets = browser.execute_script(
        "return Array.from(document.querySelectorAll('#search-results p.context'))"
        ".map(p => p.textContent)")
    assert not [s for s in snippets if "\\(" in s or "\\times" in s], snippets
    assert browser.execute_script(
        "return bookDetex('size \\\\(D_s \\\\times V\\\\) here')") == "size Ds × V here"
