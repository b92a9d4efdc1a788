"""Chapter 4's checkers accept the solutions in every form and name each typical
multi-head attention mistake."""
import math

import pytest
import torch
from answer_forms import (
    NUMBER_FORMS,
    TENSOR_FORMS,
    assert_rejects,
    in_form,
    not_implemented,
)

import attention_lib.exercises.ch04_self_attention as module
from attention_lib import MultiHeadAttention
from attention_lib.exercises import (
    check_attention_weights,
    check_head_scale,
    check_mask_broadcast,
    check_merge_heads,
    check_mha_parameter_count,
    check_padding_mask,
    check_split_heads,
)



# --- 1. split_heads -------------------------------------------------------------------

def split_reshape(x, num_heads):
    batch_size, length, width = x.shape
    x = x.reshape(batch_size, length, num_heads, width // num_heads)  # (B, L, H, Dh)
    return x.transpose(1, 2)  # (B, H, L, Dh)


def split_chunks(x, num_heads):  # another correct way: stack the chunks on dim 1
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)


def split_einsum(x, num_heads):  # and one through einsum, in float64
    batch_size, length, width = x.shape
    blocks = x.double().reshape(batch_size, length, num_heads, width // num_heads)
    return torch.einsum("blhd->bhld", blocks)


def split_no_transpose(x, num_heads):
    batch_size, length, width = x.shape
    return x.view(batch_size, num_heads, length, width // num_heads)


def split_interleaved(x, num_heads):
    batch_size, length, width = x.shape
    return x.reshape(batch_size, length, width // num_heads, num_heads).permute(
        0, 3, 1, 2
    )


def split_wrong_transpose(x, num_heads):
    batch_size, length, width = x.shape
    return x.reshape(batch_size, length, num_heads, width // num_heads).transpose(2, 3)


@pytest.mark.parametrize("solution", [split_reshape, split_chunks, split_einsum])
@pytest.mark.parametrize("form", TENSOR_FORMS)
def test_split_heads_accepts_every_form(solution, form):
    feedback = check_split_heads(in_form(solution, form))
    assert feedback, feedback


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (split_no_transpose, ["straight to (B, H, L, Dh), with no transpose",
                              "Tokens are mixed across heads"]),
        (split_interleaved, ["features h, h+H, h+2H"]),
        (lambda x, h: split_reshape(x, h).flip(1), ["reverse order"]),
        (lambda x, h: x.reshape(*x.shape[:2], h, -1),
         ["order (B, L, H, Dh)", "add .transpose(1, 2)"]),
        (split_wrong_transpose, ["order (B, L, Dh, H)", "transposed the wrong axes"]),
        (lambda x, h: torch.stack(x.chunk(h, dim=-1)),
         ["order (H, B, L, Dh)", "heads come before the batch"]),
        (lambda x, h: split_reshape(x, h).reshape(-1, x.shape[1], x.shape[2] // h),
         ["folded the heads into the batch", "return (B, H, L, Dh) = (2, 3, 5, 4)"]),
        (lambda x, h: split_reshape(x, 3), ["raised RuntimeError"]),
        (lambda x, h: split_reshape(x, h) + 1, ["differ from split_heads(x, 3)"]),
        (lambda x, h: x[:, :, :2], ["should have shape (2, 3, 5, 4)"]),
        (lambda x, h: None, ["returned None"]),
    ],
)
def test_split_heads_names_each_mistake(wrong, phrases):
    assert_rejects(check_split_heads(wrong), *phrases)


# --- 2. merge_heads -------------------------------------------------------------------

def merge_reshape(x):
    batch_size, num_heads, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch_size, length, num_heads * head_dim)


def merge_cat(x):  # concatenating the heads along the features
    return torch.cat(x.unbind(1), dim=-1)


@pytest.mark.parametrize("solution", [merge_reshape, merge_cat])
@pytest.mark.parametrize("form", TENSOR_FORMS)
def test_merge_heads_accepts_every_form(solution, form):
    feedback = check_merge_heads(in_form(solution, form))
    assert feedback, feedback


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda x: x.reshape(x.shape[0], x.shape[2], -1),
         ["straight to (B, L, D), with no transpose"]),
        (lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1),
         ["RuntimeError", "view size is not compatible", "use .reshape"]),
        (lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1),
         ["interleaved"]),
        (lambda x: merge_reshape(x.flip(1)), ["reverse order"]),
        (lambda x: x.transpose(1, 2), ["did not concatenate", "(2, 5, 12)"]),
        (lambda x: x.sum(1), ["you summed the heads"]),
        (lambda x: x.mean(1), ["you averaged the heads"]),
        (lambda x: merge_reshape(x) * 2, ["differs from merge_heads"]),
        (not_implemented, []),
    ],
)
def test_merge_heads_names_each_mistake(wrong, phrases):
    feedback = check_merge_heads(wrong)
    if wrong is not_implemented:
        assert feedback.todo and not feedback
        return
    assert_rejects(feedback, *phrases)


# --- 3. the heads' attention weights --------------------------------------------------

def weights(dim=-1, scale="head", softmax=True, swap=False):
    def fn(q, k):
        if swap:
            q, k = k, q
        size = {"head": q.shape[-1], "model": q.shape[1] * q.shape[-1], "none": 1}
        scores = q @ k.transpose(-2, -1) / math.sqrt(size[scale])  # (B, H, Lq, Lk)
        return torch.softmax(scores, dim=dim) if softmax else scores
    return fn


def weights_einsum(q, k):
    scores = torch.einsum("bhqd,bhkd->bhqk", q.double(), k.double())  # (B, H, Lq, Lk)
    return (scores / math.sqrt(q.shape[-1])).softmax(-1)


@pytest.mark.parametrize("solution", [weights(), weights_einsum])
@pytest.mark.parametrize("form", TENSOR_FORMS)
def test_attention_weights_accepts_every_form(solution, form):
    feedback = check_attention_weights(in_form(solution, form))
    assert feedback, feedback


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (weights(dim=-2), ["sum to 1 over the queries", "dim=-1"]),
        (weights(dim=2), ["sum to 1 over the queries"]),
        (weights(dim=1), ["softmax over the heads axis"]),
        (weights(dim=0), ["softmax over the batch"]),
        (weights(softmax=False), ["there is no softmax"]),
        (weights(softmax=False, scale="none"), ["raw scores"]),
        (weights(scale="none"), ["the scale is missing", "√Dh = √5"]),
        (weights(scale="model"), ["you divided by √D = √15"]),
        (lambda q, k: torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1], dim=-1),
         ["you divided by Dh = 5", "√Dh"]),
        (weights(swap=True), ["weights of k qᵀ"]),
        (lambda q, k: weights()(q, k).transpose(-2, -1)
         if q.shape[2] == k.shape[2] else weights()(q, k),
         ["your weights are transposed"]),
        (lambda q, k: torch.softmax(q @ k.transpose(1, 2), -1),
         ["raised RuntimeError", "k.transpose(-2, -1)"]),
        (lambda q, k: weights()(q, k)[..., :3], ["should have shape (2, 3, 4, 6)"]),
        (lambda q, k: weights()(q, k) * 0.5, ["differ from softmax(q kᵀ/√Dh)"]),
        (not_implemented, ["Your turn: replace the `raise NotImplementedError`"]),
    ],
)
def test_attention_weights_names_each_mistake(wrong, phrases):
    feedback = check_attention_weights(wrong)
    if wrong is not_implemented:
        assert feedback.todo and not feedback and phrases[0] in feedback.message
        return
    assert_rejects(feedback, *phrases)


# --- 4. the scale of each head --------------------------------------------------------

def mha(scale_of=lambda head_dim, width, num_heads: 1 / math.sqrt(head_dim),
        heads=True, merge_transpose=True, split_transpose=True, dim=-1):
    def fn(queries, keys, values, num_heads):
        width = queries.shape[-1]
        if not heads:
            num_heads = 1
        head_dim = width // num_heads

        def split(x):
            if not split_transpose:
                return x.reshape(x.shape[0], num_heads, x.shape[1], head_dim)
            return x.reshape(*x.shape[:2], num_heads, head_dim).transpose(1, 2)

        q, k, v = split(queries), split(keys), split(values)  # (B, H, L, Dh)
        scale = scale_of(head_dim, width, num_heads) if heads else 1 / math.sqrt(width)
        attn_weights = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=dim)
        out = attn_weights @ v  # (B, H, Lq, Dh)
        if not merge_transpose:
            return out.reshape(out.shape[0], out.shape[2], width)
        return out.transpose(1, 2).reshape(out.shape[0], out.shape[2], width)
    return fn


def mha_library(queries, keys, values, num_heads):
    from attention_lib import dot_product_attention, merge_heads, split_heads

    q, k, v = (split_heads(t, num_heads) for t in (queries, keys, values))
    return merge_heads(dot_product_attention(q, k, v, need_weights=False)[0])


def mha_sdpa(queries, keys, values, num_heads):
    def split(x):
        return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)  # (B, H, L, Dh)

    out = torch.nn.functional.scaled_dot_product_attention(
        split(queries), split(keys), split(values)
    )  # (B, H, Lq, Dh)
    return out.transpose(1, 2).flatten(2)  # (B, Lq, D)


@pytest.mark.parametrize("solution", [mha(), mha_library, mha_sdpa])
@pytest.mark.parametrize("form", TENSOR_FORMS)
def test_head_scale_accepts_every_form(solution, form):
    feedback = check_head_scale(in_form(solution, form))
    assert feedback, feedback


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (mha(lambda dh, d, h: 1 / math.sqrt(d)),
         ["you divided by √D = √12, the model's width", "√Dh = √4"]),
        (mha(lambda dh, d, h: 1.0), ["the scale is missing"]),
        (mha(lambda dh, d, h: 1 / dh), ["you divided by Dh = 4"]),
        (mha(lambda dh, d, h: 1 / d), ["you divided by D = 12"]),
        (mha(lambda dh, d, h: math.sqrt(dh)), ["you multiplied by √Dh"]),
        (mha(lambda dh, d, h: 1 / math.sqrt(h)), ["you divided by √H = √3"]),
        (mha(lambda dh, d, h: 1 / 8), ["that of Dh = 64"]),
        (mha(lambda dh, d, h: 1 / 2), ["D=18", "that of Dh = 4, but here Dh = 9"]),
        (mha(heads=False), ["single-head attention of width D"]),
        (mha(dim=-2), ["over the queries (dim=-2)"]),
        (mha(merge_transpose=False), ["merged them without the transpose"]),
        (mha(merge_transpose=False, split_transpose=False),
         ["split and merged with reshape alone"]),
        (mha(split_transpose=False),
         ["split the heads with reshape (or view) alone", "transpose(1, 2)"]),
        (lambda q, k, v, h: split_reshape(q, h), ["(B, H, Lq, Dh) = (2, 3, 4, 4)",
                                                  "merge_heads"]),
        (lambda q, k, v, h: mha()(q, k, v, h)[:, :, :4],
         ["should have shape (2, 4, 12)"]),
        (lambda q, k, v, h: mha()(q, k, v, h) + 0.1, ["differs from multi-head"]),
        (lambda q, k, v, h: split_reshape(q, h) @ split_reshape(k, h).transpose(1, 2),
         ["raised RuntimeError", "k.transpose(-2, -1)"]),
    ],
)
def test_head_scale_names_each_mistake(wrong, phrases):
    assert_rejects(check_head_scale(wrong), *phrases)


# --- 5. broadcasting a key mask -------------------------------------------------------

def masked(shape_of=lambda m: m[:, None, None, :], fill="-inf", invert=False,
           after=False):
    def fn(attn_scores, key_mask):
        mask = shape_of(~key_mask if invert else key_mask)
        if after:
            return torch.softmax(attn_scores, -1) * mask
        value = {"-inf": float("-inf"), "min": torch.finfo(attn_scores.dtype).min,
                 "d2l": -1e6, "zero": 0.0}[fill]
        return torch.softmax(attn_scores.masked_fill(~mask, value), dim=-1)
    return fn


def masked_library(attn_scores, key_mask):
    from attention_lib import masked_softmax

    return masked_softmax(attn_scores, mask=key_mask[:, None, None, :])


def masked_where(attn_scores, key_mask):  # unsqueeze twice and torch.where, float64
    allowed = key_mask.unsqueeze(1).unsqueeze(2)  # (B, 1, 1, Lk)
    scores = torch.where(allowed, attn_scores.double(), -math.inf)
    return scores.softmax(-1)


@pytest.mark.parametrize(
    "solution", [masked(), masked(fill="min"), masked(fill="d2l"), masked_library,
                 masked_where]
)
@pytest.mark.parametrize("form", TENSOR_FORMS)
def test_mask_broadcast_accepts_every_form(solution, form):
    feedback = check_mask_broadcast(in_form(solution, form))
    assert feedback, feedback


@pytest.mark.parametrize("fill", ["-inf", "min", "d2l"])
@pytest.mark.parametrize(
    "shape_of, phrases",
    [
        (lambda m: m[:, None, :, None], ["hides queries, not keys", "(B, 1, 1, Lk)"]),
        (lambda m: m.view(m.shape[0], 1, -1, 1), ["hides queries, not keys"]),
        (lambda m: m[:, None, :], ["no head axis", "B = H"]),
        (lambda m: m.unsqueeze(1), ["no head axis"]),
    ],
)
def test_mask_broadcast_names_a_wrong_broadcast_whatever_the_fill(
    shape_of, phrases, fill
):
    assert_rejects(check_mask_broadcast(masked(shape_of, fill=fill)), *phrases)


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (masked(invert=True), ["your mask is inverted"]),
        (masked(invert=True, fill="min"), ["your mask is inverted"]),
        (masked(shape_of=lambda m: torch.ones_like(m)[:, None, None, :]),
         ["the mask is not applied"]),
        (masked(after=True), ["applied after the softmax"]),
        (masked(fill="zero"), ["set the masked scores to 0"]),
        (lambda s, m: torch.softmax(s, -1)[..., :2],
         ["should have shape (2, 2, 5, 5)"]),
        (lambda s, m: masked()(s, m).flip(-1), ["differ from the masked softmax"]),
        (not_implemented, ["Your turn"]),
    ],
)
def test_mask_broadcast_names_each_other_mistake(wrong, phrases):
    feedback = check_mask_broadcast(wrong)
    if wrong is not_implemented:
        assert feedback.todo and not feedback
        return
    assert_rejects(feedback, *phrases)


def test_mask_broadcast_shapes_that_only_fit_self_attention_fail_with_a_hint():
    # Right in the self-attention case; in the cross-attention case (B ≠ H) a mask
    # without a head axis does not broadcast: the error comes with the fix.
    def right_then_wrong(attn_scores, key_mask):
        if attn_scores.shape[-2] == attn_scores.shape[-1]:
            return masked()(attn_scores, key_mask)
        return masked(lambda m: m[:, None, :])(attn_scores, key_mask)
    assert_rejects(check_mask_broadcast(right_then_wrong), "raised RuntimeError",
                   "key_mask[:, None, None, :]")


# --- 6. the padding mask --------------------------------------------------------------

def pad_mask(shape_of=lambda m: m[:, None, :]):
    def fn(tokens, pad_id):
        return shape_of(tokens != pad_id)
    return fn


MASK_FORMS = ["list", "tuple", "numpy", "list_of_rows"]


@pytest.mark.parametrize(
    "solution",
    [
        pad_mask(),
        pad_mask(lambda m: m[:, None, None, :]),  # (B, 1, 1, Lk)
        pad_mask(lambda m: m.unsqueeze(1).expand(-1, m.shape[1], -1)),  # (B, Lq, Lk)
        lambda tokens, pad_id: ~tokens.eq(pad_id)[:, None, None],
    ],
)
@pytest.mark.parametrize("form", MASK_FORMS)
def test_padding_mask_accepts_every_form(solution, form):
    feedback = check_padding_mask(in_form(solution, form))
    assert feedback, feedback


def test_padding_mask_accepts_numpy_and_a_mask_per_head():
    assert check_padding_mask(lambda t, p: (t != p).numpy()[:, None, :])
    def per_head(tokens, pad_id):  # (B, H, 1, Lk)
        return (tokens != pad_id)[:, None, None, :].expand(-1, 2, 1, -1)

    assert check_padding_mask(per_head)


def test_padding_mask_works_in_the_library():
    """What the checker accepts gives the same layer output as valid_lens."""
    torch.manual_seed(0)
    layer = MultiHeadAttention(8, 2).eval()
    tokens = torch.tensor([[3, 4, 0, 0], [5, 1, 2, 0]])
    x = torch.randn(2, 4, 8)
    with torch.no_grad():
        by_mask = layer(x, x, x, mask=pad_mask()(tokens, 0))
        by_lens = layer(x, x, x, valid_lens=torch.tensor([2, 3]))
    torch.testing.assert_close(by_mask, by_lens)


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda t, p: (t == p)[:, None, :], ["inverted", "key_padding_mask"]),
        (lambda t, p: (t != p)[:, :, None], ["runs over the queries, not the keys"]),
        (lambda t, p: (t == p)[:, :, None], ["inverted *and* runs over the queries"]),
        (lambda t, p: (t != p)[:, :, None] & (t != p)[:, None, :],
         ["masked the padded queries too"]),
        (lambda t, p: t != p, ["shape (B, Lk) = (3, 5)", "mask[:, None, :]"]),
        (lambda t, p: (t != 0)[:, None, :],
         ["treats token 0 as padding", "pad id is 1"]),
        (lambda t, p: (t != p).float()[:, None, :], ["holds torch.float32", "*adds*"]),
        (lambda t, p: (t != p).long()[:, None, :], ["holds torch.int64"]),
        (lambda t, p: torch.zeros(t.shape).masked_fill(t == p, -math.inf)[:, None],
         ["additive float mask"]),
        (lambda t, p: (t != p)[:, None, :3],
         ["does not broadcast", "(B, 1, Lk) = (3, 1, 5)"]),
        (lambda t, p: (t != p)[0], ["differs from the padding mask"]),
        (lambda t, p: None, ["returned None"]),
    ],
)
def test_padding_mask_names_each_mistake(wrong, phrases):
    assert_rejects(check_padding_mask(wrong), *phrases)


def test_padding_mask_cases_pad_at_the_end_and_have_0_as_a_real_token():
    for rows, pad_id, lens in module._PADDING_CASES:
        tokens = torch.tensor(rows)
        real = module.valid_lens_to_mask(torch.tensor(lens), tokens.shape[1])
        assert (tokens[real] != pad_id).all() and (tokens[~real] == pad_id).all()
    rows, pad_id, lens = module._PADDING_CASES[1]
    assert pad_id != 0 and (torch.tensor(rows)[:, 0] == 0).any()


# --- 7. the number of parameters ------------------------------------------------------

def test_parameter_count_formula_equals_the_library_for_every_number_of_heads():
    for width in (8, 64, 512):
        for num_heads in (1, 2, 8):
            if width % num_heads == 0:
                layer = MultiHeadAttention(width, num_heads)
                count = sum(p.numel() for p in layer.parameters())
                assert count == 4 * width**2 + 4 * width


def test_parameter_count_accepts_the_derivation():
    feedback = check_mha_parameter_count(lambda d, h: 4 * d * d + 4 * d)
    assert feedback and "1,050,624" in feedback.message


def test_parameter_count_accepts_a_count_by_heads():
    def per_head(embed_dim, num_heads):
        head_dim = embed_dim // num_heads
        heads = num_heads * 3 * (embed_dim * head_dim + head_dim)
        return heads + embed_dim * embed_dim + embed_dim

    assert check_mha_parameter_count(per_head)


# float16 cannot hold a count of 1,050,624 (its largest number is 65,504)
@pytest.mark.parametrize("form", [f for f in NUMBER_FORMS if f != "float16"])
def test_parameter_count_accepts_any_number_form(form):
    feedback = check_mha_parameter_count(
        in_form(lambda d, h: float(4 * d * d + 4 * d), form)
    )
    assert feedback, feedback


def test_parameter_count_leaves_the_random_state_alone():
    state = torch.get_rng_state()
    check_mha_parameter_count(lambda d, h: 4 * d * d + 4 * d)
    assert torch.equal(state, torch.get_rng_state())


@pytest.mark.parametrize(
    "wrong, phrase",
    [
        (lambda d, h: h * (4 * d * d + 4 * d), "you multiplied by H"),
        (lambda d, h: 3 * h * (d * d + d) + h * d * d + d, "its own D × D projections"),
        (lambda d, h: 4 * d * d, "the biases are missing"),
        (lambda d, h: 3 * d * d + 3 * d, "W_o is missing"),
        (lambda d, h: 3 * d * d, "W_o and the biases are missing"),
        (lambda d, h: 4 * (d * (d // h) + d // h), "one head's projections"),
        (lambda d, h: 4 * d * d + 4 * h, "Your count changes with H"),
        (lambda d, h: 4 * d * d + 2 * d, "For D = 8, H = 2 you count 272"),
        (lambda d, h: 1_050_624, "the layer has 288"),
        (not_implemented, "Your turn: replace the `raise NotImplementedError`"),
        (lambda d, h: "4D²+4D", "as one number"),
        (1_050_624, "Pass your function itself"),
    ],
)
def test_parameter_count_names_each_mistake(wrong, phrase):
    feedback = check_mha_parameter_count(wrong)
    assert not feedback and phrase in feedback.message, feedback.message


# --- all checkers: the starter, odd answers, documentation ----------------------------


def test_padding_mask_message_fits_every_accepted_shape():
    # The "correct" message must be true of a (B, 1, 1, Lk) answer as well as of the
    # solution's (B, 1, Lk): it names neither shape as the answer's.
    for answer in (lambda t, p: (t != p)[:, None, :],
                   lambda t, p: (t != p)[:, None, None, :]):
        feedback = check_padding_mask(answer)
        assert feedback
        assert "[:, None, :]" not in str(feedback)
        assert "broadcast" in str(feedback)
