"""Figures are legible as the website shows them at 1280 px, in a real browser.

Every notebook page of _toc.yml is loaded in headless Chromium, 1280 x 900 (a laptop),
with its folded blocks opened. Each figure a cell draws (an output image, or each state
of a static explorer) must be shown at 80 % of its own width or more, and its smallest
text must be at least 9 px on the screen. A figure wider than the text column (about
672 px) is shrunk to fit, and its text with it: draw it for the column instead (stack
the panels, or fewer panels).

The smallest text size comes from the PNG itself: `attention_lib.plotting` records it,
in pixels of the image, whenever a notebook draws a figure (the chunk
``TEXT_SIZE_KEY``). Shown on screen, it scales with the image.

Run after `make book`: `.venv/bin/python -m pytest tests/site/test_figures.py -q`
(another build: SITE_TEST_HTML=path/to/_build/html).
"""
from __future__ import annotations

import base64
import io
import urllib.request
from urllib.parse import quote, urljoin

import pytest
from PIL import Image
from test_site import OPEN_FOLDED, NOTEBOOK_PAGES, load

from attention_lib.plotting import TEXT_SIZE_KEY

pytestmark = pytest.mark.site

WIDTH, HEIGHT = 1280, 900
MIN_SHOWN_FRACTION = 0.8
MIN_TEXT_PX = 9.0

# Run in the page once it has loaded: open what is folded, then list every image a cell
# drew, with the width it is shown at and the figure it belongs to.
_FIGURES = """
const done = arguments[arguments.length - 1];
""" + OPEN_FOLDED + """
const article = document.querySelector('.bd-article') || document.body;
const list = () => Array.from(article.querySelectorAll('.cell_output img')).map(
    (img, i) => {
        const figure = img.closest('figure');
        const number = figure && figure.querySelector('.caption-number');
        const explorer = img.closest('.static-explorer');
        const data = explorer && document.getElementById(explorer.id + '-data');
        return {
            index: i + 1,
            src: img.currentSrc || img.src,
            natural: img.naturalWidth,
            shown: img.getBoundingClientRect().width,
            // The width an image may take: its box's inner width (max-width: 100%).
            room: img.parentElement.clientWidth,
            name: number ? number.textContent.trim()
                         : (figure && figure.id) || 'image ' + (i + 1),
            alt: (img.alt || '').slice(0, 70),
            states: data ? JSON.parse(data.textContent).states.map(s => s[0]) : null,
        };
    });
setTimeout(() => done(list()), 400);  // let the opened blocks lay out
"""


def _png(src: str) -> bytes:
    if src.startswith("data:"):
        return base64.b64decode(src.split(",", 1)[1])
    # noqa: S310 - our own 127.0.0.1 server
    with urllib.request.urlopen(src, timeout=10) as response:
        return response.read()


def _text_px(png: bytes) -> tuple[int, float | None | str]:
    """The PNG's width and the smallest text size it records (None: no text; "missing":
    nothing recorded)."""
    image = Image.open(io.BytesIO(png))
    note = getattr(image, "text", {}).get(TEXT_SIZE_KEY)
    if note is None:
        return image.width, "missing"
    return image.width, None if note == "none" else float(note)


def figures_on(browser, url: str) -> list[dict]:
    """One entry per figure image on the page: its name, natural and shown width, and
    smallest text size in image pixels. An explorer's entry lists each of its states
    (each an image of its own) under "states"."""
    browser.set_window_size(WIDTH, HEIGHT)
    load(browser, url)
    found = []
    for img in browser.execute_async_script(_FIGURES):
        if img["states"] is None:
            width, text_px = _text_px(_png(img["src"]))
            found.append({**img, "natural": width, "text_px": text_px})
            continue
        states = []
        for encoded in img["states"]:
            width, text_px = _text_px(base64.urlsafe_b64decode(encoded))
            # The explorer's image is max-width: 100%, height: auto.
            states.append({**img, "natural": width, "shown": min(width, img["room"]),
                           "text_px": text_px})
        found.append({**img, "name": f"{img['name']} (explorer)", "states": states})
    return found


def _problems_of_one(figure: dict) -> list[str]:
    found = []
    fraction = figure["shown"] / figure["natural"]
    if fraction < MIN_SHOWN_FRACTION:
        found.append(
            f"shown at {fraction:.0%} of its width ({figure['natural']} px drawn,"
            f" {figure['shown']:.0f} px shown; at most"
            f" {figure['room'] / MIN_SHOWN_FRACTION:.0f} px fits)"
        )
    if figure["text_px"] == "missing":
        found.append(
            "its PNG does not record its smallest text size (draw it in a notebook that"
            " imports attention_lib, and re-execute)"
        )
    elif figure["text_px"] is not None:
        shown_px = figure["text_px"] * min(fraction, 1.0)
        if shown_px < MIN_TEXT_PX:
            found.append(
                f"smallest text {shown_px:.1f} px as shown ({figure['text_px']:.1f} px"
                f" drawn), under {MIN_TEXT_PX:.0f} px"
            )
    return found


def problems(figure: dict) -> list[str]:
    """What makes the figure hard to read; for an explorer, its first state's problems
    and how many of its states have some."""
    if figure["states"] is None:
        return _problems_of_one(figure)
    each = [_problems_of_one(state) for state in figure["states"]]
    bad = [(number, found) for number, found in enumerate(each, 1) if found]
    if not bad:
        return []
    number, found = bad[0]
    return [f"{len(bad)} of its {len(each)} states, e.g. state {number}: "
            + "; ".join(found)]


@pytest.fixture(scope="module")
def figures(browser, base_url):
    cache: dict[str, list[dict]] = {}

    def get(page: str) -> list[dict]:
        if page not in cache:
            cache[page] = figures_on(browser, urljoin(base_url, quote(f"{page}.html")))
        return cache[page]

    return get


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_figures_are_legible_at_1280(figures, page):
    report = [
        f"  {figure['name']} ({figure['alt']}): " + "; ".join(found)
        for figure in figures(page)
        if (found := problems(figure))
    ]
    assert not report, (
        f"{page}: figures shrunk or with text too small to read at {WIDTH} px (draw"
        f" them for the ~672 px column):\n" + "\n".join(report)
    )


def test_figures_and_explorer_states_are_found(figures):
    """Guards the test above against passing vacuously: 6.2 has four figures, one of
    them an explorer with 15 states."""
    found = figures("chapters/06_efficient/02_local_sparse")
    explorers = [f for f in found if f["states"] is not None]
    assert len(found) >= 4 and [len(f["states"]) for f in explorers] == [15], [
        f["name"] for f in found
    ]
    images = [f for f in found if f["states"] is None] + explorers[0]["states"]
    assert all(f["natural"] > 0 and f["room"] > 600 for f in images), images
