"""Capabilities, actions and observations: what the runtime checks before any ACT runs.

The seed: CAPS says what the model *can* do, the runtime enforces it, an undeclared capability
is never granted, and errors are observations. So every ACT goes through `parse_act` (its
payload, read strictly) and `check_act` (in this order: well-formed, an id present and unique
in the session, a declared name, arguments valid against the tool's JSON Schema, then the
runtime's `Policy`, which sees the session: `SessionInfo`); a refused ACT is answered with an
OBS error and never reaches a runner. The `Ledger` holds the session's ACT ids so that each
gets exactly one OBS, and `answer` is the one place an OBS's text is made from an outcome.

`check.py` reads and checks one ACT; `answer.py` answers it.

Choices where the seed is silent:
- A JSON object payload is a structured ACT and must be exactly `{"id", "type", "name",
  "arguments"}` (`arguments` may be left out: `{}`; an OpenAI-style string is parsed as JSON);
  unknown keys, repeated keys, NaN/Infinity, nesting deeper than `MAX_DEPTH`, lone surrogates
  and payloads over `MAX_ACT_CHARS` are refused as `malformed_action`. A payload whose first
  non-blank character is `{` is always read as such an object, so a truncated object is
  refused, never run as something else.
- Any other payload (token runs, non-JSON text, a JSON array or number: a trajectory) is a raw
  embodied action, `Action(type="raw", name=None)`, kept as it is with an id the runtime gives
  (`raw-1`, `raw-2`, … per session, skipping ids the model used). SMI doesn't prescribe action
  encodings, so a raw action names no capability: it is allowed when CAPS declares at least
  one action, and the runner/policy decide the rest.
- `type: "action"` names one of CAPS `actions` (names only: no schema, any arguments);
  `type: "tool"` names a tool and its arguments must be an object valid against `parameters`.
  A tool's `parameters` may be left out (any object then).
- An ACT whose own id can't be used (missing, not a string, already used) still gets exactly
  one OBS: the ledger gives it a `raw-N` id for that answer.
- A policy that raises or returns something other than a `Refusal` or None denies (fails
  closed).
"""

from .answer import Admission, Ledger, Outcome, answer, answer_acts, obs_block, obs_for
from .check import (
    MAX_ACT_CHARS,
    MAX_DEPTH,
    REFUSAL_TYPES,
    Action,
    Capabilities,
    Policy,
    Refusal,
    SessionInfo,
    Tool,
    check_act,
    parse_act,
)

__all__ = [
    "MAX_ACT_CHARS",
    "MAX_DEPTH",
    "REFUSAL_TYPES",
    "Action",
    "Admission",
    "Capabilities",
    "Ledger",
    "Outcome",
    "Policy",
    "Refusal",
    "SessionInfo",
    "Tool",
    "answer",
    "answer_acts",
    "check_act",
    "obs_block",
    "obs_for",
    "parse_act",
]
