import sys

from mysqlio.cli import main

sys.exit(main())
