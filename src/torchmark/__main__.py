"""`python -m torchmark`: the torchmark command line."""

import sys

from torchmark.cli.main import main

sys.exit(main())
