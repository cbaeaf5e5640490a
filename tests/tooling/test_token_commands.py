"""The management commands and the Django-free CLI they share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from django.core.management import call_command

EVAL_FIELDS = {
    "counter",
    "reference",
    "messages",
    "mape_percent",
    "per_lang",
    "under_margin_percent",
    "counter_mb_per_s",
    "reference_mb_per_s",
}


def small_corpus(tmp_path, dev_rows):
    path = tmp_path / "corpus.jsonl"
    rows = [row for row in dev_rows if row["lang"] in {"en", "ja", "code"}][:30]
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return path


def test_eval_tokens_json_prints_exactly_the_evaluation(tmp_path, dev_rows, capsys):
    corpus = small_corpus(tmp_path, dev_rows)
    call_command("eval_tokens", "--corpus", str(corpus), "--reference", "o200k_base", "--json")
    result = json.loads(capsys.readouterr().out)
    assert set(result) == EVAL_FIELDS
    assert result["counter"].startswith("estimator-") and result["messages"] == 30


def test_eval_tokens_table_for_an_exact_counter(tmp_path, dev_rows, capsys):
    corpus = small_corpus(tmp_path, dev_rows)
    call_command("eval_tokens", "--corpus", str(corpus), "--counter", "o200k_base")
    out = capsys.readouterr().out
    assert "o200k_base vs o200k_base" in out and "MAPE 0.0%" in out


def test_fit_token_estimator_writes_where_asked(tmp_path, dev_rows, capsys):
    corpus = small_corpus(tmp_path, dev_rows)
    output = tmp_path / "estimator_coefficients.json"
    call_command(
        "fit_token_estimator",
        "--corpus",
        str(corpus),
        "--reference",
        "o200k_base",
        "--output",
        str(output),
        "--no-supplement",
        "--folds",
        "2",
    )
    assert "cross-validated MAPE" in capsys.readouterr().out
    data = json.loads(output.read_text())
    assert data["reference"] == "o200k_base" and data["margin"] >= 1.0


def test_cli_runs_without_django(tmp_path, dev_rows):
    corpus = small_corpus(tmp_path, dev_rows)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tooling.estimator_fitting.cli",
            "eval",
            "--corpus",
            str(corpus),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
        env={k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
    )
    assert set(json.loads(completed.stdout)) == EVAL_FIELDS
