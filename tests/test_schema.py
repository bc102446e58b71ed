"""GIVEN the declared tables WHEN validating tables THEN missing or mistyped columns raise."""

import pyarrow as pa
import pytest

from tracekit import schema
from tracekit.errors import SchemaError
from tracekit.rules.labels import PathLabel


def test_every_field_documented() -> None:
    for table in schema.TABLES.values():
        for name, _typ, _unit, doc in schema.columns_doc(table):
            assert doc, f"{name} has no doc"


def test_validate_accepts_conformed_empty_table() -> None:
    table = schema.conform(pa.table({schema.RANK: pa.array([], pa.int32())}), schema.EVENTS)
    schema.validate(table)


def test_validate_rejects_missing_column() -> None:
    table = schema.empty(schema.EVENTS).drop_columns([schema.TS_NS])
    with pytest.raises(SchemaError, match="ts_ns"):
        schema.validate(table)


def test_validate_rejects_mistyped_column() -> None:
    table = schema.empty(schema.EVENTS)
    idx = table.schema.get_field_index(schema.TS_NS)
    table = table.set_column(idx, schema.TS_NS, pa.array([], pa.float64()))
    with pytest.raises(SchemaError, match="ts_ns is double"):
        schema.validate(table)


def test_path_labels_all_have_a_phase() -> None:
    assert set(PathLabel.PHASE_OF.values()) <= set(schema.Phase.ALL)
