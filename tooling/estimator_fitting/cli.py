"""Command-line core of ``fit_token_estimator`` and ``eval_tokens`` (usable without Django).

    python -m tooling.estimator_fitting.cli fit --corpus FILE --reference o200k_base [--output PATH]
    python -m tooling.estimator_fitting.cli eval --corpus FILE --reference o200k_base \
        [--counter NAME] [--json]

The Django management commands add the same arguments and call :func:`run_fit` and
:func:`run_eval`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Protocol

from chatplatform.core.tokens.base import TokenCounter
from chatplatform.core.tokens.registry import get_counter


class Writer(Protocol):
    """Where reports go: ``sys.stdout`` or a management command's ``self.stdout``."""

    def write(self, text: str, /) -> Any: ...


def add_fit_arguments(parser: argparse.ArgumentParser) -> None:
    from chatplatform.core.tokens.estimator import DEFAULT_COEFFICIENTS_PATH

    parser.add_argument("--corpus", required=True, type=Path, help="JSONL rows {lang, text, ...}")
    parser.add_argument("--reference", default="o200k_base", help="exact counter to fit against")
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_COEFFICIENTS_PATH,
        help="coefficients JSON to write; the lexicon is written beside it",
    )
    parser.add_argument(
        "--estimator-version",
        dest="estimator_version",
        default="v1",
        help="coefficient version, the counter name's suffix (estimator-VERSION)",
    )
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds")
    parser.add_argument(
        "--no-supplement",
        action="store_true",
        help="fit on the corpus only, without Django's UI strings",
    )


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, type=Path, help="JSONL rows {lang, text, ...}")
    parser.add_argument("--reference", default="o200k_base", help="exact counter to compare with")
    parser.add_argument(
        "--counter",
        default="estimator",
        help="counter name, or a path to an estimator coefficients JSON (default: the estimator)",
    )
    parser.add_argument("--json", action="store_true", help="print the evaluation as JSON")


def run_fit(args: argparse.Namespace, out: Writer) -> dict[str, Any]:
    from .corpus import read_corpus
    from .fitting import fit_estimator, write_estimator

    reference = get_counter(args.reference)
    result = fit_estimator(
        read_corpus(args.corpus),
        reference,
        version=args.estimator_version,
        supplement=not args.no_supplement,
        folds=args.folds,
    )
    path = write_estimator(
        result, args.output, version=args.estimator_version, reference=reference.name
    )
    cv = result.report["cross_validation"]
    out.write(f"wrote {path} (estimator-{args.estimator_version}, reference {reference.name})\n")
    out.write(f"samples: {result.report['samples']}\n")
    out.write(
        f"cross-validated MAPE: corpus {cv['corpus_mape_percent']}%, "
        f"worst language {cv['corpus_worst_language_mape_percent']}%, "
        f"supplement {cv['supplement_mape_percent']}%, synthetic {cv['synthetic_mape_percent']}%\n"
    )
    for lang, figures in cv["per_lang"].items():
        mape, bias = figures["mape_percent"], figures["bias_percent"]
        out.write(f"  {lang:8} MAPE {mape:6.2f}%  bias {bias:+6.2f}%\n")
    out.write(f"margin (held-out 99.5% quantile of reference/estimate): {result.margin}\n")
    return result.report


def load_counter(name: str) -> TokenCounter:
    """A registered counter, or an estimator loaded from a coefficients JSON path."""
    if name.endswith(".json"):
        from chatplatform.core.tokens.estimator import EstimatorCounter

        return EstimatorCounter.from_file(name)
    return get_counter(name)


def run_eval(args: argparse.Namespace, out: Writer) -> dict[str, Any]:
    from .corpus import read_corpus
    from .evaluation import evaluate

    counter = load_counter(args.counter)
    reference = get_counter(args.reference)
    margin = 1.0 if counter.exact else float(getattr(counter, "margin", 1.0))
    result = evaluate(read_corpus(args.corpus), counter, reference, margin)
    if args.json:
        out.write(json.dumps(result, ensure_ascii=False) + "\n")
    else:
        out.write(format_evaluation(result, margin))
    return result


def format_evaluation(result: dict[str, Any], margin: float) -> str:
    lines = [
        f"{result['counter']} vs {result['reference']} on {result['messages']} messages",
        f"MAPE {result['mape_percent']}%   under-counted beyond margin {margin}: "
        f"{result['under_margin_percent']}%",
        f"speed {result['counter_mb_per_s']} MB/s vs reference {result['reference_mb_per_s']} MB/s",
        f"{'lang':8} {'messages':>8} {'MAPE %':>8} {'bias %':>8}",
    ]
    for lang, figures in result["per_lang"].items():
        messages, mape, bias = figures["messages"], figures["mape_percent"], figures["bias_percent"]
        lines.append(f"{lang:8} {messages:8d} {mape:8.2f} {bias:+8.2f}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tooling.estimator_fitting.cli")
    commands = parser.add_subparsers(dest="command", required=True)
    add_fit_arguments(commands.add_parser("fit", help="fit the estimator's coefficients"))
    add_eval_arguments(commands.add_parser("eval", help="evaluate a counter against a reference"))
    args = parser.parse_args(argv)
    (run_fit if args.command == "fit" else run_eval)(args, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
