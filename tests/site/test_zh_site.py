"""The Chinese book under zh/ (tools/translations.py, make book), read in the browser.

Every page of the English table of contents has a Chinese page, and every page of either
book switches to the same page in the other. The translated pages (the scope in
i18n/zh/settings.yml) show no untranslated text, draw every character with a real glyph
(no empty boxes: tofu), do not scroll sideways at 400 px, typeset their maths and log no
errors; their Colab and download buttons lead to the Chinese notebook; search finds
words inside Chinese text. A page not yet translated says so and links to the English
page.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from urllib.parse import quote, urljoin, urlsplit

import pytest
import yaml
from selenium.webdriver.support.ui import WebDriverWait
from test_site import (
    _OVERFLOW,
    OPEN_FOLDED,
    PAGES,
    _expected_launch_urls,
    is_notebook,
    load,
)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from translations import Book  # noqa: E402

pytestmark = pytest.mark.site

ZH = Book("zh")
TRANSLATED = [re.sub(r"\.(ipynb|md)$", "", page) for page in ZH.scope()]
UNTRANSLATED = [page for page in PAGES if page not in TRANSLATED]
ZH_NOTEBOOKS = [page for page in TRANSLATED if is_notebook(page)]
ZH_SEARCH = [
    ("自注意力", "chapters/04_self_attention/01_self_attention"),
    ("多头", "chapters/04_self_attention/02_multihead_attention"),
    ("注意", "chapters/02_attention/01_queries_keys_values"),
    ("掩码", "chapters/02_attention/02_masked_softmax"),
    ("瓶颈", "chapters/01_seq2seq/index"),
]

# The article's prose blocks whose own words are English only: five words or more of
# Latin letters and not one Chinese character, once code, maths, outputs, citations and
# proper names in links are left out. (The checks page translates its introduction
# only.)
_UNTRANSLATED = """
const skip = 'pre, code, .math, mjx-container, .cell_output, .cell_input, .citation,'
           + ' .bibliography, .language-switch, .headerlink, .footnote';
const blocks = document.querySelectorAll(
    '.bd-article p, .bd-article li, .bd-article h1, .bd-article h2, .bd-article h3,'
    + ' .bd-article figcaption, .bd-article dt, .bd-article dd, .bd-article th,'
    + ' .bd-article td, .bd-article .admonition-title, .bd-article summary');
const found = [];
for (const block of blocks) {
    if (block.closest(skip)) continue;
    if (arguments[0] && block.closest('table')) continue;  // generated tables
    const copy = block.cloneNode(true);
    copy.querySelectorAll(skip + ', p, li, table').forEach(el => el.remove());
    const text = copy.textContent.replace(/\\s+/g, ' ').trim();
    const words = text.match(/[A-Za-z]{2,}/g) || [];
    if (words.length >= 5 && !/[\\u4e00-\\u9fff]/.test(text)) {
        found.push(text.slice(0, 100));
    }
}
return found;
"""

# Characters drawn with no glyph: each Chinese character (and full-width punctuation) of
# the article is drawn on a canvas in the font of the element it is in, and compared
# with
# the drawing of a code point no font has (U+0378, unassigned): the same pixels are an
# empty box. Returns the characters so drawn, and whether the reference is a box at all.
_TOFU = """
const missing = String.fromCodePoint(0x0378);
const canvas = document.createElement('canvas');
canvas.width = canvas.height = 40;
const ctx = canvas.getContext('2d', {willReadFrequently: true});
function draw(ch, font) {
    ctx.clearRect(0, 0, 40, 40);
    ctx.font = '28px ' + font;
    ctx.fillText(ch, 4, 32);
    return ctx.getImageData(0, 0, 40, 40).data.join(',');
}
const extra = arguments[0] || '';
const fonts = new Map();  // font -> set of characters
const walker = document.createTreeWalker(
    document.querySelector('.bd-article') || document.body, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const chars = node.textContent.match(
        /[\\u3000-\\u303f\\u4e00-\\u9fff\\uff00-\\uffef]/g);
    if (!chars || !node.parentElement) continue;
    const font = getComputedStyle(node.parentElement).fontFamily;
    if (!fonts.has(font)) fonts.set(font, new Set());
    chars.forEach(c => fonts.get(font).add(c));
}
const body = getComputedStyle(document.body).fontFamily;
if (extra) {
    if (!fonts.has(body)) fonts.set(body, new Set());
    Array.from(extra).forEach(c => fonts.get(body).add(c));
}
const tofu = [];
let checked = 0, boxDrawn = true;
for (const [font, chars] of fonts) {
    const box = draw(missing, font);
    boxDrawn = boxDrawn && box !== draw(' ', font);
    for (const c of chars) {
        checked += 1;
        if (draw(c, font) === box) tofu.push(c);
    }
}
return {tofu: tofu.slice(0, 40), checked, boxDrawn};
"""


def zh_url(base_url: str, page: str) -> str:
    return urljoin(base_url, "zh/" + quote(f"{page}.html"))


@pytest.fixture(scope="module")
def zh_loaded(browser, base_url):
    cache = {}

    def get(page):
        if page not in cache:
            cache[page] = load(browser, zh_url(base_url, page))
        return cache[page]

    return get


def test_every_page_has_a_chinese_page(site):
    missing = [page for page in PAGES if not (site / "zh" / f"{page}.html").is_file()]
    assert not missing, f"no Chinese page under zh/ for {missing} (make book builds it)"
    assert TRANSLATED and UNTRANSLATED


def _switch(site: Path, path: Path) -> Path:
    html = path.read_text(encoding="utf-8")
    link = re.search(r'<p class="language-switch"><a href="([^"]+)"', html)
    assert link, f"{path.relative_to(site)}: no language switch"
    return (path.parent / link[1]).resolve()


@pytest.mark.parametrize("page", PAGES)
def test_language_switch_leads_to_the_same_page_and_back(site, page):
    english = (site / f"{page}.html").resolve()
    chinese = _switch(site, english)
    assert chinese == (site / "zh" / f"{page}.html").resolve(), (
        f"{page}: the switch leads to {chinese}"
    )
    assert chinese.is_file(), f"{page}: the switch leads to a missing {chinese}"
    assert _switch(site, chinese) == english, (
        f"zh/{page}: the switch does not lead back"
    )


@pytest.mark.parametrize("page", UNTRANSLATED)
def test_untranslated_page_says_so_and_links_to_the_english_one(site, page):
    html = (site / "zh" / f"{page}.html").read_text(encoding="utf-8")
    assert "本页尚未翻译" in html, f"zh/{page}: does not say it is not translated yet"
    link = re.search(r'href="([^"]+)">英文原文</a>', html)
    assert link, f"zh/{page}: no link to the English page"
    target = ((site / "zh" / page).parent / link[1]).resolve()
    assert target == (site / f"{page}.html").resolve() and target.is_file(), target


@pytest.mark.parametrize("page", TRANSLATED)
def test_chinese_page_loads_cleanly(zh_loaded, page):
    loaded = zh_loaded(page)
    severe = [
        entry["message"] for entry in loaded.console if entry["level"] == "SEVERE"
    ]
    assert not severe, f"zh/{page}: console errors {severe}"
    info = loaded.info
    assert not info["untypeset"] and not info["errors"], (
        f"zh/{page}: maths not typeset {info['untypeset'][:3]} {info['errors'][:3]}"
    )
    broken = [
        img["src"] for img in info["images"] if not img["complete"] or not img["width"]
    ]
    assert not broken, f"zh/{page}: images that did not load {broken}"
    assert not info["external"], (
        f"zh/{page}: requests leave the site {info['external']}"
    )


@pytest.mark.parametrize("page", TRANSLATED)
def test_chinese_page_has_no_untranslated_text(browser, zh_loaded, page):
    zh_loaded(page)
    browser.execute_script(OPEN_FOLDED)
    assert browser.execute_script("return document.documentElement.lang") == "zh-CN"
    english = browser.execute_script(_UNTRANSLATED, page == "book/checks")
    assert not english, f"zh/{page}: text left in English:\n" + "\n".join(english)


def test_untranslated_text_is_found(browser, zh_loaded):
    """The check above reports an English paragraph put into a Chinese page."""
    zh_loaded("chapters/01_seq2seq/01_data")
    browser.execute_script(
        "const p = document.createElement('p');"
        "p.textContent = 'This paragraph was never translated into Chinese.';"
        "document.querySelector('.bd-article').appendChild(p);"
    )
    assert browser.execute_script(_UNTRANSLATED, False)


@pytest.mark.parametrize("page", TRANSLATED)
def test_chinese_page_draws_every_character(browser, zh_loaded, page):
    zh_loaded(page)
    found = browser.execute_script(_TOFU, "")
    assert found["boxDrawn"], "the missing-glyph reference draws nothing: check is void"
    assert found["checked"] > 20, f"zh/{page}: hardly any Chinese characters found"
    assert not found["tofu"], f"zh/{page}: drawn as empty boxes: {found['tofu']}"


def test_tofu_is_found(browser, zh_loaded):
    """A character no installed font has (Tangut, U+17000) is reported; 注 is not."""
    zh_loaded("book/intro")
    found = browser.execute_script(_TOFU, "注" + chr(0x17000))
    assert found["boxDrawn"]
    assert chr(0x17000) in found["tofu"] and "注" not in found["tofu"], found["tofu"]


@pytest.mark.parametrize("page", TRANSLATED)
def test_chinese_page_does_not_scroll_sideways_400px_wide(
    narrow_window, base_url, page
):
    load(narrow_window, zh_url(base_url, page))
    found = narrow_window.execute_script(_OVERFLOW)
    assert found["scrollWidth"] <= found["innerWidth"] + 1, (
        f"zh/{page} is {found['scrollWidth']} px wide in a 400 px window; too wide:\n"
        + "\n".join(found["culprits"])
    )


@pytest.mark.parametrize("page", ZH_NOTEBOOKS)
def test_launch_and_download_open_the_chinese_notebook(site, zh_loaded, page):
    config = yaml.safe_load((ROOT / "zh" / "_config.yml").read_text(encoding="utf-8"))
    colab = _expected_launch_urls(config, page)["colab"]  # path_to_book: zh
    links = zh_loaded(page).info["links"]
    assert colab in links, f"zh/{page}: no Colab link to {colab}"
    downloads = [
        link
        for link in links
        if link.startswith("http://127.0.0.1") and link.endswith(".ipynb")
    ]
    assert downloads, f"zh/{page}: no .ipynb download"
    path = urlsplit(downloads[0]).path.lstrip("/")
    notebook = json.loads((site / path).read_text(encoding="utf-8"))
    text = "".join(
        "".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown"
    )
    assert re.search(r"[\u4e00-\u9fff]{20}", text), f"{path}: not the Chinese notebook"
    assert notebook == json.loads((ROOT / "zh" / f"{page}.ipynb").read_text("utf-8"))


@pytest.mark.parametrize(("word", "page"), ZH_SEARCH, ids=[w for w, _ in ZH_SEARCH])
def test_chinese_search_finds_words_inside_chinese_text(browser, base_url, word, page):
    browser.get(urljoin(base_url, f"zh/search.html?q={quote(word)}"))
    finished = WebDriverWait(browser, 30).until(
        lambda b: b.execute_script(
            "const s = document.querySelector('#search-results .search-summary');"
            "return s && s.textContent.trim().length > 0"
        )
    )
    paths = browser.execute_script(
        "return Array.from(document.querySelectorAll('#search-results ul.search li a'))"
        ".map(a => new URL(a.href).pathname)"
    )
    assert finished
    assert any(p.endswith(f"/zh/{page}.html") for p in paths), (
        f"search for {word!r} on the Chinese site should list zh/{page}.html: {paths}"
    )


# Words the builder's extensions write in English unless told otherwise
# (sphinx-exercise, myst-nb's code toggles, sphinx-togglebutton's hint).
BUILDER_WORDS = re.compile(
    r"Solution to|Show code cell|Hide code cell|Click to (show|hide)"
    r"|>\s*Exercise \d"
)


@pytest.mark.parametrize("page", TRANSLATED)
def test_builder_labels_are_chinese(site, page):
    html = (site / "zh" / f"{page}.html").read_text(encoding="utf-8")
    found = sorted({m[0] for m in BUILDER_WORDS.finditer(html)})
    assert not found, f"zh/{page}: builder labels in English: {found}"
