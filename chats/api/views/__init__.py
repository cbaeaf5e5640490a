"""API views: thin adapters over the services and selectors."""
