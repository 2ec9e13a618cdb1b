import sys

from gnnscale.cli import main

sys.exit(main())
