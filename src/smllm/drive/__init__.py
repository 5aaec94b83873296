"""`smllm run`: a model drives itself through a machine over SMI.

The one room that imports both `smllm.smi` and the library API: the machine's events become
the model's capabilities, an event ACT fires through `App.fire` as the agent, its reply block
comes back as the ACT's OBS, and a transmission without ACT is a stop the engine decides, as
for any harness. The core install, the hooks and the MCP server never import it.

- `bytevocab`, `scripted`: the byte vocabulary and the scripted model (`--backend scripted:F`);
- `backends`: the runtime over a scripted or a Hugging Face model;
- `offers`: the offered events as CAPS tools; `work`: the work tools (read, write, shell);
- `driver`: the runtime's action runner and policy; `loop`: the turns; `start`: where a run
  starts; `transcript`, `report`: what a run saves and shows.
"""

from __future__ import annotations

from .main import RunOptions, run

__all__ = ["RunOptions", "run"]
