#!/usr/bin/env python3
"""Generate the role variable docs from each role's meta/argument_specs.yml, the one place they are written.

For every role with a meta/argument_specs.yml (entry point ``main``) this writes:

* the variables table of roles/<role>/README.md, between the lines
  ``<!-- BEGIN GENERATED: variables (tools/argspec_docs.py; edit meta/argument_specs.yml) -->`` and
  ``<!-- END GENERATED -->`` (the rest of the README is left as it is);
* inventory.example/group_vars/all/<role>.yml, whole: every option commented out at its default, described by
  ``## `` lines.

Groups: a comment line ``# --- Name ---`` directly above a top-level option of the spec starts the group
``Name`` (a heading in the README, a ``## --- Name ---`` line in the inventory example). Ansible and PyYAML
ignore comments, and an option spec allows no extra key, so the script reads these lines from the spec's text.
The order of the options in the spec is the order of the docs.

With --check nothing is written: every file that differs from what would be written is named, with a short
unified diff, and the exit status is 1. Needs Python 3.9+ and PyYAML.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import textwrap
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- BEGIN GENERATED: variables (tools/argspec_docs.py; edit meta/argument_specs.yml) -->"
END = "<!-- END GENERATED -->"
WIDTH = 116  # inventory.example comment lines, "## " included
DIFF_LINES = 40  # lines of diff shown per stale file
GROUP_RE = re.compile(r"^(?P<indent> *)# --- (?P<name>\S.*?) ---\s*$")
KEY_RE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][A-Za-z0-9_]*):")
# Ansible doc markup (classic and semantic): C() I() B() U() M() L(,) R(,) O() V() E() P() HORIZONTALLINE.
MARKUP_RE = re.compile(
    r"\b(?:(?P<fn>[CIBUM])\((?P<arg>[^)]*)\)"
    r"|(?P<sem>[OVEP])\((?P<semarg>(?:[^\\)]|\\.)*)\)"
    r"|(?P<link>[LR])\((?P<text>[^,)]*),\s*(?P<target>[^)]*)\)"
    r"|(?P<hr>HORIZONTALLINE))"
)


class SpecError(Exception):
    """A spec, README or layout this script cannot work with."""


# --- reading the spec --------------------------------------------------------------------------------------


def load_spec(path: Path) -> tuple[dict, dict[str, str]]:
    """Return (options of the main entry point, {first option of a group: group name})."""
    text = path.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    try:
        options = data["argument_specs"]["main"]["options"]
    except (KeyError, TypeError) as exc:
        raise SpecError(f"{path}: no argument_specs.main.options") from exc
    if not isinstance(options, dict) or not options:
        raise SpecError(f"{path}: argument_specs.main.options is empty")
    return options, read_groups(path, text, options)


def read_groups(path: Path, text: str, options: dict) -> dict[str, str]:
    """The ``# --- Name ---`` comment lines, each directly above (blank lines aside) a top-level option."""
    lines = text.splitlines()
    groups: dict[str, str] = {}
    for number, line in enumerate(lines):
        match = GROUP_RE.match(line)
        if not match:
            continue
        following = next((later for later in lines[number + 1:] if later.strip()), "")
        key = KEY_RE.match(following)
        if not key or key["indent"] != match["indent"] or key["key"] not in options:
            raise SpecError(
                f"{path}:{number + 1}: the group comment {line.strip()!r} must sit directly above a top-level "
                "option, at its indentation"
            )
        groups[key["key"]] = match["name"]
    return groups


def description_items(spec: dict) -> list[str]:
    """The description as a list of paragraphs, each on one line."""
    description = spec.get("description") or []
    if isinstance(description, str):
        description = [description]
    return [" ".join(str(item).split()) for item in description if str(item).strip()]


def grouped(options: dict, groups: dict[str, str]) -> list[tuple[str | None, list[str]]]:
    """[(group name or None for options above the first group, [option names])] in spec order."""
    result: list[tuple[str | None, list[str]]] = []
    for name in options:
        if name in groups or not result:
            result.append((groups.get(name), []))
        result[-1][1].append(name)
    return result


# --- rendering values and markup ---------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Block sequences indented under their key; strings that need quoting get double quotes ("2.6", "")."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)

    def choose_scalar_style(self):
        style = super().choose_scalar_style()
        return '"' if style == "'" else style


def yaml_block(name: str, value) -> list[str]:
    """``name: value`` as YAML lines, block style (as in defaults/main.yml)."""
    text = yaml.dump({name: value}, Dumper=_Dumper, default_flow_style=False, sort_keys=False,
                     allow_unicode=True, width=10_000)
    return text.splitlines()


def yaml_flow(value) -> str:
    """A value as one line of YAML flow style: "2.6", tarball, [], {a: 1}."""
    text = yaml.dump(value, Dumper=_Dumper, default_flow_style=True, sort_keys=False,
                     allow_unicode=True, width=10_000)
    text = text.strip()
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    elif text.endswith("..."):
        text = text[: -len("...")].rstrip()
    return text


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def markup_plain(text: str) -> str:
    """Ansible doc markup as plain text (inventory comments): C(x) -> x, L(t,u) -> t (u)."""
    def replace(match: re.Match) -> str:
        if match["fn"]:
            return match["arg"]
        if match["sem"]:
            return _unescape(match["semarg"])
        if match["link"] == "L":
            return f"{match['text']} ({match['target']})"
        if match["link"] == "R":
            return match["text"]
        return ""
    return " ".join(MARKUP_RE.sub(replace, text).split())


def md_code(text: str) -> str:
    text = text.replace("|", "\\|")
    if "`" in text:
        return f"`` {text} ``"
    return f"`{text}`"


def md_text(text: str) -> str:
    """Plain text in a Markdown table cell: no raw HTML, no cell breaks, no stray emphasis."""
    for char, escaped in (("\\", "\\\\"), ("|", "\\|"), ("<", "&lt;"), (">", "&gt;"), ("*", "\\*")):
        text = text.replace(char, escaped)
    return text


def markup_markdown(text: str) -> str:
    """Ansible doc markup as Markdown for a table cell: C(x) -> `x`, I(x) -> *x*, U(u) -> <u>, L(t,u) -> [t](u)."""
    out: list[str] = []
    position = 0
    for match in MARKUP_RE.finditer(text):
        out.append(md_text(text[position:match.start()]))
        position = match.end()
        fn, arg = match["fn"], match["arg"]
        if fn in ("C", "M"):
            out.append(md_code(arg))
        elif fn == "I":
            out.append(f"*{md_text(arg)}*")
        elif fn == "B":
            out.append(f"**{md_text(arg)}**")
        elif fn == "U":
            out.append(f"<{arg}>")
        elif match["sem"]:
            out.append(md_code(_unescape(match["semarg"])))
        elif match["link"] == "L":
            out.append(f"[{md_text(match['text'])}]({match['target']})")
        elif match["link"] == "R":
            out.append(md_text(match["text"]))
    out.append(md_text(text[position:]))
    return " ".join("".join(out).split())


def type_name(spec: dict) -> str:
    name = spec.get("type", "str")
    if name == "list" and spec.get("elements"):
        name = f"list of {spec['elements']}"
    if spec.get("required"):
        name += ", required"
    return name


# --- README block ------------------------------------------------------------------------------------------


def table_rows(name: str, spec: dict) -> list[str]:
    default = md_code(yaml_flow(spec["default"])) if "default" in spec else ""
    choices = ", ".join(md_code(yaml_flow(choice)) for choice in spec.get("choices") or [])
    description = " ".join(markup_markdown(item) for item in description_items(spec))
    rows = [f"| {md_code(name)} | {md_text(type_name(spec))} | {default} | {choices} | {description} |"]
    subname = name + ("[]" if spec.get("type") == "list" else "")
    for key, subspec in (spec.get("options") or {}).items():
        rows += table_rows(f"{subname}.{key}", subspec)
    return rows


def readme_block(options: dict, groups: dict[str, str]) -> str:
    lines = [BEGIN]
    for group, names in grouped(options, groups):
        lines.append("")
        if group:
            lines += [f"### {group}", ""]
        lines += ["| name | type | default | choices | description |", "|---|---|---|---|---|"]
        for name in names:
            lines += table_rows(name, options[name])
    lines += ["", END]
    return "\n".join(lines)


def render_readme(path: Path, options: dict, groups: dict[str, str]) -> str:
    text = path.read_text(encoding="utf-8")
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise SpecError(f"{path}: needs exactly one pair of marker lines, {BEGIN} then {END}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + readme_block(options, groups) + tail


# --- inventory example -------------------------------------------------------------------------------------


def comment_lines(text: str, first: str = "## ", rest: str | None = None) -> list[str]:
    return textwrap.wrap(text, width=WIDTH, initial_indent=first, subsequent_indent=rest or first,
                         break_long_words=False, break_on_hyphens=False)


def option_comments(spec: dict) -> list[str]:
    lines: list[str] = []
    for item in description_items(spec):
        lines += comment_lines(markup_plain(item))
    if spec.get("choices"):
        lines += comment_lines("Choices: " + ", ".join(yaml_flow(choice) for choice in spec["choices"]) + ".")
    for key, subspec in (spec.get("options") or {}).items():
        # A suboption: "##   key (choices; required): description", its wrapped lines indented under the key.
        notes = [", ".join(yaml_flow(choice) for choice in subspec.get("choices") or [])]
        notes.append("required" if subspec.get("required") else "")
        label = f"{key} ({'; '.join(note for note in notes if note)})" if any(notes) else key
        description = " ".join(markup_plain(item) for item in description_items(subspec))
        lines += comment_lines(f"{label}: {description}", "##   ", "##     ")
    return lines


def render_inventory(role: str, options: dict, groups: dict[str, str]) -> str:
    lines = [
        "---",
        f"## Inputs of the {role} role, every one at its default (roles/{role}/defaults/main.yml).",
        '## Uncomment and change what you need. "## " lines describe; "# " lines are the settings at their defaults.',
    ]
    lines += comment_lines(f"Generated from roles/{role}/meta/argument_specs.yml by tools/argspec_docs.py; edit the "
                           "spec instead.")
    for group, names in grouped(options, groups):
        lines.append("")
        if group:
            lines.append(f"## --- {group} ---")
        for name in names:
            spec = options[name]
            if "default" not in spec:
                raise SpecError(f"roles/{role}/meta/argument_specs.yml: {name} has no default")
            lines += option_comments(spec)
            lines += [f"# {line}" for line in yaml_block(name, spec["default"])]
    return "\n".join(lines) + "\n"


# --- main --------------------------------------------------------------------------------------------------


def generated_files(root: Path) -> dict[Path, str]:
    """{path: content} of every file this script owns, for every role with argument specs, in a fixed order."""
    files: dict[Path, str] = {}
    specs = sorted((root / "roles").glob("*/meta/argument_specs.yml"))
    if not specs:
        raise SpecError(f"{root}: no roles/*/meta/argument_specs.yml")
    for spec_path in specs:
        role = spec_path.parents[1].name
        options, groups = load_spec(spec_path)
        readme = root / "roles" / role / "README.md"
        files[readme] = render_readme(readme, options, groups)
        files[root / "inventory.example" / "group_vars" / "all" / f"{role}.yml"] = render_inventory(
            role, options, groups)
    return files


def short_diff(old: str, new: str, name: str) -> str:
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"{name} (now)", f"{name} (generated)",
                                     n=1, lineterm=""))
    if len(diff) > DIFF_LINES:
        diff = diff[:DIFF_LINES] + [f"... ({len(diff) - DIFF_LINES} more diff lines)"]
    return "\n".join(diff)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="argspec_docs.py",
        description="Generate the README variables tables and inventory.example/group_vars/all/<role>.yml "
                    "from roles/*/meta/argument_specs.yml.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; name each stale file with a short diff and exit 1")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="repository root (default: the checkout this script is in)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        files = generated_files(root)
    except (SpecError, OSError, yaml.YAMLError) as exc:
        print(f"argspec_docs.py: {exc}", file=sys.stderr)
        return 2
    stale = 0
    for path, content in files.items():
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current == content:
            continue
        name = path.relative_to(root).as_posix()
        if args.check:
            stale += 1
            print(f"stale: {name}")
            print(short_diff(current, content, name))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
            print(f"wrote {name}")
    if stale:
        print(f"{stale} generated file(s) out of date: run tools/argspec_docs.py (and edit meta/argument_specs.yml, "
              "not the generated text)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
