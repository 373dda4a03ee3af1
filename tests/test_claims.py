"""Every result quoted in README.md and the documentation comes from a recorded result file.

The rule, applied to ``README.md`` and every ``docs/**/*.rst`` page:

- **What counts as a quoted result**: a number written with two or more decimals
  (``0.587``, ``0.602 ± 0.024``, ``1.26``), and a percentage written with a decimal
  (``12.5 %``), in prose, in tables and in printed output (a fenced block tagged
  ``text``, an rst ``.. code-block:: text``).
- **What does not**: code, where numbers are parameters (inline code, fenced blocks in
  any other language, rst ``::`` literal blocks and code blocks), math, included files
  (``.. literalinclude::`` shows a result file itself) and directive lines; a version
  number after a package's name (``Python 3.10``, ``torch 2.11``, also across a line
  break) or with two dots (``1.8.1``); numbers with one decimal or none (sizes,
  durations, settings: ``1.3 MB``, ``57 minutes``, ``10 s``). The content of other rst
  directives (``list-table``, notes) is prose and is read.
- **Where it must be found**: in a result file (``benchmarks/results/``,
  ``docs/results/``, read as text) that the same section names, or a section above it on
  the same page. A row of an rst ``list-table`` that names result files (a benchmark
  page's row: question, answer, command, result file) is searched in those alone, so a
  row cannot borrow a number from another row's file. A section names a result file
  by its name (``dev_tasks_test.md``, with or without its folder; a ``.png`` or
  ``.commands`` name stands for the files of the same stem beside it) or by the
  benchmark script that writes it (``bench_pair_decoder.py`` names ``pair_decoder*``).
  Matching every result file at once would trace almost any three-decimal number
  somewhere, so the section has to say where its numbers come from.
- **Formatting may differ**: a quoted number matches a recorded one that rounds to it
  (0.587 matches 0.5870 and 0.58713), or the same quantity in percent (0.587 matches
  58.7, 58.7 % matches 0.587); signs are ignored (a difference quoted as "under").
- **Markdown table rows** of the README are checked as rows: every number of a row must
  be found in one line of a named result file, so a row cannot mix numbers of two rows.

A failure lists each untraced number with its page, line and the files searched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULT_DIRS = (ROOT / "benchmarks" / "results", ROOT / "docs" / "results")
RESULT_SUFFIXES = {".md", ".csv", ".json", ".commands", ".txt"}

#: a number with two or more decimals, or a percentage with a decimal; not part of a
#: longer dotted number (a version such as 1.8.1) or of a word (sha, file name)
NUMBER = re.compile(
    r"(?<![\w.])(?P<value>\d{1,3}(?:,\d{3})+\.\d+|\d+\.\d+)(?P<percent>\s?%)?(?![\w]|\.\d)"
)
#: numbers in result files: thousands separators allowed, any number of decimals
RESULT_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
#: a version number after a package's name
VERSION = re.compile(
    r"(?:python|torch|torchaudio|braindecode|skorch|scikit-learn|sklearn|mne|pyriemann|"
    r"numpy|sphinx|ruff|cuda|glibc)\s*(?:[<>=!~]=?\s*)?$",
    re.IGNORECASE,
)
INLINE_CODE = re.compile(r"``.*?``|`[^`]*`")
RESULT_NAME = re.compile(r"[\w./-]*?([\w-]+)\.(md|csv|json|png|commands)\b")
SCRIPT_NAME = re.compile(r"\bbench_(\w+)(?:\.py)?\b")  # bench_x.py, benchmarks.bench_x


def result_files():
    """Every result file, by name (several folders may hold one name)."""
    files = {}
    for folder in RESULT_DIRS:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix in RESULT_SUFFIXES:
                files.setdefault(path.name, []).append(path)
    return files


FILES = result_files()


def files_named_in(text):
    """The result files that a piece of text names, by file name or by the script."""
    named = set()
    for match in RESULT_NAME.finditer(text):
        stem, suffix = match.group(1), match.group(2)
        if suffix in ("png", "commands"):
            named |= {n for n in FILES if Path(n).stem == stem}
        elif f"{stem}.{suffix}" in FILES:
            named.add(f"{stem}.{suffix}")
    for match in SCRIPT_NAME.finditer(text):
        stem = match.group(1)
        named |= {n for n in FILES if n.startswith(stem)}
    return named


@dataclass
class Section:
    title: str
    level: int
    parent: Section | None
    lines: list = field(default_factory=list)  # (line number, text, is table row)
    named: set = field(default_factory=set)
    #: line number -> the result files its list-table row names (rows that name any)
    row_named: dict = field(default_factory=dict)

    def sources(self, number=None):
        """The result files a line may quote: its list-table row's, when the row names
        any, else the section's and those of the sections above it."""
        if number in self.row_named:
            return set(self.row_named[number])
        section, names = self, set()
        while section is not None:
            names |= section.named
            section = section.parent
        return names


def _open(sections, title, level):
    parent = sections[-1] if sections else None
    while parent is not None and parent.level >= level:
        parent = parent.parent
    section = Section(title, level, parent)
    sections.append(section)
    return section


def parse_markdown(text):
    """Sections of a Markdown page; lines outside code, and fenced ``text`` blocks."""
    sections, fence = [], None
    current = _open(sections, "(top)", 0)
    for number, line in enumerate(text.splitlines(), 1):
        current.named |= files_named_in(line)
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else (stripped[3:].strip() or "code")
            continue
        if fence is not None:
            if fence == "text":
                current.lines.append((number, line, False))
            continue
        heading = re.match(r"(#+)\s+(.*)", line)
        if heading:
            current = _open(sections, heading.group(2), len(heading.group(1)))
            continue
        current.lines.append((number, line, stripped.startswith("|")))
    return sections


#: rst directives whose content is code, math or a list of pages, not prose
CODE_DIRECTIVES = {
    "code-block",
    "code",
    "sourcecode",
    "literalinclude",
    "math",
    "toctree",
    "autosummary",
    "raw",
    "testcode",
    "doctest",
    "testoutput",
    "image",
    "highlight",
}
RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")


def parse_rst(text):
    """Sections of an rst page; lines outside literal blocks, math and directives, and
    ``.. code-block:: text`` blocks."""
    lines = text.splitlines()
    sections, levels = [], []
    current = _open(sections, "(top)", 0)
    block_indent, keep_block, pending_literal, literal_indent = None, False, False, 0
    table_indent, row = None, None  # the list-table being read; its row's (lines, names)

    def end_row():
        if row is not None and row[1]:
            current.row_named.update(dict.fromkeys(row[0], row[1]))

    for index, line in enumerate(lines):
        number = index + 1
        current.named |= files_named_in(line)
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if table_indent is not None and stripped:
            if indent <= table_indent:
                end_row()
                table_indent, row = None, None
            else:
                if re.match(r"\*\s+-", stripped):
                    end_row()
                    row = ([], set())
                if row is not None:
                    row[0].append(number)
                    row[1].update(files_named_in(line))
        if block_indent is not None:
            if not stripped or indent > block_indent:
                if keep_block and stripped:
                    current.lines.append((number, line, False))
                continue
            block_indent = None
        if pending_literal and stripped:
            pending_literal = False
            if indent > literal_indent:
                block_indent, keep_block = literal_indent, False
                continue
        if RST_UNDERLINE.match(line) and index > 0 and lines[index - 1].strip():
            char = line.strip()[0]
            if char not in levels:
                levels.append(char)
            title = lines[index - 1].strip()
            if current.lines and current.lines[-1][0] == number - 1:
                current.lines.pop()
            current = _open(sections, title, levels.index(char) + 1)
            continue
        directive = re.match(r"\s*\.\. ([\w:-]+)::\s*(.*)", line)
        if directive:
            name, argument = directive.groups()
            if name in CODE_DIRECTIVES:
                block_indent = indent
                keep_block = name in ("code-block", "code") and argument.strip() == "text"
            elif name == "list-table":
                end_row()
                table_indent, row = indent, None
            continue  # other directives (tables, notes) hold prose: their lines are read
        current.lines.append((number, line, False))
        if stripped.endswith("::"):
            pending_literal, literal_indent = True, indent
    end_row()
    return sections


def quoted_numbers(line, before=""):
    """(value, decimals, is percent, text) of each quoted result in a line of prose;
    ``before``, the line above, tells a version number that follows a package's name
    across a line break."""
    prose = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)
    prose = re.sub(r"https?://\S+", " ", prose)
    found = []
    for match in NUMBER.finditer(prose):
        text, percent = match.group("value"), bool(match.group("percent"))
        decimals = len(text.split(".")[1])
        if decimals < 2 and not percent:
            continue
        if VERSION.search(f"{before.strip()} {prose[: match.start()]}"):
            continue
        found.append((float(text.replace(",", "")), decimals, percent, text))
    return found


def _numbers(text):
    return [float(m.replace(",", "")) for m in RESULT_NUMBER.findall(text)]


_CACHE = {}


def recorded(name):
    """The lines of a result file, each with its numbers, and all of them together."""
    if name not in _CACHE:
        rows = []
        for path in FILES[name]:
            for line in path.read_text(errors="replace").splitlines():
                rows.append(set(_numbers(line)))
        _CACHE[name] = (rows, set().union(*rows) if rows else set())
    return _CACHE[name]


def matches(value, decimals, percent, number):
    """Whether a recorded number rounds to a quoted one, in the same unit or in percent."""
    tolerance = 0.5 * 10.0**-decimals + 1e-9
    candidates = (number, number * 100) if percent else (number, number * 100, number / 100)
    return any(abs(abs(c) - value) <= tolerance for c in candidates)


def traced(quote, numbers):
    value, decimals, percent, _ = quote
    return any(matches(value, decimals, percent, n) for n in numbers)


def pages():
    yield ROOT / "README.md"
    for path in sorted((ROOT / "docs").rglob("*.rst")):
        parts = path.relative_to(ROOT / "docs").parts
        if parts[0] in ("_build", "auto_examples", "generated") or parts == (
            "sg_execution_times.rst",
        ):
            continue  # what a docs build writes (gitignored)
        yield path


def untraced_numbers(path):
    """(line, number, section, files searched) of each quoted result not found."""
    text = path.read_text()
    lines = text.splitlines()
    sections = parse_markdown(text) if path.suffix == ".md" else parse_rst(text)
    missing = []
    for section in sections:
        for number, line, is_row in section.lines:
            quotes = quoted_numbers(line, lines[number - 2] if number > 1 else "")
            if not quotes:
                continue
            names = sorted(section.sources(number))
            if is_row:
                rows = [row for name in names for row in recorded(name)[0]]
                if any(all(traced(q, row) for q in quotes) for row in rows):
                    continue
                missing.append((number, " ".join(q[3] for q in quotes), section.title, names))
                continue
            for quote in quotes:
                if not any(traced(quote, recorded(name)[1]) for name in names):
                    missing.append((number, quote[3], section.title, names))
    return missing


PAGES = list(pages())


def test_the_rule_reads_what_it_should():
    """The extraction and matching rules on a hand-made page: prose, a table row, code,
    versions and settings."""
    assert [q[3] for q in quoted_numbers("0.602 ± 0.024 at lr 3e-4, 1.3 MB, 12.5 %")] == [
        "0.602",
        "0.024",
        "12.5",
    ]
    assert quoted_numbers("torch 2.11 on Python 3.10, braindecode 1.8.1") == []
    assert quoted_numbers("2.11 with it", before="the tested torch") == []
    assert quoted_numbers("``PARSProbe(C=0.25)`` and `x = 0.75`") == []
    assert matches(0.587, 3, False, 0.58713)
    assert matches(0.587, 3, False, 58.7)
    assert matches(58.7, 1, True, 0.587)
    assert not matches(0.587, 3, False, 0.59)
    page = (
        "# t\n\nprose 0.587 (`dev_tasks_test.md`)\n\n```python\nx = 0.123456\n```\n\n"
        "```text\nrow 0.999999\n```\n"
    )
    (section,) = [s for s in parse_markdown(page) if s.title == "t"]
    assert section.named == {"dev_tasks_test.md"}
    assert [q[3] for _, line, _ in section.lines for q in quoted_numbers(line)] == [
        "0.587",
        "0.999999",
    ]
    rst = (
        "Title\n=====\n\nA 0.111 there::\n\n   y = 0.222\n\n.. code-block:: text\n\n   0.333\n\n"
        ".. code-block:: python\n\n   z = 0.555\n\n.. list-table::\n   :header-rows: 1\n\n"
        "   * - a\n     - 0.666\n\n.. math::\n\n   0.777\n\nB 0.444\n"
    )
    (top, title) = parse_rst(rst)
    assert [q[3] for _, line, _ in title.lines for q in quoted_numbers(line)] == [
        "0.111",
        "0.333",
        "0.666",
        "0.444",
    ]
    # a list-table row that names result files is searched in those alone
    rows = (
        "Title\n=====\n\nAbove: probe_c.md\n\n.. list-table::\n   :header-rows: 1\n\n"
        "   * - a 0.111\n     - ``dev_tasks_test.md``\n   * - b 0.222\n     - no file\n\n"
        "After 0.333\n"
    )
    (_, table) = parse_rst(rows)
    sources = {line.strip(): table.sources(n) for n, line, _ in table.lines if line.strip()}
    assert sources["* - a 0.111"] == {"dev_tasks_test.md"}
    assert sources["* - b 0.222"] == sources["After 0.333"] == {"probe_c.md", "dev_tasks_test.md"}


@pytest.mark.parametrize("path", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_quoted_number_is_in_a_result_file_the_section_names(path):
    missing = untraced_numbers(path)
    report = "\n".join(
        f"  {path.relative_to(ROOT)}:{line}: {number}  (section {title!r}; searched: "
        f"{', '.join(names) or 'no result file named in the section or above it'})"
        for line, number, title, names in missing
    )
    assert not missing, f"{len(missing)} quoted numbers not found in a result file:\n{report}"
