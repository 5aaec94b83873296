"""`Record`: typed immutable records that cost a plain `collections.namedtuple` at import.

`typing.NamedTuple` compiles every field's annotation string when a class is defined (with
postponed annotations each becomes a ForwardRef), which costs a whole interpreter start-up
across the ~35 record classes the hook path defines. Type checkers see `typing.NamedTuple`;
at run time the class body's annotations are read as names only, never evaluated.
"""

from __future__ import annotations

import collections

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Record"]

if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:

    class _RecordMeta(type):
        def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> type:
            if ns.get("_root_record"):
                return super().__new__(mcls, name, bases, ns)
            fields = list(ns.get("__annotations__", {}))
            defaults = [ns[f] for f in fields if f in ns]
            base = collections.namedtuple(
                name, fields, defaults=defaults or None, module=ns.get("__module__")
            )
            body = {k: v for k, v in ns.items() if k not in fields and k != "__annotations__"}
            body["__slots__"] = ()
            return type(name, (base,), body)

    class Record(metaclass=_RecordMeta):
        _root_record = True
