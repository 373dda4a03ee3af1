"""``python -m braindecode_pars.cli`` (as torchrun starts it): the command line."""

import sys

from braindecode_pars.cli import main

sys.exit(main())
