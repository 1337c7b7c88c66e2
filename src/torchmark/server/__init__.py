"""`torchmark serve`: the dashboard over the store, a Starlette application served by
uvicorn (the `serve` extra): HTML pages and their JSON API (api.py), the token check
(auth.py), the changes detected across the store kept current (changes_cache.py)."""
