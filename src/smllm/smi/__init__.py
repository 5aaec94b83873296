"""The State Model Interface (seed 003): structural tokens, an injection-safe token-id
compiler, a streaming parser, and a runtime for stateful models.

Stands alone: nothing here imports the rest of smllm (tests/test_layout.py keeps it so), and
nothing of smllm's core or hook path imports this. Heavy libraries (`tokenizers`,
`transformers`, `torch`, `jsonschema`, `llguidance`) come with the `smllm[smi]` extra and load
only in the modules that use them.

The rooms, in the order they may import each other (a room imports only the ones above it;
tests/test_layout.py `SMI_ROOMS` enforces it):

1. `tokens`: the ten structural tokens and their 32-id block;
2. `stream`: blocks, transmissions, CTRL, the grammar a whole stream must follow;
3. `render`, `convert`, `template`: the canonical text form, other formats, the Jinja template;
4. `vocab/`: the tokenizer wing (every `tokenizers` import, every vocabulary family);
5. `compile`: streams → ids, payloads through a plain encoder;
6. `parser`: ids → events, streaming (it owns the `Decoder` protocol it consumes);
7. `budget`, `caps`: the reasoning budget over ids; capabilities, ACT checks, OBS;
8. `constrain`: a turn's grammar for constrained decoding (llguidance);
9. `backends/`: models behind one protocol (HF, scripted);
10. `runtime`: sessions and turns; 11. `assemble`: one call from an HF model to a runtime.
"""
