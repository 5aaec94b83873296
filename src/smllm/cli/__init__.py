"""The command line: parse the arguments, make one library call, print the result.

main.py is the entry point (exit codes, `error: …`, `--json` exactly once) and dispatches to
one module per command family; parser.py builds argparse only when the fast paths of the hook
commands don't apply.
"""
