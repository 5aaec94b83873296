"""The reliability campaign of issue 11 (bench/reliability_campaign/, whose docstring says what
it checks): `python bench/campaign.py load|faults|fuzz|twohosts|all [--quick]`.

An entry script rather than the package itself, because running it puts bench/ on sys.path
(so the package imports), and its worker processes are started as `campaign.py _worker SPEC`.
"""

from __future__ import annotations

import sys

from reliability_campaign import main

if __name__ == "__main__":
    sys.exit(main())
