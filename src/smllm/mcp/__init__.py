"""The MCP server `smllm mcp` (cli-and-harnesses.md §4)."""
