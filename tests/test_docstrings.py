"""Every public name of the library says its shapes and the notebook that teaches it.

One test for every module: each class and function in a module's ``__all__`` has a
docstring with a ``Shapes:`` block and a line "Taught in ``chapters/...ipynb``." naming
a notebook that exists (or a page ``chapters/....md``, for what runs without a kernel).
Rules that differ between modules are data below. The checkers in
``attention_lib.exercises`` are tested in ``tests/test_exercises_common.py``.
"""
import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import pytest

import attention_lib

ROOT = Path(__file__).resolve().parents[1]
TAUGHT_IN = re.compile(r"Taught in ``(chapters/[^`]+\.(?:ipynb|md))``")

# Where a name must be taught: the first prefix that matches "module.name" or "module".
PAGE_PREFIXES = {
    "attention": "chapters/02_attention/",
    "digits": "chapters/07_visual/",
    "export": "chapters/05_transformer/",
    "vision": "chapters/07_visual/",
    "plotting.show_image_attention": "chapters/07_visual/",
    "training.train_classifier": "chapters/07_visual/",
    "training.evaluate_accuracy": "chapters/07_visual/",
}

# Modules whose names must also be called in a code cell of the page that teaches them.
CALLED_ON_THEIR_PAGE = {"diagrams"}

# Known gaps, "module.name" -> the sections it still lacks. The test fails when a gap
# closes, so that its entry is deleted here and the rule holds from then on.
GAPS = {
    "bahdanau.BahdanauState": {"Taught in"},
    "claims.ClaimError": {"Shapes:", "Taught in"},
    "data.Batch": {"Taught in"},
    "data.DataUnavailableError": {"Shapes:", "Taught in"},
    "decoding.Decoder": {"Shapes:", "Taught in"},
    "decoding.beam_search": {"Taught in"},
    "decoding.greedy_decode": {"Taught in"},
    "decoding.translate": {"Taught in"},
    "efficient.AttentionPattern": {"Shapes:", "Taught in"},
    "efficient.attend": {"Taught in"},
    "efficient.chunked_attention": {"Taught in"},
    "efficient.flex_attention_available": {"Shapes:", "Taught in"},
    "efficient.local_attention": {"Taught in"},
    "efficient.merge_partials": {"Taught in"},
    "training.History": {"Shapes:"},
    "transformer.TransformerState": {"Taught in"},
}

SKIPPED_MODULES = {"exercises"}


def library_modules():
    for info in pkgutil.iter_modules(attention_lib.__path__):
        if not info.name.startswith("_") and info.name not in SKIPPED_MODULES:
            yield info.name, importlib.import_module(f"attention_lib.{info.name}")


def public_names():
    """``module.name`` for every class and function in a module's ``__all__``."""
    for module_name, module in library_modules():
        for name in module.__all__:
            if callable(getattr(module, name)):
                yield f"{module_name}.{name}"


PUBLIC_NAMES = sorted(public_names())


def test_every_library_module_declares_all():
    missing = [name for name, module in library_modules()
               if not hasattr(module, "__all__")]
    assert not missing, f"modules without __all__: {missing}"


def test_every_gap_names_a_public_name():
    assert not set(GAPS) - set(PUBLIC_NAMES), "GAPS names a name that is not public"


@pytest.mark.parametrize("qualname", PUBLIC_NAMES)
def test_docstring_says_shapes_and_the_notebook_that_teaches_it(qualname):
    module_name, name = qualname.split(".")
    value = getattr(importlib.import_module(f"attention_lib.{module_name}"), name)
    doc = inspect.getdoc(value) or ""
    match = TAUGHT_IN.search(doc)
    has = {"Shapes:": "Shapes:" in doc, "Taught in": match is not None}
    gaps = GAPS.get(qualname, set())
    for section, present in has.items():
        if section in gaps:
            assert not present, f"{qualname} now has {section!r}: delete it from GAPS"
        else:
            assert present, f"{qualname}: its docstring has no {section!r} section"
    if match is None:
        return
    page = match.group(1)
    assert (ROOT / page).is_file(), f"{qualname}: {page} does not exist"
    prefix = PAGE_PREFIXES.get(qualname, PAGE_PREFIXES.get(module_name))
    if prefix:
        assert page.startswith(prefix), f"{qualname}: taught in {page}, not {prefix}"
    if module_name in CALLED_ON_THEIR_PAGE:
        sources = [
            "".join(cell["source"])
            for cell in json.loads((ROOT / page).read_text())["cells"]
            if cell["cell_type"] == "code"
        ]
        assert any(f"{name}(" in source for source in sources), (
            f"{qualname}: {page} never calls it")
