"""The folder ``tracekit capture`` puts first on PYTHONPATH; only ``sitecustomize`` matters.

It is a package so that a regular (non-editable) install ships ``sitecustomize.py`` too.
"""
