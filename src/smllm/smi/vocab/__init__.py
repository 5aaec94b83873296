"""The tokenizer wing: every vocabulary family SMI runs on and every `tokenizers` import.

- `backend`: the `tokenizers.Tokenizer` behind a tokenizer, and the Metaspace "first" → "never"
  rewrite every private copy needs;
- `added`: the rule that splits added tokens into markup and content, and the one check that
  untrusted text never yields a forbidden id;
- `install`: put the SMI block into a tokenizer (and a model's embeddings), or find it;
- `encode`: untrusted payload text → ids that can never be structure (`PlainEncoder`);
- `trie`: the RWKV world vocabulary's linear trie encoder;
- `decode`, `metaspace`: ids → text, incrementally, for each decoder family;
- `load`: a vocabulary from what a person names on the command line;
- `audit`: which added tokens untrusted text can reach, and through which calls.

The rest of `smllm.smi` sees a vocabulary only through the `Encoder` and `Decoder` protocols.
"""
