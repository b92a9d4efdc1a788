"""The page "Translate in your browser"
(chapters/05_transformer/06_translate_in_browser) in headless Chromium, against the
library in Python.

The page runs chapter 5's Transformer, exported to ONNX (book/_static/translator/), with
onnxruntime-web. These tests check that it tokenises, encodes and translates exactly as
attention_lib does (``preprocess``, ``tokenize``, ``TranslationData.encode``, greedy
``translate`` with the weights read back from the same files), that its heat-map
controls change the heat maps, that bad input gets a message and never an error, and
that it works 400 px wide. Run after `make book`:
`.venv/bin/python -m pytest tests/site/test_translator_page.py -q`.
"""
from __future__ import annotations

from urllib.parse import urljoin

import numpy as np
import pytest
import torch

from attention_lib.data import preprocess, tokenize
from attention_lib.decoding import translate as translate_with_library

pytestmark = pytest.mark.site

PAGE = "chapters/05_transformer/06_translate_in_browser.html"

# Inputs where a tokeniser written twice could disagree: punctuation with and without
# spaces, apostrophes, capitals whose lower case is longer or depends on context,
# non-breaking spaces, tabs and newlines (not separators), the special tokens typed in,
# names that an object used as a dictionary would already hold, HTML, emoji.
TOKENIZER_CASES = [
    "",
    " ",
    "Go.",
    "Hello,world!",
    "Hello , world !",
    "I don't know why they left.",
    "Tom's cat isn't here, is it?",
    "Wait... what?!",
    "?",
    "?!.,",
    ".hello",
    "3.14 is pi, 1,000 is a thousand.",
    "Ça va? Où est la gare?",
    "naïve café, crème brûlée.",
    "e\u0301, e\u0301.",  # a combining accent before the comma
    "İstanbul, İZMİR.",  # İ lower-cases to two code points
    "ΣΑΣ. ΌΣΟΣ ΣΑΣ, Σ.Α ΣΑΣ.Α",  # Greek final sigma depends on what follows
    "STRASSE ẞ ß K Å ǅ Ⅻ",  # Kelvin sign, Angstrom sign, titlecase, Roman numeral
    "I\u00a0am\u202fhere\u00a0!",
    "a\u2009b\u3000c.",  # thin and ideographic spaces are not the space character
    "multiple   spaces    here .",
    "tab\tseparated\twords.",
    "new\nline.",
    "<pad>",
    "<pad> <bos> <eos> <unk> hello",
    "constructor __proto__ toString hasOwnProperty",
    "<b>bold</b> <script>alert(1)</script>",
    "I ❤️ Paris 🇫🇷! 👍🏽.",
    "𝓗𝓮𝓵𝓵𝓸, 𝔀𝓸𝓻𝓵𝓭!",  # outside the Basic Multilingual Plane
    "one two three four five six seven eight nine ten eleven",
    "one two three four five six seven eight nine ten eleven twelve",
    "We have to find him before it is too late, or he will leave us.",
]

# Sentences whose page translation must equal the library's: everyday ones, a long one
# that loses its last words and <eos>, one of exactly num_steps - 1 words, unknown
# words, special tokens typed in, capitals and missing spaces.
TRANSLATION_CASES = [
    "I don't know why they left.",
    "I am very happy.",
    "Tom wants to go home now.",
    "We have to find him before it is too late, or he will leave us.",
    "one two three four five six seven eight nine ten eleven",
    "Zorglub is my best friend.",
    "<pad> he is tall.",
    "SHE'S RUNNING,now!",
]

WAIT_READY = """
const done = arguments[arguments.length - 1];
const wait = () => window.translatorPage
    ? translatorPage.ready.then(() => done(true), (e) => done(String(e)))
    : setTimeout(wait, 50);
wait();
"""

TRANSLATE = """
const done = arguments[arguments.length - 1];
translatorPage.translate(arguments[0], arguments[1] || {}).then(done,
    (e) => done({state: 'rejected', message: String(e)}));
"""

STATE = """
const text = (id) => document.getElementById(id).textContent;
const cells = (id) => Array.from(document.querySelectorAll(`#${id} rect`))
    .map((r) => r.getAttribute('data-weight'));
return {state: document.getElementById('translator').dataset.state,
        status: text('translator-status'), output: text('translator-output'),
        note: text('translator-note'), time: text('translator-time'),
        source: Array.from(document.querySelectorAll('#translator-source span'))
            .map((s) => s.textContent),
        unknown: Array.from(document.querySelectorAll('#translator-source .unknown'))
            .map((s) => s.textContent),
        cross: cells('translator-cross'), self: cells('translator-self'),
        crossRows: document.querySelectorAll('#translator-cross svg > text').length,
        count: translatorPage.count};
"""


def _wait(browser, predicate, timeout: float) -> None:
    """Until predicate() holds (selenium's wait; a timeout fails the test)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, timeout, poll_frequency=0.05).until(lambda _: predicate())


def severe(browser) -> list[str]:
    return [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def open_page(browser, base_url, width: int = 1280):
    browser.set_window_size(width, 900)
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(urljoin(base_url, PAGE))
    ready = browser.execute_async_script(WAIT_READY)
    assert ready is True, f"the page did not load its model: {ready}"


@pytest.fixture(scope="module")
def page(browser, base_url):
    """The page at 1280 px, its model loaded and its first sentence translated."""
    open_page(browser, base_url)
    yield browser
    errors = severe(browser)
    assert not errors, "console errors on the translator page:\n" + "\n".join(errors)


@pytest.fixture(scope="module")
def model_dir(site):
    """The model files the page downloads."""
    return site / "_static" / "translator"


@pytest.fixture(scope="module")
def library(model_dir):
    """The library's model, with the weights read back from the page's ONNX files."""
    pytest.importorskip("onnx")
    from attention_lib.export import load_translator

    return load_translator(model_dir)


def state(browser) -> dict:
    return browser.execute_script(STATE)


def translate(browser, sentence: str, **options) -> dict:
    result = browser.execute_async_script(TRANSLATE, sentence, options)
    assert result.get("state") != "rejected", result
    return state(browser)


def test_tokenizer_matches_the_library(page, library):
    _, data = library
    got = page.execute_script(
        "return arguments[0].map((x) => {"
        " const e = translatorPage.encode(x);"
        " return {tokens: translatorPage.tokenize(translatorPage.preprocess(x)),"
        "         row: e.row, validLen: e.validLen}; })",
        TOKENIZER_CASES,
    )
    src, valid_lens = data.encode_source(TOKENIZER_CASES)
    for case, result, row, valid_len in zip(TOKENIZER_CASES, got, src.tolist(),
                                            valid_lens.tolist()):
        assert result["tokens"] == tokenize(preprocess(case)), repr(case)
        assert result["row"] == row, repr(case)
        assert result["validLen"] == valid_len, repr(case)
    # Not vacuous: the cases reach unknown words, <eos> cut off and a pad typed in.
    assert any(data.src_vocab.unk in row for row in src.tolist())
    assert any(data.src_vocab.eos not in row for row in src.tolist())
    assert min(valid_lens.tolist()) == 1 and max(valid_lens.tolist()) == data.num_steps


def test_translations_match_the_library(page, model_dir):
    from selenium.webdriver.common.by import By

    from attention_lib.export import python_translations

    expected = python_translations(model_dir, TRANSLATION_CASES)
    # The first sentence as a reader does it: typed, then the button; the page must
    # show the words one by one as the decoder produces them.
    page.execute_script(
        "window.outputChanges = 0; new MutationObserver(() => window.outputChanges++)"
        ".observe(document.getElementById('translator-output'),"
        " {childList: true, characterData: true, subtree: true});")
    field = page.find_element(By.ID, "translator-input")
    field.clear()
    field.send_keys(TRANSLATION_CASES[0])
    before = state(page)["count"]
    page.find_element(By.ID, "translator-go").click()
    _wait(page, lambda: state(page)["count"] > before, 20)
    first = state(page)
    assert first["state"] == "done", first
    assert first["output"] == expected[0]
    changes = page.execute_script("return window.outputChanges")
    assert changes >= len(expected[0].split()), (changes, expected[0])
    assert first["time"].startswith("Translated in "), first["time"]
    shown = [first["output"]] + [translate(page, s)["output"]
                                 for s in TRANSLATION_CASES[1:]]
    assert shown == expected
    assert len(set(expected)) > len(expected) // 2  # not one answer for everything


def _select(browser, element_id: str, value: str):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element(By.ID, element_id)).select_by_value(value)


@torch.no_grad()
def library_maps(model, data, sentence):
    """What the heat maps must show, from the library in PyTorch: every layer's
    encoder self-attention (H, S, S) and cross-attention (H, T, S) over the S valid
    source positions, T = the output words, as translate(need_weights=True) cuts
    them."""
    (translation,), _ = translate_with_library(model, data, [sentence])
    src, lens = data.encode_source([sentence])
    width = int(lens[0])
    model.encoder(src, lens, need_weights=True)
    self_maps = [b.self_attention.attention_weights[0, :, :width, :width]
                 for b in model.encoder.blocks]
    state_ = model.decoder.init_state(model.encoder(src, lens), lens)
    tokens = [data.tgt_vocab.bos, *data.tgt_vocab[translation.split()]]
    rows = max(len(tokens) - 1, 1)
    _, _ = model.decoder(torch.tensor([tokens[:rows]]), state_, need_weights=True)
    cross_maps = [b.cross_attention.attention_weights[0, :, :rows, :width]
                  for b in model.decoder.blocks]
    return translation, self_maps, cross_maps


def test_the_heat_maps_show_the_library_weights_of_every_layer_and_head(page,
                                                                        library):
    model, data = library
    layers, heads = len(model.encoder.blocks), model.encoder.blocks[0].self_attention
    heads = heads.num_heads
    sentence = "Tom wants to go home now."
    result = translate(page, sentence)
    assert result["state"] == "done" and result["cross"] and result["self"]
    translation, self_maps, cross_maps = library_maps(model, data, sentence)
    assert result["output"] == translation
    width = len(result["source"])
    assert len(result["self"]) == width * width
    assert len(result["cross"]) == width * len(result["output"].split())
    seen_cross, seen_self = set(), set()
    for layer in range(layers):
        for head in [*map(str, range(heads)), "mean"]:
            _select(page, "translator-cross-layer", str(layer))
            _select(page, "translator-cross-head", head)
            drawn = state(page)["cross"]
            seen_cross.add(tuple(drawn))
            maps = cross_maps[layer]
            expected = maps.mean(0) if head == "mean" else maps[int(head)]
            np.testing.assert_allclose(
                np.array(drawn, float), expected.flatten().numpy(), atol=1e-4,
                err_msg=f"cross-attention, layer {layer}, head {head}")
            if head != "mean":
                _select(page, "translator-self-layer", str(layer))
                _select(page, "translator-self-head", head)
                drawn = state(page)["self"]
                seen_self.add(tuple(drawn))
                np.testing.assert_allclose(
                    np.array(drawn, float),
                    self_maps[layer][int(head)].flatten().numpy(), atol=1e-4,
                    err_msg=f"self-attention, layer {layer}, head {head}")
    assert len(seen_cross) == layers * (heads + 1)
    assert len(seen_self) == layers * heads
    # Each row of a map is a softmax over the valid source tokens.
    cross = [float(w) for w in state(page)["cross"]]
    rows = [sum(cross[i: i + width]) for i in range(0, len(cross), width)]
    assert rows == pytest.approx([1.0] * len(rows), abs=1e-3)


def test_bad_input_gets_a_message_not_an_error(page, library):
    model, data = library
    empty = translate(page, "   ")
    assert empty["state"] == "empty" and "Type an English sentence" in empty["status"]
    assert not empty["cross"] and not empty["self"] and not empty["output"]
    unknown = translate(page, "zorglub blorfl\tqwxz")
    assert unknown["state"] == "unknown", unknown
    assert "vocabulary" in unknown["status"] and unknown["unknown"] == ["<unk>"] * 2
    mixed = translate(page, "Zorglub is here.")
    assert mixed["state"] == "done" and mixed["unknown"] == ["<unk>"]
    assert "zorglub" in mixed["note"]
    words = "one two three four five six seven eight nine ten eleven twelve thirteen"
    long = translate(page, words)
    assert long["state"] == "done" and len(long["source"]) == data.num_steps
    assert "left out" in long["note"] and "thirteen" in long["note"]
    assert "<eos>" in long["note"]
    # The library's message for a source longer than the model's positions, from the
    # page's own check (typing cannot reach it: num_steps < max_len).
    with pytest.raises(ValueError) as error:
        model.encoder.check_tokens("src", torch.zeros((1, 70), dtype=torch.long))
    max_len = model.encoder.positional.max_len
    assert page.execute_script(
        "return translatorPage.checkPositions('src', 70, 0, arguments[0])", max_len
    ) == str(error.value)
    with pytest.raises(ValueError) as error:
        model.decoder.check_tokens("tgt_input", torch.zeros((1, 1), dtype=torch.long),
                                   offset=max_len)
    assert page.execute_script(
        "return translatorPage.checkPositions('tgt_input', 1, arguments[0],"
        " arguments[0])", max_len) == str(error.value)
    # ...and what the page shows when a model's max_len is too small for the input.
    short = translate(page, "Go on.", maxLen=data.num_steps - 4)
    assert short["state"] == "error", short
    assert short["status"].startswith(f"src has L={data.num_steps} positions, more than"
                                      f" the model's max_len={data.num_steps - 4}")
    for hostile in ["<b>bold</b> <img src=x onerror=window.pwned=1>",
                    "<script>window.pwned = 1</script>", "I ❤️ Paris 🇫🇷!", "?!.,",
                    "word " * 2000, "\u202e\u200b\ufeff"]:
        result = translate(page, hostile)
        assert result["state"] in {"done", "unknown", "empty"}, (hostile[:40], result)
    assert page.execute_script(
        "return window.pwned === undefined"
        " && !document.querySelector('#translator b, #translator img')")
    assert translate(page, "I am very happy.")["state"] == "done"  # still works


def test_works_400px_wide(browser, base_url):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    open_page(browser, base_url, width=400)
    try:
        translate(browser, "We have to find him before it is too late.")
        found = browser.execute_script(
            "const width = document.documentElement.clientWidth;"
            "const parts = '#translator input, #translator button, #translator select,"
            " #translator svg';"
            "return {scrollWidth: document.documentElement.scrollWidth,"
            " innerWidth: window.innerWidth,"
            " off: Array.from(document.querySelectorAll(parts))"
            "  .filter((el) => el.getBoundingClientRect().right > width + 1)"
            "  .map((el) => el.id || el.tagName)};")
        assert found["innerWidth"] == 400, found
        assert found["scrollWidth"] <= found["innerWidth"], found
        assert not found["off"], found
        # The keyboard works the controls: the head selector moves with an arrow key.
        before = state(browser)["cross"]
        head = browser.find_element(By.ID, "translator-cross-head")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", head)
        head.send_keys(Keys.ARROW_DOWN)
        _wait(browser, lambda: state(browser)["cross"] != before, 5)
        errors = severe(browser)
        assert not errors, errors
    finally:
        browser.set_window_size(1280, 900)
