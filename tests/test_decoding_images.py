"""Greedy decoding and beam search from images: the source is whatever the encoder
reads. A float source (a batch of images) is left to the encoder to check; a source of
tokens is still checked by the decoding functions (chapter 7's captioner)."""
import pytest
import torch
from torch import nn

from attention_lib import (
    BahdanauDecoder,
    EncoderDecoder,
    Seq2SeqEncoder,
    beam_search,
    greedy_decode,
    set_seed,
)

V, E, DS, C = 7, 8, 16, 4  # vocabulary, embedding, decoder state, image channels
BOS, EOS = 5, 6
HGT, W = 3, 5  # the grid: P = 15 keys


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
    decoder = BahdanauDecoder(V, E, DS, key_size=C)
    return EncoderDecoder(GridEncoder(), decoder).eval()


def images(batch_size=3):
    return torch.rand(batch_size, 1, HGT, W, generator=torch.Generator().manual_seed(1))


def test_greedy_decode_takes_a_batch_of_images():
    model = make_captioner()
    outputs, weights = greedy_decode(model, images(), None, BOS, EOS, max_len=4)
    assert len(outputs) == len(weights) == 3
    for output, w in zip(outputs, weights):
        assert len(output) <= 4 and EOS not in output
        assert w.shape == (max(len(output), 1), HGT * W)  # one row per step, P keys
        torch.testing.assert_close(w.sum(-1), torch.ones(len(w)))


def test_greedy_decode_from_images_follows_the_model_step_by_step():
    model = make_captioner()
    with torch.no_grad():  # an output that never ends: every step writes token 2
        model.decoder.dense.bias.zero_()
        model.decoder.dense.bias[2] = 100.0
    x = images()
    outputs, weights = greedy_decode(model, x, None, BOS, EOS, max_len=3)
    assert outputs == [[2, 2, 2]] * 3
    # The same weights as one teacher-forced call on <bos> 2 2.
    tgt_input = torch.tensor([[BOS, 2, 2]] * 3)
    with torch.no_grad():
        model(x, None, tgt_input)
    torch.testing.assert_close(torch.stack(weights), model.decoder.attention_weights)


def test_beam_search_of_size_one_is_greedy_decoding_from_images():
    model = make_captioner()
    greedy = greedy_decode(model, images(), None, BOS, EOS, max_len=4)
    beam = beam_search(model, images(), None, BOS, EOS, max_len=4, beam_size=1)
    assert beam[0] == greedy[0]
    for b, g in zip(beam[1], greedy[1]):
        torch.testing.assert_close(b, g)


def test_valid_lengths_of_an_image_source_count_keys_and_reach_the_decoder():
    model = make_captioner()
    x = images()
    all_keys = torch.full((3,), HGT * W)
    assert greedy_decode(model, x, all_keys, BOS, EOS, max_len=3)[0] == greedy_decode(
        model, x, None, BOS, EOS, max_len=3
    )[0]
    # Fewer valid keys: the decoder masks the rest (weights zero there).
    _, weights = greedy_decode(model, x, torch.tensor([4, 15, 9]), BOS, EOS, 3)
    assert float(weights[0][:, 4:].abs().sum()) == 0.0
    assert float(weights[2][:, 9:].abs().sum()) == 0.0
    with pytest.raises(ValueError, match="src_valid_lens must lie in"):
        greedy_decode(model, x, torch.tensor([16, 1, 1]), BOS, EOS, 3)


@pytest.mark.parametrize("decode", [greedy_decode, beam_search])
def test_a_source_of_tokens_is_still_checked(decode):
    set_seed(0)
    model = EncoderDecoder(Seq2SeqEncoder(9, E, DS), BahdanauDecoder(V, E, DS)).eval()
    with pytest.raises(TypeError, match=r"src must be a \(B, L\) tensor of token"):
        decode(model, torch.zeros(5, dtype=torch.long), None, BOS, EOS, 3)
    with pytest.raises(TypeError, match=r"src must be a \(B, L\) tensor of token"):
        decode(model, [[1, 2, 3]], None, BOS, EOS, 3)
    with pytest.raises(ValueError, match=r"src_valid_lens must lie in \[0, 5\]"):
        decode(model, torch.ones(2, 5, dtype=torch.long), torch.tensor([6, 1]),
               BOS, EOS, 3)
    # A float batch given to a model that reads tokens: its encoder names it.
    with pytest.raises(TypeError, match=r"src must be a \(B, L\) tensor of token"):
        decode(model, torch.rand(2, 5), None, BOS, EOS, 3)
