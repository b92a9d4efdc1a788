"""attention_lib.source: library code as the book prints it, without decorators and
docstrings."""
import inspect

import pytest

from attention_lib import MultiHeadAttention, masked_softmax
from attention_lib.efficient import generate
from attention_lib.source import show_source, source_of


def test_decorators_and_docstring_are_left_out_and_the_body_kept():
    full = inspect.getsource(masked_softmax)
    assert full.lstrip().startswith("@checked_by") and '"""' in full
    shown = source_of(masked_softmax)
    assert shown.startswith("def masked_softmax(") and '"""' not in shown
    body = full[full.rindex('"""') + 3:].lstrip("\n")
    assert shown.endswith(body)


def test_a_method_is_dedented_and_start_keeps_the_tail():
    shown = source_of(MultiHeadAttention.forward)
    assert shown.startswith("def forward(\n    self,")
    tail = source_of(generate, start="tokens = [start]")
    assert tail.startswith("tokens = [start]\n") and tail.rstrip().endswith(
        inspect.getsource(generate).rstrip().splitlines()[-1].strip())
    with pytest.raises(ValueError, match="not in the code of generate"):
        source_of(generate, start="no such line")


def test_show_source_prints_each_object_with_a_blank_line_between(capsys):
    show_source(masked_softmax, generate)
    printed = capsys.readouterr().out
    assert printed == source_of(masked_softmax) + "\n" + source_of(generate)
