"""The pytest plugin (entry point `pytest11: torchmark`): benchmarks kept beside the tests,
measured by torchmark's Timer, recorded in the store, gated against a baseline. Inert
until a test uses the `torchmark` fixture or marker; see docs/pytest.md."""
