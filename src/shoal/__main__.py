import sys

from shoal.cli import main

sys.exit(main())
