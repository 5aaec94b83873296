"""`Record`: typed immutable records, cheaper to define than a `collections.namedtuple`.

`typing.NamedTuple` compiles every field's annotation string when a class is defined, and
`collections.namedtuple` compiles a `__new__` for each class with `eval`: across the ~30 record
classes the hook path defines, either costs a fifth of an interpreter start-up. A Record is a
tuple subclass with C field getters and one shared argument parser; it behaves as a namedtuple
does for what smllm uses (fields by name and position, defaults, keywords, `_replace`, equality,
hashing, pickling, repr). Type checkers see `typing.NamedTuple`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Record"]

if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:
    from _collections import _tuplegetter

    _tuple_new = tuple.__new__
    _MISSING = object()

    def _constructor(name: str, fields: tuple[str, ...], defaults: tuple[Any, ...]) -> Any:
        count = len(fields)
        index = {f: i for i, f in enumerate(fields)}
        first_default = count - len(defaults)

        def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
            if not kwargs and len(args) == count:
                return _tuple_new(cls, args)
            if len(args) > count:
                raise TypeError(f"{name} takes {count} fields, got {len(args)}")
            values = [*args, *[_MISSING] * (count - len(args))]
            for key, value in kwargs.items():
                at = index.get(key)
                if at is None:
                    raise TypeError(f"{name} has no field {key!r}")
                if values[at] is not _MISSING:
                    raise TypeError(f"{name} got field {key!r} twice")
                values[at] = value
            for at in range(count):
                if values[at] is _MISSING:
                    if at < first_default:
                        raise TypeError(f"{name} needs field {fields[at]!r}")
                    values[at] = defaults[at - first_default]
            return _tuple_new(cls, values)

        return __new__

    class _Base(tuple):
        __slots__ = ()
        _fields: tuple[str, ...] = ()

        def __repr__(self) -> str:
            inner = ", ".join(f"{f}={v!r}" for f, v in zip(self._fields, self, strict=True))
            return f"{type(self).__name__}({inner})"

        def __getnewargs__(self) -> tuple[Any, ...]:
            return tuple(self)

        def _replace(self, **changes: Any) -> Any:
            values = [changes.pop(f, v) for f, v in zip(self._fields, self, strict=True)]
            if changes:
                raise TypeError(f"{type(self).__name__} has no field {next(iter(changes))!r}")
            return _tuple_new(type(self), values)

    class _RecordMeta(type):
        def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> type:
            if ns.get("_root_record"):
                return super().__new__(mcls, name, bases, ns)
            fields = tuple(ns.get("__annotations__", {}))
            defaults = tuple(ns[f] for f in fields if f in ns)
            body = {k: v for k, v in ns.items() if k not in fields and k != "__annotations__"}
            body["__slots__"] = ()
            body["_fields"] = fields
            body["__new__"] = _constructor(name, fields, defaults)
            for at, field in enumerate(fields):
                body[field] = _tuplegetter(at, f"Field {at}: {field}")
            return type(name, (_Base,), body)

    class Record(metaclass=_RecordMeta):
        _root_record = True
