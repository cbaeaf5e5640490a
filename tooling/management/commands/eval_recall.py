"""``manage.py eval_recall``: evidence recall of the assembled context on LoCoMo- or
BEAM-format data."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tooling.evaluation.recall import STRATEGIES, EvalOptions, run_eval


class Command(BaseCommand):
    help = (
        "Load LoCoMo- or BEAM-format conversations into a scratch tenant (rolled back "
        "afterwards), ask every scored question (LoCoMo: categories 1-4; BEAM: every ability) "
        "as the new message, and report how often the assembled prompt holds all / any of its "
        "evidence turns."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True, help="A LoCoMo- or BEAM-format JSON file.")
        parser.add_argument(
            "--budget", type=int, default=4000, help="Prompt budget in tokens (whole prompt)."
        )
        parser.add_argument("--strategy", choices=STRATEGIES, default="hybrid")
        parser.add_argument(
            "--recent", type=int, default=EvalOptions.recent, help="Hybrid: recent messages kept."
        )
        parser.add_argument(
            "--no-dense",
            action="store_true",
            help="Hybrid: full-text retrieval only (by default it also retrieves by meaning "
            "when the embeddings requirements are installed).",
        )
        parser.add_argument("--json", action="store_true", help="Print the result as JSON only.")
        parser.add_argument("--dump", help="Write one JSON line per question with its prompt.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["budget"] < 300:
            raise CommandError("--budget must be at least 300 tokens")
        eval_options = EvalOptions(
            budget=options["budget"],
            strategy=options["strategy"],
            recent=options["recent"],
            dense=not options["no_dense"],
        )
        progress = None if options["json"] else (lambda m: self.stderr.write(m))
        try:
            if options["dump"]:
                with open(options["dump"], "w", encoding="utf-8") as dump:
                    result = run_eval(
                        options["dataset"], eval_options, dump=dump, progress=progress
                    )
            else:
                result = run_eval(options["dataset"], eval_options, progress=progress)
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"cannot evaluate {options['dataset']}: {exc}") from exc
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(json.dumps(result, indent=2))
