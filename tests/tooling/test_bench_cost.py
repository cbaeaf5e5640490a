"""``manage.py bench_cost`` on a small synthetic LoCoMo-format file: the fields the issue
names, a managed prompt that never overflows, and a bill below the whole history's."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from chatplatform.models import Tenant
from chatplatform.tenancy.scoping import all_tenants

pytestmark = pytest.mark.django_db

FIELDS = [
    "strategy",
    "budget",
    "conversations",
    "turns",
    "mean_prompt_tokens",
    "billed_per_turn",
    "full_history_cached_per_turn",
    "ratio",
    "cache_read_share",
    "over_budget",
    "billed_parts_per_turn",
    "per_conversation",
]


def dataset(tmp_path, sessions: int = 6, turns: int = 40):
    conversation: dict[str, object] = {"speaker_a": "Alice", "speaker_b": "Bob"}
    for s in range(1, sessions + 1):
        conversation[f"session_{s}_date_time"] = f"10:00 am on {s} June, 2023"
        conversation[f"session_{s}"] = [
            {
                "speaker": "Bob" if i % 2 else "Alice",
                "dia_id": f"D{s}:{i + 1}",
                "text": f"Session {s}, line {i}: we talked about gardens, trains and the "
                f"weather in Lisbon, and about the parrot Kiwi{i} once more.",
            }
            for i in range(turns)
        ]
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([{"sample_id": "tiny", "conversation": conversation, "qa": []}]))
    return path


def bench(path, *args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("bench_cost", "--dataset", str(path), "--json", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.parametrize("strategy", ["sliding_window", "hybrid"])
def test_managed_turns_cost_less_than_the_whole_history_and_never_overflow(tmp_path, strategy):
    result = bench(dataset(tmp_path), "--strategy", strategy, "--budget", "3000")
    assert list(result) == FIELDS
    assert result["conversations"] == 1 and result["turns"] == 240
    assert result["over_budget"] == 0
    assert result["mean_prompt_tokens"] <= 3000
    assert result["ratio"] < 0.8
    assert result["cache_read_share"] > 0.5
    parts = result["billed_parts_per_turn"]
    assert sum(parts.values()) == pytest.approx(result["billed_per_turn"], abs=0.2)
    assert parts["cache_read"] > 0 and parts["cache_write"] > 0
    assert result["per_conversation"] == [
        {
            "sample_id": "tiny",
            "turns": 240,
            "billed_per_turn": result["billed_per_turn"],
            "ratio": result["ratio"],
        }
    ]
    with all_tenants():
        assert not Tenant.objects.filter(slug__startswith="cost-replay").exists()


def test_a_full_trim_mark_refills_the_room_and_costs_more(tmp_path):
    path = dataset(tmp_path)
    stepped = bench(path, "--strategy", "sliding_window", "--budget", "3000")
    full = bench(path, "--strategy", "sliding_window", "--budget", "3000", "--trim-percent", "100")
    assert full["mean_prompt_tokens"] > stepped["mean_prompt_tokens"]
    assert full["billed_per_turn"] > stepped["billed_per_turn"]
    assert full["full_history_cached_per_turn"] == stepped["full_history_cached_per_turn"]


def test_bad_arguments_are_clear_errors(tmp_path):
    with pytest.raises(CommandError, match="--budget"):
        bench(dataset(tmp_path), "--budget", "10")
    with pytest.raises(CommandError, match="cannot replay"):
        bench(tmp_path / "missing.json")


def test_server_compaction_is_simulated_and_billed_with_its_own_iteration(tmp_path):
    path = dataset(tmp_path)
    result = bench(
        path, "--strategy", "server_compaction", "--budget", "3000", "--compaction-trigger", "2400"
    )
    assert list(result) == [*FIELDS, "compaction_trigger", "compactions"]
    # A compacting turn's bill is its two iterations', outside the prompt's parts.
    assert sum(result["billed_parts_per_turn"].values()) < result["billed_per_turn"]
    assert result["compaction_trigger"] == 2400 and result["compactions"] >= 3
    assert result["turns"] == 240 and result["over_budget"] == 0
    assert result["billed_per_turn"] < result["full_history_cached_per_turn"]
    # Each compaction's own sampling is billed: the same replay without it costs less.
    window = bench(path, "--strategy", "sliding_window", "--budget", "3000")
    assert result["mean_prompt_tokens"] < window["mean_prompt_tokens"]


def test_server_compaction_never_triggers_below_the_providers_minimum(tmp_path):
    result = bench(dataset(tmp_path, sessions=2), "--strategy", "server_compaction")
    assert result["compaction_trigger"] == 50_000 and result["compactions"] == 0
    with all_tenants():
        assert not Tenant.objects.filter(name__startswith="Cost replay").exists()
