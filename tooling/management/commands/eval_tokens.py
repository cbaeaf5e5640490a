"""``manage.py eval_tokens``: accuracy and speed of a token counter against a reference."""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from chatplatform.core.tokens import CounterNotAvailable
from tooling.estimator_fitting.cli import add_eval_arguments, run_eval


class Command(BaseCommand):
    help = (
        "Compare a counter (default: the local estimator) with an exact reference on a JSONL "
        "corpus: MAPE overall and per language, bias, texts under-counted beyond the margin, "
        "and throughput of both. --json prints exactly the evaluation JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_eval_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["corpus"].is_file():
            raise CommandError(f"no corpus file {options['corpus']}")
        try:
            run_eval(Namespace(**options), self.stdout)
        except (CounterNotAvailable, ValueError) as exc:
            raise CommandError(str(exc)) from exc
