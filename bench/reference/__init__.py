"""Independent plain-Python / NumPy implementations (of a paper's pseudo-code, an upstream
rule, torch's convolution) that `tests/` checks vnr against and `bench/` times it against.
Never imported by `vnr/`."""
