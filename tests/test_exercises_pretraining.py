"""Chapter 8's checkers accept the right answers in every form and name each typical
mistake: the causal mask with a cache, temperature, top-p, RMSNorm, SwiGLU, BERT's
masking, a modern block's parameters and the KV cache's bytes."""
import math

import pytest
import torch
import torch.nn.functional as F
from answer_forms import (
    NUMBER_FORMS,
    TENSOR_FORMS,
    assert_rejects,
    in_form,
)

import attention_lib.exercises.ch08_pretraining as module
from attention_lib.exercises.ch08_pretraining import (
    check_causal_mask_with_offset,
    check_kv_cache_bytes,
    check_mlm_masking,
    check_modern_block_parameters,
    check_rms_norm,
    check_sampling_temperature,
    check_swiglu,
    check_top_p,
)
from attention_lib.lm import IGNORE_INDEX, mask_tokens
from attention_lib.masking import causal_mask
from attention_lib.multihead import MultiHeadAttention
from attention_lib.sampling import top_p_filter
from attention_lib.transformer import RMSNorm, SwiGLU


def assert_all_differ(answers, equal):
    for i, a in enumerate(answers):
        for b in answers[i + 1:]:
            assert a.shape != b.shape or not equal(a, b)


# --- 1. the causal mask with a cache --------------------------------------------------

def offset_mask(num_queries, offset):
    return torch.ones(num_queries, offset + num_queries, dtype=torch.bool).tril(offset)


def offset_mask_by_positions(num_queries, offset):
    queries = torch.arange(num_queries) + offset  # (Lq,): positions t + i
    keys = torch.arange(offset + num_queries)  # (Lk,)
    return (keys <= queries[:, None])[None, None]  # (1, 1, Lq, Lk)


@pytest.mark.parametrize(
    "solution",
    [offset_mask, offset_mask_by_positions, lambda lq, t: causal_mask(lq, t + lq)],
    ids=["tril", "positions", "library"],
)
def test_causal_mask_accepts_the_solutions(solution):
    feedback = check_causal_mask_with_offset(solution)
    assert feedback and "none after it" in feedback.message


def with_diagonal(shift, upper=False):
    def mask(num_queries, offset):
        ones = torch.ones(num_queries, offset + num_queries, dtype=torch.bool)
        return ones.triu(offset + shift) if upper else ones.tril(offset + shift)
    return mask


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (with_diagonal(-1), ["For num_queries=4, offset=0", "off by one",
                             "does not see its own position"]),
        (lambda lq, t: (torch.arange(t + lq) < torch.arange(lq)[:, None] + t),
         ["off by one", "key < query"]),
        (with_diagonal(1), ["off by one the other way", "the very token"]),
        (with_diagonal(0, upper=True), ["transposed", "triu"]),
        (lambda lq, t: ~offset_mask(lq, t), ["inverted"]),
        (lambda lq, t: torch.ones(lq, t + lq, dtype=torch.bool), ["no mask"]),
        (lambda lq, t: torch.ones(lq, t + lq, dtype=torch.bool).tril(),
         ["For num_queries=3, offset=4", "offset ignored", "tril(diagonal=t)"]),
        (lambda lq, t: torch.ones(lq, lq, dtype=torch.bool).tril(),
         ["(Lq, Lq) = (3, 3)", "the cache is ignored"]),
        (lambda lq, t: offset_mask(t + lq, 0), ["keep the last Lq rows"]),
        (lambda lq, t: offset_mask(lq, t).T, ["transposed"]),
        (lambda lq, t: offset_mask(lq, t)[:, :-1],
         ["shape (4, 3), expected (Lq, t + Lq) = (4, 4)"]),
        (lambda lq, t: offset_mask(lq, t).float(), ["holds torch.float32 numbers"]),
        (lambda lq, t: offset_mask(lq, t) & (torch.arange(t + lq) != 0)
         if lq == 1 else offset_mask(lq, t),
         ["For num_queries=1, offset=5", "your mask differs"]),
    ],
)
def test_causal_mask_names_each_mistake(wrong, phrases):
    assert_rejects(check_causal_mask_with_offset(wrong), *phrases)


def test_the_mask_variants_differ_where_they_are_needed():
    for num_queries, offset in module._MASK_CASES[:2]:
        answers = [module._offset_mask(num_queries, offset)]
        answers += [v for v, _ in module._mask_variants(num_queries, offset)]
        assert_all_differ(answers, torch.equal)


# --- 2. temperature -------------------------------------------------------------------

def tempered(logits, temperature):
    return torch.softmax(logits / temperature, dim=-1)


def tempered_by_power(logits, temperature):  # the same distribution, renormalised
    powered = logits.softmax(dim=-1) ** (1 / temperature)
    return powered / powered.sum(dim=-1, keepdim=True)


@pytest.mark.parametrize("solution", [tempered, tempered_by_power])
def test_temperature_accepts_the_solutions(solution):
    feedback = check_sampling_temperature(solution)
    assert feedback and "never changes" in feedback.message


@pytest.mark.parametrize("form", TENSOR_FORMS)
def test_temperature_accepts_every_tensor_form(form):
    assert check_sampling_temperature(in_form(tempered, form))


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda logits, t: logits.softmax(-1),
         ["For logits of shape (3, 7) and T = 0.5", "the temperature is missing"]),
        (lambda logits, t: (logits * t).softmax(-1), ["multiplied the logits by T"]),
        (lambda logits, t: logits.softmax(-1) / t,
         ["divided the probabilities by T, after the softmax"]),
        (lambda logits, t: logits.softmax(-1) ** (1 / t),
         ["power 1/T after the softmax", "no longer sums to 1"]),
        (lambda logits, t: tempered_by_power(logits, 1 / t),
         ["multiplied the logits by T", "the power T"]),
        (lambda logits, t: logits / t, ["tempered logits", "apply the softmax"]),
        (lambda logits, t: F.log_softmax(logits / t, -1), ["log-probabilities"]),
        (lambda logits, t: F.softmax(logits / t, 0), ["runs over the batch"]),
        (lambda logits, t: tempered(logits, t)[:, :-1],
         ["should have shape (3, 7)", "(3, 6)"]),
        (lambda logits, t: tempered(logits, t) if t < 1 else tempered(logits, 1.5),
         ["T = 2: your probabilities differ"]),
        (lambda logits, t: tempered(logits, t) * float("nan"), ["NaN"]),
    ],
)
def test_temperature_names_each_mistake(wrong, phrases):
    assert_rejects(check_sampling_temperature(wrong), *phrases)


def test_the_temperature_variants_differ():
    for case in module._TEMPERATURE_CASES:
        logits, t = module._temperature_case(*case)
        answers = [module._tempered(logits, t)]
        answers += [v for v, _ in module._temperature_variants(logits, t)]
        assert_all_differ(answers, lambda a, b: torch.allclose(a, b, atol=1e-3))


# --- 3. top-p -------------------------------------------------------------------------

def nucleus(logits, p):
    probs = logits.softmax(dim=-1)  # (B, V)
    ranked, order = probs.sort(dim=-1, descending=True)
    keep = ranked.cumsum(dim=-1) - ranked < p  # the tokens before sum to < p
    kept = torch.zeros_like(probs).scatter(-1, order, ranked * keep)
    return kept / kept.sum(dim=-1, keepdim=True)


def nucleus_by_loop(logits, p):
    rows = []
    for row in logits.softmax(dim=-1):
        out, total = torch.zeros_like(row), 0.0
        for index in row.argsort(descending=True).tolist():
            if total >= p:
                break
            out[index] = row[index]
            total += float(row[index])
        rows.append(out / out.sum())
    return torch.stack(rows)


@pytest.mark.parametrize(
    "solution",
    [nucleus, nucleus_by_loop, lambda logits, p: top_p_filter(logits, p).softmax(-1)],
    ids=["sort-scatter", "loop", "library"],
)
def test_top_p_accepts_the_solutions(solution):
    feedback = check_top_p(solution)
    assert feedback and "which top-k cannot do" in feedback.message


@pytest.mark.parametrize("form", TENSOR_FORMS)
def test_top_p_accepts_every_tensor_form(form):
    assert check_top_p(in_form(nucleus, form))


def nucleus_with(rule, order="desc", renormalise=True):
    def filtered(logits, p):
        probs = logits.softmax(dim=-1)
        kept = probs * module._kept(probs, p, rule, order)
        return kept / kept.sum(-1, keepdim=True) if renormalise else kept
    return filtered


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (nucleus_with("tail"), ["For logits of shape (3, 10) and p = 0.6",
                                "the wrong side of the threshold"]),
        (lambda logits, p: nucleus(logits, p) * 0 + nucleus_with(
            "tail", renormalise=False)(logits, p), ["the wrong side of the threshold"]),
        (nucleus_with("total"), ["dropped the token that crosses p", "cumsum < p"]),
        (nucleus_with("total", renormalise=False),
         ["dropped the token that crosses p", "Renormalise too"]),
        (nucleus_with("before", renormalise=False), ["not renormalised"]),
        (nucleus_with("before", order="asc"), ["ascending order"]),
        (nucleus_with("before", order="none"), ["without sorting"]),
        (lambda logits, p: nucleus(logits, p).sort(-1, descending=True).values,
         ["in sorted order"]),
        (top_p_filter, ["filtered logits"]),
        (lambda logits, p: logits.softmax(-1), ["nothing was filtered"]),
        (lambda logits, p: nucleus(logits, p) / 0 * 0, ["NaN", "nucleus was empty"]),
        (lambda logits, p: nucleus(logits, p + 0.1),
         ["row 0 keeps the tokens", "yours are"]),
        (lambda logits, p: nucleus(logits, p)[:1], ["should have shape (3, 10)"]),
    ],
)
def test_top_p_names_each_mistake(wrong, phrases):
    assert_rejects(check_top_p(wrong), *phrases)


def test_the_top_p_cases_keep_a_token_under_every_rule_and_tell_them_apart():
    for case in module._TOP_P_CASES:
        logits, p = module._top_p_case(*case)
        probs = logits.softmax(-1)
        assert (probs.max(-1).values < p).all()  # no rule leaves a row empty
        kept = module._kept(probs, p).sum(-1)
        assert len(set(kept.tolist())) > 1  # nuclei of different sizes
        answers = [module._nucleus(logits, p)]
        answers += [v for v, _ in module._top_p_variants(logits, p)]
        answers = [a for i, a in enumerate(answers) if i != 2]  # the tail twice
        assert_all_differ(answers, lambda a, b: torch.allclose(a, b, atol=1e-3))


# --- 4. RMSNorm -----------------------------------------------------------------------

def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def torch_rms_norm_module(x, weight, eps):
    norm = torch.nn.RMSNorm(x.shape[-1], eps=eps)
    with torch.no_grad():
        norm.weight.copy_(weight)
        return norm(x)


def test_the_rms_reference_is_torchs():
    for case in module._RMS_CASES:
        x, weight, eps = module._rms_case(*case)
        norm = torch.nn.RMSNorm(x.shape[-1], eps=eps)
        with torch.no_grad():
            norm.weight.copy_(weight)
            torch.testing.assert_close(module._rms_norm(x, weight, eps), norm(x))


@pytest.mark.parametrize(
    "solution",
    [rms_norm,
     lambda x, w, eps: x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt() * w,
     lambda x, w, eps: F.rms_norm(x.double(), (x.shape[-1],), w.double(), eps),
     lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps),
     lambda x, w, eps: x / ((x * x).mean(-1, keepdim=True) + eps) ** 0.5 * w,
     lambda x, w, eps: x / (x.norm(dim=-1, keepdim=True) ** 2 / x.shape[-1]
                            + eps).sqrt() * w,
     lambda x, w, eps: torch_rms_norm_module(x, w, eps)],
    ids=["rsqrt", "sqrt", "F.rms_norm-float64", "F.rms_norm", "x*x-pow-half",
         "vector-norm", "torch.nn.RMSNorm"],
)
def test_rms_norm_accepts_the_solutions(solution):
    feedback = check_rms_norm(solution)
    assert feedback and "No mean subtracted" in feedback.message


@pytest.mark.parametrize("form", ["numpy", "float64", "float32", "list"])
def test_rms_norm_accepts_every_tensor_form(form):
    assert check_rms_norm(in_form(rms_norm, form))


def ms(x):
    return x.pow(2).mean(-1, keepdim=True)


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda x, w, eps: F.layer_norm(x, x.shape[-1:], w, None, eps),
         ["For x of shape (2, 3, 8) and eps = 1e-06", "subtracted the mean",
          "LayerNorm"]),
        (lambda x, w, eps: x / (x.var(-1, unbiased=False, keepdim=True) + eps).sqrt()
         * w, ["standard deviation", "unbiased=False"]),
        # PyTorch's default x.var() and x.std() divide by D - 1
        (lambda x, w, eps: x / (x.var(-1, keepdim=True) + eps).sqrt() * w,
         ["standard deviation", "x.var() or x.std()", "D − 1"]),
        (lambda x, w, eps: x / (x.std(-1, keepdim=True) + eps) * w,
         ["standard deviation", "x.var() or x.std()"]),
        (lambda x, w, eps: (x - x.mean(-1, keepdim=True))
         / (x.var(-1, keepdim=True) + eps).sqrt() * w,
         ["subtracted the mean", "LayerNorm", "x.var()", "D − 1"]),
        (lambda x, w, eps: x / ms(x).sqrt() * w,
         ["For x of shape (4, 6) and eps = 0.01", "eps is missing"]),
        (lambda x, w, eps: x / (ms(x) + eps) * w, ["square root is missing"]),
        (lambda x, w, eps: x / (ms(x).sqrt() + eps) * w,
         ["For x of shape (4, 6) and eps = 0.01", "eps is outside the square root",
          "torch.nn.RMSNorm, Llama and the library"]),
        (lambda x, w, eps: rms_norm(x, 1, eps), ["the weight is missing"]),
        (lambda x, w, eps: x / (x.pow(2).sum(-1, keepdim=True) + eps).sqrt() * w,
         ["sum of squares", "√D"]),
        (lambda x, w, eps: x * (ms(x) + eps).sqrt() * w, ["multiplied by the RMS"]),
        (lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + eps) * w,
         ["the mean over axis 0", "dim=-1"]),
        (lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + eps) * w,
         ["the mean over axis 1"]),
        (lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean() + eps) * w,
         ["over every axis at once"]),
        (lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(-1) + eps) * w,
         ["Your function raised RuntimeError", "keepdim=True"]),
        (lambda x, w, eps: rms_norm(x, w, eps).flatten(),
         ["should have shape (2, 3, 8)"]),
        (lambda x, w, eps: rms_norm(x, w, eps) + 0.01, ["your output differ"]),
    ],
)
def test_rms_norm_names_each_mistake(wrong, phrases):
    assert_rejects(check_rms_norm(wrong), *phrases)


def test_the_rms_variants_differ_and_eps_matters_only_in_the_second_case():
    for i, case in enumerate(module._RMS_CASES):
        x, weight, eps = module._rms_case(*case)
        reference = module._rms_norm(x, weight, eps)
        variants = module._rms_variants(x, weight, eps)
        answers = [reference] + [v for v, _ in variants]
        outside = next(v for v, m in variants if "outside" in m)
        assert torch.allclose(outside, reference, atol=1e-5, rtol=1e-4) == (i == 0)
        if i == 1:
            assert_all_differ(answers, lambda a, b: torch.allclose(a, b, atol=1e-3))


# --- 5. SwiGLU ------------------------------------------------------------------------

def swiglu(x, W_1, W_2, W_3):
    return W_2(F.silu(W_1(x)) * W_3(x))


def test_the_swiglu_reference_is_the_librarys_module():
    torch.manual_seed(0)
    ffn = SwiGLU(6, 10)
    x = torch.randn(2, 3, 6)
    with torch.no_grad():
        torch.testing.assert_close(swiglu(x, ffn.W_1, ffn.W_2, ffn.W_3), ffn(x))
        torch.testing.assert_close(
            module._swiglu(x, ffn.W_1, ffn.W_2, ffn.W_3), ffn(x))


@pytest.mark.parametrize(
    "solution",
    [swiglu,
     lambda x, a, b, c: (x @ a.weight.T * torch.sigmoid(x @ a.weight.T)
                         * (x @ c.weight.T)) @ b.weight.T],
    ids=["modules", "matrices"],
)
def test_swiglu_accepts_the_solutions(solution):
    feedback = check_swiglu(solution)
    assert feedback and "three D × h matrices" in feedback.message


@pytest.mark.parametrize("form", ["numpy", "float64", "float32", "list"])
def test_swiglu_accepts_every_tensor_form(form):
    assert check_swiglu(in_form(lambda *a: swiglu(*a).detach(), form))


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda x, a, b, c: b(a(x) * F.silu(c(x))),
         ["For x of shape (2, 3, 8) and h = 12", "the gate is on the wrong branch"]),
        (lambda x, a, b, c: b(torch.sigmoid(a(x)) * c(x)), ["sigmoid", "GLU"]),
        (lambda x, a, b, c: b(F.silu(a(x) * c(x))), ["silu is applied after the"
                                                     " product"]),
        (lambda x, a, b, c: b(F.relu(a(x)) * c(x)), ["ReGLU"]),
        (lambda x, a, b, c: b(F.gelu(a(x)) * c(x)), ["GEGLU"]),
        (lambda x, a, b, c: b(a(x) * c(x)), ["no activation"]),
        (lambda x, a, b, c: b(F.silu(a(x)) + c(x)), ["added the two branches"]),
        (lambda x, a, b, c: b(F.silu(a(x))), ["W_3's branch is missing"]),
        (lambda x, a, b, c: F.silu(b(a(x) * c(x))), ["after W_2"]),
        (lambda x, a, b, c: F.silu(a(x)) * c(x), ["(B, L, h): W_2 is missing"]),
        (lambda x, a, b, c: b(F.silu(a(x)) * c(x)) if x.shape[0] == 2 else x,
         ["For x of shape (1, 4, 6) and h = 10", "your output differ"]),
        (lambda x, a, b, c: a(b(x)), ["Your function raised RuntimeError",
                                      "W_2 maps h back to D"]),
    ],
)
def test_swiglu_names_each_mistake(wrong, phrases):
    assert_rejects(check_swiglu(wrong), *phrases)


def test_the_swiglu_variants_differ():
    for seed, case in enumerate(module._SWIGLU_CASES):
        x, *layers = module._swiglu_case(*case, seed)
        answers = [module._swiglu(x, *layers)]
        answers += [v for v, _ in module._swiglu_variants(x, *layers)]
        assert_all_differ(answers, lambda a, b: torch.allclose(a, b, atol=1e-3))


# --- 6. BERT's masking ----------------------------------------------------------------

def bert_masking(tokens, mask_id, vocab_size, special_ids, generator, p=0.15,
                 split=(0.8, 0.9), skip=True, labels_at="chosen", g=True):
    """A reader's version of BERT's 80/10/10 rule; the keywords make its mistakes."""
    gen = generator if g else None
    ordinary = ~torch.isin(tokens, torch.tensor(special_ids)) if skip else (
        torch.ones_like(tokens, dtype=torch.bool))
    chosen = ordinary & (torch.rand(tokens.shape, generator=gen) < p)
    u = torch.rand(tokens.shape, generator=gen)
    random_tokens = torch.randint(vocab_size, tokens.shape, generator=gen)
    inputs = tokens.clone()
    inputs[chosen & (u < split[0])] = mask_id
    replace = chosen & (u >= split[0]) & (u < split[1])
    inputs[replace] = random_tokens[replace]
    where = {"chosen": chosen, "mask": inputs == mask_id}[labels_at]
    return inputs, torch.where(where, tokens, IGNORE_INDEX)


def the_library(tokens, mask_id, vocab_size, special_ids, generator):
    return mask_tokens(tokens, mask_id, vocab_size, special_ids, 0.15, generator)


def exact_share(tokens, mask_id, vocab_size, special_ids, generator):
    """Exactly 15% of each row's ordinary tokens, by a random permutation."""
    inputs, labels = tokens.clone(), torch.full_like(tokens, IGNORE_INDEX)
    for row in range(tokens.shape[0]):
        ordinary = (~torch.isin(tokens[row], torch.tensor(special_ids))).nonzero()
        pick = ordinary[torch.randperm(len(ordinary), generator=generator)]
        pick = pick[: round(0.15 * len(ordinary))].flatten()
        labels[row, pick] = tokens[row, pick]
        u = torch.rand(len(pick), generator=generator)
        inputs[row, pick[u < 0.8]] = mask_id
        swap = pick[(u >= 0.8) & (u < 0.9)]
        inputs[row, swap] = torch.randint(
            4, vocab_size, (len(swap),), generator=generator)
    return inputs, labels


@pytest.mark.parametrize("solution", [bert_masking, the_library, exact_share])
def test_mlm_masking_accepts_the_solutions(solution):
    feedback = check_mlm_masking(solution)
    assert feedback and "including those it sees unchanged" in feedback.message


@pytest.mark.parametrize("seed", range(20))
def test_the_rates_hold_for_the_library_at_any_seed(seed):
    tokens = module._mlm_tokens()
    inputs, labels = the_library(tokens, module._MASK, module._VOCAB,
                                 module._MLM_SPECIAL,
                                 torch.Generator().manual_seed(seed))
    assert module._mlm_structure(tokens, inputs, labels) is None
    assert module._mlm_rates(tokens, inputs, labels) is None


def keyword(**changes):
    return lambda *args: bert_masking(*args, **changes)


def labels_as(value):
    def wrong(*args):
        inputs, labels = bert_masking(*args)
        return inputs, torch.where(labels == IGNORE_INDEX, value, labels)
    return wrong


def corrupted_labels(*args):
    inputs, labels = bert_masking(*args)
    return inputs, torch.where(labels == IGNORE_INDEX, IGNORE_INDEX, inputs)


def only_masked_labelled(*args):  # [MASK] at 80% of the chosen, nothing else changed
    tokens = args[0]
    inputs, _ = bert_masking(*args, split=(0.8, 0.8))
    return inputs, torch.where(inputs != tokens, tokens, IGNORE_INDEX)


def changed_everywhere(tokens, *args):
    inputs, labels = bert_masking(tokens, *args)
    inputs[(labels == IGNORE_INDEX) & (tokens > 3)] += 1
    return inputs, labels


def masking_pad_only(tokens, mask_id, vocab_size, special_ids, generator):
    return bert_masking(tokens, mask_id, vocab_size, special_ids[1:], generator)


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (keyword(skip=False), ["For 64 sentences of up to 160 tokens",
                               "you masked padding", "~torch.isin"]),
        (masking_pad_only, ["you masked padding"]),
        (lambda t, m, v, s, g: bert_masking(t, m, v, s[:1], g), ["you chose [CLS]"]),
        (lambda t, m, v, s, g: bert_masking(t, m, v, s[:2], g), ["you chose [SEP]"]),
        (lambda t, *a: (bert_masking(t, *a)[0], t), ["the tokens everywhere"]),
        (labels_as(0), ["no label is -100", "hold 0", "F.cross_entropy skips"]),
        (corrupted_labels, ["your labels hold the corrupted inputs"]),
        (changed_everywhere, ["positions that you did not choose"]),
        (lambda t, m, v, s, g: bert_masking(t, m, v + 500, s, g),
         ["outside the vocabulary"]),
        (keyword(labels_at="mask"), ["only the [MASK] positions"]),
        (keyword(p=0.3), ["% of the 57", "15% of the ordinary tokens",
                          "probability 0.15", "fixed count per sentence"]),
        (only_masked_labelled, ["only the [MASK] positions", "about 12%"]),
        (keyword(split=(1.0, 1.0)), ["Every chosen token became [MASK]"]),
        (keyword(split=(0.8, 1.0)), ["None stayed"]),
        (keyword(split=(0.8, 0.8)), ["None became a random token"]),
        (keyword(split=(0.8, 0.82)), ["About 2% random", "One uniform draw"]),
        (keyword(split=(0.5, 0.9)), ["BERT's rule is 80% [MASK], 10% random"]),
        (keyword(g=False), ["seeded alike gave different results"]),
        (lambda t, m, v, s, g: bert_masking(t, m, v, s, torch.Generator()
                                            .manual_seed(0)),
         ["chose the same positions"]),
        (lambda t, *a: bert_masking(t, *a)[0], ["Return a pair (inputs, labels)"]),
        (lambda t, *a: tuple(x.float() + 0.5 for x in bert_masking(t, *a)),
         ["whole numbers"]),
        (lambda t, *a: (bert_masking(t, *a)[0][:, :-1], t),
         ["inputs: The inputs should have shape (64, 160)"]),
    ],
)
def test_mlm_masking_names_each_mistake(wrong, phrases):
    assert_rejects(check_mlm_masking(wrong), *phrases)


def test_the_mlm_sentences_have_padding_and_enough_tokens():
    tokens = module._mlm_tokens()
    ordinary = ~torch.isin(tokens, torch.tensor(module._MLM_SPECIAL))
    assert (tokens == module._PAD).sum() > 1000 and ordinary.sum() > 5000
    assert (tokens[:, 0] == module._CLS).all()
    assert ((tokens == module._SEP).sum(dim=1) == 1).all()


# --- 7. the parameters of a modern block ----------------------------------------------

def block_parameters(embed_dim, num_heads, hidden):
    attention = 4 * embed_dim * embed_dim  # W_q, W_k, W_v, W_o: no biases
    ffn = 3 * embed_dim * hidden  # W_1, W_3 (D -> h), W_2 (h -> D)
    return attention + ffn + 2 * embed_dim  # two RMSNorm weights


@pytest.mark.parametrize("width, num_heads, hidden", [(8, 2, 12), (512, 8, 1365)])
def test_the_block_formula_counts_the_library(width, num_heads, hidden):
    parts = [MultiHeadAttention(width, num_heads, bias=False), SwiGLU(width, hidden),
             RMSNorm(width), RMSNorm(width)]
    count = sum(p.numel() for part in parts for p in part.parameters())
    assert count == block_parameters(width, num_heads, hidden)
    assert count == module._modern_block_parameters(width, num_heads, hidden)


BIG_NUMBER_FORMS = [form for form in NUMBER_FORMS if form != "float16"]


@pytest.mark.parametrize("form", BIG_NUMBER_FORMS)
def test_block_parameters_accepts_any_number_form(form):
    feedback = check_modern_block_parameters(
        in_form(lambda *a: float(block_parameters(*a)), form))
    assert feedback and "3,146,240" in feedback.message


def plus(extra):
    return lambda d, n, h: block_parameters(d, n, h) + extra(d, n, h)


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (plus(lambda d, n, h: 4 * d), ["the attention's biases"]),
        (plus(lambda d, n, h: 5 * d + 2 * h), ["you counted biases"]),
        (plus(lambda d, n, h: 2 * d), ["RMSNorm has only its weight"]),
        (plus(lambda d, n, h: -d), ["one RMSNorm is missing"]),
        (plus(lambda d, n, h: -2 * d), ["the two RMSNorms are missing"]),
        (plus(lambda d, n, h: -d * h), ["two matrices for SwiGLU"]),
        (plus(lambda d, n, h: -d * d), ["W_o is missing"]),
        (plus(lambda d, n, h: 4 * (n - 1) * d * d), ["the heads do not multiply"]),
        (plus(lambda d, n, h: d == 96), ["For D = 96, H = 6, h = 256 you count 110,785",
                                         "the block has 110,784"]),
    ],
)
def test_block_parameters_names_each_mistake(wrong, phrases):
    assert_rejects(check_modern_block_parameters(wrong), *phrases)


# --- 8. the KV cache's bytes ----------------------------------------------------------

def cache_bytes(batch_size, num_layers, num_heads, head_dim, length, size):
    return 2 * num_layers * batch_size * num_heads * length * head_dim * size


def test_the_cache_formula_is_what_the_library_caches():
    layer = MultiHeadAttention(12, 3, bias=False).to(torch.bfloat16)
    x = torch.randn(2, 5, 12, dtype=torch.bfloat16)  # (B, T, D)
    cache = layer.empty_cache(2, x)
    for step in range(5):  # one token at a time
        token = x[:, step:step + 1]
        _, cache = layer(token, token, token, cache=cache)
    stored = sum(t.numel() * t.element_size() for t in cache)
    assert stored == cache_bytes(2, 1, 3, 4, 5, 2)
    assert module._kv_cache_bytes(2, 1, 3, 4, 5, 2) == stored


@pytest.mark.parametrize("form", NUMBER_FORMS)
def test_cache_bytes_accepts_any_number_form(form):
    feedback = check_kv_cache_bytes(in_form(lambda *a: float(cache_bytes(*a)), form))
    assert feedback and "2 GiB per sequence" in feedback.message


def times(factor):
    return lambda *case: cache_bytes(*case) * factor(*case)


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (times(lambda *c: 0.5), ["only the keys (or only the values)"]),
        (times(lambda b, n, h, d, t, s: 1 / n), ["you counted one layer"]),
        (times(lambda b, n, h, d, t, s: 1 / b), ["you counted one sequence"]),
        (times(lambda b, n, h, d, t, s: 1 / h), ["you counted one head"]),
        (times(lambda b, n, h, d, t, s: 1 / s), ["the number of numbers"]),
        (times(lambda *c: 8), ["that is bits"]),
        (times(lambda b, n, h, d, t, s: (t + 1) / t),
         ["For B = 2, N = 3, H = 4, Dh = 8, T = 10, s = 4 you count 16,896 bytes"]),
    ],
)
def test_cache_bytes_names_each_mistake(wrong, phrases):
    assert_rejects(check_kv_cache_bytes(wrong), *phrases)


# --- all checkers ---------------------------------------------------------------------

def test_the_readers_inputs_are_copies():
    def in_place(logits, t):
        return tempered(logits.mul_(1.0), t)

    def zeroing(tokens, *args):
        result = the_library(tokens, *args)
        tokens.zero_()
        return result

    assert check_sampling_temperature(in_place)
    assert check_mlm_masking(zeroing)


def test_checkers_leave_the_random_state_alone():
    state = torch.get_rng_state()
    check_causal_mask_with_offset(offset_mask)
    check_sampling_temperature(tempered)
    check_top_p(nucleus)
    check_rms_norm(rms_norm)
    check_swiglu(swiglu)
    check_mlm_masking(bert_masking)
    check_modern_block_parameters(block_parameters)
    check_kv_cache_bytes(cache_bytes)
    assert torch.equal(state, torch.get_rng_state())
    assert math.isfinite(torch.rand(1).item())
