"""The language models of chapter 8: TransformerLM's cache, its causal and
bidirectional masks, its options, generate with and without the cache, the classifier
and the training loop."""
import pytest
import torch

from attention_lib import RMSNorm, SwiGLU, swiglu_hidden
from attention_lib.config import LMConfig
from attention_lib.lm import (
    IGNORE_INDEX,
    SequenceClassifier,
    TransformerLM,
    evaluate_lm,
    generate,
    next_word_examples,
    train_lm,
)

VOCAB = 50
MODERN = dict(norm_first=True, norm="rms", activation="swiglu",
              ffn_hidden=swiglu_hidden(64), positions="rope", bias=False,
              tie_embeddings=True)
VARIANTS = {"2017": {}, "pre-norm": dict(norm_first=True), "modern": MODERN}


def _model(seed=0, **options):
    torch.manual_seed(seed)
    sizes = dict(embed_dim=32, num_heads=4, ffn_hidden=64, num_layers=2, max_len=24)
    sizes.update(options)
    return TransformerLM(VOCAB, **sizes).eval()


def _tokens(batch=3, length=10, seed=1):
    return torch.randint(4, VOCAB, (batch, length),
                         generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_feeding_in_pieces_with_the_cache_equals_feeding_whole(variant):
    model, tokens = _model(**VARIANTS[variant]), _tokens()
    whole = model(tokens)  # (B, L, V)
    cache, pieces = model.empty_cache(3), []
    for start, stop in [(0, 4), (4, 5), (5, 10)]:
        logits, cache = model(tokens[:, start:stop], cache=cache)
        pieces.append(logits)
    torch.testing.assert_close(torch.cat(pieces, 1), whole, atol=1e-5, rtol=1e-5)
    assert cache[0].keys.shape == (3, 4, 10, 8)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_causal_model_does_not_see_the_future_and_an_encoder_does(variant):
    tokens = _tokens()
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % VOCAB
    causal = _model(**VARIANTS[variant])
    torch.testing.assert_close(causal(tokens)[:, :6], causal(changed)[:, :6])
    encoder = _model(causal=False, **VARIANTS[variant])
    assert not torch.allclose(encoder(tokens)[:, :6], encoder(changed)[:, :6])


def test_the_encoder_ignores_padding_given_by_valid_lens():
    encoder, tokens = _model(causal=False), _tokens()
    valid_lens = torch.tensor([10, 7, 3])
    noisy = tokens.clone()
    for row, n in enumerate(valid_lens.tolist()):
        noisy[row, n:] = (noisy[row, n:] + 5) % VOCAB
    clean, dirty = encoder(tokens, valid_lens), encoder(noisy, valid_lens)
    for row, n in enumerate(valid_lens.tolist()):
        torch.testing.assert_close(clean[row, :n], dirty[row, :n])


def test_options_build_what_they_say():
    modern = _model(**MODERN)
    assert modern.output.weight is modern.embedding.weight
    assert not [name for name, _ in modern.named_parameters() if "bias" in name]
    assert isinstance(modern.blocks[0].ffn, SwiGLU)
    assert isinstance(modern.blocks[0].add_norm1.norm, RMSNorm)
    assert modern.positional is None and modern.blocks[0].self_attention.rotary
    classic = _model()
    assert classic.final_norm is None and classic.output.bias is not None
    # Tied embeddings: one tensor counted once.
    untied = _model(**{**MODERN, "tie_embeddings": False})
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(untied) - count(modern) == VOCAB * 32


def test_rope_positions_per_example_shift_like_a_longer_prefix():
    model, tokens = _model(**MODERN), _tokens(batch=2, length=5)
    # Positions 3..7 for both rows: the same as RoPE's relative property predicts,
    # the causal model's output depends only on relative positions.
    shifted = model(tokens, positions=torch.arange(3, 8).expand(2, 5))
    torch.testing.assert_close(shifted, model(tokens), atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="RoPE"):
        _model()(tokens, positions=torch.arange(5))
    for bad in (torch.arange(-1, 4), torch.arange(4), torch.arange(20, 25)):
        with pytest.raises(ValueError, match="positions"):
            model(tokens, positions=bad)


def test_bad_calls_are_named():
    model = _model()
    with pytest.raises(ValueError, match="max_len=24"):
        model(_tokens(length=25))
    with pytest.raises(TypeError, match="tokens"):
        model(torch.zeros(2, 3))
    with pytest.raises(TypeError, match="cache"):
        model(_tokens(), cache=[])
    with pytest.raises(ValueError, match="positions"):
        TransformerLM(VOCAB, 32, 4, 64, 1, positions="learned")
    with pytest.raises(ValueError, match="causal"):
        generate(_model(causal=False), _tokens(), 3)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_generate_with_the_cache_gives_the_tokens_of_recomputation(variant):
    model, prompt = _model(**VARIANTS[variant]), _tokens(batch=4, length=3)
    greedy_cached = generate(model, prompt, 12)
    assert torch.equal(greedy_cached, generate(model, prompt, 12, use_cache=False))
    assert torch.equal(greedy_cached[:, :3], prompt)
    options = dict(do_sample=True, temperature=0.8, top_k=20, top_p=0.9)
    sampled = [generate(model, prompt, 12, **options, use_cache=use_cache,
                        generator=torch.Generator().manual_seed(5))
               for use_cache in (True, False)]
    assert torch.equal(*sampled)


def test_generate_stops_rows_at_eos():
    model, prompt = _model(), _tokens(batch=4, length=2)
    eos = int(generate(model, prompt, 1)[0, -1])  # row 0's greedy next token
    out = generate(model, prompt, 8, eos=eos)
    first = out[0, 2:].tolist()
    assert first[0] == eos and set(first) == {eos}
    for row in out[:, 2:].tolist():
        if eos in row:
            assert set(row[row.index(eos):]) == {eos}


def test_next_word_examples_shift_and_ignore_padding():
    tokens = torch.tensor([[1, 7, 8, 2, 0, 0], [1, 9, 2, 0, 0, 0]])
    inputs, labels = next_word_examples(tokens, pad=0)
    assert inputs.tolist() == [[1, 7, 8], [1, 9, 2]]
    assert labels.tolist() == [[7, 8, 2], [9, 2, IGNORE_INDEX]]


def test_training_lowers_the_loss_of_a_pattern():
    # Sentences "1 a a+1 a+2 ... 2": the next word is the previous plus one.
    config = LMConfig(embed_dim=32, num_heads=4, ffn_hidden=64, num_steps=8,
                      train_steps=150, batch_size=32, lr=5e-3, norm_first=True)
    torch.manual_seed(0)
    model = config.build(VOCAB)

    def batches(generator):
        start = torch.randint(4, VOCAB - 8, (config.batch_size, 1), generator=generator)
        body = start + torch.arange(6)  # (B, 6)
        ones = torch.ones(config.batch_size, 1, dtype=torch.long)
        tokens = torch.cat([ones, body, 2 * ones], dim=1)  # (B, 8)
        inputs, labels = next_word_examples(tokens, pad=0)
        return inputs, None, labels

    optimizer = config.optimizer(model.parameters())
    history = train_lm(model, batches, config.train_steps, optimizer,
                       config.schedule(optimizer), progress=False)
    inputs, _, labels = batches(torch.Generator().manual_seed(99))
    assert history.batches == 150 and history.tokens > 0
    # The first word is a free choice among 42 (ln 42 / 7 = 0.53 per word); the rest
    # follow from it.
    assert evaluate_lm(model, inputs, None, labels) < 0.7 < 3.0 < history["train"][0]


def test_the_classifier_pools_real_tokens_only():
    classifier = SequenceClassifier(_model(causal=False), 2).eval()
    tokens, valid_lens = _tokens(), torch.tensor([10, 4, 1])
    noisy = tokens.clone()
    noisy[1, 4:], noisy[2, 1:] = 3, 3
    torch.testing.assert_close(classifier(tokens, valid_lens),
                               classifier(noisy, valid_lens))


def test_the_ablation_keeps_the_feed_forward_parameter_count():
    from attention_lib.config import CHAPTER8_ABLATION, MODERN_BLOCK_CHANGES

    changes = dict(MODERN_BLOCK_CHANGES)["SwiGLU"]
    assert changes["ffn_hidden"] == swiglu_hidden(CHAPTER8_ABLATION.ffn_hidden)
    sizes = CHAPTER8_ABLATION.embed_dim, CHAPTER8_ABLATION.ffn_hidden
    relu = 2 * sizes[0] * sizes[1]
    swiglu = 3 * sizes[0] * changes["ffn_hidden"]
    assert abs(swiglu - relu) / relu < 0.01
