"""Every relative link of the project's Markdown (README, docs, benchmark notes and results) names a
committed file, and a heading of it where the link has one: the figures the README quotes can be traced."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of ``markdown``: lower case, punctuation dropped, spaces as -."""
    headings = re.findall(r"^#+ (.*)$", FENCE.sub("", markdown), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def broken_links(markdown_file: Path) -> list[str]:
    """The relative links of ``markdown_file`` whose file does not exist, or whose file has no such heading."""
    broken = []
    for target in LINK.findall(FENCE.sub("", markdown_file.read_text())):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        linked = (markdown_file.parent / path) if path else markdown_file
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked.read_text()):
            broken.append(f"{target} (no such heading)")
    return broken


MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "NOTES.md",
            *sorted((ROOT / "benchmarks" / "results").glob("*/README.md"))]  # fmt: skip


@pytest.mark.parametrize("markdown_file", MARKDOWN, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_names_a_committed_file_and_heading(markdown_file):
    assert broken_links(markdown_file) == []


def test_a_link_to_a_missing_file_or_heading_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# Earlier runs of the targets\n\ntext\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#earlier-runs-of-the-targets) [gone](results/none.md) [bad](other.md#later-runs)\n"
        "```\n[in code](not/checked.md)\n```\n"
    )
    assert broken_links(page) == ["results/none.md (no such file)", "other.md#later-runs (no such heading)"]
