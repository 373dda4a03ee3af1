"""``python -m braindecode_pars.cli`` (as torchrun starts it): the command line."""

import sys

from . import main

sys.exit(main())
