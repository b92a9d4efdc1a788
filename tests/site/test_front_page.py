"""The front page (book/intro) and the notes page (book/notes), as readers meet them.

At 1280 x 900 the front page shows, without scrolling, a figure the book's code drew and
a link to the translator that runs in the browser; the footer names who wrote the book;
the page offers one search box, not two. Its "Next" link leads into the book, not to the
page of verdicts on the notes, which comes after the chapters. That page says what each
of the five notes is: its kind, its language, what it covers. Run after `make book`:
`.venv/bin/python -m pytest tests/site/test_front_page.py -q`.
"""
from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
import yaml

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[2]
FRONT = "book/intro.html"
NOTES = "book/notes.html"
TRANSLATOR = "chapters/05_transformer/06_translate_in_browser.html"
FOLD = 900  # a laptop's screen: 1280 x 900 CSS pixels of page

# Every element a reader could take for a search box: the theme's search fields, its
# magnifier buttons and any search input.
SEARCH_CONTROLS = """
const seen = new Set(document.querySelectorAll(
    '.search-button-field, .search-button, .search-button__button,'
    + ' input[type="search"], input[name="q"]'));
return Array.from(seen).filter(el => {
  const box = el.getBoundingClientRect(), style = getComputedStyle(el);
  return box.width > 0 && box.height > 0 && style.visibility !== 'hidden'
      && box.right > 0 && box.left < innerWidth
      && box.bottom > 0 && box.top < innerHeight
      && !el.closest('dialog:not([open])');
}).map(el => el.className || el.tagName);
"""


def _open(browser, url: str) -> None:
    browser.get(url)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        if browser.execute_script(
            "return document.readyState === 'complete'"
            " && Array.from(document.images).every(img => img.complete)"
        ):
            return
        time.sleep(0.1)
    pytest.fail(f"{url} did not finish loading in 30 s")


@pytest.fixture
def laptop(browser):
    """The browser with a page area of 1280 x 900, then back to its usual size."""
    size = browser.get_window_size()
    browser.set_window_size(1280, FOLD)
    chrome_w, chrome_h = browser.execute_script(
        "return [outerWidth - innerWidth, outerHeight - innerHeight]"
    )
    browser.set_window_size(1280 + chrome_w, FOLD + chrome_h)
    assert browser.execute_script("return [innerWidth, innerHeight]") == [1280, FOLD]
    yield browser
    browser.set_window_size(size["width"], size["height"])


def test_front_page_shows_a_figure_above_the_fold(laptop, base_url):
    _open(laptop, urljoin(base_url, FRONT))
    images = laptop.execute_script(
        """
        return Array.from(document.querySelectorAll('.bd-article img')).map(img => {
          const box = img.getBoundingClientRect();
          return {src: img.getAttribute('src'), natural: img.naturalWidth,
                  width: box.width, height: box.height, top: box.top,
                  bottom: box.bottom, alt: img.alt};
        });
        """
    )
    figures = [i for i in images if i["natural"] > 0 and i["height"] >= 200]
    assert figures, f"no figure on the front page (images: {images})"
    seen = [i for i in figures if i["top"] >= 0 and i["bottom"] <= FOLD]
    assert seen, f"no figure wholly above the fold at 1280 x {FOLD}: {figures}"
    assert all(len(i["alt"].split()) >= 4 for i in seen), "the figure needs alt text"


def test_front_page_links_to_the_translator_above_the_fold(laptop, base_url):
    _open(laptop, urljoin(base_url, FRONT))
    links = laptop.execute_script(
        """
        return Array.from(document.querySelectorAll('.bd-article a[href]')).map(a => {
          const box = a.getBoundingClientRect();
          return {path: new URL(a.href).pathname, top: box.top, height: box.height,
                  text: a.textContent.trim()};
        });
        """
    )
    to_translator = [
        link for link in links if link["path"].endswith("/" + TRANSLATOR)
    ]
    assert to_translator, "the front page does not link to the translator"
    above = [
        link for link in to_translator
        if link["height"] > 0 and 0 <= link["top"]
        and link["top"] + link["height"] <= FOLD
    ]
    assert above, f"the translator link is below the fold: {to_translator}"


def test_front_page_footer_names_the_authors(laptop, base_url):
    _open(laptop, urljoin(base_url, FRONT))
    author = laptop.execute_script(
        """
        const el = document.querySelector('.bd-footer-content .component-author, footer'
                                          + ' .component-author');
        return el && {text: el.textContent.replace(/\\s+/g, ' ').trim(),
                      links: Array.from(el.querySelectorAll('a[href]'))
                                  .map(a => a.href)};
        """
    )
    assert author, "the footer has no author line"
    assert "course book authors" not in author["text"], author["text"]
    repository = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))[
        "repository"]["url"].rstrip("/")
    assert any(link.rstrip("/").startswith(repository) for link in author["links"]), (
        f"the author line {author['text']!r} should link to the repository {repository}"
    )


def test_one_search_box_at_desktop_and_one_on_a_phone(laptop, base_url):
    _open(laptop, urljoin(base_url, FRONT))
    visible = laptop.execute_script(SEARCH_CONTROLS)
    assert len(visible) == 1, f"search boxes visible at 1280 px: {visible}"
    laptop.set_window_size(400, 900)
    time.sleep(0.3)
    visible = laptop.execute_script(SEARCH_CONTROLS)
    assert len(visible) == 1, f"search controls visible at 400 px: {visible}"


def test_next_after_the_front_page_is_not_the_notes_page(laptop, base_url):
    _open(laptop, urljoin(base_url, FRONT))
    hrefs = laptop.execute_script(
        "return Array.from(document.querySelectorAll('.prev-next-area a.right-next'))"
        ".map(a => new URL(a.href).pathname)"
    )
    assert hrefs, "the front page has no Next link"
    assert not any(h.endswith("/" + NOTES) for h in hrefs), hrefs
    # The introduction still explains the notes and links to their page.
    assert laptop.execute_script(
        "return Array.from(document.querySelectorAll('.bd-article a[href]'))"
        f".some(a => new URL(a.href).pathname.endsWith('/{NOTES}'))"
    )


def _toc_order() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    names: list[str] = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("file"), str):
                names.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc.get("parts", []))
    return names


def test_the_notes_page_comes_after_the_chapters():
    order = _toc_order()
    chapters = [i for i, name in enumerate(order) if name.startswith("chapters/")]
    assert chapters and order.index("book/notes") > max(chapters), order


def test_notes_page_says_what_each_of_the_five_notes_is(laptop, base_url):
    _open(laptop, urljoin(base_url, NOTES))
    table = laptop.execute_script(
        """
        const table = document.querySelector('.bd-article table');
        if (!table) return null;
        const cells = row => Array.from(row.querySelectorAll('th, td'))
            .map(c => c.textContent.replace(/\\s+/g, ' ').trim());
        return {head: cells(table.querySelector('thead tr')),
                rows: Array.from(table.querySelectorAll('tbody tr')).map(cells)};
        """
    )
    assert table, "the notes page has no table"
    head = [h.lower() for h in table["head"]]
    columns = {
        name: next((i for i, h in enumerate(head) if name in h), None)
        for name in ("kind", "language", "cover")
    }
    assert None not in columns.values(), f"the first table's columns: {table['head']}"
    rows = table["rows"]
    assert len(rows) == 5, f"{len(rows)} rows: {rows}"
    assert [row[0] for row in rows] == [f"Notes {x}" for x in "ABCDE"], rows
    for row in rows:
        assert row[columns["language"]] in (
            "simplified Chinese", "traditional Chinese"), row
        kind = row[columns["kind"]].lower()
        assert any(word in kind for word in (
            "article", "notes", "textbook", "lecture", "chapter", "section")), row
        assert len(row[columns["cover"]].split()) >= 8, row
    # No row stands for a file name alone: "000" ... "004" mean nothing to a reader.
    assert not any(cell.strip("`") in {f"00{i}" for i in range(5)}
                   for row in rows for cell in row), rows


def test_front_page_at_400_px_keeps_figure_and_link(narrow_window, base_url):
    phone = narrow_window
    _open(phone, urljoin(base_url, FRONT))
    assert phone.execute_script(
        "return document.documentElement.scrollWidth <= innerWidth"
    ), "the front page scrolls sideways at 400 px"
    assert phone.execute_script(
        "return Array.from(document.querySelectorAll('.bd-article img'))"
        ".some(img => img.naturalWidth > 0 && img.getBoundingClientRect().width > 300)"
    ), "no figure at 400 px"
    assert phone.execute_script(
        "return Array.from(document.querySelectorAll('.bd-article a[href]'))"
        f".some(a => new URL(a.href).pathname.endsWith('/{TRANSLATOR}'))"
    )


def test_urls_are_site_paths():
    """Guard: the page paths above exist in the sources (renamed pages fail here)."""
    for page in (FRONT, NOTES, TRANSLATOR):
        stem = ROOT / urlsplit(page).path.removesuffix(".html")
        assert stem.with_suffix(".md").is_file() or stem.with_suffix(".ipynb").is_file()
