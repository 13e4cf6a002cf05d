"""``python -m fuzz``: the same as the ``dlrm-fuzz`` command."""

import sys

from fuzz.cli import main

if __name__ == "__main__":
    sys.exit(main())
