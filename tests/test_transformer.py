"""attention_lib.transformer: parity with torch.nn.TransformerEncoderLayer and
TransformerDecoderLayer (weights copied), the decoder's cache against the full pass,
decoding through the decoder protocol, the warm-up schedule, and bad input."""
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from attention_lib import (
    AddNorm,
    Decoder,
    EncoderDecoder,
    PositionWiseFFN,
    TransformerDecoder,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
    beam_search,
    greedy_decode,
    torch_twin,
    train_seq2seq,
    valid_lens_to_mask,
    warmup_rate,
    warmup_schedule,
)
from attention_lib.data import Batch
from attention_lib.multihead import KVCache

BOS, EOS = 1, 2
SRC = torch.tensor([[5, 6, 7, 2, 0], [8, 2, 0, 0, 0], [3, 4, 5, 6, 2]])
SRC_LENS = torch.tensor([4, 2, 5])
TGT = torch.tensor([[1, 4, 5, 6, 7, 3], [1, 8, 9, 3, 0, 0], [1, 3, 3, 4, 5, 6]])


def make_model(norm_first=False, dtype=torch.float64, seed=0, vocab_size=12):
    torch.manual_seed(seed)
    model = EncoderDecoder(
        TransformerEncoder(10, 8, 2, 16, 2, norm_first=norm_first, max_len=32),
        TransformerDecoder(vocab_size, 8, 2, 16, 2, norm_first=norm_first,
                           max_len=32),
    ).to(dtype).eval()
    # sharpen the output distribution, so that the argmax has no near-ties
    with torch.no_grad():
        model.decoder.dense.weight.mul_(4)
    return model


def full_pass(model, src=SRC, src_lens=SRC_LENS, tgt=TGT, need_weights=True):
    state = model.decoder.init_state(model.encoder(src, src_lens), src_lens)
    return model.decoder(tgt, state, need_weights=need_weights)[0]  # (B, Lq, V)


# --- parity with PyTorch's layers (weights copied) ------------------------------------

def randomise(module, seed=0) -> None:
    """Random weights everywhere, LayerNorms included (their defaults are 1 and 0)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_equals_torch_encoder_layer(norm_first):
    ours = TransformerEncoderBlock(8, 2, 16, norm_first=norm_first).double().eval()
    randomise(ours)
    # train() with dropout 0: PyTorch's eval fast path drops the padded positions
    theirs = torch_twin(ours)
    assert isinstance(theirs, nn.TransformerEncoderLayer)
    assert theirs.norm_first == norm_first
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    valid_lens = torch.tensor([5, 2, 3])
    padding = ~valid_lens_to_mask(valid_lens, 5)  # PyTorch: True = ignore
    expected = theirs.train()(x, src_key_padding_mask=padding)
    torch.testing.assert_close(ours(x, valid_lens), expected)
    torch.testing.assert_close(ours(x, valid_lens, need_weights=True), expected)
    # the padding mattered: without it the real positions change
    assert not torch.allclose(ours(x)[1, :2], expected[1, :2])


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_equals_torch_decoder_layer(norm_first):
    ours = TransformerDecoderBlock(8, 2, 16, norm_first=norm_first).double().eval()
    randomise(ours, seed=1)
    theirs = torch_twin(ours)
    assert isinstance(theirs, nn.TransformerDecoderLayer)
    assert theirs.norm_first == norm_first
    x = torch.randn(3, 4, 8, dtype=torch.float64)
    memory = torch.randn(3, 6, 8, dtype=torch.float64)
    src_lens = torch.tensor([6, 1, 4])
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    expected = theirs.eval()(
        x, memory, tgt_mask=~causal,
        memory_key_padding_mask=~valid_lens_to_mask(src_lens, 6),
    )
    got, cache = ours(x, memory, src_lens)
    torch.testing.assert_close(got, expected)
    assert cache.keys.shape == cache.values.shape == (3, 2, 4, 4)  # (B, H, t, Dh)
    # a cache fed in two pieces gives the same outputs
    first, cache = ours(x[:, :1], memory, src_lens, need_weights=True)
    rest, cache = ours(x[:, 1:], memory, src_lens, cache, need_weights=True)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), expected)
    assert ours.cross_attention.attention_weights.shape == (3, 2, 3, 6)


def test_add_norm_in_both_orders():
    x, y = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    post, pre = AddNorm(4), AddNorm(4, norm_first=True)
    norm = F.layer_norm
    torch.testing.assert_close(post.sublayer_input(x), x)
    torch.testing.assert_close(post(x, y), norm(x + y, (4,)))
    torch.testing.assert_close(pre.sublayer_input(x), norm(x, (4,)))
    torch.testing.assert_close(pre(x, y), x + y)


def test_ffn_acts_on_each_position_alone():
    ffn = PositionWiseFFN(4, 8, activation="gelu")
    x = torch.randn(2, 5, 4)
    expected = ffn.W_2(F.gelu(ffn.W_1(x[:, 3])))  # (B, D): position 3 alone
    torch.testing.assert_close(ffn(x)[:, 3], expected)


# --- the decoder: causality, padding, cache -------------------------------------------

@pytest.mark.parametrize("norm_first", [False, True])
def test_changing_later_target_tokens_leaves_earlier_logits_alone(norm_first):
    model = make_model(norm_first)
    logits = full_pass(model)
    changed = TGT.clone()
    changed[:, 3:] = 9
    new_logits = full_pass(model, tgt=changed)
    torch.testing.assert_close(new_logits[:, :3], logits[:, :3])
    assert not torch.allclose(new_logits[:, 3:], logits[:, 3:])


@pytest.mark.parametrize("norm_first", [False, True])
def test_changing_padded_source_tokens_changes_nothing(norm_first):
    model = make_model(norm_first)
    changed = SRC.clone()
    pad = ~valid_lens_to_mask(SRC_LENS, SRC.shape[1])
    changed[pad] = 7
    torch.testing.assert_close(full_pass(model, src=changed), full_pass(model))
    enc, new_enc = model.encoder(SRC, SRC_LENS), model.encoder(changed, SRC_LENS)
    torch.testing.assert_close(new_enc[~pad], enc[~pad])
    # the test would notice a leak: the padded rows themselves did change
    assert not torch.allclose(new_enc[pad], enc[pad])
    weights = model.decoder.attention_weights  # (B, H, Lq, Lk)
    assert (weights.masked_select(pad[:, None, None, :]) == 0).all()


@pytest.mark.parametrize("norm_first", [False, True])
def test_step_by_step_decoding_with_the_cache_equals_the_full_pass(norm_first):
    model = make_model(norm_first)
    expected = full_pass(model)
    state = model.decoder.init_state(model.encoder(SRC, SRC_LENS), SRC_LENS)
    steps = []
    for t in range(TGT.shape[1]):
        # (B, 1, V)
        logits, state = model.decoder(TGT[:, t : t + 1], state, need_weights=True)
        steps.append(logits)
        assert model.decoder.attention_weights.shape == (3, 2, 1, 5)
    torch.testing.assert_close(torch.cat(steps, dim=1), expected)
    # projected keys and values, (B, H, t, Dh); the source's projected once
    assert all(c.keys.shape == (3, 2, TGT.shape[1], 4) for c in state.cache)
    assert all(m.values.shape == (3, 2, SRC.shape[1], 4) for m in state.memory)


def test_the_pre_norm_stacks_end_with_a_layer_norm():
    model = make_model(norm_first=True)
    assert make_model().encoder.final_norm is None
    with torch.no_grad():
        for norm in (model.encoder.final_norm, model.decoder.final_norm):
            norm.weight.zero_()
            norm.bias.fill_(0.5)
    assert (model.encoder(SRC, SRC_LENS) == 0.5).all()
    expected = model.decoder.dense(torch.full((8,), 0.5, dtype=torch.float64))
    torch.testing.assert_close(full_pass(model), expected.expand(3, 6, 12))


def test_attention_weights_are_the_last_layers_cross_attention():
    model = make_model()
    full_pass(model)
    blocks = model.decoder.blocks
    weights = model.decoder.attention_weights
    assert weights is blocks[-1].cross_attention.attention_weights
    assert not torch.allclose(weights, blocks[0].cross_attention.attention_weights)
    ones = torch.ones(3, 2, 6, dtype=weights.dtype)  # (B, H, Lq)
    torch.testing.assert_close(weights.sum(-1), ones)


def test_without_weights_the_fused_path_gives_the_same_logits():
    model = make_model()
    expected = full_pass(model)
    torch.testing.assert_close(full_pass(model, need_weights=False), expected)
    assert model.decoder.attention_weights is None
    model.train()  # dropout is 0
    torch.testing.assert_close(full_pass(model, need_weights=False), expected)


def test_reorder_state_reorders_the_cache():
    model = make_model()
    state = model.decoder.init_state(model.encoder(SRC, SRC_LENS), SRC_LENS)
    _, state = model.decoder(TGT[:, :3], state)
    index = torch.tensor([2, 0, 0])
    logits, _ = model.decoder(TGT[index, 3:], model.decoder.reorder_state(state, index))
    expected = full_pass(model, SRC[index], SRC_LENS[index], TGT[index])
    torch.testing.assert_close(logits, expected[:, 3:])


# --- training and decoding through the protocol --------------------------------------

def copy_batches(num_batches, batch_size=16, seed=0):
    """The copy task: the target is the source, 1 to 4 words from 3..9 and <eos>."""
    gen = torch.Generator().manual_seed(seed)
    positions = torch.arange(5)
    batches = []
    for _ in range(num_batches):
        lens = torch.randint(1, 5, (batch_size,), generator=gen)  # (B,)
        words = torch.randint(3, 10, (batch_size, 5), generator=gen)  # (B, 5)
        src = torch.where(positions < lens[:, None], words, 0)
        src = torch.where(positions == lens[:, None], EOS, src)  # (B, 5)
        tgt_output = F.pad(src, (0, 1))  # (B, 6)
        tgt_input = torch.cat([torch.full((batch_size, 1), BOS), src], 1)  # (B, 6)
        batches.append(Batch(src, lens + 1, tgt_input, tgt_output, lens + 1))
    return batches


@pytest.fixture(scope="module")
def trained():
    """A one-layer model trained for 300 updates with the paper's schedule: enough to
    make its outputs depend on the source and end with <eos>."""
    torch.manual_seed(0)
    model = EncoderDecoder(TransformerEncoder(10, 16, 2, 32, 1, max_len=32),
                           TransformerDecoder(10, 16, 2, 32, 1, max_len=32))
    history = train_seq2seq(
        model, copy_batches(20), num_epochs=15, pad=0, progress=False,
        device=torch.device("cpu"),
        optimizer=lambda params: torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98),
                                                  eps=1e-9),
        schedule=lambda optimizer: warmup_schedule(optimizer, 16, warmup_steps=20),
    )
    return model.double().eval(), history


def test_train_seq2seq_with_the_warmup_schedule_lowers_the_loss(trained):
    _, history = trained
    assert history["train"][-1] < 0.7 * history["train"][0]


def test_greedy_decode_picks_the_argmax_of_the_full_pass(trained):
    model, _ = trained
    assert isinstance(model.decoder, Decoder)
    sentences, weights = greedy_decode(model, SRC, SRC_LENS, BOS, EOS, max_len=6,
                                       need_weights=True)
    for i, row in enumerate(sentences):
        tgt = torch.tensor([[BOS] + row])
        logits = full_pass(model, SRC[i : i + 1], SRC_LENS[i : i + 1], tgt)[0]
        predicted = logits.argmax(-1).tolist()  # (len(row) + 1,)
        assert predicted[: len(row)] == row
        if len(row) < 6:  # stopped: the next token is <eos>
            assert predicted[len(row)] == EOS
        assert weights[i].shape == (2, max(len(row), 1), 5)  # (H, T, Lk)
    assert len({tuple(row) for row in sentences}) == 3  # the source matters
    assert any(len(row) < 6 for row in sentences)  # some stop at <eos>


def test_beam_of_one_is_greedy_and_a_beam_of_three_runs(trained):
    model, _ = trained
    greedy, greedy_weights = greedy_decode(model, SRC, SRC_LENS, BOS, EOS, max_len=6,
                                           need_weights=True)
    beam, beam_weights = beam_search(model, SRC, SRC_LENS, BOS, EOS, max_len=6,
                                     beam_size=1, need_weights=True)
    assert beam == greedy
    for got, want in zip(beam_weights, greedy_weights):
        torch.testing.assert_close(got, want)
    wide, wide_weights = beam_search(model, SRC, SRC_LENS, BOS, EOS, max_len=6,
                                     beam_size=3, need_weights=True)
    for i, n in enumerate(SRC_LENS.tolist()):
        alone, alone_weights = beam_search(model, SRC[i : i + 1, :n],
                                           SRC_LENS[i : i + 1], BOS, EOS,
                                           max_len=6, beam_size=3, need_weights=True)
        assert wide[i] == alone[0]
        torch.testing.assert_close(wide_weights[i][..., :n], alone_weights[0])
        assert wide_weights[i].shape == (2, max(len(wide[i]), 1), 5)
    # The wider beam's choice scores at least as well under the model as greedy's.
    for i, n in enumerate(SRC_LENS.tolist()):
        assert normalised_score(model, i, wide[i]) >= (
            normalised_score(model, i, greedy[i]) - 1e-9
        )


@torch.no_grad()
def normalised_score(model, i, output, max_len=6, length_penalty=0.75):
    """log p(output) / len ** length_penalty, as beam search scores a hypothesis
    (<eos> included when the output stopped before max_len)."""
    tokens = output + [EOS] if len(output) < max_len else output
    tgt_input = torch.tensor([[BOS] + tokens[:-1]])
    logits = full_pass(model, SRC[i : i + 1], SRC_LENS[i : i + 1], tgt_input)
    log_probs = F.log_softmax(logits[0], dim=-1)  # (T, V)
    total = log_probs[torch.arange(len(tokens)), torch.tensor(tokens)].sum().item()
    return total / len(tokens) ** length_penalty


# --- training: label smoothing and the warm-up schedule -------------------------------

def test_cross_entropy_smooths_labels_over_real_tokens_only():
    """What ``sequence_loss`` would pass through: PyTorch's label smoothing mixes the
    one-hot target with the uniform distribution, ε/V on every class, and padding
    still counts for nothing."""
    torch.manual_seed(0)
    logits, pad, eps = torch.randn(7, 5), 0, 0.1  # (N, V)
    targets = torch.tensor([1, 2, 0, 4, 0, 3, 1])  # (N,)
    got = F.cross_entropy(logits, targets, ignore_index=pad, label_smoothing=eps)
    real = targets != pad
    smoothed = F.one_hot(targets[real], 5) * (1 - eps) + eps / 5  # (N, V)
    expected = -(smoothed * F.log_softmax(logits[real], -1)).sum(-1).mean()
    torch.testing.assert_close(got, expected)


def test_warmup_schedule_follows_the_formula():
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = warmup_schedule(optimizer, embed_dim=512, warmup_steps=4000)
    rates = {}
    for step in range(1, 8001):
        if step in (1, 2, 4000, 8000):
            rates[step] = optimizer.param_groups[0]["lr"]
        optimizer.step()
        schedule.step()
    # 512^-0.5 · min(step^-0.5, step · 4000^-1.5), by hand
    assert rates[1] == pytest.approx(512**-0.5 * 4000**-1.5)
    assert rates[2] == pytest.approx(2 * rates[1])
    assert rates[4000] == pytest.approx((512 * 4000) ** -0.5)
    assert rates[8000] == pytest.approx(512**-0.5 * 8000**-0.5)
    assert warmup_rate(8000, 512, 4000) == rates[8000]


def test_warmup_schedule_without_a_width_ramps_to_the_optimisers_rate_and_holds():
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=3e-3)
    schedule = warmup_schedule(optimizer, None, warmup_steps=100)
    rates = []
    for _ in range(150):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert rates[0] == pytest.approx(3e-3 / 100)  # update 1
    assert rates[49] == pytest.approx(3e-3 * 50 / 100)
    assert rates[99:] == pytest.approx([3e-3] * 51)  # update 100 on: held


# --- bad input ------------------------------------------------------------------------

@pytest.mark.parametrize(
    "build, error, message",
    [
        (lambda: TransformerEncoderBlock(10, 3, 16), ValueError,
         r"embed_dim \(D=10\) must be divisible by num_heads \(H=3\)"),
        (lambda: TransformerDecoder(12, 9, 3, 16, 2), ValueError,
         "embed_dim must be even"),
        (lambda: TransformerEncoder(10, 8, 2, 16, 0), ValueError,
         "num_layers must be at least 1, got 0"),
        (lambda: PositionWiseFFN(8, 16, activation="tanh"), ValueError,
         "activation must be one of"),
        (lambda: AddNorm(8, dropout=1.0), ValueError, r"dropout must lie in \[0, 1\)"),
        (lambda: warmup_schedule("adam", 8, 10), TypeError,
         "optimizer must be a torch.optim.Optimizer"),
        (lambda: warmup_rate(0, 8, 10), ValueError, "step must be at least 1, got 0"),
    ],
)
def test_bad_settings_are_named(build, error, message):
    with pytest.raises(error, match=message):
        build()


def test_bad_shapes_are_named():
    block = TransformerDecoderBlock(8, 2, 16)
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match=r"x must have shape \(B, L, 8\).*\(2, 3, 6\)"):
        block(torch.randn(2, 3, 6), memory)
    with pytest.raises(ValueError, match=r"enc_outputs must have shape \(B, L, 8\)"):
        block(x, torch.randn(2, 4, 5))
    with pytest.raises(ValueError, match="enc_outputs must have the batch size of x"):
        block(x, torch.randn(3, 4, 8))
    with pytest.raises(TypeError, match=r"cache must be a KVCache \(B, H, t, Dh\)"):
        block(x, memory, cache=torch.randn(2, 3, 7))
    wrong = KVCache(torch.randn(2, 2, 3, 3), torch.randn(2, 2, 3, 3))
    with pytest.raises(ValueError, match=r"cache.keys must have shape \(B, H, t, Dh\)"):
        block(x, memory, cache=wrong)
    with pytest.raises(ValueError, match=r"src_valid_lens must lie in \[0, 4\]"):
        block(x, memory, torch.tensor([5, 1]))
    with pytest.raises(ValueError, match=r"x must have shape \(B, L, 8\)"):
        TransformerEncoderBlock(8, 2, 16)(torch.randn(2, 3))
    model = make_model(dtype=torch.float32)
    with pytest.raises(TypeError, match=r"tgt_input must be a \(B, L\) tensor"):
        model(SRC, SRC_LENS, TGT.float())
    with pytest.raises(ValueError, match=r"src_valid_lens must have shape \(B,\)"):
        model(SRC, SRC_LENS[:2], TGT)
    with pytest.raises(ValueError, match="max_len=32"):
        model(SRC, SRC_LENS, torch.ones(3, 33, dtype=torch.long))


def test_torch_twin_refuses_what_has_no_twin():
    with pytest.raises(TypeError, match="TransformerEncoderBlock or"):
        torch_twin(nn.Linear(2, 2))


def test_token_ids_outside_the_vocabulary_are_named():
    model = make_model(dtype=torch.float32)
    bad = SRC.clone()
    bad[0, 0] = 10  # the source vocabulary has 10 tokens: 0 to 9
    with pytest.raises(ValueError, match=r"src must hold token indices in \[0, 10\).*"
                       r"from 0 to 10"):
        model.encoder(bad, SRC_LENS)
    with pytest.raises(ValueError, match=r"tgt_input must hold token indices in"):
        model(SRC, SRC_LENS, -TGT)
