"""The decoder protocol, greedy decoding, beam search and translate
(``attention_lib/decoding.py``): beam 1 is greedy, a wide beam is exhaustive search,
the weights follow the chosen output, a batch decodes as each sentence alone, and the
source may be tokens or images."""
import itertools

import pytest
import torch
from torch import nn
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
# chapter 1's fixed-context model: vocabularies, embedding, state size, layers
V_SRC, V_TGT, E, HD, LAYERS = 30, 40, 8, 16, 2
# a captioner that reads images: vocabulary, decoder state, image channels
IMG_V, DS, C = 7, 16, 4
IMG_BOS, IMG_EOS = 5, 6
HGT, W = 3, 5  # the image grid: P = 15 keys
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
    greedy, greedy_weights = greedy_decode(model, SRC, SRC_LENS, BOS, EOS, max_len=7,
                                           need_weights=True)
    beam, beam_weights = beam_search(
        model, SRC, SRC_LENS, BOS, EOS, max_len=7, beam_size=1, need_weights=True
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
            length_penalty=length_penalty, need_weights=True,
        )
        assert found[0] == expected


def test_batch_equals_one_sentence_at_a_time():
    model = make_model()
    batch, batch_weights = beam_search(
        model, SRC, SRC_LENS, BOS, EOS, max_len=6, beam_size=3, need_weights=True
    )
    for i, n in enumerate(SRC_LENS.tolist()):
        alone, alone_weights = beam_search(
            model,
            SRC[i : i + 1, :n],
            SRC_LENS[i : i + 1],
            BOS,
            EOS,
            max_len=6,
            beam_size=3, need_weights=True,
        )
        assert batch[i] == alone[0]
        torch.testing.assert_close(batch_weights[i][:, :n], alone_weights[0])
        assert (batch_weights[i][:, n:] == 0).all()


def test_beam_search_stops_at_eos():
    model = make_model()
    with torch.no_grad():
        model.decoder.dense.bias[EOS] = 1e4
    sentences, weights = beam_search(
        model, SRC, SRC_LENS, BOS, EOS, max_len=6, beam_size=3, need_weights=True
    )
    assert sentences == [[], []] and weights[0].shape == (1, 4)


def test_the_fixed_context_decoder_follows_the_protocol_too():
    """Chapter 1's decoder can reorder its state, so beam search works for it."""
    set_seed(0)
    model = EncoderDecoder(Seq2SeqEncoder(10, 4, 8), Seq2SeqDecoder(10, 4, 8))
    assert isinstance(model.decoder, Decoder)
    greedy, greedy_weights = greedy_decode(model, SRC, SRC_LENS, BOS, EOS, max_len=5,
                                           need_weights=True)
    beam, beam_weights = beam_search(
        model, SRC, SRC_LENS, BOS, EOS, max_len=5, beam_size=1, need_weights=True
    )
    assert beam == greedy and beam_weights == greedy_weights == []
    wide, _ = beam_search(model, SRC, SRC_LENS, BOS, EOS, max_len=5, beam_size=3,
                          need_weights=True)
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
        beam_search(make_model(), SRC, SRC_LENS, BOS, EOS, max_len=3, beam_size=0,
                    need_weights=True)
    with pytest.raises(ValueError, match="beam_size must be at least 1"):
        beam_search(make_model(), SRC, SRC_LENS, BOS, EOS, max_len=3, beam_size=0,
                    need_weights=True)


def test_translate_with_a_beam_is_beam_search_on_the_encoded_sentences(small_data):
    set_seed(0)
    model = EncoderDecoder(Seq2SeqEncoder(len(small_data.src_vocab), 8, 16),
                           BahdanauDecoder(len(small_data.tgt_vocab), 8, 16))
    with torch.no_grad():
        model.decoder.dense.weight.mul_(8)
    sentences = [english for english, _ in small_data.raw["test"][:5]]
    vocab = small_data.tgt_vocab
    translations, weights = translate(
        model, small_data, sentences, beam_size=3, batch_size=2, need_weights=True
    )
    src, lens = small_data.encode_source(sentences)
    expected, expected_weights = beam_search(
        model, src, lens, vocab.bos, vocab.eos, small_data.num_steps + 2, beam_size=3,
            need_weights=True
    )
    assert translations == [" ".join(vocab.to_tokens(row)) for row in expected]
    # the beam changed something
    assert translations != translate(model, small_data, sentences, need_weights=True)[0]
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
        beam_search(make_model(), SRC, SRC_LENS, BOS, EOS, max_len=3, **kwargs,
                    need_weights=True)


def test_beam_search_accepts_numpy_integers():
    import numpy as np

    found, _ = beam_search(
        make_model(),
        SRC,
        SRC_LENS,
        np.int64(BOS),
        np.int64(EOS),
        max_len=np.int64(4),
        beam_size=np.int64(2), need_weights=True,
    )
    assert (
        found
        == beam_search(make_model(), SRC, SRC_LENS, BOS, EOS, max_len=4, beam_size=2,
                       need_weights=True)[0]
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
        translate(_small_model(small_data), small_data, sentences, need_weights=True)


def test_translate_an_empty_list_and_max_len_zero(small_data):
    model = _small_model(small_data)
    assert translate(model, small_data, [], need_weights=True) == ([], [])
    # not the default max_len
    assert translate(model, small_data, ("Go.", "Hi."), max_len=0,
                     need_weights=True) == (["", ""], [])
    assert translate(model, small_data, ["Go."], max_len=0, beam_size=2,
                     need_weights=True) == ([""], [])


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
            translate(model, small_data, sentences, **kwargs, need_weights=True)


# --- greedy decoding with chapter 1's fixed-context decoder -------------------------

def make_fixed_context_model():
    set_seed(0)
    return EncoderDecoder(
        Seq2SeqEncoder(V_SRC, E, HD, LAYERS), Seq2SeqDecoder(V_TGT, E, HD, LAYERS)
    ).eval()


def test_batch_decoding_equals_one_at_a_time():
    model = make_fixed_context_model()
    src = torch.randint(4, V_SRC, (3, 6))
    valid_lens = torch.tensor([6, 3, 2])
    batch, _ = greedy_decode(model, src, valid_lens, bos=1, eos=2, max_len=8,
                             need_weights=True)
    for i in range(3):
        alone, _ = greedy_decode(
            model,
            src[i : i + 1, : valid_lens[i]],
            valid_lens[i : i + 1],
            bos=1,
            eos=2,
            max_len=8, need_weights=True,
        )
        assert batch[i] == alone[0]


def test_greedy_decoding_stops_at_eos():
    model = make_fixed_context_model()
    with torch.no_grad():
        model.decoder.dense.bias.zero_()
        model.decoder.dense.bias[2] = 100.0  # <eos> always wins
    sentences, weights = greedy_decode(
        model, torch.randint(4, V_SRC, (2, 5)), None, bos=1, eos=2, max_len=10,
            need_weights=True
    )
    assert sentences == [[], []]
    assert weights == []  # this decoder keeps no attention weights


def test_greedy_decoding_respects_max_len():
    model = make_fixed_context_model()
    with torch.no_grad():
        model.decoder.dense.bias.zero_()
        model.decoder.dense.bias[7] = 100.0  # never <eos>
    sentences, _ = greedy_decode(
        model, torch.randint(4, V_SRC, (2, 5)), None, bos=1, eos=2, max_len=4,
            need_weights=True
    )
    assert sentences == [[7] * 4, [7] * 4]


def test_max_len_zero_gives_empty_outputs_in_greedy_and_beam_search():
    set_seed(0)
    model = EncoderDecoder(
        Seq2SeqEncoder(V_SRC, E, HD), BahdanauDecoder(V_TGT, E, HD)
    ).eval()
    src, lens = torch.randint(4, V_SRC, (3, 5)), torch.tensor([5, 2, 1])
    greedy = greedy_decode(model, src, lens, bos=1, eos=2, max_len=0, need_weights=True)
    beam = beam_search(model, src, lens, bos=1, eos=2, max_len=0, beam_size=3,
                       need_weights=True)
    assert greedy == beam == ([[], [], []], [])
    fixed_context = make_fixed_context_model()
    assert greedy_decode(fixed_context, src, lens, bos=1, eos=2, max_len=0,
                         need_weights=True) == (
        [[], [], []],
        [],
    )


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"max_len": -1}, ValueError, "max_len must be at least 0, got -1"),
        (
            {"max_len": 2.5},
            TypeError,
            r"max_len must be an integer \(at least 0\), got the float 2.5",
        ),
        ({"max_len": None}, TypeError, "max_len must be an integer"),
        (
            {"bos": V_TGT},
            ValueError,
            (
                r"bos must be a token index of the target vocabulary, in \[0,"
                rf" {V_TGT}\), got {V_TGT}"
            ),
        ),
        ({"eos": -2}, ValueError, "eos must be at least 0, got -2"),
    ],
)
def test_bad_decoding_arguments_are_named_the_same_by_greedy_and_beam_search(
    kwargs, error, message
):
    set_seed(0)
    model = EncoderDecoder(
        Seq2SeqEncoder(V_SRC, E, HD), BahdanauDecoder(V_TGT, E, HD)
    ).eval()
    args = {"bos": 1, "eos": 2, "max_len": 3, **kwargs}
    src = torch.randint(4, V_SRC, (2, 5))
    for decode in (greedy_decode, beam_search):
        with pytest.raises(error, match=message):
            decode(model, src, None, **args)


# --- decoding from images: the source is whatever the encoder reads. A float source (a
# batch of images) is left to the encoder to check; a source of tokens is still checked
# by the decoding functions (chapter 7's captioner) ----------------------------------

class GridEncoder(nn.Module):
    """A 1 × 1 convolution's grid as keys/values; the first state from its mean."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, C, 1)
        self.to_state = nn.Linear(C, DS)

    def forward(self, images, src_valid_lens=None):
        if not images.is_floating_point() or images.dim() != 4:
            raise TypeError("images must be a float (B, 1, Hgt, W) tensor")
        keys = self.conv(images).flatten(2).transpose(1, 2)  # (B, P, C)
        state = torch.tanh(self.to_state(keys.mean(dim=1)))  # (B, Ds)
        return keys, state.unsqueeze(0)  # (B, P, C), (1, B, Ds)


def make_captioner():
    set_seed(0)
    decoder = BahdanauDecoder(IMG_V, E, DS, key_size=C)
    return EncoderDecoder(GridEncoder(), decoder).eval()


def images(batch_size=3):
    return torch.rand(batch_size, 1, HGT, W, generator=torch.Generator().manual_seed(1))


def test_greedy_decode_takes_a_batch_of_images():
    model = make_captioner()
    outputs, weights = greedy_decode(model, images(), None, IMG_BOS, IMG_EOS, max_len=4,
                                     need_weights=True)
    assert len(outputs) == len(weights) == 3
    for output, w in zip(outputs, weights):
        assert len(output) <= 4 and IMG_EOS not in output
        assert w.shape == (max(len(output), 1), HGT * W)  # one row per step, P keys
        torch.testing.assert_close(w.sum(-1), torch.ones(len(w)))


def test_greedy_decode_from_images_follows_the_model_step_by_step():
    model = make_captioner()
    with torch.no_grad():  # an output that never ends: every step writes token 2
        model.decoder.dense.bias.zero_()
        model.decoder.dense.bias[2] = 100.0
    x = images()
    outputs, weights = greedy_decode(model, x, None, IMG_BOS, IMG_EOS, max_len=3,
                                     need_weights=True)
    assert outputs == [[2, 2, 2]] * 3
    # The same weights as one teacher-forced call on <bos> 2 2.
    tgt_input = torch.tensor([[IMG_BOS, 2, 2]] * 3)
    with torch.no_grad():
        model(x, None, tgt_input, need_weights=True)
    torch.testing.assert_close(torch.stack(weights), model.decoder.attention_weights)


def test_beam_search_of_size_one_is_greedy_decoding_from_images():
    model = make_captioner()
    greedy = greedy_decode(model, images(), None, IMG_BOS, IMG_EOS, max_len=4,
                           need_weights=True)
    beam = beam_search(model, images(), None, IMG_BOS, IMG_EOS, max_len=4, beam_size=1,
                       need_weights=True)
    assert beam[0] == greedy[0]
    for b, g in zip(beam[1], greedy[1]):
        torch.testing.assert_close(b, g)


def test_valid_lengths_of_an_image_source_count_keys_and_reach_the_decoder():
    model = make_captioner()
    x = images()
    all_keys = torch.full((3,), HGT * W)
    assert greedy_decode(model, x, all_keys, IMG_BOS, IMG_EOS, max_len=3,
                         need_weights=True)[0] == (
        greedy_decode(model, x, None, IMG_BOS, IMG_EOS, max_len=3, need_weights=True)[0]
    )
    # Fewer valid keys: the decoder masks the rest (weights zero there).
    _, weights = greedy_decode(model, x, torch.tensor([4, 15, 9]), IMG_BOS, IMG_EOS, 3,
                               need_weights=True)
    assert float(weights[0][:, 4:].abs().sum()) == 0.0
    assert float(weights[2][:, 9:].abs().sum()) == 0.0
    with pytest.raises(ValueError, match="src_valid_lens must lie in"):
        greedy_decode(model, x, torch.tensor([16, 1, 1]), IMG_BOS, IMG_EOS, 3,
                      need_weights=True)


@pytest.mark.parametrize("decode", [greedy_decode, beam_search])
def test_a_source_of_tokens_is_still_checked(decode):
    set_seed(0)
    model = EncoderDecoder(
        Seq2SeqEncoder(9, E, DS), BahdanauDecoder(IMG_V, E, DS)
    ).eval()
    with pytest.raises(TypeError, match=r"src must be a \(B, L\) tensor of token"):
        decode(model, torch.zeros(5, dtype=torch.long), None, IMG_BOS, IMG_EOS, 3)
    with pytest.raises(TypeError, match=r"src must be a \(B, L\) tensor of token"):
        decode(model, [[1, 2, 3]], None, IMG_BOS, IMG_EOS, 3)
    with pytest.raises(ValueError, match=r"src_valid_lens must lie in \[0, 5\]"):
        decode(model, torch.ones(2, 5, dtype=torch.long), torch.tensor([6, 1]),
               IMG_BOS, IMG_EOS, 3)
    # A float batch given to a model that reads tokens: its encoder names it.
    with pytest.raises(TypeError, match=r"src must be a \(B, L\) tensor of token"):
        decode(model, torch.rand(2, 5), None, IMG_BOS, IMG_EOS, 3)
