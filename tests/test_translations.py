"""The Chinese book stays in step with the English one (tools/translations.py).

- Every page in scope is translated, unit by unit, and no translation is stale: its
  fingerprint is the English text's as it is now. A failure names the page, the unit
  (the notebook's cell id) and its first words; ``python tools/translations.py status``
  lists the same.
- The committed ``zh/`` is what the generator writes from the English pages and
  ``i18n/zh/`` (nothing is edited by hand).
- A Chinese notebook's code, outputs and glued values are its English notebook's, byte
  for byte, apart from a checker's message and a glued value in words, whose numbers are
  the English ones.
- The glossary is the terminology source: where an English page uses a key term, its
  Chinese page uses the glossary's Chinese for it.
"""

from __future__ import annotations

import copy
import html
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import translations  # noqa: E402
from translations import BOOK, Book, Translation, Unit, match  # noqa: E402

LANG = "zh"
BOOK_ZH = Book(LANG)
SCOPE = BOOK_ZH.scope()
NOTEBOOKS = [page for page in SCOPE if page.endswith(".ipynb")]
# Key terms of the glossary (its rows' English) checked on every Chinese page whose
# English page uses them, with how the English is found.
KEY_TERMS = {
    "Attention": r"\battention\b",
    "Attention weights": r"\battention weights?\b",
    "Attention score": r"\battention scores?\b(?! with)",  # not the verb: "scores with"
    "Query": r"\bquer(y|ies)\b",
    "Key": r"\bkeys?\b",
    "Value": r"\bvalues?\b",
    "Encoder": r"\bencoders?\b",
    "Decoder": r"\bdecoders?\b",
    "Self-attention": r"\bself-attention\b",
    "Multi-head attention": r"\bmulti-head attention\b",
    "Positional encoding": r"\bpositional encodings?\b",
    "Masked softmax": r"\bmasked softmax\b",
    "Context vector": r"\bcontext vectors?\b",
    "Token": r"\btokens?\b",
    "Vocabulary": r"\bvocabular(y|ies)\b(?! of)",  # not "the vocabulary of attention"
    "Additive attention": r"\badditive attention\b",
    "Scaled dot-product attention": r"\bscaled dot-product attention\b",
    "Hidden state": r"\bhidden states?\b",
    "Beam search": r"\bbeam search\b",
    "Cross-attention": r"\bcross-attention\b",
}


def glossary() -> dict[str, list[str]]:
    """English term -> its simplified-Chinese terms, from book/glossary.md's rows."""
    terms = {}
    for line in (
        (ROOT / "book" / "glossary.md").read_text(encoding="utf-8").splitlines()
    ):
        row = re.match(r"^\| \*\*(.+?)\*\* · (.+?) \|", line)
        if not row:
            continue
        chinese = [t.strip() for t in row[2].split("/")]
        chinese = [
            t
            for t in chinese
            if not t.startswith("繁") and re.search(r"[\u4e00-\u9fff]", t)
        ]
        terms[row[1]] = chinese
    return terms


def prose(text: str) -> str:
    """Text without code, maths and role targets (what the terms are looked for in)."""
    for pattern in (r"```.*?```", r"\$\$.*?\$\$", r"\$[^$\n]+\$", r"`[^`\n]*`"):
        text = re.sub(pattern, " ", text, flags=re.S)
    return text


# ---------------------------------------------------------------- the mechanism


def test_markdown_blocks_keep_fences_whole():
    text = ("# T\n\npara one\nline two\n\n"
            "::::{container} x\n:::{note}\nA\n\nB\n:::\n::::\n\nend")
    assert translations.markdown_blocks(text) == [
        "# T",
        "para one\nline two",
        "::::{container} x\n:::{note}\nA\n\nB\n:::\n::::",
        "end",
    ]


def test_units_without_words_need_no_translation():
    assert not translations.has_words("$$\nQK^\\top\n$$")
    assert not translations.has_words(
        "(label)=\n```{solution-start} ex-1\n:class: dropdown\n```"
    )
    assert translations.has_words("The {doc}`notes </book/notes>` say so.")


def test_a_changed_english_unit_is_stale_and_a_new_one_missing():
    page = "chapters/01_seq2seq/01_data.ipynb"
    english = json.loads((ROOT / page).read_text(encoding="utf-8"))
    changed = copy.deepcopy(english)
    cell = next(c for c in changed["cells"] if c["cell_type"] == "markdown")
    cell["source"] = "".join(cell["source"]) + "\nOne more sentence."
    new = {
        "cell_type": "markdown",
        "id": "new-cell",
        "metadata": {},
        "source": "A paragraph nobody translated.",
    }
    changed["cells"].append(new)
    stored = translations.read_translations(BOOK_ZH.translation_file(page))
    status = match(translations.notebook_units(changed), stored, page, True)
    assert cell["id"] in status.stale
    assert "new-cell" in status.missing
    assert not status.complete
    assert match(translations.notebook_units(english), stored, page, True).complete


def test_a_moved_markdown_block_keeps_its_translation():
    units = [Unit("p0", "First."), Unit("p1", "Second.")]
    stored = [Translation("p0", Unit("p0", "Second.").sha, "第二。")]
    status = match(units, stored, "x.md", True)
    assert status.done["p1"].text == "第二。"
    assert status.missing == ["p0"]


def test_a_todo_unit_is_not_translated():
    unit = Unit("abc", "Some words.")
    status = match(
        [unit], [Translation("abc", unit.sha, "Some words.", todo=True)], "x", True
    )
    assert status.todo == ["abc"] and not status.complete


def test_feedback_and_glued_words_are_units():
    units = {u.id for page in NOTEBOOKS for u in BOOK_ZH.units(page)}
    assert any("/feedback" in uid for uid in units)
    assert any(uid.endswith("/glue:ch2_timing_device") for uid in units)


# ---------------------------------------------------------------- the Chinese book


@pytest.mark.parametrize("page", [BOOK, *SCOPE])
def test_page_is_translated_and_current(page):
    status = BOOK_ZH.status(page)
    english = {unit.id: unit.english for unit in status.units}
    problems = [
        f"{kind} {uid}: {translations.first_words(english[uid])}"
        for kind, ids in (
            ("stale", status.stale),
            ("todo", status.todo),
            ("missing", status.missing),
        )
        for uid in ids
    ]
    assert not problems, (
        f"{page}: units not translated or out of date (edit "
        f"{BOOK_ZH.translation_file(page).relative_to(ROOT)}; "
        "python tools/translations.py status lists them):\n" + "\n".join(problems)
    )


def test_generated_book_is_current():
    wrong = BOOK_ZH.outdated()
    assert not wrong, (
        "zh/ is not what tools/translations.py generate writes: " + ", ".join(wrong)
    )


def _numbers(text: str) -> list[str]:
    """The numbers in a text or HTML (tags and entities such as &#x27; left out)."""
    return re.findall(r"\d+(?:[.,]\d+)*", html.unescape(re.sub(r"<[^>]*>", "", text)))


@pytest.mark.parametrize("page", NOTEBOOKS)
def test_code_outputs_and_glue_are_the_english_ones(page):
    english = json.loads((ROOT / page).read_text(encoding="utf-8"))
    chinese = json.loads((ROOT / LANG / page).read_text(encoding="utf-8"))
    assert [(c["id"], c["cell_type"]) for c in chinese["cells"]] == [
        (c["id"], c["cell_type"]) for c in english["cells"]
    ], f"{page}: cells differ"
    for en, zh in zip(english["cells"], chinese["cells"]):
        if en["cell_type"] != "code":
            continue
        where = f"{page} cell {en['id']}"
        assert zh["source"] == en["source"], f"{where}: code differs"
        assert zh.get("execution_count") == en.get("execution_count"), where
        en_meta, zh_meta = copy.deepcopy(en["metadata"]), copy.deepcopy(zh["metadata"])
        for meta in (en_meta, zh_meta):
            meta.get("mystnb", {}).get("figure", {}).pop("caption", None)
            meta.get("mystnb", {}).get("image", {}).pop("alt", None)
        assert zh_meta == en_meta, f"{where}: metadata differs beyond caption and alt"
        assert len(zh["outputs"]) == len(en["outputs"]), where
        for k, (out_en, out_zh) in enumerate(zip(en["outputs"], zh["outputs"])):
            if out_zh == out_en:
                continue
            words = (
                translations.feedback_message(out_en) is not None
                or translations.glued_text(out_en) is not None
            )
            assert words, f"{where} output {k} differs from the English one"
            assert (
                out_zh.keys() == out_en.keys()
                and out_zh["metadata"] == out_en["metadata"]
            )
            for mime in out_en["data"]:
                a, b = out_en["data"][mime], out_zh["data"][mime]
                a, b = ("".join(x) if isinstance(x, list) else x for x in (a, b))
                missing = set(_numbers(a)) - set(_numbers(b))
                assert not missing, (
                    f"{where} output {k} ({mime}): the translation lacks"
                    f" the English numbers {sorted(missing)}"
                )
    meta_en = copy.deepcopy(english["metadata"])
    meta_zh = copy.deepcopy(chinese["metadata"])
    assert meta_zh["attention_book"].pop("language") == LANG
    assert meta_zh == meta_en


@pytest.mark.parametrize("page", [p for p in SCOPE if p != "book/glossary.md"])
def test_key_terms_as_the_glossary_gives_them(page):
    terms = glossary()
    assert set(KEY_TERMS) <= set(terms), set(KEY_TERMS) - set(terms)
    english = prose("\n".join(u.english for u in BOOK_ZH.units(page)))
    chinese = prose(
        "\n".join(
            t.text
            for t in translations.read_translations(BOOK_ZH.translation_file(page))
        )
    )
    wrong = [
        f"{term!r} (the glossary: {' / '.join(terms[term])})"
        for term, pattern in KEY_TERMS.items()
        if re.search(pattern, english, re.I)
        and not any(zh in chinese for zh in terms[term])
    ]
    assert not wrong, f"{page}: the English uses, the Chinese lacks: " + ", ".join(
        wrong
    )


def test_the_terminology_check_can_fail():
    terms = glossary()
    chinese = "这里把 attention 译成关注。"
    assert not any(zh in chinese for zh in terms["Attention"])
