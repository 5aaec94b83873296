"""The State Model Interface (seed 003): structural tokens, an injection-safe token-id
compiler, a streaming parser, and a runtime for stateful models.

Stands alone: nothing here imports the rest of smllm (tests/test_layout.py keeps it so), and
nothing of smllm's core or hook path imports this. Heavy libraries (`tokenizers`,
`transformers`, `torch`, `jsonschema`) come with the `smllm[smi]` extra and load only in the
modules that use them.
"""
