import pytest
import torch

from attention_lib import (
    EncoderDecoder,
    Seq2SeqDecoder,
    Seq2SeqEncoder,
    greedy_decode,
    set_seed,
)

V_SRC, V_TGT, E, HD, LAYERS = 30, 40, 8, 16, 2


def make_model():
    set_seed(0)
    return EncoderDecoder(
        Seq2SeqEncoder(V_SRC, E, HD, LAYERS), Seq2SeqDecoder(V_TGT, E, HD, LAYERS)
    ).eval()


def test_shapes():
    model = make_model()
    src = torch.randint(4, V_SRC, (3, 7))
    outputs, state = model.encoder(src, torch.tensor([7, 4, 1]))
    assert outputs.shape == (3, 7, HD) and state.shape == (LAYERS, 3, HD)
    logits = model(src, torch.tensor([7, 4, 1]), torch.randint(4, V_TGT, (3, 5)))
    assert logits.shape == (3, 5, V_TGT)


def test_encoder_skips_padding():
    """A padded sentence gets the same final state and outputs as the same sentence
    alone."""
    model = make_model()
    sentence = torch.randint(4, V_SRC, (1, 4))
    # pad = 0
    padded = torch.cat([sentence, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    out_alone, state_alone = model.encoder(sentence, torch.tensor([4]))
    out_padded, state_padded = model.encoder(padded, torch.tensor([4]))
    torch.testing.assert_close(state_padded, state_alone)
    torch.testing.assert_close(out_padded[:, :4], out_alone)
    assert (out_padded[:, 4:] == 0).all()


@pytest.mark.parametrize("bad, message", [
    (torch.rand(2, 5), "src must be a \\(B, L\\) tensor of token indices"),
    (torch.zeros(5, dtype=torch.long), "src must be a \\(B, L\\) tensor"),
])
def test_bad_source_is_named(bad, message):
    with pytest.raises(TypeError, match=message):
        make_model().encoder(bad)


def test_bad_valid_lens_shape_is_named():
    with pytest.raises(
        ValueError, match=r"src_valid_lens must have shape \(B,\) with B=2, got \(3,\)"
    ):
        make_model().encoder(
            torch.zeros(2, 5, dtype=torch.long), torch.tensor([1, 2, 3])
        )


@pytest.mark.parametrize(
    "src_valid_lens, error, message",
    [
        (
            [5, 3],
            TypeError,
            r"src_valid_lens must be a torch.Tensor of integer lengths with shape"
            r" \(B,\) with B=2, "
            r"got a list of length 2 \(convert it with torch.as_tensor",
        ),
        (
            torch.tensor(5),
            ValueError,
            r"src_valid_lens must have shape \(B,\) with B=2, got \(\)",
        ),
        (torch.tensor([6, 3]), ValueError, r"src_valid_lens must lie in \[0, 5\]"),
        (torch.tensor([-1, 3]), ValueError, r"src_valid_lens must lie in \[0, 5\]"),
        (torch.tensor([5.0, 3.0]), TypeError, r"src_valid_lens must hold integers"),
    ],
)
def test_bad_valid_lens_is_named_by_the_encoder_and_by_decoding(
    src_valid_lens, error, message
):
    model = make_model()
    src = torch.randint(4, V_SRC, (2, 5))
    with pytest.raises(error, match=message):
        model.encoder(src, src_valid_lens)
    with pytest.raises(error, match=message):
        greedy_decode(model, src, src_valid_lens, bos=1, eos=2, max_len=3)


def test_empty_source_is_named():
    with pytest.raises(
        ValueError,
        match=(
            r"src must hold at least one sentence of at least one token, got shape"
            r" \(2, 0\)"
        ),
    ):
        make_model().encoder(torch.zeros(2, 0, dtype=torch.long))
