"""Variants of an HLO module's text that mean the same program: renamed, reordered, with
metadata. Hashes of what a module computes must not see the difference."""

from __future__ import annotations

import re


def rename_instructions(text: str) -> str:
    """Gives every instruction and computation a new name (consistently)."""
    names = sorted(set(re.findall(r"^\s*(?:ROOT\s+)?%?([A-Za-z_][\w.\-]*)\s*=", text, re.M)), key=len, reverse=True)
    names += re.findall(r"^(?:ENTRY\s+)?%?([A-Za-z_][\w.\-]*)\s*(?:\(|\{)", text, re.M)
    mapping = {name: f"renamed_{index}" for index, name in enumerate(dict.fromkeys(names))}
    pattern = re.compile(r"(?<![\w.\-%])%?(" + "|".join(re.escape(n) for n in sorted(mapping, key=len, reverse=True)) + r")(?![\w.\-])")
    body_start = text.index("\n")  # keep the header line (module name and layout) as it is
    return text[:body_start] + pattern.sub(lambda m: "%" + mapping[m.group(1)], text[body_start:])


def reverse_independent_parameters(text: str) -> str:
    """Moves the parameter lines of each computation after its other non-root lines: a
    different order of independent instructions."""
    out_lines: list[str] = []
    block: list[str] = []
    for line in text.splitlines():
        if line.strip() == "}" and block:
            params = [b for b in block if " parameter(" in b and not b.lstrip().startswith("ROOT")]
            root = [b for b in block if b.lstrip().startswith("ROOT")]
            others = [b for b in block if b not in params and b not in root]
            out_lines.extend(others + params[::-1] + root)
            block = []
            out_lines.append(line)
        elif line.startswith("  "):
            block.append(line)
        else:
            out_lines.append(line)
    return "\n".join(out_lines) + "\n"


def add_metadata(text: str) -> str:
    """Adds metadata to every instruction line."""
    return re.sub(r"^(\s+(?:ROOT\s+)?\S+\s*=.*\))$", r'\1, metadata={op_name="x" source_line=7}', text, flags=re.M)
