"""Writes of the summaries app. Tasks, the reply pipeline and the admin call these."""

from .compaction import ProviderCompaction, compaction_store
from .continuation import (
    continuation_summary_ensure,
    needs_continuation_summary,
)
from .periodic import DueBatch, PeriodicResult, periodic_due_batch, periodic_summary_refresh
from .rolling import (
    RollingState,
    merge_rolling,
    rolling_state,
    summary_refresh,
)
from .storage import Result

__all__ = [
    "DueBatch",
    "PeriodicResult",
    "ProviderCompaction",
    "Result",
    "RollingState",
    "compaction_store",
    "continuation_summary_ensure",
    "merge_rolling",
    "needs_continuation_summary",
    "periodic_due_batch",
    "periodic_summary_refresh",
    "rolling_state",
    "summary_refresh",
]
