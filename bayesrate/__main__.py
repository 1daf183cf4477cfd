import sys

from bayesrate.cli import main

sys.exit(main())
