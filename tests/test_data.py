import hashlib
import http.server
import io
import socket
import threading
import time
import zipfile

import pytest
import torch

from attention_lib import data as D


# ----------------------------------------------------------------------------- text
# processing


@pytest.mark.parametrize("text, expected", [
    ("Go.", "go ."),
    ("Hello, World!", "hello , world !"),
    ("Va !", "va !"),
    ("Ça alors\u202f!", "ça alors !"),
    ("Il a 3\xa0ans.", "il a 3 ans ."),
    ("J'ai faim.", "j'ai faim ."),
])
def test_preprocess_matches_the_d2l_rules(text, expected):
    assert D.preprocess(text) == expected


def test_preprocess_equals_d2l_on_the_real_corpus():
    from d2l import torch as d2l

    pairs = D.read_pairs(D.locate_fra_eng())[::97]
    ours = "\n".join(D.preprocess(e + "\t" + f) for e, f in pairs)
    # d2l's MTFraEng._preprocess works on the whole file's text
    theirs = d2l.MTFraEng._preprocess(None, "\n".join(e + "\t" + f for e, f in pairs))
    assert ours == theirs


def test_tokenize_drops_empty_tokens():
    assert D.tokenize("va  ! ") == ["va", "!"]


def test_vocab_specials_first_min_freq_and_unknowns():
    vocab = D.Vocab([["a", "b", "a"], ["c", "a", "b"]], min_freq=2)
    assert vocab.idx_to_token[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert vocab.pad == 0 and vocab.unk == 3
    # most frequent first; "c" is below min_freq
    assert vocab.idx_to_token[4:] == ["a", "b"]
    assert vocab[["a", "c", "zzz"]] == [4, vocab.unk, vocab.unk]
    assert vocab.to_tokens(torch.tensor([4, 5])) == ["a", "b"]
    with pytest.raises(ValueError, match="min_freq"):
        D.Vocab([], min_freq=0)


@pytest.mark.parametrize("indices, num_steps, expected", [
    ([5, 6, 7], 5, [5, 6, 7, 0, 0]),
    ([1, 2, 3, 4, 5], 3, [1, 2, 3]),
    ([], 2, [0, 0]),
])
def test_truncate_pad(indices, num_steps, expected):
    assert D.truncate_pad(indices, num_steps, pad=0) == expected


def test_truncate_pad_rejects_nonpositive_num_steps():
    with pytest.raises(ValueError, match="num_steps"):
        D.truncate_pad([1], 0, 0)


# ----------------------------------------------------------------------------- splits
# and tensors


def test_split_is_deterministic_and_keeps_an_english_sentence_in_one_split(small_data):
    assert D.split_of("I love you.") == D.split_of("I love you.")
    test_english = {" ".join(e) for e, _ in small_data.pairs["test"]}
    train_english = {" ".join(e) for e, _ in small_data.pairs["train"]}
    val_english = {" ".join(e) for e, _ in small_data.pairs["val"]}
    assert not test_english & train_english
    assert not test_english & val_english
    assert len(small_data.pairs["test"]) >= 1000


def test_full_corpus_split_sizes():
    pairs = D.read_pairs(D.locate_fra_eng())
    assert len(pairs) == 76036
    counts = {"train": 0, "val": 0, "test": 0}
    for english, _ in pairs:
        counts[D.split_of(english)] += 1
    assert counts["test"] >= 1000 and counts["val"] >= 1000
    assert counts["train"] > 0.9 * len(pairs)


def test_tensors_have_eos_padding_and_a_right_shifted_decoder_input(small_data):
    batch = small_data.tensors("val")
    n = len(small_data.pairs["val"])
    assert batch.src.shape == batch.tgt_output.shape == batch.tgt_input.shape == (n, 10)
    eos, pad, bos = (
        small_data.tgt_vocab.eos,
        small_data.tgt_vocab.pad,
        small_data.tgt_vocab.bos,
    )
    # valid lengths count real tokens including <eos>; everything after is padding
    for row, length in zip(batch.tgt_output[:50], batch.tgt_valid_lens[:50]):
        assert (row[length:] == pad).all() and (row[:length] != pad).all()
        if length < 10:
            assert row[length - 1] == eos
    assert (batch.tgt_input[:, 0] == bos).all()
    assert torch.equal(batch.tgt_input[:, 1:], batch.tgt_output[:, :-1])


def test_unknown_words_map_to_unk(small_data):
    src, valid_lens = small_data.encode_source(["Zyzzyva qwertyuiop!"])
    unk = small_data.src_vocab.unk
    assert src[0, :2].tolist() == [unk, unk]
    assert valid_lens.tolist() == [4]  # two unknown words, "!", <eos>


def test_loader_batches_and_is_seeded(small_data):
    first = next(iter(small_data.loader("train", batch_size=32, seed=3)))
    again = next(iter(small_data.loader("train", batch_size=32, seed=3)))
    assert first.src.shape == (32, 10) and first.src_valid_lens.shape == (32,)
    assert torch.equal(first.src, again.src)


def test_max_train_keeps_test_split_whole(small_data):
    full = D.load_fra_eng(num_steps=10, max_train=100)
    assert len(full.pairs["train"]) == 100
    assert len(full.pairs["test"]) == len(small_data.pairs["test"])


# ----------------------------------------------------------------------------- finding
# the data, errors


def _write_corpus(directory, text="Go.\tVa !\nHi.\tSalut !\n"):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "fra.txt").write_text(text, encoding="utf-8")
    return directory / "fra.txt"


def test_env_var_directory_is_used_and_checksums_verified(tmp_path, monkeypatch):
    path = _write_corpus(tmp_path / "d")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    (tmp_path / "d" / "SHA256SUMS").write_text(f"{digest}  fra.txt\n")
    monkeypatch.setenv(D.DATA_ENV_VAR, str(tmp_path / "d"))
    assert D.locate_fra_eng() == path


def test_checksum_mismatch_names_the_file(tmp_path, monkeypatch):
    _write_corpus(tmp_path / "d")
    (tmp_path / "d" / "SHA256SUMS").write_text("0" * 64 + "  fra.txt\n")
    monkeypatch.setenv(D.DATA_ENV_VAR, str(tmp_path / "d"))
    with pytest.raises(ValueError, match=r"checksum mismatch for .*fra\.txt"):
        D.locate_fra_eng()


def test_env_var_pointing_at_a_directory_without_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv(D.DATA_ENV_VAR, str(tmp_path))
    with pytest.raises(
        D.DataUnavailableError, match=f"{D.DATA_ENV_VAR} points at .* no fra.txt"
    ) as info:
        D.locate_fra_eng()
    message = str(info.value)
    assert (
        "expected the folder holding the English-French corpus file fra.txt" in message
    )
    assert D.FRA_ENG_URL in message  # where to get it
    # or how to fall back on the cache and the download
    assert f"unset {D.DATA_ENV_VAR}" in message


@pytest.mark.parametrize(
    "target, found",
    [("missing", "does not exist"), ("d/fra.txt", "is a file, not a folder")],
)
def test_env_var_pointing_at_nothing_or_at_the_file_itself(
    tmp_path, monkeypatch, target, found
):
    _write_corpus(tmp_path / "d")
    monkeypatch.setenv(D.DATA_ENV_VAR, str(tmp_path / target))
    with pytest.raises(
        D.DataUnavailableError,
        match=f"which {found}: expected the folder holding .*fra.txt",
    ):
        D.locate_fra_eng()


def test_data_dir_without_the_file_says_so(tmp_path):
    with pytest.raises(
        D.DataUnavailableError,
        match=r"data_dir points at .* no fra.txt.*pass data_dir=None",
    ) as info:
        D.locate_fra_eng(data_dir=tmp_path)
    assert D.FRA_ENG_URL in str(info.value)


def test_a_byte_order_mark_is_not_part_of_the_first_sentence(tmp_path):
    path = tmp_path / "fra.txt"
    path.write_bytes("Go.\tVa !\nHi.\tSalut !\n".encode("utf-8-sig"))
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert D.read_pairs(path) == [("Go.", "Va !"), ("Hi.", "Salut !")]
    data = D.load_fra_eng(num_steps=4, min_freq=1, data_dir=tmp_path)
    english = [e for split in data.raw.values() for e, _ in split]
    assert "Go." in english and not any(e.startswith("\ufeff") for e in english)
    assert ["go", "."] in [e for split in data.pairs.values() for e, _ in split]


@pytest.mark.parametrize(
    "content, message",
    [
        (
            "not-a-checksum\n",
            r"SHA256SUMS, line 1: expected '<64 hex digits>  <file name>'",
        ),
        (
            "0" * 64 + "  other.txt\n",
            r"SHA256SUMS, line 1 lists other.txt, which is not in",
        ),
    ],
)
def test_malformed_checksum_file_is_named(tmp_path, monkeypatch, content, message):
    _write_corpus(tmp_path / "d")
    (tmp_path / "d" / "SHA256SUMS").write_text(content)
    monkeypatch.setenv(D.DATA_ENV_VAR, str(tmp_path / "d"))
    with pytest.raises(ValueError, match=message):
        D.locate_fra_eng()


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"max_train": -1}, ValueError, "max_train must be at least 1, got -1"),
        ({"max_train": 0}, ValueError, "max_train must be at least 1, got 0"),
        (
            {"max_train": 10.5},
            TypeError,
            r"max_train must be an integer \(at least 1\), got the float 10.5",
        ),
        ({"num_steps": 1}, ValueError, "num_steps must be at least 2, got 1"),
        ({"num_steps": "12"}, TypeError, "num_steps must be an integer"),
        ({"min_freq": 0}, ValueError, "min_freq must be at least 1, got 0"),
        ({"seed": None}, TypeError, "seed must be an integer"),
    ],
)
def test_load_fra_eng_names_bad_arguments_before_reading_the_corpus(
    tmp_path, kwargs, error, message
):
    # the folder is empty: the check comes first
    with pytest.raises(error, match=message):
        D.load_fra_eng(data_dir=tmp_path, **kwargs)


def test_tiny_corpus_loads_with_the_smallest_settings(tmp_path):
    _write_corpus(tmp_path)
    data = D.load_fra_eng(num_steps=2, min_freq=1, max_train=1, data_dir=tmp_path)
    assert (
        sum(len(pairs) for pairs in data.pairs.values()) <= 2
        and len(data.pairs["train"]) <= 1
    )
    assert data.tensors("train").src.shape[1] == 2


def test_encode_source_refuses_a_string_for_a_list(small_data):
    with pytest.raises(
        TypeError,
        match=r"sentences must be a list of strings \(e.g. \['Go.'\]\), got the str",
    ):
        small_data.encode_source("Go.")
    with pytest.raises(TypeError, match=r"sentences\[0\] is a list of length 2"):
        small_data.encode_source([["go", "."]])
    src, valid_lens = small_data.encode_source([])
    assert src.shape == (0, 10) and valid_lens.shape == (0,)


def test_splits_and_loaders_name_bad_arguments(small_data):
    with pytest.raises(
        ValueError, match=r"split must be one of \['test', 'train', 'val'\], got 'dev'"
    ):
        small_data.tensors("dev")
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        small_data.loader("train", batch_size=0)
    with pytest.raises(
        ValueError, match="val_percent \\+ test_percent must be at most 100"
    ):
        D.split_of("Go.", val_percent=60, test_percent=50)
    with pytest.raises(TypeError, match="english must be a str"):
        D.split_of(["Go."])
    with pytest.raises(TypeError, match="num_steps must be an integer"):
        D.truncate_pad([1], 2.0, 0)


@pytest.mark.parametrize("content, message", [
    ("Go.\tVa !\nthis line has no tab\n", r"line 2: expected 'English<TAB>French'"),
    ("Go.\t\n", r"line 1: expected"),
    ("", "holds no sentence pairs"),
])
def test_malformed_file_names_file_and_line(tmp_path, content, message):
    path = tmp_path / "fra.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        D.read_pairs(path)
    assert str(path) in str(info.value)


def test_not_utf8_is_reported(tmp_path):
    path = tmp_path / "fra.txt"
    path.write_bytes(b"Go.\tVa \xff!\n")
    with pytest.raises(ValueError, match="not UTF-8"):
        D.read_pairs(path)


@pytest.fixture
def offline(tmp_path, monkeypatch):
    monkeypatch.delenv(D.DATA_ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_no_data_and_no_network_fails_fast_and_says_what_to_do(offline):
    # Port 9 on loopback refuses connections, as an offline machine does.
    start = time.monotonic()
    with pytest.raises(D.DataUnavailableError) as info:
        D.locate_fra_eng(url="http://127.0.0.1:9/fra-eng.zip")
    assert time.monotonic() - start < 10
    assert D.DATA_ENV_VAR in str(
        info.value
    ) and "http://127.0.0.1:9/fra-eng.zip" in str(info.value)


def test_a_server_that_never_answers_times_out(offline):
    # Accepts the connection but never responds: the download must give up, not hang.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    url = f"http://127.0.0.1:{server.getsockname()[1]}/fra-eng.zip"
    start = time.monotonic()
    try:
        with pytest.raises(D.DataUnavailableError, match=D.DATA_ENV_VAR):
            D.locate_fra_eng(url=url, timeout=2)
    finally:
        server.close()
    assert time.monotonic() - start < 10


def test_default_download_url_is_d2ls_public_copy():
    assert D.FRA_ENG_URL.endswith("/fra-eng.zip") and "d2l-data" in D.FRA_ENG_URL
    assert D.FRA_ENG_SHA1 == "94646ad1522d915e7b0f9296181140edcf86a4f5"


@pytest.fixture
def zip_server():
    """Serve an in-memory fra-eng.zip over loopback HTTP, as the public copy is
    served."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("fra-eng/fra.txt", "Go.\tVa !\nHi.\tSalut !\n")
    payload = buffer.getvalue()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield (
        f"http://127.0.0.1:{httpd.server_port}/fra-eng.zip",
        hashlib.sha1(payload).hexdigest(),
    )
    httpd.shutdown()


def test_download_verifies_extracts_and_caches(offline, tmp_path, zip_server):
    url, sha1 = zip_server
    path = D.locate_fra_eng(url=url, sha1=sha1)
    assert path == tmp_path / "cache" / "attention_lib" / "fra-eng" / "fra.txt"
    assert D.read_pairs(path) == [("Go.", "Va !"), ("Hi.", "Salut !")]
    # second call: from the cache, no network needed
    assert D.locate_fra_eng(url="http://127.0.0.1:9/unreachable.zip") == path


def test_download_with_wrong_checksum_is_rejected_and_removed(
    offline, tmp_path, zip_server
):
    url, _ = zip_server
    with pytest.raises(
        ValueError, match=r"checksum mismatch for .*fra-eng\.zip downloaded from"
    ):
        D.locate_fra_eng(url=url, sha1="0" * 40)
    assert not (tmp_path / "cache" / "attention_lib" / "fra-eng.zip").exists()


def test_vocab_names_indices_where_tokens_belong_and_indices_out_of_range():
    vocab = D.Vocab([["a", "b", "a"]])
    assert vocab[("a", "zzz")] == [4, vocab.unk] and vocab.to_tokens(4) == "a"
    with pytest.raises(
        TypeError,
        match=r"takes a token \(str\) or a list of tokens, got the int 4.*to_tokens",
    ):
        vocab[4]
    with pytest.raises(TypeError, match="got a torch.Tensor"):
        vocab[torch.tensor([4])]
    with pytest.raises(
        ValueError,
        match=r"indices must lie in \[0, 6\) \(the vocabulary's size\), got \[6, -1\]",
    ):
        vocab.to_tokens([4, 6, -1])
    with pytest.raises(ValueError, match=r"got \[9\]"):
        vocab.to_tokens(torch.tensor(9))


# ----------------------------------------------------------------------------- the copy
# task


def _inline_copy_task(num_examples, seed, max_len=30, num_symbols=10):
    """Chapter 3.2's inline version, before it moved into the library (kept here to pin
    the data)."""
    pad, bos, eos = 0, 1, 2
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, max_len + 1, (num_examples,), generator=gen)
    src = torch.full((num_examples, max_len + 1), pad)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(3, 3 + num_symbols, (n,), generator=gen)
        src[i, n] = eos
    tgt_input = torch.cat([torch.full((num_examples, 1), bos), src[:, :-1]], dim=1)
    valid_lens = lengths + 1
    return src, valid_lens, tgt_input, src.clone(), valid_lens


@pytest.mark.parametrize("num_examples, seed", [(2_000, 0), (300, 1), (1, 7)])
def test_copy_task_gives_the_data_of_chapter_3s_inline_version(num_examples, seed):
    batch = D.copy_task(num_examples, seed=seed)
    assert isinstance(batch, D.Batch)
    for got, expected in zip(batch, _inline_copy_task(num_examples, seed)):
        assert got.dtype == torch.long
        assert torch.equal(got, expected)


def test_copy_task_layout_eos_padding_and_shifted_decoder_input():
    batch = D.copy_task(500, max_len=8, num_symbols=4, seed=3)
    assert (
        batch.src.shape == batch.tgt_input.shape == batch.tgt_output.shape == (500, 9)
    )
    assert torch.equal(batch.tgt_output, batch.src) and torch.equal(
        batch.tgt_valid_lens, batch.src_valid_lens
    )
    # 2 to 8 symbols, then <eos>
    assert batch.src_valid_lens.min() == 3 and batch.src_valid_lens.max() == 9
    for row, n in zip(batch.src.tolist(), batch.src_valid_lens.tolist()):
        assert (
            all(3 <= s < 7 for s in row[: n - 1])
            and row[n - 1] == 2
            and set(row[n:]) <= {0}
        )
    assert (batch.tgt_input[:, 0] == 1).all() and torch.equal(
        batch.tgt_input[:, 1:], batch.src[:, :-1]
    )
    assert not torch.equal(D.copy_task(50, seed=0).src, D.copy_task(50, seed=1).src)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(num_examples=0), ValueError, "num_examples must be at least 1, got 0"),
        (dict(num_examples=10.0), TypeError, "num_examples must be an integer"),
        (
            dict(num_examples=10, max_len=1),
            ValueError,
            "max_len must be at least 2, got 1",
        ),
        (
            dict(num_examples=10, num_symbols=0),
            ValueError,
            "num_symbols must be at least 1, got 0",
        ),
        (dict(num_examples=10, seed=-1), ValueError, "seed must be at least 0, got -1"),
    ],
)
def test_copy_task_names_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        D.copy_task(**kwargs)
