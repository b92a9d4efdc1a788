"""The language switch's links and the Chinese solution titles (book/_ext/languages.py);
the built site's switches are followed in tests/site/test_zh_site.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
import languages  # noqa: E402


def test_switch_leads_to_the_same_page_in_the_other_tree():
    assert languages.switch_href("book/intro", "en") == "../zh/book/intro.html"
    assert languages.switch_href("chapters/01_seq2seq/01_data", "zh") == (
        "../../../chapters/01_seq2seq/01_data.html")
    assert languages.switch_href("index", "en") == "zh/index.html"


def test_solution_titles_in_chinese_only_in_the_chinese_book():
    title = ('<p class="admonition-title">Solution to<a class="reference internal"'
             ' href="#ex-1"> Exercise 1.4</a></p>')
    assert languages.solution_titles(title, "zh") == (
        '<p class="admonition-title"><a class="reference internal" href="#ex-1">'
        '练习 1.4</a> 的解答</p>')
    assert languages.solution_titles(title, "en") == title
