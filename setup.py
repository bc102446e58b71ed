"""The compiled part of tracekit: the native Kineto accumulator (tracekit/parsers/kineto/native).

Everything else is declared in pyproject.toml. The extension is optional: where no C
compiler is found the install still succeeds, and tracekit reads Kineto files with msgspec
(it says so, once, with what that costs).
"""

from setuptools import Extension, setup

NATIVE = "tracekit/parsers/kineto/native"

setup(
    ext_modules=[
        Extension(
            "tracekit.parsers.kineto.native._accum",
            sources=[f"{NATIVE}/accum.c"],
            depends=[f"{NATIVE}/tk_json.h", f"{NATIVE}/tk_keys.h", f"{NATIVE}/tk_dict.h"],
            include_dirs=[NATIVE],
            extra_compile_args=["-O3", "-std=c99"],
            optional=True,
        )
    ]
)
