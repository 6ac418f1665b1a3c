"""Each REPRODUCING.md's tables are the registry's: a test fails when they disagree."""

import shutil

import pytest

from vnr.reproduce import docs, registry


@pytest.mark.parametrize("benchmark", registry.benchmarks())
def test_reproducing_tables_are_generated_from_the_registry(benchmark):
    reg = registry.load(benchmark)
    assert docs.check(reg) == "", "run python -m vnr.reproduce docs"
    text = docs.path_of(reg).read_text()
    for table in reg.tables:
        assert docs.BEGIN.format(id=table.id) in text
        for row in reg.rows_of(table.id):
            assert f"| {row.id} |" in text


def test_a_hand_edit_or_a_registry_edit_is_caught(tmp_path):
    """A deliberate edit on a copy: one cell of MoviePuzzle Table 1 changed in the file; then
    the file restored and the registry changed instead; then a block removed."""
    reg = registry.load("moviepuzzle")
    copy = tmp_path / "REPRODUCING.md"
    shutil.copy(docs.path_of(reg), copy)
    assert docs.check(reg, copy) == ""
    text = copy.read_text()
    copy.write_text(text.replace("55.40 · 21.58 · 27.29", "55.41 · 21.58 · 27.29", 1))
    assert "table 1 disagrees with rows.toml" in docs.check(reg, copy)
    assert docs.write(reg, copy) and copy.read_text() == text  # regenerated: equal again
    toml = tmp_path / "rows.toml"
    toml.write_text(reg.path.read_text().replace('name = "w/o text"', 'name = "without text"'))
    edited = registry.load("moviepuzzle", toml)
    assert "table 2 disagrees with rows.toml" in docs.check(edited, copy)
    begin = docs.BEGIN.format(id="10")
    copy.write_text(text.replace(begin + "\n", ""))
    with pytest.raises(registry.RegistryError, match="no generated block for table 10"):
        docs.check(reg, copy)
