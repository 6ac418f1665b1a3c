"""Benchmarks: side-by-side timings of vnr's code against references and alternatives.

`python -m bench <name> [flags]` runs `bench/<name>.py` (see `bench/__main__.py`); `flops.py`
and `timing.py` are shared by them, `reference/` holds the independent implementations that
the benchmarks time vnr against and the tests check it against. Nothing in `vnr/` imports
this package; its extra pins are `requirements-bench.txt`.
"""
