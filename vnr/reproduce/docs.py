"""The tables of each REPRODUCING.md, generated from the registry (one source of truth).

Each table lives between two marker lines,

    <!-- reproduce:table 1 begin (generated from rows.toml: python -m vnr.reproduce docs) -->
    <!-- reproduce:table 1 end -->

and `python -m vnr.reproduce docs` rewrites what is between them; `--check` only says
whether a file and its registry disagree (the test suite runs it).
"""

from __future__ import annotations

import pathlib
import re

from vnr.reproduce.registry import Registry, RegistryError, Row, Table

NAME = "REPRODUCING.md"
BEGIN = ("<!-- reproduce:table {id} begin (generated from rows.toml: "
         "python -m vnr.reproduce docs) -->")
END = "<!-- reproduce:table {id} end -->"


def path_of(reg: Registry) -> pathlib.Path:
    return reg.path.with_name(NAME)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _command(row: Row) -> str:
    c = row.command
    if c is None:
        return "-"
    if c.tool:
        return _cell(_code(c.tool))
    parts = [_code(c.config), *(_code(f"--config.{x}") for x in c.set or ())]
    if c.each:
        parts.append("for " + ", ".join(f"{k} in {'/'.join(v)}" for k, v in c.each))
    if c.eval_set:
        parts.append("evaluated with " + " ".join(_code(f"--config.{x}") for x in c.eval_set)
                     + " (vnr.evaluate, no new training)")
    return _cell(" ".join(parts))


def render(reg: Registry, table: Table) -> str:
    """The Markdown block of one table (without its marker lines)."""
    cols = ", ".join(c.name for c in table.columns)
    out = [f"**Table {table.id}**: {table.title}. Paper cells in column order: {cols}.", "",
           "| id | row | paper | command (`python -m vnr.train --workdir DIR --config ...`) "
           "| status | test |", "|---|---|---|---|---|---|"]
    for row in reg.rows_of(table.id):
        paper = " · ".join(c or "-" for c in row.paper) if row.paper else f"({row.paper_note})"
        status = row.status + (f"; ours: {'; '.join(row.ours)}" if row.ours else "")
        status += f" ({row.note})" if row.note else ""
        if row.paper_note and row.paper:
            status += f". Paper cells: {row.paper_note}"
        name = f"{row.group} {row.name}".strip()
        out.append(f"| {row.id} | {_cell(name)} | {_cell(paper)} | {_command(row)} | "
                   f"{_cell(status)} | {_cell(_code(row.test))} |")
    if table.note:
        out += ["", table.note]
    return "\n".join(out)


def sync(reg: Registry, text: str, where: str) -> str:
    """`text` with every table block regenerated; a table without its markers is an
    error naming the file and the table."""
    for table in reg.tables:
        begin, end = BEGIN.format(id=table.id), END.format(id=table.id)
        pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise RegistryError(f"{where}: no generated block for table {table.id} (add the "
                                f"lines {begin!r} and {end!r})")
        block = f"{begin}\n{render(reg, table)}\n{end}"
        text = pattern.sub(lambda _, b=block: b, text, count=1)
    return text


def check(reg: Registry, path: pathlib.Path | None = None) -> str:
    """'' when the file's blocks equal the registry, else which table differs."""
    path = path or path_of(reg)
    text = path.read_text()
    new = sync(reg, text, str(path))
    if new == text:
        return ""
    for table in reg.tables:
        begin, end = BEGIN.format(id=table.id), END.format(id=table.id)
        old_block = text[text.index(begin):text.index(end)]
        if old_block != new[new.index(begin):new.index(end)]:
            return (f"{path}: table {table.id} disagrees with {reg.path.name} (edit rows.toml, "
                    f"then run python -m vnr.reproduce docs)")
    return f"{path}: differs from {reg.path.name}"


def write(reg: Registry, path: pathlib.Path | None = None) -> bool:
    """Regenerates the blocks; True when the file changed."""
    path = path or path_of(reg)
    text = path.read_text()
    new = sync(reg, text, str(path))
    if new != text:
        path.write_text(new)
    return new != text
