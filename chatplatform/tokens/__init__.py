"""Token counting. Pure: nothing here imports Django.

``get_counter(name)`` returns a :class:`TokenCounter` by its stable name (the name stored
beside every count in the database).
"""

from .base import TokenCounter, CounterNotAvailable
from .registry import get_counter, available_counters

__all__ = ("TokenCounter", "CounterNotAvailable", "get_counter", "available_counters")
