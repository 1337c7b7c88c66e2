"""Root cause: bisection of a regression over a git history, and explanations of a
change (functions, kernels, ops, Python code)."""
