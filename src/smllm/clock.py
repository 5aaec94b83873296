"""UTC time for the hook path, through CPython's C module `_datetime` directly.

`import datetime` runs datetime.py, which imports `_datetime` and more: about 2 ms of a hook
call that only needs the C classes. The classes are the same objects either way; where
`_datetime` is missing (another Python), they come from `datetime`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from datetime import datetime, timezone
else:
    try:
        from _datetime import datetime, timezone
    except ImportError:  # pragma: no cover - a Python without the C module
        from datetime import datetime, timezone

__all__ = ["UTC", "datetime", "utc_now"]

UTC = timezone.utc  # noqa: UP017 - datetime.UTC is in datetime.py, not in _datetime


def utc_now() -> datetime:
    return datetime.now(UTC)
