"""The `torchmark` command line."""
