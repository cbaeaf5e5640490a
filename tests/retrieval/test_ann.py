"""The adapter over ``usearch`` (:mod:`chats.retrieval.ann`) still matches the installed
library: the parts it calls exist with the arguments it passes, a serialised index keeps what
the adapter relies on (metric, 8-bit vectors, dimensions, graph links) while the search
setting is not kept (the adapter sets it again), and an index saved by the version the stored
indexes were written with (``ann.ENGINE``) still loads and answers. When this fails after an
upgrade, fix the adapter, and change ``ann.ENGINE`` if stored indexes can no longer be read
(they are then rebuilt by the embedding job)."""

from __future__ import annotations

import base64
import inspect
import zlib

import numpy as np
import pytest

from chats.retrieval import ann

pytestmark = pytest.mark.skipif(not ann.available(), reason="the usearch package is not installed")

#: Six 4-dimensional vectors (keys 11-16) saved by usearch 2.26.6 with the adapter's settings:
#: the format ``ann.ENGINE`` names (zlib, base64).
SAVED = (
    "eNpjY2BgYAHiegZUwicVRKX6lBanJhYlZzAxSDGwMSSL8/GzMaACFga8AKZcAEorQGlGKM2Mohoiyg3ns0LFmKAq"
    "WaBi9AQ8KK5hGGDX8GKEDcMAuoYPHm+s0HBhREoW9HYNNQA/1vCFxTi9fSSA4hrkdIech+gFACjiCA0="
)


def test_the_parts_used_exist_with_the_arguments_passed():
    index = ann.AnnIndex.new(4)
    native = type(index.native)
    init = inspect.signature(native.__init__).parameters
    for name in ("ndim", "metric", "dtype", "connectivity", "expansion_add", "expansion_search"):
        assert name in init
    assert "view" in inspect.signature(native.restore).parameters
    assert "threads" in inspect.signature(native.add).parameters
    for prop in ("memory_usage", "expansion_search"):
        assert isinstance(inspect.getattr_static(native, prop), property)
    index.add([7, 8], np.eye(4, dtype=np.float32)[:2])
    assert isinstance(index.native.save(), bytes | bytearray)
    assert isinstance(index.native.memory_usage, int) and index.nbytes > 0
    assert list(index.native.search(np.eye(4, dtype=np.float32)[1], 1).keys) == [8]


def test_a_restored_index_keeps_its_layout_and_gets_its_search_setting_back():
    index = ann.AnnIndex.new(4)
    index.add([1, 2, 3], np.eye(4, dtype=np.float32)[:3])
    raw = type(index.native).restore(index.to_bytes(), view=False)
    assert raw.ndim == 4 and raw.connectivity == ann.CONNECTIVITY
    assert "cos" in str(raw.metric).lower() and "i8" in str(raw.dtype).lower()
    # Not kept in the bytes: the adapter sets it on every load.
    assert raw.expansion_search != ann.EXPANSION_SEARCH
    assert ann.AnnIndex.from_bytes(index.to_bytes()).native.expansion_search == (
        ann.EXPANSION_SEARCH
    )


def test_an_index_saved_in_the_stored_format_still_loads():
    assert ann.ENGINE == "usearch2-hnsw-cos-i8"  # the format SAVED was written in
    index = ann.AnnIndex.from_bytes(zlib.decompress(base64.b64decode(SAVED)))
    assert len(index) == 6
    assert index.search(np.array([0.5, 0.9, 0.0, 0.0]), 2) == [15, 12]
    assert index.search(np.array([0.0, 0.0, 0.7, 0.7]), 1) == [16]
    with pytest.raises(ValueError):
        ann.AnnIndex.from_bytes(b"not an index")
