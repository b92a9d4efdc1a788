"""Search that finds words inside Chinese text.

Sphinx's default search splits text at spaces and punctuation, so in the glossary's
多头注意力 only the whole run 多头注意力 is a word: 多头 or 注意 find nothing. Sphinx's
Chinese search language segments Chinese with jieba (``cut_for_search`` also indexes
the words inside a word: 多头, 注意, 注意力) and keeps an English stemmer for the
rest, so English search works as before. jieba's dictionary is general Chinese; this
extension teaches it the glossary's terms (the book's terminology source), so that
自注意力 stays one word as well as giving 注意 and 注意力.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config

GLOSSARY = Path(__file__).resolve().parents[1] / "glossary.md"
CHINESE = re.compile(r"[\u4e00-\u9fff]{2,}")  # runs of two or more CJK characters


def glossary_terms(text: str) -> list[str]:
    """The Chinese terms of the glossary's rows ``| **English** · 中文 / 另一个 | ...``."""
    terms = set()
    for line in text.splitlines():
        if line.startswith("|") and "·" in line:
            terms.update(CHINESE.findall(line.split("·", 1)[1].split("|", 1)[0]))
    return sorted(terms)


def _configure(app: Sphinx, config: Config) -> None:
    try:
        import jieba
    except ImportError:  # no segmenter: Sphinx's default search, as before
        return
    jieba.setLogLevel(logging.WARNING)
    words = Path(app.doctreedir).parent / "search_words_zh.txt"
    words.parent.mkdir(parents=True, exist_ok=True)
    terms = glossary_terms(GLOSSARY.read_text(encoding="utf-8"))
    words.write_text("".join(f"{term}\n" for term in terms), encoding="utf-8")
    config.html_search_language = "zh"
    config.html_search_options = {**config.html_search_options, "dict": str(words)}


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _configure)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
