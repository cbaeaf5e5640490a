"""Stored token counts: which counter makes them, and the recount and backfill that keep them.

Every message stores its token count and the name of the counter that made it. How the
parts fit:

- ``chatplatform.counting.storage_counter_for`` (platform layer, shared with the summaries
  app) picks the counter whose counts are stored for a model: its public BPE, else the
  local estimator. ``message_create`` and ``message_finish`` count new messages with it.
- The assembly counts on the fly what has no count or another counter's count, and reports
  those items; ``recount`` queues them after the turn commits, at most once per
  conversation per few minutes, for the ``recount_message_tokens`` job.
- ``backfill`` counts legacy messages and redoes counts of another counter, for a tenant
  or for the messages a turn queued; ``targets`` says which counter each conversation
  needs, ``batches`` walks the messages by id and ``updates`` writes each batch safely
  against concurrent writers. ``summaries.models.TokenBackfillState`` (a model of the
  summaries app, where it was first created) remembers how far a tenant was verified.
- ``tasks`` holds the two jobs (the periodic ``backfill_token_counts`` and the prompt
  ``recount_message_tokens``); the ``backfill_token_counts`` and ``bench_backfill``
  management commands run the same backfill by hand.
"""
