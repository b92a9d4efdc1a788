"""Chapter 5's translation Transformer as two ONNX programs a web page can run.

The browser cannot call PyTorch, so the model leaves it as two programs that
``onnxruntime-web`` runs: :class:`EncoderProgram` encodes a sentence once and projects
every layer's cross-attention keys and values; :class:`DecoderStep` feeds one target
token through the decoder with its KV cache, the cached decoding of chapter 6. Both are
traced by ``torch.onnx.export`` through the library's own code (its value checks step
aside while tracing) with the batch, the source length and the cache length left
dynamic. The weights are stored in float16 and cast back to float32 when the program
loads, so the arithmetic is float32 and the file is half the size.

:func:`export_translator` writes the programs, the vocabularies and the page's settings
(``translator.json``); :func:`load_translator` reads the weights back out of the ONNX
files into the library's model, and :func:`python_translations` translates with it, so
that the page can be checked against the library's own greedy decoding.

Shapes (one layer's names; ``i`` counts the layers from 0):
    EncoderProgram(src (B, Lk), src_valid_lens (B,)) -> enc_outputs (B, Lk, D),
        memory_ki, memory_vi (B, H, Lk, Dh) ..., self_weightsi (B, H, Lk, Lk) ...
    DecoderStep(token (B, 1), enc_outputs, src_valid_lens, cache_ki, cache_vi
        (B, H, t, Dh) ..., memory_ki, memory_vi ...) -> logits (B, V),
        new_cache_ki, new_cache_vi (B, H, t + 1, Dh) ..., cross_weightsi (B, H, 1, Lk)

Taught in ``chapters/05_transformer/06_translate_in_browser.md``.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from .data import TranslationData, Vocab
from .decoding import translate
from .multihead import KVCache
from .seq2seq import EncoderDecoder
from .transformer import TransformerDecoder, TransformerEncoder, TransformerState

__all__ = [
    "EncoderProgram",
    "DecoderStep",
    "export_translator",
    "load_translator",
    "python_translations",
]

ENCODER_FILE, STEP_FILE, SETTINGS_FILE = (
    "encoder.onnx", "decoder_step.onnx", "translator.json")


def _pairs(prefix: str, num_layers: int) -> list[str]:
    return [f"{prefix}_{kind}{i}" for i in range(num_layers) for kind in "kv"]


def _program_names(num_layers: int) -> dict[str, list[str]]:
    """The inputs and outputs of both programs, by name, in order."""
    memory = _pairs("memory", num_layers)
    return {
        "encoder_inputs": ["src", "src_valid_lens"],
        "encoder_outputs": ["enc_outputs", *memory,
                            *(f"self_weights{i}" for i in range(num_layers))],
        "step_inputs": ["token", "enc_outputs", "src_valid_lens",
                        *_pairs("cache", num_layers), *memory],
        "step_outputs": ["logits", *_pairs("new_cache", num_layers),
                         *(f"cross_weights{i}" for i in range(num_layers))],
    }


class EncoderProgram(nn.Module):
    """The encoder, then every decoder layer's cross-attention keys and values
    (projected once per sentence, as ``TransformerDecoder.init_state`` does), and the
    encoder's self-attention weights of every layer.

    Shapes:
        src: (B, Lk); src_valid_lens: (B,); returns: enc_outputs (B, Lk, D), then
        keys and values (B, H, Lk, Dh) of every layer, then weights (B, H, Lk, Lk)

    Taught in ``chapters/05_transformer/06_translate_in_browser.md``.
    """

    def __init__(self, model: EncoderDecoder):
        super().__init__()
        self.encoder, self.decoder = model.encoder, model.decoder

    def forward(self, src: Tensor, src_valid_lens: Tensor) -> tuple[Tensor, ...]:
        enc_outputs = self.encoder(src, src_valid_lens, need_weights=True)
        memory = [t for block in self.decoder.blocks
                  for t in block.cross_attention.project(enc_outputs)]
        weights = [block.self_attention.attention_weights
                   for block in self.encoder.blocks]  # (B, H, Lk, Lk) each
        return (enc_outputs, *memory, *weights)


class DecoderStep(nn.Module):
    """One cached decoding step with flat tensor arguments (an ONNX program takes no
    :class:`~attention_lib.transformer.TransformerState`): the new tokens, the
    encoder's outputs and lengths, then every layer's self-attention cache and
    cross-attention memory, keys before values. Returns the last position's logits,
    the grown caches and every layer's cross-attention weights.

    Shapes:
        token: (B, 1); enc_outputs: (B, Lk, D); src_valid_lens: (B,); kv: caches
        (B, H, t, Dh), then memories (B, H, Lk, Dh); returns: logits (B, V), caches
        (B, H, t + 1, Dh), weights (B, H, 1, Lk)

    Taught in ``chapters/05_transformer/06_translate_in_browser.md``.
    """

    def __init__(self, decoder: TransformerDecoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, token: Tensor, enc_outputs: Tensor, src_valid_lens: Tensor,
                *kv: Tensor) -> tuple[Tensor, ...]:
        n = len(self.decoder.blocks)
        pairs = [KVCache(kv[2 * i], kv[2 * i + 1]) for i in range(2 * n)]
        state = TransformerState(enc_outputs, src_valid_lens, tuple(pairs[:n]),
                                 tuple(pairs[n:]))
        logits, state = self.decoder(token, state, need_weights=True)
        weights = [block.cross_attention.attention_weights
                   for block in self.decoder.blocks]  # (B, H, Lq, Lk) each
        return (logits[:, -1], *(t for cache in state.cache for t in cache), *weights)


def _store_float16(program):
    """An ONNX model whose float32 weights are stored as float16, each cast back to
    float32 by a ``Cast`` node under its old name, so the graph computes in float32."""
    import onnx
    from onnx import helper, numpy_helper

    graph = program.graph
    kept, casts = [], []
    for tensor in graph.initializer:
        if tensor.data_type != onnx.TensorProto.FLOAT:
            kept.append(tensor)
            continue
        half = numpy_helper.from_array(
            numpy_helper.to_array(tensor).astype("float16"), tensor.name + ".fp16")
        kept.append(half)
        casts.append(helper.make_node("Cast", [half.name], [tensor.name],
                                      to=onnx.TensorProto.FLOAT))
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    return program


def _round_to_float16(model: nn.Module) -> nn.Module:
    """Round every weight and buffer to the nearest float16 value, kept in float32:
    the model the float16 files hold."""
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.is_floating_point():
                tensor.copy_(tensor.half().float())
    return model


def _export(module: nn.Module, args: tuple, path: Path, names: tuple[list, list],
            dynamic_shapes) -> None:
    import onnx

    with warnings.catch_warnings():  # the weights the programs keep are not buffers
        warnings.filterwarnings("ignore", message=".*assigned during export.*")
        warnings.filterwarnings("ignore", message=".*will not be used.*")
        # optimize=False keeps each weight under its PyTorch name, which
        # load_translator reads back.
        program = torch.onnx.export(
            module.eval(), args, dynamo=True, optimize=False, verbose=False,
            input_names=names[0], output_names=names[1], dynamic_shapes=dynamic_shapes)
    onnx.save(_store_float16(program.model_proto), path)


def export_translator(model: EncoderDecoder, data: TranslationData,
                      directory: str | Path, max_output: int | None = None) -> dict:
    """Write ``encoder.onnx``, ``decoder_step.onnx`` and ``translator.json`` (the
    vocabularies, special tokens, lengths and program names) into ``directory``.

    The model is rounded to float16 in place first, so it
    is the model the files hold. Returns the settings written to ``translator.json``.

    Shapes:
        the programs' inputs and outputs: see :class:`EncoderProgram` and
        :class:`DecoderStep`; batch, source length and cache length stay dynamic

    Taught in ``chapters/05_transformer/06_translate_in_browser.md``.
    """
    from torch.export import Dim

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model = _round_to_float16(model.eval())
    encoder, decoder = model.encoder, model.decoder
    n = len(decoder.blocks)
    names = _program_names(n)
    max_len = decoder.positional.max_len
    batch = Dim("batch", min=1, max=1024)
    length = Dim("src_len", min=1, max=encoder.positional.max_len)
    src, lens = data.encode_source(["Go on.", "I don't know why they left."])
    encode = EncoderProgram(model)
    _export(encode, (src, lens), directory / ENCODER_FILE,
            (names["encoder_inputs"], names["encoder_outputs"]),
            {"src": {0: batch, 1: length}, "src_valid_lens": {0: batch}})
    with torch.no_grad():
        enc_outputs, *rest = encode(src, lens)
        state = decoder.init_state(enc_outputs, lens)
        _, state = decoder(torch.full((2, 3), data.tgt_vocab.bos), state)
    kv = [t for pair in state.cache for t in pair] + rest[: 2 * n]
    # Traced with 3 cached positions; the ONNX program also takes an empty cache (the
    # first step), which torch.export's range cannot state (it treats 0 and 1 apart).
    steps = Dim("past", min=1, max=max_len - 1)
    _export(DecoderStep(decoder), (torch.full((2, 1), data.tgt_vocab.bos),
                                   enc_outputs, lens, *kv),
            directory / STEP_FILE, (names["step_inputs"], names["step_outputs"]),
            {"token": {0: batch}, "enc_outputs": {0: batch, 1: length},
             "src_valid_lens": {0: batch},
             "kv": tuple([{0: batch, 2: steps}] * 2 * n
                         + [{0: batch, 2: length}] * 2 * n)})
    block = decoder.blocks[0].self_attention
    settings = {
        "src_vocab": data.src_vocab.idx_to_token,
        "tgt_vocab": data.tgt_vocab.idx_to_token,
        **{name: getattr(data.tgt_vocab, name)
           for name in ("pad", "bos", "eos", "unk")},
        "num_steps": data.num_steps,
        "max_len": max_len,
        "max_output": data.num_steps + 2 if max_output is None else max_output,
        "num_layers": n,
        "num_heads": block.num_heads,
        "embed_dim": decoder.embed_dim,
        "norm_first": decoder.final_norm is not None,
        "ffn_hidden": decoder.blocks[0].ffn.W_1.out_features,
        "encoder": ENCODER_FILE,
        "decoder_step": STEP_FILE,
        **names,
    }
    (directory / SETTINGS_FILE).write_text(json.dumps(settings, ensure_ascii=False))
    return settings


def load_translator(directory: str | Path) -> tuple[EncoderDecoder, TranslationData]:
    """The library's model with the weights read back out of the ONNX files, and a
    :class:`~attention_lib.data.TranslationData` without sentences that encodes and
    decodes with the exported vocabularies: ``translate(model, data, sentences)``
    works on them.

    Shapes:
        returns: the model, and data whose ``encode_source`` gives (N, num_steps)

    Taught in ``chapters/05_transformer/06_translate_in_browser.md``.
    """
    import onnx
    from onnx import numpy_helper

    directory = Path(directory)
    settings = json.loads((directory / SETTINGS_FILE).read_text())
    sizes = dict(embed_dim=settings["embed_dim"], num_heads=settings["num_heads"],
                 ffn_hidden=settings["ffn_hidden"], num_layers=settings["num_layers"],
                 norm_first=settings["norm_first"], max_len=settings["max_len"])
    model = EncoderDecoder(TransformerEncoder(len(settings["src_vocab"]), **sizes),
                           TransformerDecoder(len(settings["tgt_vocab"]), **sizes))
    weights = {}
    for name in (ENCODER_FILE, STEP_FILE):
        for tensor in onnx.load(directory / name).graph.initializer:
            key = tensor.name.removesuffix(".fp16")
            array = numpy_helper.to_array(tensor).copy()
            weights[key] = torch.from_numpy(array).float()
    tensors = dict(model.named_parameters()) | dict(model.named_buffers())
    missing = sorted(set(dict(model.named_parameters())) - set(weights))
    if missing:
        raise ValueError(f"{directory} lacks weights the model needs: {missing[:5]}")
    # Buffers too: the positional encodings, rounded like the rest.
    with torch.no_grad():
        for name, tensor in tensors.items():
            if name in weights:
                tensor.copy_(weights[name])
    data = TranslationData({}, {}, Vocab.from_tokens(settings["src_vocab"]),
                           Vocab.from_tokens(settings["tgt_vocab"]),
                           settings["num_steps"])
    return model.eval(), data


def python_translations(directory: str | Path, sentences: list[str]) -> list[str]:
    """Greedy translations of ``sentences`` by the exported model, computed by the
    library in PyTorch (:func:`~attention_lib.decoding.translate`): what the page
    must show.

    Shapes:
        sentences: N strings; returns: N strings of space-separated French tokens

    Taught in ``chapters/05_transformer/06_translate_in_browser.md``.
    """
    model, data = load_translator(directory)
    settings = json.loads((Path(directory) / SETTINGS_FILE).read_text())
    return translate(model, data, sentences, max_len=settings["max_output"])[0]
