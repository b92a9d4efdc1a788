"""Each chapter-1 checker accepts the solution and rejects typical wrong answers with a
specific message."""

import collections
import math

import pytest
import torch

from attention_lib import bleu, preprocess, truncate_pad
from attention_lib.exercises.ch01_seq2seq import _bleu_variant
from attention_lib.exercises import (
    check_bleu,
    check_preprocess,
    check_teacher_forcing_input,
    check_truncate_pad,
)
from answer_forms import in_form


def test_feedback_is_truthy_only_when_passed():
    ok, wrong = check_preprocess(preprocess), check_preprocess(lambda s: s)
    assert ok and not wrong
    assert str(ok).startswith("✓ ") and str(wrong).startswith("✗ ")
    assert "border-left" in wrong._repr_html_()


def _no_lower(text):
    return (
        preprocess(text.lower()).replace(preprocess(text.lower()), preprocess(text))
        if False
        else "".join(
            (" " + c if i and c in ",.!?" and text[i - 1] != " " else c)
            for i, c in enumerate(text.replace("\u202f", " ").replace("\xa0", " "))
        )
    )


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_no_lower, "forgot to lower-case"),
        (
            lambda t: "".join(
                (" " + c if c in ",.!?" else c)
                for c in t.lower().replace("\u202f", " ").replace("\xa0", " ")
            ),
            "double space",
        ),
        (
            lambda t: "".join(
                (" " + c if i and c in ",.!?" and t[i - 1] not in " \u202f" else c)
                for i, c in enumerate(t.lower())
            ),
            "non-breaking space",
        ),
        (lambda t: t.lower(), "Rule: a space goes before"),
        (lambda t: None, "returned None"),
        (lambda t: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_check_preprocess_names_the_mistake(wrong, message):
    feedback = check_preprocess(wrong)
    assert not feedback and message in feedback.message


def _not_implemented(*args):
    raise NotImplementedError


def test_check_preprocess_not_implemented():
    feedback = check_preprocess(_not_implemented)
    assert not feedback and feedback.todo
    assert feedback.message.startswith(
        "Your turn: replace the `raise NotImplementedError`"
    )


@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            lambda ix, n, pad: (
                ([pad] * (n - len(ix)) + ix)[:n] if len(ix) < n else ix[:n]
            ),
            "padded on the left",
        ),
        (
            lambda ix, n, pad: ix[-n:] if len(ix) > n else ix + [pad] * (n - len(ix)),
            "kept the end",
        ),
        (lambda ix, n, pad: ix + [pad] * (n - len(ix)), "truncate it"),
        (lambda ix, n, pad: ix[:n], "pad it"),
    ],
)
def test_check_truncate_pad(wrong, message):
    assert check_truncate_pad(lambda ix, n, pad: truncate_pad(ix, n, pad))
    feedback = check_truncate_pad(wrong)
    assert not feedback and message in feedback.message


def _solution_teacher_forcing(targets, bos):
    return torch.cat([torch.full((targets.shape[0], 1), bos), targets[:, :-1]], dim=1)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda y, bos: y, "read the very word it must predict"),
        (
            lambda y, bos: torch.cat(
                [y[:, 1:], torch.full((y.shape[0], 1), bos)], dim=1
            ),
            "shifted left",
        ),
        (
            lambda y, bos: torch.cat(
                [torch.full((y.shape[0], 1), 0), y[:, :-1]], dim=1
            ),
            "first column must be <bos>",
        ),
        (
            lambda y, bos: torch.cat([torch.full((y.shape[0], 1), bos), y], dim=1),
            "drop the last target position",
        ),
        (
            lambda y, bos: torch.cat(
                [torch.full((y.shape[0], 1), bos), y[:, 1:]], dim=1
            ),
            "replaces the first target word",
        ),
    ],
)
def test_check_teacher_forcing_input(wrong, message):
    assert check_teacher_forcing_input(_solution_teacher_forcing)
    feedback = check_teacher_forcing_input(wrong)
    assert not feedback and message in feedback.message


@pytest.mark.parametrize(
    "switch, message",
    [
        ({"brevity": False}, "brevity penalty"),
        ({"clip": False}, "not clipped"),
        ({"weighted": False}, "1/2^n"),
    ],
)
def test_check_bleu(switch, message):
    assert check_bleu(bleu)
    feedback = check_bleu(lambda p, l, k: _bleu_variant(p, l, k, **switch))
    assert not feedback and message in feedback.message


def _literal_bleu(pred_seq, label_seq, k, zero_beyond=False):
    """The exercise's formula read literally: n runs to k, whatever len_pred is."""
    pred, label = pred_seq.split(), label_seq.split()
    score = math.exp(min(0, 1 - len(label) / len(pred)))
    for n in range(1, k + 1):
        label_ngrams = collections.Counter(
            tuple(label[i : i + n]) for i in range(len(label) - n + 1))
        pred_ngrams = collections.Counter(
            tuple(pred[i : i + n]) for i in range(len(pred) - n + 1))
        matches = sum(min(c, label_ngrams[g]) for g, c in pred_ngrams.items())
        total = len(pred) - n + 1
        if zero_beyond and total <= 0:
            return 0.0
        score *= (matches / total) ** (0.5 ** n)
    return score


def _log_bleu(pred_seq, label_seq, k):
    """A correct form: log-space, Counter intersection for the clipped matches."""
    pred, label = pred_seq.split(), label_seq.split()
    log_score = min(0, 1 - len(label) / len(pred))
    for n in range(1, min(k, len(pred)) + 1):
        def grams(tokens, n=n):
            return collections.Counter(zip(*[tokens[i:] for i in range(n)]))

        matches = sum((grams(pred) & grams(label)).values())
        log_score += 0.5**n * math.log(matches / (len(pred) - n + 1))
    return math.exp(log_score)


def test_check_bleu_accepts_other_correct_forms():
    assert check_bleu(_log_bleu)
    assert check_bleu(lambda p, l, k: _bleu_variant(p, l, k))


def test_check_bleu_hints_at_min_k_len_pred():
    # The formula read literally divides by zero when k > len_pred.
    feedback = check_bleu(_literal_bleu)
    assert not feedback
    assert "ZeroDivisionError" in feedback.message
    assert "min(k, len_pred)" in feedback.message
    # Guarding the division with p_n = 0 makes the score 0: named too.
    feedback = check_bleu(lambda p, l, k: _literal_bleu(p, l, k, zero_beyond=True))
    assert not feedback and "precision as 0" in feedback.message


def test_check_bleu_other_mistakes_show_a_case():
    feedback = check_bleu(lambda p, l, k: 0.5)
    assert not feedback and "expected 1.0000" in feedback.message


# --------------------------------------------------------------------------- forms,
# fixed parameters, odd answers


@pytest.mark.parametrize("form", ["list", "tuple", "numpy", "float64", "float16"])
def test_check_truncate_pad_accepts_any_form(form):
    feedback = check_truncate_pad(in_form(truncate_pad, form))
    assert feedback, feedback


@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            lambda ix, n, pad: truncate_pad(ix, n, 0),
            "Pad with the `pad` argument (1), not with 0",
        ),
        (lambda ix, n, pad: truncate_pad(ix, 5, pad), "expected 4"),
        (
            lambda ix, n, pad: truncate_pad(ix, n, 1),
            "Pad with the `pad` argument (0), not with 1",
        ),
    ],
)
def test_check_truncate_pad_rejects_fixed_parameters(wrong, message):
    feedback = check_truncate_pad(wrong)
    assert not feedback and message in feedback.message, feedback.message


@pytest.mark.parametrize(
    "form", ["list", "tuple", "numpy", "float64", "float32", "float16", "list_of_rows"]
)
def test_check_teacher_forcing_input_accepts_any_form(form):
    feedback = check_teacher_forcing_input(in_form(_solution_teacher_forcing, form))
    assert feedback, feedback


def test_check_teacher_forcing_input_rejects_a_fixed_bos():
    feedback = check_teacher_forcing_input(
        lambda y, bos: _solution_teacher_forcing(y, 1)
    )
    assert (
        not feedback
        and "first column must be <bos>, the `bos` argument (3)" in feedback.message
    )


def test_check_teacher_forcing_input_rejects_a_fixed_shape():
    feedback = check_teacher_forcing_input(
        lambda y, bos: _solution_teacher_forcing(y, bos).reshape(2, 5)
    )
    assert not feedback and "raised RuntimeError" in feedback.message


@pytest.mark.parametrize(
    "form", ["numpy", "numpy32", "tensor", "tensor64", "float16", "one_element"]
)
def test_check_bleu_accepts_any_form(form):
    feedback = check_bleu(in_form(bleu, form))
    assert feedback, feedback


@pytest.mark.parametrize("fixed", [1, 2, 3])
def test_check_bleu_rejects_a_fixed_k(fixed):
    feedback = check_bleu(lambda p, l, k: bleu(p, l, fixed))
    assert (
        not feedback and f"n-grams up to {fixed} whatever k is" in feedback.message
    ), feedback.message


def test_check_preprocess_rejects_an_answer_that_ignores_its_input():
    feedback = check_preprocess(lambda t: preprocess("Go."))
    assert not feedback and "expected 'hello , world !'" in feedback.message


ODD_ANSWERS = [
    (None, "None"),
    ("le chat", "the str 'le chat'"),
    (torch.zeros(2, 3, 4), "(2, 3, 4)"),
    ({"a": 1}, "a dict"),
]


@pytest.mark.parametrize("answer, named", ODD_ANSWERS)
@pytest.mark.parametrize(
    "check, arity",
    [
        (check_truncate_pad, 3),
        (check_teacher_forcing_input, 2),
        (check_bleu, 3),
        (check_preprocess, 1),
    ],
)
def test_odd_answers_get_feedback_naming_them(check, arity, answer, named):
    if check is check_preprocess and isinstance(answer, str):
        answer = 42
        named = "the int 42"
    feedback = check(lambda *args: answer)
    assert not feedback and "✗" in str(feedback)
    assert named in feedback.message or (
        answer is None and "returned None" in feedback.message
    ), feedback.message


@pytest.mark.parametrize(
    "check",
    [check_truncate_pad, check_teacher_forcing_input, check_bleu, check_preprocess],
)
def test_an_exception_in_the_answer_becomes_feedback(check):
    def broken(*args):
        raise KeyError("oops")
    feedback = check(broken)
    assert not feedback and "Your function raised KeyError: 'oops'" in feedback.message


# --- predicting the number of parameters ----------------------------------------------

from attention_lib.exercises import check_num_parameters  # noqa: E402
from attention_lib.exercises.ch01_seq2seq import _seq2seq_parameters  # noqa: E402


def assert_rejects(feedback, *phrases):
    assert not feedback, f"checker accepted a wrong answer: {feedback}"
    for phrase in phrases:
        assert phrase in feedback.message, f"{phrase!r} not in {feedback.message!r}"


def not_implemented(*args):
    raise NotImplementedError


def test_num_parameters_formula_equals_the_modules():
    from attention_lib import EncoderDecoder, Seq2SeqDecoder, Seq2SeqEncoder

    for sizes in [(2948, 4465, 128, 256, 2), (5, 6, 2, 3, 4)]:
        src_vocab, tgt_vocab, embed, hiddens, layers = sizes
        model = EncoderDecoder(Seq2SeqEncoder(src_vocab, embed, hiddens, layers),
                               Seq2SeqDecoder(tgt_vocab, embed, hiddens, layers))
        assert _seq2seq_parameters(*sizes) == sum(p.numel() for p in model.parameters())


def test_num_parameters_accepts_the_solution_in_any_number_form():
    def solution(src_vocab_size, tgt_vocab_size, embed_size, num_hiddens, num_layers):
        def gru(input_size):
            return 3 * num_hiddens * (input_size + num_hiddens) + 6 * num_hiddens

        rest = (num_layers - 1) * gru(num_hiddens)
        encoder = src_vocab_size * embed_size + gru(embed_size) + rest
        decoder = (tgt_vocab_size * embed_size + gru(embed_size + num_hiddens) + rest
                   + num_hiddens * tgt_vocab_size + tgt_vocab_size)
        return encoder + decoder

    feedback = check_num_parameters(solution)
    assert feedback and "3,675,377" in feedback.message
    assert check_num_parameters(lambda *a: float(solution(*a)))
    assert check_num_parameters(lambda *a: torch.tensor(solution(*a)))


@pytest.mark.parametrize("switch, phrase", [
    ({"biases": 1}, "b_ih and b_hh"),
    ({"context": False}, "E + Ds, not E"),
    ({"gates": 1}, "three sets of weights"),
    ({"gates": 4}, "an LSTM's count"),
    ({"output_bias": False}, "has a bias of V numbers"),
    ({"same_input": True}, "layers 2 and up"),
])
def test_num_parameters_names_each_typical_miscount(switch, phrase):
    assert_rejects(
        check_num_parameters(lambda *a: _seq2seq_parameters(*a, **switch)), phrase
    )


def test_num_parameters_rejects_a_constant_and_non_numbers():
    assert_rejects(
        check_num_parameters(lambda *a: 3_675_377),
        "(10, 12, 4, 6, 1) you count 3,675,377",
        "the model has 712",
    )
    assert_rejects(
        check_num_parameters(not_implemented), "Your turn: replace the `raise"
    )
    assert_rejects(check_num_parameters(lambda *a: None), "returned None")
    assert_rejects(check_num_parameters(lambda *a: "many"), "one number")


def test_num_parameters_bias_message_says_which_biases_fold():
    # b_hn sits inside r * (W_hn h + b_hn): only the r and z biases could be one vector.
    feedback = check_num_parameters(
        lambda *case: _seq2seq_parameters(*case, biases=1))
    assert_rejects(feedback, "b_ih and b_hh", "b_hn", "reset and update gates")
    assert "although one would do" not in feedback.message


def test_gru_r_and_z_biases_fold_but_the_candidates_do_not():
    torch.manual_seed(0)
    gru = torch.nn.GRU(3, 4, batch_first=True)
    x = torch.randn(2, 5, 3)
    expected, _ = gru(x)
    for gates, changes in [(slice(0, 8), False), (slice(0, 12), True)]:
        folded = torch.nn.GRU(3, 4, batch_first=True)
        folded.load_state_dict(gru.state_dict())
        with torch.no_grad():
            folded.bias_ih_l0[gates] += folded.bias_hh_l0[gates]
            folded.bias_hh_l0[gates] = 0
        got, _ = folded(x)
        assert torch.allclose(got, expected, atol=1e-6) != changes
