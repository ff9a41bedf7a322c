"""``python -m posfair_llamaindex.cli``: the same as the ``posfair`` command."""

import sys

from posfair_llamaindex.cli import main

sys.exit(main())
