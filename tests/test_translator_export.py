"""The exported translator (book/_static/translator/, written by
tools/export_translator.py): its files are the ones its provenance record describes,
every input keeps its dynamic dimensions, and onnxruntime running the two programs
translates 200+ held-out sentences exactly as the library does in PyTorch, with the
same attention weights of every layer and head."""
from __future__ import annotations

import gzip
import random
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from attention_lib import Vocab, load_fra_eng, translate
from attention_lib.data import TranslationData
from attention_lib.export import export_translator, load_translator
from attention_lib.seq2seq import EncoderDecoder
from attention_lib.transformer import TransformerDecoder, TransformerEncoder

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

SHIPPED = Path(__file__).resolve().parents[1] / "book" / "_static" / "translator"
NUM_SENTENCES = 240


def settings_of(directory: Path) -> dict:
    return json.loads((directory / "translator.json").read_text())


def test_the_files_are_the_ones_the_provenance_record_describes():
    record = json.loads((SHIPPED / "provenance.json").read_text())
    assert set(record["files"]) == {"encoder.onnx", "decoder_step.onnx",
                                    "translator.json"}
    for name, expected in record["files"].items():
        raw = (SHIPPED / name).read_bytes()
        assert hashlib.sha256(raw).hexdigest() == expected["sha256"], (
            f"{name} is not the file tools/export_translator.py recorded: rerun it")
        assert len(raw) == expected["bytes"]
    assert record["epochs"] > 0 and record["batches"] > 0, "an untrained model"


def test_the_model_files_fit_the_download_budget():
    # The page's budget is 10 MB gzipped for model, runtime and data; the runtime's
    # WebAssembly takes about 4 of them, so the model and vocabularies get 6.
    total = sum(len(gzip.compress((SHIPPED / name).read_bytes(), 6))
                for name in ("encoder.onnx", "decoder_step.onnx", "translator.json"))
    assert total < 6e6


def symbolic_dims(program) -> dict[str, list]:
    return {value.name: [d.dim_param or d.dim_value for d in
                         value.type.tensor_type.shape.dim]
            for value in program.graph.input}


def test_every_input_keeps_its_dynamic_dimensions():
    settings = settings_of(SHIPPED)
    encoder = symbolic_dims(onnx.load(SHIPPED / "encoder.onnx"))
    step = symbolic_dims(onnx.load(SHIPPED / "decoder_step.onnx"))
    assert list(encoder) == settings["encoder_inputs"]
    assert list(step) == settings["step_inputs"]
    assert all(isinstance(d, str) for d in encoder["src"] + encoder["src_valid_lens"])
    for name, dims in step.items():
        # batch, length or cache positions are names; only H, Dh, D and the one new
        # token are numbers
        fixed = {"token": [1], "enc_outputs": [2]}.get(name, [1, 3])
        for axis, size in enumerate(dims):
            assert isinstance(size, int) == (axis in fixed), (name, dims)


def onnx_greedy(directory: Path, src: torch.Tensor, lens: torch.Tensor):
    """Greedy decoding with onnxruntime, as the page runs it (but a batch at once):
    the tokens of every step and every layer's weights."""
    settings = settings_of(directory)
    encoder = ort.InferenceSession(directory / "encoder.onnx")
    step = ort.InferenceSession(directory / "decoder_step.onnx")
    outputs = dict(zip(settings["encoder_outputs"],
                       encoder.run(None, {"src": src.numpy(),
                                          "src_valid_lens": lens.numpy()})))
    batch, heads = src.shape[0], settings["num_heads"]
    empty = np.zeros((batch, heads, 0, settings["embed_dim"] // heads), np.float32)
    feeds = {name: outputs[name] if name in outputs else empty
             for name in settings["step_inputs"][1:]}
    feeds["src_valid_lens"] = lens.numpy()
    token = np.full((batch, 1), settings["bos"], np.int64)
    tokens, cross = [], []
    finished = np.zeros(batch, bool)
    for _ in range(settings["max_output"]):
        result = dict(zip(settings["step_outputs"],
                          step.run(None, feeds | {"token": token})))
        token = result["logits"].argmax(-1)[:, None]
        tokens.append(token[:, 0])
        cross.append([result[f"cross_weights{i}"]
                      for i in range(settings["num_layers"])])
        for name in settings["step_inputs"]:
            if name.startswith("cache"):
                feeds[name] = result["new_" + name]
        finished |= token[:, 0] == settings["eos"]
        if finished.all():
            break
    self_weights = [outputs[f"self_weights{i}"] for i in range(settings["num_layers"])]
    return np.stack(tokens, 1), cross, self_weights


@torch.no_grad()
def library_weights(model, src, lens, tokens, bos):
    """Every layer's weights when the library's model reads ``tokens`` one step at a
    time: the encoder's self-attention, and each step's cross-attention."""
    enc_outputs = model.encoder(src, lens, need_weights=True)
    self_weights = [b.self_attention.attention_weights for b in model.encoder.blocks]
    state = model.decoder.init_state(enc_outputs, lens)
    token = torch.full((src.shape[0], 1), bos)
    cross = []
    for t in range(tokens.shape[1]):
        _, state = model.decoder(token, state, need_weights=True)
        cross.append([b.cross_attention.attention_weights
                      for b in model.decoder.blocks])
        token = torch.as_tensor(tokens[:, t : t + 1])
    return cross, self_weights


def check_parity(directory: Path, sentences: list[str]) -> None:
    model, data = load_translator(directory)
    src, lens = data.encode_source(sentences)
    tokens, cross, self_weights = onnx_greedy(directory, src, lens)
    settings = settings_of(directory)
    vocab = data.tgt_vocab
    got = [" ".join(vocab.to_tokens(row[: list(row).index(vocab.eos)]
                                    if vocab.eos in row else row)) for row in tokens]
    expected, _ = translate(model, data, sentences, max_len=settings["max_output"])
    assert got == expected
    assert settings["bos"] == vocab.bos
    ours_cross, ours_self = library_weights(model, src, lens, tokens, vocab.bos)
    for ours, theirs in zip(ours_self, self_weights, strict=True):
        np.testing.assert_allclose(theirs, ours.numpy(), atol=1e-4, rtol=0)
    for step_ours, step_theirs in zip(ours_cross, cross, strict=True):
        for ours, theirs in zip(step_ours, step_theirs, strict=True):
            np.testing.assert_allclose(theirs, ours.numpy(), atol=1e-4, rtol=0)


@pytest.fixture(scope="module")
def held_out():
    """Held-out English sentences: the test split the chapter scores BLEU on, and
    inputs a reader might type."""
    settings = json.loads((SHIPPED / "provenance.json").read_text())["settings"]
    data = load_fra_eng(settings["num_steps"], settings["min_freq"],
                        settings["max_train"], seed=0)
    odd = ["", "xyzzy plugh", "Ça va? Très bien!", "I'm 42.", "HELLO, WORLD!!",
           "one two three four five six seven eight nine ten eleven twelve thirteen"]
    # The split is sorted by length: a seeded sample spreads over all of it, from
    # the shortest sentences to the longest.
    distinct = sorted({e for e, _ in data.raw["test"]})
    return random.Random(0).sample(distinct, NUM_SENTENCES) + odd


def test_onnxruntime_translates_as_the_library_does(held_out):
    assert len(set(held_out)) >= 200
    lengths = [len(s.split()) for s in held_out]
    assert max(lengths) >= 9 and min(lengths) <= 2
    check_parity(SHIPPED, held_out)


def tiny_data() -> TranslationData:
    english = [s.split() for s in ["go .", "i see .", "we ran away !"]]
    french = [s.split() for s in ["va !", "je vois .", "nous avons fui !"]]
    return TranslationData({}, {}, Vocab(english), Vocab(french), 6)


def test_an_export_round_trip_keeps_the_float16_weights(tmp_path):
    data = tiny_data()
    sizes = dict(embed_dim=16, num_heads=2, ffn_hidden=32, num_layers=2, max_len=16,
                 norm_first=True)
    torch.manual_seed(0)
    model = EncoderDecoder(TransformerEncoder(len(data.src_vocab), **sizes),
                           TransformerDecoder(len(data.tgt_vocab), **sizes))
    export_translator(model, data, tmp_path)  # rounds the model to float16
    loaded, loaded_data = load_translator(tmp_path)
    ours = dict(model.named_parameters()) | dict(model.named_buffers())
    theirs = dict(loaded.named_parameters()) | dict(loaded.named_buffers())
    assert ours.keys() == theirs.keys()
    for name, tensor in ours.items():
        assert torch.equal(tensor, tensor.half().float()), name
        assert torch.equal(tensor, theirs[name]), name
    assert loaded_data.src_vocab.idx_to_token == data.src_vocab.idx_to_token
    check_parity(tmp_path, ["go .", "we see", "", "i ran away , we ran ."])
