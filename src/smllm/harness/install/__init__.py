"""`smllm harness install|status` (cli-and-harnesses.md §6): the parts each client gets, worked
out whole before any file is written."""
