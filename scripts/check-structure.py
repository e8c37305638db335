#!/usr/bin/env python3
"""The host's rooms and walls, measured (issue 38).

Three measures over `host/`, each a rule the code keeps:

- no file (tests and benches included) over MAX_FILE_LINES lines;
- no function in `host/*/src` over MAX_FN_LINES lines (from its `fn` line
  to its closing brace, as rustfmt lays it out);
- no file-level import circle inside a crate: file A imports file B when
  A's code (not its comments) names a path (`use` or inline) that
  resolves to an item of B. A facade's `pub use child::X` counts as its
  import of the child, and a path through a re-export is followed to the
  file that defines the item, so a child naming `crate::X` re-exported
  from its child does not tie it to `lib.rs`. A file's own test module
  (`#[cfg(test)] mod tests { .. }`) is left out: tests may reach for their
  parent's helpers without tying the code itself together.

Prints what breaks a rule and exits 1; `--report` prints the largest
files and functions too (and each circle's edges); `--warn-circles`
prints circles without failing, for a change that is still untying one.
"""

import re
import sys
from pathlib import Path

MAX_FILE_LINES = 800  # a file one can hold in one's head
MAX_FN_LINES = 120  # a function one can read without scrolling twice

ROOT = Path(__file__).resolve().parent.parent / "host"

FN_RE = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")
PATH_RE = re.compile(r"\b(crate|super|self)((?:::\w+)+)")
CHILD_PATH_RE = re.compile(r"(?<![\w:])([a-z_]\w*)((?:::\w+)+)")
MOD_BLOCK_RE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*\{")


def strip_comments_and_strings(text):
    """The code of a file with comments and string literals blanked (lines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]) or (c == "'" and text.startswith("'\\u{", i)):
            j = text.find("'", i + 2)
            out.append("' '")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Crate:
    def __init__(self, root_file):
        self.root = root_file
        self.modules = {}  # module path tuple -> file
        self.files = {}  # file -> module path tuple
        self._walk(root_file, ())

    def _walk(self, file, path):
        self.modules[path] = file
        self.files[file] = path
        code = strip_comments_and_strings(file.read_text())
        for m in re.finditer(r"(?m)^\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code):
            name = m.group(1)
            attr = re.search(r'#\[path\s*=\s*""\]', code[max(0, m.start() - 80):m.start()])
            if file.name in ("lib.rs", "main.rs", "mod.rs") or file == self.root:
                base = file.parent
            else:
                base = file.parent / file.stem
            for cand in (base / f"{name}.rs", base / name / "mod.rs"):
                if cand.exists():
                    self._walk(cand, path + (name,))
                    break

    def reexports(self, file):
        """`use a::b::Name;` in a file (public or not: its children see
        both through `super::`): Name -> the full path it names."""
        found = {}
        code = without_tests(strip_comments_and_strings(file.read_text()))
        # Only the file's own `use`s: one inside an inline module
        # (`mod v2 { use super::X; }`) is that module's, not the file's.
        code = code.split("\n")
        inline = next((i for i, line in enumerate(code) if MOD_BLOCK_RE.match(line)), None)
        code = "\n".join(code if inline is None else code[:inline])
        for m in re.finditer(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", code):
            for full in expand_use(m.group(1).replace("\n", " ")):
                last = full[-1]
                if last[0] == "*":
                    continue
                name = last[1] if last[0] == "as" else last[0]
                found[name] = [s if isinstance(s, str) else s[0] for s in full[:-1]] + [last[0] if last[0] != "as" else last[2]]
        return found

    def resolve(self, segments, here, depth=0):
        """The file holding the item `segments` (absolute, from the crate root) names."""
        segments = list(segments)
        i = 0
        while i < len(segments) and tuple(segments[: i + 1]) in self.modules:
            i += 1
        path = tuple(segments[:i])
        file = self.modules[path]
        rest = segments[i:]
        if rest and depth < 8:
            exports = self.reexports_cache.setdefault(file, self.reexports(file))
            if rest[0] in exports:
                target = exports[rest[0]]
                absolute = self.absolute(target, path)
                if absolute is None:
                    return None  # another crate's item, re-exported
                return self.resolve(absolute + rest[1:], here, depth + 1)
        return file

    def absolute(self, segments, module):
        """A path written in `module`, from the crate root (None: another crate)."""
        segments = list(segments)
        if not segments:
            return None
        if segments[0] == "crate":
            return segments[1:]
        if segments[0] == "self":
            return list(module) + segments[1:]
        if segments[0] == "super":
            m = list(module)
            while segments and segments[0] == "super":
                m = m[:-1]
                segments = segments[1:]
            return m + segments
        # A child module named without `self::` (2018 paths).
        if tuple(module) + (segments[0],) in self.modules:
            return list(module) + segments
        return None

    reexports_cache = {}


def expand_use(tree):
    """Every path of a `use` tree, as lists of segments; the last segment is
    a tuple (name,) or ("as", name, alias)."""
    tree = tree.strip()

    def parse(s, prefix):
        s = s.strip()
        if not s:
            return []
        # split top-level commas
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        out = []
        for part in parts:
            part = part.strip()
            if not part:
                continue
            if "{" in part:
                head, _, body = part.partition("{")
                body = body[: body.rfind("}")]
                head_segs = [h for h in head.strip().rstrip(":").split("::") if h]
                out.extend(parse(body, prefix + head_segs))
            else:
                m = re.match(r"(.*?)\s+as\s+(\w+)$", part)
                if m:
                    segs = [x for x in m.group(1).split("::") if x]
                    out.append(prefix + segs[:-1] + [("as", segs[-1], m.group(2))])
                else:
                    segs = [x for x in part.split("::") if x]
                    if segs == ["self"]:
                        out.append(prefix[:-1] + [(prefix[-1],)] if prefix else [])
                    else:
                        out.append(prefix + segs[:-1] + [(segs[-1],)])
        return out

    return parse(tree, [])


def without_tests(code):
    """The code before the file's own `#[cfg(test)] mod NAME {`."""
    m = re.search(r"(?m)^\s*#\[cfg\(test\)\]\s*\n\s*mod\s+\w+\s*\{", code)
    return code[: m.start()] if m else code


def imports_of(crate, file):
    """The files of the crate that `file`'s code names."""
    module = crate.files[file]
    code = without_tests(strip_comments_and_strings(file.read_text()))
    found = set()
    # Inline modules (`mod tests {`): `super` inside is the file's module.
    lines = code.split("\n")
    inline_from = None
    for no, line in enumerate(lines):
        if MOD_BLOCK_RE.match(line):
            inline_from = no
            break

    def take(segments, line_no):
        here = list(module)
        if inline_from is not None and line_no > inline_from:
            here = here + ["<inline>"]
        absolute = crate.absolute([s if isinstance(s, str) else (s[1] if s[0] == "as" else s[0]) for s in segments], here)
        if absolute is None:
            return
        absolute = [s for s in absolute if s != "<inline>"]
        target = crate.resolve(absolute, file)
        if target is not None and target != file:
            found.add(target)

    for m in re.finditer(r"\buse\s+([^;]+);", code):
        line_no = code.count("\n", 0, m.start())
        for full in expand_use(m.group(1).replace("\n", " ")):
            if full and full[-1] == ("*",):
                full = full[:-1] + ["__glob__"]
            take(full, line_no)
    for m in PATH_RE.finditer(code):
        line_no = code.count("\n", 0, m.start())
        segs = [m.group(1)] + [s for s in m.group(2).split("::") if s]
        take(segs, line_no)
    # A child module named inline without `self::` (`llm::LlmAccess`).
    for m in CHILD_PATH_RE.finditer(code):
        if tuple(module) + (m.group(1),) in crate.modules:
            line_no = code.count("\n", 0, m.start())
            take([m.group(1)] + [s for s in m.group(2).split("::") if s], line_no)
    return found


def cycles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def long_functions(file):
    lines = file.read_text().split("\n")
    found = []
    for i, line in enumerate(lines):
        m = FN_RE.match(line)
        if not m:
            continue
        indent = m.group(1)
        # The signature ends at the first line ending in `{` or `;`.
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith(("{", ";")):
            j += 1
        if j >= len(lines) or lines[j].rstrip().endswith(";"):
            continue
        if lines[j].rstrip().endswith("{") and lines[j].strip().endswith("}"):
            continue
        k = j + 1
        while k < len(lines) and lines[k].rstrip() != indent + "}":
            k += 1
        found.append((k - i + 1, m.group(2), i + 1))
    return found


def crate_roots():
    roots = []
    for crate_dir in sorted(p for p in ROOT.iterdir() if (p / "Cargo.toml").exists()):
        for rel in ("src/lib.rs", "src/main.rs"):
            if (crate_dir / rel).exists():
                roots.append(crate_dir / rel)
        for sub in ("tests", "benches", "examples"):
            d = crate_dir / sub
            if not d.is_dir():
                continue
            for entry in sorted(d.iterdir()):
                if entry.suffix == ".rs":
                    roots.append(entry)
                elif (entry / "main.rs").exists():
                    roots.append(entry / "main.rs")
    return roots


def main():
    report = "--report" in sys.argv
    warn_circles = "--warn-circles" in sys.argv
    problems = []
    warnings = []
    files = sorted(ROOT.rglob("*.rs"))
    files = [f for f in files if "target" not in f.parts]
    sizes = sorted(((len(f.read_text().split("\n")) - 1, f) for f in files), reverse=True)
    for lines, f in sizes:
        if lines > MAX_FILE_LINES:
            problems.append(f"{f.relative_to(ROOT.parent)}: {lines} lines, over {MAX_FILE_LINES}")
    fns = []
    for f in files:
        if f.relative_to(ROOT).parts[1] != "src":
            continue
        for length, name, line in long_functions(f):
            fns.append((length, f"{f.relative_to(ROOT.parent)}:{line} {name}"))
    fns.sort(reverse=True)
    for length, where in fns:
        if length > MAX_FN_LINES:
            problems.append(f"{where}: {length} lines, over {MAX_FN_LINES}")
    for root in crate_roots():
        crate = Crate(root)
        graph = {f: imports_of(crate, f) for f in crate.files}
        for comp in cycles(graph):
            names = ", ".join(str(f.relative_to(ROOT.parent)) for f in comp)
            (warnings if warn_circles else problems).append(f"import circle: {names}")
            if report:
                for f in comp:
                    inside = sorted(str(t.relative_to(ROOT.parent)) for t in graph[f] if t in comp)
                    print(f"  {f.relative_to(ROOT.parent)} -> {', '.join(inside)}")
    if report:
        print("largest files:")
        for lines, f in sizes[:10]:
            print(f"  {lines:5} {f.relative_to(ROOT.parent)}")
        print("longest functions:")
        for length, where in fns[:30]:
            print(f"  {length:5} {where}")
    for w in warnings:
        print(f"warning: {w}")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} structure problem(s): see scripts/check-structure.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
