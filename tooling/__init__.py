"""Tooling: benchmarks, offline evaluations and the token estimator's fitting.

Nothing here runs on a request path, and the runtime packages (``chatplatform``, ``chats``,
``summaries``, ``memory``) never import it (an import contract in ``pyproject.toml`` says so).
It is a Django app only so that its management commands are found.

- ``tooling.benchmarks``: scratch data for the benchmark commands (``bench_assembly``,
  ``bench_chat``) and the cost of retrieval by meaning (``dense_cost.py``).
- ``tooling.evaluation``: LoCoMo recall (``eval_recall``), the cost replay (``bench_cost``), the
  provider compaction's replay and the offline recall harness (``locomo_offline.py``).
- ``tooling.estimator_fitting``: the corpus, the fit and the evaluation of the local token
  estimator (``fit_token_estimator``, ``eval_tokens``); the estimator itself and its fitted
  coefficients stay in ``chatplatform.core.tokens``.
"""
