"""The English–French corpus: finding it, reading it, tokenising it, batching it.

Sources, tried in order:

1. the directory named by the environment variable ``ATTENTION_LIB_DATA`` (CI and
   offline
   builds point it at a checked copy; a ``SHA256SUMS`` file there is verified);
2. a per-user cache (``$XDG_CACHE_HOME/attention_lib`` or ``~/.cache/attention_lib``);
3. the public ``fra-eng.zip`` that *Dive into Deep Learning* uses, downloaded, checked
   against its SHA-1 and extracted into the cache.

The sentence pairs come from the Tatoeba Project (https://tatoeba.org), licensed
CC BY 2.0 FR.

The split into train / validation / test is decided by a hash of the English sentence,
so it does not depend on the file's order or revision, and every translation of one
English sentence lands in the same split (nothing of a test sentence is ever trained
on).

Taught in ``chapters/01_seq2seq/01_data.ipynb``.
"""
from __future__ import annotations

import collections
import hashlib
import os
import random
import socket
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, NamedTuple, Sequence

import torch
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from ._checks import check_int, check_str_list, describe

__all__ = [
    "DATA_ENV_VAR",
    "FRA_ENG_URL",
    "FRA_ENG_SHA1",
    "DataUnavailableError",
    "locate_fra_eng",
    "read_pairs",
    "preprocess",
    "tokenize",
    "Vocab",
    "truncate_pad",
    "split_of",
    "Batch",
    "TranslationData",
    "load_fra_eng",
    "copy_task",
]

DATA_ENV_VAR = "ATTENTION_LIB_DATA"
FRA_ENG_URL = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
FRA_ENG_SHA1 = "94646ad1522d915e7b0f9296181140edcf86a4f5"
FILE_NAME = "fra.txt"

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)


class DataUnavailableError(RuntimeError):
    """The corpus could not be found locally nor downloaded."""


# --------------------------------------------------------------------------- finding
# the file


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    return Path(base) / "attention_lib"


def _hash_file(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _verify_sha256sums(directory: Path) -> None:
    sums = directory / "SHA256SUMS"
    if not sums.exists():
        return
    for number, line in enumerate(
        sums.read_text(encoding="utf-8-sig").splitlines(), start=1
    ):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64:
            raise ValueError(
                f"{sums}, line {number}: expected '<64 hex digits>  <file name>' "
                f"(the output of sha256sum), got {line[:80]!r}"
            )
        expected, name = parts[0].lower(), parts[1].strip().lstrip("*")
        if not (directory / name).is_file():
            raise ValueError(
                f"{sums}, line {number} lists {name}, which is not in {directory}"
            )
        actual = _hash_file(directory / name, "sha256")
        if actual != expected:
            raise ValueError(
                f"checksum mismatch for {directory / name}: SHA256SUMS says {expected},"
                f" the file hashes to {actual}; the file is corrupt or was changed"
            )


def _download(url: str, dest: Path, timeout: float) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_suffix(dest.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(
            partial, "wb"
        ) as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            from tqdm.auto import tqdm

            with tqdm(
                total=total,
                unit="B",
                unit_scale=True,
                desc=f"downloading {url.rsplit('/', 1)[-1]}",
            ) as bar:
                for chunk in iter(lambda: response.read(1 << 16), b""):
                    out.write(chunk)
                    bar.update(len(chunk))
    except (
        urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError, OSError
    ) as exc:
        partial.unlink(missing_ok=True)
        raise DataUnavailableError(
            "The English-French corpus was not found locally and could not be"
            f" downloaded from {url} ({exc}). Either connect to the internet, or set"
            f" the environment variable {DATA_ENV_VAR} to a directory containing"
            f" {FILE_NAME} (for example ../shared/data/fra-eng)."
        ) from exc
    partial.replace(dest)


def locate_fra_eng(data_dir: str | os.PathLike | None = None, *, timeout: float = 10.0,
                   url: str = FRA_ENG_URL, sha1: str = FRA_ENG_SHA1) -> Path:
    """Return the path of ``fra.txt``, from ``data_dir``, ``$ATTENTION_LIB_DATA``, the
    cache or a download.

    Raises :class:`DataUnavailableError` (within about ``timeout`` seconds when offline)
    naming the environment variable and the URL, and ``ValueError`` naming the file on a
    checksum mismatch.

    Shapes:
        returns: a filesystem path (no tensors)

    Taught in ``chapters/01_seq2seq/01_data.ipynb``.
    """
    directory = data_dir if data_dir is not None else os.environ.get(DATA_ENV_VAR)
    if directory:
        directory = Path(directory).expanduser()
        path = directory / FILE_NAME
        if not path.is_file():
            source = (
                f"the environment variable {DATA_ENV_VAR}"
                if data_dir is None
                else "data_dir"
            )
            found = (
                "is a file, not a folder"
                if directory.is_file()
                else (
                    "does not exist"
                    if not directory.exists()
                    else f"has no {FILE_NAME}"
                )
            )
            undo = (
                f", or unset {DATA_ENV_VAR} to use the per-user cache (downloading the"
                " corpus once)"
                if data_dir is None
                else ", or pass data_dir=None to use the cache or download"
            )
            raise DataUnavailableError(
                f"{source} points at {directory}, which {found}: expected the folder"
                f" holding the English-French corpus file {FILE_NAME} (tab-separated"
                f" English, French). Get it from {FRA_ENG_URL} (unzip it and take"
                f" fra-eng/{FILE_NAME}) and put it in that folder{undo}."
            )
        _verify_sha256sums(directory)
        return path

    cache = _cache_dir() / "fra-eng"
    path = cache / FILE_NAME
    if path.is_file():
        return path
    archive = _cache_dir() / "fra-eng.zip"
    if not archive.is_file():
        _download(url, archive, timeout)
    actual = _hash_file(archive, "sha1")
    if actual != sha1:
        archive.unlink()
        raise ValueError(
            f"checksum mismatch for {archive} downloaded from {url}: expected SHA-1"
            f" {sha1}, got {actual}; the download was removed, try again"
        )
    with zipfile.ZipFile(archive) as zf:
        member = next(
            (n for n in zf.namelist() if n.endswith("/" + FILE_NAME) or n == FILE_NAME),
            None,
        )
        if member is None:
            raise ValueError(
                f"{archive} has no {FILE_NAME} inside; its members are"
                f" {zf.namelist()[:5]}"
            )
        cache.mkdir(parents=True, exist_ok=True)
        with zf.open(member) as src, open(path, "wb") as dst:
            dst.write(src.read())
    return path


def read_pairs(path: str | os.PathLike) -> list[tuple[str, str]]:
    """Read tab-separated (English, French) pairs; extra columns (attribution) are
    ignored.

    A line without a tab, or with an empty side, raises ``ValueError`` naming the file
    and line.

    Shapes:
        returns: list of N (english, french) string pairs

    Taught in ``chapters/01_seq2seq/01_data.ipynb``.
    """
    path = Path(path)
    pairs = []
    try:
        # -sig: a byte-order mark, if any, is not text
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text ({exc})") from exc
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 2 or not parts[0].strip() or not parts[1].strip():
            raise ValueError(
                f"{path}, line {number}: expected 'English<TAB>French', got"
                f" {line[:60]!r}"
            )
        pairs.append((parts[0], parts[1]))
    if not pairs:
        raise ValueError(f"{path} holds no sentence pairs")
    return pairs


# --------------------------------------------------------------------------- text to
# tokens


def preprocess(text: str) -> str:
    """Lower-case, turn non-breaking spaces into spaces, and put a space before ``, . !
    ?``.

    This is the preprocessing readers know from *Dive into Deep Learning*.

    Shapes:
        text, returns: str

    Taught in ``chapters/01_seq2seq/01_data.ipynb``.
    """
    text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
    out = []
    for i, char in enumerate(text):
        if i > 0 and char in ",.!?" and text[i - 1] != " ":
            out.append(" ")
        out.append(char)
    return "".join(out)


def tokenize(text: str) -> list[str]:
    """Split preprocessed text on spaces (no empty tokens).

    Shapes:
        text: str; returns: list of Lt tokens

    Taught in ``chapters/01_seq2seq/01_data.ipynb``.
    """
    return [token for token in text.split(" ") if token]


class Vocab:
    """Map tokens to indices and back. ``<pad> <bos> <eos> <unk>`` come first (``<pad>``
    is 0).

    Tokens seen fewer than ``min_freq`` times are left out and map to ``<unk>``. Order
    after the special tokens: most frequent first, ties alphabetical (so the vocabulary
    is deterministic).

    Shapes:
        vocab[tokens]: list of ints, same length as ``tokens``
        vocab.to_tokens(indices): list of str

    Taught in ``chapters/01_seq2seq/01_data.ipynb``.
    """

    def __init__(self, sentences: Iterable[Sequence[str]] = (), min_freq: int = 1):
        check_int("min_freq", min_freq, 1)
        counter = collections.Counter(
            token for sentence in sentences for token in sentence
        )
        kept = sorted(
            (
                t
                for t, c in counter.items()
                if c >= min_freq and t not in SPECIAL_TOKENS
            ),
            key=lambda t: (-counter[t], t),
        )
        self.idx_to_token = list(SPECIAL_TOKENS) + kept
        self.token_to_idx = {token: idx for idx, token in enumerate(self.idx_to_token)}
        self.token_freqs = counter

    @classmethod
    def from_tokens(cls, idx_to_token: Sequence[str]) -> "Vocab":
        """The vocabulary whose index i is ``idx_to_token[i]`` (one saved with
        ``vocab.idx_to_token``); the special tokens must come first, as built."""
        if list(idx_to_token[: len(SPECIAL_TOKENS)]) != list(SPECIAL_TOKENS):
            raise ValueError(
                f"a vocabulary starts with {list(SPECIAL_TOKENS)}, got"
                f" {list(idx_to_token[: len(SPECIAL_TOKENS)])}"
            )
        vocab = cls()
        vocab.idx_to_token = list(idx_to_token)
        vocab.token_to_idx = {token: i for i, token in enumerate(vocab.idx_to_token)}
        return vocab

    def __len__(self) -> int:
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        if isinstance(tokens, str):
            return self.token_to_idx.get(tokens, self.unk)
        if isinstance(tokens, Tensor) or not hasattr(tokens, "__iter__"):
            raise TypeError(
                "vocab[...] takes a token (str) or a list of tokens, got"
                f" {describe(tokens)}; to turn indices into tokens, use"
                " vocab.to_tokens(indices)"
            )
        return [self[token] for token in tokens]

    def to_tokens(self, indices) -> list[str] | str:
        if isinstance(indices, Tensor):
            indices = indices.tolist()
        if isinstance(indices, int):
            return self.to_tokens([indices])[0]
        indices = [int(i) for i in indices]
        outside = [i for i in indices if not 0 <= i < len(self)]
        if outside:
            raise ValueError(
                f"indices must lie in [0, {len(self)}) (the vocabulary's size), got"
                f" {outside[:5]}"
            )
        return [self.idx_to_token[i] for i in indices]

    pad = property(lambda self: self.token_to_idx[PAD])
    bos = property(lambda self: self.token_to_idx[BOS])
    eos = property(lambda self: self.token_to_idx[EOS])
    unk = property(lambda self: self.token_to_idx[UNK])

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)}, first={self.idx_to_token[:8]})"


def truncate_pad(indices: Sequence[int], num_steps: int, pad: int) -> list[int]:
    """Cut ``indices`` to ``num_steps`` or pad it on the right with ``pad`` up to
    ``num_steps``.

    Shapes:
        indices: Lt ints; returns: ``num_steps`` ints

    Taught in ``chapters/01_seq2seq/01_data.ipynb``.
    """
    check_int("num_steps", num_steps, 1)
    indices = list(indices)[:num_steps]
    return indices + [pad] * (num_steps - len(indices))


def split_of(english: str, val_percent: int = 2, test_percent: int = 3) -> str:
    """'train', 'val' or 'test' for an English sentence, from a hash of its preprocessed
    text.

    Shapes:
        english: str; returns: str

    Taught in ``chapters/01_seq2seq/01_data.ipynb``.
    """
    if not isinstance(english, str):
        raise TypeError(f"english must be a str, got {describe(english)}")
    if (
        check_int("val_percent", val_percent, 0)
        + check_int("test_percent", test_percent, 0)
        > 100
    ):
        raise ValueError(
            f"val_percent + test_percent must be at most 100, got {val_percent} +"
            f" {test_percent}"
        )
    bucket = int(hashlib.md5(preprocess(english).encode("utf-8")).hexdigest(), 16) % 100
    if bucket < test_percent:
        return "test"
    if bucket < test_percent + val_percent:
        return "val"
    return "train"


# --------------------------------------------------------------------------- tensors
# and batches


class Batch(NamedTuple):
    """One batch for teacher forcing.

    Shapes:
        src:            (B, Lk)  source token indices, ``<eos>``-terminated, padded
        src_valid_lens: (B,)     number of real source tokens (with ``<eos>``)
        tgt_input:      (B, Lq)  ``<bos>`` followed by the target shifted right (decoder
            input)
        tgt_output:     (B, Lq)  the target, ``<eos>``-terminated, padded (what to
            predict)
        tgt_valid_lens: (B,)     number of real target tokens (with ``<eos>``)
    """

    src: Tensor
    src_valid_lens: Tensor
    tgt_input: Tensor
    tgt_output: Tensor
    tgt_valid_lens: Tensor


@dataclass
class TranslationData:
    """Tokenised splits with their vocabularies; builds tensors and data loaders.

    ``pairs[split]`` holds ``(english_tokens, french_tokens)`` lists (preprocessed, no
    ``<eos>``); ``raw[split]`` the original strings. The vocabularies are built from the
    training split only.

    Shapes:
        tensors(split): a :class:`Batch` of all pairs, (N, num_steps) and (N,)
        loader(split, batch_size): yields :class:`Batch` of (B, num_steps) and (B,)

    Taught in ``chapters/01_seq2seq/01_data.ipynb``.
    """

    pairs: dict
    raw: dict
    src_vocab: Vocab
    tgt_vocab: Vocab
    num_steps: int

    def encode(
        self, sentences: Sequence[Sequence[str]], vocab: Vocab
    ) -> tuple[Tensor, Tensor]:
        """Indices (N, num_steps) with ``<eos>`` appended, padded or truncated, and
        valid lengths (N,)."""
        rows = [
            truncate_pad(vocab[list(s)] + [vocab.eos], self.num_steps, vocab.pad)
            for s in sentences
        ]
        # (N, num_steps)
        array = torch.tensor(rows, dtype=torch.long).reshape(len(rows), self.num_steps)
        valid_lens = (array != vocab.pad).sum(dim=1)  # (N,)
        return array, valid_lens

    def encode_source(self, sentences: Sequence[str]) -> tuple[Tensor, Tensor]:
        """Raw English strings to source indices (N, num_steps) and valid lengths (N,);
        unknown words become ``<unk>``."""
        return self.encode(
            [tokenize(preprocess(s)) for s in check_str_list("sentences", sentences)],
            self.src_vocab,
        )

    def _check_split(self, split: str) -> None:
        if not isinstance(split, str) or split not in self.pairs:
            raise ValueError(
                f"split must be one of {sorted(self.pairs)}, got {split!r}"
            )

    def tensors(self, split: str = "train") -> Batch:
        self._check_split(split)
        src, src_valid_lens = self.encode(
            [p[0] for p in self.pairs[split]], self.src_vocab
        )
        tgt, tgt_valid_lens = self.encode(
            [p[1] for p in self.pairs[split]], self.tgt_vocab
        )
        bos = torch.full((tgt.shape[0], 1), self.tgt_vocab.bos, dtype=torch.long)
        # (N, num_steps): teacher forcing input
        tgt_input = torch.cat([bos, tgt[:, :-1]], dim=1)
        return Batch(src, src_valid_lens, tgt_input, tgt, tgt_valid_lens)

    def loader(
        self,
        split: str = "train",
        batch_size: int = 64,
        shuffle: bool | None = None,
        seed: int = 0,
    ) -> DataLoader:
        check_int("batch_size", batch_size, 1)
        shuffle = (split == "train") if shuffle is None else shuffle
        dataset = TensorDataset(*self.tensors(split))
        generator = torch.Generator().manual_seed(seed)
        return DataLoader(
            dataset,
            batch_size=batch_size,
            shuffle=shuffle,
            generator=generator,
            collate_fn=lambda rows: Batch(*(torch.stack(col) for col in zip(*rows))),
        )

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v)}" for k, v in self.pairs.items())
        return (f"TranslationData({sizes}, num_steps={self.num_steps}, "
                f"src_vocab={len(self.src_vocab)}, tgt_vocab={len(self.tgt_vocab)})")


def load_fra_eng(
    num_steps: int = 12,
    min_freq: int = 2,
    max_train: int | None = None,
    seed: int = 0,
    data_dir: str | os.PathLike | None = None,
) -> TranslationData:
    """Load, preprocess, tokenise and split the corpus; build vocabularies from the
    training split.

    ``max_train`` keeps a random (seeded) subset of the training pairs so a model trains
    in minutes on a CPU (None: all of them); validation and test splits are always
    complete. ``num_steps`` is at least 2, room for one word and ``<eos>``.

    Shapes:
        returns: :class:`TranslationData`; its tensors are (N, ``num_steps``)

    Taught in ``chapters/01_seq2seq/01_data.ipynb``.
    """
    check_int("num_steps", num_steps, 2)  # room for one word and <eos>
    check_int("min_freq", min_freq, 1)
    if max_train is not None:
        check_int("max_train", max_train, 1)
    check_int("seed", seed, 0)
    raw_pairs = read_pairs(locate_fra_eng(data_dir))
    pairs = {"train": [], "val": [], "test": []}
    raw = {"train": [], "val": [], "test": []}
    for english, french in raw_pairs:
        split = split_of(english)
        pairs[split].append(
            (tokenize(preprocess(english)), tokenize(preprocess(french)))
        )
        raw[split].append((english, french))
    if max_train is not None and max_train < len(pairs["train"]):
        keep = sorted(random.Random(seed).sample(range(len(pairs["train"])), max_train))
        pairs["train"] = [pairs["train"][i] for i in keep]
        raw["train"] = [raw["train"][i] for i in keep]
    src_vocab = Vocab((p[0] for p in pairs["train"]), min_freq=min_freq)
    tgt_vocab = Vocab((p[1] for p in pairs["train"]), min_freq=min_freq)
    return TranslationData(pairs, raw, src_vocab, tgt_vocab, num_steps)


# --------------------------------------------------------------------------- a
# controlled task


def copy_task(
    num_examples: int, max_len: int = 30, num_symbols: int = 10, seed: int = 0
) -> Batch:
    """Random sequences to copy: the bottleneck of one context vector, in a task where
    it bites.

    Token ids: 0 ``<pad>``, 1 ``<bos>``, 2 ``<eos>``, then the symbols ``3 .. 3 +
    num_symbols - 1``. Each example has a length drawn uniformly from ``[2, max_len]``;
    its source is that many random symbols, then ``<eos>``, padded to ``max_len + 1``.
    The target is the source itself, and ``tgt_input`` is ``<bos>`` followed by the
    target shifted right (teacher forcing). Valid lengths count ``<eos>``. A
    ``torch.Generator`` seeded with ``seed`` draws everything, so the same seed gives
    the same data on every machine.

    Shapes:
        returns: a :class:`Batch`; src, tgt_input, tgt_output: (N, max_len + 1); valid
            lens: (N,)

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb`` (with attention in
    ``chapters/03_bahdanau/02_training_and_results.ipynb``).
    """
    check_int("num_examples", num_examples, 1)
    check_int("max_len", max_len, 2)  # the shortest sequence has 2 symbols
    check_int("num_symbols", num_symbols, 1)
    check_int("seed", seed, 0)
    pad, bos, eos, first = 0, 1, 2, 3
    generator = torch.Generator().manual_seed(seed)
    # (N,)
    lengths = torch.randint(2, max_len + 1, (num_examples,), generator=generator)
    src = torch.full((num_examples, max_len + 1), pad)  # (N, Lk)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(
            first, first + num_symbols, (n,), generator=generator
        )
        src[i, n] = eos
    # (N, Lk)
    tgt_input = torch.cat([torch.full((num_examples, 1), bos), src[:, :-1]], dim=1)
    valid_lens = lengths + 1  # (N,), with <eos>
    return Batch(src, valid_lens, tgt_input, src.clone(), valid_lens.clone())
