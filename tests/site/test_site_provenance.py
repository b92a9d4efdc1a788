""""About this run" on every notebook page, in a real browser.

Each notebook page of _toc.yml ends with a collapsed block saying when its notebook was
executed, how long that took, on what device and with how many threads, with which
Python and PyTorch (book/_ext/provenance.py, from the record that
tools/execute_notebooks.py keeps in the notebook's metadata). The page is loaded 1280
px wide: the block must be there once, closed, and when opened show the notebook's own
record.

Run after `make book`: `.venv/bin/python -m pytest tests/site/test_provenance.py -q`
(another build: SITE_TEST_HTML=path/to/_build/html).
"""
from __future__ import annotations

import json
from urllib.parse import quote, urljoin

import pytest
from test_site import NOTEBOOK_PAGES, ROOT

pytestmark = pytest.mark.site

_READ = """
const blocks = document.querySelectorAll('.bd-article details.provenance');
const block = blocks[0];
if (!block) return {count: 0};
const list = block.querySelector('dl');
// What a reader sees: the block's own height, and whether the list is drawn.
const seen = () => ({open: block.open, height: block.getBoundingClientRect().height,
                     listShown: !!list && list.checkVisibility()});
const closed = seen();
block.querySelector('summary').click();
const fields = {};
block.querySelectorAll('dd[data-field]').forEach(
    dd => { fields[dd.dataset.field] = dd.textContent; });
const time = block.querySelector('time');
const box = block.getBoundingClientRect();
const article = document.querySelector('.bd-article').getBoundingClientRect();
return {count: blocks.length, closed: closed, opened: seen(),
        summary: block.querySelector('summary').textContent.trim(),
        fields: fields, datetime: time ? time.getAttribute('datetime') : null,
        fits: box.left >= article.left - 1 && box.right <= article.right + 1,
        scrolls: block.scrollWidth > block.clientWidth + 1};
"""


def _record(page: str) -> dict:
    text = (ROOT / f"{page}.ipynb").read_text(encoding="utf-8")
    metadata = json.loads(text)["metadata"]
    return metadata.get("attention_book", {}).get("executed", {})


@pytest.fixture(scope="module")
def wide(browser):
    size = browser.get_window_size()
    browser.set_window_size(1280, 900)
    yield browser
    browser.set_window_size(size["width"], size["height"])


def test_notebook_pages_found():
    assert len(NOTEBOOK_PAGES) >= 20


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_notebook_page_says_how_it_was_run(wide, base_url, page):
    record = _record(page)
    wide.get(urljoin(base_url, quote(f"{page}.html")))
    seen = wide.execute_script(_READ)
    assert seen["count"] == 1, (
        f"{page}: {seen['count']} 'About this run' blocks, expected 1"
        + ("" if record else " (its notebook has no run record: execute it with"
           " tools/execute_notebooks.py)")
    )
    closed, opened = seen["closed"], seen["opened"]
    assert not closed["open"] and not closed["listShown"], f"{page}: not collapsed"
    assert seen["summary"] == "About this run"
    assert opened["open"] and opened["listShown"], f"{page}: does not open"
    assert opened["height"] > closed["height"] + 40, (closed, opened)
    assert seen["fits"] and not seen["scrolls"], f"{page}: wider than the text column"

    fields = seen["fields"]
    assert set(fields) >= {"executed", "device", "cpu", "software"}, fields
    assert seen["datetime"] == record["date"]
    assert "took" in fields["executed"] and " s)" in fields["executed"]
    assert record["cpu"] in fields["cpu"]
    assert f"PyTorch used {record['threads']} thread" in fields["cpu"]
    assert f"Python {record['python']}" in fields["software"]
    assert f"PyTorch {record['torch']}" in fields["software"]
    if record["device"] == "cpu":
        assert fields["device"].startswith("CPU")
    else:
        assert record["gpu"] in fields["device"]
