"""`python -m refine_ros.bench`: the logger benchmark's publisher and runner (see the package)."""

import sys

from refine_ros.bench import main

sys.exit(main())
