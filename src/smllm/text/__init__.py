"""The agent's text: the exact `<smllm>` block of a reply (block.py, agent-text.md) and the
listings of the CLI (listing.py), rendered from values, every outside string on one line.
"""
