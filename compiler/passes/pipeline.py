"""The pinned pass pipelines, fixed in code.

A pipeline is chosen by name in CompilerConfig (`pipeline`); its pipeline_id (the hash of
every pass's name, version and options, in order) is part of the config, the compile cache
key and every trace. "default" is what vxla compiles with; "none" runs no pass at all (the
module is lowered as written), which is what the optimized pipeline is checked against.
"""

from __future__ import annotations

from collections.abc import Callable

from compiler.errors import ConfigError
from compiler.passes.algebraic_simplifier import AlgebraicSimplifier
from compiler.passes.base import FixedPoint, Pipeline, verify_each_pass
from compiler.passes.call_inlining import CallInlining
from compiler.passes.common_subexpression_elimination import CommonSubexpressionElimination
from compiler.passes.constant_folding import ConstantFolding
from compiler.passes.dead_code_elimination import DeadCodeElimination
from compiler.passes.dot_orientation import DotOrientation
from compiler.passes.epilogue_fusion import EpilogueFusion
from compiler.passes.input_fusion import InputFusion
from compiler.passes.layout_assignment import LayoutAssignment
from compiler.passes.loop_fusion import LoopFusion
from compiler.passes.multi_output_fusion import MultiOutputFusion
from compiler.passes.scheduling import Scheduling
from compiler.passes.shape_canonicalization import ShapeCanonicalization
from compiler.passes.transpose_folding import TransposeFolding
from compiler.passes.tuple_simplification import TupleSimplification


def default_pipeline() -> Pipeline:
    """Simplification to a fixed point, fusion, then scheduling."""
    simplification: tuple = (LayoutAssignment(), CallInlining(), TupleSimplification(), ConstantFolding(), AlgebraicSimplifier(), ShapeCanonicalization(), DotOrientation(), TransposeFolding(), CommonSubexpressionElimination(), DeadCodeElimination())  # fmt: skip
    fusion: tuple = (LoopFusion(), EpilogueFusion(), InputFusion(), MultiOutputFusion())
    stages: list = []
    if simplification:
        stages.append(FixedPoint("simplification", simplification, max_iterations=8))
    stages.extend(fusion)
    stages.append(Scheduling())
    return Pipeline(tuple(stages), verify_each=verify_each_pass())


def no_pipeline() -> Pipeline:
    """No pass: the module as written."""
    return Pipeline(())


PIPELINES: dict[str, Callable[[], Pipeline]] = {"default": default_pipeline, "none": no_pipeline}


def pipeline_named(name: str) -> Pipeline:
    """A fresh pipeline by name; ConfigError names the known ones."""
    if name not in PIPELINES:
        raise ConfigError(f"unknown pass pipeline {name!r}; known: {', '.join(sorted(PIPELINES))}")
    return PIPELINES[name]()
