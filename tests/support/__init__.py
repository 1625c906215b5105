"""Helpers the test suite shares, one of each (STYLE.md, "Tests"): inline step driving
(driving.py), a real worker kept for delivery semantics and quiescence before an absence is
asserted (workers.py), captured events (events.py), one clock (clock.py), one refusal assertion
and signed-in API client (api.py), one OpenAI reply builder (providers.py), per-test state
reset (state.py), this test's database for a subprocess (databases.py); fixtures.py registers
the fixtures suite-wide."""
