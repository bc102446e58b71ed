"""Arrow -> pandas for every stage: dictionary columns are decoded to plain strings first.

A dictionary array may legally repeat values in its dictionary (e.g. after chunks from several
files are combined); pandas' Categorical refuses that, so the engine never converts a
dictionary column directly.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import pyarrow as pa


def decoded(table: pa.Table) -> pa.Table:
    """The same table with every dictionary column decoded to its value type."""
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            column = table.column(i).cast(field.type.value_type)
            table = table.set_column(i, pa.field(field.name, field.type.value_type), column)
    return table


def to_pandas(table: pa.Table, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """``table`` (or the named columns present in it) as a pandas DataFrame."""
    if columns is not None:
        table = table.select([c for c in columns if c in table.column_names])
    # one chunk per column: pandas' Arrow-backed strings take (filter, reindex) from a
    # chunked array by concatenating its chunks on every call
    return decoded(table).combine_chunks().to_pandas()
