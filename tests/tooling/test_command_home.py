"""The benchmark, evaluation and fitting commands keep their names and are the tooling app's;
the runtime's own commands stay with the runtime."""

from __future__ import annotations

from django.core.management import get_commands

TOOLING_COMMANDS = {
    "bench_assembly",
    "bench_backfill",
    "bench_chat",
    "bench_compat",
    "bench_cost",
    "bench_quota",
    "eval_recall",
    "eval_tokens",
    "fit_token_estimator",
}


def test_the_tooling_commands_are_the_tooling_apps():
    commands = get_commands()
    assert {name: commands.get(name) for name in TOOLING_COMMANDS} == dict.fromkeys(
        TOOLING_COMMANDS, "tooling"
    )


def test_the_tooling_app_has_no_other_command_and_the_runtime_keeps_its_own():
    commands = get_commands()
    assert sorted(name for name, app in commands.items() if app == "tooling") == sorted(
        TOOLING_COMMANDS
    )
    assert commands["backfill_token_counts"] == "chats"
