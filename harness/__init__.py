"""The test harness: what the tests share with the campaigns in tools/ and the benchmarks in
bench/ (the fixtures, the targets a host runs, the program generator and the differential
check, runs under contention, the market state machine, anvil, the node chaos and API fuzz
campaigns, the GPU check's cases). Installed by the editable install (`pip install -e .`) so
tools/ and bench/ scripts import it as `harness`; the vxla package never imports it
(tests/test_import_direction.py)."""
