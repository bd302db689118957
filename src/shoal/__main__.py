import sys

from shoal.cli import entry

sys.exit(entry())
