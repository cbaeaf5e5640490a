"""Background jobs of the platform layer: thin adapters over its services."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from chatplatform.jobs import task_options
from chatplatform.locks import claim_run
from chatplatform.model_catalog import CatalogUnavailable, model_profiles_update_from_provider
from chatplatform.spend_limits import spend_warning_send

logger = logging.getLogger(__name__)

CATALOG_TASK = "chatplatform.tasks.update_model_profiles_from_provider"

__all__ = ["spend_warning_send", "update_model_profiles_from_provider"]


@shared_task(
    name=CATALOG_TASK,
    soft_time_limit=60,
    time_limit=90,
    **task_options(),
)
def update_model_profiles_from_provider() -> str:
    """Update the shared Anthropic profiles from the Models API (the admin's action does the
    same). Does nothing while ``MODEL_CATALOG_SYNC_HOURS`` is 0 (a schedule left in the
    database after the setting was turned off stays harmless), and runs at most once per
    half period. Idempotent: a second run finds nothing to change. A provider that cannot be
    read is logged and left for the next period."""
    hours = float(getattr(settings, "MODEL_CATALOG_SYNC_HOURS", 0) or 0)
    if hours <= 0:
        return "off"
    if not claim_run(CATALOG_TASK, max(60, int(hours * 1800))):
        return "already run"
    try:
        result = model_profiles_update_from_provider()
    except CatalogUnavailable as exc:
        logger.warning("model profiles not updated: %s", exc)
        return "unavailable"
    return result.summary()
