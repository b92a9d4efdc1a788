"""Chapter 5's checkers accept the right answers in every form and name each typical
mistake with the Transformer's counts, schedule, loss, sublayers and cache."""

import numpy as np
import pytest
import torch
from answer_forms import (
    NUMBER_FORMS,
    TENSOR_FORMS,
    assert_rejects,
    in_form,
)
from torch.nn import functional as F
from torch.utils.flop_counter import FlopCounterMode

import attention_lib.exercises.ch05_transformer as module
from attention_lib import (
    TransformerDecoder,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
    warmup_rate,
)
from attention_lib.exercises.ch05_transformer import (
    check_cache_size,
    check_decoder_block_parameters,
    check_encoder_block_macs,
    check_encoder_block_parameters,
    check_smoothed_loss,
    check_sublayer,
    check_warmup_peak,
    check_warmup_rate,
)



# float16 cannot hold counts in the millions (its largest number is 65,504)
BIG_NUMBER_FORMS = [form for form in NUMBER_FORMS if form != "float16"]


# --- 1. the parameters of a block -----------------------------------------------------

def encoder_count(d, h, f):
    return 4 * d * d + 2 * d * f + 9 * d + f


def decoder_count(d, h, f):
    return 8 * d * d + 2 * d * f + 15 * d + f


def test_the_block_formulas_equal_the_library_for_every_number_of_heads():
    for width, ffn in ((8, 32), (64, 100), (512, 2048)):
        for num_heads in (1, 2, 8):
            encoder = TransformerEncoderBlock(width, num_heads, ffn)
            decoder = TransformerDecoderBlock(width, num_heads, ffn)
            assert sum(p.numel() for p in encoder.parameters()) == encoder_count(
                width, num_heads, ffn
            )
            assert sum(p.numel() for p in decoder.parameters()) == decoder_count(
                width, num_heads, ffn
            )


def test_block_parameters_accept_the_derivation():
    feedback = check_encoder_block_parameters(encoder_count)
    assert feedback and "3,152,384" in feedback.message
    feedback = check_decoder_block_parameters(decoder_count)
    assert feedback and "4,204,032" in feedback.message


def test_block_parameters_accept_a_count_by_heads():
    def by_heads(d, h, f):
        heads = h * 3 * (d * (d // h) + d // h)  # each head's W_q, W_k, W_v slices
        return heads + d * d + d + 2 * d * f + f + d + 4 * d

    assert check_encoder_block_parameters(by_heads)


@pytest.mark.parametrize("form", BIG_NUMBER_FORMS)
def test_block_parameters_accept_any_number_form(form):
    assert check_encoder_block_parameters(in_form(lambda *a: float(encoder_count(*a)),
                                                  form))
    assert check_decoder_block_parameters(in_form(lambda *a: float(decoder_count(*a)),
                                                  form))


def test_counting_checkers_leave_the_random_state_alone():
    state = torch.get_rng_state()
    check_encoder_block_parameters(encoder_count)
    check_decoder_block_parameters(decoder_count)
    check_encoder_block_macs(lambda l, d, f: 4 * d * d + 2 * l * d + 2 * d * f)
    check_cache_size(lambda t, n, d, b: 2 * n * b * t * d)
    check_sublayer(lambda x, s, n, first: x + s(n(x)) if first else n(x + s(x)))
    assert torch.equal(state, torch.get_rng_state())


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda d, h, f: encoder_count(d, h, f) - 4 * d,
         ["short by 4D:", "the attention's four biases", "the two LayerNorms"]),
        (lambda d, h, f: encoder_count(d, h, f) - 2 * d,
         ["short by 2D:", "the LayerNorms' biases", "one of the two LayerNorms"]),
        (lambda d, h, f: encoder_count(d, h, f) - 5 * d - f,
         ["short by 5D + Dff:", "the feed-forward network's biases"]),
        (lambda d, h, f: encoder_count(d, h, f) - 9 * d - f, ["short by 9D + Dff:"]),
        (lambda d, h, f: encoder_count(d, h, f) - d * d - d,
         ["short by D² + D:", "the output projection W_o"]),
        (lambda d, h, f: encoder_count(d, h, f) - d * f - d,
         ["short by D·Dff + D:", "you counted the FFN once"]),
        (lambda d, h, f: encoder_count(d, h, f) - d * f - f,
         ["short by D·Dff + Dff:", "you counted the FFN once"]),
        (lambda d, h, f: h * (4 * d * d + 4 * d) + 2 * d * f + f + 5 * d,
         ["depends on H", "multiplied the attention's parameters by H"]),
        (lambda d, h, f: encoder_count(d, h, f) + h, ["Your count depends on H"]),
        (decoder_count, ["that is a decoder block's count"]),
        (lambda d, h, f: encoder_count(d, h, 4 * d), ["you assumed Dff = 4D"]),
        (lambda d, h, f: encoder_count(d, h, f) + 1,
         ["For D = 8, H = 2, Dff = 32 you count 873", "has 872, 1 too many"]),
        (lambda d, h, f: 3_152_384, ["For D = 8, H = 2, Dff = 32"]),
    ],
)
def test_encoder_block_parameters_name_each_mistake(wrong, phrases):
    assert_rejects(check_encoder_block_parameters(wrong), *phrases)


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (encoder_count, ["that is the encoder block's count", "cross-attention"]),
        (lambda d, h, f: decoder_count(d, h, f) - 4 * d * d - 4 * d,
         ["short by 4D² + 4D:", "the second attention, the cross-attention"]),
        (lambda d, h, f: decoder_count(d, h, f) - 2 * d * d - 2 * d,
         ["short by 2D² + 2D:", "the cross-attention's W_k and W_v"]),
        (lambda d, h, f: decoder_count(d, h, f) - 2 * d,
         ["short by 2D:", "one of the three LayerNorms"]),
        (lambda d, h, f: decoder_count(d, h, f) - 3 * d,
         ["short by 3D:", "the LayerNorms' biases"]),
        (lambda d, h, f: decoder_count(d, h, f) - 8 * d,
         ["short by 8D:", "the two attentions' biases"]),
        (lambda d, h, f: decoder_count(d, h, f) - d * d - d,
         ["short by D² + D:", "W_o"]),
        (lambda d, h, f: 2 * h * (4 * d * d + 4 * d) + 2 * d * f + f + 7 * d,
         ["depends on H"]),
        (lambda d, h, f: decoder_count(d, h, f) + h, ["Your count depends on H"]),
        (lambda d, h, f: decoder_count(d, h, f) + 1, ["the decoder block has"]),
    ],
)
def test_decoder_block_parameters_name_each_mistake(wrong, phrases):
    assert_rejects(check_decoder_block_parameters(wrong), *phrases)


@pytest.mark.parametrize("decoder", [False, True])
def test_every_named_omission_is_recognised_as_itself(decoder):
    """No two omissions (nor an omission and the right answer) coincide on the cases:
    every combination of left-out groups gets its own 'short by' message."""
    num_norms = 3 if decoder else 2
    parts = module._block_parts(num_norms, decoder)
    groups = module._block_groups(num_norms, decoder)
    count = decoder_count if decoder else encoder_count
    check = {True: check_decoder_block_parameters,
             False: check_encoder_block_parameters}[decoder]
    for coefs in module._omissions(parts, groups):
        def short(d, h, f, coefs=coefs):
            values = module._param_values(d, f)
            return count(d, h, f) - sum(c * v for c, v in zip(coefs, values))

        text = module._poly_text(coefs, module._PARAM_BASIS)
        if decoder and coefs == (4, 0, 6, 0):  # the encoder's count, named as such
            assert_rejects(check(short), "that is the encoder block's count")
        else:
            assert_rejects(check(short), f"short by {text}:")


# --- 2. the work per token ------------------------------------------------------------

def macs(length, width, ffn):
    return 4 * width * width + 2 * length * width + 2 * width * ffn


@pytest.mark.parametrize("length, width, num_heads, ffn",
                         [(5, 12, 3, 20), (9, 64, 16, 256), (33, 32, 1, 48)])
def test_the_macs_formula_equals_pytorchs_count_of_the_library_block(
    length, width, num_heads, ffn
):
    torch.manual_seed(0)
    block = TransformerEncoderBlock(width, num_heads, ffn)
    x = torch.randn(2, length, width)  # (B, L, D)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        block(x, need_weights=True)
    assert counter.get_total_flops() == 2 * 2 * length * macs(length, width, ffn)
    assert module._block_macs_per_token(length, width, num_heads, ffn) == macs(
        length, width, ffn
    )


def test_macs_accept_the_derivation_in_any_number_form():
    feedback = check_encoder_block_macs(macs)
    assert feedback and "3,248,128" in feedback.message
    for form in BIG_NUMBER_FORMS:
        assert check_encoder_block_macs(in_form(lambda *a: float(macs(*a)), form))


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda l, d, f: 4 * d * d + 2 * d * f,
         ["short by 2LD:", "the weight matrices only"]),
        (lambda l, d, f: 4 * d * d + l * d + 2 * d * f,
         ["short by LD:", "one of the attention's two L·D terms"]),
        (lambda l, d, f: 4 * d * d + 2 * l * d + d * f,
         ["short by D·Dff:", "one of the FFN's two layers"]),
        (lambda l, d, f: 3 * d * d + 2 * l * d + 2 * d * f,
         ["short by D²:", "W_o"]),
        (lambda l, d, f: d * d + 2 * l * d + 2 * d * f,
         ["short by 3D²:", "W_q, W_k, W_v"]),
        (lambda l, d, f: 2 * macs(l, d, f), ["FLOPs", "rather than multiply-adds"]),
        (lambda l, d, f: l * macs(l, d, f), ["all L tokens"]),
        (lambda l, d, f: 4 * d * d + 2 * l * l * d + 2 * d * f, ["L²·D"]),
        (lambda l, d, f: macs(l, d, 4 * d), ["you assumed Dff = 4D"]),
        (lambda l, d, f: macs(l, d, f) + 1,
         ["For L = 5, D = 12, Dff = 20 you count", "the block does"]),
    ],
)
def test_macs_name_each_mistake(wrong, phrases):
    assert_rejects(check_encoder_block_macs(wrong), *phrases)


# --- 3. the warm-up schedule ----------------------------------------------------------

def rate(step, width, warmup):
    return width**-0.5 * min(step**-0.5, step * warmup**-1.5)


def test_warmup_rate_accepts_the_formula_the_library_and_any_number_form():
    assert check_warmup_rate(rate)
    assert check_warmup_rate(warmup_rate)
    for form in NUMBER_FORMS:
        if form != "float16":  # 3 decimal digits: the rates differ by less
            assert check_warmup_rate(in_form(rate, form)), form


def test_warmup_rate_accepts_the_piecewise_form():
    def piecewise(step, width, warmup):
        if step < warmup:
            return step / warmup * (width * warmup) ** -0.5
        return (width * step) ** -0.5

    assert check_warmup_rate(piecewise)


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda s, d, w: d**-0.5 * s**-0.5, ["no warm-up", "decays from step 1"]),
        (lambda s, d, w: d**-0.5 * s * w**-1.5, ["no decay", "grows linearly forever"]),
        (lambda s, d, w: d**-0.5 * min(s * w**-1.5, w**-0.5),
         ["no decay", "stays at its peak"]),
        (lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5), ["max instead of min"]),
        (lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5),
         ["wrong exponent", "warmup^-1.5, not warmup^-0.5"]),
        (lambda s, d, w: d**-0.5 * min(w**0.5 / s, s * w**-1.5),
         ["wrong exponent", "decays as 1/step"]),
        (lambda s, d, w: d**-0.5 * min(1 / s, s * w**-1.5),
         ["wrong exponent", "peaks at warmup^0.75"]),
        (lambda s, d, w: min(s**-0.5, s * w**-1.5), ["the factor D^-0.5 is missing"]),
        (lambda s, d, w: rate(s, d, w) / d**0.5, ["not 1/D"]),
        (lambda s, d, w: rate(s, d, w) * d, ["not √D"]),
        (lambda s, d, w: rate(s + 1, d, w), ["off by one"]),
        (lambda s, d, w: rate(s, d, w // 2),
         ["your rate peaks at step 50", "peaks at step warmup = 100"]),
        (lambda s, d, w: rate(s, d, w) * 1.001,
         ["At step 1 (D = 512, warmup = 4000) your rate is"]),
        (lambda s, d, w: rate(s - 1, d, w),
         ["At step 1: Your function raised ZeroDivisionError",
          "The first update is step 1"]),
    ],
)
def test_warmup_rate_names_each_mistake(wrong, phrases):
    assert_rejects(check_warmup_rate(wrong), *phrases)


def peak(width, warmup):
    return warmup, (width * warmup) ** -0.5


def test_warmup_peak_accepts_the_derivation_in_any_form():
    assert check_warmup_peak(peak)
    assert check_warmup_peak(lambda d, w: [float(w), np.float32((d * w) ** -0.5)])
    assert check_warmup_peak(lambda d, w: tuple(map(torch.tensor, peak(d, w))))
    for width, warmup in module._PEAK_CASES:  # the derivation is the library's peak
        steps = range(1, 3 * warmup)
        best = max(steps, key=lambda s: warmup_rate(s, width, warmup))
        assert (best, warmup_rate(best, width, warmup)) == pytest.approx(
            peak(width, warmup)
        )


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda d, w: (w + 1, (d * w) ** -0.5), ["the peak is at step 4000, not 4001"]),
        (lambda d, w: (w - 1, (d * w) ** -0.5), ["not 3999"]),
        (lambda d, w: (2 * w, (d * w) ** -0.5), ["your peak step is 8000"]),
        (lambda d, w: peak(512, 4000), ["For D = 64, warmup = 100", "peak step"]),
        (lambda d, w: (w, w**-0.5), ["the factor D^-0.5 is missing"]),
        (lambda d, w: (w, d**-0.5), ["the rate at step 1 without warm-up"]),
        (lambda d, w: (w, warmup_rate(w + 1, d, w)), ["one step after the peak"]),
        (lambda d, w: (w, 0.5), ["your rate is 0.5"]),
        (lambda d, w: w, ["Return a pair (step, rate)"]),
        (lambda d, w: (w, "0.0007"), ["peak learning rate as one number"]),
        (lambda d, w: (None, 0.0007), ["step of the peak"]),
    ],
)
def test_warmup_peak_names_each_mistake(wrong, phrases):
    assert_rejects(check_warmup_peak(wrong), *phrases)


# --- 4. label smoothing ---------------------------------------------------------------

def smoothed(logits, target, eps):
    log_probs = torch.log_softmax(logits, dim=-1)
    q = torch.full_like(log_probs, eps / logits.shape[-1])
    q[target] += 1 - eps
    return -(q * log_probs).sum()


def smoothed_mix(logits, target, eps):  # (1 − ε)·NLL + ε·mean over the vocabulary
    log_probs = torch.log_softmax(logits.double(), dim=-1)
    return (1 - eps) * -log_probs[target] + eps * -log_probs.mean()


def smoothed_numpy(logits, target, eps):
    z = logits.numpy().astype(np.float64)
    log_probs = z - z.max() - np.log(np.exp(z - z.max()).sum())
    q = np.full(z.shape, eps / z.size)
    q[target] += 1 - eps
    return -(q * log_probs).sum()


@pytest.mark.parametrize("solution", [smoothed, smoothed_mix, smoothed_numpy])
def test_smoothed_loss_accepts_every_correct_form(solution):
    assert check_smoothed_loss(solution)


@pytest.mark.parametrize("form", NUMBER_FORMS[:-2])  # float16 rounds beyond 1e-5
def test_smoothed_loss_accepts_any_number_form(form):
    assert check_smoothed_loss(in_form(lambda *a: smoothed(*a).item(), form))


def other_convention(logits, target, eps):
    log_probs = torch.log_softmax(logits, dim=-1)
    q = torch.full_like(log_probs, eps / (logits.shape[-1] - 1))
    q[target] = 1 - eps
    return -(q * log_probs).sum()


def not_subtracted(logits, target, eps):
    log_probs = torch.log_softmax(logits, dim=-1)
    q = torch.full_like(log_probs, eps / logits.shape[-1])
    q[target] += 1
    return -(q * log_probs).sum()


def no_log(logits, target, eps):
    probs = torch.softmax(logits, dim=-1)
    q = torch.full_like(probs, eps / logits.shape[-1])
    q[target] += 1 - eps
    return -(q * probs).sum()


def raw_logits(logits, target, eps):
    q = torch.full_like(logits, eps / logits.shape[-1])
    q[target] += 1 - eps
    return -(q * logits).sum()


def kl_divergence(logits, target, eps):
    q = torch.full_like(logits, eps / logits.shape[-1])
    q[target] += 1 - eps
    return F.kl_div(torch.log_softmax(logits, -1), q, reduction="sum")


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (other_convention,
         ["ε spread over the V − 1 wrong classes", "current fairseq's"]),
        (not_subtracted, ["ε is not subtracted from the right class"]),
        (no_log, ["the log of the probabilities is missing"]),
        (raw_logits, ["raw logits as log-probabilities"]),
        (lambda z, t, e: -torch.log_softmax(z, -1)[t], ["no smoothing"]),
        (lambda z, t, e: -(1 - e) * torch.log_softmax(z, -1)[t],
         ["the uniform part is missing"]),
        (kl_divergence, ["KL divergence"]),
        (lambda z, t, e: smoothed(z, t, e) / z.shape[-1], ["averaged over the V"]),
        (lambda z, t, e: -torch.log(
            (1 - e) * torch.softmax(z, -1)[t] + e / z.shape[-1]),
         ["smoothed the prediction, not the target"]),
        (lambda z, t, e: -smoothed(z, t, e), ["the sign is wrong"]),
        (lambda z, t, e: torch.log(z).sum(), ["NaN", "log_softmax"]),
        (lambda z, t, e: 1.01 * smoothed(z, t, e),
         ["For V = 5, target = 2, ε = 0.1: your loss is"]),
        (lambda z, t, e: smoothed(z, t, e) if e else -1.0,
         ["For V = 4, target = 3, ε = 0.0"]),
        (lambda z, t, e: torch.log_softmax(z, -1), ["as one number"]),
    ],
)
def test_smoothed_loss_names_each_mistake(wrong, phrases):
    assert_rejects(check_smoothed_loss(wrong), *phrases)


def test_smoothed_loss_cases_tell_the_conventions_apart():
    for vocab, target, eps in module._SMOOTH_CASES:
        assert 0 <= target < vocab
    assert any(eps > 0 for _, _, eps in module._SMOOTH_CASES)
    assert module._SMOOTH_CASES[-1][2] == 0.0  # plain cross-entropy, checked last


# --- 5. one residual sublayer ---------------------------------------------------------

def sublayer(x, sub, norm, norm_first):
    return x + sub(norm(x)) if norm_first else norm(x + sub(x))


def sublayer_library(x, sub, norm, norm_first):  # through the library's AddNorm
    from attention_lib import AddNorm

    add_norm = AddNorm(x.shape[-1], norm_first=norm_first)
    add_norm.norm = norm
    return add_norm(x, sub(add_norm.sublayer_input(x)))


@pytest.mark.parametrize("solution", [sublayer, sublayer_library])
@pytest.mark.parametrize("form", TENSOR_FORMS[:-1])  # a list of rows has no (B, L, D)
def test_sublayer_accepts_every_form(solution, form):
    feedback = check_sublayer(in_form(solution, form))
    assert feedback, feedback


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda x, s, n, first: sublayer(x, s, n, not first),
         ["post-norm and pre-norm are swapped"]),
        (lambda x, s, n, first: n(x + s(x)),
         ["with norm_first=True you return post-norm", "norm_first is ignored"]),
        (lambda x, s, n, first: x + s(n(x)),
         ["with norm_first=False you return pre-norm", "norm_first is ignored"]),
        (lambda x, s, n, first: sublayer(x, s, n, first) if first else n(s(x)),
         ["With norm_first=False: no residual"]),
        (lambda x, s, n, first: s(n(x)) if first else sublayer(x, s, n, first),
         ["With norm_first=True: no residual"]),
        (lambda x, s, n, first: n(x + s(n(x))),
         ["the norm is applied to the sublayer's input and to its output"]),
        (lambda x, s, n, first: x + n(s(n(x))) if first else n(x + s(x)),
         ["With norm_first=True", "the sublayer's input and to its output"]),
        (lambda x, s, n, first: x + n(s(x)) if not first else x + s(n(x)),
         ["With norm_first=False", "normalised the sublayer's output"]),
        (lambda x, s, n, first: n(x) + s(n(x)) if first else n(x + s(x)),
         ["residual is taken from the normalised input"]),
        (lambda x, s, n, first: x + s(x), ["no norm"]),
        (lambda x, s, n, first: 2 * sublayer(x, s, n, first),
         ["With norm_first=False: your output differs from norm(x + sublayer(x))"]),
        (lambda x, s, n, first: sublayer(x, s, n, first)[0],
         ["With norm_first=False", "should have shape (2, 3, 6)"]),
    ],
)
def test_sublayer_names_each_mistake(wrong, phrases):
    assert_rejects(check_sublayer(wrong), *phrases)


def test_sublayer_setup_tells_every_placement_apart():
    x, sub, norm = module._sublayer_setup()
    with torch.no_grad():
        outputs = [
            norm(x + sub(x)), x + sub(norm(x)), norm(sub(x)), sub(norm(x)),
            norm(x + sub(norm(x))), x + norm(sub(norm(x))), x + norm(sub(x)),
            norm(x) + sub(norm(x)), x + sub(x),
        ]
    for i, a in enumerate(outputs):
        for b in outputs[i + 1:]:
            assert not torch.allclose(a, b, atol=1e-3)


# --- 6. the decoder's cache -----------------------------------------------------------

def cache_numbers(steps, num_layers, width, batch_size):
    return 2 * num_layers * batch_size * steps * width


def test_the_cache_formula_equals_the_library_fed_in_steps_or_at_once():
    torch.manual_seed(0)
    decoder = TransformerDecoder(13, 12, 3, 24, 2).eval()
    enc_outputs = torch.randn(3, 5, 12)  # (B, Lk, D)
    tokens = torch.randint(0, 13, (3, 6))  # (B, T)
    state = decoder.init_state(enc_outputs)
    with torch.no_grad():
        for t in range(6):
            _, state = decoder(tokens[:, t:t + 1], state)
        _, at_once = decoder(tokens, decoder.init_state(enc_outputs))
    for final in (state, at_once):
        assert [tuple(c.keys.shape) for c in final.cache] == [(3, 3, 6, 4)] * 2
        numbers = sum(t.numel() for c in final.cache for t in c)  # keys and values
        assert numbers == cache_numbers(6, 2, 12, 3)
    for case in module._CACHE_CASES:
        assert module._cache_numbers(*case) == cache_numbers(*case)


@pytest.mark.parametrize("form", BIG_NUMBER_FORMS)
def test_cache_size_accepts_any_number_form(form):
    feedback = check_cache_size(in_form(lambda *a: float(cache_numbers(*a)), form))
    assert feedback and "614,400" in feedback.message


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda t, n, d, b: n * b * t * d,
         ["one tensor per layer", "keys *and* the values"]),
        (lambda t, n, d, b: 2 * b * t * d, ["every layer keeps its own cache"]),
        (lambda t, n, d, b: 2 * n * t * d, ["each sentence of the batch"]),
        (lambda t, n, d, b: 2 * n * b * t, ["each cached position is D numbers"]),
        (lambda t, n, d, b: 2 * n * b * (t + 1) * d, ["one position too many"]),
        (lambda t, n, d, b: 2 * n * b * (t - 1) * d, ["one position too few"]),
        (lambda t, n, d, b: n * b * d * t * (t + 1),
         ["summed the cache's size over all steps"]),
        (lambda t, n, d, b: 4 * cache_numbers(t, n, d, b),
         ["size in bytes in float32", "count numbers"]),
        (lambda t, n, d, b: 2 * cache_numbers(t, n, d, b),
         ["twice the answer", "cross-attention's keys and values", "state.memory"]),
        (lambda t, n, d, b: cache_numbers(t, n, d, b) + 1,
         ["For T = 5, N = 3, D = 8, B = 2 you count 481", "holds 480"]),
    ],
)
def test_cache_size_names_each_mistake(wrong, phrases):
    assert_rejects(check_cache_size(wrong), *phrases)


# --- all checkers: the starter, odd answers, documentation ----------------------------
