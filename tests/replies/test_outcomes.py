"""The sentence a person reads about a failed reply says what happened: a provider that
answered with a 5xx was reached and failed; only a connection failure or a timeout is
"could not be reached"."""

from __future__ import annotations

import pytest

from chatplatform.core.llm.errors import (
    ProviderError,
    ProviderTimedOut,
    ProviderUnavailable,
    ProviderUnreachable,
    StreamInterrupted,
)
from chats.replies.outcomes import human_error


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            ProviderUnavailable("boom", status_code=500),
            "The model provider had an internal error (HTTP 500). Send the message again",
        ),
        (
            ProviderUnavailable("gateway", status_code=502),
            "The model provider answered with a server error (HTTP 502 Bad Gateway).",
        ),
        (
            ProviderUnavailable("odd", status_code=599),
            "The model provider answered with a server error (HTTP 599).",
        ),
        (
            ProviderUnavailable("stream ended before message_stop"),
            "The model provider had an error while answering.",
        ),
        (ProviderUnreachable("refused"), "The model provider could not be reached. Send"),
        (ProviderTimedOut("slow"), "could not be reached in time (the request timed out)"),
    ],
)
def test_each_failure_is_told_as_what_happened(error: ProviderError, expected: str) -> None:
    assert expected in human_error(error, partial=False)


@pytest.mark.parametrize(
    "error",
    [ProviderUnavailable("x", status_code=500), ProviderUnavailable("x", status_code=503)],
)
def test_a_provider_that_answered_is_never_called_unreachable(error: ProviderError) -> None:
    assert "could not be reached" not in human_error(error, partial=False)


def test_a_partial_reply_says_its_text_is_kept() -> None:
    error = StreamInterrupted("cut", cause="connection_error", partial_text="Hel")

    assert human_error(error, partial=True) == (
        "The model's reply was interrupted. The text received so far is kept."
    )
