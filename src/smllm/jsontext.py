"""Compact JSON for the hook path, through CPython's C codec (`_json`) directly.

`import json` also imports `re` and `enum`: about 7 ms of a 40 ms hook call, for a codec that
lives in `_json` anyway. `dumps` gives exactly the text of
`json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)` (a non-finite
number is a ValueError: `Infinity` is not JSON, and nothing smllm prints or stores may hold it)
and `loads` the values of `json.loads(text)`; where `_json` is missing (another Python), both
are the `json` module's.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["STRICT_JSON", "dumps", "loads", "loads_keeping_repeats", "repeat_inside"]

_WHITESPACE = " \t\n\r"  # JSON's whitespace (RFC 8259 §2), and nothing else


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    """A JSON number as a float; one past a double's range (`1e400`) is refused, where
    Python would read it as infinity (which JSON can't hold)."""
    value = float(text)
    if value - value != 0:  # inf - inf is nan, and nan != 0
        raise ValueError(f"{text} is out of range for a JSON number")
    return value


#: json.loads keyword arguments that read only what JSON can hold (no NaN, no Infinity, no
#: number that overflows to infinity): every surface that reads params text uses them
STRICT_JSON: dict[str, Any] = {"parse_constant": _no_constant, "parse_float": _finite}


def _not_serializable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _constant(name: str) -> float:
    return float(name)  # NaN, Infinity and -Infinity, as json.loads reads them


class _Context:
    """The attributes `_json.make_scanner` reads from a `json.JSONDecoder`."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_constant)


try:
    from _json import encode_basestring, make_encoder, make_scanner
except ImportError:  # pragma: no cover - a Python without the C accelerator
    import json as _json_module

    def dumps(value: Any, separators: tuple[str, str] = (",", ":")) -> str:
        return _json_module.dumps(value, ensure_ascii=False, separators=separators, allow_nan=False)

    def loads(text: str) -> Any:
        return _json_module.loads(text)

else:
    _scan = make_scanner(_Context())  # type: ignore[arg-type]  # reads its attributes
    _encoders: dict[tuple[str, str], Any] = {}

    def dumps(value: Any, separators: tuple[str, str] = (",", ":")) -> str:
        """`json.dumps(value, ensure_ascii=False, separators=separators, allow_nan=False)`."""
        encode = _encoders.get(separators)
        if encode is None:
            item, key = separators
            # markers None: no cycle check (smllm's values are trees), so nothing is kept
            # between calls
            encode = make_encoder(
                None, _not_serializable, encode_basestring, None, key, item, False, False, False
            )
            _encoders[separators] = encode
        if isinstance(value, str):  # json.dumps takes the same shortcut for a bare string
            return str(encode_basestring(value))
        return "".join(encode(value, 0))

    def loads(text: str) -> Any:
        """`json.loads(text)`: ValueError (json.JSONDecodeError) for text that isn't JSON."""
        start = len(text) - len(text.lstrip(_WHITESPACE))
        try:
            value, end = _scan(text, start)
        except StopIteration as stop:
            from json import JSONDecodeError

            raise JSONDecodeError("Expecting value", text, stop.value) from None
        except SystemError:
            # the scanner builds its error from json.decoder, but only finds that module if
            # it is already imported: let json itself read the broken text and say why
            import json

            return json.loads(text)
        if end != len(text):
            tail = text[end:]
            end += len(tail) - len(tail.lstrip(_WHITESPACE))
            if end != len(text):
                from json import JSONDecodeError

                raise JSONDecodeError("Extra data", text, end)
        return value


def loads_keeping_repeats(text: str) -> tuple[Any, dict[int, list[tuple[str, Any]]]]:
    """Params text read strictly (`STRICT_JSON`), as plain values, and the (name, value) pairs
    of every object that repeated a name, by the object's `id` (they all live as long as the
    value): a param given twice is the engine's to refuse, not the parser's to drop. Raises
    ValueError or RecursionError."""
    import json

    repeated: dict[int, list[tuple[str, Any]]] = {}

    def keep(items: list[tuple[str, Any]]) -> dict[str, Any]:
        made = dict(items)
        if len(made) != len(items):
            repeated[id(made)] = items
        return made

    return json.loads(text, object_pairs_hook=keep, **STRICT_JSON), repeated


def repeat_inside(
    params: dict[str, Any], repeated: dict[int, list[tuple[str, Any]]]
) -> tuple[str, str] | None:
    """(param, key) of the first object inside a param's value that repeated a key, or None:
    a param's JSON value with a key given twice is refused, as `--param NAME=JSON` refuses it
    (which object key was meant is a guess)."""
    if not repeated:
        return None
    for name, value in params.items():
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                pairs = repeated.get(id(item))
                if pairs is not None:
                    seen: set[str] = set()
                    for key, _ in pairs:
                        if key in seen:
                            return name, key
                        seen.add(key)
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
    return None
