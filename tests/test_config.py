"""The experiment settings: each field is an argument of the function that uses it, the
dataclasses cannot be changed by accident, and no notebook retypes them."""
import dataclasses
import inspect
import json
import re
from pathlib import Path

import pytest
import torch

from attention_lib import Seq2SeqEncoder, load_fra_eng, train_seq2seq
from attention_lib.config import (
    CHAPTER1_SEQ2SEQ,
    CHAPTER3_COMPARISON,
    CHAPTER5_TRANSFORMER,
    D2L_BAHDANAU,
    Seq2SeqConfig,
    TransformerConfig,
)

ROOT = Path(__file__).resolve().parents[1]
# Where each setting goes: a parameter of one of these, under the same name (except the
# encoder's sizes, which are positional and named by the encoder's signature).
USERS = {
    "load_fra_eng": load_fra_eng,
    "Seq2SeqEncoder": Seq2SeqEncoder,
    "train_seq2seq": train_seq2seq,
}
RENAMED = {"batch_size": "loader(batch_size=...)"}


def test_every_setting_is_an_argument_of_the_function_that_uses_it():
    parameters = {
        name: set(inspect.signature(fn).parameters) for name, fn in USERS.items()
    }
    for field in dataclasses.fields(Seq2SeqConfig):
        if field.name in RENAMED:
            continue
        users = [name for name, params in parameters.items() if field.name in params]
        assert users, f"setting {field.name!r} is no argument of {list(USERS)}"


def test_every_transformer_setting_is_an_argument_of_the_function_that_uses_it():
    from attention_lib import TransformerEncoder

    from attention_lib import warmup_schedule

    users = [load_fra_eng, TransformerEncoder, train_seq2seq, torch.optim.AdamW,
             warmup_schedule]
    parameters = set().union(*(inspect.signature(fn).parameters for fn in users))
    # checkpoint_every: TimeBudget's `every` in chapter 5's race
    own = {"batch_size", "checkpoint_every"}
    for field in dataclasses.fields(TransformerConfig):
        assert field.name in parameters | own, field.name
    # The race uses chapter 3's data, so the two models see the same sentences.
    for name in ("num_steps", "min_freq", "max_train"):
        assert getattr(CHAPTER5_TRANSFORMER, name) == getattr(CHAPTER3_COMPARISON, name)


def test_settings_are_frozen_and_with_copies():
    with pytest.raises(dataclasses.FrozenInstanceError):
        CHAPTER1_SEQ2SEQ.lr = 1.0
    changed = CHAPTER3_COMPARISON.with_(num_epochs=1)
    assert changed.num_epochs == 1 and CHAPTER3_COMPARISON.num_epochs == 4
    assert changed.embed_size == CHAPTER3_COMPARISON.embed_size


def test_the_experiments_differ_where_the_pages_say():
    # chapter 1: two layers of 256; chapter 3: one layer of 128, no dropout; the d2l
    # benchmark: the book's 256/256 and sentences of 9 tokens
    assert (CHAPTER1_SEQ2SEQ.num_layers, CHAPTER1_SEQ2SEQ.num_hiddens) == (2, 256)
    assert (CHAPTER3_COMPARISON.num_layers, CHAPTER3_COMPARISON.dropout) == (1, 0.0)
    assert (D2L_BAHDANAU.embed_size, D2L_BAHDANAU.num_steps) == (256, 9)


RETYPED = re.compile(
    r"^\s*(EMBED_SIZE|NUM_HIDDENS|NUM_LAYERS|BATCH_SIZE)\b[^=\n]*=\s*\d", re.M
)


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "chapters").rglob("*.ipynb")),
    ids=lambda p: p.stem,
)
def test_no_notebook_retypes_a_training_setting(path):
    code = "\n".join(
        "".join(cell["source"])
        for cell in json.loads(path.read_text())["cells"]
        if cell["cell_type"] == "code"
    )
    assert not RETYPED.search(code), (
        f"{path.name} types a training setting as a number: take it from "
        "attention_lib/config.py"
    )


def test_the_retyping_pattern_finds_what_it_should():
    assert RETYPED.search("EMBED_SIZE, NUM_HIDDENS = 64, 128")
    assert not RETYPED.search("EMBED_SIZE, NUM_HIDDENS = config.embed_size, config.x")


def test_the_transformer_settings_build_their_model():
    from attention_lib.config import CHAPTER5_TRANSFORMER as config
    model = config.build(30, 40, max_len=20)
    encoder, decoder = model.encoder, model.decoder
    assert len(encoder.blocks) == len(decoder.blocks) == config.num_layers
    assert encoder.embedding.weight.shape == (30, config.embed_dim)
    assert decoder.dense.out_features == 40
    attention = decoder.blocks[0].self_attention
    assert (attention.num_heads, attention.embed_dim) == (config.num_heads,
                                                         config.embed_dim)
    assert decoder.blocks[0].ffn.ffn_hidden == config.ffn_hidden
    assert encoder.final_norm is not None  # norm_first
    assert encoder.positional.max_len == 20


def test_the_transformer_settings_build_their_optimiser_and_schedule():
    from attention_lib.config import CHAPTER5_TRANSFORMER as config
    model = config.build(30, 40, max_len=20)
    optimizer = config.optimizer(model.parameters())
    group = optimizer.param_groups[0]
    assert isinstance(optimizer, torch.optim.AdamW)
    assert (group["betas"], group["weight_decay"]) == (config.betas,
                                                       config.weight_decay)
    schedule = config.schedule(optimizer)
    assert group["lr"] == pytest.approx(config.lr / config.warmup_steps)  # update 1
    for _ in range(config.warmup_steps + 5):
        optimizer.step()
        schedule.step()
    assert group["lr"] == pytest.approx(config.lr)  # warmed up, then held
