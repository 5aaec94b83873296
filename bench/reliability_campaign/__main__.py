"""`python -m reliability_campaign …` with bench/ on sys.path (cd bench, or PYTHONPATH=bench):
the same as `python bench/campaign.py …`."""

import sys

from . import main

sys.exit(main())
