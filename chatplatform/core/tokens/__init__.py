"""Token counting. Pure: nothing here imports Django.

``get_counter(name)`` returns a :class:`TokenCounter` by its stable name (the name stored
beside every count in the database).
"""

from .base import CounterNotAvailable, TokenCounter
from .registry import available_counters, get_counter

__all__ = ("CounterNotAvailable", "TokenCounter", "available_counters", "get_counter")
