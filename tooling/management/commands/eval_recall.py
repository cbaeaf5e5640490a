"""``manage.py eval_recall``: evidence recall of the assembled context on LoCoMo- or
BEAM-format data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tooling.evaluation.recall import STRATEGIES, EvalOptions, run_eval
from tooling.evaluation.vector_cache import cached_vectors, default_path


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
        parser.add_argument(
            "--no-instructions",
            action="store_true",
            help="Leave the users' standing instructions and preferences out (by default they "
            "are kept from the loaded messages, as on intake, and get their prompt section).",
        )
        parser.add_argument(
            "--reply-excerpt-tokens",
            type=int,
            default=EvalOptions.reply_excerpt_tokens,
            help="Hybrid: a reply recalled only for the message it answers goes as its first "
            "this many tokens (0: whole; default: %(default)s, the policy field's default).",
        )
        parser.add_argument(
            "--warm",
            action="store_true",
            help="Ask each question while the cache is warm: the window a turn a minute "
            "earlier started stands, so the question's finds are the per-turn ones.",
        )
        parser.add_argument(
            "--turn-retrieval-percent",
            type=int,
            default=None,
            help="Hybrid: the policy's turn retrieval share (default: the field's default).",
        )
        parser.add_argument(
            "--summaries",
            action="store_true",
            help="Write each conversation's rolling summaries first (the background job's "
            "service, offline summarizer) and give them a share of the budget (hybrid: a "
            "sixteenth, from retrieval's). BEAM results always report span_covered_percent.",
        )
        parser.add_argument("--json", action="store_true", help="Print the result as JSON only.")
        parser.add_argument("--dump", help="Write one JSON line per question with its prompt.")
        parser.add_argument(
            "--vector-cache",
            default=str(default_path()),
            help="A file of vectors earlier runs computed, read and added to (default: "
            "%(default)s); embedding dominates a long conversation's run.",
        )
        parser.add_argument(
            "--no-vector-cache", action="store_true", help="Embed every message anew."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["budget"] < 300:
            raise CommandError("--budget must be at least 300 tokens")
        eval_options = EvalOptions(
            budget=options["budget"],
            strategy=options["strategy"],
            recent=options["recent"],
            dense=not options["no_dense"],
            instructions=not options["no_instructions"],
            reply_excerpt_tokens=options["reply_excerpt_tokens"],
            warm=options["warm"],
            turn_retrieval_percent=options["turn_retrieval_percent"],
            summaries=options["summaries"],
        )
        progress = None if options["json"] else (lambda m: self.stderr.write(m))
        cache = None if options["no_vector_cache"] else Path(options["vector_cache"])
        try:
            with cached_vectors(cache):
                result = self._run(options, eval_options, progress)
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"cannot evaluate {options['dataset']}: {exc}") from exc
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(json.dumps(result, indent=2))

    def _run(
        self, options: dict[str, Any], eval_options: EvalOptions, progress: Any
    ) -> dict[str, Any]:
        if options["dump"]:
            with open(options["dump"], "w", encoding="utf-8") as dump:
                return run_eval(options["dataset"], eval_options, dump=dump, progress=progress)
        return run_eval(options["dataset"], eval_options, progress=progress)
