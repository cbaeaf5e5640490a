from __future__ import annotations

import pytest

from chats.replies import runner
from chats.replies.coordination import reset_coordination


@pytest.fixture(autouse=True)
def _fresh_coordination():
    reset_coordination()
    runner.set_provider_factory(None)
    yield
    runner.set_provider_factory(None)
    reset_coordination()


@pytest.fixture(scope="session", autouse=True)
def _stop_api_loop(django_db_setup, django_db_blocker):
    """Stop the API's background event loop (its threads hold database connections) before
    the test database is dropped."""
    yield
    from chats.api.bridge import stop_background_loop

    with django_db_blocker.unblock():
        stop_background_loop()
