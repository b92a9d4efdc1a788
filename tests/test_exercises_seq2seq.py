"""Each chapter-1 checker accepts the solution and rejects typical wrong answers with a specific message."""
import math

import pytest
import torch

from attention_lib import bleu, preprocess, truncate_pad
from attention_lib.exercises.seq2seq import _bleu_variant
from attention_lib.exercises import check_bleu, check_preprocess, check_teacher_forcing_input, check_truncate_pad


def test_feedback_is_truthy_only_when_passed():
    ok, wrong = check_preprocess(preprocess), check_preprocess(lambda s: s)
    assert ok and not wrong
    assert str(ok).startswith("✅") and str(wrong).startswith("❌")
    assert "border-left" in wrong._repr_html_()


def _no_lower(text):
    return preprocess(text.lower()).replace(preprocess(text.lower()), preprocess(text)) if False else \
        "".join((" " + c if i and c in ",.!?" and text[i - 1] != " " else c) for i, c in enumerate(
            text.replace("\u202f", " ").replace("\xa0", " ")))


@pytest.mark.parametrize("wrong, message", [
    (_no_lower, "forgot to lower-case"),
    (lambda t: "".join((" " + c if c in ",.!?" else c) for c in t.lower().replace("\u202f", " ").replace("\xa0", " ")),
     "double space"),
    (lambda t: "".join((" " + c if i and c in ",.!?" and t[i - 1] not in " \u202f" else c)
                       for i, c in enumerate(t.lower())), "non-breaking space"),
    (lambda t: t.lower(), "Rule: a space goes before"),
    (lambda t: None, "returned None"),
    (lambda t: 1 / 0, "raised ZeroDivisionError"),
])
def test_check_preprocess_names_the_mistake(wrong, message):
    feedback = check_preprocess(wrong)
    assert not feedback and message in feedback.message


def _not_implemented(*args):
    raise NotImplementedError


def test_check_preprocess_not_implemented():
    assert "Not implemented yet" in check_preprocess(_not_implemented).message


@pytest.mark.parametrize("wrong, message", [
    (lambda ix, n, pad: ([pad] * (n - len(ix)) + ix)[:n] if len(ix) < n else ix[:n], "padded on the left"),
    (lambda ix, n, pad: ix[-n:] if len(ix) > n else ix + [pad] * (n - len(ix)), "kept the end"),
    (lambda ix, n, pad: ix + [pad] * (n - len(ix)), "truncate it"),
    (lambda ix, n, pad: ix[:n], "pad it"),
])
def test_check_truncate_pad(wrong, message):
    assert check_truncate_pad(lambda ix, n, pad: truncate_pad(ix, n, pad))
    feedback = check_truncate_pad(wrong)
    assert not feedback and message in feedback.message


def _solution_teacher_forcing(targets, bos):
    return torch.cat([torch.full((targets.shape[0], 1), bos), targets[:, :-1]], dim=1)


@pytest.mark.parametrize("wrong, message", [
    (lambda y, bos: y, "read the very word it must predict"),
    (lambda y, bos: torch.cat([y[:, 1:], torch.full((y.shape[0], 1), bos)], dim=1), "shifted left"),
    (lambda y, bos: torch.cat([torch.full((y.shape[0], 1), 0), y[:, :-1]], dim=1), "first column must be <bos>"),
    (lambda y, bos: torch.cat([torch.full((y.shape[0], 1), bos), y], dim=1), "drop the last target position"),
])
def test_check_teacher_forcing_input(wrong, message):
    assert check_teacher_forcing_input(_solution_teacher_forcing)
    feedback = check_teacher_forcing_input(wrong)
    assert not feedback and message in feedback.message


@pytest.mark.parametrize("switch, message", [
    ({"brevity": False}, "brevity penalty"), ({"clip": False}, "not clipped"), ({"weighted": False}, "1/2^n")])
def test_check_bleu(switch, message):
    assert check_bleu(bleu)
    feedback = check_bleu(lambda p, l, k: _bleu_variant(p, l, k, **switch))
    assert not feedback and message in feedback.message


def test_check_bleu_other_mistakes_show_a_case():
    feedback = check_bleu(lambda p, l, k: 0.5)
    assert not feedback and "expected 1.0000" in feedback.message
