"""The page "Translate in your browser"
(chapters/05_transformer/06_translate_in_browser) in headless Chromium, against the
library in Python.

The page runs chapter 5's Transformer, exported to ONNX (book/_static/translator/), with
onnxruntime-web. These tests check that it tokenises, encodes and translates exactly as
attention_lib does (``preprocess``, ``tokenize``, ``TranslationData.encode``, greedy
``translate`` with the weights read back from the same files), that its heat-map
controls change the heat maps, that bad input gets a message and never an error, and
that it works 400 px wide. And the reader's first minute: the page's own sentences come
out right, several sentences are each translated, ``<unk>`` in the French is marked and
explained, the download's size is stated (as the built files weigh) and its bytes shown
as they arrive, and the controls work while the model loads. Run after `make book`:
`.venv/bin/python -m pytest tests/site/test_translator_page.py -q`.
"""
from __future__ import annotations

import re
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


# Resolves once the element has kept its place on screen for 300 ms: the page's text
# above it (the status line, the model's BLEU) may still change height after the first
# translation, and a click aimed at the old place would land on another control.
SETTLE = """
const [element, done] = [arguments[0], arguments[arguments.length - 1]];
element.scrollIntoView({block: 'center', behavior: 'instant'});
let last = JSON.stringify(element.getBoundingClientRect()), still = 0;
const timer = setInterval(() => {
    const now = JSON.stringify(element.getBoundingClientRect());
    still = now === last ? still + 1 : 0;
    last = now;
    if (still >= 6) { clearInterval(timer); done(true); }
}, 50);
"""


def click(browser, element) -> None:
    """Scroll the element into view, let the layout settle, and click it."""
    browser.execute_async_script(SETTLE, element)
    element.click()


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


# --- The first minute: the page's own sentences, several sentences, <unk>, the
# download, and controls that work while the model loads. Correct means what a French
# speaker accepts (checked by hand); the library gives the same translations.
KNOWN_GOOD = {
    "Where is the train station?": "où se trouve la gare ?",
    "I lost my keys.": "j'ai perdu mes clés .",
    "She is wearing a red dress.": "elle porte une robe rouge .",
    "I am very tired. We have to go now.":
        "je suis très fatigué . nous devons partir maintenant .",
}

FIRST = """
const done = arguments[arguments.length - 1];
translatorPage.ready.then((first) => done(first.output), (e) => done(String(e)));
"""

EXTRA_STATE = """
const text = (id) => document.getElementById(id).textContent;
const choice = document.getElementById('translator-sentence');
const all = (selector) => Array.from(document.querySelectorAll(selector));
return {outputUnknown: all('#translator-output .unknown').map((s) => s.textContent),
        outputNote: text('translator-output-note'),
        sentences: document.getElementById('translator-sentence-choice').hidden
            ? 0 : choice.options.length,
        crossLabels: all('#translator-cross svg > text').map((t) => t.textContent)};
"""


def test_the_page_sentence_and_the_examples_translate_correctly(page, model_dir):
    from selenium.webdriver.common.by import By

    from attention_lib.export import python_translations

    preset = page.find_element(By.ID, "translator-input").get_attribute("value")
    buttons = page.find_elements(By.CSS_SELECTOR, "#translator [data-example]")
    examples = [b.get_attribute("data-example") for b in buttons]
    # The page offers only sentences known to come out right.
    assert [preset, *examples] == list(KNOWN_GOOD), [preset, *examples]
    assert page.execute_async_script(FIRST) == KNOWN_GOOD[preset]
    for button, example in zip(buttons, examples):
        before = state(page)["count"]
        click(page, button)
        _wait(page, lambda: state(page)["count"] > before, 20)
        shown = state(page)
        assert shown["state"] == "done" and shown["output"] == KNOWN_GOOD[example]
    # ...and the library in PyTorch agrees, sentence by sentence.
    for sentence, french in KNOWN_GOOD.items():
        pieces = re.split(r"(?<=[.!?])\s+", sentence)
        assert " ".join(python_translations(model_dir, pieces)) == french


def test_several_sentences_are_each_translated(page, library, model_dir):
    from attention_lib.export import python_translations

    model, data = library
    sentences = ["I lost my keys.", "She is wearing a red dress!",
                 "Where is the train station?"]
    result = translate(page, "  ".join(sentences))
    expected = python_translations(model_dir, sentences)
    assert result["state"] == "done", result
    assert result["output"] == " ".join(expected)
    assert "3 sentences" in result["note"]
    extra = page.execute_script(EXTRA_STATE)
    assert extra["sentences"] == 3
    # The heat maps follow the chosen sentence: the second one's, from the library.
    _select(page, "translator-sentence", "1")
    _select(page, "translator-cross-layer", "0")
    _select(page, "translator-cross-head", "mean")
    translation, _, cross_maps = library_maps(model, data, sentences[1])
    drawn = np.array(state(page)["cross"], float)
    np.testing.assert_allclose(drawn, cross_maps[0].mean(0).flatten().numpy(),
                               atol=1e-4)
    _select(page, "translator-sentence", "0")
    # A sentence with nothing the model knows is named, not dropped without a word.
    mixed = translate(page, "I lost my keys. Xyzzy plugh.")
    assert mixed["state"] == "done" and mixed["output"] == expected[0]
    assert "“Xyzzy plugh.”, is not translated" in mixed["note"], mixed["note"]
    # More sentences than the page translates at once: it says which it left out.
    many = translate(page, "Go. Run. Stop. Wait. Sit. Look here. Come back.")
    assert many["state"] == "done" and "5 sentences" in many["time"], many
    assert "at most 5 sentences" in many["note"]
    assert "Look here. Come back." in many["note"]
    # One sentence stays one sentence: no break inside "3.14" or at the end.
    assert page.execute_script(
        "return translatorPage.splitSentences(arguments[0])",
        "3.14 is pi. Wait... what?! ") == ["3.14 is pi.", "Wait...", "what?!"]


def test_unknown_french_is_marked_and_unknown_input_refused(page):
    french = translate(page, "How old are you?")
    assert french["state"] == "done" and "<unk>" in french["output"].split()
    extra = page.execute_script(EXTRA_STATE)
    assert extra["outputUnknown"] == ["<unk>"] * french["output"].split().count("<unk>")
    assert "<unk> in the French" in extra["outputNote"]
    assert "fewer than twice" in extra["outputNote"]
    clean = translate(page, "I lost my keys.")
    assert not page.execute_script(EXTRA_STATE)["outputNote"], clean
    # Unknown words with a full stop are refused like unknown words alone.
    for text in ["Xyzzy plugh frobnicate.", "Xyzzy, plugh!", "Xyzzy plugh"]:
        refused = translate(page, text)
        assert refused["state"] == "unknown", (text, refused)
        assert not refused["output"] and not refused["cross"], (text, refused)
    punctuation = translate(page, "?!.,")
    assert punctuation["state"] == "empty" and not punctuation["output"], punctuation


def _download_sizes(site) -> tuple[int, dict]:
    """What the translator's files weigh, from the built site: the .gz copies the page
    fetches, gzip for what GitHub Pages compresses, the rest as it is."""
    import gzip
    import json

    static = site / "_static"
    settings = json.loads((static / "translator" / "translator.json").read_text())
    heavy = ["vendor/onnxruntime-web/ort-wasm-simd-threaded.wasm",
             f"translator/{settings['encoder']}",
             f"translator/{settings['decoder_step']}"]
    light = ["translator.js", "translator/translator.json",
             "translator/provenance.json", "vendor/onnxruntime-web/ort.wasm.min.mjs",
             "vendor/onnxruntime-web/ort-wasm-simd-threaded.mjs"]
    sizes = {}
    for path in heavy:
        packed = (static / f"{path}.gz").read_bytes()
        assert gzip.decompress(packed) == (static / path).read_bytes(), path
        sizes[path] = len(packed)
    for path in light:
        raw = (static / path).read_bytes()
        sizes[path] = len(gzip.compress(raw, 9, mtime=0)) if path.endswith(
            (".js", ".mjs", ".json")) else len(raw)
    return sum(sizes.values()), sizes


def test_the_download_size_is_stated_from_the_built_files(site):
    import html
    import json

    total, sizes = _download_sizes(site)
    text = (site / PAGE).read_text(encoding="utf-8")
    found = re.search(r'<span class="translator-download-size" data-download="([^"]*)">'
                      r"([^<]*)</span>", text)
    assert found, "the page does not state the size of its download"
    stated = json.loads(html.unescape(found.group(1)))
    assert found.group(2) == f"{total / 1e6:.1f} MB"
    assert stated["sent"] == total
    assert {path: f["sent"] for path, f in stated["files"].items()} == sizes
    assert total < 8e6  # what the first translation at 10 Mbit/s can afford


SLOW_LINK = {"offline": False, "latency": 20, "downloadThroughput": 30e6 / 8,
             "uploadThroughput": 30e6 / 8}
LOADING = """
const bar = document.getElementById('translator-progress');
const selects = Array.from(document.querySelectorAll('#translator select'))
    .filter((s) => s.id !== 'translator-sentence');
return {state: document.getElementById('translator').dataset.state,
        status: document.getElementById('translator-status').textContent,
        value: bar.value, max: bar.max, barHidden: bar.hidden,
        selects: selects.map((s) => [s.options.length, s.disabled]),
        count: window.translatorPage ? translatorPage.count : -1};
"""


def test_controls_work_while_the_model_loads(browser, base_url, site):
    """On a slow link: the page states the size, shows the bytes arriving, fills its
    selectors early, and runs an example clicked before the model is ready."""
    from selenium.webdriver.common.by import By

    total, _ = _download_sizes(site)
    browser.set_window_size(1280, 900)
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    browser.execute_cdp_cmd("Network.emulateNetworkConditions", SLOW_LINK)
    try:
        browser.get(urljoin(base_url, PAGE))
        example = "She is wearing a red dress."
        button = browser.find_element(By.CSS_SELECTOR, f'[data-example="{example}"]')
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
        first = browser.execute_script(LOADING)
        assert first["state"] == "loading", "the model loaded too fast to test this"
        button.click()
        samples = []
        while True:
            sample = browser.execute_script(LOADING)
            samples.append(sample)
            if sample["count"] > 0 or len(samples) > 2000:
                break
        loading = [s for s in samples if s["state"] == "loading"]
        assert loading, samples[:3]
        # The size, then the bytes as they arrive.
        stated = f"of {total / 1e6:.1f} MB"
        assert any(stated in s["status"].replace("\u00a0", " ") for s in loading), (
            loading[-1])
        arriving = [s for s in loading if 0 < s["value"] < s["max"]]
        assert arriving and arriving[0]["max"] == total, loading[:3]
        assert len({s["value"] for s in arriving}) > 2  # it moves
        # The click waits for the model, and says so.
        assert any("as soon as the model is ready" in s["status"] for s in loading)
        # The selectors are filled and usable before the model is ready.
        assert any(all(n > 0 and not off for n, off in s["selects"]) for s in loading)
        result = browser.execute_async_script(FIRST)
        assert result == KNOWN_GOOD[example]
        # the example only, not the page's own sentence first
        assert state(browser)["count"] == 1
        done = browser.execute_script(LOADING)
        assert done["barHidden"] and state(browser)["output"] == KNOWN_GOOD[example]
        errors = severe(browser)
        assert not errors, errors
    finally:
        browser.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": False, "latency": 0, "downloadThroughput": -1,
            "uploadThroughput": -1})
