"""The fault suite is complete and honest: every case of the README's "What happens when things go wrong" table
has at least one test (`@pytest.mark.fault(N)` in a unit or testinfra test, or tag `fault-N` on a scenario's
check), every test names a case of the table, and a case marked "not yet" has no test (so the README is updated
when one lands)."""

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def readme_cases():
    text = (REPO / "README.md").read_text()
    section = text.split("## What happens when things go wrong", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if re.match(r"^\| \d+ \|", line)]
    return {int(cells[0]): cells[-1].strip() for cells in rows}


def marked_python():
    found = {}
    for path in sorted(list(REPO.glob("tests/unit/*.py")) + list(REPO.glob("molecule/*/tests/*.py"))):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                if (isinstance(dec, ast.Call) and ast.unparse(dec.func) == "pytest.mark.fault"
                        and dec.args and isinstance(dec.args[0], ast.Constant)):
                    found.setdefault(dec.args[0].value, []).append(f"{path.relative_to(REPO)}::{node.name}")
    return found


def tagged_yaml():
    found = {}
    for path in sorted(REPO.glob("molecule/**/*.yml")):
        for n in re.findall(r"^\s+tags: \[[^\]]*\bfault-(\d+)\b", path.read_text(), re.M):
            found.setdefault(int(n), []).append(str(path.relative_to(REPO)))
    return found


def test_the_table_numbers_its_cases_from_one_without_a_gap():
    cases = sorted(readme_cases())
    assert cases == list(range(1, len(cases) + 1)) and len(cases) >= 19


def test_every_case_has_a_test_unless_it_says_not_yet_and_every_test_names_a_case():
    cases = readme_cases()
    proofs = marked_python()
    for n, where in tagged_yaml().items():
        proofs.setdefault(n, []).extend(where)
    assert set(proofs) <= set(cases), f"tests name cases the README lacks: {sorted(set(proofs) - set(cases))}"
    for n, column in cases.items():
        if column == "not yet":
            assert n not in proofs, f"case {n} has tests {proofs[n]}: say so in the README's table"
        else:
            assert proofs.get(n), f"case {n} says '{column}' but no test carries fault({n}) / fault-{n}"


def test_the_proof_column_names_files_that_hold_the_tests():
    proofs = marked_python()
    for n, where in tagged_yaml().items():
        proofs.setdefault(n, []).extend(where)
    for n, column in readme_cases().items():
        for name in re.findall(r"`(test_[a-z_]+\.py)`", column):
            assert any(name in p for p in proofs.get(n, [])), f"case {n} names {name}, which has no fault({n}) test"
