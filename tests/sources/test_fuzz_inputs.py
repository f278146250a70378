"""A bounded, seeded run of the hostile-config and drop-in fuzzer (tests/fuzz_inputs.py).

The long run is ``python benchmarks/fuzz_inputs.py --cases 2000``. Every zero count must stay
zero: no traceback, no hang, no exit code outside 0-3, no invalid JSON report, no refusal that
is more than one line.
"""

from __future__ import annotations

import fuzz_inputs

SEED = 20261123
CASES = 40


def test_hostile_configs_and_drop_ins_never_crash_hang_or_garble(tmp_path, capsys):
    tally = fuzz_inputs.run(tmp_path, SEED, CASES)
    with capsys.disabled():
        print(f"\nfuzz_inputs seed {SEED}: {tally.summary()}")
    assert tally.cases == CASES
    assert tally.zero_counts() == dict.fromkeys(tally.bad, 0), tally.bad
    assert set(tally.exit_codes) >= {0, 3}  # both graded and refused cases were generated
