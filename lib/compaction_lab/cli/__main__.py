"""``python -m compaction_lab.cli``: the ``compaction-lab`` command without its console script."""

import sys

from compaction_lab.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
