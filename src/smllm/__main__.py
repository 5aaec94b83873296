"""`python -m smllm`: the same as the `smllm` command."""

import sys

from smllm.cli.main import main

sys.exit(main())
