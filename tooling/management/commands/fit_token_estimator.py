"""``manage.py fit_token_estimator``: fit the local token estimator against a reference."""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from chatplatform.core.tokens import CounterNotAvailable
from tooling.estimator_fitting.cli import add_fit_arguments, run_fit


class Command(BaseCommand):
    help = (
        "Fit the estimator's coefficients on a JSONL corpus ({lang, text} rows) against an "
        "exact reference counter, cross-validate, choose the safety margin and write the "
        "coefficients JSON (by default the packaged one) with its lexicon beside it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_fit_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["corpus"].is_file():
            raise CommandError(f"no corpus file {options['corpus']}")
        try:
            run_fit(Namespace(**options), self.stdout)
        except (CounterNotAvailable, ValueError) as exc:
            raise CommandError(str(exc)) from exc
