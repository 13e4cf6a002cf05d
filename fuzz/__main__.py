"""``python -m fuzz``: the same as the ``dlrm-fuzz`` command."""

import sys

from fuzz.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
