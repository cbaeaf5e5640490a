"""Offline evaluation of context policies on LoCoMo-format conversations: recall of the
evidence (``eval_recall``) and the billed cost of a policy's turns with the provider's prompt
cache (``bench_cost``). Replays whole conversations through the assembly; never on a live
request path."""
