"""The Bahdanau decoder: shapes, padding, decoding, parity with the d2l book's decoder,
and learning."""
import pytest
import torch
from d2l import torch as d2l

from attention_lib import (
    BahdanauDecoder,
    Decoder,
    EncoderDecoder,
    Seq2SeqEncoder,
    beam_search,
    bleu_by_length,
    greedy_decode,
    set_seed,
    train_seq2seq,
)
from references.d2l_bahdanau import (
    D2LTranslator,
    Seq2SeqAttentionDecoder,
    copy_d2l_into_library,
)

V_SRC, V_TGT, E, HD, LAYERS = 30, 40, 8, 16, 2


def make_model(reset_after=False, num_layers=LAYERS, **kwargs):
    set_seed(0)
    return EncoderDecoder(
        Seq2SeqEncoder(V_SRC, E, HD, num_layers),
        BahdanauDecoder(V_TGT, E, HD, num_layers, reset_after=reset_after, **kwargs),
    ).eval()


# (B, Lk), 0 = <pad>
SRC = torch.tensor([[5, 6, 7, 8, 9, 2], [10, 11, 2, 0, 0, 0], [12, 2, 0, 0, 0, 0]])
SRC_LENS = torch.tensor([6, 3, 2])
# (B, Lq)
TGT_INPUT = torch.tensor([[1, 5, 6, 7, 8], [1, 9, 10, 2, 0], [1, 11, 12, 13, 2]])


@pytest.mark.parametrize("reset_after", [False, True])
def test_shapes_and_weights_per_step(reset_after):
    model = make_model(reset_after)
    logits = model(SRC, SRC_LENS, TGT_INPUT, need_weights=True)
    assert logits.shape == (3, 5, V_TGT)
    assert model.decoder.attention_weights.shape == (3, 5, 6)  # (B, Lq, Lk)


def test_weights_are_zero_at_source_padding_and_sum_to_one():
    model = make_model()
    model(SRC, SRC_LENS, TGT_INPUT, need_weights=True)
    weights = model.decoder.attention_weights  # (B, Lq, Lk)
    for i, n in enumerate(SRC_LENS.tolist()):
        assert (weights[i, :, n:] == 0).all()
        assert (weights[i, :, :n] > 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 5))


@pytest.mark.parametrize("reset_after", [False, True])
def test_a_batch_decodes_as_each_sentence_alone(reset_after):
    """Padding does not leak: each row of the batch equals the sentence decoded on its
    own, unpadded."""
    model = make_model(reset_after)
    logits = model(SRC, SRC_LENS, TGT_INPUT, need_weights=True)
    weights = model.decoder.attention_weights
    for i, n in enumerate(SRC_LENS.tolist()):
        alone = model(SRC[i:i + 1, :n], SRC_LENS[i:i + 1], TGT_INPUT[i:i + 1],
                      need_weights=True)
        torch.testing.assert_close(logits[i:i + 1], alone)
        torch.testing.assert_close(
            weights[i : i + 1, :, :n], model.decoder.attention_weights
        )
    batch, batch_weights = greedy_decode(model, SRC, SRC_LENS, bos=1, eos=2, max_len=8,
                                         need_weights=True)
    for i, n in enumerate(SRC_LENS.tolist()):
        alone, alone_weights = greedy_decode(
            model, SRC[i : i + 1, :n], SRC_LENS[i : i + 1], bos=1, eos=2, max_len=8,
                need_weights=True
        )
        assert batch[i] == alone[0]
        # one layout: per sentence, (T, Lk) with T = max(len(output), 1)
        assert batch_weights[i].shape == (max(len(batch[i]), 1), SRC.shape[1])
        torch.testing.assert_close(batch_weights[i][:, :n], alone_weights[0])
        assert not batch_weights[i][:, n:].any()  # no weight on padding


def test_greedy_decoding_stops_at_eos_and_returns_weights():
    model = make_model()
    with torch.no_grad():
        model.decoder.dense.bias.zero_()
        model.decoder.dense.bias[7] = 50.0  # word 7 first ...
    sentences, weights = greedy_decode(model, SRC, SRC_LENS, bos=1, eos=2, max_len=10,
                                       need_weights=True)
    assert sentences == [[7] * 10] * 3
    assert [w.shape for w in weights] == [(10, 6)] * 3  # per sentence: (T, Lk)
    with torch.no_grad():
        model.decoder.dense.bias[2] = 100.0  # ... unless <eos> wins
    sentences, weights = greedy_decode(model, SRC, SRC_LENS, bos=1, eos=2, max_len=10,
                                       need_weights=True)
    assert sentences == [[], [], []]
    assert [w.shape for w in weights] == [(1, 6)] * 3  # an empty output keeps one row


def test_the_query_is_the_previous_state():
    """Step 1 attends with the encoder's final state s_0, before the GRU has read
    anything."""
    model = make_model()
    enc_outputs, enc_state = model.encoder(SRC, SRC_LENS)
    model.decoder(
        TGT_INPUT[:, :1], model.decoder.init_state((enc_outputs, enc_state), SRC_LENS),
            need_weights=True
    )
    attention = model.decoder.attention
    query = enc_state[-1].unsqueeze(1)  # s_0, (B, 1, Ds)
    attention(query, enc_outputs, enc_outputs, SRC_LENS, need_weights=True)
    torch.testing.assert_close(
        model.decoder.attention_weights, attention.attention_weights
    )


def test_precomputed_keys_change_nothing():
    model = make_model()
    expected = model(SRC, SRC_LENS, TGT_INPUT, need_weights=True)
    model.decoder.precompute_keys = False
    torch.testing.assert_close(model(SRC, SRC_LENS, TGT_INPUT,
                                     need_weights=True), expected)
    state = model.decoder.init_state(model.encoder(SRC, SRC_LENS), SRC_LENS)
    assert state.projected_keys is None


def test_state_carries_over_between_calls():
    """Decoding step by step (as greedy decoding does) equals decoding all steps in one
    call."""
    model = make_model()
    state = model.decoder.init_state(model.encoder(SRC, SRC_LENS), SRC_LENS)
    all_at_once, final = model.decoder(TGT_INPUT, state, need_weights=True)
    steps = []
    for t in range(TGT_INPUT.shape[1]):
        logits, state = model.decoder(TGT_INPUT[:, t:t + 1], state, need_weights=True)
        steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), all_at_once)
    torch.testing.assert_close(state.hidden, final.hidden)


def test_reorder_state_picks_rows():
    model = make_model()
    state = model.decoder.init_state(model.encoder(SRC, SRC_LENS), SRC_LENS)
    picked = model.decoder.reorder_state(state, torch.tensor([2, 2, 0]))
    assert picked.hidden.shape == (LAYERS, 3, HD)
    torch.testing.assert_close(picked.hidden[:, 0], state.hidden[:, 2])
    torch.testing.assert_close(picked.enc_outputs[2], state.enc_outputs[0])
    assert torch.equal(picked.src_mask[1], state.src_mask[2])


def test_bad_encoder_state_is_named():
    model = make_model()
    enc_outputs, enc_state = model.encoder(SRC, SRC_LENS)
    with pytest.raises(ValueError, match=r"\(num_layers=2, B, Ds\)"):
        model.decoder.init_state((enc_outputs, enc_state[:1]), SRC_LENS)
    with pytest.raises(TypeError, match="tgt_input must be"):
        model.decoder(
            TGT_INPUT.float(),
            model.decoder.init_state((enc_outputs, enc_state), SRC_LENS),
                need_weights=True,
        )


# --------------------------------------------------------------------------- the d2l
# book's decoder


def make_d2l_pair(num_layers):
    """d2l's encoder and the book's decoder, and the library's with the same weights
    copied in."""
    set_seed(0)
    d2l_encoder = d2l.Seq2SeqEncoder(V_SRC, E, HD, num_layers)
    d2l_decoder = Seq2SeqAttentionDecoder(V_TGT, E, HD, num_layers)
    d2l_encoder.eval(), d2l_decoder.eval()
    with torch.no_grad():  # materialise d2l's lazy layers
        d2l_decoder(TGT_INPUT, d2l_decoder.init_state(d2l_encoder(SRC), SRC_LENS))
    model = make_model(reset_after=True, num_layers=num_layers)
    copy_d2l_into_library(d2l_encoder, d2l_decoder, model.encoder, model.decoder)
    return d2l_encoder, d2l_decoder, model


@pytest.mark.parametrize("num_layers", [1, 2])
def test_matches_the_d2l_book_decoder_on_full_length_sources(num_layers):
    """No padding: d2l's encoder (which reads padding) and the library's (which skips
    it) agree."""
    d2l_encoder, d2l_decoder, model = make_d2l_pair(num_layers)
    src = torch.randint(4, V_SRC, (3, 6))
    lens = torch.full((3,), 6)
    with torch.no_grad():
        expected = d2l_decoder(
            TGT_INPUT, d2l_decoder.init_state(d2l_encoder(src), lens)
        )[0]
        got = model(src, lens, TGT_INPUT, need_weights=True)
    torch.testing.assert_close(got, expected)
    # list of (B, 1, Lk)
    expected_weights = torch.cat(d2l_decoder.attention_weights, dim=1)
    torch.testing.assert_close(model.decoder.attention_weights, expected_weights)


@pytest.mark.parametrize("num_layers", [1, 2])
def test_matches_the_d2l_book_decoder_step_by_step_with_padding(num_layers):
    """The same encoder states into both decoders, fed one token at a time (as in greedy
    decoding)."""
    d2l_encoder, d2l_decoder, model = make_d2l_pair(num_layers)
    with torch.no_grad():
        enc_outputs, enc_state = model.encoder(SRC, SRC_LENS)
        d2l_state = d2l_decoder.init_state(
            (enc_outputs.permute(1, 0, 2), enc_state), SRC_LENS
        )
        state = model.decoder.init_state((enc_outputs, enc_state), SRC_LENS)
        for t in range(TGT_INPUT.shape[1]):
            expected, d2l_state = d2l_decoder(TGT_INPUT[:, t:t + 1], d2l_state)
            got, state = model.decoder(TGT_INPUT[:, t:t + 1], state, need_weights=True)
            torch.testing.assert_close(got, expected)
            torch.testing.assert_close(state.hidden, d2l_state[1])
            torch.testing.assert_close(
                model.decoder.attention_weights, d2l_decoder.attention_weights[0]
            )


def test_the_material_variant_is_a_different_function():
    d2l_encoder, d2l_decoder, model = make_d2l_pair(2)
    for cell in model.decoder.cells:
        cell.reset_after = False
    src, lens = torch.randint(4, V_SRC, (3, 6)), torch.full((3,), 6)
    with torch.no_grad():
        expected = d2l_decoder(
            TGT_INPUT, d2l_decoder.init_state(d2l_encoder(src), lens)
        )[0]
        assert (model(src, lens, TGT_INPUT,
                      need_weights=True) - expected).abs().max() > 1e-3


def test_the_d2l_translator_follows_the_decoder_protocol():
    """bench/bench_bahdanau.py decodes the d2l book's model with the library's
    functions: a beam of one is greedy decoding, and a wider beam reorders its state."""
    set_seed(0)
    model = D2LTranslator(V_SRC, V_TGT, E, HD, LAYERS).eval()
    assert isinstance(model.decoder, Decoder)
    greedy, greedy_weights = greedy_decode(model, SRC, SRC_LENS, 1, 2, max_len=5,
                                           need_weights=True)
    beam, beam_weights = beam_search(model, SRC, SRC_LENS, 1, 2, 5, beam_size=1,
                                     need_weights=True)
    assert beam == greedy
    assert len(beam_weights) == len(greedy_weights)
    for got, want in zip(beam_weights, greedy_weights):
        torch.testing.assert_close(got, want)
    state = model.decoder.init_state(model.encoder(SRC, SRC_LENS), SRC_LENS)
    picked = model.decoder.reorder_state(state, torch.tensor([2, 2, 0]))
    torch.testing.assert_close(picked[0], state[0][[2, 2, 0]])
    torch.testing.assert_close(picked[1], state[1][:, [2, 2, 0]])
    assert picked[2].tolist() == [2, 2, 6]
    wide, _ = beam_search(model, SRC, SRC_LENS, 1, 2, 5, beam_size=3, need_weights=True)
    assert len(wide) == len(SRC)


# --------------------------------------------------------------------------- learning


def test_short_training_run_learns(small_data):
    """Regression test of learning: seeded, 3,000 real pairs, 2 epochs (about 15 s on 2
    idle CPU cores)."""
    set_seed(0)
    data = small_data
    model = EncoderDecoder(Seq2SeqEncoder(len(data.src_vocab), 64, 128),
                           BahdanauDecoder(len(data.tgt_vocab), 64, 128))
    history = train_seq2seq(
        model,
        data.loader("train", batch_size=64),
        num_epochs=2,
        pad=data.tgt_vocab.pad,
        lr=0.01,
        device=torch.device("cpu"),
        val_loader=data.loader("val", 256),
        progress=False,
    )
    assert history["train"][-1] < 3.2
    assert history["val"][-1] < 2.9
    result = bleu_by_length(model, data)  # held-out: the test split, never trained on
    assert result["bleu"] > 2.0  # a model that has learned nothing scores ~0


@pytest.mark.parametrize(
    "src_valid_lens, error, message",
    [
        (
            [6, 3, 2],
            TypeError,
            r"src_valid_lens must be a torch.Tensor of integer lengths with shape"
            r" \(B,\) with B=3, "
            r"got a list of length 3",
        ),
        (
            torch.tensor([6]),
            ValueError,
            r"src_valid_lens must have shape \(B,\) with B=3, got \(1,\)",
        ),  # no broadcast
        (
            torch.tensor([[6, 3, 2]] * 3),
            ValueError,
            r"src_valid_lens must have shape \(B,\) with B=3, got \(3, 3\)",
        ),
        (torch.tensor([7, 3, 2]), ValueError, r"src_valid_lens must lie in \[0, 6\]"),
    ],
)
def test_bad_src_valid_lens_is_named_by_init_state(src_valid_lens, error, message):
    model = make_model()
    enc_outputs = model.encoder(SRC, SRC_LENS)
    with pytest.raises(error, match=message):
        model.decoder.init_state(enc_outputs, src_valid_lens)


def test_init_state_names_an_encoder_output_that_is_not_a_pair():
    model = make_model()
    enc_outputs, enc_state = model.encoder(SRC, SRC_LENS)
    with pytest.raises(
        TypeError,
        match=(
            r"enc_outputs must be the encoder's \(outputs, state\).*got a torch.Tensor"
        ),
    ):
        model.decoder.init_state(enc_outputs, SRC_LENS)
    with pytest.raises(
        ValueError, match=r"enc_outputs must be .* got \(3, 6, 16\) and \(2, 2, 16\)"
    ):
        # batch sizes differ
        model.decoder.init_state((enc_outputs, enc_state[:, :2]), SRC_LENS)


# --------------------------------------------------------------------------- the
# paper's variant


def make_paper_model(num_layers=1):
    """Bahdanau et al.'s variant: a bidirectional encoder, s_0 = tanh(W_s h_1^←)."""
    set_seed(0)
    return EncoderDecoder(
        Seq2SeqEncoder(V_SRC, E, HD, num_layers, bidirectional=True),
        BahdanauDecoder(V_TGT, E, HD, num_layers, key_size=2 * HD, init="backward"),
    ).eval()


def test_bidirectional_encoder_reads_each_sentence_from_both_ends():
    """Each half of an output is a GRU reading the real tokens in one direction: padding
    changes nothing, and the backward state is the backward half at the first word."""
    model = make_paper_model()
    outputs, state = model.encoder(SRC, SRC_LENS)
    assert outputs.shape == (3, 6, 2 * HD) and state.shape == (2, 3, HD)
    rnn = model.encoder.rnn
    forward = torch.nn.GRU(E, HD, batch_first=True)
    forward.load_state_dict(
        {k: v for k, v in rnn.state_dict().items() if "reverse" not in k}
    )
    with torch.no_grad():
        for i, n in enumerate(SRC_LENS.tolist()):
            embs = model.encoder.embedding(SRC[i : i + 1, :n])  # (1, n, E)
            alone, _ = rnn(embs)  # no padding at all
            torch.testing.assert_close(outputs[i, :n], alone[0])
            assert (outputs[i, n:] == 0).all()
            torch.testing.assert_close(outputs[i, :n, :HD], forward(embs)[0][0])
            torch.testing.assert_close(state[1, i], outputs[i, 0, HD:])  # h_1^←
            torch.testing.assert_close(state[0, i], outputs[i, n - 1, :HD])  # h_n^→


@pytest.mark.parametrize("num_layers", [1, 2])
def test_paper_initial_state_is_tanh_of_the_backward_state(num_layers):
    model = make_paper_model(num_layers)
    enc_outputs, enc_state = model.encoder(SRC, SRC_LENS)
    state = model.decoder.init_state((enc_outputs, enc_state), SRC_LENS)
    expected = torch.tanh(model.decoder.W_s(enc_state[1::2]))  # the backward layers
    torch.testing.assert_close(state.hidden, expected)
    assert state.hidden.shape == (num_layers, 3, HD)


def test_paper_model_decodes_a_batch_as_each_sentence_alone():
    model = make_paper_model()
    logits = model(SRC, SRC_LENS, TGT_INPUT, need_weights=True)
    assert logits.shape == (3, 5, V_TGT)
    for i, n in enumerate(SRC_LENS.tolist()):
        alone = model(SRC[i : i + 1, :n], SRC_LENS[i : i + 1], TGT_INPUT[i : i + 1],
                      need_weights=True)
        torch.testing.assert_close(logits[i : i + 1], alone)


def test_paper_variant_arguments_are_checked():
    with pytest.raises(ValueError, match="init must be 'final' or 'backward'"):
        BahdanauDecoder(V_TGT, E, HD, init="forward")
    with pytest.raises(ValueError, match="key_size must be 2"):
        BahdanauDecoder(V_TGT, E, HD, key_size=2 * HD + 1, init="backward")
    model = make_paper_model()
    enc_outputs, enc_state = model.encoder(SRC, SRC_LENS)
    with pytest.raises(
        ValueError, match=r"bidirectional encoder's state \(2\*num_layers=2"
    ):
        model.decoder.init_state((enc_outputs, enc_state[:1]), SRC_LENS)
    unidirectional = make_model(num_layers=1)
    with pytest.raises(ValueError, match="key_size=32"):
        model.decoder.init_state(unidirectional.encoder(SRC, SRC_LENS), SRC_LENS)


def test_comparison_models_differ_only_in_their_attention_parts():
    from attention_lib import COMPARISON_MODELS, comparison_models
    from attention_lib.config import CHAPTER3_COMPARISON

    models = comparison_models(CHAPTER3_COMPARISON, 40, 50, seed=0)
    assert list(models) == list(COMPARISON_MODELS)
    fixed = models["fixed context"].state_dict()
    # The same GRU variant (reset before the product) in all three decoders.
    for model in models.values():
        assert all(not cell.reset_after for cell in model.decoder.cells)
    expected = {
        "attention": {"decoder.attention." + n for n in ("W_q.weight", "W_k.weight",
                                                          "w_v.weight")},
    }
    expected["attention, bidirectional"] = expected["attention"] | {
        "decoder.W_s.weight", "decoder.W_s.bias"
    } | {k for k in models["attention, bidirectional"].state_dict()
         if k.startswith("encoder.rnn.")}
    for name, differing in expected.items():
        state = models[name].state_dict()
        assert set(fixed) <= set(state)
        equal = {k for k in state if k in fixed and state[k].shape == fixed[k].shape
                 and torch.equal(state[k], fixed[k])}
        assert set(state) - equal == differing, name
    # The attention parameters are what the page says: W_q, W_k (Ds x Ds), w_v (Ds).
    extra = sum(p.numel() for p in models["attention"].parameters()) - sum(
        p.numel() for p in models["fixed context"].parameters())
    hiddens = CHAPTER3_COMPARISON.num_hiddens
    assert extra == 2 * hiddens**2 + hiddens


def test_the_fixed_context_is_attention_that_may_see_only_the_last_word():
    from attention_lib import comparison_models
    from attention_lib.config import CHAPTER3_COMPARISON

    torch.manual_seed(1)
    models = comparison_models(CHAPTER3_COMPARISON, 40, 50, seed=3)
    fixed, attention = models["fixed context"], models["attention"]
    src = torch.randint(3, 40, (4, 7))
    src_valid_lens = torch.tensor([7, 5, 2, 1])
    tgt = torch.randint(3, 50, (4, 6))
    enc = attention.encoder(src, src_valid_lens)
    state = attention.decoder.init_state(enc, src_valid_lens)
    last = torch.zeros_like(state.src_mask)  # (B, 1, Lk)
    last[torch.arange(4), 0, src_valid_lens - 1] = True
    logits_att, _ = attention.decoder(tgt, state._replace(src_mask=last))
    logits_fixed = fixed(src, src_valid_lens, tgt)
    torch.testing.assert_close(logits_fixed, logits_att)
    assert fixed.decoder.attention is None and fixed.decoder.attention_weights is None


def test_attend_false_needs_the_encoder_final_state():
    with pytest.raises(ValueError, match="attend=False"):
        BahdanauDecoder(10, 4, 8, init="backward", key_size=8, attend=False)
