"""Experiment settings: one frozen dataclass per experiment, shared by the notebook that
runs it, its tests and its benchmark, so that no size is typed twice."""

from dataclasses import dataclass, replace

__all__ = [
    "Seq2SeqConfig",
    "CHAPTER1_SEQ2SEQ",
    "CHAPTER3_COMPARISON",
    "D2L_BAHDANAU",
    "AttentionLMConfig",
    "TransformerConfig",
    "CHAPTER5_TRANSFORMER",
    "LMConfig",
    "CHAPTER8_GPT",
    "CHAPTER8_ABLATION",
    "MODERN_BLOCK_CHANGES",
    "CHAPTER8_BERT",
    "DigitCaptionConfig",
    "CHAPTER7_CAPTIONS",
    "ViTComparisonConfig",
    "CHAPTER7_VIT",
]


class _Settings:
    """What every experiment's settings can do: ``with_(**changes)`` is a copy with
    some settings changed (the dataclass is frozen, so the original stays)."""

    def with_(self, **changes):
        return replace(self, **changes)


@dataclass(frozen=True)
class Seq2SeqConfig(_Settings):
    """The settings of one encoder–decoder training run on the English–French corpus.

    ``num_steps``, ``min_freq`` and ``max_train`` go to
    :func:`~attention_lib.data.load_fra_eng`; ``embed_size`` (E), ``num_hiddens`` (Ds),
    ``num_layers`` and ``dropout`` size the encoder and decoder; ``batch_size``, ``lr``
    and ``num_epochs`` go to :func:`~attention_lib.training.train_seq2seq`. The seed is
    not a setting: each notebook keeps it as a knob to turn. ``with_(**changes)``
    returns a copy with some settings changed.

    Shapes:
        a batch: src (batch_size, num_steps); embeddings (.., embed_size); states
        (num_layers, batch_size, num_hiddens)

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """

    num_steps: int = 12
    min_freq: int = 2
    max_train: int = 20_000
    embed_size: int = 128
    num_hiddens: int = 256
    num_layers: int = 2
    dropout: float = 0.2
    batch_size: int = 128
    lr: float = 0.005
    num_epochs: int = 6


#: Chapter 1's encoder–decoder (two GRU layers of 256, six epochs); also
#: ``bench/bench_seq2seq.py``.
CHAPTER1_SEQ2SEQ = Seq2SeqConfig()

#: Chapter 3's comparison of the fixed context with two attention decoders: one budget
#: small enough to train three models on two CPU cores.
CHAPTER3_COMPARISON = Seq2SeqConfig(
    embed_size=64, num_hiddens=128, num_layers=1, dropout=0.0, num_epochs=4
)

#: The d2l book's Bahdanau sizes, which ``bench/bench_bahdanau.py`` trains side by side
#: with d2l's own decoder.
D2L_BAHDANAU = Seq2SeqConfig(num_steps=9, embed_size=256, num_hiddens=256)


# --- chapter 4, multi-head attention: a tiny causal language model ------------------


@dataclass(frozen=True)
class AttentionLMConfig(_Settings):
    """The settings of the small causal language model whose heads chapter 4 looks at.

    ``num_steps`` (tokens per sentence, ``<bos>`` included: the longest input),
    ``min_freq`` and ``max_train`` go to :func:`~attention_lib.data.load_fra_eng`,
    whose English sides, without repeats, are the training sentences; ``embed_dim``
    (D), ``num_heads`` (H) and ``num_layers`` size the model (attention only, no
    feed-forward layer); ``train_steps`` minibatches of ``batch_size`` sentences drawn
    at random, AdamW with peak learning rate ``lr`` and ``weight_decay`` on a
    one-cycle schedule; ``seed`` seeds the initial weights and the minibatches.
    ``with_(**changes)`` returns a copy with some settings changed.

    Shapes:
        a batch: tokens (batch_size, L) with L <= num_steps; embeddings (..,
        embed_dim); each layer's weights (batch_size, num_heads, L, L)

    Taught in ``chapters/04_self_attention/02_multihead_attention.ipynb``.
    """

    num_steps: int = 12
    min_freq: int = 5
    max_train: int = 20_000
    embed_dim: int = 64
    num_heads: int = 4
    num_layers: int = 2
    train_steps: int = 1000
    batch_size: int = 64
    lr: float = 0.01
    weight_decay: float = 0.01
    seed: int = 0



# --- chapter 5, the Transformer on the English-French corpus ------------------------


@dataclass(frozen=True)
class TransformerConfig(_Settings):
    """The settings of chapter 5's translation Transformer, raced against chapter 3's
    RNNs on the same data.

    ``num_steps``, ``min_freq`` and ``max_train`` go to
    :func:`~attention_lib.data.load_fra_eng` (chapter 3's data); ``embed_dim`` (D),
    ``num_heads`` (H), ``ffn_hidden`` (F), ``num_layers`` (N), ``dropout`` and
    ``norm_first`` size :class:`~attention_lib.transformer.TransformerEncoder` and
    :class:`~attention_lib.transformer.TransformerDecoder`; minibatches of
    ``batch_size``, AdamW with ``lr``, ``betas`` and ``weight_decay``, the rate warmed
    up linearly over ``warmup_steps`` updates and then held, ``label_smoothing`` on the
    training loss; held-out BLEU measured every ``checkpoint_every`` batches.
    ``build``, ``optimizer`` and ``schedule`` make the model, the optimiser and the
    schedule these settings describe; ``with_(**changes)`` returns a copy with some
    settings changed.

    Shapes:
        a batch: src (batch_size, num_steps); embeddings (.., embed_dim); attention
        weights (batch_size, num_heads, Lq, Lk)

    Taught in ``chapters/05_transformer/02_training.ipynb``.
    """

    num_steps: int = 12
    min_freq: int = 2
    max_train: int = 20_000
    embed_dim: int = 128
    num_heads: int = 4
    ffn_hidden: int = 256
    num_layers: int = 2
    dropout: float = 0.0
    norm_first: bool = True
    batch_size: int = 64
    lr: float = 3e-3
    betas: tuple = (0.9, 0.98)
    weight_decay: float = 0.01
    warmup_steps: int = 100
    label_smoothing: float = 0.1
    checkpoint_every: int = 80

    def build(self, src_vocab_size: int, tgt_vocab_size: int, max_len: int = 1000):
        """The encoder–decoder these settings describe, with fresh weights: a
        :class:`~attention_lib.transformer.TransformerEncoder` and
        :class:`~attention_lib.transformer.TransformerDecoder` of ``embed_dim``,
        ``num_heads``, ``ffn_hidden``, ``num_layers``, ``dropout`` and ``norm_first``.

        Shapes:
            returns: an :class:`~attention_lib.seq2seq.EncoderDecoder`
        """
        from .seq2seq import EncoderDecoder
        from .transformer import TransformerDecoder, TransformerEncoder

        sizes = dict(embed_dim=self.embed_dim, num_heads=self.num_heads,
                     ffn_hidden=self.ffn_hidden, num_layers=self.num_layers,
                     dropout=self.dropout, norm_first=self.norm_first, max_len=max_len)
        return EncoderDecoder(TransformerEncoder(src_vocab_size, **sizes),
                              TransformerDecoder(tgt_vocab_size, **sizes))

    def optimizer(self, params):
        """AdamW over ``params`` at ``lr`` with ``betas`` and ``weight_decay``: for
        :func:`~attention_lib.training.train_seq2seq`'s ``optimizer`` argument.

        Shapes:
            params: an iterable of parameters; returns: ``torch.optim.AdamW``
        """
        import torch

        return torch.optim.AdamW(params, lr=self.lr, betas=self.betas,
                                 weight_decay=self.weight_decay)

    def schedule(self, optimizer):
        """The rate warmed up linearly over ``warmup_steps`` updates, then held
        (:func:`~attention_lib.transformer.warmup_schedule` without a width): for
        :func:`~attention_lib.training.train_seq2seq`'s ``schedule`` argument.

        Shapes:
            optimizer: a ``torch.optim.Optimizer``; returns: ``LambdaLR``
        """
        from .transformer import warmup_schedule

        return warmup_schedule(optimizer, None, self.warmup_steps)


#: Chapter 5's race: a small pre-norm Transformer, no dropout (the budget is two minutes
#: of training, too short to overfit 20,000 pairs).
CHAPTER5_TRANSFORMER = TransformerConfig()


@dataclass(frozen=True)
class DigitCaptionConfig(_Settings):
    """The settings of chapter 7's captioner: a CNN's grid of features read by the
    Bahdanau decoder while it writes the digit words of a strip.

    ``num_train`` and ``num_test`` strips of ``height`` × ``width`` pixels with at most
    ``max_digits`` digits (:func:`~attention_lib.digits.digit_strips`); ``channels`` are
    the CNN's stages (:class:`~attention_lib.vision.DigitCNN`), ``embed_size`` and
    ``num_hiddens`` (Ds) the decoder's; ``batch_size``, ``lr`` and ``num_epochs`` go to
    :func:`~attention_lib.training.train_seq2seq`.

    Shapes:
        a batch: images (batch_size, 1, height, width); captions (batch_size,
        max_digits + 1) tokens

    Taught in ``chapters/07_visual/02_cross_attention.ipynb``.
    """

    num_train: int = 3000
    num_test: int = 1000
    height: int = 12
    width: int = 40
    max_digits: int = 4
    channels: tuple[int, ...] = (16, 32)
    embed_size: int = 16
    num_hiddens: int = 64
    batch_size: int = 64
    lr: float = 0.005
    num_epochs: int = 8


#: Chapter 7's captioner of digit strips (about 40 s on two CPU cores).
CHAPTER7_CAPTIONS = DigitCaptionConfig()


@dataclass(frozen=True)
class ViTComparisonConfig(_Settings):
    """The settings of chapter 7's race between a small Vision Transformer and a CNN of
    about the same size on the 8 × 8 digits.

    The ViT: ``patch_size``, ``embed_dim`` (D), ``num_heads`` (H), ``ffn_hidden`` and
    ``num_layers``; the CNN: ``cnn_channels``. Both train with ``batch_size`` on
    ``small_train`` digits for ``small_epochs`` epochs, and on the whole training pool
    for ``full_epochs`` epochs (:func:`~attention_lib.training.train_classifier`).

    Shapes:
        a batch: images (batch_size, 1, 8, 8); the ViT's tokens (batch_size,
        (8 / patch_size)² + 1, embed_dim)

    Taught in ``chapters/07_visual/03_vision_transformer.ipynb``.
    """

    patch_size: int = 2
    embed_dim: int = 32
    num_heads: int = 4
    ffn_hidden: int = 64
    num_layers: int = 1
    cnn_channels: tuple[int, ...] = (24, 40)
    batch_size: int = 64
    small_train: int = 100
    small_epochs: int = 75
    full_epochs: int = 20


#: Chapter 7's ViT against a CNN of the same size.
CHAPTER7_VIT = ViTComparisonConfig()


# --- chapter 8, language models: decoder-only (GPT) and encoder (BERT) -----------


@dataclass(frozen=True)
class LMConfig(_Settings):
    """The settings of chapter 8's small language models, trained on the corpus's
    English sentences.

    ``num_steps``, ``min_freq`` and ``max_train`` go to
    :func:`~attention_lib.lm.load_sentences`; ``embed_dim`` (D), ``num_heads`` (H),
    ``ffn_hidden`` (D_ff; the SwiGLU hidden size when ``activation="swiglu"``),
    ``num_layers`` and the block options ``causal``, ``norm_first``, ``norm``,
    ``activation``, ``positions``, ``bias``, ``tie_embeddings`` go to
    :class:`~attention_lib.lm.TransformerLM` (defaults: the 2017 block); ``train_steps``
    minibatches of ``batch_size`` sentences, AdamW with peak rate ``lr`` and
    ``weight_decay`` on a one-cycle schedule (``warmup`` of the steps rising);
    ``seed`` seeds the weights and the minibatches. ``build``, ``optimizer`` and
    ``schedule`` make what the settings describe; ``with_(**changes)`` returns a copy.

    Shapes:
        a batch: tokens (batch_size, L) with L <= num_steps; logits (.., V)

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """

    num_steps: int = 12
    min_freq: int = 2
    max_train: int | None = None
    embed_dim: int = 64
    num_heads: int = 4
    ffn_hidden: int = 256
    num_layers: int = 2
    causal: bool = True
    norm_first: bool = False
    norm: str = "layer"
    activation: str = "relu"
    positions: str = "sinusoidal"
    bias: bool = True
    tie_embeddings: bool = False
    train_steps: int = 600
    batch_size: int = 64
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup: float = 0.1
    seed: int = 0

    def build(self, vocab_size: int):
        """A :class:`~attention_lib.lm.TransformerLM` with these settings and fresh
        weights (seeded by the caller), room for ``num_steps + 1`` positions.

        Shapes:
            returns: a module mapping tokens (B, L) to logits (B, L, vocab_size)
        """
        from .lm import TransformerLM

        return TransformerLM(
            vocab_size, self.embed_dim, self.num_heads, self.ffn_hidden,
            self.num_layers, causal=self.causal, norm_first=self.norm_first,
            norm=self.norm, activation=self.activation, positions=self.positions,
            bias=self.bias, tie_embeddings=self.tie_embeddings,
            max_len=self.num_steps + 1,
        )

    def optimizer(self, params):
        """AdamW over ``params`` at ``lr`` with ``weight_decay``.

        Shapes:
            params: an iterable of parameters; returns: ``torch.optim.AdamW``
        """
        import torch

        return torch.optim.AdamW(params, lr=self.lr, weight_decay=self.weight_decay)

    def schedule(self, optimizer):
        """One cycle over ``train_steps``: the rate rises for the first ``warmup`` of
        them to ``lr``, then anneals (``torch.optim.lr_scheduler.OneCycleLR``).

        Shapes:
            optimizer: a ``torch.optim.Optimizer``; returns: ``OneCycleLR``
        """
        import torch

        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=self.lr, total_steps=self.train_steps,
            pct_start=self.warmup)


#: Chapter 8's GPT: the chapter-5 (pre-norm) block without cross-attention, as a
#: next-word model of the corpus's English sentences.
CHAPTER8_GPT = LMConfig(min_freq=5, norm_first=True, train_steps=800)

#: Chapter 8's ablation starts from the 2017 block (post-norm, LayerNorm, ReLU,
#: sinusoidal positions, biases, separate output layer), trained for a short budget.
CHAPTER8_ABLATION = LMConfig(min_freq=5, train_steps=150)

#: Today's block, one change at a time, each on top of the ones before it: (name,
#: settings changed). SwiGLU's hidden size keeps the feed-forward parameter count.
MODERN_BLOCK_CHANGES = (
    ("2017 block", {}),
    ("pre-norm", dict(norm_first=True)),
    ("RMSNorm", dict(norm="rms")),
    ("SwiGLU", dict(activation="swiglu", ffn_hidden=171)),  # swiglu_hidden(256)
    ("RoPE", dict(positions="rope")),
    ("no biases", dict(bias=False)),
    ("tied embeddings", dict(tie_embeddings=True)),
)

#: Chapter 8's BERT: the same stack without the causal mask, pretrained to fill in
#: masked words.
CHAPTER8_BERT = LMConfig(min_freq=5, causal=False, norm_first=True, train_steps=800)
