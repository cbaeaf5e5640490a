"""Request and response shapes of the API (they double as the OpenAPI schema)."""
