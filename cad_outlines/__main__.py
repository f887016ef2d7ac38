"""``python -m cad_outlines``: the ``cad-outlines`` command line."""

import sys

from cad_outlines.cli import main

sys.exit(main())
