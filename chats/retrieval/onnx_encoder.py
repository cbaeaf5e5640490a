"""The sentence model run by ONNX Runtime, for one text at a time: a turn's question (pure:
nothing here imports Django).

Why: a turn embeds its new message while the assembly reads the database, and PyTorch's
eager forward pass of one short text is mostly the interpreter stepping from operation to
operation (about 17 ms of a core for a 13-word question, tokenizing and pooling included).
ONNX Runtime runs the same graph in one call, without the GIL, in about 6.5 ms, giving the
same vector (cosine 1.0 to PyTorch's; checked every time a process loads it). The jobs'
batches stay on PyTorch, which is faster there (64 texts of 256 word pieces: 5.0 s against
7.0 s).

The graph is exported from the loaded PyTorch model (``torch.onnx``, which needs the
``onnx`` package) into a file beside the evaluations' caches (``$XDG_CACHE_HOME/chatplatform/``,
``~/.cache`` by default), named by the releases that shape it, so an upgrade exports it
anew. One process of the machine at a time exports or checks it (a lock file beside it);
the others wait, then load it. A file that does not load or does not give PyTorch's vectors
is exported again once. Without ``onnxruntime``, when the folder cannot be written, or when
no graph gives PyTorch's vectors, :func:`build` returns ``None`` and the caller stays on
PyTorch. Exporting takes about 2 s and, while it runs, about 380 MB more memory.
"""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

#: The ONNX operator set the graph is exported with (ONNX Runtime 1.32 runs up to 23).
OPSET = 17
#: Below this cosine to PyTorch's vector of the probe texts the graph is not used.
MIN_COSINE = 0.9999
#: Texts the loaded graph must embed as PyTorch does: a question, accents and scripts
#: outside Latin, and one longer than the model reads (cut at its maximum).
PROBES = (
    "What did we decide about the release and the budget?",
    "Ünïcödé naïve café 東京 😀 ->-> 1,1",
    "word " * 400,
)
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def installed() -> bool:
    """Whether ONNX Runtime is installed (found without importing it)."""
    try:
        return find_spec("onnxruntime") is not None
    except (ImportError, ValueError):
        return False


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "chatplatform"


def graph_path(model_package: str, model_name: str) -> Path:
    """Where the exported graph of ``model_package``'s model is kept on this machine: named
    by every release that shapes it (the model's files, PyTorch and transformers, which
    trace it, and ONNX Runtime, which runs it), so an upgrade exports it anew."""
    releases = []
    for package in (model_package.replace("_", "-"), "torch", "transformers", "onnxruntime"):
        try:
            releases.append(version(package).replace("+", "-"))
        except PackageNotFoundError:
            releases.append("none")
    return cache_dir() / f"{model_name}-{'-'.join(releases)}-opset{OPSET}.onnx"


class OnnxEncoder:
    """Unit vectors of single texts: the tokenizer of the PyTorch model, the exported graph,
    then the model's own pooling (the mean of the word pieces' vectors) and normalisation."""

    def __init__(self, session: Any, tokenizer: Any, max_tokens: int) -> None:
        self._session, self._tokenizer, self._max_tokens = session, tokenizer, max_tokens
        self._inputs = [i.name for i in session.get_inputs()]

    def embed(self, text: str) -> np.ndarray:
        encoded = self._tokenizer(
            [text], truncation=True, max_length=self._max_tokens, return_tensors="np"
        )
        feed = {name: np.asarray(encoded[name], dtype=np.int64) for name in self._inputs}
        (hidden,) = self._session.run(["last_hidden_state"], feed)
        mask = feed["attention_mask"][..., None].astype(np.float32)
        vector = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        vector = vector[0] / max(float(np.linalg.norm(vector[0])), 1e-12)
        return np.ascontiguousarray(vector, dtype=np.float32)


def build(model: Any, path: Path, *, threads: int) -> OnnxEncoder | None:
    """The encoder of the sentence-transformers ``model`` (loaded, on the CPU) from the graph
    at ``path``, exported there first when missing, and exported again once when the file
    there does not load or does not give ``model``'s vectors; ``None`` (logged) when ONNX
    Runtime is missing or no graph gives them. Processes of one machine export one at a
    time (a lock file beside the graph): the others wait for it and load it."""
    if not installed():
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _exclusive(path.with_suffix(".lock")):
            fresh = not path.is_file()
            if fresh:
                _export(model, path)
            encoder = _checked(model, path, threads)
            if encoder is None and not fresh:
                logger.warning("the graph at %s does not serve: exporting it again", path)
                _export(model, path)
                encoder = _checked(model, path, threads)
    except Exception:
        logger.exception("ONNX Runtime not used for questions; they are embedded by PyTorch")
        return None
    if encoder is None:
        logger.error("the graph at %s differs from PyTorch: not used", path)
    return encoder


def _checked(model: Any, path: Path, threads: int) -> OnnxEncoder | None:
    """The encoder of the graph at ``path`` when it loads and gives ``model``'s vectors of
    the probe texts, else ``None``."""
    try:
        encoder = _load(model, path, threads=threads)
        reference = model.encode(
            list(PROBES), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        pairs = zip(PROBES, reference, strict=True)
        worst = min(float(np.dot(encoder.embed(t), r)) for t, r in pairs)
    except Exception:
        logger.warning("the graph at %s failed to load", path, exc_info=True)
        return None
    return encoder if worst >= MIN_COSINE else None


@contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """Held by one process of the machine at a time (an advisory lock on ``lock``, released
    when the process ends however it ends); an export left half-written by a killed process
    is removed by the next holder."""
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            for left in lock.parent.glob("*.onnx.part"):
                left.unlink(missing_ok=True)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _load(model: Any, path: Path, *, threads: int) -> OnnxEncoder:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return OnnxEncoder(session, model.tokenizer, int(model.max_seq_length))


def _hidden(transformer: Any) -> Any:
    """The transformer under the model's pooling as a module of its own: word pieces in,
    their vectors out (what the graph computes)."""
    import torch

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    return Hidden().eval()


def _export(model: Any, path: Path) -> None:
    import torch

    sample = model.tokenizer(list(PROBES[:2]), padding=True, return_tensors="pt")
    args = tuple(sample[name] for name in INPUTS)
    axes = {name: {0: "texts", 1: "pieces"} for name in (*INPUTS, "last_hidden_state")}
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".onnx.part")
    os.close(handle)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the exporter's notes on traced shapes
            torch.onnx.export(
                _hidden(model[0].auto_model),
                args,
                temporary,
                input_names=list(INPUTS),
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
        os.chmod(temporary, 0o644)  # readable by the platform's other processes
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)
