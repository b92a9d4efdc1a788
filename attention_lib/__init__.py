"""attention_lib: the small, tested PyTorch library behind the course book on attention.

Dimension letters, used the same way in code comments, docstrings and the book's prose
(the book's page "Notation" says where each first appears):

====  ============================================================================
B     batch size
Lq    number of queries (decoder / target steps)
Lk    number of keys and values (source steps)
E     embedding size (a token's vector)
Ds    size of an RNN state (encoder and decoder GRU states)
Da    hidden size of additive attention (the projections W_q q and W_k k)
D     size of queries and keys (the scaled dot product divides by √D); the model
      width from chapter 4 on
H     number of heads
Dh    size of one head, D / H
Dv    size of a value
V     vocabulary size
====  ============================================================================

A boolean ``mask`` is True where a query may attend; ``valid_lens`` describes padding.
"""
from .attention import (
    AdditiveAttention,
    DotProductAttention,
    additive_scores,
    attention_loop,
    attention_pooling,
    dot_product_scores,
    dot_product_attention,
)
from .bahdanau import (
    COMPARISON_MODELS,
    BahdanauDecoder,
    BahdanauState,
    comparison_models,
)
from .claims import ClaimError, claim, glue
from .decoding import Decoder, beam_search, greedy_decode, translate
from .data import (
    DATA_ENV_VAR,
    FRA_ENG_SHA1,
    FRA_ENG_URL,
    Batch,
    DataUnavailableError,
    TranslationData,
    Vocab,
    copy_task,
    load_fra_eng,
    locate_fra_eng,
    preprocess,
    read_pairs,
    split_of,
    tokenize,
    truncate_pad,
)
from .evaluation import (
    alignment_hits,
    bleu,
    bleu_by_length,
    bleu_interval,
    compare_bleu,
    copy_accuracy,
    corpus_bleu,
    format_p,
)
from .digits import (
    CAPTION_VOCAB_SIZE,
    DIGIT_WORDS,
    DigitCanvases,
    DigitStrips,
    box_mask,
    caption_batch,
    cluttered_digits,
    digit_pool,
    digit_strips,
    load_digit_images,
)
from .efficient import (
    AttentionPattern,
    chunked_attention,
    local_attention,
    peak_memory,
)
from .gru import GRUCell, gru_update
from .lm import (
    IGNORE_INDEX,
    SentenceData,
    SequenceClassifier,
    TransformerLM,
    evaluate_lm,
    generate,
    lm_loss,
    load_sentences,
    mask_tokens,
    next_word_examples,
    train_lm,
)
from .masking import causal_mask, masked_softmax, valid_lens_to_mask
from .multihead import MultiHeadAttention, merge_heads, split_heads
from .positional import (
    LearnedPositionalEncoding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    apply_rotary,
    sinusoidal_encoding,
)
from .plotting import (
    StaticExplorerHTML,
    plot_bleu_by_length,
    plot_history,
    show_heatmaps,
    show_image_attention,
    static_explorer,
    use_cjk_font,
)
from .measure import (
    Hardware,
    best_seconds,
    by_device,
    fitted_threads,
    hardware,
    matmul_rate,
    native_bfloat16,
    seconds_per_call,
    synchronize,
)
from .seq2seq import EncoderDecoder, Seq2SeqDecoder, Seq2SeqEncoder
from .training import (
    History,
    TimeBudget,
    autocast,
    choose_device,
    evaluate_accuracy,
    evaluate_loss,
    sequence_loss,
    set_seed,
    train_classifier,
    train_seq2seq,
)

from .transformer import (
    AddNorm,
    PositionWiseFFN,
    RMSNorm,
    SwiGLU,
    TransformerDecoder,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
    TransformerState,
    make_ffn,
    make_norm,
    swiglu_hidden,
    torch_twin,
    warmup_rate,
    warmup_schedule,
)

from .vision import (
    CBAM,
    ChannelAttention,
    DigitCNN,
    PatchEmbedding,
    SpatialAttention,
    VisionTransformer,
    channel_descriptors,
    image_to_tokens,
    spatial_descriptors,
    tokens_to_grid,
)

__version__ = "0.1.0"
