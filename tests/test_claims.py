"""claim: the check behind every trained or timed number a page quotes."""
import json

import numpy as np
import pytest
import torch

from attention_lib import ClaimError, claim
from attention_lib.claims import STRICT_ENV


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    """The book's own checks (make test, CI): a failing claim raises. The tests of a
    reader's run below unset it."""
    monkeypatch.setenv(STRICT_ENV, "1")


def test_a_value_inside_its_range_is_returned():
    assert claim("x", 13.9, low=11, high=17) == 13.9
    assert claim("x", torch.tensor(0.5), low=0.4) == 0.5
    assert claim("x", np.float32(0.25), high=0.3) == pytest.approx(0.25)
    assert claim("x", True) is True


@pytest.mark.parametrize(
    "value, low, high",
    [(10.9, 11, 17), (17.1, 11, 17), (0.2, 0.5, None), (3.0, None, 2.5)],
)
def test_a_value_outside_its_range_fails_naming_claim_value_and_range(value, low, high):
    with pytest.raises(ClaimError) as info:
        claim("ch1_bleu", value, low=low, high=high, about="held-out BLEU")
    message = str(info.value)
    assert (
        "ch1_bleu" in message
        and "held-out BLEU" in message
        and f"{value:.4g}" in message
    )


def test_an_unchecked_claim_is_glued_but_not_checked(monkeypatch, tmp_path):
    """checked=False: a claim about one kind of machine, met on another (a CPU timing
    slope on a GPU); by_device chooses it, on a simulated GPU here."""
    from attention_lib import by_device, claims

    glued = {}
    monkeypatch.setattr(claims, "glue", lambda name, value: glued.update({name: value}))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "Tesla T4")
    for device, raises in [("cpu", True), ("cuda", False)]:
        on_cpu = by_device(device, cpu=True, gpu=False)
        if raises:
            with pytest.raises(ClaimError):
                claim("slope", 0.1, low=1.3, high=2.3, checked=on_cpu)
        else:
            assert claim("slope", 0.1, low=1.3, high=2.3, checked=on_cpu) == 0.1
            assert glued == {"slope": 0.1}


def test_a_false_bool_claim_fails():
    with pytest.raises(ClaimError, match="does not hold"):
        claim("loss_falls", False)


@pytest.mark.parametrize(
    "value, kwargs",
    [(float("nan"), {"low": 0}), ("13.9", {"low": 0}), (1.0, {}), (True, {"low": 0})],
)
def test_malformed_claims_are_type_errors(value, kwargs):
    with pytest.raises(TypeError):
        claim("x", value, **kwargs)


def test_claims_are_glued_for_the_prose(tmp_path):
    """In a kernel, the value is stored as myst-nb's glue output (what {glue:text}
    renders)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "import torch\nfrom attention_lib import claim, glue\nclaim('bleu',"
                " 13.94, low=11, high=17)\nglue('share', torch.tensor(0.25))"
            )
        ]
    )
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=120).execute()
    outputs = nb.cells[0].outputs
    glued = [
        o
        for o in outputs
        if o.get("metadata", {}).get("scrapbook", {}).get("name") == "bleu"
    ]
    assert glued, json.dumps(outputs)[:500]
    assert "13.94" in json.dumps(glued[0]["data"])
    share = [
        o
        for o in outputs
        if o.get("metadata", {}).get("scrapbook", {}).get("name") == "share"
    ]
    assert "'0.25'" not in json.dumps(share) and '"0.25"' in json.dumps(
        share[0]["data"]
    )  # a number, not tensor(0.25)


# A reader's run: a failing claim shows a note and the page goes on.

@pytest.mark.parametrize("setting", [None, "0"])
def test_on_a_readers_run_a_failing_claim_shows_a_note_and_returns(
    monkeypatch, capsys, setting
):
    from attention_lib import claims

    if setting is None:
        monkeypatch.delenv(STRICT_ENV)
    else:
        monkeypatch.setenv(STRICT_ENV, setting)
    glued = {}
    monkeypatch.setattr(claims, "glue", lambda name, value: glued.update({name: value}))
    value = claim("ch2_min_speedup", 0.37, low=3, about="loop / vectorised",
                  backs="the vectorised form was at least … times faster")
    assert value == 0.37 and glued == {"ch2_min_speedup": 0.37}  # glued for the prose
    note = capsys.readouterr().out
    for part in ["the vectorised form was at least … times faster",
                 "loop / vectorised = 0.37", "at least 3", "busy"]:
        assert part in note, (part, note)
    assert claim("x", False, backs="the loss falls") is False
    note = capsys.readouterr().out
    assert "the loss falls" in note and "false" in note
    claim("x", 2.6, low=0.75, high=2.5)
    assert "a value in [0.75, 2.5]" in capsys.readouterr().out


def test_a_value_inside_its_range_shows_no_note(monkeypatch, capsys):
    monkeypatch.delenv(STRICT_ENV)
    claim("x", 1.2, low=0.75, high=2.5, backs="close")
    assert "Note" not in capsys.readouterr().out


def test_malformed_claims_stay_errors_on_a_readers_run(monkeypatch):
    monkeypatch.delenv(STRICT_ENV)
    with pytest.raises(TypeError):
        claim("x", float("nan"), low=0)


def test_in_a_kernel_the_note_is_html_and_the_page_goes_on():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(
            f"import os\nos.environ.pop({STRICT_ENV!r}, None)\n"
            "from attention_lib import claim\n"
            "claim('ratio', 2.51, low=0.75, high=2.5, about='every step / once',"
            " backs='the two timings are close')\nprint('went on')"
        )
    ])
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=120).execute()
    outputs = nb.cells[0].outputs
    notes = [o for o in outputs if "text/html" in o.get("data", {})
             and "claim-note" in o["data"]["text/html"]]
    assert len(notes) == 1, json.dumps(outputs)[:800]
    html = notes[0]["data"]["text/html"]
    assert "the two timings are close" in html and "every step / once = 2.51" in html
    assert "a value in [0.75, 2.5]" in notes[0]["data"]["text/plain"]
    assert any(o.get("text") == "went on\n" for o in outputs)
