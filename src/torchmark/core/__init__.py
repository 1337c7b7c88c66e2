"""The bottom layer of torchmark: it imports nothing else of torchmark. Errors, bounds on
untrusted input, the operator policy, locks on results files."""
