"""`python -m torchmark`: the torchmark command line."""

import sys

from torchmark.cli.entry import main

sys.exit(main())
