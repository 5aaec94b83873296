"""Client integrations: the hooks each agent client runs, and `smllm harness install|status`
(cli-and-harnesses.md §5, §6)."""
