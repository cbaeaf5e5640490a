from tests.summaries.conftest import eager_celery, isolated_locks

__all__ = ["eager_celery", "isolated_locks"]
