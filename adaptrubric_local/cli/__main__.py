"""`python -m adaptrubric_local.cli`: the same as the `adaptrubric` command."""
import sys

from . import main

sys.exit(main())
