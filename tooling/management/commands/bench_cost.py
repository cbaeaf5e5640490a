"""``manage.py bench_cost``: what a policy's turns cost on the bill, against the whole
history sent with caching, on LoCoMo- or BEAM-format conversations."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tooling.evaluation.cost_replay import STRATEGIES, CostOptions, run_cost


class Command(BaseCommand):
    help = (
        "Replay LoCoMo- or BEAM-format conversations turn by turn in a scratch tenant (rolled back "
        "afterwards), build each turn's Anthropic request as the reply pipeline would and "
        "price it with the provider's prompt-cache rules; compare with sending the whole "
        "history with caching."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True, help="A LoCoMo- or BEAM-format JSON file.")
        parser.add_argument("--strategy", choices=STRATEGIES, default="hybrid")
        parser.add_argument("--budget", type=int, default=4000, help="Prompt budget in tokens.")
        parser.add_argument(
            "--trim-percent",
            type=int,
            default=CostOptions.history_trim_percent,
            help="The policy's history trim mark (percent of the history's room).",
        )
        parser.add_argument(
            "--turn-retrieval-percent",
            type=int,
            default=CostOptions.turn_retrieval_percent,
            help="Hybrid: the policy's share of the retrieval budget a turn's own finds take "
            "while the cached window is kept.",
        )
        parser.add_argument("--cache-ttl", choices=("5m", "1h"), default="5m")
        parser.add_argument(
            "--compaction-trigger",
            type=int,
            default=None,
            help="Server compaction: the input tokens past which the provider compacts "
            "(default: 80%% of the budget, never below the provider's minimum of 50,000; a "
            "lower value simulates a trigger the provider does not accept).",
        )
        parser.add_argument(
            "--no-instructions",
            action="store_true",
            help="Leave the users' standing instructions and preferences out of the prompts.",
        )
        parser.add_argument("--json", action="store_true", help="Print the result as JSON only.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["budget"] < 300:
            raise CommandError("--budget must be at least 300 tokens")
        if not 10 <= options["trim_percent"] <= 100:
            raise CommandError("--trim-percent must be between 10 and 100")
        if not 0 <= options["turn_retrieval_percent"] <= 100:
            raise CommandError("--turn-retrieval-percent must be between 0 and 100")
        cost_options = CostOptions(
            strategy=options["strategy"],
            budget=options["budget"],
            history_trim_percent=options["trim_percent"],
            turn_retrieval_percent=options["turn_retrieval_percent"],
            cache_ttl=options["cache_ttl"],
            compaction_trigger=options["compaction_trigger"],
            instructions=not options["no_instructions"],
        )
        progress = None if options["json"] else (lambda m: self.stderr.write(m))
        try:
            result = run_cost(options["dataset"], cost_options, progress=progress)
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"cannot replay {options['dataset']}: {exc}") from exc
        self.stdout.write(json.dumps(result) if options["json"] else json.dumps(result, indent=2))
