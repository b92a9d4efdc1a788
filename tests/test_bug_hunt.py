"""The claims of chapters/05_transformer/04_bug_hunt.ipynb about its broken decoder
block, checked without executing the notebook.

The page's ``BrokenTransformerDecoderBlock`` makes ten mistakes, two that raise and
eight that compute something else; ``Fix1``, ..., ``Fix9`` and
``FixedTransformerDecoderBlock`` each replace one method of the stage before. Its
``BrokenTargetEmbedding`` makes two more. The classes and the page's checks are loaded
from the notebook's code cells, so there is one copy of them: every check passes on the
fixed block and fails on the broken one; the block with one silent bug alone fails
exactly the checks the page's summary table names; and the fixed block equals
``torch.nn.TransformerDecoderLayer`` (weights copied here, independently of the page's
helpers) in both norm orders.
"""
import re
from pathlib import Path

import nbformat
import pytest
import torch
from torch import nn

from attention_lib import TransformerDecoderBlock, valid_lens_to_mask

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "chapters/05_transformer/04_bug_hunt.ipynb"

# Cells that define classes or functions (not the exercises' my_* answers); calls to
# report(...) and show_table(...) at the top level are left out.
DEFINES = re.compile(r"^(class |def (?!my_))", re.MULTILINE)
DEMOS = ("report(", "show_table(")

STAGES = ["BrokenTransformerDecoderBlock"] + [f"Fix{i}" for i in range(1, 10)] + [
    "FixedTransformerDecoderBlock"]
CHECK_NAMES = ["shapes", "rows", "future", "padding", "learns", "dropout", "library",
               "torch"]
PARITY = {"library", "torch"}

# Bug k is fixed by stage k. What the page's summary table says about each: the
# error it raises, or the checks that fail when it is the block's only bug.
BUGS = {
    1: ("scores", RuntimeError, "batch1 must be a 3D tensor"),
    2: ("merge_heads", NameError, "name 'embed_dim' is not defined"),
    3: ("normalise", {"rows", "future", "padding"} | PARITY),
    4: ("self_attend", {"future"} | PARITY),
    5: ("cross_attend", {"rows", "future"} | PARITY),
    6: ("split_heads", {"future", "padding"} | PARITY),
    7: ("project", {"learns"} | PARITY),
    8: ("add_norm", {"learns"} | PARITY),
    9: ("attention", {"dropout"}),
    10: ("scores", PARITY),
}


@pytest.fixture(scope="module")
def page():
    """The namespace of the page's imports, classes and checks."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    namespace = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if not (cell.source.startswith("import ") or DEFINES.search(cell.source)):
            continue
        source = "\n".join(
            line for line in cell.source.splitlines() if not line.startswith(DEMOS)
        )
        exec(compile(source, str(NOTEBOOK), "exec"), namespace)
    torch.set_printoptions(profile="default")  # the page sets its own
    missing = [name for name in STAGES + ["CHECKS", "run_checks", "EMBEDDING_CHECKS"]
               if name not in namespace]
    assert not missing, f"the notebook no longer defines {missing}"
    return namespace


def stages(page):
    return [page[name] for name in STAGES]


def failing(page, cls, checks=None):
    """The names of the checks that do not pass on blocks of class ``cls``."""
    marks, _ = page["run_checks"](cls, checks or page["CHECKS"])
    return {name for name, mark in marks.items() if mark != "✓"}


def only_bug(page, number):
    """The fixed block with bug ``number`` alone put back: the method that fix
    ``number`` replaced, as the stage before it had it."""
    method, *_ = BUGS[number]
    before = stages(page)[number - 1]
    return type(f"OnlyBug{number}", (page["FixedTransformerDecoderBlock"],),
                {method: getattr(before, method)})


def test_the_page_has_the_checks_it_names(page):
    assert list(page["CHECKS"]) == CHECK_NAMES
    assert list(page["EMBEDDING_CHECKS"]) == ["positions", "library"]


@pytest.mark.parametrize("number", list(BUGS))
def test_each_fix_replaces_the_one_method_of_its_bug(page, number):
    fix = stages(page)[number]
    replaced = [name for name, value in vars(fix).items() if callable(value)]
    assert replaced == [BUGS[number][0]]
    assert fix.__bases__ == (stages(page)[number - 1],)
    # and the method is one the broken block has
    assert BUGS[number][0] in vars(page["BrokenTransformerDecoderBlock"])


def test_every_check_passes_on_the_fixed_block(page):
    for check in page["CHECKS"].values():
        check(page["FixedTransformerDecoderBlock"])


def test_every_check_fails_on_the_broken_block_with_the_bmm_error(page):
    for check in page["CHECKS"].values():
        with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor"):
            check(page["BrokenTransformerDecoderBlock"])


@pytest.mark.parametrize("number", [1, 2])
def test_each_error_alone_makes_every_check_raise_it(page, number):
    _, error, message = BUGS[number]
    block_class = only_bug(page, number)
    for check in page["CHECKS"].values():
        with pytest.raises(error, match=re.escape(message)):
            check(block_class)


@pytest.mark.parametrize("number", [n for n in BUGS if n > 2])
def test_each_silent_bug_alone_fails_the_checks_the_page_names(page, number):
    _, caught_by = BUGS[number]
    block_class = only_bug(page, number)
    assert failing(page, block_class) == caught_by
    # silent: it runs, and the output has the right shape
    page["CHECKS"]["shapes"](block_class)


def test_the_table_the_page_prints(page):
    rows = {name: failing(page, page[name]) for name in STAGES}
    assert rows["BrokenTransformerDecoderBlock"] == rows["Fix1"] == set(CHECK_NAMES)
    assert rows["Fix2"] == set(CHECK_NAMES) - {"shapes"}
    assert rows["Fix5"] == set(CHECK_NAMES) - {"shapes", "rows"}
    assert rows["Fix8"] == {"dropout"} | PARITY
    assert rows["Fix9"] == PARITY
    assert rows["FixedTransformerDecoderBlock"] == set()
    # each fix leaves no check worse off
    for before, after in zip(STAGES, STAGES[1:]):
        assert rows[after] <= rows[before], after


def test_the_embedding_bugs(page):
    checks = page["EMBEDDING_CHECKS"]
    with pytest.raises(RuntimeError, match="indices"):
        checks["positions"](page["BrokenTargetEmbedding"])
    assert failing(page, page["PositionsFromTokens"], checks) == {"positions",
                                                                   "library"}
    assert failing(page, page["FixedTargetEmbedding"], checks) == set()


# --- the fixed block against PyTorch, weights copied here -----------------------------

def copy_attention(ours, theirs: nn.MultiheadAttention) -> None:
    projections = [ours.W_q, ours.W_k, ours.W_v]
    theirs.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
    theirs.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
    theirs.out_proj.weight.copy_(ours.W_o.weight)
    theirs.out_proj.bias.copy_(ours.W_o.bias)


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_fixed_block_equals_torch_decoder_layer(page, norm_first):
    torch.manual_seed(5)
    block = page["FixedTransformerDecoderBlock"](8, 2, 16, norm_first=norm_first)
    block = block.double().eval()
    gen = torch.Generator().manual_seed(6)
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)
    theirs = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                        norm_first=norm_first, dtype=torch.float64)
    with torch.no_grad():
        copy_attention(block.self_attention, theirs.self_attn)
        copy_attention(block.cross_attention, theirs.multihead_attn)
        theirs.linear1.load_state_dict(block.ffn.W_1.state_dict())
        theirs.linear2.load_state_dict(block.ffn.W_2.state_dict())
        for i in (1, 2, 3):
            getattr(theirs, f"norm{i}").load_state_dict(
                getattr(block, f"norm{i}").state_dict())
    x = torch.randn(3, 4, 8, dtype=torch.float64)  # (B, Lq, D)
    memory = torch.randn(3, 7, 8, dtype=torch.float64)  # (B, Lk, D)
    src_lens = torch.tensor([7, 1, 4])
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    with torch.no_grad():
        expected = theirs.eval()(
            x, memory, tgt_mask=~causal,
            memory_key_padding_mask=~valid_lens_to_mask(src_lens, 7))
        torch.testing.assert_close(block(x, memory, src_lens), expected)
        # the library's block, by its state_dict (LayerNorm i kept in add_norm{i})
        reference = TransformerDecoderBlock(8, 2, 16, norm_first=norm_first).double()
        state = {re.sub(r"^norm(\d)\.", r"add_norm\1.norm.", name): value
                 for name, value in block.state_dict().items()}
        reference.load_state_dict(state)
        torch.testing.assert_close(reference.eval()(x, memory, src_lens)[0], expected)
