"""Fuzz the machine-file loader: whatever the bytes, `load_machine_source` answers with findings.

The property, for any input:

- loading never raises and never hangs (each case runs under a wall-clock limit);
- it EITHER yields a machine with no error finding, OR reports at least one error finding;
- every error finding carries a line (and the line lies inside the file): the source is in
  memory, so every problem has a place, even a whole-file one (an empty file is at 1:1). Only a
  file that can't be read at all has no line (`load_machine_file`'s `can't read the file`),
  and `load_machine_source` never produces that one;
- every finding's message, path and `text()` are single-line strings, and its rule and level
  fit validation.md;
- a machine that loads is one the engine can use: it pickles (the compiled cache), its names
  all resolve, its events lists render into one well-formed `<smllm>` block, and checking
  params against its param schemas answers (refuses or accepts) instead of raising.

Three sources of input:

a. valid machines (tests/machines, the fix machine, the dev example) mutated as YAML data, then
   dumped back to YAML text;
b. the same machines mutated as bytes: lines deleted, duplicated, re-indented, bytes flipped,
   truncation, tabs, anchors and aliases, flow mappings, document markers, BOMs, NULs,
   invalid UTF-8, other line breaks;
c. random YAML data, shaped like a machine more or less, dumped with `yaml.safe_dump`.

The corpus `tests/fuzz_corpus/NNN-name.smllm.yaml` keeps the inputs worth keeping forever:
every input that once broke the property (a regression fixture), and some that stress the YAML
layer. test_fuzz_corpus.py checks each in-process and by the real `smllm validate --json`
process; helpers/fuzz_property.py holds the property's checks and the list of known, open bugs.

Environment:
  SMLLM_FUZZ_EXAMPLES   examples in all (default 300), split over the three strategies;
                        `bench/validate_bench.py --fuzz` runs 10,000
  SMLLM_FUZZ_RANDOM=1   a new random run each time (default: derandomized, the same cases
                        in every CI run)
  SMLLM_FUZZ_CASE_LIMIT seconds one case may take before it counts as a hang (default 5)
  SMLLM_SHRINK=1        shrink a failing example (off: conftest.BOUNDED reports a failure in
                        seconds, where shrinking took minutes)
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers.fuzz_property import HERE, SEEDS, check_source, fuzz_check, fuzz_settings, time_limit
from helpers.fuzz_strategies import mutated_machines, mutated_texts, random_machines
from hypothesis import given, note

# -- the fuzz tests ----------------------------------------------------------------------------


@fuzz_settings(0.4)
@given(mutated_machines())
def test_fuzz_data_mutations(case: tuple[Path, str]) -> None:
    path, text = case
    note(text[:3000])
    fuzz_check(text, path)


@fuzz_settings(0.35)
@given(mutated_texts())
def test_fuzz_text_mutations(case: tuple[Path, bytes]) -> None:
    path, source = case
    note(repr(source[:3000]))
    fuzz_check(source, path)


@fuzz_settings(0.25)
@given(random_machines())
def test_fuzz_random_yaml(text: str) -> None:
    note(text[:3000])
    fuzz_check(text, HERE / "machines" / "random.smllm.yaml")


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: p.name)
def test_seeds_pass_the_property(seed: Path) -> None:
    # the fuzzer's starting points load cleanly, so that mutations are what breaks them
    result = check_source(seed.read_bytes(), seed)
    assert result.machine is not None, [f.text() for f in result.findings]


def test_time_limit_catches_a_hang() -> None:
    with pytest.raises(AssertionError, match="hangs"), time_limit(0.2, "the loop"):
        while True:
            time.sleep(0.01)
