"""``python -m tracekit.workloads --help``"""

import sys

from tracekit.workloads.cli import main

if __name__ == "__main__":
    sys.exit(main())
