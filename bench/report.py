"""What the benchmarks share: timing statistics and the lines of their reports."""

from __future__ import annotations

import math
import statistics
from typing import NamedTuple

__all__ = ["Stats", "heading", "verdict"]


class Stats(NamedTuple):
    n: int
    median: float
    p90: float
    low: float
    mean: float

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        s = sorted(values)
        p90 = s[max(0, math.ceil(0.9 * len(s)) - 1)]  # nearest rank
        return cls(len(s), statistics.median(s), p90, s[0], statistics.fmean(s))

    def line(self, unit: str = "ms", scale: float = 1.0, digits: int = 3) -> str:
        """`median … p90 … min … (n=…)`, each value times `scale`, in `unit`."""

        def show(value: float) -> str:
            return f"{value * scale:8.{digits}f} {unit}"

        return (
            f"median {show(self.median)}   p90 {show(self.p90)}   min {show(self.low)}   "
            f"(n={self.n})"
        )


def heading(title: str) -> None:
    print()
    print(f"== {title} " + "=" * max(0, 86 - len(title)))


def verdict(ok: bool | None) -> str:
    return "info" if ok is None else "PASS" if ok else "MISS"
