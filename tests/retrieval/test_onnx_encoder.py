"""A turn's question embedded by ONNX Runtime: the same vector as PyTorch's, the graph
exported once and reused, exported again when it does not serve, never used when it differs
or fails; the jobs' texts stay on PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

from chats.retrieval import embeddings, onnx_encoder

pytestmark = pytest.mark.skipif(
    not (embeddings.available() and onnx_encoder.installed()),
    reason="the embeddings requirements (with onnxruntime) are not installed",
)

TEXTS = [
    "Remind me what deadline I set for the API migration, and whether we moved it?",
    "ok",
    "Привет! Как дела с бюджетом на релиз? 東京で会いましょう 😀",
    "a long reply " * 300,  # past the model's 256 word pieces: cut as PyTorch cuts it
]


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    model = embeddings._load()
    path = tmp_path_factory.mktemp("graph") / "model.onnx"
    encoder = onnx_encoder.build(model, path, threads=1)
    assert encoder is not None and path.is_file()
    return model, path, encoder


def test_a_single_text_gets_pytorchs_vector(graph):
    model, _, encoder = graph
    reference = model.encode(TEXTS, normalize_embeddings=True, show_progress_bar=False)
    for text, expected in zip(TEXTS, reference, strict=True):
        vector = encoder.embed(text)
        assert vector.dtype == np.float32 and vector.shape == (embeddings.DIMENSIONS,)
        assert float(np.dot(vector, expected)) > 0.9999
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


def test_the_graph_is_exported_once_then_reused(graph, monkeypatch):
    model, path, _ = graph

    def no_export(*args, **kwargs):
        raise AssertionError("the graph on disk must be reused")

    monkeypatch.setattr(onnx_encoder, "_export", no_export)
    assert onnx_encoder.build(model, path, threads=1) is not None


def test_a_graph_that_differs_is_not_used(graph, monkeypatch):
    model, path, _ = graph
    monkeypatch.setattr(
        onnx_encoder.OnnxEncoder,
        "embed",
        lambda self, text: np.eye(embeddings.DIMENSIONS, dtype=np.float32)[0],
    )
    assert onnx_encoder.build(model, path, threads=1) is None


def test_questions_go_to_the_encoder_and_the_jobs_texts_to_pytorch(monkeypatch):
    seen: list[str] = []

    class Spy:
        def embed(self, text):
            seen.append(text)
            return np.eye(embeddings.DIMENSIONS, dtype=np.float32)[1]

    embeddings._load()
    monkeypatch.setattr(embeddings, "_single", Spy())
    question = embeddings.embed_question("the question")
    assert seen == ["the question"] and question[1] == 1.0
    (one,) = embeddings.embed(["a message a job embeds alone"])
    batch = embeddings.embed(["first text", "second text"])
    assert seen == ["the question"] and batch.shape == (2, embeddings.DIMENSIONS)
    assert one[1] != 1.0


def test_a_graph_that_does_not_serve_is_exported_again_once(graph, tmp_path):
    model, _, _ = graph
    stale = tmp_path / "stale.onnx"
    stale.write_bytes(b"an older graph")
    (tmp_path / "killed.onnx.part").write_bytes(b"half an export")
    encoder = onnx_encoder.build(model, stale, threads=1)
    assert encoder is not None and stale.stat().st_size > 1_000_000
    assert not list(tmp_path.glob("*.onnx.part"))


def test_a_failure_to_build_leaves_questions_on_pytorch(monkeypatch):
    model = embeddings._load()

    def no_home(*args, **kwargs):
        raise RuntimeError("no home folder")

    monkeypatch.setattr(onnx_encoder, "graph_path", no_home)
    monkeypatch.setattr(embeddings, "_single", embeddings._UNSET)
    vector = embeddings.embed_question(TEXTS[0])
    assert embeddings._single is None
    expected = model.encode([TEXTS[0]], normalize_embeddings=True, show_progress_bar=False)[0]
    assert float(np.dot(vector, expected)) > 0.9999


def test_without_onnxruntime_pytorch_embeds_single_texts(monkeypatch, tmp_path):
    model = embeddings._load()
    monkeypatch.setattr(onnx_encoder, "installed", lambda: False)
    assert onnx_encoder.build(model, tmp_path / "unused.onnx", threads=1) is None
    assert not (tmp_path / "unused.onnx").exists()
    monkeypatch.setattr(embeddings, "_single", None)
    vector = embeddings.embed_question(TEXTS[0])
    expected = model.encode([TEXTS[0]], normalize_embeddings=True, show_progress_bar=False)[0]
    assert float(np.dot(vector, expected)) > 0.9999
