"""Text encoders: `encode(texts) -> float32 array`, rows L2-normalized.

The default `HashingEncoder` needs no model and no fitting: word uni/bi-grams and
character n-grams are hashed into a fixed number of buckets (the hashing trick, as in
scikit-learn's `HashingVectorizer`), so an entry's vector depends only on its own text and never
changes as the corpus grows. Two optional encoders never download anything:
`memory.timeline.semantic.SemanticEncoder` (a sentence-embedding model shipped by the
``embeddings`` extra, on ONNX Runtime) and `SentenceTransformerEncoder` (a model already
installed locally for sentence-transformers). `named_encoder` builds one by its
command-line name.
"""

from __future__ import annotations

import functools
import re
import threading
from array import array
from collections.abc import Sequence
from itertools import chain, repeat
from pathlib import Path
from typing import NamedTuple, Protocol

import mmh3
import numpy as np

from memory.errors import EncoderUnavailable
from memory.timeline.pairwise import row_sums
from memory.timeline.semantic import SemanticEncoder


class Encoder(Protocol):
    """Maps texts to unit-length float32 vectors of a fixed dimension."""

    name: str  # recorded with every entry so the vector's origin is known
    dim: int  # vector length

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dim), dtype float32, rows L2-normalized."""
        ...


class Sparse(NamedTuple):
    """Vectors with the flat positions of the elements that may be non-zero (`HashingEncoder.encode_sparse`)."""

    vectors: np.ndarray  # float32, one row per text
    positions: np.ndarray  # int64 positions in ``vectors.reshape(-1)``, increasing; every other element is 0.0


def _normalize_rows(matrix: np.ndarray) -> np.ndarray:
    # np.linalg.norm(matrix, axis=1, keepdims=True) for real rows, without its argument checks
    norms = np.sqrt(np.add.reduce(matrix * matrix, axis=1, keepdims=True))
    norms[norms == 0.0] = 1.0
    return (matrix / norms).astype(np.float32, copy=False)


_ONE = np.ones(1).tobytes()  # 1.0 as a float64, the weight of a bigram
# What the hashing encoder counts as a word (tests rebuild its vectors from this definition).
TOKEN = re.compile(r"[a-z0-9][a-z0-9_.\-]*[a-z0-9]|[a-z0-9]", re.ASCII)


class HashingEncoder:
    """Stable offline encoder from hashed word and character n-grams.

    Features are word unigrams, word bigrams and character 3- to 5-grams of each word
    (padded with spaces, as scikit-learn's ``char_wb`` analyzer does), hashed with
    32-bit MurmurHash3 of the UTF-8 bytes, seed 0 (``mmh3``; the same values as scikit-learn's
    ``murmurhash3_32(..., positive=True)``) into ``dim`` buckets, sublinear
    (log1p) counts, L2-normalized. Each token's features are memoized in one flat table, and
    a batch is summed with a single gather and ``bincount``, which makes encoding many times
    faster than ``HashingVectorizer`` on log-like text without changing any vector: the
    cache only remembers a pure function.

    Args:
        dim: number of hash buckets (vector length).
        char_weight: weight of character n-grams relative to words; characters make the
            vector robust to inflections ("exhausted" / "exhaustion").
    """

    cache_limit = 500_000  # memoized tokens (and bigrams) before the caches start over

    def __init__(self, dim: int = 1024, char_weight: float = 0.5) -> None:
        self.dim = dim
        self.char_weight = char_weight
        self.name = f"hashing-v2-d{dim}-c{char_weight:g}"
        self._lock = threading.Lock()  # the caches are shared state: one encode at a time
        self._reset_caches()

    def __getstate__(self) -> dict[str, float]:
        return {"dim": self.dim, "char_weight": self.char_weight}  # caches and lock are rebuilt

    def __setstate__(self, state: dict[str, float]) -> None:
        type(self).__init__(self, int(state["dim"]), float(state["char_weight"]))

    def _reset_caches(self) -> None:
        # Token features as a flat CSR table: token number t owns rows _starts[t]:_starts[t + 1]
        # of _buckets/_weights (its word feature, then its character n-grams in order).
        self._token_ids: dict[str, int] = {}
        self._starts = np.zeros(1024, dtype=np.int64)
        self._starts_list = [0]  # the same offsets as Python ints
        self._buckets = np.zeros(16_384, dtype=np.int64)
        self._weights = np.zeros(16_384, dtype=np.float64)
        self._filled = 0  # used length of _buckets/_weights
        self._bigram_cache: dict[str, int] = {}
        self._gram_buckets: dict[str, int] = {}  # character n-gram -> bucket
        # The bigram buckets of the batch path, by the token numbers of the pair (first << 32 | second)
        self._pair_buckets: dict[int, int] = {}
        # The same features as raw bytes per token, filled by the one-text path only
        self._token_bytes: dict[str, tuple[bytes, bytes]] = {}

    def bucket(self, feature: str) -> int:
        """The bucket of one feature string (32-bit MurmurHash3, unsigned, modulo `dim`)."""
        return mmh3.hash(feature, 0, signed=False) % self.dim

    @property
    def cached_tokens(self) -> int:
        """How many tokens the feature cache holds now (bounded by `cache_limit`)."""
        return len(self._token_ids)

    def _token_features(self, token: str) -> tuple[list[int], list[float]]:
        padded = f" {token} "
        grams = [padded[i : i + n] for n in (3, 4, 5) for i in range(len(padded) - n + 1)]
        known = self._gram_buckets  # new tokens mostly share their n-grams with known ones ("ip-10-", "-4")
        buckets = [known[gram] if gram in known else self._gram_bucket(gram) for gram in grams]
        return [self.bucket("w:" + token), *buckets], [1.0] + [self.char_weight] * len(grams)

    def _gram_bucket(self, gram: str) -> int:
        bucket = self._gram_buckets[gram] = self.bucket("c:" + gram)
        return bucket

    def _token_number(self, token: str) -> int:
        number = self._token_ids.get(token)
        return self._add_token(token) if number is None else number

    def _add_token(self, token: str) -> int:
        self._add_tokens([token])
        return self._token_ids[token]

    def _add_tokens(self, tokens: list[str]) -> None:
        """Give each token (new, none twice) the next number, its features written to the table in one step."""
        buckets: list[int] = []
        weights: list[float] = []
        ends = []
        for token in tokens:
            token_buckets, token_weights = self._token_features(token)
            buckets += token_buckets
            weights += token_weights
            ends.append(self._filled + len(buckets))
        number, start, end = len(self._token_ids), self._filled, self._filled + len(buckets)
        if end > len(self._buckets):
            size = max(2 * len(self._buckets), end)
            self._buckets = np.resize(self._buckets, size)
            self._weights = np.resize(self._weights, size)
        if number + len(tokens) + 1 > len(self._starts):
            self._starts = np.resize(self._starts, max(2 * len(self._starts), number + len(tokens) + 1))
        self._buckets[start:end] = buckets
        self._weights[start:end] = weights
        self._starts[number + 1 : number + len(tokens) + 1] = ends
        self._starts_list += ends
        self._filled = end
        self._token_ids.update(zip(tokens, range(number, number + len(tokens))))

    def _token_bytes_of(self, token: str) -> tuple[bytes, bytes]:
        number = self._token_number(token)
        start, end = self._starts_list[number], self._starts_list[number + 1]
        parts = (self._buckets[start:end].tobytes(), self._weights[start:end].tobytes())
        self._token_bytes[token] = parts
        return parts

    def _encode_one(self, text: str) -> np.ndarray:
        """`encode([text])` with as few numpy calls as possible (a single append waits for it)."""
        tokens = TOKEN.findall(text.lower())
        if not tokens:
            return np.zeros((1, self.dim), dtype=np.float32)
        cached = self._token_bytes.get
        parts = [cached(token) or self._token_bytes_of(token) for token in tokens]
        keys = list(map(" ".join, zip(tokens, tokens[1:])))
        bigrams = [self._bigram_bucket(key) for key in keys]
        # Same sums in the same order as `encode`: token features in order, then bigrams.
        index = np.frombuffer(b"".join([p[0] for p in parts]) + array("q", bigrams).tobytes(), dtype=np.int64)
        weight = np.frombuffer(b"".join([p[1] for p in parts]) + _ONE * len(bigrams), dtype=np.float64)
        flat = np.bincount(index, weight, minlength=self.dim)
        np.log1p(flat, out=flat, where=flat != 0.0)
        norm = np.sqrt(np.add.reduce(flat * flat))  # what _normalize_rows computes for one row
        return (flat / norm if norm != 0.0 else flat).astype(np.float32).reshape(1, self.dim)

    def _bigram_bucket(self, key: str) -> int:
        bucket = self._bigram_cache.get(key)
        if bucket is None:
            bucket = self.bucket("b:" + key)
            self._bigram_cache[key] = bucket
        return bucket

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if len(texts) == 1:
            with self._lock:
                self._bound_caches()
                return self._encode_one(texts[0])
        return self.encode_sparse(texts).vectors

    def encode_sparse(self, texts: Sequence[str]) -> Sparse:
        """`encode(texts)` (the same vectors, bit for bit), with the flat positions it wrote: every other
        element is zero (what a worker sends back instead of whole rows, `memory.timeline.ingest_worker`)."""
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        written = []
        for start in range(0, len(texts), 256):  # bounded scratch memory for large batches
            with self._lock:
                self._bound_caches()
                hit = self._encode_chunk(texts[start : start + 256], out[start : start + 256])
            written.append(hit + start * self.dim)
        positions = np.concatenate(written) if written else np.zeros(0, dtype=np.int64)
        return Sparse(out, positions)

    def _bound_caches(self) -> None:
        sizes = len(self._token_ids), len(self._bigram_cache), len(self._pair_buckets), len(self._gram_buckets)
        if max(sizes) > self.cache_limit:
            self._reset_caches()  # they bound memory on adversarial input, and only remember a pure function

    def _encode_chunk(self, texts: list[str], out: np.ndarray) -> np.ndarray:
        """Write the vectors of `texts` into `out` (zeros, one row per text); returns the flat positions written,
        in increasing order (the rest of `out` stays zero)."""
        # Whole-chunk passes instead of a Python loop per text: tokens of every text in one flat
        # list, looked up in the caches with -1 for a miss; bigrams are the pairs of neighbouring
        # tokens of that list, less the pairs that straddle two texts.
        token_lists = list(map(TOKEN.findall, map(str.lower, texts)))
        tokens = list(chain.from_iterable(token_lists))
        if not tokens:
            return np.zeros(0, dtype=np.int64)
        tokens_of = list(map(self._token_ids.get, tokens, repeat(-1)))
        if -1 in tokens_of:
            self._add_tokens(list(dict.fromkeys(t for t, n in zip(tokens, tokens_of) if n < 0)))
            tokens_of = list(map(self._token_ids.__getitem__, tokens))
        numbers = np.asarray(tokens_of, dtype=np.int64)
        row_of = np.repeat(np.arange(len(texts), dtype=np.int64), list(map(len, token_lists)))
        within = np.flatnonzero(row_of[:-1] == row_of[1:])  # pairs (i, i + 1) inside one text
        pairs = ((numbers[within] << 32) | numbers[within + 1]).tolist()
        bigrams_of = np.fromiter(map(self._pair_buckets.get, pairs, repeat(-1)), dtype=np.int64, count=len(pairs))
        for at in np.flatnonzero(bigrams_of < 0).tolist():
            first = int(within[at])
            bucket = self.bucket(f"b:{tokens[first]} {tokens[first + 1]}")
            bigrams_of[at] = self._pair_buckets[pairs[at]] = bucket
        # Gather each token's feature run from the CSR table. Per text, the contributions
        # keep their order (tokens in order, then bigrams), so every float sum is the same.
        starts = self._starts[numbers]
        lengths = self._starts[numbers + 1] - starts
        offsets = np.cumsum(lengths)
        gather = np.arange(int(offsets[-1]), dtype=np.int64) + np.repeat(starts - (offsets - lengths), lengths)
        index = np.concatenate(
            [np.repeat(row_of * self.dim, lengths) + self._buckets[gather], row_of[within] * self.dim + bigrams_of]
        )
        weight = np.concatenate([self._weights[gather], np.ones(len(bigrams_of))])
        counts = np.bincount(index, weight, minlength=len(texts) * self.dim)
        hit = np.flatnonzero(counts != 0.0)  # (faster than flatnonzero of the floats)
        values = np.log1p(counts[hit])  # log1p(0) is 0: only the non-zero counts need it
        # Each row's norm as `_normalize_rows` takes it, a pairwise sum over the whole row, from its
        # non-zero squares alone (`memory.timeline.pairwise`): every bit is the same.
        rows = hit // self.dim
        norms = np.sqrt(row_sums(rows, hit - rows * self.dim, values * values, len(texts), self.dim))
        norms[norms == 0.0] = 1.0
        out.reshape(-1)[hit] = values / norms[rows]
        return hit


_HASHING_NAME = re.compile(r"hashing-v2-d([0-9]{1,6})-c([0-9.e+-]{1,24})")


@functools.lru_cache(maxsize=8)
def rebuildable(name: str) -> HashingEncoder | None:
    """The encoder whose vectors carry `name`, when it can be rebuilt from the name alone, else None.

    A hashing encoder's vector is a pure function of the text and the name's parameters, so a
    store may keep the text and recompute the vector (`memory.timeline.schema`); a model's
    vectors depend on weights the name does not pin, so they are never rebuilt.
    """
    match = _HASHING_NAME.fullmatch(name)
    if match is None:
        return None
    try:
        encoder = HashingEncoder(int(match[1]), float(match[2]))
    except ValueError:
        return None
    return encoder if encoder.name == name and encoder.dim > 0 else None


class SentenceTransformerEncoder:
    """Encoder backed by a locally installed sentence-transformers model.

    Args:
        model: a local directory holding the model, or the name of a model already in
            the local cache. Nothing is downloaded: the model is loaded with
            ``local_files_only=True``, and a missing model raises `EncoderUnavailable` instead
            of falling back to anything else. The process's environment is left alone (a host
            that wants every Hugging Face library offline sets ``HF_HUB_OFFLINE=1`` itself).
    """

    def __init__(self, model: str | Path) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EncoderUnavailable(
                "sentence-transformers is not installed (pip install sentence-transformers)"
            ) from exc
        try:
            self._model = SentenceTransformer(str(model), local_files_only=True)
        except Exception as exc:  # the library raises several types for "not found"
            raise EncoderUnavailable(f"model {model!s} is not available locally: {exc}") from exc
        self.dim = int(self._model.get_sentence_embedding_dimension())
        self.name = f"sentence-transformers:{Path(str(model)).name}"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(texts, convert_to_numpy=True, normalize_embeddings=False)
        return _normalize_rows(np.asarray(vectors, dtype=np.float32))


ENCODER_NAMES = ("hashing", "semantic")  # the names `named_encoder` (and ``--encoder``) accept


def named_encoder(choice: str) -> Encoder:
    """The encoder a command line names: "hashing" (the default, no model) or "semantic".

    The semantic encoder is one per process, so its model loads once and every agent of a
    comparison shares its memo of encoded texts.

    Raises:
        EncoderUnavailable: "semantic" without the ``embeddings`` extra installed.
        ValueError: an unknown name.
    """
    if choice == "hashing":
        return HashingEncoder()
    if choice == "semantic":
        return _shared_semantic_encoder()
    raise ValueError(f"unknown encoder {choice!r} (known: {', '.join(ENCODER_NAMES)})")


@functools.cache
def _shared_semantic_encoder() -> Encoder:
    return SemanticEncoder()


def cosine(query: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Cosine similarity of one unit vector against the unit rows of `matrix`."""
    if matrix.size == 0:
        return np.zeros(0, dtype=np.float32)
    return matrix @ query
