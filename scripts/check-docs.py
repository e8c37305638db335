#!/usr/bin/env python3
"""Every relative link in README.md and docs/ leads somewhere: the file
exists, and an anchor names a heading of the page it points into (GitHub's
rule: lower-cased, punctuation dropped, spaces as dashes).

Run by scripts/test.sh:  python3 scripts/check-docs.py
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")


def anchors(page: Path) -> set:
    found = set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        found.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return found


def main() -> int:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for match in LINK.finditer(page.read_text()):
            target = match.group(2)
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not dest.exists():
                broken.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    for line in broken:
        print(f"check-docs: {line}", file=sys.stderr)
    if broken:
        return 1
    print(f"check-docs: {len(pages)} pages, every relative link and anchor resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
