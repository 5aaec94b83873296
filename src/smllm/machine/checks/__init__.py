"""The rules beyond shape: derived warnings and infos on a loaded machine (lint.py) and the
checks that need more than the file: prompt files and command folders (deep.py)."""
