"""BERT's masking: reproducible, never on special tokens, 80/10/10 in proportion."""
import torch

from attention_lib.lm import IGNORE_INDEX, mask_tokens

PAD, CLS, MASK, VOCAB = 0, 1, 2, 1000


def _seeded(seed):
    return torch.Generator().manual_seed(seed)


def test_mask_tokens_is_reproducible_and_skips_special_tokens():
    tokens = torch.randint(3, VOCAB, (4, 32), generator=_seeded(1))
    tokens[:, 0], tokens[:, -5:] = CLS, PAD
    args = dict(mask_id=MASK, vocab_size=VOCAB, special_ids=(PAD, CLS), p=0.5)
    inputs, labels = mask_tokens(tokens, **args, generator=_seeded(0))
    again = mask_tokens(tokens, **args, generator=torch.Generator().manual_seed(0))
    assert torch.equal(inputs, again[0]) and torch.equal(labels, again[1])
    special = (tokens == PAD) | (tokens == CLS)
    assert (labels[special] == IGNORE_INDEX).all()
    assert torch.equal(inputs[special], tokens[special])
    chosen = labels != IGNORE_INDEX
    assert torch.equal(labels[chosen], tokens[chosen])
    assert torch.equal(inputs[~chosen], tokens[~chosen])


def test_mask_tokens_proportions():
    tokens = torch.randint(3, VOCAB, (200, 500), generator=_seeded(2))
    inputs, labels = mask_tokens(tokens, MASK, VOCAB, (PAD, CLS),
                                 generator=torch.Generator().manual_seed(3))
    chosen = labels != IGNORE_INDEX
    n = chosen.sum().item()
    assert abs(n / tokens.numel() - 0.15) < 0.005
    masked = (inputs[chosen] == MASK).sum().item() / n
    kept = (inputs[chosen] == tokens[chosen]).sum().item() / n
    assert abs(masked - 0.8) < 0.01
    assert abs(kept - 0.1) < 0.01  # a random token equal to the old one counts here
    assert abs(1 - masked - kept - 0.1) < 0.01
