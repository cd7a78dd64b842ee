import sys

from warpsmith.cli import main

sys.exit(main())
