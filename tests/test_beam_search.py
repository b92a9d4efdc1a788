"""Beam search: beam 1 is greedy, a wide beam is exhaustive search, the weights follow
the chosen output."""
import itertools

import pytest
import torch
from torch.nn import functional as F

from attention_lib import (
    BahdanauDecoder,
    Decoder,
    EncoderDecoder,
    Seq2SeqDecoder,
    Seq2SeqEncoder,
    beam_search,
    greedy_decode,
    set_seed,
    translate,
)

BOS, EOS = 1, 2
SRC = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])
SRC_LENS = torch.tensor([4, 2])


def make_model(vocab_size=12, seed=0):
    set_seed(seed)
    model = EncoderDecoder(
        Seq2SeqEncoder(10, 8, 16), BahdanauDecoder(vocab_size, 8, 16)
    ).eval()
    # sharpen the output distribution, so that beams really differ
    with torch.no_grad():
        model.decoder.dense.weight.mul_(8)
    return model


def test_beam_of_one_is_greedy():
    model = make_model()
    greedy, greedy_weights = greedy_decode(model, SRC, SRC_LENS, BOS, EOS, max_len=7)
    beam, beam_weights = beam_search(
        model, SRC, SRC_LENS, BOS, EOS, max_len=7, beam_size=1
    )
    assert beam == greedy
    assert len(beam_weights) == len(greedy_weights) == len(greedy)
    for i, row in enumerate(greedy):
        assert beam_weights[i].shape == (max(len(row), 1), SRC.shape[1])  # (T, Lk)
        torch.testing.assert_close(beam_weights[i], greedy_weights[i])


@torch.no_grad()
def _sequence_log_prob(model, src, src_lens, tokens):
    """log p(tokens | src) by teacher forcing."""
    state = model.decoder.init_state(model.encoder(src, src_lens), src_lens)
    tgt_input = torch.tensor([[BOS] + tokens[:-1]])
    log_probs = F.log_softmax(model.decoder(tgt_input, state)[0], dim=-1)[0]  # (T, V)
    return float(log_probs[torch.arange(len(tokens)), torch.tensor(tokens)].sum())


@pytest.mark.parametrize("length_penalty", [0.0, 0.75])
def test_a_wide_beam_finds_the_best_sequence(length_penalty):
    """With a beam as wide as the number of hypotheses, beam search is exhaustive
    search."""
    vocab_size, max_len = 5, 3
    model = make_model(vocab_size, seed=3)
    words = range(vocab_size)
    candidates = []
    for length in range(1, max_len + 1):
        for prefix in itertools.product(
            [w for w in words if w != EOS], repeat=length - 1
        ):
            candidates.append(list(prefix) + [EOS])  # finished
    candidates += [
        list(p)
        for p in itertools.product([w for w in words if w != EOS], repeat=max_len)
    ]  # cut off
    for i in range(2):
        src, lens = SRC[i:i + 1], SRC_LENS[i:i + 1]
        scores = [
            _sequence_log_prob(model, src, lens, c) / len(c) ** length_penalty
            for c in candidates
        ]
        best = candidates[max(range(len(candidates)), key=scores.__getitem__)]
        expected = best[:-1] if best[-1] == EOS else best
        found, _ = beam_search(
            model,
            src,
            lens,
            BOS,
            EOS,
            max_len,
            beam_size=vocab_size**max_len,
            length_penalty=length_penalty,
        )
        assert found[0] == expected


def test_batch_equals_one_sentence_at_a_time():
    model = make_model()
    batch, batch_weights = beam_search(
        model, SRC, SRC_LENS, BOS, EOS, max_len=6, beam_size=3
    )
    for i, n in enumerate(SRC_LENS.tolist()):
        alone, alone_weights = beam_search(
            model,
            SRC[i : i + 1, :n],
            SRC_LENS[i : i + 1],
            BOS,
            EOS,
            max_len=6,
            beam_size=3,
        )
        assert batch[i] == alone[0]
        torch.testing.assert_close(batch_weights[i][:, :n], alone_weights[0])
        assert (batch_weights[i][:, n:] == 0).all()


def test_beam_search_stops_at_eos():
    model = make_model()
    with torch.no_grad():
        model.decoder.dense.bias[EOS] = 1e4
    sentences, weights = beam_search(
        model, SRC, SRC_LENS, BOS, EOS, max_len=6, beam_size=3
    )
    assert sentences == [[], []] and weights[0].shape == (1, 4)


def test_the_fixed_context_decoder_follows_the_protocol_too():
    """Chapter 1's decoder can reorder its state, so beam search works for it."""
    set_seed(0)
    model = EncoderDecoder(Seq2SeqEncoder(10, 4, 8), Seq2SeqDecoder(10, 4, 8))
    assert isinstance(model.decoder, Decoder)
    greedy, greedy_weights = greedy_decode(model, SRC, SRC_LENS, BOS, EOS, max_len=5)
    beam, beam_weights = beam_search(
        model, SRC, SRC_LENS, BOS, EOS, max_len=5, beam_size=1
    )
    assert beam == greedy and beam_weights == greedy_weights == []
    wide, _ = beam_search(model, SRC, SRC_LENS, BOS, EOS, max_len=5, beam_size=3)
    assert len(wide) == len(SRC)


def test_a_decoder_outside_the_protocol_is_named():
    class Bare(torch.nn.Module):  # forward only
        def forward(self, tgt_input, state):
            return tgt_input, state

    model = EncoderDecoder(Seq2SeqEncoder(10, 4, 8), Bare())
    for decode in (greedy_decode, beam_search):
        with pytest.raises(TypeError, match="Bare does not follow the decoder protocol"
                           ".*init_state, reorder_state, attention_weights"):
            decode(model, SRC, SRC_LENS, BOS, EOS, max_len=3)
    with pytest.raises(ValueError, match="beam_size must be at least 1"):
        beam_search(make_model(), SRC, SRC_LENS, BOS, EOS, max_len=3, beam_size=0)
    with pytest.raises(ValueError, match="beam_size must be at least 1"):
        beam_search(make_model(), SRC, SRC_LENS, BOS, EOS, max_len=3, beam_size=0)


def test_translate_with_a_beam_is_beam_search_on_the_encoded_sentences(small_data):
    set_seed(0)
    model = EncoderDecoder(Seq2SeqEncoder(len(small_data.src_vocab), 8, 16),
                           BahdanauDecoder(len(small_data.tgt_vocab), 8, 16))
    with torch.no_grad():
        model.decoder.dense.weight.mul_(8)
    sentences = [english for english, _ in small_data.raw["test"][:5]]
    vocab = small_data.tgt_vocab
    translations, weights = translate(
        model, small_data, sentences, beam_size=3, batch_size=2
    )
    src, lens = small_data.encode_source(sentences)
    expected, expected_weights = beam_search(
        model, src, lens, vocab.bos, vocab.eos, small_data.num_steps + 2, beam_size=3
    )
    assert translations == [" ".join(vocab.to_tokens(row)) for row in expected]
    # the beam changed something
    assert translations != translate(model, small_data, sentences)[0]
    assert len(weights) == len(sentences)
    for got, want in zip(weights, expected_weights):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (
            {"beam_size": 2.0},
            TypeError,
            r"beam_size must be an integer \(at least 1\), got the float 2.0",
        ),
        ({"beam_size": True}, TypeError, "beam_size must be an integer"),
        ({"length_penalty": None}, TypeError, "length_penalty must be a finite number"),
        (
            {"length_penalty": float("nan")},
            TypeError,
            "length_penalty must be a finite number",
        ),
    ],
)
def test_bad_beam_arguments_are_named(kwargs, error, message):
    with pytest.raises(error, match=message):
        beam_search(make_model(), SRC, SRC_LENS, BOS, EOS, max_len=3, **kwargs)


def test_beam_search_accepts_numpy_integers():
    import numpy as np

    found, _ = beam_search(
        make_model(),
        SRC,
        SRC_LENS,
        np.int64(BOS),
        np.int64(EOS),
        max_len=np.int64(4),
        beam_size=np.int64(2),
    )
    assert (
        found
        == beam_search(make_model(), SRC, SRC_LENS, BOS, EOS, max_len=4, beam_size=2)[0]
    )


def _small_model(small_data):
    set_seed(0)
    return EncoderDecoder(Seq2SeqEncoder(len(small_data.src_vocab), 8, 16),
                          BahdanauDecoder(len(small_data.tgt_vocab), 8, 16))


@pytest.mark.parametrize(
    "sentences, message",
    [
        (
            "Go.",
            (
                r"sentences must be a list of strings \(e.g. \['Go.'\]\), got the str"
                r" 'Go.'"
            ),
        ),
        (
            ["Go.", ["Hi", "."]],
            (
                r"sentences must be a list of strings, but sentences\[1\] is a list of"
                r" length 2"
            ),
        ),
        (None, "sentences must be a list of strings"),
    ],
)
def test_translate_names_sentences_that_are_not_a_list_of_strings(
    small_data, sentences, message
):
    with pytest.raises(TypeError, match=message):
        translate(_small_model(small_data), small_data, sentences)


def test_translate_an_empty_list_and_max_len_zero(small_data):
    model = _small_model(small_data)
    assert translate(model, small_data, []) == ([], [])
    # not the default max_len
    assert translate(model, small_data, ("Go.", "Hi."), max_len=0) == (["", ""], [])
    assert translate(model, small_data, ["Go."], max_len=0, beam_size=2) == ([""], [])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"batch_size": 0}, ValueError, "batch_size must be at least 1, got 0"),
        ({"beam_size": 0}, ValueError, "beam_size must be at least 1, got 0"),
        ({"max_len": -3}, ValueError, "max_len must be at least 0, got -3"),
    ],
)
def test_translate_names_bad_settings_even_for_no_sentences(
    small_data, kwargs, error, message
):
    model = _small_model(small_data)
    for sentences in (["Go."], []):
        with pytest.raises(error, match=message):
            translate(model, small_data, sentences, **kwargs)
