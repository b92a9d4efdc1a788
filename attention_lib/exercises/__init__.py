"""Instant checkers for the book's exercises: each says *what* is wrong, not just
"failed".

A checker takes the reader's function (or value), runs it on cases chosen to expose the
typical mistakes, and returns a :class:`Feedback` that is truthy when the answer is
right and shows a short, specific message in Jupyter. One module per chapter,
``chNN_topic.py``: each declares its cases, the reference (the library) and the named
mistakes as data, and ``_feedback.diagnose`` runs them.

Taught in the exercise sections of each chapter.
"""
from ._feedback import Feedback
from .ch01_seq2seq import (
    check_bleu,
    check_num_parameters,
    check_preprocess,
    check_teacher_forcing_input,
    check_truncate_pad,
)
from .ch02_attention import (
    check_additive_scores,
    check_dot_product_variance,
    check_kernel_as_dot_product,
    check_masked_softmax,
    check_nadaraya_watson,
    check_scaled_dot_product_attention,
    check_temperature_limits,
    check_why_not_stack,
)
from .ch03_bahdanau import (
    check_best_hypothesis,
    check_context,
    check_decoder_step,
    check_gru_update,
    check_stock_gru,
    check_why_nearly_uniform,
)
from .ch04_self_attention import (
    check_attention_weights,
    check_head_scale,
    check_mask_broadcast,
    check_merge_heads,
    check_mha_parameter_count,
    check_padding_mask,
    check_split_heads,
)
from .ch05_bug_hunt import (
    check_attention_step,
    check_causal_mask,
    check_cross_attention,
)
from .ch05_transformer import (
    check_cache_size,
    check_decoder_block_parameters,
    check_encoder_block_macs,
    check_encoder_block_parameters,
    check_smoothed_loss,
    check_sublayer,
    check_warmup_peak,
    check_warmup_rate,
)
from .ch06_efficient import (
    check_merge_partials,
    check_online_softmax,
    check_positions_processed,
    check_scores_bytes,
    check_sparse_mask,
    check_window_mask,
    check_window_pairs,
)
from .ch07_visual import (
    check_channel_gate,
    check_gate_parameters,
    check_image_to_tokens,
    check_patchify,
    check_pointing_accuracy,
    check_spatial_gate,
)
from .ch08_pretraining import (
    check_causal_mask_with_offset,
    check_kv_cache_bytes,
    check_mlm_masking,
    check_modern_block_parameters,
    check_rms_norm,
    check_sampling_temperature,
    check_swiglu,
    check_top_p,
)
