"""Chapter 5 and 6 benchmark: the library's Transformer against PyTorch's, and its
cached decoding against recomputing the prefix.

    python -m bench.bench_transformer              # both parts (a few minutes on 2 cores)
    python -m bench.bench_transformer --threads 1  # one intra-op thread (steadier)
    python -m bench.bench_transformer --smoke      # tiny sizes, one round: seconds

1. **A training step** (forward, backward, AdamW step) of chapter 5's Transformer at
   the sizes of ``CHAPTER5_TRANSFORMER`` against ``torch.nn.Transformer`` of the same
   size with the same masks (source padding, causal target, memory padding), the same
   embeddings, positional encoding and output layer, on the same batch. Goal: at most
   1.05× PyTorch.
2. **Greedy decoding of one sentence** (B = 1), T = 128 tokens, with the decoder's
   cache of projected keys and values against recomputing the whole prefix at every
   step; the tokens must be identical. Goal: at least 3× on a CPU. Then the time of one
   cached step as the cache grows, t = 16 to 256: the projections are flat in t, the
   attention over the t + 1 keys grows.

Measured side by side in one run: every round times each candidate once, in turn, and
the tables show medians over rounds and ratios. Absolute times are not comparable
between runs on shared machines; the ratios are what to read.
"""
from __future__ import annotations

import math
import statistics
import sys
import warnings

import torch
from torch import nn

from attention_lib import set_seed
from attention_lib.config import CHAPTER5_TRANSFORMER
from attention_lib.efficient import generate
from attention_lib.masking import causal_mask, valid_lens_to_mask
from attention_lib.measure import best_seconds
from bench import SMOKE_NOTE, smoke_mode

VOCAB = 3000
# nn.Transformer's encoder says that it cannot use nested tensors with pre-norm layers.
warnings.filterwarnings("ignore", message="enable_nested_tensor is True")


class TorchTranslator(nn.Module):
    """``nn.Transformer`` with the library's embedding (× √D), sinusoidal positions and
    output layer around it: the peer of the library's EncoderDecoder."""

    def __init__(self, ours):
        super().__init__()
        encoder, decoder = ours.encoder, ours.decoder
        block = encoder.blocks[0]
        self.embed_dim = encoder.embed_dim
        self.src_embedding, self.tgt_embedding = encoder.embedding, decoder.embedding
        self.register_buffer("encoding", encoder.positional.encoding)
        self.transformer = nn.Transformer(
            self.embed_dim, block.self_attention.num_heads, len(encoder.blocks),
            len(decoder.blocks), block.ffn.ffn_hidden, dropout=0.0, batch_first=True,
            norm_first=block.add_norm1.norm_first)
        self.dense = decoder.dense

    def embed(self, embedding, tokens):
        x = embedding(tokens) * math.sqrt(self.embed_dim)  # (B, L, D)
        return x + self.encoding[: tokens.shape[1]]

    def forward(self, src, src_valid_lens, tgt_input):
        padding = ~valid_lens_to_mask(src_valid_lens, src.shape[1])  # True = ignore
        causal = ~causal_mask(tgt_input.shape[1], device=src.device)
        out = self.transformer(
            self.embed(self.src_embedding, src), self.embed(self.tgt_embedding, tgt_input),
            tgt_mask=causal, src_key_padding_mask=padding,
            memory_key_padding_mask=padding, tgt_is_causal=True)
        return self.dense(out)  # (B, Lq, V)


def batch(batch_size, length, seed=0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (batch_size, length), generator=gen)
    lens = torch.randint(length // 2, length + 1, (batch_size,), generator=gen)
    tgt = torch.randint(4, VOCAB, (batch_size, length + 1), generator=gen)
    return src, lens, tgt[:, :-1], tgt[:, 1:]


def training_step(model, data):
    src, lens, tgt_input, labels = data
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        optimizer.zero_grad(set_to_none=True)
        logits = model(src, lens, tgt_input)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
        loss.backward()
        optimizer.step()

    return step


def rounds_of(calls, rounds, min_seconds):
    """Median seconds per call of each function, timed in turn, round after round."""
    times = {name: [] for name in calls}
    for r in range(rounds):
        order = list(calls) if r % 2 == 0 else list(calls)[::-1]
        for name in order:
            times[name].append(best_seconds(calls[name], repeats=1,
                                            min_seconds=min_seconds))
    return {name: statistics.median(values) for name, values in times.items()}


def bench_training(config, batch_size, length, rounds, min_seconds):
    set_seed(0)
    ours = config.build(VOCAB, VOCAB, max_len=64).train()
    theirs = TorchTranslator(ours).train()
    data = batch(batch_size, length)
    with torch.no_grad():  # the same function: PyTorch's layer with our weights
        for mine, block in zip(ours.encoder.blocks, theirs.transformer.encoder.layers):
            _copy_block(mine, block)
        for mine, block in zip(ours.decoder.blocks, theirs.transformer.decoder.layers):
            _copy_block(mine, block)
        norms = (theirs.transformer.encoder.norm, theirs.transformer.decoder.norm)
        for mine, norm in zip((ours.encoder.final_norm, ours.decoder.final_norm), norms):
            if mine is not None:
                norm.load_state_dict(mine.state_dict())
    torch.testing.assert_close(theirs.eval()(*data[:3]), ours.eval()(*data[:3]),
                               atol=1e-4, rtol=1e-4)
    ours.train(), theirs.train()
    seconds = rounds_of({"library": training_step(ours, data),
                         "nn.Transformer": training_step(theirs, data)},
                        rounds, min_seconds)
    print(f"\n1. Training step, B = {batch_size}, L = {length}, D = {config.embed_dim},"
          f" H = {config.num_heads}, N = {config.num_layers} (median of {rounds}"
          " rounds)")
    for name, s in seconds.items():
        print(f"   {name:>15}: {1e3 * s:8.2f} ms")
    ratio = seconds["library"] / seconds["nn.Transformer"]
    print(f"   library / nn.Transformer: {ratio:.2f}× (goal: at most 1.05×)")
    return ratio


def _copy_block(mine, theirs):
    from attention_lib.transformer import torch_twin

    twin = torch_twin(mine)
    theirs.load_state_dict(twin.state_dict())


def bench_decoding(config, num_tokens, step_positions, rounds, min_seconds):
    set_seed(0)
    longest = max(num_tokens, *step_positions, 10)  # tokens, cached steps, source
    model = config.build(VOCAB, VOCAB, max_len=longest + 2)
    model.eval()
    src, lens, _, _ = batch(1, 10)
    with torch.no_grad():
        state = model.decoder.init_state(model.encoder(src, lens), lens)
    start = torch.ones(1, 1, dtype=torch.long)
    tokens = {use: generate(model.decoder, state, start, num_tokens, use)
              for use in (True, False)}
    assert torch.equal(tokens[True], tokens[False]), "the cache changed the tokens"
    seconds = rounds_of({
        "cache": lambda: generate(model.decoder, state, start, num_tokens, True),
        "no cache": lambda: generate(model.decoder, state, start, num_tokens, False),
    }, rounds, min_seconds)
    speedup = seconds["no cache"] / seconds["cache"]
    print(f"\n2. Greedy decoding, B = 1, T = {num_tokens} (median of {rounds} rounds;"
          " tokens identical)")
    for name, s in seconds.items():
        print(f"   {name:>9}: {1e3 * s:8.1f} ms, {num_tokens / s:8.0f} tokens/s")
    print(f"   speed-up of the cache: {speedup:.2f}× (goal: at least 3× on a CPU)")
    steps = {}
    with torch.no_grad():
        for t in step_positions:
            prefix = torch.randint(4, VOCAB, (1, t), generator=torch.Generator()
                                   .manual_seed(t))
            _, filled = model.decoder(prefix, state)  # t positions in the cache
            newest = prefix[:, -1:]
            steps[t] = lambda filled=filled, newest=newest: model.decoder(newest, filled)
        step_seconds = rounds_of(steps, rounds, min_seconds)
    print("   one cached step as the cache grows (B = 1):")
    for t, s in step_seconds.items():
        print(f"     t = {t:>3}: {1e3 * s:6.2f} ms"
              f" ({s / step_seconds[step_positions[0]]:.2f}× t = {step_positions[0]})")
    return speedup


def main(argv):
    smoke = smoke_mode(argv)
    if "--threads" in argv:
        torch.set_num_threads(int(argv[argv.index("--threads") + 1]))
    print(f"threads: {torch.get_num_threads()}")
    config = CHAPTER5_TRANSFORMER
    if smoke:
        print(SMOKE_NOTE)
        config = config.with_(embed_dim=16, num_heads=2, ffn_hidden=32, num_layers=1)
        bench_training(config, 4, 6, rounds=1, min_seconds=0.0)
        bench_decoding(config, 6, [2, 4], rounds=1, min_seconds=0.0)
        return
    bench_training(config, config.batch_size, config.num_steps, rounds=5,
                   min_seconds=0.5)
    bench_decoding(config, 128, [16, 64, 128, 256], rounds=5, min_seconds=0.3)


if __name__ == "__main__":
    main(sys.argv[1:])
