"""Which token counter a model's counts are made with (the Django side of ``tokens``)."""

from __future__ import annotations

from chatplatform.core.tokens import TokenCounter, get_counter
from chatplatform.core.tokens.bpe import PUBLIC_ENCODINGS
from chatplatform.models import ModelProfile


def storage_counter_for(profile: ModelProfile | None) -> TokenCounter:
    """The counter whose counts are stored on messages for ``profile``'s model.

    A public BPE when the model uses one (exact); otherwise the local estimator, whose
    counts the calibrated margin and the online calibration turn into safe upper bounds.
    Calling a counting API once per stored message would cost a round trip per message,
    so API-exact counting happens at assembly, only near the budget.
    """
    if profile is not None and profile.tokenizer in PUBLIC_ENCODINGS:
        return get_counter(profile.tokenizer)
    return get_counter("estimator")
