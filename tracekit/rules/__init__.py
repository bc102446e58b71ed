"""The rules engine: topology + rule files (YAML, package data) -> ATTRIBUTED and FINDINGS.

``tracekit.rules.engine.attribute_run(run, options)`` is the stage; ``load_rules`` reads the
packaged and user rule files (format: ``tracekit.rules.model``, guide: docs/rules.md);
``rules_fingerprint(user_files)`` is the cache-key part of anything derived with them.
"""

from __future__ import annotations

from tracekit.rules.loader import load_rules, packaged_rules, rules_fingerprint, rules_version
from tracekit.rules.model import RuleSet

__all__ = ["RuleSet", "load_rules", "packaged_rules", "rules_fingerprint", "rules_version"]
