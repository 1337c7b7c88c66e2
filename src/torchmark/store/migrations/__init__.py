"""Alembic migrations of the store's schema (run by torchmark.store, never by hand)."""
