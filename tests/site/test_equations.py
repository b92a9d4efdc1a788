"""Display equations fit the text column at 1280 px, in a real browser.

Every page of _toc.yml is loaded in headless Chromium, 1280 x 900 (a laptop), and waits
for MathJax. Folded blocks (solutions, hidden cells) are opened, because a reader opens
them. Then each typeset display equation (MathJax 3 CHTML, `mjx-container[display]`)
is measured: the width of the rendered mathematics against the width of the column it
sits in. A wider equation is cut at the column's right edge and scrolls sideways on its
own, with only a thin scrollbar as a cue; break it over lines or shorten it. At 400 px
equations may scroll (tests/site/test_site.py checks that the page itself does not).

Run after `make book`: `.venv/bin/python -m pytest tests/site/test_equations.py -q`
(another build: SITE_TEST_HTML=path/to/_build/html).
"""
from __future__ import annotations

from urllib.parse import quote, urljoin

import pytest
from test_site import OPEN_FOLDED, PAGES, load

pytestmark = pytest.mark.site

WIDTH, HEIGHT = 1280, 900

# Run in the page once MathJax has typeset it: open what is folded, then measure every
# display equation. Returns one entry per equation, in page order.
_MEASURE = """
const done = arguments[arguments.length - 1];
""" + OPEN_FOLDED + """
// The TeX of each equation, from MathJax's own list of what it typeset.
const tex = new Map();
try {
    for (const item of MathJax.startup.document.math) {
        if (item.typesetRoot) tex.set(item.typesetRoot, item.math);
    }
} catch (error) { /* no list: the rendered text is named instead */ }
const measure = () => Array.from(
    document.querySelectorAll('mjx-container[display="true"]')).map((box, i) => {
        const math = box.querySelector('mjx-math');
        const mathWidth = math ? math.getBoundingClientRect().width : 0;
        // The column the equation has: its container's inner width (div.math gives
        // it the text column, less an equation number if there is one).
        const column = box.clientWidth;
        const source = tex.get(box);
        return {
            index: i + 1,
            shown: box.getClientRects().length > 0 && column > 0,
            mathWidth: Math.round(mathWidth * 10) / 10,
            scrollWidth: box.scrollWidth,
            column,
            overflow: Math.max(mathWidth, box.scrollWidth) - column,
            tex: (source || box.textContent || '').replace(/\\s+/g, ' ').trim(),
        };
    });
// Let the opened blocks lay out (their transitions) and the web fonts arrive.
document.fonts.ready.then(() => setTimeout(() => done(measure()), 400));
"""


def measure_equations(browser, url: str) -> list[dict]:
    browser.set_window_size(WIDTH, HEIGHT)
    page = load(browser, url)
    if page.mathjax_ready is None:
        return []  # no mathematics on the page
    assert page.mathjax_ready, f"{url}: MathJax did not finish typesetting"
    return browser.execute_async_script(_MEASURE)


def _describe(eq: dict) -> str:
    tex = eq["tex"] if len(eq["tex"]) <= 160 else eq["tex"][:157] + "..."
    return (
        f"  equation {eq['index']}: {eq['mathWidth']:.0f} px wide in a"
        f" {eq['column']} px column ({eq['overflow']:.0f} px cut): {tex}"
    )


@pytest.mark.parametrize("page", PAGES)
def test_display_equations_fit_the_column_1280px_wide(browser, base_url, page):
    equations = measure_equations(browser, urljoin(base_url, quote(f"{page}.html")))
    assert browser.execute_script("return window.innerWidth") <= WIDTH
    hidden = [eq for eq in equations if not eq["shown"]]
    assert not hidden, f"{page}: display equations not shown even when unfolded: " + (
        "; ".join(eq["tex"][:60] for eq in hidden)
    )
    too_wide = [eq for eq in equations if eq["overflow"] > 1]
    assert not too_wide, (
        f"{page}: {len(too_wide)} display equation(s) wider than the text column at"
        f" {WIDTH} px; break them over lines (aligned, \\\\) or shorten them:\n"
        + "\n".join(_describe(eq) for eq in too_wide)
    )


def test_the_measurement_sees_equations(browser, base_url):
    """Guards the test above against passing vacuously: 2.4 shows display equations,
    and the measurement finds their TeX and a real column."""
    page = "chapters/02_attention/04_vectorised_attention"
    equations = measure_equations(browser, urljoin(base_url, f"{page}.html"))
    assert len(equations) >= 2, equations
    assert all(eq["shown"] and eq["column"] > 500 for eq in equations), equations
    assert all("\\" in eq["tex"] for eq in equations), equations


def test_the_measurement_catches_a_wide_equation(browser, base_url):
    """An equation typeset into a page at run time, far wider than the column, is
    reported; a short one beside it is not."""
    url = urljoin(base_url, "book/notation.html")
    measure_equations(browser, url)
    terms = (f"\\mathrm{{softmax}}(q_{{{i}}} k_{{{i}}}^\\top)" for i in range(30))
    wide = " + ".join(terms)
    browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const column = document.querySelector('div.math');"
        "const added = [arguments[0], 'a = b'].map(tex => {"
        "  const div = document.createElement('div');"
        "  div.className = 'math notranslate nohighlight';"
        "  div.textContent = '\\\\[' + tex + '\\\\]';"
        "  column.after(div); return div; });"
        "MathJax.typesetPromise(added).then(() => done(true), e => done(String(e)));",
        wide,
    )
    equations = browser.execute_async_script(_MEASURE)
    added = [eq for eq in equations if "q_{29}" in eq["tex"] or eq["tex"] == "a = b"]
    assert len(added) == 2, [eq["tex"][:40] for eq in equations]
    assert added[0]["tex"] == "a = b" and added[0]["overflow"] <= 1, added[0]
    assert added[1]["overflow"] > 100, f"a 30-term sum should overflow: {added[1]}"
