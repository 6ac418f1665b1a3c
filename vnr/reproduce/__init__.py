"""Reproduce a paper's table with one command: `python -m vnr.reproduce` (see __main__).

`registry` reads each benchmark's rows.toml (every printed row, its command and status),
`plan` turns rows into runs (one training per training key), `runconfig` builds and
compares their configs, `execute` runs them, `report` lays the table out beside the
paper's numbers and `docs` writes the REPRODUCING.md tables.
"""
