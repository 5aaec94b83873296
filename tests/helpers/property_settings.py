"""The Hypothesis settings of the property tests that play whole scenarios (test_properties.py,
test_engine_sans_io_world.py): here rather than in those test modules, so that
test_tag_escape.py checks they report a failure in seconds (conftest.BOUNDED: no explaining,
no shrinking unless asked for) without importing a test module."""

from __future__ import annotations

import os

from conftest import bounded
from helpers.property_world import EXAMPLES, PG_EXAMPLES, PHASES
from hypothesis import HealthCheck

#: test_properties.test_engine_properties: EXAMPLES per case, shrinking as PHASES says
PROPERTY_SETTINGS = bounded(
    max_examples=EXAMPLES,
    derandomize=True,
    phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: test_properties.test_engine_properties_on_postgres
PG_PROPERTY_SETTINGS = bounded(
    max_examples=PG_EXAMPLES,
    derandomize=True,
    phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: examples of test_engine_sans_io_world.test_same_replies_as_the_sqlite_app
WORLD_EXAMPLES = int(os.environ.get("SMLLM_PROPERTY_EXAMPLES", "40"))
WORLD_SETTINGS = (
    bounded(  # no explaining (it takes minutes) and no shrinking: SMLLM_SHRINK=1 asks for it
        max_examples=WORLD_EXAMPLES,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
)
