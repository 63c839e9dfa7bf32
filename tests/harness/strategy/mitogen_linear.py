"""Mitogen's linear strategy, for the VM scenarios only (test harness; no role or playbook needs it).

Under TCG every Ansible task costs the guest about 4 s of Python start-up (AnsiballZ unpacks, compiles and imports
ansible's module_utils each time), so a scenario spends most of its time starting interpreters. Mitogen keeps one
interpreter in the guest for the whole playbook (measured here: a `ping` task 3.8 s plainly, 0.07 s with it). The
molecule scenarios name this strategy in their config
(strategy_plugins = this directory); `ANSIBLE_STRATEGY=linear molecule test -s default` runs one plainly, as a
user's `ansible-playbook site.yml` does (README: How to test).

The same four lines as mitogen's own ansible_mitogen/plugins/strategy/mitogen_linear.py, importable from a
directory that does not depend on where the virtual environment keeps its site-packages.
"""

import ansible_mitogen.loaders
import ansible_mitogen.strategy

Base = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, Base):
    pass
