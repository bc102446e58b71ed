"""Path labels as Python constants, read from the packaged rule files.

The labels, their phases and families are declared in ``data/paths.yaml`` (``path_labels``);
no label is spelled in Python. Code that emits ground truth (workloads, synth) names a label
by its ``const`` (``PathLabel.ATTN_FULL_TP``); the rules engine reads the loaded RuleSet,
which may hold labels of user rule files as well.
"""

from __future__ import annotations

from functools import cached_property

from tracekit.rules.model import RuleSet


class _PackagedLabels:
    """Attribute access to the packaged path labels by their ``const`` name."""

    @cached_property
    def _rules(self) -> RuleSet:
        from tracekit.rules.loader import packaged_rules

        return packaged_rules()

    @cached_property
    def _by_const(self) -> dict[str, str]:
        return {lab.const: lab.id for lab in self._rules.path_labels if lab.const}

    @property
    def ALL(self) -> tuple[str, ...]:
        return tuple(lab.id for lab in self._rules.path_labels)

    @property
    def PHASE_OF(self) -> dict[str, str]:
        return {lab.id: lab.phase for lab in self._rules.path_labels}

    def __getattr__(self, name: str) -> str:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._by_const[name]
        except KeyError:
            raise AttributeError(f"no packaged path label with const {name!r}") from None


PathLabel = _PackagedLabels()
